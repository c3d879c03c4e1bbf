"""Nonsense inputs get a clear error, never a plausible answer: an unstable step in the
best-schedule search, an unstable or unrepresentable DriftClockRounds, a huge weight shift,
fractional record steps."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.recording import WeightedSums, record_steps
from convkit.schedule_search import best_rounds_exact, brute_force_rounds
from convkit.schedules import Constant, DriftClockRounds, PolyDecay

LS = ck.LeastSquares.gaussian(2, "flat", 1.0, seed=0)


# ------------------------------------------------------------------ best_rounds_exact
def test_best_rounds_exact_refuses_when_every_candidate_diverges():
    # gamma = 1.5 is three times the one-worker stability limit 2 / (d + 2) = 0.5 (d = 2):
    # every schedule's exact error is inf, so no position set is "best"
    with pytest.raises(ValueError, match=r"diverged.*step.*stability limit"):
        best_rounds_exact(LS, 40, 2, Constant(1.5), 4, max_evals=50, golden_iters=2)


def test_brute_force_rounds_refuses_when_every_set_diverges():
    # gamma = 3, six times the limit: every set's error passes the divergence threshold
    # within n = 10 steps (argmin over all-inf errors used to return the first set)
    with pytest.raises(ValueError, match=r"diverged.*step"):
        brute_force_rounds(LS, 10, 2, Constant(3.0), 3)


def test_best_rounds_exact_still_answers_for_a_stable_step():
    best = best_rounds_exact(LS, 40, 2, Constant(0.2), 4, max_evals=50, golden_iters=2)
    assert np.isfinite(best.error) and best.positions[-1] == 40 and len(best.positions) == 4


# ------------------------------------------------------------------ DriftClockRounds
def test_drift_clock_rounds_refuses_an_unstable_mean_recursion():
    # gamma L = 0.5 * 5 = 2.5 > 2: the averaged iterate diverges, and the rule used to
    # crowd its budget of 10 rounds into the last few steps
    sched = DriftClockRounds(10, Constant(0.5), mu=0.1, L=5.0, dist0=1.0, noise=1.0)
    with pytest.raises(ValueError, match=r"gamma_1 L = 2\.5.*allowed.*<= 2"):
        sched.steps(100)
    # a decreasing step whose first steps are too large is refused as well, naming the step
    sched = DriftClockRounds(10, PolyDecay(1.0, 0.5), mu=0.1, L=5.0, dist0=1.0, noise=1.0)
    with pytest.raises(ValueError, match=r"gamma_1 L = 5"):
        sched.steps(100)


def test_drift_clock_rounds_accepts_gamma_l_equal_to_two():
    # C L = 2 exactly (the large-step cells of the schedule study): |1 - gamma L| = 1, stable
    L = 3.7
    pos = DriftClockRounds(10, PolyDecay(2.0 / L, 0.75), mu=0.5, L=L, dist0=1.0, noise=1.0)
    assert pos.rounds(1000) >= 9


def test_drift_clock_rounds_refuses_unrepresentable_constants_up_front():
    # L**2 overflowed float64 inside the clock (OverflowError); now the constructor says why
    with pytest.raises(ValueError, match=r"L.*1e\+300.*L\*\*2.*float64.*<= 1\.3"):
        DriftClockRounds(10, Constant(1e-301), mu=1e-300, L=1e300, dist0=1.0, noise=1.0)


def test_drift_clock_rounds_refuses_a_clock_that_overflows():
    # L dist0 = 1e300: L^2 e^2 is not representable
    sched = DriftClockRounds(10, Constant(1e-160), mu=1e-150, L=1e150, dist0=1e150, noise=1.0)
    with pytest.raises(ValueError, match=r"clock.*not finite.*dist0"):
        sched.steps(100)


# ------------------------------------------------------------------ weight_shift
@pytest.mark.parametrize("tau", [1e160, 1e300])
def test_weighted_sums_stay_finite_for_huge_shifts(tau):
    # weights (j + tau)^2 overflowed to inf, and wavg2 became inf/inf = NaN; with tau so large
    # that j + tau == tau in float64 every weight is equal: both averages are the plain mean
    rng = np.random.default_rng(0)
    ms = rng.standard_normal((20, 3, 2))
    ws = WeightedSums(np, (3, 2), tau)
    for j, m in enumerate(ms, start=1):
        ws.add(m, j)
    for p in (1, 2):
        np.testing.assert_allclose(ws.average(p), ms.mean(axis=0), rtol=1e-14, atol=1e-15)


def test_weighted_sums_unchanged_bit_for_bit_for_ordinary_shifts():
    # the rescaling is by a power of two: values equal the unscaled formula exactly
    rng = np.random.default_rng(2)
    ms = rng.standard_normal((30, 4))
    for tau in (0.0, 1.5, 7.0, 3.3e4, 1e100):
        ws = WeightedSums(np, (4,), tau)
        s1, s2, w1, w2 = np.zeros(4), np.zeros(4), 0.0, 0.0
        for j, m in enumerate(ms, start=1):
            ws.add(m, j)
            w = j + tau
            s1 += w * m
            s2 += (w * w) * m
            w1 += w
            w2 += w * w
        assert np.array_equal(ws.average(1), s1 / w1)
        assert np.array_equal(ws.average(2), s2 / w2)


def test_simulate_keeps_wavg2_for_a_huge_shift():
    prob = ck.LeastSquares.gaussian(2, "flat", 0.1, seed=0)
    res = ck.simulate(
        prob,
        ck.MBA(2, ck.Constant(0.1)),
        steps=20,
        replicates=3,
        seed=1,
        weight_shift=1e200,
        threads=1,
    )
    f = res.frame
    w2 = f[(f.iterate == "wavg2") & (f.step == 20)]
    avg = f[(f.iterate == "avg") & (f.step == 20)]
    assert len(w2) and np.all(np.isfinite(w2["mean"]))
    # equal weights: the weighted average is the plain average
    np.testing.assert_allclose(w2["mean"].to_numpy(), avg["mean"].to_numpy(), rtol=1e-12)


# ------------------------------------------------------------------ record
@pytest.mark.parametrize("bad", [[1.5], [2, 3.25], [float("nan")], [float("inf")]])
def test_fractional_record_steps_refused(bad):
    with pytest.raises(ValueError, match=r"record.*integer"):
        record_steps(10, 5, bad)


def test_record_steps_refuse_non_numbers():
    with pytest.raises(TypeError, match=r"record.*integer"):
        record_steps(10, 5, ["3"])
    with pytest.raises(TypeError, match=r"record.*integer"):
        record_steps(10, 5, [True])


def test_integral_record_steps_still_accepted():
    assert 7 in record_steps(10, 3, [7.0])
    assert 4 in record_steps(10, 3, np.array([4], dtype=np.int32))


def test_simulate_refuses_fractional_record_before_running():
    prob = ck.LeastSquares.gaussian(2, "flat", 0.1, seed=0)
    with pytest.raises(ValueError, match=r"record.*1\.5"):
        ck.simulate(prob, ck.MBA(2, ck.Constant(0.1)), steps=20, replicates=2, record=[1.5])


@pytest.mark.parametrize("dist0", [1e155, 1e160, 1e200])
def test_drift_clock_rounds_refuses_a_distance_whose_clock_overflows(dist0):
    # L dist0 beyond ~1.34e154: e_1^2 overflows float64; the clock used to cap it at e^700, so
    # that every early step had the same (capped) drift and the positions were those of
    # dist0 = 0, silently; the docstring promises a ValueError
    sched = DriftClockRounds(8, Constant(0.1), mu=0.5, L=1.0, dist0=dist0, noise=1.0)
    with pytest.raises(ValueError, match=r"clock.*not finite.*dist0 = 1e\+"):
        sched.steps(100)


def test_drift_clock_rounds_positions_follow_the_distance_up_to_the_float_limit():
    # dist0 = 1e153 is representable (L^2 dist0^2 = 1e306): the rule's positions are the
    # early-dense ones of a large distance, as at dist0 = 1e100, not the cap's compromise
    near = DriftClockRounds(8, Constant(0.1), mu=0.5, L=1.0, dist0=1e153, noise=1.0).steps(100)
    far = DriftClockRounds(8, Constant(0.1), mu=0.5, L=1.0, dist0=1e100, noise=1.0).steps(100)
    assert near.tolist() == far.tolist()


@pytest.mark.parametrize("algo", ["LocalSGD", "SCAFFOLD"])
def test_a_drift_clock_on_another_step_than_the_algorithms_is_refused(algo):
    # the clock's positions come from its own step sizes: a run on another step would use
    # positions computed for a different run
    import convkit as ck

    rule = DriftClockRounds(8, Constant(0.1), mu=0.5, L=1.0, dist0=1.0, noise=1.0)
    with pytest.raises(ValueError, match=r"comm: DriftClockRounds.*step.*0\.1.*0\.2"):
        getattr(ck, algo)(4, Constant(0.2), comm=rule)
    getattr(ck, algo)(4, Constant(0.1), comm=rule)  # the same step: accepted
