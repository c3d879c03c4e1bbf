"""A list of calls of one function as one sweep, reduced back to one frame per call.

Studies whose unit of work is a function call rather than a :func:`convkit.simulate` setting
(a Local-SGD cell with its precision top-ups, one setting's step tuning, a point of a regime
map) run through :func:`run_points`: each call is one configuration of a function sweep
(:mod:`convkit.sweep.functions`), so it gets what every sweep has: a verified,
content-addressed cache shared between sweeps (a damaged or stale entry is recomputed, never
read), resume after Ctrl-C or ``kill -9`` (every finished call is committed as it returns),
parallel processes (joblib, one thread each) or a Dask cluster, and a progress bar.  The
reduce step gives the calls' frames back in the order of ``points``.

Seeds.  The function's numbers must depend on its arguments only (its own seeds derive from
them), so that a call gives the same frame in any process, order or executor.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from convkit.sweep.runner import SweepSummary

__all__ = ["PointsResult", "SweepPointError", "run_points"]


class SweepPointError(RuntimeError):
    """Calls of :func:`run_points` that failed (``failed``: point index -> error message)."""

    def __init__(self, name: str, failed: Mapping[int, str], points: Sequence[Any]) -> None:
        self.failed = dict(failed)
        first = min(self.failed)
        super().__init__(
            f"{len(self.failed)} of {len(points)} calls of {name} failed; the first, point "
            f"{first} {dict(points[first])}: {self.failed[first]} (the others are cached: a "
            "rerun computes only the failed ones)"
        )


@dataclass
class PointsResult:
    """The frames of :func:`run_points`, one per point in order (``None`` where a call
    failed), and the sweep's summary (computed, cached, invalid cache entries, failed)."""

    frames: list[pd.DataFrame | None]
    summary: SweepSummary

    def frame(self) -> pd.DataFrame:
        """The frames of the points that ran, concatenated in order."""
        parts = [f for f in self.frames if f is not None]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def run_points(
    module: str,
    name: str,
    points: Sequence[Mapping[str, Any]],
    out: str | os.PathLike,
    *,
    version: str = "0",
    cache: str | os.PathLike | None = None,
    jobs: int | None = 1,
    dask: bool = False,
    scheduler: str | None = None,
    imports: Sequence[str] = (),
    progress: bool = False,
    label: str | None = None,
    raise_on_failure: bool = True,
) -> PointsResult:
    """Call ``module.name(**point)`` for every point as one function sweep in ``out`` (cache
    ``cache``, default ``out/cache``) and return their frames in order.

    ``points`` are keyword settings (JSON values; distinct, since a sweep's configurations
    are); ``version`` is part of every cache key (change it when the function's numbers
    change); ``jobs``, ``dask``, ``scheduler`` as :func:`convkit.sweep.run` (parallel
    executors run each call on one thread: ``CONVKIT_THREADS=1`` in the worker);
    ``progress``: a progress bar labelled ``label``.  ``raise_on_failure``: a failed call
    raises :class:`SweepPointError` after every other call has run and been cached (else its
    frame is ``None`` and ``summary.failed`` says why)."""
    from convkit.sweep import Sweep
    from convkit.sweep import run as run_sweep

    points = [dict(p) for p in points]
    if not points:
        return PointsResult([], SweepSummary(total=0))
    spec: dict[str, Any] = {
        "name": label or f"{module}:{name}",
        "seed": 0,
        "imports": list(imports),
        "function": {"module": module, "name": name, "version": str(version), "args": {}},
        # one grid key whose values are the points' whole settings (a grid's values must be
        # distinct per key, which the single settings of a list of points need not be)
        "grid": {"function.args": points},
    }
    sweep = Sweep.from_dict(spec, max_configurations=len(points))
    out = Path(out)
    res = run_sweep(
        sweep,
        out,
        jobs=jobs,
        dask=dask,
        scheduler=scheduler,
        cache=cache if cache is not None else out / "cache",
        progress=progress,
        overwrite=True,
    )
    if res.summary.invalid:
        first = min(res.summary.invalid)
        warnings.warn(
            f"{len(res.summary.invalid)} cache entries of {module}:{name} were not used and "
            f"were recomputed (point {first}: {res.summary.invalid[first]})",
            stacklevel=2,
        )
    frames = [res.config_frame(i) for i in range(len(points))]
    failed = res.summary.failed
    if failed and raise_on_failure:
        raise SweepPointError(f"{module}:{name}", failed, points)
    return PointsResult(frames, res.summary)
