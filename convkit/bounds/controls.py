"""Negative controls of the library checks: a deliberately false variant of each registered
claim, substituted in the registry, on which the same check code must say ``violated``.

A check that reads its prediction from the registry (:func:`convkit.bounds.registry.get`:
``evaluate``, ``leading_exponent``) can be fed a false claim without touching its code:
:func:`substituted` puts another :class:`~convkit.bounds.core.TheoryResult` under a name of
:data:`~convkit.bounds.registry.LIBRARY` for the duration of a ``with`` block (and clears the
cache of :func:`~convkit.bounds.registry.get`), then restores both. The falsifications are
built by :func:`scaled` (a wrong constant), :func:`times_power` (a wrong exponent) and
:func:`replaced` (another expression), and declared in one table, :data:`CONTROLS`: check
name -> its controls, each naming the rows it must make say ``violated``.

The rule (the library half of issue 30, item 2, the same as
:func:`convkit.verdicts.apply_controls` for the analyses): a ``holds`` row of a check stands
only if some control makes the row of the same claim (same ``result`` and ``setting``) say
``violated``; ``tests/test_check_controls.py`` runs every control and asserts it. Rows that no
control can make fail report ``measured`` in the checks themselves (an engine cross-check, a
fitted constant, an existence claim).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import sympy as sp

from convkit.bounds import registry
from convkit.bounds.core import TheoryResult

__all__ = [
    "CONTROLS",
    "Control",
    "replaced",
    "run_control",
    "scaled",
    "substituted",
    "times_power",
]

Falsify = Callable[[TheoryResult], TheoryResult]


@contextlib.contextmanager
def substituted(
    name: str | Mapping[str, TheoryResult], new: TheoryResult | None = None
) -> Iterator[None]:
    """Within the block, ``registry.get(name)`` returns ``new`` (``name`` may instead be a
    mapping name -> result, substituted together). The factories of
    :data:`~convkit.bounds.registry.LIBRARY` and the cache of ``get`` are restored on exit,
    also after an exception."""
    subs = dict(name) if isinstance(name, Mapping) else {name: new}
    for key, res in subs.items():
        if key not in registry.LIBRARY:
            raise ValueError(f"unknown result {key!r}")
        if not isinstance(res, TheoryResult) or res.name != key:
            raise ValueError(f"substitute for {key!r} must be a TheoryResult named {key!r}")
    saved = {key: registry.LIBRARY[key] for key in subs}
    try:
        for key, res in subs.items():
            registry.LIBRARY[key] = lambda res=res: res
        registry.get.cache_clear()
        yield
    finally:
        registry.LIBRARY.update(saved)
        registry.get.cache_clear()


def _with_expression(res: TheoryResult, expr: sp.Expr, how: str) -> TheoryResult:
    return dataclasses.replace(res, expression=expr, notes=f"NEGATIVE CONTROL ({how})")


def scaled(factor: float) -> Falsify:
    """A wrong constant: the expression (or the numeric evaluator) times ``factor``."""

    def falsify(res: TheoryResult) -> TheoryResult:
        how = f"times {factor:g}"
        out = _with_expression(res, res.expression * sp.nsimplify(factor), how)
        if res.numeric is not None:
            num = res.numeric
            out = dataclasses.replace(out, numeric=lambda **kw: factor * np.asarray(num(**kw)))
        return out

    return falsify


def times_power(var: str, delta: float) -> Falsify:
    """A wrong exponent: the expression times ``var ** delta`` (its exponent in ``var`` moved
    by ``delta``)."""

    def falsify(res: TheoryResult) -> TheoryResult:
        syms = {s.name: s for s in res.expression.free_symbols if isinstance(s, sp.Symbol)}
        v = syms[var] if var in syms else sp.Symbol(var, positive=True)
        return _with_expression(
            res, res.expression * v ** sp.nsimplify(delta), f"times {var}^{delta:g}"
        )

    return falsify


def replaced(build: Callable[[TheoryResult], sp.Expr], how: str) -> Falsify:
    """Another expression, ``build(result)`` (a wrong sign, a wrong form)."""
    return lambda res: _with_expression(res, build(res), how)


@dataclasses.dataclass(frozen=True)
class Control:
    """One negative control: ``falsify`` applied to the registered ``result`` (or to each of
    ``results``), with ``describe`` saying what was falsified; ``targets``: substrings of the
    settings of the rows (of that result) that must say ``violated`` (``("",)``: every row of
    the result)."""

    describe: str
    result: str
    falsify: Falsify
    targets: tuple[str, ...] = ("",)
    also: tuple[str, ...] = ()  # further results falsified the same way in the same run


def run_control(check: str, control: Control, quick: bool = True) -> list[dict[str, Any]]:
    """The rows of ``check`` with ``control``'s false claim substituted in the registry."""
    subs = {n: control.falsify(registry.get(n)) for n in (control.result, *control.also)}
    with substituted(subs):
        return registry.CHECKS[check](quick)


def _sym(res: TheoryResult, name: str) -> sp.Symbol:
    return next(s for s in res.expression.free_symbols if getattr(s, "name", None) == name)


#: check name -> its negative controls (every registered check has at least one)
CONTROLS: dict[str, tuple[Control, ...]] = {
    **{
        f"stability.{k}": (
            Control("limit x 3/2 (wrong constant)", f"sgd.ms_stability.{k}", scaled(1.5)),
        )
        for k in ("1d", "isotropic", "isotropic_rademacher", "general", "general_rademacher")
    },
    "stationary_risk": (
        Control("risk x 1.2 (wrong constant)", "sgd.stationary_risk", scaled(1.2)),
    ),
    "stationary_risk_rademacher": (
        Control("risk x 1.2 (wrong constant)", "sgd.stationary_risk_rademacher", scaled(1.2)),
    ),
    "polyak_juditsky": (
        Control(
            "sigma^2 d / T x 2 (wrong constant)",
            "averaged_sgd.polyak_juditsky",
            scaled(2),
            targets=("exact engine",),
        ),
        Control(
            "sigma^2 d / sqrt(T) (wrong exponent)",
            "averaged_sgd.polyak_juditsky",
            times_power("T", 0.5),
        ),
    ),
    "polyak_juditsky.exact_1d": (
        Control(
            "exact error x 1.2 (wrong constant)", "averaged_sgd.exact_additive_1d", scaled(1.2)
        ),
    ),
    "local_sgd.additive_invariance": (
        Control(
            "schedules differ by 1e-3 (wrong constant)",
            "local_sgd.additive_noise_invariance",
            replaced(lambda r: sp.Rational(1, 1000), "1e-3"),
            targets=("common random numbers", "exact engine: max"),
        ),
    ),
    "local_sgd.osa_mba_ratio": (
        Control(
            "limit 1.01 (wrong constant)",
            "local_sgd.osa_mba_ratio",
            replaced(lambda r: sp.Rational(101, 100), "1.01"),
            targets=("exact engine,",),
        ),
    ),
    "local_sgd.threshold": (
        Control(
            "N* ~ T^(3/2) (wrong exponent)",
            "local_sgd.rounds_needed",
            times_power("T_all", 1),
            targets=("start at distance 0:",),
        ),
        Control(
            "reduction ~ T^(-1/2) (wrong exponent)",
            "local_sgd.communication_reduction",
            times_power("T_all", -1),
            targets=("start at distance 0:",),
        ),
    ),
    "local_sgd_large_steps.exponents": (
        Control(
            "excess ~ T^(2 - 2 alpha) (wrong exponent)",
            "local_sgd_large_steps.osa_mba_excess",
            times_power("T_all", 1),
            targets=("in T",),
        ),
    ),
    "dpsgd.rate": (Control("rate ~ T^-1 (wrong exponent)", "dpsgd.rate", times_power("T", -0.5)),),
    "deepsqueeze.rate": (
        Control(
            "rate ~ T^-1 (wrong exponent)",
            "deepsqueeze.rate",
            replaced(lambda r: r.expression / _sym(r, "T") ** sp.Rational(1, 2), "times T^-1/2"),
            targets=("slope in T",),
        ),
        Control("step limit x 100 (wrong constant)", "deepsqueeze.step_limit", scaled(100)),
    ),
    "choco.rate": (
        Control("rate ~ T^-2 (wrong exponent)", "choco.rate_strongly_convex", times_power("T", -1)),
    ),
    "choco.rate_weighted": (
        Control("rate ~ T^-2 (wrong exponent)", "choco.rate_strongly_convex", times_power("T", -1)),
    ),
    "deepsqueeze.average_dynamics": (
        Control(
            "mean(x) - 2 gamma mean(g) (wrong constant)",
            "deepsqueeze.average_dynamics",
            replaced(lambda r: r.expression - _sym(r, "gamma") * _sym(r, "mean_g_t"), "2 gamma"),
        ),
    ),
    "choco.average_dynamics": (
        Control(
            "mean(x) + gamma mean(g) (wrong sign)",
            "choco.average_dynamics",
            replaced(
                lambda r: _sym(r, "mean_x_t") + _sym(r, "gamma") * _sym(r, "mean_g_t"), "sign"
            ),
        ),
    ),
    "w_eta.eigenvalues": (
        Control(
            "1 - eta (1 - lambda)^2 (wrong exponent)",
            "w_eta.eigenvalues",
            replaced(lambda r: 1 - _sym(r, "eta") * (1 - _sym(r, "lambda_i")) ** 2, "squared gap"),
        ),
    ),
    "w_eta.gap_condition": (
        Control(
            "eta_max x 1.1 (wrong constant)",
            "w_eta.gap_condition",
            scaled(1.1),
            targets=("W_ij = 1/2",),
        ),
        Control("eta_max x 1/2 (wrong constant)", "w_eta.gap_condition", scaled(0.5)),
    ),
    "compression.top_k": (
        Control("bound x 0.9 (wrong constant)", "compression.top_k", scaled(0.9)),
    ),
    "compression.rand_k": (
        Control(
            "identities x 1.05 (wrong constant)",
            "compression.rand_k",
            scaled(1.05),
            also=("compression.rand_k_scaled",),
        ),
    ),
    "compression.qsgd": (
        Control("variance factor x 1e-3 (wrong constant)", "compression.qsgd", scaled(1e-3)),
    ),
    "compression.scaled_sign": (
        Control("error x 1.01 (wrong constant)", "compression.scaled_sign", scaled(1.01)),
    ),
    "ef_sgd.memory": (
        Control(
            "c = 4e-3 instead of 4 (wrong constant)",
            "ef_sgd.memory",
            scaled(1e-3),
            targets=("k/d = 0.5,", "k/d = 0.25,", "k/d = 0.125,", "k/d = 0.0625,"),
        ),
        Control(
            "omega^+2 instead of omega^-2 (wrong exponent)",
            "ef_sgd.memory",
            times_power("omega", 4),
            targets=("k/d = 0.03125,", "k/d = 0.015625,"),
        ),
        Control(
            "gamma^3 (wrong exponent)",
            "ef_sgd.memory",
            times_power("gamma", 1),
            targets=("slope in gamma",),
        ),
    ),
    "woodworth.local_vs_minibatch": (
        Control(
            "local SGD at least twice better (wrong constant)",
            "woodworth.local_beats_minibatch_quadratic",
            replaced(lambda r: sp.Rational(1, 2), "1/2"),
        ),
    ),
    "spiridonoff.rounds_in_T": (
        Control(
            "N* ~ P sqrt(T) (wrong exponent)",
            "spiridonoff.rounds_independent_of_T",
            times_power("T", 0.5),
        ),
    ),
    "koloskova.topology": (
        Control(
            "err(graph)/err(complete) -> 1.05 (wrong constant)",
            "koloskova.topology_free_leading_term",
            replaced(lambda r: r.expression + sp.Rational(1, 20), "+ 1/20"),
        ),
        Control(
            "ratio - 1 ~ C_g/T^2 (wrong exponent)",
            "koloskova.topology_free_leading_term",
            replaced(lambda r: 1 + _sym(r, "C_g") / _sym(r, "T") ** 2, "C_g/T^2"),
        ),
    ),
    "pu.transient": (
        Control(
            "K_T ~ n/gap^(1/2) (wrong exponent)",
            "pu.transient_time",
            times_power("gap", 1.5),
        ),
    ),
}
