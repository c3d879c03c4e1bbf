"""Averaged constant-step SGD under additive noise: exact finite-T error and the
Polyak-Juditsky asymptote.

Results: ``averaged_sgd.polyak_juditsky`` (``E||theta_bar_T - theta*||_H^2 ~ sigma^2 d / T``,
Polyak & Juditsky 1992, re-derived here as the limit of the exact error) and
``averaged_sgd.exact_additive_1d`` (the exact finite-T error in one eigen-direction).

Derivation: :func:`derive_polyak_juditsky` (SymPy geometric sums and a limit).

Checks: the asymptote against the exact engine up to T = 1e6 and the Monte Carlo log-log
slope (exponent rule against -1); the exact 1-D error against the exact engine (1e-9) and
Monte Carlo (3 SE at every T).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import sympy as sp

from convkit.bounds.checking import check_row, exponent_in, tolerance_verdict
from convkit.bounds.core import TheoryResult, symbol
from convkit.bounds.provenance import derived
from convkit.bounds.registry import get, register_check, result
from convkit.verdicts import exponent_verdict, verdict_of

__all__ = ["derive_polyak_juditsky"]


# ============================================================================ derivations
def derive_polyak_juditsky() -> dict[str, Any]:
    """Exact error of averaged constant-step SGD under additive noise, and its asymptote.

    Per eigen-direction (eigenvalue h): ``eta_t = q eta_{t-1} + gamma xi_t`` with
    ``q = 1 - gamma h`` (``0 < q < 1``), ``E xi_t^2 = sigma^2 h`` (the covariance of the
    least-squares gradient noise at the optimum). The average
    ``theta_bar = (1/T) sum_{t=1}^T eta_t = (1/T)[eta_0 sum_t q^t + gamma sum_s xi_s
    sum_{t=s}^T q^(t-s)]`` has ``h E[theta_bar^2] = bias + variance``; both geometric sums are
    done by SymPy (generic branch ``q != 1``). The limit of ``T x error`` as ``T -> oo`` is
    taken with ``q = exp(-r)``, ``r > 0``.

    Returns ``{"exact": expr(T, q, h, sigma, eta_0), "variance", "bias",
    "limit_T_times_error": sigma^2 (per direction), "symbols": {...}}``; summed over d
    directions this gives ``sigma^2 d / T`` (Polyak & Juditsky 1992). The expression is in
    powers ``q**T`` (numerically stable for large T).

    The result is cached; a fresh (shallow) copy is returned.
    """
    res = _derive_polyak_juditsky()
    return {k: dict(v) if isinstance(v, dict) else v for k, v in res.items()}


@functools.lru_cache(maxsize=2)
def _derive_polyak_juditsky() -> dict[str, Any]:
    """Cached implementation of :func:`derive_polyak_juditsky`."""
    T, sig, h = symbol("T"), symbol("sigma"), symbol("h")
    q = sp.Symbol("q", positive=True)
    r = symbol("r")
    eta0 = sp.Symbol("eta_0", real=True)
    j, k, t = (sp.Symbol(x, integer=True, nonnegative=True) for x in ("j", "k", "t"))
    gamma = (1 - q) / h
    # weight of xi_s in sum_{t=s}^T eta_t is gamma sum_{j=0}^{k-1} q^j with k = T - s + 1
    inner = _generic_branch(sp.summation(q**j, (j, 0, k - 1)))
    terms = sp.Add.make_args(sp.expand(inner**2))
    sum_sq = sp.Add(*[_generic_branch(sp.summation(a, (k, 1, T))) for a in terms])
    var = sp.factor(sp.cancel(h * gamma**2 * sig**2 * h * sum_sq / T**2))
    bias = sp.factor(h * eta0**2 * _generic_branch(sp.summation(q**t, (t, 1, T))) ** 2 / T**2)
    lim = sp.simplify(sp.limit((T * (var + bias)).subs(q, sp.exp(-r)), T, sp.oo))
    return {
        "exact": var + bias,
        "variance": var,
        "bias": bias,
        "limit_T_times_error": lim,
        "symbols": {"T": T, "q": q, "sigma": sig, "h": h, "eta_0": eta0},
    }


def _generic_branch(e: sp.Expr) -> sp.Expr:
    """The generic (``q != 1``) branch of every Piecewise in a SymPy geometric sum."""
    return sp.sympify(e).replace(lambda x: isinstance(x, sp.Piecewise), lambda x: x.args[-1].expr)


# ============================================================================ results
@result("averaged_sgd.polyak_juditsky")
def _pj() -> TheoryResult:
    sig, d, T = symbol("sigma"), symbol("d"), symbol("T")
    res = derive_polyak_juditsky()
    per_dir = res["limit_T_times_error"]
    return TheoryResult(
        name="averaged_sgd.polyak_juditsky",
        expression=d * per_dir.subs(res["symbols"]["sigma"], sig) / T,
        kind="asymptotic",
        quantity="E||theta_bar_T - theta*||_H^2",
        provenance="Polyak & Juditsky 1992 (classic); "
        + derived(derive_polyak_juditsky)
        + " (additive noise, constant step: limit of T x exact error)",
        variable=T,
        notes="Also the target of MBA, Local-SGD and OSA as T -> oo with P fixed.",
    )


@result("averaged_sgd.exact_additive_1d")
def _pj_exact() -> TheoryResult:
    res = derive_polyak_juditsky()
    return TheoryResult(
        name="averaged_sgd.exact_additive_1d",
        expression=res["exact"],
        kind="identity",
        quantity="h E[theta_bar_T^2] for one eigen-direction, q = 1 - gamma h in (0, 1)",
        provenance=derived(derive_polyak_juditsky),
        notes="Additive noise with variance sigma^2 h; sum over directions for the total.",
    )


# ============================================================================ checks
@register_check("polyak_juditsky", ["averaged_sgd.polyak_juditsky"])
def check_polyak_juditsky(quick: bool) -> list[dict[str, Any]]:
    """Averaged constant-step SGD, additive noise: ``T E||theta_bar_T - theta*||_H^2 ->
    sigma^2 d``, the prediction read from the registry (``evaluate``, ``leading_exponent``).
    Exact engine up to T = 1e6 (err / the registered value within 1 % of 1 and local log-log
    slope within 0.01 of the registered exponent, -1, over the last decade) and Monte Carlo
    (fit_exponent of the averaged error over the last decade, judged by the exponent rule
    against that exponent with the alternatives 1/2 and 1 above it: the slow rate and a
    stationary error that does not decay)."""
    from convkit import simulate
    from convkit.algorithms.local import MBA
    from convkit.checks import fit_exponent
    from convkit.exact import expected_error
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    name = "averaged_sgd.polyak_juditsky"
    d, sigma, gamma = 5, 1.0, 0.5
    prob = LeastSquares.additive(d, spectrum="1/i", noise=sigma)
    theta0 = prob.theta_star + 1.0 / math.sqrt(d)
    algo = MBA(1, Constant(gamma), name="SGD")
    Tmax = 10**6
    ex = expected_error(prob, algo, steps=Tmax, theta0=theta0, n_record=30)
    cur = ex.curve("SGD", "hnorm2", "avg")
    T, err = cur["step"].to_numpy(float), cur["mean"].to_numpy(float)
    res_th = get(name)
    theory = float(res_th.evaluate(T=Tmax, d=d, sigma=sigma))
    lead = exponent_in(res_th, "T")
    ratio = float(err[-1] / theory)
    fe = fit_exponent(T, err, None, window=(Tmax / 10, Tmax), predicted=lead)
    setting = (
        f"least squares, additive noise, d = {d}, h_i = 1/i, sigma = 1, gamma = {gamma}, "
        "start at distance 1"
    )
    ok = abs(ratio - 1) <= 0.01 and abs(fe.slope - lead) <= 0.01
    rows = [
        check_row(
            name,
            setting + f", exact engine, T = {Tmax:.0e}: err / the registered asymptote",
            ratio,
            1.0,
            *verdict_of(
                ok,
                f"err / asymptote = {ratio:.6g} and the local slope {fe.slope:.4g} are within "
                f"0.01 of 1 and {lead:g}",
                f"err / asymptote = {ratio:.6g} or the local slope {fe.slope:.4g} is not "
                f"within 0.01 of 1 and {lead:g}",
            ),
            f"|ratio - 1| <= 0.01 and |slope - ({lead:g})| <= 0.01 over [1e5, 1e6]",
            slope=fe.slope,
            ratio_curve=(err * T / (sigma**2 * d)).tolist(),
            T=T.tolist(),
        )
    ]
    Tmc = 10**4 if quick else 10**5
    R = 300 if quick else 1000
    res = simulate(prob, algo, steps=Tmc, replicates=R, seed=11, theta0=theta0, n_record=20)
    c = res.curve("SGD", "hnorm2", "avg")
    fm = fit_exponent(
        c["step"], c["mean"], c["se"], window=(Tmc / 10, Tmc), predicted=lead, level=0.95
    )
    # the alternatives, relative to the claim: the slow rate (+1/2) and no decay (+1)
    alts = (lead + 0.5, lead + 1.0)
    rows.append(
        check_row(
            name,
            setting + f", Monte Carlo R = {R}: log-log slope of the averaged error over "
            f"[{Tmc // 10}, {Tmc}]",
            fm.slope,
            lead,
            *exponent_verdict(fm.interval, lead, alternatives=alts, fit=fm),
            f"exponent rule: {lead:g} (the registered exponent in T) inside the 95 % interval "
            f"of the slope, half-width <= 0.25, {alts[0]:g} and {alts[1]:g} outside",
            interval=list(fm.interval),
            chi2_dof=fm.chi2_dof,
        )
    )
    return rows


@register_check("polyak_juditsky.exact_1d", ["averaged_sgd.exact_additive_1d"])
def check_exact_additive_1d(quick: bool) -> list[dict[str, Any]]:
    """Exact finite-T error of averaged SGD in one direction (additive noise, derived by
    SymPy geometric sums) against the exact engine (relative 1e-9) and Monte Carlo
    (h = 0.5, gamma = 0.4, eta_0 = 1, sigma = 1, T in {1, 10, 100}; within 3 SE each)."""
    from convkit import simulate
    from convkit.algorithms.local import MBA
    from convkit.exact import expected_error
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    name = "averaged_sgd.exact_additive_1d"
    h, gamma, sigma, eta0 = 0.5, 0.4, 1.0, 1.0
    prob = LeastSquares(np.array([h]), noise=sigma, design="additive", theta_star=np.zeros(1))
    Ts = [1, 10, 100]
    algo = MBA(1, Constant(gamma), name="SGD")
    theta0 = np.array([eta0])
    theory = np.array(
        [float(get(name).evaluate(T=T, q=1 - gamma * h, h=h, sigma=sigma, eta_0=eta0)) for T in Ts]
    )
    ex = expected_error(prob, algo, steps=Ts[-1], theta0=theta0, record=Ts)
    ce = ex.curve("SGD", "hnorm2", "avg").set_index("step")["mean"].reindex(Ts).to_numpy()
    rel = float(np.max(np.abs(ce / theory - 1)))
    R = 20000 if quick else 100000
    res = simulate(prob, algo, steps=Ts[-1], replicates=R, seed=3, theta0=theta0, record=Ts)
    cm = res.curve("SGD", "hnorm2", "avg").set_index("step").reindex(Ts)
    z = (cm["mean"].to_numpy() - theory) / cm["se"].to_numpy()
    setting = f"1-D additive noise, h = {h}, gamma = {gamma}, eta_0 = {eta0}, sigma = 1"
    return [
        check_row(
            name,
            setting + f", T in {Ts}: exact engine (max relative difference)",
            rel,
            0.0,
            *tolerance_verdict(
                rel <= 1e-9,
                "the largest relative difference of the exact engine to the derived error",
                rel,
                "<= 1e-9",
            ),
            "max relative difference <= 1e-9",
            engine=ce.tolist(),
            theory=theory.tolist(),
        ),
        check_row(
            name,
            setting + f", T in {Ts}: Monte Carlo R = {R} (max |z|)",
            float(np.max(np.abs(z))),
            0.0,
            *verdict_of(
                bool(np.all(np.abs(z) <= 3)),
                f"the Monte Carlo means are within 3 SE of the derived error at every T (max "
                f"|z| = {np.max(np.abs(z)):.2f})",
                f"a Monte Carlo mean is more than 3 SE from the derived error (max |z| = "
                f"{np.max(np.abs(z)):.2f})",
            ),
            "|measured - theoretical| <= 3 SE at every T",
            z=z.tolist(),
            mc=cm["mean"].to_numpy().tolist(),
            theory=theory.tolist(),
        ),
    ]
