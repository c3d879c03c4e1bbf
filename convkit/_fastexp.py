"""A vectorizable ``exp`` of non-positive arguments, the overflow-free sigmoid built on it and
the workers' sum, shared by the compiled logistic SGD steps (numba): the one-step kernel of
:mod:`convkit._logistic_kernels` and the fused Local-SGD segments of
:mod:`convkit._fused_local`, which must round alike (bit-identical results).

A call to libm's ``exp`` costs about 11 ns here and stops LLVM from vectorizing the loop
around it: in the d = 2 Local-SGD studies it was most of the ~20 ns of a worker's logistic
step.  :func:`helpers` returns inlinable numba functions made of additions,
multiplications, a ``floor`` and integer shifts only, so that a loop over a worker row
compiles to SIMD code (1.9 ns per ``exp`` against 11.4 ns, measured on 4096 arguments).

Workers' sum.  ``sum_p theta_p`` over the ``P`` workers of a replicate is taken in four
partial sums, worker ``p = 4 m + l`` added to sum ``l`` in order of ``m``, and combined as
``(s0 + s1) + (s2 + s3)``: a sequential sum is a chain of ``P`` dependent additions (4
cycles each), which cost more than the vectorized step of 16 workers.  ``worker_sums`` reads
a flat array (the fused kernel's layout: worker ``p``'s coordinate ``i`` at ``base + i cs +
p``), ``worker_sums_rpd`` an ``(R, P, d)`` array; both add in the same order.

Algorithm (``x <= 0``, as in ``sigmoid(z)`` with ``e = exp(-|z|)``):

1. ``x <- max(x, -750)`` (``exp(-750)`` is below the smallest subnormal; NaN passes through);
2. ``k = floor(x log2(e) + 1/2)``, ``r = (x - k ln2_hi) - k ln2_lo`` with ``ln 2`` split
   in two (Cody and Waite; ``ln2_hi`` has 11 trailing zero bits, so ``k ln2_hi`` is exact
   for ``|k| < 2^11``), ``|r| <= ln(2) / 2``;
3. ``exp(r)`` by its Taylor polynomial of degree 13 in Horner form (remainder below
   ``0.347^14 / 14! < 5e-18``, i.e. 0.04 ulp);
4. ``exp(x) = (exp(r) 2^(k + 60)) 2^-60``: the power of two is built in the exponent bits
   of ``k + 1083`` (``k`` read from the low bits of ``k + 1.5 * 2^52``, a float to integer
   conversion without ``cvttsd2si``, which AVX2 lacks for 64-bit integers); the two factors
   keep ``2^(k + 60)`` normal down to ``k = -1082`` (``x = -750``), and the last product
   rounds subnormal results once.

Accuracy (``tests/test_fastexp.py``, against ``np.longdouble``): at most 0.88 ulp for
normal results (``x`` in ``[-708, 0]``; libm: 0.51); subnormal results within one unit of
``2^-1074``;
``exp(0) = 1``, ``exp(-inf) = 0``, ``exp(nan) = nan``.  It differs from libm's correctly
rounded result in the last bit for about 6 % of arguments, so values that used libm's
``exp`` move by rounding; the generic NumPy path (``np.exp``) agrees with the kernels to
rounding, not bit for bit.

Compiled without ``reassoc`` (the callers' flags are ``contract`` only): reassociation could
fold ``(x - k ln2_hi) - k ln2_lo`` into ``x - k (ln2_hi + ln2_lo)`` and lose the split.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._jit import cacheable
from ._kernel_switch import compiled

__all__ = ["helpers"]

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
#: 1.5 * 2^52: adding it to an integer-valued double leaves the integer in the low bits
_SHIFT = 6755399441055744.0
#: 2^-60, the second factor of the scaling
_TWO_M60 = 2.0**-60
#: Taylor coefficients 1 / j! of exp, j = 0..13
_C = tuple(1.0 / math.factorial(j) for j in range(14))


def helpers() -> Any:
    """``(exp_nonpos, sigmoid, worker_sums, worker_sums_rpd)``: numba functions inlined into
    their callers (numba IR inlining, so the callers' fast-math flags apply);
    ``sigmoid(z) = 1 / (1 + e)`` for ``z >= 0`` and ``e / (1 + e)`` otherwise,
    ``e = exp_nonpos(-|z|)``; the sums: module docstring.  Built once
    (:func:`convkit._kernel_switch.compiled`, whatever the switch: the kernels that inline
    them obey it); None when numba cannot be used."""
    return compiled("_fastexp.helpers", _build_helpers, switched=False)


def _build_helpers() -> Any:
    import numba
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def float_bits(typingctx, x):  # pragma: no cover - compiled
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.IntType(64))

        return types.int64(types.float64), codegen

    @intrinsic
    def bits_float(typingctx, n):  # pragma: no cover - compiled
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], ir.DoubleType())

        return types.float64(types.int64), codegen

    cacheable(float_bits, "_fastexp.float_bits")
    cacheable(bits_float, "_fastexp.bits_float")
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13 = _C

    @numba.njit(cache=True, nogil=True, inline="always")
    def exp_nonpos(x):  # pragma: no cover - compiled
        xc = -750.0 if x < -750.0 else x
        k = np.floor(xc * _LOG2E + 0.5)  # a float: no float -> int64 conversion
        r = (xc - k * _LN2_HI) - k * _LN2_LO
        p = c13 * r + c12
        p = p * r + c11
        p = p * r + c10
        p = p * r + c9
        p = p * r + c8
        p = p * r + c7
        p = p * r + c6
        p = p * r + c5
        p = p * r + c4
        p = p * r + c3
        p = p * r + c2
        p = p * r + c1
        p = p * r + c0
        scale = bits_float((float_bits(k + _SHIFT) + 1083) << 52)  # 2^(k + 60)
        return (p * scale) * _TWO_M60

    @numba.njit(cache=True, nogil=True, inline="always")
    def sigmoid(z):  # pragma: no cover - compiled
        e = exp_nonpos(-abs(z))
        inv = 1.0 / (1.0 + e)
        return inv if z >= 0 else e * inv

    @numba.njit(cache=True, nogil=True, inline="always")
    def worker_sums(theta, base, P, cs, d, out):  # pragma: no cover - compiled
        # out[i] = sum_p theta[base + i cs + p] over workers p < P (base, P, cs unsigned),
        # in four partial sums (workers p = 4 m + l in sum l, in order) combined as
        # (s0 + s1) + (s2 + s3)
        one = np.uint64(1)
        P4 = P - P % np.uint64(4)
        for i in range(d):
            row = base + np.uint64(i) * cs
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for p in range(np.uint64(0), P4, np.uint64(4)):
                s0 += theta[row + p]
                s1 += theta[row + p + one]
                s2 += theta[row + p + np.uint64(2)]
                s3 += theta[row + p + np.uint64(3)]
            for p in range(P4, P):
                s0 += theta[row + p]
            out[i] = (s0 + s1) + (s2 + s3)

    @numba.njit(cache=True, nogil=True, inline="always")
    def worker_sums_rpd(theta, r, out):  # pragma: no cover - compiled
        # out[i] = sum_p theta[r, p, i] for theta (R, P, d), in the order of worker_sums
        P = theta.shape[1]
        P4 = P - P % 4
        for i in range(out.shape[0]):
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            for p in range(0, P4, 4):
                s0 += theta[r, p, i]
                s1 += theta[r, p + 1, i]
                s2 += theta[r, p + 2, i]
                s3 += theta[r, p + 3, i]
            for p in range(P4, P):
                s0 += theta[r, p, i]
            out[i] = (s0 + s1) + (s2 + s3)

    return (
        cacheable(exp_nonpos, "_fastexp.exp_nonpos"),
        cacheable(sigmoid, "_fastexp.sigmoid"),
        cacheable(worker_sums, "_fastexp.worker_sums"),
        cacheable(worker_sums_rpd, "_fastexp.worker_sums_rpd"),
    )
