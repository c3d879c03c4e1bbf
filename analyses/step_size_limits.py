"""Step-size limits of constant-step SGD on least squares: measured divergence boundary against
the derived mean-square stability limit, across spectra, batch sizes and designs.

Claim under test (derived in :mod:`convkit.bounds.sgd_stability`): constant-step SGD with
batch ``b`` on least squares with covariance spectrum ``h_1..h_d`` is mean-square stable iff
``gamma < gamma*``, the root of the secular equation ``sum_i phi(h_i; gamma, b) = 1``
(Gaussian design: ``phi = gamma h / (b (2 - gamma h (1 + 1/b)))``; Rademacher design: its own
``phi``; results ``sgd.ms_stability.general`` and ``sgd.ms_stability.general_rademacher``,
evaluated by :func:`~convkit.bounds.sgd_stability.sgd_stability_limit`).  For the additive-noise
design the iterates' mean and covariance follow ``I - gamma H`` whatever ``b``, so the limit is
``2 / h_max`` (:func:`convkit.exact.stability_limit`, closed form).

Setting: ``d = 10``, spectra ``flat`` (h_i = 1), ``1/i`` and ``1/i^2``, batch
``b in {1, 2, 4, 16, 64}``, designs Gaussian, Rademacher and additive (diagonal ``H``).

Measured boundaries:

* **exact** (:func:`convkit.exact.expected_error`, the exact second-moment recursion): noise
  ``sigma = 0``, start ``eta_0 = 1/sqrt(d)`` in every coordinate (``||eta_0|| = 1``), ``n``
  steps (``1e6`` full, ``1e5`` quick); a step diverges when the engine's
  ``E||eta_k||^2`` exceeds ``F = 1e6`` (``divergence_factor``).  Bisection in ``gamma`` on
  "diverged within n steps" from ``[gamma*/1.25, 1.25 gamma*]`` (widened if needed) down to a bracket of relative width
  ``1e-5``.  Tolerance: a step with spectral radius ``rho(gamma) > 1`` is detected only when
  ``rho^n > F``, so the detected boundary sits above ``gamma*`` by about
  ``ln F / (n kappa)`` in relative terms, ``kappa = gamma d rho / d gamma`` at ``gamma*``
  (computed from the derived moment matrix
  :func:`~convkit.bounds.sgd_stability.stability_matrix` by a central difference); the check
  allows the bracket width plus 3 x this horizon bias.
* **Monte Carlo** (:func:`convkit.simulate`, divergence detected): ``R = 256`` replicates
  (128 quick), ``sigma = 1``, same start, ``n = 1000`` steps (400 quick), on the coarse grid
  ``gamma / gamma* in {0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2}``; a replicate diverges when
  ``||theta_k - theta*||^2 > 1e12`` (the engine's criterion).  The Monte Carlo boundary is
  bracketed by the largest grid step below the first one with a diverged replicate and that
  one.  This is a per-trajectory boundary: a mean-square unstable run whose typical trajectory
  still contracts (negative top Lyapunov exponent) never shows a diverged replicate, since the
  growth of ``E||eta||^2`` comes from rare trajectories.  Below ``gamma*`` no replicate may
  diverge (bounded second moment and Markov's inequality: ``P(||eta||^2 > 1e12)`` is tiny).

Reference lines: the sufficient bound ``2 b / (R^2 + (b - 1) L)`` (derived here: with
``E[||x||^2 x x^T] <= R^2 H``, ``E||eta'||^2 <= ||eta||^2 - gamma (2 - gamma (R^2/b +
(1 - 1/b) L)) ||eta||_H^2``, so ``||eta||^2`` contracts below it; ``R^2 = tr H + 2 L`` for the
Gaussian design since ``E[||x||^2 x x^T] = tr(H) H + 2 H^2``, ``R^2 = tr H`` for Rademacher since
``||x||^2 = tr H`` surely; additive: ``2 / L``), and ``2 / L`` (the mean ``E eta`` follows
``I - gamma H`` and diverges above it, for every design).
"""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V
from convkit.exact import expected_error
from convkit.recording import DivergenceWarning

TITLE = (
    "Step-size limits of constant-step SGD, least squares d = 10: divergence boundary "
    "(exact recursion, Monte Carlo) against the derived mean-square limit"
)
D = 10
SPECTRA = ("flat", "1/i", "1/i^2")
BATCHES = (1, 2, 4, 16, 64)
DESIGNS = ("gaussian", "rademacher", "additive")
MC_GRID = (0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2.0)
EXACT_FACTOR = 1e6
BISECT_RTOL = 1e-5
SEED = 15
#: colour of the Monte Carlo brackets (the exact boundary uses the palette colour of SGD)
MC_COLOR = "#e6550d"


def _grid(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "spectra": ("flat", "1/i^2"),
            "batches": (1, 16),
            "designs": ("gaussian", "rademacher"),
            "n_exact": 10**5,
            "n_mc": 400,
            "R": 128,
        }
    return {
        "spectra": SPECTRA,
        "batches": BATCHES,
        "designs": DESIGNS,
        "n_exact": 10**6,
        "n_mc": 1000,
        "R": 256,
    }


def derived_limit(h: np.ndarray, b: int, design: str) -> float:
    """The derived mean-square stability limit ``gamma*``.

    Parameters
    ----------
    h : numpy.ndarray
        Eigenvalues of the design covariance ``H`` (diagonal ``H``).
    b : int
        Batch size.
    design : str
        ``"gaussian"``, ``"rademacher"`` (root of the secular equation of
        :mod:`convkit.bounds.sgd_stability`) or ``"additive"`` (``2 / h_max``).

    Returns
    -------
    float
        ``gamma*``.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if design == "additive":
        return 2.0 / float(np.max(h))
    from convkit.bounds.sgd_stability import sgd_stability_limit

    return sgd_stability_limit(h, b, design)


def sufficient_limit(h: np.ndarray, b: int, design: str) -> float:
    """The sufficient step bound ``2 b / (R^2 + (b - 1) L)`` (derivation: module docstring).

    Parameters
    ----------
    h : numpy.ndarray
        Eigenvalues of ``H``.
    b : int
        Batch size.
    design : str
        ``"gaussian"`` (``R^2 = tr H + 2 L``), ``"rademacher"`` (``R^2 = tr H``) or
        ``"additive"`` (``2 / L``).

    Returns
    -------
    float
        A step below which ``E||eta||^2`` contracts.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    L, tr = float(np.max(h)), float(np.sum(h))
    if design == "additive":
        return 2.0 / L
    R2 = tr + 2.0 * L if design == "gaussian" else tr
    return 2.0 * b / (R2 + (b - 1) * L)


def _kappa(h: np.ndarray, b: int, design: str, gamma: float) -> float:
    """``gamma d rho / d gamma`` at ``gamma`` (central difference, relative step 1e-4) of the
    spectral radius of the derived moment matrix (``(1 - gamma h_max)^2`` for additive)."""
    from convkit.bounds.sgd_stability import stability_matrix

    def rho(g: float) -> float:
        if design == "additive":
            return float(np.max((1.0 - g * h) ** 2))
        return float(np.max(np.abs(np.linalg.eigvals(stability_matrix(h, b, g, design)))))

    e = 1e-4
    return (rho(gamma * (1 + e)) - rho(gamma * (1 - e))) / (2 * e)


def _problem(spec: str, design: str, noise: float) -> ck.LeastSquares:
    return getattr(ck.LeastSquares, design)(D, spec, noise=noise, seed=SEED)


def _exact_diverges(prob: ck.LeastSquares, gamma: float, b: int, n: int) -> bool:
    theta0 = prob.theta_star + np.full(D, 1.0 / math.sqrt(D))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        res = expected_error(
            prob,
            ck.MBA(1, ck.Constant(gamma), batch=b, name="SGD"),
            steps=n,
            theta0=theta0,
            n_record=2,
            divergence_factor=EXACT_FACTOR,
        )
    return bool(res.meta["diverged"])


def exact_boundary(prob: ck.LeastSquares, b: int, n: int, guess: float) -> dict[str, float]:
    """Bisection on "the exact second moment diverges within ``n`` steps".

    Parameters
    ----------
    prob : LeastSquares
        The problem (noise 0 is used for the decision).
    b : int
        Batch size.
    n : int
        Horizon (steps).
    guess : float
        Starting point: the bracket starts at ``[guess / 1.25, 1.25 guess]``.

    Returns
    -------
    dict
        ``lo`` (largest step found bounded), ``hi`` (smallest step found diverging),
        ``evaluations``.
    """
    lo, hi, evals = guess / 1.25, 1.25 * guess, 0
    while _exact_diverges(prob, lo, b, n):
        lo, evals = lo / 2, evals + 1
    while not _exact_diverges(prob, hi, b, n):
        hi, evals = hi * 2, evals + 1
    evals += 2
    while hi - lo > BISECT_RTOL * hi:
        mid = math.sqrt(lo * hi)
        if _exact_diverges(prob, mid, b, n):
            hi = mid
        else:
            lo = mid
        evals += 1
    return {"lo": lo, "hi": hi, "evaluations": evals}


def run(quick: bool = True) -> pd.DataFrame:
    """One ``row="limit"`` row per (design, spectrum, b) with the derived, sufficient and
    measured limits, and one ``row="mc"`` row per Monte Carlo grid point with its diverged
    replicates.  Quick: 8 settings, exact horizon 1e5, MC 128 x 400 steps (about 20 s).
    Full: 45 settings, exact horizon 1e6, MC 256 x 1000 steps (about 5 min on one core)."""
    g = _grid(quick)
    rows: list[dict[str, Any]] = []
    for design, spec in itertools.product(g["designs"], g["spectra"]):
        prob0 = _problem(spec, design, 0.0)
        prob1 = _problem(spec, design, 1.0)
        h = prob0.h
        base = {
            "design": design,
            "spectrum": spec,
            "d": D,
            "L": float(h.max()),
            "trH": float(h.sum()),
        }
        mc_algos, mc_keys = [], []
        for b in g["batches"]:
            gstar = derived_limit(h, b, design)
            ex = exact_boundary(prob0, b, g["n_exact"], gstar)
            kappa = _kappa(h, b, design, gstar)
            rows.append(
                {
                    **base,
                    "row": "limit",
                    "b": b,
                    "gamma_derived": gstar,
                    "gamma_sufficient": sufficient_limit(h, b, design),
                    "gamma_mean": 2.0 / float(h.max()),
                    "exact_lo": ex["lo"],
                    "exact_hi": ex["hi"],
                    "exact_gamma": math.sqrt(ex["lo"] * ex["hi"]),
                    "exact_steps": g["n_exact"],
                    "exact_factor": EXACT_FACTOR,
                    "exact_evaluations": ex["evaluations"],
                    "kappa": kappa,
                    "horizon_bias": math.log(EXACT_FACTOR) / (g["n_exact"] * kappa),
                }
            )
            for r in MC_GRID:
                mc_algos.append(ck.MBA(1, ck.Constant(r * gstar), batch=b, name=f"b={b}, r={r}"))
                mc_keys.append((b, r, gstar))
        theta0 = prob1.theta_star + np.full(D, 1.0 / math.sqrt(D))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DivergenceWarning)
            res = ck.simulate(
                prob1,
                mc_algos,
                steps=g["n_mc"],
                replicates=g["R"],
                seed=SEED,
                theta0=theta0,
                n_record=2,
                threads=1,
            )
        div = res.diverged
        counts = div.groupby("config").size().to_dict() if len(div) else {}
        for a, (b, r, gstar) in zip(mc_algos, mc_keys, strict=True):
            rows.append(
                {
                    **base,
                    "row": "mc",
                    "b": b,
                    "gamma_derived": gstar,
                    "ratio": r,
                    "gamma": r * gstar,
                    "replicates": g["R"],
                    "mc_steps": g["n_mc"],
                    "n_diverged": int(counts.get(a.label, 0)),
                }
            )
    return pd.DataFrame(rows)


def mc_brackets(data: pd.DataFrame) -> pd.DataFrame:
    """Per (design, spectrum, b): the Monte Carlo bracket ``[ratio_lo, ratio_hi]`` of
    ``gamma / gamma*`` (``ratio_hi``: the smallest grid ratio with a diverged replicate;
    ``ratio_lo``: the grid ratio below it, 0 when the first grid point diverged already;
    ``ratio_hi = inf`` when none diverged) and the diverged replicates below ``gamma*``."""
    mc = data[data["row"] == "mc"]
    out = []
    for key, g in mc.groupby(["design", "spectrum", "b"], sort=False):
        g = g.sort_values("ratio")
        r, nd = g["ratio"].to_numpy(float), g["n_diverged"].to_numpy(int)
        hit = np.flatnonzero(nd > 0)
        hi = float(r[hit[0]]) if hit.size else math.inf
        lo = (
            float(r[hit[0] - 1]) if hit.size and hit[0] > 0 else (0.0 if hit.size else float(r[-1]))
        )
        out.append(
            {
                "design": key[0],
                "spectrum": key[1],
                "b": int(key[2]),
                "ratio_lo": lo,
                "ratio_hi": hi,
                "diverged_below": int(nd[r < 1].sum()),
                "replicates": int(g["replicates"].iloc[0]),
            }
        )
    return pd.DataFrame(out)


def _setting(row: Any) -> str:
    return f"{row['design']}, spectrum {row['spectrum']}, d = {int(row['d'])}, b = {int(row['b'])}"


#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "step_size_limits",
    {
        "exact_boundary_is_derived_limit": V.Claim(
            "the divergence boundary of the exact second-moment recursion equals the derived "
            "mean-square stability limit gamma* (within the bisection bracket plus 3 x the "
            "horizon bias)",
            "derived here: sgd.ms_stability.general and sgd.ms_stability.general_rademacher "
            "(the secular equation); additive noise 2 / h_max (convkit.exact.stability_limit)",
        ),
        "mc_boundary_vs_derived_limit": V.Claim(
            "the Monte Carlo divergence boundary brackets the derived mean-square limit gamma* "
            "and no replicate diverges below gamma*",
            "sgd.ms_stability.general, sgd.ms_stability.general_rademacher (a per-trajectory "
            "boundary above gamma* is reported as measured)",
        ),
        "sufficient_bound_below_boundary": V.Claim(
            "the sufficient step bound 2b/(R^2 + (b-1)L) lies at or below the measured "
            "boundary, for every spectrum and batch of a design",
            "derived here (module docstring of analyses/step_size_limits.py)",
        ),
    },
)


def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`): the same checks against claims
    made false on purpose. The derived limit 10 % too large (the exact boundary must then miss
    it by far more than its bracket); the claimed limit twice the derived one (the Monte Carlo
    replicates that diverged at ``gamma*`` then diverge below the claim); the sufficient bound
    doubled (it then exceeds the measured boundary)."""
    wrong_limit = data.copy()
    wrong_limit["gamma_derived"] = data["gamma_derived"] * 1.1
    halved = data.copy()
    halved["ratio"] = data["ratio"] / 2.0
    loose = data.copy()
    loose["gamma_sufficient"] = data["gamma_sufficient"] * 2.0
    return [
        V.Control("derived limit 10 % too large", wrong_limit),
        V.Control("claimed limit twice the derived one (Monte Carlo grid halved)", halved),
        V.Control("sufficient bound doubled", loose),
    ]


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict[str, Any]]:
    """Per setting: the exact boundary against the derived limit (relative difference within
    the bisection bracket plus 3 x the horizon bias ``ln F / (n kappa)``), the Monte Carlo
    bracket against the derived limit (holds when it contains ``gamma*``; no replicate may
    diverge below ``gamma*``; a bracket above ``gamma*`` is reported as measured, a
    per-trajectory boundary), and per design the sufficient bound below the exact boundary."""
    from convkit.plotting import plain

    out: list[dict[str, Any]] = []
    lim = data[data["row"] == "limit"]
    for _, r in lim.iterrows():
        rel = abs(r["exact_gamma"] / r["gamma_derived"] - 1.0)
        tol = (r["exact_hi"] - r["exact_lo"]) / r["gamma_derived"] + 3 * r["horizon_bias"]
        verdict, reason = V.verdict_of(
            rel <= tol,
            f"relative difference {rel:.2g} <= tolerance {tol:.2g} (bracket + 3 x horizon bias)",
            f"relative difference {rel:.2g} > tolerance {tol:.2g} (bracket + 3 x horizon bias)",
        )
        out.append(
            V.check_row(
                result="step_size_limits.exact_boundary_is_derived_limit",
                setting=_setting(r) + f", exact recursion, n = {int(r['exact_steps'])}, "
                f"F = {r['exact_factor']:g}",
                measured=plain(r["exact_gamma"], 7),
                theoretical=plain(r["gamma_derived"], 7),
                verdict=verdict,
                reason=reason,
            )
        )
    br = mc_brackets(data)
    d_of = dict(zip(lim["design"] + lim["spectrum"] + lim["b"].astype(str), lim["d"], strict=True))
    for _, r in br.iterrows():
        lo, hi = r["ratio_lo"], r["ratio_hi"]
        setting = (
            f"{r['design']}, spectrum {r['spectrum']}, d = "
            f"{int(d_of.get(r['design'] + r['spectrum'] + str(r['b']), D))}, b = {int(r['b'])}, "
            f"Monte Carlo R = {int(r['replicates'])}, grid gamma/gamma* = {list(MC_GRID)}"
        )
        bracket = f"[{lo:g}, {hi:g}] x gamma*"
        if r["diverged_below"] > 0:
            verdict = V.VIOLATED
            reason = (
                f"{int(r['diverged_below'])} replicates diverged below gamma*; bracket {bracket}"
            )
        elif lo <= 1.0 <= hi:
            verdict = V.HOLDS
            reason = f"bracket {bracket} contains gamma* (grid resolution)"
        elif not math.isfinite(hi):
            verdict = V.INCONCLUSIVE
            reason = f"no replicate diverged on the grid (up to {MC_GRID[-1]} gamma*)"
        else:
            verdict = V.MEASURED
            reason = (
                f"per-trajectory boundary {bracket}, above the mean-square limit: no replicate "
                "diverged below it although E||eta||^2 grows (rare trajectories carry the growth)"
            )
        mid = math.sqrt(lo * hi) if lo > 0 and math.isfinite(hi) else (hi if lo == 0 else lo)
        out.append(
            V.check_row(
                result="step_size_limits.mc_boundary_vs_derived_limit",
                setting=setting,
                measured=plain(mid, 4),
                theoretical=1.0,
                verdict=verdict,
                reason=reason,
            )
        )
    for design, g in lim.groupby("design", sort=False):
        ratio = (g["gamma_sufficient"] / g["exact_lo"]).to_numpy(float)
        ok = bool(np.all(ratio <= 1.0 + 1e-9))
        out.append(
            V.check_row(
                result="step_size_limits.sufficient_bound_below_boundary",
                setting=f"{design}, {len(g)} settings (spectra x b)",
                measured=plain(float(ratio.max()), 4),
                theoretical=1.0,
                verdict=V.HOLDS if ok else V.VIOLATED,
                reason=f"sufficient / exact boundary between {ratio.min():.3g} and "
                f"{ratio.max():.3g} over the settings",
            )
        )
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """README numbers from the data: worst exact relative difference, the Monte Carlo brackets'
    range, the sufficient bound's range."""
    lim = data[data["row"] == "limit"]
    rel = (lim["exact_gamma"] / lim["gamma_derived"] - 1.0).abs()
    br = mc_brackets(data)
    above = br[br["ratio_lo"] > 1.0]
    suff = lim["gamma_sufficient"] / lim["exact_gamma"]
    return {
        "step_limits_settings": str(len(lim)),
        "step_limits_exact_max_rel": f"{rel.max():.1e}",
        "step_limits_mc_contains": f"{int(((br.ratio_lo <= 1) & (br.ratio_hi >= 1)).sum())} of {len(br)}",
        "step_limits_mc_above": f"{len(above)} of {len(br)}",
        "step_limits_mc_above_max": f"{above['ratio_lo'].max():.3g}" if len(above) else "-",
        "step_limits_sufficient_range": f"{suff.min():.2f}-{suff.max():.2f}",
    }


def plot(data: pd.DataFrame, outdir: str | Path) -> list[str]:
    """Two figures: ``step_size_limits.png`` (a panel per design and spectrum, one step-size
    scale per spectrum: step against batch size, derived limit dashed black, exact boundary
    markers, Monte Carlo bracket bars, sufficient bound dotted, 2/L; for the additive design
    the three lines coincide and the panel says so) and ``step_size_limits_ratio.png``
    (measured / derived against b: exact points, Monte Carlo brackets)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from convkit.plotting import REFERENCE_STYLE, THEORY_STYLE, color, legend_outside

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    lim = data[data["row"] == "limit"]
    br = mc_brackets(data)
    designs = [x for x in DESIGNS if x in set(lim["design"])]
    spectra = [x for x in SPECTRA if x in set(lim["spectrum"])]
    c_exact, c_mc = color("sgd"), MC_COLOR
    fig, axes = plt.subplots(
        len(designs),
        len(spectra),
        figsize=(3.6 * len(spectra) + 2.4, 2.9 * len(designs)),
        squeeze=False,
        sharex=True,
        sharey="col",  # one step-size scale per spectrum: designs compare at a glance
    )
    for i, design in enumerate(designs):
        for j, spec in enumerate(spectra):
            ax = axes[i, j]
            g = lim[(lim.design == design) & (lim.spectrum == spec)].sort_values("b")
            m = br[(br.design == design) & (br.spectrum == spec)].set_index("b").loc[g["b"]]
            h = _problem(spec, design, 0.0).h
            bb = np.unique(np.round(np.geomspace(1, g["b"].max(), 60)).astype(int))
            ax.plot(
                bb,
                [derived_limit(h, int(x), design) for x in bb],
                label="derived limit (secular equation)",
                **THEORY_STYLE,
            )
            ax.plot(
                bb,
                [sufficient_limit(h, int(x), design) for x in bb],
                label="sufficient bound 2b/(R^2+(b-1)L)",
                **REFERENCE_STYLE,
            )
            ax.axhline(2.0 / float(h.max()), color="0.7", lw=1.0, label="2/L (the mean diverges)")
            ax.plot(
                g["b"],
                g["exact_gamma"],
                "o",
                ms=5,
                color=c_exact,
                zorder=6,
                label="exact recursion, bisection",
            )
            gs = g["gamma_derived"].to_numpy(float)
            lo = m["ratio_lo"].to_numpy(float) * gs
            hi = np.where(np.isfinite(m["ratio_hi"]), m["ratio_hi"], MC_GRID[-1]) * gs
            xb = g["b"].to_numpy(float) * 1.12
            ax.vlines(
                xb,
                lo,
                hi,
                color=c_mc,
                lw=3,
                alpha=0.8,
                label="Monte Carlo bracket (first diverged replicate)",
            )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(
                matplotlib.ticker.LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0))
            )
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
            if design == "additive":  # the three lines are one: say so, they cannot be seen
                ax.text(
                    0.04,
                    0.05,
                    "additive noise: derived limit, sufficient bound\nand 2/L coincide "
                    "(2/h_max for every b)",
                    transform=ax.transAxes,
                    fontsize=7,
                    va="bottom",
                )
            ax.set_title(f"{design}, h_i: {spec}", fontsize=9)
            if i == len(designs) - 1:
                ax.set_xlabel("batch size b (samples per step)")
            if j == 0:
                ax.set_ylabel("constant step gamma (1/h units)")
    legend_outside(axes[0, -1])
    n_ex = int(lim["exact_steps"].iloc[0])
    R = int(data.loc[data.row == "mc", "replicates"].iloc[0])
    fig.suptitle(
        f"Constant-step SGD, least squares d = {D}: mean-square divergence boundary vs batch "
        f"(exact: n = {n_ex:.0e} steps; MC: R = {R})",
        fontsize=10,
    )
    fig.tight_layout()
    png1 = outdir / "step_size_limits.png"
    fig.savefig(png1, dpi=130, bbox_inches="tight")
    plt.close(fig)

    fig, axes = plt.subplots(
        1, len(designs), figsize=(3.8 * len(designs) + 2.4, 3.4), squeeze=False
    )
    markers = {"flat": "o", "1/i": "s", "1/i^2": "^"}
    for i, design in enumerate(designs):
        ax = axes[0, i]
        for k, spec in enumerate(spectra):
            g = lim[(lim.design == design) & (lim.spectrum == spec)].sort_values("b")
            m = br[(br.design == design) & (br.spectrum == spec)].set_index("b").loc[g["b"]]
            off = 1.0 + 0.06 * (k - 1)
            x = g["b"].to_numpy(float) * off
            ax.plot(
                x,
                g["exact_gamma"] / g["gamma_derived"],
                markers[spec],
                ms=5,
                color=c_exact,
                ls="none",
                label=f"exact, h_i: {spec}",
            )
            hi = np.where(np.isfinite(m["ratio_hi"]), m["ratio_hi"], MC_GRID[-1])
            ax.vlines(
                x * 1.03,
                m["ratio_lo"],
                hi,
                color=c_mc,
                lw=2.0,
                linestyles=("solid", "dashed", "dotted")[k],
                label=f"MC bracket, h_i: {spec}",
            )
        ax.axhline(1.0, label="derived limit", **THEORY_STYLE)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
        ax.set_ylim(0.7, 2.1)
        ax.set_xlabel("batch size b (samples per step)")
        ax.set_ylabel("measured boundary / derived limit")
        ax.set_title(design, fontsize=9)
    legend_outside(axes[0, -1])
    fig.suptitle(
        f"Measured / derived step-size limit, least squares d = {D} "
        f"(MC grid {list(MC_GRID)} x gamma*)",
        fontsize=10,
    )
    fig.tight_layout()
    png2 = outdir / "step_size_limits_ratio.png"
    fig.savefig(png2, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return [str(png1), str(png2)]


if __name__ == "__main__":  # pragma: no cover
    import sys

    df = run(quick="--full" not in sys.argv)
    for c in checks(df):
        print(c["verdict"], c["setting"], c["measured"], c["theoretical"], c["reason"])
