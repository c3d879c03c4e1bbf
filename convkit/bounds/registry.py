"""The one registry of theory: results (:data:`LIBRARY`) and their checks (:data:`CHECKS`).

The topic modules of :mod:`convkit.bounds` fill it when they are imported (importing the
package imports them all):

* ``@result("sgd.ms_stability.1d")`` on a zero-argument factory returning the
  :class:`~convkit.bounds.core.TheoryResult` of that name adds it to :data:`LIBRARY`;
  :func:`get` builds a result on first use (derived results run their SymPy derivation) and
  caches it; :func:`names` and :func:`all_results` list the library in registration order.
* ``@register_check("stability.1d", covers=["sgd.ms_stability.1d"])`` on a function
  ``check_xxx(quick: bool) -> list[dict]`` adds it to :data:`CHECKS` (and what it covers to
  :data:`COVERS`); :func:`run_checks` runs a selection (:func:`select`) and turns a crash into
  rows with verdict ``crashed``.

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
    if res.name != name:
        raise RuntimeError(f"library entry {name!r} built a result named {res.name!r}")
    return res


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
    ``seconds`` (the check's run time). A check that raises (or returns a malformed row) gives
    one row per covered result with verdict ``crashed``, the error as ``reason`` and the
    traceback in ``details``."""
    rows: list[dict[str, Any]] = []
    for name in select(only):
        t0 = time.perf_counter()
        if progress:
            progress(f"running {name} ...")
        try:
            out = CHECKS[name](quick)
            for r in out:
                _validate_row(name, r)
        except Exception as exc:  # noqa: BLE001 - report the crash as a row, keep going
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


def _validate_row(check: str, row: dict[str, Any]) -> None:
    """A row of ``check`` is valid (:func:`convkit.verdicts.validate_row`) and its result is
    one the check covers."""
    validate_row(row, where=f"check {check}", covers=COVERS[check])
