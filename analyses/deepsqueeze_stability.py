"""DeepSqueeze: the largest stable consensus step eta, and the constant C_2 of its rate.

Setting: least squares with Gaussian design, d = 20, flat spectrum (L = mu = 1), label noise
sigma = 0.5, iid data; rings with uniform weights 1/3; top-k compression; theta0 = 0.

Part 1, largest stable eta (Tang et al. 2019 need a contraction; the theory note's claim: the
largest stable eta shrinks as k/d shrinks). Constant gamma = 0.01, n = 1000 steps. Configs:
k/d in {0.05, 0.1, 0.2, 0.4} on the ring of P = 8, and rings of P in {4, 5, 8, 16} at
k/d = 0.1 (spectral gaps 1 - rho = 0.667, 0.461, 0.195, 0.051). Hypothesis tested on the odd
ring (stated before it was run, after the even rings gave equal limits): the eigenvalues of
``W_eta`` are ``1 - eta (1 - lambda_i)`` and every even ring has ``lambda_n = -1/3``, so if the
limit is set by the most negative mode then ``eta* (1 - lambda_n)`` is the same for all rings
and P = 5 (``lambda_n = -0.206``) has a limit larger by ``(4/3) / 1.206``. A second
hypothesis, formed after that one failed (every ring with weights 1/3 has the same self-weight
``W_ii = 1/3``): ``eta* (1 - W_ii)`` is constant; it is told apart from the first on the
complete graph K8 (``W_ii = 1/8``, ``lambda_n = 0``); the 4x4 torus (``W_ii = 1/5``,
``lambda_n = -0.6``) gets the same prediction from both (full mode only). Divergence criterion (documented, fixed before
looking at the results; the one of ``tests/test_decentralized_behaviour.py``): a setting is
*unstable* if some replicate diverged in the engine's sense with ``divergence_factor = 1e4``
(||x_bar - theta*||^2 above 1e4 max(||theta*||^2, 1), or not finite) or if the mean
consensus distance at step n exceeds 1e4 (stable runs stay below ~1). It is robust in the
sense that a diverging DeepSqueeze run grows geometrically, so the margin between 1 and 1e4 is
crossed within a few tens of steps once the threshold is passed by more than the bisection
resolution; just above the threshold the growth is slow, so a finite n biases the estimate
upwards (by less than the resolution, as the stable/unstable scan of the test found). Bisection
on log eta in [0.01, 1], 6 halvings (resolution 100^(1/64) - 1 = 7.5%), all configurations
advanced together (one ``simulate`` call per halving, common random numbers); if eta = 1 is
stable the limit is reported as ">= 1" (censored). Estimate: geometric mean of the bracket.

Part 2, C_2 (claimed rate ``(1/T) sum_t E||grad f(x_bar_t)||^2 <~ c/sqrt(nT) + C_2/T`` for
``gamma <= 1/(3 L sqrt(C_2))``, constants unknown): for T in {500, ..., 8000} (quick: up to
2000) run DeepSqueeze with eta = 0.1 and gamma_T = 0.25 sqrt(P/T) (the usual tuning that gives
the 1/sqrt(nT) term), on rings P in {8, 16} with top-k k/d in {0.1, 0.25}; measure the time
average of ||grad f(x_bar_t)||^2 over 100 evenly spaced steps (per replicate, then mean and
SE over replicates) and fit c and C_2 of ``deepsqueeze.rate`` by
:func:`convkit.bounds.fit_constants` (log space, SE weights), separately per configuration.
Claim: C_2 grows with the compression error (smaller k/d) and shrinks with connectivity
(larger gap: P = 8 vs 16). The checks also report the time-averaged consensus distance, which
does move with compression and gap. A reason why C_2 may not on this problem **[derived
here]**: DeepSqueeze's average moves exactly like mini-batch SGD with the gradients taken at
the nodes' models, ``x_bar' = x_bar - gamma mean_i g_i(x_i)``, and on least squares with the
same ``H`` on every node ``E mean_i g_i(x_i) = H x_bar - E[x y]``: the consensus error enters the
average only through the multiplicative noise ``(a a^T - H)(x_i - x_bar)``, not its drift.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V
from convkit.algorithms.decentralized import DeepSqueeze
from convkit.bounds import fit_constants
from convkit.bounds import get as get_result
from convkit.compression import TopK
from convkit.plotting import color, legend_outside, plain
from convkit.simulate import DivergenceWarning
from convkit.topology import complete, ring, torus

TITLE = (
    "DeepSqueeze (top-k): largest stable consensus step eta vs k/d and spectral gap; "
    "fitted C_2 of the rate c/sqrt(nT) + C_2/T"
)
D, GAMMA, SEED = 20, 0.01, 1907
ETA_LO, ETA_HI, HALVINGS = 0.01, 1.0, 6
ETA_RATE, G0 = 0.1, 0.25


def _problem() -> ck.LeastSquares:
    return ck.LeastSquares.gaussian(d=D, noise=0.5, seed=0)


def _topology(kind: str, P: int):
    """``ring(P)``, ``complete(P)`` or the square ``torus(sqrt(P))`` (uniform weights)."""
    if kind == "ring":
        return ring(P)
    if kind == "complete":
        return complete(P)
    return torus(int(round(np.sqrt(P))))


def _stable(prob, configs, etas, R: int, n: int, seed: int) -> list[bool]:
    """Stability of DeepSqueeze for each (topology, P, k/d) config at its eta (criterion:
    module doc)."""
    algos = [
        DeepSqueeze(
            _topology(kind, P), ck.Constant(GAMMA), TopK(fraction=f), float(e), name=f"c{i}"
        )
        for i, ((kind, P, f), e) in enumerate(zip(configs, etas))
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ck.simulate(
            prob, algos, steps=n, replicates=R, seed=seed, n_record=3, divergence_factor=1e4
        )
    div = res.diverged
    out = []
    for a in algos:
        nd = int((div["config"] == a.label).sum()) if len(div) else 0
        cons = res.curve(a.label, "consensus", "state")
        last = cons["mean"].to_numpy()[-1] if len(cons) else np.inf
        out.append(nd == 0 and bool(last < 1e4))
    return out


def _bisect(prob, configs, R: int, n: int) -> pd.DataFrame:
    k = len(configs)
    lo, hi = np.full(k, ETA_LO), np.full(k, ETA_HI)
    s_lo = _stable(prob, configs, lo, R, n, SEED)
    s_hi = _stable(prob, configs, hi, R, n, SEED)
    active = np.array([a and not b for a, b in zip(s_lo, s_hi)])
    for _ in range(HALVINGS):
        idx = np.nonzero(active)[0]
        if idx.size == 0:
            break
        mids = np.sqrt(lo[idx] * hi[idx])
        ok = _stable(prob, [configs[i] for i in idx], mids, R, n, SEED)
        for i, m, s in zip(idx, mids, ok):
            if s:
                lo[i] = m
            else:
                hi[i] = m
    rows = []
    for i, (kind, P, f) in enumerate(configs):
        topo = _topology(kind, P)
        status = "bracketed" if active[i] else ("stable at 1" if s_hi[i] else "unstable at lo")
        rows.append(
            {
                "part": "eta_limit",
                "topology": kind,
                "P": P,
                "fraction": f,
                "gap": topo.spectral_gap,
                "lambda_n": topo.lambda_n,
                "self_weight": float(np.asarray(topo.W_at(0))[0, 0]),
                "eta_lo": lo[i] if active[i] or s_hi[i] else np.nan,
                "eta_hi": hi[i] if active[i] else np.nan,
                "eta_star": float(np.sqrt(lo[i] * hi[i])) if active[i] else np.nan,
                "status": status,
                "replicates": R,
                "steps": n,
            }
        )
    return pd.DataFrame(rows)


def _rate_points(prob, configs, Ts, R: int) -> pd.DataFrame:
    rows = []
    for T in Ts:
        algos = [
            DeepSqueeze(
                ring(P),
                ck.Constant(G0 * np.sqrt(P / T)),
                TopK(fraction=f),
                ETA_RATE,
                name=f"P={P} k/d={f}",
            )
            for P, f in configs
        ]
        rec = range(T // 100, T + 1, T // 100)
        res = ck.simulate(prob, algos, steps=T, replicates=R, seed=SEED + T, n_record=2, record=rec)
        for a, (P, f) in zip(algos, configs):
            cv = res.values[a.label]
            sel = np.isin(cv.steps, np.asarray(rec))
            g = cv.values[sel, cv.iterates.index("state"), cv.metrics.index("grad_norm2"), :]
            per_rep = g.mean(axis=0)  # time average per replicate
            cons = cv.values[sel, cv.iterates.index("state"), cv.metrics.index("consensus"), :]
            rows.append(
                {
                    "part": "rate",
                    "P": P,
                    "fraction": f,
                    "gap": ring(P).spectral_gap,
                    "T": T,
                    "n": P,
                    "gamma": G0 * np.sqrt(P / T),
                    "mean": float(per_rep.mean()),
                    "se": float(per_rep.std(ddof=1) / np.sqrt(R)),
                    "consensus": float(cons.mean()),
                    "replicates": R,
                }
            )
    return pd.DataFrame(rows)


def run(quick: bool = False) -> pd.DataFrame:
    prob = _problem()
    if quick:
        eta_cfg = [("ring", 8, 0.05), ("ring", 8, 0.1), ("ring", 16, 0.1)]
        Rb, nb = 3, 400
        Ts, Rr = (500, 1000, 2000), 4
    else:
        eta_cfg = [("ring", 8, f) for f in (0.05, 0.1, 0.2, 0.4)]
        eta_cfg += [("ring", P, 0.1) for P in (4, 5, 16)]
        eta_cfg += [("complete", 8, 0.1), ("torus", 16, 0.1)]
        Rb, nb = 10, 1000
        Ts, Rr = (500, 1000, 2000, 4000, 8000), 16
    eta = _bisect(prob, eta_cfg, Rb, nb)
    rate = _rate_points(prob, [(8, 0.25), (8, 0.1), (16, 0.25), (16, 0.1)], Ts, Rr)
    return pd.concat([eta, rate], ignore_index=True)


def fit_c2(data: pd.DataFrame) -> pd.DataFrame:
    """Fit ``c`` and ``C_2`` of ``deepsqueeze.rate`` per (P, k/d) configuration. The log-SE
    of ``C_2`` is widened for lack of fit by ``sqrt(max(1, chi2/dof))``
    (:func:`convkit.verdicts.misfit_inflation`; ``chi2 = n rms^2`` of the weighted log
    residuals, ``dof = n - 2``); ``log_se_C_2_unwidened`` keeps the known-variance one."""
    res = get_result("deepsqueeze.rate")
    rows = []
    rate = data[data.part == "rate"]
    for (P, f), g in rate.groupby(["P", "fraction"]):
        fit = fit_constants(res, g[["T", "n", "mean", "se"]], y="mean", se="se")
        dof = max(fit.n_points - len(fit.values), 1)
        chi2_dof = fit.rms_log_residual**2 * fit.n_points / dof
        rows.append(
            {
                "P": int(P),
                "fraction": float(f),
                "gap": float(g["gap"].iloc[0]),
                "c": fit.values["c"],
                "C_2": fit.values["C_2"],
                "log_se_C_2": fit.log_se["C_2"] * V.misfit_inflation(chi2_dof),
                "log_se_C_2_unwidened": fit.log_se["C_2"],
                "chi2_dof": chi2_dof,
                "rms": fit.rms_log_residual,
            }
        )
    return pd.DataFrame(rows)


def _short(r) -> str:
    return {"ring": f"ring {r.P}", "complete": f"K{r.P}", "torus": "torus 4x4"}[r.topology]


def _ticks(ax, values, fmt: str = "%.3g") -> None:
    """Major x ticks at the data values, no minor labels (log axis)."""
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    ax.xaxis.set_major_locator(FixedLocator(sorted(set(float(v) for v in values))))
    ax.xaxis.set_major_formatter(FormatStrFormatter(fmt))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    eta = data[data.part == "eta_limit"]

    def bracket(ax, sub, x, xlabel, title, fmt="o-"):
        sub = sub.sort_values(x)
        ok = sub[sub.status == "bracketed"]
        ax.errorbar(
            ok[x],
            ok["eta_star"],
            yerr=[ok["eta_star"] - ok["eta_lo"], ok["eta_hi"] - ok["eta_star"]],
            fmt=fmt,
            capsize=4,
            color=color("DeepSqueeze"),
            label="bisection bracket",
        )
        cen = sub[sub.status == "stable at 1"]
        if len(cen):
            ax.scatter(
                cen[x], np.ones(len(cen)), marker="^", s=60, color="0.3", label="stable at 1"
            )
        for r in ok.itertuples():
            ax.annotate(
                _short(r) if x == "gap" else f"k/d={r.fraction:g}",
                (getattr(r, x), r.eta_star),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=7,
            )
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=r"largest stable $\eta$")
        ax.set_ylim(0.1, 1.3)
        _ticks(ax, [0.05, 0.1, 0.2, 0.5, 1.0] if x == "gap" else sub[x])
        ax.set_title(title, fontsize=9)
        legend_outside(ax, where="below", ncol=2, bbox_to_anchor=(0.5, -0.18))

    bracket(
        axes[0],
        eta[(eta.P == 8) & (eta.topology == "ring")],
        "fraction",
        "compression ratio k/d (top-k)",
        rf"ring P = 8, $\gamma$ = {GAMMA}",
    )
    bracket(
        axes[1],
        eta[eta.fraction == 0.1],
        "gap",
        r"spectral gap $1-\rho$ of $W$",
        rf"k/d = 0.1, $\gamma$ = {GAMMA}; rings, complete graph, torus (uniform weights)",
        fmt="o",
    )
    ax = axes[2]
    rate = data[data.part == "rate"]
    fits = fit_c2(data).set_index(["P", "fraction"])
    res = get_result("deepsqueeze.rate")
    cmap = plt.get_cmap("viridis")
    groups = list(rate.groupby(["P", "fraction"]))
    for i, ((P, f), g) in enumerate(groups):
        g = g.sort_values("T")
        col = cmap(i / max(len(groups) - 1, 1))  # one DeepSqueeze configuration per colour
        fr = fits.loc[(P, f)]
        ax.errorbar(g["T"], g["mean"], yerr=1.96 * g["se"], fmt="o", color=col, capsize=3)
        Tg = np.geomspace(g["T"].min(), g["T"].max(), 50)
        pred = res.evaluate(check=False, T=Tg, n=P, c=fr["c"], C_2=fr["C_2"])
        ax.plot(Tg, pred, color=col, ls="--", label=f"P={P}, k/d={f}: fit, C_2={fr['C_2']:.3g}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="iterations T",
        ylabel=r"$\frac{1}{T}\sum_t \|\nabla f(\bar x_t)\|^2$",
        title=rf"fit c/sqrt(nT) + C_2/T; $\gamma_T$ = {G0} sqrt(P/T), $\eta$ = {ETA_RATE}",
    )
    _ticks(ax, rate["T"], "%d")
    ax.set_title(ax.get_title() + " (95% bars)", fontsize=9)
    legend_outside(ax, where="below", ncol=2, bbox_to_anchor=(0.5, -0.18))
    fig.suptitle(TITLE, fontsize=9)
    fig.tight_layout()
    path = outdir / "deepsqueeze_stability.png"
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return [path]


def _fmt_eta(r) -> str:
    if r.status == "bracketed":
        return f"{r.eta_star:.3g} [{r.eta_lo:.3g}, {r.eta_hi:.3g}]"
    return ">= 1" if r.status == "stable at 1" else f"< {ETA_LO}"


#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "deepsqueeze_stability",
    {
        "eta_limit_shrinks_with_kd": V.Claim(
            "the largest stable eta of DeepSqueeze shrinks as the top-k fraction k/d shrinks",
            "theory note of convkit.bounds.decentralized (the eta-step needs a contraction)",
        ),
        "eta_limit_vs_gap": V.Claim(
            "the largest stable eta of DeepSqueeze across ring sizes (spectral gaps)",
            "no published claim; the eigenvalues of W_eta are 1 - eta (1 - lambda_i) "
            "(w_eta.eigenvalues)",
            kind=V.MEASUREMENT,
        ),
        "eta_limit_most_negative_eigenvalue": V.Claim(
            "the largest stable eta is set by the most negative eigenvalue of W: "
            "eta* (1 - lambda_n) does not depend on the ring",
            "hypothesis derived here from the eigenvalues of W_eta (w_eta.eigenvalues)",
        ),
        "eta_limit_self_weight": V.Claim(
            "the self-weight sets the largest stable eta, eta* (1 - W_ii) = const, rather than "
            "the most negative eigenvalue, eta* (1 - lambda_n) = const",
            "hypotheses formed here after the ring results",
        ),
        "c2_grows_with_compression": V.Claim(
            "C_2 of DeepSqueeze's rate grows with the compression error (k/d 0.25 -> 0.1)",
            "Tang et al. 2019, as summarized (deepsqueeze.rate)",
        ),
        "c2_shrinks_with_connectivity": V.Claim(
            "C_2 of DeepSqueeze's rate shrinks with connectivity (ring P=16, gap 0.051 -> "
            "P=8, gap 0.195)",
            "Tang et al. 2019 (deepsqueeze.rate)",
        ),
        "rate_shape_and_step_limit": V.Claim(
            "how well the rate shape c/sqrt(nT) + C_2/T fits, and the step limit "
            "gamma <= 1/(3 L sqrt(C_2)) it implies",
            "deepsqueeze.rate and deepsqueeze.step_limit (a sufficient condition only)",
            kind=V.MEASUREMENT,
        ),
    },
)


def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative control (:func:`convkit.verdicts.controlled`): the k/d labels of the ring
    P = 8 stability limits reversed (k/d = 0.05 given the limit measured at 0.4 and so on),
    on which "the largest stable eta shrinks as k/d shrinks" must say ``violated``. The C_2
    comparisons and the eigenvalue hypotheses hold nowhere on the committed data (inconclusive
    or violated), so they need no control."""
    bad = data.copy()
    sel = (bad.part == "eta_limit") & (bad.topology == "ring") & (bad.P == 8)
    fr = sorted(bad.loc[sel, "fraction"].unique())
    bad.loc[sel, "fraction"] = bad.loc[sel, "fraction"].map(dict(zip(fr, fr[::-1])))
    return [
        V.Control(
            "ring P=8: k/d labels of the stability limits reversed",
            bad,
            ("deepsqueeze_stability.eta_limit_shrinks_with_kd",),
        )
    ]


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict]:
    """Stability limits in eta (ordering in k/d, the ring-size and eigenvalue hypotheses) and
    the C_2 comparisons (misfit-widened log-SEs); each ``holds`` needs a negative control
    (:func:`controls`)."""
    out = []
    eta = data[data.part == "eta_limit"]
    R, n = int(eta["replicates"].iloc[0]), int(eta["steps"].iloc[0])
    crit = (
        "unstable = a replicate with ||x_bar-theta*||^2 > 1e4 max(||theta*||^2,1) or final "
        "mean consensus distance > 1e4"
    )
    base = f"LS d={D} flat sigma=0.5; gamma={GAMMA}; n={n}; R={R}; bisection on log eta in "
    base += f"[{ETA_LO}, {ETA_HI}], {HALVINGS} halvings; {crit}"

    def bounds(r) -> tuple[float, float]:
        """Interval known to hold the limit: the bracket, [1, inf) or (0, lo)."""
        if r.status == "bracketed":
            return float(r.eta_lo), float(r.eta_hi)
        return (1.0, np.inf) if r.status == "stable at 1" else (0.0, ETA_LO)

    sub = eta[(eta.P == 8) & (eta.topology == "ring")].sort_values("fraction")
    rs = list(sub.itertuples())
    # shrinks as k/d shrinks: the intervals of consecutive fractions must be ordered and
    # disjoint (two limits censored on the same side are not resolved)
    pairs = list(zip(rs, rs[1:]))
    strict = all(
        bounds(a)[1] <= bounds(b)[0] and not (a.status == b.status != "bracketed") for a, b in pairs
    )
    reversed_ = any(bounds(a)[0] >= bounds(b)[1] and a.status != b.status for a, b in pairs)
    reversed_ |= any(
        bounds(a)[0] > bounds(b)[1] for a, b in pairs if "bracketed" == a.status == b.status
    )
    if strict:
        verdict, reason = V.HOLDS, "brackets ordered and disjoint for every consecutive pair"
    elif reversed_:
        verdict, reason = V.VIOLATED, "a smaller k/d has a larger limit"
    else:
        verdict, reason = (
            V.INCONCLUSIVE,
            "not resolved for every pair (overlapping or equally censored brackets)",
        )
    out.append(
        V.check_row(
            result="deepsqueeze_stability.eta_limit_shrinks_with_kd",
            setting=base + "; ring P=8, top-k",
            measured="; ".join(f"k/d={r.fraction:g}: {_fmt_eta(r)}" for r in rs),
            theoretical="decreasing as k/d decreases (theory note; needs a contraction)",
            verdict=verdict,
            reason=reason,
        )
    )
    sub = eta[(eta.fraction == 0.1) & (eta.topology == "ring")].sort_values("gap")
    rs = list(sub.itertuples())
    rs_p = [int(r.P) for r in rs]
    out.append(
        V.check_row(
            result="deepsqueeze_stability.eta_limit_vs_gap",
            setting=base + f"; top-k k/d=0.1, rings P in {sorted(rs_p)}",
            measured="; ".join(f"P={r.P} (gap {r.gap:.3f}): {_fmt_eta(r)}" for r in rs),
            theoretical="no explicit claim; [derived] the eigenvalues of W_eta are "
            "1 - eta (1 - lambda_i), and every even ring has lambda_n = -1/3, so a limit set "
            "by the most negative mode would not depend on P",
            verdict=V.MEASURED,
            reason="no published claim about the ring size",
        )
    )
    # hypothesis stated before the odd ring was run: the limit is set by the most negative
    # eigenvalue of W, eta* (1 - lambda_n) = const; predict P = 5 from the P = 8 bracket
    by_p = {int(r.P): r for r in rs}
    if 5 in by_p and 8 in by_p and by_p[8].status == "bracketed":
        r8, r5 = by_p[8], by_p[5]
        scale = (1 - r8.lambda_n) / (1 - r5.lambda_n)
        plo, phi = r8.eta_lo * scale, r8.eta_hi * scale
        if r5.status == "bracketed":
            overlap = r5.eta_lo <= phi and plo <= r5.eta_hi
            v, why = (
                (V.HOLDS, "the P=5 bracket overlaps the prediction")
                if overlap
                else (V.VIOLATED, "the P=5 bracket lies outside the prediction")
            )
        else:
            v, why = V.INCONCLUSIVE, "the P=5 limit is censored"
        out.append(
            V.check_row(
                result="deepsqueeze_stability.eta_limit_most_negative_eigenvalue",
                setting=base + "; top-k k/d=0.1; predict the odd ring P=5 "
                f"(lambda_n={r5.lambda_n:.3f}) from P=8 (lambda_n={r8.lambda_n:.3f})",
                measured=f"P=5: {_fmt_eta(r5)}",
                theoretical=f"predicted [{plo:.3g}, {phi:.3g}] (P=8 bracket times "
                f"(1-lambda_n(8))/(1-lambda_n(5)) = {scale:.3f})",
                verdict=v,
                reason=why,
            )
        )
    # second hypothesis, formed after the odd ring gave the same limit as the even rings
    # (every ring with weights 1/3 has the same self-weight W_ii = 1/3): the limit is set by
    # the self-weight, eta* (1 - W_ii) = const; against the lambda_n hypothesis on K8 and the
    # 4x4 torus (for the torus both predict the same value)
    other = eta[(eta.fraction == 0.1) & (eta.topology != "ring")]
    r8 = by_p.get(8)
    if len(other) and r8 is not None and r8.status == "bracketed":
        parts, hits = [], {"lambda_n": 0, "self-weight": 0}
        for r in other.itertuples():
            preds = {
                "lambda_n": (1 - r8.lambda_n) / (1 - r.lambda_n),
                "self-weight": (1 - r8.self_weight) / (1 - r.self_weight),
            }
            txt = []
            for h, sc in preds.items():
                plo, phi = r8.eta_lo * sc, r8.eta_hi * sc
                ok = r.status == "bracketed" and r.eta_lo <= phi and plo <= r.eta_hi
                if r.status == "stable at 1":
                    ok = phi >= 1
                hits[h] += int(ok)
                txt.append(f"{h} predicts [{plo:.3g}, {phi:.3g}]{' (ok)' if ok else ''}")
            parts.append(f"{_short(r)}: {_fmt_eta(r)}; " + ", ".join(txt))
        n_o = len(other)
        # the row's claim is the self-weight hypothesis; lambda_n is the alternative
        if hits["self-weight"] == n_o and hits["lambda_n"] < n_o:
            v, why = V.HOLDS, "self-weight hypothesis consistent on every graph, lambda_n not"
        elif hits["lambda_n"] == n_o and hits["self-weight"] < n_o:
            v, why = V.VIOLATED, "lambda_n hypothesis consistent on every graph, self-weight not"
        elif hits["lambda_n"] == hits["self-weight"] == n_o:
            v, why = V.CONSISTENT_UNRESOLVED, "both consistent (not discriminated)"
        else:
            v, why = V.VIOLATED, "neither hypothesis consistent on every graph"
        out.append(
            V.check_row(
                result="deepsqueeze_stability.eta_limit_self_weight",
                setting=base + "; top-k k/d=0.1; uniform-weight K8 (W_ii = 1/8, "
                "lambda_n = 0) and 4x4 torus (W_ii = 1/5, lambda_n = -0.6), scaled from the "
                "ring P=8 bracket",
                measured="; ".join(parts),
                theoretical="hypotheses (no published claim)",
                verdict=v,
                reason=why,
            )
        )
    fits = fit_c2(data).set_index(["P", "fraction"])
    rate = data[data.part == "rate"]
    Ts = [int(t) for t in sorted(rate["T"].unique())]
    Rr = int(rate["replicates"].iloc[0])
    rbase = (
        f"LS d={D}; DeepSqueeze eta={ETA_RATE}, gamma_T={G0} sqrt(P/T), T in {Ts}, R={Rr}; "
        "y = time average of ||grad f(x_bar_t)||^2 (100 steps); fit c, C_2 in log space "
        "with SE weights"
    )

    def c2(P, f) -> tuple[float, float]:
        r = fits.loc[(P, f)]
        return float(r["C_2"]), float(r["log_se_C_2"])

    Tmax = int(max(Ts))

    def cons(P, f) -> float:
        r = rate[(rate.P == P) & (rate.fraction == f) & (rate["T"] == Tmax)]
        return float(r["consensus"].iloc[0])

    def compare(a, b) -> tuple[str, str, str]:
        """Is C_2(a) > C_2(b)? Verdict by the log difference against 2 SE (independent fits)."""
        (ca, sa), (cb, sb) = c2(*a), c2(*b)
        diff, se = np.log(ca) - np.log(cb), float(np.hypot(sa, sb))
        txt = f"C_2(P={a[0]},k/d={a[1]})={ca:.3g} (log-SE {sa:.2f}) vs C_2(P={b[0]},k/d={b[1]})"
        txt += f"={cb:.3g} (log-SE {sb:.2f}); time-averaged consensus distance at T={Tmax}: "
        txt += f"{cons(*a):.3g} vs {cons(*b):.3g}"
        why = (
            f"log ratio {diff:.2f} against 2 SE = {2 * se:.2f} (log-SEs widened for lack of "
            f"fit by sqrt(chi2/dof), chi2/dof {fits.loc[a, 'chi2_dof']:.2g} and "
            f"{fits.loc[b, 'chi2_dof']:.2g})"
        )
        if diff > 2 * se:
            return txt, V.HOLDS, why
        if diff < -2 * se:
            return txt, V.VIOLATED, why + " (reversed)"
        return txt, V.INCONCLUSIVE, why + " (within 2 SE)"

    for P in (8, 16):
        txt, v, why = compare((P, 0.1), (P, 0.25))
        out.append(
            V.check_row(
                result="deepsqueeze_stability.c2_grows_with_compression",
                setting=rbase + f"; ring P={P}",
                measured=txt,
                theoretical="C_2(k/d=0.1) > C_2(k/d=0.25) (Tang et al. 2019, as summarized)",
                verdict=v,
                reason=why,
            )
        )
    for f in (0.25, 0.1):
        txt, v, why = compare((16, f), (8, f))
        out.append(
            V.check_row(
                result="deepsqueeze_stability.c2_shrinks_with_connectivity",
                setting=rbase + f"; top-k k/d={f}",
                measured=txt,
                theoretical="C_2(P=16) > C_2(P=8)",
                verdict=v,
                reason=why,
            )
        )
    rms = ", ".join(
        f"P={P},k/d={f}: rms weighted log-residual {r['rms']:.2f} SE, implied gamma limit "
        f"1/(3 L sqrt(C_2))={1 / (3 * np.sqrt(r['C_2'])):.3g}"
        for (P, f), r in fits.iterrows()
    )
    out.append(
        V.check_row(
            result="deepsqueeze_stability.rate_shape_and_step_limit",
            setting=rbase + "; L = 1; gammas used "
            f"{G0 * np.sqrt(8 / max(Ts)):.3g}..{G0 * np.sqrt(16 / min(Ts)):.3g}",
            measured=rms,
            theoretical="rms weighted residual ~ 1 SE if the shape fits; the step limit is "
            "a sufficient condition only",
            verdict=V.MEASURED,
            reason="the step limit is a sufficient condition only; the fit quality is "
            "reported, not judged",
        )
    )
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """Largest stable eta per configuration and the fitted C_2 per (P, k/d)."""
    out = {}
    for r in data[data.part == "eta_limit"].itertuples():
        key = f"eta_{r.topology}{int(r.P)}_kd{r.fraction:g}".replace(".", "p")
        out[key] = _fmt_eta(r)
    for r in fit_c2(data).itertuples():
        key = f"c2_P{r.P}_kd{r.fraction:g}".replace(".", "p")
        out[key] = f"{plain(r.C_2, 3)}"
    return out
