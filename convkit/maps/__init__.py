"""Regime maps: where a claim holds, and where exactly it stops.

A **regime map** is a claim's check written as a function of its setting,
``point(**setting) -> MapPoint(measured, lo, hi, verdict)`` (:class:`MapClaim`, declared with
:func:`map_claim`), evaluated over a 2-D grid (:class:`Axis`: a parameter's name, ``lo``,
``hi``, ``n``, log or linear) by the sweep runner (:mod:`convkit.sweep.functions`: cached
on disk, resumable, parallel with ``jobs`` and Dask), and the **boundary** where the verdict
changes, located by bisection along each grid line to a stated tolerance, each crossing with
an interval on its position (:mod:`convkit.maps.refine`). Verdicts are those of
:mod:`convkit.verdicts` (holds, violated, consistent_unresolved: "unresolved", inconclusive:
"imprecise"; :func:`threshold_verdict`). :func:`run_map` does all of it and returns a
:class:`MapResult` (points, crossings; ``write`` gives the CSVs, the JSON and the figure of
:mod:`convkit.maps.figure`). The command line is ``convkit map`` (:mod:`convkit.cli.map`).

Example (the ratio ``a / b`` against 1: the boundary is the line ``a = b``)::

    # my_claims.py
    from convkit.maps import MapPoint, map_claim

    @map_claim(threshold=1.0, side="below", quantity="a / b")
    def ratio(a: float, b: float) -> MapPoint:
        return MapPoint.decide(a / b, threshold=1.0, side="below")

    # then
    from convkit.maps import Axis, run_map
    from my_claims import ratio

    res = run_map(ratio, Axis("a", 0.5, 2.0, 5), Axis("b", 0.5, 2.0, 4), out="map-out",
                  refine=0.01)
    res.crossings[["along", "fixed", "position", "interval_lo", "interval_hi"]]
    res.write("map-out")  # map_ratio_points.csv, _crossings.csv, _crossings.json, .png
"""

from __future__ import annotations

from convkit.maps.claim import BUILTIN_MAPS, MapClaim, find_claim, map_claim
from convkit.maps.point import SIDES, Axis, MapPoint, parse_axis, threshold_verdict
from convkit.maps.refine import locate_crossings
from convkit.maps.run import (
    MapResult,
    evaluate_points,
    result_frame,
    result_from_frame,
    run_map,
)

__all__ = [
    "BUILTIN_MAPS",
    "SIDES",
    "Axis",
    "MapClaim",
    "MapPoint",
    "MapResult",
    "evaluate_points",
    "find_claim",
    "locate_crossings",
    "map_claim",
    "parse_axis",
    "result_frame",
    "result_from_frame",
    "run_map",
    "threshold_verdict",
]
