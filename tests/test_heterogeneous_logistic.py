"""Logistic regression with node data distributions: the optimum, zeta^2, the gradients and
Hessians (against finite differences and Monte Carlo), the excess risk (against the difference
of losses away from theta*, the quadratic form near it), the quadrature, the node metrics in
simulate. Exact identities to ~machine precision or to the stated quadrature
accuracy; Monte Carlo with fixed seeds and tolerances of 4 standard errors."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.backend import Backend
from convkit.problems import heterogeneous_logistic as hl
from convkit.problems.heterogeneous_logistic import HeterogeneousLogistic


@pytest.fixture(scope="module")
def prob():
    return HeterogeneousLogistic(5, 4, zeta2=0.05, feature_shift=1.0,
                                 covariance_dissimilarity=0.3, spectrum="1/i", seed=1)  # fmt: skip


def test_optimum_and_zeta2(prob):
    g = prob.worker_grads(prob.theta_star)
    assert np.linalg.norm(g.mean(axis=0)) <= 1e-13
    assert prob.zeta2 == pytest.approx(0.05, rel=1e-10)
    assert np.mean(np.sum(g * g, axis=1)) == pytest.approx(prob.zeta2, rel=1e-14)
    assert prob.f_star == pytest.approx(float(prob.node_losses(prob.theta_star).mean()), rel=1e-15)
    assert prob.quadrature_error <= 1e-14  # the rule against one of half the spacing
    # the node means and covariance spectra: exact by construction
    assert np.mean(np.sum(prob.means**2, axis=1)) == pytest.approx(1.0, rel=1e-13)
    assert np.max(np.abs(prob.node_s - prob.s)) == pytest.approx(0.3, rel=1e-13)
    assert prob.delta > 0 and prob.delta_ms <= prob.delta**2
    assert 0 < prob.mu <= prob.L


def test_covariate_shift_alone_has_no_first_order_heterogeneity():
    """Every node well specified with the same beta: theta* = beta, zeta^2 = 0, yet the
    Hessians differ."""
    p = HeterogeneousLogistic(4, 3, zeta2=0.0, feature_shift=1.5,
                              covariance_dissimilarity=0.4, seed=2)  # fmt: skip
    np.testing.assert_allclose(p.theta_star, p.beta, atol=1e-12)
    assert p.zeta2 <= 1e-26
    assert p.delta > 0.01


def test_gradients_and_hessians_against_finite_differences(prob):
    th = prob.theta_star + 0.3 * np.random.default_rng(0).standard_normal(5)
    h = 1e-5
    e = h * np.eye(5)
    fd = np.array([(prob.node_losses(th + e[j]) - prob.node_losses(th - e[j])) / (2 * h)
                   for j in range(5)]).T  # fmt: skip
    np.testing.assert_allclose(fd, prob.worker_grads(th), atol=1e-9)
    fdh = np.array([(prob.worker_grads(th + e[j]) - prob.worker_grads(th - e[j])) / (2 * h)
                    for j in range(5)]).transpose(1, 2, 0)  # fmt: skip
    np.testing.assert_allclose(fdh, prob.node_hessians(th), atol=1e-9)
    np.testing.assert_allclose(prob.node_hessians(prob.theta_star).mean(axis=0), prob.H_star)


@pytest.mark.parametrize("scale", [1e-2, 0.1, 1.0, 3.0])
def test_excess_risk_against_the_difference_of_losses(prob, scale):
    """Away from theta*: the one-dimensional excess risk against f(theta) - f*, whose own
    rounding is about 1e-16 f* / (f - f*) (2e-16 / (f - f*) allowed, plus 1e-10)."""
    X = prob.theta_star + scale * np.random.default_rng(2).standard_normal((5, 5))
    direct = prob.loss(X) - prob.f_star
    er = prob.errors(X)["excess_risk"]
    np.testing.assert_allclose(er, direct, rtol=1e-10 + 2e-16 / direct.min())
    assert np.all(er > 0)


@pytest.mark.parametrize("scale", [1e-6, 1e-5, 1e-4])
def test_excess_risk_near_the_optimum_is_the_quadratic_form(prob, scale):
    """Near theta*, where the difference of losses has lost its digits: the excess risk against
    1/2 eta^T H* eta, which it equals up to the third-order term, relatively O(|eta|) (measured
    0.3 |eta|-0.6 |eta| here; 10 |eta| allowed) -- a cancellation would show as ~1e-16 / excess,
    1e-2 and more at these scales."""
    X = prob.theta_star + scale * np.random.default_rng(4).standard_normal((5, 5))
    eta = X - prob.theta_star
    quad = 0.5 * np.einsum("md,de,me->m", eta, prob.H_star, eta)
    np.testing.assert_allclose(prob.errors(X)["excess_risk"], quad, rtol=10 * scale * np.sqrt(5))


def test_quadrature_is_accurate_for_wide_gaussians():
    """The trapezoidal rule of E sigmoid(mu + s z) against scipy's adaptive quadrature, for
    narrow and wide laws (a 201-node Gauss-Hermite rule is 1e-5 off at s = 8, 6e-3 at s = 40)."""
    from scipy.integrate import quad

    from convkit.problems.logistic import sigmoid

    for mu, s in [(0.3, 0.1), (-1.0, 2.0), (0.5, 8.0), (2.0, 40.0)]:
        z, w = hl._rule(s)
        got = float(sigmoid(mu + s * z) @ w)
        dens = lambda t, mu=mu, s=s: float(sigmoid(np.array(t))) * np.exp(  # noqa: E731
            -0.5 * ((t - mu) / s) ** 2
        ) / (s * np.sqrt(2 * np.pi))
        want = quad(dens, mu - 14 * s, mu + 14 * s, points=[0.0], epsabs=1e-15, epsrel=1e-13,
                    limit=400)[0]  # fmt: skip
        assert abs(got - want) <= 1e-12


def test_sampling_matches_exact_gradients_and_losses(prob):
    """Node i's stochastic gradient has mean grad f_i, its loss mean f_i (4 SE)."""
    R = 100000
    batch = prob.sample(Backend().stream(3, "g"), (R, 4, 1))
    th0 = prob.theta_star + 0.2
    th = np.broadcast_to(th0, (R, 4, 5)).copy()
    g = prob.stochastic_grad(th, batch)
    se = g.std(axis=0) / np.sqrt(R)
    assert np.all(np.abs(g.mean(axis=0) - prob.worker_grads(th0)) <= 4 * se)
    x, y = batch.x[:, :, 0, :], batch.y[:, :, 0]
    loss = np.logaddexp(0.0, -y * (x @ th0))  # (R, P)
    se_l = loss.std(axis=0) / np.sqrt(R)
    assert np.all(np.abs(loss.mean(axis=0) - prob.node_losses(th0)) <= 4 * se_l)


def test_simulate_with_node_metrics(prob):
    algos = [ck.LocalSGD(4, ck.Constant(0.1), comm="every:5", name="local"),
             ck.algorithms.SCAFFOLD(4, ck.Constant(0.1), comm="every:5", name="scaffold")]
    res = ck.simulate(prob, algos, steps=50, replicates=20, seed=0, record=[50], n_record=2,
                      progress=False)  # fmt: skip
    for lab in ("local", "scaffold"):
        cv = res.values[lab]
        last = cv.values[-1, cv.iterates.index("last"), cv.metrics.index("excess_risk")]
        node = cv.values[-1, cv.iterates.index("state"), cv.metrics.index("node_excess_risk")]
        assert np.all(np.isfinite(last)) and np.all(last > 0)
        np.testing.assert_allclose(node, last, rtol=1e-6)  # step 50 ends a round


def test_describe_tells_problems_apart():
    a = HeterogeneousLogistic(3, 2, beta=np.ones(3))
    b = HeterogeneousLogistic(3, 2, beta=-np.ones(3))
    assert a.describe() != b.describe()
    assert a.describe() == HeterogeneousLogistic(3, 2, beta=np.ones(3)).describe()


def test_invalid_arguments():
    with pytest.raises(ValueError, match="workers = 1"):
        HeterogeneousLogistic(3, 1, zeta2=0.1)
    with pytest.raises(ValueError, match="feature_shift"):
        HeterogeneousLogistic(3, 2, feature_shift=-1.0)
    with pytest.raises(ValueError, match="beta must be"):
        HeterogeneousLogistic(3, 2, beta=np.ones(4))
    with pytest.raises(ValueError, match="largest zeta\\^2 found is 0.19"):
        HeterogeneousLogistic(20, 8, zeta2=0.5, feature_shift=2.0, covariance_dissimilarity=0.5,
                              seed=1)  # fmt: skip
    with pytest.raises(ValueError, match="workers = 2 nodes"):
        HeterogeneousLogistic(3, 2).sample(Backend().stream(0, "x"), (2, 3, 1))


def test_covariance_dissimilarity_errors_name_covariance_dissimilarity():
    # the node spectra are built by the least-squares helper, whose message said
    # hessian_dissimilarity, a parameter HeterogeneousLogistic does not have
    with pytest.raises(ValueError, match=r"covariance_dissimilarity = 2 .*allowed: 0 <= "
                       r"covariance_dissimilarity < ") as err:
        HeterogeneousLogistic(5, 4, covariance_dissimilarity=2)
    assert "hessian" not in str(err.value)


def test_a_feature_shift_that_makes_the_problem_singular_is_refused_with_the_number():
    # feature_shift = 1000 at d = 5, P = 4: mu of H(theta*) is lost to rounding (0 or ~1e-31
    # against L ~ 1e5); the problem was accepted with that condition number
    with pytest.raises(ValueError, match=r"feature_shift = 1000.*condition number L / mu = "
                       r"(inf|\d).*allowed: .*1e\+12"):
        HeterogeneousLogistic(5, 4, feature_shift=1e3)
    with pytest.raises(ValueError, match=r"feature_shift = 100.*condition number L / mu = "
                       r"1\.\d+e\+34"):
        HeterogeneousLogistic(5, 4, feature_shift=100.0)
    assert HeterogeneousLogistic(5, 4, feature_shift=10.0).L / HeterogeneousLogistic(
        5, 4, feature_shift=10.0).mu < 1e5  # a shift of 10 stays well conditioned
