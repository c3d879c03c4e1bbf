"""Fused compiled SGD step of online logistic regression (optional, through numba).

The generic array-API step of :class:`convkit.problems.logistic.LogisticRegression` makes
several passes over the ``(R, P, b, d)`` batch and the ``(R, P, d)`` state (margins, sigmoid,
coefficients, gradient, update, worker mean).  The kernel below makes one: for every
(replicate, worker) row ``theta`` and its ``b`` samples ``(x_j, y_j)`` of the step,

    m_j = y_j <x_j, theta>,        c_j = -y_j sigmoid(-m_j),
    theta <- theta - (gamma / b) sum_j c_j x_j,

which is ``theta - gamma g`` with ``g = (1/b) sum_j grad_theta log(1 + exp(-y_j <x_j,
theta>))`` (since ``d/dz log(1 + e^{-z}) = -sigmoid(-z)``).  All the ``c_j`` are computed at
the model before the update (a mini-batch step, not ``b`` sequential ones).  The sigmoid is
evaluated without overflow, as :func:`convkit.problems.logistic.sigmoid`: with
``e = exp(-|z|) <= 1``, ``sigmoid(z) = 1 / (1 + e)`` for ``z >= 0`` and ``e / (1 + e)`` for
``z < 0`` (the exponent is never positive; ``+-inf`` give 1 and 0, NaN stays NaN), with the
vectorizable ``exp`` of :mod:`convkit._fastexp` (within 0.88 ulp; libm's ``exp`` cost about
11 ns a call and kept the fused Local-SGD kernel's loop over workers scalar).

``mean`` follows the protocol of :func:`convkit._kernels.ls_sgd_update`: an ``(R, d)`` array
receives the workers' mean of the updated models (their sum in four interleaved partial
sums, :mod:`convkit._fastexp`, then divided by ``P``), ``None`` skips it.  The sigmoid and the
sum are those of the fused Local-SGD kernel (:mod:`convkit._fused_local`), so that the two
agree bit for bit.

Compiled with ``nogil=True`` (replicate blocks may run on threads) and fast-math
``{"contract"}`` only: no "no-NaN / no-inf" assumptions, so a diverging run still produces
inf/NaN and is detected by the engine, and no ``reassoc``, which could undo the split of
``ln 2`` in the ``exp``.  Results agree with the generic path (NumPy's ``exp``, sequential
sums) to rounding error (``tests/test_logistic_kernel.py``).

A second kernel, :func:`kl_quadrature`, evaluates the two-dimensional Gauss-Hermite rule of
the excess risk ``E[B(t, t + delta)]`` (see :mod:`convkit.problems.logistic`) node by node with
the same formulas as :func:`convkit.problems.logistic.bernoulli_kl_logits`, without the
``(m, nodes)`` temporaries (the recorded metrics of a long logistic run cost more than its SGD
steps otherwise).

Switches: ``convkit.kernels(enabled=False)`` (the public switch of every compiled kernel,
:mod:`convkit._kernel_switch`) or ``CONVKIT_NO_NUMBA=1`` (read when the kernel is first
needed) disable the kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _fastexp
from ._jit import cacheable
from ._kernel_switch import compiled

__all__ = ["kl_quadrature", "logistic_numba_available", "logistic_sgd_update"]

#: the name of the compiled (SGD step, quadrature) kernels in :func:`compiled`'s cache
LOGISTIC_KERNELS = "_logistic_kernels.step_quadrature"


def logistic_numba_available() -> bool:
    """Whether the fused logistic kernel can be used (numba usable, ``convkit.kernels`` on)."""
    return _get_kernel() is not None


def _get_kernel() -> Any:
    """The compiled (SGD step, quadrature) kernels, or None when the kernels are switched off
    (``convkit.kernels(enabled=False)``) or numba cannot be used (:func:`compiled`)."""
    return compiled(LOGISTIC_KERNELS, _compile)


def _compile() -> Any:
    import numba

    # inlined into the kernel: the vectorizable sigmoid and the workers' sum of the fused
    # Local-SGD segment kernel (convkit._fastexp), so that both kernels round alike
    _, sigmoid, _, worker_sums_rpd = _fastexp.helpers()

    @numba.njit(cache=True, fastmath={"contract"}, nogil=True, error_model="numpy")
    def kernel(theta, x, y, gamma, mean):  # pragma: no cover - compiled
        # theta: (R, P, d), updated in place; x: (R, P, b, d); y: (R, P, b) in {-1, +1};
        # mean: (R, d) to receive the worker mean, or (0, 0) to skip it.  Any strides.
        R, P, d = theta.shape
        b = x.shape[2]
        c = np.empty(b, dtype=theta.dtype)
        step = gamma / b
        want_mean = mean.shape[0] == R
        for r in range(R):
            for p in range(P):
                if b == 1:  # the common case, without the coefficient buffer (1.4x faster)
                    acc = 0.0
                    for i in range(d):
                        acc += x[r, p, 0, i] * theta[r, p, i]
                    y0 = y[r, p, 0]
                    c0 = -y0 * sigmoid(-y0 * acc) * step
                    for i in range(d):
                        theta[r, p, i] -= c0 * x[r, p, 0, i]
                    continue
                for j in range(b):
                    acc = 0.0
                    for i in range(d):
                        acc += x[r, p, j, i] * theta[r, p, i]
                    yj = y[r, p, j]
                    c[j] = -yj * sigmoid(-yj * acc) * step  # c_j = -y_j sigmoid(-margin)
                for j in range(b):
                    cj = c[j]
                    for i in range(d):
                        theta[r, p, i] -= cj * x[r, p, j, i]
            if want_mean:
                worker_sums_rpd(theta, r, mean[r])
                for i in range(d):
                    mean[r, i] /= P

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def logaddexp(a, b):  # pragma: no cover - compiled; NumPy's npy_logaddexp
        if a == b:
            return a + 0.6931471805599453
        tmp = a - b
        if tmp > 0:
            return a + np.log1p(np.exp(-tmp))
        if tmp <= 0:
            return b + np.log1p(np.exp(tmp))
        return tmp  # NaN

    cacheable(logaddexp, "_logistic_kernels.logaddexp")

    # no fast-math: ``(t + delta) - t`` must be rounded as in the NumPy path, not simplified
    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def quad(t, s_t, s_mt, z1, z2, w, c21, c22, out):  # pragma: no cover - compiled
        q = t.shape[0]
        for m in range(c21.shape[0]):
            a21 = c21[m]
            a22 = c22[m]
            acc = 0.0
            for k in range(q):
                tk = t[k]
                delta = (tk + (a21 * z1[k] + a22 * z2[k])) - tk
                if delta <= 0:
                    st = tk
                    p = s_t[k]
                else:
                    st = -tk
                    p = s_mt[k]
                ad = abs(delta)
                arg = p * np.expm1(-ad)
                if arg <= -0.5:
                    v = logaddexp(-logaddexp(0.0, st), -logaddexp(0.0, -st) - ad)
                else:
                    v = np.log1p(arg)
                v += p * ad
                if v < 0.0:
                    v = 0.0
                acc += v * w[k]
            out[m] = acc

    return kernel, quad


def kl_quadrature(
    t: np.ndarray,
    z1: np.ndarray,
    z2: np.ndarray,
    w: np.ndarray,
    c21: np.ndarray,
    c22: np.ndarray,
) -> np.ndarray | None:
    """``out[m] = sum_k w_k B(t_k, t_k + delta_mk)`` with ``delta_mk = c21_m z1_k + c22_m z2_k``
    and ``B`` the Bernoulli divergence of logits of
    :func:`convkit.problems.logistic.bernoulli_kl_logits` (same formulas, same rounding of
    ``delta = (t + delta) - t``), for float64 node arrays ``t, z1, z2, w`` (q,) and
    coefficients ``c21, c22`` (m,).  None when the kernel cannot be used."""
    kernels = _get_kernel()
    if kernels is None:
        return None
    f = np.float64
    t = np.ascontiguousarray(t, dtype=f)
    e = np.exp(-np.abs(t))
    inv = 1.0 / (1.0 + e)
    s_t = np.where(t >= 0, inv, e * inv)  # sigmoid(t), sigmoid(-t): the stable formula
    s_mt = np.where(-t >= 0, inv, e * inv)
    c21 = np.ascontiguousarray(c21, dtype=f)
    out = np.empty(c21.shape[0])
    kernels[1](t, s_t, s_mt, z1, z2, w, c21, np.ascontiguousarray(c22, dtype=f), out)
    return out


def logistic_sgd_update(
    theta: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    gamma: float,
    mean: np.ndarray | None = None,
) -> bool:
    """In place ``theta -= gamma/b sum_j -y_j sigmoid(-y_j <x_j, theta>) x_j`` for ``theta``
    (R, P, d), features ``x`` (R, P, b, d) and labels ``y`` (R, P, b) in {-1, +1}; if
    ``mean`` (R, d) is given it receives the workers' mean of the updated ``theta``.

    Returns False (and does nothing) when the fused kernel cannot be used for these arrays.
    """
    kernels = _get_kernel()
    if kernels is None:
        return False
    dt = theta.dtype
    if (
        type(theta) is not np.ndarray
        or type(x) is not np.ndarray
        or type(y) is not np.ndarray
        or dt not in (np.float64, np.float32)
        or x.dtype != dt
        or y.dtype != dt
        or theta.ndim != 3
        or x.ndim != 4
        or y.ndim != 3
        or x.shape[:2] != theta.shape[:2]
        or not theta.flags.writeable
        or (mean is not None and (type(mean) is not np.ndarray or mean.dtype != dt))
    ):
        return False
    out = mean if mean is not None else np.empty((0, 0), dtype=dt)
    kernels[0](theta, x, y, dt.type(gamma), out)
    return True
