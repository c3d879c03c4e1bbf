"""Figures of the Local-SGD large-step studies (``local_sgd_large_steps``,
``local_sgd_schedules``, ``local_sgd_variations``), drawn through :mod:`convkit.plotting`:
schedules in their palette colours, worker counts ``P`` in a sequential colour map (``P`` is a
setting, not an algorithm; viridis, circles), budgets ``T`` in another (plasma, squares),
theory dashed black, reference lines grey dotted, 95 % bands or
error bars, legends outside the axes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses import _local_sgd_stats as st
from convkit import plotting as cp


@dataclass(frozen=True)
class StudyTables:
    """The tables of the large-step study that its figures draw, handed over by
    ``analyses.local_sgd_large_steps.plot`` (so that the figures do not import the study):
    the OSA rows, the joint and window fits of the OSA gap, the ``N*`` table, the
    ``sqrt(P T)`` table and the grid's number notation."""

    osa_table: Callable[[pd.DataFrame], pd.DataFrame]
    ratio_fit: Callable[[pd.DataFrame, float], dict[str, Any]]
    window_fit: Callable[..., Any]
    nstar: Callable[[pd.DataFrame], pd.DataFrame]
    sqrt_pt_table: Callable[[pd.DataFrame], pd.DataFrame]
    sci: Callable[[float], str]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def p_color(P: int, Ps) -> tuple:
    """Colour of ``P`` among ``Ps`` (viridis, darker = fewer workers)."""
    import matplotlib

    Ps = sorted(set(int(p) for p in Ps))
    k = Ps.index(int(P))
    return matplotlib.colormaps["viridis"](0.1 + 0.8 * k / max(len(Ps) - 1, 1))


def t_color(T: float, Ts) -> tuple:
    """Colour of the budget ``T`` among ``Ts`` (plasma from 0.3 to 0.8, purple to orange,
    darker = smaller budget): a map of its own, every colour at least
    ``convkit.plotting.MIN_LINE_DELTA_E`` from every colour of :func:`p_color`, so that a
    line of ``T`` is never read as a line of ``P``."""
    import matplotlib

    Ts = sorted(set(float(t) for t in Ts))
    k = Ts.index(float(T))
    return matplotlib.colormaps["plasma"](0.3 + 0.5 * k / max(len(Ts) - 1, 1))


def _model(alpha: float) -> dict[str, float]:
    from convkit.bounds.local_sgd_large_steps import model_exponents

    return model_exponents(alpha)


def _errbar(ax, x, y, se, **kw):
    y, se = np.asarray(y, float), np.asarray(se, float)
    lo = np.minimum(1.96 * se, y * (1 - 1e-3))
    return ax.errorbar(x, y, yerr=[lo, 1.96 * se], capsize=2, ms=4, lw=1, **kw)


def _grid_axes(plt, k: int, width: float, height: float):
    """``k`` panels on rows of at most three: ``(fig, flat axes)``, unused panels removed."""
    cols = min(k, 3)
    rows = math.ceil(k / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[k:]:
        ax.remove()
    return fig, flat[:k]


def _hollow(ax, x, y, color, marker: str = "o") -> None:
    """Imprecise points (paired SE above the precision a verdict needs): white-filled markers
    over the line, with no verdict drawn from them."""
    ax.plot(x, y, marker, mfc="white", mec=color, ms=5, linestyle="none", zorder=5)


def plot_osa_gap(df: pd.DataFrame, path: Path, tables: StudyTables) -> Path:
    """``err(OSA)/err(MBA) - 1`` against ``T`` (one panel per alpha, a line per ``P``) and
    against ``P`` at each ``T`` for alpha = 0.75, with the model slopes dashed through
    the fit over the window where a power law fits (shaded;
    :func:`analyses.local_sgd_large_steps.window_fit`, precise cells only); imprecise cells
    (paired SE above 3 % of the ratio) white-filled."""
    plt = _plt()
    o = tables.osa_table(df)
    alphas = sorted(o.alpha.unique())
    fig, axes = _grid_axes(plt, len(alphas) + 1, 4.6, 4.4)
    Ps = sorted(o.P.unique())
    for ax, a in zip(axes, alphas, strict=False):
        g0 = o[o.alpha == a]
        f = tables.ratio_fit(df, a)
        for P in Ps:
            g = g0[g0.P == P].sort_values("T")
            if g.empty:
                continue
            _errbar(
                ax,
                g["T"],
                g.ratio_to_mba - 1,
                g.ratio_se,
                fmt="o-",
                color=p_color(P, Ps),
                label=f"P={P}",
            )
            gb = g[~g.precise]
            _hollow(ax, gb["T"], gb.ratio_to_mba - 1, p_color(P, Ps))
        m = _model(a)
        found = tables.window_fit(g0[g0.precise], "ratio_to_mba")
        whole = f"all T: chi2/dof {f['chi2_dof']:.1f}" + ("" if f["adequate"] else ", no power law")
        if found is not None:
            t_min, fw = found
            gw = g0[g0["T"] >= t_min]
            ax.axvspan(t_min, gw["T"].max(), color="0.92", zorder=0, label="window of the fit")
            Ts = np.array([t_min, gw["T"].max()], float)
            T0 = float(np.exp(np.mean(np.log(gw["T"]))))
            P0 = float(np.exp(np.mean(np.log(gw.P))))
            y0 = np.exp(fw["intercept"]) * T0 ** fw["slopes"]["T"] * P0 ** fw["slopes"]["P"]
            ax.plot(
                Ts,
                y0 * (Ts / T0) ** m["ratio_T"],
                **cp.THEORY_STYLE,
                label="model slope 1 - 2 alpha",
            )
            ttl = (
                f"alpha={a}: fit over T>={tables.sci(t_min)}\nT^{fw['slopes']['T']:.2f} "
                f"P^{fw['slopes']['P']:.2f} (model T^{m['ratio_T']:.2f} P^{m['ratio_P']:.2f})"
                f"\n{whole}"
            )
        else:
            ttl = f"alpha={a}: no window with a power law\n{whole}"
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="T (stochastic gradients, all workers)",
            ylabel="err(OSA)/err(MBA) - 1",
        )
        ax.set_title(ttl, fontsize=9)
    ax = axes[-1]
    g0 = o[o.alpha == 0.75] if 0.75 in alphas else o[o.alpha == alphas[0]]
    a = float(g0.alpha.iloc[0])
    Ts = sorted(g0["T"].unique())
    for T in Ts:
        g = g0[g0["T"] == T].sort_values("P")
        _errbar(
            ax,
            g.P,
            g.ratio_to_mba - 1,
            g.ratio_se,
            fmt="s-",
            color=t_color(T, Ts),
            label=f"T={T:g}",
        )
        gb = g[~g.precise]
        _hollow(ax, gb.P, gb.ratio_to_mba - 1, t_color(T, Ts), "s")
    m = _model(a)
    found = tables.window_fit(g0[g0.precise], "ratio_to_mba")
    if found is not None:
        t_min, f = found
        gw = g0[g0["T"] >= t_min]
        Pp = np.array([min(Ps), max(Ps)], float)
        T0 = float(np.exp(np.mean(np.log(gw["T"]))))
        P0 = float(np.exp(np.mean(np.log(gw.P))))
        y0 = np.exp(f["intercept"]) * T0 ** f["slopes"]["T"] * P0 ** f["slopes"]["P"]
        ax.plot(
            Pp,
            y0 * (Pp / P0) ** m["ratio_P"],
            **cp.THEORY_STYLE,
            label="model slope 2 alpha",
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="P (workers)",
        ylabel="err(OSA)/err(MBA) - 1",
        title=f"alpha={a}: growth in P (colour: T)",
    )
    ax.set_xscale("log", base=2)
    cp.legend_outside(ax, where="right")
    cp.legend_outside(axes[len(alphas) - 1], where="right")
    fig.suptitle(
        "Online logistic regression, d=2, ||theta*||=1, theta0=0, C L=2, gamma_k = C k^-alpha: "
        "one-shot averaging vs MBA (paired, 95 % bars)\nmodel slopes dashed, drawn through the "
        "joint fit at the centre of the shaded window T >= T_min, the longest where a power law "
        "fits\nwhite-filled: paired SE > 3 % of the ratio at the replicate cap, left out of every "
        "fit and verdict",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_nstar(df: pd.DataFrame, path: Path, tables: StudyTables) -> Path:
    """``N*(eps)`` against ``T`` per alpha (rows: eps), a colour per ``P``; interior cells with
    95 % bootstrap intervals, capped cells as open markers at their bound ``n``; ``sqrt(P T)``
    dashed black (the reading under test), ``n = T/P`` grey dotted."""
    plt = _plt()
    nt = tables.nstar(df)
    alphas = sorted(nt.alpha.unique())
    fig, axes = plt.subplots(
        len(st.EPS), len(alphas), figsize=(4.3 * len(alphas), 7.6), squeeze=False
    )
    Ps = sorted(nt.P.unique())
    for i, eps in enumerate(st.EPS):
        for j, a in enumerate(alphas):
            ax = axes[i, j]
            g0 = nt[(nt.alpha == a) & (nt.eps == eps)]
            for P in Ps:
                g = g0[g0.P == P].sort_values("T")
                col = p_color(P, Ps)
                gi = g[g.status == "interior"]
                ax.errorbar(
                    gi["T"],
                    gi.N_star,
                    yerr=[gi.N_star - gi.N_lo, gi.N_hi - gi.N_star],
                    fmt="o-",
                    color=col,
                    ms=4,
                    lw=1,
                    capsize=2,
                    label=f"P={P}",
                )
                gc = g[g.status == "capped"]
                ax.plot(gc["T"], gc.n, "o", mfc="none", color=col, ms=6)
                go = g[g.status == "osa_suffices"]
                ax.plot(go["T"], np.ones(len(go)), "v", color=col, ms=5)
                gm = g[g.status == "imprecise"]
                ax.plot(gm["T"], gm.N_star, "x", color=col, ms=6)
                Ts = np.array(sorted(g["T"].unique()), float)
                if Ts.size:
                    ax.plot(
                        Ts,
                        np.sqrt(P * Ts),
                        **cp.THEORY_STYLE,
                        label="sqrt(P T)" if P == Ps[0] else None,
                    )
                    ax.plot(
                        Ts,
                        Ts // P,
                        color=col,
                        linestyle=":",
                        linewidth=0.9,
                        label="n = T/P" if P == Ps[0] else None,
                    )
            ax.set(
                xscale="log",
                yscale="log",
                xlabel="T (stochastic gradients)",
                ylabel=f"N*(eps={eps}) (rounds)",
                title=f"alpha={a}, eps={eps}",
            )
    cp.legend_outside(axes[0, -1], where="right")
    fig.text(
        0.5,
        -0.01,
        "open circles: capped (every evenly spaced N < n of the grid, up to ceil(n/2), fails; "
        "plotted at n);  triangles: OSA suffices (N* = 1);  crosses: imprecise (a bracketing "
        "point's paired SE > 3 %, no verdict);  dashed black: sqrt(P T), one per P",
        ha="center",
        va="top",
        fontsize=8,
    )
    fig.suptitle(
        "Rounds N* for err(N) <= (1+eps) err(MBA), evenly spaced rounds; logistic d=2, C L=2, "
        "theta0=0 (95 % parametric-bootstrap intervals)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_sqrt_pt(df: pd.DataFrame, path: Path, tables: StudyTables) -> Path:
    """Left: ``err(ceil(sqrt(P T)))/err(MBA)`` against ``T`` (alpha = 0.75, a colour per
    ``P``, capped cells omitted).  Right: ``err(OSA)/err(MBA)`` of least squares (exact)
    against logistic regression (alpha = 0.75, P = 16 and P = 4)."""
    plt = _plt()
    sq = tables.sqrt_pt_table(df)
    alphas = sorted(sq.alpha.unique())
    fig, axes = _grid_axes(plt, len(alphas) + 1, 4.6, 4.4)
    Ps = sorted(sq.P.unique())
    for ax, a in zip(axes, alphas, strict=False):
        for P in Ps:
            g = sq[(sq.alpha == a) & (sq.P == P) & (sq.status != "capped")].sort_values("T")
            if g.empty:
                continue
            _errbar(ax, g["T"], g.ratio, g.se, fmt="o-", color=p_color(P, Ps), label=f"P={P}")
            gb = g[g.status == "imprecise"]
            _hollow(ax, gb["T"], gb.ratio, p_color(P, Ps))
        for eps in st.EPS:
            ax.axhline(1 + eps, **cp.REFERENCE_STYLE)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(
            xscale="log",
            xlabel="T (stochastic gradients)",
            ylabel="err(N=ceil(sqrt(PT))) / err(MBA)",
            title=f"alpha={a}",
        )
    cp.legend_outside(axes[len(alphas) - 1], where="right")
    ax = axes[-1]
    o = tables.osa_table(df)
    ls = df[(df.problem == "least_squares") & (df.schedule == "osa")]
    for P, mk in ((4, "o"), (16, "s")):
        g = o[(o.alpha == 0.75) & (o.P == P)].sort_values("T")
        if not g.empty:
            _errbar(
                ax,
                g["T"],
                g.ratio_to_mba - 1,
                g.ratio_se,
                fmt=mk + "-",
                color=cp.color("osa"),
                label=f"logistic C L=2, P={P} (Monte Carlo)",
            )
        for k, ((cl, tn), h) in enumerate(ls[ls.P == P].groupby(["CL", "theta_norm"])):
            h = h.sort_values("T")
            ax.plot(
                h["T"],
                h.ratio_to_mba - 1,
                mk + "--",
                ms=3,
                lw=1,
                color=["0.75", "0.55", "0.35", "0.1"][k % 4],
                label=f"LS exact, C L={cl:.2f}, ||theta*||={tn:g}, P={P}",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="T (stochastic gradients)",
        ylabel="err(OSA) / err(MBA) - 1",
        title="least squares (exact) vs logistic, alpha=0.75",
    )
    cp.legend_outside(ax, where="right")
    fig.suptitle(
        "Do sqrt(PT) evenly spaced rounds suffice? (logistic d=2, C L=2, theta0=0; grey dotted: "
        "1+eps; white-filled: paired SE > 3 % of the ratio, no verdict) and the least-squares "
        "contrast",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def savings_text(v: float) -> str:
    return f"{(1 - v) * 100:.0f} %" if math.isfinite(v) else "-"
