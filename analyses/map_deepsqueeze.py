"""Regime map: bits to a target error, DeepSqueeze against CHOCO-SGD, over the top-k
fraction ``k/d`` and the graph's spectral gap ``1 - lambda_2`` on heterogeneous nodes
(Monte Carlo, coarse).

Claim under test (Tang et al. 2019, DeepSqueeze [paper]: error-compensated compression,
presented as outperforming earlier compression-based decentralized methods; the
bits-to-target form is this analysis'): DeepSqueeze reaches the target excess risk with fewer bits than
CHOCO-SGD (Koloskova et al. 2019) on the same graph with the same top-k compressor. The map
measures ``bits(DeepSqueeze) / bits(CHOCO-SGD)`` against the threshold 1 ("below").

Setting: :class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares`, d = 16, P = 16
nodes, flat mean spectrum, Hessian dissimilarity delta = 0.5, zeta^2 = 1, label noise
sigma = 0.5, seed 0, ``theta0 = 0`` (initial excess risk 0.73); target excess risk 0.02.
Graphs: the circulant graphs on 16 nodes with ``m`` neighbours on each side, uniform
weights (``m = 1``: the ring, spectral gap 0.051; ``m = 2``: 0.148; ``m = 4``: 0.441;
``m = 8``: the complete graph, 1.0), so that the gap grows with ``m`` while the graph stays
vertex-transitive. Compressor: top-k with ``k = d k/d``, ``k/d`` in {1/16, 1/8, 1/4, 1/2}.

Both methods as the heterogeneous study runs them (reused from
:mod:`analyses._decentralized_common` and :mod:`analyses.decentralized_heterogeneous`, not
copied): consensus parameters (CHOCO-SGD's ``gamma_c``, DeepSqueeze's ``eta``) by pure gossip
on the point's graph and compressor; each method's constant step by the bits rule
(:func:`analyses._decentralized_common.tune_steps`: fewest bits to half the target, so that
the chosen step's floor lies well below the target; geometric grid 0.005 ... 0.04 of factor
sqrt(2) (bits scale like 1 / gamma: the grid resolves a ratio of 1.41), extended up to 3
times at either end, 4 replicates on the tuning seed); then both at their tuned steps on
common random numbers (R = 8 replicates, n = 600 iterations, 20 record points; quick: R = 4,
n = 200, step grid of factor 2). Bits to the target: the first crossing of the mean excess-risk curve of the node average (log-log interpolation), the interval from
the crossings of mean -+ 2 SE; the ratio's interval ``[lo_DS / hi_CHOCO, hi_DS / lo_CHOCO]``
(:func:`analyses._bits_to_target.bits_ratio`): it covers the evaluation's
replicates, not the noise of the step choice (a tuned step one grid value off moves the
ratio by 1.41). A point whose interval contains 1 is unresolved; where only one method reaches the target the ratio is 0 (holds) or infinite
(violated); where neither does, imprecise.

Grid: 4 x 4 (quick 2 x 2: the corners). The axes are discrete (``k`` an integer, one graph per
``m``): no bisection (``run_map`` with ``refine = None``); the crossings are located by
:func:`convkit.maps.locate_crossings` with no point evaluated between grid points, so each
crossing's interval is its grid segment.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from analyses import _decentralized_common as C
from analyses._bits_to_target import bits_ratio
from analyses.map_scaffold import redraw_markers, symmetric_colours
from convkit import verdicts as V
from convkit.compression import TopK
from convkit.maps import (
    Axis,
    MapPoint,
    MapResult,
    locate_crossings,
    map_claim,
    result_frame,
    result_from_frame,
    run_map,
)
from convkit.maps.figure import draw_map
from convkit.plotting import legend_outside, plain
from convkit.problems.heterogeneous import HeterogeneousLeastSquares
from convkit.topology import Topology, from_graph

REPO = Path(__file__).resolve().parents[1]
TITLE = (
    "Regime map (Monte Carlo): bits to a target, DeepSqueeze / CHOCO-SGD, over top-k k/d and "
    "the spectral gap, heterogeneous least squares"
)
D, ZETA2, DELTA, NOISE = 16, 1.0, 0.5, 0.5
TARGET = 0.02
#: the target of the step tuning: half the evaluation target, so that a chosen step's floor
#: lies well below :data:`TARGET` (the bits rule otherwise picks the largest step that
#: reaches the target on the tuning seed, whose floor can sit at the target itself)
TUNE_TARGET = TARGET / 2


#: the step grid from 0.005 to 0.04: factor sqrt(2) (a ratio of bits set by two neighbouring
#: steps is 1.41); the quick form takes factor 2
def step_grid(factor: float) -> np.ndarray:
    """The geometric step grid from 0.005 to 0.04 with ratio ``factor``."""
    return 0.005 * factor ** np.arange(round(math.log(8.0) / math.log(factor)) + 1)


MAX_EXTENSIONS = 3
SEED, TUNE_SEED, CONSENSUS_SEED = 1307, 7031, 1307
QUANTITY = "bits(DeepSqueeze) / bits(CHOCO-SGD)"
AXES = {
    False: (Axis("kd", 1 / 16, 1 / 2, 4, log=True), Axis("neighbours", 1, 8, 4, log=True)),
    True: (Axis("kd", 1 / 16, 1 / 2, 2, log=True), Axis("neighbours", 1, 8, 2, log=True)),
}
RUNS = {
    False: {"n": 600, "R": 8, "grid_factor": math.sqrt(2.0)},
    True: {"n": 200, "R": 4, "grid_factor": 2.0},
}
#: tuning replicates (both modes)
RT = 4


def circulant(m: int) -> Topology:
    """The circulant graph on ``P`` nodes with ``m`` neighbours on each side, uniform weights
    (``m = 1``: the ring; ``m >= P / 2``: the complete graph)."""
    m = int(m)
    if not 1 <= m <= C.P // 2:
        raise ValueError(f"neighbours must be an integer in [1, {C.P // 2}], got {m!r}")
    g = nx.circulant_graph(C.P, list(range(1, m + 1)))
    return from_graph(g, "uniform", name=f"circulant({C.P}, m={m})")


def problem() -> HeterogeneousLeastSquares:
    """The heterogeneous least-squares problem of the module docstring."""
    return HeterogeneousLeastSquares(D, C.P, ZETA2, spectrum="flat", noise=NOISE, seed=0,
                                     hessian_dissimilarity=DELTA)  # fmt: skip


def _bits(res: Any, label: str) -> dict[str, float]:
    """Bits to :data:`TARGET` of ``label`` (mean curve) with the crossings of mean -+ 2 SE
    (NaN: never reached)."""
    cv = res.values[label]
    vals = cv.values[:, cv.iterates.index("last"), cv.metrics.index("excess_risk"), :]
    m = vals.mean(axis=1)
    se = vals.std(axis=1, ddof=1) / math.sqrt(vals.shape[1])
    b = np.maximum(np.asarray(cv.axes["bits"], dtype=float), 1.0)
    return {
        "bits": C.level_crossing(b, m, TARGET),
        "bits_lo": C.level_crossing(b, m - 2 * se, TARGET),
        "bits_hi": C.level_crossing(b, m + 2 * se, TARGET),
        "final": float(m[-1]),
        "diverged": int(np.sum(cv.diverged_at > 0)),
    }


@map_claim(
    threshold=1.0,
    side="below",
    quantity=QUANTITY,
    statement="DeepSqueeze reaches the target error with fewer bits than CHOCO-SGD",
    source="Tang et al. 2019 (DeepSqueeze) [paper]; CHOCO-SGD: Koloskova et al. 2019",
    # 2: the reported spectral gap by the Jacobi method (the same bits on every CPU)
    version="2",
    units={"kd": "top-k fraction k/d", "neighbours": "neighbours per side m"},
)
def deepsqueeze_vs_choco(
    kd: float, neighbours: float, n: int = 600, R: int = 8, grid_factor: float = math.sqrt(2.0)
) -> MapPoint:
    """One point: tune both methods' steps for bits, run both on common random numbers, and
    decide the ratio of their bits to the target against 1 (module docstring)."""
    m = int(round(neighbours))
    topo = circulant(m)
    comp = TopK(fraction=float(kd))
    prob = problem()
    gc, eta = C.consensus_params(topo, comp, D, CONSENSUS_SEED)

    def builder(method: str) -> Any:
        return lambda g, name: C.make_method(method, topo, g, comp, gamma_c=gc, eta=eta,
                                             name=name)  # fmt: skip

    methods = ("DeepSqueeze", "CHOCO-SGD")
    grid = step_grid(grid_factor)
    tuned = C.tune_steps(prob, {k: builder(k) for k in methods}, grid, steps=n, replicates=RT,
                         seed=TUNE_SEED, target=TUNE_TARGET, max_extensions=MAX_EXTENSIONS,
                         no_gain_stop=True)  # fmt: skip
    steps = {k: float(tuned["bits"][k][0]) for k in methods}
    algos = [builder(k)(steps[k], k) for k in methods]
    res = C.simulate_quiet(prob, algos, steps=n, replicates=R, seed=SEED, n_record=20)
    ds, ch = _bits(res, "DeepSqueeze"), _bits(res, "CHOCO-SGD")
    r, lo, hi = bits_ratio(pd.Series(ch), pd.Series(ds))
    extra = {
        "gap": float(topo.spectral_gap), "k": int(round(kd * D)), "gamma_c": gc, "eta": eta,
        "gamma_ds": steps["DeepSqueeze"], "gamma_choco": steps["CHOCO-SGD"],
        **{f"{k}_ds": v for k, v in ds.items()}, **{f"{k}_choco": v for k, v in ch.items()},
    }  # fmt: skip
    if r == 0 or math.isinf(r) or math.isnan(r):
        verdict, why = {
            0: (V.HOLDS, "only DeepSqueeze reaches the target"),
            1: (V.VIOLATED, "only CHOCO-SGD reaches the target"),
            2: (V.INCONCLUSIVE, "neither method reaches the target"),
        }[0 if r == 0 else (1 if math.isinf(r) else 2)]
        return MapPoint(r, lo, hi, verdict, why, extra)
    return MapPoint.decide(r, lo, hi, threshold=1.0, side="below", **extra)


def run(quick: bool = False) -> pd.DataFrame:
    """The map's points and its crossings (``part`` = point / crossing, as :func:`convkit.maps.result_frame` writes them)."""
    x, y = AXES[quick]
    res = run_map(deepsqueeze_vs_choco, x, y, settings=RUNS[quick], out=_cache(quick),
                  refine=None)  # fmt: skip
    grid = {(float(r[x.name]), float(r[y.name])): r for r in res.points.to_dict("records")}
    # discrete axes: no point is evaluated between grid points (``evaluate`` returns none), so
    # each crossing's interval is its grid segment
    crossings = locate_crossings(x, y, grid, lambda new: {}, threshold=1.0, tol=0.5)
    res.crossings = pd.DataFrame(crossings)
    # the map's cost is its run's time in runs.json: a column of seconds would change the
    # data at every run
    return result_frame(res).assign(n=RUNS[quick]["n"], R=RUNS[quick]["R"],
                                    grid=f"{x.n}x{y.n}")  # fmt: skip


def _cache(quick: bool) -> Path:
    """The points' sweep cache (the analyses' cache directory, as the other maps')."""
    from convkit.figures_progress import cache_dirs

    return cache_dirs(REPO)[0] / "maps" / f"map_deepsqueeze-{'quick' if quick else 'full'}"


def _part(data: pd.DataFrame, part: str) -> pd.DataFrame:
    return data[data.part == part].dropna(axis=1, how="all").reset_index(drop=True)


def map_result(data: pd.DataFrame) -> MapResult:
    """The :class:`convkit.maps.MapResult` rebuilt from the data."""
    import dataclasses

    nx_, ny = (int(v) for v in str(data.grid.iloc[0]).split("x"))
    x, y = (dataclasses.replace(a, n=k) for a, k in zip(AXES[False], (nx_, ny), strict=True))
    settings = {"n": int(data.n.iloc[0]), "R": int(data.R.iloc[0])}
    return result_from_frame(deepsqueeze_vs_choco, x, y, settings, data)


def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    res = map_result(data)
    pts = res.grid_points()
    fig, ax = plt.subplots(figsize=(8.2, 5.8))
    path = Path(outdir) / "map_deepsqueeze.png"
    # log colours need positive ratios (0: only DeepSqueeze reached the target)
    positive = bool(np.all(pts.measured[np.isfinite(pts.measured)] > 0))
    draw_map(res, ax, log_colour=positive)
    if positive:
        symmetric_colours(ax)
    redraw_markers(ax, res)
    ms = sorted(pts.neighbours.unique())
    gaps = [float(pts[pts.neighbours == m].gap.iloc[0]) for m in ms]
    ax.set_yticks(ms, [f"m={m:g}\ngap {g:.3g}" for m, g in zip(ms, gaps, strict=True)])
    ax.minorticks_off()
    ks = sorted(pts.kd.unique())
    ax.set_xticks(ks, [f"{k:g}\n(k={k * D:g})" for k in ks])
    ax.set_ylabel("circulant graph, m neighbours per side (spectral gap 1 - lambda_2)")
    ax.set_xlabel(f"top-k fraction k/d (d = {D})")
    ax.text(0.01, 0.01, "no predicted boundary (the papers' rates do not compare the two)",
            transform=ax.transAxes, fontsize=7.5,
            bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})  # fmt: skip
    ax.set_title(
        f"{QUANTITY}, each at its bits-tuned step; target excess risk {TARGET:g}\n"
        f"heterogeneous LS d={D}, P={C.P}, zeta^2={ZETA2:g}, delta={DELTA:g}, sigma={NOISE:g}; "
        f"n={res.settings['n']}, R={res.settings['R']} (interval: mean -+ 2 SE); claim: < 1",
        fontsize=9,
    )
    legend_outside(ax, where="below", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [path]


#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "map_deepsqueeze",
    {
        "fewer_bits_somewhere": V.Claim(
            "DeepSqueeze reaches the target with fewer bits than CHOCO-SGD at some point of "
            "the map (a resolved holds point)",
            "Tang et al. 2019 (DeepSqueeze) [paper], in the bits-to-target form of this map",
        ),
        "fewer_bits_everywhere": V.Claim(
            "DeepSqueeze reaches the target with fewer bits than CHOCO-SGD at every point of "
            "the map",
            "Tang et al. 2019 (DeepSqueeze) [paper], read as a claim over the whole map",
        ),
        "boundary": V.Claim(
            "where the verdict changes on the map: each crossing with its interval (a grid "
            "segment: the axes are discrete)",
            "the map's grid (no predicted boundary: the papers' rates do not compare the two)",
            kind=V.MEASUREMENT,
        ),
    },
)
_ID = {s: f"map_deepsqueeze.{s}" for s in ("fewer_bits_somewhere", "fewer_bits_everywhere",
                                            "boundary")}  # fmt: skip


def _setting(data: pd.DataFrame) -> str:
    return (
        f"Monte Carlo, heterogeneous LS d={D}, P={C.P}, flat spectrum, zeta^2={ZETA2:g}, "
        f"delta={DELTA:g}, sigma={NOISE:g}, theta0=0, target {TARGET:g}; circulant graphs, "
        f"top-k; steps tuned for bits; n={int(data.n.iloc[0])}, R={int(data.R.iloc[0])}, "
        f"grid {data.grid.iloc[0]} (k/d x m)"
    )


def _where(row: Any) -> str:
    return f"k/d={row.kd:g}, m={row.neighbours:g} (gap {row.gap:.3g})"


def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative control (:func:`convkit.verdicts.controlled`): a map on which DeepSqueeze
    needs at least 100 times CHOCO-SGD's bits at every point (each ratio and its interval's
    ends replaced by 100 max(value, 1), a value that is not finite by 100), where both claims
    must be violated; it names as targets the claims the real data do not violate already."""
    dear = data.copy()
    pts = dear.part == "point"
    for c in ("measured", "lo", "hi"):
        v = dear.loc[pts, c].to_numpy(float)
        dear.loc[pts, c] = 100.0 * np.where(np.isfinite(v), np.maximum(v, 1.0), 1.0)
    real = {r["result"]: r["verdict"] for r in checks.raw(data)}
    targets = tuple(
        _ID[s] for s in ("fewer_bits_somewhere", "fewer_bits_everywhere")
        if real[_ID[s]] != V.VIOLATED
    )  # fmt: skip
    return [V.Control("DeepSqueeze needs 100x CHOCO-SGD's bits", dear, targets)]


def _verdict(r: float, lo: float, hi: float) -> str:
    if r == 0:
        return V.HOLDS
    if math.isinf(r):
        return V.VIOLATED
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return V.INCONCLUSIVE
    return V.HOLDS if hi < 1 else (V.VIOLATED if lo > 1 else V.CONSISTENT_UNRESOLVED)


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict[str, Any]]:
    """The verdicts re-derived from each point's ratio and interval: "fewer bits somewhere"
    (holds when some point holds, violated when every decided point is violated, else
    unresolved); "fewer bits everywhere" (violated when some point is violated, holds when
    every point holds, else unresolved); the boundary's crossings (measured)."""
    pts = _part(data, "point")
    pts = pts[pts.stage == "grid"]
    setting = _setting(data)
    verdicts = [_verdict(r.measured, r.lo, r.hi) for r in pts.itertuples()]
    listing = "; ".join(
        f"{_where(r)}: {plain(r.measured, 3)} [{plain(r.lo, 2)}, {plain(r.hi, 2)}] {v}"
        for r, v in zip(pts.itertuples(), verdicts, strict=True)
    )
    n_h, n_v = verdicts.count(V.HOLDS), verdicts.count(V.VIOLATED)
    counts = f"{n_h} holds, {n_v} violated, {len(verdicts) - n_h - n_v} other of {len(verdicts)}"
    if n_h:
        v1, why1 = V.HOLDS, f"{counts}: DeepSqueeze needs fewer bits at {n_h} point(s)"
    elif n_v == len(verdicts):
        v1, why1 = V.VIOLATED, f"{counts}: CHOCO-SGD needs fewer bits at every point"
    else:
        v1, why1 = V.CONSISTENT_UNRESOLVED, f"{counts}: no point resolved in DeepSqueeze's favour"
    out = [V.check_row(_ID["fewer_bits_somewhere"], setting, listing, "< 1 at some point", v1,
                       why1, margin="ratio interval from mean -+ 2 SE (evaluation replicates; the step "
                       "choice's noise not included)", holds=n_h,
                       violated=n_v, points=len(verdicts))]  # fmt: skip
    if n_v:
        v2, why2 = V.VIOLATED, f"{counts}: CHOCO-SGD needs fewer bits at {n_v} point(s)"
    elif n_h == len(verdicts):
        v2, why2 = V.HOLDS, f"{counts}: DeepSqueeze needs fewer bits at every point"
    else:
        v2, why2 = V.CONSISTENT_UNRESOLVED, f"{counts}: some points unresolved"
    out.append(V.check_row(_ID["fewer_bits_everywhere"], setting, counts, "< 1 at every point",
                           v2, why2, margin="ratio interval from mean -+ 2 SE"))  # fmt: skip
    cr = _part(data, "crossing")
    text = (
        "; ".join(
            f"along {c.along} at {c.fixed_name}={c.fixed:g}: {c.from_verdict} -> {c.to_verdict} "
            f"within [{c.interval_lo:g}, {c.interval_hi:g}]"
            for c in cr.itertuples()
        )
        or "no crossing: one verdict over the whole grid"
    )
    out.append(V.check_row(_ID["boundary"], setting, text, "-", V.MEASURED,
                           f"{len(cr)} crossing(s) located to their grid segments",
                           crossings=len(cr)))  # fmt: skip
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """README numbers: per point the ratio and its interval, the counts, the cost."""
    pts = _part(data, "point")
    out = {
        "grid": str(data.grid.iloc[0]),
        "n": str(int(data.n.iloc[0])),
        "R": str(int(data.R.iloc[0])),
        "crossings": str(len(_part(data, "crossing"))),
    }
    for r in pts.itertuples():
        key = f"ratio_kd{r.kd:g}_m{r.neighbours:g}".replace(".", "p")
        out[key] = f"{r.measured:.3g} [{r.lo:.2g}, {r.hi:.2g}]"
    counts = pts.label.value_counts()
    for lab in ("holds", "violated", "unresolved", "imprecise"):
        out[f"n_{lab}"] = str(int(counts.get(lab, 0)))
    out["ratio_min"] = f"{pts.measured.min():.3g}"
    out["ratio_max"] = f"{pts.measured.max():.3g}"
    for lab in ("violated", "unresolved"):
        g = pts[pts.label == lab].measured
        out[f"{lab}_range"] = f"{g.min():.3g} to {g.max():.3g}" if len(g) else "-"
    out["holds_points"] = (
        "; ".join(
            f"k/d = {r.kd:g}, gap {r.gap:.3g}: {r.measured:.3g} [{r.lo:.2g}, {r.hi:.2g}] (steps "
            f"{r.gamma_ds:.3g} and {r.gamma_choco:.3g})"
            for r in pts[pts.label == "holds"].itertuples()
        )
        or "none"
    )
    gaps = dict(zip(pts.neighbours, pts.gap, strict=False))
    cr = _part(data, "crossing")
    for r in cr[cr.along == "neighbours"].itertuples():
        lo, hi = (gaps[min(gaps, key=lambda m, v=v: abs(m - v))] for v in (r.interval_lo,
                                                                          r.interval_hi))  # fmt: skip
        key = f"boundary_gap_kd{r.fixed:g}".replace(".", "p")
        out.setdefault(key, f"[{lo:.3g}, {hi:.3g}]")  # the lowest crossing of the line
    return out
