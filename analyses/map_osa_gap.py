"""Regime map: where one-shot averaging stops matching mini-batch averaging (Patel &
Dieuleveut 2019), over the step constant C L and the step decay alpha at fixed T and P.

Claim mapped (:data:`convkit.maps.claims.osa_gap`): ``err(OSA)/err(MBA) - 1 <= eps``
(``eps = 0.05``) on the Polyak-Ruppert average, least squares by the exact engine
(:func:`convkit.exact.threshold.communication_threshold`: Gaussian design, d = 10, spectrum
``1/i``, sigma = 1, theta* = 0, theta0 at distance 1 spread evenly over the eigen-directions,
steps ``gamma_k = C k^-alpha``, batch 1), T = 1e5 gradients, P = 8 workers (n = 12 500 local
steps). Also mapped: the rounds needed, ``N*`` = the fewest evenly spaced rounds within
``1 + eps`` of MBA (``N* = 1``: one-shot averaging suffices).

Map (:func:`convkit.maps.run_map`, every point a cached function sweep): C L from 0.1 to 2
(7 values, log), alpha from 0.5 to 1 (6 values); the boundary located by bisection along
every grid line to 0.02 of each axis' span (quick: 4 x 4, 0.1).

A coarse logistic map by Monte Carlo (:data:`convkit.maps.claims.osa_gap_logistic`: online
logistic regression d = 2, ``h = 1``, ``theta* = (1, 1)/sqrt(2)``, ``theta0 = 0``, T = 8192,
P = 8, 1024 replicates on common random numbers; quick 256): four cells, C L in {0.25, 1},
alpha in {0.6, 0.9}, each with its paired SE; the precision rule: a ratio whose SE exceeds
3 % of it is ``imprecise`` and decides nothing.

Predicted boundary: none. Patel & Dieuleveut's equivalence is asymptotic in T and the
large-step model of :mod:`convkit.bounds.local_sgd_large_steps` has an unknown constant; the
figure draws the single-worker mean-square stability limit of the steps' first step
(:func:`convkit.exact.stability_limit`, C L = 0.48) as a reference line, not as a
prediction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from convkit import verdicts as V
from convkit.maps import Axis, result_frame, result_from_frame, run_map
from convkit.maps.claims import OSA_EPS, osa_gap, osa_gap_logistic
from convkit.plotting import REFERENCE_STYLE, legend_outside

TITLE = (
    "Regime map: err(OSA)/err(MBA) - 1 and the rounds needed over C L and alpha (exact least "
    "squares, T = 1e5, P = 8), a coarse Monte Carlo logistic map, and the located boundary"
)
REPO = Path(__file__).resolve().parents[1]
NAME = "map_osa_gap"
FULL = {"x": Axis("CL", 0.1, 2.0, 7, log=True), "y": Axis("alpha", 0.5, 1.0, 6),
        "refine": 0.02, "replicates": 1024}  # fmt: skip
QUICK = {"x": Axis("CL", 0.1, 2.0, 4, log=True), "y": Axis("alpha", 0.5, 1.0, 4),
         "refine": 0.1, "replicates": 256}  # fmt: skip
LOGISTIC = {"x": Axis("CL", 0.25, 1.0, 2, log=True), "y": Axis("alpha", 0.6, 0.9, 2)}

CLAIMS = V.declare_claims(
    NAME,
    {
        "osa_within_eps_small_steps": V.Claim(
            f"at the smallest C L of the map, one-shot averaging is within eps = {OSA_EPS:g} of "
            "mini-batch averaging (err(OSA)/err(MBA) - 1 <= eps), exact least squares",
            "Patel & Dieuleveut 2019 (arXiv 1904.11325): OSA and MBA are asymptotically "
            "equivalent (local_sgd.osa_mba_ratio)",
        ),
        "gap_grows_with_step": V.Claim(
            "err(OSA)/err(MBA) - 1 does not decrease as C L grows, at every alpha (exact)",
            "hypothesis formed here from local_sgd_large_steps: the gap is the bias of the "
            "early steps, which grows with the step constant",
        ),
        "osa_within_eps_logistic": V.Claim(
            f"one-shot averaging is within eps = {OSA_EPS:g} of mini-batch averaging on online "
            "logistic regression (Monte Carlo, 95 % interval below eps)",
            "Patel & Dieuleveut 2019 (arXiv 1904.11325): OSA and MBA are asymptotically equivalent",
        ),
        "boundary": V.Claim(
            f"where err(OSA)/err(MBA) - 1 crosses eps = {OSA_EPS:g} on a grid line, located by "
            "bisection with its interval",
            "measured on the map (convkit.maps.refine)",
            kind=V.MEASUREMENT,
        ),
        "rounds_needed": V.Claim(
            "N*, the fewest evenly spaced rounds within 1 + eps of MBA, on each side of the "
            "boundary",
            "measured on the map (convkit.exact.threshold.communication_threshold)",
            kind=V.MEASUREMENT,
        ),
    },
)


def _cache(quick: bool) -> Path:
    from convkit.figures_progress import cache_dirs

    return cache_dirs(REPO)[0] / "maps" / f"{NAME}-{'quick' if quick else 'full'}"


def run(quick: bool = False) -> pd.DataFrame:
    """The exact map (``engine = "exact"``) and the logistic cells (``engine =
    "monte_carlo"``), each as :func:`convkit.maps.result_frame` rows."""
    cfg = QUICK if quick else FULL
    exact = run_map(osa_gap, cfg["x"], cfg["y"], out=_cache(quick) / "exact", refine=cfg["refine"])
    mc = run_map(osa_gap_logistic, LOGISTIC["x"], LOGISTIC["y"], out=_cache(quick) / "logistic",
                 settings={"replicates": cfg["replicates"]}, refine=None)  # fmt: skip
    return pd.concat(
        [result_frame(exact).assign(engine="exact"), result_frame(mc).assign(engine="monte_carlo")],
        ignore_index=True, sort=False,
    )  # fmt: skip


def _axes(pts: pd.DataFrame) -> tuple[Axis, Axis]:
    xs, ys = np.sort(pts.CL.unique()), np.sort(pts.alpha.unique())
    return (Axis("CL", float(xs[0]), float(xs[-1]), len(xs), log=True),
            Axis("alpha", float(ys[0]), float(ys[-1]), len(ys)))  # fmt: skip


def results(data: pd.DataFrame) -> dict[str, Any]:
    """The two :class:`convkit.maps.MapResult` of the data: ``"exact"`` and ``"monte_carlo"``."""
    out = {}
    for engine, claim in (("exact", osa_gap), ("monte_carlo", osa_gap_logistic)):
        part = data[data.engine == engine].drop(columns="engine")
        x, y = _axes(part[(part.part == "point") & (part.stage == "grid")])
        out[engine] = result_from_frame(claim, x, y, {}, part)
    return out


# ---------------------------------------------------------------------- figure
def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    from convkit.exact import stability_limit
    from convkit.maps.figure import cell_edges, draw_map
    from convkit.problems.least_squares import LeastSquares

    res = results(data)
    fig, axes = plt.subplots(1, 3, figsize=(20, 6.2), gridspec_kw={"width_ratios": [1.2, 1.2, 0.8]})
    ex = res["exact"]
    draw_map(ex, axes[0], log_colour=True)
    prob = LeastSquares.gaussian(10, spectrum="1/i", noise=1.0, theta_star=np.zeros(10))
    limit = float(stability_limit(prob)) * float(prob.L)
    for ax in axes[:2]:
        ax.axvline(limit, **REFERENCE_STYLE,
                   label=f"mean-square stability limit of one step, C L = {limit:.2f} (reference)")  # fmt: skip
    axes[0].plot([], [], " ", label="predicted boundary: none (asymptotic claim)")
    legend_outside(axes[0], where="below", ncol=2)
    ax = axes[1]
    nstar = np.asarray(ex.field("N_star"), dtype=float)
    mesh = ax.pcolormesh(cell_edges(ex.x), cell_edges(ex.y), np.log10(nstar), cmap="viridis",
                         shading="flat")  # fmt: skip
    fig.colorbar(mesh, ax=ax, pad=0.02).set_label("log10 N* (rounds within 1 + eps of MBA)")
    g = ex.grid_points()
    for r in g.itertuples():
        ax.annotate(f"{int(r.N_star)}", (r.CL, r.alpha), ha="center", va="center", fontsize=7,
                    color="white" if r.N_star < 100 else "black")  # fmt: skip
    cr = ex.crossings
    sub = cr[cr.along == "CL"] if len(cr) else cr
    if len(sub):
        o = np.argsort(sub.fixed.to_numpy())
        ax.plot(sub.position.to_numpy()[o], sub.fixed.to_numpy()[o], color="tab:orange", lw=2,
                label="located boundary of the gap (left)")  # fmt: skip
    ax.set(xscale="log", xlabel=ex.claim.label("CL"), ylabel=ex.claim.label("alpha"),
           xlim=(cell_edges(ex.x)[0], cell_edges(ex.x)[-1]), ylim=(cell_edges(ex.y)[0], cell_edges(ex.y)[-1]),
           title=f"rounds needed N* (eps = {OSA_EPS:g}), T = 1e5, P = 8, n = 12500")  # fmt: skip
    legend_outside(ax, where="below", ncol=1)
    draw_map(res["monte_carlo"], axes[2])
    legend_outside(axes[2], where="below", ncol=2)
    fig.tight_layout()
    path = Path(outdir) / f"{NAME}.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return [path]


# ---------------------------------------------------------------------- checks, facts
def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`): every gap (and its interval)
    raised by 1, so that none is within eps; the exact gaps of each alpha row reversed in C L
    (the gap then falls as the step grows)."""
    raised = data.copy()
    p = raised.part == "point"
    for c in ("measured", "lo", "hi"):
        raised.loc[p, c] = raised.loc[p, c] + 1.0
    raised.loc[p & (raised.verdict == V.HOLDS), "verdict"] = V.VIOLATED
    reversed_ = data.copy()
    g = data[(data.part == "point") & (data.stage == "grid") & (data.engine == "exact")]
    for _, row in g.groupby("alpha"):
        idx = row.sort_values("CL").index
        reversed_.loc[idx, "measured"] = row.sort_values("CL").measured.to_numpy()[::-1]
    return [
        V.Control("every gap raised by 1", raised,
                  (f"{NAME}.osa_within_eps_small_steps", f"{NAME}.osa_within_eps_logistic")),
        V.Control("the gaps of each alpha reversed in C L", reversed_,
                  (f"{NAME}.gap_grows_with_step",)),
    ]  # fmt: skip


_EXACT = "exact LS d=10 spectrum 1/i, T=1e5, P=8, theta0 at distance 1, Polyak average"


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict]:
    out = []
    ex = data[data.engine == "exact"]
    g = ex[(ex.part == "point") & (ex.stage == "grid")]
    for alpha, row in g.groupby("alpha"):
        row = row.sort_values("CL")
        p = row.iloc[0]
        verdict = {V.HOLDS: V.HOLDS, V.VIOLATED: V.VIOLATED}.get(str(p.verdict), str(p.verdict))
        out.append(V.check_row(
            f"{NAME}.osa_within_eps_small_steps", f"{_EXACT}, alpha={alpha:g}, C L={p.CL:g}",
            f"gap {p.measured:.3g}", f"<= {OSA_EPS:g}", verdict, str(p.reason),
        ))  # fmt: skip
        gaps = row.measured.to_numpy()
        drops = np.flatnonzero(np.diff(gaps) < 0)
        verdict, reason = V.verdict_of(
            drops.size == 0, f"non-decreasing over C L in {row.CL.round(3).tolist()}",
            "decreases between C L = " + ", ".join(
                f"{row.CL.iloc[i]:.3g} and {row.CL.iloc[i + 1]:.3g}" for i in drops),
        )  # fmt: skip
        out.append(V.check_row(
            f"{NAME}.gap_grows_with_step", f"{_EXACT}, alpha={alpha:g}",
            "gaps " + ", ".join(f"{v:.3g}" for v in gaps), "non-decreasing in C L", verdict,
            reason,
        ))  # fmt: skip
        n_in = row[row.measured <= OSA_EPS].N_star
        n_out = row[row.measured > OSA_EPS].N_star
        out.append(V.check_row(
            f"{NAME}.rounds_needed", f"{_EXACT}, alpha={alpha:g}, eps={OSA_EPS:g}",
            f"N* = {sorted(set(n_in.astype(int)))} within eps, "
            f"{sorted(set(n_out.astype(int)))} beyond", "-", V.MEASURED,
            f"N* over C L in {row.CL.round(3).tolist()}: {row.N_star.astype(int).tolist()}",
        ))  # fmt: skip
    for r in ex[ex.part == "crossing"].itertuples():
        out.append(V.check_row(
            f"{NAME}.boundary",
            f"{_EXACT}; along {r.along} at {r.fixed_name}={r.fixed:.4g}, {r.from_verdict} -> "
            f"{r.to_verdict}, tolerance {r.tol:g} of the span ({r.tol_scale})",
            f"{r.along} = {r.position:.4g} in [{r.interval_lo:.4g}, {r.interval_hi:.4g}]",
            "-", V.MEASURED, f"bisection in {int(r.steps)} steps",
        ))  # fmt: skip
    mc = data[(data.engine == "monte_carlo") & (data.part == "point")]
    for r in mc.itertuples():
        out.append(V.check_row(
            f"{NAME}.osa_within_eps_logistic",
            f"Monte Carlo logistic d=2, T=8192, P=8, theta0=0, {int(r.replicates)} replicates, "
            f"C L={r.CL:g}, alpha={r.alpha:g}",
            f"gap {r.measured:.3g} [{r.lo:.3g}, {r.hi:.3g}] (95%)", f"<= {OSA_EPS:g}",
            str(r.verdict), str(r.reason), margin="1.96 SE; imprecise when SE > 3 % of the ratio",
        ))  # fmt: skip
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """The boundary in C L at each alpha (interval), the gap's range and the logistic cells,
    for the README."""
    out: dict[str, str] = {}
    ex = data[data.engine == "exact"]
    g = ex[(ex.part == "point") & (ex.stage == "grid")]
    out["points"] = str(int((ex.part == "point").sum()))
    out["gap_min"] = f"{g.measured.min():.2g}"
    out["gap_max"] = f"{g.measured.max():.3g}"
    out["nstar_max"] = str(int(g.N_star.max()))
    cr = ex[(ex.part == "crossing") & (ex.along == "CL")].sort_values("fixed")
    for r in cr.itertuples():
        key = f"{r.fixed:g}".replace(".", "p")
        out[f"boundary_alpha_{key}"] = f"{r.position:.3g}"
        out[f"interval_alpha_{key}"] = f"[{r.interval_lo:.3g}, {r.interval_hi:.3g}]"
    if len(cr):
        out["boundary_range"] = f"{cr.position.min():.2g}-{cr.position.max():.2g}"
    mc = data[(data.engine == "monte_carlo") & (data.part == "point")]
    out["logistic_verdicts"] = ", ".join(
        f"C L={r.CL:g}, alpha={r.alpha:g}: {r.label}" for r in mc.itertuples()
    )
    return out
