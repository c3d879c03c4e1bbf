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
* ``last``: ``m_k``.

Divergence: a replicate whose worker mean is non-finite, or farther than
``divergence_factor`` times the initial squared distance from ``theta*``, is marked diverged at
that step; it is excluded from every later record point (``count`` drops) and listed in
:attr:`Result.diverged`, with a :class:`DivergenceWarning`.  Curves never contain NaN.

Replicates are processed in chunks when the state would exceed ``memory_limit`` bytes;
each chunk has its own random stream derived from ``(seed, chunk index)``, so a chunked run
equals an unchunked one in distribution (not sample by sample).
"""

from __future__ import annotations

import math
import platform
import time
import warnings
from collections.abc import Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any

import numpy as np

from .algorithms.base import Algorithm
from .algorithms.local import local_steps_for
from .backend import Backend, get_backend, to_numpy, tune_allocator
from .problems.base import METRICS, GradientOracle, Problem
from .recording import ITERATES, DivergenceWarning, record_steps, starting_point
from .result import ConfigValues, Result, frame_from_values
from .validation import check_int, check_real

# DivergenceWarning, record_steps (and ITERATES, starting_point) live in convkit.recording,
# shared with the exact engines; re-exported here
__all__ = ["DivergenceWarning", "record_steps", "simulate"]


def _take(batch: Any, workers: int, size: int) -> Any:
    """Slice a batch to its first ``workers`` workers and ``size`` batch slots."""
    if not is_dataclass(batch):
        return batch[:, :workers, :size, ...]
    updates = {}
    for f in fields(batch):
        v = getattr(batch, f.name)
        if v is not None and getattr(v, "ndim", 0) >= 3:
            updates[f.name] = v[:, :workers, :size, ...]
    return replace(batch, **updates)


def simulate(
    problem: Problem,
    algorithms: Algorithm | Sequence[Algorithm],
    *,
    gradients: int | None = None,
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
) -> Result:
    """Simulate ``algorithms`` on ``problem`` with common random numbers.

    Parameters
    ----------
    problem:
        A :class:`~convkit.problems.base.Problem`.
    algorithms:
        One algorithm or a sequence of them (labels must be unique).
    gradients:
        Total stochastic gradients ``T`` over all workers; each algorithm runs
        ``n = T / (P b)`` local steps.  Give this or ``steps``.
    steps:
        Number of local steps ``n`` for every algorithm.
    replicates:
        Independent replicates ``R``.
    seed:
        Root seed; the same seed gives an identical result.
    theta0:
        Starting model, shape ``(d,)`` (default: zeros), shared by all workers.
    record:
        Extra local steps at which to record (added to ``n_record`` log-spaced ones).
    tail:
        Tail averaging starts after ``floor(tail * n)`` local steps (``0 <= tail < 1``).
    backend, dtype:
        Array backend (``"numpy"``/``"cupy"`` or a :class:`~convkit.backend.Backend`) and
        floating type (``"float64"`` default, ``"float32"``).
    memory_limit:
        Bytes the per-chunk state may use; replicates are chunked above it.
    divergence_factor:
        A replicate diverges when ``||m_k - theta*||^2`` exceeds this factor times
        ``max(||theta0 - theta*||^2, 1)`` or is not finite.
    progress:
        Show a progress bar (default: only for long runs).
    """
    t_start = time.perf_counter()
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a convkit Problem, got {type(problem).__name__}")
    algos = [algorithms] if isinstance(algorithms, Algorithm) else list(algorithms)
    if not algos:
        raise ValueError("algorithms must hold at least one algorithm, got an empty sequence")
    for a in algos:
        if not isinstance(a, Algorithm):
            raise TypeError(f"algorithms must be convkit Algorithms, got {type(a).__name__}")
    labels = [a.label for a in algos]
    if len(set(labels)) != len(labels):
        raise ValueError(f"algorithm labels must be unique (pass name=...), got {labels}")
    R = check_int("replicates", replicates, low=1)
    seed = check_int("seed", seed, low=0)
    tail = check_real("tail", tail, low=0, high=1, high_inclusive=False)
    check_real("memory_limit", memory_limit, low=0, low_inclusive=False)
    check_real("divergence_factor", divergence_factor, low=1)
    if (gradients is None) == (steps is None):
        raise ValueError("give exactly one of gradients (total T) or steps (local steps n)")
    if steps is not None:
        ns = [check_int("steps", steps, low=1)] * len(algos)
    else:
        ns = [local_steps_for(gradients, a.workers, a.batch) for a in algos]
    be = get_backend(backend, dtype)
    if be.name == "numpy":
        tune_allocator()
    xp = be.xp
    d = problem.d

    theta0_np = starting_point(theta0, d)
    d0 = float(np.sum((theta0_np - problem.theta_star) ** 2))
    div_threshold = divergence_factor * max(d0, 1.0)

    for a, n in zip(algos, ns, strict=True):
        a.prepare(n)
    recs = [record_steps(n, n_record, record) for n in ns]
    tail_starts = [int(math.floor(tail * n)) + 1 for n in ns]
    P_max = max(a.workers for a in algos)
    b_max = max(a.batch for a in algos)
    n_max = max(ns)

    itemsize = 4 if dtype == "float32" else 8
    per_rep = itemsize * (
        P_max * b_max * (d + 1) * 2  # sample block (+ a temporary)
        + sum(a.workers * d * (a.state_arrays + 2) + 4 * d for a in algos)
    )
    chunk = max(1, min(R, int(memory_limit // per_rep)))
    n_chunks = math.ceil(R / chunk)
    if progress is None:
        progress = n_max * R * P_max * d * len(algos) > 2e10

    counts = [a.comm_counts(n, d) for a, n in zip(algos, ns, strict=True)]
    extra_names: list[list[str]] = [[] for _ in algos]
    values: list[np.ndarray | None] = [None] * len(algos)
    diverged = [np.zeros(R, dtype=np.int64) for _ in algos]

    from tqdm import tqdm

    bar = tqdm(total=n_max * n_chunks, disable=not progress, desc="simulate", unit="step")
    with np.errstate(all="ignore"):
        for c in range(n_chunks):
            r0, r1 = c * chunk, min(R, (c + 1) * chunk)
            Rc = r1 - r0
            sample_stream = be.stream(seed, "samples", c)
            algo_streams = [be.stream(seed, "algorithm", i, c) for i in range(len(algos))]
            theta0_x = be.asarray(theta0_np)
            states, sums, tails = [], [], []
            for i, a in enumerate(algos):
                start = xp.zeros((Rc, a.workers, d), dtype=be.float_dtype) + theta0_x
                states.append(a.init(start, algo_streams[i]))
                # running sums in float64 whatever the dtype: a float32 sum of n terms loses
                # digits linearly in n (measured: 86% error of an average after 1e5 steps)
                sums.append(xp.zeros((Rc, d), dtype=xp.float64))
                tails.append(xp.zeros((Rc, d), dtype=xp.float64))
            rec_pos = [0] * len(algos)
            div_chunk = [np.zeros(Rc, dtype=np.int64) for _ in algos]
            theta_star = be.asarray(problem.theta_star)
            for k in range(1, n_max + 1):
                batch = problem.sample(sample_stream, (Rc, P_max, b_max))
                for i, a in enumerate(algos):
                    if k > ns[i]:
                        continue
                    b_i = batch
                    if a.workers < P_max or a.batch < b_max:
                        b_i = _take(batch, a.workers, a.batch)
                    states[i] = a.step(states[i], GradientOracle(problem, b_i), k, algo_streams[i])
                    m = a.worker_mean(states[i])
                    sums[i] += m
                    if k >= tail_starts[i]:
                        tails[i] += m
                    dev = m - theta_star
                    dist = xp.vecdot(dev, dev)
                    if not bool(xp.max(dist) <= div_threshold):  # NaN compares False
                        bad = ~(to_numpy(dist) <= div_threshold)
                        div_chunk[i][bad & (div_chunk[i] == 0)] = k
                    if rec_pos[i] < recs[i].size and recs[i][rec_pos[i]] == k:
                        vals = _record(
                            problem, a, states[i], m, sums[i], tails[i], k, tail_starts[i]
                        )
                        if values[i] is None:
                            extra_names[i] = [key for key in vals if key[0] == "state"]
                            values[i] = np.full(
                                (
                                    recs[i].size,
                                    len(ITERATES) + bool(extra_names[i]),
                                    len(METRICS) + len(extra_names[i]),
                                    R,
                                ),
                                np.nan,
                            )
                        _store(values[i], rec_pos[i], vals, extra_names[i], r0, r1)
                        rec_pos[i] += 1
                bar.update(1)
            for i in range(len(algos)):
                diverged[i][r0:r1] = div_chunk[i]
    bar.close()

    per_config: dict[str, ConfigValues] = {}
    for i, a in enumerate(algos):
        steps_i = recs[i]
        axes = {
            "gradients": steps_i * a.workers * a.batch,
            **{key: counts[i][key][steps_i - 1] for key in ("rounds", "messages", "bits")},
        }
        iterates = list(ITERATES) + (["state"] if extra_names[i] else [])
        metrics = list(METRICS) + [name for _, name in extra_names[i]]
        per_config[labels[i]] = ConfigValues(
            steps_i, axes, iterates, metrics, values[i], diverged[i]
        )
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
        "algorithms": {
            labels[i]: {**a.describe(), "local_steps": ns[i]} for i, a in enumerate(algos)
        },
        "replicates": R,
        "seed": seed,
        "theta0": theta0_np.tolist(),
        "tail": tail,
        "backend": be.name,
        "dtype": dtype,
        "chunks": n_chunks,
        "diverged": n_div,
        "versions": _versions(),
        "timing": {"seconds": elapsed},
    }
    return Result(frame_from_values(per_config), meta, per_config)


def _record(problem, algo, state, m, sums, tails, k, tail_start) -> dict[tuple[str, str], Any]:
    out: dict[tuple[str, str], Any] = {}
    estimates = {"avg": sums / k, "last": m}
    if k >= tail_start:
        estimates["tail"] = tails / (k - tail_start + 1)
    for it, theta in estimates.items():
        for metric, v in problem.errors(theta).items():
            out[(it, metric)] = v
    for name, v in algo.extra_metrics(state, problem).items():
        out[("state", name)] = v
    return out


def _store(arr: np.ndarray, pos: int, vals: dict, extra: list, r0: int, r1: int) -> None:
    iterates = list(ITERATES) + ["state"]
    metrics = list(METRICS) + [name for _, name in extra]
    for (it, metric), v in vals.items():
        arr[pos, iterates.index(it), metrics.index(metric), r0:r1] = to_numpy(v)


def _versions() -> dict[str, str]:
    from ._version import __version__

    return {"convkit": __version__, "numpy": np.__version__, "python": platform.python_version()}
