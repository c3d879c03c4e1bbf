"""Pointers from removed or moved public names to their successors: the one table of them.

A name removed from convkit's public API (a renamed class, a schedule kind) stays here with
its successor and what changed, so that ``convkit.AdaptiveRounds`` raises an
``AttributeError`` that says what to use instead, not a bare "no attribute". The modules that
exported a name raise :func:`missing_attribute` from their ``__getattr__``; the schedule-spec
parser appends :func:`removed_kind_hint` to its unknown-kind message.

Layer 0 (the standard library only).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REMOVED_KINDS", "REMOVED_NAMES", "Removed", "missing_attribute", "removed_kind_hint"]


@dataclass(frozen=True)
class Removed:
    """A removed public name: its ``successor``, the ``modules`` that exported it and what
    changed (``change``, one sentence for the user who still calls the old name)."""

    successor: str
    modules: tuple[str, ...]
    change: str


#: removed attribute name -> pointer (every module that exported it raises it)
REMOVED_NAMES: dict[str, Removed] = {
    "AdaptiveRounds": Removed(
        successor="DriftClockRounds",
        modules=("convkit", "convkit.schedules"),
        change="the rule fixes its N rounds before the run by a step-size/drift clock from mu, "
        "L, noise and dist0 = ||theta0 - theta*|| and reads no iterate, so it is not adaptive; "
        "same arguments (N, step, mu, L, dist0, noise) and the same positions; its schedule "
        "kind is drift_clock_rounds (was adaptive_rounds) and its Local-SGD label drift_clock",
    ),
    "main": Removed(
        successor="convkit.cli.sweep.main",
        modules=("convkit.sweep",),
        change="the command line belongs to the front ends (convkit/cli/), and the sweep "
        "package no longer imports them; same arguments, and `convkit sweep` and "
        "`python -m convkit.sweep` run it as before",
    ),
    "stability_limit": Removed(
        successor="stability_bracket",
        modules=("convkit.checks",),
        change="it brackets the largest stable step of any criterion is_stable(gamma) by "
        "bisection and returns a StabilityBracket (same arguments); "
        "convkit.exact.stability_limit, the mean-square limit of least squares as one "
        "number, keeps its name",
    ),
}

#: removed schedule kind (table or string spec) -> (successor kind, what changed)
REMOVED_KINDS: dict[str, tuple[str, str]] = {
    "adaptive_rounds": (
        "drift_clock_rounds",
        "the class AdaptiveRounds is DriftClockRounds, with the same parameters",
    ),
}


def missing_attribute(module: str, name: str) -> AttributeError:
    """The ``AttributeError`` of ``module.name``: with the pointer of :data:`REMOVED_NAMES`
    when ``name`` was removed from ``module``, Python's usual message otherwise."""
    removed = REMOVED_NAMES.get(name)
    if removed is not None and module in removed.modules and "." in removed.successor:
        text = (
            f"module {module!r} has no attribute {name!r}: {name} moved to "
            f"{removed.successor}: {removed.change}"
        )
    elif removed is not None and module in removed.modules:
        text = (
            f"module {module!r} has no attribute {name!r}: {name} was renamed "
            f"{removed.successor} ({module}.{removed.successor}): {removed.change}"
        )
    else:
        text = f"module {module!r} has no attribute {name!r}"
    return AttributeError(text, name=name, obj=None)


def removed_kind_hint(kind: object) -> str:
    """``"; <kind> was renamed <successor> (...)"`` for a removed schedule kind (any spelling
    of its name: case, spaces and ``-`` for ``_``), ``""`` otherwise."""
    if not isinstance(kind, str):
        return ""
    key = kind.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in REMOVED_KINDS:
        return ""
    successor, change = REMOVED_KINDS[key]
    return f"; {key} was renamed {successor} ({change})"
