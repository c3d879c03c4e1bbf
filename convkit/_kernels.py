"""Fused compiled kernels for the hottest loops (optional, through numba).

The generic array-API code path of a least-squares SGD step makes about six passes over the
``(R, P, d)`` state (residuals, gradient, scaling, update).  The fused kernel below makes one,
so that a step costs little more than drawing its Gaussian samples (see
``benchmarks/bench_core.py``).  It is used only for NumPy arrays when numba is installed
(``pip install convkit[fast]``); results agree with the generic path to rounding error
(tested).  Set ``CONVKIT_NO_NUMBA=1`` to disable it.

The top-k kernels (:func:`topk_compress`, and :func:`topk_choco_update` (CHOCO-SGD, order
of the reference code), :func:`topk_choco_copies_update` (CHOCO-SGD, order of the paper) and
:func:`topk_deepsqueeze_update`, which fuse the selection with the update that follows it) select exactly the entries of the generic path and round exactly
as it does: their results are bit-identical (``tests/test_topk_fused.py``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = [
    "ls_sgd_update",
    "numba_available",
    "topk_choco_copies_update",
    "topk_choco_update",
    "topk_compress",
    "topk_deepsqueeze_update",
]

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


# --------------------------------------------------------------------------- top-k
#
# Selection rule (that of the generic path of convkit.compression.TopK and of
# convkit.backend.topk_mask, so that every path selects the same entries): per row, the
# threshold t is the k-th largest score |u_j|, from NumPy's in-place ``partition`` of a
# score buffer (NaN sorts above everything); entries with
# |u_j| > t are kept, then entries with |u_j| == t in index order until k are kept (ties:
# lowest indices).  The fused CHOCO-SGD / DeepSqueeze kernels wrap the partition between one
# compiled pass before it (the update that produces the compressed vector, writing the scores)
# and one after it (the selection and the update that consumes it), replacing about six NumPy
# passes and three temporaries.  (A compiled per-row selection was tried: heap, quickselect
# and bounded candidate filters all measured no faster than NumPy's partition here.)
#
# Fast-math: "contract", "arcp" and "afn" only.  No "nnan" / "ninf" (diverging runs keep their
# inf / NaN), and no "reassoc" / "nsz": the fused updates round exactly as the NumPy
# expressions they replace (same operations in the same order, signed zeros included), so
# results are bit-identical (tests/test_topk_fused.py).

#: the compiled top-k kernels (a namespace); "auto" until first use, None when numba cannot be
#: used.  Setting it (or the package-wide switch ``_KERNEL``) to None selects the generic path.
_TOPK: Any = "auto"


def _get_topk() -> Any:
    global _TOPK
    if _KERNEL is None:  # the package-wide "generic path" switch
        return None
    if isinstance(_TOPK, str):
        _TOPK = _compile_topk() if _get_kernel() is not None else None
    return _TOPK


def _compile_topk() -> Any:  # pragma: no cover - compiled code is not traced by coverage
    import types

    import numba

    opts = {"cache": True, "nogil": True, "fastmath": {"contract", "arcp", "afn"}}

    @numba.njit(**opts)
    def keep_row(u, t, k, q):
        # q = u where |u| > t, then where |u| == t in index order until k kept; 0 elsewhere.
        # First the common case in one branch-free pass: keep |u| >= t; that is the rule
        # unless more than k entries tie at t (then the row is redone with the tie rule).
        d = u.shape[0]
        kept = 0
        for j in range(d):
            v = u[j]
            above = abs(v) >= t
            q[j] = v if above else 0.0
            kept += above
        if kept <= k:
            return
        kept = 0
        for j in range(d):
            v = u[j]
            above = abs(v) > t
            q[j] = v if above else 0.0
            kept += above
        j = 0
        while kept < k and j < d:
            if abs(u[j]) == t:
                q[j] = u[j]
                kept += 1
            j += 1

    @numba.njit(**opts)
    def keep_above(x, thr, k, out):
        # out[r] = top-k of x[r], thr[r] being the k-th largest |x[r]|
        for r in range(x.shape[0]):
            keep_row(x[r], thr[r], k, out[r])

    @numba.njit(**opts)
    def choco_pre(x, m, xh, score):
        # x <- (x + m) - xh;  score = |x - xh|
        n, d = x.shape
        for r in range(n):
            for j in range(d):
                v = x[r, j] + m[r, j]
                v = v - xh[r, j]
                x[r, j] = v
                score[r, j] = abs(v - xh[r, j])

    @numba.njit(**opts)
    def choco_post(x, xh, thr, k):
        # xh <- xh + topk(x - xh), the k-th largest |x - xh| of row r being thr[r]
        n, d = x.shape
        u = np.empty(d, dtype=x.dtype)
        q = np.empty(d, dtype=x.dtype)
        for r in range(n):
            for j in range(d):
                u[j] = x[r, j] - xh[r, j]
            keep_row(u, thr[r], k, q)
            for j in range(d):
                xh[r, j] = xh[r, j] + q[j]

    @numba.njit(**opts)
    def choco_score(x, xh, score):
        # score = |x - xh|
        n, d = x.shape
        for r in range(n):
            for j in range(d):
                score[r, j] = abs(x[r, j] - xh[r, j])

    @numba.njit(**opts)
    def deepsqueeze_pre(x, delta, score):
        # delta <- delta + x;  score = |delta|
        n, d = x.shape
        for r in range(n):
            for j in range(d):
                e = delta[r, j] + x[r, j]
                delta[r, j] = e
                score[r, j] = abs(e)

    @numba.njit(**opts)
    def deepsqueeze_post(x, delta, thr, k, v):
        # v = topk(delta) (thr[r]: the k-th largest |delta| of row r);  delta -= v;  x -= v
        keep_above(delta, thr, k, v)
        n, d = x.shape
        for r in range(n):
            for j in range(d):
                c = v[r, j]
                delta[r, j] = delta[r, j] - c
                x[r, j] = x[r, j] - c

    return types.SimpleNamespace(
        keep_above=keep_above,
        choco_pre=choco_pre,
        choco_post=choco_post,
        choco_score=choco_score,
        deepsqueeze_pre=deepsqueeze_pre,
        deepsqueeze_post=deepsqueeze_post,
    )


def _topk_ready(k: int, *arrays: Any) -> Any:
    """The compiled kernels if they apply to ``arrays`` (NumPy, one float dtype, one shape,
    C-contiguous, at least one axis) and ``1 <= k``; else None."""
    first = arrays[0]
    if type(first) is not np.ndarray or first.ndim < 1 or k < 1:
        return None
    dt, shape = first.dtype, first.shape
    if dt not in (np.float64, np.float32):
        return None
    for a in arrays:
        if type(a) is not np.ndarray or a.dtype != dt or a.shape != shape:
            return None
        if not a.flags.c_contiguous:
            return None
    return _get_topk()


def _thresholds(score: np.ndarray, k: int) -> np.ndarray:
    """The k-th largest entry of every row of the 2-D ``score`` (partitioned in place)."""
    d = score.shape[1]
    score.partition(d - k, axis=-1)
    return np.ascontiguousarray(score[:, d - k])


def topk_compress(x: Any, k: int) -> Any:
    """Top-k of every row (last axis) of a NumPy float array, or None when the compiled
    kernel cannot be used (numba missing or disabled, another array type or dtype).

    The threshold is the k-th largest ``|x|`` (one in-place ``partition`` of the scores); one
    compiled pass writes the output, keeping exactly ``k`` entries (ties at the threshold in
    index order).  Measured 2.5 times faster than partition + masking in NumPy on a
    (1024, 100) block.  ``k >= d`` returns a copy."""
    if type(x) is not np.ndarray or x.ndim < 1:
        return None
    flat = np.ascontiguousarray(x)
    kernels = _topk_ready(k, flat)
    if kernels is None:
        return None
    d = x.shape[-1]
    if k >= d:
        return flat.copy().reshape(x.shape)
    flat = flat.reshape(-1, d)
    out = np.empty_like(flat)
    kernels.keep_above(flat, _thresholds(np.abs(flat), k), k, out)
    return out.reshape(x.shape)


def topk_choco_update(x: Any, mixed: Any, x_hat: Any, k: int) -> bool:
    """CHOCO-SGD's update after the gradient step, fused with top-k, in place:
    ``x <- (x + mixed) - x_hat`` then ``x_hat <- x_hat + topk(x - x_hat)`` (row-wise, last
    axis), with the same roundings as those NumPy expressions.  ``mixed`` is
    ``W_gc x_hat``.  Returns False (and does nothing) when the compiled kernels cannot be used
    for these arrays."""
    kernels = _topk_ready(k, x, mixed, x_hat)
    if kernels is None or k >= x.shape[-1]:
        return False
    d = x.shape[-1]
    x2, xh2 = x.reshape(-1, d), x_hat.reshape(-1, d)
    score = np.empty_like(x2)
    kernels.choco_pre(x2, mixed.reshape(-1, d), xh2, score)
    kernels.choco_post(x2, xh2, _thresholds(score, k), k)
    return True


def topk_choco_copies_update(x: Any, x_hat: Any, k: int) -> bool:
    """CHOCO-SGD's copy update in the paper's order, fused with top-k, in place:
    ``x_hat <- x_hat + topk(x - x_hat)`` (row-wise, last axis; ``x`` is the model after the
    gradient step and is not changed), with the same roundings as
    ``x_hat += TopK.compress(x - x_hat)``.  Returns False (and does nothing) when the
    compiled kernels cannot be used for these arrays."""
    kernels = _topk_ready(k, x, x_hat)
    if kernels is None or k >= x.shape[-1]:
        return False
    d = x.shape[-1]
    x2, xh2 = x.reshape(-1, d), x_hat.reshape(-1, d)
    score = np.empty_like(x2)
    kernels.choco_score(x2, xh2, score)
    kernels.choco_post(x2, xh2, _thresholds(score, k), k)
    return True


def topk_deepsqueeze_update(x: Any, delta: Any, k: int) -> Any:
    """DeepSqueeze's compression and error-memory update fused with top-k, in place:
    ``delta <- delta + x``, ``v = topk(delta)``, ``delta <- delta - v``, ``x <- x - v``
    (row-wise, last axis; the same roundings as those NumPy expressions).  Returns the new
    message array ``v``, or None (doing nothing) when the compiled kernels cannot be used."""
    kernels = _topk_ready(k, x, delta)
    if kernels is None or k >= x.shape[-1]:
        return None
    d = x.shape[-1]
    x2, delta2 = x.reshape(-1, d), delta.reshape(-1, d)
    v = np.empty_like(x2)
    score = np.empty_like(x2)
    kernels.deepsqueeze_pre(x2, delta2, score)
    kernels.deepsqueeze_post(x2, delta2, _thresholds(score, k), k, v)
    return v.reshape(x.shape)
