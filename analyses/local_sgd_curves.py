"""Error against gradients for MBA, Local-SGD and OSA at equal total gradients.

Setting (after the authors' least-squares experiment, Patel & Dieuleveut 2019): Gaussian
design, d = 20, eigenvalues 1/i, noise sigma = 1, theta0 = 0 with ||theta*|| ~ 1; P = 16
workers, batch 1, steps gamma_k = C k^-alpha with C = 0.35, alpha = 0.75; T = 16 * 4096
gradients (n = 4096 local steps); N in {1 (OSA), 4, 16, 64, 256, 4096 (MBA)} evenly spaced
rounds, all on common random numbers.  Error: ||theta - theta*||_H^2 of the Polyak-Ruppert
average and of the last worker mean.

Checks: the review's reading that communicating more often is better pre-asymptotically
(paired comparisons of final errors along N), and the size of the OSA / MBA gap.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V

TITLE = "Local-SGD family at equal gradients: error vs gradients for N rounds (P = 16, d = 20)"
P, D, N_STEPS = 16, 20, 4096
ROUNDS = (1, 4, 16, 64, 256, N_STEPS)


def _algorithms():
    step = ck.PolyDecay(C=0.35, alpha=0.75)
    algos = []
    for N in ROUNDS:
        name = "OSA" if N == 1 else "MBA" if N == N_STEPS else f"N={N}"
        algos.append(ck.LocalSGD(P, step, comm=ck.Rounds(N), name=name))
    return algos


def run(quick: bool = False) -> pd.DataFrame:
    prob = ck.LeastSquares.gaussian(d=D, spectrum="1/i", noise=1.0, seed=0)
    res = ck.simulate(
        prob, _algorithms(), steps=N_STEPS, replicates=100 if quick else 1000, seed=2019
    )
    frame = res.frame[res.frame.metric == "hnorm2"].copy()
    paired = pd.concat([res.compare(a.label, "MBA") for a in _algorithms() if a.label != "MBA"])
    paired["gradients"] = paired["step"] * P
    paired = paired.rename(columns={"mean": "paired_mean"})
    paired["iterate"] = "paired_vs_MBA"
    return pd.concat([frame, paired], ignore_index=True)


def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    curves = data[data.iterate.isin(["avg", "last"])]
    for ax, it, title in zip(axes, ("avg", "last"), ("Polyak-Ruppert average", "last iterate")):
        sub = curves[curves.iterate == it]
        for name, g in sub.groupby("config", sort=False):
            ax.plot(g["gradients"], g["mean"], label=name)
            ax.fill_between(
                g["gradients"], g["mean"] - 2 * g["se"], g["mean"] + 2 * g["se"], alpha=0.2
            )
        ax.set(xscale="log", yscale="log", xlabel="stochastic gradients (all workers)", title=title)
    ax = axes[2]
    paired = data[data.iterate == "paired_vs_MBA"]
    for name, g in paired.groupby("config", sort=False):
        ax.plot(g["gradients"], g["ratio"], label=name)
        ax.fill_between(
            g["gradients"],
            g["ratio"] - 2 * g["ratio_se"],
            g["ratio"] + 2 * g["ratio_se"],
            alpha=0.2,
        )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set(
        xscale="log",
        xlabel="stochastic gradients (all workers)",
        title="err(N) / err(MBA), averaged iterate (paired, ±2 SE)",
    )
    axes[0].set_ylabel(r"$E\,\|\theta-\theta^*\|_H^2$")
    axes[0].legend(title="rounds")
    fig.suptitle(TITLE, fontsize=9)
    fig.tight_layout()
    path = outdir / "local_sgd_curves.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return [path]


def checks(data: pd.DataFrame) -> list[dict]:
    paired = data[data.iterate == "paired_vs_MBA"]
    paired = paired.loc[paired.groupby("config")["step"].idxmax()].set_index("config")
    out = []
    order = ["OSA"] + [f"N={N}" for N in ROUNDS[1:-1]]
    ratios = {k: paired.loc[k, "ratio"] for k in order}
    ses = {k: paired.loc[k, "ratio_se"] for k in order}
    # more rounds -> lower error: each consecutive ratio must drop by more than 3 paired SE
    drops = [
        ratios[a] - ratios[b] > -3 * np.hypot(ses[a], ses[b]) for a, b in zip(order, order[1:])
    ]
    measured = ", ".join(f"{k}: {ratios[k]:.3f}±{ses[k]:.3f}" for k in order)
    osa_gap = ratios["OSA"] - 1 > 3 * ses["OSA"]
    if not all(drops):
        verdict, reason = V.VIOLATED, "a ratio rises with N by more than 3 paired SE"
    elif osa_gap:
        verdict, reason = V.HOLDS, "non-increasing in N within 3 paired SE, OSA gap > 3 SE"
    else:
        verdict, reason = (
            V.CONSISTENT_UNRESOLVED,
            "non-increasing within 3 paired SE, but no gap to MBA resolved at this T",
        )
    out.append(
        {
            "result": "more frequent communication is better pre-asymptotically (review of Patel & Dieuleveut 2019)",
            "setting": f"LS d={D}, 1/i spectrum, P={P}, n={N_STEPS}, C=0.35, alpha=0.75; paired err(N)/err(MBA) at T, averaged iterate",
            "measured": measured,
            "theoretical": "err(N)/err(MBA) non-increasing in N, >= 1",
            "verdict": verdict,
            "reason": reason,
        }
    )
    osa = ratios["OSA"]
    out.append(
        {
            "result": "OSA and MBA asymptotically equivalent (ratio -> 1 as T grows)",
            "setting": f"same, T = {P * N_STEPS} gradients",
            "measured": f"err(OSA)/err(MBA) = {osa:.3f} ± {ses['OSA']:.3f}",
            "theoretical": "1 as T -> inf (finite-T gap expected)",
            "verdict": V.MEASURED,
            "reason": "gap above 3 paired SE at this T (finite-T gap; the limit is not tested)"
            if osa - 1 > 3 * ses["OSA"]
            else "equal to MBA within 3 paired SE at this T",
        }
    )
    return out
