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
               mean at step k), ``"wavg1"`` / ``"wavg2"`` (weights ``(j + tau)`` /
               ``(j + tau)^2`` over steps 1..k; only from ``simulate(...,
               weight_shift=tau)``) or ``"state"`` (algorithm-specific metrics)
``metric``     ``excess_risk``, ``hnorm2``, ``dist2`` or an algorithm metric
``mean``       mean over non-diverged replicates, ``(1/n) sum_r x_r``
``se``         standard error of the mean, ``s / sqrt(n)`` with the sample variance
               ``s^2 = sum_r (x_r - mean)^2 / (n - 1)``; ``inf`` when ``n = 1`` (one value
               has no spread estimate); 0 for exact engines
``count``      number of replicates in the mean, ``n`` (survivors: see :class:`Result`)
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

from .recording import WEIGHTED_ITERATES

if TYPE_CHECKING:  # pandas is imported lazily: `import convkit` stays fast
    import pandas as pd

__all__ = ["FRAME_COLUMNS", "Result", "json_default", "summarize"]

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

    ``values`` has shape ``(..., R)``; ``valid`` broadcasts against it.  Over the ``n``
    valid finite entries: ``mean = (1/n) sum x_r``, ``se = s / sqrt(n)`` with
    ``s^2 = sum (x_r - mean)^2 / (n - 1)``; ``se = inf`` when ``n = 1`` (``mean`` is NaN and
    ``se`` inf when ``n = 0``: such rows are dropped from the frame).
    """
    valid = np.broadcast_to(valid, values.shape) & np.isfinite(values)
    count = valid.sum(axis=-1)
    x = np.where(valid, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = x.sum(axis=-1) / count
        dev = np.where(valid, values - mean[..., None], 0.0)
        var = (dev**2).sum(axis=-1) / (count - 1)
        se = np.sqrt(var / count)
    se = np.where(count > 1, se, np.inf)  # one replicate: no estimate of its spread
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

    def diverged_by(self) -> np.ndarray:
        """(n_rec,) replicates diverged at or before each record step (excluded there)."""
        div = np.asarray(self.diverged_at)
        return ((div[None, :] > 0) & (div[None, :] <= self.steps[:, None])).sum(axis=1)


@dataclass
class Result:
    """Outcome of :func:`convkit.simulate` (or of an exact engine).

    Queries: :meth:`curve` (one curve), :meth:`final` (the last reported point of every
    configuration), :meth:`compare` (paired comparison under common random numbers),
    :attr:`diverged` (one row per diverged replicate).  An unknown configuration, metric or
    iterate raises a ``ValueError`` that names it and lists those that exist.

    **After divergence.** A replicate that diverges at local step ``k_r`` (listed in
    :attr:`diverged`) counts at the record steps before ``k_r`` only, so ``count`` is the
    number of survivors.  A configuration's rows stop at its last record step with at least
    one surviving replicate: there is no row after it, and no NaN anywhere.  With a single
    survivor ``se = inf`` (one value carries no estimate of its spread; keep ``count >= 2``
    before a within-k-SE test).  :meth:`curve` and :meth:`final` add ``diverged``, the
    replicates diverged at or before the row's step.  :meth:`final` reports every
    configuration at its last scheduled record step (never an earlier one): the survivors'
    mean, or, when every replicate diverged before it, ``mean = se = inf`` with ``count = 0``
    and ``all_diverged = True``.  :meth:`compare` has a row only at the steps where at least one
    replicate survives in both configurations (paired), ``count`` of them; ``diff_se`` and
    ``ratio_se`` are ``inf`` for a single pair, and a zero baseline mean gives
    ``ratio = +-inf`` with ``ratio_se = inf``.  Exact engines (one pseudo-replicate holding
    expectations) report ``se = 0`` and drop the record steps after a mean-square divergence.
    """

    frame: pd.DataFrame
    meta: dict[str, Any]
    values: dict[str, ConfigValues] = field(default_factory=dict, repr=False)

    # ---------------------------------------------------------------- queries
    @property
    def configs(self) -> list[str]:
        return list(dict.fromkeys([*self.frame["config"], *self.values]))

    def _check_config(self, config: str, role: str = "config") -> str:
        if config not in self.configs:
            raise ValueError(f"unknown {role} {config!r}; the configurations are {self.configs}")
        return config

    def _check_names(self, metric: str, iterate: str, frame: pd.DataFrame) -> None:
        """``metric`` and ``iterate`` must occur in ``frame`` (and together)."""
        metrics = list(dict.fromkeys(frame["metric"]))
        iterates = list(dict.fromkeys(frame["iterate"]))
        if metric not in metrics:
            raise ValueError(f"unknown metric {metric!r}; the metrics are {metrics}")
        if iterate not in iterates:
            raise ValueError(
                f"unknown iterate {iterate!r}; the iterates are {iterates}{_hint(iterate)}"
            )
        have = list(dict.fromkeys(frame.loc[frame["metric"] == metric, "iterate"]))
        if iterate not in have:
            raise ValueError(
                f"metric {metric!r} has no rows for iterate {iterate!r}; its iterates are {have}"
            )

    def _last_record_step(self, config: str, reported: int) -> int:
        """The configuration's last scheduled record step (``reported`` if unknown)."""
        if config in self.values:
            return int(np.max(self.values[config].steps))
        algo = self.meta.get("algorithms", {}).get(config, {})
        if isinstance(algo, dict) and "local_steps" in algo:
            return int(algo["local_steps"])
        return int(reported)

    def _add_diverged(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Column ``diverged`` (replicates diverged by the row's step), if values are held."""
        if not all(c in self.values for c in rows["config"].unique()):
            return rows
        out = np.zeros(len(rows), dtype=np.int64)
        for name, idx in rows.groupby("config", sort=False).indices.items():
            cv = self.values[name]
            by = cv.diverged_by()
            pos = np.searchsorted(cv.steps, rows["step"].to_numpy()[idx])
            out[idx] = by[np.minimum(pos, by.size - 1)]
        return rows.assign(diverged=out)

    def curve(
        self, config: str | None = None, metric: str = "hnorm2", iterate: str = "avg"
    ) -> pd.DataFrame:
        """Rows of one curve (one config, metric and iterate), sorted by step, with the
        column ``diverged`` (replicates diverged by each step; when values are held).  The
        curve stops at the last record step with a surviving replicate (see :class:`Result`).
        """

        config = self._check_config(config if config is not None else self.configs[0])
        mine = self.frame[self.frame.config == config]
        if mine.empty:
            raise ValueError(
                f"configuration {config!r} has no rows: every replicate diverged before its "
                "first record step (see Result.diverged)"
            )
        self._check_names(metric, iterate, mine)
        sel = mine[(mine.metric == metric) & (mine.iterate == iterate)]
        return self._add_diverged(sel.sort_values("step").reset_index(drop=True))

    def final(self, metric: str = "hnorm2", iterate: str = "avg") -> pd.DataFrame:
        """Every configuration at its last scheduled record step (one row each, sorted by
        config), never at an earlier step.

        Defaults: ``metric="hnorm2"`` (``||theta - theta*||_H^2``) of ``iterate="avg"`` (the
        Polyak-Ruppert average); ``final(metric="excess_risk", iterate="last")`` gives
        ``f(theta) - f*`` of the last iterate (the workers' mean at the last step).

        The row is the frame's row at that step: the mean over the replicates that survive
        to it (``count`` of them) with ``diverged``, the replicates diverged by then (when
        values are held).  A configuration whose every replicate diverged before its last
        step has no frame row there; :meth:`final` reports it at that step all the same,
        with ``mean = se = +inf``, ``count = 0``, ``diverged = R`` and the axes
        (``gradients``, ``rounds``, ...) of that step: a diverged error is infinite, and
        taking the last finite value instead would compare configurations at different
        steps (the behaviour before).  Extra columns: ``last_step`` (the step of the row,
        the configuration's last scheduled record step) and ``all_diverged`` (every replicate
        diverged before it: the row's ``mean`` is ``inf``).  A configuration without a row
        at its last step that is not explained by divergence raises ``ValueError``.
        """
        import pandas as pd

        self._check_names(metric, iterate, self.frame)
        f = self.frame[(self.frame.metric == metric) & (self.frame.iterate == iterate)]
        rows = []
        for config in sorted(set(f["config"]) | self._reported_then_diverged(metric, iterate)):
            mine = f.loc[f.config == config, "step"]
            last = self._last_record_step(config, int(mine.max()) if len(mine) else 0)
            at = f[(f.config == config) & (f.step == last)]
            if len(at):
                rows.append(at.iloc[[0]].assign(all_diverged=False))
            else:
                rows.append(self._diverged_row(config, last, metric, iterate))
        out = pd.concat(rows, ignore_index=True)
        out.insert(out.columns.get_loc("count") + 1, "last_step", out["step"].astype(np.int64))
        out = self._add_diverged(out)
        return out[[c for c in out.columns if c != "all_diverged"] + ["all_diverged"]]

    def _reported_then_diverged(self, metric: str, iterate: str) -> set[str]:
        """Configurations whose every replicate diverged and that record ``(iterate,
        metric)``: in their layout and, for an algorithm metric (iterate ``"state"``, whose
        layout the algorithms of a call may share), with a value before the divergence.
        They may have no frame row of it at all (a tail that had not started)."""
        out = set()
        for name, cv in self.values.items():
            if metric not in cv.metrics or iterate not in cv.iterates:
                continue
            if not (cv.diverged_at.size and np.all(cv.diverged_at > 0)):
                continue
            if iterate == "state":
                v = cv.values[:, cv.iterates.index(iterate), cv.metrics.index(metric), :]
                if not np.any(np.isfinite(v) & cv.valid_mask()[:, 0, 0, :]):
                    continue
            out.add(name)
        return out

    def _diverged_row(self, config: str, step: int, metric: str, iterate: str) -> pd.DataFrame:
        """The :meth:`final` row of a configuration whose every replicate diverged before
        ``step``: ``mean = se = inf``, ``count = 0``, the axes of ``step``."""
        import pandas as pd

        cv = self.values.get(config)
        if cv is None or not np.all(cv.diverged_by()[cv.steps == step] == cv.diverged_at.size):
            raise ValueError(
                f"configuration {config!r} has no {iterate!r} {metric!r} row at its last record "
                f"step {step}, and its replicates did not all diverge before it (see "
                "Result.diverged); final() reports only the last step"
            )
        i = int(np.flatnonzero(cv.steps == step)[0])
        row = {"config": config, "step": step}
        row.update({ax: cv.axes[ax][i] for ax in ("gradients", "rounds", "messages", "bits")})
        row.update(iterate=iterate, metric=metric, mean=np.inf, se=np.inf, count=0)
        frame = pd.DataFrame([row]).astype({c: self.frame[c].dtype for c in self.frame.columns})
        return frame.assign(all_diverged=True)

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
        step k).  Rows are the record steps the two share at which ``count = n >= 1``
        replicates survive in both (paired: the same replicates on both sides).  With
        ``a_r, b_r`` the paired values, ``mean``/``baseline_mean`` their means ``mu_a, mu_b``:

        * ``diff = mu_a - mu_b`` (the mean of the per-replicate differences), ``diff_se =
          sd(a_r - b_r) / sqrt(n)`` (sample sd, ddof 1);
        * ``ratio = R = mu_a / mu_b`` with ``ratio_se`` from the delta method with the paired
          covariance: ``Var(R) ~ (Var a - 2 R Cov(a, b) + R^2 Var b) / (n mu_b^2)``, i.e.
          ``ratio_se = sd(a_r - R b_r) / (sqrt(n) |mu_b|)``.

        A single pair gives ``diff_se = ratio_se = inf``; ``mu_b = 0`` gives
        ``ratio = +-inf`` (``+inf`` for 0/0) and ``ratio_se = inf``.  An exact result (one
        pseudo-replicate holding expectations) has ``diff_se = ratio_se = 0``.  Never NaN.
        """
        import pandas as pd

        if not self.values:
            raise ValueError(
                "compare needs the per-replicate values (Result.values), which this result "
                "does not hold (a frame alone cannot give paired standard errors)"
            )
        labels = list(self.values)
        if config not in self.values:
            raise ValueError(f"unknown config {config!r}; the configurations are {labels}")
        baseline = baseline if baseline is not None else self.configs[0]
        if baseline not in self.values:
            raise ValueError(f"unknown baseline {baseline!r}; the configurations are {labels}")
        a, b = self.values[config], self.values[baseline]
        for cv in (a, b):
            if metric not in cv.metrics:
                raise ValueError(f"unknown metric {metric!r}; the metrics are {cv.metrics}")
            if iterate not in cv.iterates:
                raise ValueError(
                    f"unknown iterate {iterate!r}; the iterates are {cv.iterates}{_hint(iterate)}"
                )
        common, ia, ib = np.intersect1d(a.steps, b.steps, return_indices=True)
        va = a.values[ia, a.iterates.index(iterate), a.metrics.index(metric), :]
        vb = b.values[ib, b.iterates.index(iterate), b.metrics.index(metric), :]
        for cv in (a, b):  # a metric defined for some iterates only (algorithm metrics)
            x = np.isfinite(cv.values[:, :, cv.metrics.index(metric), :]).any(axis=(0, 2))
            have = [it for it, h in zip(cv.iterates, x, strict=True) if h]
            if have and iterate not in have:
                raise ValueError(
                    f"metric {metric!r} has no rows for iterate {iterate!r}; "
                    f"its iterates are {have}"
                )
        ok = a.valid_mask()[ia, 0, 0, :] & b.valid_mask()[ib, 0, 0, :]
        ok &= np.isfinite(va) & np.isfinite(vb)
        n = ok.sum(axis=1)
        keep = n > 0  # steps where at least one replicate survives in both
        common, va, vb, ok, n = common[keep], va[keep], vb[keep], ok[keep], n[keep]
        exact = self.meta.get("engine") == "exact"
        with np.errstate(invalid="ignore", divide="ignore"):
            ma = np.where(ok, va, 0).sum(1) / n
            mb = np.where(ok, vb, 0).sum(1) / n
            da = np.where(ok, va - ma[:, None], 0)
            db = np.where(ok, vb - mb[:, None], 0)
            zero = mb == 0
            ratio = np.where(zero, np.copysign(np.inf, ma), ma / np.where(zero, 1, mb))
            r = np.where(zero, 0, ratio)[:, None]
            dof = np.maximum(n - 1, 1)
            diff_se = np.sqrt(((da - db) ** 2).sum(1) / dof / n)
            ratio_se = np.sqrt(((da - r * db) ** 2).sum(1) / dof / n) / np.where(
                zero, 1, np.abs(mb)
            )
        if exact:
            diff_se, ratio_se = np.zeros_like(ma), np.zeros_like(ma)
        else:
            diff_se = np.where(n > 1, diff_se, np.inf)
            ratio_se = np.where(n > 1, ratio_se, np.inf)
        ratio_se = np.where(zero, np.inf, ratio_se)
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
        (path / "meta.json").write_text(json.dumps(self.meta, indent=2, default=json_default))
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


def json_default(o: Any) -> Any:
    """``json.dumps(..., default=json_default)`` of results' and sweeps' metadata: NumPy
    integers, floats and booleans as Python numbers and booleans, arrays as lists, anything
    else as its ``str``."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
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


def _hint(iterate: str) -> str:
    """Where a missing weighted average comes from (appended to an unknown-iterate error)."""
    if iterate not in WEIGHTED_ITERATES:
        return ""
    return (
        " (the weighted averages are recorded by simulate(..., weight_shift=tau) only; the "
        "exact engine does not compute them)"
    )
