"""Local-SGD where communication matters: online logistic regression with large steps.

Setting (issue "Local-SGD where communication matters", item 3a): online well-specified
logistic regression, Gaussian design, ``d = 2``, ``h = (1, 1)``, ``theta* = (1, 1)/sqrt(2)``,
``theta0 = 0``, steps ``gamma_k = C k^-alpha`` with ``C L = 2`` (``L = max h / 4``), ``alpha``
in {0.6, 0.7, 0.75, 0.8, 0.9}, ``T`` in {1e3, ..., 1e6} gradients, ``P`` in {2, ..., 32} workers, ``n =
floor(T / P)`` local steps, batch 1.  Variations at ``alpha = 0.75`` on ``T`` in {1e3, 1e4,
1e5}, ``P`` in {4, 16}: ``C L`` in {0.5, 1, 4}, ``||theta*|| = 3``, ``d = 5`` (flat spectrum;
the ``1/i`` spectrum and the start at ``theta*`` are in ``local_sgd_variations``, whose rows the
columns below cannot tell apart).  Contrast (item 3c): least squares with the exact engine,
same ``d``, ``h``, ``sigma = 1``, ``theta0 = 0``, ``||theta*||`` in {1, 10}, ``C = 0.5`` and
``0.9`` times the mean-square stability limit, ``alpha = 0.75``.

Every cell is one :func:`convkit.simulate` call with all schedules on common random numbers
(``analyses/_local_sgd_cells.py``): MBA, OSA, evenly spaced rounds (powers of 4 and
``ceil(sqrt(P T))``) and the growing-gap families of ``local_sgd_schedules``.  The whole
``(T, P)`` grid is simulated (``n`` up to 500 000 local steps; the least-squares contrast up to
``n = 40 000``, its best-schedule search costing ``O(n)`` per exact evaluation).  Error: ``||theta_bar - theta*||^2_{H*}``, Polyak-Ruppert average over steps ``1..n``.

Reported (checks and figures, all from the CSV):

* ``err(OSA)/err(MBA)`` per cell with its paired (delta-method) SE; the exponents of
  ``err(OSA)/err(MBA) - 1`` in ``T`` and ``P`` (joint weighted log-log fit per ``alpha``)
  against the large-step model (:func:`convkit.bounds.local_sgd_large_steps.model_exponents`:
  ``1 - 2 alpha`` and ``2 alpha``), with no decay (0) as the alternative;
* ``N*(eps)``, ``eps`` in {0.1, 0.25}, with bootstrap intervals and statuses
  (``analyses/_local_sgd_stats.py``); its exponents in ``T`` and ``P`` with the ``n``-capped
  cells excluded, against the model and against the ``sqrt(P T)`` reading (1/2, 1/2), and how
  the fit moves when only cells with ``N* <= n / kappa`` (``kappa`` in {1, 2, 4}) are kept;
* ``err(N = ceil(sqrt(P T)))/err(MBA)``: do ``sqrt(P T)`` rounds suffice?

Replicates by precision (``analyses/_local_sgd_cells.py``): a pilot of 512 (``T <= 3e3``), 256
(``1e4 <= T <= 3e4``), 128 (``1e5``) or 64 (``T >= 3e5``) replicates, then up to three top-ups
of the schedules whose ratio is above a paired SE of 3 % of the ratio (with MBA and their
partners), to the replicates that bring it there, at most ``min(8192, 1.28e8 / T)`` (128 at
``T = 1e6``); a ratio the cap cannot bring below 4.2 % gets none.  A ratio still above 3 % carries no verdict: such
OSA cells are left out of the fits and counted, a ``sqrt(P T)`` cell is ``imprecise``, and an
``N*`` whose bracketing points are imprecise has status ``imprecise``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses import _local_sgd_cells as cells
from analyses import _local_sgd_stats as st
from convkit import verdicts as V

TITLE = (
    "Local-SGD with large steps (logistic regression, C L = 2, theta0 = 0): err(OSA)/err(MBA), "
    "N*(eps) and sqrt(PT) rounds against T and P; least squares as the contrast"
)
#: Caps of the N* fits: only interior cells with ``N* <= n / kappa``.
KAPPAS = (1.0, 2.0, 4.0)


def _cells(quick: bool) -> list[cells.Cell]:
    var = [c for c in cells.variation_cells(quick) if c.spectrum == "flat" and c.start == "zero"]
    return cells.base_cells(quick) + var + cells.ls_cells(quick)


def run(quick: bool = False, cell_list: list[cells.Cell] | None = None) -> pd.DataFrame:
    """Rows of every cell (columns exactly :data:`analyses._local_sgd_cells.COLUMNS`;
    schedules ``mba, osa, even, quadratic, geometric, drift_clock, best``)."""
    df = cells.cells_frame(cell_list if cell_list is not None else _cells(quick))
    df = df[df.schedule.isin(cells.SCHEDULES)]
    return df[cells.COLUMNS].reset_index(drop=True)


# ------------------------------------------------------------------------------ selections
def base(df: pd.DataFrame) -> pd.DataFrame:
    """Base logistic setting (d = 2, ||theta*|| = 1, C L = 2)."""
    return df[(df.problem == "logistic") & (df.d == 2) & (df.theta_norm == 1.0) & (df.CL == 2.0)]


def osa_table(df: pd.DataFrame) -> pd.DataFrame:
    """``err(OSA)/err(MBA)`` rows of the base setting, with ``precise``: whether the paired SE
    is within :data:`analyses._local_sgd_cells.PRECISION` of the ratio (only those rows carry
    a verdict)."""
    o = base(df)[base(df).schedule == "osa"].sort_values(["alpha", "T", "P"])
    return o.assign(precise=cells.precise(o.ratio_to_mba, o.ratio_se))


def ratio_fit(df: pd.DataFrame, alpha: float) -> dict[str, Any]:
    """Joint fit of ``err(OSA)/err(MBA) - 1`` in ``T`` and ``P`` over the precise cells of the
    base setting."""
    o = osa_table(df)
    o = o[(o.alpha == alpha) & o.precise]
    return st.power_fit(o["T"], o["P"], o.ratio_to_mba - 1.0, o.ratio_se)


def nstar_fit(nt: pd.DataFrame, alpha: float, eps: float, kappa: float = 1.0) -> dict[str, Any]:
    """Joint fit of ``N*`` in ``T`` and ``P`` over interior cells with ``N* <= n / kappa``
    (weights from the bootstrap ``se(log N*)``)."""
    g = nt[(nt.alpha == alpha) & (nt.eps == eps) & (nt.status == "interior")]
    g = g[g.N_star <= g.n / kappa]
    return st.power_fit(g["T"], g["P"], g.N_star, g.N_star * g.se_log)


def sqrt_pt_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per base cell: ``N = ceil(sqrt(P T))``, whether it is below ``n`` (else capped: it would be
    MBA) and ``err(N)/err(MBA)`` with its paired SE; status ``imprecise`` when that SE is above
    :data:`analyses._local_sgd_cells.PRECISION` of the ratio (no verdict)."""
    b = base(df)
    rows = []
    for (a, T, P), g in b.groupby(["alpha", "T", "P"]):
        n = int(g.n.iloc[0])
        N = math.ceil(math.sqrt(P * T))
        e = g[(g.schedule == "even") & (g.N == N)]
        if N >= n or e.empty:
            rows.append(dict(alpha=a, T=T, P=P, n=n, N=N, status="capped", ratio=1.0, se=0.0))
        else:
            rows.append(
                dict(
                    alpha=a,
                    T=T,
                    P=P,
                    n=n,
                    N=N,
                    status=(
                        "below_n"
                        if cells.precise(e.ratio_to_mba.iloc[0], e.ratio_se.iloc[0])
                        else "imprecise"
                    ),
                    ratio=float(e.ratio_to_mba.iloc[0]),
                    se=float(e.ratio_se.iloc[0]),
                )
            )
    return pd.DataFrame(rows)


def nstar(df: pd.DataFrame) -> pd.DataFrame:
    """N* table of the base setting (see :func:`analyses._local_sgd_stats.nstar_table`)."""
    return st.nstar_table(base(df))


# ------------------------------------------------------------------------------ checks
def _model(alpha: float) -> dict[str, float]:
    from convkit.bounds.local_sgd_large_steps import model_exponents

    return model_exponents(alpha)


_MODEL = (
    "the large-step model, convkit.bounds.local_sgd_large_steps.model_exponents "
    "(local_sgd_large_steps.osa_mba_excess, local_sgd_large_steps.rounds_needed)"
)
_SQRT_PT = "Patel & Dieuleveut 2019 read as N* ~ sqrt(P T) (local_sgd.rounds_needed)"
_GAP = "err(OSA)/err(MBA) - 1"
_WINDOWS = "over every window T >= T_min where a power law fits, decided when all agree"


def _exponent_claims() -> dict[str, V.Claim]:
    """The exponent claims: of the OSA gap and of N* in T and in P, against the large-step
    model (and for N* the sqrt(PT) reading), on all precise cells and over the windows."""
    out: dict[str, V.Claim] = {}
    for key, quantity, source, what in (
        ("gap", _GAP, _MODEL, "the large-step model's exponent (1 - 2 alpha in T, 2 alpha in P)"),
        ("nstar", "N*(eps)", _MODEL, "the large-step model's exponent"),
        ("nstar_sqrtpt", "N*(eps)", _SQRT_PT, "1/2"),
    ):
        for var in ("T", "P"):
            if key != "nstar_sqrtpt":
                out[f"{key}_exponent_{var}"] = V.Claim(
                    f"the exponent of {quantity} in {var} (joint fit in T and P) is {what}",
                    source,
                )
            out[f"{key}_exponent_{var}_windows"] = V.Claim(
                f"the exponent of {quantity} in {var} is {what}, {_WINDOWS}", source
            )
        out[f"{key}_exponents_windows"] = V.Claim(
            f"the exponents of {quantity} in T and P are {what}, {_WINDOWS} (a row when no "
            "window fits)",
            source,
        )
    out["nstar_sqrtpt_exponent_T"] = V.Claim(
        "the exponent of N*(eps) in T (joint fit in T and P) is 1/2", _SQRT_PT
    )
    out["nstar_sqrtpt_exponent_P"] = V.Claim(
        "the exponent of N*(eps) in P (joint fit in T and P) is 1/2", _SQRT_PT
    )
    return out


#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "local_sgd_large_steps",
    {
        **_exponent_claims(),
        "osa_worse_than_mba": V.Claim(
            "one-shot averaging is worse than MBA: err(OSA)/err(MBA) > 1 by more than 3 "
            "paired SE in every precise cell",
            _MODEL,
        ),
        "sqrt_pt_rounds_suffice": V.Claim(
            "N = ceil(sqrt(P T)) evenly spaced rounds suffice: err <= (1 + eps) err(MBA) (eps "
            "in the setting)",
            _SQRT_PT,
        ),
        "least_squares_contrast": V.Claim(
            "err(OSA)/err(MBA) of least squares (exact) against logistic regression",
            "local_sgd.osa_mba_ratio (exact least squares)",
            kind=V.MEASUREMENT,
        ),
        "grid_coverage": V.Claim(
            "the cells of the full grid that the run did not simulate",
            "analyses/_local_sgd_cells.py (the caps on n and on T at alpha != 0.75)",
            kind=V.MEASUREMENT,
        ),
    },
)


def _exp_verdict(fit, var, claimed, alternatives) -> tuple[str, str]:
    """``(verdict, reason)`` of the exponent of ``var`` in ``fit`` against ``claimed``
    (:func:`convkit.verdicts.exponent_verdict`, the fit's adequacy included)."""
    if not np.isfinite(fit["slopes"][var]):
        return V.NOT_IDENTIFIABLE, f"too few points to fit ({fit['n_points']})"
    return V.exponent_verdict(fit["intervals"][var], claimed, alternatives=alternatives, fit=fit)


def _exp_row(result, setting, fit, var, claimed, alternatives, extra="") -> dict[str, Any]:
    iv = fit["intervals"][var]
    verdict, reason = _exp_verdict(fit, var, claimed, alternatives)
    if not np.isfinite(fit["slopes"][var]):
        measured = f"{fit['n_points']} points"
    else:
        measured = (
            f"{fit['slopes'][var]:.2f} {V.interval_text(iv, '.2f')} "
            f"(chi2/dof {fit['chi2_dof']:.1f}, {fit['n_points']} cells{extra})"
        )
    return V.check_row(
        result=result,
        setting=setting,
        measured=measured,
        theoretical=round(float(claimed), 4),
        verdict=verdict,
        reason=reason,
    )


def _kappa_moves(nt: pd.DataFrame, alpha: float, eps: float) -> str:
    """How the joint N* fit moves when only cells with ``N* <= n / kappa`` are kept."""
    moves = []
    for kappa in KAPPAS:
        fk = nstar_fit(nt, alpha, eps, kappa)
        moves.append(
            f"kappa={kappa:g}: T {fk['slopes']['T']:.2f}, P {fk['slopes']['P']:.2f} "
            f"({fk['n_points']} cells)"
        )
    return "; ".join(moves)


def window_fit(g: pd.DataFrame, column: str) -> tuple[float, dict[str, Any]] | None:
    """The joint power-law fit of ``column`` (``ratio_to_mba``: the OSA gap ``ratio - 1``
    with ``ratio_se``; ``N_star``: with ``N_star se_log``) over the longest window
    ``T >= T_min`` where it is adequate (:func:`analyses._local_sgd_stats.adequate_window`)."""
    if column == "ratio_to_mba":
        return st.adequate_window(g["T"], g["P"], g.ratio_to_mba - 1.0, g.ratio_se)
    return st.adequate_window(g["T"], g["P"], g.N_star, g.N_star * g.se_log)


def window_fits(g: pd.DataFrame, column: str) -> list[tuple[float, dict[str, Any]]]:
    """Every adequate window's joint fit of ``column`` (as :func:`window_fit`, all windows:
    :func:`analyses._local_sgd_stats.adequate_windows`)."""
    if column == "ratio_to_mba":
        return st.adequate_windows(g["T"], g["P"], g.ratio_to_mba - 1.0, g.ratio_se)
    return st.adequate_windows(g["T"], g["P"], g.N_star, g.N_star * g.se_log)


def window_verdict(
    wins: list[tuple[float, dict[str, Any]]], var: str, claimed: float, alternatives
) -> tuple[str, str]:
    """The verdict on the exponent of ``var`` over windows chosen from the data: each adequate
    window's verdict (:func:`_exp_verdict`), decided only when every window agrees
    (:func:`convkit.verdicts.window_agreement`)."""
    per = [(f"T >= {_sci(t)}", *_exp_verdict(f, var, claimed, alternatives)) for t, f in wins]
    return V.window_agreement(per)


def _window_rows(
    key: str,
    setting: str,
    g: pd.DataFrame,
    column: str,
    model: dict[str, float],
    keys: tuple[str, str],
    alternatives: tuple[float, ...],
) -> list[dict[str, Any]]:
    """Rows of the exponents over every window where a power law fits (:func:`window_fits`)
    against ``model[keys]`` (the claims ``local_sgd_large_steps.<key>_exponent_<T|P>_windows``
    of :data:`CLAIMS`), decided only when every adequate window agrees
    (:func:`window_verdict`), or one ``not_identifiable`` row
    (``<key>_exponents_windows``) when no window of at least 8 cells and two ``T`` fits."""
    wins = window_fits(g, column)
    if not wins:
        return [
            V.check_row(
                result=f"local_sgd_large_steps.{key}_exponents_windows",
                setting=f"{setting}, windows T >= T_min of at least 8 cells and two T",
                measured="no window with an adequate fit",
                theoretical=f"T {model[keys[0]]:g}, P {model[keys[1]]:g}",
                verdict=V.NOT_IDENTIFIABLE,
                reason="chi2/dof above its 99 % range on every window: no power law in T and P",
            )
        ]
    listing = ", ".join(f"T >= {_sci(t)} ({f['n_points']} cells)" for t, f in wins)
    rows = []
    for var, mkey in zip(("T", "P"), keys, strict=True):
        verdict, reason = window_verdict(wins, var, model[mkey], alternatives)
        measured = "; ".join(
            f"T >= {_sci(t)}: {f['slopes'][var]:.3f} {V.interval_text(f['intervals'][var], '.2f')} "
            f"(chi2/dof {f['chi2_dof']:.1f}, {f['n_points']} cells)"
            for t, f in wins
        )
        rows.append(
            V.check_row(
                result=f"local_sgd_large_steps.{key}_exponent_{var}_windows",
                setting=f"{setting}, joint fits over every adequate window T >= T_min of at "
                f"least 8 cells and two T: {listing}",
                measured=measured,
                theoretical=round(float(model[mkey]), 4),
                verdict=verdict,
                reason=reason,
            )
        )
    return rows


def controls(df: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`), the same checks on data made
    false on purpose: ``err(OSA)/err(MBA)`` inverted (``r -> 1/r``, SE ``se / r^2``: OSA better
    than MBA by the same factor). The exponents have no control: scaling the gap by a power of
    ``T`` changes which cells are precise and which windows fit, so the same rows cannot be
    compared; an exponent that holds on a window is therefore reported ``measured``."""
    osa = df.schedule == "osa"
    bad = df.copy()
    bad.loc[osa, "ratio_to_mba"] = 1.0 / df.ratio_to_mba[osa]
    bad.loc[osa, "ratio_se"] = df.ratio_se[osa] / df.ratio_to_mba[osa] ** 2
    return [V.Control("err(OSA)/err(MBA) inverted: OSA better than MBA", bad)]


@V.controlled(controls)
def checks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Exponents of the OSA gap and of N* against the model and the sqrt(PT) reading; N*
    statuses; sqrt(PT) sufficiency; the least-squares contrast."""
    out: list[dict[str, Any]] = []
    o = osa_table(df)
    setting0 = "logistic, d=2, h=(1,1), ||theta*||=1, C L=2, theta0=0"
    for a in sorted(o.alpha.unique()):
        m = _model(a)
        f = ratio_fit(df, a)
        ga = o[o.alpha == a]
        g = ga[ga.precise]
        left = _imprecise_note(ga)
        for var, key in (("T", "ratio_T"), ("P", "ratio_P")):
            out.append(
                _exp_row(
                    f"local_sgd_large_steps.gap_exponent_{var}",
                    f"{setting0}, alpha={a}, joint fit in T and P over {f['n_points']} precise "
                    f"cells{left}",
                    f,
                    var,
                    m[key],
                    (0.0,),
                )
            )
        out += _window_rows(
            "gap",
            f"{setting0}, alpha={a}{left}",
            g,
            "ratio_to_mba",
            m,
            ("ratio_T", "ratio_P"),
            (0.0,),
        )
        z = (g.ratio_to_mba - 1) / g.ratio_se
        out.append(
            V.check_row(
                result="local_sgd_large_steps.osa_worse_than_mba",
                setting=f"{setting0}, alpha={a}, {len(g)} precise (T, P) cells{left}",
                measured=(
                    f"ratio {g.ratio_to_mba.min():.2f}-{g.ratio_to_mba.max():.2f}; "
                    f"> 1 by > 3 paired SE in {int((z > 3).sum())}/{len(g)} cells"
                ),
                theoretical="> 1",
                verdict=V.VIOLATED
                if bool((z < -3).any())
                else (V.HOLDS if len(g) and bool((z > 3).all()) else V.MEASURED),
                reason=f"{int((z > 3).sum())} of {len(g)} precise cells resolve the gap (z > 3), "
                f"{int((z < -3).sum())} resolve OSA better than MBA (z < -3)",
            )
        )
    nt = nstar(df)
    for a in sorted(nt.alpha.unique()) if not nt.empty else []:
        m = _model(a)
        for eps in st.EPS:
            g = nt[(nt.alpha == a) & (nt.eps == eps)]
            counts = g.status.value_counts().to_dict()
            f = nstar_fit(nt, a, eps)
            extra = "; cap N* <= n/kappa: " + _kappa_moves(nt, a, eps)
            stat = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            for var, key in (("T", "nstar_T"), ("P", "nstar_P")):
                sett = f"{setting0}, alpha={a}, eps={eps}, interior cells ({stat})"
                out.append(
                    _exp_row(
                        f"local_sgd_large_steps.nstar_exponent_{var}",
                        sett,
                        f,
                        var,
                        m[key],
                        (0.5,),
                        extra,
                    )
                )
                out.append(
                    _exp_row(
                        f"local_sgd_large_steps.nstar_sqrtpt_exponent_{var}",
                        sett,
                        f,
                        var,
                        0.5,
                        (m[key],),
                    )
                )
            gi = g[g.status == "interior"]
            sett = f"{setting0}, alpha={a}, eps={eps}, interior cells"
            out += _window_rows("nstar", sett, gi, "N_star", m, ("nstar_T", "nstar_P"), (0.5,))
            out += _window_rows(
                "nstar_sqrtpt",
                sett,
                gi,
                "N_star",
                {"T": 0.5, "P": 0.5},
                ("T", "P"),
                (0.0, 1.0),
            )
    sq = sqrt_pt_table(df)
    for eps in st.EPS:
        below = sq[sq.status == "below_n"]
        if below.empty:
            continue
        zc = float(_bonferroni_z(len(below)))
        excess = (below.ratio - 1 - eps) / below.se.where(below.se > 0, np.nan)
        fail = int((excess > zc).sum())
        ok = int((excess < -zc).sum())
        worst = below.loc[below.ratio.idxmax()]
        out.append(
            V.check_row(
                result="local_sgd_large_steps.sqrt_pt_rounds_suffice",
                setting=(
                    f"eps={eps}: {setting0}, N=ceil(sqrt(PT)) < n in {len(below)} precise cells "
                    f"(capped at n in {int((sq.status == 'capped').sum())}, imprecise: paired "
                    f"SE > {100 * cells.PRECISION:g} % of the ratio, in "
                    f"{int((sq.status == 'imprecise').sum())})"
                ),
                measured=(
                    f"ratio {below.ratio.min():.2f}-{below.ratio.max():.2f} (worst alpha="
                    f"{worst.alpha}, T={int(worst['T'])}, P={int(worst.P)}); above 1+eps: {fail}, "
                    f"below: {ok} (Bonferroni |z| > {zc:.2f})"
                ),
                theoretical=f"<= {1 + eps}",
                verdict=V.VIOLATED if fail else (V.HOLDS if ok == len(below) else V.INCONCLUSIVE),
                reason=(
                    f"{fail} of {len(below)} cells exceed 1+eps beyond the Bonferroni bound"
                    if fail
                    else f"{ok} of {len(below)} cells resolved below 1+eps"
                ),
            )
        )
    ls = df[(df.problem == "least_squares") & (df.schedule == "osa")]
    if not ls.empty:
        for (cl, tn), g in ls.groupby(["CL", "theta_norm"]):
            lg = osa_table(df)
            lg = lg[lg.alpha == 0.75]
            out.append(
                V.check_row(
                    result="local_sgd_large_steps.least_squares_contrast",
                    setting=(
                        f"LS d=2, h=(1,1), sigma=1, ||theta*||={tn:g}, theta0=0, C L={cl:.3f} "
                        f"({cl / cells.ls_stability_CL():.2f} x stability limit), alpha=0.75, "
                        f"{len(g)} cells"
                    ),
                    measured=(
                        f"LS {g.ratio_to_mba.min():.3f}-{g.ratio_to_mba.max():.3f}; logistic "
                        f"(C L=2) {lg.ratio_to_mba.min():.2f}-{lg.ratio_to_mba.max():.2f}"
                    ),
                    theoretical="-",
                    verdict=V.MEASURED,
                    reason=(
                        "exact values; in least squares the mean iterate is linear in the data, "
                        "so the gap comes only from the multiplicative design noise (with "
                        "additive noise alone OSA and MBA coincide): largest near the stability "
                        "limit and far from theta*"
                    ),
                )
            )
    sk = cells.skipped(False)
    if sk:
        for why in sorted({w for *_, w in sk}):
            part = [(a, T, P) for a, T, P, w in sk if w == why]
            out.append(
                V.check_row(
                    result="local_sgd_large_steps.grid_coverage",
                    setting=(
                        f"n = T/P > {cells.N_MAX} local steps"
                        if why.startswith("n")
                        else f"alpha != 0.75 with T > {cells.ALPHA_T_MAX:g}"
                    ),
                    measured=", ".join(f"(a={a}, T={T:g}, P={P})" for a, T, P in part),
                    theoretical="-",
                    verdict=V.MEASURED,
                    reason=f"{len(part)} of {len(cells.ALPHAS) * 35} base cells left out",
                )
            )
    return out


def _imprecise_note(g: pd.DataFrame) -> str:
    """``"; left out as imprecise: (T, P) ..."`` for the rows of ``g`` whose paired SE is above
    the precision a verdict needs (``precise`` column), or ``""``."""
    bad = g[~g.precise]
    if bad.empty:
        return ""
    cells_ = ", ".join(f"({_sci(T)}, {int(P)})" for T, P in zip(bad["T"], bad.P, strict=True))
    return (
        f"; {len(bad)} cells left out as imprecise (paired SE > "
        f"{100 * cells.PRECISION:g} % of the ratio at the replicate cap): {cells_}"
    )


def _bonferroni_z(m: int, level: float = 0.05) -> float:
    from scipy.stats import norm

    return float(norm.ppf(1 - level / (2 * max(m, 1))))


# ------------------------------------------------------------------------------ facts
def _uncontrolled(verdict: str) -> str:
    """An exponent verdict as its check row reports it: the exponents have no negative control
    (:func:`controls`), so a ``holds`` is reported ``measured``
    (:func:`convkit.verdicts.apply_controls`)."""
    return V.MEASURED if verdict == V.HOLDS else verdict


def facts(data: pd.DataFrame) -> dict[str, str]:
    """README numbers (key -> formatted string) from the CSV data."""
    o = osa_table(data)
    out: dict[str, str] = {}
    if o.empty:
        return out
    out["osa_ratio_min"] = f"{o.ratio_to_mba.min():.2f}"
    out["osa_ratio_max"] = f"{o.ratio_to_mba.max():.1f}"
    out["osa_precise"] = f"{int(o.precise.sum())} of {len(o)}"
    for a in sorted(o.alpha.unique()):
        ga = o[o.alpha == a]
        g = ga[ga.precise]
        m = _model(a)
        out[f"osa_precise_a{a}"] = f"{len(g)} of {len(ga)}"
        for (T, P), v in ga.set_index(["T", "P"]).ratio_to_mba.items():
            out[f"osa_ratio_a{a}_T{int(T)}_P{int(P)}"] = f"{v:.2f}"
        f = ratio_fit(data, a)
        for var in ("T", "P"):
            out[f"ratio_slope_{var}_a{a}"] = f"{f['slopes'][var]:.2f}"
            out[f"ratio_slope_{var}_a{a}_ci"] = V.interval_text(f["intervals"][var], ".2f")
            out[f"ratio_slope_{var}_a{a}_model"] = f"{m[f'ratio_{var}']:.2f}"
            out[f"ratio_verdict_{var}_a{a}"] = _uncontrolled(
                _exp_verdict(f, var, m[f"ratio_{var}"], (0.0,))[0]
            )
        out[f"ratio_chi2_a{a}"] = f"{f['chi2_dof']:.1f}"
        found = window_fit(g, "ratio_to_mba")
        wins = window_fits(g, "ratio_to_mba")
        out[f"ratio_windows_a{a}"] = (
            "; ".join(
                f"T >= {_sci(t)} ({f_['n_points']} cells): a_T {f_['slopes']['T']:.2f} "
                f"{V.interval_text(f_['intervals']['T'], '.2f')} "
                f"({_exp_verdict(f_, 'T', m['ratio_T'], (0.0,))[0]}), a_P "
                f"{f_['slopes']['P']:.2f} {V.interval_text(f_['intervals']['P'], '.2f')} "
                f"({_exp_verdict(f_, 'P', m['ratio_P'], (0.0,))[0]})"
                for t, f_ in wins
            )
            or "no adequate window"
        )
        out[f"ratio_window_a{a}"] = "none" if found is None else f"T >= {_sci(found[0])}"
        out[f"ratio_window_cells_a{a}"] = "0" if found is None else f"{found[1]['n_points']}"
        for var in ("T", "P"):
            if found is None:
                out[f"ratio_window_slope_{var}_a{a}"] = "-"
                out[f"ratio_window_slope_{var}_a{a}_ci"] = ""
                out[f"ratio_window_chi2_a{a}"] = "-"
                out[f"ratio_window_verdict_{var}_a{a}"] = V.NOT_IDENTIFIABLE
                continue
            fw = found[1]
            out[f"ratio_window_slope_{var}_a{a}"] = f"{fw['slopes'][var]:.2f}"
            out[f"ratio_window_slope_{var}_a{a}_ci"] = V.interval_text(fw["intervals"][var], ".2f")
            out[f"ratio_window_chi2_a{a}"] = f"{fw['chi2_dof']:.1f}"
            out[f"ratio_window_verdict_{var}_a{a}"] = _uncontrolled(
                window_verdict(window_fits(g, "ratio_to_mba"), var, m[f"ratio_{var}"], (0.0,))[0]
            )
    nt = nstar(data)
    windows = []
    for a in sorted(nt.alpha.unique()) if not nt.empty else []:
        m = _model(a)
        for eps in st.EPS:
            f = nstar_fit(nt, a, eps)
            g = nt[(nt.alpha == a) & (nt.eps == eps)]
            out[f"nstar_kappa_moves_a{a}_eps{eps}"] = _kappa_moves(nt, a, eps)
            out[f"nstar_interior_a{a}_eps{eps}"] = f"{int((g.status == 'interior').sum())}"
            out[f"nstar_imprecise_a{a}_eps{eps}"] = f"{int((g.status == 'imprecise').sum())}"
            out[f"nstar_cells_a{a}_eps{eps}"] = f"{len(g)}"
            out[f"nstar_chi2_a{a}_eps{eps}"] = f"{f['chi2_dof']:.1f}"
            found = window_fit(g[g.status == "interior"], "N_star")
            out[f"nstar_window_a{a}_eps{eps}"] = (
                "none" if found is None else f"T >= {_sci(found[0])}"
            )
            if found is not None:
                windows.append(f"alpha={a}, eps={eps}: T >= {_sci(found[0])}")
            for var in ("T", "P"):
                k = f"{var}_a{a}_eps{eps}"
                claims = ((m[f"nstar_{var}"], (0.5,)), (0.5, (m[f"nstar_{var}"],)))
                for name, (claimed, alt) in zip(("model", "sqrt"), claims, strict=True):
                    out[f"nstar_verdict_{name}_{k}"] = _uncontrolled(
                        _exp_verdict(f, var, claimed, alt)[0]
                    )
                    out[f"nstar_window_verdict_{name}_{k}"] = _uncontrolled(
                        window_verdict(
                            window_fits(g[g.status == "interior"], "N_star"), var, claimed, alt
                        )[0]
                    )
                fw = found[1] if found is not None else None
                out[f"nstar_window_slope_{k}"] = "-" if fw is None else f"{fw['slopes'][var]:.2f}"
                out[f"nstar_window_slope_{k}_ci"] = (
                    "-" if fw is None else V.interval_text(fw["intervals"][var], ".2f")
                )
                out[f"nstar_slope_{k}"] = f"{f['slopes'][var]:.2f}"
                out[f"nstar_slope_{k}_ci"] = V.interval_text(f["intervals"][var], ".2f")
    out["nstar_windows"] = "; ".join(windows) if windows else "none"
    sq = sqrt_pt_table(data)
    below = sq[sq.status == "below_n"]
    out["sqrt_pt_imprecise"] = f"{int((sq.status == 'imprecise').sum())}"
    if not below.empty:
        out["sqrt_pt_cells"] = f"{len(below)}"
        out["sqrt_pt_ratio_min"] = f"{below.ratio.min():.2f}"
        out["sqrt_pt_ratio_max"] = f"{below.ratio.max():.2f}"
        out["sqrt_pt_above_1.1"] = f"{int((below.ratio > 1.1).sum())}"
    ls = data[(data.problem == "least_squares") & (data.schedule == "osa")]
    if not ls.empty:
        out["ls_osa_ratio_max"] = f"{ls.ratio_to_mba.max():.3f}"
        out["ls_osa_ratio_min"] = f"{ls.ratio_to_mba.min():.3f}"
    return out


# ------------------------------------------------------------------------------ plots
def plot(df: pd.DataFrame, outdir: Path) -> list[Path]:
    """Three figures: the OSA gap against ``T`` and ``P``; ``N*`` against ``T`` with the
    ``sqrt(P T)`` reading and ``n``; ``sqrt(P T)`` sufficiency and the least-squares
    contrast."""
    from analyses import _local_sgd_plots as lp

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    tables = study_tables()
    return [
        lp.plot_osa_gap(df, outdir / "local_sgd_large_steps_gap.png", tables),
        lp.plot_nstar(df, outdir / "local_sgd_large_steps_nstar.png", tables),
        lp.plot_sqrt_pt(df, outdir / "local_sgd_large_steps_sqrtpt.png", tables),
    ]


def study_tables() -> Any:
    """The study's tables for its figures (``analyses._local_sgd_plots.StudyTables``)."""
    from analyses import _local_sgd_plots as lp

    return lp.StudyTables(osa_table, ratio_fit, window_fit, nstar, sqrt_pt_table, _sci)


def _sci(x: float) -> str:
    """``3e5`` for 300000 (the grid's notation)."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"
