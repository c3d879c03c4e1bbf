"""Hand-fused reference loop of a Local-SGD study on online logistic regression (numba).

Written independently of :func:`convkit.simulate` as the speed reference of
``benchmarks/bench_logistic.py``: the whole simulation of ``S`` Local-SGD schedules on common
random numbers in one compiled function, parallel over replicates (``prange``, all the cores
numba is allowed; ``numba.set_num_threads(1)`` for one core).

Model: ``x ~ N(0, diag(h))``, ``y = +1`` with probability ``sigmoid(<x, theta*>)`` else -1,
loss ``log(1 + exp(-y <x, theta>))`` with gradient ``-y sigmoid(-y <x, theta>) x``.  For each
replicate (its own seeded generator) and local step ``k = 1..n``, every worker ``p`` draws one
sample ``(x, y)`` (batch 1), shared by the ``S`` schedules; each schedule's worker model takes
the step ``theta -= gamma_k * grad``; then each schedule's worker mean ``m`` is added to the
running Polyak-Ruppert sum, and the workers are reset to ``m`` after the steps of its
communication mask.  Output: the final error ``||theta_bar - theta*||_{H*}^2`` of the
averaged iterate ``theta_bar = sum / n`` for each schedule and replicate.

The sigmoid is the stable one: with ``e = exp(-|z|)``, ``1 / (1 + e)`` for ``z >= 0`` and
``e / (1 + e)`` otherwise; libm's ``exp`` for the labels, and for the SGD steps the same
vectorizable ``exp`` as convkit's kernels (:mod:`convkit._fastexp`, the one piece taken from
the package), so that both sides compute the same thing and the ratio measures the engine,
not the ``exp``.  Fast-math ``contract`` only, as convkit's logistic kernels.  The random numbers are numba's (not convkit's streams), so the
values are statistically, not numerically, those of :func:`convkit.simulate`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_FUSED: Any = None


def _compile() -> Any:
    import numba

    from convkit._fastexp import helpers

    sigmoid = helpers()[1]

    @numba.njit(parallel=True, fastmath={"contract"}, error_model="numpy")
    def fused(sqrt_h, theta_star, theta0, H_star, gammas, masks, P, R, seed):  # pragma: no cover
        d = sqrt_h.shape[0]
        S, n = masks.shape
        err = np.empty((S, R))
        for r in numba.prange(R):
            np.random.seed(seed + r)  # noqa: NPY002 - numba: the running thread's generator
            theta = np.empty((S, P, d))
            for s in range(S):
                for p in range(P):
                    for i in range(d):
                        theta[s, p, i] = theta0[i]
            sums = np.zeros((S, d))
            mean = np.empty((S, d))
            x = np.empty(d)
            for k in range(n):
                g = gammas[k]
                mean[:, :] = 0.0
                for p in range(P):
                    t = 0.0
                    for i in range(d):
                        x[i] = np.random.standard_normal() * sqrt_h[i]  # noqa: NPY002
                        t += x[i] * theta_star[i]
                    e = np.exp(-abs(t))
                    inv = 1.0 / (1.0 + e)
                    prob1 = inv if t >= 0 else e * inv
                    y = 1.0 if np.random.random() < prob1 else -1.0  # noqa: NPY002
                    for s in range(S):
                        acc = 0.0
                        for i in range(d):
                            acc += x[i] * theta[s, p, i]
                        sg = sigmoid(-y * acc)  # the same vectorizable exp as convkit's
                        c = g * y * sg  # theta -= g * (-y sigmoid(-y <x, theta>)) x
                        for i in range(d):
                            theta[s, p, i] += c * x[i]
                            mean[s, i] += theta[s, p, i]
                for s in range(S):
                    for i in range(d):
                        mean[s, i] /= P
                        sums[s, i] += mean[s, i]
                    if masks[s, k] and P > 1:
                        for p in range(P):
                            for i in range(d):
                                theta[s, p, i] = mean[s, i]
            for s in range(S):
                acc = 0.0
                for i in range(d):
                    ei = sums[s, i] / n - theta_star[i]
                    for j in range(d):
                        acc += ei * H_star[i, j] * (sums[s, j] / n - theta_star[j])
                err[s, r] = acc
        return err

    return fused


def fused_local_sgd_logistic(
    sqrt_h: np.ndarray,
    theta_star: np.ndarray,
    theta0: np.ndarray,
    H_star: np.ndarray,
    gammas: np.ndarray,
    masks: np.ndarray,
    workers: int,
    replicates: int,
    seed: int = 0,
) -> np.ndarray:
    """Final ``||theta_bar - theta*||_{H*}^2`` (shape (S, replicates)) of ``S`` Local-SGD
    schedules (``masks`` (S, n) bool: average after step ``k + 1`` where ``masks[s, k]``) with
    step sizes ``gammas`` (n,), ``workers`` workers of batch 1, started at ``theta0``."""
    global _FUSED
    if _FUSED is None:
        _FUSED = _compile()
    f = np.float64
    return _FUSED(
        np.ascontiguousarray(sqrt_h, dtype=f),
        np.ascontiguousarray(theta_star, dtype=f),
        np.ascontiguousarray(theta0, dtype=f),
        np.ascontiguousarray(H_star, dtype=f),
        np.ascontiguousarray(gammas, dtype=f),
        np.ascontiguousarray(masks, dtype=np.bool_),
        int(workers),
        int(replicates),
        int(seed),
    )
