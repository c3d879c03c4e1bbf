"""Decentralized SGD with and without compression: error against iterations and bits sent.

Setting: least squares with Gaussian design, d = 50, flat spectrum (L = mu = 1), label noise
sigma = 0.5, iid data on every node; ring of P = 16 nodes with uniform weights 1/3
(spectral gap 1 - rho = 0.051); theta0 = 0; constant step gamma = 0.01 for every method; all
methods on common random numbers (same samples for node i at step k). Full mode also runs
D-PSGD, CHOCO-SGD (gamma_c tuned for the torus) and DeepSqueeze on a 4x4 torus (uniform
weights 1/5, spectral gap 0.40), drawn dashed.

Methods (compressed messages carry top-k with k/d = 0.1, i.e. 5 of 50 coordinates, 190 bits
against 1600 for a full float32 model; QSGD with s = 4 levels costs 232 bits):

* D-PSGD (Lian et al. 2017), no compression;
* CHOCO-SGD (Koloskova et al. 2019), top-k, gamma_c tuned by pure gossip
  (:func:`~convkit.algorithms.decentralized.tune_consensus_step`, default grid);
* DeepSqueeze (Tang et al. 2019), top-k, consensus step eta = 0.1;
* DCD-PSGD (Tang et al. 2018) with an aggressive unbiased compressor (scaled rand-k,
  k/d = 0.1, variance factor omega = 9) and with an accurate one (QSGD, s = 4);
* ECD-PSGD (same paper) with QSGD, s = 4;
* EF-SGD (centralized, through a server; top-k, k/d = 0.1), P messages per step.

Error: excess risk f(x_bar) - f* of the node average at the current step ("last" iterate);
consensus distance (1/P) sum_i ||x_i - x_bar||^2. Bits: cumulative over the whole network (one
message per directed edge per step, 32 on the ring; for EF-SGD P uploads plus the server's
broadcast of the averaged update, P downloads of min(d float_bits, P upload bits) bits).
CHOCO-SGD runs in the paper's order (``order="paper"``, the default: compress
``x - gamma g - x_hat`` first, mix with the updated copies), public copies starting at x_0. Divergence: the engine's criterion (||x_bar - theta*||^2 above 1e12
times max(||theta*||^2, 1) or not finite); diverged replicates leave the curves.

Checks: which methods converge or diverge at gamma = 0.01, whether the torus has a smaller
consensus distance than the ring (full mode), and the bits CHOCO-SGD /
DeepSqueeze need to reach an error level that D-PSGD also reaches (level stated: 0.01, i.e.
1.6% of the initial excess risk 0.618 and about 4.6 times D-PSGD's stationary error).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V
from convkit.algorithms.decentralized import (
    CHOCOSGD,
    DCDPSGD,
    DPSGD,
    ECDPSGD,
    DeepSqueeze,
    tune_consensus_step,
)
from convkit.algorithms.feedback import ErrorFeedbackSGD
from convkit.compression import QSGD, RandK, TopK
from convkit.plotting import REFERENCE_STYLE, color
from convkit.simulate import DivergenceWarning
from convkit.topology import ring, torus

TITLE = (
    "Decentralized SGD on a ring (P = 16; full mode also a 4x4 torus, dashed), least squares "
    "d = 50, gamma = 0.01: "
    "error vs iterations and vs bits sent"
)
P, D, GAMMA, ETA, FRACTION = 16, 50, 0.01, 0.1, 0.1
LEVEL = 0.01  # error level at which bits are compared
SEED = 2019
ORDER = (
    "D-PSGD",
    "CHOCO-SGD top-k",
    "DeepSqueeze top-k",
    "DCD-PSGD QSGD s=4",
    "DCD-PSGD scaled rand-k",
    "ECD-PSGD QSGD s=4",
    "EF-SGD top-k (central)",
)
TORUS = ("D-PSGD (torus)", "CHOCO-SGD top-k (torus)", "DeepSqueeze top-k (torus)")


def _problem() -> ck.LeastSquares:
    return ck.LeastSquares.gaussian(d=D, noise=0.5, seed=0)


def _algorithms(gamma_c: float) -> list:
    topo, g = ring(P), ck.Constant(GAMMA)
    top = TopK(fraction=FRACTION)
    return [
        DPSGD(topo, g, name=ORDER[0]),
        CHOCOSGD(topo, g, top, gamma_c, name=ORDER[1]),
        DeepSqueeze(topo, g, top, ETA, name=ORDER[2]),
        DCDPSGD(topo, g, QSGD(s=4), name=ORDER[3]),
        DCDPSGD(topo, g, RandK(fraction=FRACTION, scaled=True), name=ORDER[4]),
        ECDPSGD(topo, g, QSGD(s=4), name=ORDER[5]),
        ErrorFeedbackSGD(P, g, top, name=ORDER[6]),
    ]


def _torus_algorithms(gamma_c: float) -> list:
    topo, g = torus(4), ck.Constant(GAMMA)
    top = TopK(fraction=FRACTION)
    return [
        DPSGD(topo, g, name=TORUS[0]),
        CHOCOSGD(topo, g, top, gamma_c, name=TORUS[1]),
        DeepSqueeze(topo, g, top, ETA, name=TORUS[2]),
    ]


def run(quick: bool = False) -> pd.DataFrame:
    prob = _problem()
    tuned = tune_consensus_step(ring(P), TopK(fraction=FRACTION), d=D, seed=SEED)
    algos = _algorithms(tuned.gamma_c)
    gc_torus = np.nan
    if not quick:  # the torus only in full mode (time)
        gc_torus = tune_consensus_step(torus(4), TopK(fraction=FRACTION), d=D, seed=SEED).gamma_c
        algos += _torus_algorithms(gc_torus)
    n, R = (800, 5) if quick else (4000, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        res = ck.simulate(prob, algos, steps=n, replicates=R, seed=SEED, n_record=50)
    f = res.frame
    keep = ((f.iterate == "last") & (f.metric == "excess_risk")) | (
        (f.iterate == "state") & (f.metric == "consensus")
    )
    out = f[keep].copy()
    div = res.diverged
    out["replicates"] = R
    out["steps"] = n
    out["gamma_c"] = tuned.gamma_c
    out["gamma_c_torus"] = gc_torus
    out["initial_error"] = float(prob.errors(np.zeros(D))["excess_risk"])
    first = {}
    if len(div):
        for name, g in div.groupby("config"):
            first[name] = (len(g), int(g["step"].max()), int(g["step"].min()))
    out["n_diverged"] = out["config"].map(lambda c: first.get(c, (0, 0, 0))[0])
    out["last_divergence_step"] = out["config"].map(lambda c: first.get(c, (0, 0, 0))[1])
    return out.reset_index(drop=True)


def _curve(data: pd.DataFrame, config: str, metric: str) -> pd.DataFrame:
    sub = data[(data.config == config) & (data.metric == metric)]
    return sub[sub["count"] > 0].sort_values("step")


def bits_to_level(data: pd.DataFrame, config: str, level: float = LEVEL, x: str = "bits") -> float:
    """Bits sent (or ``x = "step"``: iterations) when the mean error curve first falls to
    ``level`` (log-log interpolation between the two record points around the crossing);
    ``nan`` if it never does."""
    c = _curve(data, config, "excess_risk")
    e, b = c["mean"].to_numpy(), c[x].to_numpy(dtype=float)
    below = np.nonzero(e <= level)[0]
    if below.size == 0:
        return float("nan")
    j = int(below[0])
    if j == 0:
        return float(b[0])
    t = (np.log(e[j - 1]) - np.log(level)) / (np.log(e[j - 1]) - np.log(e[j]))
    return float(np.exp(np.log(b[j - 1]) + t * (np.log(b[j]) - np.log(b[j - 1]))))


def steps_bracket(data: pd.DataFrame, config: str, level: float = LEVEL) -> tuple[float, float]:
    """Iterations at which the 95 % band of the mean error curve (mean -+ 1.96 SE) first falls
    to ``level``: the lower edge crosses first, the upper edge last (log-log interpolation as
    in :func:`bits_to_level`; ``nan`` where an edge never crosses)."""
    c = _curve(data, config, "excess_risk")
    out = []
    for sign in (-1.0, 1.0):
        band = c.assign(mean=np.maximum(c["mean"] + sign * 1.96 * c["se"], 1e-300))
        band["config"] = config
        out.append(bits_to_level(band, config, level, x="step"))
    return out[0], out[1]


def message_bits(data: pd.DataFrame, config: str) -> float:
    """Bits the whole network sends per step (the cumulative count over the last record
    step)."""
    c = _curve(data, config, "excess_risk")
    last = c.iloc[-1]
    return float(last["bits"]) / float(last["step"])


def plot(data: pd.DataFrame, outdir: Path) -> list[Path]:
    import matplotlib.pyplot as plt

    # one palette colour per algorithm; the two DCD-PSGD compressors differ by line style
    colors = {name: color(name.split()[0]) for name in ORDER}
    styles = {name: (":" if "rand-k" in name else "-") for name in ORDER}
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    panels = (
        ("excess_risk", "step", "iterations (local steps)", r"$f(\bar x) - f^*$"),
        ("excess_risk", "bits", "bits sent (whole network)", r"$f(\bar x) - f^*$"),
        ("consensus", "step", "iterations (local steps)", r"$\frac{1}{P}\sum_i\|x_i-\bar x\|^2$"),
    )
    for ax, (metric, x, xlabel, ylabel) in zip(axes, panels):
        for name in ORDER + TORUS:
            c = _curve(data, name, metric)
            if c.empty:
                continue
            base = name.replace(" (torus)", "")
            ls = "--" if base != name else styles[base]
            nd = int(c["n_diverged"].iloc[0])
            label = name + (f" (diverged {nd}/{int(c['replicates'].iloc[0])})" if nd else "")
            xv = c[x].to_numpy(dtype=float)
            lo = np.maximum(c["mean"] - 1.96 * c["se"], c["mean"] * 1e-3)
            ax.plot(xv, c["mean"], label=label, color=colors[base], lw=1.4, ls=ls)
            ax.fill_between(xv, lo, c["mean"] + 1.96 * c["se"], color=colors[base], alpha=0.2)
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
        if metric == "excess_risk":
            ax.axhline(LEVEL, **REFERENCE_STYLE)
            ax.set_ylim(1e-3, 1e3)
        else:
            ax.set_ylim(1e-4, 1e3)
    axes[0].set_title("error of the node average (95% bands)", fontsize=9)
    axes[1].set_title(f"same against bits; dotted: comparison level {LEVEL:g}", fontsize=9)
    axes[2].set_title("consensus distance (95%)\ndashed: 4x4 torus (gap 0.40) if run", fontsize=9)
    handles, labels = axes[1].get_legend_handles_labels()  # every method (EF-SGD too)
    axes[2].legend(
        handles,
        labels,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize="small",
        frameon=False,
    )
    gc = float(data["gamma_c"].iloc[0])
    fig.suptitle(
        TITLE + f"; top-k k/d = {FRACTION}, CHOCO gamma_c = {gc:.3g} (tuned), "
        f"DeepSqueeze eta = {ETA}",
        fontsize=9,
    )
    fig.tight_layout()
    path = outdir / "decentralized_bits.png"
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return [path]


#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "decentralized_bits",
    {
        "compressed_converge_like_dpsgd": V.Claim(
            "CHOCO-SGD and DeepSqueeze with a biased compressor (top-k) converge like D-PSGD",
            "Koloskova et al. 2019 (CHOCO-SGD, any contractive compressor); Tang et al. 2019 "
            "(DeepSqueeze)",
        ),
        "dcd_diverges_aggressive": V.Claim(
            "DCD-PSGD diverges with an aggressive unbiased compressor (scaled rand-k)",
            "Tang et al. 2018: DCD-PSGD needs an accurate unbiased compressor",
        ),
        "ecd_constant_step": V.Claim(
            "ECD-PSGD with an accurate unbiased compressor (QSGD s=4) at a constant step: "
            "converges or diverges",
            "Tang et al. 2018 analyse decaying steps; at a constant step the estimate's "
            "variance grows like t omega ||x_t - x_{t-1}||^2 (derived in "
            "convkit.bounds.decentralized)",
            kind=V.MEASUREMENT,
        ),
        "fewer_bits_than_dpsgd": V.Claim(
            "a compressed method (CHOCO-SGD or DeepSqueeze with top-k, named in the setting) "
            "reaches D-PSGD's error level with fewer bits, beyond its smaller messages",
            "Koloskova et al. 2019; Tang et al. 2019 (bits to a target error)",
        ),
        "connectivity_smaller_consensus": V.Claim(
            "better connectivity (4x4 torus, gap 0.40, against a ring of 16, gap 0.051) gives "
            "a smaller consensus distance",
            "classic: the consensus distance decreases with the spectral gap",
        ),
    },
)


def controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`), false variants of the data on
    which the same checks must say ``violated``:

    * *CHOCO-SGD held at its initial error*: its excess-risk curve set to the initial error
      (no convergence) falsifies "CHOCO-SGD and DeepSqueeze converge like D-PSGD";
    * *DCD-PSGD's divergences removed*: the divergence count of DCD-PSGD with scaled rand-k
      set to zero falsifies "DCD-PSGD diverges with an aggressive unbiased compressor";
    * *compressed messages priced at twice D-PSGD's*: the bits of CHOCO-SGD and DeepSqueeze
      multiplied so that each message costs twice a full D-PSGD message falsifies "reaches
      D-PSGD's error with fewer bits";
    * *ring and torus swapped* (full mode): falsifies "better connectivity gives a smaller
      consensus distance" for every method whose torus value was smaller.
    """
    out = []
    bad = data.copy()
    sel = (bad.config == "CHOCO-SGD top-k") & (bad.metric == "excess_risk")
    bad.loc[sel, "mean"] = bad.loc[sel, "initial_error"]
    out.append(V.Control("CHOCO-SGD held at its initial error", bad))
    bad = data.copy()
    bad.loc[bad.config == "DCD-PSGD scaled rand-k", "n_diverged"] = 0
    out.append(V.Control("DCD-PSGD scaled rand-k: divergences removed", bad))
    bad = data.copy()
    full = message_bits(data, "D-PSGD")
    for name in ("CHOCO-SGD top-k", "DeepSqueeze top-k"):
        sel = bad.config == name
        bad.loc[sel, "bits"] = bad.loc[sel, "bits"] * (2 * full / message_bits(data, name))
    out.append(V.Control("compressed messages priced at twice D-PSGD's", bad))
    if TORUS[0] in set(data.config):
        swap = dict(zip(ORDER[:3], TORUS)) | dict(zip(TORUS, ORDER[:3]))
        bad = data.copy()
        bad["config"] = bad["config"].map(lambda c: swap.get(c, c))
        out.append(V.Control("ring and torus swapped", bad))
    return out


@V.controlled(controls)
def checks(data: pd.DataFrame) -> list[dict]:
    """Convergence and divergence at gamma = 0.01, bits to the error level against D-PSGD
    (``measured`` where both reach it at the same iteration within the 95 % band: the ratio is
    then the message-size ratio), and ring against torus consensus; each ``holds`` needs a
    negative control (:func:`controls`)."""
    n = int(data["steps"].iloc[0])
    R = int(data["replicates"].iloc[0])
    init = float(data["initial_error"].iloc[0])
    gc = float(data["gamma_c"].iloc[0])
    setting = (
        f"LS d={D} flat, sigma=0.5, iid; ring P={P}; gamma={GAMMA}; n={n} steps, R={R}; "
        f"top-k k/d={FRACTION}, CHOCO gamma_c={gc:.3g} (tuned), DeepSqueeze eta={ETA}"
    )
    status = {}
    for name in ORDER:
        c = _curve(data, name, "excess_risk")
        nd = int(data.loc[data.config == name, "n_diverged"].iloc[0])
        final = c[c.step == n]
        fin = float(final["mean"].iloc[0]) if len(final) else float("nan")
        se = float(final["se"].iloc[0]) if len(final) else float("nan")
        status[name] = (nd, fin, se)

    def fmt(name: str) -> str:
        nd, fin, se = status[name]
        if nd == R:
            step = int(data.loc[data.config == name, "last_divergence_step"].iloc[0])
            return f"{name}: all {R} diverged (by step {step})"
        return f"{name}: {nd}/{R} diverged, final error {fin:.2e}±{se:.1e}"

    def converged(name: str) -> bool:
        nd, fin, _ = status[name]
        return nd == 0 and fin < 0.01 * init

    out = []
    conv = ["CHOCO-SGD top-k", "DeepSqueeze top-k", "D-PSGD"]
    ok = all(converged(c) for c in conv)
    out.append(
        V.check_row(
            result="decentralized_bits.compressed_converge_like_dpsgd",
            setting=setting + "; converged = no replicate diverged and final error < 1% "
            f"of the initial {init:.3f}",
            measured="; ".join(fmt(c) for c in conv),
            theoretical="converge with any contractive compressor (Koloskova et al. 2019; "
            "Tang et al. 2019)",
            verdict=V.HOLDS if ok else V.VIOLATED,
            reason="all three converged"
            if ok
            else "not converged: " + ", ".join(c for c in conv if not converged(c)),
        )
    )
    dcd = "DCD-PSGD scaled rand-k"
    nd = status[dcd][0]
    out.append(
        V.check_row(
            result="decentralized_bits.dcd_diverges_aggressive",
            setting=setting + "; scaled rand-k k/d=0.1 (omega = 9)",
            measured=fmt(dcd) + "; " + fmt("DCD-PSGD QSGD s=4"),
            theoretical="DCD needs an accurate unbiased compressor (Tang et al. 2018); "
            "diverges under aggressive compression",
            verdict=V.HOLDS if nd == R else V.VIOLATED if nd == 0 else V.INCONCLUSIVE,
            reason=f"{nd} of {R} replicates diverged",
        )
    )
    ecd = "ECD-PSGD QSGD s=4"
    nde = status[ecd][0]
    out.append(
        V.check_row(
            result="decentralized_bits.ecd_constant_step",
            setting=setting,
            measured=fmt(ecd),
            theoretical="converges for an unbiased compressor in the paper's analysis "
            "(decaying steps); with a constant step the estimate's variance grows like "
            "t omega ||x_t - x_{t-1}||^2 [derived, decentralized.py]",
            # the paper's convergence claim is for decaying steps: this constant-step run is
            # a measurement against the derived drift, not a test of that claim
            verdict=V.MEASURED,
            reason="converges at this constant step"
            if converged(ecd)
            else (
                "diverges at constant step, as the derived drift predicts"
                if nde
                else "does not converge (no divergence)"
            ),
        )
    )
    b0 = bits_to_level(data, "D-PSGD")
    s0 = bits_to_level(data, "D-PSGD", x="step")
    k0 = steps_bracket(data, "D-PSGD")
    for name in ("CHOCO-SGD top-k", "DeepSqueeze top-k"):
        b = bits_to_level(data, name)
        st = bits_to_level(data, name, x="step")
        ratio = b / b0 if np.isfinite(b) and np.isfinite(b0) else float("nan")
        msg = message_bits(data, name) / message_bits(data, "D-PSGD")
        k1 = steps_bracket(data, name)
        # the bit ratio is (message-size ratio) x (iteration ratio): where the two reach the
        # level at the same iteration (overlapping 95 % bands) it is the message size alone
        same = not (k1[0] > k0[1] or k0[0] > k1[1])
        band = (
            f"iterations to the level, 95% band: {name} [{k1[0]:.0f}, {k1[1]:.0f}], D-PSGD "
            f"[{k0[0]:.0f}, {k0[1]:.0f}]"
        )
        if not np.isfinite(b0):
            verdict, reason = V.INCONCLUSIVE, "D-PSGD never reaches the level"
        elif not np.isfinite(b):
            verdict, reason = V.VIOLATED, f"{name} never reaches the level"
        elif ratio >= 1:
            verdict, reason = V.VIOLATED, f"bit ratio {ratio:.3f} >= 1; {band}"
        elif same:
            verdict = V.MEASURED
            reason = (
                f"bit ratio {ratio:.3f} < 1, but both reach the level at the same iteration "
                f"({band}, overlapping): the ratio is the message-size ratio {msg:.3f}, not a "
                "gain of the algorithm"
            )
        else:
            verdict = V.HOLDS
            reason = f"bit ratio {ratio:.3f} < 1 (message-size ratio {msg:.3f}); {band}"
        out.append(
            V.check_row(
                result="decentralized_bits.fewer_bits_than_dpsgd",
                setting=f"{name} against D-PSGD; "
                + setting
                + f"; error level f(x_bar)-f* = {LEVEL:g} "
                f"({100 * LEVEL / init:.1f}% of initial), bits at the first crossing of the "
                "mean curve (log-log interpolation between record points)",
                measured=f"bits {b:.3g} vs D-PSGD {b0:.3g}: ratio {ratio:.3f} (iterations "
                f"{st:.0f} vs {s0:.0f}); final error ratio to D-PSGD "
                f"{status[name][1] / status['D-PSGD'][1]:.3f}",
                theoretical="< 1 (190/1600 = 0.119 bits per message if iterations equal)",
                verdict=verdict,
                reason=reason,
            )
        )
    if TORUS[0] in set(data.config):
        gct = float(data["gamma_c_torus"].iloc[0])
        parts, smaller, larger = [], [], []
        for rname, tname in zip(ORDER[:3], TORUS):
            cr = _curve(data, rname, "consensus")
            ct = _curve(data, tname, "consensus")
            # time average over the second half of the record points (stationary phase)
            cr, ct = cr[cr.step >= n // 2], ct[ct.step >= n // 2]
            mr, mt = cr["mean"].mean(), ct["mean"].mean()
            ser, set_ = cr["se"].mean(), ct["se"].mean()  # conservative (correlated in time)
            parts.append(f"{rname}: ring {mr:.3g}±{ser:.1g} vs torus {mt:.3g}±{set_:.1g}")
            margin = 3 * np.hypot(ser, set_)
            if mr - mt > margin:
                smaller.append(rname)
            elif mt - mr > margin:
                larger.append(rname)
        out.append(
            V.check_row(
                result="decentralized_bits.connectivity_smaller_consensus",
                setting=setting + f"; torus CHOCO gamma_c={gct:.3g} (tuned); consensus "
                f"averaged over record points with step >= {n // 2}, SE = mean of the "
                "per-point SEs; margin 3 SE",
                measured="; ".join(parts),
                theoretical="consensus distance decreases with the spectral gap [classic]",
                verdict=V.VIOLATED
                if larger
                else V.HOLDS
                if len(smaller) == len(parts)
                else V.INCONCLUSIVE,
                reason=f"torus smaller by > 3 SE for {len(smaller)} of {len(parts)} methods"
                + (f"; larger for {', '.join(larger)}" if larger else "")
                + (
                    "; within 3 SE for "
                    + ", ".join(m for m in ORDER[:3] if m not in smaller + larger)
                    if len(smaller) + len(larger) < len(parts)
                    else ""
                ),
            )
        )
    return out


def facts(data: pd.DataFrame) -> dict[str, str]:
    """Bits (and iterations) to the error level per method, and the bit ratios to D-PSGD."""
    out = {}
    b0 = bits_to_level(data, "D-PSGD")
    for name in ORDER:
        key = name.split(" (")[0].replace(" ", "_").replace("-", "").replace("=", "").lower()
        b = bits_to_level(data, name)
        out[f"bits_{key}"] = f"{b:.3g}" if np.isfinite(b) else "not reached"
        if np.isfinite(b) and np.isfinite(b0):
            out[f"ratio_{key}"] = f"{b / b0:.3f}"
    return out
