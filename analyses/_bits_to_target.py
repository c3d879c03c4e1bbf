"""Bits to a target error in the decentralized studies: where each method's mean error curve
first reaches a target (by log-log interpolation, :func:`analyses._decentralized_common.level_crossing`),
with the interval from the crossings of mean -+ 2 SE, and how two such counts compare: their
ratio with its interval, the methods' ranking and the pairs two rankings order differently.
Used by ``decentralized_heterogeneous`` and ``map_deepsqueeze`` (not an analysis itself)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyses import _decentralized_common as C
from convkit.plotting import plain


def bits_to_target(data: pd.DataFrame) -> pd.DataFrame:
    """Bits and iterations at which each method's mean error first reaches a target, with
    the interval from the crossings of mean -+ 2 SE; one row per setting, method and target.

    Two targets: ``"fixed"`` (the ``target`` column: 0.02 for least squares, 5 % of the
    initial excess risk for logistic) and ``"relative"`` (twice D-PSGD's error floor in the
    same setting and steps: its excess risk averaged over the last quarter of the record
    points), which stays reachable when heterogeneity lifts every floor above the fixed one."""
    rows = []
    err = data[data.metric == "excess_risk"]
    keys = ["problem", "split", "topology", "steps_kind", "method"]
    floors = {}
    for key, c in err[err.method == "D-PSGD"].groupby(keys[:4], sort=False):
        c = c[c["count"] > 0].sort_values("step")
        floors[key] = 2.0 * float(c["mean"].tail(max(1, len(c) // 4)).mean())
    for key, c in err.groupby(keys, sort=False):
        c = c[c["count"] > 0].sort_values("step")
        m, s = c["mean"].to_numpy(), c["se"].to_numpy()
        b, st = c["bits"].to_numpy(dtype=float), c["step"].to_numpy(dtype=float)
        b = np.maximum(b, 1.0)
        for kind, lvl in (("fixed", float(c["target"].iloc[0])), ("relative", floors[key[:4]])):
            rows.append(
                {
                    **dict(zip(keys, key)),
                    "target_kind": kind,
                    "zeta2": plain(float(c["zeta2"].iloc[0])),
                    "gamma": plain(float(c["gamma"].iloc[0])),
                    "L_max": plain(float(c["L_max"].iloc[0])),
                    "steps": int(c["steps"].iloc[0]),
                    "target": plain(lvl),
                    "bits": plain(C.level_crossing(b, m, lvl)),
                    "bits_lo": plain(C.level_crossing(b, m - 2 * s, lvl)),
                    "bits_hi": plain(C.level_crossing(b, m + 2 * s, lvl)),
                    "iterations": plain(C.level_crossing(st, m, lvl)),
                    "final_error": plain(float(m[-1])),
                    "n_diverged": int(c["n_diverged"].iloc[0]),
                }
            )
    return pd.DataFrame(rows)


def bits_ranking(bits: dict[str, float]) -> str:
    """Methods ordered by bits to target (fewest first; not reached last, tied)."""
    reached = sorted((b, m) for m, b in bits.items() if np.isfinite(b))
    rest = [m for m, b in bits.items() if not np.isfinite(b)]
    return " < ".join(m for _, m in reached) + (
        f" (not reached: {', '.join(rest)})" if rest else ""
    )


def discordant_pairs(a: dict[str, float], b: dict[str, float]) -> int:
    """Pairs of methods ordered differently by bits ``a`` and ``b`` (a Kendall distance;
    not reached counts as infinite bits, two not-reached methods as tied)."""

    def sign(u: float, v: float) -> int:
        u, v = (np.inf if np.isnan(u) else u), (np.inf if np.isnan(v) else v)
        return 0 if u == v else (1 if u > v else -1)

    ms = list(a)
    return sum(sign(a[x], a[y]) != sign(b[x], b[y]) for i, x in enumerate(ms) for y in ms[i + 1 :])


def bits_ratio(tail: pd.Series, bits: pd.Series) -> tuple[float, float, float]:
    """Ratio of the bits to target at the bits-tuned step to those at the tail-tuned step,
    with the interval ``[lo_bits / hi_tail, hi_bits / lo_tail]`` from the crossings of
    mean -+ 2 SE of both curves (a crossing that never happens: infinite bits); ``nan``
    when neither tuned step reaches the target."""

    def inf(v: float) -> float:
        return float("inf") if np.isnan(v) else float(v)

    with np.errstate(all="ignore"):
        r = inf(bits["bits"]) / inf(tail["bits"])
        lo = inf(bits["bits_lo"]) / inf(tail["bits_hi"])
        hi = inf(bits["bits_hi"]) / inf(tail["bits_lo"])
    return float(r), float(lo), float(hi)


def bits_ratio_text(r: float, lo: float, hi: float) -> str:
    """A bits ratio with its interval as the check rows write it (:func:`bits_ratio`)."""
    if np.isnan(r):
        return "neither reaches"
    if r == 0:
        return "reached only when tuned for bits"
    if np.isinf(r):
        return "reached only when tuned for the tail"
    return f"{r:.3g} [{lo:.2g}, {hi:.2g}]"
