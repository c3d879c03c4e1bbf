"""Derivations done by SymPy: the formulas of the library are *results* of these functions.

Each function performs a symbolic computation (expectations through Isserlis/Wick pairings or
exact Rademacher moments, geometric summations, determinants, limits) and returns the derived
expression, verified symbolically where a verification is possible. The numerical tests in
``tests/test_bounds_derivations.py`` check each one against NumPy (Monte Carlo, spectral radii,
brute-force sums).

Contents
--------
* :func:`isserlis_moment`, :func:`rademacher_moment`: moments of products of Gaussian /
  scaled-Rademacher coordinates of independent sample vectors.
* :func:`sgd_second_moment_step`: ``E[eta' eta'^T]`` for one SGD step with batch ``b`` on
  least squares, computed entry by entry for an explicit small dimension with symbolic
  ``H``, ``M``; :func:`derive_second_moment_recursion` identifies the general matrix form
  ``M' = M - g(HM+MH) + g^2[(1+1/b) HMH + tr(HM)H/b] + g^2 s^2 H/b`` (Gaussian) by solving
  for the coefficients of a basis of invariant matrix terms (not assumed: the solution is
  unique and the residual is identically zero). Rademacher design: an extra
  ``-(2/b) g^2 diag(h_i^2 M_ii)`` term.
* :func:`stability_structure`, :func:`derive_stability_limit_1d`,
  :func:`derive_stability_limit_isotropic`, :func:`derive_secular_equation`,
  :func:`sgd_stability_limit`, :func:`stability_matrix`: exact mean-square stability of
  constant-step SGD; :func:`derive_stationary_risk`, :func:`stationary_risk`: its stationary
  error below the limit.
* :func:`derive_additive_noise_invariance`: MBA / Local-SGD / OSA give the same expected error
  under additive noise (and different ones under multiplicative noise).
* :func:`derive_polyak_juditsky`: exact finite-T error of averaged constant-step SGD under
  additive noise and its asymptote ``sigma^2 d / T``.
* :func:`derive_w_eta_spectrum`, :func:`derive_w_eta_gap_condition`,
  :func:`derive_deepsqueeze_identities`, :func:`derive_choco_average_identity`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from convkit.bounds.core import symbol

__all__ = [
    "SecondMomentRecursion",
    "derive_additive_noise_invariance",
    "derive_choco_average_identity",
    "derive_deepsqueeze_identities",
    "derive_polyak_juditsky",
    "derive_second_moment_recursion",
    "derive_secular_equation",
    "derive_stability_limit_1d",
    "derive_stability_limit_isotropic",
    "derive_stationary_risk",
    "derive_w_eta_gap_condition",
    "derive_w_eta_spectrum",
    "expect_polynomial",
    "isserlis_moment",
    "rademacher_moment",
    "second_moment_step_numeric",
    "sgd_second_moment_step",
    "sgd_stability_limit",
    "stability_matrix",
    "stability_structure",
    "stationary_risk",
]

DESIGNS = ("gaussian", "rademacher")


# ============================================================================ moments
def _pairings(items: Sequence[Any]) -> list[list[tuple[Any, Any]]]:
    """All perfect matchings of ``items`` (Wick pairings)."""
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for i in range(len(rest)):
        pair = (first, rest[i])
        for p in _pairings(rest[:i] + rest[i + 1 :]):
            out.append([pair, *p])
    return out


def isserlis_moment(cov: Callable[[Any, Any], sp.Expr], factors: Sequence[Any]) -> sp.Expr:
    """``E[prod_a z_a]`` for a centred Gaussian vector, by Isserlis' theorem.

    ``factors`` are labels of coordinates (e.g. ``(sample, coordinate)``); ``cov(a, b)`` gives
    ``E[z_a z_b]``. Odd orders give 0; even orders sum over all pairings of the product of
    the pair covariances.
    """
    if len(factors) % 2:
        return sp.Integer(0)
    return sp.Add(*[sp.Mul(*[cov(a, b) for a, b in p]) for p in _pairings(list(factors))])


def rademacher_moment(h: Sequence[sp.Expr], factors: Sequence[tuple[int, int]]) -> sp.Expr:
    """``E[prod x_{s,i}]`` for independent samples ``x_s`` with independent coordinates
    ``x_{s,i} = +-sqrt(h_i)`` (equiprobable). ``factors`` are ``(sample, coordinate)`` labels:
    the moment is ``prod_i h_i^(m/2)`` if every label appears an even number ``m`` of times,
    else 0."""
    counts: dict[tuple[int, int], int] = {}
    for f in factors:
        counts[f] = counts.get(f, 0) + 1
    out = sp.Integer(1)
    for (_, i), m in counts.items():
        if m % 2:
            return sp.Integer(0)
        out *= h[i] ** (m // 2)
    return out


def expect_polynomial(
    expr: sp.Expr | sp.Poly, moments: Mapping[sp.Symbol, Callable[[int], sp.Expr]]
) -> sp.Expr:
    """Expectation of a polynomial in *independent* random symbols.

    ``moments[z](m)`` returns ``E[z^m]``. Every monomial is replaced by the product of the
    moments of its random factors (independence); other symbols are treated as constants.
    ``expr`` may be a :class:`sympy.Poly` (faster for large products: square it as a Poly).
    """
    rand = list(moments)
    if isinstance(expr, sp.Poly):
        poly = expr
    else:
        expr = sp.sympify(expr)
        others = sorted(expr.free_symbols - set(rand), key=lambda z: z.name)
        poly = sp.Poly(expr, *rand, *others)
    gens = poly.gens
    cache: dict[tuple[sp.Symbol, int], sp.Expr] = {}
    terms = []
    for powers, coeff in poly.terms():
        term = [coeff]
        for z, m in zip(gens, powers, strict=True):
            if not m:
                continue
            if z in moments:
                key = (z, m)
                if key not in cache:
                    cache[key] = sp.sympify(moments[z](m))
                term.append(cache[key])
            else:
                term.append(z**m)
        terms.append(sp.Mul(*term))
    return sp.expand(sp.Add(*terms))


def _sym_matrix(name: str, d: int) -> sp.Matrix:
    """A generic symmetric d x d matrix of real symbols ``name_ij`` (i <= j)."""
    entries = {}
    for i in range(d):
        for j in range(i, d):
            entries[(i, j)] = entries[(j, i)] = sp.Symbol(f"{name}_{i}{j}", real=True)
    return sp.Matrix(d, d, lambda i, j: entries[(i, j)])


# ============================================================================ recursion
def _fourth_moment_matrix(H: sp.Matrix, M: sp.Matrix, design: str, same_sample: bool) -> sp.Matrix:
    """``E[x x^T M y y^T]`` with ``y = x`` (same sample) or ``y`` an independent copy.

    Computed entry by entry from the joint moments of the coordinates of (x, y): entry
    ``(i, l)`` is ``sum_{j,k} M_jk E[x_i x_j y_k y_l]``.
    """
    d = H.shape[0]
    sy = 0 if same_sample else 1
    h_diag = [H[i, i] for i in range(d)]

    def cov(a: tuple[int, int], c: tuple[int, int]) -> sp.Expr:
        return H[a[1], c[1]] if a[0] == c[0] else sp.Integer(0)

    def moment(f: list[tuple[int, int]]) -> sp.Expr:
        if design == "gaussian":
            return isserlis_moment(cov, f)
        return rademacher_moment(h_diag, f)

    out = sp.zeros(d, d)
    for i in range(d):
        for lcol in range(i, d):
            acc = sp.Integer(0)
            for j in range(d):
                for k in range(d):
                    acc += M[j, k] * moment([(0, i), (0, j), (sy, k), (sy, lcol)])
            out[i, lcol] = out[lcol, i] = sp.expand(acc)
    return out


def sgd_second_moment_step(
    H: sp.Matrix,
    M: sp.Matrix,
    *,
    gamma: sp.Expr,
    b: sp.Expr,
    sigma: sp.Expr,
    design: str = "gaussian",
) -> sp.Matrix:
    """``E[eta' eta'^T]`` for one SGD step ``eta' = eta - gamma (1/b) sum_j x_j (x_j^T eta -
    sigma eps_j)`` given ``E[eta eta^T] = M``, ``x_j`` iid with covariance ``H``, ``eps_j``
    iid standard, all independent of ``eta``.

    With ``S = (1/b) sum_j x_j x_j^T`` and ``n = (sigma/b) sum_j eps_j x_j``:
    ``E[eta'eta'^T] = M - gamma(E[S]M + M E[S]) + gamma^2 E[S M S] + gamma^2 E[n n^T]``
    (terms linear in ``eps`` vanish). ``E[S M S] = (1/b^2)[b F_same + b(b-1) F_indep]``:
    among the ``b^2`` ordered pairs of samples ``b`` are equal and ``b(b-1)`` distinct.
    ``F_same``/``F_indep`` and the second moments are computed from the coordinate moments
    (Isserlis for the Gaussian design, exact Rademacher moments otherwise; the Rademacher
    design needs a diagonal ``H``). ``b`` may be a symbol.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {list(DESIGNS)}, got {design!r}")
    d = H.shape[0]
    if design == "rademacher" and any(H[i, j] != 0 for i in range(d) for j in range(d) if i != j):
        raise ValueError("the Rademacher design needs a diagonal H")
    h_diag = [H[i, i] for i in range(d)]

    def second(i: int, j: int) -> sp.Expr:  # E[x_i x_j] from the moment functions
        if design == "gaussian":
            return isserlis_moment(lambda a, c: H[a[1], c[1]], [(0, i), (0, j)])
        return rademacher_moment(h_diag, [(0, i), (0, j)])

    ES = sp.Matrix(d, d, second)
    f_same = _fourth_moment_matrix(H, M, design, same_sample=True)
    f_ind = _fourth_moment_matrix(H, M, design, same_sample=False)
    ESMS = (b * f_same + b * (b - 1) * f_ind) / b**2
    noise = sigma**2 * b * ES / b**2  # E[eps_j eps_k] = delta_jk
    out = M - gamma * (ES * M + M * ES) + gamma**2 * ESMS + gamma**2 * noise
    return out.applyfunc(sp.expand)


# Basis of matrix terms linear in M, degree <= 2 in H (and the noise terms): the derived
# recursion is expressed in it. Each entry: (name, function (H, M, I) -> Matrix).
def _basis() -> list[tuple[str, Callable[[sp.Matrix, sp.Matrix, sp.Matrix], sp.Matrix]]]:
    def tr(A: sp.Matrix) -> sp.Expr:
        return A.trace()

    def hadamard_diag(A: sp.Matrix) -> sp.Matrix:
        return sp.diag(*[A[i, i] for i in range(A.shape[0])])

    return [
        ("M", lambda H, M, eye: M),
        ("HM", lambda H, M, eye: H * M),
        ("MH", lambda H, M, eye: M * H),
        ("HMH", lambda H, M, eye: H * M * H),
        ("HHM", lambda H, M, eye: H * H * M),
        ("MHH", lambda H, M, eye: M * H * H),
        ("tr(HM)H", lambda H, M, eye: tr(H * M) * H),
        ("tr(HHM)I", lambda H, M, eye: tr(H * H * M) * eye),
        ("tr(H)HM", lambda H, M, eye: tr(H) * H * M),
        ("tr(H)MH", lambda H, M, eye: tr(H) * M * H),
        ("tr(H)^2M", lambda H, M, eye: tr(H) ** 2 * M),
        ("tr(HH)M", lambda H, M, eye: tr(H * H) * M),
        ("tr(M)HH", lambda H, M, eye: tr(M) * H * H),
        ("tr(M)tr(H)H", lambda H, M, eye: tr(M) * tr(H) * H),
        ("tr(H)tr(HM)I", lambda H, M, eye: tr(H) * tr(H * M) * eye),
        ("diag(HMH)", lambda H, M, eye: hadamard_diag(H * M * H)),
        ("H", lambda H, M, eye: H),
        ("tr(H)I", lambda H, M, eye: tr(H) * eye),
        ("I", lambda H, M, eye: eye),
    ]


@dataclass(frozen=True)
class SecondMomentRecursion:
    """The derived recursion ``M' = sum_k coefficients[k] * term_k(H, M)``.

    ``coefficients`` maps basis-term names (``"M"``, ``"HM"``, ``"HMH"``, ``"tr(HM)H"``,
    ``"diag(HMH)"`` = ``diag(h_i^2 M_ii)`` for diagonal H, ``"H"``, ...) to SymPy expressions
    in ``gamma``, ``b``, ``sigma``; zero coefficients are dropped. ``matrix_form`` is the
    same as a readable string; ``design`` is ``"gaussian"`` or ``"rademacher"``.
    """

    design: str
    coefficients: dict[str, sp.Expr]
    gamma: sp.Symbol
    b: sp.Symbol
    sigma: sp.Symbol

    @property
    def matrix_form(self) -> str:
        return "M' = " + " + ".join(f"({sp.sstr(c)})*{k}" for k, c in self.coefficients.items())

    def apply(self, H: sp.Matrix, M: sp.Matrix) -> sp.Matrix:
        """Apply the recursion to symbolic matrices."""
        eye = sp.eye(H.shape[0])
        funcs = dict(_basis())
        out = sp.zeros(*M.shape)
        for k, c in self.coefficients.items():
            out += c * funcs[k](H, M, eye)
        return out


@functools.lru_cache(maxsize=4)
def derive_second_moment_recursion(design: str = "gaussian", d: int = 3) -> SecondMomentRecursion:
    """Identify the general matrix form of the one-step second-moment recursion.

    The exact ``E[eta'eta'^T]`` is computed by :func:`sgd_second_moment_step` for a generic
    symmetric ``H`` (Gaussian; diagonal ``H`` for Rademacher) and ``M`` of size ``d`` (3 by
    default: in 2-D the Cayley-Hamilton relation makes the basis dependent) with symbolic
    ``gamma``, ``b``, ``sigma``. The coefficients of the basis terms of :func:`_basis` are
    unknowns; matching all polynomial coefficients in the entries of H and M gives a linear
    system, which must have a *unique* solution, and the residual must vanish identically.

    Result (Gaussian): ``M' = M - g(HM+MH) + g^2[(1+1/b) HMH + tr(HM) H/b] + g^2 s^2 H/b``;
    Rademacher: the same plus ``-(2/b) g^2 diag(h_i^2 M_ii)``.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {list(DESIGNS)}, got {design!r}")
    gamma, b, sigma = symbol("gamma"), symbol("b"), symbol("sigma")
    M = _sym_matrix("m", d)
    if design == "gaussian":
        H = _sym_matrix("h", d)
    else:
        H = sp.diag(*[sp.Symbol(f"h_{i}", positive=True) for i in range(d)])
    exact = sgd_second_moment_step(H, M, gamma=gamma, b=b, sigma=sigma, design=design)
    basis = _basis()
    cs = sp.symbols(f"c0:{len(basis)}")
    eye = sp.eye(d)
    ansatz = sp.zeros(d, d)
    for c, (_, f) in zip(cs, basis, strict=True):
        ansatz += c * f(H, M, eye)
    gens = sorted((H.free_symbols | M.free_symbols), key=lambda s: s.name)
    eqs = []
    for i in range(d):
        for j in range(i, d):
            eqs.extend(sp.Poly(ansatz[i, j] - exact[i, j], *gens).coeffs())
    eqs = list(dict.fromkeys(e for e in eqs if e != 0))
    A, rhs = sp.linear_eq_to_matrix(eqs, cs)
    if A.rank() != len(cs):
        raise RuntimeError("the basis is not identifiable in this dimension (rank deficient)")
    sol_set = sp.linsolve((A, rhs), cs)
    if len(sol_set) != 1:
        raise RuntimeError(f"the linear system for the coefficients is inconsistent: {sol_set}")
    sol = dict(zip(cs, next(iter(sol_set)), strict=True))
    coeffs = {}
    for c, (name, _) in zip(cs, basis, strict=True):
        v = sp.factor(sp.cancel(sol[c]))
        if v != 0:
            coeffs[name] = v
    rec = SecondMomentRecursion(design, coeffs, gamma, b, sigma)
    resid = (rec.apply(H, M) - exact).applyfunc(sp.expand)
    if resid != sp.zeros(d, d):
        raise RuntimeError("the identified recursion does not reproduce the exact moments")
    return rec


def second_moment_step_numeric(
    H: np.ndarray,
    M: np.ndarray,
    *,
    gamma: float,
    b: int,
    sigma: float,
    design: str = "gaussian",
) -> np.ndarray:
    """Apply the derived recursion (:func:`derive_second_moment_recursion`) numerically.

    ``H`` and ``M`` are NumPy arrays of shape ``(..., d, d)`` (batched). The coefficients are
    the SymPy-derived ones, lambdified; nothing is typed by hand.
    """
    H = np.asarray(H, dtype=float)
    M = np.asarray(M, dtype=float)
    d = H.shape[-1]
    eye = np.broadcast_to(np.eye(d), H.shape)

    def tr(A: np.ndarray) -> np.ndarray:
        return np.trace(A, axis1=-2, axis2=-1)[..., None, None]

    def diag_of(A: np.ndarray) -> np.ndarray:
        return np.diagonal(A, axis1=-2, axis2=-1)[..., None, :] * eye

    terms = {
        "M": lambda: M,
        "HM": lambda: H @ M,
        "MH": lambda: M @ H,
        "HMH": lambda: H @ M @ H,
        "HHM": lambda: H @ H @ M,
        "MHH": lambda: M @ H @ H,
        "tr(HM)H": lambda: tr(H @ M) * H,
        "tr(HHM)I": lambda: tr(H @ H @ M) * eye,
        "tr(H)HM": lambda: tr(H) * H @ M,
        "tr(H)MH": lambda: tr(H) * M @ H,
        "tr(H)^2M": lambda: tr(H) ** 2 * M,
        "tr(HH)M": lambda: tr(H @ H) * M,
        "tr(M)HH": lambda: tr(M) * H @ H,
        "tr(M)tr(H)H": lambda: tr(M) * tr(H) * H,
        "tr(H)tr(HM)I": lambda: tr(H) * tr(H @ M) * eye,
        "diag(HMH)": lambda: diag_of(H @ M @ H),
        "H": lambda: H,
        "tr(H)I": lambda: tr(H) * eye,
        "I": lambda: eye,
    }
    out = np.zeros(np.broadcast_shapes(H.shape, M.shape))
    for name, f in _recursion_coefficient_functions(design).items():
        out = out + float(f(gamma, b, sigma)) * terms[name]()
    return out


@functools.lru_cache(maxsize=4)
def _recursion_coefficient_functions(design: str) -> dict[str, Callable[..., Any]]:
    """The derived coefficients as fast numerical functions of (gamma, b, sigma)."""
    rec = derive_second_moment_recursion(design)
    return {
        name: sp.lambdify((rec.gamma, rec.b, rec.sigma), c, "math")
        for name, c in rec.coefficients.items()
    }


# ============================================================================ stability
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


# ============================================================================ local SGD
def _run_schedule(
    P: int,
    steps: int,
    comm: Sequence[int],
    grad: Callable[[int, int, sp.Expr], sp.Expr],
    gammas: Sequence[sp.Expr],
    eta0: sp.Expr,
) -> tuple[sp.Expr, sp.Expr]:
    """Symbolic Local-SGD: P workers, local step k on worker p: eta -= gamma_k grad(p, k, eta);
    average after the steps listed in ``comm``. Returns (final mean, Polyak average of the
    worker mean over steps 1..steps)."""
    etas = [eta0] * P
    running = sp.Integer(0)
    for k in range(1, steps + 1):
        etas = [sp.expand(e - gammas[k - 1] * grad(p, k, e)) for p, e in enumerate(etas)]
        if k in comm:
            m = sp.expand(sum(etas) / P)
            etas = [m] * P
        running += sum(etas) / P
    return sp.expand(sum(etas) / P), sp.expand(running / steps)


def derive_additive_noise_invariance(
    P: int = 2, steps: int = 4, multiplicative: bool = True
) -> dict[str, Any]:
    """Additive noise makes MBA, Local-SGD and OSA indistinguishable (derived here).

    Scalar quadratic, gradient ``h eta - xi_{p,k}`` with ``xi`` independent, centred, variance
    ``s^2``; arbitrary symbolic steps ``gamma_1..gamma_steps``; common start ``eta_0``.
    Schedules: MBA (average after every step), Local-SGD (every 2 steps), OSA (at the end).
    Computes the final worker-mean and its Polyak-Ruppert average symbolically for each
    schedule and their expected squares by :func:`expect_polynomial`.

    Returns a dict with ``"additive"`` (schedule name -> ``(E[mean^2], E[polyak^2])``) and
    ``"multiplicative"`` (schedule name -> ``E[mean^2]``, noise-free start ``eta_0``) entries, plus ``"additive_identical"`` (pathwise equality of
    the iterates, hence of every moment) and ``"multiplicative_identical"`` (the same check
    when the curvature is random, ``a_{p,k}`` with mean ``h`` and variance ``v``: expected
    False -- multiplicative noise is what separates the schedules). With
    ``multiplicative=False`` the (slower) multiplicative contrast is skipped.

    The result is cached; a fresh (shallow) copy is returned.
    """
    res = _derive_additive_noise_invariance(P, steps, multiplicative)
    return {k: dict(v) if isinstance(v, dict) else v for k, v in res.items()}


@functools.lru_cache(maxsize=4)
def _derive_additive_noise_invariance(
    P: int = 2, steps: int = 4, multiplicative: bool = True
) -> dict[str, Any]:
    """Cached implementation of :func:`derive_additive_noise_invariance`."""
    h, s, v, eta0 = symbol("h"), symbol("s"), symbol("v"), sp.Symbol("eta_0", real=True)
    gammas = [sp.Symbol(f"gamma_{k}", positive=True) for k in range(1, steps + 1)]
    xi = {
        (p, k): sp.Symbol(f"xi_{p}_{k}", real=True) for p in range(P) for k in range(1, steps + 1)
    }
    a = {(p, k): sp.Symbol(f"a_{p}_{k}", real=True) for p in range(P) for k in range(1, steps + 1)}
    schedules = {
        "MBA": list(range(1, steps + 1)),
        "Local-SGD": list(range(2, steps + 1, 2)),
        "OSA": [steps],
    }
    xi_mom = {
        z: (lambda m: sp.Integer(0) if m % 2 else s**m if m == 2 else sp.Symbol(f"mu{m}"))
        for z in xi.values()
    }
    # multiplicative: a = h + fluctuation with variance v (third/fourth moments symbolic)
    a_mom = {z: (lambda m: {1: h, 2: h**2 + v}.get(m, sp.Symbol(f"alpha{m}"))) for z in a.values()}

    out: dict[str, Any] = {"additive": {}, "multiplicative": {}}
    paths_add = {}
    for name, comm in schedules.items():
        last, avg = _run_schedule(P, steps, comm, lambda p, k, e: h * e - xi[(p, k)], gammas, eta0)
        paths_add[name] = (last, avg)
        gens_add = [*xi.values(), eta0, h, *gammas]
        out["additive"][name] = (
            expect_polynomial(sp.Poly(last, *gens_add) ** 2, xi_mom),
            expect_polynomial(sp.Poly(avg, *gens_add) ** 2, xi_mom),
        )
        if not multiplicative:
            continue
        last, _ = _run_schedule(P, steps, comm, lambda p, k, e: a[(p, k)] * e, gammas, eta0)
        gens_mul = [*a.values(), eta0, *gammas]
        out["multiplicative"][name] = expect_polynomial(sp.Poly(last, *gens_mul) ** 2, a_mom)
    ref = paths_add["MBA"]
    out["additive_identical"] = all(
        sp.expand(p[0] - ref[0]) == 0 and sp.expand(p[1] - ref[1]) == 0 for p in paths_add.values()
    )
    if multiplicative:
        mref = out["multiplicative"]["MBA"]
        out["multiplicative_identical"] = all(
            sp.expand(m - mref) == 0 for m in out["multiplicative"].values()
        )
    out["symbols"] = {"h": h, "s": s, "v": v, "eta_0": eta0, "gammas": gammas}
    return out


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


# ============================================================================ decentralized
def _generic_W(n: int = 3) -> tuple[sp.Matrix, list[sp.Symbol]]:
    """Generic symmetric doubly stochastic n x n matrix: free off-diagonal symbols, diagonal
    1 - row sum."""
    W = sp.zeros(n, n)
    syms = []
    for i in range(n):
        for j in range(i + 1, n):
            w = sp.Symbol(f"w_{i}{j}", positive=True)
            syms.append(w)
            W[i, j] = W[j, i] = w
    for i in range(n):
        W[i, i] = 1 - sum(W[i, j] for j in range(n) if j != i)
    return W, syms


def derive_w_eta_spectrum(n: int = 3) -> dict[str, Any]:
    """Eigenvalues of ``W_eta = (1 - eta) I + eta W`` are ``1 - eta (1 - lambda_i(W))``.

    Shown via characteristic polynomials for a generic symmetric doubly stochastic W:
    ``det(mu I - W_eta) = eta^n det(((mu - 1 + eta)/eta) I - W)`` identically in mu. Returns
    ``{"eigenvalue_map": 1 - eta (1 - lambda_i), "verified": bool, "lambda": <lambda_i>,
    "eta": <eta>}``.
    """
    W, _ = _generic_W(n)
    eta, mu, lam = symbol("eta"), sp.Symbol("mu"), sp.Symbol("lambda_i", real=True)
    W_eta = (1 - eta) * sp.eye(n) + eta * W
    lhs = (mu * sp.eye(n) - W_eta).det()
    rhs = eta**n * (((mu - 1 + eta) / eta) * sp.eye(n) - W).det()
    verified = sp.expand(lhs - rhs) == 0
    # Solve mu from the substitution mu = 1 - eta + eta * lambda (root of the char. poly map)
    mapping = sp.solve(sp.Eq((mu - 1 + eta) / eta, lam), mu)[0]
    return {"eigenvalue_map": sp.expand(mapping), "verified": verified, "lambda": lam, "eta": eta}


def derive_w_eta_gap_condition() -> dict[str, sp.Expr]:
    """Spectral gap of ``W_eta``: ``rho(eta) = max(|1 - eta(1 - l_2)|, |1 - eta(1 - l_n)|)``;
    the largest eta for which the second eigenvalue dominates solves
    ``eta (1 - l_n) - 1 = 1 - eta (1 - l_2)``: ``eta = 2 / (2 - l_2 - l_n)``; below it the
    gap is ``eta (1 - l_2)``. Returns ``{"eta_max": ..., "gap": ...}``."""
    eta = symbol("eta")
    l2, ln = sp.Symbol("lambda_2", real=True), sp.Symbol("lambda_n", real=True)
    sol = sp.solve(sp.Eq(eta * (1 - ln) - 1, 1 - eta * (1 - l2)), eta)
    if len(sol) != 1:
        raise RuntimeError(f"unexpected solutions {sol}")
    return {
        "eta_max": sp.simplify(sol[0]),
        "gap": eta * (1 - l2),
        "lambda_2": l2,
        "lambda_n": ln,
        "eta": eta,
    }


def derive_deepsqueeze_identities(n: int = 3) -> dict[str, bool]:
    """DeepSqueeze identities for arbitrary compressor outputs (derived here).

    Nodes hold scalars (one coordinate; the update is coordinate-wise linear). Symbols:
    models ``x_i``, gradients ``g_i``, memories ``delta_i``, compressor outputs ``v_i``
    (arbitrary symbols: any compressor). Update: ``h = x - gamma g``;
    ``delta' = h + delta - v``; ``x' = h + eta (W - I) v``. Checks:

    * ``"average"``: ``mean(x') = mean(x) - gamma mean(g)`` (needs ``1^T W = 1^T``);
    * ``"w_eta_form"``: ``x' = W_eta v + delta' - delta``;
    * ``"identity_compressor"``: with ``v = h + delta`` and ``delta = 0``:
      ``x' = W_eta (x - gamma g)`` (D-PSGD, step then gossip with W_eta).
    """
    W, _ = _generic_W(n)
    gamma, eta = symbol("gamma"), symbol("eta")
    x = sp.Matrix(sp.symbols(f"x0:{n}", real=True))
    g = sp.Matrix(sp.symbols(f"g0:{n}", real=True))
    dl = sp.Matrix(sp.symbols(f"delta0:{n}", real=True))
    v = sp.Matrix(sp.symbols(f"v0:{n}", real=True))
    I = sp.eye(n)
    h = x - gamma * g
    dl_new = h + dl - v
    x_new = h + eta * (W - I) * v
    W_eta = (1 - eta) * I + eta * W

    def mean(z: sp.Matrix) -> sp.Expr:
        return sum(z) / n

    avg = sp.expand(mean(x_new) - (mean(x) - gamma * mean(g))) == 0
    form = (x_new - (W_eta * v + dl_new - dl)).applyfunc(sp.expand) == sp.zeros(n, 1)
    x_id = (h + eta * (W - I) * h).applyfunc(sp.expand)  # v = h + 0
    ident = (x_id - W_eta * (x - gamma * g)).applyfunc(sp.expand) == sp.zeros(n, 1)
    return {"average": bool(avg), "w_eta_form": bool(form), "identity_compressor": bool(ident)}


def derive_choco_average_identity(n: int = 3) -> dict[str, bool]:
    """CHOCO-SGD keeps ``mean(x') = mean(x) - gamma mean(g)`` for arbitrary compressor outputs.

    ``h = x - gamma g``; ``x' = h + gamma_c (W - I) x_hat`` (i.e. ``sum_j W_ij (x_hat_j -
    x_hat_i)``, W doubly stochastic); ``x_hat' = x_hat + q`` with arbitrary ``q``. Also checks
    the contrast: DCD-PSGD (``x' = x + q`` with ``q`` the compressed difference) does *not*
    preserve the average for arbitrary ``q`` (``"dcd_average"`` is expected False).
    """
    W, _ = _generic_W(n)
    gamma, gc = symbol("gamma"), symbol("gamma_c")
    x = sp.Matrix(sp.symbols(f"x0:{n}", real=True))
    g = sp.Matrix(sp.symbols(f"g0:{n}", real=True))
    xh = sp.Matrix(sp.symbols(f"xhat0:{n}", real=True))
    q = sp.Matrix(sp.symbols(f"q0:{n}", real=True))
    x_new = x - gamma * g + gc * (W - sp.eye(n)) * xh
    ok = sp.expand(sum(x_new) / n - (sum(x) / n - gamma * sum(g) / n)) == 0
    x_dcd = x + q
    dcd = sp.expand(sum(x_dcd) / n - (sum(x) / n - gamma * sum(g) / n)) == 0
    return {"average": bool(ok), "dcd_average": bool(dcd)}
