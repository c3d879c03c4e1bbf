"""The power-law adequacy rule of exponent verdicts (convkit.checks.fit_adequacy and
residual_trend_adequacy, convkit.verdicts.exponent_verdict(fit=...)): an exponent "holds" only
where a power law describes the points."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from analyses import _local_sgd_stats as st
from convkit import verdicts as V
from convkit.checks import (
    chi2_dof_range,
    fit_adequacy,
    fit_exponent,
    residual_trend_adequacy,
)

X = np.logspace(2, 6, 13)


def _curved(x: np.ndarray, slope: float, curvature: float) -> np.ndarray:
    """``x^slope`` times a symmetric bump in log x: the least-squares slope over the whole
    window stays ``slope`` (the bump is even about the window's centre), yet no power law
    describes the points."""
    u = np.log(x) - np.log(x).mean()
    return x**slope * np.exp(curvature * u**2)


def test_misfit_power_law_is_not_identifiable_although_its_interval_holds() -> None:
    y = _curved(X, -0.5, 0.05)
    se = 0.01 * y  # 1 % standard errors: the bump (up to exp(0.05 * 4.6^2) ~ 2.9) is resolved
    fe = fit_exponent(X, y, se)
    # the slope is the claim and the interval is narrow: the interval alone says "holds"
    assert abs(fe.slope + 0.5) < 1e-9
    assert V.exponent_verdict(fe.interval, -0.5, alternatives=(-1.0,))[0] == V.HOLDS
    assert fe.adequate is False and "misfits" in fe.adequacy
    verdict, reason = V.exponent_verdict(fe.interval, -0.5, alternatives=(-1.0,), fit=fe)
    assert verdict == V.NOT_IDENTIFIABLE
    assert "chi2/dof" in reason


def test_misfit_without_standard_errors_is_caught_by_the_residual_trend() -> None:
    fe = fit_exponent(X, _curved(X, -0.5, 0.05))
    assert fe.method == "ols" and fe.adequate is False
    assert V.exponent_verdict(fe.interval, -0.5, fit=fe)[0] == V.NOT_IDENTIFIABLE


def test_exact_power_law_is_adequate() -> None:
    fe = fit_exponent(X, 3.0 * X**-0.5)
    assert fe.adequate is True, fe.adequacy
    assert V.exponent_verdict(fe.interval, -0.5, alternatives=(-1.0,), fit=fe)[0] == V.HOLDS


def test_noisy_power_law_is_adequate_at_the_stated_rate() -> None:
    """Under the model (log-normal scatter of the stated relative SE) the test rejects a
    fraction 1 - 0.99 of fits; 4000 fits give that fraction to a binomial SE of
    sqrt(0.01 * 0.99 / 4000) = 0.0016, and the assertion allows 4 of those."""
    rng = np.random.default_rng(7)
    rel = 0.05
    n_fits = 4000
    rejected = 0
    for _ in range(n_fits):
        y = X**-0.5 * np.exp(rel * rng.standard_normal(X.size))
        fe = fit_exponent(X, y, rel * y)
        rejected += fe.adequate is False
    frac = rejected / n_fits
    assert abs(frac - 0.01) <= 4 * math.sqrt(0.01 * 0.99 / n_fits), frac


def test_chi2_range_and_untestable_cases() -> None:
    lo, hi = chi2_dof_range(10)
    assert lo == pytest.approx(stats.chi2.ppf(0.005, 10) / 10, rel=1e-12)
    assert hi == pytest.approx(stats.chi2.ppf(0.995, 10) / 10, rel=1e-12)
    assert fit_adequacy(1.0, 10)[0] is True
    assert fit_adequacy(hi * 1.01, 10)[0] is False
    # below the range: the points scatter less than their SEs say, which is no misfit
    ok, why = fit_adequacy(lo * 0.99, 10)
    assert ok is True and "below the standard errors" in why
    assert fit_adequacy(5.0, 0)[0] is None
    assert residual_trend_adequacy(np.log(X[:3]), np.log(X[:3]))[0] is None
    with pytest.raises(ValueError, match="dof"):
        chi2_dof_range(0)


def test_untestable_fit_cannot_hold() -> None:
    fe = fit_exponent(X[:3], X[:3] ** -0.5)  # 3 points, no standard errors: no trend test
    assert fe.adequate is None
    verdict, reason = V.exponent_verdict(fe.interval, -0.5, fit=fe)
    assert verdict == V.CONSISTENT_UNRESOLVED and "untestable" in reason
    # without the fit the old interval rule still applies
    assert V.exponent_verdict(fe.interval, -0.5)[0] == V.HOLDS


def test_joint_power_fit_reports_adequacy() -> None:
    T, P = np.meshgrid(np.logspace(3, 6, 7), [2.0, 4.0, 8.0, 16.0])
    T, P = T.ravel(), P.ravel()
    good = T**-0.5 * P**1.5
    f = st.power_fit(T, P, good, 0.01 * good)
    assert f["adequate"] is True and abs(f["slopes"]["T"] + 0.5) < 1e-9
    bad = good * np.exp(0.05 * (np.log(T) - np.log(T).mean()) ** 2)
    fb = st.power_fit(T, P, bad, 0.01 * bad)
    assert fb["adequate"] is False
    assert V.exponent_verdict(fb["intervals"]["T"], -0.5, fit=fb)[0] == V.NOT_IDENTIFIABLE
