"""How many communication rounds Local-SGD needs to match mini-batch averaging (exact curves).

For least squares, ``T`` stochastic gradients, ``P`` workers with batch ``b`` (``n = T/(P b)``
local steps) and steps ``gamma_k = C k^-alpha``, let ``err(N)`` be the exact expected error
(default ``E||avg - theta*||_H^2``, Polyak-Ruppert average) of Local-SGD with ``N`` evenly
spaced rounds (:class:`~convkit.schedules.Rounds`; ``N = n`` is MBA, ``N = 1`` is OSA).
:func:`communication_threshold` finds

    N*(T, P) = min { N : err(N) <= (1 + eps) err(MBA) }

by bisection on ``N`` (``err`` is about non-increasing in ``N``; the monotonicity is checked
on a log-spaced grid of ``N`` and reported, never assumed silently).  The claim to test
(Patel & Dieuleveut 2019, as read in ``shared/theory/local_sgd.md``): ``N* ~ sqrt(P T)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..problems.least_squares import LeastSquares
from ..recording import record_steps  # noqa: F401  (re-exported for callers building specs)
from ..schedules import PolyDecay, Rounds
from ..validation import check_in, check_int, check_real
from .local import LocalSpec, local_curves, stability_limit
from .moments import problem_arrays

__all__ = ["communication_threshold", "rounds_error"]

_COL = {
    ("avg", "hnorm2"): 0,
    ("avg", "dist2"): 1,
    ("tail", "hnorm2"): 2,
    ("tail", "dist2"): 3,
    ("last", "hnorm2"): 4,
    ("last", "dist2"): 5,
}


def rounds_error(
    problem: LeastSquares,
    n: int,
    P: int,
    step: Any,
    rounds: Any,
    *,
    batch: int = 1,
    theta0: Any = None,
    iterate: str = "avg",
    metric: str = "hnorm2",
    tail: float = 0.5,
) -> np.ndarray:
    """Exact final error after ``n`` local steps for each number of evenly spaced rounds in
    ``rounds`` (array of ints in ``[1, n]``), one batched engine call. ``step``: a
    :class:`~convkit.schedules.StepSize` (evaluated inside the compiled loop: no ``n``-long
    array) or the array of the ``n`` step sizes."""
    h, z2, s2 = problem_arrays(problem, theta0)
    col = _COL[(iterate, metric)]
    specs = [
        LocalSpec(
            n=int(n),
            step=step,
            comm=Rounds(int(N)),
            workers=P,
            batch=batch,
            tail_start=int(math.floor(tail * n)) + 1,
            rec=np.array([n], dtype=np.int64),
        )
        for N in np.atleast_1d(rounds)
    ]
    raws, _ = local_curves(h, z2, s2, problem.design, specs)
    return np.array([r[0, col] for r in raws])


def communication_threshold(
    T: int,
    P: int,
    alpha: float,
    eps: float = 0.1,
    *,
    problem: LeastSquares | None = None,
    C: float | None = None,
    C_frac: float = 0.5,
    k0: float = 0.0,
    batch: int = 1,
    theta0: Any = None,
    iterate: str = "avg",
    metric: str = "hnorm2",
    monotone_grid: int = 12,
) -> dict[str, Any]:
    """``N*(T, P)``: the fewest evenly spaced rounds with ``err(N) <= (1 + eps) err(MBA)``.

    ``problem`` defaults to a Gaussian least-squares problem with ``d = 10``, spectrum
    ``1/i``, ``sigma = 1``; ``C`` defaults to ``C_frac`` times the single-worker mean-square
    stability limit (:func:`~convkit.exact.stability_limit`, batch ``b``).  Returns a dict:
    ``N_star``, ``n`` (local steps), ``err_mba``, ``err_osa``, ``err_at_N_star``,
    ``ratio_osa_mba``, ``C``, ``monotone`` (``err`` non-increasing on a log grid of
    ``monotone_grid`` values of ``N``, up to 1e-12 relative), ``evaluations``.
    """
    T = check_int("T", T, low=1)
    P = check_int("P", P, low=1)
    alpha = check_real("alpha", alpha, low=0, high=1)
    eps = check_real("eps", eps, low=0)
    check_in("iterate", iterate, ("avg", "tail", "last"))
    check_in("metric", metric, ("hnorm2", "dist2"))
    if problem is None:
        problem = LeastSquares.gaussian(10, spectrum="1/i", noise=1.0)
    n = max(1, T // (P * batch))  # local steps (T rounded down to a multiple of P b)
    if C is None:
        C = C_frac * stability_limit(problem, batch=batch)
    step = PolyDecay(C, alpha, k0)

    def err(Ns: Any) -> np.ndarray:
        return rounds_error(
            problem, n, P, step, Ns, batch=batch, theta0=theta0, iterate=iterate, metric=metric
        )

    # MBA, OSA and the monotonicity grid in one batched call (its configurations run on
    # parallel threads); every value is kept, so none is computed twice
    grid = np.unique(np.round(np.logspace(0, np.log10(n), monotone_grid)).astype(np.int64))
    first = np.unique(np.concatenate([[n, 1], grid]))
    known = dict(zip(first.tolist(), err(first).tolist(), strict=True))
    e_mba, e_osa = known[n], known[1]
    eg = np.array([known[int(N)] for N in grid])
    target = (1.0 + eps) * e_mba
    evals = 2 + grid.size
    lo, hi = 1, n  # err(hi) <= target always; find the smallest such N
    if e_osa <= target:
        hi = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        evals += 1
        if mid not in known:
            known[mid] = float(err([mid])[0])
        if known[mid] <= target:
            hi = mid
        else:
            lo = mid
    N_star = hi
    e_star = known[N_star]
    monotone = bool(np.all(np.diff(eg) <= 1e-12 * np.abs(eg[:-1])))
    return {
        "T": T,
        "P": P,
        "alpha": alpha,
        "eps": eps,
        "batch": batch,
        "n": n,
        "C": float(C),
        "N_star": int(N_star),
        "err_mba": float(e_mba),
        "err_osa": float(e_osa),
        "err_at_N_star": float(e_star),
        "ratio_osa_mba": float(e_osa / e_mba),
        "monotone": monotone,
        "evaluations": evals,
    }
