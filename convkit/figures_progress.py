"""What ``convkit figures`` tells its user while it runs, and the times it records.

* **The plan** (:meth:`Progress.plan_lines`), printed before any work: the analyses in the order
  they start, each with its recorded time (:func:`recorded_time`: the last run of the same mode
  that read no cache entry made before it, i.e. the time a fresh clone needs; otherwise the
  last recorded time, said to be from a warm cache or of unknown cache state), and the total,
  with the wall time that ``--jobs`` makes of it (:func:`makespan`).
* **Progress**: a line when an analysis starts and when it ends (with its time), and after each
  ``k/N done, elapsed ..., ETA ...``: the recorded times of the analyses left, scheduled on the
  jobs as the pipeline does (dearest first), scaled by this run's speed so far (its measured
  times over the recorded ones of the analyses done).
* **The record** of one analysis' run (:func:`timing_record`) for ``runs.json``: ``seconds``,
  ``cell_cache`` (:class:`CacheWatch`), ``compile_seconds`` (numba compilation inside it,
  :func:`convkit._jit.compile_seconds`), ``date`` (UTC), ``machine`` (``nproc``, ``cpu``) and
  ``jobs``; ``fresh`` keeps the same fields of the last run of the mode that read no cache
  entry, so that a rerun from a warm cache does not hide the time a fresh clone needs.
"""

from __future__ import annotations

import heapq
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "CacheWatch",
    "Progress",
    "duration",
    "machine",
    "makespan",
    "recorded_time",
    "timing_record",
]

#: the fields of one timed run in ``runs.json`` (also those of its ``fresh`` record)
TIMING_KEYS = ("seconds", "cell_cache", "compile_seconds", "date", "machine", "jobs")
#: ``cell_cache`` values of a run that read nothing computed before it started
FRESH_STATES = ("cold", "unused")


def duration(seconds: float) -> str:
    """``seconds`` for a reader: ``"4.8 s"``, ``"59 s"``, ``"12 min 04 s"``, ``"1 h 02 min"``."""
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """The machine of a run: ``nproc`` (the cores this process may use) and ``cpu``."""
    try:
        nproc = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        nproc = os.cpu_count() or 1
    return {"nproc": nproc, "cpu": cpu_model()}


def utc_now() -> str:
    """The current time, UTC, to the second (``2026-12-05T10:31:02Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------- the cache watch
_WATCH: CacheWatch | None = None
_HOOKED = False


def _audit(event: str, args: tuple) -> None:
    """The process's audit hook: file opens and renames under the watched directories."""
    watch = _WATCH
    if watch is None or (event != "open" and event != "os.rename"):
        return
    watch._event(event, args)


class CacheWatch:
    """Whether an analysis read its cache: file opens and renames under ``dirs`` while active.

    A file opened for reading that this run did not write is a *hit* (a cell computed before);
    a file written (opened for writing, or the target of a rename) is a *miss* (a cell
    computed now).  :attr:`state` is ``"warm"`` (hits only), ``"cold"`` (misses only),
    ``"partial"`` (both) or ``"unused"`` (neither: the analysis has no cache, so its time is a
    fresh clone's).  It listens through a process-wide audit hook (:func:`sys.addaudithook`,
    installed once, idle while no watch is active).
    """

    def __init__(self, dirs: Sequence[Path]) -> None:
        self.dirs = tuple(str(Path(d).resolve()) + os.sep for d in dirs)
        self.read: set[str] = set()
        self.written: set[str] = set()

    def _inside(self, path: Any) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, (str, os.PathLike)):
            return None  # a file descriptor
        p = os.path.abspath(os.fspath(path))
        return p if p.startswith(self.dirs) else None

    def _event(self, event: str, args: tuple) -> None:
        if event == "os.rename":
            dst = self._inside(args[1]) if len(args) > 1 else None
            if dst is not None:
                self.written.add(dst)
            return
        path = self._inside(args[0]) if args else None
        if path is None:
            return
        mode = args[1] if len(args) > 1 else None
        if isinstance(mode, str) and not any(c in mode for c in "wax+"):
            if path not in self.written:
                self.read.add(path)
        elif isinstance(mode, str):
            self.written.add(path)

    @property
    def state(self) -> str:
        """``"warm"``, ``"cold"``, ``"partial"`` or ``"unused"`` (class docstring)."""
        hits = bool(self.read - self.written)
        if hits and self.written:
            return "partial"
        if hits:
            return "warm"
        return "cold" if self.written else "unused"

    def __enter__(self) -> CacheWatch:
        global _WATCH, _HOOKED
        if not _HOOKED:
            sys.addaudithook(_audit)
            _HOOKED = True
        _WATCH = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _WATCH
        _WATCH = None


def cache_dirs(repo: Path) -> list[Path]:
    """The cache directories of the analyses of ``repo``: ``repo/.convkit-cache`` and
    ``$CONVKIT_CELL_CACHE`` when set."""
    dirs = [Path(repo) / ".convkit-cache"]
    if os.environ.get("CONVKIT_CELL_CACHE"):
        dirs.append(Path(os.environ["CONVKIT_CELL_CACHE"]))
    return dirs


# ---------------------------------------------------------------------------- runs.json records
def timing_record(
    previous: dict | None,
    mode: str,
    seconds: float,
    cell_cache: str,
    compile_seconds: float,
    jobs: int,
    when: str | None = None,
    where: dict | None = None,
) -> dict[str, Any]:
    """The timing fields of one analysis' entry in ``runs.json`` after a run of ``mode``
    (module docstring); ``fresh`` is this run when it read no cache entry, else the previous
    entry's ``fresh`` of the same mode (dropped when the mode changes)."""
    rec: dict[str, Any] = {
        "seconds": round(float(seconds), 1),
        "cell_cache": cell_cache,
        "compile_seconds": round(float(compile_seconds), 1),
        "date": when or utc_now(),
        "machine": where or machine(),
        "jobs": int(jobs),
    }
    prev = previous or {}
    if cell_cache in FRESH_STATES:
        rec["fresh"] = {k: rec[k] for k in TIMING_KEYS if k != "cell_cache"}
    elif prev.get("mode") == mode and isinstance(prev.get("fresh"), dict):
        rec["fresh"] = prev["fresh"]
    return rec


def recorded_time(rec: dict | None, mode: str) -> tuple[float | None, str]:
    """The time to expect for an analysis whose ``runs.json`` entry is ``rec``, in a run of
    ``mode``, and what it is: ``(seconds, note)``, ``(None, "no recorded time")`` when none."""
    rec = rec or {}
    if rec.get("mode") != mode or "seconds" not in rec:
        return None, "no recorded time"
    fresh = rec.get("fresh")
    if isinstance(fresh, dict) and "seconds" in fresh:
        where = fresh.get("machine") or {}
        date = str(fresh.get("date", ""))[:10]
        cores = f", {where['nproc']} cores" if "nproc" in where else ""
        return float(fresh["seconds"]), f"fresh clone{f', {date}' if date else ''}{cores}"
    state = rec.get("cell_cache")
    if state in ("warm", "partial"):
        return float(rec["seconds"]), f"{state} cell cache: a fresh clone takes longer"
    return float(rec["seconds"]), "cache state not recorded"


def makespan(costs: Sequence[float], jobs: int, busy: Sequence[float] = ()) -> float:
    """Wall time of running ``costs`` on ``jobs`` slots, dearest first, each on the slot that
    frees first, the slots busy for ``busy`` seconds first (analyses already running)."""
    slots = sorted(list(busy)[:jobs] + [0.0] * max(0, jobs - len(busy)))
    heapq.heapify(slots)
    end = max(slots, default=0.0)
    for c in sorted(costs, reverse=True):
        t = heapq.heappop(slots) + c
        end = max(end, t)
        heapq.heappush(slots, t)
    return end


class Progress:
    """The plan and progress lines of one ``convkit figures`` run (module docstring).

    Parameters
    ----------
    names : sequence of str
        The analyses, in the order they will start (the plan lists them so).
    estimates : dict
        Per analysis ``(seconds or None, note)`` (:func:`recorded_time`).
    jobs : int
        Analyses run at once.
    stream : file or None
        Where the lines go (default ``sys.stdout``, flushed after each line).
    clock : callable
        Seconds, monotone (a test passes its own).
    """

    def __init__(
        self,
        names: Sequence[str],
        estimates: dict[str, tuple[float | None, str]],
        jobs: int = 1,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.names = list(names)
        self.estimates = estimates
        self.jobs = max(1, int(jobs))
        self.stream = stream
        self.clock = clock
        self.t0 = clock()
        self.started_at: dict[str, float] = {}
        self.measured: dict[str, float] = {}

    def _say(self, line: str) -> None:
        print(line, file=self.stream or sys.stdout, flush=True)

    def _known(self, name: str) -> float | None:
        return self.estimates.get(name, (None, ""))[0]

    def plan_lines(self, header: str) -> list[str]:
        """The plan: ``header``, one line per analysis (its recorded time and what it is),
        and the total with its wall time on :attr:`jobs` jobs."""
        width = max((len(n) for n in self.names), default=0)
        lines = [header]
        for n in self.names:
            sec, note = self.estimates.get(n, (None, "no recorded time"))
            shown = duration(sec) if sec is not None else "?"
            lines.append(f"  {n:<{width}}  {shown:>12}  ({note})")
        known = [s for n in self.names if (s := self._known(n)) is not None]
        unknown = len(self.names) - len(known)
        total = f"total {duration(sum(known))} of recorded time" if known else "no recorded times"
        if unknown and known:
            total += f" and {unknown} analys{'is' if unknown == 1 else 'es'} without one"
        if self.jobs > 1 and known:
            total += f"; about {duration(makespan(known, self.jobs))} with {self.jobs} jobs"
        lines.append("  " + total)
        return lines

    def plan(self, header: str) -> None:
        """Print :meth:`plan_lines`."""
        for line in self.plan_lines(header):
            self._say(line)

    def started(self, name: str) -> None:
        """Say that ``name`` starts (with its recorded time when known)."""
        self.started_at[name] = self.clock()
        sec = self._known(name)
        rec = f" (recorded {duration(sec)})" if sec is not None else ""
        self._say(f"[{name}] started{rec}")

    def finished(self, name: str, seconds: float, failed: bool = False, note: str = "") -> None:
        """Say that ``name`` ended after ``seconds`` (or failed), with ``note`` (``"3
        file(s)"``); :meth:`status` then says where the run stands."""
        self.measured[name] = float(seconds)
        what = "failed after" if failed else "done in"
        self._say(f"[{name}] {what} {duration(seconds)}{f', {note}' if note else ''}")

    def status(self) -> None:
        """Print :meth:`status_line`."""
        self._say(self.status_line())

    def speed(self) -> float:
        """This run's time over the recorded time, on the analyses done that have one (1.0
        before any), bounded to [0.2, 5]."""
        pairs = [(m, self._known(n)) for n, m in self.measured.items()]
        pairs = [(m, e) for m, e in pairs if e]
        if not pairs:
            return 1.0
        return min(5.0, max(0.2, sum(m for m, _ in pairs) / sum(e for _, e in pairs)))

    def eta(self) -> tuple[float, int]:
        """Seconds left (recorded times of the analyses not done, scaled by :meth:`speed`, on
        the jobs; a running analysis counts the part of its time still ahead) and how many of
        those analyses have no recorded time."""
        now, f = self.clock(), self.speed()
        left = [n for n in self.names if n not in self.measured]
        unknown = sum(1 for n in left if self._known(n) is None)
        busy = [
            max(0.0, f * (self._known(n) or 0.0) - (now - self.started_at[n]))
            for n in left
            if n in self.started_at
        ]
        waiting = [f * (self._known(n) or 0.0) for n in left if n not in self.started_at]
        return makespan(waiting, self.jobs, busy), unknown

    def status_line(self) -> str:
        """``k/N done, elapsed ..., ETA ...`` (``ETA ?`` while nothing left has a time)."""
        k, total = len(self.measured), len(self.names)
        elapsed = duration(self.clock() - self.t0)
        if k == total:
            return f"{k}/{total} done, elapsed {elapsed}"
        eta, unknown = self.eta()
        left = total - k
        if unknown == left:
            return f"{k}/{total} done, elapsed {elapsed}, ETA ? (no recorded times)"
        more = f" + {unknown} without a recorded time" if unknown else ""
        return f"{k}/{total} done, elapsed {elapsed}, ETA {duration(eta)}{more}"
