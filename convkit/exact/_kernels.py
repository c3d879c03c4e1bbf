"""Compiled loop of the exact Local-SGD engine (optional, through numba).

One exact curve costs ``O(n d)`` scalar updates (``n`` local steps, ``d`` coordinates) of a
handful of moment arrays.  With NumPy the per-step Python overhead (about a dozen small
array operations, ~10 us) dominates: ``n = 1e7`` steps would take minutes.  The numba loop
below does one fused pass over the coordinates per step (SIMD reductions allowed through the
``reassoc``/``contract`` fast-math flags only: no assumption of finite values, so diverging
runs are still detected), about 0.2 ns per coordinate update (``benchmarks/bench_exact.py``).
Set ``CONVKIT_NO_NUMBA=1`` to use the NumPy path.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["local_kernel"]

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
        import numba
    except ImportError:  # pragma: no cover - numba is optional
        return None

    flags = {"reassoc", "contract", "nsz"}

    @numba.njit(cache=True, fastmath=flags, nogil=True)
    def kernel(
        h, z2, gam, comm, P, b, c_sq, c_tr, s2, tail_start, rec, thr, out
    ):  # pragma: no cover
        d = h.size
        n = gam.size
        S = z2.copy()
        C = z2.copy()
        A = np.zeros(d)
        At = np.zeros(d)
        ip = 1.0 / P
        cp = 1.0 - ip
        trHS = 0.0
        for j in range(d):
            trHS += h[j] * S[j]
        q_h = 0.0
        q_1 = 0.0
        qt_h = 0.0
        qt_1 = 0.0
        pos = 0
        n_rec = rec.size
        for k in range(1, n + 1):
            g = gam[k - 1]
            add = g * g / b * (c_tr * trHS + s2)
            avg = comm[k - 1]
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
                c = C[j] * r * r
                v = ip * s + cp * c
                if avg:
                    s = v
                    c = v
                S[j] = s
                C[j] = c
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
            q_h += 2.0 * sa_h - sv_h
            q_1 += 2.0 * sa_1 - sv
            if in_tail:
                qt_h += 2.0 * st_h - sv_h
                qt_1 += 2.0 * st_1 - sv
            if not (sv <= thr):
                return k
            if pos < n_rec and rec[pos] == k:
                kk = float(k)
                out[pos, 0] = q_h / (kk * kk)
                out[pos, 1] = q_1 / (kk * kk)
                if in_tail:
                    m = float(k - tail_start + 1)
                    out[pos, 2] = qt_h / (m * m)
                    out[pos, 3] = qt_1 / (m * m)
                out[pos, 4] = sv_h
                out[pos, 5] = sv
                pos += 1
        return 0

    _KERNEL = kernel
    return _KERNEL
