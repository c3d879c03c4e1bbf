"""Compiled loop of the exact Local-SGD engine (optional, through numba).

One exact curve costs ``O(n d)`` scalar updates (``n`` local steps, ``d`` coordinates) of a
handful of moment arrays.  With NumPy the per-step Python overhead (about a dozen small
array operations, ~10 us) dominates: ``n = 1e7`` steps would take minutes.  The numba loop
below does one fused, branch-free and vectorized pass over the coordinates per step (about
0.6 ns per coordinate update plus ~25 ns per step on a 2-core AVX2 machine,
``benchmarks/bench_exact.py``).  Set ``CONVKIT_NO_NUMBA=1`` to use the NumPy path.

Why one thread per curve.  The coordinates do not separate: every step couples them through
the scalar ``tr(H S) = sum_l h_l s_l`` of the noise injection (Gaussian and Rademacher
designs), so splitting the coordinates over threads would need a synchronisation per step
(~1e7 per curve), dearer than the step itself at ``d = 100``.  Several configurations of one
:func:`convkit.exact.local.local_curves` call run on parallel threads instead (this kernel
releases the GIL), with numbers that do not depend on the thread count.

Per step (module docstring of :mod:`convkit.exact.local` for the recursion), with
``u = g h_j`` and the injection ``add = (g^2 / b)(c_tr tr(HS) + sigma^2)`` computed once::

    s_j' = s_j + s_j u (c_sq g h_j - 2) + add h_j        (= s_j (1 - 2u + c_sq u^2) + add h_j)
    c_j' = c_j + c_j u (u - 2)                            (= (1 - u)^2 c_j)
    v_j  = c_j' + (s_j' - c_j') / P                       (= s_j' / P + (1 - 1/P) c_j')
    A_j' = (A_j + v_j) - u A_j                            (= (1 - u) A_j + v_j)

The increments are formed before they are added: the factors ``1 - 2u + c_sq u^2`` and
``1 - u``, rounded to a multiple of ``eps`` next to 1, would perturb the contraction rate
``2u`` by up to ``eps / (2u)`` relative, the same rounding at every step of a constant step
size (``g = 1e-4``, ``d = 4``: 4e-13 relative after 2e4 steps, growing like ``eps / u``); the
weights ``1/P`` and ``fl(1 - fl(1/P))`` do not add up to 1 (P = 3: the averaged moments
shrank by ``5.6e-17`` per round, ``1.1e-12`` relative after 2e4 rounds).  One loop per case,
each without a branch inside: one worker (``P = 1``: ``V = S``, no cross moment, the rounds
change nothing), a communication step (``S, C <- V``: ``tr(H S) = sum h v``), a local step;
each with or without the tail average.

No ``n``-long input: the step size of a ``PolyDecay`` / ``Constant`` schedule is computed in
the kernel, and the rounds come as a period ``H`` (rounds at the multiples of ``H`` and at
``n``: MBA, ``Every(H)``), as ``N`` evenly spaced rounds (round ``j`` after step
``ceil(j n / N)``, with ``j n = a N + b`` advanced in integers: ``Rounds(N)``) or as the sorted
round positions (``O(N)`` memory for ``N`` rounds); other step schedules pass their ``n`` step
sizes.  ``PolyDecay`` steps ``C (k + k0)^-alpha`` are computed ``_GAMMA_BLOCK`` at a time in a
loop of their own (:func:`poly_step_sizes`): a ``pow`` (~35 ns) per step while
``k + k0 < 512``; from there one ``pow`` per anchor ``a = k_a + k0`` and in between
``C a^-alpha (1 + x)^-alpha`` with ``x = (k - k_a) / a <= 2^-8`` and ``(1 + x)^-alpha`` its
Taylor series of degree 8 (``0 <= alpha <= 1``: coefficients at most 1 in modulus, remainder
below ``2^-72``), within 2 eps of the exact value like ``pow`` itself (tested).  The anchors
sit at fixed positions: in each window of 256 steps (``k - 1`` a multiple of 256 at its
start, where ``k + k0 = a_w``) every ``s`` steps, ``s`` the largest power of 2 with
``256 s <= a_w`` (at most 256: one anchor per window from ``2^16`` on), so ``n = 1e4`` steps
take ~1600 ``pow`` instead of 1e4.

Floating point.  Fast-math flags ``reassoc`` and ``contract`` only: SIMD reductions over the
coordinates and fused multiply-adds.  No ``nnan``/``ninf`` (diverging runs must still be
detected: the test ``not (sv <= thr)`` needs NaN semantics) and no ``nsz``: with it LLVM may
rewrite the long Polyak-Ruppert sums in ways that cost about three digits at ``n = 1e8``
(7.6e-10 relative against a double-double computation, 3e-13 without), and it would let LLVM
factor ``s + s w`` back into ``s (1 + w)``.  The four running sums over all steps (``q`` and
``qt``) are Neumaier-compensated in a helper compiled without fast-math (so that the
compensation is not simplified away): their rounding no longer grows with ``n``; the
injection ``add`` is computed without fast-math too (reassociated, its division was moved into
the coordinate loop).  ``tests/test_exact_precision.py`` checks the kernel against an
``np.longdouble`` computation of the same recursion (measured: 1e-14 relative after 2e4 steps,
was 1e-12 before the increments above).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._jit import cacheable
from .._kernel_switch import compiled

__all__ = [
    "STEP_ARRAY",
    "STEP_CONSTANT",
    "STEP_POLY",
    "local_kernel",
    "make_local_kernel",
    "poly_step_sizes",
]

#: step-size kinds of the kernel: an array of n values, C (k + k0)^-alpha, a constant C
STEP_ARRAY, STEP_POLY, STEP_CONSTANT = 0, 1, 2

#: fast-math flags of the production kernel (module docstring)
FLAGS = frozenset({"reassoc", "contract"})

#: step sizes of a PolyDecay schedule are computed this many at a time inside the kernel
_GAMMA_BLOCK = 4096
#: PolyDecay step sizes: windows of ``_ANCHOR`` steps (block-aligned) with anchors every
#: ``s = 2^j <= (k + k0) / 256`` steps, in between a series of degree 8; one anchor per window
#: once ``k + k0 >= _SERIES_FROM``
_ANCHOR = 256
_SERIES_FROM = 65536.0


def local_kernel() -> Any:
    """The compiled kernel (built once, :func:`convkit._kernel_switch.compiled`), or None when
    numba is unavailable or disabled (``CONVKIT_NO_NUMBA``).  Whether it runs is decided by the
    caller's run plan (:mod:`convkit.plan`: ``use_numba`` or ``convkit.kernels``), not here."""
    return compiled("exact._kernels.local", _build_local_kernel, switched=False)


def _build_local_kernel() -> Any:
    return make_local_kernel(FLAGS, compensated=True)


def poly_step_sizes(C: float, alpha: float, k0: float, n: int, start: int = 1) -> np.ndarray:
    """The kernel's ``PolyDecay`` step sizes ``C (k + k0)^-alpha`` for ``k = start, ...,
    start + n - 1``, computed as in the kernel (blocks of ``_GAMMA_BLOCK`` steps from
    ``k = 1``, anchors and series: module docstring); ``start - 1`` a multiple of
    ``_GAMMA_BLOCK``.  Needs numba."""
    if (start - 1) % _GAMMA_BLOCK or start < 1:
        raise ValueError(f"start - 1 must be a multiple of {_GAMMA_BLOCK}, got start = {start}")
    poly = compiled("exact._kernels.poly_steps", _compile_poly_steps, switched=False)
    if poly is None:
        raise RuntimeError("poly_step_sizes needs numba (not installed, or CONVKIT_NO_NUMBA set)")
    out = np.empty(int(n))
    for i in range(0, int(n), _GAMMA_BLOCK):
        m = min(_GAMMA_BLOCK, int(n) - i)
        poly(out[i : i + m], start + i, m, float(C), float(alpha), float(k0))
    return out


def _compile_poly_steps() -> Any:
    import numba

    @numba.njit(cache=True, fastmath={"contract"}, nogil=True)
    def poly_steps(buf, k1, m, C, alpha, k0):  # pragma: no cover - compiled
        # buf[i] = C (k1 + i + k0)^-alpha for i < m (module docstring: anchors and series)
        series = 0.0 <= alpha <= 1.0
        # Taylor coefficients c_j = binom(-alpha, j) of (1 + x)^-alpha
        c1 = -alpha
        c2 = c1 * (-alpha - 1.0) / 2.0
        c3 = c2 * (-alpha - 2.0) / 3.0
        c4 = c3 * (-alpha - 3.0) / 4.0
        c5 = c4 * (-alpha - 4.0) / 5.0
        c6 = c5 * (-alpha - 5.0) / 6.0
        c7 = c6 * (-alpha - 6.0) / 7.0
        c8 = c7 * (-alpha - 7.0) / 8.0
        i = 0
        while i < m:
            e = min(m, i + _ANCHOR)
            a = (k1 + i) + k0
            # anchors every `span` steps, span = the largest power of 2 <= a / 256 (at most
            # _ANCHOR), so that x = (k - k_a) / a_k <= 2^-8 at every anchor of the window
            span = _ANCHOR
            while span > 1 and span * 256.0 > a:
                span //= 2
            if series and span > 1:
                for j in range(i, e, span):
                    aj = (k1 + j) + k0
                    ga = C * aj ** (-alpha)
                    ia = 1.0 / aj
                    for ii in range(j, min(e, j + span)):
                        x = (ii - j) * ia
                        p = c8
                        p = p * x + c7
                        p = p * x + c6
                        p = p * x + c5
                        p = p * x + c4
                        p = p * x + c3
                        p = p * x + c2
                        p = p * x + c1
                        buf[ii] = ga * (1.0 + x * p)
            else:
                for ii in range(i, e):
                    buf[ii] = C * ((k1 + ii) + k0) ** (-alpha)
            i = e

    return cacheable(poly_steps, "exact._kernels.poly_steps")


def make_local_kernel(flags: Any = FLAGS, compensated: bool = True) -> Any:
    """Compile the exact Local-SGD loop with the fast-math ``flags`` (a set of LLVM flag names,
    or False) and Neumaier-compensated running sums if ``compensated``.  Variants other than
    the default serve precision comparisons (what the flags and the compensation cost)."""
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

    @numba.njit(cache=True, fastmath=False)
    def _inject(g, b, c_tr, trHS, s2):  # pragma: no cover - compiled
        # the step's noise injection, a scalar computed without fast-math: reassociated, its
        # division would be moved into the coordinate loop
        return g * g / b * (c_tr * trHS + s2)

    acc = _add if compensated else _plain
    fm = set(flags) if flags else False

    poly_steps = _compile_poly_steps()
    # the helpers are closure variables: fixed identities make the kernel cacheable
    # (convkit._jit); a variant with other flags has the same closure, so it is not cached
    for helper, name in ((_add, "add"), (_plain, "plain"), (_inject, "inject")):
        cacheable(helper, f"exact._kernels.{name}")

    @numba.njit(cache=fm == set(FLAGS), fastmath=fm, nogil=True)
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
        one = P == 1.0  # one worker: V = S, rounds change nothing
        ip = 1.0 / P
        trHS = 0.0
        for j in range(d):
            trHS += h[j] * S[j]
        q_h, q_1, qt_h, qt_1 = 0.0, 0.0, 0.0, 0.0
        e_h, e_1, et_h, et_1 = 0.0, 0.0, 0.0, 0.0
        pos = 0
        rp = 0
        # evenly spaced rounds: j n = e_a N + e_b, next round after ceil(j n / N), j = 1
        n_q, n_r = (n // n_even, n % n_even) if n_even > 0 else (0, 0)
        e_a, e_b = n_q, n_r
        next_even = e_a + (1 if e_b > 0 else 0)
        next_period = period
        n_rec = rec.size
        n_rounds = rpos.size
        buf = np.empty(_GAMMA_BLOCK)
        for k in range(1, n + 1):
            if step_kind == 1:
                # step sizes in blocks, in a loop of their own: no n-long array
                off = (k - 1) % _GAMMA_BLOCK
                if off == 0:
                    poly_steps(buf, k, min(_GAMMA_BLOCK, n - k + 1), C, alpha, k0)
                g = buf[off]
            elif step_kind == 2:
                g = C
            else:
                g = gam[k - 1]
            avg = False
            if one:
                pass  # one worker: V = S whether or not the step communicates
            elif period > 0:
                avg = k == next_period or k == n
                if k == next_period:
                    next_period += period
            elif n_even > 0:
                # N evenly spaced rounds: round j after step ceil(j n / N) (strictly
                # increasing in j for N <= n), with j n = e_a N + e_b kept in integers
                avg = k == next_even
                if avg:
                    e_a += n_q
                    e_b += n_r
                    if e_b >= n_even:
                        e_b -= n_even
                        e_a += 1
                    next_even = e_a + (1 if e_b > 0 else 0)
            else:
                avg = rp < n_rounds and rpos[rp] == k
                if avg:
                    rp += 1
            add = _inject(g, b, c_tr, trHS, s2)
            cg = c_sq * g
            in_tail = k >= tail_start
            # one pass over the coordinates, one loop per case (no branch inside a loop):
            # one worker (V = S, no cross moment), a communication step (S, C <- V), a local
            # step; each with or without the tail average
            sv, sv_h, sa_1, sa_h = 0.0, 0.0, 0.0, 0.0
            st_1, st_h, tr = 0.0, 0.0, 0.0
            if one and in_tail:
                for j in range(d):
                    hj = h[j]
                    gh = g * hj
                    sj = S[j]
                    v = sj * (gh * (cg * hj - 2.0)) + (sj + add * hj)
                    S[j] = v
                    aj = A[j]
                    a = (aj + v) - gh * aj
                    A[j] = a
                    atj = At[j]
                    at = (atj + v) - gh * atj
                    At[j] = at
                    sv += v
                    sv_h += hj * v
                    sa_1 += a
                    sa_h += hj * a
                    st_1 += at
                    st_h += hj * at
                trHS = sv_h
            elif one:
                for j in range(d):
                    hj = h[j]
                    gh = g * hj
                    sj = S[j]
                    v = sj * (gh * (cg * hj - 2.0)) + (sj + add * hj)
                    S[j] = v
                    aj = A[j]
                    a = (aj + v) - gh * aj
                    A[j] = a
                    sv += v
                    sv_h += hj * v
                    sa_1 += a
                    sa_h += hj * a
                trHS = sv_h
            elif avg and in_tail:
                for j in range(d):
                    hj = h[j]
                    gh = g * hj
                    sj = S[j]
                    s = sj * (gh * (cg * hj - 2.0)) + (sj + add * hj)
                    cj = Cm[j]
                    c = cj * (gh * (gh - 2.0)) + cj
                    v = c + ip * (s - c)
                    S[j] = v
                    Cm[j] = v
                    aj = A[j]
                    a = (aj + v) - gh * aj
                    A[j] = a
                    atj = At[j]
                    at = (atj + v) - gh * atj
                    At[j] = at
                    sv += v
                    sv_h += hj * v
                    sa_1 += a
                    sa_h += hj * a
                    st_1 += at
                    st_h += hj * at
                trHS = sv_h
            elif avg:
                for j in range(d):
                    hj = h[j]
                    gh = g * hj
                    sj = S[j]
                    s = sj * (gh * (cg * hj - 2.0)) + (sj + add * hj)
                    cj = Cm[j]
                    c = cj * (gh * (gh - 2.0)) + cj
                    v = c + ip * (s - c)
                    S[j] = v
                    Cm[j] = v
                    aj = A[j]
                    a = (aj + v) - gh * aj
                    A[j] = a
                    sv += v
                    sv_h += hj * v
                    sa_1 += a
                    sa_h += hj * a
                trHS = sv_h
            elif in_tail:
                for j in range(d):
                    hj = h[j]
                    gh = g * hj
                    sj = S[j]
                    s = sj * (gh * (cg * hj - 2.0)) + (sj + add * hj)
                    cj = Cm[j]
                    c = cj * (gh * (gh - 2.0)) + cj
                    v = c + ip * (s - c)
                    S[j] = s
                    Cm[j] = c
                    aj = A[j]
                    a = (aj + v) - gh * aj
                    A[j] = a
                    atj = At[j]
                    at = (atj + v) - gh * atj
                    At[j] = at
                    tr += hj * s
                    sv += v
                    sv_h += hj * v
                    sa_1 += a
                    sa_h += hj * a
                    st_1 += at
                    st_h += hj * at
                trHS = tr
            else:
                for j in range(d):
                    hj = h[j]
                    gh = g * hj
                    sj = S[j]
                    s = sj * (gh * (cg * hj - 2.0)) + (sj + add * hj)
                    cj = Cm[j]
                    c = cj * (gh * (gh - 2.0)) + cj
                    v = c + ip * (s - c)
                    S[j] = s
                    Cm[j] = c
                    aj = A[j]
                    a = (aj + v) - gh * aj
                    A[j] = a
                    tr += hj * s
                    sv += v
                    sv_h += hj * v
                    sa_1 += a
                    sa_h += hj * a
                trHS = tr
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
