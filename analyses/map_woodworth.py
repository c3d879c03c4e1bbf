"""Regime map: where Local-SGD stops beating mini-batch SGD (Woodworth, Patel, Srebro 2020),
over the node-optimum spread zeta^2 and the Hessian dissimilarity delta.

Claim mapped (:data:`convkit.maps.claims.woodworth`): ``best err(Local-SGD) / best
err(mini-batch SGD) < 1`` (Local-SGD wins), exact node engine
(:func:`convkit.exact.heterogeneous.expected_error_nodes`) on the problem of
``local_vs_minibatch`` (d = 8, P = 8 nodes, mean spectrum ``linspace(1, 0.25, 8)``,
additive noise sigma = 1, theta0 = 0), Local-SGD with K = 32 local steps per round and R = 10
rounds against mini-batch SGD with batch K per worker and R steps, each at its best constant
step: tuned by :func:`convkit.bounds.heterogeneity.best_ratio` on steps a factor 2 apart,
then by golden section to 0.01 in ``log gamma`` (:func:`convkit.maps.claims.tuned`).

Map (:func:`convkit.maps.run_map`, every point a cached function sweep): zeta^2 from 0.25 to
400 (6 values, log), delta from 0 to 0.6 (4 values); the boundary located by bisection along
every grid line to 0.04 of each axis' span (quick: 4 x 4 points, 0.1, and the independent
computation at one delta).

Independent computation of the boundary at three values of delta (the largest grid deltas
with a crossing along zeta^2): each algorithm's step by Brent's bounded minimisation
(:func:`scipy.optimize.minimize_scalar`) over ``log gamma`` on its own bracket, and the
zeta^2 where the ratio is 1 by Brent's root finder (:func:`scipy.optimize.brentq`) on ``log10
zeta^2`` between the two grid values around the crossing, to 0.002 in ``log10 zeta^2``:
another optimiser of the step and another search of the crossing, sharing only the grid.
It must fall inside the located interval.

Predicted boundary: none. The bounds of :mod:`convkit.bounds.heterogeneity` state the
comparison (mini-batch SGD dominates when the heterogeneity is high) but give no formula for
where the ratio crosses 1 on this problem.

Derived here (exact): with identical node Hessians (delta = 0) and additive noise the node
average follows the mean gradient, so zeta^2 has no effect on the ratio.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from convkit import verdicts as V
from convkit.bounds.heterogeneity import WOODWORTH_HETEROGENEOUS
from convkit.maps import Axis, result_frame, result_from_frame, run_map
from convkit.maps.claims import local_error, minibatch_error, woodworth, woodworth_problem
from convkit.plotting import legend_outside

TITLE = (
    "Regime map: best err(Local-SGD) / best err(mini-batch SGD) over zeta^2 and delta (exact "
    "node engine), the located boundary with its interval, and an independent computation"
)
REPO = Path(__file__).resolve().parents[1]
NAME = "map_woodworth"
FULL = {"x": Axis("zeta2", 0.25, 400.0, 6, log=True), "y": Axis("delta", 0.0, 0.6, 4),
        "refine": 0.04}  # fmt: skip
QUICK = {"x": Axis("zeta2", 0.25, 400.0, 4, log=True), "y": Axis("delta", 0.0, 0.6, 4),
         "refine": 0.1}  # fmt: skip
#: how many crossings along zeta^2 (the largest deltas) the independent computation
#: recomputes, and its tolerance on log10 zeta^2
INDEPENDENT_POINTS = 3
INDEPENDENT_XTOL = 0.002
#: Brent's brackets of the steps (each holds its algorithm's best step on this problem, and
#: every step in it is stable: finite errors)
LOCAL_BRACKET, MINIBATCH_BRACKET = (0.003125, 0.4), (0.05, 1.6)
#: relative spread of the ratio over zeta^2 at delta = 0 that counts as none (rounding)
EXACT_RTOL = 1e-9
K, R = 32, 10

CLAIMS = V.declare_claims(
    NAME,
    {
        "minibatch_wins_high_heterogeneity": V.Claim(
            "at the largest zeta^2 of the map (400), mini-batch SGD beats Local-SGD at their "
            "best steps (ratio > 1)",
            f"{WOODWORTH_HETEROGENEOUS}: abstract, 'Minibatch SGD ... dominates ... accelerated "
            "Minibatch SGD is optimal when the heterogeneity is high'",
        ),
        "local_wins_low_heterogeneity": V.Claim(
            "at the smallest zeta^2 of the map (0.25), Local-SGD beats mini-batch SGD at "
            "their best steps (ratio < 1)",
            "Woodworth, Patel, Stich et al. 2020 (ICML): local SGD strictly dominates minibatch "
            "SGD on quadratics (iid); a small zeta^2 is near that case",
        ),
        "no_zeta_effect_identical_hessians": V.Claim(
            "with identical node Hessians (delta = 0) and additive noise the ratio does not "
            f"depend on zeta^2 (relative spread <= {EXACT_RTOL:g})",
            "derived here: the node average follows the mean gradient when the Hessians agree "
            "(analyses/node_hessian_drift.py states the same identity)",
        ),
        "boundary": V.Claim(
            "where the ratio crosses 1 on a grid line, located by bisection with its interval",
            "measured on the map (convkit.maps.refine)",
            kind=V.MEASUREMENT,
        ),
        "independent_agreement": V.Claim(
            "the boundary computed independently (Brent-tuned steps, Brent root in zeta^2) "
            "lies inside the located interval",
            "derived here: two computations of the same exact quantity must agree",
        ),
    },
)


# ---------------------------------------------------------------------- the independent boundary
def brent_ratio(zeta2: float, delta: float) -> float:
    """The ratio of the best errors with each step by Brent's bounded minimisation over
    ``log gamma`` (``xatol = 5e-3``) on its bracket (:data:`LOCAL_BRACKET`,
    :data:`MINIBATCH_BRACKET`)."""
    from scipy.optimize import minimize_scalar

    prob = woodworth_problem(zeta2, delta)
    best = []
    for error, (lo, hi) in ((local_error, LOCAL_BRACKET), (minibatch_error, MINIBATCH_BRACKET)):
        r = minimize_scalar(lambda u, e=error: e(prob, math.exp(u), K, R), method="bounded",
                            bounds=(math.log(lo), math.log(hi)), options={"xatol": 5e-3})  # fmt: skip
        best.append(float(r.fun))
    return best[0] / best[1]


def independent_boundary(
    delta: float, lo: float, hi: float, xtol: float = INDEPENDENT_XTOL
) -> dict[str, Any]:
    """The zeta^2 where :func:`brent_ratio` is 1 at ``delta``, by :func:`scipy.optimize.brentq`
    on ``log10 zeta^2`` between the grid values ``lo`` and ``hi`` (NaN when the ratio does not
    cross 1 there); ``position_lo``, ``position_hi``: the root's tolerance ``xtol``."""
    from scipy.optimize import brentq

    f = lambda u: brent_ratio(10.0**u, delta) - 1.0  # noqa: E731
    a, b = math.log10(lo), math.log10(hi)
    if f(a) * f(b) > 0:
        return {"delta": delta, "position": math.nan, "method": "brent"}
    u = brentq(f, a, b, xtol=xtol, rtol=1e-12)
    return {"delta": delta, "position": 10.0**u, "position_lo": 10.0 ** (u - xtol),
            "position_hi": 10.0 ** (u + xtol), "method": "brent"}  # fmt: skip


# ---------------------------------------------------------------------- run
def _cache(quick: bool) -> Path:
    from convkit.figures_progress import cache_dirs

    return cache_dirs(REPO)[0] / "maps" / f"{NAME}-{'quick' if quick else 'full'}"


def run(quick: bool = False) -> pd.DataFrame:
    """The map's points and crossings (:func:`convkit.maps.result_frame`) and the independent
    boundary on the grid lines along zeta^2 of the :data:`INDEPENDENT_POINTS` largest deltas
    with a crossing (quick: the largest only), searched between that crossing's two grid values (rows ``part =
    "independent"``)."""
    cfg = QUICK if quick else FULL
    res = run_map(woodworth, cfg["x"], cfg["y"], out=_cache(quick), refine=cfg["refine"])
    frame = result_frame(res)
    cr = res.crossings
    cr = cr[cr.along == "zeta2"].sort_values("fixed").tail(1 if quick else INDEPENDENT_POINTS)
    xtol = 0.01 if quick else INDEPENDENT_XTOL
    ind = [independent_boundary(r.fixed, r.segment_lo, r.segment_hi, xtol)
           for r in cr.itertuples()]  # fmt: skip
    ind_frame = pd.DataFrame(ind).assign(part="independent")
    return pd.concat([frame, ind_frame], ignore_index=True, sort=False)


def result(data: pd.DataFrame) -> Any:
    """The :class:`convkit.maps.MapResult` of the data (its grid read from the points)."""
    pts = data[(data.part == "point") & (data.stage == "grid")]
    xs, ys = np.sort(pts.zeta2.unique()), np.sort(pts.delta.unique())
    x = Axis("zeta2", float(xs[0]), float(xs[-1]), len(xs), log=True)
    y = Axis("delta", float(ys[0]), float(ys[-1]), len(ys))
    return result_from_frame(woodworth, x, y, {}, data[data.part != "independent"])


# ---------------------------------------------------------------------- figure
def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from convkit.maps.figure import draw_map

    res = result(data)
    fig, ax = plt.subplots(figsize=(8.6, 6.0))
    draw_map(res, ax)
    ind = data[data.part == "independent"].dropna(subset=["position"])
    ax.scatter(ind.position, ind.delta, marker="*", s=140, c="white", edgecolors="black",
               zorder=7, label="independent computation (Brent steps, Brent root)")  # fmt: skip
    ax.plot([], [], " ", label="predicted boundary: none (the bounds give no formula)")
    legend_outside(ax, where="below", ncol=2)
    fig.tight_layout()
    path = Path(outdir) / f"{NAME}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [path]


# ---------------------------------------------------------------------- checks, facts
def _inverted(data: pd.DataFrame) -> pd.DataFrame:
    """The map with every ratio inverted (mini-batch SGD's error over Local-SGD's)."""
    out = data.copy()
    p = out.part == "point"
    m = out.loc[p, "measured"]
    out.loc[p, "measured"], out.loc[p, "lo"], out.loc[p, "hi"] = 1 / m, 1 / m, 1 / m
    out.loc[p, "verdict"] = np.where(1 / m < 1, V.HOLDS, np.where(1 / m > 1, V.VIOLATED,
                                                                  V.CONSISTENT_UNRESOLVED))  # fmt: skip
    return out


def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`): every ratio inverted (the
    winner changes everywhere); the independent boundary moved to twice the located
    interval's upper end; the delta = 0 row given the ratios of the largest delta."""
    moved = data.copy()
    crossings = data[(data.part == "crossing") & (data.along == "zeta2")]
    for i in moved.index[moved.part == "independent"]:
        c = crossings[np.isclose(crossings.fixed, moved.at[i, "delta"])]
        if len(c):
            moved.at[i, "position"] = 2.0 * float(c.interval_hi.max())
    flat = data.copy()
    g = data[(data.part == "point") & (data.stage == "grid")]
    top, bottom = g[g.delta == g.delta.max()], g[g.delta == g.delta.min()]
    by_z = dict(zip(top.zeta2, top.measured))
    for i in bottom.index:
        flat.at[i, "measured"] = by_z.get(flat.at[i, "zeta2"], flat.at[i, "measured"])
    return [
        V.Control("every ratio inverted", _inverted(data), (f"{NAME}.minibatch_wins_high_heterogeneity", f"{NAME}.local_wins_low_heterogeneity")),
        V.Control("independent boundary moved outside the interval", moved, (f"{NAME}.independent_agreement",)),
        V.Control("delta = 0 row given the ratios of the largest delta", flat, (f"{NAME}.no_zeta_effect_identical_hessians",)),
    ]  # fmt: skip


def _setting(delta: float) -> str:
    return (
        f"exact node engine, LS d=8, P=8, additive noise, delta={delta:g}, K={K}, R={R}, "
        "best steps (grid x2 then golden section)"
    )


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict]:
    out = []
    g = data[(data.part == "point") & (data.stage == "grid")]
    zmin, zmax = g.zeta2.min(), g.zeta2.max()
    for delta, row in g.groupby("delta"):
        for z, name, want in ((zmax, "minibatch_wins_high_heterogeneity", V.VIOLATED),
                              (zmin, "local_wins_low_heterogeneity", V.HOLDS)):  # fmt: skip
            p = row[row.zeta2 == z].iloc[0]
            point = str(p.verdict)
            if point in (V.HOLDS, V.VIOLATED):
                verdict = V.HOLDS if point == want else V.VIOLATED
            else:
                verdict = V.CONSISTENT_UNRESOLVED if point == V.CONSISTENT_UNRESOLVED else point
            out.append(V.check_row(
                f"{NAME}.{name}", f"{_setting(delta)}, zeta^2={z:g}", f"ratio {p.measured:.4g}",
                "> 1" if want == V.VIOLATED else "< 1", verdict,
                f"ratio {p.measured:.4g} (exact; point verdict {point})",
            ))  # fmt: skip
    flat = g[g.delta == g.delta.min()]
    spread = float(flat.measured.max() / flat.measured.min() - 1.0)
    verdict, reason = V.verdict_of(
        spread <= EXACT_RTOL, f"relative spread {spread:.2g} <= {EXACT_RTOL:g}",
        f"relative spread {spread:.2g} > {EXACT_RTOL:g}",
    )  # fmt: skip
    out.append(V.check_row(
        f"{NAME}.no_zeta_effect_identical_hessians",
        f"{_setting(float(flat.delta.iloc[0]))}, zeta^2 in {sorted(flat.zeta2.round(4).tolist())}",
        f"ratio {flat.measured.min():.6g}..{flat.measured.max():.6g}", "independent of zeta^2",
        verdict, reason, margin=f"relative spread <= {EXACT_RTOL:g}",
    ))  # fmt: skip
    cr = data[data.part == "crossing"]
    for r in cr.itertuples():
        out.append(V.check_row(
            f"{NAME}.boundary",
            "exact node engine, LS d=8, P=8, additive noise, K=32, R=10, best steps"
            f"; along {r.along} at {r.fixed_name}={r.fixed:.4g}, {r.from_verdict} -> "
            f"{r.to_verdict}, tolerance {r.tol:g} of the span ({r.tol_scale})",
            f"{r.along} = {r.position:.4g} in [{r.interval_lo:.4g}, {r.interval_hi:.4g}]",
            "-", V.MEASURED, f"bisection in {int(r.steps)} steps",
        ))  # fmt: skip
    for r in data[data.part == "independent"].itertuples():
        c = cr[(cr.along == "zeta2") & np.isclose(cr.fixed, r.delta)]
        if not len(c) or not np.isfinite(r.position):
            verdict, reason = V.NOT_IDENTIFIABLE, "no located crossing along zeta^2 at this delta"
            located = "-"
        else:
            c = c.iloc[0]
            inside = c.interval_lo <= r.position <= c.interval_hi
            located = f"[{c.interval_lo:.4g}, {c.interval_hi:.4g}]"
            verdict, reason = V.verdict_of(
                bool(inside), f"{r.position:.4g} lies inside the located interval {located}",
                f"{r.position:.4g} lies outside the located interval {located}",
            )  # fmt: skip
        out.append(V.check_row(
            f"{NAME}.independent_agreement", _setting(r.delta),
            f"zeta^2 = {r.position:.4g} (Brent)", f"inside {located}", verdict, reason,
            margin="the located interval",
        ))  # fmt: skip
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """The boundary at each delta (located interval and independent position), the range of
    the ratio and the number of points, for the README."""
    out: dict[str, str] = {}
    g = data[(data.part == "point") & (data.stage == "grid")]
    pts = data[data.part == "point"]
    out["points"] = str(len(pts))
    out["grid_points"] = str(len(g))
    out["ratio_min"] = f"{g.measured.min():.3g}"
    out["ratio_max"] = f"{g.measured.max():.3g}"
    out["ratio_delta0"] = f"{g[g.delta == g.delta.min()].measured.mean():.4g}"
    cr = data[(data.part == "crossing") & (data.along == "zeta2")]
    for r in cr.itertuples():
        key = f"{r.fixed:g}".replace(".", "p")
        out[f"boundary_delta_{key}"] = f"{r.position:.3g}"
        out[f"interval_delta_{key}"] = f"[{r.interval_lo:.3g}, {r.interval_hi:.3g}]"
    for r in data[data.part == "independent"].itertuples():
        out[f"independent_delta_{r.delta:g}".replace(".", "p")] = f"{r.position:.3g}"
    return out
