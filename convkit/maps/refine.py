"""Locating a map's boundary: bisection along each grid line between neighbouring points
whose verdicts differ (:func:`locate_crossings`).

**Segments.** On the grid ``x_0 < ... < x_{n-1}`` by ``y_0 < ... < y_{m-1}``, a segment is
a pair of neighbours on one grid line: ``(x_i, y_j) - (x_{i+1}, y_j)`` (a line along x) or
``(x_i, y_j) - (x_i, y_{j+1})`` (along y). A segment whose two verdicts differ holds a
crossing of the boundary.

**Bisections.** On such a segment ``[a, b]`` (in the axis' scale: log10 of the value for a
log axis), each of these predicates is true at ``a`` and false at ``b`` and is bisected,
keeping the half whose ends still differ, until the bracket is at most ``tol`` times the
axis' span (``tol`` is a fraction of the span in the axis' scale, stated with every crossing):

* the verdict: ``verdict(u) == verdict(a)``;
* the measured quantity against the claim's threshold ``t``: ``sign(q(u) - t) == sign(q(a) - t)``,
  when ``q - t`` changes sign between the ends;
* the interval's ends ``lo`` and ``hi`` against ``t`` likewise (where the point function
  gives an interval: the boundary of a claim decided by an interval lies where the interval
  crosses the threshold: ``hi`` crosses it where ``holds`` turns into ``unresolved``, ``lo``
  where ``unresolved`` turns into ``violated``).

A bisection assumes one crossing on the segment (a predicate that changes several times
between two grid points is located at one of its changes). A point whose quantity is not
finite stops the quantity's bisection there (its bracket is the last one with finite ends).

**The crossing's interval.** Its ``position`` is the midpoint of the measured quantity's
bracket (of the verdict's bracket when the quantity does not cross the threshold on the
segment); its interval ``[interval_lo, interval_hi]`` is the hull of every bracket: the
verdict's, the quantity's, and where ``lo`` and ``hi`` cross. The true position of the
quantity's crossing lies inside it whenever the quantity crosses once on the segment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convkit.maps.point import Axis

__all__ = ["Bisection", "Segment", "locate_crossings", "segments"]

#: a point's coordinates (x, y) in the values of the axes
Coord = tuple[float, float]


@dataclass
class Segment:
    """Two neighbouring grid points of different verdicts: along ``axis`` ("x" or "y"), at
    the other axis' value ``fixed``, from ``a`` to ``b`` (values of the varied axis)."""

    axis: str
    fixed: float
    a: float
    b: float

    def coord(self, v: float) -> Coord:
        return (v, self.fixed) if self.axis == "x" else (self.fixed, v)


@dataclass
class Bisection:
    """One predicate bisected on a segment, in the varied axis' scale: ``ua`` where the
    predicate holds (the segment's lower end's side), ``ub`` where it does not."""

    what: str  # "verdict", "measured", "lo" or "hi"
    ua: float
    ub: float
    test: Callable[[Mapping[str, Any]], bool | None]
    stopped: str = ""
    steps: int = 0


@dataclass
class _Crossing:
    seg: Segment
    ends: tuple[Mapping[str, Any], Mapping[str, Any]]
    bisections: list[Bisection] = field(default_factory=list)
    #: the points evaluated on the segment (scale coordinate -> row), shared by its bisections
    points: dict[float, Mapping[str, Any] | None] = field(default_factory=dict)


def _narrow(b: Bisection, points: Mapping[float, Mapping[str, Any] | None]) -> None:
    """Shrink ``b``'s bracket to the closest points of the segment on either side of its
    change: the last point where the predicate holds, then the first beyond it where it does
    not (points evaluated by the segment's other bisections count too)."""
    if b.stopped:
        return
    inside = sorted(
        (u, b.test(row)) for u, row in points.items() if row is not None and b.ua < u < b.ub
    )
    for u, ok in inside:
        if ok is True:
            b.ua = u
    for u, ok in inside:
        if ok is False and u > b.ua:
            b.ub = u
            break


def segments(
    x: Axis, y: Axis, xs: Sequence[float], ys: Sequence[float], verdicts: Mapping[Coord, str]
) -> list[Segment]:
    """Every segment of the grid ``xs`` by ``ys`` whose two ends have different verdicts."""
    out = []
    for yv in ys:
        for xa, xb in zip(xs[:-1], xs[1:], strict=True):
            if verdicts[(xa, yv)] != verdicts[(xb, yv)]:
                out.append(Segment("x", float(yv), float(xa), float(xb)))
    for xv in xs:
        for ya, yb in zip(ys[:-1], ys[1:], strict=True):
            if verdicts[(xv, ya)] != verdicts[(xv, yb)]:
                out.append(Segment("y", float(xv), float(ya), float(yb)))
    return out


def _side_test(q: str, t: float, ref: bool) -> Callable[[Mapping[str, Any]], bool | None]:
    def test(row: Mapping[str, Any]) -> bool | None:
        v = float(row[q])
        return None if not np.isfinite(v) else (v < t) == ref

    return test


def _bisections(seg: Segment, axis: Axis, ra: Mapping, rb: Mapping, t: float) -> list[Bisection]:
    ua, ub = float(axis.to_scale(seg.a)), float(axis.to_scale(seg.b))
    va = ra["verdict"]
    out = [Bisection("verdict", ua, ub, lambda row, va=va: row["verdict"] == va)]
    seen: list[tuple[float, float]] = []
    for q in ("measured", "lo", "hi"):
        qa, qb = float(ra[q]), float(rb[q])
        if not (np.isfinite(qa) and np.isfinite(qb)) or (qa - t) * (qb - t) >= 0:
            continue
        if (qa, qb) in seen:  # lo = hi = measured (an exact engine): one bisection
            continue
        seen.append((qa, qb))
        out.append(Bisection(q, ua, ub, _side_test(q, t, qa < t)))
    return out


def locate_crossings(
    x: Axis,
    y: Axis,
    grid: Mapping[Coord, Mapping[str, Any]],
    evaluate: Callable[[list[Coord]], Mapping[Coord, Mapping[str, Any]]],
    *,
    threshold: float,
    tol: float,
    max_steps: int = 60,
) -> list[dict[str, Any]]:
    """The crossings of the boundary on the grid ``grid`` ((x, y) -> the point's row, with
    ``verdict``, ``measured``, ``lo``, ``hi``), located by bisection to ``tol`` (a fraction
    of each axis' span in its scale) as the module docstring states. ``evaluate(coords)``
    returns the rows of new points; all bisections advance together, so that each step is
    one call (one sweep). Returns one dict per crossing (the columns of the crossings CSV)."""
    if not (isinstance(tol, float | int) and 0 < tol < 1):
        raise ValueError(f"tol must be a fraction of the axis span in (0, 1), got {tol!r}")
    xs = sorted({c[0] for c in grid})
    ys = sorted({c[1] for c in grid})
    verdicts = {c: str(r["verdict"]) for c, r in grid.items()}
    axes = {"x": x, "y": y}
    crossings = []
    for seg in segments(x, y, xs, ys, verdicts):
        ra, rb = grid[seg.coord(seg.a)], grid[seg.coord(seg.b)]
        cr = _Crossing(seg, (ra, rb))
        cr.bisections = _bisections(seg, axes[seg.axis], ra, rb, threshold)
        crossings.append(cr)
    known: dict[Coord, Mapping[str, Any]] = dict(grid)

    def active(cr: _Crossing, b: Bisection) -> bool:
        width = axes[cr.seg.axis].span * tol
        return not b.stopped and b.ub - b.ua > width and b.steps < max_steps

    while True:
        wanted: dict[tuple[int, int], Coord] = {}
        for i, cr in enumerate(crossings):
            for j, b in enumerate(cr.bisections):
                if active(cr, b):
                    mid = float(axes[cr.seg.axis].from_scale(0.5 * (b.ua + b.ub)))
                    wanted[(i, j)] = cr.seg.coord(mid)
        if not wanted:
            break
        new = [c for c in dict.fromkeys(wanted.values()) if c not in known]
        if new:
            known.update(evaluate(new))
        for (i, j), c in wanted.items():
            cr, b = crossings[i], crossings[i].bisections[j]
            row = known.get(c)
            u = 0.5 * (b.ua + b.ub)
            cr.points[u] = row
            b.steps += 1
            if row is None:
                b.stopped = "not evaluated"
            elif b.test(row) is None:
                b.stopped = "not finite"
        for cr in crossings:  # every bisection of a crossing narrows on all its points
            for b in cr.bisections:
                _narrow(b, cr.points)
    return [_record(cr, axes, tol, threshold, x, y) for cr in crossings]


def _record(
    cr: _Crossing, axes: Mapping[str, Axis], tol: float, t: float, x: Axis, y: Axis
) -> dict[str, Any]:
    seg = cr.seg
    ax = axes[seg.axis]
    other = y if seg.axis == "x" else x
    rec: dict[str, Any] = {
        "along": ax.name,
        "fixed_name": other.name,
        "fixed": seg.fixed,
        "from_verdict": cr.ends[0]["verdict"],
        "to_verdict": cr.ends[1]["verdict"],
        "segment_lo": seg.a,
        "segment_hi": seg.b,
        "threshold": t,
        "tol": tol,
        "tol_scale": "log10" if ax.log else "linear",
    }
    lows, highs = [], []
    for q in ("verdict", "measured", "lo", "hi"):
        b = next((b for b in cr.bisections if b.what == q), None)
        if b is None and q in ("lo", "hi"):  # exact: lo = hi = measured share its bisection
            b = next((b for b in cr.bisections if b.what == "measured"), None)
            same = b is not None and all(float(r[q]) == float(r["measured"]) for r in cr.ends)
            b = b if same else None
        if b is None:
            rec[f"{q}_bracket_lo"] = rec[f"{q}_bracket_hi"] = rec[f"{q}_at"] = np.nan
            continue
        lo_v, hi_v = (float(v) for v in ax.from_scale(sorted((b.ua, b.ub))))
        rec[f"{q}_bracket_lo"], rec[f"{q}_bracket_hi"] = lo_v, hi_v
        rec[f"{q}_at"] = float(ax.from_scale(0.5 * (b.ua + b.ub)))
        if b.stopped:
            rec[f"{q}_stopped"] = b.stopped
        lows.append(lo_v)
        highs.append(hi_v)
    rec["position"] = rec["measured_at"] if np.isfinite(rec["measured_at"]) else rec["verdict_at"]
    rec["interval_lo"], rec["interval_hi"] = min(lows), max(highs)
    rec["steps"] = max(b.steps for b in cr.bisections)
    return rec
