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

#: the compiled SGD kernel; "auto" until first use, None when numba cannot be used.
#: (Tests switch the generic path on by setting it to None: restoring the previous value,
#: "auto" or the kernel, leaves the module in a consistent state.)
_KERNEL: Any = "auto"


def numba_available() -> bool:
    """Whether the fused kernels can be used."""
    return _get_kernel() is not None


def _get_kernel() -> Any:
    global _KERNEL
    if isinstance(_KERNEL, str):
        _KERNEL = _compile()
    return _KERNEL


def _compile() -> Any:
    if os.environ.get("CONVKIT_NO_NUMBA"):
        return None
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True, fastmath={"reassoc", "contract"}, nogil=True, error_model="numpy")
    def kernel(theta, z, eps, scale, theta_star, noise, gamma, mean, P, b):  # pragma: no cover
        # theta: (R*P, d) rows = (replicate, worker); z: (R*P*b, d); eps: (R*P*b,)
        N, d = theta.shape
        R = N // P
        res = np.empty(b, dtype=theta.dtype)
        step = gamma / b
        want_mean = mean.shape[0] == R
        for r in range(R):
            if want_mean:
                for i in range(d):
                    mean[r, i] = 0.0
            for p in range(P):
                row = r * P + p
                for j in range(b):
                    srow = row * b + j
                    acc = 0.0
                    for i in range(d):
                        acc += z[srow, i] * scale[i] * (theta[row, i] - theta_star[i])
                    res[j] = (acc - noise * eps[srow]) * step
                for j in range(b):
                    srow = row * b + j
                    rj = res[j]
                    for i in range(d):
                        theta[row, i] -= rj * z[srow, i] * scale[i]
                if want_mean:
                    for i in range(d):
                        mean[r, i] += theta[row, i]
            if want_mean:
                for i in range(d):
                    mean[r, i] /= P

    return kernel


def ls_sgd_update(
    theta: np.ndarray,
    z: np.ndarray,
    eps: np.ndarray,
    scale: np.ndarray,
    theta_star: np.ndarray,
    noise: float,
    gamma: float,
    mean: np.ndarray | None = None,
) -> bool:
    """In place ``theta -= gamma/b sum_j x_j (<x_j, theta - theta*> - noise eps_j)`` with
    features ``x_j = z_j * scale``; if ``mean`` (R, d) is given it receives the workers' mean of
    the updated ``theta``.

    Returns False (and does nothing) when the fused kernel cannot be used for these arrays.
    """
    kernel = _get_kernel()
    dt = theta.dtype
    if (
        kernel is None
        or type(theta) is not np.ndarray
        or type(z) is not np.ndarray
        or not theta.flags.c_contiguous
        or dt not in (np.float64, np.float32)
        or z.dtype != dt
        or eps.dtype != dt
        or (mean is not None and (type(mean) is not np.ndarray or mean.dtype != dt))
    ):
        return False
    R, P, b, d = z.shape
    out = mean if mean is not None else np.empty((0, 0), dtype=dt)
    kernel(
        theta.reshape(R * P, d),
        z.reshape(R * P * b, d),
        eps.reshape(R * P * b),
        scale,
        theta_star,
        dt.type(noise),
        dt.type(gamma),
        out,
        P,
        b,
    )
    return True


_TOPK: Any = None


def _get_topk() -> Any:
    global _TOPK
    if _TOPK is not None or _get_kernel() is None:  # numba missing or disabled
        return _TOPK
    import numba

    @numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def keep_above(x, thr, k, out):  # pragma: no cover - compiled
        # out[r] = x[r] where |x| > thr[r], then ties |x| == thr[r] in index order up to k kept
        n, d = x.shape
        for r in range(n):
            t = thr[r]
            kept = 0
            for j in range(d):
                v = x[r, j]
                if abs(v) > t:
                    out[r, j] = v
                    kept += 1
                else:
                    out[r, j] = 0.0
            j = 0
            while kept < k and j < d:
                if abs(x[r, j]) == t:
                    out[r, j] = x[r, j]
                    kept += 1
                j += 1

    _TOPK = keep_above
    return _TOPK


def topk_compress(x: Any, k: int) -> Any:
    """Top-k of every row (last axis) of a NumPy float array, or None when numba cannot be
    used.  The threshold is the k-th largest ``|x|`` (one in-place ``partition`` of the
    scores); one compiled pass writes the output, keeping exactly ``k`` entries (ties at the
    threshold in index order).  Measured 2.5 times faster than partition + masking in NumPy
    on a (1024, 100) block."""
    if type(x) is not np.ndarray or x.dtype not in (np.float64, np.float32) or x.ndim < 1:
        return None
    kernel = _get_topk()
    if kernel is None:
        return None
    d = x.shape[-1]
    flat = np.ascontiguousarray(x).reshape(-1, d)
    score = np.abs(flat)
    score.partition(d - k, axis=-1)
    thr = np.ascontiguousarray(score[:, d - k])
    out = np.empty_like(flat)
    kernel(flat, thr, k, out)
    return out.reshape(x.shape)
