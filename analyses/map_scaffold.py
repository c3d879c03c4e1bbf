"""Regime map: where SCAFFOLD beats Local-SGD, over outer variance ``zeta^2`` and noise
``sigma^2`` (exact node engine, :mod:`convkit.exact.scaffold_nodes`; no sampling error).

Claim under test (Karimireddy et al. 2020, "SCAFFOLD", ICML, abstract and Theorem III against
Theorem I): SCAFFOLD's control variates remove the client drift, so that its error does not
grow with the heterogeneity ``zeta^2`` as Local-SGD's (FedAvg's) does. The map measures
``err(SCAFFOLD) / err(Local-SGD)`` (excess risk of the nodes' mean at the last step) against
the threshold 1 ("SCAFFOLD's error below Local-SGD's") over ``zeta^2`` by ``sigma^2``.

Same step and same rounds, not each at its best step: the two methods then do the same local
work between the same rounds (SCAFFOLD sends twice the bits), so the ratio isolates what the
control variates change; and the ratio is then a function of ``zeta^2 / sigma^2`` alone,
which gives the located boundary an independent check (below). A best-step comparison would
mix the step search into the quantity and cost a step grid per point.

Derived boundary (derived here). Started at ``theta*``, every method's second moments obey a
linear recursion whose only sources are ``w_i w_k`` and ``u_i^2`` (both proportional to
``zeta^2``: the offsets are one direction scaled) and ``sigma^2``; so ``err = A zeta^2 + B
sigma^2`` exactly, for either design, and the ratio equals 1 on the ray ``zeta^2 = c
sigma^2``, ``c = (B_S - B_L) / (A_L - A_S)``. ``A`` and ``B`` come from two runs per method
(``zeta^2 = 1, sigma = 0`` and ``zeta^2 = 0, sigma = 1``), independent of the map's grid and
bisection. ``c <= 0`` (or infinite) means no boundary in the quadrant. The SCAFFOLD paper's
bounds are upper bounds with unspecified constants: they predict no boundary, and the
figures say so.

Two designs: additive noise (the bounded-variance noise of the paper: the claim's regime),
and the Gaussian design (multiplicative noise, whose variance grows with the distance to the
node optima: outside the paper's bounded-variance assumption; a contrast, measured only).

Setting: d = 8, P = 8 nodes, mean spectrum ``linspace(1, 0.25, 8)``, Hessian dissimilarity
delta = 0.3, seed 0, constant step gamma = 0.05, a round every K = 16 local steps,
``theta0 = theta*``, the last iterate after n = 400 local steps (25 rounds; quick 200: the
linearity holds at every n, and ``(1 - gamma h_min)^(2n) = 4e-5`` puts both methods near
their floors); grid ``zeta^2, sigma^2`` in ``[1e-2, 1e2]`` (6 x 6 log, quick 4 x 4),
boundary by bisection to 1 % of each log axis' span (quick 5 %).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V
from convkit.maps import (
    Axis,
    MapPoint,
    MapResult,
    map_claim,
    result_frame,
    result_from_frame,
    run_map,
)
from convkit.maps.figure import draw_map
from convkit.plotting import legend_outside, plain
from convkit.problems.heterogeneous import HeterogeneousLeastSquares

REPO = Path(__file__).resolve().parents[1]
TITLE = (
    "Regime map (exact): err(SCAFFOLD) / err(Local-SGD) over zeta^2 and sigma^2, same step "
    "and rounds, additive noise and the Gaussian design"
)
D, P, K, GAMMA, DELTA = 8, 8, 16, 0.05, 0.3
SPEC = tuple(np.linspace(1.0, 0.25, D).tolist())
DESIGNS = ("additive", "gaussian")
QUANTITY = "err(SCAFFOLD) / err(Local-SGD)"
#: the map's grids: full and quick
AXES = {
    False: (Axis("zeta2", 1e-2, 1e2, 6, log=True), Axis("sigma2", 1e-2, 1e2, 6, log=True)),
    True: (Axis("zeta2", 1e-2, 1e2, 4, log=True), Axis("sigma2", 1e-2, 1e2, 4, log=True)),
}
REFINE = {False: 0.01, True: 0.05}
STEPS = {False: 400, True: 200}


def errors(zeta2: float, sigma2: float, design: str, n: int) -> tuple[float, float]:
    """Exact excess risk of SCAFFOLD and of Local-SGD (the nodes' mean, last step ``n``) at
    ``(zeta^2, sigma^2)`` in the module's setting."""
    from convkit.exact.heterogeneous import expected_error_nodes

    prob = HeterogeneousLeastSquares(
        D, P, zeta2, spectrum=np.array(SPEC), noise=math.sqrt(sigma2), seed=0,
        hessian_dissimilarity=DELTA, design=design,
    )  # fmt: skip
    algos = [ck.SCAFFOLD(P, ck.Constant(GAMMA), comm=f"every:{K}", name="scaffold"),
             ck.LocalSGD(P, ck.Constant(GAMMA), comm=f"every:{K}", name="local")]  # fmt: skip
    res = expected_error_nodes(prob, algos, steps=n, record=[n], n_record=1,
                               theta0=prob.theta_star)  # fmt: skip
    out = []
    for lab in ("scaffold", "local"):
        cv = res.values[lab]
        out.append(
            float(cv.values[-1, cv.iterates.index("last"), cv.metrics.index("excess_risk"), 0])
        )
    return out[0], out[1]


@map_claim(
    threshold=1.0,
    side="below",
    quantity=QUANTITY,
    statement="SCAFFOLD's error is below Local-SGD's (same step, same rounds)",
    source="Karimireddy et al. 2020 (SCAFFOLD removes client drift; Theorems I and III)",
    version="1",
    units={"zeta2": "outer variance zeta^2", "sigma2": "noise sigma^2"},
)
def scaffold_vs_local(
    zeta2: float, sigma2: float, design: str = "additive", n: int = 400
) -> MapPoint:
    """One point of the map: the exact ratio (``lo = hi``) against 1, both errors kept."""
    s, loc = errors(zeta2, sigma2, design, n)
    return MapPoint.decide(s / loc, threshold=1.0, side="below", err_scaffold=s, err_local=loc)


def derived_ray(design: str, n: int) -> dict[str, float]:
    """``A`` and ``B`` of each method (module docstring) and the ray's slope ``c``."""
    a_s, a_l = errors(1.0, 0.0, design, n)
    b_s, b_l = errors(0.0, 1.0, design, n)
    den = a_l - a_s
    c = (b_s - b_l) / den if den != 0 else math.inf
    return {"A_scaffold": a_s, "A_local": a_l, "B_scaffold": b_s, "B_local": b_l, "c": c}


def _cache(quick: bool) -> Path:
    """The points' sweep cache (the analyses' cache directory, as the other maps')."""
    from convkit.figures_progress import cache_dirs

    return cache_dirs(REPO)[0] / "maps" / f"map_scaffold-{'quick' if quick else 'full'}"


def run(quick: bool = False) -> pd.DataFrame:
    """Per design: the map's points (grid and refinement) and its crossings
    (:func:`convkit.maps.result_frame`, ``part`` = point / crossing), and the derived ray
    (``part`` = derived)."""
    x, y = AXES[quick]
    n = STEPS[quick]
    parts = []
    for design in DESIGNS:
        res = run_map(scaffold_vs_local, x, y, settings={"design": design, "n": n},
                      out=_cache(quick) / design, refine=REFINE[quick])  # fmt: skip
        der = pd.DataFrame([{**derived_ray(design, n), "part": "derived",
                             "points_evaluated": len(res.points)}])  # fmt: skip
        for part in (result_frame(res), der):
            parts.append(part.assign(design=design, n=n, refine=REFINE[quick],
                                     grid=f"{x.n}x{y.n}"))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def _part(data: pd.DataFrame, design: str, part: str) -> pd.DataFrame:
    g = data[(data.design == design) & (data.part == part)]
    return g.dropna(axis=1, how="all").reset_index(drop=True)


def _axes(data: pd.DataFrame) -> tuple[Axis, Axis]:
    nx, ny = (int(v) for v in str(data.grid.iloc[0]).split("x"))
    x, y = AXES[False]
    return dataclasses.replace(x, n=nx), dataclasses.replace(y, n=ny)


def map_result(data: pd.DataFrame, design: str) -> MapResult:
    """The :class:`convkit.maps.MapResult` of one design, rebuilt from the data, with the
    derived ray as the claim's drawn boundary (none where ``c <= 0``)."""
    x, y = _axes(data)
    c = float(_part(data, design, "derived").c.iloc[0])
    claim = dataclasses.replace(
        scaffold_vs_local,
        predicted=(lambda z: np.asarray(z) / c) if 0 < c < math.inf else None,
        predicted_label=f"derived boundary zeta^2 = {c:.3g} sigma^2 (exact linearity)",
    )
    g = data[(data.design == design) & (data.part != "derived")]
    settings = {"design": design, "n": int(g.n.iloc[0])}
    return result_from_frame(claim, x, y, settings, g)


def symmetric_colours(ax: Any) -> None:
    """The colour field (``log10`` of the ratio, :func:`convkit.maps.figure.draw_map` with
    ``log_colour``) on a scale symmetric about 0: a ratio ``r`` and ``1 / r`` equally deep,
    so that 1.004 is not drawn as deep as 0.005."""
    from matplotlib.collections import QuadMesh
    from matplotlib.colors import TwoSlopeNorm

    mesh = next(m for m in ax.collections if isinstance(m, QuadMesh))
    span = max(-mesh.norm.vmin, mesh.norm.vmax)
    mesh.set_norm(TwoSlopeNorm(vcenter=0.0, vmin=-span, vmax=span))


def redraw_markers(ax: Any, res: MapResult) -> None:
    """The grid points' verdict markers drawn again above the boundary's bars and band."""
    from convkit.maps.figure import VERDICT_MARKERS

    g = res.grid_points()
    for verdict, sub in g.groupby("verdict"):
        style = {k: v for k, v in VERDICT_MARKERS.get(verdict, {}).items() if k != "label"}
        if style:
            ax.scatter(sub[res.x.name], sub[res.y.name], s=28, linewidths=1.1, zorder=8,
                       **style)  # fmt: skip


def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    outdir = Path(outdir)
    out = []
    for design in DESIGNS:
        res = map_result(data, design)
        c = float(_part(data, design, "derived").c.iloc[0])
        fig, ax = plt.subplots(figsize=(8.2, 5.8))
        path = outdir / f"map_scaffold_{design}.png"
        draw_map(res, ax, log_colour=True)
        symmetric_colours(ax)
        redraw_markers(ax, res)
        note = (
            "SCAFFOLD paper: upper bounds with unspecified constants, no predicted boundary"
            if 0 < c < math.inf
            else f"no boundary: derived c = {c:.3g} < 0 (SCAFFOLD worse everywhere); paper: none"
        )
        ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=7.5, va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
        ax.set_title(
            f"{QUANTITY} ({'additive noise' if design == 'additive' else 'Gaussian design'}), exact; same step gamma={GAMMA:g}, rounds every "
            f"K={K}\nd={D}, P={P}, delta={DELTA:g}, n={res.settings['n']}, theta0=theta*; "
            f"claim: ratio < 1",
            fontsize=9,
        )
        legend_outside(ax, where="below", ncol=3)
        fig.tight_layout()
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        out.append(path)
    return out


#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "map_scaffold",
    {
        "boundary_on_derived_ray": V.Claim(
            "the boundary located by bisection (each crossing's interval) contains the ray "
            "zeta^2 = c sigma^2 derived from the errors' linearity",
            "derived here: err = A zeta^2 + B sigma^2 from theta*, c = (B_S - B_L) / "
            "(A_L - A_S) from two runs per method, independent of the grid",
        ),
        "scaffold_wins_when_drift_dominates": V.Claim(
            "SCAFFOLD's error is below Local-SGD's (same step, same rounds) where the drift "
            "dominates: zeta^2 = 100, sigma^2 = 0.01",
            "Karimireddy et al. 2020 (SCAFFOLD removes client drift; its bound has no "
            "zeta^2 term, Local-SGD's has)",
        ),
        "noise_penalty": V.Claim(
            "SCAFFOLD's ratio where the noise dominates (zeta^2 = 0.01, sigma^2 = 100): the "
            "price of the control variates' noise",
            "read against 1 (no penalty)",
            kind=V.MEASUREMENT,
        ),
        "gaussian_design_ratio": V.Claim(
            "err(SCAFFOLD) / err(Local-SGD) over the grid with the Gaussian design",
            "outside the paper's bounded-variance assumption (the noise grows with the "
            "distance to the node optima): read against the additive map",
            kind=V.MEASUREMENT,
        ),
    },
)
_ID = {short: f"map_scaffold.{short}" for short in
       ("boundary_on_derived_ray", "scaffold_wins_when_drift_dominates", "noise_penalty",
        "gaussian_design_ratio")}  # fmt: skip


def _setting(design: str, data: pd.DataFrame) -> str:
    g = data[data.design == design]
    return (
        f"exact node engine, LS d={D}, P={P}, spectrum linspace(1, 0.25, {D}), delta={DELTA:g}, "
        f"{design} noise, gamma={GAMMA:g}, rounds every K={K}, n={int(g.n.iloc[0])}, "
        f"theta0=theta*, grid {g.grid.iloc[0]} log zeta^2, sigma^2 in [0.01, 100], "
        f"bisection to {float(g.refine.iloc[0]):g} of the log span"
    )


def _corner(pts: pd.DataFrame, zeta2: float, sigma2: float) -> pd.Series:
    g = pts[pts.stage == "grid"]
    i = ((np.log10(g.zeta2) - np.log10(zeta2)) ** 2
         + (np.log10(g.sigma2) - np.log10(sigma2)) ** 2).idxmin()  # fmt: skip
    return g.loc[i]


def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`): the derived slope ``c``
    taken 1.5 times larger (the located boundary must then miss the ray), and the two
    methods' errors swapped (SCAFFOLD must then lose where the drift dominates)."""
    wrong_c = data.copy()
    wrong_c.loc[wrong_c.part == "derived", "c"] = wrong_c.loc[wrong_c.part == "derived", "c"] * 1.5
    swapped = data.copy()
    pts = swapped.part == "point"
    s, loc = swapped.loc[pts, "err_scaffold"].copy(), swapped.loc[pts, "err_local"].copy()
    swapped.loc[pts, "err_scaffold"], swapped.loc[pts, "err_local"] = loc, s
    swapped.loc[pts, "measured"] = loc / s
    return [
        V.Control("derived slope c x 1.5", wrong_c, (_ID["boundary_on_derived_ray"],)),
        V.Control(
            "SCAFFOLD and Local-SGD swapped", swapped, (_ID["scaffold_wins_when_drift_dominates"],)
        ),  # fmt: skip
    ]


def boundary_ratios(cr: pd.DataFrame) -> list[tuple[float, float]]:
    """Each crossing's interval as an interval of ``zeta^2 / sigma^2`` (the coordinate along
    which the derived ray is a single value)."""
    return [(r.interval_lo / r.fixed, r.interval_hi / r.fixed) if r.along == "zeta2"
            else (r.fixed / r.interval_hi, r.fixed / r.interval_lo)
            for r in cr.itertuples()]  # fmt: skip


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict[str, Any]]:
    """Additive noise: every crossing's interval contains the derived ray (holds / violated;
    no crossing: inconclusive); the drift-dominated corner's ratio below 1 (holds /
    violated); the noise-dominated corner's ratio (measured). Gaussian design: the ratio's
    range over the grid and whether any crossing exists (measured)."""
    out = []
    design = "additive"
    setting = _setting(design, data)
    c = float(_part(data, design, "derived").c.iloc[0])
    cr = _part(data, design, "crossing")
    iv = boundary_ratios(cr)
    lo_all = min((a for a, _ in iv), default=math.nan)
    hi_all = max((b for _, b in iv), default=math.nan)
    if not iv or not 0 < c < math.inf:
        verdict, reason = V.INCONCLUSIVE, f"no crossing located (c = {c:.3g})"
    else:
        miss = [k for k, (a, b) in enumerate(iv) if not a <= c <= b]
        first = f" (first: along {cr.along[miss[0]]} at {cr.fixed[miss[0]]:.3g})" if miss else ""
        verdict, reason = V.verdict_of(
            not miss,
            f"all {len(iv)} crossing intervals contain the ray",
            f"{len(miss)} of {len(iv)} crossing intervals miss the ray{first}",
        )
    out.append(V.check_row(
        _ID["boundary_on_derived_ray"], setting,
        f"{len(iv)} crossings; zeta^2 / sigma^2 on the located boundary within "
        f"[{plain(lo_all, 4)}, {plain(hi_all, 4)}]",
        f"zeta^2 = {plain(c, 4)} sigma^2", verdict, reason,
        margin="each crossing's bisection interval",
        c=c, crossings=len(iv), ratio_lo=lo_all, ratio_hi=hi_all,
    ))  # fmt: skip
    pts = _part(data, design, "point")
    corner = _corner(pts, 1e2, 1e-2)
    r = float(corner.err_scaffold / corner.err_local)
    verdict, reason = V.verdict_of(r < 1.0, f"ratio {plain(r, 4)} < 1", f"ratio {plain(r, 4)} >= 1")
    out.append(V.check_row(
        _ID["scaffold_wins_when_drift_dominates"], setting,
        f"{plain(r, 4)} (SCAFFOLD {plain(corner.err_scaffold, 3)}, Local-SGD "
        f"{plain(corner.err_local, 3)})", "< 1", verdict, reason, ratio=r,
    ))  # fmt: skip
    corner = _corner(pts, 1e-2, 1e2)
    r = float(corner.err_scaffold / corner.err_local)
    out.append(V.check_row(
        _ID["noise_penalty"], setting,
        f"{plain(r, 5)} (SCAFFOLD {plain(corner.err_scaffold, 4)}, Local-SGD "
        f"{plain(corner.err_local, 4)})", "-", V.MEASURED,
        f"SCAFFOLD's error {100 * (r - 1):.2g} % above Local-SGD's where the noise dominates "
        f"(B_S / B_L = {plain(float(_part(data, design, 'derived').B_scaffold.iloc[0] / _part(data, design, 'derived').B_local.iloc[0]), 5)})",
        ratio=r,
    ))  # fmt: skip
    design = "gaussian"
    pts = _part(data, design, "point")
    cg = float(_part(data, design, "derived").c.iloc[0])
    rg = pts.err_scaffold / pts.err_local
    ncr = len(_part(data, design, "crossing"))
    out.append(V.check_row(
        _ID["gaussian_design_ratio"], _setting(design, data),
        f"ratio in [{plain(rg.min(), 4)}, {plain(rg.max(), 4)}] over {len(pts)} points; "
        f"{ncr} crossings; derived c = {plain(cg, 4)}",
        "-", V.MEASURED,
        "SCAFFOLD worse at every point: its control variates carry the multiplicative noise, "
        "which grows with zeta^2" if rg.min() > 1 else "the ratio crosses 1 on the grid",
        ratio_min=float(rg.min()), ratio_max=float(rg.max()), c=cg, crossings=ncr,
    ))  # fmt: skip
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """README numbers: the derived slopes, the crossings, the corner ratios, the costs."""
    out: dict[str, str] = {}
    for design in DESIGNS:
        der = _part(data, design, "derived").iloc[0]
        pts = _part(data, design, "point")
        r = pts.err_scaffold / pts.err_local
        out[f"c_{design}"] = f"{der.c:.3g}"
        out[f"ratio_min_{design}"] = f"{r.min():.3g}"
        out[f"ratio_max_{design}"] = f"{r.max():.4g}"
        out[f"crossings_{design}"] = str(len(_part(data, design, "crossing")))
        out[f"points_{design}"] = str(int(der.points_evaluated))
        out[f"noise_penalty_{design}"] = f"{100 * (der.B_scaffold / der.B_local - 1):.2g}"
        for z2, s2, tag in ((1e2, 1e-2, "drift"), (1e-2, 1e2, "noise")):
            c = _corner(pts, z2, s2)
            out[f"corner_{tag}_{design}"] = f"{c.err_scaffold / c.err_local:.3g}"
    iv = boundary_ratios(_part(data, "additive", "crossing"))
    out["boundary_lo"] = f"{min(a for a, _ in iv):.3g}" if iv else "-"
    out["boundary_hi"] = f"{max(b for _, b in iv):.3g}" if iv else "-"
    out["grid"] = str(data.grid.iloc[0])
    out["n"] = str(int(data.n.iloc[0]))
    return out
