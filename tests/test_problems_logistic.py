"""Online well-specified logistic regression: constants, gradients, metrics, engine."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import convkit as ck
from convkit.backend import Backend
from convkit.problems.finite_sum import FiniteLogistic
from convkit.problems.logistic import LogisticRegression, bernoulli_kl_logits, sigmoid


@pytest.fixture(scope="module")
def prob():
    return LogisticRegression.gaussian(5, spectrum="1/i", rotate=True, seed=3, eval_size=40000)


def _points(prob, scales=(1e-6, 0.1, 1.0, 2.0), seed=0):
    rng = np.random.default_rng(seed)
    eta = rng.standard_normal((len(scales), prob.d)) * np.asarray(scales)[:, None]
    return prob.theta_star + eta


def test_sigmoid_and_kl_are_stable():
    z = np.array([-1000.0, -30.0, 0.0, 30.0, 1000.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s = sigmoid(z)
        kl = bernoulli_kl_logits(z, z[::-1])
    np.testing.assert_allclose(s + sigmoid(-z), 1.0, rtol=0, atol=1e-15)
    assert np.all(kl >= 0) and np.all(np.isfinite(kl))
    # sp(a) - sp(t) - sigmoid(t)(a - t) in 50-digit arithmetic (mpmath) as the reference,
    # including a - t = 1e-7 where the direct double formula loses half its digits
    import mpmath

    mpmath.mp.dps = 50
    t = np.array([-2.0, 0.3, 1.5, -40.0, 3.0, 20.0])
    a = np.array([1.0, -0.7, 1.5 + 1e-7, 35.0, 3.0 - 1e-4, -25.0])

    def ref(ti, ai):
        ti, ai = mpmath.mpf(ti), mpmath.mpf(ai)
        sp = lambda z: mpmath.log(1 + mpmath.exp(z))  # noqa: E731
        return float(sp(ai) - sp(ti) - (ai - ti) / (1 + mpmath.exp(-ti)))

    expected = np.array([ref(ti, ai) for ti, ai in zip(t, a, strict=True)])
    np.testing.assert_allclose(bernoulli_kl_logits(t, a), expected, rtol=1e-8, atol=0)


def test_hessian_at_optimum_matches_monte_carlo(prob):
    """H* from the 1-D quadrature formula vs a 400k-sample estimate of E[w(t) x x^T]:
    every entry within 5 standard errors."""
    assert prob.hstar_quadrature_error < 1e-12
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((400_000, prob.d)) * prob.sqrt_h) @ prob.Q.T
    t = x @ prob.theta_star
    w = sigmoid(t) * sigmoid(-t)
    terms = w[:, None, None] * x[:, :, None] * x[:, None, :]
    mean = terms.mean(axis=0)
    se = terms.std(axis=0, ddof=1) / np.sqrt(x.shape[0])
    assert np.all(np.abs(mean - prob.H_star) <= 5 * se)
    assert prob.mu == pytest.approx(np.linalg.eigvalsh(prob.H_star)[0], rel=1e-12)
    assert prob.L == pytest.approx(np.max(prob.h) / 4, rel=1e-15)


def test_zero_theta_star_gives_quarter_H():
    p = LogisticRegression.gaussian(4, spectrum="kappa:10", theta_star=np.zeros(4))
    np.testing.assert_allclose(p.H_star, p.H / 4, rtol=0, atol=1e-15)
    assert p.f_star == pytest.approx(np.log(2), rel=1e-14)


def test_population_gradient_finite_differences(prob):
    """grad (2-D quadrature) vs central differences of the loss (same quadrature)."""
    for theta in _points(prob, (0.1, 1.0)):
        g = prob.grad(theta)
        h = 1e-5
        fd = np.array(
            [(prob.loss(theta + h * e) - prob.loss(theta - h * e)) / (2 * h) for e in np.eye(5)]
        )
        np.testing.assert_allclose(g, fd, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(prob.grad(prob.theta_star), 0.0)


def test_stochastic_gradient_is_unbiased(prob):
    """Mean of 10^5 stochastic gradients vs the population gradient, per coordinate within
    4.5 standard errors, at theta* (where it must vanish: the model is well specified) and
    away from it."""
    stream = Backend().stream(123)
    for theta in (prob.theta_star, _points(prob, (1.0,), seed=4)[0]):
        batch = prob.sample(stream, (2000, 1, 50))
        th = np.broadcast_to(theta, (2000, 1, 5)).copy()
        per = np.stack(
            [prob.stochastic_grad(th, ck_slice(batch, j)) for j in range(50)], axis=0
        ).reshape(-1, 5)
        mean = per.mean(axis=0)
        se = per.std(axis=0, ddof=1) / np.sqrt(per.shape[0])
        assert np.all(np.abs(mean - prob.grad(theta)) <= 4.5 * se)
        # the batch mean equals the mean of its single-sample gradients
        np.testing.assert_allclose(
            prob.stochastic_grad(th, batch)[:, 0].mean(axis=0), mean, rtol=1e-10, atol=1e-14
        )


def ck_slice(batch, j):
    from convkit.problems.logistic import LogisticBatch

    return LogisticBatch(batch.x[:, :, j : j + 1], batch.y[:, :, j : j + 1])


def test_excess_risk_quadrature_vs_evaluation_sample(prob):
    """Quadrature and the fixed evaluation sample agree within 4 standard errors; both >= 0;
    the quadrature has converged (48 vs 200 nodes per axis, relative 1e-5 at ||eta||_H ~ 3)."""
    thetas = _points(prob)
    q = prob.excess_risk_quadrature(thetas)
    s = prob.excess_risk_sample(thetas)
    se = prob.excess_risk_se(thetas)
    assert np.all(q >= 0) and np.all(s >= 0) and np.all(se > 0)
    assert np.all(np.abs(q - s) <= 4 * se)
    fine = LogisticRegression.gaussian(5, spectrum="1/i", rotate=True, seed=3, n_quad=200)
    np.testing.assert_allclose(q, fine.excess_risk_quadrature(thetas), rtol=1e-5, atol=0)
    # near theta*: excess risk = hnorm2 / 2 to second order
    e = prob.errors(thetas[:1])
    assert e["excess_risk"][0] == pytest.approx(0.5 * e["hnorm2"][0], rel=1e-4)


def test_errors_vectorized_shapes(prob):
    thetas = _points(prob, (0.1, 0.5, 1.0, 2.0, 3.0, 0.2)).reshape(2, 3, 5)
    e = prob.errors(thetas)
    for k in ("excess_risk", "hnorm2", "dist2"):
        assert e[k].shape == (2, 3)
        flat = np.array([prob.errors(t)[k] for t in thetas.reshape(-1, 5)])
        np.testing.assert_allclose(e[k].ravel(), flat, rtol=1e-13)
    sample = LogisticRegression.gaussian(
        5, spectrum="1/i", rotate=True, seed=3, eval_size=1000, excess_risk="sample"
    )
    np.testing.assert_allclose(
        sample.errors(thetas)["excess_risk"], sample.excess_risk_sample(thetas), rtol=1e-13
    )


def test_theta_star_recovered_from_large_sample(prob):
    """Maximum likelihood on N = 20000 samples from the sampler: N ||theta_hat - theta*||^2_{H*}
    is asymptotically chi^2_d; it must stay below the 0.9999 quantile."""
    N = 20000
    batch = prob.sample(Backend().stream(99), (1, 1, N))
    fit = FiniteLogistic(batch.x[0, 0], batch.y[0, 0])
    eta = fit.theta_star - prob.theta_star
    stat = N * eta @ prob.H_star @ eta
    assert stat <= stats.chi2.ppf(0.9999, prob.d)
    # and the empirical Hessian at the fit approaches H*
    np.testing.assert_allclose(fit.H_star, prob.H_star, atol=0.03)


def test_simulate_local_sgd_end_to_end():
    p = LogisticRegression.gaussian(4, spectrum="flat", seed=1)
    algo = ck.LocalSGD(4, ck.PolyDecay(C=1.0, alpha=0.6), comm=ck.Every(5))
    res = ck.simulate(p, algo, steps=400, replicates=16, seed=2)
    curve = res.curve(algo.label, "excess_risk", "avg")
    assert np.all(np.isfinite(curve["mean"]))
    first, last = curve["mean"].iloc[0], curve["mean"].iloc[-1]
    assert last < 0.2 * first
    assert res.diverged.empty


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"eval_size": 1}, "eval_size"),
        ({"n_quad": 1}, "n_quad"),
        ({"excess_risk": "exact"}, "excess_risk"),
        ({"theta_star": np.ones(3)}, "theta_star"),
        ({"theta_star": np.array([np.nan, 0, 0, 0])}, "theta_star"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        LogisticRegression.gaussian(4, **kwargs)


def test_wrong_dimension_errors(prob):
    with pytest.raises(ValueError, match="last dimension d = 5"):
        prob.errors(np.zeros(4))
