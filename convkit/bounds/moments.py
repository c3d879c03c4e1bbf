"""Derivation machinery shared by the topic modules: moments and the second-moment recursion.

* :func:`isserlis_moment`, :func:`rademacher_moment`: moments of products of Gaussian /
  scaled-Rademacher coordinates of independent sample vectors; :func:`expect_polynomial`:
  the expectation of a polynomial in independent random symbols.
* :func:`sgd_second_moment_step`: ``E[eta' eta'^T]`` for one SGD step with batch ``b`` on
  least squares, computed entry by entry for an explicit small dimension with symbolic
  ``H``, ``M``; :func:`derive_second_moment_recursion` identifies the general matrix form
  ``M' = M - g(HM+MH) + g^2[(1+1/b) HMH + tr(HM)H/b] + g^2 s^2 H/b`` (Gaussian) by solving
  for the coefficients of a basis of invariant matrix terms (not assumed: the solution is
  unique and the residual is identically zero). Rademacher design: an extra
  ``-(2/b) g^2 diag(h_i^2 M_ii)`` term. :func:`second_moment_step_numeric` applies it to
  NumPy arrays (the exact engine's tests use it).
* :func:`generic_doubly_stochastic`: a generic symmetric doubly stochastic matrix (the
  gossip matrices of :mod:`convkit.bounds.mixing` and :mod:`convkit.bounds.decentralized`).

The numerical tests of these derivations are ``tests/test_bounds_derivations.py``.
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
    "DESIGNS",
    "SecondMomentRecursion",
    "derive_second_moment_recursion",
    "expect_polynomial",
    "generic_doubly_stochastic",
    "isserlis_moment",
    "rademacher_moment",
    "second_moment_step_numeric",
    "sgd_second_moment_step",
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


# ============================================================================ gossip matrices
def generic_doubly_stochastic(n: int = 3) -> tuple[sp.Matrix, list[sp.Symbol]]:
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
