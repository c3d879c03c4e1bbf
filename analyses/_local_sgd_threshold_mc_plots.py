"""Figures of :mod:`analyses.local_sgd_threshold_mc` (N* against T and P, paired ratio curves).

Kept apart so that the analysis module stays short; every function takes the analysis module
``mc`` for its constants (``D``, ``EPS``, ``C_FRAC``, ``PROBLEMS``) and its exponent fit
(``mc.fit``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: Marker of each kind of N* point: one meaning per marker.  Interior Monte Carlo thresholds
#: with their intervals, the exact engine's N* (least squares), settings where one-shot
#: averaging already suffices (N* = 1, a measured answer) and settings where N* is not
#: identifiable (no answer; marked at 1).
MARKERS = {"interior": "o", "exact": "+", "osa_suffices": "v", "not_identifiable": "x"}

_SWEEP_LABEL = {"T": "T, total gradients (P = {p} workers)", "P": "P, workers (T = {t} gradients)"}


def _level_colors(values) -> dict:
    """One colour per level of a swept parameter (eps, T or P): a sequential map, distinct from
    the algorithm palette of :mod:`convkit.plotting` (these are settings of one algorithm)."""
    import matplotlib

    vals = sorted(values)
    cmap = matplotlib.colormaps["viridis"]
    pos = np.linspace(0.05, 0.8, len(vals)) if len(vals) > 1 else [0.4]
    return {v: cmap(x) for v, x in zip(vals, pos, strict=True)}


def _fixed_label(df: pd.DataFrame, var: str) -> str:
    th = df[(df.kind == "threshold") & df.sweep.str.contains(var)]
    other = "P" if var == "T" else "T"
    vals = sorted(th[other].unique())
    v = int(vals[0]) if len(vals) == 1 else "various"
    return _SWEEP_LABEL[var].format(p=v, t=v)


def _fixed_value(df: pd.DataFrame, var: str) -> str:
    """``"P = 16"`` for the T sweep, ``"T = 16384"`` for the P sweep."""
    th = df[(df.kind == "threshold") & df.sweep.str.contains(var)]
    other = "P" if var == "T" else "T"
    vals = sorted(th[other].unique())
    return f"{other} = {int(vals[0])}" if len(vals) == 1 else f"{other} various"


def _figure_legend(fig, axes) -> None:
    """One legend for the whole figure, below the panels (never over data)."""
    handles: dict[str, Any] = {}
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            ncol=min(4, len(handles)),
            fontsize="small",
            frameon=False,
        )


def _threshold_legend(mc: Any, fig, df: pd.DataFrame) -> None:
    """The legend of the N* figures, below the panels: colour = eps, marker = kind of point
    (:data:`MARKERS`, one entry per marker)."""
    from matplotlib.lines import Line2D

    from convkit.plotting import REFERENCE_STYLE, THEORY_STYLE

    th = df[df.kind == "threshold"]
    colors = _level_colors(th.eps.unique())
    handles = [Line2D([], [], color=c, lw=3, label=f"eps = {e}") for e, c in colors.items()]
    k = dict(color="0.2", ls="none")
    handles += [
        Line2D(
            [],
            [],
            marker=MARKERS["interior"],
            ms=5,
            label="Monte Carlo N* (95 % bootstrap interval)",
            **k,
        ),
        Line2D([], [], marker=MARKERS["exact"], ms=8, label="exact N* (least squares)", **k),
        Line2D(
            [],
            [],
            marker=MARKERS["osa_suffices"],
            ms=5,
            label="OSA suffices: N* = 1 (offset by eps)",
            **k,
        ),
        Line2D(
            [],
            [],
            marker=MARKERS["not_identifiable"],
            ms=6,
            label="not identifiable: no N* (marked at 1)",
            **k,
        ),
        Line2D([], [], color="0.2", lw=1, label="fitted power law (slope in the title)"),
        Line2D([], [], label="claim: slope 1/2", **THEORY_STYLE),
        Line2D([], [], label="n = T / P local steps (MBA)", **REFERENCE_STYLE),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize="small", frameon=False)


def _threshold_panel(mc: Any, ax, df: pd.DataFrame, problem: str, alpha: float, var: str) -> str:
    """N* against ``var`` in one panel; returns the fitted slopes as a short text."""
    from convkit.plotting import REFERENCE_STYLE, THEORY_STYLE

    th = df[df.kind == "threshold"]
    g0 = th[(th.problem == problem) & (th.alpha == alpha) & th.sweep.str.contains(var)]
    colors = _level_colors(th.eps.unique())
    slopes = []
    for k, eps in enumerate(sorted(g0.eps.unique())):
        col = colors[eps]
        g = g0[g0.eps == eps].sort_values(var)
        gi = g[g.status == "interior"]
        if "N_star_q025" in gi and gi.N_star_q025.notna().all():
            lo, hi = gi.N_star_q025.to_numpy(float), gi.N_star_q975.to_numpy(float)
        else:
            sl = (gi.N_star_se / gi.N_star).to_numpy(float)
            lo, hi = gi.N_star * np.exp(-1.96 * sl), gi.N_star * np.exp(1.96 * sl)
        y = gi.N_star.to_numpy(float)
        ax.errorbar(
            gi[var],
            y,
            yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)],
            fmt=MARKERS["interior"],
            color=col,
            ms=4,
            capsize=2,
        )
        for status, ms in (("osa_suffices", 5), ("not_identifiable", 6)):
            go = g[g.status == status]  # at 1, offset by eps so that the levels stay apart
            ax.plot(
                go[var],
                np.ones(len(go)) * 2 ** (0.25 * k),
                MARKERS[status],
                ms=ms,
                color=col,
                ls="none",
            )
        if "exact_N_star" in g and g.exact_N_star.notna().any():
            ax.plot(g[var], g.exact_N_star, MARKERS["exact"], color=col, ms=8, label=None)
        f = mc.fit(df, problem, alpha, eps, var)
        if np.isfinite(f["slope"]):
            xs = gi[var].to_numpy(float)
            ax.plot(xs, np.exp(f["intercept"]) * xs ** f["slope"], "-", color=col, lw=1)
            slopes.append(f"{f['slope']:.2f}")
        else:
            slopes.append("-")
    xs = np.array(sorted(g0[var].unique()), dtype=float)
    if xs.size:
        gi = g0[g0.status == "interior"]
        ref = np.exp(np.mean(np.log(gi.N_star))) if len(gi) else 4.0
        x0 = np.exp(np.mean(np.log(gi[var]))) if len(gi) else xs.mean()
        ax.plot(xs, ref * np.sqrt(xs / x0), **THEORY_STYLE)
        ns = g0.drop_duplicates(var).sort_values(var)
        ax.plot(ns[var], ns.n, **REFERENCE_STYLE)
    return " / ".join(slopes)


def _curve_panel(mc: Any, ax, df: pd.DataFrame, problem: str, alpha: float, var: str) -> None:
    """Paired err(N)/err(MBA) against N, one line per level of ``var`` (95 % bands)."""
    from convkit.plotting import REFERENCE_STYLE, THEORY_STYLE, band

    cur = df[df.kind == "curve"]
    g0 = cur[(cur.problem == problem) & (cur.alpha == alpha) & cur.sweep.str.contains(var)]
    colors = _level_colors(cur[cur.sweep.str.contains(var)][var].unique())
    exact_drawn = False
    for v, g in g0.groupby(var):
        g = g.sort_values("N")
        band(
            ax,
            g.N,
            g.ratio,
            g.ratio_se,
            color=colors[v],
            marker="o",
            ms=3,
            lw=1,
            label=f"{var} = {int(v)}",
        )
        if g.exact_ratio.notna().all():
            ax.plot(g.N, g.exact_ratio, color=colors[v], lw=1, ls="--")
            exact_drawn = True
    if exact_drawn:  # legend proxy: the exact curves are dashed in each level's colour
        ax.plot([], [], label="exact engine (dashed, same colour)", **THEORY_STYLE)
    for eps in mc.EPS:
        ax.axhline(1 + eps, **REFERENCE_STYLE)
    ax.plot(
        [], [], label="levels 1 + eps, eps in " + ", ".join(map(str, mc.EPS)), **REFERENCE_STYLE
    )
    ax.axhline(1, color="k", lw=0.6)


def plot(mc: Any, df: pd.DataFrame, outdir: Path) -> list[Path]:
    """Four figures: N* against T and against P (log-log; interior Monte Carlo thresholds with
    their 95 % bootstrap intervals, exact N* for least squares as plus signs, fitted power laws,
    the claimed slope 1/2 dashed black, ``n = T/P`` dotted grey), and the paired
    ``err(N)/err(MBA)`` curves against N for the T and the P sweep (95 % bands; exact engine
    dashed).  One panel per problem and alpha; one legend below the panels.

    Parameters
    ----------
    df : pandas.DataFrame
        The data of :func:`run` (or the committed CSV read back).
    outdir : Path
        Directory for the PNG files.

    Returns
    -------
    list of Path
        ``local_sgd_threshold_mc_T.png``, ``_P.png``, ``_curves_T.png``, ``_curves_P.png``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    alphas = sorted(df.alpha.unique())
    reps = df[df.kind == "curve"].groupby("problem").replicates.max()
    files = []
    setting = (
        f"d = {mc.D}, flat H, Gaussian design, theta0 = theta*, gamma_k = C k^-alpha,\n"
        f"C = {mc.C_FRAC} gamma*, Polyak-Ruppert average, N evenly spaced rounds"
    )
    for var in ("T", "P"):
        fig, axes = plt.subplots(
            len(mc.PROBLEMS), len(alphas), figsize=(4.3 * max(len(alphas), 3), 8.4), squeeze=False
        )
        for i, problem in enumerate(mc.PROBLEMS):
            for j, alpha in enumerate(alphas):
                ax = axes[i, j]
                slopes = _threshold_panel(mc, ax, df, problem, alpha, var)
                ax.set_xscale("log", base=2)
                ax.set_yscale("log", base=2)
                r = int(reps.get(problem, 0))
                ax.set_title(
                    f"{problem}, alpha = {alpha}, R = {r}\nfitted slopes (eps "
                    + "/".join(map(str, mc.EPS))
                    + f"): {slopes}",
                    fontsize=9,
                )
                ax.set_xlabel(_fixed_label(df, var))
                ax.set_ylabel("N*, rounds to be within eps of MBA")
        fig.suptitle(
            f"Local-SGD: rounds N* to match MBA against {var} (Monte Carlo, common random "
            f"numbers)\n{setting}",
            fontsize=10,
        )
        _threshold_legend(mc, fig, df)
        fig.tight_layout(rect=(0, 0.09, 1, 0.98))
        path = outdir / f"local_sgd_threshold_mc_{var}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    for var in ("T", "P"):
        fig, axes = plt.subplots(
            len(mc.PROBLEMS), len(alphas), figsize=(4.3 * max(len(alphas), 3), 8.0), squeeze=False
        )
        for i, problem in enumerate(mc.PROBLEMS):
            for j, alpha in enumerate(alphas):
                ax = axes[i, j]
                _curve_panel(mc, ax, df, problem, alpha, var)
                ax.set_xscale("log", base=2)
                r = int(reps.get(problem, 0))
                ax.set_title(f"{problem}, alpha = {alpha}, R = {r}", fontsize=9)
                ax.set_xlabel("N, communication rounds (N = n is MBA)")
                ax.set_ylabel("err(N) / err(MBA), paired (95 % band)")
        fig.suptitle(
            f"Local-SGD vs MBA: paired error ratio against rounds N, {var} sweep "
            f"at {_fixed_value(df, var)}\n{setting}",
            fontsize=10,
        )
        _figure_legend(fig, axes)
        fig.tight_layout(rect=(0, 0.07, 1, 0.98))
        path = outdir / f"local_sgd_threshold_mc_curves_{var}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files
