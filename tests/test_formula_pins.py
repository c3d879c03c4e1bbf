"""Every registered formula pinned to its source statement (``tests/formula_sources.py``):
equal at random points in every variable and constant, equal through
``TheoryResult.evaluate`` (the numeric evaluators too), reduced correctly in the special and
limit cases the sources state, and homogeneous under a change of units (``theta -> a theta``,
``f -> b f``: the bound scales as the quantity it bounds). Exact identities to near machine
precision."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

from convkit.bounds import get, names
from tests.formula_sources import (
    CONDITIONS,
    N_CONDITION_POINTS,
    N_POINTS,
    SOURCES,
    _ms_limit_numeric,
    _secular,
    _stationary_numeric,
    agrees,
    condition_points,
    conditions_value,
    expression_value,
    points,
    source_value,
)


@pytest.mark.parametrize("name", names())
def test_registered_expression_equals_the_source_statement(name):
    """The registered SymPy expression equals the statement typed from its source at random
    points in every variable and constant of the expression."""
    res, src = get(name), SOURCES[name]
    pts = points(name, N_POINTS)
    expr_names = {s.name for s in res.expression.free_symbols if isinstance(s, sp.Symbol)}
    expr_names -= {"i"}  # a summation index
    if isinstance(res.expression, sp.Basic) and res.expression.atoms(sp.IndexedBase):
        expr_names -= {"d"}  # the length of the spectrum h
    if pts:
        assert expr_names <= set(pts[0]), (
            f"{name}: variables not sampled: {expr_names - set(pts[0])}"
        )
    for p in pts or [{}]:
        reg, want = expression_value(res.expression, p), source_value(name, p)
        assert agrees(reg, want, src.rtol), (name, p, reg, want)


@pytest.mark.parametrize("name", [n for n in names() if get(n).numeric is None])
def test_evaluate_equals_the_source_statement(name):
    """``TheoryResult.evaluate`` (lambdify, with the assumption and condition checks) gives the
    source statement's values at the same points."""
    res, src = get(name), SOURCES[name]
    for p in points(name, N_POINTS) or [{}]:
        params = {
            k: v for k, v in p.items() if k in res.parameters or k in res.condition_parameters
        }
        assert agrees(float(res.evaluate(**params)), source_value(name, p), src.rtol), (name, p)


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_numeric_stability_limit_equals_the_moment_map_root(design):
    """``sgd.ms_stability.general[_rademacher].evaluate`` returns gamma*: the step at which the
    spectral radius of the diagonal moment map (typed from Isserlis) reaches 1, and the root
    of the secular function."""
    name = "sgd.ms_stability.general" + ("" if design == "gaussian" else "_rademacher")
    rng = np.random.default_rng(4)
    for _ in range(5):
        h, b = rng.uniform(0.2, 2.0, size=int(rng.integers(1, 6))), int(rng.integers(1, 9))
        g = float(get(name).evaluate(h=h, b=b))
        assert g == pytest.approx(_ms_limit_numeric(h, b, design), rel=1e-9)
        assert _secular(h, b, g, design) == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_numeric_stationary_risk_equals_the_moment_fixed_point(design):
    name = "sgd.stationary_risk" + ("" if design == "gaussian" else "_rademacher")
    rng = np.random.default_rng(5)
    for _ in range(5):
        h, b = rng.uniform(0.2, 2.0, size=int(rng.integers(1, 6))), int(rng.integers(1, 9))
        g = rng.uniform(0.1, 0.9) * _ms_limit_numeric(h, b, design)
        s = rng.uniform(0.5, 2.0)
        v = float(get(name).evaluate(h=h, b=b, gamma=g, sigma=s))
        assert v == pytest.approx(_stationary_numeric(h, b, g, s, design), rel=1e-9)


def test_every_result_with_conditions_has_their_source():
    assert set(CONDITIONS) == {n for n in names() if get(n).conditions}


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_conditions_equal_the_source_statement(name):
    """The registered conditions hold exactly where the source's do, at points on both sides
    of every boundary (also through ``conditions_hold``)."""
    res = get(name)
    pts = condition_points(name, N_CONDITION_POINTS)
    want = [bool(CONDITIONS[name][1](**p)) for p in pts]
    assert any(want) and not all(want), name  # both sides sampled
    for p, w in zip(pts, want, strict=True):
        assert conditions_value(res.conditions, p) == w, (name, p)
        assert bool(res.conditions_hold(**p)) == w, (name, p)


# ============================================================================ special cases
def test_stability_limits_special_cases():
    """1-D, b = 1: 2/(3h) (theory note local_sgd.md); b -> oo: 2/h (gradient descent on the
    mean); the isotropic Gaussian limit at d = 1 is the 1-D one; the isotropic Rademacher
    limit at d = 1 is 2/h for every b (x^2 = h is deterministic); a flat spectrum in the
    secular equation gives the isotropic limits."""
    one, iso, rad = (
        get(f"sgd.ms_stability.{k}") for k in ("1d", "isotropic", "isotropic_rademacher")
    )
    for h in (0.3, 1.0, 7.0):
        assert one.evaluate(h=h, b=1) == pytest.approx(2 / (3 * h), rel=1e-14)
        assert one.evaluate(h=h, b=1e12) == pytest.approx(2 / h, rel=1e-10)
        for b in (1, 2, 5):
            assert iso.evaluate(h=h, b=b, d=1) == pytest.approx(one.evaluate(h=h, b=b), rel=1e-14)
            assert rad.evaluate(h=h, b=b, d=1) == pytest.approx(2 / h, rel=1e-14)
            for d in (2, 7):
                flat = np.full(d, h)
                assert get("sgd.ms_stability.general").evaluate(h=flat, b=b) == pytest.approx(
                    iso.evaluate(h=h, b=b, d=d), rel=1e-10
                )
                assert get("sgd.ms_stability.general_rademacher").evaluate(
                    h=flat, b=b
                ) == pytest.approx(rad.evaluate(h=h, b=b, d=d), rel=1e-10)


def test_stationary_risk_one_dimension_closed_form():
    """1-D, b = 1: sigma^2 gamma h / (2 - 3 gamma h) (the result's notes, from m' = (1 - 2 g h
    + 3 g^2 h^2) m + g^2 h sigma^2)."""
    for h, g, s in ((1.0, 0.2, 1.0), (2.5, 0.1, 0.3)):
        v = get("sgd.stationary_risk").evaluate(h=np.array([h]), b=1, gamma=g, sigma=s)
        assert float(v) == pytest.approx(s**2 * g * h / (2 - 3 * g * h), rel=1e-12)


def test_polyak_juditsky_is_the_limit_of_the_exact_error():
    """T x exact error per direction -> sigma^2 (so d directions give sigma^2 d / T)."""
    ex = get("averaged_sgd.exact_additive_1d")
    pj = get("averaged_sgd.polyak_juditsky")
    for q in (0.3, 0.8):
        v = float(ex.evaluate(T=1e7, q=q, h=1.7, sigma=1.3, eta_0=2.0)) * 1e7
        assert v == pytest.approx(1.3**2, rel=1e-5)
    assert float(pj.evaluate(d=3, sigma=1.3, T=1e7)) * 1e7 == pytest.approx(3 * 1.3**2, rel=1e-14)
    # T = 1: one step, theta_bar = eta_1 = q eta_0 + gamma xi: h (q^2 eta_0^2 + gamma^2 sigma^2 h)
    q, h, s, e0 = 0.6, 2.0, 0.7, 1.5
    g = (1 - q) / h
    assert float(ex.evaluate(T=1, q=q, h=h, sigma=s, eta_0=e0)) == pytest.approx(
        h * (q**2 * e0**2 + g**2 * s**2 * h), rel=1e-13
    )


def test_local_sgd_readings_are_consistent():
    """N* x H* = T/P (H* local steps between N* rounds use all T/P steps) and the reduction
    factor is MBA's T/P rounds over N*, at the same constant."""
    T, P, c = 1e6, 8.0, 1.7
    n_star = get("local_sgd.rounds_needed").evaluate(T_all=T, P=P, c=c, check=False)
    h_star = get("local_sgd.local_steps_between_rounds").evaluate(
        T_all=T, P=P, c=1 / c, check=False
    )
    red = get("local_sgd.communication_reduction").evaluate(T_all=T, P=P, c=1 / c, check=False)
    assert n_star * h_star == pytest.approx(T / P, rel=1e-14)
    assert red == pytest.approx((T / P) / n_star, rel=1e-14)


def test_large_step_model_branches_meet_at_one_half():
    """At alpha = 1/2 both branches of N* give T^(1/2) P^0 eps^(-1/2) (module docstring)."""
    r = get("local_sgd_large_steps.rounds_needed")
    for T, P, eps in ((1e4, 4.0, 0.1), (3e5, 32.0, 0.01)):
        v = r.evaluate(K=1.0, T_all=T, P=P, epsilon=eps, alpha=0.5, check=False)
        assert v == pytest.approx(math.sqrt(T) / math.sqrt(eps), rel=1e-12)
    # the ratio model at alpha = 1/2: no decay in T, P^1
    x = get("local_sgd_large_steps.osa_mba_excess")
    assert x.evaluate(K=1.0, T_all=1e4, P=3.0, alpha=0.5) == pytest.approx(3.0, rel=1e-14)


def test_decentralized_rates_special_cases():
    """D-PSGD with identical node data (zeta = 0) keeps only sigma/sqrt(nT) and with n = 1 it
    is SGD's sigma/sqrt(T); CHOCO without compression (omega = 1) on the complete graph
    (gap = 1) is c (1/(nT) + 1/T^2); DeepSqueeze with C_2 -> 0 is c/sqrt(nT); the step limit
    of C_2 = 1 is 1/(3L)."""
    dp = get("dpsgd.rate")
    kw = {"c_1": 1.3, "c_2": 2.0, "sigma_g": 0.7, "T": 1e4}
    assert dp.evaluate(zeta=0.0, n=8, **kw) == pytest.approx(1.3 * 0.7 / math.sqrt(8e4), rel=1e-14)
    assert dp.evaluate(zeta=0.0, n=1, **kw) == pytest.approx(1.3 * 0.7 / 100, rel=1e-14)
    assert dp.evaluate(zeta=0.5, n=1, **kw) == pytest.approx(
        1.3 * 0.7 / 100 + 2.0 * 0.25 ** (1 / 3) / 1e4 ** (2 / 3), rel=1e-13
    )
    ch = get("choco.rate_strongly_convex")
    assert ch.evaluate(c=2.0, n=4, T=100, gap=1.0, omega=1.0) == pytest.approx(
        2.0 * (1 / 400 + 1e-4), rel=1e-14
    )
    ds = get("deepsqueeze.rate")
    assert ds.evaluate(c=2.0, n=8, T=1e4, C_2=0.0, check=False) == pytest.approx(
        2.0 / math.sqrt(8e4), rel=1e-14
    )
    assert get("deepsqueeze.step_limit").evaluate(L=2.0, C_2=1.0) == pytest.approx(1 / 6, rel=1e-14)


def test_compressors_special_cases():
    """k = d: top-k and rand-k are exact (0), the scaled rand-k has no variance; k = 1 of d:
    (d - 1)/d and d - 1; QSGD's branches meet at s^2 = d and the smaller one is taken; scaled
    sign is exact for equal magnitudes (||x||_1 = sqrt(d) ||x||_2) and in d = 1; the EF
    memory vanishes without compression (omega = 1)."""
    for d in (1, 7, 64):
        assert get("compression.top_k").evaluate(k=d, d=d) == 0
        assert get("compression.rand_k").evaluate(k=d, d=d) == 0
        assert get("compression.rand_k_scaled").evaluate(k=d, d=d) == 0
        assert get("compression.rand_k").evaluate(k=1, d=d) == pytest.approx((d - 1) / d)
        assert get("compression.rand_k_scaled").evaluate(k=1, d=d) == pytest.approx(d - 1)
        assert get("compression.scaled_sign").evaluate(
            d=d, x_norm1=math.sqrt(d) * 2.0, x_norm2=2.0
        ) == pytest.approx(0.0, abs=1e-12)
    q = get("compression.qsgd")
    assert q.evaluate(d=64, s=8) == pytest.approx(1.0, rel=1e-14)  # d/s^2 = sqrt(d)/s = 1
    assert q.evaluate(d=64, s=2) == pytest.approx(4.0, rel=1e-14)  # sqrt(d)/s < d/s^2
    assert q.evaluate(d=64, s=16) == pytest.approx(0.25, rel=1e-14)  # d/s^2 < sqrt(d)/s
    assert get("ef_sgd.memory").evaluate(gamma=0.1, G=3.0, omega=1.0) == 0
    # top-k with k = d/4: delta = 1/4, memory 4 (3/4) 16 gamma^2 G^2 = 48 gamma^2 G^2
    assert get("ef_sgd.memory").evaluate(gamma=0.1, G=1.0, omega=0.25) == pytest.approx(0.48)


def test_mixing_special_cases():
    """W_eta at eta = 1 is W, at eta = 0 the identity; a spectrum symmetric about 0
    (lambda_n = -lambda_2) gives eta_max = 1; the complete graph's gap 1 gives Pu's n."""
    w = get("w_eta.eigenvalues")
    assert w.evaluate(eta=1.0, lambda_i=-0.3) == pytest.approx(-0.3, abs=1e-15)
    assert w.evaluate(eta=1e-300, lambda_i=-0.3, check=False) == pytest.approx(1.0)
    assert get("w_eta.gap_condition").evaluate(lambda_2=0.4, lambda_n=-0.4) == pytest.approx(1.0)
    assert get("pu.transient_time").evaluate(n=16, gap=1.0) == 16


def test_ratio_claims_and_identities():
    for name in (
        "local_sgd.osa_mba_ratio",
        "woodworth.local_beats_minibatch_quadratic",
        "woodworth.minibatch_wins_heterogeneous",
    ):
        assert get(name).evaluate() == 1.0
    # the graph's ratio tends to 1 with an excess C_g/T: the first-order form of
    # (A/T + B_g/T^2) / (A/T + B_complete/T^2) with C_g = (B_g - B_complete)/A
    k = get("koloskova.topology_free_leading_term")
    A, Bg, Bc = 2.0, 7.0, 3.0
    for T in (1e4, 1e6):
        exact = (A / T + Bg / T**2) / (A / T + Bc / T**2)
        assert k.evaluate(C_g=(Bg - Bc) / A, T=T) == pytest.approx(
            exact, rel=10 * (Bc / A / T) ** 2
        )
    assert sp.limit(k.expression, k.variable, sp.oo) == 1
    assert get("local_sgd.additive_noise_invariance").evaluate() == 0.0
    assert get("spiridonoff.rounds_independent_of_T").evaluate(P=12) == 12


# ============================================================================ units
@pytest.mark.parametrize("name", [n for n in names() if SOURCES[n].units])
def test_unit_scaling(name):
    """theta -> a theta, f -> b f: each symbol scales by a^p b^q as its units say and the
    registered expression scales as the quantity it bounds (homogeneity)."""
    units = SOURCES[name].units
    assert units is not None
    expr = get(name).expression
    for p in points(name, 4):
        base = expression_value(expr, p)
        for a, b in ((3.0, 1.0), (1.0, 0.2), (0.5, 7.0)):
            scaled = {
                k: np.asarray(v) * a ** units[k][0] * b ** units[k][1] if k in units else v
                for k, v in p.items()
            }
            want = base * a ** units["="][0] * b ** units["="][1]
            assert expression_value(expr, scaled) == pytest.approx(want, rel=1e-10, abs=1e-300)


def test_deepsqueeze_step_limit_has_the_units_of_a_step():
    """One C_2 for the rate and the limit (issue 30, item 8): under theta -> a theta, f -> b f
    the rate's fitted c scales like E||grad f||^2 = (b/a)^2 and C_2 not at all, so the limit
    1/(3 L sqrt(C_2)) scales like a step, a^2 / b (with C_2 in gradient units it scaled like
    a^3 / b^2)."""
    rate, lim = get("deepsqueeze.rate"), get("deepsqueeze.step_limit")
    T, n, c, C2, L = 1e4, 8, 0.3, 5.0, 1.5
    for a, b in ((2.0, 1.0), (1.0, 3.0)):
        assert rate.evaluate(T=T, n=n, c=c * (b / a) ** 2, C_2=C2, check=False) == pytest.approx(
            (b / a) ** 2 * rate.evaluate(T=T, n=n, c=c, C_2=C2, check=False), rel=1e-14
        )
        assert lim.evaluate(L=L * b / a**2, C_2=C2) == pytest.approx(
            a**2 / b * lim.evaluate(L=L, C_2=C2), rel=1e-14
        )
