"""Monte Carlo N* study (analyses/local_sgd_threshold_mc.py): threshold location, exponent
verdicts, and the measured properties that a reduced run can defend statistically.

Statistical tests use fixed seeds and tolerances in paired standard errors (common random
numbers); the SE multiples are stated per test.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyses import local_sgd_threshold_mc as mc  # noqa: E402


# ------------------------------------------------------------------ exact unit tests
def test_n_grid_powers_then_mba():
    assert mc.n_grid(128) == [1, 4, 16, 64, 128]
    assert mc.n_grid(64) == [1, 4, 16, 64]
    assert mc.n_grid(100, 2) == [1, 2, 4, 8, 16, 32, 64, 100]


def test_locate_interior_is_the_log_interpolated_crossing_with_delta_se():
    """A ratio linear in log N crosses 1 + eps at N* = exp((r0 - 1 - eps) / s); the delta-method
    SE of log N* is se / s for a constant se (exact up to round-off)."""
    N = np.array([1.0, 4, 16, 64, 256, 1024])  # crossing between 64 and 256; MBA at 1024
    s, r0, eps, se = 0.03, 1.2, 0.05, 0.004
    ratio = r0 - s * np.log(N)
    ratio[-1] = 1.0
    out = mc.locate(N, ratio, np.r_[np.full(5, se), 0.0], eps)
    assert out["status"] == "interior"
    n_star = math.exp((r0 - 1 - eps) / s)
    assert out["N_star"] == pytest.approx(n_star, rel=1e-12)
    assert out["N_star_se"] / out["N_star"] == pytest.approx(se / s, rel=1e-12)
    assert out["N_lo"] < n_star <= out["N_hi"]


def test_locate_flat_curve_is_not_identifiable_and_low_curve_is_osa():
    N = np.array([1.0, 4, 16, 64])
    flat = mc.locate(N, [1.06, 1.05, 1.04, 1.0], [0.03, 0.03, 0.03, 0.0], 0.05)
    assert flat["status"] == "not_identifiable" and np.isnan(flat["N_star"])
    low = mc.locate(N, [1.01, 1.0, 1.0, 1.0], [0.005, 0.005, 0.005, 0.0], 0.05)
    assert low["status"] == "osa_suffices" and low["N_star"] == 1.0


def _synthetic(exponent: float, status: str = "interior") -> pd.DataFrame:
    """Threshold rows of a T sweep (P = 16) and a P sweep (T = 2^14) with N* = c (P T)^e."""
    rows = []
    for P, T, sweep in mc.design(False).settings():
        n_star = 0.05 * (P * T) ** exponent
        rows.append(
            dict(
                kind="threshold",
                problem="logistic",
                alpha=0.6,
                eps=0.05,
                P=P,
                T=T,
                n=T // P,
                sweep=sweep,
                status=status,
                N_star=n_star,
                N_star_se=0.05 * n_star,
                ratio_osa=1.2,
                ratio_osa_se=0.01,
            )
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("exponent", "verdict"), [(0.5, "holds"), (1.0, "violated")])
def test_checks_verdicts_on_exact_power_laws(exponent, verdict):
    """An exact power law N* ~ (P T)^e gives slope e in both T and P; the verdict says whether
    1/2 is inside the interval."""
    out = [c for c in mc.checks(_synthetic(exponent)) if "nstar_exponent" in c["result"]]
    assert len(out) == 2
    for c in out:
        assert c["slope"] == pytest.approx(exponent, abs=1e-9)
        assert c["verdict"] == verdict
        assert set(c) >= {"result", "setting", "measured", "theoretical", "verdict", "reason"}


def test_checks_say_not_identifiable_without_interior_thresholds():
    out = [
        c
        for c in mc.checks(_synthetic(0.5, "not_identifiable"))
        if "nstar_exponent" in c["result"]
    ]
    assert [c["verdict"] for c in out] == ["not_identifiable"] * 2


# ------------------------------------------------------------------ statistical (fixed seeds)
@pytest.fixture(scope="module")
def logistic_run():
    """Logistic regression, alpha = 0.6, P = 32, T = 2^12 (n = 128), 64 replicates."""
    return mc.simulate_setting("logistic", 0.6, 32, 2**12, 64, seed=11)


def test_logistic_one_shot_is_worse_than_mba_by_more_than_3_paired_se(logistic_run):
    """Non-quadratic loss: one-shot averaging keeps a bias that averaging over machines does
    not remove, so err(OSA)/err(MBA) - 1 > 3 paired SE at small T."""
    res, _ = logistic_run
    c = res.compare("N=1", "MBA", "hnorm2", "avg").iloc[-1]
    assert (c["ratio"] - 1) / c["ratio_se"] > 3


def test_logistic_error_non_increasing_in_rounds_within_3_paired_se(logistic_run):
    """err(N_{i+1}) <= err(N_i) + 3 paired SE of their ratio for consecutive grid N."""
    res, grid = logistic_run
    labels = [f"N={N}" for N in grid[:-1]] + ["MBA"]
    for a, b in zip(labels, labels[1:], strict=False):
        c = res.compare(b, a, "hnorm2", "avg").iloc[-1]
        assert c["ratio"] <= 1 + 3 * c["ratio_se"], (a, b, c["ratio"], c["ratio_se"])


def test_logistic_threshold_is_located(logistic_run):
    """With eps = 0.05 the comparison fails with 95 % confidence at small N and N* lies
    strictly inside (1, n], with a finite delta-method SE."""
    res, grid = logistic_run
    rows = mc.curve_rows("logistic", 0.6, 32, 2**12, "P", res, grid)
    loc = mc.locate(grid, [r["ratio"] for r in rows], [r["ratio_se"] for r in rows], 0.05)
    assert loc["status"] == "interior"
    assert 1 < loc["N_star"] <= grid[-1]
    assert np.isfinite(loc["N_star_se"]) and loc["N_star_se"] > 0


def test_least_squares_monte_carlo_matches_the_exact_engine():
    """Least squares, alpha = 0.75, P = 16, T = 2^12: every Monte Carlo err(N)/err(MBA) is
    within the Bonferroni two-sided 1 % critical value (in paired SE) of the exact ratio."""
    res, grid = mc.simulate_setting("least_squares", 0.75, 16, 2**12, 64, seed=5)
    rows = mc.curve_rows("least_squares", 0.75, 16, 2**12, "T", res, grid)
    exact = mc._exact_ls(0.75, 16, 2**12, grid, (0.05,))["ratio"]
    z = np.array(
        [(r["ratio"] - e) / r["ratio_se"] for r, e in zip(rows[:-1], exact[:-1], strict=True)]
    )
    zc = norm.ppf(1 - 0.01 / (2 * z.size))
    assert np.all(np.abs(z) <= zc), z
    assert exact[-1] == 1.0 and rows[-1]["ratio"] == 1.0


def test_bootstrap_se_is_zero_without_replicate_noise_and_positive_with_it():
    """Identical replicates give a deterministic N* (bootstrap SE exactly 0); independent
    noise gives a positive SE."""
    grid = [1, 4, 16, 64, 256]
    curve = np.array([1.2, 1.15, 1.08, 1.02, 1.0])
    errs = np.repeat(curve[:, None], 50, axis=1)
    assert mc.bootstrap_log_se(errs, grid, 0.05) == 0.0
    rng = np.random.default_rng(3)
    noisy = errs * rng.lognormal(0.0, 0.1, size=errs.shape)
    assert mc.bootstrap_log_se(noisy, grid, 0.05) > 0.0
