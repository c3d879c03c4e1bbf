"""Tests of the TheoryResult mechanism (convkit.bounds.core)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import sympy as sp

from convkit.bounds.core import (
    ConditionError,
    TheoryResult,
    fit_constants,
    symbol,
)


def _rate() -> TheoryResult:
    T, n, c, C2, alpha = symbol("T"), symbol("n"), symbol("c"), symbol("C_2"), symbol("alpha")
    return TheoryResult(
        name="test.rate",
        expression=c / sp.sqrt(n * T) + C2 / T,
        kind="upper_bound",
        quantity="E||grad||^2",
        provenance="test",
        conditions=(sp.Rational(1, 2) < alpha, alpha < 1),
        constants=(c, C2),
    )


def test_import_convkit_and_checks_does_not_import_sympy():
    code = "import sys, convkit, convkit.checks; print('sympy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_symbols_have_assumptions_and_are_shared():
    assert symbol("T").is_positive and symbol("T").is_integer
    assert symbol("gamma").is_positive
    assert symbol("zeta").is_nonnegative
    assert symbol("T") == symbol("T")
    r = _rate()
    assert set(r.symbols) == {"T", "n", "c", "C_2", "alpha"}
    assert r.parameters == ("C_2", "T", "c", "n")
    assert r.condition_parameters == ("alpha",)


def test_evaluate_vectorized_and_exact():
    r = _rate()
    T = np.logspace(1, 5, 9)
    v = r.evaluate(T=T, n=4, c=2.0, C_2=3.0, alpha=0.75)
    np.testing.assert_allclose(v, 2 / np.sqrt(4 * T) + 3 / T, rtol=1e-14)
    assert v.shape == (9,)
    grid = r.evaluate(T=T[:, None], n=np.array([1, 2, 8])[None, :], c=1, C_2=1, check=False)
    assert grid.shape == (9, 3)
    assert isinstance(r.evaluate(T=10, n=1, c=1, C_2=1, alpha=0.6), float)


def test_evaluate_errors_are_clear():
    r = _rate()
    with pytest.raises(ValueError, match=r"missing parameter\(s\) \['C_2', 'c'\].*fit_constants"):
        r.evaluate(T=1, n=1, alpha=0.7)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['m'\]"):
        r.evaluate(T=1, n=1, c=1, C_2=1, alpha=0.7, m=3)
    with pytest.raises(ConditionError, match=r"alpha < 1 is violated.*alpha=1.2"):
        r.evaluate(T=1, n=1, c=1, C_2=1, alpha=1.2)
    with pytest.raises(ConditionError, match="1/2 < alpha"):
        r.evaluate(T=1, n=1, c=1, C_2=1, alpha=np.array([0.6, 0.4]))
    with pytest.raises(ValueError, match="needs parameter"):
        r.evaluate(T=1, n=1, c=1, C_2=1)
    assert r.evaluate(T=1, n=1, c=1, C_2=1, check=False) == pytest.approx(2.0)
    np.testing.assert_array_equal(
        r.conditions_hold(alpha=np.array([0.4, 0.6, 1.0])), [False, True, False]
    )
    with pytest.raises(ValueError, match="kind must be one of"):
        TheoryResult("x", sp.Integer(1), "theorem", "q", "p")
    with pytest.raises(ValueError, match="provenance"):
        TheoryResult("x", sp.Integer(1), "identity", "q", "")


def test_latex_and_describe():
    r = _rate()
    tex = r.latex()
    assert r"\le" in tex and r"\frac{C_{2}}{T}" in tex and r"\alpha" in tex
    text = r.describe()
    assert "test.rate  [upper_bound]" in text and "unknown constants: c, C_2" in text
    d = r.to_dict()
    assert d["kind"] == "upper_bound" and d["conditions"] == ["1/2 < alpha", "alpha < 1"]


def test_leading_exponent_and_term():
    r = _rate()
    assert r.leading_exponent("T") == sp.Rational(-1, 2)
    assert r.leading_exponent("n") == 0  # C_2/T does not vanish as n -> oo
    T, n, c = symbol("T"), symbol("n"), symbol("c")
    assert sp.simplify(r.leading_term("T") - c / sp.sqrt(n * T)) == 0
    # exponential terms: the elasticity limit is used
    x = symbol("x")
    e = TheoryResult("e", (1 - sp.exp(-x * T)) / T + sp.exp(-x * T), "asymptotic", "q", "t")
    assert e.leading_exponent("T") == -1
    # D-PSGD-like: sigma/sqrt(nT) dominates (T^(-1/2) vs T^(-2/3))
    sig, zeta = symbol("sigma"), symbol("zeta")
    d = TheoryResult(
        "d",
        sig / sp.sqrt(n * T) + (n * zeta**2) ** sp.Rational(1, 3) / T ** sp.Rational(2, 3),
        "upper_bound",
        "q",
        "t",
    )
    assert d.leading_exponent("T") == sp.Rational(-1, 2)


def test_solve_for_threshold():
    r = _rate().subs(c=1)
    T, n, C2 = symbol("T"), symbol("n"), symbol("C_2")
    # where the 1/T term equals the 1/sqrt(nT) term: T = C_2^2 n
    cross = r.solve_for("T", equals=2 * C2 / T)
    assert cross.kind == "threshold"
    assert sp.simplify(cross.expression - C2**2 * n) == 0
    # target accuracy eps: one admissible root (the spurious squared root is discarded)
    eps = symbol("eps")
    t_eps = r.solve_for("T", equals=eps)
    val = t_eps.evaluate(n=4.0, C_2=2.0, eps=0.01, check=False)
    assert 1 / np.sqrt(4 * val) + 2 / val == pytest.approx(0.01, rel=1e-12)
    with pytest.raises(ValueError, match="no symbol"):
        r.solve_for("Q")


def test_subs_checks_conditions():
    r = _rate()
    assert not r.subs(alpha=sp.Rational(3, 4)).conditions
    with pytest.raises(ConditionError):
        r.subs(alpha=2)


def test_fit_constants_recovers_exact_constants():
    r = _rate()
    T = np.logspace(1, 6, 12)
    y = 2.5 / np.sqrt(8 * T) + 40.0 / T
    fit = fit_constants(r, {"T": T}, y, fixed={"n": 8})
    assert fit.values["c"] == pytest.approx(2.5, rel=1e-6)
    assert fit.values["C_2"] == pytest.approx(40.0, rel=1e-6)
    assert fit.rms_log_residual < 1e-8
    d = fit.to_dict()
    assert set(d) == {"values", "log_se", "rms_log_residual", "n_points"}


def test_fit_constants_with_noise_within_standard_errors():
    """Multiplicative log-normal noise of known size: the fitted log C_2 is within 4 of its
    reported standard errors of the truth (weights from se)."""
    import pandas as pd

    rng = np.random.default_rng(1)
    r = _rate()
    T = np.logspace(1, 6, 30)
    truth = 2.5 / np.sqrt(8 * T) + 40.0 / T
    rel = 0.05
    y = truth * np.exp(rel * rng.standard_normal(T.size))
    frame = pd.DataFrame({"T": T, "n": 8.0, "mean": y, "se": rel * y})
    fit = fit_constants(r, frame, "mean", se="se")
    for name, true in (("c", 2.5), ("C_2", 40.0)):
        assert abs(np.log(fit.values[name]) - np.log(true)) < 4 * fit.log_se[name]


def test_numeric_results_use_their_parameters():
    def numeric(h, b):
        return float(np.sum(h)) * b

    r = TheoryResult(
        "n",
        sp.Symbol("zz"),
        "stability_limit",
        "q",
        "t",
        numeric=numeric,
        numeric_params=("h", "b"),
    )
    assert r.parameters == ("b", "h")
    assert r.evaluate(h=np.array([1.0, 2.0]), b=2) == 6.0
