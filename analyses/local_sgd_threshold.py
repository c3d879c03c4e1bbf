"""How many rounds does Local-SGD need to match mini-batch averaging? (exact least squares)

Claim under test (Patel & Dieuleveut 2019, arXiv 1904.11325, as read in
``shared/theory/local_sgd.md``): Local-SGD with ``N`` rounds matches MBA once
``N* ~ sqrt(P T)``, i.e. the exponents of ``N*`` in ``T`` and in ``P`` are both 1/2.  Also:
``err(OSA) / err(MBA) -> 1`` as ``T`` grows with ``P`` fixed.

Method: exact expected errors (:mod:`convkit.exact`, no Monte Carlo noise), least squares with
Gaussian design, ``d = 10``, ``sigma = 1``, steps ``gamma_k = C k^-alpha`` with ``C`` a
fraction ``C_frac`` of the single-worker mean-square stability limit, start at distance
``r0`` from ``theta*`` (spread evenly over the eigen-directions), batch 1.  For every setting
``N*(T, P) = min{N : err(N) <= (1 + eps) err(MBA)}`` on the Polyak-Ruppert average
(:func:`convkit.exact.threshold.communication_threshold`, bisection; monotonicity of ``err`` in
``N`` checked on a log grid).  Exponents: least squares of ``log N*`` on ``log T`` and
``log P`` over the settings' *interior* points (``1 < N* < n``: at ``N* = 1`` one-shot
averaging already suffices, at ``N* = n`` nothing short of MBA does, and neither carries a
slope).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from convkit import verdicts as V
from convkit.checks import residual_trend_adequacy
from convkit.exact.threshold import communication_threshold
from convkit.limit_claims import limit_verdict
from convkit.plotting import plain
from convkit.problems.least_squares import LeastSquares

TITLE = (
    "Exact least squares: rounds N* that Local-SGD needs to match MBA against sqrt(P T), and "
    "err(OSA)/err(MBA) against T"
)

SETTING = ["spectrum", "alpha", "C_frac", "r0", "eps"]


def _grid(quick: bool) -> dict[str, list]:
    if quick:
        return {
            "T": [10**4, 10**5, 10**6],
            "P": [2, 8, 32],
            "alpha": [0.5, 0.75],
            "C_frac": [0.5, 0.9],
            "r0": [0.0, 1.0],
            "spectrum": ["1/i"],
            "eps": [0.01],
        }
    return {
        "T": [10**4, 10**5, 10**6, 10**7],
        "P": [2, 4, 8, 16, 32, 64],
        "alpha": [0.5, 0.75, 1.0],
        "C_frac": [0.5],
        "r0": [0.0, 1.0],
        "spectrum": ["1/i"],
        "eps": [0.01],
    }


def run(quick: bool = True) -> pd.DataFrame:
    """One row per (setting, T, P): N*, local steps n, errors of MBA/OSA, their ratio,
    ``sqrt(P T)`` and the monotonicity flag.  Quick: T <= 1e6, P in {2, 8, 32}, 8 settings
    (about a minute).  Full: T <= 1e7, P in {2, ..., 64}, 6 settings at C = 0.5 x limit, plus C = 0.9 x limit on
    two settings (P in {2, 8, 32}), T = 1e8 for P in {16, 64} (alpha 0.75, r0 0), a flat
    spectrum and eps = 0.001 (several minutes)."""
    g = _grid(quick)
    d = 10
    rows = []
    problems = {
        s: LeastSquares.gaussian(d, spectrum=s, noise=1.0, theta_star=np.zeros(d))
        for s in ("1/i", "flat")
    }
    combos = list(
        itertools.product(g["spectrum"], g["alpha"], g["C_frac"], g["r0"], g["eps"], g["T"], g["P"])
    )
    if not quick:  # T = 1e8 on two settings, larger steps, a flat spectrum and a smaller eps
        combos += [("1/i", 0.75, cf, 0.0, 0.01, 10**8, P) for cf in (0.5, 0.9) for P in (16, 64)]
        combos += [
            ("1/i", a, 0.9, r0, 0.01, T, P)
            for a, r0 in ((0.75, 0.0), (1.0, 1.0))
            for T in g["T"]
            for P in (2, 8, 32)
        ]
        combos += [("flat", 0.75, 0.5, 0.0, 0.01, T, P) for T in g["T"] for P in (2, 8, 32)]
        combos += [("1/i", 0.75, 0.5, 1.0, 0.001, T, P) for T in g["T"] for P in (2, 8, 32)]
    for spec, alpha, cf, r0, eps, T, P in combos:
        theta0 = np.full(d, r0 / np.sqrt(d))
        r = communication_threshold(
            T, P, alpha, eps, problem=problems[spec], C_frac=cf, theta0=theta0
        )
        rows.append(
            {
                "spectrum": spec,
                "alpha": alpha,
                "C_frac": cf,
                "r0": r0,
                "eps": eps,
                **{
                    k: r[k]
                    for k in (
                        "T",
                        "P",
                        "n",
                        "C",
                        "N_star",
                        "err_mba",
                        "err_osa",
                        "ratio_osa_mba",
                        "monotone",
                        "evaluations",
                    )
                },
                "sqrt_PT": float(np.sqrt(P * T)),
            }
        )
    df = pd.DataFrame(rows)
    df["interior"] = (df["N_star"] > 1) & (df["N_star"] < df["n"])
    return df


def fit_exponents(df: pd.DataFrame) -> pd.DataFrame:
    """Per setting: ``log N* = a + e_T log T + e_P log P`` on interior points (needs at least
    4 points with 2 distinct T and 2 distinct P), with standard errors of the exponents."""
    out = []
    for key, g in df.groupby(SETTING):
        gi = g[g["interior"]]
        row = dict(zip(SETTING, key, strict=True))
        row.update(
            n_points=len(g),
            n_interior=len(gi),
            frac_osa_enough=float((g.N_star == 1).mean()),
            frac_mba_needed=float((g.N_star == g.n).mean()),
            e_T=np.nan,
            e_P=np.nan,
            se_T=np.nan,
            se_P=np.nan,
            adequate=None,
            adequacy="too few interior points to fit",
        )
        if len(gi) >= 4 and gi["T"].nunique() >= 2 and gi["P"].nunique() >= 2:
            X = np.column_stack([np.ones(len(gi)), np.log(gi["T"]), np.log(gi["P"])])
            y = np.log(gi["N_star"].to_numpy(float))
            coef, res, *_ = np.linalg.lstsq(X, y, rcond=None)
            dof = max(len(gi) - 3, 1)
            s2 = float(np.sum((y - X @ coef) ** 2)) / dof
            cov = s2 * np.linalg.inv(X.T @ X)
            row.update(e_T=coef[1], e_P=coef[2], se_T=np.sqrt(cov[1, 1]), se_P=np.sqrt(cov[2, 2]))
            row["adequate"], row["adequacy"] = residual_trend_adequacy(X[:, 1:], y)
        out.append(row)
    return pd.DataFrame(out)


_PATEL = "Patel & Dieuleveut 2019 (arXiv 1904.11325)"

#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "local_sgd_threshold",
    {
        "nstar_exponent_T": V.Claim(
            "the exponent of N* (rounds for Local-SGD to match MBA within 1 + eps) in T is 1/2",
            f"{_PATEL}: N* ~ sqrt(P T) (local_sgd.rounds_needed)",
        ),
        "nstar_exponent_P": V.Claim(
            "the exponent of N* (rounds for Local-SGD to match MBA within 1 + eps) in P is 1/2",
            f"{_PATEL}: N* ~ sqrt(P T) (local_sgd.rounds_needed)",
        ),
        "error_monotone_in_rounds": V.Claim(
            "err(N) is non-increasing in the number of evenly spaced rounds N (log grid)",
            "the exact engine; more averaging never hurts on least squares",
        ),
        "osa_mba_ratio_to_one": V.Claim(
            "err(OSA)/err(MBA) -> 1 as T grows, P fixed",
            f"{_PATEL}, public review: OSA and MBA are asymptotically equivalent "
            "(local_sgd.osa_mba_ratio)",
        ),
    },
)


def controls(df: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`): the same checks on data made
    false on purpose: one ``err(N)`` made to increase; ``err(OSA)/err(MBA) - 1`` held at
    its smallest-``T`` value (no decay towards 1). (No exponent of ``N*`` holds on the
    committed data, so none has a control: one that held would be reported ``measured``.)"""
    out = []
    bad = df.copy()
    bad.loc[bad.index[0], "monotone"] = False
    out.append(V.Control("one err(N) increasing in N", bad))
    bad = df.copy()
    first = df.sort_values("T").groupby([*SETTING, "P"])["ratio_osa_mba"].transform("first")
    bad["ratio_osa_mba"] = first.reindex(df.index)
    out.append(V.Control("err(OSA)/err(MBA) held at its smallest-T value", bad))
    return out


@V.controlled(controls)
def checks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Measured vs claimed: exponents of N* in T and P (claim 1/2 each, alternatives 0 and 1;
    verdict by :func:`convkit.verdicts.exponent_verdict` on the 95 % Student-t interval of the
    least-squares fit, "not_identifiable" when the setting has too few interior points),
    monotonicity of err in N, and err(OSA)/err(MBA) -> 1 as T grows (per setting and P),
    tested on the limit by :func:`convkit.limit_claims.limit_verdict` (a decrease alone is
    ``measured``). The exact engine has no sampling error: the interval reflects how far the
    points are from one power law in T and P."""
    from scipy import stats

    out: list[dict[str, Any]] = []
    fits = fit_exponents(df)
    for _, f in fits.iterrows():
        setting = ", ".join(f"{k}={f[k]}" for k in SETTING)
        dof = max(int(f.n_interior) - 3, 1)
        q = float(stats.t.ppf(0.975, dof))
        for name, col in (("T", "e_T"), ("P", "e_P")):
            meas = f[col]
            se = f[f"se_{name}"]
            if not np.isfinite(meas):
                verdict, reason = V.NOT_IDENTIFIABLE, "no interior threshold to fit"
                interval = None
            else:
                interval = (float(meas - q * se), float(meas + q * se))
                verdict, reason = V.exponent_verdict(
                    interval, 0.5, alternatives=(0.0, 1.0), fit=f.to_dict()
                )
            out.append(
                V.check_row(
                    result=f"local_sgd_threshold.nstar_exponent_{name}",
                    setting=f"{setting} (interior points {int(f.n_interior)}/{int(f.n_points)}, "
                    f"OSA enough in {f.frac_osa_enough:.0%}, MBA needed in "
                    f"{f.frac_mba_needed:.0%})",
                    measured=plain(meas) if np.isfinite(meas) else "-",
                    theoretical=0.5,
                    verdict=verdict,
                    reason=reason,
                )
            )
    out.append(
        V.check_row(
            result="local_sgd_threshold.error_monotone_in_rounds",
            setting="all rows",
            measured=plain(df["monotone"].mean()),
            theoretical=1.0,
            verdict=V.HOLDS if bool(df["monotone"].all()) else V.VIOLATED,
            reason=f"non-increasing in {int(df['monotone'].sum())} of {len(df)} settings",
        )
    )
    for key, g in df.groupby([*SETTING[:-1], "P"]):
        g = g[g.eps == g.eps.min()].sort_values("T")
        r = g["ratio_osa_mba"].to_numpy()
        # a limit claim is tested on the limit (convkit.limit_claims): ratio - 1 must keep
        # decaying like a power of T, not merely decrease
        verdict, reason, det = limit_verdict(g["T"], r - 1.0, None, toward="1")
        out.append(
            V.check_row(
                result="local_sgd_threshold.osa_mba_ratio_to_one",
                setting=", ".join(
                    f"{k}={v}" for k, v in zip([*SETTING[:-1], "P"], key, strict=True)
                ),
                measured=plain(r[-1]),
                theoretical=1.0,
                verdict=verdict,
                reason=f"ratio {r[0]:.6g} at T = {_fmt_T(g['T'].iloc[0])}, {r[-1]:.6g} at "
                f"T = {_fmt_T(g['T'].iloc[-1])}; {reason}",
                **det,
            )
        )
    return out


def _fmt_T(t: float) -> str:
    e = int(round(np.log10(t)))
    return f"1e{e}" if 10**e == t else str(int(t))


def facts(df: pd.DataFrame) -> dict[str, str]:
    """The README's numbers, computed from this analysis' data (the committed CSV read back).

    Parameters
    ----------
    df : pandas.DataFrame
        The data of :func:`run`.

    Returns
    -------
    dict of str to str
        ``n_thresholds``, ``n_osa_enough`` (N* = 1), ``n_mba_needed`` (N* = n),
        ``n_interior``, ``monotone`` ("k of m" settings with err non-increasing in N),
        ``T_range``, ``P_range``; ``exponent_fits`` / ``exponent_holds`` (fitted exponents
        and how many hold); ``exponent_table`` (a Markdown table: per setting the
        fitted exponents of N* in T and P with 95 % Student-t intervals and their verdicts
        against +1/2); ``headline_e_T`` / ``headline_e_P`` (alpha = 0.75, C = 0.5 x limit,
        start at theta*, 1/i spectrum, eps = 0.01); ``ratio_table`` (a Markdown table of the
        median over P of err(OSA)/err(MBA) per alpha, start and T on the main grid) and
        ``ratio_075_largest_T`` (that median at the largest T for alpha = 0.75 from theta*).
    """
    from scipy import stats

    out: dict[str, str] = {
        "n_thresholds": str(len(df)),
        "n_osa_enough": str(int((df.N_star == 1).sum())),
        "n_mba_needed": str(int((df.N_star == df.n).sum())),
        "n_interior": str(int(df.interior.sum())),
        "monotone": f"{int(df.monotone.sum())} of {len(df)}",
        "T_range": f"{_fmt_T(df['T'].min())} to {_fmt_T(df['T'].max())}",
        "P_range": f"{int(df.P.min())} to {int(df.P.max())}",
    }
    lines = [
        "| spectrum, alpha, C / limit, start r0, eps | interior / all | exponent in T "
        "[95 %] | verdict | exponent in P [95 %] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    verdicts: list[str] = []
    for _, f in fit_exponents(df).iterrows():
        if not np.isfinite(f.e_T):
            continue
        q = float(stats.t.ppf(0.975, max(int(f.n_interior) - 3, 1)))
        cells = []
        for name in ("T", "P"):
            m, se = float(f[f"e_{name}"]), float(f[f"se_{name}"])
            verdict = V.exponent_verdict(
                (m - q * se, m + q * se), 0.5, alternatives=(0.0, 1.0), fit=f.to_dict()
            )
            cells += [f"{m:.2f} [{m - q * se:.2f}, {m + q * se:.2f}]", verdict[0]]
            verdicts.append(verdict[0])
            key = (f.spectrum, f.alpha, f.C_frac, f.r0, f.eps)
            if key == ("1/i", 0.75, 0.5, 0.0, 0.01):
                out[f"headline_e_{name}"] = f"{m:.2f} [{m - q * se:.2f}, {m + q * se:.2f}]"
        lines.append(
            f"| {f.spectrum}, {f.alpha}, {f.C_frac}, {f.r0}, {f.eps} | "
            f"{int(f.n_interior)} / {int(f.n_points)} | " + " | ".join(cells) + " |"
        )
    out["exponent_table"] = "\n".join(lines)
    out["exponent_fits"] = str(len(verdicts))
    out["exponent_holds"] = str(sum(v == V.HOLDS for v in verdicts))
    main = df[(df.eps == 0.01) & (df.C_frac == 0.5) & (df.spectrum == "1/i")]
    piv = main.pivot_table(
        index=["alpha", "r0"], columns="T", values="ratio_osa_mba", aggfunc="median"
    ).sort_index()
    head = "| alpha, start r0 | " + " | ".join(f"T = {_fmt_T(t)}" for t in piv.columns) + " |"
    rows = [head, "|---" * (len(piv.columns) + 1) + "|"]
    for (alpha, r0), r in piv.iterrows():
        vals = ["" if not np.isfinite(v) else f"{v:.3f}" for v in r.to_numpy(float)]
        rows.append(f"| {alpha}, {r0} | " + " | ".join(vals) + " |")
    out["ratio_table"] = "\n".join(rows)
    g = piv.loc[(0.75, 0.0)].dropna()
    out["ratio_075_largest_T"] = f"{g.iloc[-1]:.3f} at T = {_fmt_T(g.index[-1])}"
    out["ratio_P_range"] = f"{int(main.P.min())} to {int(main.P.max())}"
    return out


def _setting_label(key: tuple) -> str:
    spec, alpha, cf, r0, eps = key
    extra = ("" if spec == "1/i" else f", {spec} spectrum") + (
        "" if eps == 0.01 else f", eps={eps}"
    )
    return f"alpha={alpha}, C={cf} g*, r0={r0}{extra}"


def plot(df: pd.DataFrame, outdir: str | Path) -> list[str]:
    """Two panels: the interior thresholds N* against ``sqrt(P T)`` (log-log, one colour per
    setting, the claim ``N* = sqrt(P T)`` dashed black, ``N* = n`` unavailable per point) and
    ``err(OSA)/err(MBA)`` against T on the main grid (median over P, band: range over P).
    Legends sit below the axes.

    Parameters
    ----------
    df : pandas.DataFrame
        The data of :func:`run` (or the committed CSV read back).
    outdir : str or Path
        Directory for the PNG file.

    Returns
    -------
    list of str
        The written file ``local_sgd_threshold.png``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from convkit.plotting import THEORY_STYLE, legend_outside

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(12, 7.2))
    cmap = matplotlib.colormaps["tab10"]
    ax = axes[0]
    groups = list(df[df.interior].groupby(SETTING))
    markers = "os^Dv<>ph*"
    for i, (key, g) in enumerate(groups):
        ax.loglog(
            g["sqrt_PT"],
            g["N_star"],
            markers[i % len(markers)],
            ms=4.5,
            alpha=0.85,
            color=cmap(i % 10),
            label=f"{_setting_label(key)} ({len(g)} pts)",
        )
    x = np.array([df.sqrt_PT.min(), df.sqrt_PT.max()])
    ax.loglog(x, x, label="claim: N* = sqrt(P T)", **THEORY_STYLE)
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("sqrt(P T)  (P workers, T total gradients)")
    ax.set_ylabel("N*, rounds to be within eps of MBA (exact)")
    ax.set_title(
        "Interior thresholds 1 < N* < n, exact least squares d = 10\n"
        f"T = {df['T'].min():.0e} to {df['T'].max():.0e}, P = {df.P.min()} to {df.P.max()}",
        fontsize=10,
    )
    legend_outside(ax, where="below", ncol=2, bbox_to_anchor=(0.5, -0.12))
    ax = axes[1]
    # the main grid: median over P with the range over P as a band, one line per setting
    main = df[
        (df.eps == df.eps.mode()[0])
        & (df.C_frac == df.C_frac.min())
        & (df.spectrum == df.spectrum.mode()[0])
    ]
    seq = matplotlib.colormaps["viridis"]
    keys = sorted(main.groupby(["alpha", "r0"]).groups)
    for i, (alpha, r0) in enumerate(keys):
        g = main[(main.alpha == alpha) & (main.r0 == r0)]
        stats = g.groupby("T")["ratio_osa_mba"].agg(["median", "min", "max"]).sort_index()
        col = seq(0.05 + 0.8 * i / max(len(keys) - 1, 1))
        ax.semilogx(
            stats.index,
            stats["median"],
            "o-" if r0 == 0 else "s--",
            color=col,
            ms=3.5,
            lw=1.2,
            label=f"alpha={alpha}, r0={r0}",
        )
        ax.fill_between(stats.index, stats["min"], stats["max"], color=col, alpha=0.15)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xlabel("T, total gradients")
    ax.set_ylabel("err(OSA) / err(MBA), Polyak-Ruppert average (exact)")
    cf = main.C_frac.min()
    ax.set_title(
        f"One-shot vs mini-batch averaging, C = {cf} x stability limit\n"
        f"median over P = {main.P.min()}..{main.P.max()} (band: range over P); "
        "r0 = start distance from theta*",
        fontsize=10,
    )
    legend_outside(ax, where="below", ncol=2, bbox_to_anchor=(0.5, -0.12))
    fig.suptitle(
        "Local-SGD with N evenly spaced rounds vs MBA, exact expected error: least squares, "
        "Gaussian design, sigma = 1, gamma_k = C k^-alpha, batch 1",
        fontsize=11,
    )
    fig.subplots_adjust(left=0.07, right=0.98, top=0.86, bottom=0.3, wspace=0.28)
    png = outdir / "local_sgd_threshold.png"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [str(png)]


if __name__ == "__main__":  # pragma: no cover
    import sys

    data = run(quick="--full" not in sys.argv)
    print(fit_exponents(data).to_string())
    for c in checks(data):
        print(c)
