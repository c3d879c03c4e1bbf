"""Fused Local-SGD segments on online logistic regression and Gaussian least squares
(compiled, through numba).

The step loop of :func:`convkit.simulate` makes, per local step, one sampling call, one kernel
call per algorithm and a few array operations (running sums, divergence check) per algorithm:
for small problems (``d = 2``, the large-step Local-SGD studies) those Python-level calls cost
more than the arithmetic.  For the algorithms of a call whose class declares fused segments
(``capabilities.fused``, :mod:`convkit.algorithms.capabilities`: Local-SGD's update,
:class:`~convkit.algorithms.local.LocalSGD`, MBA, OSA, any communication schedule) on
:class:`~convkit.problems.logistic.LogisticRegression` (or on
:class:`~convkit.problems.least_squares.LeastSquares` with its unrotated Gaussian design) with
the NumPy backend in float64, :func:`segment_kernel` runs a whole *segment* of local steps
``k0..k1`` of one replicate block in one compiled call, from the block's own generator, and
the engine returns to Python only at record points (and every :data:`MAX_SEGMENT` steps, for
progress and cancellation).

Per local step ``k`` and block, exactly what the step-by-step engine computes, in its order:

1. the samples, as :meth:`LogisticRegression.sample` draws them: all the standard normals of
   the block, shape ``(R_b, P_max, b_max, d)`` in C order, then all its uniforms
   ``(R_b, P_max, b_max)``; ``x = z * sqrt(h)`` (then ``x <- Q x`` for a rotated design),
   ``t = <x, theta*>``, ``y = +1`` if ``u < sigmoid(t)`` else ``-1`` (stable sigmoid:
   ``e = exp(-|t|)``, ``1 / (1 + e)`` for ``t >= 0``, ``e / (1 + e)`` otherwise).  numba's
   :class:`numpy.random.Generator` methods produce the same numbers as NumPy's array fills from
   the same bit generator (tested), so the random streams are those of the step-by-step path;
2. for each algorithm ``a`` with ``k <= n_a`` (its first ``P_a`` workers, ``b_a`` samples):
   the mini-batch step of :func:`convkit._logistic_kernels.logistic_sgd_update`,
   ``theta <- theta - (gamma_k / b) sum_j -y_j sigmoid(-y_j <x_j, theta>) x_j`` (this
   sigmoid's ``exp`` is the vectorizable one of :mod:`convkit._fastexp`), the worker mean
   ``m`` (the workers' sum in four interleaved partial sums, as that kernel), the averaging
   ``theta_p <- m`` after a communication step (``P_a > 1``) (least squares: the draws are
   all the block's ``z``, then all its ``eps``, and the step is that of
   :func:`convkit._kernels.ls_sgd_update`);
3. the engine's bookkeeping: ``sums += m``, ``tails += m`` from the tail start on, and the
   divergence check: the first ``k`` with ``not (||m - theta*||^2 <= threshold)`` (NaN
   included) is stored for the replicate.

Layout.  The logistic kernel keeps each algorithm's workers as ``(d, R, P_a)`` (coordinate,
replicate, worker) and its sample buffers likewise (``x`` as ``(b_max, d, R_b, P_max)``,
filled in the C order of the step-by-step draws).  When an algorithm uses all ``P_max``
workers (batch 1), the step of a whole block is three passes over runs of ``R_b P_a``
contiguous values per coordinate (margins coordinate by coordinate, coefficients, update),
which LLVM vectorizes at any ``d`` and ``P_a``: unsigned indices (no negative-index
wraparound) and no pass that writes what another of its rows reads (a single pass at
``d = 10`` needed more overlap checks than LLVM allows, and stayed scalar).  Otherwise
(fewer workers, or a batch) the rows go one by one.  Measured on one core, a large-step cell
(``d = 2``, T = 1e5, 64 replicates, 22-24 algorithms), ns per replicate, algorithm and
gradient, before (libm ``exp``, ``(R, P_a, d)``) -> now: ``P = 2`` 46 -> 19, ``P = 4``
28 -> 14, ``P = 8`` 16 -> 12, ``P = 16`` 13 -> 9.5; at ``d = 10`` (16 workers) 700 ->
323 ns per replicate, algorithm and step.  Then (``benchmarks/bench_floor.py``: the same
cell through :func:`convkit.simulate`, 21 schedules, CPU time, interleaved best of 5, shared
machine) 4.6-5.0 -> 3.8-4.1 ns per worker-gradient, against a floor of 2.4 ns for the sampling
and the workers' steps alone: at ``d <= 8`` with batch 1 and all workers, the workers' step in
one pass (margin, coefficient, update); the bookkeeping of a block's rows in one inlined
helper (:func:`_build_book_rows`) with ``P = 8`` a constant and ``sum / P`` as an exact
multiplication for the other powers of two; the draws on flat buffers for batch 1.  The
engine sees the usual ``(R, P_a, d)`` states (transposed views).

Same fast-math flags as the one-step kernels: ``contract`` for logistic regression
(``reassoc`` could undo the split of ``ln 2`` in the ``exp``), ``reassoc`` and ``contract`` for
least squares; no finite-math assumptions, so a diverging run still produces inf/NaN and is
detected.  The logistic values are bit-identical to the step-by-step path's (both kernels
add in the same order: any ``d``, any batch; tested at ``d`` = 2, 5, 12) except for a
rotated design, whose ``x <- Q x`` the step-by-step path takes from BLAS (agreement to
rounding, 1e-12 tested); least squares is bit-identical for batch 1 at ``d = 2`` and agrees
to rounding otherwise (at most 5e-14 relative: sums over samples and coordinates may be
reassociated differently by the two kernels; ``tests/test_fused_local.py``);
a block's numbers depending on its stream only, they are bit-identical for any thread count,
``memory_limit`` or Dask.

When: :class:`FusedLocalSegments` is an execution path of the run plan
(:mod:`convkit.plan`), chosen per algorithm: on these problems (NumPy, float64) while the
compiled kernels are on (``convkit.kernels``) and numba is usable, it runs the algorithms that
declare fused segments for the problem kind and record no weighted averages.  Where its
numbers are the step-by-step ones bit for bit, on logistic regression with an unrotated design
and on least squares at ``d = 2`` with batch 1, it runs them beside algorithms of other
paths in the same call (each group draws the blocks' samples from their own streams, so
common random numbers hold and an algorithm's numbers do not depend on its neighbours);
elsewhere (agreement to rounding) it runs whole calls only
(:meth:`FusedLocalSegments.shares`).  The engine then runs the plan without deciding again.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from . import _fastexp
from ._jit import cacheable
from ._kernel_switch import compiled
from .plan import RunPlan, kernels_unavailable

__all__ = [
    "FUSED_LEAST_SQUARES",
    "FUSED_LOGISTIC",
    "MAX_SEGMENT",
    "FusedLocal",
    "FusedLocalSegments",
    "segment_ends",
    "segment_kernel",
]

#: the longest segment of one compiled call (progress, cancellation and timing in between)
MAX_SEGMENT = 2048

#: dimensions up to this one get a kernel compiled for their value (loops unrolled)
_UNROLL_D = 8

#: options of the helpers inlined into the kernels (numba IR inlining: the kernels' own
#: fast-math flags apply to their bodies)
_INLINED = dict(
    cache=True, fastmath={"reassoc", "contract"}, nogil=True, error_model="numpy", inline="always"
)


def segment_kernel(d: int = 0, kind: str = "logistic") -> Any:
    """The compiled segment kernel of ``kind`` (``"logistic"``, ``"least_squares"``) for
    dimension ``d`` (its own compilation for ``d <= _UNROLL_D``, one for all larger ``d``), or
    None when numba cannot be used or the kernels are switched off (``convkit.kernels``); built
    once per ``(kind, d)`` by :func:`convkit._kernel_switch.compiled`."""
    D = d if 0 < d <= _UNROLL_D else 0
    build = _compile if kind == "logistic" else _compile_ls
    return compiled(f"_fused_local.segment.{kind}.{D}", partial(build, D))


def _numba() -> Any:
    import numba

    return numba


def _sigmoid() -> Any:
    """The labels' sigmoid (:func:`_build_sigmoid`), built once."""
    return compiled("_fused_local.sigmoid", _build_sigmoid, switched=False)


def _finish_row() -> Any:
    """The engine's bookkeeping of one replicate (:func:`_build_finish_row`), built once."""
    return compiled("_fused_local.finish", _build_finish_row, switched=False)


def _build_sigmoid() -> Any:
    """The overflow-free sigmoid of :func:`convkit.problems.logistic.sigmoid` with libm's
    ``exp`` (``e = exp(-|z|)``, ``1 / (1 + e)`` for ``z >= 0``, ``e / (1 + e)`` otherwise),
    inlined into the logistic kernel for the labels, which must be those of
    :meth:`LogisticRegression.sample` (NumPy's ``exp``) bit for bit."""
    numba = _numba()

    @numba.njit(**_INLINED)
    def sigmoid(z):  # pragma: no cover - compiled
        e = np.exp(-abs(z))
        inv = 1.0 / (1.0 + e)
        return inv if z >= 0 else e * inv

    return cacheable(sigmoid, "_fused_local.sigmoid")


def _build_finish_row() -> Any:
    """The engine's bookkeeping of one algorithm's replicate after its workers' steps, shared
    by both kernels: ``m = mean / P`` (the workers' sum is in ``mean``), ``sums += m``,
    ``tails += m`` from the tail start on, the averaging after a communication step (worker
    ``p``'s coordinate ``i`` at ``theta[base + p ps + i cs]``: ``ps = d, cs = 1`` for the
    least-squares layout, ``ps = 1, cs = R_c P`` for the logistic one) and the divergence
    check."""
    numba = _numba()

    # inlined into the kernels (numba IR inlining): as a call it cost ~100 ns per replicate
    # and algorithm, a quarter of a d = 2 logistic step of 16 workers (measured)
    @numba.njit(**_INLINED)
    def finish(  # pragma: no cover - compiled
        a, row, k, d, Pa, base, ps, cs, theta, theta_star, tail_start, masks, mean, sums, tails,
        div, thr,
    ):  # fmt: skip
        dist = 0.0
        for i in range(d):
            mi = mean[a, row, i] / Pa
            mean[a, row, i] = mi
            sums[a, row, i] += mi
            if k >= tail_start[a]:
                tails[a, row, i] += mi
            dev = mi - theta_star[i]
            dist += dev * dev
        if masks[a, k - 1] and Pa > 1:
            for p in range(Pa):
                for i in range(d):
                    theta[base + p * ps + i * cs] = mean[a, row, i]
        if not (dist <= thr) and div[a, row] == 0:
            div[a, row] = k

    return cacheable(finish, "_fused_local.finish")


def _book_rows() -> Any:
    """The logistic kernel's bookkeeping of a block's rows (:func:`_build_book_rows`), built
    once."""
    return compiled("_fused_local.book_rows", _build_book_rows, switched=False)


def _build_book_rows() -> Any:
    """The engine's bookkeeping of one algorithm's rows ``s0 .. s0 + Rb`` in the logistic
    layout (worker ``p`` of row ``s0 + r``, coordinate ``i`` at ``theta[ub + i cs + r P +
    p]``), after the workers' steps: per row, the workers' sum of
    :func:`convkit._fastexp.helpers`' ``worker_sums`` (four partial sums, workers ``p = 4 m +
    l`` in sum ``l`` in order, combined as ``(s0 + s1) + (s2 + s3)``), then what
    :func:`_build_finish_row` does, in its order: ``m = sum / P``, ``sums += m``, ``tails +=
    m`` (``tail``), ``||m - theta*||^2`` and the averaging ``theta_p <- m`` (``avg``), the
    divergence check (the first ``k`` with ``not (dist <= thr)`` stored).  ``uP`` and ``P``
    are the worker count (unsigned and signed); ``pow2``: ``P`` is a power of two, and then
    ``m = sum * inv`` with ``inv = 1 / P`` (exact), the correctly rounded ``sum / P`` (a
    division costs more than the rest of a row's bookkeeping).  Inlined with a constant ``P``
    (the kernel does so for ``P = 8``), LLVM unrolls the sums: measured at ``P = 8``, ``d =
    2``, 6.4 ns per row with ``P`` a variable and a division, 5.3 with the multiplication,
    3.7 with the constant.  A constant costs compilation: the logistic kernel's first
    compilation at ``d = 2`` took 5.5 s without one, 8.7 s with ``P = 8`` and 11.3 s with
    ``P`` = 2, 4, 8 and 16 (wall, shared machine), hence one."""
    numba = _numba()

    @numba.njit(**_INLINED)
    def book(  # pragma: no cover - compiled
        theta, ub, uP, P, pow2, inv, cs, Rb, d, a, s0, k, avg, tail, theta_star, mean, sums,
        tails, div, thr,
    ):  # fmt: skip
        P4 = uP - uP % np.uint64(4)
        for r in range(Rb):
            row = s0 + r
            base = ub + np.uint64(r) * uP
            dist = 0.0
            for i in range(d):
                w = base + np.uint64(i) * cs
                q0 = 0.0
                q1 = 0.0
                q2 = 0.0
                q3 = 0.0
                for p in range(np.uint64(0), P4, np.uint64(4)):
                    q0 += theta[w + p]
                    q1 += theta[w + p + np.uint64(1)]
                    q2 += theta[w + p + np.uint64(2)]
                    q3 += theta[w + p + np.uint64(3)]
                for p in range(P4, uP):
                    q0 += theta[w + p]
                q = (q0 + q1) + (q2 + q3)
                mi = q * inv if pow2 else q / P  # the same number when P is a power of two
                mean[a, row, i] = mi
                sums[a, row, i] += mi
                if tail:
                    tails[a, row, i] += mi
                dev = mi - theta_star[i]
                dist += dev * dev
            if avg:
                for i in range(d):
                    w = base + np.uint64(i) * cs
                    mi = mean[a, row, i]
                    for p in range(uP):
                        theta[w + p] = mi
            if not (dist <= thr) and div[a, row] == 0:
                div[a, row] = k

    return cacheable(book, "_fused_local.book_rows")


def _compile(D: int) -> Any:
    """The kernel for dimension ``D`` (``D = 0``: any dimension, read from the arrays)."""
    numba = _numba()
    label_sigmoid = _sigmoid()
    book = _book_rows()
    _, sigmoid, _, _ = _fastexp.helpers()

    @numba.njit(cache=True, fastmath={"contract"}, nogil=True, error_model="numpy")
    def segment(  # pragma: no cover - compiled
        gen, x, y, sqrt_h, q, theta_star, noise, theta, offs, P, b, n, tail_start, gammas,
        masks, mean, sums, tails, div, s0, k0, k1, thr,
    ):  # fmt: skip
        # x (bm, d, Rb, Pm), y (bm, Rb, Pm): the block's sample buffers, replicates and
        # workers last; q: (d, d) rotation or (0, 0); theta: every algorithm's workers as
        # (d, Rc, P_a) (coordinate, replicate, worker), flattened, algorithm a from offs[a];
        # mean, sums, tails (A, Rc, d); div (A, Rc); rows s0 .. s0 + Rb of the part.
        bm, Rb, Pm = y.shape
        d = D if D > 0 else x.shape[1]
        A = P.shape[0]
        Rc = div.shape[1]
        rotate = q.shape[0] == d
        z = np.empty(d, dtype=x.dtype)
        c = np.empty(bm, dtype=x.dtype)
        xf = x.reshape((bm, d, Rb * Pm))  # the same buffers, (replicate, worker) flat
        yf = y.reshape((bm, Rb * Pm))
        accs = np.empty(Rb * Pm, dtype=x.dtype)  # the workers' margins, then coefficients
        flat = bm == 1 and not rotate  # one sample per worker: the flat (d, Rb Pm) buffers
        for k in range(k0, k1 + 1):
            if flat:  # 1.-2. as below, in the same order, on the flat buffers
                m = np.uint64(Rb * Pm)
                for w in range(m):
                    for i in range(d):
                        xf[0, i, w] = gen.standard_normal()
                for w in range(m):
                    t = 0.0
                    for i in range(d):
                        xi = xf[0, i, w] * sqrt_h[i]
                        xf[0, i, w] = xi
                        t += xi * theta_star[i]
                    yf[0, w] = 1.0 if gen.random() < label_sigmoid(t) else -1.0
            # 1. all the block's standard normals (NumPy's C-order fill of (Rb, Pm, bm, d))
            for r in range(0 if flat else Rb):
                for p in range(Pm):
                    for j in range(bm):
                        for i in range(d):
                            x[j, i, r, p] = gen.standard_normal()
            # 2. the features and labels (the uniforms, in C order of (Rb, Pm, bm))
            for r in range(0 if flat else Rb):
                for p in range(Pm):
                    for j in range(bm):
                        for i in range(d):
                            x[j, i, r, p] *= sqrt_h[i]
                        if rotate:  # x <- Q x
                            for i in range(d):
                                acc = 0.0
                                for m in range(d):
                                    acc += x[j, m, r, p] * q[i, m]
                                z[i] = acc
                            for i in range(d):
                                x[j, i, r, p] = z[i]
                        t = 0.0
                        for i in range(d):
                            t += x[j, i, r, p] * theta_star[i]
                        y[j, r, p] = 1.0 if gen.random() < label_sigmoid(t) else -1.0
            # 3. every algorithm's step of the block's replicates (no random numbers)
            for a in range(A):
                if k > n[a]:
                    continue
                Pa = P[a]
                ba = b[a]
                step = gammas[a, k - 1] / ba
                # worker p of row s0 + r, coordinate i at theta[ub + i cs + r P_a + p];
                # unsigned indices (no negative-index wraparound): the passes vectorize
                uP = np.uint64(Pa)
                cs = np.uint64(Rc * Pa)
                ub = np.uint64(offs[a] + s0 * Pa)
                if ba == 1 and Pa == Pm and D > 0:  # every worker of every row, d unrolled:
                    # one pass (margin, coefficient, update per worker), the operations of
                    # the three passes below in their order
                    m = np.uint64(Rb * Pm)
                    for w in range(m):
                        acc = 0.0
                        for i in range(D):
                            acc += xf[0, i, w] * theta[ub + np.uint64(i) * cs + w]
                        y0 = yf[0, w]
                        cw = -y0 * sigmoid(-y0 * acc) * step
                        for i in range(D):
                            theta[ub + np.uint64(i) * cs + w] -= cw * xf[0, i, w]
                elif ba == 1 and Pa == Pm:  # every worker of every row: one run of Rb P_a
                    # margins coordinate by coordinate (each worker's sum in order i = 0,
                    # 1, ...), coefficients, then the update: no pass writes what another
                    # of its rows reads, so LLVM needs few overlap checks at any d
                    m = np.uint64(Rb * Pm)
                    for w in range(m):
                        accs[w] = 0.0
                    for i in range(d):
                        row_i = ub + np.uint64(i) * cs
                        for w in range(m):
                            accs[w] += xf[0, i, w] * theta[row_i + w]
                    for w in range(m):
                        y0 = yf[0, w]
                        accs[w] = -y0 * sigmoid(-y0 * accs[w]) * step
                    for i in range(d):
                        row_i = ub + np.uint64(i) * cs
                        for w in range(m):
                            theta[row_i + w] -= accs[w] * xf[0, i, w]
                else:  # fewer workers than the buffers hold, or a batch: row by row
                    for r in range(Rb):
                        ur = ub + np.uint64(r) * uP
                        for p in range(uP):
                            for j in range(ba):
                                acc = 0.0
                                for i in range(d):
                                    acc += x[j, i, r, p] * theta[ur + np.uint64(i) * cs + p]
                                yj = y[j, r, p]
                                c[j] = -yj * sigmoid(-yj * acc) * step
                            for j in range(ba):
                                cj = c[j]
                                for i in range(d):
                                    theta[ur + np.uint64(i) * cs + p] -= cj * x[j, i, r, p]
                # 4. the engine's bookkeeping of the block's rows (worker_sums and finish,
                # the same operations in the same order)
                avg = masks[a, k - 1] and Pa > 1
                tail = k >= tail_start[a]
                if Pa == 8:  # the large-step studies' worker count, as a constant
                    book(theta, ub, np.uint64(8), 8, True, 0.125, cs, Rb, d, a, s0, k, avg,
                         tail, theta_star, mean, sums, tails, div, thr)  # fmt: skip
                else:
                    book(theta, ub, uP, Pa, Pa & (Pa - 1) == 0, 1.0 / Pa, cs, Rb, d, a, s0, k,
                         avg, tail, theta_star, mean, sums, tails, div, thr)  # fmt: skip

    return segment


def _compile_ls(D: int) -> Any:
    """The least-squares kernel (Gaussian design ``x = z * sqrt(h)``, labels ``y = <x, theta*>
    + noise eps``) for dimension ``D`` (``D = 0``: any dimension)."""
    numba = _numba()
    finish = _finish_row()

    @numba.njit(cache=True, fastmath={"reassoc", "contract"}, nogil=True, error_model="numpy")
    def segment(  # pragma: no cover - compiled
        gen, z, eps, scale, q, theta_star, noise, theta, offs, P, b, n, tail_start, gammas,
        masks, mean, sums, tails, div, s0, k0, k1, thr,
    ):  # fmt: skip
        # as the logistic kernel; z (Rb, Pm, bm, d) and eps (Rb, Pm, bm) are the block's draws
        # (LeastSquares.sample: all the z, then all the eps), the step that of
        # convkit._kernels.ls_sgd_update: theta -= gamma/b sum_j x_j (<x_j, theta - theta*> -
        # noise eps_j), x_j = z_j * scale.  (q is unused: rotated designs are not fused.)
        Rb, Pm, bm = eps.shape
        d = D if D > 0 else z.shape[3]
        A = P.shape[0]
        res = np.empty(bm, dtype=z.dtype)
        for k in range(k0, k1 + 1):
            for r in range(Rb):
                for p in range(Pm):
                    for j in range(bm):
                        for i in range(d):
                            z[r, p, j, i] = gen.standard_normal()
            for r in range(Rb):
                for p in range(Pm):
                    for j in range(bm):
                        eps[r, p, j] = gen.standard_normal()
            for r in range(Rb):
                row = s0 + r
                for a in range(A):
                    if k > n[a]:
                        continue
                    Pa = P[a]
                    ba = b[a]
                    step = gammas[a, k - 1] / ba
                    base = offs[a] + row * Pa * d
                    for i in range(d):
                        mean[a, row, i] = 0.0
                    for p in range(Pa):
                        w = base + p * d
                        if ba == 1:  # the common case, without the residual buffer
                            acc = 0.0
                            for i in range(d):
                                acc += z[r, p, 0, i] * scale[i] * (theta[w + i] - theta_star[i])
                            r0 = (acc - noise * eps[r, p, 0]) * step
                            for i in range(d):
                                theta[w + i] -= r0 * z[r, p, 0, i] * scale[i]
                            for i in range(d):
                                mean[a, row, i] += theta[w + i]
                            continue
                        for j in range(ba):
                            acc = 0.0
                            for i in range(d):
                                acc += z[r, p, j, i] * scale[i] * (theta[w + i] - theta_star[i])
                            res[j] = (acc - noise * eps[r, p, j]) * step
                        for j in range(ba):
                            rj = res[j]
                            for i in range(d):
                                theta[w + i] -= rj * z[r, p, j, i] * scale[i]
                        for i in range(d):
                            mean[a, row, i] += theta[w + i]
                    finish(a, row, k, d, Pa, base, d, 1, theta, theta_star, tail_start, masks,
                           mean, sums, tails, div, thr)  # fmt: skip

    return segment


@dataclass(frozen=True)
class FusedLocalSegments:
    """The execution path of whole segments of local steps on one problem kind
    (``"logistic"``: online :class:`~convkit.problems.logistic.LogisticRegression`;
    ``"least_squares"``: :class:`~convkit.problems.least_squares.LeastSquares` with its
    unrotated Gaussian design), for :func:`convkit.plan.plan`."""

    kind: str

    @property
    def name(self) -> str:
        return "fused-local-" + self.kind.replace("_", "-")

    def supports(self, plan: RunPlan) -> tuple[bool, str]:
        """The call's conditions: this problem kind, NumPy in float64, compiled kernels on
        and numba usable (the algorithms: :meth:`accepts`)."""
        prob = plan.problem
        if plan.engine != "simulate":
            return False, "Monte Carlo engine only"
        if prob.fused_model != self.kind:
            return False, (
                f"the problem {type(prob).__name__} declares fused model {prob.fused_model!r} "
                f"(Problem.fused_model); these segments compute {self.kind!r}, the model of "
                + ("LogisticRegression" if self.kind == "logistic" else "LeastSquares")
            )
        if self.kind == "least_squares" and not (prob.design == "gaussian" and prob.Q is None):
            return False, "the least-squares design is not an unrotated Gaussian one"
        if plan.backend is None or plan.backend.name != "numpy" or plan.dtype != "float64":
            return False, "the kernels run NumPy float64 states only"
        why = kernels_unavailable(plan)
        if why is not None:
            return False, why
        return True, (
            f"Local-SGD on {type(prob).__name__} (NumPy, float64): whole segments of local "
            "steps of a replicate block in one compiled call"
        )

    def accepts(self, plan: RunPlan, i: int) -> tuple[bool, str]:
        """Algorithm ``i`` when its class declares fused segments for this problem kind
        (:attr:`~convkit.algorithms.base.Algorithm.capabilities`) and it records no weighted
        averages."""
        a = plan.algorithms[i]
        caps = a.capabilities
        if not caps.runs_fused(self.kind):
            return False, caps.refusal(type(a), self.kind, "fused Local-SGD segments")
        if plan.weight_shifts and plan.weight_shifts[i] is not None:
            return False, "the weighted averages (weight_shift) are recorded step by step"
        return True, (
            f"{type(a).__name__} declares fused Local-SGD segments on {self.kind}: whole "
            "segments of local steps of a replicate block in one compiled call"
        )

    def shares(self, plan: RunPlan) -> tuple[bool, str]:
        """Whether some algorithms of a call may run here while the others run step by step:
        only where the segment kernel's numbers are those of the step-by-step kernels bit for
        bit (logistic regression with an unrotated design; least squares at ``d = 2`` with
        batch 1, see the module docstring); otherwise an algorithm's numbers would depend on
        its neighbours in the call."""
        if self.kind == "logistic":
            if plan.problem.Q is None:
                return True, ""
            return False, (
                "on a rotated design the segment kernel agrees with the step-by-step kernels "
                "to rounding only"
            )
        mine = [a for i, a in enumerate(plan.algorithms) if self.accepts(plan, i)[0]]
        if plan.problem.d == 2 and all(a.batch == 1 for a in mine):
            return True, ""
        return False, (
            "on least squares the segment kernel agrees with the step-by-step kernels to "
            "rounding only (bit for bit at d = 2 with batch 1)"
        )


#: the fused segments on online logistic regression
FUSED_LOGISTIC = FusedLocalSegments("logistic")
#: the fused segments on Gaussian least squares
FUSED_LEAST_SQUARES = FusedLocalSegments("least_squares")
#: the problem kind of each fused path's name
FUSED_KINDS = {p.name: p.kind for p in (FUSED_LOGISTIC, FUSED_LEAST_SQUARES)}


class FusedLocal:
    """The state of one part (``Rc`` replicates; algorithms ``which`` of the call, those the
    plan put on the fused segments of problem kind ``kind``) and its segment driver.

    ``states[g]``, ``sums[g]`` and ``tails[g]`` (algorithm ``which[g]``) are what the
    step-by-step engine keeps per algorithm (:class:`~convkit.algorithms.local.LocalState`
    with views of the flat worker array, and ``(Rc, d)`` float64 sums), so the engine records
    from them unchanged.  The sample buffers have the shape of the whole call's draws
    (``P_max``, ``b_max`` over all its algorithms): the random streams do not depend on which
    algorithms a part runs.
    """

    def __init__(
        self,
        run: Any,
        Rc: int,
        blocks: list[tuple[int, int]],
        which: tuple[int, ...],
        kind: str,
    ) -> None:
        from .algorithms.local import LocalState

        prob = run.problem
        algos = [run.algos[i] for i in which]
        d = prob.d
        self.run, self.blocks = run, blocks
        self.kernel = segment_kernel(d, kind)
        if self.kernel is None:
            path = FusedLocalSegments(kind).name
            raise RuntimeError(
                f"the run plan chose {path!r} but its compiled kernel cannot be built "
                "in this process (numba missing, CONVKIT_NO_NUMBA set or convkit.kernels "
                "switched off here)"
            )
        logistic = kind == "logistic"
        A = len(algos)
        self.P = np.array([a.workers for a in algos], dtype=np.int64)
        self.b = np.array([a.batch for a in algos], dtype=np.int64)
        self.n = np.array([run.ns[i] for i in which], dtype=np.int64)
        self.tail_start = np.array([run.tail_starts[i] for i in which], dtype=np.int64)
        sizes = Rc * self.P * d
        self.offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.theta = np.empty(int(sizes.sum()))
        self.mean = np.empty((A, Rc, d))
        self.sums = np.zeros((A, Rc, d))
        self.tails = np.zeros((A, Rc, d))
        n_max = int(self.n.max())
        self.gammas = np.zeros((A, n_max))
        self.masks = np.zeros((A, n_max), dtype=np.bool_)
        self.states = []
        for g, a in enumerate(algos):
            ng = int(self.n[g])
            self.gammas[g, :ng] = a._gammas[:ng]
            self.masks[g, :ng] = a._comm_mask[:ng]
            flat = self.theta[self.offs[g] : self.offs[g] + sizes[g]]
            if logistic:  # (d, Rc, P_a): the kernel's vectorized passes; seen as (Rc, P_a, d)
                view = flat.reshape(d, Rc, a.workers).transpose(1, 2, 0)
            else:
                view = flat.reshape(Rc, a.workers, d)
            view[...] = run.theta0
            self.mean[g] = view.mean(axis=1)
            self.states.append(LocalState(view, self.mean[g]))
        self.sqrt_h = np.ascontiguousarray(prob.sqrt_h, dtype=np.float64)
        self.q = np.empty((0, 0)) if prob.Q is None else np.ascontiguousarray(prob.Q)
        self.noise = float(getattr(prob, "noise", None) or 0.0)
        self.theta_star = np.ascontiguousarray(prob.theta_star, dtype=np.float64)
        Pm = max(a.workers for a in run.algos)
        bm = max(a.batch for a in run.algos)
        if logistic:  # replicates and workers last
            self.x = [np.empty((bm, d, s1 - s0, Pm)) for s0, s1 in blocks]
            self.y = [np.empty((bm, s1 - s0, Pm)) for s0, s1 in blocks]
        else:
            self.x = [np.empty((s1 - s0, Pm, bm, d)) for s0, s1 in blocks]
            self.y = [np.empty((s1 - s0, Pm, bm)) for s0, s1 in blocks]
        self.div = np.zeros((A, Rc), dtype=np.int64)

    def advance(self, generators: list[np.random.Generator], k0: int, k1: int) -> None:
        """Local steps ``k0..k1`` of every algorithm and block (``generators``: the blocks')."""
        for (s0, _), gen, x, y in zip(self.blocks, generators, self.x, self.y, strict=True):
            self.kernel(
                gen, x, y, self.sqrt_h, self.q, self.theta_star, self.noise, self.theta, self.offs,
                self.P, self.b, self.n, self.tail_start, self.gammas, self.masks,
                self.mean, self.sums, self.tails, self.div, s0, k0, k1,
                float(self.run.div_threshold),
            )  # fmt: skip


def segment_ends(layouts: list[Any], ns: list[int]) -> np.ndarray:
    """The last step of every segment: every record step, every algorithm's last step, and
    at most :data:`MAX_SEGMENT` steps apart."""
    n_max = max(ns)
    ends = [lay.steps for lay in layouts] + [np.asarray(ns)]
    ends.append(np.arange(MAX_SEGMENT, n_max, MAX_SEGMENT))
    ends.append(np.array([n_max]))
    return np.unique(np.concatenate(ends).astype(np.int64))
