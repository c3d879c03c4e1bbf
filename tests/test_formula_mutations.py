"""Mutation test of the registry: every numeric atom of every registered expression, and every
factor and term, perturbed in turn, must be detected by the pin comparison of its result
(``tests/formula_sources.py``: the source statement typed independently, compared at random
points in every variable).

Mutations of one expression (each applied alone):

* every number (Integer, Rational, Float; exponents, constant factors, the -1 of a
  difference, the limits of a sum) ``a`` -> ``a + 1`` and -> ``a / 2`` (the latter skipped
  for 0, where it is the same number);
* every factor of a product that is not a number: dropped and squared;
* every term of a sum: dropped;
* the whole expression times each of its variables ``v`` and times ``log(v)`` (a missing
  factor n or P, a missing log factor).

The numbers of every registered condition (``1/2 < alpha``, ``k <= d``, the DeepSqueeze step
condition, ...) are perturbed the same way; such a mutant is killed when the conditions hold
somewhere the source's do not, or the reverse, at points on both sides of every boundary.

A mutant is *killed* when its values differ from the source statement beyond the pin's
tolerance at one of the sample points (or it cannot be evaluated there). The test prints
killed / total and asserts that every mutant is killed: a survivor means the pin is too weak
(strengthen the pin: more points, special points; never weaken the mutation).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import sympy as sp

from convkit.bounds import get, names
from tests.formula_sources import (
    CONDITIONS,
    N_CONDITION_POINTS,
    N_POINTS,
    SOURCES,
    condition_points,
    conditions_value,
    mismatches,
    points,
    source_value,
)


def _replace_arg(node: sp.Basic, i: int, new: sp.Basic) -> sp.Basic:
    args = list(node.args)
    args[i] = new
    return node.func(*args)


def mutants(expr: sp.Basic) -> Iterator[tuple[str, sp.Basic]]:
    """``(description, mutated expression)`` for every mutation of ``expr`` (module
    docstring). Indexed objects (``h[i]``) are atoms here."""
    if isinstance(expr, sp.Number):
        a = expr
        yield f"{a} -> {a + 1}", a + 1
        if a != 0:
            yield f"{a} -> {a / 2}", a / 2
        return
    if isinstance(expr, sp.Indexed | sp.Symbol | sp.IndexedBase | sp.Idx) or not expr.args:
        return
    if isinstance(expr, sp.Mul):
        for i, f in enumerate(expr.args):
            if not isinstance(f, sp.Number):
                yield f"drop factor {f}", _replace_arg(expr, i, sp.Integer(1))
                yield f"square factor {f}", _replace_arg(expr, i, f**2)
    if isinstance(expr, sp.Add):
        for i, t in enumerate(expr.args):
            yield f"drop term {t}", _replace_arg(expr, i, sp.Integer(0))
    for i, arg in enumerate(expr.args):
        for text, new in mutants(arg):
            try:
                yield text, _replace_arg(expr, i, new)
            except (TypeError, ValueError):  # a rebuild SymPy refuses (not a valid object)
                continue


def all_mutants(expr: sp.Basic) -> Iterator[tuple[str, sp.Basic]]:
    """:func:`mutants` of ``expr`` and the whole expression times each variable and its log
    (not the summation index nor the label of an indexed spectrum)."""
    yield from mutants(expr)
    skip = {b.label for b in expr.atoms(sp.IndexedBase)} | {
        lim[0] for s in expr.atoms(sp.Sum) for lim in s.limits
    }
    for v in sorted(expr.free_symbols - skip, key=lambda s: s.name):
        if isinstance(v, sp.Symbol):
            yield f"times {v}", expr * v
            yield f"times log({v})", expr * sp.log(v)


def _run_all() -> dict[str, tuple[int, list[str]]]:
    """result name -> (number of mutants, descriptions of the survivors)."""
    out = {}
    for name in names():
        res = get(name)
        pts = points(name, N_POINTS)
        src = [source_value(name, p) for p in pts]
        seen: set[sp.Basic] = set()
        total, survivors = 0, []
        for text, m in all_mutants(res.expression):
            if m == res.expression or m in seen:
                continue  # the same expression again (an equivalent rebuild), counted once
            seen.add(m)
            total += 1
            if not mismatches(name, m, pts, src):
                survivors.append(f"{text}: {sp.sstr(m)}")
        out[name] = (total, survivors)
    return out


def _run_conditions() -> dict[str, tuple[int, list[str]]]:
    """result name -> (number of mutants of its conditions, survivors): every number of every
    condition perturbed as in :func:`mutants`, detected when the conditions' truth differs
    from the source's at one of the points (both sides of every boundary)."""
    out = {}
    for name in CONDITIONS:
        conds = get(name).conditions
        pts = condition_points(name, N_CONDITION_POINTS)
        want = [bool(CONDITIONS[name][1](**p)) for p in pts]
        total, survivors = 0, []
        for j, c in enumerate(conds):
            seen: set[sp.Basic] = set()
            for text, m in mutants(c):
                if m == c or m in seen:
                    continue
                seen.add(m)
                total += 1
                new = (*conds[:j], m, *conds[j + 1 :])
                got = [conditions_value(new, p) for p in pts]
                if got == want:
                    survivors.append(f"{sp.sstr(c)}: {text}")
        out[name] = (total, survivors)
    return out


@pytest.fixture(scope="module")
def mutation_results() -> dict[str, tuple[int, list[str]]]:
    t0 = time.perf_counter()
    out = _run_all()
    total = sum(t for t, _ in out.values())
    killed = total - sum(len(s) for _, s in out.values())
    print(
        f"\nregistry mutation test: killed {killed} / {total} mutants of {len(out)} results "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    return out


def test_every_mutant_of_every_registered_condition_is_killed():
    out = _run_conditions()
    total = sum(t for t, _ in out.values())
    survivors = {n: s for n, (_, s) in out.items() if s}
    killed = total - sum(len(s) for s in survivors.values())
    print(
        f"\nregistry mutation test, conditions: killed {killed} / {total} mutants of "
        f"{len(out)} results"
    )
    assert killed == total, f"killed {killed} / {total}; survivors: {survivors}"


def test_every_result_has_a_source_statement():
    assert set(SOURCES) == set(names())


def test_every_mutant_of_every_registered_expression_is_killed(mutation_results):
    survivors = {n: s for n, (_, s) in mutation_results.items() if s}
    total = sum(t for t, _ in mutation_results.values())
    killed = total - sum(len(s) for s in survivors.values())
    assert killed == total, f"killed {killed} / {total}; survivors: {survivors}"


def test_every_expression_with_a_number_is_mutated(mutation_results):
    """The mutation generator reaches every registered expression that has a number, a
    factor or a term (an expression without any, a bare symbol, has none to perturb)."""
    for name, (total, _) in mutation_results.items():
        expr = get(name).expression
        if expr.atoms(sp.Number) or isinstance(expr, sp.Mul | sp.Add):
            assert total > 0, name


def test_the_generator_perturbs_numbers_factors_and_terms():
    x, y = sp.symbols("x y", positive=True)
    texts = [t for t, _ in all_mutants(2 * x**3 + y)]
    assert "2 -> 3" in texts and "2 -> 1" in texts  # constant factor
    assert "3 -> 4" in texts and "3 -> 3/2" in texts  # exponent
    assert "drop factor x**3" in texts and "square factor x**3" in texts
    assert "drop term y" in texts
    assert "times x" in texts and "times log(y)" in texts
