"""The logistic loss's elementwise functions with the C library's scalar ``exp`` / ``log1p`` /
``expm1``: the same bits on every x86-64 CPU.

NumPy's ``exp``, ``log1p`` and ``expm1`` on float64 arrays dispatch on the CPU at run time
(its AVX512 loops are its own implementations, other CPUs call the C library), so the same
call differs in the last bit between an AVX512 and an AVX2 machine (issue 36; measured on
the finite-sum problems' metrics and gradients: every value moved).  The three functions here
evaluate one scalar formula per element, written once (``_sigmoid``, ``_softplus``,
``_bernoulli_kl`` below) and run either compiled by numba (without fast-math: every
operation rounded as written; ``math.exp`` / ``math.log1p`` / ``math.expm1`` are calls of the
C library's scalar functions, which LLVM does not vectorize without a vector library) or by
Python over the elements (``np.frompyfunc``; Python's ``math`` calls the same C functions).
Both give the same bits (``tests/test_libm_loss.py``), which depend on the C library only:
glibc selects its ``exp`` by CPU features too (an FMA variant on every CPU with FMA, so on
every AVX2 and AVX512 one).

* :func:`sigmoid`: ``1 / (1 + e^-z)`` as ``1 / (1 + e)`` for ``z >= 0`` and ``e / (1 + e)``
  otherwise, ``e = exp(-|z|)`` (no overflow);
* :func:`softplus`: ``log(1 + e^x)`` as ``x + log1p(e^-x)`` for ``x > 0`` and
  ``log1p(e^x)`` otherwise (no overflow, no cancellation);
* :func:`bernoulli_kl`: the Bregman divergence of the softplus,
  ``sp(a) - sp(t) - sigmoid(t) (a - t) = KL(Bernoulli(sigmoid(t)) || Bernoulli(sigmoid(a)))``
  (>= 0), by the formula of :func:`convkit.problems.logistic.bernoulli_kl_logits`: with
  ``delta = a - t`` and ``p = sigmoid(t)`` if ``delta <= 0`` else ``sigmoid(-t)``, it is
  ``log(1 - p + p e^-|delta|) + p |delta|``, the log term ``log1p(p expm1(-|delta|))``
  while that argument is above ``-1/2`` (no cancellation for small ``|delta|``) and
  ``logaddexp(log(1 - p), log p - |delta|)`` otherwise (no underflow to ``log 0``).

They agree with NumPy's formulas to rounding (a few ulp; tested).  Inputs are float64 NumPy
arrays; NaN propagates, infinities give the limits.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._kernel_switch import compiled

__all__ = ["bernoulli_kl", "sigmoid", "softplus"]

_LN2 = math.log(2.0)


def _sigmoid(z: float) -> float:
    e = math.exp(-abs(z))
    inv = 1.0 / (1.0 + e)
    return inv if z >= 0 else e * inv


def _softplus(x: float) -> float:
    if x > 0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


def _logaddexp(x: float, y: float) -> float:
    # NumPy's npy_logaddexp: log(e^x + e^y) without overflow
    if x == y:
        return x + _LN2
    tmp = x - y
    if tmp > 0:
        return x + math.log1p(math.exp(-tmp))
    if tmp <= 0:
        return y + math.log1p(math.exp(tmp))
    return tmp  # NaN


def _divergence(sig: Any, sp: Any, lae: Any) -> Any:
    """The scalar divergence calling ``sig``, ``sp``, ``lae`` (the Python functions above, or
    their compiled versions): one source for both paths."""

    def kl(t: float, a: float) -> float:
        delta = a - t
        st = t if delta <= 0 else -t
        p = sig(st)
        ad = abs(delta)
        arg = p * math.expm1(-ad)
        if arg <= -0.5:
            out = lae(-sp(st), -sp(-st) - ad)
        else:
            out = math.log1p(arg)
        out += p * ad
        if out < 0.0:  # a rounding residue below 0 (NaN passes through)
            out = 0.0
        return out

    return kl


def _compile() -> Any:
    import numba

    from .._jit import cacheable

    # no fastmath: every operation rounded as written; math.* are the C library's functions
    opts = {"cache": True, "nogil": True, "error_model": "numpy"}
    sig = cacheable(numba.njit(**opts)(_sigmoid), "_libm_loss.sigmoid")
    sp = cacheable(numba.njit(**opts)(_softplus), "_libm_loss.softplus")
    lae = cacheable(numba.njit(**opts)(_logaddexp), "_libm_loss.logaddexp")
    kl = cacheable(numba.njit(**opts)(_divergence(sig, sp, lae)), "_libm_loss.kl")

    @numba.njit(**opts)
    def map_sigmoid(x, out):  # pragma: no cover - compiled code is not traced
        for i in range(x.size):
            out[i] = sig(x[i])

    @numba.njit(**opts)
    def map_softplus(x, out):  # pragma: no cover
        for i in range(x.size):
            out[i] = sp(x[i])

    @numba.njit(**opts)
    def map_kl(t, a, out):  # pragma: no cover
        for i in range(t.size):
            out[i] = kl(t[i], a[i])

    return {"sigmoid": map_sigmoid, "softplus": map_softplus, "kl": map_kl}


_PYTHON = {
    "sigmoid": np.frompyfunc(_sigmoid, 1, 1),
    "softplus": np.frompyfunc(_softplus, 1, 1),
    "kl": np.frompyfunc(_divergence(_sigmoid, _softplus, _logaddexp), 2, 1),
}


def _apply(name: str, *args: Any) -> np.ndarray:
    arrays = [np.asarray(a, dtype=np.float64) for a in args]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    # operands of another shape are copied out broadcast (a compiled loop reads flat arrays)
    flat = [
        np.ascontiguousarray(a) if a.shape == shape else np.array(np.broadcast_to(a, shape))
        for a in arrays
    ]
    kernels = compiled("problems._libm_loss", _compile)
    if kernels is None:
        with np.errstate(invalid="ignore"):  # NaN in, NaN out, as the compiled loops
            return np.asarray(_PYTHON[name](*flat), dtype=np.float64).reshape(shape)
    out = np.empty(shape, dtype=np.float64)
    kernels[name](*(a.reshape(-1) for a in flat), out.reshape(-1))
    return out


def sigmoid(z: Any) -> np.ndarray:
    """``1 / (1 + exp(-z))`` elementwise (module docstring), float64."""
    return _apply("sigmoid", z)


def softplus(x: Any) -> np.ndarray:
    """``log(1 + exp(x))`` elementwise (module docstring), float64."""
    return _apply("softplus", x)


def bernoulli_kl(t: Any, a: Any) -> np.ndarray:
    """``sp(a) - sp(t) - sigmoid(t) (a - t) >= 0`` elementwise for ``t``, ``a`` broadcast
    together (module docstring), float64."""
    return _apply("kl", t, a)
