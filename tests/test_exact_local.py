"""Exact engine: identities to rounding error, a full-matrix reference, layout, divergence."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.exact import EXACT_COUNT, expected_error
from convkit.exact._kernels import local_kernel
from convkit.result import FRAME_COLUMNS
from convkit.simulate import DivergenceWarning


def full_matrix_reference(problem, algo, n, theta0, tail=0.5):
    """Independent reference: full d x d matrices in the ORIGINAL coordinates (no diagonal
    reduction, no eigenbasis), one-step map from convkit.bounds' SymPy-derived recursion.

    Same-worker S, cross-worker C; between averages C' = (I - gH) C (I - gH); an average maps
    both to V = S/P + (1 - 1/P) C.  Polyak: A(t) = (I - g_t H) A(t-1) + V(t),
    Q(t) = Q(t-1) + A(t) + A(t)^T - V(t), E[(sum zbar)(sum zbar)^T] = Q.
    Returns dict iterate -> (hnorm2, dist2) arrays over steps 1..n.
    """
    from convkit.bounds.moments import second_moment_step_numeric

    H = problem.H
    d = problem.d
    eta0 = np.asarray(theta0, float) - problem.theta_star
    S = np.outer(eta0, eta0)
    C = S.copy()
    A = np.zeros((d, d))
    At = np.zeros((d, d))
    Q = np.zeros((d, d))
    Qt = np.zeros((d, d))
    P, b = algo.workers, algo.batch
    gam = algo.step_size.values(n)
    comm = algo.comm.mask(n)
    s0 = int(np.floor(tail * n)) + 1
    out = {it: np.full((n, 2), np.nan) for it in ("avg", "tail", "last")}
    eye = np.eye(d)
    for k in range(1, n + 1):
        g = gam[k - 1]
        F = eye - g * H
        if problem.design == "additive":
            S = F @ S @ F + g * g * problem.noise**2 * H / b
        else:
            S = second_moment_step_numeric(
                H, S, gamma=g, b=b, sigma=problem.noise, design=problem.design
            )
        C = F @ C @ F
        V = S / P + (1 - 1 / P) * C
        if comm[k - 1]:
            S, C = V.copy(), V.copy()
        A = F @ A + V
        Q = Q + A + A.T - V
        out["avg"][k - 1] = [np.trace(H @ Q) / k**2, np.trace(Q) / k**2]
        out["last"][k - 1] = [np.trace(H @ V), np.trace(V)]
        if k >= s0:
            At = F @ At + V
            Qt = Qt + At + At.T - V
            m = k - s0 + 1
            out["tail"][k - 1] = [np.trace(H @ Qt) / m**2, np.trace(Qt) / m**2]
    return out


def _curve(res, config, metric, iterate):
    c = res.curve(config, metric, iterate)
    return c["step"].to_numpy(), c["mean"].to_numpy()


@pytest.mark.parametrize(
    ("design", "P", "comm", "b"),
    [
        ("gaussian", 3, "every:4", 2),
        ("gaussian", 1, "osa", 1),
        ("gaussian", 4, "mba", 1),
        ("rademacher", 2, "rounds:5", 3),
        ("additive", 3, "osa", 2),
    ],
)
def test_matches_full_matrix_reference(design, P, comm, b):
    """The O(d) diagonal recursion in H's eigenbasis equals the full-matrix recursion in the
    original coordinates (rotated H for the Gaussian/additive designs; the Rademacher design
    uses a diagonal H, where the derivation's diag term is defined) to 1e-12 relative, for
    every iterate and every step."""
    d, n = 4, 60
    prob = getattr(ck.LeastSquares, design)(
        d, spectrum="1/i", noise=0.7, rotate=design != "rademacher", seed=5
    )
    algo = ck.LocalSGD(P, ck.PolyDecay(0.4, 0.6, k0=1.0), comm=comm, batch=b, name="a")
    theta0 = np.linspace(-1, 1, d)
    res = expected_error(prob, algo, steps=n, theta0=theta0, record=range(1, n + 1))
    ref = full_matrix_reference(prob, algo, n, theta0)
    for it in ("avg", "tail", "last"):
        for j, metric in enumerate(("hnorm2", "dist2")):
            steps, vals = _curve(res, "a", metric, it)
            np.testing.assert_allclose(vals, ref[it][steps - 1, j], rtol=1e-12, atol=0)
    steps, er = _curve(res, "a", "excess_risk", "avg")
    np.testing.assert_allclose(er, 0.5 * ref["avg"][steps - 1, 0], rtol=1e-12)


def test_single_worker_is_plain_sgd_for_every_schedule():
    """P = 1: MBA, OSA and every Local-SGD schedule are plain averaged SGD (identical)."""
    prob = ck.LeastSquares.gaussian(6, spectrum="1/i", noise=1.0, seed=1)
    st = ck.PolyDecay(0.5, 0.75)
    algos = [
        ck.MBA(1, st, name="mba"),
        ck.OSA(1, st, name="osa"),
        ck.LocalSGD(1, st, comm="every:7", name="h7"),
    ]
    res = expected_error(prob, algos, steps=500)
    base = res.frame[res.frame.config == "mba"]["mean"].to_numpy()
    for name in ("osa", "h7"):
        other = res.frame[res.frame.config == name]["mean"].to_numpy()
        np.testing.assert_allclose(other, base, rtol=1e-14)  # 1 ulp: fused multiply-adds


def test_one_dimension_matches_hand_recursion():
    """1-D, b = 1, Gaussian: E eta'^2 = (1 - 2 g h + 3 g^2 h^2) E eta^2 + g^2 sigma^2 h and the
    averaged-iterate recursion written by hand (independent of the engine's code)."""
    h, sigma, n, eta0 = 1.3, 0.8, 300, -1.0
    st = ck.PolyDecay(0.5, 0.6)
    gam = st.values(n)
    m2, B, S2 = eta0**2, 0.0, 0.0
    last, avg = np.empty(n), np.empty(n)
    for t in range(1, n + 1):
        g = gam[t - 1]
        m2 = (1 - 2 * g * h + 3 * g**2 * h**2) * m2 + g**2 * sigma**2 * h
        cross = (1 - g * h) * B
        S2, B = S2 + 2 * cross + m2, cross + m2
        last[t - 1], avg[t - 1] = m2, S2 / t**2
    prob = ck.LeastSquares([h], noise=sigma, theta_star=[1.0])
    res = expected_error(prob, ck.OSA(1, st, name="sgd"), steps=n)
    for it, ref in (("last", last), ("avg", avg)):
        steps, vals = _curve(res, "sgd", "dist2", it)
        np.testing.assert_allclose(vals, ref[steps - 1], rtol=1e-13)


@pytest.mark.parametrize("design", ["gaussian", "rademacher", "additive"])
def test_mba_equals_one_worker_with_batch_pb(design):
    """MBA with (P, b) is one worker with batch P b (same local steps) to 1e-12."""
    prob = getattr(ck.LeastSquares, design)(5, spectrum="kappa:20", noise=0.5, seed=2)
    st = ck.PolyDecay(0.3, 0.5)
    res = expected_error(
        prob,
        [ck.MBA(4, st, batch=3, name="mba"), ck.OSA(1, st, batch=12, name="one")],
        steps=400,
        theta0=np.ones(5),
    )
    a = res.frame[res.frame.config == "mba"]["mean"].to_numpy()
    o = res.frame[res.frame.config == "one"]["mean"].to_numpy()
    np.testing.assert_allclose(a, o, rtol=1e-12)


def test_additive_noise_same_error_for_every_schedule():
    """Additive noise: MBA, Local-SGD (several schedules) and OSA give the same expected error
    (iterates are affine in the noise) to 1e-14 relative; a Gaussian design does not."""
    st = ck.PolyDecay(0.5, 0.75)
    algos = [
        ck.MBA(8, st, batch=2, name="mba"),
        ck.LocalSGD(8, st, comm="every:10", batch=2, name="h10"),
        ck.LocalSGD(8, st, comm=ck.Geometric(1, 2), batch=2, name="geo"),
        ck.OSA(8, st, batch=2, name="osa"),
    ]
    for design, same in (("additive", True), ("gaussian", False)):
        prob = getattr(ck.LeastSquares, design)(10, spectrum="1/i", noise=1.0, rotate=True)
        res = expected_error(prob, algos, steps=2000, theta0=np.ones(10))
        f = res.final("hnorm2", "avg").set_index("config")["mean"]
        rel = np.abs(f / f["mba"] - 1).max()
        if same:
            assert rel < 1e-14, rel
        else:
            assert rel > 1e-3, rel


@pytest.mark.parametrize("design", ["gaussian", "additive"])
def test_rotated_equals_diagonal(design):
    """A rotated H = Q diag(h) Q^T gives the result of diag(h) with rotated theta*, theta0."""
    d = 7
    rot = getattr(ck.LeastSquares, design)(d, spectrum="1/i", noise=0.3, rotate=True, seed=9)
    diag = ck.LeastSquares(
        rot.h, noise=0.3, design=design, theta_star=rot.Q.T @ rot.theta_star, seed=9
    )
    theta0 = np.arange(d) / d
    algos = [ck.LocalSGD(4, ck.PolyDecay(0.6, 1.0), comm="every:3", name="l")]
    a = expected_error(rot, algos, steps=300, theta0=theta0).frame["mean"].to_numpy()
    b = expected_error(diag, algos, steps=300, theta0=rot.Q.T @ theta0).frame["mean"].to_numpy()
    np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.skipif(local_kernel() is None, reason="numba not available")
def test_numba_and_numpy_paths_agree():
    """The compiled loop and the NumPy path vectorized across configurations agree (1e-12),
    with configurations of different lengths (gradients budget) in one call."""
    prob = ck.LeastSquares.rademacher(8, spectrum="1/i^2", noise=0.4, seed=4)
    st = ck.PolyDecay(0.5, 0.6)
    algos = [ck.MBA(2, st, batch=2), ck.LocalSGD(4, st, comm="rounds:9"), ck.OSA(8, st)]
    a = expected_error(prob, algos, gradients=1600, use_numba=True).frame
    b = expected_error(prob, algos, gradients=1600, use_numba=False).frame
    assert a[["config", "step", "iterate", "metric"]].equals(
        b[["config", "step", "iterate", "metric"]]
    )
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=1e-12)


def test_frame_layout_matches_simulate():
    """Same columns, rows (config, step, iterate, metric) and axes as simulate; se = 0 and
    count = EXACT_COUNT."""
    prob = ck.LeastSquares.gaussian(3, noise=0.5)
    algos = [ck.LocalSGD(2, ck.PolyDecay(0.3, 0.75), comm="every:5", batch=2)]
    ex = expected_error(prob, algos, gradients=400, replicates=10, seed=3)
    mc = ck.simulate(prob, algos, gradients=400, replicates=10, seed=3)
    assert list(ex.frame.columns) == FRAME_COLUMNS
    key = ["config", "step", "gradients", "rounds", "messages", "bits", "iterate", "metric"]
    assert ex.frame[key].equals(mc.frame[key])
    assert (ex.frame["se"] == 0).all() and (ex.frame["count"] == EXACT_COUNT).all()
    assert ex.meta["engine"] == "exact"


def test_compare_of_exact_results_matches_the_full_matrix_reference():
    """``Result.compare`` on exact results of two different configurations (Local-SGD every 5
    steps against OSA, b = 2, P = 2, 100 local steps, rotated H): ``diff`` and ``ratio`` at every
    record step equal those of the independent full-matrix reference above to 1e-12 relative
    (``diff``: to 1e-12 of the compared values, being their difference; avg, hnorm2: compare's
    defaults; also the last iterate), and their standard errors are 0 (no Monte Carlo
    noise). (Replaces a comparison of a configuration with itself.)"""
    prob = ck.LeastSquares.gaussian(3, spectrum="1/i", noise=0.5, rotate=True, seed=2)
    st = ck.PolyDecay(0.3, 0.75)
    local = ck.LocalSGD(2, st, comm="every:5", batch=2, name="local")
    osa = ck.OSA(2, st, batch=2, name="osa")
    theta0 = np.linspace(-1, 1, 3)
    n = 100
    ex = expected_error(prob, [local, osa], steps=n, theta0=theta0)
    ref = {a.label: full_matrix_reference(prob, a, n, theta0) for a in (local, osa)}
    for it in ("avg", "last"):
        cmp = ex.compare("osa", "local", iterate=it)
        steps = cmp["step"].to_numpy()
        assert steps.size >= 20
        a, b = ref["osa"][it][steps - 1, 0], ref["local"][it][steps - 1, 0]
        assert abs(a[-1] / b[-1] - 1) > 1e-4  # the two configurations differ
        # a difference of two values known to 1e-12 relative: compared at their scale
        assert np.all(np.abs(cmp["diff"].to_numpy() - (a - b)) <= 1e-12 * b)
        np.testing.assert_allclose(cmp["ratio"], a / b, rtol=1e-12)
        np.testing.assert_allclose(cmp["mean"], a, rtol=1e-12)
        np.testing.assert_allclose(cmp["baseline_mean"], b, rtol=1e-12)
        assert (cmp["diff_se"] == 0).all() and (cmp["ratio_se"] == 0).all()


def test_divergence_above_the_stability_limit():
    """A constant step 5% above the mean-square limit diverges (warning, rows dropped, no NaN
    in the frame); 5% below it does not."""
    from convkit.exact import stability_limit

    prob = ck.LeastSquares.gaussian(4, spectrum="1/i", noise=0.5)
    g = stability_limit(prob, batch=1)
    with pytest.warns(DivergenceWarning):
        res = expected_error(prob, ck.OSA(1, ck.Constant(1.05 * g), name="up"), steps=20000)
    assert res.meta["diverged"]["up"] > 0
    assert res.frame["step"].max() < res.meta["diverged"]["up"]
    assert np.isfinite(res.frame["mean"]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = expected_error(prob, ck.OSA(1, ck.Constant(0.95 * g), name="down"), steps=20000)
    assert not res.meta["diverged"]


def test_bad_inputs_raise_clear_errors():
    prob = ck.LeastSquares.gaussian(3)
    algo = ck.MBA(2, ck.Constant(0.1))
    with pytest.raises(ValueError, match="exactly one of gradients"):
        expected_error(prob, algo)
    with pytest.raises(ValueError, match="theta0"):
        expected_error(prob, algo, steps=10, theta0=np.zeros(4))
    with pytest.raises(TypeError, match="LeastSquares"):
        expected_error(object(), algo, steps=10)
    with pytest.raises(TypeError, match="unexpected keyword"):
        expected_error(prob, algo, steps=10, replicate=3)
