r"""The best communication schedule for a budget of ``N`` rounds.

Least squares (exact engine)
----------------------------
:func:`best_rounds_exact` minimizes the exact ``E||theta_bar_n - theta*||_H^2`` of the
Polyak-Ruppert average (over local steps ``1..n``) of Local-SGD with ``P`` workers over the
sets of exactly ``min(N, n)`` distinct round positions that contain the last step ``n``.  The
objective is the exact recursion of :mod:`convkit.exact.local` (no Monte Carlo noise), all
candidates of a stage evaluated in one batched call of :func:`convkit.exact.local.local_curves`.

Method: (1) the smooth families: even (``Rounds(N)``), the powers ``ceil(n (j/N)^p)`` on a
grid of ``p`` (:class:`~convkit.schedules.PowerRounds`), geometric ``ceil(n^(j/N))``;
(2) a golden-section refinement of ``log p`` around the best grid point; (3) from each family
member (best power, even, geometric, quadratic), its duplicate positions filled (midpoints of
the largest gaps) to exactly ``N`` rounds, a local search: every position moved by ``+-s``
within its neighbours, all moves of a sweep evaluated in one batch, the best improving move
taken, ``s`` halved when no move improves, from ``s = max(1, n / (4 N))`` down to 1, where
moves of two neighbouring positions by one step each are added.  The result is a local
optimum under those moves (no better set differs from it by one of them).

How close to optimal (measured, not proved): against brute force over all position sets
(:func:`brute_force_rounds`) on 288 small exact cases (``n`` in {8, 10, 12}, ``N`` in
{2, 3, 4}, ``P`` in {2, 8}, ``d = 2`` flat and ``d = 5`` ``1/i`` spectra, constant and
``alpha = 0.75`` steps at 0.3 and 0.9 of the stability limit, ``theta0`` at ``theta*`` and at
``5 (1, ..., 1)``) the search returned the brute-force optimum in all 288; with single-position
moves only and one start it missed 15 of them, by at most 0.28 %.  A local search carries no
guarantee beyond such measurements.  Cost: one kernel pass ``O(n d)`` per candidate (about
0.35 ms at ``n = 2000``, ``d = 5``); ``max_evals`` (default 5000) caps the local search.  On
larger cases the refinement gains little over the best power (``n = 2000``, ``N = 20``,
``P = 8``, ``d = 5`` ``1/i``, ``alpha = 0.75`` at 0.9 of the stability limit, ``theta0`` far:
0.02 %).

Logistic regression (Monte Carlo)
---------------------------------
:func:`best_power_mc` optimizes the exponent ``p`` of the power family on common random
numbers: all candidate schedules (and MBA) run in ONE :func:`convkit.simulate` call, so they
share every sample, and the ratios of their errors come with paired standard errors
(delta method on the per-replicate values).  Optionally a second call with the grid refined
around the best ``p`` (the final numbers all come from that one call).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from .algorithms.local import MBA, LocalSGD
from .checks import paired_ratio  # the one paired ratio, re-exported
from .exact.local import LocalSpec, local_curves, stability_limit
from .exact.moments import problem_arrays
from .problems.base import METRICS, Problem
from .problems.least_squares import LeastSquares
from .schedules import (
    CommSchedule,
    EveryStep,
    Final,
    GeometricRounds,
    PowerRounds,
    Rounds,
    StepSize,
)
from .simulate import simulate
from .validation import check_int, check_real

__all__ = [
    "DEFAULT_P_GRID",
    "BestPower",
    "BestSchedule",
    "best_power_mc",
    "best_rounds_exact",
    "brute_force_rounds",
    "exact_pr_errors",
    "paired_ratio",
]

#: Default grid of powers ``p`` of the family ``ceil(n (j/N)^p)``.
DEFAULT_P_GRID: tuple[float, ...] = tuple(
    float(round(v, 4)) for v in np.unique(np.r_[np.geomspace(0.5, 8.0, 17), 1.0, 2.0])
)


# ============================================================================ exact objective
def _positions(sched: CommSchedule | Sequence[int], n: int) -> CommSchedule | np.ndarray:
    """A schedule, or a list of positions as the boolean mask of the exact engine."""
    if isinstance(sched, CommSchedule):
        sched.validate(n)
        return sched
    pos = np.asarray(sched, dtype=np.int64)
    if pos.ndim != 1 or (pos.size and (pos.min() < 1 or pos.max() > n)):
        raise ValueError(f"round positions must be local steps in [1, n = {n}], got {sched!r}")
    mask = np.zeros(n, dtype=bool)
    mask[pos - 1] = True
    mask[-1] = True
    return mask


def exact_pr_errors(
    problem: LeastSquares,
    n: int,
    workers: int,
    step: StepSize,
    schedules: Sequence[CommSchedule | Sequence[int]],
    *,
    batch: int = 1,
    theta0: Any = None,
) -> np.ndarray:
    """Exact ``E||theta_bar_n - theta*||_H^2`` of the Polyak-Ruppert average over local steps
    ``1..n`` for each schedule, in one batched call of the exact engine.

    Parameters
    ----------
    problem : LeastSquares
        The least-squares problem.
    n : int
        Local steps per worker.
    workers : int
        ``P``.
    step : StepSize
        Step sizes.
    schedules : sequence
        :class:`~convkit.schedules.CommSchedule` objects or lists of round positions
        (``n`` is always added).
    batch : int
        Mini-batch per worker.
    theta0 : array-like, optional
        Start (default zeros).

    Returns
    -------
    numpy.ndarray
        One error per schedule (``inf`` where the second moments diverged).
    """
    n = check_int("n (local steps)", n, low=1)
    workers = check_int("workers", workers, low=1)
    batch = check_int("batch", batch, low=1)
    if not isinstance(step, StepSize):
        raise TypeError(f"step must be a StepSize, got {type(step).__name__}")
    h, z2, sigma2 = problem_arrays(problem, theta0)
    rec = np.array([n], dtype=np.int64)
    specs = []
    for s in schedules:
        comm = _positions(s, n)
        specs.append(LocalSpec(n, step, comm, workers, batch, n // 2 + 1, rec))
    if not specs:
        return np.zeros(0)
    threshold = 1e12 * max(float(z2.sum()), 1.0)
    raws, div = local_curves(h, z2, sigma2, problem.design, specs, threshold=threshold)
    out = np.array([r[-1, 0] for r in raws], dtype=np.float64)
    out[(div > 0) | ~np.isfinite(out)] = np.inf
    return out


def brute_force_rounds(
    problem: LeastSquares,
    n: int,
    workers: int,
    step: StepSize,
    N: int,
    *,
    batch: int = 1,
    theta0: Any = None,
) -> tuple[tuple[int, ...], float]:
    """The best set of exactly ``N`` distinct round positions containing ``n``, by exhaustive
    search over all ``C(n - 1, N - 1)`` sets (small cases only: at most 200000 sets).

    Returns
    -------
    tuple
        ``(positions, error)``; ``ValueError`` when every set diverges (error ``inf``).
    """
    n = check_int("n (local steps)", n, low=1)
    N = check_int("N (rounds)", N, low=1, high=n)
    count = math.comb(n - 1, N - 1)
    if count > 200_000:
        raise ValueError(f"brute force over {count} position sets refused (at most 200000)")
    sets = [(*c, n) for c in combinations(range(1, n), N - 1)]
    err = exact_pr_errors(problem, n, workers, step, sets, batch=batch, theta0=theta0)
    if not np.any(np.isfinite(err)):
        raise _all_diverged("brute_force_rounds", problem, step, workers, batch, N, n)
    i = int(np.argmin(err))
    return tuple(int(v) for v in sets[i]), float(err[i])


def _all_diverged(
    who: str, problem: LeastSquares, step: StepSize, workers: int, batch: int, N: int, n: int
) -> ValueError:
    """The error raised when every candidate schedule's exact error is ``inf``: no position
    set is better than another, so none is returned (the step is unstable)."""
    try:
        limit = f"{stability_limit(problem, batch):.4g}"
    except Exception:  # noqa: BLE001 - the message must not fail on its hint
        limit = "see convkit.exact.local.stability_limit"
    return ValueError(
        f"{who}: every candidate schedule of {N} rounds over n = {n} steps diverged (exact "
        f"error inf) with the step {step.describe()}, P = {workers}, batch = {batch}: no "
        "position set is better than another; allowed: a step below the mean-square "
        f"stability limit of the problem (one worker, this batch: constant gamma < {limit})"
    )


@dataclass
class BestSchedule:
    """Outcome of :func:`best_rounds_exact`.

    Attributes
    ----------
    positions : tuple of int
        The best round positions found (``n`` last).
    error : float
        Its exact error ``E||theta_bar_n - theta*||_H^2``.
    errors : dict
        Exact errors of the reference schedules: ``"mba"``, ``"osa"``, ``"even"``,
        ``"quadratic"``, ``"geometric"``, ``"power"`` (the best ``p``), ``"best"`` and any
        ``extra`` schedule passed by name.
    ratios : dict
        ``errors[k] / error`` for every key.
    best_p : float
        The best power of the family after the golden-section refinement.
    evaluations : int
        Exact evaluations used (one per candidate schedule).
    """

    positions: tuple[int, ...]
    error: float
    errors: dict[str, float]
    ratios: dict[str, float]
    best_p: float
    evaluations: int
    n: int
    N: int
    method: str = "families + golden section on log p + coordinate moves"
    history: list[float] = field(default_factory=list)


def _fill(pos: np.ndarray, N: int, n: int) -> np.ndarray:
    """Add midpoints of the largest gaps until ``pos`` holds ``min(N, n)`` distinct steps."""
    pos = np.unique(np.r_[pos, n])
    target = min(N, n)
    while pos.size < target:
        edges = np.r_[0, pos]
        gaps = np.diff(edges)
        i = int(np.argmax(gaps))
        pos = np.unique(np.r_[pos, edges[i] + max(1, gaps[i] // 2)])
    return pos


def _local_search(f, pos: np.ndarray, err: float, n: int, N: int, budget: int):
    """Coordinate moves of single positions (step ``s`` halved down to 1), then moves of two
    neighbouring positions by one step each; returns ``(positions, error, evaluations)``."""
    pos = pos.astype(np.int64).copy()
    used = 0
    s = max(1, n // (4 * N))
    m = pos.size - 1  # the last position (n) stays

    def ok(q: np.ndarray) -> bool:
        return bool(q[0] >= 1 and np.all(np.diff(q) > 0) and q[-1] == n)

    while used < budget:
        trial = []
        for k in range(m):
            for delta in (-s, s):
                q = pos.copy()
                q[k] += delta
                if ok(q):
                    trial.append(q)
        if s == 1:
            for k in range(m - 1):
                for d1, d2 in ((1, 1), (-1, -1), (1, -1), (-1, 1)):
                    q = pos.copy()
                    q[k] += d1
                    q[k + 1] += d2
                    if ok(q):
                        trial.append(q)
        if trial:
            te = f([tuple(q) for q in trial])
            used += len(trial)
            i = int(np.argmin(te))
            if te[i] < err * (1.0 - 1e-13):
                # all improving single-position moves at once, when that is better still
                best_k: dict[int, tuple[float, int]] = {}
                for q, e in zip(trial, te, strict=True):
                    diff = np.flatnonzero(q != pos)
                    if diff.size == 1 and e < err * (1.0 - 1e-13):
                        k = int(diff[0])
                        if k not in best_k or e < best_k[k][0]:
                            best_k[k] = (float(e), int(q[k]))
                cand, cand_err = trial[i], float(te[i])
                if len(best_k) > 1:
                    comb = pos.copy()
                    for k, (_, v) in best_k.items():
                        comb[k] = v
                    if ok(comb):
                        ce = float(f([tuple(comb)])[0])
                        used += 1
                        if ce < cand_err:
                            cand, cand_err = comb, ce
                pos, err = cand, cand_err
                continue
        if s == 1:
            break
        s = max(1, s // 2)
    return pos, err, used


def best_rounds_exact(
    problem: LeastSquares,
    n: int,
    workers: int,
    step: StepSize,
    N: int,
    *,
    batch: int = 1,
    theta0: Any = None,
    p_grid: Sequence[float] = DEFAULT_P_GRID,
    golden_iters: int = 24,
    refine: bool = True,
    max_evals: int = 5_000,
    extra: Mapping[str, CommSchedule] | None = None,
) -> BestSchedule:
    """Round positions minimizing the exact error of the Polyak-Ruppert average for a budget
    of ``N`` rounds (least squares; method and measured optimality in the module docstring).

    Parameters
    ----------
    problem : LeastSquares
        The problem (exact engine).
    n, workers, N : int
        Local steps, ``P``, budget of rounds (``1 <= N <= n``).
    step : StepSize
        Step sizes.
    batch : int
        Mini-batch per worker.
    theta0 : array-like, optional
        Start (default zeros).
    p_grid : sequence of float
        Powers of the family searched first (all ``> 0``).
    golden_iters : int
        Golden-section iterations on ``log p`` (0: none).
    refine : bool
        Run the coordinate moves on the positions.
    max_evals : int
        Budget of exact evaluations of the coordinate moves.
    extra : mapping, optional
        Further schedules (name -> schedule) whose errors are reported (e.g. the drift-clock rule).

    Returns
    -------
    BestSchedule

    Raises
    ------
    ValueError
        When every candidate schedule of ``N`` rounds diverges (exact error ``inf``: the step
        is unstable), rather than returning positions that are no better than any other.
    """
    n = check_int("n (local steps)", n, low=1)
    N = check_int("N (rounds)", N, low=1, high=n)
    check_int("max_evals", max_evals, low=0)
    check_int("golden_iters", golden_iters, low=0)
    grid = sorted({check_real("p_grid[i]", p, low=0, low_inclusive=False) for p in p_grid})
    if not grid:
        raise ValueError("p_grid must list at least one power > 0")
    kw = {"batch": batch, "theta0": theta0}
    evals = 0

    def f(scheds: Sequence[Any]) -> np.ndarray:
        nonlocal evals
        evals += len(scheds)
        return exact_pr_errors(problem, n, workers, step, scheds, **kw)

    extra = dict(extra or {})
    refs: dict[str, CommSchedule] = {
        "mba": EveryStep(),
        "osa": Final(),
        "even": Rounds(N),
        "quadratic": PowerRounds(N, 2.0),
        "geometric": GeometricRounds(N),
        **extra,
    }
    ref_err = f(list(refs.values()))
    errors = {k: float(v) for k, v in zip(refs, ref_err, strict=True)}
    power_err = f([PowerRounds(N, p) for p in grid])
    family = [errors[k] for k in ("even", "quadratic", "geometric")]
    if not np.any(np.isfinite(np.r_[family, power_err])):
        raise _all_diverged("best_rounds_exact", problem, step, workers, batch, N, n)
    i = int(np.argmin(power_err))
    best_p, best_pe = grid[i], float(power_err[i])
    # golden section on log p inside the bracket of the grid neighbours
    if golden_iters and len(grid) > 1:
        lo = math.log(grid[max(i - 1, 0)])
        hi = math.log(grid[min(i + 1, len(grid) - 1)])
        phi = (math.sqrt(5.0) - 1.0) / 2.0
        a, b = hi - phi * (hi - lo), lo + phi * (hi - lo)
        fa, fb = f([PowerRounds(N, math.exp(a)), PowerRounds(N, math.exp(b))])
        for _ in range(golden_iters):
            if fa <= fb:
                hi, b, fb = b, a, fa
                a = hi - phi * (hi - lo)
                fa = f([PowerRounds(N, math.exp(a))])[0]
            else:
                lo, a, fa = a, b, fb
                b = lo + phi * (hi - lo)
                fb = f([PowerRounds(N, math.exp(b))])[0]
        for pv, fv in ((math.exp(a), fa), (math.exp(b), fb)):
            if fv < best_pe:
                best_p, best_pe = float(pv), float(fv)
    errors["power"] = best_pe

    starts = {
        "power": PowerRounds(N, best_p).steps(n),
        "even": Rounds(N).steps(n),
        "geometric": GeometricRounds(N).steps(n),
        "quadratic": PowerRounds(N, 2.0).steps(n),
    }
    order = sorted(starts, key=lambda k: errors[k])
    uniq: list[tuple[int, ...]] = []
    for k in order:
        for c in (tuple(starts[k]), tuple(_fill(starts[k], N, n))):
            if c not in uniq:
                uniq.append(c)
    cand_err = f(uniq)
    j = int(np.argmin(cand_err))
    pos, err = np.array(uniq[j], dtype=np.int64), float(cand_err[j])
    history = [err]
    if refine and min(N, n) > 1:
        for r, k in enumerate(order):  # the best start gets half the budget
            start = _fill(starts[k], N, n)
            share = max_evals // 2 if r == 0 else max_evals // (2 * max(1, len(order) - 1))
            budget = min(share, max_evals - evals)
            if budget <= 0:
                break
            q, e, _ = _local_search(f, start, float(f([tuple(start)])[0]), n, N, budget)
            if e < err:
                pos, err = q, e
                history.append(err)
    if err > best_pe:  # the family member itself is better than anything refined
        pos, err = PowerRounds(N, best_p).steps(n), best_pe
    if not math.isfinite(err):
        raise _all_diverged("best_rounds_exact", problem, step, workers, batch, N, n)
    errors["best"] = err
    ratios = {k: float(v / err) if err > 0 else float("nan") for k, v in errors.items()}
    return BestSchedule(
        positions=tuple(int(v) for v in pos),
        error=err,
        errors=errors,
        ratios=ratios,
        best_p=float(best_p),
        evaluations=evals,
        n=n,
        N=N,
        history=history,
    )


# ============================================================================ Monte Carlo
@dataclass
class BestPower:
    """Outcome of :func:`best_power_mc` (all numbers from one paired simulate call).

    Attributes
    ----------
    p : numpy.ndarray
        The powers evaluated (sorted).
    err, err_se : numpy.ndarray
        Mean error of each ``PowerRounds(N, p)`` and its standard error.
    ratio_to_best, ratio_to_best_se : numpy.ndarray
        ``err(p) / err(best p)`` with paired standard errors (0 at the best).
    ratio_to_mba, ratio_to_mba_se : numpy.ndarray
        ``err(p) / err(MBA)`` with paired standard errors.
    best_p : float
        The power of smallest mean error.
    mba_err, mba_se : float
        MBA's error and standard error.
    replicates : int
        Replicates used (those that diverged in no configuration).
    rounds : numpy.ndarray
        Actual rounds of each schedule.
    """

    p: np.ndarray
    err: np.ndarray
    err_se: np.ndarray
    ratio_to_best: np.ndarray
    ratio_to_best_se: np.ndarray
    ratio_to_mba: np.ndarray
    ratio_to_mba_se: np.ndarray
    best_p: float
    mba_err: float
    mba_se: float
    replicates: int
    rounds: np.ndarray
    calls: int = 1
    extra: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)


def best_power_mc(
    problem: Problem,
    n: int,
    workers: int,
    step: StepSize,
    N: int,
    p_grid: Sequence[float] = DEFAULT_P_GRID,
    *,
    replicates: int = 200,
    seed: int = 0,
    theta0: Any = None,
    batch: int = 1,
    refine: int = 0,
    metric: str = "hnorm2",
    threads: int | None = 1,
    extra: Mapping[str, CommSchedule] | None = None,
) -> BestPower:
    """The best power ``p`` of ``ceil(n (j/N)^p)`` for any problem, on common random numbers.

    All candidates (and MBA, and the ``extra`` schedules) run in one :func:`convkit.simulate`
    call (same samples); the error is ``metric`` of the Polyak-Ruppert average at step ``n``.
    With ``refine = m > 0`` a second call re-runs the grid plus ``m`` powers log-spaced
    between the neighbours of the best grid point (same seed); the returned numbers all come
    from that last call, so every ratio stays paired.

    Parameters
    ----------
    problem : Problem
        Any convkit problem (logistic regression in the studies).
    n, workers, N : int
        Local steps, ``P``, budget of rounds (``1 <= N <= n``).
    step : StepSize
        Step sizes.
    p_grid : sequence of float
        Powers (``> 0``).
    replicates, seed : int
        Monte Carlo replicates and seed.
    theta0 : array-like, optional
        Start (default zeros).
    batch : int
        Mini-batch per worker.
    refine : int
        Extra powers of the second call (0: one call only).
    metric : str
        One of ``excess_risk``, ``hnorm2``, ``dist2``.
    threads : int or None
        Passed to :func:`convkit.simulate`.
    extra : mapping, optional
        Further schedules (name -> schedule); ``BestPower.extra[name]`` is ``(ratio_to_best,
        se, ratio_to_mba, se)``.

    Returns
    -------
    BestPower
    """
    n = check_int("n (local steps)", n, low=1)
    N = check_int("N (rounds)", N, low=1, high=n)
    check_int("refine", refine, low=0)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {list(METRICS)}, got {metric!r}")
    grid = sorted({check_real("p_grid[i]", p, low=0, low_inclusive=False) for p in p_grid})
    if not grid:
        raise ValueError("p_grid must list at least one power > 0")
    extra = dict(extra or {})

    def run(ps: list[float]) -> tuple[dict[str, np.ndarray], list[str]]:
        algos = [MBA(workers, step, batch, name="mba")]
        labels = [f"power p={p:.6g}" for p in ps]
        algos += [
            LocalSGD(workers, step, PowerRounds(N, p), batch, name=lab)
            for p, lab in zip(ps, labels, strict=True)
        ]
        algos += [LocalSGD(workers, step, s, batch, name=f"extra {k}") for k, s in extra.items()]
        res = simulate(
            problem,
            algos,
            steps=n,
            replicates=replicates,
            seed=seed,
            theta0=theta0,
            n_record=1,
            threads=threads,
        )
        out = {}
        for a in algos:
            cv = res.values[a.label]
            it, me = cv.iterates.index("avg"), cv.metrics.index(metric)
            out[a.label] = np.asarray(cv.values[-1, it, me, :], dtype=np.float64)
        return out, labels

    vals, labels = run(grid)
    calls = 1
    if refine:
        means = [np.nanmean(vals[lab]) for lab in labels]
        i = int(np.argmin(means))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        if hi > lo:
            fine = np.geomspace(lo, hi, refine + 2)[1:-1]
            grid = sorted(set(grid) | {float(v) for v in fine})
        vals, labels = run(grid)
        calls = 2
    ok = np.all(np.isfinite(np.stack(list(vals.values()))), axis=0)
    if ok.sum() < 2:
        raise RuntimeError("fewer than 2 replicates survived in every configuration")
    v = {k: x[ok] for k, x in vals.items()}
    R = int(ok.sum())
    err = np.array([v[lab].mean() for lab in labels])
    err_se = np.array([v[lab].std(ddof=1) / math.sqrt(R) for lab in labels])
    b = int(np.argmin(err))
    best = v[labels[b]]
    mba = v["mba"]
    rb = [paired_ratio(v[lab], best) if j != b else (1.0, 0.0) for j, lab in enumerate(labels)]
    rm = [paired_ratio(v[lab], mba) for lab in labels]
    ex = {}
    for k in extra:
        x = v[f"extra {k}"]
        ex[k] = (*paired_ratio(x, best), *paired_ratio(x, mba))
    return BestPower(
        p=np.array(grid),
        err=err,
        err_se=err_se,
        ratio_to_best=np.array([r for r, _ in rb]),
        ratio_to_best_se=np.array([s for _, s in rb]),
        ratio_to_mba=np.array([r for r, _ in rm]),
        ratio_to_mba_se=np.array([s for _, s in rm]),
        best_p=float(grid[b]),
        mba_err=float(mba.mean()),
        mba_se=float(mba.std(ddof=1) / math.sqrt(R)),
        replicates=R,
        rounds=np.array([PowerRounds(N, p).rounds(n) for p in grid]),
        calls=calls,
        extra=ex,
    )
