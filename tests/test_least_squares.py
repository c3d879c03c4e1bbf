"""The least-squares problem knows its constants: gradients, optimum, L, excess risk."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck


@pytest.fixture(params=["gaussian", "rademacher", "additive"])
def prob(request):
    build = getattr(ck.LeastSquares, request.param)
    return build(d=6, spectrum="kappa:20", noise=0.5, rotate=True, seed=4)


def test_full_gradient_matches_finite_differences(prob):
    rng = np.random.default_rng(0)
    theta = rng.standard_normal(prob.d)
    g = prob.grad(theta)
    eps = 1e-6
    fd = np.array(
        [
            (prob.loss(theta + eps * e) - prob.loss(theta - eps * e)) / (2 * eps)
            for e in np.eye(prob.d)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)


def test_gradient_vanishes_at_the_optimum(prob):
    assert np.linalg.norm(prob.grad(prob.theta_star)) < 1e-14


def test_stochastic_gradient_is_unbiased(prob):
    """The mean of 2e5 stochastic gradients at a fixed point is within 4 SE of grad f,
    coordinate by coordinate."""
    stream = ck.Backend().stream(1)
    theta = np.full((1000, 200, prob.d), 0.3)
    g = prob.stochastic_grad(theta, prob.sample(stream, (1000, 200, 1))).reshape(-1, prob.d)
    mean, se = g.mean(0), g.std(0, ddof=1) / np.sqrt(g.shape[0])
    z = (mean - prob.grad(np.full(prob.d, 0.3))) / se
    assert np.all(np.abs(z) < 4), z


def test_design_covariance_is_H(prob):
    """E[x x^T] = H within 5 SE entrywise (2e5 samples); for additive, Cov(xi) = sigma^2 H."""
    x = prob.sample(ck.Backend().stream(2), (200_000, 1, 1)).x.reshape(-1, prob.d)
    outer = x[:, :, None] * x[:, None, :]
    target = prob.H * (prob.noise**2 if prob.design == "additive" else 1.0)
    se = outer.std(0, ddof=1) / np.sqrt(x.shape[0])
    assert np.all(np.abs(outer.mean(0) - target) < 5 * se + 1e-12)


def test_constants(prob):
    H = prob.H
    np.testing.assert_allclose(prob.L, np.linalg.eigvalsh(H).max(), rtol=1e-12)
    np.testing.assert_allclose(prob.mu, np.linalg.eigvalsh(H).min(), rtol=1e-12)
    np.testing.assert_allclose(prob.R2, np.trace(H), rtol=1e-12)
    assert prob.f_star == pytest.approx(prob.noise**2 / 2)


def test_excess_risk_is_half_the_H_norm_and_nonnegative(prob):
    rng = np.random.default_rng(3)
    theta = rng.standard_normal((50, prob.d))
    e = prob.errors(theta)
    eta = theta - prob.theta_star
    np.testing.assert_allclose(e["hnorm2"], np.einsum("ij,jk,ik->i", eta, prob.H, eta), rtol=1e-12)
    np.testing.assert_allclose(e["excess_risk"], e["hnorm2"] / 2)
    np.testing.assert_allclose(e["dist2"], (eta**2).sum(1))
    assert np.all(e["excess_risk"] >= 0)
    assert prob.errors(prob.theta_star)["excess_risk"] == 0


def test_rotation_is_seeded_and_orthogonal():
    a = ck.LeastSquares.gaussian(5, "1/i", rotate=True, seed=1)
    b = ck.LeastSquares.gaussian(5, "1/i", rotate=True, seed=1)
    np.testing.assert_array_equal(a.Q, b.Q)
    np.testing.assert_allclose(a.Q.T @ a.Q, np.eye(5), atol=1e-12)


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("flat", [1, 1, 1, 1]),
        ("1/i", [1, 1 / 2, 1 / 3, 1 / 4]),
        ("1/i^2", [1, 1 / 4, 1 / 9, 1 / 16]),
        ("kappa:1000", [1, 0.1, 0.01, 0.001]),
    ],
)
def test_spectrum_presets(spec, expected):
    np.testing.assert_allclose(ck.problems.spectrum(spec, 4), expected, rtol=1e-12)


def test_spectrum_callable():
    np.testing.assert_allclose(ck.problems.spectrum(lambda d: np.arange(d, 0, -1.0), 3), [3, 2, 1])
