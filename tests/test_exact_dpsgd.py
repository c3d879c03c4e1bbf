"""Exact D-PSGD (no compression): structure, special cases, Monte Carlo agreement."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit import topology as tp
from convkit.algorithms.decentralized import DPSGD
from convkit.exact import expected_error
from convkit.exact.dpsgd import dpsgd_curves, mixing_structure

FORMS = ("step_then_gossip", "gossip_then_step")


def test_walk_regular_detection():
    """Rings, tori, hypercubes and complete graphs are walk-regular; paths and stars not."""
    for topo in (tp.ring(9), tp.torus(3, 4), tp.hypercube(8), tp.complete(5)):
        ms = mixing_structure(topo.W)
        assert ms.walk_regular, topo
        np.testing.assert_allclose(ms.U @ np.diag(ms.lam) @ ms.U.T, topo.W, atol=1e-12)
        np.testing.assert_allclose(ms.U[:, 0], 1 / np.sqrt(topo.n))
    for topo in (tp.path(6), tp.star(5)):
        assert not mixing_structure(topo.W).walk_regular, topo


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_fast_path_equals_dense_path(form, design):
    """Walk-regular W: the O(n d) eigen-mode path equals the dense O(d n^3) node path."""
    prob = getattr(ck.LeastSquares, design)(4, spectrum="1/i", noise=0.5, seed=3)
    algo = DPSGD(tp.torus(3, 3), ck.PolyDecay(0.3, 0.75), form, batch=2)
    z2 = (np.ones(4) - prob.theta_star) ** 2
    rec = np.arange(1, 151)
    a, _ = dpsgd_curves(prob.h, z2, 0.25, design, algo, 150, rec, 76)
    b, _ = dpsgd_curves(prob.h, z2, 0.25, design, algo, 150, rec, 76, force_dense=True)
    cols = [0, 1, 2, 3, 4, 5, 7]
    np.testing.assert_allclose(a[:, cols], b[:, cols], rtol=1e-12, equal_nan=True)
    # consensus = node variance - variance of the mean: a difference, compared at the scale
    # of the node variance (about 1 here)
    np.testing.assert_allclose(a[:, 6], b[:, 6], rtol=0, atol=1e-12)


def test_complete_graph_is_mba_and_edgeless_is_osa():
    """W = J (step then gossip) is MBA; W = I: the network mean is one-shot averaging."""
    prob = ck.LeastSquares.gaussian(5, spectrum="1/i", noise=0.5, rotate=True, seed=1)
    st = ck.PolyDecay(0.4, 0.75)
    res = expected_error(
        prob,
        [
            DPSGD(tp.complete(6), st, "step_then_gossip", batch=2, name="J"),
            ck.MBA(6, st, batch=2, name="mba"),
            DPSGD(tp.edgeless(6), st, "gossip_then_step", batch=2, name="I"),
            ck.OSA(6, st, batch=2, name="osa"),
        ],
        steps=400,
        theta0=np.ones(5),
    )
    for a, b in (("J", "mba"), ("I", "osa")):
        for it in ("avg", "tail", "last"):
            x = res.curve(a, "hnorm2", it)["mean"].to_numpy()
            y = res.curve(b, "hnorm2", it)["mean"].to_numpy()
            np.testing.assert_allclose(x, y, rtol=1e-12)
    cons = res.curve("J", "consensus", "state")["mean"].to_numpy()
    assert np.all(np.abs(cons) < 1e-12)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("topo", [tp.ring(8), tp.path(5)], ids=["ring8", "path5"])
def test_matches_monte_carlo(form, topo):
    """Every record point of every metric (avg/tail/last errors, consensus, grad_norm2) within
    4 SE of the Monte Carlo mean (2000 replicates, seed fixed; about 270 correlated
    comparisons per case, so 4 SE: P(|z| > 4) = 6e-5 each)."""
    prob = ck.LeastSquares.gaussian(3, spectrum="1/i", noise=0.5, rotate=True, seed=3)
    algo = DPSGD(topo, ck.PolyDecay(0.3, 0.75), form, batch=2, name="D")
    ex = expected_error(prob, algo, steps=150, theta0=np.ones(3))
    mc = ck.simulate(prob, algo, steps=150, theta0=np.ones(3), replicates=2000, seed=11)
    m = ex.frame.merge(mc.frame, on=["config", "step", "iterate", "metric"], suffixes=("_e", "_m"))
    assert len(m) == len(ex.frame) == len(mc.frame)
    z = (m["mean_m"] - m["mean_e"]) / m["se_m"]
    assert np.abs(z).max() < 4, m.loc[np.abs(z).idxmax()]


def test_ring_of_64_uses_the_eigen_mode_path():
    """A ring of 64 nodes is walk-regular, so the O(n d) eigen-mode path runs (no n x n
    matrices): 5000 steps with d = 50 finish with finite errors (about a second)."""
    prob = ck.LeastSquares.gaussian(50, spectrum="1/i", noise=1.0)
    topo = tp.ring(64)
    assert mixing_structure(topo.W).walk_regular
    algo = DPSGD(topo, ck.PolyDecay(0.5, 0.75), "step_then_gossip")
    res = expected_error(prob, algo, steps=5000)
    assert np.isfinite(res.final()["mean"]).all()


def test_compressed_algorithms_are_refused():
    from convkit.algorithms.decentralized import CHOCOSGD

    prob = ck.LeastSquares.gaussian(3)
    algo = CHOCOSGD(tp.ring(4), ck.Constant(0.1), "top-k:1", 0.5)
    with pytest.raises(TypeError, match="uncompressed"):
        expected_error(prob, algo, steps=10)
