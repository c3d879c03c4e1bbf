"""One point of a regime map (:class:`MapPoint`), the verdict of a quantity against a claim's
threshold (:func:`threshold_verdict`), and one axis of a map (:class:`Axis`).

A claim of the form "the quantity ``q`` lies below (above) the threshold ``t``" is decided at
one setting from the measured ``q`` and its interval ``[lo, hi]`` (an exact engine gives
``lo = hi = q``; a Monte Carlo estimate ``q -+ z SE``), with the vocabulary of
:mod:`convkit.verdicts`:

* ``holds`` when the whole interval lies on the claimed side (``hi < t`` for "below");
* ``violated`` when it lies on the other side (``lo > t``);
* ``consistent_unresolved`` ("unresolved") when it contains ``t``;
* ``inconclusive`` ("imprecise") when the caller's precision rule fails (the interval's
  half-width above ``max_rel_half_width`` times ``|q|``: a point that must not decide), or
  when nothing finite was measured.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convkit import verdicts as V

__all__ = ["SIDES", "Axis", "MapPoint", "parse_axis", "threshold_verdict"]

#: the sides a threshold claim can take: the quantity lies "below" or "above" the threshold
SIDES = ("below", "above")

#: the short names the maps use for the verdicts of a point (legend, CSV column ``label``)
SHORT = {
    V.HOLDS: "holds",
    V.VIOLATED: "violated",
    V.CONSISTENT_UNRESOLVED: "unresolved",
    V.INCONCLUSIVE: "imprecise",
    V.NOT_IDENTIFIABLE: "not identifiable",
    V.MEASURED: "measured",
    V.CRASHED: "crashed",
}


def _finite(v: float) -> bool:
    return isinstance(v, int | float | np.floating | np.integer) and math.isfinite(float(v))


def threshold_verdict(
    measured: float,
    lo: float | None = None,
    hi: float | None = None,
    *,
    threshold: float = 1.0,
    side: str = "below",
    max_rel_half_width: float | None = None,
) -> tuple[str, str]:
    """``(verdict, reason)`` of the claim "``measured`` lies on ``side`` of ``threshold``"
    from the interval ``[lo, hi]`` (``None``: the exact value, ``lo = hi = measured``), by the
    rule of the module docstring. ``max_rel_half_width`` (optional) is the precision rule:
    a half-width ``(hi - lo) / 2`` above ``max_rel_half_width * |measured|`` is
    ``inconclusive`` ("imprecise")."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    if not _finite(threshold):
        raise ValueError(f"threshold must be a finite number, got {threshold!r}")
    lo = measured if lo is None else lo
    hi = measured if hi is None else hi
    if not all(_finite(v) for v in (measured, lo, hi)):
        return V.INCONCLUSIVE, f"nothing finite was measured (value {measured!r}, [{lo}, {hi}])"
    m, lo, hi, t = float(measured), float(lo), float(hi), float(threshold)
    if lo > hi:
        raise ValueError(f"lo must be <= hi, got lo={lo!r} > hi={hi!r}")
    iv = V.interval_text((lo, hi)) if hi > lo else f"{m:.4g} (exact)"
    if max_rel_half_width is not None:
        half = (hi - lo) / 2
        if half > max_rel_half_width * abs(m):
            return (
                V.INCONCLUSIVE,
                f"imprecise: half-width {half:.3g} exceeds {max_rel_half_width:.3g} x |{m:.4g}|",
            )
    below, above = hi < t, lo > t
    if not below and not above:
        return V.CONSISTENT_UNRESOLVED, f"{iv} contains the threshold {t:g}"
    on_claimed = below if side == "below" else above
    where = "below" if below else "above"
    return (V.HOLDS if on_claimed else V.VIOLATED), f"{iv} lies {where} {t:g}"


@dataclass(frozen=True)
class MapPoint:
    """What a map's point function returns at one setting: the ``measured`` quantity, its
    interval ``[lo, hi]`` (NaN where the function gives none; equal to ``measured`` for an
    exact engine), the ``verdict`` (one of :data:`convkit.verdicts.VERDICTS`), a one-sentence
    ``reason`` and ``extra`` numbers to keep (the best steps, the errors, the rounds).

    ``as_record()`` is the row the sweep runner caches (:mod:`convkit.sweep.functions`);
    ``from_record`` reads it back."""

    measured: float
    lo: float = math.nan
    hi: float = math.nan
    verdict: str = V.MEASURED
    reason: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        V.check_verdict(self.verdict)
        if not isinstance(self.reason, str):
            raise TypeError(f"reason must be a string, got {self.reason!r}")
        clash = set(self.extra) & {f.name for f in dataclasses.fields(self)}
        if clash:
            raise ValueError(f"extra must not reuse the names {sorted(clash)}")

    def as_record(self) -> dict[str, Any]:
        """One flat row: measured, lo, hi, verdict, reason, then the extras."""
        rec = {
            "measured": float(self.measured),
            "lo": float(self.lo),
            "hi": float(self.hi),
            "verdict": self.verdict,
            "reason": self.reason,
        }
        rec.update({k: V.plain_values(v) for k, v in self.extra.items()})
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> MapPoint:
        """The inverse of :meth:`as_record`."""
        base = ("measured", "lo", "hi", "verdict", "reason")
        return cls(
            float(rec["measured"]),
            float(rec["lo"]),
            float(rec["hi"]),
            str(rec["verdict"]),
            str(rec.get("reason", "")),
            {k: v for k, v in rec.items() if k not in base},
        )

    @classmethod
    def decide(
        cls,
        measured: float,
        lo: float | None = None,
        hi: float | None = None,
        *,
        threshold: float = 1.0,
        side: str = "below",
        max_rel_half_width: float | None = None,
        **extra: Any,
    ) -> MapPoint:
        """A point whose verdict is :func:`threshold_verdict` of its interval."""
        verdict, reason = threshold_verdict(
            measured, lo, hi, threshold=threshold, side=side,
            max_rel_half_width=max_rel_half_width,
        )  # fmt: skip
        lo_ = measured if lo is None else lo
        hi_ = measured if hi is None else hi
        return cls(float(measured), float(lo_), float(hi_), verdict, reason, extra)


@dataclass(frozen=True)
class Axis:
    """One axis of a map: the keyword ``name`` of the point function, ``n >= 2`` values from
    ``lo`` to ``hi`` (``lo < hi``), evenly spaced in ``log10`` when ``log`` (then ``lo > 0``),
    else linearly. Refinement works in the same scale (:meth:`to_scale`, :meth:`from_scale`)."""

    name: str
    lo: float
    hi: float
    n: int
    log: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"axis name must be a Python identifier, got {self.name!r}")
        for what in ("lo", "hi"):
            v = getattr(self, what)
            if isinstance(v, bool) or not _finite(v):
                raise ValueError(f"axis {self.name}: {what} must be a finite number, got {v!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int | np.integer) or self.n < 2:
            raise ValueError(f"axis {self.name}: n must be an integer >= 2, got {self.n!r}")
        if not self.lo < self.hi:
            raise ValueError(
                f"axis {self.name}: lo must be < hi, got lo={self.lo!r}, hi={self.hi!r}"
            )
        if self.log and self.lo <= 0:
            raise ValueError(
                f"axis {self.name}: a log axis needs lo > 0, got lo={self.lo!r} "
                "(use a linear axis, or a positive lower end)"
            )

    def to_scale(self, v: Any) -> np.ndarray:
        """Coordinates in the axis' scale (log10 for a log axis)."""
        v = np.asarray(v, dtype=float)
        return np.log10(v) if self.log else v

    def from_scale(self, u: Any) -> np.ndarray:
        """The inverse of :meth:`to_scale`."""
        u = np.asarray(u, dtype=float)
        return 10.0**u if self.log else u

    @property
    def span(self) -> float:
        """``hi - lo`` in the axis' scale."""
        return float(self.to_scale(self.hi) - self.to_scale(self.lo))

    def values(self) -> np.ndarray:
        """The ``n`` grid values (the ends exactly ``lo`` and ``hi``)."""
        v = self.from_scale(np.linspace(self.to_scale(self.lo), self.to_scale(self.hi), self.n))
        v[0], v[-1] = self.lo, self.hi
        return v

    def describe(self) -> str:
        """``name = lo..hi (n, log)``."""
        return (
            f"{self.name} = {self.lo:g}..{self.hi:g} ({self.n} {'log' if self.log else 'linear'})"
        )


def parse_axis(text: str, log: bool = False) -> Axis:
    """An :class:`Axis` from ``NAME=lo:hi:n`` (the command line's form); raises ``ValueError``
    naming the text and the form allowed."""
    form = "NAME=lo:hi:n (e.g. zeta2=0.5:200:9)"
    name, sep, rng = str(text).partition("=")
    parts = rng.split(":")
    if not sep or len(parts) != 3:
        raise ValueError(f"axis {text!r} is not of the form {form}")
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"axis {text!r}: lo and hi must be numbers ({form})") from None
    try:
        n = int(parts[2])
    except ValueError:
        raise ValueError(f"axis {text!r}: n must be an integer ({form})") from None
    return Axis(name.strip(), lo, hi, n, log)
