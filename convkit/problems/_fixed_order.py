"""Dot products and vector-matrix products summed in an order fixed by the code, not by the CPU.

The quadratic problems' metrics (``||theta - theta*||_H^2``, ``||theta - theta*||^2``) and
their stochastic gradients are sums of products.  Through the BLAS (``vecdot``, ``@``) the
summation order, and whether a product and a sum are fused into one rounding (FMA), is the
kernel's that OpenBLAS selects for the CPU at run time: an AVX512 and an AVX2 machine give
different last bits for the same call (issue 36, measured: up to 7e-16 relative in the excess
risk, up to 1e-9 in a rotated gradient), and a top-k selection or a divergence test fed by
them may then decide otherwise.  The two functions here sum in an order that only the array
shapes decide:

* :func:`row_dot`: ``sum_i a_i b_i`` over the last axis as ``sum(a * b, axis=-1)``: each
  product rounded on its own (an elementwise multiply: one IEEE rounding whatever the SIMD
  width), then NumPy's add-reduction, whose order is fixed in NumPy's source
  (``pairwise_sum`` of ``numpy/_core/src/umath/loops_utils.h.src``, called by the dispatched
  ``DOUBLE_add`` / ``FLOAT_add`` loops for a reduction: fewer than 8 terms left to right from
  ``-0.0``; up to 128 terms in 8 explicit accumulators ``r[j] += a[8 m + j]`` combined as
  ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the tail left to right; more
  than 128 split in halves rounded down to a multiple of 8; the comment there: "allows
  vectorization with avx without changing summation ordering");
* :func:`vec_mat`: ``y_j = sum_i v_i M_ij`` summed in increasing ``i`` (``y_j = v_0 M_0j``,
  then ``y_j += v_i M_ij``, each product rounded, then the sum): a compiled loop (numba,
  without fast-math: no reassociation, no contraction into FMA; vectorized over ``j`` only,
  which does not change any sum) for NumPy arrays when convkit's kernels run, otherwise
  NumPy's ``sum(v[..., :, None] * M, axis=-2)`` by row blocks (a reduction over a non-last
  axis adds the rows one after the other, in increasing ``i``), which gives the same bits
  (``tests/test_fixed_order_metrics.py``).  Arrays of other libraries (CuPy, ...) use their
  own ``v @ M``: their results are not claimed to be the same on every device.

Both stay within the usual bound of a dot product of length ``m`` in any order,
``gamma_m sum_i |a_i b_i|`` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd
ed., Thm 3.1), so the values differ from the BLAS's by rounding only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernel_switch import compiled
from ..backend import array_library

__all__ = ["cholesky_solve", "orthogonal_factor", "row_dot", "vec_mat"]

#: elements of the temporary ``v[..., :, None] * M`` of NumPy's :func:`vec_mat` per row block
#: (256 KiB of float64: the block stays in cache)
_BLOCK_ELEMENTS = 1 << 15


def row_dot(xp: Any, a: Any, b: Any) -> Any:
    """``sum_i a[..., i] b[..., i]`` (``a``, ``b`` broadcast), summed in the order of NumPy's
    pairwise add-reduction over the last axis (module docstring): the same bits on every
    x86-64 CPU, where ``xp.vecdot`` sums in the order of the BLAS kernel the CPU selects."""
    return xp.sum(a * b, axis=-1)


def _compile() -> Any:
    import numba

    # no fastmath: every product and sum rounded as written (no reassociation, no FMA)
    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def vec_mat_rows(v, M, out):  # pragma: no cover - compiled code is not traced
        # v: (N, m); M: (m, n); out: (N, n); out[r, j] = sum_i v[r, i] M[i, j], i increasing
        N, m = v.shape
        n = M.shape[1]
        for r in range(N):
            a = v[r, 0]
            for j in range(n):
                out[r, j] = a * M[0, j]
            for i in range(1, m):
                a = v[r, i]
                for j in range(n):
                    out[r, j] += a * M[i, j]

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def reflect(A, v, k):  # pragma: no cover - compiled code is not traced
        # A[k:, k:] -= (2 v) (v^T A[k:, k:]), v^T A summed in increasing row
        m, n = A.shape
        w = np.empty(n - k, dtype=A.dtype)
        a = v[0]
        for j in range(k, n):
            w[j - k] = a * A[k, j]
        for i in range(1, m - k):
            a = v[i]
            for j in range(k, n):
                w[j - k] += a * A[k + i, j]
        for i in range(m - k):
            t = 2.0 * v[i]
            for j in range(k, n):
                A[k + i, j] -= t * w[j - k]

    return vec_mat_rows, reflect


def _kernels() -> Any:
    """The compiled loops (:func:`vec_mat`'s rows, a Householder reflection), or None
    (:func:`compiled`: numba missing, ``CONVKIT_NO_NUMBA`` or ``convkit.kernels`` off)."""
    return compiled("problems._fixed_order", _compile)


def vec_mat(xp: Any, v: Any, M: Any) -> Any:
    """``v @ M`` for ``v`` of shape ``(..., m)`` and a matrix ``M`` ``(m, n)`` of ``v``'s
    dtype: ``y_j = sum_i v_i M_ij`` summed in increasing ``i``, each product rounded (module
    docstring); NumPy gives the same bits with or without the compiled kernel, on every
    x86-64 CPU.  Other array libraries: their own ``v @ M``."""
    if array_library(v) != "numpy":
        return v @ M
    m, n = M.shape
    if v.shape[-1] != m:
        raise ValueError(f"vec_mat: v's last axis has {v.shape[-1]} entries, M has {m} rows")
    lead = v.shape[:-1]
    rows = np.ascontiguousarray(v).reshape(-1, m)
    Mc = np.ascontiguousarray(M, dtype=v.dtype)
    out = np.empty((rows.shape[0], n), dtype=v.dtype)
    kernels = _kernels()
    if kernels is not None and m > 0 and out.dtype in (np.float64, np.float32):
        kernels[0](rows, Mc, out)
        return out.reshape(*lead, n)
    block = max(1, _BLOCK_ELEMENTS // max(1, m * n))
    for a in range(0, rows.shape[0], block):
        np.sum(rows[a : a + block, :, None] * Mc, axis=-2, out=out[a : a + block])
    return out.reshape(*lead, n)


def orthogonal_factor(z: np.ndarray) -> np.ndarray:
    """The orthogonal factor ``Q`` of ``z = Q R`` (a square float64 NumPy matrix) with ``R``'s
    diagonal made non-negative (``Q`` times the signs of ``R``'s diagonal): for a Gaussian
    ``z`` a Haar-random orthogonal matrix (Mezzadri, "How to generate random matrices from the
    classical compact groups", Notices AMS 54, 2007; SciPy's ``ortho_group``).

    Householder QR as LAPACK's ``dgeqr2`` / ``dorg2r`` compute it (Golub & Van Loan, *Matrix
    Computations*, 4th ed., Alg. 5.2.1 and Sec. 5.1.6): for ``k = 0 .. n-2`` the reflector
    ``H_k = I - 2 v v^T`` with ``v`` the unit vector along ``x - alpha e_1``, ``x`` the
    column's part from row ``k``, ``alpha = -sign(x_0) ||x||`` (``R_kk``); then
    ``Q = H_0 H_1 ... H_(n-2)`` accumulated backwards from the identity.  Every sum through
    :func:`row_dot` and :func:`vec_mat` (an order fixed by the code), so that ``Q`` has the
    same bits on every x86-64 CPU, where LAPACK's QR sums in the order of the BLAS kernel
    the CPU selects.  ``O(n^3)`` operations, a loop over the ``n`` columns.
    """
    A = np.array(z, dtype=np.float64)
    n = A.shape[0]
    if A.shape != (n, n):
        raise ValueError(f"orthogonal_factor: z must be a square matrix, got shape {A.shape}")
    signs = np.ones(n)
    reflectors = []
    for k in range(n - 1):
        x = A[k:, k]
        norm = np.sqrt(row_dot(np, x, x))
        alpha = norm if x[0] < 0 else -norm
        v = x.copy()
        v[0] -= alpha
        vnorm = np.sqrt(row_dot(np, v, v))
        if vnorm == 0.0:  # a zero column: no reflection
            reflectors.append(None)
            continue
        v /= vnorm
        _reflect(A, v, k)
        reflectors.append(v)
        signs[k] = -1.0 if alpha < 0 else 1.0
    signs[n - 1] = -1.0 if A[n - 1, n - 1] < 0 else 1.0
    Q = np.eye(n)
    for k in range(n - 2, -1, -1):
        v = reflectors[k]
        if v is not None:
            _reflect(Q, v, k)
    return Q * signs


def _reflect(A: np.ndarray, v: np.ndarray, k: int) -> None:
    """In place ``A[k:, k:] -= (2 v) (v^T A[k:, k:])`` (``A`` C-contiguous float64), the
    product ``v^T A`` summed in increasing row (:func:`vec_mat`): the compiled loop, or the
    same operations in NumPy (the same bits)."""
    kernels = _kernels()
    if kernels is not None:
        kernels[1](A, v, k)
    else:
        A[k:, k:] -= (2.0 * v)[:, None] * vec_mat(np, v, A[k:, k:])


def cholesky_solve(H: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """``H^-1 g`` for a symmetric positive definite float64 matrix ``H`` ``(d, d)`` and a
    vector ``g`` ``(d,)`` by the Cholesky factor ``H = L L^T`` and two triangular solves
    (Golub & Van Loan, *Matrix Computations*, 4th ed., Alg. 4.2.2 (the gaxpy Cholesky) and
    Alg. 3.1.1 / 3.1.2), or None when a pivot is not positive and finite (``H`` not
    numerically positive definite: the caller falls back to another solver).

    ``L_jj = sqrt(H_jj - sum_{k<j} L_jk^2)``, ``L_ij = (H_ij - sum_{k<j} L_ik L_jk) / L_jj``;
    then ``L y = g``, ``L^T x = y``.  Every sum is a :func:`row_dot` (NumPy's pairwise sum of
    the elementwise products, an order fixed in NumPy's source), so that the result has the
    same bits on every x86-64 CPU, where LAPACK's ``potrf`` / ``potrs`` sum in the order of
    the BLAS kernel the CPU selects.  ``O(d^3)`` operations in ``3 d`` vectorized steps;
    backward stable like any Cholesky (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., Thm 10.3)."""
    H = np.asarray(H, dtype=np.float64)
    d = H.shape[0]
    if H.shape != (d, d) or np.shape(g) != (d,):
        raise ValueError(
            f"cholesky_solve: H must be (d, d) and g (d,), got {H.shape} and {np.shape(g)}"
        )
    L = np.zeros((d, d))
    for j in range(d):
        pivot = H[j, j] - row_dot(np, L[j, :j], L[j, :j])
        if not (np.isfinite(pivot) and pivot > 0.0):
            return None
        L[j, j] = np.sqrt(pivot)
        if j + 1 < d:
            L[j + 1 :, j] = (H[j + 1 :, j] - row_dot(np, L[j + 1 :, :j], L[j, :j])) / L[j, j]
    y = np.empty(d)
    for i in range(d):
        y[i] = (g[i] - row_dot(np, L[i, :i], y[:i])) / L[i, i]
    x = np.empty(d)
    for i in range(d - 1, -1, -1):
        x[i] = (y[i] - row_dot(np, L[i + 1 :, i], x[i + 1 :])) / L[i, i]
    return x
