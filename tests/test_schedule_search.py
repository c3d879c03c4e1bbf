"""The best-schedule search: brute force on small exact cases, P = 1 identities, common random
numbers across schedules, the Monte Carlo power search."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import convkit as ck
from convkit.exact.local import stability_limit
from convkit.schedule_search import (
    best_power_mc,
    best_rounds_exact,
    brute_force_rounds,
    exact_pr_errors,
    paired_ratio,
)
from convkit.schedules import DriftClockRounds, GeometricRounds, PowerRounds, QuadraticRounds

FULL = os.environ.get("CONVKIT_FULL") == "1"

_LS = {
    "flat2": ck.LeastSquares.gaussian(2, "flat", 1.0, seed=0),
    "inv5": ck.LeastSquares.gaussian(5, "1/i", 1.0, seed=0),
}


def _cases():
    grid = itertools.product(
        ["flat2", "inv5"], [8, 10, 12], [2, 3, 4], [2, 8], [0.3, 0.9], ["const", "poly"], [0, 1]
    )
    cases = list(grid)
    if FULL:
        return cases
    return cases[::12]  # 24 of the 288 cases (the full set with CONVKIT_FULL=1)


@pytest.mark.slow
@pytest.mark.parametrize("name,n,N,P,frac,kind,far", _cases())
def test_search_finds_brute_force_optimum(name, n, N, P, frac, kind, far):
    prob = _LS[name]
    g = frac * stability_limit(prob)
    step = ck.Constant(g) if kind == "const" else ck.PolyDecay(g, 0.75)
    theta0 = 5.0 * np.ones(prob.d) if far else prob.theta_star
    pos, err = brute_force_rounds(prob, n, P, step, N, theta0=theta0)
    best = best_rounds_exact(prob, n, P, step, N, theta0=theta0)
    assert best.positions == pos
    assert best.error == pytest.approx(err, rel=1e-12)
    assert best.ratios["best"] == 1.0
    for k in ("even", "quadratic", "geometric", "power", "osa"):
        assert best.ratios[k] >= 1.0 - 1e-12  # nothing with N rounds beats the optimum


def test_brute_force_enumerates_all_sets():
    prob = _LS["flat2"]
    step = ck.Constant(0.5)
    sets = [(*c, 9) for c in itertools.combinations(range(1, 9), 2)]
    err = exact_pr_errors(prob, 9, 4, step, sets)
    pos, e = brute_force_rounds(prob, 9, 4, step, 3)
    assert e == err.min() and pos == sets[int(np.argmin(err))]
    with pytest.raises(ValueError, match="brute force over .* refused"):
        brute_force_rounds(prob, 60, 4, step, 6)


def test_exact_pr_errors_matches_expected_error():
    prob = _LS["inv5"]
    step = ck.PolyDecay(0.4, 0.75)
    theta0 = np.ones(5)
    scheds = [ck.Rounds(7), QuadraticRounds(7), GeometricRounds(7), (3, 10, 50)]
    mine = exact_pr_errors(prob, 120, 4, step, scheds, theta0=theta0)
    for s, m in zip(scheds, mine, strict=True):
        comm = s if not isinstance(s, tuple) else ck.At(s)
        res = ck.exact.expected_error(
            prob, ck.LocalSGD(4, step, comm=comm), steps=120, theta0=theta0
        )
        f = res.frame
        ref = f[(f.step == 120) & (f.iterate == "avg") & (f.metric == "hnorm2")]["mean"]
        assert m == pytest.approx(float(ref.iloc[0]), rel=1e-13)
    with pytest.raises(ValueError, match=r"round positions must be local steps in \[1, n = 120\]"):
        exact_pr_errors(prob, 120, 4, step, [(0, 5)])


def test_one_worker_every_schedule_identical_exact():
    prob = _LS["inv5"]
    step = ck.PolyDecay(0.6, 0.6)
    scheds = [
        ck.EveryStep(),
        ck.Final(),
        ck.Rounds(9),
        QuadraticRounds(9),
        GeometricRounds(9),
        DriftClockRounds(9, step, mu=0.2, L=1.0, dist0=2.0, noise=1.0),
        (5, 17),
    ]
    err = exact_pr_errors(prob, 300, 1, step, scheds, theta0=np.ones(5))
    assert np.all(err == err[0])


def test_one_worker_every_schedule_bit_identical_mc():
    prob = ck.LogisticRegression.gaussian(2, "flat", theta_star=np.ones(2) / np.sqrt(2))
    step = ck.PolyDecay(8.0, 0.75)
    algos = [
        ck.MBA(1, step, name="mba"),
        ck.OSA(1, step, name="osa"),
        ck.LocalSGD(1, step, comm=ck.Rounds(7), name="even"),
        ck.LocalSGD(1, step, comm=PowerRounds(7, 3.0), name="p3"),
        ck.LocalSGD(1, step, comm=GeometricRounds(7), name="geo"),
    ]
    res = ck.simulate(prob, algos, steps=200, replicates=16, seed=5, threads=1)
    ref = res.values["mba"].values
    for a in algos[1:]:
        np.testing.assert_array_equal(res.values[a.label].values, ref)


def test_common_random_numbers_within_one_call():
    prob = ck.LogisticRegression.gaussian(2, "flat", theta_star=np.ones(2) / np.sqrt(2))
    step = ck.PolyDecay(8.0, 0.75)
    n = 150
    algos = [
        ck.MBA(4, step, name="mba"),
        ck.LocalSGD(4, step, comm=ck.Rounds(n), name="rounds n"),
        ck.LocalSGD(4, step, comm=QuadraticRounds(6), name="quad a"),
        ck.LocalSGD(4, step, comm=QuadraticRounds(6), name="quad b"),
        ck.LocalSGD(4, step, comm=ck.Rounds(6), name="even"),
    ]
    res = ck.simulate(prob, algos, steps=n, replicates=16, seed=5, threads=1)
    v = {a.label: res.values[a.label].values for a in algos}
    np.testing.assert_array_equal(v["mba"], v["rounds n"])  # averaging every step, two ways
    np.testing.assert_array_equal(v["quad a"], v["quad b"])  # same schedule, same samples
    assert not np.array_equal(v["quad a"], v["even"])  # different schedules do differ


def test_paired_ratio():
    rng = np.random.default_rng(0)
    y = rng.exponential(size=400)
    x = 1.5 * y + 0.1 * rng.standard_normal(400)
    r, se = paired_ratio(x, y)
    assert r == x.mean() / y.mean()
    assert se == pytest.approx(np.std(x - r * y, ddof=1) / (20 * y.mean()), rel=1e-14)
    assert se < 0.01  # pairing removes the common fluctuation
    with pytest.raises(ValueError, match="paired samples of matching shapes"):
        paired_ratio(x, y[:-1])


def test_best_power_mc_is_paired_and_consistent():
    prob = ck.LogisticRegression.gaussian(2, "flat", theta_star=np.ones(2) / np.sqrt(2))
    step = ck.PolyDecay(8.0, 0.75)
    grid = [1.0, 2.0, 4.0]
    bp = best_power_mc(
        prob, 200, 4, step, 6, grid, replicates=64, seed=3, extra={"quadratic": QuadraticRounds(6)}
    )
    b = int(np.argmin(bp.err))
    assert bp.best_p == grid[b] and bp.ratio_to_best[b] == 1.0 and bp.ratio_to_best_se[b] == 0.0
    assert np.all(bp.ratio_to_best >= 1.0)
    # the extra schedule is the p = 2 candidate: identical samples, identical ratios
    j = grid.index(2.0)
    assert bp.extra["quadratic"][0] == pytest.approx(bp.ratio_to_best[j], rel=1e-14)
    assert bp.extra["quadratic"][2] == pytest.approx(bp.ratio_to_mba[j], rel=1e-14)
    # numbers equal a direct simulate call with the same algorithms and seed
    algos = (
        [ck.MBA(4, step, name="mba")]
        + [ck.LocalSGD(4, step, comm=PowerRounds(6, p), name=f"power p={p:.6g}") for p in grid]
        + [ck.LocalSGD(4, step, comm=QuadraticRounds(6), name="extra quadratic")]
    )
    res = ck.simulate(prob, algos, steps=200, replicates=64, seed=3, n_record=1, threads=1)
    x = res.values["power p=1"].values[-1, 0, 1, :]
    assert bp.err[0] == pytest.approx(x.mean(), rel=1e-14)
    assert bp.rounds.tolist() == [PowerRounds(6, p).rounds(200) for p in grid]
    with pytest.raises(ValueError, match="metric must be one of"):
        best_power_mc(prob, 200, 4, step, 6, grid, replicates=4, metric="risk")
