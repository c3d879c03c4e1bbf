"""The Monte Carlo engine.

:func:`simulate` runs one or several algorithms on one problem for ``R`` independent
replicates at once.  All state is held in arrays of shape ``(R, P, d)``; the only Python loop
is over local steps (and over the few algorithms compared in one call).

Common random numbers: at local step ``k`` one batch of shape ``(R, P_max, b_max)`` is drawn
and every algorithm uses its slice ``[:, :P, :b]``, so worker ``i`` sees exactly the same
samples at local step ``k`` in every algorithm.  Paired differences between algorithms
(:meth:`~convkit.result.Result.compare`) are then far more precise than independent runs.

Estimators recorded at each record point ``k`` (for the worker mean
``m_k = (1/P) sum_i theta_{i,k}``):

* ``avg``: Polyak-Ruppert average ``(1/k) sum_{j<=k} m_j``;
* ``tail``: ``(1/(k-s+1)) sum_{s<=j<=k} m_j`` with ``s = floor(tail * n) + 1``;
* ``last``: ``m_k``;
* ``wavg1``, ``wavg2`` (only with ``weight_shift``): ``sum_{j<=k} w_j m_j / sum_{j<=k} w_j``
  with ``w_j = (j + tau)^p``, ``p = 1, 2`` (:class:`~convkit.recording.WeightedSums`; the
  weights of CHOCO-SGD's strongly convex theorem for ``p = 2``).

Divergence: a replicate whose worker mean is non-finite, or farther than
``divergence_factor`` times the initial squared distance from ``theta*``, is marked diverged at
that step; it is excluded from every later record point (``count`` drops) and listed in
:attr:`Result.diverged`, with a :class:`DivergenceWarning`.  Curves never contain NaN.

Replicate blocks, the unit of randomness: replicates are split into blocks of
:data:`REPLICATE_BLOCK` consecutive replicates (the last one may be shorter).  Block ``j``
draws its samples from the stream keyed ``(seed, "samples", j)`` and algorithm ``i`` its own
random numbers (compressors) from ``(seed, "algorithm", i, j)``; at every
local step a chunk's draws are made block by block (:class:`~convkit.backend.BlockedStream`).
A replicate's values therefore depend on the seed and its block only: the same seed gives
bit-identical values whatever ``memory_limit``.

Chunks: replicates are processed in chunks, unions of whole blocks, when the state would
exceed ``memory_limit`` bytes: ``memory_limit // (bytes of one block)`` blocks per chunk, at
least one.  A chunk never splits a block; when one block alone exceeds ``memory_limit`` the
run warns and processes one block per chunk (using more than ``memory_limit``).  A chunk owns
its state and writes only its own slice of the outputs (:func:`_run_chunk`).

Parallel runs (``threads``, ``dask``; :mod:`convkit._parallel`): each chunk is split into
parts of whole blocks that run at once on a thread pool (the blocks left over when there are
fewer than threads, e.g. the only block of a call of at most 256 replicates, are split by
algorithm instead, each part redrawing the block's samples; the parts' states add up to the
chunk's, so ``memory_limit`` bounds the whole call), or on the workers of a Dask cluster, each
part returning its slice of the outputs.  A part's numbers depend on its blocks' streams only:
``Result.values`` are bit-identical for any ``threads``, ``dask`` and ``memory_limit``.

Execution paths, decided once: after the arguments are checked, the call's
:class:`~convkit.plan.RunPlan` puts each algorithm on the first of :data:`SIMULATE_PATHS`
that supports the call and accepts the algorithm (the fused Local-SGD segments of
:mod:`convkit._fused_local`, for the algorithms whose class declares them, then the
step-by-step engine with the compiled one-step kernels, then the step-by-step engine on the
array API), reading the kernel switch ``convkit.kernels`` once; each chunk runs the
algorithms of each path as one group, every group drawing the blocks' samples from their own
streams.  ``Result.meta["path"]`` names the call's path(s), each algorithm's path, the
reasons and why the faster ones declined.  The recorded metrics come from the algorithms'
declarations (:meth:`~convkit.algorithms.base.Algorithm.metric_names`), and the replicate
rows of a state from :meth:`~convkit.algorithms.base.Algorithm.select_rows`.

Limits checked before any work: the state of the largest chunk plus the recorded values
``(n_record, iterates, metrics, R)``, which are not chunked, and the temporaries of their
summary must fit in the available memory (:func:`available_memory`), or a
:class:`MemoryError` gives the estimate and the ways out.  A run estimated (from its first
steps) to take more than :data:`LONG_RUN_SECONDS` says so with a :class:`UserWarning` and shows
a progress bar (unless ``progress=False``).
"""

from __future__ import annotations

import math
import platform
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from ._fused_local import (
    FUSED_KINDS,
    FUSED_LEAST_SQUARES,
    FUSED_LOGISTIC,
    FusedLocal,
    segment_ends,
    segment_kernel,
)
from ._kernel_switch import planned_kernels
from ._layout import (
    REPLICATE_BLOCK,
    _Layout,
    _layout,
    _plan_chunks,
    _state_bytes_per_replicate,
    check_metrics,
)
from ._memory import available_memory, check_memory
from ._parallel import (
    Clock,
    Task,
    check_dask,
    plan_threads,
    resolve_threads,
    run_dask,
    run_threads,
    split_blocks,
)
from .algorithms.base import Algorithm, algorithm_list
from .backend import Backend, BlockedStream, get_backend, to_numpy, tune_allocator
from .plan import (
    ARRAY_STEPS,
    COMPILED_STEPS,
    GRADIENTS_REMAINDER,
    RunPlan,
    budget_local_steps,
    local_steps_of,
    plan,
)
from .problems.base import GradientOracle, Problem
from .recording import (
    DivergenceWarning,
    WeightedSums,
    algorithms_meta,
    record_at,
    record_steps,
    resolve_weight_shift,
    starting_point,
    store_record,
)
from .result import ConfigValues, Result, frame_from_values
from .validation import check_int, check_real

# DivergenceWarning, record_steps (and ITERATES, starting_point) live in convkit.recording,
# shared with the exact engines, and local_steps_of, budget_local_steps, GRADIENTS_REMAINDER in
# convkit.plan; re-exported here
__all__ = [
    "GRADIENTS_REMAINDER",
    "LONG_RUN_SECONDS",
    "REPLICATE_BLOCK",
    "SIMULATE_PATHS",
    "DivergenceWarning",
    "available_memory",
    "budget_local_steps",
    "check_workers",
    "local_steps_of",
    "record_steps",
    "simulate",
]

#: Dask parts sharing a worker process run their warm-up steps one at a time
_WARM_UP_LOCK = threading.Lock()
#: a run estimated to take longer than this (seconds) warns up front and shows progress
LONG_RUN_SECONDS = 120.0
#: the fewest replicate-steps (replicates of a block times local steps) of a call whose blocks
#: are split by algorithm across threads (below: thread start-up costs more than it saves)
_MIN_SPLIT_WORK = 50_000
#: the execution paths of a Monte Carlo call, fastest first (:func:`convkit.plan.plan` takes
#: the first that supports it; the last supports every call)
SIMULATE_PATHS = (FUSED_LOGISTIC, FUSED_LEAST_SQUARES, COMPILED_STEPS, ARRAY_STEPS)


def _take(batch: Any, workers: int, size: int, P_max: int, b_max: int) -> Any:
    """Slice a batch drawn for ``P_max`` workers and ``b_max`` slots to its first ``workers``
    workers and ``size`` slots; the batch itself when it has exactly those."""
    if workers >= P_max and size >= b_max:
        return batch
    if not is_dataclass(batch):
        return batch[:, :workers, :size, ...]
    updates = {}
    for f in fields(batch):
        v = getattr(batch, f.name)
        if v is not None and getattr(v, "ndim", 0) >= 3:
            updates[f.name] = v[:, :workers, :size, ...]
    return replace(batch, **updates)


@dataclass
class _Run:
    """Everything a chunk needs (read-only), and the outputs it writes its slice of: the
    call's plan (problem, algorithms, local steps, replicates, backend, weighted-average
    shifts and each algorithm's execution path, :mod:`convkit.plan`, read through the
    properties below, never copied) and what the engine derives from the arguments."""

    #: the call's plan
    plan: RunPlan
    layouts: list[_Layout]
    tail_starts: list[int]
    seed: int
    theta0: np.ndarray
    div_threshold: float
    values: list[np.ndarray]
    diverged: list[np.ndarray]
    #: the outputs hold replicates ``offset ..`` (0 here; a Dask part's first replicate there)
    offset: int = 0

    @property
    def problem(self) -> Problem:
        return self.plan.problem

    @property
    def algos(self) -> tuple[Algorithm, ...]:
        return self.plan.algorithms

    @property
    def ns(self) -> tuple[int, ...]:
        """Each algorithm's local steps ``n``."""
        return self.plan.steps

    @property
    def be(self) -> Backend:
        assert self.plan.backend is not None  # a Monte Carlo plan has its backend
        return self.plan.backend

    @property
    def R(self) -> int:
        assert self.plan.replicates is not None  # a Monte Carlo plan has its replicates
        return self.plan.replicates

    @property
    def weight_shifts(self) -> tuple[float | None, ...]:
        """Per algorithm the shift ``tau`` of the weighted averages, or None (not recorded)."""
        return self.plan.weight_shifts

    def groups(self, which: Sequence[int]) -> list[tuple[str | None, tuple[int, ...]]]:
        """Algorithms ``which`` grouped by their execution path in the plan: ``(None,
        indices)`` for the step-by-step engine first, then ``(kind, indices)`` for the fused
        Local-SGD segments of problem kind ``kind`` (:mod:`convkit._fused_local`)."""
        names = [self.plan.per_algorithm[i].name for i in which]
        out: list[tuple[str | None, tuple[int, ...]]] = []
        for kind in (None, *FUSED_KINDS.values()):
            group = tuple(
                i for i, name in zip(which, names, strict=True) if FUSED_KINDS.get(name) == kind
            )
            if group:
                out.append((kind, group))
        return out


def check_workers(problem: Problem, algos: Sequence[Algorithm]) -> None:
    """``ValueError`` when ``problem`` needs a number of workers
    (:attr:`~convkit.problems.base.Problem.required_workers`: one per node or data block) and
    an algorithm has another, naming the algorithm, its workers and what is allowed."""
    need = problem.required_workers
    if need is None:
        return
    wrong = [a for a in algos if a.workers != need]
    if wrong:
        listed = ", ".join(f"{a.label!r} has workers = {a.workers}" for a in wrong)
        raise ValueError(
            f"{type(problem).__name__} has {need} nodes (one distribution or data block "
            f"each), but {listed}; allowed: workers = {need} for every algorithm"
        )


def _initial_distance(theta0: np.ndarray, theta_star: Any) -> float:
    """``||theta0 - theta*||^2``; ``ValueError`` when it overflows float64 (the errors of such
    a start cannot be recorded, and no replicate could be told diverged)."""
    e0 = theta0 - np.asarray(theta_star, dtype=np.float64)
    with np.errstate(over="ignore"):
        d0 = float(np.sum(e0**2))
    if not math.isfinite(d0):
        raise ValueError(
            f"theta0: the squared distance ||theta0 - theta*||^2 of the start overflows "
            f"float64 (max |theta0 - theta*| = {float(np.max(np.abs(e0))):.3g}); its errors "
            f"cannot be recorded: use a start with ||theta0 - theta*||^2 below "
            f"{np.finfo(np.float64).max:.3g} (each |theta0_i - theta*_i| below about 1e150)"
        )
    return d0


def simulate(
    problem: Problem,
    algorithms: Algorithm | Sequence[Algorithm],
    *,
    gradients: int | None = None,
    gradients_remainder: str = "error",
    steps: int | None = None,
    replicates: int = 100,
    seed: int = 0,
    theta0: Any = None,
    record: Sequence[int] | None = None,
    n_record: int = 40,
    tail: float = 0.5,
    backend: str | Backend | None = None,
    dtype: str = "float64",
    memory_limit: float = 2e9,
    divergence_factor: float = 1e12,
    progress: bool | None = None,
    threads: int | None = None,
    dask: bool | str | Any = None,
    weight_shift: float | str | None = None,
    metrics: Sequence[str] | None = None,
) -> Result:
    """Simulate ``algorithms`` on ``problem`` with common random numbers.

    Parameters
    ----------
    problem : Problem
        A :class:`~convkit.problems.base.Problem`.
    algorithms : Algorithm or sequence of Algorithm
        One algorithm or a sequence of them (labels must be unique).
    gradients : int, optional
        Total stochastic gradients ``T`` over all workers; each algorithm runs
        ``n = T / (P b)`` local steps.  Give this or ``steps``.
    gradients_remainder : {"error", "floor"}
        What to do when ``P b`` does not divide ``T``: ``"error"`` (default) raise
        ``ValueError``; ``"floor"`` run ``n = floor(T / (P b))`` local steps
        (:func:`budget_local_steps`).  The gradients actually used, ``n P b``, are in
        ``meta["algorithms"][label]["gradients"]`` (and in the frame's ``gradients`` column,
        ``step P b``); ``meta["gradients"]`` holds the requested ``T`` and the option.
    steps : int, optional
        Number of local steps ``n`` for every algorithm.
    replicates : int
        Independent replicates ``R``.
    seed : int
        Root seed; the same seed gives an identical result, whatever ``memory_limit``.
    theta0 : array_like, optional
        Starting model, shape ``(d,)`` (default: zeros), shared by all workers; finite, with
        ``||theta0 - theta*||^2`` finite in float64 (``ValueError`` otherwise).
    record : sequence of int, optional
        Extra local steps at which to record (added to the ``n_record`` log-spaced ones); a
        step beyond the longest run of the call raises a :class:`ValueError` (with
        ``gradients`` the algorithms may run different ``n``: a step is recorded by those that
        reach it).
    n_record : int
        About how many log-spaced local steps in ``[1, n]`` are recorded (default 40; the last
        step ``n`` always is), :func:`record_steps`.
    tail : float
        Tail averaging starts after ``floor(tail * n)`` local steps (``0 <= tail < 1``).
    backend : str or Backend, optional
        Array backend: ``"numpy"`` (default), ``"cupy"`` or a
        :class:`~convkit.backend.Backend`.
    dtype : {"float64", "float32"}
        Floating type of the states and the recorded values.
    memory_limit : float
        Bytes the per-chunk state may use; replicates are chunked above it, in whole blocks of
        :data:`REPLICATE_BLOCK` replicates (at least one block per chunk).
    divergence_factor : float
        A replicate diverges when ``||m_k - theta*||^2`` exceeds this factor times
        ``max(||theta0 - theta*||^2, 1)`` or is not finite.
    progress : bool, optional
        Show a progress bar: ``True`` always, ``False`` never, ``None`` (default) when the
        run is estimated to take more than :data:`LONG_RUN_SECONDS`.
    threads : int, optional
        Threads of this process running replicate blocks at once: ``None`` (default) the
        environment variable ``CONVKIT_THREADS`` when set, else all available cores (the
        affinity mask), ``1`` serial.  Each chunk's blocks are split into
        up to ``threads`` parts of whole blocks, run concurrently (their states add up to the
        chunk's, so ``memory_limit`` bounds the whole call); the compiled kernels and NumPy's
        random fills and large array operations release the GIL, the Python of each step does
        not.  Blocks are the unit of randomness and are never split across replicates: the
        blocks left over (fewer than ``threads``) are split by algorithm, so a call of one
        block still uses several cores when it compares several algorithms.  With the CuPy
        backend ``None`` means 1.
        With ``dask=True``: the number of worker processes of the embedded cluster.
    dask : bool, str or distributed.Client, optional
        Run the blocks on a Dask cluster (extra ``convkit[cluster]``): ``True`` an embedded
        ``distributed.LocalCluster`` (``threads`` worker processes), a scheduler address
        (``"tcp://host:8786"``) or a ``distributed.Client``.  Every chunk is split into one part
        per worker thread; problem and algorithms are sent to the workers (they must pickle
        with cloudpickle, and the workers need convkit installed), each part returns its slice
        of the recorded values, merged here.  No time estimate (a bar with ``progress=True``
        advances as parts complete).
    weight_shift : float or "step", optional
        Also record the weighted averages ``wavg1``, ``wavg2`` (weights ``(j + tau)^p``,
        :class:`~convkit.recording.WeightedSums`), computed online in ``O(d)`` memory on every
        path (serial, threads, Dask, CuPy): ``None`` (default) not recorded; a number
        ``tau >= 0``; ``"step"``: each algorithm's ``tau = k0 + 1`` of its step
        ``PolyDecay(C, 1, k0)`` (CHOCO-SGD's theorem, steps ``4 / (mu (a + t))``, weights
        ``(a + t)^2``: :func:`~convkit.recording.resolve_weight_shift`). The exact engine
        has no weighted averages.
    metrics : sequence of str, optional
        The problem's error metrics to record, a non-empty selection of ``"excess_risk"``,
        ``"hnorm2"``, ``"dist2"`` (recorded in that order); default all.  The others are not
        computed (for :class:`~convkit.problems.logistic.LogisticRegression`, leaving out
        ``excess_risk`` skips its quadrature, most of the cost of a record); the recorded
        values are those of the full call, bit for bit.  The algorithms' state metrics are
        recorded either way.

    Returns
    -------
    Result
        The recorded values of every algorithm (:class:`~convkit.result.Result`).

    Raises
    ------
    MemoryError
        Before any allocation, when the estimated memory exceeds :func:`available_memory`.

    Notes
    -----
    Where the blocks run (serially, on threads, on Dask workers) and how they are grouped into
    chunks and parts never changes the numbers: a block's random numbers depend on ``seed``
    and its index only, and its state and outputs are its own, so ``Result.values`` are
    bit-identical for any ``threads``, ``dask`` and ``memory_limit``.  ``meta["chunks"]`` is
    the number of memory chunks, ``meta["parallel"]`` says how they ran.
    """
    t_start = time.perf_counter()
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a convkit Problem, got {type(problem).__name__}")
    algos = algorithm_list(algorithms)
    check_workers(problem, algos)
    labels = [a.label for a in algos]
    R = check_int("replicates", replicates, low=1)
    seed = check_int("seed", seed, low=0)
    tail = check_real("tail", tail, low=0, high=1, high_inclusive=False)
    error_metrics = check_metrics(metrics)
    check_real("memory_limit", memory_limit, low=0, low_inclusive=False)
    check_real("divergence_factor", divergence_factor, low=1)
    ns = local_steps_of(algos, gradients, steps, gradients_remainder)
    n_max = max(ns)
    recs = [record_steps(n, n_record, record, n_max=n_max) for n in ns]
    be = get_backend(backend, dtype)
    if be.name == "numpy":
        tune_allocator()
    if threads is None and be.name == "cupy":
        threads = 1  # pragma: no cover - needs a GPU
    n_threads = resolve_threads(threads)
    if dask is False:
        dask = None
    if dask is not None:
        check_dask(dask)
    d = problem.d

    theta0_np = starting_point(theta0, d)
    d0 = _initial_distance(theta0_np, problem.theta_star)

    for a, n in zip(algos, ns, strict=True):
        a.prepare(n)
    shifts = tuple(resolve_weight_shift(weight_shift, a.step_size) for a in algos)
    run_plan = plan(
        problem,
        algos,
        engine="simulate",
        steps=ns,
        record=recs,
        paths=SIMULATE_PATHS,
        replicates=R,
        backend=be,
        threads=n_threads,
        weight_shifts=shifts,
    )
    layouts = [
        _layout(problem, a, rec, tau is not None, error_metrics)
        for a, rec, tau in zip(algos, recs, shifts, strict=True)
    ]
    per_rep = _state_bytes_per_replicate(
        problem, algos, dtype, sum(tau is not None for tau in shifts)
    )
    chunks = _plan_chunks(R, per_rep, memory_limit)
    chunk_reps = min(R, (chunks[0][1] - chunks[0][0]) * REPLICATE_BLOCK)
    check_memory(R, chunk_reps, per_rep, layouts, be, dtype, memory_limit)

    counts = [a.comm_counts(n, d) for a, n in zip(algos, ns, strict=True)]
    run = _Run(
        plan=run_plan,
        layouts=layouts,
        tail_starts=[int(math.floor(tail * n)) + 1 for n in ns],
        seed=seed,
        theta0=theta0_np,
        # capped at the largest float64: an infinite distance is always a divergence
        div_threshold=min(divergence_factor * max(d0, 1.0), float(np.finfo(np.float64).max)),
        values=[
            np.full((lay.steps.size, len(lay.iterates), len(lay.metrics), R), np.nan)
            for lay in layouts
        ],
        diverged=[np.zeros(R, dtype=np.int64) for _ in algos],
    )
    concurrency = 1 if dask is not None else len(split_blocks(*chunks[0], n_threads))
    clock = Clock(n_max, R, sum(r.size for r in recs), concurrency, progress, LONG_RUN_SECONDS)
    clock.t_start = t_start
    try:
        if dask is None:  # the plan's kernel setting, in this thread and the pool's
            with planned_kernels(run_plan.kernels):
                parallel = _execute(run, chunks, n_threads, clock)
        else:
            parallel = _execute_dask(run, chunks, n_threads, dask, clock)
    finally:
        clock.close()

    per_config: dict[str, ConfigValues] = {}
    for i, a in enumerate(algos):
        lay = layouts[i]
        axes = {
            "gradients": lay.steps * a.workers * a.batch,
            **{key: counts[i][key][lay.steps - 1] for key in ("rounds", "messages", "bits")},
        }
        per_config[labels[i]] = ConfigValues(
            lay.steps, axes, lay.iterates, lay.metrics, run.values[i], run.diverged[i]
        )
    diverged = run.diverged
    n_div = {labels[i]: int(np.count_nonzero(diverged[i])) for i in range(len(algos))}
    if any(n_div.values()):
        first = {
            labels[i]: int(diverged[i][diverged[i] > 0].min())
            for i in range(len(algos))
            if n_div[labels[i]]
        }
        warnings.warn(
            f"replicates diverged: {n_div} (first at local step {first}); they are excluded "
            "from later record points, see Result.diverged",
            DivergenceWarning,
            stacklevel=2,
        )
    elapsed = time.perf_counter() - t_start
    meta = {
        "problem": problem.describe(),
        "algorithms": algorithms_meta(algos, labels, ns),
        "gradients": {"requested": gradients, "remainder": gradients_remainder},
        "replicates": R,
        "seed": seed,
        "theta0": theta0_np.tolist(),
        "tail": tail,
        "weight_shift": [tau for tau in shifts] if weight_shift is not None else None,
        "backend": be.name,
        "dtype": dtype,
        "chunks": len(chunks),
        "parallel": parallel,
        "path": run_plan.describe(),
        "diverged": n_div,
        "versions": _versions(),
        "timing": {
            "seconds": elapsed,
            "estimated_seconds": elapsed if clock.estimate is None else clock.estimate,
        },
    }
    return Result(frame_from_values(per_config), meta, per_config)


def _block_stream(be: Backend, seed: int, j0: int, j1: int, R: int, *key: Any) -> BlockedStream:
    """The streams of blocks ``j0..j1-1`` for one purpose ``key``, joined."""
    # (seed, *key, j): the key of the former per-chunk streams with the block index, so that a
    # run of one block (R <= REPLICATE_BLOCK) keeps its numbers
    streams = [be.stream(seed, *key, j) for j in range(j0, j1)]
    sizes = [min(R, (j + 1) * REPLICATE_BLOCK) - j * REPLICATE_BLOCK for j in range(j0, j1)]
    return BlockedStream(streams, sizes)


def _execute(run: _Run, chunks: list[tuple[int, int]], threads: int, clock: Clock) -> dict:
    """Run every chunk in turn, its blocks shared by up to ``threads`` threads of a pool
    (:func:`~convkit._parallel.plan_threads`: whole blocks, the remaining ones split by
    algorithm; serially, in this thread, when ``threads == 1`` or a chunk has one block of one
    algorithm).  Returns ``meta["parallel"]``."""
    costs = [a.workers * a.batch * n for a, n in zip(run.algos, run.ns, strict=True)]
    # splitting blocks by algorithm pays for its threads from this many replicate-steps on
    by_algorithm = min(run.R, REPLICATE_BLOCK) * max(run.ns) >= _MIN_SPLIT_WORK
    plans = [plan_threads(j0, j1, threads, costs, by_algorithm) for j0, j1 in chunks]
    width = max(len(p) for p in plans)
    if width == 1:
        for c, (j0, j1) in enumerate(chunks):
            _run_chunk(run, j0, j1, clock, timed=c == 0)
        return {"threads": 1, "parts": len(chunks), "dask": None}
    _warm_up(run)

    def run_tasks(tasks: list[Task], timed: bool) -> None:
        with planned_kernels(run.plan.kernels):  # the plan's setting in this pool thread
            for t, (j0, j1, which) in enumerate(tasks):
                _run_chunk(run, j0, j1, clock, timed=timed and t == 0, which=which)

    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="convkit-simulate") as pool:
        for c, plan in enumerate(plans):
            jobs = [partial(run_tasks, tasks, c == 0 and p == 0) for p, tasks in enumerate(plan)]
            # poll, run_threads, _execute, simulate: warnings point at the caller
            run_threads(pool, jobs, clock.stop, partial(clock.poll, stacklevel=5))
    return {"threads": width, "parts": sum(len(t) for p in plans for t in p), "dask": None}


def _warm_up(run: _Run) -> None:
    """One local step and one record of each algorithm on one throwaway replicate, in the
    calling thread, before parts run concurrently: lazily compiled kernels and caches are then
    built once, here.  (A kernel seen half-initialised by a second thread would send that part
    down the generic path, whose rounding differs: measured on a finite-sum problem.)  Nothing
    of it reaches the outputs, and its stream is not a block's."""
    problem, be = run.problem, run.be
    for kind, _ in run.groups(range(len(run.algos))):
        if kind is not None:
            segment_kernel(problem.d, kind)
    P_max = max(a.workers for a in run.algos)
    b_max = max(a.batch for a in run.algos)
    stream = BlockedStream([be.stream(run.seed, "warm-up")], [1])
    with np.errstate(all="ignore"):
        batch = problem.sample(stream, (1, P_max, b_max))
        for a in run.algos:
            start = be.xp.zeros((1, a.workers, problem.d), dtype=be.float_dtype)
            state = a.init(start + be.asarray(run.theta0), stream)
            b_i = _take(batch, a.workers, a.batch, P_max, b_max)
            state = a.step(state, GradientOracle(problem, b_i), 1, stream)
            m = a.worker_mean(state)
            problem.errors(m)  # the last iterate (dtype), the averages (float64 sums)
            problem.errors(be.xp.astype(m, be.xp.float64))
            a.extra_metrics(state, problem)


def _execute_dask(
    run: _Run, chunks: list[tuple[int, int]], workers: int, dask: Any, clock: Clock
) -> dict:
    """Run the chunks' parts on a Dask cluster (:func:`convkit._parallel.run_dask`) and copy
    each part's slice of the outputs into ``run``'s.  Returns ``meta["parallel"]``."""
    spec = replace(run, values=[], diverged=[])

    def merge(out: tuple[int, list[np.ndarray], list[np.ndarray]]) -> None:
        r0, values, diverged = out
        r1 = r0 + diverged[0].size
        for i in range(len(run.algos)):
            run.values[i][..., r0:r1] = values[i]
            run.diverged[i][r0:r1] = diverged[i]
        clock.advance((r1 - r0) * clock.n_max)

    where, parts = run_dask(
        dask, workers, spec, chunks, _dask_part, merge, partial(clock.poll, stacklevel=5)
    )
    return {"threads": 1, "parts": parts, "dask": where}


def _dask_part(spec: _Run, j0: int, j1: int) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
    """On a Dask worker: simulate blocks ``j0..j1-1`` of the call described by ``spec`` (a
    :class:`_Run` without outputs) into outputs of their own; returns ``(first replicate,
    recorded values, divergence steps)`` for the merge."""
    if spec.be.name == "numpy":
        tune_allocator()
    with planned_kernels(spec.plan.kernels):  # the caller's plan, in this worker too
        return _dask_part_run(spec, j0, j1)


def _dask_part_run(spec: _Run, j0: int, j1: int) -> tuple[int, list[np.ndarray], list[np.ndarray]]:
    """:func:`_dask_part` under the plan's kernel switch."""
    with _WARM_UP_LOCK:  # parts sharing a worker process: lazy kernels built by one at a time
        _warm_up(spec)
    r0, r1 = j0 * REPLICATE_BLOCK, min(spec.R, j1 * REPLICATE_BLOCK)
    run = replace(
        spec,
        values=[
            np.full((lay.steps.size, len(lay.iterates), len(lay.metrics), r1 - r0), np.nan)
            for lay in spec.layouts
        ],
        diverged=[np.zeros(r1 - r0, dtype=np.int64) for _ in spec.algos],
        offset=r0,
    )
    _run_chunk(run, j0, j1, Clock(max(spec.ns), r1 - r0, 0, 1, progress=False), timed=False)
    return r0, run.values, run.diverged


def _run_chunk(
    run: _Run,
    j0: int,
    j1: int,
    clock: Clock,
    timed: bool = False,
    which: tuple[int, ...] | None = None,
) -> None:
    """Simulate the replicates of blocks ``j0..j1-1`` (a chunk, or a part of one) for every
    algorithm (those listed in ``which``, if given) and write their recorded values and
    divergence steps into their slice of ``run``'s outputs; ``timed``: this part's first
    steps time the run (:class:`~convkit._parallel.Clock`).

    The algorithms run by execution path (:meth:`_Run.groups`: the step-by-step engine, then
    the fused segments), each group on its own :func:`_run_group` pass.  The part's state is
    its own; its random numbers come from the blocks' streams (:func:`_block_stream`): the
    samples, drawn in full (shape ``(R, P_max, b_max)`` of the whole call) by every group
    whichever algorithms it runs, and each algorithm's own stream, so its values do not depend
    on the other parts or groups, nor on the thread or process running it.  Parts run
    concurrently share only read-only inputs (problem, algorithms: their lazily filled caches
    hold deterministic values) and the clock."""
    which = tuple(range(len(run.algos))) if which is None else tuple(which)
    for g, (kind, group) in enumerate(run.groups(which)):
        _run_group(run, j0, j1, clock, timed and g == 0, group, kind)


def _run_group(
    run: _Run,
    j0: int,
    j1: int,
    clock: Clock,
    timed: bool,
    which: tuple[int, ...],
    kind: str | None,
) -> None:
    """:func:`_run_chunk` for algorithms ``which`` of one execution path: the fused Local-SGD
    segments of problem kind ``kind`` (:mod:`convkit._fused_local`), or the step-by-step
    engine (``kind=None``), from the blocks' streams drawn afresh."""
    problem, algos, be = run.problem, run.algos, run.be
    xp = be.xp
    d = problem.d
    r0, r1 = j0 * REPLICATE_BLOCK, min(run.R, j1 * REPLICATE_BLOCK)
    Rc = r1 - r0
    share = len(which) / len(algos)
    P_max = max(a.workers for a in algos)
    b_max = max(a.batch for a in algos)
    n_max = max(run.ns[i] for i in which)
    sample_stream = _block_stream(be, run.seed, j0, j1, run.R, "samples")
    algo_streams = {i: _block_stream(be, run.seed, j0, j1, run.R, "algorithm", i) for i in which}
    blocks = [
        (j * REPLICATE_BLOCK - r0, min(r1, (j + 1) * REPLICATE_BLOCK) - r0) for j in range(j0, j1)
    ]
    theta0_x = be.asarray(run.theta0)
    theta_star = be.asarray(problem.theta_star)
    states: dict[int, Any] = {}
    sums: dict[int, Any] = {}
    tails: dict[int, Any] = {}
    wsums: dict[int, WeightedSums | None] = dict.fromkeys(which)
    rec_pos = dict.fromkeys(which, 0)
    o0 = r0 - run.offset

    def record(i: int, k: int, m: Any) -> None:
        """Record algorithm ``i`` if ``k`` is its next record step (block by block: the
        metrics have the same shapes in any chunking)."""
        lay = run.layouts[i]
        if rec_pos[i] >= lay.steps.size or lay.steps[rec_pos[i]] != k:
            return
        t_rec = time.perf_counter()
        for s0, s1 in blocks:
            vals = record_at(
                problem,
                algos[i],
                states[i] if s1 - s0 == Rc else algos[i].select_rows(states[i], slice(s0, s1)),
                m[s0:s1, ...],
                sums[i][s0:s1, ...],
                tails[i][s0:s1, ...],
                k,
                run.tail_starts[i],
                wsums[i],
                slice(s0, s1),
                lay.error_metrics,
            )
            store_record(run.values[i], rec_pos[i], vals, lay, o0 + s0, o0 + s1)
        rec_pos[i] += 1
        clock.recorded(time.perf_counter() - t_rec, timed)

    if kind is not None:  # the plan's path: whole segments of local steps, compiled
        fused = FusedLocal(run, Rc, blocks, which, kind)
        for g, i in enumerate(which):
            states[i], sums[i], tails[i] = fused.states[g], fused.sums[g], fused.tails[g]
        generators = [s.generator for s in sample_stream.streams]
        k = 0
        with np.errstate(all="ignore"):
            for k1 in segment_ends([run.layouts[i] for i in which], fused.n.tolist()).tolist():
                fused.advance(generators, k + 1, k1)
                for g, i in enumerate(which):
                    record(i, k1, fused.mean[g])
                clock.tick(k1, Rc, timed, steps=k1 - k, share=share)
                k = k1
        for g, i in enumerate(which):
            run.diverged[i][o0 : o0 + Rc] = fused.div[g]
        return
    div_chunk = {i: np.zeros(Rc, dtype=np.int64) for i in which}
    with np.errstate(all="ignore"):
        for i in which:
            a = algos[i]
            start = xp.zeros((Rc, a.workers, d), dtype=be.float_dtype) + theta0_x
            states[i] = a.init(start, algo_streams[i])
            # running sums in float64 whatever the dtype: a float32 sum of n terms loses
            # digits linearly in n (measured: 86% error of an average after 1e5 steps)
            sums[i] = xp.zeros((Rc, d), dtype=xp.float64)
            tails[i] = xp.zeros((Rc, d), dtype=xp.float64)
            tau = run.weight_shifts[i] if run.weight_shifts else None
            wsums[i] = None if tau is None else WeightedSums(xp, (Rc, d), tau)
        for k in range(1, n_max + 1):
            batch = problem.sample(sample_stream, (Rc, P_max, b_max))
            for i in which:
                a = algos[i]
                if k > run.ns[i]:
                    continue
                b_i = _take(batch, a.workers, a.batch, P_max, b_max)
                states[i] = a.step(states[i], GradientOracle(problem, b_i), k, algo_streams[i])
                m = a.worker_mean(states[i])
                sums[i] += m
                if k >= run.tail_starts[i]:
                    tails[i] += m
                if wsums[i] is not None:
                    wsums[i].add(m, k)
                dev = m - theta_star
                dist = xp.sum(dev * dev, axis=-1)  # fixed order, no BLAS: any CPU alike
                if not bool(xp.max(dist) <= run.div_threshold):  # NaN compares False
                    bad = ~(to_numpy(dist) <= run.div_threshold)
                    div_chunk[i][bad & (div_chunk[i] == 0)] = k
                record(i, k, m)
            clock.tick(k, Rc, timed, share=share)
    for i in which:
        run.diverged[i][o0 : o0 + Rc] = div_chunk[i]


def _versions() -> dict[str, str]:
    from ._version import __version__

    return {"convkit": __version__, "numpy": np.__version__, "python": platform.python_version()}
