"""Tests of convkit.checks on synthetic data with known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from convkit.checks import (
    check_bound,
    find_threshold,
    fit_exponent,
    paired_ratio,
    stability_bracket,
)
from convkit.growth_rates import log_moment_growth_rate, mean_square_growth_rate


# ------------------------------------------------------------------ check_bound
def test_check_bound_holds_and_reports_tightness():
    x = np.logspace(1, 4, 10)
    bound = 1 / np.sqrt(x)
    mean = 0.5 * bound
    res = check_bound(x, mean, 0.01 * mean, bound)
    assert res.holds and res.n_violations == 0 and res.x_worst is None
    np.testing.assert_allclose(res.ratio, 0.5)
    assert res.max_ratio == pytest.approx(0.5)
    json.dumps(res.to_dict())


def test_check_bound_flags_a_significant_violation_only():
    x = np.arange(1.0, 11.0)
    bound = np.ones(10)
    mean = np.ones(10) * 0.9
    se = np.full(10, 0.05)
    mean[3] = 1.05  # 1 SE above: not significant at 99% one-sided (z = 2.33)
    mean[7] = 1.5  # 10 SE above: violated
    res = check_bound(x, mean, se, bound, confidence=0.99)
    assert not res.holds
    assert res.violated.tolist() == [i == 7 for i in range(10)]
    assert res.x_worst == 8.0 and res.worst_z == pytest.approx(10.0)
    assert res.max_ratio == pytest.approx(1.5) and res.x_max_ratio == 8.0
    assert res.z == pytest.approx(2.3263478740408408)


def test_check_bound_exact_curves_and_frames():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "mean": [0.5, 1.2, 0.9], "se": 0.0})
    res = check_bound(frame, bound_values=[1.0, 1.0, 1.0])
    assert not res.holds and res.x_worst == 2.0 and math.isinf(res.worst_z)
    res2 = check_bound(frame[["x", "mean"]], bound_values=2.0)
    assert res2.holds
    with pytest.raises(ValueError, match="same length"):
        check_bound([1, 2], [1.0], None, [1.0])
    with pytest.raises(ValueError, match="confidence"):
        check_bound([1], [1.0], None, [1.0], confidence=1.5)


def test_check_bound_false_alarm_rate_is_calibrated():
    """With the mean exactly at the bound and Gaussian noise of the stated se, a single point
    is flagged with probability 1 - confidence (binomial check, 4 SE)."""
    rng = np.random.default_rng(0)
    n = 20_000
    se = 0.1
    mean = 1.0 + se * rng.standard_normal(n)
    res = check_bound(np.arange(n), mean, se, 1.0, confidence=0.95)
    rate = res.violated.mean()
    assert abs(rate - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n)


# ------------------------------------------------------------------ fit_exponent
def test_fit_exponent_exact_power_law():
    x = np.logspace(1, 5, 12)
    y = 3.0 * x**-0.5
    fit = fit_exponent(x, y, predicted=-0.5)
    assert fit.slope == pytest.approx(-0.5, abs=1e-12)
    assert fit.consistent and fit.method == "ols"
    assert fit.intercept == pytest.approx(math.log(3.0), abs=1e-10)
    assert fit.interval[1] - fit.interval[0] < 1e-6
    assert fit_exponent(x, y, predicted=-0.49).consistent is False


def test_fit_exponent_window_and_weights():
    """Two regimes: 1/x for small x, 1/sqrt(x) for large x; the window picks the regime.
    With noise of known se, the weighted interval covers the local slope."""
    rng = np.random.default_rng(3)
    x = np.logspace(0, 8, 33)
    truth = 10 / x + 1 / np.sqrt(x)  # crossover at x = 100
    se = 0.02 * truth
    y = truth * (1 + 0.02 * rng.standard_normal(x.size))
    hi = fit_exponent(x, y, se, window=(1e6, 1e8), predicted=-0.5)
    assert hi.method == "weighted" and hi.n_points == 9
    local = float(np.polyfit(np.log(x[-9:]), np.log(truth[-9:]), 1)[0])  # -0.5 minus a bit
    assert hi.interval[0] <= local <= hi.interval[1]
    assert hi.chi2_dof is not None and hi.chi2_dof < 4
    lo = fit_exponent(x, y, se, window=(1, 10), predicted=-0.5)
    assert lo.consistent is False and lo.slope < -0.8
    frame = pd.DataFrame({"x": x, "mean": y, "se": se})
    assert fit_exponent(frame, window=(1e6, 1e8)).slope == pytest.approx(hi.slope)


def test_fit_exponent_interval_coverage():
    """95% intervals from the weighted fit cover the true slope in ~95% of 400 synthetic
    experiments (binomial, 4 SE)."""
    rng = np.random.default_rng(4)
    x = np.logspace(1, 4, 8)
    hits = 0
    n = 400
    for _ in range(n):
        rel = 0.05
        y = x**-1.0 * np.exp(rel * rng.standard_normal(x.size))
        hits += fit_exponent(x, y, rel * y, predicted=-1.0).consistent
    assert abs(hits / n - 0.95) < 4 * math.sqrt(0.95 * 0.05 / n)


def test_fit_exponent_errors():
    with pytest.raises(ValueError, match="at least 2 points"):
        fit_exponent([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], window=(2.5, 2.6))
    with pytest.raises(ValueError, match="positive"):
        fit_exponent([1.0, 2.0], [1.0, -2.0])


# ------------------------------------------------------------------ find_threshold
def test_find_threshold_exact_curve():
    """err(N)/err(MBA) = 1 + A/N: N* for eps is A/eps exactly (log interpolation of a
    smooth curve on a fine grid is accurate to the grid's curvature)."""
    N = np.unique(np.round(np.logspace(0, 4, 200)))
    A, eps = 50.0, 0.1
    ratio = 1 + A / N
    th = find_threshold(N, ratio, 0.0, eps=eps)
    assert th.first_holding == N[np.argmax(ratio <= 1 + eps)]
    assert th.estimate == pytest.approx(A / eps, rel=1e-3)
    lo, hi = th.bracket
    assert hi == th.first_holding and lo < A / eps <= hi
    json.dumps(th.to_dict())


def test_find_threshold_difference_mode_with_crn():
    """Paired (common random numbers) differences: err(N) - err(MBA) = c/N + noise; with
    per-replicate pairing the se is small and the bracket is narrow around N* = c/(eps e)."""
    rng = np.random.default_rng(5)
    R = 4000
    N = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], float)
    base = 1.0 + 0.5 * rng.standard_normal((R, 1))  # shared noise (cancels in differences)
    err_mba = base * 0.01
    err = err_mba + 0.5 / N + 0.001 * rng.standard_normal((R, N.size))
    d = err - err_mba
    ref = err_mba.mean()
    th = find_threshold(
        N, d.mean(0), d.std(0, ddof=1) / np.sqrt(R), eps=0.5, mode="difference", reference=ref
    )
    n_star = 0.5 / (0.5 * ref)  # = 100
    lo, hi = th.bracket
    assert lo is not None and hi is not None
    assert lo < n_star <= hi and hi / lo <= 4
    assert th.estimate == pytest.approx(n_star, rel=0.3)
    # unpaired se (from the raw errors) is far larger: the bracket widens
    se_unpaired = np.sqrt(err.var(0, ddof=1) / R + err_mba.var(ddof=1) / R)
    th2 = find_threshold(N, d.mean(0), se_unpaired, eps=0.5, mode="difference", reference=ref)
    assert th2.bracket[1] / max(th2.bracket[0] or 1.0, 1.0) >= hi / lo


def test_find_threshold_never_and_always():
    N = np.array([1.0, 2.0, 4.0])
    never = find_threshold(N, [2.0, 1.9, 1.8], None, eps=0.1)
    assert never.estimate is None and never.bracket == (4.0, None)
    always = find_threshold(N, [0.5, 0.5, 0.5], None)
    assert always.estimate == 1.0 and always.bracket == (None, 1.0)
    margin = find_threshold(N, [0.3, -0.1, -0.2], [0.01, 0.01, 0.01], mode="margin")
    assert margin.first_holding == 2.0
    with pytest.raises(ValueError, match="increasing"):
        find_threshold([2.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="mode"):
        find_threshold(N, [1.0, 1.0, 1.0], mode="other")
    with pytest.raises(ValueError, match="reference"):
        find_threshold(N, [1.0, 1.0, 1.0], eps=0.1, mode="difference")


# ------------------------------------------------------------------ stability
def test_stability_bracket_bisection_on_exact_criterion():
    """1-D Gaussian SGD: E[(1 - g x^2)^2] = 1 - 2 g h + 3 g^2 h^2 < 1 iff g < 2/(3h)."""
    h = 1.7

    def stable(g):
        return 1 - 2 * g * h + 3 * g**2 * h**2 < 1

    res = stability_bracket(stable, 1e-3, 10.0, rtol=1e-6)
    assert res.lo < 2 / (3 * h) <= res.hi
    assert res.hi / res.lo - 1 <= 1e-6
    assert res.estimate == pytest.approx(2 / (3 * h), rel=1e-6)
    assert res.n_evaluations == len(res.history)
    with pytest.raises(ValueError, match="is_stable\\(lo\\) must be True"):
        stability_bracket(stable, 5.0, 10.0)
    with pytest.raises(ValueError, match="is_stable\\(hi\\) must be False"):
        stability_bracket(stable, 0.01, 0.1)


def _scalar_sgd_log_norms(gamma, h, T, R, rng):
    """eta_t = prod (1 - gamma x_k^2) eta_0, x ~ N(0, h) (no additive noise), squared."""
    x2 = h * rng.standard_normal((T, R)) ** 2
    log_f = np.log((1 - gamma * x2) ** 2)
    return np.exp(np.cumsum(log_f, axis=0))  # may overflow/underflow for large T


def test_log_moment_growth_rate_matches_lyapunov_exponent_not_mean_square():
    """Just above the mean-square limit 2/(3h), the second moment grows (exact rate
    log(1 - 2gh + 3g^2h^2) > 0) while the log-moment rate, an estimate of the top Lyapunov
    exponent E log (1 - g x^2)^2, is negative. The estimate matches the Lyapunov exponent
    computed by quadrature within 4 SE."""
    from scipy import integrate, stats

    h = 1.0
    gamma = 0.75  # > 2/3
    ms_rate = math.log(1 - 2 * gamma * h + 3 * gamma**2 * h**2)
    assert ms_rate > 0

    def integrand(z):
        return np.log((1 - gamma * h * z**2) ** 2) * stats.norm.pdf(z)

    z0 = 1 / math.sqrt(gamma * h)  # log singularity
    lyap = sum(
        integrate.quad(integrand, a, b, limit=200)[0]
        for a, b in ((-np.inf, -z0), (-z0, 0), (0, z0), (z0, np.inf))
    )
    rng = np.random.default_rng(8)
    with np.errstate(over="ignore", under="ignore"):
        s = _scalar_sgd_log_norms(gamma, h, 200, 4000, rng)
    assert s.min() > np.finfo(float).tiny  # 200 steps: no underflow
    res = log_moment_growth_rate(s)
    assert res.rate < 0 and res.stable is True
    assert abs(res.rate - lyap) < 4 * res.se
    json.dumps(res.to_dict())


def test_log_moment_growth_rate_detects_divergence_and_vectors():
    rng = np.random.default_rng(9)
    R, T, d = 500, 60, 3
    eta = np.ones((R, d))
    traj = []
    for _ in range(T):
        eta = 1.2 * eta + 0.1 * rng.standard_normal((R, d))
        traj.append(eta.copy())
    traj = np.array(traj)
    res = log_moment_growth_rate(traj, squared_norms=False)
    assert res.stable is False
    assert res.rate == pytest.approx(2 * math.log(1.2), rel=0.05)
    over = np.full((5, 4), 1.0)
    over[3:, 0] = np.inf
    assert log_moment_growth_rate(over).n_diverged == 1
    with pytest.raises(ValueError, match="shape"):
        log_moment_growth_rate(np.ones(5))


def _sgd_step_factory(h, b, gamma, rng):
    """Noise-free SGD error step with Gaussian design x ~ N(0, diag(h)), batch b."""
    d = h.size

    def step(eta):
        x = rng.standard_normal((eta.shape[0], b, d)) * np.sqrt(h)
        return eta - gamma * np.einsum("nbd,nb->nd", x, np.einsum("nbd,nd->nb", x, eta)) / b

    return step


def test_mean_square_growth_rate_matches_exact_second_moment_map():
    """Resampling estimate of the mean-square rate vs log spectral radius of the exact
    (derived) second-moment map, below and above the derived limit: within 4 SE."""
    from convkit.bounds.sgd_stability import sgd_stability_limit, stability_matrix

    rng = np.random.default_rng(12)
    h, b = np.array([2.0, 1.0, 0.3]), 2
    g_star = sgd_stability_limit(h, b)
    for f in (0.9, 1.1):
        g = f * g_star
        res = mean_square_growth_rate(
            _sgd_step_factory(h, b, g, rng), np.ones((500, 3)), 150, rng=rng, n_systems=16
        )
        exact = math.log(max(abs(np.linalg.eigvals(stability_matrix(h, b, g)))))
        assert abs(res.rate - exact) < 4 * res.se, (f, res.rate, exact, res.se)
        assert res.stable is (f < 1)


def test_mean_square_growth_rate_1d_is_log_one_step_factor():
    rng = np.random.default_rng(13)
    h, g = 1.0, 0.6
    res = mean_square_growth_rate(
        _sgd_step_factory(np.array([h]), 1, g, rng), np.ones((400, 1)), 100, rng=rng
    )
    exact = math.log(1 - 2 * g * h + 3 * g**2 * h**2)
    assert abs(res.rate - exact) < 4 * res.se


def test_stability_bracket_with_monte_carlo_mean_square_criterion():
    """Bisection with the resampling criterion brackets the derived mean-square limit
    (bracket [0.7, 1.2] x limit, rtol 4%: evaluation points stay >= 1.4% away from it)."""
    from convkit.bounds.sgd_stability import sgd_stability_limit

    rng = np.random.default_rng(14)
    h, b = np.array([1.5, 0.5, 0.5, 0.2]), 1
    g_star = sgd_stability_limit(h, b)

    def stable(g):
        res = mean_square_growth_rate(
            _sgd_step_factory(h, b, g, rng), np.ones((300, 4)), 100, rng=rng, n_systems=8
        )
        return res.rate < 0

    br = stability_bracket(stable, 0.7 * g_star, 1.2 * g_star, rtol=0.04)
    assert br.lo < g_star <= br.hi
    assert min(abs(g / g_star - 1) for g, _ in br.history) > 0.01


def test_paired_ratio_standard_error_is_calibrated_and_small():
    """Correlated pairs: the delta-method se matches the spread of the ratio over 300
    independent experiments (within 15%, i.e. ~3 SE of a standard-deviation estimate from
    300 samples) and is far below the unpaired se."""
    rng = np.random.default_rng(30)
    R, n_exp = 2000, 300
    ratios, ses = [], []
    for _ in range(n_exp):
        common = rng.exponential(1.0, R)
        a = 1.1 * common + 0.05 * rng.standard_normal(R)
        b = common + 0.05 * rng.standard_normal(R)
        r, se = paired_ratio(a, b)
        ratios.append(float(r))
        ses.append(float(se))
    sd = np.std(ratios, ddof=1)
    assert np.mean(ses) == pytest.approx(sd, rel=0.15)
    assert abs(np.mean(ratios) - 1.1) < 4 * sd / np.sqrt(n_exp)
    unpaired = 1.1 * np.sqrt(2 / R)  # exponential: var(common) = 1, mean 1
    assert np.mean(ses) < 0.2 * unpaired
    # curve form: replicates along axis 0, reference with one column
    r, se = paired_ratio(np.ones((10, 3)) * [[1.0, 2.0, 3.0]], np.ones((10, 1)))
    np.testing.assert_allclose(r, [1, 2, 3])
    np.testing.assert_allclose(se, 0, atol=1e-15)


def test_the_stability_bracket_was_stability_limit():
    """``convkit.checks.stability_limit`` (a bracket of any criterion) and
    ``convkit.exact.stability_limit`` (the exact mean-square limit, a number) were homonyms;
    the bracket is ``stability_bracket`` and the old name points to it."""
    import convkit.checks as checks
    from convkit.exact import stability_limit

    with pytest.raises(AttributeError, match=r"stability_limit was renamed stability_bracket"):
        checks.stability_limit  # noqa: B018
    assert callable(stability_limit) and not hasattr(checks, "stability_limit")
