"""Where the replicate blocks of one :func:`convkit.simulate` call run: threads or Dask.

The engine's unit of randomness is the replicate block (:data:`convkit.simulate.REPLICATE_BLOCK`
replicates, each with its own streams keyed ``(seed, block index)``).  A *part* is a run of
whole consecutive blocks simulated from start to end by one call of the engine's
``_run_chunk``, with its own state, writing only its own slice of the outputs.  Since a
block's numbers depend on its seed and index only, the numbers do not depend on how the blocks
are grouped into parts, nor on where or in which order the parts run: threads of this process
(:func:`run_threads`) or the workers of a Dask cluster (:func:`run_dask`) give bit-identical
values to the serial run.

* Threads: each memory chunk (at most ``memory_limit`` bytes of state) is split into up to
  ``threads`` parts of whole blocks that run at once on a thread pool, the blocks left over
  split by algorithm (:func:`plan_threads`); their states add up to the chunk's, so the memory
  bound holds for the whole call.  The
  compiled kernels release the GIL (``nogil=True``), as do NumPy's random fills and its array
  operations on large arrays; the Python of each step holds it.  Before the threads start,
  one throwaway step in the calling thread builds the lazily compiled kernels and caches
  (``simulate._warm_up``), which a second thread could otherwise see half-built.
* Dask: the parts of every chunk are submitted at once to a ``distributed`` cluster (one part
  per worker thread and chunk), each computes its slice of the recorded values on a worker,
  and the slices are copied into the outputs here (exact merge: disjoint slices).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

__all__ = [
    "Cancelled",
    "check_dask",
    "default_threads",
    "resolve_threads",
    "run_dask",
    "run_threads",
    "plan_threads",
    "split_blocks",
]

#: the first steps are timed for at most this long, or this many steps
_TIMING_SECONDS = 0.5
_TIMING_STEPS = 20
#: a first window of less stepping time than this is followed by a second one (the faster of
#: the two counts), so that one stall does not make the estimate many times too long
_RETIME_BELOW = 2.0
#: seconds between two looks of the main thread at the progress of the threads
_POLL_SECONDS = 0.05


class Cancelled(Exception):
    """Raised inside a part when the run was stopped (another part failed, or Ctrl-C)."""


class Clock:
    """Times the first steps, warns when the run will be long and drives the progress bar.

    The estimate is ``(seconds per step and replicate) * n_max * R / concurrency`` plus the
    recording time per record point and replicate times the number of record points of all
    algorithms (``n_rec``), both measured on the first part of the first chunk (``timed``) after
    its first step (which may include compilation), plus the time before that step;
    ``concurrency`` is the number of parts running at once (threads).  The seconds per step
    come from a window of :data:`_TIMING_STEPS` steps or :data:`_TIMING_SECONDS` of stepping;
    after a window shorter than :data:`_RETIME_BELOW` a second one is timed and the faster of
    the two counts (one stall of the machine in a short window would otherwise multiply the
    estimate: 144 s announced for an 11 s run, seen once in CI).

    Thread safety: the parts call :meth:`tick` and :meth:`recorded` from their threads (under a
    lock, counters only); the warning and the progress bar are handled by :meth:`poll`, in the
    thread that called :func:`simulate` only (inline in a serial run, by the waiting loop of a
    threaded one).  The bar counts replicate-steps (local steps times replicates).
    """

    def __init__(
        self,
        n_max: int,
        R: int,
        n_rec: int,
        concurrency: int,
        progress: bool | None,
        long_run_seconds: float = float("inf"),
    ):
        self.n_max, self.R, self.n_rec = n_max, R, n_rec
        self.long_run_seconds = long_run_seconds
        self.concurrency = max(1, concurrency)
        self.total = n_max * R
        self.progress = progress
        self.done = 0
        self.estimate: float | None = None
        self.t_start = time.perf_counter()
        self.t_first: float | None = None
        self.record_seconds = 0.0
        self.records = 0
        # the timing window: its start (time, step, record seconds) and the first window's
        # seconds per step and replicate once a second window is timed
        self._window = (0.0, 1, 0.0)
        self._first_rate: float | None = None
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._main = threading.get_ident()
        self._message: str | None = None
        self.bar = self._bar() if progress else None

    def _bar(self) -> Any:
        from tqdm import tqdm

        return tqdm(
            total=self.total, initial=self.done, desc="simulate", unit="rep-step", unit_scale=True
        )

    def tick(self, k: int, Rc: int, timed: bool, steps: int = 1, share: float = 1.0) -> None:
        """Local step ``k`` (the last of ``steps`` local steps) of a part of ``Rc`` replicates
        is done (any thread); ``share``: the part runs this fraction of the algorithms."""
        if self.stop.is_set():
            raise Cancelled("simulate was stopped")
        with self._lock:
            self.done += Rc * steps * share
            if timed and self.estimate is None:
                self._time(k, Rc)
        if threading.get_ident() == self._main:
            self.poll(stacklevel=6)  # poll, tick, _run_chunk, _execute, simulate

    def advance(self, rep_steps: int) -> None:
        """``rep_steps`` replicate-steps done elsewhere (a Dask part)."""
        with self._lock:
            self.done += rep_steps

    def recorded(self, seconds: float, timed: bool) -> None:
        """One record point of one algorithm took ``seconds`` (any thread)."""
        if timed:
            with self._lock:
                self.record_seconds += seconds
                self.records += 1

    def _time(self, k: int, Rc: int) -> None:
        now = time.perf_counter()
        if k == 1:
            self.t_first = now
            self.record_seconds, self.records = 0.0, 0
            self._window = (now, 1, 0.0)
            if self.n_max > 1:
                return
            per_step = (now - self.t_start) / Rc
            steps = 1
        else:
            t0, k0, rec0 = self._window
            # the window counts stepping time only (records are timed apart): otherwise the
            # long records of the first record points (one local step apart) would end it
            # after one step, a noisy estimate
            stepping = (now - t0) - (self.record_seconds - rec0)
            if stepping < _TIMING_SECONDS and k - k0 < _TIMING_STEPS and k < self.n_max:
                return
            rate = max(0.0, stepping) / ((k - k0) * Rc)
            if self._first_rate is None and stepping < _RETIME_BELOW and k < self.n_max:
                # a short window: one stall of the machine in it (0.3 s on this shared VM)
                # would multiply the estimate; time a second one and keep the faster
                self._first_rate = rate
                self._window = (now, k, self.record_seconds)
                return
            per_step = rate if self._first_rate is None else min(rate, self._first_rate)
            steps = k - 1
        per_record = self.record_seconds / (max(1, self.records) * Rc)
        setup = (self.t_first or now) - self.t_start
        reps = self.R / self.concurrency
        self.estimate = setup + reps * (per_step * self.n_max + per_record * self.n_rec)
        if self.estimate > self.long_run_seconds:
            self._message = (
                f"simulate: estimated {self.estimate:.0f} s ({self.estimate / 60:.1f} min) for "
                f"{self.R} replicates x {self.n_max} local steps (measured on the first "
                f"{steps} steps); "
                + ("progress=False: no progress bar" if self.progress is False else "progress:")
            )

    def poll(self, stacklevel: int = 4) -> None:
        """Warn (once) and update the bar; in the thread that called :func:`simulate` only."""
        with self._lock:
            message, self._message = self._message, None
            done = self.done
        if message is not None:
            warnings.warn(message, UserWarning, stacklevel=stacklevel)
            if self.progress is None and self.bar is None:
                self.bar = self._bar()
        if self.bar is not None and int(done) > self.bar.n:
            self.bar.update(int(done) - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.poll()
            self.bar.close()


def available_cores() -> int:
    """Cores this process may run on (its affinity mask where known, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


#: environment variable holding the default thread count of ``threads=None``
THREADS_ENV = "CONVKIT_THREADS"


def default_threads() -> int:
    """The thread count that ``threads=None`` means: the environment variable
    ``CONVKIT_THREADS`` when set (an integer >= 1; a machine-independent default, e.g. for
    tests run as on a larger or smaller machine), else all available cores."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return available_cores()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(
            f"environment variable {THREADS_ENV} must be an integer >= 1 (the default thread "
            f"count of simulate), got {raw!r}; unset it for all available cores"
        )
    return value


def resolve_threads(threads: Any) -> int:
    """``threads`` as a positive int: ``None`` means :func:`default_threads`."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(
            f"threads must be an integer >= 1 (1 = serial) or None (${THREADS_ENV}, else all "
            f"{available_cores()} available cores), got {threads!r}"
        )
    return int(threads)


def split_blocks(j0: int, j1: int, parts: int) -> list[tuple[int, int]]:
    """Blocks ``j0..j1-1`` as at most ``parts`` runs of consecutive whole blocks, their sizes
    differing by at most one block (the earlier runs take the extra blocks)."""
    n = j1 - j0
    parts = max(1, min(parts, n))
    size, extra = divmod(n, parts)
    out, j = [], j0
    for p in range(parts):
        k = size + (1 if p < extra else 0)
        out.append((j, j + k))
        j += k
    return out


#: one task of a thread: blocks ``j0..j1-1`` for the algorithms listed (None: all of them)
Task = tuple[int, int, "tuple[int, ...] | None"]


def plan_threads(
    j0: int, j1: int, threads: int, costs: Sequence[float], by_algorithm: bool = True
) -> list[list[Task]]:
    """Blocks ``j0..j1-1`` of a call comparing ``len(costs)`` algorithms (``costs``: their
    relative work per replicate and step), as the tasks of at most ``threads`` threads.

    Every thread takes ``(j1 - j0) // threads`` whole consecutive blocks.  The remaining
    blocks (fewer than ``threads``: one block of a call of at most
    :data:`~convkit._layout.REPLICATE_BLOCK` replicates, the shorter last block) are split by
    algorithm instead: their algorithms are divided into one group per thread (largest cost
    first to the least loaded group), each thread running all of them for its group.  A
    block's numbers depend on its streams only and an algorithm's on its own streams and the
    block's samples (which every task redraws in full), so any plan gives the same values;
    this one keeps both cores busy when a call has fewer blocks than threads.  With one
    algorithm, or ``by_algorithm=False`` (calls too small to gain from threads), the remaining
    blocks go whole to the first threads (:func:`split_blocks`)."""
    n = j1 - j0
    threads = max(1, threads)
    if threads == 1 or n == 0:
        return [[(j0, j1, None)]]
    whole, rest = divmod(n, threads)
    groups = min(threads, len(costs)) if rest and by_algorithm else 1
    if rest and groups < 2:
        return [[(a, b, None)] for a, b in split_blocks(j0, j1, threads)]
    plan: list[list[Task]] = [
        [(j0 + t * whole, j0 + (t + 1) * whole, None)] if whole else [] for t in range(threads)
    ]
    if rest:
        load = [0.0] * groups
        members: list[list[int]] = [[] for _ in range(groups)]
        for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
            g = min(range(groups), key=lambda g: (load[g], g))
            members[g].append(i)
            load[g] += costs[i]
        for g in range(groups):
            plan[g].append((j1 - rest, j1, tuple(sorted(members[g]))))
    return [tasks for tasks in plan if tasks]


def run_threads(
    pool: ThreadPoolExecutor,
    tasks: Sequence[Callable[[], None]],
    stop: threading.Event,
    poll: Callable[[], None],
) -> None:
    """Run ``tasks`` on ``pool`` and wait for all of them, calling ``poll`` (progress bar,
    warnings: main-thread work) about every :data:`_POLL_SECONDS`.

    On the first failure (or a ``KeyboardInterrupt`` here) ``stop`` is set, so that the other
    tasks raise :class:`Cancelled` at their next step; once all have ended, the first real
    error is raised."""
    futures: list[Future] = [pool.submit(t) for t in tasks]
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_EXCEPTION)
            poll()
            if any(f.exception() is not None for f in done):
                break
    except BaseException:
        stop.set()
        wait(futures)
        raise
    if any(f.exception() is not None for f in futures if f.done()):
        stop.set()
    wait(futures)
    errors = [f.exception() for f in futures if f.exception() is not None]
    real = [e for e in errors if not isinstance(e, Cancelled)]
    if real or errors:
        raise (real or errors)[0]


def check_dask(dask: Any) -> Any:
    """The ``distributed`` module, after checking that it is installed and that ``dask`` is
    ``True``, a scheduler address or a ``distributed.Client`` (before any work)."""
    try:
        import distributed
    except ImportError as exc:
        raise ImportError(
            "simulate(..., dask=...) needs Dask's distributed scheduler: install the extra with "
            "`pip install convkit[cluster]`"
        ) from exc
    if not (dask is True or isinstance(dask, str | distributed.Client)):
        raise ValueError(
            "dask must be True (an embedded LocalCluster), a scheduler address such as "
            f"'tcp://host:8786' or a distributed.Client, got {dask!r}"
        )
    return distributed


def _client(dask: Any, workers: int) -> tuple[Any, Any, bool, str]:
    """``(client, cluster, close_client, description)`` for a ``dask=`` argument: ``True`` (an
    embedded LocalCluster of ``workers`` processes), a scheduler address or a Client."""
    distributed = check_dask(dask)
    if isinstance(dask, distributed.Client):
        return dask, None, False, f"client {dask.scheduler.address}"
    if dask is True:
        import logging

        cluster = distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        return distributed.Client(cluster), cluster, True, f"LocalCluster({workers} processes)"
    return distributed.Client(dask), None, True, dask


def run_dask(
    dask: Any,
    workers: int,
    spec: Any,
    chunks: Sequence[tuple[int, int]],
    task: Callable[[Any, int, int], Any],
    merge: Callable[[Any], None],
    poll: Callable[[], None],
) -> tuple[str, int]:
    """Run the blocks of ``chunks`` on a Dask cluster: each chunk split into one part per
    worker thread, ``task(spec, j0, j1)`` computed on the workers (``spec`` scattered once,
    serialised with cloudpickle), ``merge(output)`` called here as each part completes.
    Returns the cluster's description and the number of parts."""
    client, cluster, close, where = _client(dask, workers)
    try:
        from distributed import as_completed

        n_threads = max(1, sum(client.nthreads().values()))
        parts = [p for j0, j1 in chunks for p in split_blocks(j0, j1, n_threads)]
        remote = client.scatter(spec, broadcast=True, hash=False)
        futures = [client.submit(task, remote, j0, j1, pure=False) for j0, j1 in parts]
        try:
            for fut, out in as_completed(futures, with_results=True):
                fut.release()
                merge(out)
                poll()
        except BaseException:
            client.cancel(futures)
            raise
        return where, len(parts)
    finally:
        if close:
            client.close()
        if cluster is not None:
            cluster.close()
