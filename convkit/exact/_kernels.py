"""Compiled loop of the exact Local-SGD engine (optional, through numba).

One exact curve costs ``O(n d)`` scalar updates (``n`` local steps, ``d`` coordinates) of a
handful of moment arrays.  With NumPy the per-step Python overhead (about a dozen small
array operations, ~10 us) dominates: ``n = 1e7`` steps would take minutes.  The numba loop
below does one fused pass over the coordinates per step, about 0.2 ns per coordinate update
(``benchmarks/bench_exact.py``).  Set ``CONVKIT_NO_NUMBA=1`` to use the NumPy path.

No ``n``-long input: the step size of a ``PolyDecay`` / ``Constant`` schedule is computed in
the loop (``C (k + k0)^-alpha``), and the rounds come as a period ``H`` (rounds at the
multiples of ``H`` and at ``n``: MBA, ``Every(H)``), as ``N`` evenly spaced rounds (round ``j``
after step ``ceil(j n / N)``, computed in the loop: ``Rounds(N)``) or as the sorted round
positions (``O(N)`` memory for ``N`` rounds); other step schedules pass their ``n`` step sizes.

Floating point.  Fast-math flags ``reassoc`` and ``contract`` only: SIMD reductions over the
coordinates and fused multiply-adds.  No ``nnan``/``ninf`` (diverging runs must still be
detected: the test ``not (sv <= thr)`` needs NaN semantics) and no ``nsz``: with it LLVM may
rewrite the long Polyak-Ruppert sums in ways that cost about three digits at ``n = 1e8``
(7.6e-10 relative against a double-double computation, 3e-13 without).  The four running sums
over all steps (``q`` and ``qt``) are Neumaier-compensated in a helper compiled without
fast-math (so that the compensation is not simplified away): their rounding no longer grows
with ``n``.  ``tests/test_exact_precision.py`` checks the kernel against an ``np.longdouble``
computation of the same recursion.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["STEP_ARRAY", "STEP_CONSTANT", "STEP_POLY", "local_kernel", "make_local_kernel"]

#: step-size kinds of the kernel: an array of n values, C (k + k0)^-alpha, a constant C
STEP_ARRAY, STEP_POLY, STEP_CONSTANT = 0, 1, 2

#: fast-math flags of the production kernel (module docstring)
FLAGS = frozenset({"reassoc", "contract"})

#: step sizes of a PolyDecay schedule are computed this many at a time inside the kernel
_GAMMA_BLOCK = 4096

_KERNEL: Any = None
_TRIED = False


def local_kernel() -> Any:
    """The compiled kernel, or None when numba is unavailable or disabled."""
    global _KERNEL, _TRIED
    if _TRIED:
        return _KERNEL
    _TRIED = True
    if os.environ.get("CONVKIT_NO_NUMBA"):
        return None
    try:
        import numba  # noqa: F401
    except ImportError:  # pragma: no cover - numba is optional
        return None
    _KERNEL = make_local_kernel(FLAGS, compensated=True)
    return _KERNEL


def make_local_kernel(flags: Any = FLAGS, compensated: bool = True) -> Any:
    """Compile the exact Local-SGD loop with the fast-math ``flags`` (a set of LLVM flag names,
    or False) and Neumaier-compensated running sums if ``compensated``.  Variants other than
    the default exist for the precision benchmark (``benchmarks/bench_exact.py``)."""
    import numba

    @numba.njit(cache=True, fastmath=False)
    def _add(s, c, x):  # pragma: no cover - compiled
        # Neumaier's compensated sum: returns the new (sum, compensation)
        t = s + x
        if abs(s) >= abs(x):
            c += (s - t) + x
        else:
            c += (x - t) + s
        return t, c

    @numba.njit(cache=True, fastmath=False)
    def _plain(s, c, x):  # pragma: no cover - compiled
        return s + x, c

    acc = _add if compensated else _plain
    fm = set(flags) if flags else False

    @numba.njit(cache=True, fastmath=fm, nogil=True)
    def kernel(
        h,
        z2,
        n,
        step_kind,
        C,
        alpha,
        k0,
        gam,
        period,
        n_even,
        rpos,
        P,
        b,
        c_sq,
        c_tr,
        s2,
        tail_start,
        rec,
        thr,
        out,
    ):  # pragma: no cover
        d = h.size
        S = z2.copy()
        Cm = z2.copy()
        A = np.zeros(d)
        At = np.zeros(d)
        ip = 1.0 / P
        cp = 1.0 - ip
        trHS = 0.0
        for j in range(d):
            trHS += h[j] * S[j]
        q_h, q_1, qt_h, qt_1 = 0.0, 0.0, 0.0, 0.0
        e_h, e_1, et_h, et_1 = 0.0, 0.0, 0.0, 0.0
        pos = 0
        rp = 0
        j_even = 1
        next_even = (n + n_even - 1) // n_even if n_even > 0 else 0  # ceil(j n / N), j = 1
        n_rec = rec.size
        n_rounds = rpos.size
        buf = np.empty(_GAMMA_BLOCK)
        for k in range(1, n + 1):
            if step_kind == 1:
                # step sizes in blocks, in a loop of their own (a pow inside the moment loop
                # would keep it from being optimized): no n-long array
                off = (k - 1) % _GAMMA_BLOCK
                if off == 0:
                    for i in range(min(_GAMMA_BLOCK, n - k + 1)):
                        buf[i] = C * (k + i + k0) ** (-alpha)
                g = buf[off]
            elif step_kind == 2:
                g = C
            else:
                g = gam[k - 1]
            if period > 0:
                avg = (k % period == 0) or (k == n)
            elif n_even > 0:
                # N evenly spaced rounds: round j after step ceil(j n / N), strictly
                # increasing in j for N <= n
                avg = k == next_even
                if avg:
                    j_even += 1
                    next_even = (j_even * n + n_even - 1) // n_even
            else:
                avg = rp < n_rounds and rpos[rp] == k
                if avg:
                    rp += 1
            add = g * g / b * (c_tr * trHS + s2)
            in_tail = k >= tail_start
            new_tr = 0.0
            sv = 0.0
            sv_h = 0.0
            sa_h = 0.0
            sa_1 = 0.0
            st_h = 0.0
            st_1 = 0.0
            for j in range(d):
                gh = g * h[j]
                r = 1.0 - gh
                s = S[j] * (1.0 - 2.0 * gh + c_sq * gh * gh) + add * h[j]
                c = Cm[j] * r * r
                v = ip * s + cp * c
                if avg:
                    s = v
                    c = v
                S[j] = s
                Cm[j] = c
                new_tr += h[j] * s
                a = r * A[j] + v
                A[j] = a
                sv += v
                sv_h += h[j] * v
                sa_1 += a
                sa_h += h[j] * a
                if in_tail:
                    at = r * At[j] + v
                    At[j] = at
                    st_1 += at
                    st_h += h[j] * at
            trHS = new_tr
            q_h, e_h = acc(q_h, e_h, 2.0 * sa_h - sv_h)
            q_1, e_1 = acc(q_1, e_1, 2.0 * sa_1 - sv)
            if in_tail:
                qt_h, et_h = acc(qt_h, et_h, 2.0 * st_h - sv_h)
                qt_1, et_1 = acc(qt_1, et_1, 2.0 * st_1 - sv)
            if not (sv <= thr):
                return k
            if pos < n_rec and rec[pos] == k:
                kk = float(k)
                out[pos, 0] = (q_h + e_h) / (kk * kk)
                out[pos, 1] = (q_1 + e_1) / (kk * kk)
                if in_tail:
                    m = float(k - tail_start + 1)
                    out[pos, 2] = (qt_h + et_h) / (m * m)
                    out[pos, 3] = (qt_1 + et_1) / (m * m)
                out[pos, 4] = sv_h
                out[pos, 5] = sv
                pos += 1
        return 0

    return kernel
