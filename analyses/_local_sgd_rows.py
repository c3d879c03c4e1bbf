"""Rows of a Local-SGD cell from its final errors: one row builder for the exact cells
(least squares, :class:`ExactErrors`: replicates with zero error) and the Monte Carlo cells
(logistic regression, :class:`StagedErrors`: the pilot and the precision top-ups of
``_local_sgd_cells.logistic_cell``, each schedule on the stages it took part in).

Error of a row: the mean final error with its standard error; ``ratio_to_mba = mean(e) /
mean(e_MBA)`` on the same replicates with the paired delta-method standard error
(:func:`convkit.checks.paired_ratio`), ``ratio_to_even`` likewise against even spacing at the
same ``N``; ``best`` chosen on the even-numbered replicates and reported on the odd-numbered
ones (exact cells: the exact minimiser).  Not an analysis itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from convkit.checks import mean_se, paired_ratio


def _rounds(comm: Any, n: int) -> int:
    return int(comm.rounds(n))


def _row(cell: Any, schedule: str, N: int, rounds: int, R: int, **v: float) -> dict[str, Any]:
    return dict(
        problem=cell.problem,
        d=cell.d,
        spectrum=cell.spectrum,
        start=cell.start,
        theta_norm=float(cell.theta_norm),
        CL=float(cell.CL),
        alpha=float(cell.alpha),
        T=int(cell.T),
        P=int(cell.P),
        n=int(cell.n),
        schedule=schedule,
        N=int(N),
        rounds=int(rounds),
        replicates=int(R),
        **v,
    )


class ExactErrors:
    """The exact errors of a least-squares cell, read as replicates with zero error: means
    are the errors, ratios their quotients, every standard error 0, and ``best`` the exact
    minimiser (no selection bias to hold out)."""

    def __init__(self, err: np.ndarray) -> None:
        self.err = np.asarray(err, dtype=float)

    def count(self, k: int) -> int:
        return 0

    def mean_se(self, k: int) -> tuple[float, float]:
        return float(self.err[k]), 0.0

    def ratio(self, k: int, j: int) -> tuple[float, float]:
        return float(self.err[k] / self.err[j]), 0.0

    def best(self, cand: list[int], others: tuple[int, ...]) -> tuple[int, ExactErrors]:
        """The candidate of least error, and the errors on which it is reported (the same)."""
        return min(cand, key=lambda k: self.err[k]), self


class StagedErrors:
    """Final errors of a Monte Carlo cell by stage: the pilot (every configuration) and the
    precision top-ups (each a :func:`convkit.simulate` call on its own seed with the
    configurations that needed it, MBA and their partners, on common random numbers).

    A configuration's sample is its errors over the stages it took part in; a ratio pairs two
    configurations on the stages both took part in (per-replicate errors of an algorithm do
    not depend on the other algorithms of a call, so a configuration's sample is the one a
    call with every configuration would give it).  In each stage the replicates where a
    member's error is not finite are dropped for every member of the stage."""

    def __init__(self, n_cfg: int) -> None:
        self.n_cfg = n_cfg
        self.stages: list[tuple[tuple[int, ...], np.ndarray]] = []

    def add(self, members: tuple[int, ...], E: np.ndarray) -> None:
        """Add a stage: errors ``E`` (member, replicate) of the configurations ``members``."""
        self.stages.append((members, E[:, np.all(np.isfinite(E), axis=0)]))

    def errors(self, *configs: int) -> tuple[np.ndarray, ...]:
        """Errors of each of ``configs`` on the stages where all of them took part (the
        pilot always; a top-up of a group with its MBA and partners)."""
        out: list[list[np.ndarray]] = [[] for _ in configs]
        for members, E in self.stages:
            if all(c in members for c in configs):
                for slot, c in enumerate(configs):
                    out[slot].append(E[members.index(c)])
        return tuple(np.concatenate(parts) for parts in out)

    def count(self, *configs: int) -> int:
        """Replicates on the stages where all of ``configs`` took part."""
        return int(sum(E.shape[1] for m, E in self.stages if all(c in m for c in configs)))

    def mean_se(self, k: int) -> tuple[float, float]:
        return mean_se(self.errors(k)[0])

    def ratio(self, k: int, j: int) -> tuple[float, float]:
        e, b = self.errors(k, j)
        return paired_ratio(e, b, single="nan")

    def best(self, cand: list[int], others: tuple[int, ...]) -> tuple[int, HeldOut]:
        """The candidate of least mean error on the even-numbered replicates of the
        candidates' common sample, and the odd-numbered (held-out) replicates of the chosen
        one and of ``others`` on which it is reported."""
        E = np.asarray(self.errors(cand[0], *cand[1:], *others))
        R = E.shape[1]
        sel, held = np.arange(0, R, 2), np.arange(1, R, 2)
        pos = min(range(len(cand)), key=lambda i: E[i, sel].mean())
        rows = {c: E[len(cand) + i, held] for i, c in enumerate(others)}
        rows[cand[pos]] = E[pos, held]
        return cand[pos], HeldOut(rows)


class HeldOut:
    """The held-out replicates on which a selected configuration is reported."""

    def __init__(self, rows: dict[int, np.ndarray]) -> None:
        self.rows = rows

    def count(self, k: int) -> int:
        return int(self.rows[k].size)

    def mean_se(self, k: int) -> tuple[float, float]:
        return mean_se(self.rows[k])

    def ratio(self, k: int, j: int) -> tuple[float, float]:
        return paired_ratio(self.rows[k], self.rows[j], single="nan")


def cell_rows(
    cell: Any, cfg: list[dict[str, Any]], errors: Any, family_n: tuple[int, ...]
) -> pd.DataFrame:
    """Rows of a cell from its errors (:class:`ExactErrors` or :class:`StagedErrors`): one per
    configuration (``ratio_to_mba``; families also ``ratio_to_even`` at their ``N``), then
    ``best`` at each family budget ``N`` of ``family_n`` (the power of least error, see
    ``_local_sgd_cells.logistic_cell`` and ``least_squares_cell``), ``replicates`` the count
    each row's numbers rest on; ``cell``: a ``_local_sgd_cells.Cell``."""
    labels = [c["label"] for c in cfg]
    rows = []
    for k, c in enumerate(cfg):
        m, s = errors.mean_se(k)
        r, rs = (1.0, 0.0) if c["schedule"] == "mba" else errors.ratio(k, 0)
        re, res_ = np.nan, np.nan
        if c["schedule"] not in ("mba", "osa", "even") and f"even:{c['N']}" in labels:
            re, res_ = errors.ratio(k, labels.index(f"even:{c['N']}"))
        rows.append(
            _row(
                cell,
                c["schedule"],
                c["N"],
                _rounds(c["comm"], cell.n),
                errors.count(k),
                err=m,
                err_se=s,
                ratio_to_mba=r,
                ratio_se=rs,
                p=c["p"],
                ratio_to_even=re,
                ratio_to_even_se=res_,
            )
        )
    for N in family_n:
        if f"even:{N}" not in labels:
            continue
        cand = [i for i, c in enumerate(cfg) if c["N"] == N and np.isfinite(c["p"])]
        j = labels.index(f"even:{N}")
        i, on = errors.best(cand, (0, j))
        m, s = on.mean_se(i)
        r, rs = on.ratio(i, 0)
        re, res_ = on.ratio(i, j)
        rows.append(
            _row(
                cell,
                "best",
                N,
                _rounds(cfg[i]["comm"], cell.n),
                on.count(i),
                err=m,
                err_se=s,
                ratio_to_mba=r,
                ratio_se=rs,
                p=cfg[i]["p"],
                ratio_to_even=re,
                ratio_to_even_se=res_,
            )
        )
    return pd.DataFrame(rows)
