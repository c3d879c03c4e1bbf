"""simulate / expected_error with a budget T that P b does not divide (gradients_remainder)."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.exact import expected_error
from convkit.simulate import GRADIENTS_REMAINDER, budget_local_steps


@pytest.fixture(scope="module")
def prob():
    return ck.LeastSquares.gaussian(2, "flat", 1.0, seed=0)


def _algos():
    return [
        ck.MBA(3, ck.Constant(0.05)),
        ck.LocalSGD(4, ck.Constant(0.05), comm=ck.Rounds(5), batch=2),
        ck.OSA(7, ck.Constant(0.05)),
    ]


@pytest.mark.parametrize("T,P,b,n", [(1001, 3, 1, 333), (1000, 4, 1, 250), (999, 4, 2, 124)])
def test_budget_local_steps_floor(T, P, b, n):
    assert budget_local_steps(T, P, b, "floor") == n == T // (P * b)


def test_budget_local_steps_error_mode_and_messages():
    assert budget_local_steps(1000, 4, 1) == 250
    with pytest.raises(ValueError, match=r"gradients must be a multiple of workers \* batch = 3"):
        budget_local_steps(1001, 3, 1)
    with pytest.raises(ValueError, match=r"gradients_remainder must be one of .*'round'"):
        budget_local_steps(1001, 3, 1, "round")
    with pytest.raises(ValueError, match=r"gradients must be >= workers \* batch = 8.*got 7"):
        budget_local_steps(7, 4, 2, "floor")
    assert GRADIENTS_REMAINDER == ("error", "floor")


def test_simulate_floor_runs_floor_steps_and_records_actual_T(prob):
    res = ck.simulate(
        prob, _algos(), gradients=1001, gradients_remainder="floor", replicates=8, threads=1
    )
    expect_n = {"MBA(P=3, b=1)": 333, "LocalSGD(P=4, b=2, rounds(N=5))": 125, "OSA(P=7, b=1)": 143}
    for label, n in expect_n.items():
        meta = res.meta["algorithms"][label]
        P, b = meta["workers"], meta["batch"]
        assert meta["local_steps"] == n
        assert meta["gradients"] == n * P * b <= 1001
        rows = res.frame[res.frame["config"] == label]
        assert rows["step"].max() == n
        assert rows["gradients"].max() == n * P * b
    assert res.meta["gradients"] == {"requested": 1001, "remainder": "floor"}


def test_simulate_floor_equals_steps_run(prob):
    """floor(T / (P b)) local steps give bit-identical values to steps=n for one algorithm."""
    a = ck.LocalSGD(4, ck.Constant(0.05), comm=ck.Rounds(5))
    r1 = ck.simulate(prob, a, gradients=1003, gradients_remainder="floor", replicates=8, seed=2)
    r2 = ck.simulate(prob, a, steps=250, replicates=8, seed=2)
    np.testing.assert_array_equal(r1.values[a.label].values, r2.values[a.label].values)


def test_simulate_default_still_refuses(prob):
    with pytest.raises(ValueError, match="multiple of workers"):
        ck.simulate(prob, _algos(), gradients=1001, replicates=2)
    with pytest.raises(ValueError, match="gradients_remainder must be one of"):
        ck.simulate(prob, _algos(), gradients=1001, gradients_remainder="ceil", replicates=2)


def test_expected_error_floor(prob):
    algos = _algos()
    res = expected_error(prob, algos, gradients=1001, gradients_remainder="floor")
    ref = expected_error(prob, algos[:1], steps=333)
    assert res.meta["algorithms"]["MBA(P=3, b=1)"]["gradients"] == 999
    assert res.meta["algorithms"]["OSA(P=7, b=1)"]["local_steps"] == 143
    a = res.frame[(res.frame["config"] == "MBA(P=3, b=1)")].set_index(["step", "iterate", "metric"])
    b = ref.frame.set_index(["step", "iterate", "metric"])
    common = a.index.intersection(b.index)
    assert len(common) > 10
    np.testing.assert_array_equal(a.loc[common, "mean"], b.loc[common, "mean"])
    with pytest.raises(ValueError, match="multiple of workers"):
        expected_error(prob, algos, gradients=1001)
