"""Eigenvalues of a real symmetric matrix with the same bits on every x86-64 CPU.

LAPACK's ``dsyevd`` (behind ``np.linalg.eigvalsh``) reduces the matrix to tridiagonal form
with BLAS calls whose summation order, and whether a product and a sum are fused into one
rounding (FMA), belong to the kernel that OpenBLAS selects for the CPU at run time: an
AVX512 and an AVX2 machine give different last bits for the same matrix (issue 36, measured:
a mixing matrix's spectral gap moved by 6.6e-15).  :func:`symmetric_eigenvalues` computes the
eigenvalues with operations in an order that only the matrix's size decides.

The method: cyclic Jacobi
-------------------------
Golub & Van Loan, *Matrix Computations*, 4th ed., Alg. 8.5.3 (cyclic Jacobi), with the
rotation of Alg. 8.5.1 (``symSchur2``) applied by Rutishauser's formulas (Rutishauser, "The
Jacobi method for real symmetric matrices", Numer. Math. 9, 1966; Handbook for Automatic
Computation II/1, 1971; Press et al., *Numerical Recipes*, 3rd ed., Sec. 11.1).  A sweep visits
the pairs ``(p, q)``, ``p < q``, row by row (``(0, 1), (0, 2), ..., (0, n-1), (1, 2), ...``);
for each with ``a_pq != 0``::

    theta = (a_qq - a_pp) / (2 a_pq)
    t     = sign(theta) / (|theta| + sqrt(1 + theta^2))    (sign(0) = +1; t = 1 / (2 theta)
                                                             once |theta| > 1e150, where
                                                             theta^2 would overflow)
    c     = 1 / sqrt(1 + t^2),   s = t c,   tau = s / (1 + c)
    a_pp <- a_pp - t a_pq,   a_qq <- a_qq + t a_pq,   a_pq = a_qp <- 0
    for r != p, q (g = a_rp, h = a_rq):
        a_rp = a_pr <- g - s (h + g tau)
        a_rq = a_qr <- h + s (g - h tau)

which is ``A <- J^T A J`` with the rotation ``J(p, q, theta)`` that zeroes ``a_pq``
(``|t| <= 1``: the smaller rotation angle, ``|angle| <= pi / 4``, which the convergence
proof needs).  Before each sweep ``off(A) = (sum_{i != j} a_ij^2)^(1/2)`` is compared with
``||A||_F`` of the input: the iteration stops at the first sweep boundary where
``off(A) <= TOL ||A||_F``, ``TOL = 2^-53`` (the unit roundoff ``u``); Jacobi converges
quadratically once the eigenvalues are separated from the off-diagonal mass (Schönhage 1964,
Wilkinson 1962; GvL Sec. 8.5.3), typically in 6 to 10 sweeps for ``n <= 100``.  More than
:data:`MAX_SWEEPS` sweeps raise.  The eigenvalues are the diagonal, sorted ascending (like
``eigvalsh``; sorting does no arithmetic).  The input is first scaled by a power of two
(exact) so that its largest entry lies in ``[1/2, 1)``, and the eigenvalues scaled back
(exact): squares in ``off(A)`` neither overflow nor depend on the units.

Why it is portable
------------------
Every rotation is a fixed sequence of IEEE-754 multiplications, additions, divisions and
square roots, each correctly rounded whatever the CPU: a numba kernel compiled without
fast-math (no reassociation, no contraction into FMA; ``convkit._kernel_switch.compiled``),
and, when the kernels are off or numba is missing, the same operations in NumPy (the
rotation's scalars in Python floats, the two rows/columns updated by elementwise ufuncs, one
rounding per element whatever the SIMD width), which gives the same bits
(``tests/test_symmetric_eigen.py``).  ``off(A)`` and ``||A||_F`` are sums of squares by
NumPy's pairwise add-reduction over the last axis, whose order is fixed in NumPy's source
(:func:`convkit.problems._fixed_order.row_dot`), shared by both paths: the stop decision is
the same too.

Accuracy
--------
Each rotation is backward stable, so the computed eigenvalues are those of ``A + E`` with
``||E||_F`` of order ``k u ||A||_F`` after ``k`` sweeps (GvL Sec. 8.5.4; Demmel & Veselic,
"Jacobi's method is more accurate than QR", SIAM J. Matrix Anal. Appl. 13, 1992), and the
stopping rule adds at most ``off(A) <= u ||A||_F`` (Weyl): ``|lambda_i - lambda_i(A)|`` is
a small multiple of ``u ||A||``, as for ``eigvalsh``.  Measured against ``eigvalsh`` on
random symmetric matrices of sizes 1 to 70: within ``4 n u ||A||_2``
(``tests/test_symmetric_eigen.py``).  Cost: ``O(n^3)`` per sweep, slower than LAPACK
(``benchmarks/bench_symmetric_eigen.py``); meant for the small matrices whose eigenvalues
are computed once (a topology's mixing matrix, a problem's Hessian).

:func:`two_norm` gives ``||M||_2`` of any real square matrix as ``sqrt(lambda_max(M^T M))``
with ``M^T M`` summed in increasing row (:func:`convkit.problems._fixed_order.vec_mat`:
exactly symmetric, the same bits everywhere).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._kernel_switch import compiled
from .problems._fixed_order import row_dot, vec_mat

__all__ = ["MAX_SWEEPS", "SYMMETRY_RTOL", "TOL", "symmetric_eigenvalues", "two_norm"]

#: the stopping tolerance: ``off(A) <= TOL ||A||_F`` (the unit roundoff of float64)
TOL = 2.0**-53
#: the most sweeps before :func:`symmetric_eigenvalues` gives up (raises)
MAX_SWEEPS = 60
#: the largest asymmetry accepted: ``max |M_ij - M_ji| <= SYMMETRY_RTOL max |M_ij|``
SYMMETRY_RTOL = 1e-10
#: beyond this ``|theta|``, ``t = 1 / (2 theta)`` (``theta^2`` would overflow near 1.3e154)
_THETA_BIG = 1e150


def _compile() -> Any:
    import numba

    # no fastmath: every product, sum, quotient and square root rounded as written
    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def sweep(A):  # pragma: no cover - compiled code is not traced
        n = A.shape[0]
        for p in range(n - 1):
            for q in range(p + 1, n):
                apq = A[p, q]
                if apq == 0.0:
                    continue
                app = A[p, p]
                aqq = A[q, q]
                theta = (aqq - app) / (2.0 * apq)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + np.sqrt(1.0 + theta * theta))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / np.sqrt(1.0 + t * t)
                s = t * c
                tau = s / (1.0 + c)
                A[p, p] = app - t * apq
                A[q, q] = aqq + t * apq
                A[p, q] = 0.0
                A[q, p] = 0.0
                for r in range(n):
                    if r != p and r != q:
                        g = A[p, r]  # = A[r, p]: A is kept exactly symmetric
                        h = A[q, r]
                        gp = g - s * (h + g * tau)
                        hq = h + s * (g - h * tau)
                        A[p, r] = gp
                        A[r, p] = gp
                        A[q, r] = hq
                        A[r, q] = hq

    return sweep


def _kernel() -> Any:
    """The compiled sweep, or None (numba missing, ``CONVKIT_NO_NUMBA`` or kernels off)."""
    return compiled("_symmetric_eigen.sweep", _compile)


def _sweep_numpy(A: np.ndarray) -> None:
    """One cyclic sweep in place, the compiled kernel's operations in NumPy: the rotation's
    scalars as Python floats (IEEE double, correctly rounded ``/`` and ``sqrt``), rows and
    columns ``p``, ``q`` by elementwise ufuncs (one rounding per element), the same bits."""
    n = A.shape[0]
    for p in range(n - 1):
        for q in range(p + 1, n):
            apq = float(A[p, q])
            if apq == 0.0:
                continue
            app = float(A[p, p])
            aqq = float(A[q, q])
            theta = (aqq - app) / (2.0 * apq)
            if abs(theta) > _THETA_BIG:
                t = 0.5 / theta
            else:
                t = 1.0 / (abs(theta) + math.sqrt(1.0 + theta * theta))
                if theta < 0.0:
                    t = -t
            c = 1.0 / math.sqrt(1.0 + t * t)
            s = t * c
            tau = s / (1.0 + c)
            g = A[p].copy()
            h = A[q].copy()
            gp = g - s * (h + g * tau)
            hq = h + s * (g - h * tau)
            A[p] = gp
            A[:, p] = gp
            A[q] = hq
            A[:, q] = hq
            A[p, p] = app - t * apq
            A[q, q] = aqq + t * apq
            A[p, q] = 0.0
            A[q, p] = 0.0


def _sum_of_squares(x: np.ndarray) -> float:
    """``sum_i x_i^2`` by NumPy's pairwise reduction (an order fixed by NumPy's source)."""
    return float(row_dot(np, x, x))


def symmetric_eigenvalues(M: Any, *, name: str = "M") -> np.ndarray:
    """The eigenvalues of the real symmetric matrix ``M``, ascending (as ``np.linalg.eigvalsh``),
    by the cyclic Jacobi method (module docstring: the maths, its sources, why the bits are the
    same on every x86-64 CPU, the accuracy).

    Parameters
    ----------
    M : array_like of float64, shape (n, n)
        Finite and symmetric within :data:`SYMMETRY_RTOL` of its largest entry; its lower
        triangle is used (as ``eigvalsh``'s default ``UPLO="L"``).
    name : str
        The parameter's name in error messages.

    Returns
    -------
    numpy.ndarray, shape (n,)
        The eigenvalues in ascending order (float64).
    """
    A = np.asarray(M)
    if A.dtype != np.float64:
        raise TypeError(f"{name} must be a float64 matrix, got dtype {A.dtype}")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square 2-D matrix, got shape {A.shape}")
    n = A.shape[0]
    if not np.all(np.isfinite(A)):
        bad = int(A.size - np.count_nonzero(np.isfinite(A)))
        raise ValueError(f"{name} must contain only finite values, found {bad} NaN or inf")
    if n == 0:
        return np.empty(0)
    big = float(np.max(np.abs(A)))
    asym = float(np.max(np.abs(A - A.T)))
    if asym > SYMMETRY_RTOL * big:
        raise ValueError(
            f"{name} is not symmetric: max |{name} - {name}^T| = {asym:.3g} > "
            f"{SYMMETRY_RTOL:g} * max |{name}_ij| = {SYMMETRY_RTOL * big:.3g}"
        )
    if big == 0.0:
        return np.zeros(n)
    # a power of two (exact both ways) bringing the largest entry into [1/2, 1)
    exponent = math.frexp(big)[1]
    lower = np.tril(A)
    A = np.ldexp(lower + np.tril(lower, -1).T, -exponent)
    A = np.ascontiguousarray(A)
    upper = np.triu_indices(n, 1)
    fro2 = _sum_of_squares(A.reshape(-1))
    kernel = _kernel()
    for _ in range(MAX_SWEEPS + 1):
        off2 = 2.0 * _sum_of_squares(A[upper])
        if off2 <= TOL * TOL * fro2:
            break
        if kernel is not None:
            kernel(A)
        else:
            _sweep_numpy(A)
    else:
        raise RuntimeError(
            f"symmetric_eigenvalues: {name} ({n} x {n}) not diagonalized after {MAX_SWEEPS} "
            f"Jacobi sweeps (off(A) / ||A||_F = {math.sqrt(off2 / fro2):.3g})"
        )
    return np.ldexp(np.sort(np.diagonal(A)), exponent)


def two_norm(M: Any, *, name: str = "M") -> float:
    """``||M||_2`` (the largest singular value) of a real square float64 matrix ``M``:
    ``sqrt(lambda_max(M^T M))`` with ``(M^T M)_kj = sum_i M_ik M_ij`` summed in increasing
    ``i`` (:func:`convkit.problems._fixed_order.vec_mat`; the products commute, so ``M^T M``
    is exactly symmetric) and ``lambda_max`` by :func:`symmetric_eigenvalues`: the same bits
    on every x86-64 CPU, where ``np.linalg.norm(M, 2)`` (an SVD) depends on the BLAS kernel.
    Accuracy: ``lambda_max(M^T M)`` to a small multiple of ``u ||M||_2^2``, hence ``||M||_2``
    to a small multiple of ``u ||M||_2`` (relative).  ``M`` is scaled by a power of two
    first (exact)."""
    A = np.asarray(M)
    if A.dtype != np.float64:
        raise TypeError(f"{name} must be a float64 matrix, got dtype {A.dtype}")
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square 2-D matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must contain only finite values")
    big = float(np.max(np.abs(A)))
    if big == 0.0:
        return 0.0
    # a power of two (exact both ways): M^T M neither overflows nor underflows
    exponent = math.frexp(big)[1]
    A = np.ascontiguousarray(np.ldexp(A, -exponent))
    gram = vec_mat(np, np.ascontiguousarray(A.T), A)
    top = float(symmetric_eigenvalues(gram, name=f"{name}^T {name}")[-1])
    return math.ldexp(math.sqrt(max(top, 0.0)), exponent)
