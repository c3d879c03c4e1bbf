"""Precision of the compiled exact Local-SGD loop against an extended-precision computation of
the same recursion (``np.longdouble``: 64-bit mantissa on x86-64), and the kernel's
``O(rounds)`` inputs against the schedules' masks."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.exact import expected_error
from convkit.exact._kernels import local_kernel
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
    (measured: 0.5 k eps for the last iterate, 0.03 k eps for the Polyak-Ruppert average at
    k = 20000; the NumPy path shows the same).  A kernel that lost digits in its sums (e.g. a
    reassociated long sum) would exceed it."""
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
