"""Precision of the compiled exact Local-SGD loop against an extended-precision computation of
the same recursion (``np.longdouble``: 64-bit mantissa on x86-64), its step sizes against
extended-precision powers, the kernel's ``O(rounds)`` inputs against the schedules' masks, and
numbers that do not depend on numba's thread count."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.exact import expected_error
from convkit.exact._kernels import (
    _GAMMA_BLOCK,
    _SERIES_FROM,
    STEP_ARRAY,
    local_kernel,
    poly_step_sizes,
)
from convkit.exact.local import local_specs
from convkit.exact.moments import design_coefficients, problem_arrays

pytestmark = pytest.mark.skipif(local_kernel() is None, reason="numba not available")

LD = np.longdouble


def _reference(h, z2, s2, gam, comm, P, b, c_sq, c_tr, tail_start, rec):
    """The recursion of :mod:`convkit.exact.local` (module docstring) in ``np.longdouble``,
    one Python step at a time; columns as the kernel's output."""
    h, S = h.astype(LD), z2.astype(LD)
    Cm, A, At = S.copy(), np.zeros_like(S), np.zeros_like(S)
    q = np.zeros(2, dtype=LD)
    qt = np.zeros(2, dtype=LD)
    ip = LD(1) / LD(P)
    out = np.full((rec.size, 6), np.nan, dtype=LD)
    pos = 0
    for k in range(1, gam.size + 1):
        g = LD(gam[k - 1])
        gh = g * h
        r = 1 - gh
        add = g * g / LD(b) * (LD(c_tr) * (h @ S) + LD(s2))
        S = S * (1 - 2 * gh + LD(c_sq) * gh * gh) + add * h
        Cm = Cm * r * r
        V = ip * S + (1 - ip) * Cm
        if comm[k - 1]:
            S, Cm = V.copy(), V.copy()
        A = r * A + V
        vv = np.array([h @ V, V.sum()])
        q += 2 * np.array([h @ A, A.sum()]) - vv
        if k >= tail_start:
            At = r * At + V
            qt += 2 * np.array([h @ At, At.sum()]) - vv
        if pos < rec.size and rec[pos] == k:
            out[pos, 0:2] = q / LD(k) ** 2
            if k >= tail_start:
                out[pos, 2:4] = qt / LD(k - tail_start + 1) ** 2
            out[pos, 4:6] = vv
            pos += 1
    return out


@pytest.mark.parametrize("comm", ["mba", "rounds:37", "osa", "every:9"])
def test_kernel_agrees_with_longdouble_recursion(comm):
    """Every recorded column at step k within ``4 k eps`` relative of the extended-precision
    recursion (n = 20000 local steps, P = 3, decaying steps from a start far from the
    optimum).  The bound is the rounding of the recursion itself, not of the kernel: each
    step multiplies the moments by factors within a few eps of exact, and with
    ``gamma_k h -> 0`` nothing contracts the accumulated error, so it grows like ``k eps``
    (the NumPy path: 0.5 k eps for the last iterate, 0.03 k eps for the Polyak-Ruppert average at
    k = 20000).  A kernel that lost digits in its sums (e.g. a reassociated long sum) would
    exceed it.  The kernel forms its increments before adding them and weighs the worker mean
    as ``c + (s - c) / P`` (weights adding up to exactly 1; :mod:`convkit.exact._kernels`), so
    it does much better: 1e-13 relative everywhere (measured: 1.1e-14; 1.1e-12 before, for MBA,
    from ``1/P + fl(1 - 1/P) != 1``)."""
    prob = ck.LeastSquares.gaussian(4, spectrum="1/i", noise=0.7, seed=3)
    n, P = 20_000, 3
    algo = ck.LocalSGD(P, ck.PolyDecay(0.4, 0.75), comm=comm, name="a")
    res = expected_error(prob, algo, steps=n, theta0=np.full(4, 2.0), n_record=12)
    cv = res.values["a"]
    h, z2, s2 = problem_arrays(prob, np.full(4, 2.0))
    c_sq, c_tr = design_coefficients(prob.design, 1)
    ref = _reference(
        h,
        z2,
        s2,
        algo.step_size.values(n),
        algo.comm.mask(n),
        P,
        1,
        c_sq,
        c_tr,
        n // 2 + 1,
        cv.steps,
    )
    got = cv.values[:, :3, 1:3, 0]  # (rec, avg/tail/last, hnorm2/dist2)
    want = ref.reshape(-1, 3, 2).astype(np.float64)
    ok = np.isfinite(want)
    assert np.array_equal(np.isfinite(got), ok)
    k = np.broadcast_to(cv.steps[:, None, None].astype(float), got.shape)[ok]
    rel = np.abs(got[ok] - want[ok]) / np.abs(want[ok])
    bound = 4 * k * np.finfo(np.float64).eps
    assert np.all(rel <= bound), float((rel / bound).max())
    assert rel.max() <= 1e-13, float(rel.max())


def _max_rel_error(prob, algo, n, theta0):
    """Largest relative difference between the recorded columns of the engine and of
    :func:`_reference` (n local steps, 8 record points)."""
    res = expected_error(prob, algo, steps=n, theta0=theta0, n_record=8)
    cv = res.values["a"]
    h, z2, s2 = problem_arrays(prob, theta0)
    c_sq, c_tr = design_coefficients(prob.design, algo.batch)
    ref = _reference(
        h,
        z2,
        s2,
        algo.step_size.values(n),
        algo.comm.mask(n),
        algo.workers,
        algo.batch,
        c_sq,
        c_tr,
        n // 2 + 1,
        cv.steps,
    )
    got = cv.values[:, :3, 1:3, 0]
    want = ref.reshape(-1, 3, 2).astype(np.float64)
    ok = np.isfinite(want)
    assert np.array_equal(np.isfinite(got), ok)
    return float((np.abs(got[ok] - want[ok]) / np.abs(want[ok])).max())


@pytest.mark.parametrize(("P", "comm"), [(1, "mba"), (3, "every:5")])
def test_small_constant_steps_keep_their_digits(P, comm):
    """A small constant step (``g h_j`` from 2.5e-5 to 1e-4): factors such as ``1 - g h``
    rounded next to 1 would shift the contraction rate by ``eps / (g h)`` relative at every
    step, the same way (4e-13 and 1.5e-13 relative after 2e4 steps).  The kernel adds
    increments instead: within 1e-13 (measured 3.6e-15)."""
    prob = ck.LeastSquares.gaussian(4, spectrum="1/i", noise=0.7, seed=3)
    algo = ck.LocalSGD(P, ck.Constant(1e-4), comm=comm, name="a")
    assert _max_rel_error(prob, algo, 20_000, np.full(4, 2.0)) <= 1e-13


def test_series_step_sizes_keep_the_precision():
    """From ``k + k0 = 512`` on the PolyDecay steps come from anchors and a series
    (:func:`~convkit.exact._kernels.poly_step_sizes`); 70000 steps of MBA (one worker) and of
    Local-SGD (P = 2, every 3 steps) stay within 1e-13 of the extended-precision recursion
    driven by NumPy's powers (measured 5e-15)."""
    prob = ck.LeastSquares.gaussian(3, spectrum="1/i", noise=0.7, seed=5)
    for P, comm in ((1, "mba"), (2, "every:3")):
        algo = ck.LocalSGD(P, ck.PolyDecay(0.5, 0.75, 2.5), comm=comm, name="a")
        assert _max_rel_error(prob, algo, 70_000, np.full(3, 2.0)) <= 1e-13


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("k0", [0.0, 3.7, 1e5 + 0.25])
def test_poly_step_sizes_within_two_eps_of_the_exact_power(alpha, k0):
    """``C (k + k0)^-alpha`` of the kernel (a ``pow`` per step below 512, above it a ``pow``
    per anchor, every 2 to 256 steps, and a degree-8 series) within 2 eps relative of the
    extended-precision power, on blocks from ``k = 1`` (every anchor spacing), across the
    switch to one anchor per 256 steps and far above it (measured: 1.6 eps; NumPy's ``pow``:
    1.1 eps)."""
    eps = np.finfo(np.float64).eps
    for start in (
        1,
        int(_SERIES_FROM) - 4 * _GAMMA_BLOCK + 1,
        244 * _GAMMA_BLOCK + 1,
        24414 * _GAMMA_BLOCK + 1,
    ):
        m = 8 * _GAMMA_BLOCK
        got = poly_step_sizes(0.37, alpha, k0, m, start=start)
        k = np.arange(start, start + m).astype(LD)
        exact = LD(0.37) * (k + LD(k0)) ** LD(-alpha)
        rel = np.abs(got.astype(LD) - exact) / exact
        assert float(rel.max()) <= 2 * eps, (start, float(rel.max() / eps))
    with pytest.raises(ValueError, match="multiple"):
        poly_step_sizes(0.37, alpha, k0, 10, start=2)


def test_kernel_uses_poly_step_sizes():
    """The kernel's PolyDecay steps are those of ``poly_step_sizes``: passing them as an
    array gives bit-identical curves (70000 steps, past the switch to the series)."""
    prob = ck.LeastSquares.gaussian(3, spectrum="1/i", noise=0.7, seed=5)
    st = ck.PolyDecay(0.5, 0.75, 2.5)
    algo = ck.LocalSGD(2, st, comm="every:3", name="a")
    n = 70_000
    spec = local_specs([algo], [n], None, 9, 0.5)[0]
    h, z2, s2 = problem_arrays(prob, np.full(3, 2.0))
    c_sq, c_tr = design_coefficients(prob.design, 1)
    period, n_even, rpos = spec.kernel_rounds()
    kernel = local_kernel()
    outs = []
    for kind, gam in (
        (spec.kernel_step()[0], spec.kernel_step()[4]),
        (STEP_ARRAY, poly_step_sizes(st.C, st.alpha, st.k0, n)),
    ):
        out = np.full((spec.rec.size, 6), np.nan)
        args = (h, z2, n, kind, st.C, st.alpha, st.k0, gam, period, n_even, rpos, 2.0, 1.0)
        assert kernel(*args, c_sq, c_tr, s2, spec.tail_start, spec.rec, 1e12, out) == 0
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize(
    "comm", [ck.EveryStep(), ck.Final(), ck.Every(7), ck.Rounds(13), ck.Geometric(1.0, 1.5)]
)
def test_kernel_round_forms_equal_the_mask(comm):
    """Period, evenly spaced and position forms of the rounds give the same curves as the
    NumPy path driven by the full boolean mask."""
    prob = ck.LeastSquares.gaussian(3, noise=0.5, seed=1)
    algo = ck.LocalSGD(4, ck.Constant(0.05), comm=comm, name="a")
    a = expected_error(prob, algo, steps=301, use_numba=True).frame
    b = expected_error(prob, algo, steps=301, use_numba=False).frame
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=1e-12)
    assert a["rounds"].tolist() == b["rounds"].tolist()


@pytest.mark.parametrize(("n", "N"), [(301, 1), (301, 300), (301, 301), (1000, 7), (10007, 5003)])
def test_evenly_spaced_rounds_in_integers(n, N):
    """``Rounds(N)``: the kernel advances ``j n = a N + b`` in integers; its rounds are those of
    the mask (``ceil(j n / N)``), so both paths agree."""
    prob = ck.LeastSquares.gaussian(2, noise=0.5, seed=1)
    algo = ck.LocalSGD(2, ck.Constant(0.05), comm=ck.Rounds(N), name="a")
    a = expected_error(prob, algo, steps=n, use_numba=True).frame
    b = expected_error(prob, algo, steps=n, use_numba=False).frame
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=1e-12)
    assert a["rounds"].tolist() == b["rounds"].tolist()


def test_one_worker_ignores_the_rounds_exactly():
    """One worker: the compiled loop takes the same path whatever the schedule (``V = S``),
    so MBA, OSA, ``Every(7)`` and ``Rounds(33)`` give bit-identical numbers."""
    prob = ck.LeastSquares.gaussian(6, spectrum="1/i", noise=1.0, seed=1)
    st = ck.PolyDecay(0.5, 0.75)
    algos = [
        ck.LocalSGD(1, st, comm=c, name=str(i))
        for i, c in enumerate([ck.EveryStep(), ck.Final(), ck.Every(7), ck.Rounds(33)])
    ]
    v = expected_error(prob, algos, steps=500).values
    for i in range(1, 4):
        np.testing.assert_array_equal(v[str(i)].values, v["0"].values)


def test_numbers_do_not_depend_on_the_thread_count():
    """Several configurations of one call run on parallel threads (numba's thread count): one
    and two threads give bit-identical frames, and so does each configuration alone; the
    threshold search too."""
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has a single thread here (NUMBA_NUM_THREADS = 1)")
    from convkit.exact import communication_threshold
    from convkit.exact.local import kernel_threads

    prob = ck.LeastSquares.gaussian(5, spectrum="1/i", noise=0.8, seed=2)
    st = ck.PolyDecay(0.4, 0.75)
    algos = [
        ck.MBA(2, st, name="mba"),
        ck.LocalSGD(4, st, comm=ck.Rounds(17), name="r17"),
        ck.OSA(3, st, name="osa"),
        ck.LocalSGD(2, ck.Constant(0.05), comm="every:5", batch=2, name="c"),
    ]
    before = numba.get_num_threads()
    frames, thresholds = [], []
    try:
        for threads in (1, 2):
            numba.set_num_threads(threads)
            assert kernel_threads() == threads
            frames.append(expected_error(prob, algos, gradients=24_000).frame)
            thresholds.append(communication_threshold(20_000, 4, 0.75, problem=prob))
    finally:
        numba.set_num_threads(before)
    pd_testing = pytest.importorskip("pandas.testing")
    pd_testing.assert_frame_equal(frames[0], frames[1], check_exact=True)
    assert thresholds[0] == thresholds[1]
    for a in algos:
        alone = expected_error(prob, a, gradients=24_000).frame
        mine = frames[1][frames[1].config == a.label].reset_index(drop=True)
        pd_testing.assert_frame_equal(alone, mine, check_exact=True)
