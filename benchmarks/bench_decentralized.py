"""Vectorized CHOCO-SGD and DeepSqueeze against per-worker Python loops.

``choco_topk_vs_loop`` and ``deepsqueeze_topk_vs_loop``: time of the reference per-worker
loop implementations (:mod:`benchmarks.naive_decentralized`, research-code style: one run at
a time, a loop over workers for gradients and top-k, one ``W @ X`` for mixing, run once per
replicate) divided by the time of the vectorized convkit algorithms stepping the whole
``(R, P, d)`` block, for top-k with ``k = d / 10`` on a ring (uniform weights 1/3),
``d = 100``, ``P = 64``, ``R = 16``, least squares with Gaussian design and batch 1.

Both sides consume the same pre-drawn batches (sampling is the engine's job and is not
timed on either side) and run the same number of steps; the timings are interleaved and
the best of several repeats is kept. The vectorized side is the path of
:func:`convkit.simulate`: ``algo.init`` and ``algo.step`` with a
:class:`~convkit.problems.base.GradientOracle` per step (with top-k on NumPy float blocks,
the fused compiled updates of :mod:`convkit._kernels`: on this sparse ring, one pass for the
scores, the compiled exact selection of every row's threshold, and one pass per replicate
that applies top-k, updates the copies / error memory and mixes with ``W_gc`` / ``W_eta``
through the CSR arrays of :meth:`~convkit.topology.Topology.sparse_block_csr`, rounding as
SciPy's product); each algorithm is built once, so that
its mixing plans are warm after the warm-up run, as in a long simulation (building them costs
a few milliseconds once per instance, which 20 timed steps would otherwise count as per-step
cost). Their trajectories agree to rounding error (checked
here on the last state, and in ``tests/test_decentralized.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

if __package__ in (None, ""):  # allow `python benchmarks/bench_decentralized.py`
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.naive_decentralized import (
        LoopCHOCO,
        LoopDeepSqueeze,
        least_squares_grad,
        topk_vector,
    )
else:
    from .naive_decentralized import LoopCHOCO, LoopDeepSqueeze, least_squares_grad, topk_vector

from convkit import Constant, LeastSquares
from convkit.algorithms.decentralized import CHOCOSGD, DeepSqueeze
from convkit.backend import Backend, tune_allocator
from convkit.compression import TopK
from convkit.problems.base import GradientOracle
from convkit.topology import ring

R, P, D = 16, 64, 100
K = D // 10
GAMMA, GAMMA_C, ETA = 0.01, 0.2, 0.2


def _setup(steps: int):
    problem = LeastSquares.gaussian(D, noise=1.0, seed=0)
    stream = Backend().stream(0, "bench_decentralized")
    batches = [problem.sample(stream, (R, P, 1)) for _ in range(steps)]
    return problem, batches


def _run_vectorized(algo, problem, batches) -> np.ndarray:
    algo.prepare(len(batches))
    stream = Backend().stream(1, "compressor")
    state = algo.init(np.zeros((R, P, D)), stream)
    for k, b in enumerate(batches, start=1):
        state = algo.step(state, GradientOracle(problem, b), k, stream)
    return algo.models(state)


def _run_loop(make, problem, batches) -> np.ndarray:
    out = np.empty((R, P, D))
    for r in range(R):
        algo = make()
        for b in batches:
            algo.step(least_squares_grad(b, r, problem.theta_star, problem.noise), GAMMA)
        out[r] = algo.x
    return out


def _best_side_by_side(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():  # warm-up (plans, caches, compiled kernels)
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def measure(quick: bool = False) -> dict[str, dict]:
    """Speed-ups of the vectorized algorithms over the per-worker loops (higher is better)."""
    steps, repeats = (5, 3) if quick else (20, 5)
    tune_allocator()  # as convkit.simulate does (glibc: reuse freed memory, no page faults)
    problem, batches = _setup(steps)
    topo = ring(P)
    W = topo.W
    x0 = np.zeros((P, D))
    comp = TopK(k=K)
    # built once, as a user builds the algorithm once for simulate: its mixing plans (the
    # block operator of W_gc / W_eta, built at the first step of an instance and reused at
    # every later one) are then warm, as the warm-up intends; init and every step are timed
    choco = CHOCOSGD(topo, Constant(GAMMA), comp, GAMMA_C)
    ds = DeepSqueeze(topo, Constant(GAMMA), comp, ETA)

    def choco_vec():
        return _run_vectorized(choco, problem, batches)

    def choco_loop():
        return _run_loop(lambda: LoopCHOCO(W, x0, K, GAMMA_C, order=choco.order), problem, batches)

    def ds_vec():
        return _run_vectorized(ds, problem, batches)

    def ds_loop():
        return _run_loop(lambda: LoopDeepSqueeze(W, x0, K, ETA), problem, batches)

    for vec, loop in ((choco_vec, choco_loop), (ds_vec, ds_loop)):
        err = float(np.max(np.abs(vec() - loop())))
        if not err < 1e-10:
            raise AssertionError(f"vectorized and loop trajectories differ by {err:.3g}")
    t = _best_side_by_side(
        {"choco_vec": choco_vec, "choco_loop": choco_loop, "ds_vec": ds_vec, "ds_loop": ds_loop},
        repeats,
    )
    return {
        "choco_topk_vs_loop": {
            "value": t["choco_loop"] / t["choco_vec"],
            "goal": 30.0,
            "higher_is_better": True,
        },
        "deepsqueeze_topk_vs_loop": {
            "value": t["ds_loop"] / t["ds_vec"],
            "goal": 30.0,
            "higher_is_better": True,
        },
    }


def breakdown(repeats: int = 15) -> dict[str, float]:
    """Where a vectorized step spends its time: microseconds (best of ``repeats``) of one
    CHOCO-SGD / DeepSqueeze step and of its parts on the benchmark's block, and of the loop
    baseline's parts (one worker's gradient and top-k, one replicate's CHOCO step)."""
    tune_allocator()
    problem, batches = _setup(1)
    topo = ring(P)
    comp = TopK(k=K)
    X = np.random.default_rng(0).standard_normal((R, P, D))
    Y = X.copy()
    oracle = GradientOracle(problem, batches[0])
    W_eta = topo.W_eta(ETA)

    def best(fn, number):
        t = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            t = min(t, (time.perf_counter() - t0) / number)
        return t * 1e6

    choco = CHOCOSGD(topo, Constant(GAMMA), comp, GAMMA_C)
    ds = DeepSqueeze(topo, Constant(GAMMA), comp, ETA)
    states = {}
    for name, algo in (("choco", choco), ("ds", ds)):
        algo.prepare(10**6)
        states[name] = algo.init(np.zeros((R, P, D)), None)
    grad = least_squares_grad(batches[0], 0, problem.theta_star, problem.noise)
    x1 = X[0, 0].copy()
    loop = LoopCHOCO(topo.W, X[0], K, GAMMA_C, order=choco.order)

    return {
        "vectorized CHOCO step": best(lambda: choco.step(states["choco"], oracle, 1, None), 30),
        "vectorized DeepSqueeze step": best(lambda: ds.step(states["ds"], oracle, 1, None), 30),
        "  sgd_update (fused gradient step)": best(lambda: oracle.sgd_update(Y, 1e-12), 100),
        "  top-k of the block": best(lambda: comp.compress(X), 100),
        "  mixing (Topology.mix, auto)": best(lambda: W_eta.mix(X), 100),
        "  one in-place pass (x += y)": best(lambda: np.add(Y, X, out=Y), 100),
        "loop: gradient of one worker": best(lambda: grad(0, x1), 2000),
        "loop: top-k of one vector": best(lambda: topk_vector(x1, K), 2000),
        "loop: CHOCO step of one replicate": best(lambda: loop.step(grad, GAMMA), 20),
    }


if __name__ == "__main__":
    for name, entry in measure().items():
        print(f"{name:<28} {entry['value']:8.1f}  (goal >= {entry['goal']:g})")
    for name, us in breakdown().items():
        print(f"{name:<38} {us:9.1f} us")
