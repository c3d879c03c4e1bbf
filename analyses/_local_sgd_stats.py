"""Statistics of the Local-SGD large-step studies, computed from the CSV rows alone (so that
``convkit figures --checks-only`` and the README facts need nothing else).

* :func:`nstar_table`: ``N*(eps) = min{N : err(N) <= (1 + eps) err(MBA)}`` of each cell from its
  evenly spaced curve (``osa`` at ``N = 1``, ``even`` rows, ``mba`` at ``N = n`` with ratio 1),
  located by :func:`analyses.local_sgd_threshold_mc.locate` (log-interpolated crossing, one-sided
  95 % bracket), with a status: ``interior`` (the crossing lies below the largest evenly spaced
  ``N`` of the grid that is below ``n``), ``capped`` (every ``N < n`` of the grid still fails:
  the crossing is interpolated towards ``n`` itself, so the value is bounded by ``n``, not
  measured), ``osa_suffices``, ``not_identifiable`` or ``imprecise`` (a located crossing whose
  two bracketing points, or an ``osa_suffices`` whose OSA point, miss the precision a verdict
  needs, :func:`analyses._local_sgd_cells.precise`: such a cell carries no ``N*``).  The 95 % interval is a parametric
  bootstrap of the curve: each point redrawn as ``ratio + ratio_se Z`` with independent normal
  ``Z`` (the CSV keeps no per-replicate errors; the paired bootstrap over replicates of
  ``local_sgd_threshold_mc`` needs them), the crossing recomputed, the 2.5-97.5 % quantiles
  taken, and ``se(log N*)`` as half the 16-84 % range.
* :func:`power_fit`: weighted least squares of ``log y`` on ``log T`` and ``log P`` jointly
  (weights ``1 / var(log y)``, ``var(log y) = (se / y)^2`` by the delta method), 95 % normal
  intervals widened by ``sqrt(chi2/dof)`` when the power law fits worse than the standard errors
  allow, and the fit's adequacy (:func:`convkit.checks.fit_adequacy`: ``chi2/dof`` inside its
  central 99 % range), without which no exponent verdict can hold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from analyses._local_sgd_cells import precise
from convkit import verdicts as V

EPS = (0.1, 0.25)
Z95 = 1.959963984540054


def _locate(N: np.ndarray, r: np.ndarray, s: np.ndarray, eps: float) -> dict[str, Any]:
    from analyses.local_sgd_threshold_mc import locate

    return locate(N, r, s, eps)


def cell_curve(g: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(N, ratio, ratio_se)`` of the evenly spaced curve of one cell (sorted by ``N``; OSA
    first, MBA last)."""
    parts = g[g.schedule.isin(["osa", "even", "mba"])].sort_values("N")
    parts = parts.drop_duplicates("N")
    return (
        parts.N.to_numpy(float),
        parts.ratio_to_mba.to_numpy(float),
        parts.ratio_se.to_numpy(float),
    )


def crossings(N: np.ndarray, draws: np.ndarray, eps: float) -> np.ndarray:
    """Point estimates of ``N*`` for each row of ``draws`` (ratio curves on the grid ``N``),
    vectorized, with the rule of :func:`convkit.checks.find_threshold`: the first grid index
    from which ``ratio <= 1 + eps`` holds to the end, log-interpolated with the point before
    it (``N[0]`` when it holds everywhere; ``N[-1]`` when it fails at the last point)."""
    margin = draws - (1.0 + eps)
    holds = margin <= 0
    K = N.size
    # last failing index + 1 (0 when every point holds)
    fail_idx = np.where(~holds, np.arange(K)[None, :], -1)
    i = fail_idx.max(axis=1) + 1
    out = np.full(draws.shape[0], float(N[-1]))
    ok = i < K
    first = ok & (i == 0)
    out[first] = float(N[0])
    mid = ok & (i > 0)
    j = i[mid]
    rows = np.nonzero(mid)[0]
    m0, m1 = margin[rows, j - 1], margin[rows, j]
    t = np.where(m0 != m1, m0 / np.where(m0 != m1, m0 - m1, 1.0), 1.0)
    lx0, lx1 = np.log(N[j - 1]), np.log(N[j])
    out[mid] = np.exp(lx0 + t * (lx1 - lx0))
    return out


def parametric_bootstrap_nstar(
    N: np.ndarray, r: np.ndarray, s: np.ndarray, eps: float, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float, float]:
    """Parametric bootstrap of ``N*`` from the ratio curve's means ``r`` and standard errors
    ``s`` (normal draws per point; see the module docstring): ``(se_log, q025, q975)``. (The
    paired bootstrap over replicates is
    :func:`analyses.local_sgd_threshold_mc.paired_bootstrap_nstar`.)"""
    rng = np.random.default_rng(seed)
    draws = r[None, :] + s[None, :] * rng.standard_normal((n_boot, r.size))
    draws[:, -1] = 1.0  # MBA against itself
    logs = np.log(crossings(np.asarray(N, float), draws, eps))
    q025, q16, q84, q975 = np.quantile(logs, [0.025, 0.16, 0.84, 0.975])
    return float((q84 - q16) / 2), float(math.exp(q025)), float(math.exp(q975))


CELL_KEYS = ["problem", "d", "theta_norm", "CL", "alpha", "T", "P"]


def nstar_table(df: pd.DataFrame, eps_list: tuple[float, ...] = EPS, keys=None) -> pd.DataFrame:
    """One row per (cell, eps): ``N_star``, ``status``, ``N_lo``/``N_hi`` (95 % bootstrap
    percentile interval), ``se_log``, ``n``, ``ratio_osa`` (see the module docstring)."""
    keys = keys or [k for k in CELL_KEYS + ["spectrum", "start"] if k in df.columns]
    rows = []
    for ck_, g in df.groupby(keys, sort=True):
        N, r, s = cell_curve(g)
        n = int(g.n.iloc[0])
        if N.size < 2 or N[-1] != n:
            continue
        even_below = N[(N > 1) & (N < n)]
        for j, eps in enumerate(eps_list):
            loc = _locate(N, r, s, eps)
            status = loc["status"]
            nstar, lo, hi, se_log = loc["N_star"], math.nan, math.nan, math.nan
            if status == "interior":
                first = loc["first_holding"]
                i = int(np.searchsorted(N, first))
                if even_below.size == 0 or first >= n:
                    status = "capped"
                elif not precise(r[i - 1 : i + 1], s[i - 1 : i + 1]).all():
                    status = "imprecise"
                if float(s.max()) == 0.0:
                    lo = hi = nstar
                    se_log = 0.0
                else:
                    se_log, lo, hi = parametric_bootstrap_nstar(N, r, s, eps, seed=17 + j)
            elif status == "not_identifiable" and (r[:-1] - 1 - eps - 2 * s[:-1] > 0).all():
                status = "capped"
            elif status == "osa_suffices" and not precise(r[0], s[0]):
                status = "imprecise"
            row = dict(zip(keys, ck_, strict=True))
            row.update(
                eps=eps,
                n=n,
                N_star=nstar,
                status=status,
                N_lo=lo,
                N_hi=hi,
                se_log=se_log,
                ratio_osa=float(r[0]),
                ratio_osa_se=float(s[0]),
                N_max_even=float(even_below.max()) if even_below.size else math.nan,
            )
            rows.append(row)
    return pd.DataFrame(rows)


def power_fit(
    T: Any, P: Any, y: Any, se: Any, vars_: tuple[str, ...] = ("T", "P")
) -> dict[str, Any]:
    """Joint weighted log-log fit ``log y = c + a_T log T + a_P log P`` (``vars_`` chooses the
    regressors).  Returns ``slopes`` and ``intervals`` (dicts by variable, 95 %, widened by
    ``sqrt(chi2/dof)`` when above 1), ``chi2_dof``, ``dof``, ``adequate`` / ``adequacy``
    (:func:`convkit.checks.fit_adequacy`), ``n_points``, ``intercept``; NaN when the points
    do not determine the slopes."""
    from convkit.checks import fit_adequacy

    T, P, y, se = (np.asarray(v, dtype=float) for v in (T, P, y, se))
    ok = (y > 0) & np.isfinite(y) & np.isfinite(se) & (se > 0)
    T, P, y, se = T[ok], P[ok], y[ok], se[ok]
    cols = {"T": np.log(T), "P": np.log(P)}
    X = np.column_stack([np.ones_like(y)] + [cols[v] for v in vars_])
    k = X.shape[1]
    nan = {v: math.nan for v in vars_}
    out: dict[str, Any] = dict(
        slopes=dict(nan),
        intervals={v: (math.nan, math.nan) for v in vars_},
        chi2_dof=math.nan,
        dof=int(y.size) - k,
        adequate=None,
        adequacy="too few points to fit",
        n_points=int(y.size),
        intercept=math.nan,
    )
    if y.size < k + 1 or np.linalg.matrix_rank(X) < k:
        return out
    w = (y / se) ** 2
    A = X.T @ (w[:, None] * X)
    cov = np.linalg.inv(A)
    beta = cov @ (X.T @ (w * np.log(y)))
    resid = np.log(y) - X @ beta
    chi2 = float(np.sum(w * resid**2) / (y.size - k))
    infl = V.misfit_inflation(chi2)  # the verdict rule: widened by sqrt(max(1, chi2/dof))
    sd = np.sqrt(np.diag(cov)) * infl
    for i, v in enumerate(vars_, start=1):
        out["slopes"][v] = float(beta[i])
        out["intervals"][v] = (float(beta[i] - Z95 * sd[i]), float(beta[i] + Z95 * sd[i]))
    adequate, adequacy = fit_adequacy(chi2, y.size - k)
    out.update(chi2_dof=chi2, intercept=float(beta[0]), adequate=adequate, adequacy=adequacy)
    return out


def adequate_windows(
    T: Any, P: Any, y: Any, se: Any, min_points: int = 8
) -> list[tuple[float, dict[str, Any]]]:
    """Every window ``T >= T_min`` (``T_min`` from the ``T`` values present, smallest first)
    with at least ``min_points`` points and two values of ``T`` over which the joint power law
    of :func:`power_fit` is adequate, as ``(T_min, fit)``. A verdict on a window chosen from
    the data holds only when every one of these agrees
    (:func:`convkit.verdicts.window_agreement`)."""
    T, P, y, se = (np.asarray(v, dtype=float) for v in (T, P, y, se))
    out = []
    for t_min in np.unique(T):
        keep = T >= t_min
        if keep.sum() < min_points or np.unique(T[keep]).size < 2:
            break
        f = power_fit(T[keep], P[keep], y[keep], se[keep])
        if f["adequate"] and f["n_points"] >= min_points:
            out.append((float(t_min), f))
    return out


def adequate_window(
    T: Any, P: Any, y: Any, se: Any, min_points: int = 8
) -> tuple[float, dict[str, Any]] | None:
    """The longest window ``T >= T_min`` (``T_min`` from the ``T`` values present, smallest
    first) over which the joint power law of :func:`power_fit` is adequate (``chi2/dof`` not
    above its 99 % range), with at least ``min_points`` points and two values of ``T``;
    ``(T_min, fit)``, or ``None`` when no such window exists.  A window chosen from the data
    is reported as such: it says where a power law describes the points, not that the
    exponent is the asymptotic one."""
    T, P, y, se = (np.asarray(v, dtype=float) for v in (T, P, y, se))
    for t_min in np.unique(T):
        keep = T >= t_min
        if keep.sum() < min_points or np.unique(T[keep]).size < 2:
            return None
        f = power_fit(T[keep], P[keep], y[keep], se[keep])
        if f["adequate"] and f["n_points"] >= min_points:
            return float(t_min), f
    return None
