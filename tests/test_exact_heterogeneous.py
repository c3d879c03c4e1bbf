"""The exact Local-SGD recursion with node Hessians and node optima: equal to the exact engine
of iid least squares when the nodes agree (to rounding), and to Monte Carlo within 4 standard
errors (each recorded value is a mean of R i.i.d. replicates; 4 SE over about 40 values gives
a false alarm probability below 0.3 %) on a problem with zeta^2 > 0 and distinct Hessians."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.exact.heterogeneous import expected_error_nodes
from convkit.problems.heterogeneous import HeterogeneousLeastSquares


def test_equal_nodes_match_the_iid_exact_engine():
    p = HeterogeneousLeastSquares(6, 4, 0.0, spectrum="1/i", noise=0.5, seed=0)
    ls = ck.LeastSquares(p.h, noise=0.5, theta_star=p.theta_star)
    algos = [ck.LocalSGD(4, ck.PolyDecay(0.3, 0.5), comm="every:5", name="local"),
             ck.MBA(4, ck.Constant(0.2), batch=2, name="mba"),
             ck.OSA(4, ck.Constant(0.1), name="osa")]  # fmt: skip
    t0 = np.linspace(-1.0, 1.0, 6)
    nodes = expected_error_nodes(p, algos, steps=200, n_record=12, theta0=t0)
    iid = ck.exact.expected_error(ls, algos, steps=200, n_record=12, theta0=t0)
    for lab in ("local", "mba", "osa"):
        a = nodes.values[lab].values[:, :3, :3, 0]
        b = iid.values[lab].values[:, :3, :3, 0]
        np.testing.assert_allclose(a, b, rtol=1e-13)
    assert nodes.frame["count"].eq(0).all()


@pytest.mark.parametrize("design", ["gaussian", "additive"])
def test_node_hessians_match_monte_carlo(design):
    p = HeterogeneousLeastSquares(5, 4, 3.0, spectrum="1/i", noise=0.5, seed=2,
                                  hessian_dissimilarity=0.3, design=design)  # fmt: skip
    algos = [ck.LocalSGD(4, ck.Constant(0.15), comm="every:6", name="local"),
             ck.MBA(4, ck.Constant(0.1), name="mba")]  # fmt: skip
    rec = [7, 30, 60, 90, 120]
    ex = expected_error_nodes(p, algos, steps=120, record=rec, n_record=2)
    R = 8000
    mc = ck.simulate(p, algos, steps=120, replicates=R, seed=3, record=rec, n_record=2,
                     progress=False)  # fmt: skip
    checked = 0
    for lab in ("local", "mba"):
        e, m = ex.values[lab], mc.values[lab]
        for it, met in [("avg", "hnorm2"), ("avg", "dist2"), ("tail", "hnorm2"),
                        ("last", "hnorm2"), ("last", "dist2"), ("state", "node_hnorm2"),
                        ("state", "node_dist2")]:  # fmt: skip
            want = e.values[:, e.iterates.index(it), e.metrics.index(met), 0]
            got = m.values[:, m.iterates.index(it), m.metrics.index(met), :]
            ok = ~np.isnan(want)
            se = got.std(axis=1, ddof=1) / np.sqrt(R)
            z = (got.mean(axis=1) - want)[ok] / se[ok]
            assert np.all(np.abs(z) <= 4), (lab, it, met, z)
            checked += int(ok.sum())
    assert checked >= 50
    # between rounds the nodes' mean error exceeds the error of their average
    e = ex.values["local"]
    node = e.values[0, e.iterates.index("state"), e.metrics.index("node_hnorm2"), 0]
    last = e.values[0, e.iterates.index("last"), e.metrics.index("hnorm2"), 0]
    assert node > last  # step 7: one step after a round


def test_divergence_is_reported():
    p = HeterogeneousLeastSquares(3, 2, 1.0, seed=0, hessian_dissimilarity=0.2)
    with pytest.warns(ck.DivergenceWarning):
        res = expected_error_nodes(p, ck.MBA(2, ck.Constant(3.0), name="big"), steps=200)
    cv = res.values["big"]
    assert cv.diverged_at[0] > 0
    assert np.all(np.isnan(cv.values[cv.steps >= cv.diverged_at[0]]))


def test_invalid_calls():
    p = HeterogeneousLeastSquares(3, 2, 1.0, seed=0, hessian_dissimilarity=0.2)
    with pytest.raises(TypeError, match="LocalSGD"):
        expected_error_nodes(p, ck.FedAdam(2, ck.Constant(0.1)), steps=10)
    with pytest.raises(ValueError, match="workers = 2 nodes"):
        expected_error_nodes(p, ck.MBA(3, ck.Constant(0.1)), steps=10)
    with pytest.raises(TypeError, match="HeterogeneousLeastSquares"):
        expected_error_nodes(ck.LeastSquares.gaussian(3), ck.MBA(2, ck.Constant(0.1)), steps=10)
    with pytest.raises(ValueError, match="exactly one of"):
        expected_error_nodes(p, ck.MBA(2, ck.Constant(0.1)))


@pytest.mark.parametrize("form", ["gossip_then_step", "step_then_gossip"])
def test_dpsgd_equal_nodes_match_the_iid_exact_engine(form):
    from convkit.topology import ring

    p = HeterogeneousLeastSquares(4, 5, 0.0, spectrum="1/i", noise=0.5, seed=0)
    ls = ck.LeastSquares(p.h, noise=0.5, theta_star=p.theta_star)
    algo = ck.DPSGD(ring(5), ck.Constant(0.2), form=form, name="dpsgd")
    nodes = expected_error_nodes(p, algo, steps=150, n_record=10)
    iid = ck.exact.expected_error(ls, algo, steps=150, n_record=10)
    a = nodes.values["dpsgd"].values[:, :3, :3, 0]
    b = iid.values["dpsgd"].values[:, :3, :3, 0]
    np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("form", ["gossip_then_step", "step_then_gossip"])
def test_dpsgd_node_hessians_match_monte_carlo(form):
    """As for Local-SGD: 4 SE on every recorded value (R = 8000)."""
    from convkit.topology import ring

    p = HeterogeneousLeastSquares(4, 5, 3.0, spectrum="1/i", noise=0.5, seed=4,
                                  hessian_dissimilarity=0.3)  # fmt: skip
    algo = ck.DPSGD(ring(5), ck.Constant(0.15), form=form, name="dpsgd")
    rec = [5, 20, 50, 80]
    ex = expected_error_nodes(p, algo, steps=80, record=rec, n_record=2).values["dpsgd"]
    R = 8000
    mc = ck.simulate(p, algo, steps=80, replicates=R, seed=5, record=rec, n_record=2,
                     progress=False).values["dpsgd"]  # fmt: skip
    for it, met in [("avg", "hnorm2"), ("tail", "dist2"), ("last", "hnorm2"),
                    ("state", "node_hnorm2"), ("state", "node_dist2")]:  # fmt: skip
        want = ex.values[:, ex.iterates.index(it), ex.metrics.index(met), 0]
        got = mc.values[:, mc.iterates.index(it), mc.metrics.index(met), :]
        ok = ~np.isnan(want)
        z = (got.mean(axis=1) - want)[ok] / (got.std(axis=1, ddof=1)[ok] / np.sqrt(R))
        assert np.all(np.abs(z) <= 4), (it, met, z)


def test_long_call_warns_with_its_estimate(monkeypatch):
    """As simulate does (its LONG_RUN_SECONDS): a call estimated to take longer warns once,
    with the estimate, and records it in meta["timing"] (it was silent whatever its length)."""
    import sys

    sim = sys.modules["convkit.simulate"]  # the module (convkit.simulate is the function)
    monkeypatch.setattr(sim, "LONG_RUN_SECONDS", 0.0)
    p = HeterogeneousLeastSquares(3, 2, 1.0, seed=0, hessian_dissimilarity=0.2)
    with pytest.warns(UserWarning, match=r"expected_error_nodes: estimated \d.* s for 100 "
                      r"local steps.*P = 2, d = 3") as rec:
        res = expected_error_nodes(p, [ck.MBA(2, ck.Constant(0.1), name="a"),
                                       ck.MBA(2, ck.Constant(0.05), name="b")], steps=50)
    assert len([w for w in rec if "expected_error_nodes" in str(w.message)]) == 1
    assert res.meta["timing"]["estimated_seconds"] > 0


def test_short_call_is_silent():
    import warnings

    p = HeterogeneousLeastSquares(3, 2, 1.0, seed=0, hessian_dissimilarity=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected_error_nodes(p, ck.MBA(2, ck.Constant(0.1)), steps=50)
