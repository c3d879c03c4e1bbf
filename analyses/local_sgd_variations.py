"""Variations of the Local-SGD large-step setting (issue "Local-SGD where communication
matters", item 3a): how the one-shot gap and N* move with the step size, the distance to the
optimum, the dimension, the spectrum and the start.

Base (``analyses/local_sgd_large_steps.py``): online logistic regression, Gaussian design,
``d = 2``, ``h = (1, 1)``, ``||theta*|| = 1`` along ``(1, 1)``, ``theta0 = 0``, ``C L = 2``,
alpha = 0.75.  Each variation changes one thing: ``C L`` in {0.5, 1, 4}; ``||theta*|| = 3``;
``d = 5`` with the flat spectrum and with ``h_i = 1/i``; the start ``theta0 = theta*``.  Reduced
grid (stated): ``T`` in {1e3, 1e4, 1e5}, ``P`` in {4, 16}; replicates by precision (pilot 512,
256, 128, topped up towards a paired SE of 3 % of each ratio; ``analyses/_local_sgd_cells.py``).  Same
cells and statistics as ``local_sgd_large_steps`` (common random numbers within a cell, paired
ratios, ``N*`` with parametric-bootstrap intervals); its CSV adds the columns ``spectrum`` and
``start`` (the large-step CSV cannot tell the ``1/i`` spectrum or the start at ``theta*`` from
the base).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses import _local_sgd_cells as cells
from analyses import _local_sgd_stats as st
from convkit import plotting as cp
from convkit import verdicts as V

TITLE = (
    "Local-SGD large steps, variations at alpha = 0.75: C L, ||theta*||, d, spectrum and start "
    "against the base (err(OSA)/err(MBA), N*)"
)
#: simulated after the large-step study, whose cells (the base grid, the variations with a
#: flat spectrum from theta0 = 0) this one reads from the cell cache
AFTER = ("local_sgd_large_steps",)


def _base_on_grid(quick: bool) -> list[cells.Cell]:
    ts, ps = ((1_000, 10_000), (4,)) if quick else (cells.VAR_T, cells.VAR_P)
    return [
        c for c in cells.base_cells(quick) if c.alpha == 0.75 and c.T in ts and c.P in ps
    ] or cells._grid(0.75, ts, ps, quick)


def variant_name(row: pd.Series) -> str:
    """Short name of the variation of a row (``base`` for the base setting)."""
    if row.start == "star":
        return "start at theta*"
    if row.d != 2:
        return f"d={int(row.d)}, {row.spectrum} spectrum"
    if row.theta_norm != 1.0:
        return f"||theta*||={row.theta_norm:g}"
    if row.CL != 2.0:
        return f"C L={row.CL:g}"
    return "base (C L=2)"


def run(quick: bool = False, cell_list: list[cells.Cell] | None = None) -> pd.DataFrame:
    """Rows of the variation cells and of the base cells on the same grid (columns of the
    large-step CSV plus ``spectrum``, ``start``, ``variant``)."""
    lst = (
        cell_list if cell_list is not None else _base_on_grid(quick) + cells.variation_cells(quick)
    )
    df = cells.cells_frame(lst)
    df = df[df.schedule.isin(cells.SCHEDULES)].copy()
    df["variant"] = df.apply(variant_name, axis=1)
    return df[cells.COLUMNS + ["spectrum", "start", "variant"]].reset_index(drop=True)


def table(data: pd.DataFrame) -> pd.DataFrame:
    """Per (variant, T, P): ``err(OSA)/err(MBA)`` with SE and ``N*(0.1)`` with its status."""
    osa = data[data.schedule == "osa"][["variant", "T", "P", "ratio_to_mba", "ratio_se"]]
    nt = st.nstar_table(data, keys=st.CELL_KEYS + ["spectrum", "start"])
    nt = nt[nt.eps == 0.1]
    if nt.empty:
        return osa.assign(N_star=np.nan, status="-", n=np.nan)
    nt["variant"] = nt.apply(variant_name, axis=1)
    return osa.merge(nt[["variant", "T", "P", "n", "N_star", "status"]], on=["variant", "T", "P"])


#: the claim of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "local_sgd_variations",
    {
        "one_shot_gap_under_variation": V.Claim(
            "err(OSA)/err(MBA) and N*(0.1) of online logistic regression under one change at "
            "a time to the base cell (the variation in the setting), against the base",
            "the large-step model's robustness (local_sgd_large_steps.osa_mba_excess); no "
            "claim per variation",
            kind=V.MEASUREMENT,
        ),
    },
)


def checks(data: pd.DataFrame) -> list[dict[str, Any]]:
    """One measured row per variation: the OSA/MBA ratio over its cells and N*(0.1)."""
    out = []
    tb = table(data)
    base_r = tb[tb.variant == "base (C L=2)"].set_index(["T", "P"]).ratio_to_mba
    for v, g in tb.groupby("variant", sort=False):
        cellstxt = "; ".join(
            f"T={int(T):g}, P={int(P)}: {r:.2f}±{s:.2f}"
            + (f", N*={ns:.0f}/{int(n)} ({stt})" if np.isfinite(ns) else f" ({stt})")
            for T, P, r, s, ns, n, stt in zip(
                g["T"], g.P, g.ratio_to_mba, g.ratio_se, g.N_star, g.n, g.status, strict=True
            )
        )
        rel = g.set_index(["T", "P"]).ratio_to_mba / base_r.reindex(g.set_index(["T", "P"]).index)
        out.append(
            V.check_row(
                result="local_sgd_variations.one_shot_gap_under_variation",
                setting=(
                    f"variation {v}: logistic, alpha=0.75, theta0=0 unless stated, T in {1e3, 1e4, 1e5}, "
                    "P in {4, 16}"
                ),
                measured=cellstxt,
                theoretical="-",
                verdict=V.MEASURED,
                reason=(
                    f"ratio relative to the base: {np.nanmin(rel):.2f}-{np.nanmax(rel):.2f}"
                    if np.isfinite(rel).any()
                    else "no base cell to compare"
                ),
            )
        )
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """README numbers: per variant, the OSA/MBA ratio range and N*(0.1) at T = 1e5, P = 16."""
    out: dict[str, str] = {}
    tb = table(data)
    for v, g in tb.groupby("variant"):
        k = v.replace(" ", "_")
        out[f"{k}_osa_min"] = f"{g.ratio_to_mba.min():.2f}"
        out[f"{k}_osa_max"] = f"{g.ratio_to_mba.max():.2f}"
    return out


def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    """``err(OSA)/err(MBA)`` against ``T`` per variation (left P = 4, right P = 16)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    tb = table(data)
    Ps = sorted(tb.P.unique())
    fig, axes = plt.subplots(1, len(Ps), figsize=(5.2 * len(Ps), 4.3), squeeze=False)
    variants = list(dict.fromkeys(tb.variant))
    cmap = plt.get_cmap("tab10")
    for ax, P in zip(axes[0], Ps, strict=True):
        for k, v in enumerate(variants):
            g = tb[(tb.P == P) & (tb.variant == v)].sort_values("T")
            if g.empty:
                continue
            style = dict(color="black", lw=2) if v.startswith("base") else dict(color=cmap(k))
            ax.errorbar(
                g["T"],
                g.ratio_to_mba,
                yerr=1.96 * g.ratio_se,
                fmt="o-",
                ms=4,
                capsize=2,
                label=v,
                **style,
            )
        ax.axhline(1.0, **cp.REFERENCE_STYLE)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="T (stochastic gradients)",
            ylabel="err(OSA) / err(MBA) (paired, 95 % bars)",
            title=f"P={P}",
        )
    cp.legend_outside(axes[0, -1], where="right")
    fig.suptitle(
        "Online logistic regression, alpha=0.75, gamma_k = C k^-alpha: one-shot gap under one "
        "change at a time (base: d=2, ||theta*||=1, C L=2, theta0=0)",
        fontsize=10,
    )
    fig.tight_layout()
    path = outdir / "local_sgd_variations.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [path]
