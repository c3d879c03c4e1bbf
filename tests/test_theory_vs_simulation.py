"""Theory versus simulation: every result of the library is checked against a simulation of
its setting (PEPit idiom: each check returns (measured, theoretical) pairs with a verdict).

The tests call the checks registered by the topic modules of :mod:`convkit.bounds` (the same
code that ``convkit check`` runs) in quick mode, once per check (cached), and assert on their
rows (verdicts of :mod:`convkit.verdicts`, reasons) plus sharper numbers from ``details``.
Settings, seeds and tolerances are fixed in the checks and stated in each docstring here.
Where a paper claim is measured *not* to hold in the simulated setting, the test asserts the
measured finding (e.g. the exponent's interval excludes the claimed value: ``violated``) and
says so. ``CONVKIT_FULL=1`` runs the checks in full mode (larger horizons and more
replicates); the assertions are the same.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from convkit import bounds as tc
from convkit.bounds import names
from convkit.verdicts import (
    CRASHED,
    HOLDS,
    INCONCLUSIVE,
    MEASURED,
    NOT_IDENTIFIABLE,
    VERDICTS,
    VIOLATED,
)

FULL = os.environ.get("CONVKIT_FULL") == "1"


@functools.cache
def rows(check: str) -> list[dict]:
    """Rows of one registered check (quick mode unless CONVKIT_FULL=1), computed once."""
    out = tc.CHECKS[check](not FULL)
    assert out, f"check {check} returned no rows"
    for r in out:
        for key in ("result", "setting", "measured", "theoretical", "verdict", "reason"):
            assert key in r, f"{check}: row lacks {key}"
        assert r["result"] in tc.COVERS[check]
        assert r["verdict"] in VERDICTS and isinstance(r["reason"], str) and r["reason"]
    return out


def by_result(check: str, result: str) -> list[dict]:
    out = [r for r in rows(check) if r["result"] == result]
    assert out, f"{check}: no row for {result}"
    return out


def test_every_library_result_is_covered_by_a_check():
    """Coverage: every name of convkit.bounds.names() is covered by at least one registered
    check, and every name a check claims to cover exists in the library."""
    covered = tc.covered_results()
    assert set(names()) <= covered, sorted(set(names()) - covered)
    assert covered <= set(names()), sorted(covered - set(names()))


# ============================================================================ stability
def _assert_stability(check: str, result: str) -> None:
    rs = by_result(check, result)
    exact = [r for r in rs if "exact engine" in r["setting"]]
    mc = [r for r in rs if "Monte Carlo" in r["setting"]]
    assert len(exact) == 2 and len(mc) >= 1
    for r in exact:
        assert r["verdict"] == HOLDS, r
        assert r["details"]["rel_diff"] <= 1e-6
    for r in mc:
        assert r["verdict"] == HOLDS, r
        lo, hi = r["details"]["bracket"]
        assert lo < r["measured"] < hi
        rel = abs(r["measured"] / r["theoretical"] - 1)
        if not FULL:
            assert rel <= 0.05
        else:
            assert rel <= _full_mode_stability_margin(lo, hi), (rel, lo, hi)


# Full-mode margin of the Monte Carlo stability limits, derived from the check itself
# (convkit/bounds/sgd_stability.py, _mc_ms_limit: bisection in log gamma, stopping at
# hi / lo - 1 <= 0.01, on the sign of mean_square_growth_rate with 400 steps, 8 systems of 512
# particles). Its error in log gamma (~ the relative error) has three parts:
# * bracket resolution: the estimate is the geometric mean of the final bracket, so it is
#   within sqrt(hi / lo) - 1 (<= 0.005) of the crossing the decisions located (from the row);
# * standard error: near gamma* the estimated rate is s (log gamma - log gamma*) + noise, with
#   s = d log rho / d log gamma (rho the spectral radius of the exact moment map) and noise SE
#   se_rate (spread over the 8 systems); a decision is wrong only within se_rate / s of
#   gamma*. Measured at gamma* for every full-mode setting (4 repeats each): se_rate / s is
#   at most 0.0021 (1-D, h = 2, b = 1: s = 1.33, se_rate = 0.0028; others <= 0.0014);
#   4 SE (about 80 decisions over the 10 settings, P(|z| > 4) = 6e-5 each) = 0.0084;
# * the estimator's O(1/R) bias: at gamma* the rate is measured below 0 by up to
#   0.0094 (1-D, b = 1), i.e. the crossing lies up to 0.0070 above gamma* (others <= 0.0028).
# Total: 0.005 + 0.0084 + 0.0070 = 0.020, i.e. the former 0.02; the 0.03 it was widened to
# had no standard error behind it. (Quick mode, 200 steps and 256 particles, the same
# derivation gives 0.010 + 4 x 0.0036 + 0.0137 = 0.038, below the 0.05 kept there.)
FULL_MC_SE_LOG_GAMMA = 0.0021
FULL_MC_BIAS_LOG_GAMMA = 0.0070


def _full_mode_stability_margin(lo: float, hi: float) -> float:
    return float(np.sqrt(hi / lo) - 1) + 4 * FULL_MC_SE_LOG_GAMMA + FULL_MC_BIAS_LOG_GAMMA


def test_ms_stability_1d_matches_exact_engine_and_monte_carlo_bisection():
    """sgd.ms_stability.1d: gamma* = 2b/((b+2)h) (SymPy) equals the exact engine's limit
    (spectral radius of the diagonal moment map) to 1e-6 for h = 2, b = 1 and h = 1, b = 4, and
    the Monte Carlo bisection on the resampled mean-square growth rate (h = 2, b = 1) lands
    within 5 % of it (in full mode: the margin derived at _full_mode_stability_margin, about
    2 %)."""
    _assert_stability("stability.1d", "sgd.ms_stability.1d")


def test_ms_stability_isotropic_gaussian():
    """sgd.ms_stability.isotropic: 2b/((b+d+1)h) for H = 0.5 I_5, b in {1, 3}: exact engine
    to 1e-6, Monte Carlo bisection (b = 1) within 5 %."""
    _assert_stability("stability.isotropic", "sgd.ms_stability.isotropic")


def test_ms_stability_isotropic_rademacher():
    """sgd.ms_stability.isotropic_rademacher: 2b/((b+d-1)h) for H = 0.5 I_5, b in {2, 1}:
    exact engine to 1e-6, Monte Carlo bisection (b = 2) within 5 %."""
    _assert_stability("stability.isotropic_rademacher", "sgd.ms_stability.isotropic_rademacher")


def test_ms_stability_general_spectrum_gaussian():
    """sgd.ms_stability.general: root of the secular equation for h_i = 1/i, d = 8,
    b in {1, 4}: exact engine to 1e-6, Monte Carlo bisection (b = 1) within 5 %."""
    _assert_stability("stability.general", "sgd.ms_stability.general")


def test_ms_stability_general_spectrum_rademacher():
    """sgd.ms_stability.general_rademacher: same with the Rademacher design."""
    _assert_stability("stability.general_rademacher", "sgd.ms_stability.general_rademacher")


# ============================================================================ stationary risk
@pytest.mark.parametrize(
    "check, result",
    [
        ("stationary_risk", "sgd.stationary_risk"),
        ("stationary_risk_rademacher", "sgd.stationary_risk_rademacher"),
    ],
)
def test_stationary_risk_of_constant_step_sgd(check, result):
    """sgd.stationary_risk(_rademacher): the derived stationary E||theta - theta*||_H^2 at
    gamma = half the stability limit (d = 4, h_i = 1/i, sigma = 1) equals the Monte Carlo
    last-iterate error after 400 steps from theta* within 3 SE (R = 4000), and the exact
    engine's value to 1e-6."""
    mc, ex = by_result(check, result)
    assert mc["verdict"] == HOLDS and abs(mc["details"]["z"]) <= 3
    assert mc["details"]["se"] < 0.05 * mc["theoretical"]  # the test has power
    assert ex["verdict"] == HOLDS and ex["details"]["rel_diff"] <= 1e-6


# ============================================================================ Polyak-Juditsky
def test_polyak_juditsky_asymptote():
    """averaged_sgd.polyak_juditsky: additive noise, d = 5, gamma = 0.5. Exact engine:
    T err / (sigma^2 d) within 1 % of 1 at T = 1e6, non-decreasing towards it over the last
    decade, local slope within 0.01 of -1. Monte Carlo (R = 300, T = 1e4): the weighted log-log
    slope over [1e3, 1e4] has -1 inside its 95 % interval, and the interval is narrower than
    +-0.25 (the check has power)."""
    ex, mc = by_result("polyak_juditsky", "averaged_sgd.polyak_juditsky")
    assert ex["verdict"] == HOLDS
    assert abs(ex["measured"] - 1) <= 0.01 and abs(ex["details"]["slope"] + 1) <= 0.01
    assert mc["verdict"] == HOLDS
    lo, hi = mc["details"]["interval"]
    assert lo <= -1 <= hi and hi - lo < 0.5


def test_exact_additive_error_1d():
    """averaged_sgd.exact_additive_1d: the SymPy finite-T error (h = 0.5, gamma = 0.4,
    eta_0 = 1, sigma = 1, T in {1, 10, 100}) equals the exact engine to 1e-9 and Monte Carlo
    (R = 20000) within 3 SE at every T."""
    ex, mc = by_result("polyak_juditsky.exact_1d", "averaged_sgd.exact_additive_1d")
    assert ex["verdict"] == HOLDS and ex["measured"] <= 1e-9
    assert mc["verdict"] == HOLDS and max(abs(z) for z in mc["details"]["z"]) <= 3


# ============================================================================ Local-SGD
def test_additive_noise_invariance_of_schedules():
    """local_sgd.additive_noise_invariance: with additive noise MBA, Local-SGD (H = 8) and OSA
    give pathwise identical errors under common random numbers (relative 1e-10) and identical
    exact expected errors (1e-12); with a Gaussian design (multiplicative noise) the exact
    OSA/MBA ratio differs from 1 (> 1e-6): the invariance needs additive noise."""
    mc, ex, contrast = by_result(
        "local_sgd.additive_invariance", "local_sgd.additive_noise_invariance"
    )
    assert mc["verdict"] == HOLDS and mc["measured"] <= 1e-10
    assert ex["verdict"] == HOLDS and ex["measured"] <= 1e-12
    # the contrast is reported, not judged: no false variant of the identity makes it fail
    assert contrast["verdict"] == MEASURED
    assert contrast["reason"].startswith("contrast, not a test of the identity")
    assert contrast["measured"] > 1 + 1e-3


def test_osa_mba_ratio_tends_to_one():
    """local_sgd.osa_mba_ratio: exact engine, P = 8, alpha = 0.75, d = 10, T = 1e3 ... 1e5 in
    quarter decades: err(OSA)/err(MBA) - 1 is positive and decreasing, below 1 % at the
    largest T, and judged on the limit (convkit.limit_claims.limit_verdict): the excess keeps
    decaying in the upper half of T (interval below half the lower half's exponent) and at
    least halves, so the claim holds. The Monte Carlo paired ratio at T = 1e4 (R = 300) agrees
    with the exact one within 3 SE, an engine cross-check reported as measured."""
    ex, mc = by_result("local_sgd.osa_mba_ratio", "local_sgd.osa_mba_ratio")
    assert ex["verdict"] == HOLDS, ex["reason"]
    ratios = np.array(ex["details"]["ratios"])
    assert np.all(ratios > 1) and np.all(np.diff(ratios) < 0) and ratios[-1] < 1.01
    assert ex["details"]["tail_interval"][1] < 0.5 * ex["details"]["head_exponent"]
    assert mc["verdict"] == MEASURED and abs(mc["details"]["z"]) <= 3


@pytest.mark.slow
def test_local_sgd_rounds_needed_exponents_measured_not_half():
    """local_sgd.rounds_needed / communication_reduction / local_steps_between_rounds.

    Small exact study (least squares d = 10, h_i = 1/i, alpha = 0.75, eps = 0.01, Polyak
    average, start at theta*): the claim N* ~ sqrt(P T) does NOT hold in this setting -- the
    fitted exponent of N* in T (P = 8) has a 95 % interval above 1/2 and the exponent in P
    (T = 1e5) is negative, so the reduction factor and H* do not scale like sqrt(T)/P^(3/2)
    either. Started at distance 1, one-shot averaging already matches MBA within 1 % (N* = 1 at
    every T and P): no exponent can be measured there. These are measured findings; the large
    Monte Carlo study is analyses/local_sgd_threshold_mc.py."""
    rn = by_result("local_sgd.threshold", "local_sgd.rounds_needed")
    in_T, in_P, in_T1, in_P1 = rn
    assert in_T["verdict"] == VIOLATED and in_T["details"]["interval"][0] > 0.5
    assert in_P["verdict"] == VIOLATED and in_P["details"]["interval"][1] < 0.5
    assert in_P["measured"] < 0
    for r in (in_T1, in_P1):
        assert r["verdict"] == NOT_IDENTIFIABLE
        assert r["reason"].startswith("boundary: N* = 1")
    for res in ("local_sgd.communication_reduction", "local_sgd.local_steps_between_rounds"):
        red_T, red_P = by_result("local_sgd.threshold", res)
        assert red_T["verdict"] == VIOLATED and red_T["details"]["interval"][1] < 0.5
        assert red_P["verdict"] == VIOLATED and red_P["details"]["interval"][0] > -1.5
        # the reduction-factor exponents are 1 - a_T and -1 - a_P of N*'s fit
        assert red_T["measured"] == pytest.approx(1 - in_T["measured"], abs=1e-9)
        assert red_P["measured"] == pytest.approx(-1 - in_P["measured"], abs=1e-9)


# ============================================================================ decentralized
@pytest.mark.slow
def test_dpsgd_rate_exponent():
    """dpsgd.rate: D-PSGD on a ring of 8 (iid least squares d = 10, sigma = 1, gamma_T =
    sqrt(n/T)/2, R = 100, T = 250 ... 2000): (1/T) sum_t ||grad f(x_bar_t)||^2 decays at least
    like T^-1/2 -- the 95 % interval of the log-log slope reaches -1/2 or lies below it -- and
    the fitted constant c_1 of c_1 sigma_g/sqrt(nT) is positive and finite."""
    (r,) = by_result("dpsgd.rate", "dpsgd.rate")
    assert r["verdict"] == HOLDS, r
    assert r["theoretical"] == -0.5
    lo, hi = r["details"]["interval"]
    assert lo <= -0.5 and hi - lo < 0.2
    assert 0 < r["details"]["c_1"] < np.inf


@pytest.mark.slow
def test_deepsqueeze_rate_fit_and_step_limit():
    """deepsqueeze.rate and deepsqueeze.step_limit: DeepSqueeze (top-k k = d/2, eta = 0.2) on
    the D-PSGD setting. The model c (1/sqrt(nT) + C_2/T) fits the Monte Carlo time-averaged
    gradient norms (rms weighted log residual <= 2 SE) with a positive, finite C_2 (both
    constants fitted: measured, not tested), and the log-log slope is consistent with -1/2
    (95 % interval).

    Step limit: the claimed sufficient condition gamma <= 1/(3 L sqrt(C_2)), evaluated with the
    fitted C_2 moved by +-2 SE of log C_2, is compared with the measured largest mean-square
    stable gamma (noise-free, resampled growth rate, bisection to 5 %). The verdict must follow
    from the numbers (holds if the bracket is above the bound's range, does not hold if below,
    inconclusive otherwise). Measured in quick mode: C_2 is poorly determined by T <= 2000
    (SE of log C_2 > 0.3), the bound's range straddles the measured limit (about 0.67), so the
    verdict is inconclusive."""
    fit_row, slope_row = by_result("deepsqueeze.rate", "deepsqueeze.rate")
    assert fit_row["verdict"] == MEASURED and fit_row["reason"].startswith("constants measured")
    assert 0 < fit_row["details"]["C_2"] < np.inf
    assert slope_row["verdict"] == HOLDS
    (lim,) = by_result("deepsqueeze.rate", "deepsqueeze.step_limit")
    lo, hi = lim["details"]["bracket"]
    b_lo, b_hi = lim["details"]["bound_range"]
    assert b_lo <= lim["theoretical"] <= b_hi and lo < lim["measured"] < hi
    expected = HOLDS if lo >= b_hi else VIOLATED if hi < b_lo else INCONCLUSIVE
    assert lim["verdict"] == expected
    if not FULL:
        assert fit_row["details"]["log_se"]["C_2"] > 0.3
        assert lim["verdict"] == INCONCLUSIVE and b_lo < lo < hi < b_hi


@pytest.mark.slow
def test_choco_rate_exponent():
    """choco.rate_strongly_convex: CHOCO-SGD (top-k k = d/2, tuned gamma_c) on a ring of 8,
    least squares d = 10, gamma_t = 4/(mu (t + 200)), R = 200, T = 500 ... 4000. Measured: the
    log-log slope of the excess risk in T is SLOWER than -1 in this window (95 % interval
    above -1: the claim's leading exponent is not reached for T <= 4000), while in T + 200
    (the time origin of the step sizes; c/(T + a) <= c/T is the same O(1/T) bound) -1 lies in
    the interval."""
    in_T, in_Ta = by_result("choco.rate", "choco.rate_strongly_convex")
    assert in_T["measured"] > -1 and in_T["theoretical"] == -1.0
    # the verdict follows the (misfit-widened) interval: above -1 is a slower decay
    lo, hi = in_T["details"]["interval"]
    assert (in_T["verdict"] == VIOLATED) == (lo > -1)
    if in_T["verdict"] == VIOLATED:
        assert "slower decay" in in_T["reason"]
    assert in_Ta["verdict"] == HOLDS, in_Ta


def _assert_average_rows(check: str, result: str) -> None:
    rs = by_result(check, result)
    assert len(rs) == 3
    for r in rs:
        assert r["verdict"] == HOLDS and r["measured"] <= 1e-12


def test_deepsqueeze_average_dynamics_identity():
    """deepsqueeze.average_dynamics: mean(X_{t+1}) = mean(X_t) - gamma mean(G_t) to 1e-12
    (relative to max(1, max|X|)) for top-k, scaled sign and QSGD, 30 steps on a ring of 8."""
    _assert_average_rows("deepsqueeze.average_dynamics", "deepsqueeze.average_dynamics")


def test_choco_average_dynamics_identity():
    """choco.average_dynamics: the same identity for CHOCO-SGD (gamma_c = 0.3), to 1e-12."""
    _assert_average_rows("choco.average_dynamics", "choco.average_dynamics")


# ============================================================================ W_eta
def test_w_eta_eigenvalues():
    """w_eta.eigenvalues: numerical eigenvalues of W_eta equal 1 - eta (1 - lambda_i(W)) to
    1e-12 on rings of 8 and 9 nodes and a 3 x 4 torus, eta in {0.1, 0.5, 1}."""
    rs = by_result("w_eta.eigenvalues", "w_eta.eigenvalues")
    assert len(rs) == 3 and all(r["verdict"] == HOLDS and r["measured"] <= 1e-12 for r in rs)


def test_w_eta_gap_condition():
    """w_eta.gap_condition: for a ring of 8 with W_ij = 1/2 (lambda_n = -1) the numerically
    located largest eta with gap(W_eta) = eta (1 - lambda_2) equals 2/(2 - lambda_2 -
    lambda_n) to 1e-8 (relative); for the uniform ring (eta_max > 1) the identity holds on
    all of (0, 1]."""
    r1, r2 = by_result("w_eta.gap_condition", "w_eta.gap_condition")
    assert r1["verdict"] == HOLDS
    assert r1["measured"] == pytest.approx(r1["theoretical"], rel=1e-8)
    assert r1["theoretical"] < 1
    assert r2["verdict"] == HOLDS and r2["theoretical"] > 1


# ============================================================================ compression
def test_top_k_contraction_bound():
    """compression.top_k: ||top_k(x) - x||^2 <= (1 - k/d) ||x||^2 for every one of 8000
    vectors (Gaussian, Cauchy, sparse, equal magnitudes), d = 50, k in {1, 5, 25}; tight
    (measured max equals the bound: equal magnitudes)."""
    rs = by_result("compression.top_k", "compression.top_k")
    for r in rs:
        assert r["verdict"] == HOLDS
        assert r["details"]["tightness"] == pytest.approx(1.0, abs=1e-12)


def test_rand_k_error_identities():
    """compression.rand_k and compression.rand_k_scaled: E||C(x) - x||^2 / ||x||^2 equals
    1 - k/d (plain) and d/k - 1 (scaled) within 3 SE over R = 20000 compressions of one
    Gaussian x (d = 50, k in {5, 25})."""
    for res in ("compression.rand_k", "compression.rand_k_scaled"):
        rs = by_result("compression.rand_k", res)
        assert len(rs) == 2
        for r in rs:
            assert r["verdict"] == HOLDS
            assert abs(r["measured"] - r["theoretical"]) <= 3 * r["details"]["se"] + 1e-12


def test_qsgd_variance_bound():
    """compression.qsgd: E||Q_s(x) - x||^2 <= min(d/s^2, sqrt(d)/s) ||x||^2 at 99.9 %
    one-sided confidence (R = 20000, d = 50, s in {1, 4}, Gaussian and equal-magnitude x); the
    Monte Carlo mean agrees with the compressor's exact variance within 4 SE."""
    for r in by_result("compression.qsgd", "compression.qsgd"):
        assert r["verdict"] == HOLDS
        det = r["details"]
        assert abs(r["measured"] - det["exact_variance"]) <= 4 * det["se"]


def test_scaled_sign_error_identity():
    """compression.scaled_sign: ||(||x||_1/d) sign(x) - x||^2 = ||x||_2^2 - ||x||_1^2/d to
    1e-12 (relative) for 2000 vectors of four kinds."""
    (r,) = by_result("compression.scaled_sign", "compression.scaled_sign")
    assert r["verdict"] == HOLDS and r["measured"] <= 1e-12


# ============================================================================ error feedback
def test_error_feedback_memory_is_order_gamma_squared():
    """ef_sgd.memory: EF-SGD (P = 4, least squares d = 64, start at theta*), memory after 500
    steps, R = 200. The bound 4 (1 - omega) gamma^2 G^2 / omega^2 with its constant holds at
    every k/d from 1/2 to 1/64 (gamma = 0.02), with tightness measured / bound in each row,
    far below 1 and falling with k/d (the measured memory grows about like 1/omega, the bound
    like 1/omega^2); at k/d = 1/4 the log-log slope in gamma has 2 inside its 95 % interval,
    of width < 0.3."""
    rows = by_result("ef_sgd.memory", "ef_sgd.memory")
    *by_frac, r = rows
    assert len(by_frac) == 6
    tight = [b["details"]["tightness"] for b in by_frac]
    for b in by_frac:
        assert b["verdict"] == HOLDS and b["measured"] < b["theoretical"]
        assert b["details"]["tightness"] == pytest.approx(b["measured"] / b["theoretical"])
    assert max(tight) < 0.1 and tight[-1] < tight[0]
    assert r["verdict"] == HOLDS and r["theoretical"] == 2.0
    lo, hi = r["details"]["interval"]
    assert lo <= 2 <= hi and hi - lo < 0.3


# ============================================================================ registry
def test_run_checks_reports_a_crash_as_a_row(monkeypatch):
    """A check that raises becomes one 'crashed' row per covered result (the error as its
    reason, the traceback in details), and the other checks still run."""

    def boom(quick):
        raise RuntimeError("deliberate")

    monkeypatch.setitem(tc.CHECKS, "w_eta.eigenvalues", boom)
    out = tc.run_checks(True, ["w_eta"])
    crashed = [r for r in out if r["verdict"] == CRASHED]
    assert len(crashed) == 1 and crashed[0]["reason"] == "RuntimeError: deliberate"
    assert "Traceback" in crashed[0]["details"]["traceback"]
    assert any(r["check"] == "w_eta.gap_condition" and r["verdict"] == HOLDS for r in out)


def test_select_patterns():
    """--only patterns: exact check names, result names, dotted prefixes and globs; unknown
    names raise naming the known checks."""
    assert tc.select(["compression.qsgd"]) == ["compression.qsgd"]
    assert tc.select(["compression.rand_k_scaled"]) == ["compression.rand_k"]
    assert set(tc.select(["w_eta"])) == {"w_eta.eigenvalues", "w_eta.gap_condition"}
    assert "stability.general_rademacher" in tc.select(["stability.*"])
    with pytest.raises(ValueError, match="matches no check"):
        tc.select(["nope"])
