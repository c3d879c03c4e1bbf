"""Simulation results: a tidy frame, per-replicate values and metadata.

``Result.frame`` has one row per (configuration, record point, iterate, metric):

=============  ====================================================================
column         meaning
=============  ====================================================================
``config``     the algorithm's label
``step``       local step k (1-based)
``gradients``  stochastic gradients used by all workers so far, ``k P b``
``rounds``     communication rounds so far
``messages``   messages sent so far
``bits``       bits sent so far
``iterate``    ``"avg"`` (Polyak-Ruppert, uniform over steps 1..k), ``"tail"``
               (average over steps s..k, s = start of the tail), ``"last"`` (worker
               mean at step k) or ``"state"`` (algorithm-specific metrics)
``metric``     ``excess_risk``, ``hnorm2``, ``dist2`` or an algorithm metric
``mean``       mean over non-diverged replicates
``se``         standard error of the mean (sample std / sqrt(count)); 0 for exact engines
``count``      number of replicates in the mean
=============  ====================================================================

``Result.values[config]`` holds the per-replicate values (shape
``(records, iterates, metrics, R)``), from which :meth:`Result.compare` computes paired
differences and ratios under common random numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported lazily: `import convkit` stays fast
    import pandas as pd

__all__ = ["FRAME_COLUMNS", "Result", "summarize"]

FRAME_COLUMNS = [
    "config",
    "step",
    "gradients",
    "rounds",
    "messages",
    "bits",
    "iterate",
    "metric",
    "mean",
    "se",
    "count",
]


def summarize(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, standard error and count along the last axis over entries where ``valid``.

    ``values`` has shape ``(..., R)``; ``valid`` broadcasts against it.
    """
    valid = np.broadcast_to(valid, values.shape) & np.isfinite(values)
    count = valid.sum(axis=-1)
    x = np.where(valid, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = x.sum(axis=-1) / count
        dev = np.where(valid, values - mean[..., None], 0.0)
        var = (dev**2).sum(axis=-1) / (count - 1)
        se = np.sqrt(var / count)
    se = np.where(count > 1, se, np.nan)
    return mean, se, count


@dataclass
class ConfigValues:
    """Per-replicate values of one configuration."""

    steps: np.ndarray  # (n_rec,) local steps
    axes: dict[str, np.ndarray]  # x-axes at the record points: gradients, rounds, messages, bits
    iterates: list[str]
    metrics: list[str]
    values: np.ndarray  # (n_rec, n_iter, n_metric, R)
    diverged_at: np.ndarray  # (R,) step of divergence, 0 if none

    def valid_mask(self) -> np.ndarray:
        """(n_rec, 1, 1, R): replicate r counts at record k if it had not diverged by k."""
        div = self.diverged_at
        ok = (div[None, :] == 0) | (self.steps[:, None] < div[None, :])
        return ok[:, None, None, :]


@dataclass
class Result:
    """Outcome of :func:`convkit.simulate` (or of an exact engine)."""

    frame: pd.DataFrame
    meta: dict[str, Any]
    values: dict[str, ConfigValues] = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- queries
    @property
    def configs(self) -> list[str]:
        return list(dict.fromkeys(self.frame["config"]))

    def curve(self, config: str | None = None, metric: str = "hnorm2", iterate: str = "avg"):
        """Rows of one curve (one config, metric and iterate), sorted by step."""

        config = config if config is not None else self.configs[0]
        f = self.frame
        sel = f[(f.config == config) & (f.metric == metric) & (f.iterate == iterate)]
        if sel.empty:
            raise KeyError(f"no rows for config={config!r}, metric={metric!r}, iterate={iterate!r}")
        return sel.sort_values("step").reset_index(drop=True)

    def final(self, metric: str = "hnorm2", iterate: str = "avg") -> pd.DataFrame:
        """The last record point of every configuration."""

        f = self.frame[(self.frame.metric == metric) & (self.frame.iterate == iterate)]
        return f.loc[f.groupby("config")["step"].idxmax()].reset_index(drop=True)

    @property
    def diverged(self) -> pd.DataFrame:
        """One row per diverged replicate: config, replicate, step of divergence."""
        import pandas as pd

        rows = [
            {"config": name, "replicate": int(r), "step": int(cv.diverged_at[r])}
            for name, cv in self.values.items()
            for r in np.flatnonzero(cv.diverged_at)
        ]
        return pd.DataFrame(rows, columns=["config", "replicate", "step"])

    def compare(
        self,
        config: str,
        baseline: str | None = None,
        metric: str = "hnorm2",
        iterate: str = "avg",
    ) -> pd.DataFrame:
        """Paired comparison of ``config`` against ``baseline`` under common random numbers.

        Both must have been simulated in the same call (same samples for worker i at local
        step k). Rows are the record steps the two share; columns ``diff`` (mean of
        per-replicate differences config - baseline) with ``diff_se``, and ``ratio`` (ratio of
        means) with ``ratio_se`` from the delta method with the paired covariance:
        ``Var(a/b) ~ (Var a - 2 r Cov(a, b) + r^2 Var b) / (n mu_b^2)``, ``r = mu_a / mu_b``.
        """
        import pandas as pd

        baseline = baseline if baseline is not None else self.configs[0]
        a, b = self.values[config], self.values[baseline]
        common, ia, ib = np.intersect1d(a.steps, b.steps, return_indices=True)
        i_it, i_me = a.iterates.index(iterate), a.metrics.index(metric)
        j_it, j_me = b.iterates.index(iterate), b.metrics.index(metric)
        va = a.values[ia, i_it, i_me, :]
        vb = b.values[ib, j_it, j_me, :]
        ok = a.valid_mask()[ia, 0, 0, :] & b.valid_mask()[ib, 0, 0, :]
        ok &= np.isfinite(va) & np.isfinite(vb)
        n = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ma = np.where(ok, va, 0).sum(1) / n
            mb = np.where(ok, vb, 0).sum(1) / n
            da = np.where(ok, va - ma[:, None], 0)
            db = np.where(ok, vb - mb[:, None], 0)
            var_a = (da**2).sum(1) / (n - 1)
            var_b = (db**2).sum(1) / (n - 1)
            cov = (da * db).sum(1) / (n - 1)
            diff_se = np.sqrt(np.maximum(var_a - 2 * cov + var_b, 0) / n)
            ratio = ma / mb
            ratio_se = np.sqrt(np.maximum(var_a - 2 * ratio * cov + ratio**2 * var_b, 0) / n) / mb
        return pd.DataFrame(
            {
                "config": config,
                "baseline": baseline,
                "step": common,
                "metric": metric,
                "iterate": iterate,
                "mean": ma,
                "baseline_mean": mb,
                "diff": ma - mb,
                "diff_se": diff_se,
                "ratio": ratio,
                "ratio_se": ratio_se,
                "count": n,
            }
        )

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Write the frame (parquet if pyarrow is installed, else CSV), metadata (JSON) and
        per-replicate values (``values.npz``) into the directory ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        try:
            import pyarrow  # noqa: F401

            self.frame.to_parquet(path / "frame.parquet", index=False)
        except ImportError:
            self.frame.to_csv(path / "frame.csv", index=False)
        (path / "meta.json").write_text(json.dumps(self.meta, indent=2, default=_json_default))
        arrays: dict[str, np.ndarray] = {}
        index = {}
        for i, (name, cv) in enumerate(self.values.items()):
            index[str(i)] = {"name": name, "iterates": cv.iterates, "metrics": cv.metrics}
            arrays[f"{i}_steps"] = cv.steps
            arrays[f"{i}_values"] = cv.values
            arrays[f"{i}_diverged_at"] = cv.diverged_at
            for ax, v in cv.axes.items():
                arrays[f"{i}_axis_{ax}"] = v
        if arrays:
            np.savez_compressed(path / "values.npz", **arrays)
            (path / "values.json").write_text(json.dumps(index))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """Read a result written by :meth:`save`."""
        import pandas as pd

        path = Path(path)
        if (path / "frame.parquet").exists():
            frame = pd.read_parquet(path / "frame.parquet")
        else:
            frame = pd.read_csv(path / "frame.csv")
        meta = json.loads((path / "meta.json").read_text())
        values: dict[str, ConfigValues] = {}
        if (path / "values.npz").exists():
            index = json.loads((path / "values.json").read_text())
            with np.load(path / "values.npz") as z:
                for i, info in index.items():
                    axes = {
                        key.split("_axis_", 1)[1]: z[key]
                        for key in z.files
                        if key.startswith(f"{i}_axis_")
                    }
                    values[info["name"]] = ConfigValues(
                        steps=z[f"{i}_steps"],
                        axes=axes,
                        iterates=info["iterates"],
                        metrics=info["metrics"],
                        values=z[f"{i}_values"],
                        diverged_at=z[f"{i}_diverged_at"],
                    )
        return cls(frame, meta, values)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def frame_from_values(values: dict[str, ConfigValues]) -> pd.DataFrame:
    """Tidy frame (see module docstring) from per-replicate values."""
    import pandas as pd

    parts = []
    for name, cv in values.items():
        mean, se, count = summarize(cv.values, cv.valid_mask())
        n_rec, n_it, n_me = mean.shape
        idx_rec = np.repeat(np.arange(n_rec), n_it * n_me)
        part = pd.DataFrame(
            {
                "config": name,
                "step": cv.steps[idx_rec],
                **{ax: cv.axes[ax][idx_rec] for ax in ("gradients", "rounds", "messages", "bits")},
                "iterate": np.tile(np.repeat(cv.iterates, n_me), n_rec),
                "metric": np.tile(cv.metrics, n_rec * n_it),
                "mean": mean.ravel(),
                "se": se.ravel(),
                "count": count.ravel(),
            }
        )
        # rows with nothing to report: tail before its start, algorithm metrics not defined,
        # every replicate diverged
        part = part[part["count"] > 0]
        parts.append(part)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=FRAME_COLUMNS)
    return frame[FRAME_COLUMNS]
