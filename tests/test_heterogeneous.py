"""Heterogeneous least squares (exact zeta^2 by construction) and logistic data split across
nodes (bundled breast-cancer data; a LIBSVM file written and read back).

Exact identities are asserted to ~machine precision; Monte Carlo moments (unbiased node
gradients, the inner variance sigma_*^2) with fixed seeds and tolerances of 4 standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from analyses import _decentralized_common as C
from convkit.backend import Backend
from convkit.problems.datasets import (
    breast_cancer,
    load_svmlight,
    split_by_label,
    split_dirichlet,
    split_iid,
    synthetic_logistic,
)
from convkit.problems.heterogeneous import HeterogeneousLeastSquares
from convkit.problems.least_squares import LeastSquares, LSBatch


@pytest.mark.parametrize(
    ("d", "P", "zeta2", "spec"),
    [(5, 2, 0.3, "flat"), (20, 16, 10.0, "1/i"), (32, 7, 1e-4, "kappa:100")],
)
def test_zeta2_exact_and_optimum(d, P, zeta2, spec):
    prob = HeterogeneousLeastSquares(d, P, zeta2, spectrum=spec, noise=0.3, seed=3)
    g = prob.worker_grads(prob.theta_star)  # grad f_i(theta*) = -H u_i
    assert np.mean(np.sum(g * g, axis=1)) == pytest.approx(zeta2, rel=1e-12)
    np.testing.assert_allclose(prob.offsets.sum(axis=0), 0.0, atol=1e-13)
    np.testing.assert_allclose(prob.node_optima.mean(axis=0), prob.theta_star, atol=1e-14)
    # the network gradient vanishes at theta* and equals the mean of the node gradients
    np.testing.assert_allclose(prob.grad(prob.theta_star), 0.0, atol=1e-15)
    th = np.random.default_rng(0).standard_normal(d)
    np.testing.assert_allclose(prob.worker_grads(th).mean(axis=0), prob.grad(th), atol=1e-13)


def test_excess_risk_is_mean_of_node_objectives():
    prob = HeterogeneousLeastSquares(6, 4, 2.0, spectrum="1/i", noise=0.7, seed=1)
    th = np.random.default_rng(2).standard_normal((3, 6))
    # f_i(theta) = 1/2 ||theta - theta*_i||_H^2 + sigma^2 / 2, f = mean_i f_i
    eta = th[:, None, :] - prob.node_optima[None]
    f = np.mean(0.5 * np.sum(eta * eta * prob.h, axis=-1), axis=1) + 0.5 * prob.noise**2
    np.testing.assert_allclose(prob.loss(th), f, rtol=1e-13)
    np.testing.assert_allclose(prob.errors(th)["excess_risk"], f - prob.f_star, rtol=1e-12)


def test_node_gradients_unbiased_and_inner_variance():
    """Mean of the stochastic gradient of node i is H (theta - theta*_i); the mean-square
    deviation at theta* is sigma_*^2 of the module docstring (4 SE)."""
    prob = HeterogeneousLeastSquares(4, 3, 1.5, spectrum="1/i", noise=0.5, seed=5)
    be = Backend()
    R = 40000
    batch = prob.sample(be.stream(11, "unbiased"), (R, 3, 1))
    th = np.broadcast_to(prob.theta_star + 0.3, (R, 3, 4)).copy()
    g = prob.stochastic_grad(th, batch)
    want = (th[0] - prob.node_optima) * prob.h
    se = g.std(axis=0) / np.sqrt(R)
    assert np.all(np.abs(g.mean(axis=0) - want) <= 4 * se)
    ts = np.broadcast_to(prob.theta_star, (R, 3, 4)).copy()
    dev = prob.stochastic_grad(ts, batch) - prob.worker_grads(prob.theta_star)
    sq = np.sum(dev * dev, axis=-1).mean(axis=1)
    assert abs(sq.mean() - prob.sigma2) <= 4 * sq.std() / np.sqrt(R)


def test_zero_zeta_equals_least_squares_gradient():
    prob = HeterogeneousLeastSquares(8, 4, 0.0, spectrum="1/i", noise=0.4, seed=0)
    ls = LeastSquares(prob.h, noise=0.4, theta_star=prob.theta_star)
    batch = prob.sample(Backend().stream(1, "x"), (5, 4, 3))
    th = np.random.default_rng(1).standard_normal((5, 4, 8))
    np.testing.assert_allclose(
        prob.stochastic_grad(th, batch),
        ls.stochastic_grad(th, LSBatch(batch.z, batch.eps, prob.sqrt_h)),
        rtol=1e-12,
        atol=1e-14,
    )


def test_invalid_input():
    with pytest.raises(ValueError, match="zeta2"):
        HeterogeneousLeastSquares(4, 4, -1.0)
    with pytest.raises(ValueError, match="workers >= 2"):
        HeterogeneousLeastSquares(4, 1, 1.0)
    with pytest.raises(ValueError, match="workers"):
        HeterogeneousLeastSquares(4, 0, 0.0)
    prob = HeterogeneousLeastSquares(4, 4, 1.0)
    with pytest.raises(ValueError, match="P = 3"):
        prob.sample(Backend().stream(0), (2, 3, 1))


def test_simulate_dpsgd_on_heterogeneous_problem():
    """D-PSGD runs through the engine; its grad_norm2 metric is ||H (x_bar - theta*)||^2,
    which for a flat spectrum equals dist2 of the node average."""
    prob = HeterogeneousLeastSquares(6, 8, 1.0, noise=0.5, seed=0)
    algo = ck.DPSGD(ck.topology.ring(8), ck.Constant(0.02), name="D")
    res = C.simulate_quiet(prob, [algo], steps=50, replicates=4, seed=0, n_record=5)
    g2 = res.curve("D", "grad_norm2", "state")["mean"].to_numpy()
    d2 = res.curve("D", "dist2", "last")["mean"].to_numpy()
    np.testing.assert_allclose(g2, d2, rtol=1e-10)


def test_libsvm_round_trip_and_logistic_split(tmp_path):
    ds, _ = synthetic_logistic(300, 7, seed=2)
    path = C.write_svmlight(tmp_path / "syn.svm", ds.X, ds.y)
    back = load_svmlight(path, n_features=7, binary=True)
    np.testing.assert_array_equal(np.asarray(back.X.todense()), ds.X)
    np.testing.assert_array_equal(back.y, ds.y)
    prob = back.logistic(lam=0.01, partition=split_dirichlet(back.y, 8, 0.5, seed=0))
    g = prob.worker_grads(prob.theta_star)
    assert prob.zeta2 == pytest.approx(np.mean(np.sum(g * g, axis=1)), rel=1e-10)
    assert prob.zeta2 > 0


def test_breast_cancer_label_split_more_heterogeneous_than_iid():
    ds = breast_cancer()
    z = {}
    for name, part in (
        ("label", split_by_label(ds.y, 16, seed=0)),
        ("dirichlet", split_dirichlet(ds.y, 16, 0.5, seed=0)),
        ("iid", split_iid(ds.n, 16, seed=0)),
    ):
        prob = ds.logistic(lam=0.01, partition=part)
        g = prob.worker_grads(prob.theta_star)
        assert prob.zeta2 == pytest.approx(np.mean(np.sum(g * g, axis=1)), rel=1e-10)
        z[name] = prob.zeta2
    assert z["label"] > z["iid"] and z["dirichlet"] > z["iid"]
