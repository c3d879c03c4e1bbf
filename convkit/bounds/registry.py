"""The one registry of theory: results (:data:`LIBRARY`) and their checks (:data:`CHECKS`).

The topic modules of :mod:`convkit.bounds` fill it when they are imported (importing the
package imports them all):

* ``@result("sgd.ms_stability.1d")`` on a zero-argument factory returning the
  :class:`~convkit.bounds.core.TheoryResult` of that name adds it to :data:`LIBRARY`;
  :func:`get` builds a result on first use (derived results run their SymPy derivation) and
  caches it, refusing a result of another name or an undefined expression (``gamma / 0`` is
  SymPy's ``zoo``); :func:`names` and :func:`all_results` list the library in registration
  order.
* ``@register_check("stability.1d", covers=["sgd.ms_stability.1d"])`` on a function
  ``check_xxx(quick: bool) -> list[dict]`` adds it to :data:`CHECKS` (and what it covers to
  :data:`COVERS`); :func:`run_checks` runs a selection (:func:`select`) and turns a crash into
  rows with verdict ``crashed``.

**Validated before anything runs.** :func:`run_checks` first calls :func:`validate_checks`:
every result a selected check covers must be registered and must build (a valid ``kind``, its
own name, a defined expression), so that a broken claim is refused before any simulation,
even when its check never calls :func:`get`; :func:`validate_results` builds a list of results
(``convkit check --module`` passes every result the module registered).

**Registering a name again.** A name registered again by the *same definition* (the same
module and qualified name: a notebook cell run a second time, a module reloaded) replaces the
earlier entry in place (its position in the order is kept, and :func:`get` forgets the result
it had built). A name registered by a different definition (another module, or another
function of the same module) raises ``ValueError`` naming both, so that two modules cannot
claim one name by accident; ``replace=True`` replaces on purpose.

Every row of a check carries a ``verdict`` from :data:`convkit.verdicts.VERDICTS` and a
one-sentence ``reason`` (checked by :func:`convkit.verdicts.validate_row`, the one validator
of rows; a row that breaks the rules makes its check a crash). Rows are built with
:func:`convkit.verdicts.check_row`.
"""

from __future__ import annotations

import fnmatch
import functools
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from convkit.bounds.core import TheoryResult
from convkit.verdicts import CRASHED, ROW_KEYS, validate_row

__all__ = [
    "CHECKS",
    "COVERS",
    "LIBRARY",
    "ROW_KEYS",
    "CheckFn",
    "all_results",
    "covered_results",
    "get",
    "names",
    "register_check",
    "result",
    "run_checks",
    "select",
    "validate_checks",
    "validate_results",
]

Factory = Callable[[], TheoryResult]
CheckFn = Callable[[bool], list[dict[str, Any]]]

#: result name -> zero-argument factory of the :class:`TheoryResult` (registration order)
LIBRARY: dict[str, Factory] = {}
#: check name -> function(quick) -> rows
CHECKS: dict[str, CheckFn] = {}
#: check name -> library results it covers
COVERS: dict[str, tuple[str, ...]] = {}


def _definition(func: Callable[..., Any]) -> str:
    """``module.qualname`` of a registered function: what tells a re-run of the same
    definition (a notebook cell, a reloaded module) from another definition."""
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _may_register(
    kind: str, name: str, old: Callable[..., Any] | None, new: Callable[..., Any], replace: bool
) -> None:
    """Raise ``ValueError`` if ``name`` is taken by another definition than ``new`` (module
    docstring: the same definition, or ``replace=True``, replaces)."""
    if old is None or replace or _definition(old) == _definition(new):
        return
    raise ValueError(
        f"{kind} {name!r} registered twice: by {_definition(old)} and by {_definition(new)} "
        f"(re-running the same definition replaces it; pass replace=True to replace it from "
        f"another one)"
    )


# ============================================================================ results
def result(name: str, replace: bool = False) -> Callable[[Factory], Factory]:
    """Decorator: register the zero-argument factory ``func`` as the result ``name`` of
    :data:`LIBRARY` (the factory must build a result of that name; :func:`get` checks).

    ``name`` taken by another definition raises ``ValueError`` unless ``replace``; the same
    definition registered again (a notebook cell run twice) replaces it (module docstring)."""

    def deco(func: Factory) -> Factory:
        _may_register("result", name, LIBRARY.get(name), func, replace)
        if name in LIBRARY:
            get.cache_clear()  # the cached result may be the replaced factory's
        LIBRARY[name] = func
        return func

    return deco


def names() -> list[str]:
    """The stable names of all results, in library order."""
    return list(LIBRARY)


@functools.cache
def get(name: str) -> TheoryResult:
    """The result called ``name`` (built on first use, then cached)."""
    try:
        factory = LIBRARY[name]
    except KeyError:
        raise ValueError(f"unknown result {name!r}; known: {names()}") from None
    res = factory()
    if not isinstance(res, TheoryResult):
        raise TypeError(f"library entry {name!r} built a {type(res).__name__}, not a TheoryResult")
    if res.name != name:
        raise RuntimeError(f"library entry {name!r} built a result named {res.name!r}")
    import sympy as sp

    undefined = [a for a in (sp.zoo, sp.nan) if res.expression.has(a)]
    if undefined:
        raise ValueError(
            f"result {name!r}: the expression {sp.sstr(res.expression)} contains "
            f"{', '.join(str(a) for a in undefined)} (undefined: a division by zero such as "
            f"gamma / 0 gives SymPy's zoo); state a finite expression"
        )
    return res


def _result_problems(result_names: Iterable[str]) -> list[str]:
    """One line per result of ``result_names`` that is not registered or does not build."""
    problems: list[str] = []
    for name in dict.fromkeys(result_names):
        if name not in LIBRARY:
            problems.append(f"result {name!r} is not registered")
            continue
        try:
            get(name)
        except Exception as exc:  # noqa: BLE001 - any failure of a factory is reported
            problems.append(
                f"result {name!r} ({_definition(LIBRARY[name])}) does not build: "
                f"{type(exc).__name__}: {exc}"
            )
    return problems


def _raise_problems(problems: Sequence[str]) -> None:
    """One ``ValueError`` listing ``problems`` (none: nothing raised)."""
    if problems:
        raise ValueError("invalid claims, nothing was run:\n  " + "\n  ".join(problems))


def validate_results(result_names: Iterable[str]) -> None:
    """Build every result of ``result_names`` (:func:`get`) and raise one ``ValueError``
    listing each that is not registered or does not build (an invalid ``kind``, a factory
    returning a result of another name, an undefined expression), with its definition and the
    error. Nothing is simulated."""
    _raise_problems(_result_problems(result_names))


def validate_checks(check_names: Iterable[str]) -> None:
    """Every result that the checks ``check_names`` cover is registered and builds
    (:func:`validate_results`); raises one ``ValueError`` listing every problem, before
    anything runs."""
    problems: list[str] = []
    covered: list[str] = []
    for check in check_names:
        for name in COVERS[check]:
            if name in LIBRARY:
                covered.append(name)
            else:
                problems.append(
                    f"check {check!r} covers {name!r}, which is not a registered result "
                    f"(register it with @result({name!r}) or correct covers)"
                )
    _raise_problems(problems + _result_problems(covered))


def all_results() -> list[TheoryResult]:
    """Every result of the library (derived ones trigger their SymPy derivation once)."""
    return [get(n) for n in LIBRARY]


# ============================================================================ checks
def register_check(
    name: str, covers: Sequence[str], replace: bool = False
) -> Callable[[CheckFn], CheckFn]:
    """Decorator: add ``func`` to :data:`CHECKS` under ``name``, covering the library results
    ``covers`` (a non-empty list of names; each row of the check has one of them as its
    ``result``).

    ``name`` taken by another definition raises ``ValueError`` unless ``replace``; the same
    definition registered again (a notebook cell run twice) replaces it (module docstring)."""
    if isinstance(covers, str) or not covers:
        raise ValueError(
            f"register_check({name!r}): covers must be a non-empty list of result names, "
            f"got {covers!r}"
        )

    def deco(func: CheckFn) -> CheckFn:
        _may_register("check", name, CHECKS.get(name), func, replace)
        CHECKS[name] = func
        COVERS[name] = tuple(covers)
        return func

    return deco


def covered_results() -> set[str]:
    """Library names covered by at least one registered check."""
    return {r for c in COVERS.values() for r in c}


def select(only: Iterable[str] | None = None) -> list[str]:
    """Check names selected by ``only``: each pattern matches a check name or a covered result
    name, exactly, as a dotted prefix (``"compression"``) or as a shell glob (``"sgd.*"``).
    ``None`` selects everything. An unknown pattern raises ``ValueError`` listing the names."""
    if only is None:
        return list(CHECKS)
    out: list[str] = []
    for pat in only:
        hits = [
            c for c in CHECKS if any(_matches(pat, n) for n in (c, *COVERS[c])) and c not in out
        ]
        if not hits and not any(c in out for c in CHECKS if _matches(pat, c)):
            raise ValueError(
                f"--only {pat!r} matches no check; checks: {list(CHECKS)}; "
                f"results: {sorted(covered_results())}"
            )
        out += hits
    return out


def _matches(pat: str, name: str) -> bool:
    return name == pat or name.startswith(pat + ".") or fnmatch.fnmatchcase(name, pat)


def run_checks(
    quick: bool = True,
    only: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the selected checks; every row gets the key ``check`` (its check name) and
    ``seconds`` (the check's run time). The selection is validated first
    (:func:`validate_checks`: ``ValueError`` before any check runs). A check that raises
    (``SystemExit`` included), returns something other than a list of rows, or returns a
    malformed row gives one row per covered result with verdict ``crashed``, the error as
    ``reason`` and the traceback in ``details``."""
    rows: list[dict[str, Any]] = []
    selected = select(only)
    validate_checks(selected)
    for name in selected:
        t0 = time.perf_counter()
        if progress:
            progress(f"running {name} ...")
        try:
            out = _rows_of(name, CHECKS[name](quick))
            for r in out:
                _validate_row(name, r)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a crash is a row, keep going
            tb = traceback.format_exc()
            out = [
                {
                    "result": res,
                    "setting": f"check {name}",
                    "measured": "-",
                    "theoretical": "-",
                    "verdict": CRASHED,
                    "reason": f"{type(exc).__name__}: {exc}"[:200],
                    "details": {"traceback": tb},
                }
                for res in COVERS[name]
            ]
        dt = time.perf_counter() - t0
        for r in out:
            r["check"] = name
            r["seconds"] = round(dt, 3)
        if progress:
            progress(f"  {name}: {dt:.1f} s")
        rows += out
    return rows


def _rows_of(check: str, out: Any) -> list[dict[str, Any]]:
    """The rows a check returned, as a list; anything but a list (or tuple) of rows raises
    ``TypeError`` saying what was returned."""
    if isinstance(out, dict):
        raise TypeError(
            f"check {check}: returned one row (a dict), not a list of rows: return [row]"
        )
    if not isinstance(out, (list, tuple)):
        raise TypeError(
            f"check {check}: returned {type(out).__name__}, not a list of rows (dicts built by "
            f"check_row)"
        )
    return list(out)


def _validate_row(check: str, row: dict[str, Any]) -> None:
    """A row of ``check`` is valid (:func:`convkit.verdicts.validate_row`) and its result is
    one the check covers."""
    validate_row(row, where=f"check {check}", covers=COVERS[check])
