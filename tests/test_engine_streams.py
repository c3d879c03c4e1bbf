"""Replicate blocks are the unit of randomness: the same seed gives bit-identical values
whatever ``memory_limit`` (one chunk, several chunks of whole blocks, one block per chunk).

Every stream used inside the step loop (problem sampling, algorithm / compressor streams) is
keyed by ``(seed, block index)``; these tests compare ``Result.values`` with
``np.array_equal`` for the Local-SGD family on least squares (compiled kernel and generic
path), logistic regression, decentralized algorithms with a random compressor (rand-k) and a
finite-sum problem sampled without replacement (per-stream reshuffling state).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD, DCDPSGD
from convkit.compression import RandK
from convkit.topology import ring

sim = sys.modules["convkit.simulate"]

BLOCK = 256
SAMPLING = "reshuffle"
R = 2 * BLOCK + 100  # three blocks, the last one partial


def _per_rep(problem, algos) -> int:
    """The engine's per-replicate state estimate (bytes, float64), which sets the chunks."""
    return sim._state_bytes_per_replicate(problem, list(algos), "float64")


def _runs(problem, algos, steps=25, seed=5):
    """Results for 1 chunk, chunks of 2 blocks, and 1 block per chunk."""
    per = _per_rep(problem, algos)
    out = {}
    for name, limit, chunks in [
        ("one chunk", 1e12, 1),
        ("two blocks per chunk", 2 * BLOCK * per + 1, 2),
        ("one block per chunk", BLOCK * per + 1, 3),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ck.DivergenceWarning)
            res = ck.simulate(
                problem, algos, steps=steps, replicates=R, seed=seed, memory_limit=limit
            )
        assert res.meta["chunks"] == chunks, (name, res.meta["chunks"])
        out[name] = res
    return out


def _assert_identical(runs) -> None:
    ref = runs["one chunk"]
    for name, res in runs.items():
        for label, cv in ref.values.items():
            other = res.values[label]
            assert np.array_equal(cv.values, other.values, equal_nan=True), (name, label)
            assert np.array_equal(cv.diverged_at, other.diverged_at), (name, label)
        assert res.frame.equals(ref.frame), name


def _local_family():
    st = ck.PolyDecay(0.3, 0.75)
    return [
        ck.MBA(4, st),
        ck.LocalSGD(4, st, comm="every:3", name="local"),
        ck.OSA(2, st, batch=2),
    ]


def test_least_squares_compiled_kernel_identical_for_any_chunking():
    prob = ck.LeastSquares.gaussian(d=5, spectrum="1/i", seed=0)
    _assert_identical(_runs(prob, _local_family()))


def test_least_squares_generic_path_identical_for_any_chunking():
    # the generic path: the compiled kernels switched off (convkit.kernels)
    prob = ck.LeastSquares.rademacher(d=4, spectrum="flat", rotate=True, seed=1)
    with ck.kernels(enabled=False):
        _assert_identical(_runs(prob, _local_family()))


def test_logistic_identical_for_any_chunking():
    prob = ck.LogisticRegression.gaussian(d=3, eval_size=2048, seed=0)
    _assert_identical(_runs(prob, _local_family(), steps=15))


def test_decentralized_random_compressor_identical_for_any_chunking():
    prob = ck.LeastSquares.gaussian(d=6, spectrum="1/i", seed=2)
    topo = ring(4)
    st = ck.Constant(0.05)
    algos = [
        CHOCOSGD(topo, st, RandK(fraction=0.5), 0.4, name="choco"),
        DCDPSGD(topo, st, RandK(fraction=0.5, scaled=True), name="dcd"),
    ]
    _assert_identical(_runs(prob, algos, steps=20))


def test_finite_sum_without_replacement_identical_for_any_chunking():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((12, 3))
    y = A @ np.ones(3) + 0.3 * rng.standard_normal(12)
    prob = ck.FiniteLeastSquares(A, y, lam=0.1, sampling=SAMPLING)
    _assert_identical(_runs(prob, _local_family(), steps=20))


def test_common_random_numbers_kept_across_algorithms():
    """Two identical algorithms under different names see the same samples: equal values."""
    prob = ck.LeastSquares.gaussian(d=4, seed=0)
    st = ck.PolyDecay(0.3, 0.75)
    res = ck.simulate(
        prob,
        [ck.MBA(3, st, name="a"), ck.MBA(3, st, name="b")],
        steps=10,
        replicates=R,
        memory_limit=BLOCK * _per_rep(prob, [ck.MBA(3, st)] * 2) + 1,
    )
    assert res.meta["chunks"] == 3
    assert np.array_equal(res.values["a"].values, res.values["b"].values, equal_nan=True)


def test_block_streams_are_independent_of_other_blocks():
    """The first block's values do not depend on how many blocks follow (R = 256 vs 612)."""
    prob = ck.LeastSquares.gaussian(d=4, seed=0)
    algo = ck.MBA(2, ck.PolyDecay(0.3, 0.75))
    small = ck.simulate(prob, algo, steps=10, replicates=BLOCK, seed=3)
    big = ck.simulate(prob, algo, steps=10, replicates=R, seed=3)
    a = small.values[algo.label].values
    b = big.values[algo.label].values[..., :BLOCK]
    assert np.array_equal(a, b, equal_nan=True)
    assert sim.REPLICATE_BLOCK == BLOCK


def test_block_larger_than_memory_limit_warns_and_runs_one_block_per_chunk():
    prob = ck.LeastSquares.gaussian(d=4, seed=0)
    algo = ck.MBA(2, ck.PolyDecay(0.3, 0.75))
    with pytest.warns(UserWarning, match=r"memory_limit=1000.*one replicate block"):
        res = ck.simulate(prob, algo, steps=5, replicates=R, memory_limit=1000)
    assert res.meta["chunks"] == 3
    ref = ck.simulate(prob, algo, steps=5, replicates=R)
    assert np.array_equal(
        res.values[algo.label].values, ref.values[algo.label].values, equal_nan=True
    )


def test_array_api_strict_identical_for_any_chunking():
    """The concatenating path of BlockedStream (namespaces other than NumPy), and slicing of
    the state for the metrics, with the standard's reference namespace."""
    pytest.importorskip("array_api_strict")
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    algos = [ck.MBA(2, ck.PolyDecay(0.3, 0.75)), ck.OSA(2, ck.PolyDecay(0.3, 0.75), batch=2)]
    per = _per_rep(prob, algos)
    runs = {
        limit: ck.simulate(
            prob, algos, steps=6, replicates=R, memory_limit=limit, backend="array_api_strict"
        )
        for limit in (1e12, BLOCK * per + 1)
    }
    a, b = runs.values()
    assert (a.meta["chunks"], b.meta["chunks"]) == (1, 3)
    for label in a.values:
        assert np.array_equal(a.values[label].values, b.values[label].values, equal_nan=True)
    ref = ck.simulate(prob, algos, steps=6, replicates=R)  # NumPy: same numbers up to rounding
    for label in a.values:
        np.testing.assert_allclose(a.values[label].values, ref.values[label].values, rtol=1e-12)
