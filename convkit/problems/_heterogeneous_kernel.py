"""The compiled SGD step of least squares with node Hessians and node optima (numba, optional).

One pass over the ``(R, P, d)`` state per step (and one for the nodes' mean errors,
:func:`node_error_sums`), as :func:`convkit._kernels.ls_sgd_update` does
for one design: node ``p`` has its own feature scale ``sqrt(h_p)`` and optimum
``theta*_p`` (rows of ``(P, d)`` arrays). The generic path
(:meth:`HeterogeneousLeastSquares.stochastic_grad
<convkit.problems.heterogeneous.HeterogeneousLeastSquares.stochastic_grad>` then an update)
makes about six passes; the two agree to rounding (``tests/test_heterogeneous_hessians.py``).
The kernel runs when convkit's compiled kernels do (:func:`convkit._kernel_switch.compiled`:
numba installed, ``convkit.kernels`` on, no ``CONVKIT_NO_NUMBA``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._kernel_switch import compiled

__all__ = ["node_ls_sgd_update", "node_error_sums"]


def _get_kernel() -> Any:
    """The compiled kernels (step, error sums), or None (:func:`compiled`)."""
    return compiled("problems._heterogeneous_kernel", _compile)


def _compile() -> Any:
    import numba

    @numba.njit(cache=True, fastmath={"reassoc", "contract"}, nogil=True, error_model="numpy")
    def kernel(theta, z, eps, scale, optima, noise, gamma, mean, P, b):  # pragma: no cover
        # theta: (R*P, d) rows = (replicate, node); z: (R*P*b, d); eps: (R*P*b,);
        # scale, optima: (P, d) rows = node
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
                        acc += z[srow, i] * scale[p, i] * (theta[row, i] - optima[p, i])
                    res[j] = (acc - noise * eps[srow]) * step
                for j in range(b):
                    srow = row * b + j
                    rj = res[j]
                    for i in range(d):
                        theta[row, i] -= rj * z[srow, i] * scale[p, i]
                if want_mean:
                    for i in range(d):
                        mean[r, i] += theta[row, i]
            if want_mean:
                for i in range(d):
                    mean[r, i] /= P

    @numba.njit(cache=True, fastmath={"reassoc", "contract"}, nogil=True, error_model="numpy")
    def error_sums(models, theta_star, h, hn, dist):  # pragma: no cover
        # models: (N*P, d); hn, dist: (N,) means over the P rows of each group
        N = hn.shape[0]
        P = models.shape[0] // N
        d = models.shape[1]
        for r in range(N):
            acc_h = 0.0
            acc_1 = 0.0
            for p in range(P):
                row = r * P + p
                for i in range(d):
                    e = models[row, i] - theta_star[i]
                    e2 = e * e
                    acc_h += h[i] * e2
                    acc_1 += e2
            hn[r] = acc_h / P
            dist[r] = acc_1 / P

    return kernel, error_sums


def node_error_sums(
    models: np.ndarray, theta_star: np.ndarray, h: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(1/P) sum_p ||theta_p - theta*||_H^2`` and ``(1/P) sum_p ||theta_p - theta*||^2`` of
    float64 NumPy ``models`` (..., P, d) (``h`` the diagonal of ``H``), each of shape
    ``(...)``; None when the kernel cannot run."""
    kernels = _get_kernel()
    if kernels is None or models.dtype != np.float64 or models.ndim < 2:
        return None
    lead = models.shape[:-2]
    P, d = models.shape[-2:]
    flat = np.ascontiguousarray(models).reshape(-1, d)
    N = flat.shape[0] // P
    hn, dist = np.empty(N), np.empty(N)
    kernels[1](flat, theta_star, h, hn, dist)
    return hn.reshape(lead), dist.reshape(lead)


def node_ls_sgd_update(
    theta: np.ndarray,
    z: np.ndarray,
    eps: np.ndarray,
    scale: np.ndarray,
    optima: np.ndarray,
    noise: float,
    gamma: float,
    mean: np.ndarray | None = None,
) -> bool:
    """In place ``theta_p -= gamma/b sum_j x_j (<x_j, theta_p - theta*_p> - noise eps_j)`` on
    every node ``p``, features ``x_j = z_j * scale_p`` (``scale``, ``optima``: C-contiguous
    (P, d) arrays of ``theta``'s dtype); ``mean`` (R, d), if given, receives the nodes' mean of
    the updated ``theta``.

    Returns False (and does nothing) when the kernel cannot be used for these arrays."""
    kernels = _get_kernel()
    kernel = None if kernels is None else kernels[0]
    dt = theta.dtype
    if (
        kernel is None
        or type(theta) is not np.ndarray
        or type(z) is not np.ndarray
        or type(eps) is not np.ndarray
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
        optima,
        dt.type(noise),
        dt.type(gamma),
        out,
        P,
        b,
    )
    return True
