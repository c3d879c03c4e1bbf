"""Behaviour the literature reports for decentralized compressed SGD, as assertions.

Setting shared by every test (unless stated): least squares with Gaussian design, ``d = 20``,
flat spectrum (``L = mu = 1``), label noise ``sigma = 0.5``, ``||theta*||^2 = 1.42``; ring of
``P = 8`` nodes with uniform weights 1/3; constant step ``gamma``; fixed seeds. Every margin
is stated in the test's docstring, with the value measured when the test was written.
Set ``CONVKIT_FULL=1`` for more replicates.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.decentralized import (
    CHOCOSGD,
    DCDPSGD,
    DPSGD,
    DeepSqueeze,
    tune_consensus_step,
)
from convkit.algorithms.feedback import ErrorFeedbackSGD
from convkit.compression import QSGD, RandK, TopK
from convkit.simulate import DivergenceWarning
from convkit.topology import ring

FULL = os.environ.get("CONVKIT_FULL") == "1"
P = 8
TOPO = ring(P)


@pytest.fixture(scope="module")
def ls20():
    return ck.LeastSquares.gaussian(d=20, noise=0.5, seed=0)


def _final(res, config, metric="excess_risk", iterate="last"):
    return float(res.curve(config, metric, iterate)["mean"].to_numpy()[-1])


def _n_diverged(res, config):
    div = res.diverged
    return int((div["config"] == config).sum()) if len(div) else 0


def test_dcd_diverges_where_choco_and_deepsqueeze_converge(ls20):
    """gamma = 0.01, 1000 steps, R = 10 (30 with CONVKIT_FULL).

    DCD-PSGD with aggressive unbiased compressors (scaled rand-k, k/d = 0.1, omega = 9; QSGD
    with s = 1, omega = sqrt(20)) diverges in every replicate (measured: within 100 steps):
    on the ring, the mode of lambda_n = -1/3 grows by 1/9 + omega 16/9 > 1 per step.
    CHOCO-SGD (top-k, k/d = 0.1, gamma_c tuned by pure gossip) and DeepSqueeze (top-k,
    k/d = 0.1, eta = 0.05) converge: no replicate diverges and the final excess risk is below
    1% of the initial 0.71 (measured 0.0017 +- 0.0002, like D-PSGD's 0.0016). How close to
    D-PSGD they are is tested with paired ratios in
    ``test_choco_and_deepsqueeze_match_dpsgd_paired``.
    """
    R = 30 if FULL else 10
    gamma = ck.Constant(0.01)
    tuned = tune_consensus_step(TOPO, TopK(fraction=0.1), d=ls20.d)
    assert tuned.rate < 0.99
    algos = [
        DPSGD(TOPO, gamma, name="dpsgd"),
        DCDPSGD(TOPO, gamma, RandK(fraction=0.1, scaled=True), name="dcd-randk"),
        DCDPSGD(TOPO, gamma, QSGD(s=1), name="dcd-qsgd"),
        CHOCOSGD(TOPO, gamma, TopK(fraction=0.1), tuned.gamma_c, name="choco"),
        DeepSqueeze(TOPO, gamma, TopK(fraction=0.1), 0.05, name="deepsqueeze"),
    ]
    with pytest.warns(DivergenceWarning):
        res = ck.simulate(ls20, algos, steps=1000, replicates=R, seed=1, n_record=20)
    initial = float(ls20.errors(np.zeros(ls20.d))["excess_risk"])
    for name in ("dcd-randk", "dcd-qsgd"):
        assert _n_diverged(res, name) == R
        steps = res.diverged.loc[res.diverged["config"] == name, "step"]
        assert steps.max() <= 300
    for name in ("choco", "deepsqueeze", "dpsgd"):
        assert _n_diverged(res, name) == 0
        assert _final(res, name) < 0.01 * initial


def _paired_ratio(res, config, baseline, metric, iterate, after):
    """Ratio of means of the per-replicate time averages (record steps > ``after``) of
    ``config`` and ``baseline`` (same samples: common random numbers), and its delta-method
    standard error with the paired covariance, written here:
    ``se(a/b) = sqrt((var a - 2 r cov(a, b) + r^2 var b) / R) / mean b``."""
    per = []
    for name in (config, baseline):
        cv = res.values[name]
        sel = cv.steps > after
        v = cv.values[sel, cv.iterates.index(iterate), cv.metrics.index(metric), :]
        per.append(v.mean(axis=0))  # (R,)
    a, b = per
    n = a.size
    r = a.mean() / b.mean()
    c = np.cov(a, b, ddof=1)
    se = np.sqrt(max(c[0, 0] - 2 * r * c[0, 1] + r * r * c[1, 1], 0.0) / n) / b.mean()
    return float(r), float(se)


RATIO_MARGIN = 0.2  # allowed excess over D-PSGD's error (ratio - 1), see the docstring
RATIO_MAX_SE = 0.04


def test_choco_and_deepsqueeze_match_dpsgd_paired(ls20):
    """CHOCO-SGD and DeepSqueeze (settings of the test above) reach D-PSGD's error: the ratio
    of their excess risk (last iterate, time-averaged per replicate over the record steps of
    the second half, 1000 steps) to D-PSGD's, paired on common random numbers (one simulate
    call), is below 1 + RATIO_MARGIN = 1.2.

    Tolerance from standard errors: R = 40 (120 with CONVKIT_FULL); the paired delta-method SE
    of each ratio is required to be below RATIO_MAX_SE = 0.04 (measured at R = 40: ratio
    1.003 +- 0.004 for CHOCO, 1.079 +- 0.014 for DeepSqueeze). So the margin 0.2 is at least
    5 SE above 1 (8 SE above the measured DeepSqueeze ratio), and a 50 % regression (ratio 1.5)
    lies at least 0.3 / 0.04 = 7.5 SE above the threshold: it fails (checked when writing the
    test by multiplying CHOCO's and DeepSqueeze's step size by 1.5 and by 1.3: measured
    ratios 1.54 +- 0.016 and 1.32 +- 0.010, both fail; the former "< 2 x D-PSGD" passed both)."""
    R = 120 if FULL else 40
    gamma = ck.Constant(0.01)
    tuned = tune_consensus_step(TOPO, TopK(fraction=0.1), d=ls20.d)
    algos = [
        DPSGD(TOPO, gamma, name="dpsgd"),
        CHOCOSGD(TOPO, gamma, TopK(fraction=0.1), tuned.gamma_c, name="choco"),
        DeepSqueeze(TOPO, gamma, TopK(fraction=0.1), 0.05, name="deepsqueeze"),
    ]
    res = ck.simulate(ls20, algos, steps=1000, replicates=R, seed=1, n_record=20)
    for name in ("choco", "deepsqueeze", "dpsgd"):
        assert _n_diverged(res, name) == 0
    for name in ("choco", "deepsqueeze"):
        ratio, se = _paired_ratio(res, name, "dpsgd", "excess_risk", "last", after=500)
        assert se < RATIO_MAX_SE, (name, ratio, se)
        assert ratio < 1 + RATIO_MARGIN, (name, ratio, se)


def test_deepsqueeze_diverges_with_scaled_randk(ls20):
    """DeepSqueeze needs a contraction: with scaled rand-k (k/d = 0.1, unbiased, variance
    factor 9) it diverges in every replicate even at eta = 0.01 (measured: within 70 steps;
    asserted: within the 1000 steps), while unscaled rand-k at eta = 0.01 converges (final
    excess risk < 1% of the initial, measured 0.0018)."""
    R = 24 if FULL else 8
    gamma = ck.Constant(0.01)
    algos = [
        DeepSqueeze(TOPO, gamma, RandK(fraction=0.1, scaled=True), 0.01, name="scaled"),
        DeepSqueeze(TOPO, gamma, RandK(fraction=0.1), 0.01, name="plain"),
    ]
    with pytest.warns(DivergenceWarning):
        res = ck.simulate(ls20, algos, steps=1000, replicates=R, seed=2, n_record=10)
    initial = float(ls20.errors(np.zeros(ls20.d))["excess_risk"])
    assert _n_diverged(res, "scaled") == R
    assert _n_diverged(res, "plain") == 0
    assert _final(res, "plain") < 0.01 * initial


def _stable(problem, fractions, eta, R, steps):
    """For each k/d in ``fractions``: did DeepSqueeze (gamma = 0.01) stay stable at ``eta``?

    Unstable: some replicate diverged in the engine's sense (||x_bar - theta*||^2 above 1e4
    times max(||theta*||^2, 1), or not finite) or the final consensus distance exceeds 1e4
    (the stable runs measured here stay below 5). Both fractions run in one simulate call.
    """
    algos = [
        DeepSqueeze(TOPO, ck.Constant(0.01), TopK(fraction=f), eta, name=f"f={f}")
        for f in fractions
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        res = ck.simulate(
            problem,
            algos,
            steps=steps,
            replicates=R,
            seed=3,
            n_record=3,
            divergence_factor=1e4,
        )
    out = []
    for a in algos:
        cons = res.curve(a.label, "consensus", "state")["mean"].to_numpy()[-1]
        out.append(_n_diverged(res, a.label) == 0 and bool(cons < 1e4))
    return out


def test_largest_stable_eta_shrinks_with_k_over_d(ls20):
    """Bisection (on log eta, 6 halvings from [0.02, 1]) for the largest stable eta of
    DeepSqueeze with top-k at k/d = 0.1 and 0.05 (gamma = 0.01, 1000 steps, R = 6, 12 with
    CONVKIT_FULL; criterion in ``_stable``). Both are below 1 (the grid scan when writing the
    test: k/d = 0.1 stable at 0.5, unstable from 0.6; k/d = 0.05 stable at 0.3, unstable from
    0.4), and the threshold for k/d = 0.05 is below 0.85 times that for k/d = 0.1
    (measured: 0.54 and 0.31, ratio 0.58; the bisection's resolution is 50^(1/64), 6%)."""
    R = 12 if FULL else 6
    fr = (0.1, 0.05)
    lo, hi = np.full(2, np.log(0.02)), np.full(2, 0.0)
    assert all(_stable(ls20, fr, 0.02, R, 1000))
    assert not any(_stable(ls20, fr, 1.0, R, 1000))
    for _ in range(6):
        mids = 0.5 * (lo + hi)
        # one call per fraction's own midpoint (they differ after the first halving)
        for j in range(2):
            ok = _stable(ls20, fr[j : j + 1], float(np.exp(mids[j])), R, 1000)[0]
            if ok:
                lo[j] = mids[j]
            else:
                hi[j] = mids[j]
    eta_star = np.exp(lo)
    assert eta_star[0] < 1.0 and eta_star[1] < 1.0
    assert eta_star[1] < 0.85 * eta_star[0], eta_star


def test_memory_scaling_deepsqueeze_vs_error_feedback(ls20):
    """Error memory against gamma in {1e-3, 3e-3, 1e-2} (top-k, k/d = 0.1; start at theta* so
    that the model's size does not depend on gamma; 1000 steps, memory averaged over record
    points in the second half; R = 8, 24 with CONVKIT_FULL; common random numbers).

    EF-SGD compresses a step, p = gamma g + e, so E||e||^2 = O(gamma^2): the log-log slope is
    2 (measured 2.016 +- 0.005). DeepSqueeze compresses a model plus memory, so its memory is
    of the size of the model and does not shrink with gamma: slope 0 (measured 0.002 +- 0.004;
    memory about 16.6 against ||theta*||^2 = 1.42). Margins: |slope_EF - 2| < 0.1 and
    |slope_DS| < 0.1, each with a per-replicate standard error below 0.03 (so the margins are
    >= 3 SE; measured SE 0.005)."""
    R = 24 if FULL else 8
    n = 1000
    gammas = [1e-3, 3e-3, 1e-2]
    algos = []
    for g in gammas:
        algos.append(DeepSqueeze(TOPO, ck.Constant(g), TopK(fraction=0.1), 0.1, name=f"ds{g}"))
        algos.append(ErrorFeedbackSGD(P, ck.Constant(g), TopK(fraction=0.1), name=f"ef{g}"))
    res = ck.simulate(
        ls20,
        algos,
        steps=n,
        replicates=R,
        seed=4,
        theta0=ls20.theta_star,
        n_record=5,
        record=range(n // 2, n + 1, 50),
    )
    logg = np.log(gammas)
    for kind, target in (("ef", 2.0), ("ds", 0.0)):
        mem = []
        for g in gammas:
            cv = res.values[f"{kind}{g}"]
            sel = cv.steps >= n // 2
            m = cv.values[sel, cv.iterates.index("state"), cv.metrics.index("memory"), :]
            mem.append(m.mean(axis=0))  # time average per replicate, shape (R,)
        logm = np.log(np.array(mem))  # (3, R)
        slopes = np.polyfit(logg, logm, 1)[0]  # one slope per replicate
        slope, se = slopes.mean(), slopes.std(ddof=1) / np.sqrt(R)
        assert se < 0.03, (kind, se)
        assert abs(slope - target) < 0.1, (kind, slope, se)
