"""Evaluating a map: its points through the sweep runner (:func:`evaluate_points`), the grid
and the boundary (:func:`run_map`), and what comes back (:class:`MapResult`).

Every point is one configuration of a function sweep (:mod:`convkit.sweep.functions`): the
claim's point function called by module and qualified name with the map's fixed settings and
the point's coordinates, cached on disk under a key of the function's name, its version
string and the settings (``<out>/cache``, or the ``cache`` given), so that a second run reads
every point from the cache, a damaged entry is recomputed, a run killed with SIGKILL resumes
where it stopped, and ``jobs``, ``dask`` and ``scheduler`` run the points in parallel exactly
as a sweep's (the numbers do not depend on the executor). The grid is one sweep
(``<out>/sweeps/grid``); each bisection step of the refinement is one sweep of the new points
(``<out>/sweeps/refine-<k>``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from convkit import verdicts as V
from convkit.maps.claim import MapClaim
from convkit.maps.point import SHORT, Axis
from convkit.maps.refine import Coord, locate_crossings

__all__ = ["MapResult", "evaluate_points", "run_map"]

#: the columns of a point row, before the point function's extras
POINT_COLUMNS = ("measured", "lo", "hi", "verdict", "reason")


@dataclass
class MapResult:
    """A evaluated map: the ``claim``, its axes ``x`` and ``y``, the fixed ``settings``, the
    ``points`` (one row per evaluated point: the two coordinates, ``stage`` "grid" or
    "refine", measured, lo, hi, verdict, label (the short verdict name), reason and the point
    function's extras), the ``crossings`` (one row per located crossing,
    :func:`convkit.maps.refine.locate_crossings`) and a ``summary`` (points computed and read
    from the cache, seconds)."""

    claim: MapClaim
    x: Axis
    y: Axis
    settings: dict[str, Any]
    points: pd.DataFrame
    crossings: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)

    def grid_points(self) -> pd.DataFrame:
        """The points of the grid (not those of the refinement)."""
        return self.points[self.points["stage"] == "grid"].reset_index(drop=True)

    def field(self, column: str = "measured") -> np.ndarray:
        """``column`` on the grid as an array of shape ``(y.n, x.n)`` (rows: y)."""
        g = self.grid_points().pivot(index=self.y.name, columns=self.x.name, values=column)
        return g.sort_index().sort_index(axis=1).to_numpy()

    def title(self) -> str:
        """The claim and the fixed settings, for a figure's title."""
        full = {
            n: p.default
            for n, p in self.claim.parameters().items()
            if p.default is not p.empty and n not in (self.x.name, self.y.name)
        }
        full.update(self.settings)
        fixed = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in full.items())  # fmt: skip
        return f"{self.claim.name}: {self.claim.quantity}" + (f" ({fixed})" if fixed else "")

    def write(self, outdir: str | os.PathLike, stem: str | None = None) -> list[Path]:
        """Write ``<stem>_points.csv``, ``<stem>_crossings.csv``, ``<stem>_crossings.json``
        (with the axes, settings and summary) and ``<stem>.png``; returns the paths."""
        from convkit.maps.figure import plot_map

        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        stem = stem or f"map_{self.claim.name}"
        paths = [out / f"{stem}_points.csv", out / f"{stem}_crossings.csv"]
        self.points.to_csv(paths[0], index=False)
        self.crossings.to_csv(paths[1], index=False)
        doc = {
            "claim": self.claim.name,
            "quantity": self.claim.quantity,
            "threshold": self.claim.threshold,
            "side": self.claim.side,
            "x": vars(self.x),
            "y": vars(self.y),
            "settings": self.settings,
            "summary": self.summary,
            "crossings": json.loads(self.crossings.to_json(orient="records")),
        }
        paths.append(out / f"{stem}_crossings.json")
        paths[-1].write_text(json.dumps(doc, indent=1, default=V.plain_values) + "\n")
        paths.append(plot_map(self, out / f"{stem}.png"))
        return paths


def evaluate_points(
    claim: MapClaim,
    coords: Sequence[Coord],
    x: Axis,
    y: Axis,
    settings: Mapping[str, Any],
    out: str | os.PathLike,
    *,
    stage: str = "grid",
    jobs: int | None = 1,
    dask: bool = False,
    scheduler: str | None = None,
    cache: str | os.PathLike | None = None,
    imports: Sequence[str] = (),
    counts: dict[str, int] | None = None,
) -> dict[Coord, dict[str, Any]]:
    """Evaluate the claim at ``coords`` ((x, y) values) as one function sweep in
    ``<out>/sweeps/<stage>`` with the cache ``cache`` (default ``<out>/cache``): returns
    (x, y) -> the point's row (:data:`POINT_COLUMNS` and the extras). A point whose call
    failed gets the verdict ``crashed`` with the error as its reason. ``counts`` (optional)
    accumulates ``computed``, ``cached``, ``invalid`` and ``failed``."""
    from convkit.sweep.points import run_points

    coords = list(dict.fromkeys((float(a), float(b)) for a, b in coords))
    if not coords:
        return {}
    module, qualname = claim.target
    args = [{**settings, x.name: a, y.name: b} for a, b in coords]
    root = Path(out)
    res = run_points(
        module, qualname, args, root / "sweeps" / stage, version=claim.version,
        cache=cache if cache is not None else root / "cache", jobs=jobs, dask=dask,
        scheduler=scheduler, imports=imports, label=f"map {claim.name} {stage}",
        raise_on_failure=False,
    )  # fmt: skip
    s = res.summary
    if counts is not None:
        for k, v in (("computed", s.computed), ("cached", s.cached),
                     ("invalid", len(s.invalid)), ("failed", len(s.failed))):  # fmt: skip
            counts[k] = counts.get(k, 0) + v
    rows: dict[Coord, dict[str, Any]] = {}
    for i, frame in enumerate(res.frames):
        if frame is not None and len(frame):
            rows[coords[i]] = frame.iloc[0].to_dict()
    for i, err in s.failed.items():
        rows[coords[i]] = {"measured": np.nan, "lo": np.nan, "hi": np.nan,
                           "verdict": V.CRASHED, "reason": err}  # fmt: skip
    return rows


def run_map(
    claim: MapClaim,
    x: Axis | None = None,
    y: Axis | None = None,
    *,
    settings: Mapping[str, Any] | None = None,
    out: str | os.PathLike,
    refine: float | None = 0.01,
    jobs: int | None = 1,
    dask: bool = False,
    scheduler: str | None = None,
    cache: str | os.PathLike | None = None,
    imports: Sequence[str] = (),
) -> MapResult:
    """Evaluate ``claim`` on the grid ``x`` by ``y`` (default: the claim's own axes) with the
    fixed ``settings`` (merged over the claim's), then locate the boundary by bisection to
    ``refine`` (a fraction of each axis' span in its scale; ``None``: no refinement). Every
    argument is validated before any point runs (the axes' names are parameters of the point
    function, no parameter is given twice, every required one is given; ``refine`` in (0, 1);
    the axes' own rules: ``n >= 2``, ``lo < hi``, a log axis positive)."""
    t0 = time.perf_counter()
    x = x if x is not None else claim.x
    y = y if y is not None else claim.y
    if x is None or y is None:
        raise ValueError(f"map claim {claim.name!r} declares no default axes: give x and y")
    given = dict(settings or {})
    # the claim's own settings fill in what is not given; an axis replaces a claim setting
    merged = {k: v for k, v in claim.settings.items() if k not in (x.name, y.name)}
    merged.update(given)
    claim.check_axes(x, y, merged)
    if refine is not None and not (
        isinstance(refine, float | int) and not isinstance(refine, bool) and 0 < refine < 1
    ):
        raise ValueError(
            f"refine must be a fraction of the axis span in (0, 1) or None, got {refine!r}"
        )
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs == 0):
        raise ValueError(f"jobs must be a non-zero integer or None (all cores), got {jobs!r}")
    if dask and scheduler:
        raise ValueError("give dask=True (an embedded cluster) or scheduler=ADDRESS, not both")
    with _one_cluster(dask, jobs) as address:
        if address is not None:  # every stage on the one embedded cluster
            dask, scheduler = False, address
        return _run_checked(claim, x, y, merged, out, refine, jobs, dask, scheduler, cache,
                            imports, t0)  # fmt: skip


@contextlib.contextmanager
def _one_cluster(dask: bool, jobs: int | None) -> Iterator[str | None]:
    """An embedded Dask ``LocalCluster`` (processes, one thread each, ``jobs`` workers or one
    per core) for the whole map when ``dask``, its address yielded (None otherwise): the grid
    and every bisection step are separate sweeps, and a cluster each would cost seconds."""
    if not dask:
        yield None
        return
    import logging

    from distributed import LocalCluster

    n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)  # fmt: skip
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def _run_checked(
    claim: MapClaim,
    x: Axis,
    y: Axis,
    merged: dict[str, Any],
    out: str | os.PathLike,
    refine: float | None,
    jobs: int | None,
    dask: bool,
    scheduler: str | None,
    cache: str | os.PathLike | None,
    imports: Sequence[str],
    t0: float,
) -> MapResult:
    """The body of :func:`run_map`, its arguments validated."""
    counts: dict[str, int] = {}
    kw = dict(
        jobs=jobs, dask=dask, scheduler=scheduler, cache=cache, imports=imports, counts=counts
    )
    coords = [(float(a), float(b)) for b in y.values() for a in x.values()]
    grid = evaluate_points(claim, coords, x, y, merged, out, stage="grid", **kw)
    stage = {"k": 0}
    refined: dict[Coord, dict[str, Any]] = {}

    def evaluate(new: list[Coord]) -> dict[Coord, dict[str, Any]]:
        stage["k"] += 1
        rows = evaluate_points(claim, new, x, y, merged, out, stage=f"refine-{stage['k']}", **kw)
        refined.update(rows)
        return rows

    crossings: list[dict[str, Any]] = []
    if refine is not None:
        crossings = locate_crossings(
            x, y, grid, evaluate, threshold=claim.threshold, tol=float(refine)
        )
    points = _points_frame(x, y, grid, refined)
    summary = {**counts, "points": len(points), "crossings": len(crossings),
               "refine_steps": stage["k"], "seconds": time.perf_counter() - t0}  # fmt: skip
    cols = ["along", "fixed_name", "fixed", "from_verdict", "to_verdict", "position",
            "interval_lo", "interval_hi"]  # fmt: skip
    cr = pd.DataFrame(crossings) if crossings else pd.DataFrame(columns=cols)
    return MapResult(claim, x, y, merged, points, cr, summary)


def _points_frame(
    x: Axis, y: Axis, grid: Mapping[Coord, Mapping], refined: Mapping[Coord, Mapping]
) -> pd.DataFrame:
    rows = []
    for stage, part in (("grid", grid), ("refine", refined)):
        for (a, b), rec in part.items():
            rows.append({x.name: a, y.name: b, "stage": stage, **{k: rec.get(k) for k in POINT_COLUMNS},
                         "label": SHORT.get(str(rec.get("verdict")), str(rec.get("verdict"))),
                         **{k: v for k, v in rec.items() if k not in POINT_COLUMNS}})  # fmt: skip
    return pd.DataFrame(rows)


def result_frame(result: MapResult) -> pd.DataFrame:
    """The points and crossings of ``result`` as one frame (column ``part``: ``"point"`` or
    ``"crossing"``), the form an analysis writes as its CSV; :func:`result_from_frame` reads
    it back."""
    pts = result.points.assign(part="point")
    cr = result.crossings.assign(part="crossing")
    return pd.concat([pts, cr], ignore_index=True, sort=False)


def result_from_frame(
    claim: MapClaim, x: Axis, y: Axis, settings: Mapping[str, Any], frame: pd.DataFrame
) -> MapResult:
    """The :class:`MapResult` of a frame written by :func:`result_frame` (the claim, axes and
    settings are the caller's: the frame holds only numbers)."""
    pts = frame[frame["part"] == "point"].drop(columns="part").dropna(axis=1, how="all")
    cr = frame[frame["part"] == "crossing"].drop(columns="part")
    cr = cr.dropna(axis=1, how="all") if len(cr) else cr.iloc[:, :0]
    return MapResult(claim, x, y, dict(settings), pts.reset_index(drop=True),
                     cr.reset_index(drop=True))  # fmt: skip
