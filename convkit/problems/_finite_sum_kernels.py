"""The finite-sum problems' fused SGD step (numba), dense and CSR data: one pass per
(replicate, worker) computes the batch's residuals ``<a_i, theta>``, the loss derivatives and
the update ``theta <- theta - gamma (lam theta + (1/b) sum_j l'_j a_j)``, and optionally the
workers' mean (:meth:`convkit.problems.finite_sum.FiniteSum.sgd_update`).

Compiled with ``reassoc`` and ``contract`` (the dot products vectorized): LLVM emits the same
256-bit FMA code for AVX2 and AVX512 hosts, so the steps have the same bits on those CPUs
(README, "Same numbers on any CPU", and its stated limit).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._jit import cacheable
from .._kernel_switch import compiled

__all__ = ["FINITE_SUM_KERNELS", "get_kernels"]

# ---------------------------------------------------------------------- fused kernels
#: reassociation lets LLVM vectorise the dot products (sums in a different order, to rounding
#: error); no "no-NaN/no-inf" assumptions, so divergence still shows up as inf/NaN
_FAST = {"reassoc", "contract"}
#: the name of the (dense, csr) kernels in :func:`compiled`'s cache
FINITE_SUM_KERNELS = "problems.finite_sum.steps"


def get_kernels() -> Any:
    """(dense, csr) numba kernels of the in-place SGD step, or None (also while the kernels
    are switched off: ``convkit.kernels(enabled=False)``); built once, under a lock, by
    :func:`convkit._kernel_switch.compiled` (simulate runs replicate blocks on threads)."""
    return compiled(FINITE_SUM_KERNELS, _compile_kernels)


def _compile_kernels() -> Any:
    """Compile the (dense, csr) kernels."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def dloss(z, y, lossc):  # pragma: no cover - compiled
        if lossc == 0:
            return z - y
        m = -y * z
        if m >= 0:
            return -y / (1.0 + np.exp(-m))
        e = np.exp(m)
        return -y * e / (1.0 + e)

    cacheable(dloss, "finite_sum.dloss")  # a closure variable of the kernels (convkit._jit)

    @numba.njit(cache=True, nogil=True, fastmath=_FAST)
    def dense(theta, idx, A, y, lossc, lam, gamma, mean, want):  # pragma: no cover
        R, P, b = idx.shape
        d = theta.shape[2]
        c = np.empty(b)
        invP = 1.0 / P
        for r in range(R):
            if want:
                for k in range(d):
                    mean[r, k] = 0.0
            for p in range(P):
                for j in range(b):
                    i = idx[r, p, j]
                    acc = 0.0
                    for k in range(d):
                        acc += A[i, k] * theta[r, p, k]
                    c[j] = dloss(acc, y[i], lossc) * gamma / b
                if lam != 0:
                    for k in range(d):
                        theta[r, p, k] -= gamma * lam * theta[r, p, k]
                for j in range(b):
                    i = idx[r, p, j]
                    cj = c[j]
                    for k in range(d):
                        theta[r, p, k] -= cj * A[i, k]
                if want:
                    for k in range(d):
                        mean[r, k] += theta[r, p, k] * invP

    @numba.njit(cache=True, nogil=True, fastmath=_FAST)
    def csr(
        theta, idx, indptr, indices, data, y, lossc, lam, gamma, mean, want
    ):  # pragma: no cover
        R, P, b = idx.shape
        d = theta.shape[2]
        c = np.empty(b)
        invP = 1.0 / P
        for r in range(R):
            if want:
                for k in range(d):
                    mean[r, k] = 0.0
            for p in range(P):
                for j in range(b):
                    i = idx[r, p, j]
                    acc = 0.0
                    for q in range(indptr[i], indptr[i + 1]):
                        acc += data[q] * theta[r, p, indices[q]]
                    c[j] = dloss(acc, y[i], lossc) * gamma / b
                if lam != 0:
                    for k in range(d):
                        theta[r, p, k] -= gamma * lam * theta[r, p, k]
                for j in range(b):
                    i = idx[r, p, j]
                    cj = c[j]
                    for q in range(indptr[i], indptr[i + 1]):
                        theta[r, p, indices[q]] -= cj * data[q]
                if want:
                    for k in range(d):
                        mean[r, k] += theta[r, p, k] * invP

    return (dense, csr)
