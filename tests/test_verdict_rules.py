"""The verdict rules every check follows before a claim may say ``holds``: fit intervals
widened for lack of fit, windows chosen from the data that agree, limits tested on the limit,
and a negative control that made the same check code say ``violated``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from convkit import verdicts as V
from convkit.checks import fit_exponent
from convkit.limit_claims import limit_verdict


# ============================================================================ misfit widening
def test_misfit_inflation_is_the_birge_ratio_floored_at_one():
    assert V.misfit_inflation(9.0) == 3.0
    assert V.misfit_inflation(0.25) == 1.0
    assert V.misfit_inflation(None) == 1.0
    assert V.misfit_inflation(math.nan) == 1.0
    assert V.widened(1.0, 0.1, 4.0) == pytest.approx((0.8, 1.2))


def test_fit_exponent_widens_a_misfitting_weighted_fit_by_sqrt_chi2():
    """A curved log-log relation with small SEs misfits (chi2/dof >> 1): the interval is
    sqrt(chi2/dof) times the known-variance one; a fit within its SEs is not widened."""
    x = np.array([1.0, 2, 4, 8, 16, 32])
    y = x**-1.0 * np.exp(0.05 * np.log(x) ** 2)  # curvature
    se = 0.001 * y
    f = fit_exponent(x, y, se)
    assert f.chi2_dof > 100
    lx = np.log(x)
    w = 1.0 / (se / y) ** 2
    sxx = np.sum(w * lx**2) - np.sum(w * lx) ** 2 / np.sum(w)
    raw_half = 1.959963984540054 / math.sqrt(sxx)
    half = (f.interval[1] - f.interval[0]) / 2
    assert half == pytest.approx(raw_half * math.sqrt(f.chi2_dof), rel=1e-9)
    # an exact power law with honest noise-free SEs: chi2 ~ 0, no widening
    g = fit_exponent(x, x**-1.0, 0.01 * x**-1.0)
    assert (g.interval[1] - g.interval[0]) / 2 == pytest.approx(raw_half * 10, rel=1e-9)


# ============================================================================ windows
def test_windows_decide_only_when_every_adequate_window_agrees():
    agree = [("T >= 1e4", V.HOLDS, "a"), ("T >= 3e4", V.HOLDS, "b")]
    assert V.window_agreement(agree)[0] == V.HOLDS
    split = [("T >= 1e4", V.HOLDS, "a"), ("T >= 3e4", V.VIOLATED, "b")]
    v, why = V.window_agreement(split)
    assert v == V.CONSISTENT_UNRESOLVED
    assert "T >= 1e4: holds" in why and "T >= 3e4: violated" in why
    assert V.window_agreement([])[0] == V.NOT_IDENTIFIABLE
    assert V.window_agreement([("w", V.VIOLATED, "c")])[0] == V.VIOLATED


# ============================================================================ limits
def test_a_decrease_that_levels_off_is_not_a_limit():
    """The issue's numbers (alpha = 1, exact engine): ratio - 1 = 0.0235, 0.0200, 0.0193 at
    T = 1e4, 1e7, 1e9 decreases, yet fits a limit above 1: not ``holds``."""
    T = np.array([1e4, 1e5, 1e6, 1e7, 1e8, 1e9])
    excess = 0.019 + 0.045 * T**-0.5 * 10  # levels off at 0.019
    v, why, det = limit_verdict(T, excess, np.zeros_like(T), toward="1")
    assert v != V.HOLDS, why
    v3, _, _ = limit_verdict([1e4, 1e7, 1e9], [0.0235, 0.0200, 0.0193], None, toward="1")
    assert v3 != V.HOLDS


def test_a_power_law_decay_holds_a_flat_excess_is_measured_a_growing_one_violated():
    T = np.logspace(2, 6, 9)
    rng = np.random.default_rng(0)
    excess = 3.0 * T**-0.5
    se = 0.02 * excess
    noisy = excess * (1 + se / excess * rng.standard_normal(T.size))
    v, why, det = limit_verdict(T, noisy, se, toward="1")
    assert v == V.HOLDS, why
    assert det["tail_interval"][0] < -0.5 < det["tail_interval"][1]
    flat = np.full_like(T, 0.02) * (1 + 0.01 * rng.standard_normal(T.size))
    v, why, _ = limit_verdict(T, flat, 0.01 * flat, toward="1")
    assert v == V.MEASURED, why  # its slope interval straddles 0: neither decay nor growth
    growing = 0.01 * T**0.3
    assert limit_verdict(T, growing, 0.01 * growing, toward="1")[0] == V.VIOLATED


# ============================================================================ controls
def _row(result, verdict, setting="s"):
    return V.check_row(result, setting, 1.0, 1.0, verdict, "why")


def test_a_holds_without_a_violating_control_becomes_measured():
    rows = [_row("a", V.HOLDS), _row("b", V.HOLDS), _row("c", V.VIOLATED)]
    ctl = {"a reversed": [_row("a", V.VIOLATED), _row("b", V.HOLDS), _row("c", V.VIOLATED)]}
    out = V.apply_controls(rows, ctl)
    assert [r["verdict"] for r in out] == [V.HOLDS, V.MEASURED, V.VIOLATED]
    assert out[0]["details"]["negative_control"] == ["a reversed"]
    assert "no negative control" in out[1]["reason"]
    assert rows[1]["verdict"] == V.HOLDS  # the input is not modified


def test_controls_match_rows_by_claim_and_setting():
    rows = [_row("a", V.HOLDS, "x"), _row("a", V.HOLDS, "y")]
    ctl = {"k": [_row("a", V.VIOLATED, "x"), _row("a", V.HOLDS, "y")]}
    out = V.apply_controls(rows, ctl)
    assert [r["verdict"] for r in out] == [V.HOLDS, V.MEASURED]


def test_controlled_runs_the_same_check_on_every_control():
    def controls(data):
        yield V.Control("sign flipped", -data, targets=("positive",))

    @V.controlled(controls)
    def checks(data):
        return [_row("positive", V.HOLDS if data > 0 else V.VIOLATED)]

    assert checks(1.0)[0]["verdict"] == V.HOLDS
    assert checks(1.0)[0]["details"]["negative_control"] == ["sign flipped"]
    assert checks.raw(-1.0)[0]["verdict"] == V.VIOLATED

    @V.controlled(lambda data: [V.Control("no-op", data)])
    def blind(data):
        return [_row("positive", V.HOLDS)]

    assert blind(1.0)[0]["verdict"] == V.MEASURED


def test_the_issue_example_levels_off_exactly():
    """Exact values of ``c + b x^a`` with ``c > 0`` (a limit above 1): the upper half's
    slope flattens, so the claim of the limit 1 is ``measured``; the same curve without the
    constant (a pure power law) ``holds``."""
    T = np.array([1e4, 1e5, 1e6, 1e7])
    v, why, det = limit_verdict(T, 0.019 + 0.5 * T**-0.5, None, toward="1")
    assert v == V.MEASURED, why
    v, why, det = limit_verdict(T, 0.5 * T**-0.5, None, toward="1")
    assert v == V.HOLDS, why
    assert det["tail_exponent"] == pytest.approx(-0.5, abs=1e-12)
