"""Fused compiled kernels for the hottest loops (optional, through numba).

The generic array-API code path of a least-squares SGD step makes about six passes over the
``(R, P, d)`` state (residuals, gradient, scaling, update).  The fused kernel below makes one,
so that a step costs little more than drawing its Gaussian samples (see
``benchmarks/bench_core.py``).  It is used only for NumPy arrays when numba is installed
(``pip install convkit[fast]``); results agree with the generic path to rounding error
(tested).  Set ``CONVKIT_NO_NUMBA=1`` to disable it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["ls_sgd_update", "numba_available"]

_KERNEL: Any = None
_TRIED = False


def numba_available() -> bool:
    """Whether the fused kernels can be used."""
    return _get_kernel() is not None


def _get_kernel() -> Any:
    global _KERNEL, _TRIED
    if _TRIED:
        return _KERNEL
    _TRIED = True
    if os.environ.get("CONVKIT_NO_NUMBA"):
        return None
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True, fastmath=False, nogil=True)
    def kernel(theta, x, eps, theta_star, noise, gamma):  # pragma: no cover - compiled
        R, P, b, d = x.shape
        res = np.empty(b, dtype=theta.dtype)
        scale = gamma / b
        for r in range(R):
            for p in range(P):
                for j in range(b):
                    acc = 0.0
                    for i in range(d):
                        acc += x[r, p, j, i] * (theta[r, p, i] - theta_star[i])
                    res[j] = (acc - noise * eps[r, p, j]) * scale
                for j in range(b):
                    rj = res[j]
                    for i in range(d):
                        theta[r, p, i] -= rj * x[r, p, j, i]

    _KERNEL = kernel
    return _KERNEL


def ls_sgd_update(
    theta: np.ndarray,
    x: np.ndarray,
    eps: np.ndarray,
    theta_star: np.ndarray,
    noise: float,
    gamma: float,
) -> bool:
    """In place ``theta -= gamma/b sum_j x_j (<x_j, theta - theta*> - noise eps_j)``.

    Returns False (and does nothing) when the fused kernel cannot be used for these arrays.
    """
    kernel = _get_kernel()
    if (
        kernel is None
        or type(theta) is not np.ndarray
        or type(x) is not np.ndarray
        or not theta.flags.c_contiguous
        or theta.dtype != x.dtype
        or theta.dtype not in (np.float64, np.float32)
    ):
        return False
    kernel(
        theta,
        x,
        eps,
        theta_star.astype(theta.dtype),
        theta.dtype.type(noise),
        theta.dtype.type(gamma),
    )
    return True
