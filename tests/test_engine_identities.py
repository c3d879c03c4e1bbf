"""Exact identities of the Local-SGD family on the Monte Carlo engine.

Each test runs configurations that the mathematics says coincide, on the same samples
(common random numbers), and asserts equality to rounding error.
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from benchmarks.naive_local import naive_local_sgd
from convkit.problems.base import METRICS

STEP = ck.PolyDecay(C=0.3, alpha=0.75)


def _vals(res, config, iterate, metric):
    cv = res.values[config]
    return cv.values[:, cv.iterates.index(iterate), cv.metrics.index(metric), :]


@pytest.fixture(scope="module")
def ls5():
    return ck.LeastSquares.gaussian(d=5, spectrum="1/i", noise=0.7, seed=3)


def test_local_sgd_with_H_1_is_mba(ls5):
    """Local-SGD communicating every H = 1 steps is mini-batch averaging, sample by sample."""
    algos = [ck.LocalSGD(4, STEP, comm=ck.Every(1), name="H=1"), ck.MBA(4, STEP, name="MBA")]
    res = ck.simulate(ls5, algos, steps=300, replicates=20, seed=1)
    for it in ("avg", "tail", "last"):
        a, b = _vals(res, "H=1", it, "hnorm2"), _vals(res, "MBA", it, "hnorm2")
        np.testing.assert_array_equal(a, b)


def test_mba_P_workers_batch_b_equals_one_worker_batch_Pb(ls5):
    """MBA with P workers of batch b is one worker with batch P b on the same samples.

    The engine draws the (R, P, b, d) block in C order, so a (R, 1, P b, d) draw from the same
    stream holds the same numbers; the two differ only by the order of floating-point sums.
    """
    mba = ck.simulate(ls5, ck.MBA(4, STEP, batch=3, name="a"), steps=200, replicates=10, seed=5)
    one = ck.simulate(ls5, ck.MBA(1, STEP, batch=12, name="b"), steps=200, replicates=10, seed=5)
    for it in ("avg", "last"):
        np.testing.assert_allclose(
            _vals(mba, "a", it, "dist2"), _vals(one, "b", it, "dist2"), rtol=1e-11, atol=0
        )


@pytest.mark.parametrize("comm", ["every:1", "every:5", "rounds:3", "osa"])
@pytest.mark.parametrize("batch", [1, 2])
def test_engine_equals_per_worker_loop(ls5, comm, batch):
    """The vectorized engine reproduces the per-replicate, per-worker loop exactly
    (same samples): Polyak-Ruppert average and last iterate at every record point."""
    algo = ck.LocalSGD(3, STEP, comm=comm, batch=batch)
    n, R = 60, 4
    res = ck.simulate(ls5, algo, steps=n, replicates=R, seed=11)
    algo.prepare(n)
    steps, avg, last = naive_local_sgd(
        ls5, 3, STEP.values(n), algo.comm.mask(n), batch=batch, replicates=R, seed=11
    )
    np.testing.assert_array_equal(steps, res.values[algo.label].steps)
    for it, ref in (("avg", avg), ("last", last)):
        for metric in METRICS:
            expected = ls5.errors(ref)[metric]
            np.testing.assert_allclose(
                _vals(res, algo.label, it, metric), expected, rtol=1e-11, atol=1e-15
            )


def test_osa_is_independent_runs_averaged_at_the_end(ls5):
    """One-shot averaging: the final worker mean equals the mean of P independent SGD runs.

    Worker i of the OSA run sees the samples [:, i]; running P = 1 SGD on those same samples
    (the per-worker loop with no communication but the last) gives the same final average.
    """
    n, R, P = 80, 3, 4
    algo = ck.OSA(P, STEP)
    res = ck.simulate(ls5, algo, steps=n, replicates=R, seed=2)
    mask = np.zeros(n, dtype=bool)  # never communicate ...
    _, _, last = naive_local_sgd(ls5, P, STEP.values(n), mask, replicates=R, seed=2)
    # ... the last worker mean is the average of the independent runs
    np.testing.assert_allclose(
        _vals(res, algo.label, "last", "dist2")[-1], ls5.errors(last[-1])["dist2"], rtol=1e-11
    )


@pytest.mark.parametrize("design", ["additive"])
def test_additive_noise_gives_identical_mean_iterates_for_every_schedule(design):
    """Additive noise (gradient H eta - xi): the worker mean follows
    m' = m - gamma (H (m - theta*) - mean_i xi_i) whatever the schedule, so MBA, Local-SGD and
    OSA have identical mean trajectories under common random numbers (derived in
    convkit.bounds); they agree here to rounding error."""
    prob = ck.LeastSquares.additive(d=4, spectrum="1/i", noise=1.0, seed=0)
    algos = [
        ck.MBA(8, STEP, name="MBA"),
        ck.LocalSGD(8, STEP, comm="every:7", name="H=7"),
        ck.OSA(8, STEP, name="OSA"),
    ]
    res = ck.simulate(prob, algos, steps=400, replicates=16, seed=4)
    ref = _vals(res, "MBA", "avg", "hnorm2")
    for name in ("H=7", "OSA"):
        for it in ("avg", "last"):
            np.testing.assert_allclose(
                _vals(res, name, it, "hnorm2"), _vals(res, "MBA", it, "hnorm2"), rtol=1e-10
            )
    assert np.all(ref > 0)


def test_p1_is_plain_averaged_sgd(ls5):
    """P = 1: every schedule is plain SGD with Polyak-Ruppert averaging (hand loop below)."""
    n, R = 50, 3
    res = ck.simulate(ls5, ck.OSA(1, STEP, name="sgd"), steps=n, replicates=R, seed=8)
    stream = ck.Backend().stream(8, "samples", 0)
    theta = np.zeros((R, ls5.d))
    total = np.zeros_like(theta)
    gam = STEP.values(n)
    for k in range(1, n + 1):
        b = ls5.sample(stream, (R, 1, 1))
        x, eps = b.x[:, 0, 0], b.eps[:, 0, 0]
        r = np.einsum("ij,ij->i", x, theta - ls5.theta_star) - ls5.noise * eps
        theta = theta - gam[k - 1] * x * r[:, None]
        total += theta
    np.testing.assert_allclose(
        _vals(res, "sgd", "avg", "dist2")[-1], ls5.errors(total / n)["dist2"], rtol=1e-11
    )
    np.testing.assert_allclose(
        _vals(res, "sgd", "last", "dist2")[-1], ls5.errors(theta)["dist2"], rtol=1e-11
    )


def test_fused_kernel_matches_generic_path(ls5):
    """The numba-fused SGD update and the generic array-API update agree to rounding."""
    from convkit import _kernels

    if not _kernels.numba_available():
        pytest.skip("numba not installed: only the generic path exists")
    algo = ck.LocalSGD(4, STEP, comm="every:3", batch=2, name="x")
    fused = ck.simulate(ls5, algo, steps=100, replicates=8, seed=3)
    with ck.kernels(enabled=False):
        generic = ck.simulate(ls5, algo, steps=100, replicates=8, seed=3)
    np.testing.assert_allclose(
        _vals(fused, "x", "avg", "dist2"), _vals(generic, "x", "avg", "dist2"), rtol=1e-11
    )
