"""``simulate(..., threads=...)``: replicate blocks run on a thread pool, with bit-identical
numbers for any thread count and any ``memory_limit``.

Each memory chunk is split into parts of whole blocks run at once; a block's random numbers
depend on ``(seed, block index)`` only, so ``Result.values``, the divergence steps and the
frame are compared with ``np.array_equal`` / ``DataFrame.equals`` for threads = 1, 2, 3 and
three memory limits, on least squares (compiled kernel), logistic regression and a
decentralized algorithm with a random compressor; plus the argument's validation, the
progress bar and long-run warning from a threaded run, and errors raised inside a part.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD
from convkit.compression import RandK
from convkit.topology import ring

sim = sys.modules["convkit.simulate"]
par = sys.modules["convkit._parallel"]

BLOCK = sim.REPLICATE_BLOCK
R = 2 * BLOCK + 100  # three blocks, the last one partial


def _runs(problem, algos, steps):
    per = sim._state_bytes_per_replicate(problem, list(algos), "float64")
    out = {}
    for limit, chunks in [(1e12, 1), (2 * BLOCK * per + 1, 2), (BLOCK * per + 1, 3)]:
        for threads in (1, 2, 3):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ck.DivergenceWarning)
                res = ck.simulate(
                    problem,
                    algos,
                    steps=steps,
                    replicates=R,
                    seed=7,
                    memory_limit=limit,
                    threads=threads,
                )
            assert res.meta["chunks"] == chunks
            out[(limit, threads)] = res
    return out


def _assert_identical(runs) -> None:
    ref = runs[next(iter(runs))]
    assert ref.meta["parallel"]["threads"] == 1
    assert any(r.meta["parallel"]["threads"] > 1 for r in runs.values())
    for key, res in runs.items():
        for label, cv in ref.values.items():
            other = res.values[label]
            assert np.array_equal(cv.values, other.values, equal_nan=True), (key, label)
            assert np.array_equal(cv.diverged_at, other.diverged_at), (key, label)
        assert res.frame.equals(ref.frame), key


def test_least_squares_identical_for_any_threads_and_memory_limit():
    prob = ck.LeastSquares.gaussian(d=5, spectrum="1/i", seed=0)
    st = ck.PolyDecay(0.3, 0.75)
    algos = [
        ck.MBA(4, st),
        ck.LocalSGD(4, st, comm="every:3", name="local"),
        ck.OSA(2, st, batch=2),
        ck.MBA(2, ck.Constant(3.0), name="diverging"),  # diverges at replicate-dependent steps
    ]
    runs = _runs(prob, algos, steps=25)
    _assert_identical(runs)
    div = runs[(1e12, 1)].values["diverging"].diverged_at
    assert np.count_nonzero(div) > 0 and np.unique(div[div > 0]).size > 1


def test_logistic_identical_for_any_threads_and_memory_limit():
    prob = ck.LogisticRegression.gaussian(d=3, eval_size=512, seed=0)
    st = ck.PolyDecay(0.3, 0.75)
    algos = [ck.MBA(4, st), ck.LocalSGD(4, st, comm=ck.Rounds(3), name="local")]
    _assert_identical(_runs(prob, algos, steps=12))


def test_decentralized_random_compressor_identical_for_any_threads_and_memory_limit():
    prob = ck.LeastSquares.gaussian(d=6, spectrum="1/i", seed=2)
    algo = CHOCOSGD(ring(4), ck.Constant(0.05), RandK(fraction=0.5), 0.4, name="choco")
    _assert_identical(_runs(prob, [algo], steps=15))


def test_parts_and_meta():
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    algo = ck.MBA(2, ck.PolyDecay(0.3, 0.75))
    res = ck.simulate(prob, algo, steps=3, replicates=5 * BLOCK, threads=2)
    assert res.meta["parallel"] == {"threads": 2, "parts": 2, "dask": None}
    assert res.meta["chunks"] == 1
    # one block: nothing to split, serial whatever threads says
    one = ck.simulate(prob, algo, steps=3, replicates=BLOCK, threads=4)
    assert one.meta["parallel"]["threads"] == 1
    assert par.split_blocks(0, 5, 2) == [(0, 3), (3, 5)]
    assert par.split_blocks(4, 6, 8) == [(4, 5), (5, 6)]


def test_default_threads_is_the_affinity_mask_or_convkit_threads(monkeypatch):
    monkeypatch.delenv("CONVKIT_THREADS", raising=False)
    assert par.resolve_threads(None) == par.available_cores()
    assert par.resolve_threads(3) == 3
    monkeypatch.setenv("CONVKIT_THREADS", "3")
    assert par.resolve_threads(None) == 3 and par.resolve_threads(2) == 2
    prob = ck.LeastSquares.gaussian(d=2, seed=0)
    algo = ck.MBA(2, ck.PolyDecay(0.3, 0.75))
    res = ck.simulate(prob, algo, steps=3, replicates=5 * BLOCK)
    assert res.meta["parallel"]["threads"] == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("CONVKIT_THREADS", bad)
        with pytest.raises(ValueError, match=rf"CONVKIT_THREADS must be an integer >= 1.*'{bad}'"):
            ck.simulate(prob, algo, steps=3, replicates=5)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_threads_is_validated(bad):
    with pytest.raises(ValueError, match=r"threads must be an integer >= 1 .*None"):
        ck.simulate(
            ck.LeastSquares.gaussian(d=2),
            ck.MBA(2, ck.Constant(0.1)),
            steps=2,
            replicates=3,
            threads=bad,
        )


def test_threaded_run_warns_and_shows_progress(monkeypatch, capsys):
    monkeypatch.setattr(sim, "LONG_RUN_SECONDS", 0.0)
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    with pytest.warns(UserWarning, match=r"simulate: estimated .* s") as rec:
        res = ck.simulate(
            prob, ck.MBA(2, ck.PolyDecay(0.3, 0.75)), steps=30, replicates=3 * BLOCK, threads=2
        )
    assert res.meta["parallel"]["threads"] == 2
    assert res.meta["timing"]["estimated_seconds"] >= 0
    assert rec[0].filename == __file__  # points at the caller
    err = capsys.readouterr().err
    assert "simulate" in err and "rep-step" in err


def test_progress_bar_counts_every_replicate_step(capsys):
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    ck.simulate(
        prob, ck.MBA(2, ck.Constant(0.1)), steps=10, replicates=3 * BLOCK, threads=2, progress=True
    )
    err = capsys.readouterr().err
    assert "7.68k/7.68k" in err  # 10 steps x 768 replicates


def test_error_in_a_part_is_raised_and_stops_the_others(monkeypatch):
    prob = ck.LeastSquares.gaussian(d=3, rotate=True, seed=0)  # the step-by-step engine
    calls = {"n": 0}
    original = type(prob).sample

    def failing(self, stream, shape):
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("boom in a part")
        return original(self, stream, shape)

    monkeypatch.setattr(type(prob), "sample", failing)
    with pytest.raises(RuntimeError, match="boom in a part"):
        ck.simulate(prob, ck.MBA(2, ck.Constant(0.1)), steps=1000, replicates=3 * BLOCK, threads=2)
    assert calls["n"] < 1000  # the other part stopped early


def test_lazily_compiled_kernels_are_built_before_the_threads_start(monkeypatch):
    """The finite-sum kernels are compiled on first use; a thread that took the generic path
    while another compiled would round differently. Compilation is behind a lock, and the
    engine's warm-up step in the calling thread builds lazy kernels before the threads start:
    a run compiling its kernels on threads equals the serial one."""
    from convkit import _kernel_switch
    from convkit.problems import _finite_sum_kernels

    monkeypatch.delitem(
        _kernel_switch._BUILT, _finite_sum_kernels.FINITE_SUM_KERNELS, raising=False
    )
    rng = np.random.default_rng(0)
    A = rng.standard_normal((12, 3))
    prob = ck.FiniteLeastSquares(A, A @ np.ones(3), lam=0.1, sampling="reshuffle")
    algo = ck.MBA(4, ck.PolyDecay(0.3, 0.75))
    two = ck.simulate(prob, algo, steps=20, replicates=R, seed=5, threads=2)
    one = ck.simulate(prob, algo, steps=20, replicates=R, seed=5, threads=1)
    a, b = two.values[algo.label].values, one.values[algo.label].values
    assert np.array_equal(a, b, equal_nan=True)
