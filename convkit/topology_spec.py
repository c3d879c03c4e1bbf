"""Topology string specs: ``"ring:16"``, ``"torus:4:4"``, ``"erdos_renyi:16:0.3"``.

The one parser of topology specs (:func:`parse_topology_spec`), used by the decentralized
algorithms' constructors (through :func:`topology_from_spec`) and by the sweep settings.  A spec
is a constructor name of :func:`get_topology` followed by its leading
parameters, in order, separated by ``:`` (:data:`TOPOLOGY_SPEC_ARGS`); the other parameters
(``weights``, ``lazy``, ...) keep their defaults, a table or an object sets them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from .topology import (
    Topology,
    complete,
    edgeless,
    erdos_renyi,
    exponential,
    hypercube,
    one_peer_exponential,
    path,
    random_regular,
    ring,
    star,
    torus,
)
from .validation import check_in

__all__ = [
    "TOPOLOGY_CONSTRUCTORS",
    "TOPOLOGY_SPEC_ARGS",
    "TOPOLOGY_SPEC_FORMS",
    "get_topology",
    "parse_topology_spec",
    "topology_from_spec",
    "topology_key",
]

#: constructor name -> the parameters a string spec fills in order, with their types
TOPOLOGY_SPEC_ARGS: dict[str, tuple[tuple[str, type], ...]] = {
    "ring": (("n", int),),
    "torus": (("rows", int), ("cols", int)),
    "complete": (("n", int),),
    "star": (("n", int),),
    "path": (("n", int),),
    "hypercube": (("n", int),),
    "exponential": (("n", int),),
    "erdos_renyi": (("n", int), ("p", float), ("seed", int)),
    "random_regular": (("n", int), ("degree", int), ("seed", int)),
    "edgeless": (("n", int),),
    "one_peer_exponential": (("n", int),),
}

#: the forms quoted in error messages
TOPOLOGY_SPEC_FORMS = (
    "'ring:n', 'torus:rows[:cols]', 'complete:n', 'star:n', 'path:n', 'hypercube:n', "
    "'exponential:n', 'erdos_renyi:n:p[:seed]', 'random_regular:n:degree[:seed]', "
    "'edgeless:n', 'one_peer_exponential:n' (n, rows, cols, degree, seed integers, p in (0, 1])"
)

_NUMBER = {
    int: re.compile(r"[+-]?\d+"),
    float: re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"),
}


def _spec_error(spec: Any, detail: str) -> ValueError:
    """The one message of a malformed topology spec, whichever front end met it."""
    return ValueError(
        f"topology must be a Topology or one of {TOPOLOGY_SPEC_FORMS}, got {spec!r} ({detail})"
    )


def parse_topology_spec(spec: str) -> dict[str, Any]:
    """The table ``{"kind": constructor, parameter: value, ...}`` of a string spec
    (``"torus:4:2"`` -> ``{"kind": "torus", "rows": 4, "cols": 2}``).

    Raises ``ValueError`` naming ``topology``, the value and :data:`TOPOLOGY_SPEC_FORMS` for a
    malformed spec; values out of range are left to the constructor's own checks.
    """
    if not isinstance(spec, str):
        raise _spec_error(spec, f"a {type(spec).__name__}, not a string spec")
    name, *args = [part.strip() for part in spec.split(":")]
    kind = topology_key(name)
    if kind not in TOPOLOGY_SPEC_ARGS:
        raise _spec_error(spec, f"unknown topology {kind!r}")
    positional = TOPOLOGY_SPEC_ARGS[kind]
    signature = inspect.signature(TOPOLOGY_CONSTRUCTORS[kind]).parameters
    required = sum(signature[p].default is inspect.Parameter.empty for p, _ in positional)
    if not required <= len(args) <= len(positional):
        form = ":".join([kind, *(p for p, _ in positional[: max(required, 1)])])
        raise _spec_error(spec, f"write {form!r}")
    table: dict[str, Any] = {"kind": kind}
    for (param, typ), text in zip(positional, args, strict=False):
        if not _NUMBER[typ].fullmatch(text):
            what = "an integer" if typ is int else "a number"
            raise _spec_error(spec, f"{param} must be {what}, got {text!r}")
        table[param] = typ(text)
    return table


def topology_from_spec(spec: Topology | str) -> Topology:
    """A :class:`~convkit.topology.Topology` as it is, or one built from a string spec
    (:func:`parse_topology_spec`)."""
    if isinstance(spec, Topology):
        return spec
    table = parse_topology_spec(spec)
    return TOPOLOGY_CONSTRUCTORS[table.pop("kind")](**table)


#: topology kind -> its constructor in :mod:`convkit.topology` (the specs' kinds; the sweep
#: registry registers one topology kind per entry)
TOPOLOGY_CONSTRUCTORS: dict[str, Callable[..., Topology]] = {
    "ring": ring,
    "torus": torus,
    "complete": complete,
    "star": star,
    "path": path,
    "hypercube": hypercube,
    "exponential": exponential,
    "erdos_renyi": erdos_renyi,
    "random_regular": random_regular,
    "edgeless": edgeless,
    "one_peer_exponential": one_peer_exponential,
}


def get_topology(name: str, *args: Any, **kwargs: Any) -> Topology:
    """Build a topology by name: ``get_topology("ring", 16)``, ``get_topology("torus", 4, 4)``.

    Names: ``ring, torus, complete, star, path, hypercube, exponential, erdos_renyi,
    random_regular, edgeless, one_peer_exponential`` (hyphens accepted for underscores).
    """
    key = topology_key(name)
    check_in("topology", key, tuple(TOPOLOGY_CONSTRUCTORS))
    return TOPOLOGY_CONSTRUCTORS[key](*args, **kwargs)


def topology_key(name: Any) -> str:
    """Constructor name of ``name``: case, spaces and ``-`` for ``_`` ignored (one rule)."""
    return str(name).strip().replace("-", "_").lower()
