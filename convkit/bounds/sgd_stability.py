"""Mean-square stability of constant-step SGD on least squares, and its stationary risk.

Results (derived here by SymPy from the second-moment recursion of
:mod:`convkit.bounds.moments`): the mean-square stability limits ``sgd.ms_stability.1d``
(``2 b / ((b + 2) h)``), ``.isotropic`` (``2 b / ((b + d + 1) h)``), ``.isotropic_rademacher``
(``2 b / ((b + d - 1) h)``), ``.general`` and ``.general_rademacher`` (a secular equation for
any spectrum), and the stationary risk below the limit (``sgd.stationary_risk``,
``sgd.stationary_risk_rademacher``).

Derivations: :func:`stability_structure`, :func:`derive_stability_limit_1d`,
:func:`derive_stability_limit_isotropic`, :func:`derive_secular_equation`,
:func:`sgd_stability_limit`, :func:`stability_matrix`; :func:`derive_stationary_risk`,
:func:`stationary_risk`.

Checks: each limit against the exact engine's spectral radius (1e-6) and a Monte Carlo
bisection on the resampled mean-square growth rate (5 % in quick mode); the stationary risk
against Monte Carlo (3 SE) and the exact engine (1e-6).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sympy as sp

from convkit.bounds.checking import check_row, final_values, mean_se, tolerance_verdict, within
from convkit.bounds.core import TheoryResult, symbol
from convkit.bounds.moments import derive_second_moment_recursion, second_moment_step_numeric
from convkit.bounds.provenance import derived
from convkit.bounds.registry import get, register_check, result
from convkit.verdicts import verdict_of

__all__ = [
    "derive_secular_equation",
    "derive_stability_limit_1d",
    "derive_stability_limit_isotropic",
    "derive_stationary_risk",
    "sgd_stability_limit",
    "stability_matrix",
    "stability_structure",
    "stationary_risk",
]


# ============================================================================ derivations
@functools.lru_cache(maxsize=4)
def stability_structure(design: str = "gaussian") -> tuple[sp.Expr, sp.Expr, sp.Symbol]:
    """Structure of the mean-square dynamics of the diagonal of M for diagonal H.

    From the derived recursion applied to ``H = diag(h_1..h_3)`` and ``M = diag(m_1..m_3)``
    (diagonal M stays diagonal), the linear part ``m' = A m`` is read off by differentiation.
    It is verified that ``A = diag(D(h_i)) + u u^T`` with ``u_i = gamma h_i / sqrt(b)``
    (rank one). Returns ``(D(h), u(h)^2, h)`` as expressions in a generic eigenvalue ``h``.
    For a Gaussian design a non-diagonal H reduces to this case by rotation invariance.
    """
    rec = derive_second_moment_recursion(design)
    d = 3
    hs = [sp.Symbol(f"h_{i}", positive=True) for i in range(d)]
    ms = [sp.Symbol(f"m_{i}", real=True) for i in range(d)]
    Mp = rec.apply(sp.diag(*hs), sp.diag(*ms))
    if any(sp.simplify(Mp[i, j]) != 0 for i in range(d) for j in range(d) if i != j):
        raise RuntimeError("diagonal M does not stay diagonal")
    A = sp.Matrix(d, d, lambda i, j: sp.diff(Mp[i, i], ms[j]))
    h = sp.Symbol("h", positive=True)
    u2 = rec.gamma**2 * h**2 / rec.b
    D = sp.simplify(A[0, 0] - u2.subs(h, hs[0]))
    for i in range(d):
        for j in range(d):
            expect = (rec.gamma**2 * hs[i] * hs[j] / rec.b) + (
                D.subs(hs[0], hs[i]) if i == j else 0
            )
            if sp.simplify(A[i, j] - expect) != 0:
                raise RuntimeError("A is not diag(D) + rank one as expected")
    return sp.factor(D.subs(hs[0], h)), u2, h


def stability_matrix(
    h: Sequence[float] | np.ndarray, b: int, gamma: float, design: str = "gaussian"
) -> np.ndarray:
    """Numerical ``A`` with ``diag(M)' = A diag(M) + noise`` (derived, see
    :func:`stability_structure`), built by applying :func:`second_moment_step_numeric` to the
    basis matrices ``e_i e_i^T`` (so it is the derived recursion itself, not a retyped formula).
    Mean-square stability of constant-step SGD <=> spectral radius(A) < 1.
    """
    h = np.asarray(h, dtype=float)
    d = h.size
    H = np.diag(h)
    E = np.zeros((d, d, d))
    E[np.arange(d), np.arange(d), np.arange(d)] = 1.0
    out = second_moment_step_numeric(H, E, gamma=gamma, b=b, sigma=0.0, design=design)
    return np.diagonal(out, axis1=-2, axis2=-1).T  # column j = image of e_j


@functools.lru_cache(maxsize=4)
def derive_secular_equation(design: str = "gaussian") -> tuple[sp.Expr, sp.Symbol]:
    """The stability condition for a general spectrum as a secular equation.

    ``I - A = diag(1 - D_i) - u u^T``. A is entrywise nonnegative and symmetric, so
    ``rho(A) = lambda_max(A)`` and ``rho(A) < 1 <=> I - A`` positive definite
    ``<=> 1 - D_i > 0`` for all i and ``sum_i u_i^2 / (1 - D_i) < 1`` (Schur complement /
    matrix determinant lemma ``det(I - A) = prod(1 - D_i) (1 - sum u_i^2/(1 - D_i))``,
    verified symbolically here for d = 3). Returns ``(phi(h), h)`` with
    ``phi(h) = u(h)^2 / (1 - D(h))``: stable iff ``sum_i phi(h_i) < 1`` with every
    ``1 - D(h_i) > 0``. Gaussian: ``phi = gamma h / (b (2 - gamma h (1 + 1/b)))``, i.e. the
    condition ``sum_i gamma h_i / (2 - gamma h_i (1 + 1/b)) < b``.
    """
    D, u2, h = stability_structure(design)
    rec = derive_second_moment_recursion(design)
    hs = [sp.Symbol(f"h_{i}", positive=True) for i in range(3)]
    A = sp.Matrix(
        3,
        3,
        lambda i, j: (D.subs(h, hs[i]) if i == j else 0) + rec.gamma**2 * hs[i] * hs[j] / rec.b,
    )
    lhs = (sp.eye(3) - A).det()
    prod = sp.Mul(*[1 - D.subs(h, x) for x in hs])
    rhs = prod * (1 - sum(u2.subs(h, x) / (1 - D.subs(h, x)) for x in hs))
    if sp.simplify(lhs - rhs) != 0:
        raise RuntimeError("matrix determinant lemma check failed")
    phi = sp.factor(sp.simplify(u2 / (1 - D)))
    return phi, h


@functools.lru_cache(maxsize=4)
def derive_stationary_risk(design: str = "gaussian", dim: int = 2) -> tuple[sp.Expr, sp.Symbol]:
    """Stationary excess risk of constant-step SGD (last iterate) below the stability limit.

    For diagonal H the diagonal of M follows ``m' = A m + c`` with
    ``c_i = gamma^2 sigma^2 h_i / b`` (the noise term of the derived recursion, read off by
    applying it to M = 0). Since ``A = diag(D) + u u^T`` and ``c`` is proportional to ``u``,
    Sherman-Morrison gives the fixed point ``(1 - D_i) m_i = c_i + (gamma^2 h_i / b) S`` with
    ``S = sum_i h_i m_i = sigma^2 Phi / (1 - Phi)``, ``Phi = sum_i phi(h_i)`` (``phi`` from
    :func:`derive_secular_equation`); both ``(I - A) m = c`` and ``sum_i h_i m_i = S`` are
    verified symbolically for d = ``dim`` (2 by default, for speed).
    It diverges exactly at the stability limit ``Phi = 1``. 1-D, b = 1:
    ``sigma^2 gamma h / (2 - 3 gamma h)``. Returns ``(closed form in Phi, Phi symbol)``.
    Note ``E||eta||_H^2 = 2 x (excess risk)`` for f = 1/2 E(y - <x, theta>)^2.
    """
    D, u2, h = stability_structure(design)
    phi, _ = derive_secular_equation(design)
    rec = derive_second_moment_recursion(design)
    hs = [sp.Symbol(f"h_{i}", positive=True) for i in range(dim)]
    A = sp.Matrix(
        dim,
        dim,
        lambda i, j: (D.subs(h, hs[i]) if i == j else 0) + rec.gamma**2 * hs[i] * hs[j] / rec.b,
    )
    # noise vector read off the recursion itself (M = 0)
    c_mat = rec.apply(sp.diag(*hs), sp.zeros(dim, dim))
    c = sp.Matrix([c_mat[i, i] for i in range(dim)])
    Phi = sp.Symbol("Phi", positive=True)
    closed = rec.sigma**2 * Phi / (1 - Phi)
    phi_sum = sum(phi.subs(h, x) for x in hs)
    S = closed.subs(Phi, phi_sum)  # candidate risk sum_i h_i m_i
    # Sherman-Morrison candidate: (1 - D_i) m_i = c_i + (gamma^2 h_i / b) S
    m = sp.Matrix(
        [(c[i] + rec.gamma**2 * hs[i] * S / rec.b) / (1 - D.subs(h, hs[i])) for i in range(dim)]
    )
    fixed_point = ((sp.eye(dim) - A) * m - c).applyfunc(lambda e: sp.cancel(sp.together(e)))
    risk_ok = sp.cancel(sp.together(sum(hs[i] * m[i] for i in range(dim)) - S)) == 0
    if fixed_point != sp.zeros(dim, 1) or not risk_ok:
        raise RuntimeError("stationary risk closed form does not match the fixed point")
    return closed, Phi


def stationary_risk(
    h: Sequence[float] | np.ndarray,
    b: int,
    gamma: float | np.ndarray,
    sigma: float,
    design: str = "gaussian",
) -> np.ndarray | float:
    """Numerical stationary ``E||eta_inf||_H^2`` (derived, :func:`derive_stationary_risk`) of
    constant-step SGD on least squares with spectrum ``h``; ``gamma`` may be an array. Returns
    ``inf`` at or above the mean-square stability limit."""
    h = np.asarray(h, dtype=float).ravel()
    g = np.asarray(gamma, dtype=float)
    phi_f, _ = _secular_numeric(design)
    D, _, hsym = stability_structure(design)
    rec = derive_second_moment_recursion(design)
    one_minus_d = sp.lambdify((hsym, rec.b, rec.gamma), 1 - D, "numpy")
    with np.errstate(divide="ignore", invalid="ignore"):
        Phi = np.sum(phi_f(h[:, None], float(b), g.reshape(1, -1)), axis=0)
        ok = np.all(one_minus_d(h[:, None], float(b), g.reshape(1, -1)) > 0, axis=0) & (Phi < 1)
        out = np.where(ok, sigma**2 * Phi / (1 - Phi), np.inf)
    out = out.reshape(g.shape)
    return float(out) if out.ndim == 0 else out


@functools.lru_cache(maxsize=4)
def derive_stability_limit_1d(design: str = "gaussian") -> sp.Expr:
    """Largest mean-square stable constant step in 1-D with batch ``b`` (symbolic ``b``,
    ``h``): the positive root of ``A(gamma) = 1``. Gaussian: ``2 b / ((b + 2) h)`` (b = 1:
    ``2/(3h)``); Rademacher: ``2 / h`` (in 1-D ``x^2 = h`` is deterministic)."""
    D, u2, h = stability_structure(design)
    rec = derive_second_moment_recursion(design)
    a = sp.simplify(D + u2)  # the 1x1 matrix A
    roots = [r for r in sp.solve(sp.Eq(a, 1), rec.gamma) if r != 0]
    roots = [sp.factor(r) for r in roots if r.is_positive is not False]
    if len(roots) != 1:
        raise RuntimeError(f"unexpected roots {roots}")
    hh = symbol("h")
    return roots[0].subs(h, hh)


@functools.lru_cache(maxsize=4)
def derive_stability_limit_isotropic(design: str = "gaussian") -> sp.Expr:
    """Largest mean-square stable step for ``H = h I_d`` (symbolic ``d``, ``b``, ``h``):
    the root of the secular equation ``d phi(h) = 1``. Gaussian: ``2 b / ((b + 1 + d) h)``;
    Rademacher: ``2 b / ((b + d - 1) h)``.
    (Cross-checked in the tests against the eigenvalues of the explicit 3x3 A.)"""
    phi, h = derive_secular_equation(design)
    rec = derive_second_moment_recursion(design)
    d = symbol("d")
    roots = [sp.factor(r) for r in sp.solve(sp.Eq(d * phi, 1), rec.gamma)]
    roots = [r for r in roots if r != 0 and r.is_positive is not False]
    if len(roots) != 1:
        raise RuntimeError(f"unexpected roots {roots}")
    return roots[0].subs(h, symbol("h"))


def sgd_stability_limit(
    h: Sequence[float] | np.ndarray, b: int = 1, design: str = "gaussian"
) -> float:
    """Exact mean-square stability limit ``gamma*`` of constant-step SGD on least squares
    with covariance spectrum ``h`` (eigenvalues; any H for the Gaussian design, diagonal H
    for Rademacher) and batch ``b``: constant-step SGD is mean-square stable iff
    ``gamma < gamma*``.

    Solves the derived secular equation ``sum_i phi(h_i; gamma) = 1`` (see
    :func:`derive_secular_equation`) with Brent's method on ``(0, gamma_D)``, where
    ``gamma_D`` is the smallest positive root of ``1 - D(h_max) = 0`` (on that interval the
    sum increases from 0 to +oo, so the root is unique).
    """
    from scipy.optimize import brentq

    h = np.asarray(h, dtype=float).ravel()
    if h.size == 0 or np.any(h <= 0) or not np.all(np.isfinite(h)):
        raise ValueError(f"h must be a non-empty array of positive eigenvalues, got {h}")
    if int(b) != b or b < 1:
        raise ValueError(f"b must be an integer >= 1, got {b}")
    phi_f, gD_f = _secular_numeric(design)
    with np.errstate(divide="ignore", invalid="ignore"):
        g_hi = float(gD_f(np.float64(h.max()), np.float64(b)))

    def f(g: float) -> float:
        return float(np.sum(phi_f(h, float(b), g))) - 1.0

    if np.isfinite(g_hi) and g_hi > 0:
        hi = g_hi * (1.0 - 1e-12)  # the sum -> +oo at g_hi
    else:  # 1 - D never vanishes (Rademacher, b = 1): bracket by doubling
        hi = 1.0 / float(h.max())
        while f(hi) < 0:
            hi *= 2.0
    lo = hi * 1e-12
    return float(brentq(f, lo, hi, xtol=1e-15 * hi, rtol=1e-15, maxiter=500))


@functools.lru_cache(maxsize=4)
def _secular_numeric(design: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    phi, h = derive_secular_equation(design)
    D, _, _ = stability_structure(design)
    rec = derive_second_moment_recursion(design)
    # 1 - D = gamma h (2 - gamma h (1 + kappa/b)): one nonzero root (may be infinite for some b)
    roots = [r for r in sp.solve(sp.Eq(1 - D, 0), rec.gamma) if r != 0]
    if len(roots) != 1:
        raise RuntimeError(f"unexpected roots of 1 - D: {roots}")
    g_d = roots[0]
    phi_f = sp.lambdify((h, rec.b, rec.gamma), phi, "numpy")
    gd_f = sp.lambdify((h, rec.b), g_d, "numpy")
    return phi_f, gd_f


# ============================================================================ results
@result("sgd.ms_stability.1d")
def _ms_1d() -> TheoryResult:
    expr = derive_stability_limit_1d("gaussian")
    return TheoryResult(
        name="sgd.ms_stability.1d",
        expression=expr,
        kind="stability_limit",
        quantity="gamma (constant-step SGD, least squares, Gaussian design, 1-D, batch b)",
        provenance=derived(derive_stability_limit_1d),
        notes="b = 1 gives 2/(3h). Mean-square stability: E eta_t^2 bounded iff gamma < limit.",
    )


@result("sgd.ms_stability.isotropic")
def _ms_iso() -> TheoryResult:
    expr = derive_stability_limit_isotropic("gaussian")
    return TheoryResult(
        name="sgd.ms_stability.isotropic",
        expression=expr,
        kind="stability_limit",
        quantity="gamma (constant-step SGD, least squares, Gaussian design, H = h I_d, batch b)",
        provenance=derived(derive_stability_limit_isotropic),
    )


@result("sgd.ms_stability.isotropic_rademacher")
def _ms_iso_rad() -> TheoryResult:
    expr = derive_stability_limit_isotropic("rademacher")
    return TheoryResult(
        name="sgd.ms_stability.isotropic_rademacher",
        expression=expr,
        kind="stability_limit",
        quantity="gamma (constant-step SGD, least squares, x_i = +-sqrt(h), H = h I_d, batch b)",
        provenance=derived(derive_stability_limit_isotropic),
    )


def _ms_general(design: str) -> TheoryResult:
    phi, h = derive_secular_equation(design)
    i, d = sp.Symbol("i", integer=True, positive=True), symbol("d")
    hi = sp.IndexedBase("h")[i]
    expr = sp.Sum(phi.subs(h, hi), (i, 1, d))

    def numeric(h: np.ndarray, b: float) -> float:
        return sgd_stability_limit(h, int(b), design)

    suffix = "" if design == "gaussian" else "_rademacher"
    return TheoryResult(
        name=f"sgd.ms_stability.general{suffix}",
        expression=expr,
        kind="stability_limit",
        quantity="1",
        relation=">",
        provenance=derived(derive_secular_equation),
        numeric=numeric,
        numeric_params=("h", "b"),
        notes="Mean-square stable iff this holds (with every denominator of the right sign), "
        "i.e. gamma < gamma*, the root in gamma of sum = 1 for the spectrum h_1..h_d and batch b; "
        "evaluate(h=array, b=int) returns gamma* (Brent on the secular equation)."
        + ("" if design == "gaussian" else " Diagonal H only."),
    )


@result("sgd.ms_stability.general")
def _ms_general_gaussian() -> TheoryResult:
    return _ms_general("gaussian")


@result("sgd.ms_stability.general_rademacher")
def _ms_general_rademacher() -> TheoryResult:
    return _ms_general("rademacher")


def _stationary(design: str) -> TheoryResult:
    closed, Phi = derive_stationary_risk(design)
    phi, h = derive_secular_equation(design)
    i, d = sp.Symbol("i", integer=True, positive=True), symbol("d")
    expr = closed.subs(Phi, sp.Sum(phi.subs(h, sp.IndexedBase("h")[i]), (i, 1, d)))

    def numeric(h: np.ndarray, b: float, gamma: np.ndarray, sigma: float) -> np.ndarray:
        return stationary_risk(h, int(b), gamma, float(sigma), design)

    suffix = "" if design == "gaussian" else "_rademacher"
    return TheoryResult(
        name=f"sgd.stationary_risk{suffix}",
        expression=expr,
        kind="identity",
        quantity="lim_t E||theta_t - theta*||_H^2 (constant-step SGD, last iterate)",
        provenance=derived(derive_stationary_risk),
        numeric=numeric,
        numeric_params=("h", "b", "gamma", "sigma"),
        notes="Finite iff gamma is below the mean-square stability limit (the sum < 1); "
        "evaluate(h=array, b=int, gamma=array, sigma=float); 1-D, b = 1: "
        "sigma^2 gamma h / (2 - 3 gamma h). Equals 2 x the excess risk."
        + ("" if design == "gaussian" else " Diagonal H only."),
    )


@result("sgd.stationary_risk")
def _stationary_gaussian() -> TheoryResult:
    return _stationary("gaussian")


@result("sgd.stationary_risk_rademacher")
def _stationary_rademacher() -> TheoryResult:
    return _stationary("rademacher")


# ============================================================================ checks: stability
def _sgd_noise_free_step(
    h: np.ndarray, gamma: float, b: int, design: str, rng: Any
) -> Callable[[np.ndarray], np.ndarray]:
    """``eta -> eta - (gamma/b) sum_j x_j x_j^T eta`` (noise-free SGD error recursion on least
    squares; the label noise is additive and does not change mean-square stability)."""
    sqrt_h = np.sqrt(h)

    def step(eta: np.ndarray) -> np.ndarray:
        n, d = eta.shape
        if design == "gaussian":
            z = rng.standard_normal((n, b, d))
        else:
            z = 2.0 * rng.integers(0, 2, size=(n, b, d)).astype(float) - 1.0
        x = z * sqrt_h
        r = np.einsum("nbd,nd->nb", x, eta)
        return eta - (gamma / b) * np.einsum("nb,nbd->nd", r, x)

    return step


def _mc_ms_limit(
    h: np.ndarray, b: int, design: str, guess: float, quick: bool, seed: int
) -> dict[str, Any]:
    """Monte Carlo mean-square stability limit: bisection in log(gamma)
    (:func:`convkit.checks.stability_bracket`) on the sign of the importance-resampling growth
    rate of ``E||eta_t||^2`` (:func:`convkit.growth_rates.mean_square_growth_rate`), started from
    ``[guess / 2, 2 guess]``."""
    from convkit.checks import stability_bracket
    from convkit.growth_rates import mean_square_growth_rate

    rng = np.random.default_rng(seed)
    n_steps = 200 if quick else 400
    R = 256 if quick else 512

    def is_stable(g: float) -> bool:
        gr = mean_square_growth_rate(
            _sgd_noise_free_step(h, g, b, design, rng),
            np.ones((R, h.size)) / math.sqrt(h.size),
            n_steps,
            rng=rng,
            n_systems=8,
        )
        return gr.rate < 0

    br = stability_bracket(is_stable, guess / 2, 2 * guess, rtol=0.02 if quick else 0.01)
    return {"lo": br.lo, "hi": br.hi, "estimate": br.estimate, "evaluations": br.n_evaluations}


def _stability_rows(
    name: str, settings: list[tuple[str, np.ndarray, int, dict[str, Any]]], design: str, quick: bool
) -> list[dict[str, Any]]:
    from convkit.exact import stability_limit as exact_limit

    res = get(name)
    rows = []
    for i, (text, h, b, params) in enumerate(settings):
        theory = float(res.evaluate(**params))
        exact = exact_limit(h, batch=b, design=design)
        rel = abs(exact / theory - 1.0)
        verdict, reason = tolerance_verdict(
            rel <= 1e-6,
            "the relative difference of the exact limit to the derived one",
            rel,
            "<= 1e-6",
        )
        rows.append(
            check_row(
                name,
                f"{text}, b = {b}: exact engine (spectral radius of the moment map)",
                exact,
                theory,
                verdict,
                reason,
                "relative difference <= 1e-6",
                rel_diff=rel,
            )
        )
        if i == 0 or not quick:
            mc = _mc_ms_limit(h, b, design, theory, quick, seed=1000 + i)
            margin = 0.05 if quick else 0.03
            rel_mc = abs(mc["estimate"] / theory - 1.0)
            verdict, reason = tolerance_verdict(
                rel_mc <= margin,
                "the relative difference of the Monte Carlo limit to the derived one",
                rel_mc,
                f"<= {margin:g}",
            )
            rows.append(
                check_row(
                    name,
                    f"{text}, b = {b}: Monte Carlo bisection on the resampled mean-square "
                    "growth rate",
                    mc["estimate"],
                    theory,
                    verdict,
                    reason,
                    f"relative difference <= {margin:g}",
                    rel_diff=rel_mc,
                    bracket=[mc["lo"], mc["hi"]],
                    evaluations=mc["evaluations"],
                )
            )
    return rows


@register_check("stability.1d", ["sgd.ms_stability.1d"])
def check_stability_1d(quick: bool) -> list[dict[str, Any]]:
    """Mean-square stability limit of constant-step SGD in 1-D (Gaussian design, batch b):
    ``2 b / ((b + 2) h)`` (derived by SymPy) against the exact engine's spectral radius and a
    Monte Carlo bisection (resampled growth rate of ``E eta_t^2``), settings h = 2 (b = 1) and
    h = 1 (b = 4); margins 1e-6 (exact) and 5 % (MC, quick)."""
    s = [
        ("1-D Gaussian, h = 2", np.array([2.0]), 1, {"h": 2.0, "b": 1}),
        ("1-D Gaussian, h = 1", np.array([1.0]), 4, {"h": 1.0, "b": 4}),
    ]
    return _stability_rows("sgd.ms_stability.1d", s, "gaussian", quick)


@register_check("stability.isotropic", ["sgd.ms_stability.isotropic"])
def check_stability_isotropic(quick: bool) -> list[dict[str, Any]]:
    """Isotropic Gaussian design ``H = h I_d``: ``2 b / ((b + d + 1) h)``; d = 5, h = 0.5,
    b in {1, 3}."""
    s = [("Gaussian, H = 0.5 I_5", np.full(5, 0.5), b, {"h": 0.5, "b": b, "d": 5}) for b in (1, 3)]
    return _stability_rows("sgd.ms_stability.isotropic", s, "gaussian", quick)


@register_check("stability.isotropic_rademacher", ["sgd.ms_stability.isotropic_rademacher"])
def check_stability_isotropic_rademacher(quick: bool) -> list[dict[str, Any]]:
    """Isotropic Rademacher design ``x_i = +-sqrt(h)``: ``2 b / ((b + d - 1) h)``; d = 5,
    h = 0.5, b in {2, 1}."""
    s = [
        ("Rademacher, H = 0.5 I_5", np.full(5, 0.5), b, {"h": 0.5, "b": b, "d": 5}) for b in (2, 1)
    ]
    return _stability_rows("sgd.ms_stability.isotropic_rademacher", s, "rademacher", quick)


@register_check("stability.general", ["sgd.ms_stability.general"])
def check_stability_general(quick: bool) -> list[dict[str, Any]]:
    """General spectrum (secular equation, Gaussian design): spectrum h_i = 1/i, d = 8,
    b in {1, 4}."""
    h = 1.0 / np.arange(1, 9)
    s = [("Gaussian, h_i = 1/i, d = 8", h, b, {"h": h, "b": b}) for b in (1, 4)]
    return _stability_rows("sgd.ms_stability.general", s, "gaussian", quick)


@register_check("stability.general_rademacher", ["sgd.ms_stability.general_rademacher"])
def check_stability_general_rademacher(quick: bool) -> list[dict[str, Any]]:
    """General spectrum, Rademacher design: h_i = 1/i, d = 8, b in {1, 4}."""
    h = 1.0 / np.arange(1, 9)
    s = [("Rademacher, h_i = 1/i, d = 8", h, b, {"h": h, "b": b}) for b in (1, 4)]
    return _stability_rows("sgd.ms_stability.general_rademacher", s, "rademacher", quick)


# ============================================================================ checks: stationary risk
def _stationary_rows(name: str, design: str, quick: bool) -> list[dict[str, Any]]:
    from convkit import simulate
    from convkit.algorithms.local import MBA
    from convkit.exact import expected_error
    from convkit.exact import stability_limit as exact_limit
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    d, sigma, frac = 4, 1.0, 0.5
    prob = LeastSquares(1.0 / np.arange(1, d + 1), noise=sigma, design=design)
    gamma = frac * exact_limit(prob, batch=1)
    theory = float(get(name).evaluate(h=prob.h, b=1, gamma=gamma, sigma=sigma))
    n = 400
    R = 4000 if quick else 20000
    algo = MBA(1, Constant(gamma), name="SGD")
    res = simulate(prob, algo, steps=n, replicates=R, seed=7, theta0=prob.theta_star, n_record=5)
    m, se = mean_se(final_values(res, "SGD", "hnorm2", "last"))
    ex = expected_error(prob, algo, steps=n, theta0=prob.theta_star, n_record=5)
    exact_n = float(ex.curve("SGD", "hnorm2", "last")["mean"].iloc[-1])
    setting = (
        f"{design} design, h_i = 1/i, d = {d}, sigma = 1, gamma = {frac} x limit "
        f"= {gamma:.4g}, start at theta*, last iterate after {n} steps"
    )
    z = (m - theory) / se
    rel = abs(exact_n / theory - 1)
    return [
        check_row(
            name,
            setting + f", Monte Carlo R = {R}",
            m,
            theory,
            *verdict_of(
                within(m, theory, se),
                f"the Monte Carlo mean is {z:.2f} SE from the derived value (within 3 SE)",
                f"the Monte Carlo mean is {z:.2f} SE from the derived value (more than 3 SE)",
            ),
            "|measured - theoretical| <= 3 SE",
            se=se,
            z=(m - theory) / se,
        ),
        check_row(
            name,
            setting + ", exact engine",
            exact_n,
            theory,
            *tolerance_verdict(
                rel <= 1e-6,
                "the relative difference of the exact engine to the derived value",
                rel,
                "<= 1e-6",
            ),
            "relative difference <= 1e-6 (the transient after 400 steps is < 1e-9)",
            rel_diff=abs(exact_n / theory - 1),
        ),
    ]


@register_check("stationary_risk", ["sgd.stationary_risk"])
def check_stationary_risk(quick: bool) -> list[dict[str, Any]]:
    """Stationary ``E||theta_t - theta*||_H^2`` of constant-step SGD (Gaussian design, derived
    closed form through the secular function) against Monte Carlo (last iterate after 400
    steps from theta*, within 3 SE) and the exact engine (1e-6)."""
    return _stationary_rows("sgd.stationary_risk", "gaussian", quick)


@register_check("stationary_risk_rademacher", ["sgd.stationary_risk_rademacher"])
def check_stationary_risk_rademacher(quick: bool) -> list[dict[str, Any]]:
    """Same as :func:`check_stationary_risk` with the Rademacher design."""
    return _stationary_rows("sgd.stationary_risk_rademacher", "rademacher", quick)
