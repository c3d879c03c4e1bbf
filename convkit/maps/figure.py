"""The figure of a regime map (:func:`plot_map`).

* the measured quantity as a colour field (``pcolormesh`` over the grid cells, a diverging
  colormap centred on the claim's threshold by ``TwoSlopeNorm``);
* the verdict of each grid point as a marker (holds: filled circle, violated: cross,
  unresolved: open square, imprecise: open diamond, other verdicts: a dot), legend outside
  the axes (:func:`convkit.plotting.legend_outside`);
* the located boundary: each crossing at its position with its interval as an error bar, and
  the band between the intervals' ends where the crossings of the lines along x follow one
  another (one crossing per line);
* the predicted boundary of the theory, where the claim declares one, in the theory style
  (:data:`convkit.plotting.THEORY_STYLE`: black dashed);
* log axes where the grid is log-spaced, the claim and the fixed settings in the title.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from convkit import verdicts as V
from convkit.plotting import THEORY_STYLE, legend_outside

__all__ = ["VERDICT_MARKERS", "cell_edges", "draw_map", "plot_map"]

#: marker style of each verdict on the map
VERDICT_MARKERS: dict[str, dict[str, Any]] = {
    V.HOLDS: {"marker": "o", "facecolors": "black", "edgecolors": "black", "label": "holds"},
    V.VIOLATED: {"marker": "x", "facecolors": "black", "label": "violated"},
    V.CONSISTENT_UNRESOLVED: {
        "marker": "s", "facecolors": "none", "edgecolors": "black", "label": "unresolved",
    },
    V.INCONCLUSIVE: {
        "marker": "D", "facecolors": "none", "edgecolors": "0.3", "label": "imprecise",
    },
}  # fmt: skip
_OTHER = {"marker": ".", "facecolors": "0.4", "label": "other verdict"}


def _NullLocator() -> Any:  # noqa: N802 - a matplotlib class, imported when drawing
    from matplotlib.ticker import NullLocator

    return NullLocator()


def cell_edges(axis: Any) -> np.ndarray:
    """Cell edges around the grid values, midway in the axis' scale."""
    u = axis.to_scale(axis.values())
    mid = 0.5 * (u[1:] + u[:-1])
    e = np.concatenate([[u[0] - (mid[0] - u[0])], mid, [u[-1] + (u[-1] - mid[-1])]])
    return axis.from_scale(e)


def plot_map(result: Any, path: str | os.PathLike) -> Path:
    """Draw ``result`` (a :class:`convkit.maps.MapResult`) as the module docstring states
    (:func:`draw_map`, legend below the axes) and save it to ``path``; returns the path."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.2, 5.6))
    draw_map(result, ax)
    legend_outside(ax, where="below", ncol=3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def draw_map(result: Any, ax: Any, log_colour: bool = False) -> Any:
    """Draw ``result`` on the axes ``ax`` (colour field with its colour bar, verdict markers,
    located boundary, predicted boundary, scales, labels, title) without a legend, so that
    a caller can add layers first; returns ``ax``. ``log_colour``: the colour field is
    ``log10`` of the quantity, centred on ``log10`` of the threshold (a quantity spanning
    decades; every value and the threshold must be positive)."""
    from matplotlib.colors import TwoSlopeNorm

    claim, x, y = result.claim, result.x, result.y
    fig = ax.figure
    z = np.asarray(result.field("measured"), dtype=float)
    t = claim.threshold
    label = claim.quantity
    if log_colour:
        if t <= 0 or np.any(z[np.isfinite(z)] <= 0):
            raise ValueError("log_colour needs a positive threshold and positive values")
        z, t, label = np.log10(z), float(np.log10(t)), f"log10 of {claim.quantity}"
    finite = z[np.isfinite(z)]
    vmin = float(min(finite.min(), t)) if finite.size else t - 1
    vmax = float(max(finite.max(), t)) if finite.size else t + 1
    span = max(vmax - vmin, 1e-12)
    vmin, vmax = min(vmin, t - 1e-3 * span), max(vmax, t + 1e-3 * span)
    mesh = ax.pcolormesh(cell_edges(x), cell_edges(y), np.ma.masked_invalid(z), cmap="RdBu_r",
                         norm=TwoSlopeNorm(vcenter=t, vmin=vmin, vmax=vmax), shading="flat")  # fmt: skip
    cb = fig.colorbar(mesh, ax=ax, pad=0.02)
    cb.set_label(f"{label} (white: {t:.3g})")
    g = result.grid_points()
    for verdict, sub in g.groupby("verdict"):
        style = dict(VERDICT_MARKERS.get(verdict, _OTHER))
        ax.scatter(sub[x.name], sub[y.name], s=28, linewidths=1.1, zorder=4, **style)
    cr = result.crossings
    if len(cr):
        for along, sub in cr.groupby("along"):
            pos, lo, hi, fixed = (sub[c].to_numpy(float) for c in
                                  ("position", "interval_lo", "interval_hi", "fixed"))  # fmt: skip
            err = np.vstack([pos - lo, hi - pos])
            if along == x.name:
                ax.errorbar(pos, fixed, xerr=err, fmt="none", ecolor="tab:orange", elinewidth=2,
                            capsize=3, zorder=6)  # fmt: skip
                if sub["fixed"].is_unique and len(sub) > 1:
                    o = np.argsort(fixed)
                    ax.fill_betweenx(fixed[o], lo[o], hi[o], color="tab:orange", alpha=0.3,
                                     lw=0, zorder=3)  # fmt: skip
                    ax.plot(pos[o], fixed[o], color="tab:orange", lw=1.5, zorder=6)
            else:
                ax.errorbar(fixed, pos, yerr=err, fmt="none", ecolor="tab:orange", elinewidth=2,
                            capsize=3, zorder=6)  # fmt: skip
        ax.plot([], [], color="tab:orange", lw=2,
                label="located boundary (bar/band: its interval)")  # fmt: skip
    if claim.predicted is not None:
        xx = x.from_scale(np.linspace(x.to_scale(x.lo), x.to_scale(x.hi), 200))
        yy = np.asarray(claim.predicted(xx), dtype=float)
        ax.plot(xx, yy, **THEORY_STYLE, label=claim.predicted_label)
    for axis, set_scale, set_ticks, which in ((x, ax.set_xscale, ax.set_xticks, ax.xaxis),
                                              (y, ax.set_yscale, ax.set_yticks, ax.yaxis)):  # fmt: skip
        if axis.log:
            set_scale("log")
        if axis.n <= 8:  # a few grid values: label them, no minor ticks
            set_ticks(axis.values(), [f"{v:.3g}" for v in axis.values()])
            which.set_minor_locator(_NullLocator())
    ax.set_xlim(cell_edges(x)[0], cell_edges(x)[-1])
    ax.set_ylim(cell_edges(y)[0], cell_edges(y)[-1])
    ax.set_xlabel(claim.label(x.name))
    ax.set_ylabel(claim.label(y.name))
    side = "<" if claim.side == "below" else ">"
    ax.set_title("\n".join(textwrap.wrap(
        f"{result.title()}; claim: {claim.quantity} {side} {claim.threshold:g}", 90)),
        fontsize=9)  # fmt: skip
    return ax
