"""Tests of the library of results (the registry of convkit.bounds, filled by its topic
modules) and of ``convkit bounds``."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
import sympy as sp

from convkit.bounds import KINDS, LIBRARY, all_results, get, names, symbol
from convkit.bounds.registry import result
from convkit.cli.bounds import main


def test_every_result_is_well_formed():
    results = all_results()
    assert [r.name for r in results] == names() == list(LIBRARY)
    assert len(set(names())) == len(names())
    for r in results:
        assert r.kind in KINDS
        assert r.provenance
        assert r.latex()
        json.dumps(r.to_dict())
        if r.provenance.startswith("derived here"):
            # "derived here: <module>.<function>" names a derivation that exists
            target = r.provenance.removeprefix("derived here: ").split()[0]
            module, _, func = target.rpartition(".")
            assert module.startswith("convkit.bounds."), r.provenance
            assert callable(getattr(importlib.import_module(module), func)), r.provenance
        if r.kind == "asymptotic":
            assert r.variable is not None
    with pytest.raises(ValueError, match="unknown result"):
        get("no.such.result")


def test_registering_a_result_twice_raises():
    """A second factory under an existing name is refused (the library is not modified)."""
    before = dict(LIBRARY)
    with pytest.raises(ValueError, match="registered twice"):
        result("sgd.ms_stability.1d")(lambda: get("sgd.ms_stability.1d"))
    assert LIBRARY == before


def test_local_sgd_claims_are_mutually_consistent():
    T, P = symbol("T_all"), symbol("P")
    red = get("local_sgd.communication_reduction")
    n_star = get("local_sgd.rounds_needed")
    h_star = get("local_sgd.local_steps_between_rounds")
    c = symbol("c")
    # N* = (T/P) / reduction and H* = (T/P) / N* with reciprocal constants
    assert sp.simplify((T / P) / red.expression.subs(c, 1) - n_star.expression.subs(c, 1)) == 0
    assert sp.simplify((T / P) / n_star.expression.subs(c, 1) - h_star.expression.subs(c, 1)) == 0
    assert n_star.leading_exponent("T_all") == sp.Rational(1, 2)
    assert n_star.leading_exponent("P") == sp.Rational(1, 2)
    assert h_star.leading_exponent("P") == sp.Rational(-3, 2)
    for r in (red, n_star, h_star):
        assert r.conditions_hold(alpha=np.array([0.5, 0.6, 0.9, 1.0])).tolist() == [
            False,
            True,
            True,
            False,
        ]
    assert get("local_sgd.osa_mba_ratio").evaluate() == 1.0


def test_deepsqueeze_rate_and_limit():
    r = get("deepsqueeze.rate")
    assert r.leading_exponent("T") == sp.Rational(-1, 2)
    assert {s.name for s in r.constants} == {"c", "C_2"}
    T, n, C2, c = symbol("T"), symbol("n"), symbol("C_2"), symbol("c")
    # the two terms of c (1/sqrt(nT) + C_2/T) cross at T = n C_2^2
    cross = r.solve_for("T", equals=2 * c * C2 / T)
    assert sp.simplify(cross.expression - C2**2 * n) == 0
    lim = get("deepsqueeze.step_limit")
    v = lim.evaluate(L=2.0, C_2=np.array([1.0, 4.0]))
    np.testing.assert_allclose(v, [1 / 6, 1 / 12], rtol=1e-14)
    # the rate's condition is the step limit
    assert r.conditions_hold(gamma=0.07, L=2.0, C_2=4.0)  # limit 1/12
    assert not r.conditions_hold(gamma=0.07, L=2.0, C_2=9.0)  # limit 1/18


def test_baseline_rates_exponents():
    assert get("dpsgd.rate").leading_exponent("T") == sp.Rational(-1, 2)
    assert get("choco.rate_strongly_convex").leading_exponent("T") == -1
    assert get("ef_sgd.memory").leading_exponent("gamma") == 2
    assert get("averaged_sgd.polyak_juditsky").leading_exponent("T") == -1


def test_polyak_juditsky_expression():
    pj = get("averaged_sgd.polyak_juditsky")
    sig, d, T = symbol("sigma"), symbol("d"), symbol("T")
    assert sp.simplify(pj.expression - sig**2 * d / T) == 0
    ex = get("averaged_sgd.exact_additive_1d")
    q = [s for s in ex.expression.free_symbols if s.name == "q"][0]
    # the exact per-direction error times T tends to sigma^2 (numerically, q = 0.5)
    val = ex.evaluate(T=1e6, q=0.5, sigma=1.0, h=1.0, eta_0=1.0)
    assert val * 1e6 == pytest.approx(1.0, rel=1e-5)
    assert q.is_positive


def test_stability_results_evaluate():
    g1 = get("sgd.ms_stability.1d")
    assert g1.evaluate(b=1, h=1.5) == pytest.approx(2 / 4.5, rel=1e-14)
    iso = get("sgd.ms_stability.isotropic")
    assert iso.evaluate(b=2, d=10, h=1.0) == pytest.approx(4 / 13, rel=1e-14)
    gen = get("sgd.ms_stability.general")
    assert gen.parameters == ("b", "h")
    assert gen.evaluate(h=np.full(10, 1.0), b=2) == pytest.approx(4 / 13, rel=1e-10)
    rad = get("sgd.ms_stability.general_rademacher")
    assert rad.evaluate(h=np.array([1.0, 2.0]), b=1) == pytest.approx(2 / 3, rel=1e-10)


def test_identities_and_w_eta():
    assert get("local_sgd.additive_noise_invariance").expression == 0
    w = get("w_eta.eigenvalues")
    assert w.evaluate(eta=0.5, lambda_i=-1.0) == pytest.approx(0.0)
    gap = get("w_eta.gap_condition")
    assert gap.evaluate(lambda_2=0.5, lambda_n=-0.5) == pytest.approx(1.0)
    ds = get("deepsqueeze.average_dynamics")
    assert ds.evaluate(mean_x_t=1.0, mean_g_t=2.0, gamma=0.1) == pytest.approx(0.8)


# ------------------------------------------------------------------ compressor constants
def test_top_k_contraction_bound_on_random_vectors():
    rng = np.random.default_rng(0)
    r = get("compression.top_k")
    d, k = 50, 7
    X = rng.standard_cauchy((1000, d))
    idx = np.argpartition(-np.abs(X), k - 1, axis=1)[:, :k]
    C = np.zeros_like(X)
    np.put_along_axis(C, idx, np.take_along_axis(X, idx, 1), 1)
    ratio = np.sum((C - X) ** 2, 1) / np.sum(X**2, 1)
    assert ratio.max() <= r.evaluate(k=k, d=d) + 1e-12
    # tight for equal magnitudes
    ones = np.ones(d)
    c1 = ones.copy()
    c1[k:] = 0
    assert np.sum((c1 - ones) ** 2) / d == pytest.approx(r.evaluate(k=k, d=d), rel=1e-14)


def test_rand_k_identities_monte_carlo():
    """E||rand_k(x) - x||^2/||x||^2 = 1 - k/d and the scaled version d/k - 1, within 4 SE."""
    rng = np.random.default_rng(1)
    d, k, R = 20, 5, 100_000
    x = rng.standard_normal(d)
    keep = np.argsort(rng.random((R, d)), axis=1)[:, :k]
    mask = np.zeros((R, d), bool)
    np.put_along_axis(mask, keep, True, 1)
    for name, scale in (("compression.rand_k", 1.0), ("compression.rand_k_scaled", d / k)):
        err = np.sum((scale * mask * x - x) ** 2, 1) / np.sum(x**2)
        want = get(name).evaluate(k=k, d=d)
        assert abs(err.mean() - want) < 4 * err.std(ddof=1) / np.sqrt(R)


def test_qsgd_variance_bound_monte_carlo():
    """QSGD with s levels (stochastic rounding of s|x_i|/||x||): unbiased, and the variance
    factor is below min(d/s^2, sqrt(d)/s) (4 SE margin)."""
    rng = np.random.default_rng(2)
    r = get("compression.qsgd")
    for d, s in ((16, 1), (100, 4), (9, 10)):
        x = rng.standard_normal(d)
        nrm = np.linalg.norm(x)
        R = 50_000
        u = s * np.abs(x) / nrm
        low = np.floor(u)
        lev = low + (rng.random((R, d)) < (u - low))
        Q = nrm * np.sign(x) * lev / s
        err = np.sum((Q - x) ** 2, 1) / nrm**2
        bound = r.evaluate(d=d, s=s)
        assert err.mean() - 4 * err.std(ddof=1) / np.sqrt(R) <= bound
        assert np.abs(Q.mean(0) - x).max() < 4 * Q.std(0, ddof=1).max() / np.sqrt(R) + 1e-12


def test_scaled_sign_identity_exact():
    rng = np.random.default_rng(3)
    r = get("compression.scaled_sign")
    X = rng.standard_normal((20, 13))
    C = np.abs(X).sum(1, keepdims=True) / 13 * np.sign(X)
    lhs = np.sum((C - X) ** 2, 1)
    rhs = r.evaluate(d=13, x_norm1=np.abs(X).sum(1), x_norm2=np.linalg.norm(X, axis=1))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)


# ------------------------------------------------------------------ CLI
def test_cli_prints_library(capsys):
    assert main(["--name", "sgd.ms_stability.1d", "--latex"]) == 0
    out = capsys.readouterr().out
    assert "sgd.ms_stability.1d  [stability_limit]" in out
    assert "2*b/(h*(b + 2))" in out and "latex:" in out and "provenance:" in out
    assert main(["--name", "compression.*", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["name"] for d in data} == {n for n in names() if n.startswith("compression.")}
    assert main(["--list"]) == 0
    assert capsys.readouterr().out.split() == names()
    assert main(["--name", "nope"]) == 2
    assert "unknown result" in capsys.readouterr().err


def test_cli_whole_library(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for n in names():
        assert n in out
    assert f"{len(names())} result(s)" in out


def test_stationary_risk_result():
    r = get("sgd.stationary_risk")
    assert r.parameters == ("b", "gamma", "h", "sigma")
    v = r.evaluate(h=np.array([1.5]), b=1, gamma=np.array([0.2, 0.5]), sigma=2.0)
    np.testing.assert_allclose(v, [4 * 0.3 / (2 - 0.9), np.inf])
    rad = get("sgd.stationary_risk_rademacher")
    # Rademacher 1-D: x^2 = h is deterministic: m = gamma sigma^2 / (2 - gamma h) / b
    assert rad.evaluate(h=np.array([1.0]), b=1, gamma=0.5, sigma=1.0) == pytest.approx(0.5 / 1.5)
