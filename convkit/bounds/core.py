"""The result object of the theory engine: a SymPy expression with its symbols, conditions,
kind and provenance, plus numerical evaluation and derived quantities.

A :class:`TheoryResult` is immutable. It can be

* displayed (:meth:`TheoryResult.latex`, :meth:`TheoryResult.describe`),
* evaluated numerically, vectorized over NumPy arrays (:meth:`TheoryResult.evaluate`), with
  the values checked against their symbols' assumptions
  (:meth:`TheoryResult.check_assumptions`: ``h`` declared positive refuses ``h = -2``) and the
  conditions checked (:meth:`TheoryResult.check_conditions`); ``check=False`` skips both,
* transformed into derived results: a threshold (:meth:`TheoryResult.solve_for`), the leading
  exponent and leading term as a variable tends to infinity
  (:meth:`TheoryResult.leading_exponent`, :meth:`TheoryResult.leading_term`), a substitution
  (:meth:`TheoryResult.subs`).

Unknown constants (``C_2``, a generic ``c``) stay symbolic; :func:`fit_constants` measures them
from data by least squares in log space.

SymPy is imported here and only under ``convkit.bounds``, so ``import convkit`` stays fast.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import sympy as sp

__all__ = [
    "KINDS",
    "ConditionError",
    "ConstantFit",
    "TheoryResult",
    "fit_constants",
    "symbol",
]

KINDS = (
    "upper_bound",
    "asymptotic",
    "scaling_law",
    "threshold",
    "stability_limit",
    "identity",
    "model",
)

#: Assumptions of the shared symbols: one symbol per name across the whole library, so that
#: expressions from different results combine (``sp.Symbol('T', positive=True)`` is a different
#: symbol from ``sp.Symbol('T')``).
_SYMBOL_ASSUMPTIONS: dict[str, dict[str, bool]] = {
    # counts
    "T": {"positive": True, "integer": True},
    "T_all": {"positive": True, "integer": True},
    "P": {"positive": True, "integer": True},
    "N": {"positive": True, "integer": True},
    "H": {"positive": True},
    "n": {"positive": True, "integer": True},
    "d": {"positive": True, "integer": True},
    "b": {"positive": True, "integer": True},
    "k": {"positive": True, "integer": True},
    "s": {"positive": True, "integer": True},
    # reals
    "zeta": {"nonnegative": True, "real": True},
    "sigma": {"nonnegative": True, "real": True},
    "sigma_g": {"nonnegative": True, "real": True},
    # a momentum or other nonnegative weight: 0 (no momentum) is allowed
    "beta": {"nonnegative": True, "real": True},
}


def symbol(name: str, **assumptions: bool) -> sp.Symbol:
    """The library's symbol called ``name``.

    Without ``assumptions`` the library default is used: the assumptions listed in
    ``_SYMBOL_ASSUMPTIONS`` for known names, ``positive=True`` otherwise (every quantity in
    the library -- step sizes, eigenvalues, constants, horizons -- is positive unless stated).
    """
    if not assumptions:
        assumptions = _SYMBOL_ASSUMPTIONS.get(name, {"positive": True})
    return sp.Symbol(name, **assumptions)


class ConditionError(ValueError):
    """Raised when parameters violate the conditions under which a result holds, or the
    assumptions of its symbols (``h`` declared positive evaluated at ``h = -2``)."""


#: Assumptions of a symbol that :meth:`TheoryResult.evaluate` enforces on the values given,
#: in the order they are checked: name -> (test on a float array, text for the message).
#: Integrality (``integer=True``) is not enforced, so that a bound can be drawn over a
#: continuous grid (``T = np.logspace(2, 5)``).
_ASSUMPTION_TESTS: tuple[tuple[str, Callable[[np.ndarray], np.ndarray], str], ...] = (
    ("real", lambda v: ~np.isnan(v), "real (not NaN)"),
    ("positive", lambda v: v > 0, "positive (> 0)"),
    ("nonnegative", lambda v: v >= 0, "nonnegative (>= 0)"),
    ("negative", lambda v: v < 0, "negative (< 0)"),
    ("nonpositive", lambda v: v <= 0, "nonpositive (<= 0)"),
    ("nonzero", lambda v: v != 0, "nonzero"),
)


def _as_relational_list(conditions: Iterable[Any]) -> tuple[sp.Basic, ...]:
    out = []
    for c in conditions:
        c = sp.sympify(c)
        if c is sp.true:
            continue
        if c is sp.false:
            raise ValueError("a condition of a TheoryResult simplifies to False")
        if not isinstance(c, sp.logic.boolalg.Boolean):
            raise TypeError(f"conditions must be SymPy relationals, got {c!r}")
        out.append(c)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class TheoryResult:
    """One theoretical statement.

    Attributes
    ----------
    name:
        Stable identifier (``"local_sgd.rounds_needed"``), used by the registry and the CLI.
    expression:
        The SymPy expression (a scalar expression; for ``kind="identity"`` results the
        right-hand side of the identity).
    kind:
        One of :data:`KINDS`: ``"upper_bound"`` (quantity <= expression), ``"asymptotic"``
        (quantity ~ expression as ``variable`` -> oo), ``"scaling_law"`` (quantity is
        proportional to expression; unknown constant kept symbolic), ``"threshold"``,
        ``"stability_limit"`` (stable iff the parameter is below expression),
        ``"identity"`` (quantity == expression exactly), ``"model"`` (a heuristic model with
        stated assumptions, quantity proportional to expression, that is known to fail or is
        not identifiable where tested: its checks report ``measured``, never ``holds``).
    quantity:
        What the expression bounds / equals, as text (``"E||grad f(x_bar_T)||^2"``).
    provenance:
        ``"<paper>: <statement>"`` or ``"derived here: <module>.<function>"``
        (:func:`convkit.bounds.provenance.derived`).
    conditions:
        SymPy relationals under which the statement holds (``1/2 < alpha``, ``alpha < 1``).
    variable:
        The symbol that tends to infinity for ``"asymptotic"`` results (optional otherwise).
    constants:
        Symbols that are unknown constants (``c``, ``C_2``): they must be supplied to
        :meth:`evaluate` (e.g. after :func:`fit_constants`), never invented.
    notes:
        Free text (reading of the claim, caveats).
    numeric:
        Optional callable used by :meth:`evaluate` instead of lambdify, for results whose
        value is defined implicitly (the root of an equation); it receives the parameters as
        keyword arguments (NumPy arrays).
    numeric_params:
        Parameter names accepted by ``numeric`` when they are not symbols of the expression
        (for example a spectrum array ``h``).
    relation:
        Optional override of the displayed relation ``quantity <relation> expression``
        (one of ``<``, ``<=``, ``>``, ``>=``, ``=``, ``~``); by default it follows ``kind``.
    """

    name: str
    expression: sp.Expr
    kind: str
    quantity: str
    provenance: str
    conditions: tuple[sp.Basic, ...] = ()
    variable: sp.Symbol | None = None
    constants: tuple[sp.Symbol, ...] = ()
    notes: str = ""
    numeric: Callable[..., Any] | None = None
    numeric_params: tuple[str, ...] = ()
    relation: str | None = None

    def __post_init__(self) -> None:
        if self.relation is not None and self.relation not in _LATEX_REL:
            raise ValueError(f"relation must be one of {list(_LATEX_REL)}, got {self.relation!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}")
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        object.__setattr__(self, "expression", sp.sympify(self.expression))
        object.__setattr__(self, "conditions", _as_relational_list(self.conditions))
        object.__setattr__(self, "constants", tuple(self.constants))
        if not self.provenance:
            raise ValueError(f"result {self.name!r} needs a provenance")

    # ------------------------------------------------------------------ symbols
    @property
    def symbols(self) -> dict[str, sp.Symbol]:
        """All symbols of the expression and the conditions, by name."""
        syms = set(self.expression.free_symbols)
        for c in self.conditions:
            syms |= c.free_symbols
        return {s.name: s for s in sorted(syms, key=lambda s: s.name)}

    @property
    def parameters(self) -> tuple[str, ...]:
        """Names needed to evaluate the expression (sorted); for results with a ``numeric``
        evaluator, its ``numeric_params``."""
        if self.numeric is not None:
            return tuple(sorted(self.numeric_params))
        return tuple(sorted(s.name for s in self.expression.free_symbols))

    @property
    def condition_parameters(self) -> tuple[str, ...]:
        """Names needed to check the conditions (sorted)."""
        names: set[str] = set()
        for c in self.conditions:
            names |= {s.name for s in c.free_symbols}
        return tuple(sorted(names))

    # ------------------------------------------------------------------ display
    def latex(self) -> str:
        """LaTeX of the statement: ``quantity <relation> expression`` plus conditions."""
        rel = {
            "upper_bound": r"\le",
            "asymptotic": r"\sim",
            "scaling_law": r"\propto",
            "threshold": "=",
            "stability_limit": "<",
            "identity": "=",
            "model": r"\propto",
        }[self.kind]
        if self.relation is not None:
            rel = _LATEX_REL[self.relation]
        body = f"{_latex_quantity(self.quantity)} {rel} {sp.latex(self.expression)}"
        if self.kind == "asymptotic" and self.variable is not None:
            body += rf" \quad ({sp.latex(self.variable)} \to \infty)"
        if self.conditions:
            conds = ", ".join(sp.latex(c) for c in self.conditions)
            body += rf" \quad \text{{if }} {conds}"
        return body

    def describe(self) -> str:
        """A plain-text multi-line description (used by ``convkit bounds``)."""
        lines = [
            f"{self.name}  [{self.kind}]",
            f"  {self.quantity} {self.relation or _TEXT_REL[self.kind]} {sp.sstr(self.expression)}",
        ]
        if self.variable is not None:
            lines.append(f"  as {self.variable} -> oo")
        if self.conditions:
            lines.append("  conditions: " + ", ".join(sp.sstr(c) for c in self.conditions))
        if self.constants:
            lines.append("  unknown constants: " + ", ".join(s.name for s in self.constants))
        lines.append(f"  provenance: {self.provenance}")
        if self.notes:
            lines.append(f"  notes: {self.notes}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (strings only)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "quantity": self.quantity,
            "expression": sp.sstr(self.expression),
            "latex": self.latex(),
            "conditions": [sp.sstr(c) for c in self.conditions],
            "variable": None if self.variable is None else self.variable.name,
            "constants": [s.name for s in self.constants],
            "provenance": self.provenance,
            "notes": self.notes,
        }

    # ------------------------------------------------------------------ numerics
    def check_conditions(self, **params: Any) -> dict[str, np.ndarray]:
        """Evaluate every condition numerically.

        Returns ``{condition as text: boolean array}`` (broadcast over array parameters).
        Raises ``ValueError`` naming the missing parameters if a condition cannot be checked.
        """
        out: dict[str, np.ndarray] = {}
        for c in self.conditions:
            needed = sorted(s.name for s in c.free_symbols)
            missing = [n for n in needed if n not in params]
            if missing:
                raise ValueError(
                    f"{self.name}: condition {sp.sstr(c)} needs parameter(s) {missing}; "
                    f"pass them or call evaluate(..., check=False)"
                )
            f = sp.lambdify([symbol_by_name(c, n) for n in needed], c, modules="numpy")
            val = np.asarray(f(*[np.asarray(params[n], dtype=float) for n in needed]), dtype=bool)
            out[sp.sstr(c)] = val
        return out

    def check_assumptions(self, **params: Any) -> None:
        """Raise :class:`ConditionError` if a value violates its symbol's assumptions.

        Every parameter named like a symbol of the result (expression or conditions) is
        checked against that symbol's sign and reality assumptions (``positive``,
        ``nonnegative``, ``negative``, ``nonpositive``, ``nonzero``, ``real``: NaN and complex
        values are not real); the message names the symbol, the first offending value and
        the assumption. Integrality is not enforced (curves over continuous grids are
        allowed). Parameters that are not symbols (the arrays of a ``numeric`` evaluator) are
        not checked.
        """
        syms = self.symbols
        for name, value in params.items():
            sym = syms.get(name)
            if sym is None:
                continue
            arr = np.asarray(value)
            if np.iscomplexobj(arr) and np.any(np.imag(arr) != 0):
                if sym.is_real or sym.is_extended_real:
                    bad = arr[np.imag(arr) != 0].ravel()[0]
                    raise ConditionError(
                        f"{self.name}: {name} = {bad} violates the assumption of symbol "
                        f"{name!r}: real; the result does not apply there (check=False "
                        "evaluates anyway)"
                    )
                continue
            try:
                v = np.asarray(np.real(arr), dtype=float)
            except (TypeError, ValueError):
                continue  # not numeric: lambdify will tell
            for key, test, text in _ASSUMPTION_TESTS:
                if not sym.assumptions0.get(key):
                    continue
                ok = np.asarray(test(v), dtype=bool)
                if not np.all(ok):
                    bad = v[~np.broadcast_to(ok, v.shape)].ravel()[0] if v.ndim else v
                    where = "" if v.ndim == 0 else f" (an entry of an array of shape {v.shape})"
                    raise ConditionError(
                        f"{self.name}: {name} = {float(bad):g}{where} violates the assumption "
                        f"of symbol {name!r}: {text}; the result does not apply there "
                        "(check=False evaluates anyway)"
                    )

    def conditions_hold(self, **params: Any) -> np.ndarray:
        """Boolean array: all conditions hold (``True`` when there are none)."""
        res = self.check_conditions(**params)
        if not res:
            return np.asarray(True)
        return np.logical_and.reduce(np.broadcast_arrays(*res.values()))

    def evaluate(self, *, check: bool = True, **params: Any) -> np.ndarray | float:
        """Numerical value of the expression, vectorized over NumPy arrays.

        Parameters are passed by symbol name (``evaluate(T=np.logspace(2, 5), n=8, C_2=3.0)``).
        Every symbol of the expression must be given (unknown constants included: fit them
        with :func:`fit_constants`); unknown names raise. With ``check=True`` (default) the
        values are checked against the assumptions of their symbols
        (:meth:`check_assumptions`: ``h`` declared positive refuses ``h = -2``) and the
        conditions are checked too, which needs their parameters; a violation of either
        raises :class:`ConditionError` (a ``ValueError``) naming the symbol or condition, the
        offending value and the assumption. ``check=False`` skips both checks.
        """
        allowed = set(self.parameters) | set(self.condition_parameters)
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise ValueError(
                f"{self.name}: unknown parameter(s) {unknown}; allowed: {sorted(allowed)}"
            )
        missing = [p for p in self.parameters if p not in params]
        if missing:
            hint = ""
            miss_const = [m for m in missing if m in {s.name for s in self.constants}]
            if miss_const:
                hint = f" ({miss_const} are unknown constants: fit them with fit_constants)"
            raise ValueError(f"{self.name}: missing parameter(s) {missing}{hint}")
        if check:
            self.check_assumptions(**params)
        if check and self.conditions:
            for text, ok in self.check_conditions(**params).items():
                if not np.all(ok):
                    raise ConditionError(
                        f"{self.name}: condition {text} is violated for the given parameters "
                        f"({_summarize(params, text)}); the result does not apply there"
                    )
        if self.numeric is not None:
            return self.numeric(**{p: params[p] for p in self.parameters})
        syms = [symbol_by_name(self.expression, p) for p in self.parameters]
        f = _lambdify(tuple(syms), self.expression)
        args = [np.asarray(params[p], dtype=float) for p in self.parameters]
        value = f(*args)
        shape = np.broadcast_shapes(*(np.shape(a) for a in args)) if args else ()
        value = np.broadcast_to(np.asarray(value, dtype=float), shape)
        return float(value) if value.ndim == 0 else np.array(value)

    # ------------------------------------------------------------------ derived
    def subs(self, name: str | None = None, **values: Any) -> TheoryResult:
        """A copy with some symbols replaced by numbers or expressions (conditions too)."""
        mapping = {symbol_by_name_any(self, k): sp.sympify(v) for k, v in values.items()}
        conds = []
        for c in self.conditions:
            c2 = c.subs(mapping)
            if c2 is sp.false:
                raise ConditionError(f"{self.name}: substitution {values} violates {c}")
            if c2 is not sp.true:
                conds.append(c2)
        return dataclasses.replace(
            self,
            name=name or self.name,
            expression=self.expression.subs(mapping),
            conditions=tuple(conds),
            constants=tuple(s for s in self.constants if s not in mapping),
            numeric=None,
        )

    def solve_for(
        self,
        sym: str | sp.Symbol,
        equals: Any = 0,
        *,
        name: str | None = None,
        quantity: str | None = None,
    ) -> TheoryResult:
        """Solve ``expression == equals`` for ``sym`` and return it as a ``"threshold"`` result.

        ``equals`` may be a number or a SymPy expression in the same symbols. Only solutions
        consistent with the symbol's assumptions are kept (SymPy ``solve`` honours
        ``positive=True``); exactly one must remain, otherwise ``ValueError``.
        """
        s = sym if isinstance(sym, sp.Symbol) else symbol_by_name_any(self, sym)
        sols = sp.solve(sp.Eq(self.expression, sp.sympify(equals)), s, dict=False)
        sols = [sp.simplify(x) for x in sols]
        sols = [x for x in sols if x.is_real is not False and x.is_positive is not False]
        sols = [x for x in sols if _verifies(self.expression - sp.sympify(equals), s, x)]
        if len(sols) != 1:
            raise ValueError(f"{self.name}: expected one admissible solution for {s}, got {sols}")
        return TheoryResult(
            name=name or f"{self.name}.solve_{s.name}",
            expression=sols[0],
            kind="threshold",
            quantity=quantity or f"{s.name} solving {self.quantity} = {sp.sstr(equals)}",
            provenance=f"derived here: TheoryResult.solve_for from {self.name!r}",
            conditions=tuple(c for c in self.conditions if s not in c.free_symbols),
            constants=tuple(c for c in self.constants if c != s),
        )

    def leading_exponent(self, var: str | sp.Symbol) -> sp.Expr:
        """Exponent ``p`` of the leading term ``~ c var^p`` as ``var -> oo``.

        Computed from the series at infinity (``var = 1/x``, :meth:`sympy.Expr.leadterm`);
        if that fails (e.g. exponential terms ``q**T``), from the limit of the elasticity
        ``var f'(var) / f(var)``. Example: ``1/sqrt(n T) + C_2/T`` gives ``-1/2`` in ``T``.
        """
        v = var if isinstance(var, sp.Symbol) else symbol_by_name_any(self, var)
        return _leading(self.expression, v)[1]

    def leading_term(self, var: str | sp.Symbol) -> sp.Expr:
        """The leading term ``c var^p`` of the expression as ``var -> oo``."""
        v = var if isinstance(var, sp.Symbol) else symbol_by_name_any(self, var)
        coeff, p = _leading(self.expression, v)
        return coeff * v**p


_LATEX_REL = {"<": "<", "<=": r"\le", ">": ">", ">=": r"\ge", "=": "=", "~": r"\sim"}

_TEXT_REL = {
    "upper_bound": "<=",
    "asymptotic": "~",
    "scaling_law": "propto",
    "threshold": "=",
    "stability_limit": "<",
    "identity": "=",
    "model": "propto (model)",
}


def _latex_quantity(q: str) -> str:
    return r"\text{" + q.replace("_", r"\_").replace("^", r"\^{}") + "}"


def _verifies(residual: sp.Expr, s: sp.Symbol, sol: sp.Expr, trials: int = 3) -> bool:
    """Check a candidate root at random positive values of the other symbols (drops the
    spurious roots that SymPy's squaring of radicals can introduce)."""
    rng = np.random.default_rng(12345)
    others = sorted((residual.free_symbols | sol.free_symbols) - {s}, key=lambda x: x.name)
    for _ in range(trials):
        vals = {o: sp.Float(rng.uniform(0.5, 3.0)) for o in others}
        root = complex(sp.N(sol.subs(vals)))
        if abs(root.imag) > 1e-9 * max(1.0, abs(root.real)) or root.real <= 0:
            return False
        r = complex(sp.N(residual.subs(vals).subs(s, root.real)))
        scale = 1.0 + max(
            abs(complex(sp.N(t.subs(vals).subs(s, root.real)))) for t in sp.Add.make_args(residual)
        )
        if abs(r) > 1e-8 * scale:
            return False
    return True


def symbol_by_name(expr: sp.Basic, name: str) -> sp.Symbol:
    for s in expr.free_symbols:
        if s.name == name:
            return s
    return sp.Symbol(name)


def symbol_by_name_any(result: TheoryResult, name: str) -> sp.Symbol:
    syms = result.symbols
    if name not in syms:
        raise ValueError(f"{result.name}: no symbol {name!r}; symbols: {sorted(syms)}")
    return syms[name]


def _summarize(params: Mapping[str, Any], text: str) -> str:
    parts = []
    for k, v in params.items():
        if k in text:
            a = np.asarray(v)
            parts.append(f"{k}={a.item():g}" if a.size == 1 else f"{k}=array{a.shape}")
    return ", ".join(parts)


_LAMBDIFY_CACHE: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _lambdify(syms: tuple[sp.Symbol, ...], expr: sp.Expr) -> Callable[..., Any]:
    key = (syms, expr)
    f = _LAMBDIFY_CACHE.get(key)
    if f is None:
        f = sp.lambdify(syms, expr, modules="numpy")
        _LAMBDIFY_CACHE[key] = f
    return f


def _leading(expr: sp.Expr, v: sp.Symbol) -> tuple[sp.Expr, sp.Expr]:
    x = sp.Symbol("_x_leading", positive=True)
    e = sp.sympify(expr).subs(v, 1 / x)
    try:
        coeff, p = e.leadterm(x)
        if not coeff.has(x) and not p.has(x):
            return sp.simplify(coeff), sp.nsimplify(-p)
    except Exception:  # noqa: BLE001 - SymPy raises many kinds here; fall back to the limit
        pass
    el = sp.limit(sp.simplify(v * sp.diff(expr, v) / expr), v, sp.oo)
    if el.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or el.free_symbols & {v}:
        raise ValueError(f"cannot determine the leading exponent of {expr} in {v}")
    coeff = sp.limit(sp.simplify(expr / v**el), v, sp.oo)
    return sp.simplify(coeff), sp.simplify(el)


# ---------------------------------------------------------------------------- fitting
@dataclasses.dataclass(frozen=True)
class ConstantFit:
    """Result of :func:`fit_constants`.

    ``values``: fitted constants; ``log_se``: standard errors of their logarithms (from the
    Gauss-Newton covariance, residual-scaled when no ``se`` is given); ``rms_log_residual``:
    root mean square of the weighted log residuals; ``n_points``.
    """

    values: dict[str, float]
    log_se: dict[str, float]
    rms_log_residual: float
    n_points: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def fit_constants(
    result: TheoryResult,
    data: Any,
    y: str | Sequence[float] | np.ndarray = "mean",
    constants: Sequence[str] | None = None,
    *,
    se: str | Sequence[float] | np.ndarray | None = None,
    fixed: Mapping[str, Any] | None = None,
    initial: Mapping[str, float] | None = None,
) -> ConstantFit:
    """Fit the unknown positive constants of ``result`` to measurements, in log space.

    Minimizes ``sum_i w_i (log y_i - log f(x_i; c))^2`` over ``log c`` (so the constants stay
    positive), with ``w_i = (y_i / se_i)^2`` when standard errors are given (delta method:
    ``var(log y) ~ (se/y)^2``) and ``w_i = 1`` otherwise.

    Parameters
    ----------
    result:
        The result whose expression models ``y``.
    data:
        A mapping or pandas DataFrame with one column per remaining parameter (e.g. ``T``,
        ``n``) and optionally the ``y`` / ``se`` columns.
    y, se:
        Column names in ``data`` or arrays.
    constants:
        Names of the symbols to fit (default: ``result.constants``).
    fixed:
        Extra parameter values (scalars or arrays) not present in ``data``.
    initial:
        Starting values (default 1 for each constant).
    """
    from scipy.optimize import least_squares

    names = list(constants) if constants is not None else [s.name for s in result.constants]
    if not names:
        raise ValueError(f"{result.name}: no constants to fit")
    cols = _columns(data)
    yv = np.asarray(cols[y] if isinstance(y, str) else y, dtype=float)
    sev = None if se is None else np.asarray(cols[se] if isinstance(se, str) else se, float)
    if np.any(yv <= 0):
        raise ValueError("y must be positive to fit in log space")
    params: dict[str, Any] = dict(fixed or {})
    for p in result.parameters:
        if p in names or p in params:
            continue
        if p not in cols:
            raise ValueError(f"{result.name}: parameter {p!r} missing from data and fixed")
        params[p] = np.asarray(cols[p], dtype=float)
    w = np.ones_like(yv) if sev is None else np.abs(yv / np.where(sev > 0, sev, np.inf))
    if sev is not None and np.any(sev <= 0):
        # exact points (se = 0): give them a large but finite weight
        w = np.where(sev > 0, w, 1e6)
    x0 = np.log([float((initial or {}).get(n, 1.0)) for n in names])

    def resid(logc: np.ndarray) -> np.ndarray:
        vals = dict(params)
        vals.update({n: math.exp(c) for n, c in zip(names, logc, strict=True)})
        pred = np.asarray(result.evaluate(check=False, **vals), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = w * (np.log(yv) - np.log(np.broadcast_to(pred, yv.shape)))
        return np.where(np.isfinite(r), r, 1e6)

    sol = least_squares(resid, x0, method="lm" if yv.size > len(names) else "trf")
    r = sol.fun
    dof = max(yv.size - len(names), 1)
    jtj = sol.jac.T @ sol.jac
    try:
        cov = np.linalg.inv(jtj)
    except np.linalg.LinAlgError:
        cov = np.full((len(names), len(names)), np.inf)
    if sev is None:
        cov = cov * float(r @ r) / dof
    values = {n: float(math.exp(c)) for n, c in zip(names, sol.x, strict=True)}
    log_se = {n: float(math.sqrt(max(cov[i, i], 0.0))) for i, n in enumerate(names)}
    return ConstantFit(values, log_se, float(math.sqrt(np.mean(r**2))), int(yv.size))


def _columns(data: Any) -> Mapping[str, Any]:
    if data is None:
        return {}
    if hasattr(data, "columns"):
        return {c: data[c].to_numpy() for c in data.columns}
    return dict(data)
