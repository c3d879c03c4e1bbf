"""Step-size and communication schedules."""

from __future__ import annotations

import math

import numpy as np
import pytest

import convkit as ck


def test_poly_decay_values():
    s = ck.PolyDecay(C=2.0, alpha=0.5, k0=3)
    np.testing.assert_allclose(s.values(3), [2 / 2, 2 / math.sqrt(5), 2 / math.sqrt(6)])
    assert s(1) == pytest.approx(1.0)


@pytest.mark.parametrize("n,N", [(10, 3), (100, 7), (1000, 1000), (17, 1), (1234, 55)])
def test_rounds_are_evenly_spaced_ceilings(n, N):
    steps = ck.Rounds(N).steps(n)
    assert steps.size == N == ck.Rounds(N).rounds(n)
    np.testing.assert_array_equal(steps, [math.ceil(j * n / N) for j in range(1, N + 1)])


def test_mba_osa_every():
    assert ck.EveryStep().rounds(50) == 50
    np.testing.assert_array_equal(ck.Final().steps(50), [50])
    np.testing.assert_array_equal(ck.Every(20).steps(50), [20, 40, 50])
    np.testing.assert_array_equal(ck.Every(10).steps(50), [10, 20, 30, 40, 50])
    np.testing.assert_array_equal(ck.At((5, 7)).steps(50), [5, 7, 50])


def test_growing_gaps():
    geo = ck.Geometric(first=1, ratio=2).steps(100)
    np.testing.assert_array_equal(geo, [1, 3, 7, 15, 31, 63, 100])
    gaps = np.diff(ck.Polynomial(power=2).steps(400))
    assert np.all(np.diff(gaps[:-1]) >= 0)  # gaps grow
    np.testing.assert_array_equal(ck.Polynomial(power=2).steps(30), [1, 4, 9, 16, 25, 30])


def test_comm_counts_of_local_sgd():
    algo = ck.LocalSGD(4, ck.Constant(0.1), comm=ck.Every(3))
    c = algo.comm_counts(7, d=10)
    np.testing.assert_array_equal(c["rounds"], [0, 0, 1, 1, 1, 2, 3])
    np.testing.assert_array_equal(c["messages"], 4 * c["rounds"])
    np.testing.assert_array_equal(c["bits"], c["messages"] * 10 * 32)


def test_frame_axes():
    prob = ck.LeastSquares.gaussian(d=2, seed=0)
    res = ck.simulate(
        prob,
        ck.LocalSGD(4, ck.Constant(0.1), comm="every:5", batch=2),
        steps=20,
        replicates=3,
        record=[7],
    )
    f = res.frame
    row = f[(f.step == 7)].iloc[0]
    assert row["gradients"] == 7 * 4 * 2
    assert row["rounds"] == 1
    assert set(f.iterate) == {"avg", "tail", "last"}
    assert f[f.iterate == "tail"].step.min() == 11  # tail averaging starts after n/2 steps
