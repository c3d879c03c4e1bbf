"""A claim written as a function of its setting: :class:`MapClaim` and the decorator
:func:`map_claim`, and the look-up of a claim by name (:func:`find_claim`) among the
built-in maps and a user's module.

A map claim is a module-level point function ``point(**setting) -> MapPoint`` with what the
map needs to read it: the ``threshold`` of the claim on the measured quantity and its
``side`` ("the quantity lies below the threshold"), the quantity's label, the fixed settings
of the map, a version string (part of the sweep cache key: change it when the function's
numbers change), the default axes, and, where the theory gives one, the ``predicted``
boundary (a function of the x values giving the y of the boundary, NaN where none).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convkit.maps.point import SIDES, Axis, MapPoint

__all__ = ["BUILTIN_MAPS", "MapClaim", "find_claim", "map_claim"]

#: the built-in map claims: name -> "module:attribute" (imported only when used)
BUILTIN_MAPS: dict[str, str] = {
    "woodworth": "convkit.maps.claims:woodworth",
    "osa_gap": "convkit.maps.claims:osa_gap",
    "osa_gap_logistic": "convkit.maps.claims:osa_gap_logistic",
}


@dataclass
class MapClaim:
    """A claim's check as a function of its setting (module docstring).

    ``point`` must be a module-level function (the sweep runner calls it by module and
    qualified name, in worker processes too); calling the claim calls it and returns a
    :class:`MapPoint`. ``settings`` are keyword settings fixed for the whole map (the axes'
    names must not be among them)."""

    point: Callable[..., Any]
    name: str = ""
    threshold: float = 1.0
    side: str = "below"
    quantity: str = "measured"
    statement: str = ""
    source: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    version: str = "1"
    x: Axis | None = None
    y: Axis | None = None
    predicted: Callable[[np.ndarray], np.ndarray] | None = None
    predicted_label: str = "predicted boundary"
    units: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.point):
            raise TypeError(f"point must be callable, got {self.point!r}")
        self.name = self.name or self.point.__name__
        if self.side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {self.side!r}")
        if not math.isfinite(float(self.threshold)):
            raise ValueError(f"threshold must be a finite number, got {self.threshold!r}")
        self.threshold = float(self.threshold)
        if not isinstance(self.version, str):
            raise TypeError(f"version must be a string, got {self.version!r}")
        qual = getattr(self.point, "__qualname__", "")
        if "<locals>" in qual or "<lambda>" in qual:
            raise ValueError(
                f"map claim {self.name!r}: the point function {qual!r} is not defined at the "
                "top level of a module; the sweep runner calls it by module and name"
            )
        self.settings = dict(self.settings)
        self.check_settings(self.settings)

    # ------------------------------------------------------------------ what it accepts
    @property
    def target(self) -> tuple[str, str]:
        """``(module, qualified name)`` by which the sweep runner calls the point function."""
        return self.point.__module__, self.point.__qualname__

    def parameters(self) -> dict[str, inspect.Parameter]:
        """The keyword parameters of the point function (name -> parameter)."""
        sig = inspect.signature(self.point)
        return {
            n: p
            for n, p in sig.parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }

    def accepts_any(self) -> bool:
        """Whether the point function takes ``**kwargs`` (then any name is accepted)."""
        sig = inspect.signature(self.point)
        return any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())

    def check_settings(self, names: Mapping[str, Any] | list[str]) -> None:
        """Raise ``ValueError`` naming every setting the point function does not accept."""
        if self.accepts_any():
            return
        params = self.parameters()
        bad = [n for n in names if n not in params]
        if bad:
            raise ValueError(
                f"map claim {self.name!r}: {bad} are not parameters of its point function "
                f"{self.point.__qualname__}; it accepts {sorted(params)}"
            )

    def check_axes(self, x: Axis, y: Axis, settings: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` when an axis is not a parameter of the point function, the
        two axes share a name, an axis is also a fixed setting, or a required parameter of the
        point function is given by neither the axes nor the settings."""
        if x.name == y.name:
            raise ValueError(
                f"the x and y axes must vary different parameters, both are {x.name!r}"
            )
        self.check_settings([x.name, y.name, *settings])
        fixed = [a.name for a in (x, y) if a.name in settings]
        if fixed:
            raise ValueError(f"{fixed} are axes and fixed settings at once: give each once")
        given = {x.name, y.name, *settings}
        missing = [
            n for n, p in self.parameters().items() if p.default is p.empty and n not in given
        ]
        if missing:
            raise ValueError(
                f"map claim {self.name!r}: the required parameters {missing} of "
                f"{self.point.__qualname__} are given neither by an axis nor by a setting"
            )

    # ------------------------------------------------------------------ calling it
    def __call__(self, **setting: Any) -> MapPoint:
        out = self.point(**setting)
        if not isinstance(out, MapPoint):
            raise TypeError(
                f"map claim {self.name!r}: the point function must return a MapPoint, got "
                f"{type(out).__name__}"
            )
        return out

    def label(self, name: str) -> str:
        """The axis label of a parameter (with its meaning or unit where declared)."""
        unit = self.units.get(name)
        return f"{name} ({unit})" if unit else name


def map_claim(
    name: str | None = None,
    *,
    threshold: float = 1.0,
    side: str = "below",
    quantity: str = "measured",
    statement: str = "",
    source: str = "",
    settings: Mapping[str, Any] | None = None,
    version: str = "1",
    x: Axis | None = None,
    y: Axis | None = None,
    predicted: Callable[[np.ndarray], np.ndarray] | None = None,
    predicted_label: str = "predicted boundary",
    units: Mapping[str, str] | None = None,
) -> Callable[[Callable[..., Any]], MapClaim]:
    """Decorator declaring a module-level point function a map claim (a :class:`MapClaim`
    that stands in the module under the function's name, so that the sweep runner finds it).

    Example (in a user's module ``my_claims.py``)::

        from convkit.maps import MapPoint, map_claim

        @map_claim(threshold=1.0, side="below", quantity="a / b")
        def ratio(a: float, b: float) -> MapPoint:
            return MapPoint.decide(a / b, threshold=1.0)
    """

    def deco(fn: Callable[..., Any]) -> MapClaim:
        return MapClaim(
            fn, name or fn.__name__, threshold, side, quantity, statement, source,
            dict(settings or {}), version, x, y, predicted, predicted_label, dict(units or {}),
        )  # fmt: skip

    return deco


def _as_claim(obj: Any, name: str) -> MapClaim:
    """``obj`` as a claim: a :class:`MapClaim` as it is, a plain function wrapped (threshold
    1, side below)."""
    if isinstance(obj, MapClaim):
        return obj
    if callable(obj) and inspect.isfunction(obj):
        return MapClaim(obj, name=name)
    raise ValueError(f"{name!r} is neither a map claim (@map_claim) nor a function")


def find_claim(name: str, modules: list[Any] | None = None) -> MapClaim:
    """The claim called ``name``: a module-level function or declared map claim of one of
    ``modules`` (imported module objects; the user's), else a built-in map
    (:data:`BUILTIN_MAPS`). Raises ``ValueError`` listing what exists."""
    import importlib

    for mod in modules or []:
        obj = getattr(mod, name, None)
        if obj is not None:
            return _as_claim(obj, name)
        for attr in dir(mod):  # a claim declared under another attribute name
            cand = getattr(mod, attr)
            if isinstance(cand, MapClaim) and cand.name == name:
                return cand
    if name in BUILTIN_MAPS:
        module, attr = BUILTIN_MAPS[name].split(":")
        return _as_claim(getattr(importlib.import_module(module), attr), name)
    known = sorted(BUILTIN_MAPS)
    for mod in modules or []:
        known += sorted(a for a in dir(mod) if isinstance(getattr(mod, a), MapClaim))
    raise ValueError(f"unknown map claim {name!r}; known: {known}")
