"""String and table specs of communication schedules: the one table of names
(:data:`COMM_KINDS`, :data:`COMM_ALIASES`) and the one parser (:func:`parse_comm_spec`) that the
constructors (:func:`comm_from_spec`, used by ``LocalSGD`` and ``SCAFFOLD``), the sweep settings
and ``convkit simulate`` share, so that a spec such as ``"quadratic:4"`` means the same object
everywhere.  The schedules themselves live in :mod:`convkit.schedules`.
"""

from __future__ import annotations

import re
from typing import Any

from ._migration import removed_kind_hint
from .schedules import (
    At,
    CommSchedule,
    DriftClockRounds,
    Every,
    EveryStep,
    Final,
    Geometric,
    GeometricRounds,
    Polynomial,
    PowerRounds,
    Rounds,
)

__all__ = [
    "COMM_ALIASES",
    "COMM_KINDS",
    "COMM_SPEC_FORMS",
    "comm_from_spec",
    "comm_from_table",
    "parse_comm_spec",
    "resolve_comm_kind",
]


#: The one table of communication-schedule names: canonical kind (the ``kind`` of
#: :meth:`CommSchedule.describe`, the sweep's ``{kind = ...}``) -> (constructor, the parameters
#: that the short string form ``kind:a:b`` fills in order, with their types; ``None``: no
#: string form, tables and objects only).  :func:`comm_from_spec` (constructors, the command
#: line) and the sweep settings all read it.
COMM_KINDS: dict[str, tuple[Any, tuple[tuple[str, type], ...] | None]] = {
    "mba": (EveryStep, ()),
    "osa": (Final, ()),
    "every": (Every, (("H", int),)),
    "rounds": (Rounds, (("N", int),)),
    "at": (At, None),
    "geometric": (Geometric, (("first", float), ("ratio", float))),
    "polynomial": (Polynomial, (("power", float), ("scale", float))),
    "power_rounds": (PowerRounds, (("N", int), ("p", float))),
    "geometric_rounds": (GeometricRounds, (("N", int),)),
    "drift_clock_rounds": (DriftClockRounds, None),
}

#: The other names users may write, resolved through this table only: alias -> (canonical
#: kind, the parameters the alias fixes).  ``quadratic``/``quadratic_rounds`` is
#: ``power_rounds`` with ``p = 2`` (:func:`QuadraticRounds`), ``power`` the short name of
#: ``power_rounds``.
COMM_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "every_step": ("mba", {}),
    "everystep": ("mba", {}),
    "final": ("osa", {}),
    "one_shot": ("osa", {}),
    "power": ("power_rounds", {}),
    "quadratic": ("power_rounds", {"p": 2.0}),
    "quadratic_rounds": ("power_rounds", {"p": 2.0}),
}

#: The short forms :func:`comm_from_spec` accepts (quoted in its error messages).
COMM_SPEC_FORMS = (
    "'mba', 'osa', 'every:H', 'rounds:N', 'quadratic:N', 'power:N:p', 'geometric_rounds:N', "
    "'geometric:first:ratio', 'polynomial:power:scale' (H, N positive integers, p > 0; "
    "aliases: 'every_step', 'final', 'one_shot', 'quadratic_rounds:N', 'power_rounds:N:p')"
)

_INT_TEXT = re.compile(r"[+-]?\d+")
_REAL_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def resolve_comm_kind(name: Any) -> tuple[str, dict[str, Any]] | None:
    """``(canonical kind, parameters the name fixes)`` of a schedule name or alias (case,
    spaces and ``-`` for ``_`` ignored), or None for an unknown name."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().replace("-", "_")
    if key in COMM_KINDS:
        return key, {}
    if key in COMM_ALIASES:
        kind, fixed = COMM_ALIASES[key]
        return kind, dict(fixed)
    return None


def _comm_spec_error(spec: Any, detail: str) -> ValueError:
    """The one message of a malformed communication spec, whichever front end met it."""
    return ValueError(
        f"comm must be a CommSchedule or one of {COMM_SPEC_FORMS}, got {spec!r} ({detail})"
    )


def parse_comm_spec(spec: str) -> dict[str, Any]:
    """The table ``{"kind": canonical kind, parameter: value, ...}`` of a short string spec
    (``"quadratic:4"`` -> ``{"kind": "power_rounds", "p": 2.0, "N": 4}``): the one parser of
    communication specs, used by :func:`comm_from_spec` and by the sweep settings.

    The name resolves through :data:`COMM_KINDS` and :data:`COMM_ALIASES`; the numbers after
    ``:`` fill every one of the kind's string-form parameters in order (integers where the
    schedule takes integers).  A malformed spec raises ``ValueError`` naming ``comm``, the
    value and :data:`COMM_SPEC_FORMS`; values out of range are left to the schedule's own
    checks.
    """
    if not isinstance(spec, str):
        raise _comm_spec_error(spec, f"a {type(spec).__name__}, not a string spec")
    name, *args = [part.strip() for part in spec.split(":")]
    resolved = resolve_comm_kind(name)
    if resolved is None:
        raise _comm_spec_error(
            spec, f"unknown schedule {name.strip().lower()!r}{removed_kind_hint(name)}"
        )
    kind, fixed = resolved
    positional = COMM_KINDS[kind][1]
    if positional is None:
        raise _comm_spec_error(spec, f"{kind!r} has no string form; pass a table or an object")
    free = [(p, t) for p, t in positional if p not in fixed]
    if len(args) != len(free):
        form = ":".join([name.strip().lower(), *(p for p, _ in free)])
        raise _comm_spec_error(spec, f"write {form!r}")
    table: dict[str, Any] = {"kind": kind, **fixed}
    for (param, typ), text in zip(free, args, strict=True):
        pattern = _INT_TEXT if typ is int else _REAL_TEXT
        if not pattern.fullmatch(text):
            what = "an integer" if typ is int else "a number"
            raise _comm_spec_error(spec, f"{param} must be {what}, got {text!r}")
        table[param] = typ(text)
    return table


def comm_from_table(table: dict[str, Any]) -> CommSchedule:
    """Build a schedule from its table ``{"kind": ..., parameter: value}`` (the form of
    :meth:`CommSchedule.describe` and :func:`parse_comm_spec`; aliases resolved)."""
    resolved = resolve_comm_kind(table.get("kind"))
    if resolved is None:
        raise _comm_spec_error(
            table,
            f"unknown schedule kind {table.get('kind')!r}{removed_kind_hint(table.get('kind'))}",
        )
    kind, fixed = resolved
    params = {k: v for k, v in table.items() if k != "kind"}
    for key, value in fixed.items():
        if key in params and params[key] != value:
            raise _comm_spec_error(
                table, f"{table['kind']!r} fixes {key} = {value!r}; use kind {kind!r}"
            )
        params[key] = value
    return COMM_KINDS[kind][0](**params)


def comm_from_spec(spec: Any) -> CommSchedule:
    """Build a schedule from a short string spec (:func:`parse_comm_spec`: ``"mba"``,
    ``"osa"``, ``"every:H"``, ``"rounds:N"``, ``"quadratic:N"`` (:func:`QuadraticRounds`),
    ``"power:N:p"`` (:class:`PowerRounds`), ``"geometric_rounds:N"``, ``"geometric:first:ratio"``,
    ``"polynomial:power:scale"``, with the aliases of :data:`COMM_ALIASES`; case and spaces
    ignored), or a :class:`CommSchedule` (returned as it is).

    A malformed spec raises ``ValueError`` naming ``comm``, the value and the allowed forms;
    a well-formed one with a bad number (``"every:0"``) the schedule's own ``ValueError``.
    """
    if isinstance(spec, CommSchedule):
        return spec
    table = parse_comm_spec(spec)
    try:
        return comm_from_table(table)
    except ValueError as exc:  # a number out of range: the schedule's message, with the spec
        raise ValueError(f"comm {spec!r}: {exc}") from None
