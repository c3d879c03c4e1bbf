"""Running a sweep and reading it back: :func:`run` (cache lookups, execution, output files),
:func:`load`, and the :class:`SweepSummary` / :class:`SweepResult` they return."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from convkit.result import json_default
from convkit.sweep.cache import (
    Cache,
    _canonical,
    _concat,
    _decode,
    _have_pyarrow,
    _to_pandas,
    atomic_write,
    frame_from_bytes,
    frame_to_bytes,
)
from convkit.sweep.errors import SweepOutputError
from convkit.sweep.executors import _dask, _joblib, _serial
from convkit.sweep.spec import Sweep


@dataclass
class SweepSummary:
    """What a run did.

    ``total`` configurations; ``computed`` (run now), ``cached`` (reused from the cache),
    ``failed`` (index -> error), ``diverged`` (index -> {algorithm label: diverged
    replicates}), ``invalid`` (cache entries found corrupted and recomputed: index -> reason),
    ``seconds``, ``executor``.
    """

    total: int
    computed: int = 0
    cached: int = 0
    failed: dict[int, str] = field(default_factory=dict)
    diverged: dict[int, dict[str, int]] = field(default_factory=dict)
    invalid: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0
    executor: str = "serial"

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in ("failed", "diverged", "invalid"):
            d[k] = {str(i): v for i, v in d[k].items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepSummary:
        d = dict(d)
        for k in ("failed", "diverged", "invalid"):
            d[k] = {int(i): v for i, v in d.get(k, {}).items()}
        return cls(**d)

    def __str__(self) -> str:
        lines = [
            f"sweep: {self.total} configurations in {self.seconds:.1f} s ({self.executor}): "
            f"{self.computed} computed, {self.cached} reused from cache, "
            f"{len(self.failed)} failed, {len(self.diverged)} with diverged replicates"
        ]
        if self.invalid:
            lines.append(f"  {len(self.invalid)} corrupted cache entries were recomputed")
        for i, err in sorted(self.failed.items()):
            lines.append(f"  FAILED [{i}]: {err}")
        for i, div in sorted(self.diverged.items()):
            lines.append(f"  diverged [{i}]: {div}")
        return "\n".join(lines)


@dataclass
class SweepResult:
    """The tidy frame of a whole sweep, its metadata and (after :func:`run`) the summary.

    ``frame`` (the result rows of every configuration), ``meta`` (the content of
    ``sweep.json``), ``summary`` and ``directory`` (the output directory).
    """

    frame: pd.DataFrame
    meta: dict[str, Any]
    summary: SweepSummary | None = None
    directory: Path | None = None
    #: after :func:`run`: each configuration's own payload (index -> arrow table or frame,
    #: as its call returned it, before the grid columns are added): :meth:`config_frame`
    parts: dict[int, Any] | None = None

    def __repr__(self) -> str:
        """A short description (the metadata, often tens of kilobytes, is left out)."""
        summary = self.summary
        if summary is None and "summary" in self.meta:
            summary = SweepSummary.from_dict(self.meta["summary"])
        failed = len(summary.failed) if summary is not None else "?"
        diverged = len(summary.diverged) if summary is not None else "?"
        where = str(self.directory) if self.directory is not None else None
        return (
            f"SweepResult(configurations={len(self.meta.get('configurations', []))}, "
            f"rows={len(self.frame)}, failed={failed}, diverged={diverged}, "
            f"directory={where!r})"
        )

    def config_frame(self, index: int) -> pd.DataFrame | None:
        """Configuration ``index``'s own frame, with the columns and types its call gave
        (``None`` when it failed, or for a result read back by :func:`load`)."""
        if self.parts is None or index not in self.parts:
            return None
        return _to_pandas(self.parts[index])

    @property
    def configurations(self) -> pd.DataFrame:
        """One row per configuration: id, key, seed, status, grid values, error."""
        return pd.DataFrame(self.meta.get("configurations", []))

    def final(self, metric: str = "hnorm2", iterate: str = "avg") -> pd.DataFrame:
        """The last record point of every (configuration, algorithm), with the grid columns."""
        f = self.frame[(self.frame["metric"] == metric) & (self.frame["iterate"] == iterate)]
        if f.empty:
            return f.reset_index(drop=True)
        idx = f.groupby(["config_id", "config"], sort=True)["step"].idxmax()
        return f.loc[idx.to_numpy()].reset_index(drop=True)


def _column_values(values: list[Any]) -> list[Any]:
    """Grid values as parquet-friendly column entries (tables / lists / mixed types -> JSON)."""
    if all(isinstance(v, bool) for v in values) or all(isinstance(v, str) for v in values):
        return values
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        if all(isinstance(v, int) for v in values):
            return values
        return [float(v) for v in values]
    return [v if isinstance(v, str) else _canonical(v) for v in values]


def _assemble(sweep: Sweep, frames: dict[int, Any]) -> pd.DataFrame:
    from convkit.result import FRAME_COLUMNS

    order = [c for c in sweep.configurations if c.index in frames]
    base_cols = list(FRAME_COLUMNS)
    if not order:
        cols = ["config_id", "config_key", *sweep.grid_keys, *base_cols]
        return pd.DataFrame({c: [] for c in cols})
    parts = [frames[c.index] for c in order]
    counts = np.array([len(p) if isinstance(p, pd.DataFrame) else p.num_rows for p in parts])
    frame = _concat(parts)
    extra: dict[str, Any] = {
        "config_id": np.repeat(np.array([c.index for c in order], dtype=np.int64), counts),
        "config_key": np.repeat(np.array([c.key for c in order], dtype=object), counts),
    }
    for key in sweep.grid_keys:
        name = f"grid.{key}" if key in frame.columns or key in extra else key
        vals = _column_values([c.params[key] for c in order])
        arr = np.empty(len(vals), dtype=object)
        arr[:] = vals
        col = np.repeat(arr, counts)
        extra[name] = pd.Series(col).infer_objects().to_numpy() if len(col) else col
    front = pd.DataFrame(extra)
    return pd.concat([front, frame.reset_index(drop=True)], axis=1)


def _versions() -> dict[str, str]:
    import platform

    from convkit import __version__

    return {
        "convkit": __version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "python": platform.python_version(),
    }


def run(
    sweep: Sweep | Mapping[str, Any] | str | os.PathLike,
    out: str | os.PathLike,
    *,
    jobs: int | None = None,
    dask: bool = False,
    scheduler: str | None = None,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    fmt: str | None = None,
    overwrite: bool = False,
) -> SweepResult:
    """Run every configuration of ``sweep`` not already cached and write the sweep's output.

    A lock (``out/.lock``) is held while the sweep runs: a second sweep on the same directory
    raises :class:`SweepOutputError` at once, naming the process that holds it.

    Parameters
    ----------
    sweep:
        A :class:`Sweep`, a spec dict, or the path of a TOML spec.
    out:
        Output directory: ``frame.parquet`` (or ``.csv``), ``sweep.json`` and, unless
        ``cache`` is given, the cache in ``out/cache``.
    jobs:
        Parallel processes: ``None`` or ``-1`` = all cores (joblib), ``1`` = serial, ``N``.
        With ``dask=True``, the number of LocalCluster workers.
    dask:
        Run on an embedded Dask ``LocalCluster`` (processes).
    scheduler:
        Address of a running Dask scheduler (``"tcp://host:port"``); implies Dask.
    cache:
        Cache directory (share one between sweeps to reuse results across them).
    progress:
        Show a tqdm progress bar.
    fmt:
        Payload and output format, ``"parquet"`` (default when pyarrow is installed) or
        ``"csv"``.
    overwrite:
        Replace the output of a different sweep found in ``out``.  Without it such a
        directory raises :class:`SweepOutputError` (a directory holding the same sweep is
        resumed, and the cache is reused either way).

    Returns
    -------
    SweepResult
        ``result.summary`` says what was computed, reused, failed and diverged.  Failing
        configurations are reported, never raised.
    """
    t0 = time.perf_counter()
    if not isinstance(sweep, Sweep):
        if isinstance(sweep, Mapping):
            sweep = Sweep.from_dict(sweep)
        else:
            sweep = Sweep.from_toml(sweep)
    if fmt is None:
        fmt = "parquet" if _have_pyarrow() else "csv"
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt must be 'parquet' or 'csv', got {fmt!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs == 0):
        raise ValueError(f"jobs must be a non-zero integer or None (all cores), got {jobs!r}")
    if dask and scheduler:
        raise ValueError("give dask=True (embedded LocalCluster) or scheduler=ADDRESS, not both")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):  # a real write: permissions alone do not tell
            pass
    except OSError as exc:
        raise SweepOutputError(
            f"cannot write into the output directory {out}: {exc.strerror or exc}"
        ) from None
    with _locked(out):
        check_output(out, sweep, overwrite)
        return _run_locked(sweep, out, jobs, dask, scheduler, cache, progress, fmt, t0)


def _run_locked(
    sweep: Sweep,
    out: Path,
    jobs: int | None,
    dask: bool,
    scheduler: str | None,
    cache: str | os.PathLike | None,
    progress: bool,
    fmt: str,
    t0: float,
) -> SweepResult:
    """The body of :func:`run`, with the arguments checked and the output directory locked."""
    store = Cache(cache if cache is not None else out / "cache")

    summary = SweepSummary(total=len(sweep))
    frames: dict[int, Any] = {}  # index -> payload (arrow Table or DataFrame)
    metas: dict[int, dict] = {}
    tasks: list[dict[str, Any]] = []
    for c in sweep.configurations:
        entry = store.get(c.key, c.setting)
        if entry is not None:
            frames[c.index] = entry.payload
            metas[c.index] = entry.record.get("meta", {})
            summary.cached += 1
            continue
        if store.last_problem != "missing":
            summary.invalid[c.index] = store.last_problem or "invalid"
        tasks.append(
            {
                "index": c.index,
                "key": c.key,
                "setting": c.setting,
                "seed": c.seed,
                "imports": list(sweep.imports),
                "format": fmt,
            }
        )

    n_cpu = os.cpu_count() or 1
    if scheduler or dask:
        executor = f"dask ({scheduler})" if scheduler else "dask (LocalCluster)"
        results: Iterable[dict] = _dask(tasks, jobs, scheduler) if tasks else []
    elif jobs == 1 or (jobs in (None, -1) and n_cpu == 1) or len(tasks) <= 1:
        executor = "serial"
        results = _serial(tasks)
    else:
        n = n_cpu if jobs in (None, -1) else jobs
        executor = f"joblib ({n} jobs)"
        results = _joblib(tasks, n)
    summary.executor = executor

    from tqdm.auto import tqdm

    by_index = {c.index: c for c in sweep.configurations}
    computed_idx: set[int] = set()
    bar = tqdm(
        total=len(sweep),
        initial=summary.cached,
        disable=not progress,
        desc=sweep.name or "sweep",
        unit="config",
        file=sys.stderr,
    )
    try:
        for res in results:
            i = res["index"]
            c = by_index[i]
            if res["ok"]:
                record = store.put(
                    c.key, c.setting, c.seed, res["payload"], res["format"], res["meta"]
                )
                frames[i] = _decode(res["payload"], res["format"])
                metas[i] = record["meta"]
                computed_idx.add(i)
                summary.computed += 1
            else:
                summary.failed[i] = res["error"]
                bar.write(f"sweep: configuration {i} {c.params} failed: {res['error']}")
            bar.update(1)
            if summary.failed:
                bar.set_postfix(failed=len(summary.failed))
    except Exception as exc:
        # the executor itself failed (a worker process killed by the OS, a lost cluster):
        # what was received is committed; the rest is reported as failed and a re-run resumes
        msg = f"executor failed before this configuration returned: {type(exc).__name__}: {exc}"
        for t in tasks:
            if t["index"] not in computed_idx and t["index"] not in summary.failed:
                summary.failed[t["index"]] = msg
        bar.write(f"sweep: {msg}")
    finally:
        bar.close()

    for i, meta in metas.items():
        div = {k: int(v) for k, v in (meta.get("diverged") or {}).items() if v}
        if div:
            summary.diverged[i] = div
    summary.seconds = time.perf_counter() - t0

    frame = _assemble(sweep, frames)
    payload = frame_to_bytes(frame, fmt)
    frame_file = f"frame.{fmt}"
    atomic_write(out / frame_file, payload)
    other = out / ("frame.csv" if fmt == "parquet" else "frame.parquet")
    if other.exists():
        other.unlink()
    configs = []
    for c in sweep.configurations:
        if c.index in summary.failed:
            status = "failed"
        elif c.index in computed_idx:
            status = "computed"
        else:
            status = "cached"
        configs.append(
            {
                "config_id": c.index,
                "config_key": c.key,
                "seed": c.seed,
                "status": status,
                "params": c.params,
                "setting": c.setting,
                "error": summary.failed.get(c.index),
                "seconds": (metas.get(c.index) or {}).get("timing", {}).get("seconds"),
            }
        )
    meta = {
        "name": sweep.name,
        "description": sweep.description,
        "seed": sweep.seed,
        "spec": sweep.spec,
        "source": sweep.source,
        "grid_keys": sweep.grid_keys,
        "frame": {"file": frame_file, "sha256": hashlib.sha256(payload).hexdigest()},
        "cache": str(store.root),
        "configurations": configs,
        "summary": summary.to_dict(),
        "versions": _versions(),
    }
    # no indent: the C encoder is ~10x faster, and this file grows with the sweep
    atomic_write(out / "sweep.json", json.dumps(meta, default=json_default).encode())
    return SweepResult(frame, meta, summary, out, frames)


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``out/.lock`` (non-blocking; the file records the pid)
    or raise :class:`SweepOutputError` naming the process that holds it.  The lock goes with
    the process, however it ends; without ``fcntl`` (Windows) or on a file system that
    refuses locks, nothing is locked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = out / ".lock"
    fh = open(path, "a+")  # noqa: SIM115 - held for the whole run
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise SweepOutputError(
                f"{out} is in use by another sweep (pid {holder}, lock {path}); wait for it "
                "to finish or choose another output directory"
            ) from None
        except OSError:  # pragma: no cover - a file system without locks (some NFS)
            locked = False
        else:
            locked = True
        if locked:
            fh.seek(0)
            fh.truncate()
            fh.write(str(os.getpid()))
            fh.flush()
        yield
    finally:
        fh.close()  # releases the lock


def _read_meta(path: Path) -> dict[str, Any]:
    """The content of a ``sweep.json``, or :class:`SweepOutputError` (one line, naming the
    file) when it is not the JSON table that :func:`run` writes."""
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SweepOutputError(
            f"{path}: not valid JSON (not UTF-8 text at byte {exc.start}); the file is damaged"
        ) from None
    except ValueError as exc:
        raise SweepOutputError(f"{path}: not valid JSON ({exc}); the file is damaged") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("configurations"), list):
        raise SweepOutputError(f"{path}: not the metadata of a sweep; the file is damaged")
    return meta


def check_output(out: Path, sweep: Sweep, overwrite: bool) -> None:
    """Refuse an output directory that holds another sweep (unless ``overwrite``): raises
    :class:`SweepOutputError`.  :func:`run` calls it, and ``convkit sweep --dry-run`` says
    whether the run would fail."""
    path = out / "sweep.json"
    if overwrite or not path.exists():
        return
    try:
        meta = _read_meta(path)
    except SweepOutputError as exc:
        raise SweepOutputError(f"{exc}; pass --overwrite (overwrite=True) to replace it") from None
    try:
        keys = [c["config_key"] for c in meta["configurations"]]
    except (KeyError, TypeError):
        raise SweepOutputError(
            f"{path}: not the metadata of a sweep; the file is damaged; pass --overwrite "
            "(overwrite=True) to replace it"
        ) from None
    if keys != [c.key for c in sweep.configurations]:
        name = f" {meta['name']!r}" if meta.get("name") else ""
        raise SweepOutputError(
            f"{out} holds the output of another sweep{name} ({len(keys)} configurations); "
            "pass --overwrite (overwrite=True) to replace it, or choose another output directory"
        )


def load(path: str | os.PathLike) -> SweepResult:
    """Read a sweep output directory written by :func:`run` (verifies the frame checksum)."""
    path = Path(path)
    meta_path = path / "sweep.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"no sweep output in {path} (missing sweep.json)")
    meta = _read_meta(meta_path)
    info = meta.get("frame")
    name = info.get("file") if isinstance(info, dict) else None
    if not isinstance(name, str) or name not in ("frame.parquet", "frame.csv"):
        raise SweepOutputError(f"{meta_path}: names no frame file; the file is damaged")
    try:
        data = (path / name).read_bytes()
    except OSError as exc:
        raise SweepOutputError(f"{path / name}: cannot read ({exc.strerror or exc})") from None
    if hashlib.sha256(data).hexdigest() != info.get("sha256"):
        raise SweepOutputError(f"{path / name} does not match the checksum in sweep.json")
    frame = frame_from_bytes(data, name.rsplit(".", 1)[1])
    summary = SweepSummary.from_dict(meta["summary"]) if "summary" in meta else None
    return SweepResult(frame, meta, summary, path)
