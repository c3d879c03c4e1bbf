"""Core engine speed: Monte Carlo throughput against its own random numbers, against the
per-worker loop, and its peak memory.

* ``mc_vs_rng_d{10,100,1000}``: local steps per second of a Gaussian least-squares Local-SGD
  run (R P = 2048, every 10 steps a round) divided by the rate of merely drawing the same
  Gaussian samples (the (R, P, 1, d) features and (R, P, 1) label noise of one step) from the
  same generator.  1.0 would mean the simulation costs nothing beyond its random numbers.
* ``vec_vs_loop_d10_P64``: the vectorized engine against ``naive_local.naive_local_sgd``
  (per-run, per-worker Python loops, same samples), d = 10, P = 64, R = 8.
* ``peak_memory_ratio``: traced peak memory of a large run (R = 64, P = 32, d = 2000) divided by
  the state plus one sample block.

Each ratio interleaves the two measurements and keeps the best of several repeats.
"""

from __future__ import annotations

import tracemalloc

import convkit as ck
from benchmarks.naive_local import naive_local_sgd
from benchmarks.timing import best_of


def mc_vs_rng(d: int, quick: bool) -> float:
    P, R = 16, 256  # R P = 4096 (the issue asks for R P >= 2048)
    n = max(
        8 if quick else 20, int((3e6 if quick else 2e7) / (R * P * d))
    )  # >= 20 steps: setup amortized
    prob = ck.LeastSquares.gaussian(d=d, spectrum="1/i", seed=0)
    algo = ck.LocalSGD(P, ck.PolyDecay(0.5, 0.75), comm="every:10")

    def sim():
        ck.simulate(prob, algo, steps=n, replicates=R, seed=1, n_record=10)

    def rng():
        s = ck.Backend().stream(1, "samples", 0)
        for _ in range(n):
            s.normal((R, P, 1, d))
            s.normal((R, P, 1))

    sim()  # warm up (compilation of the fused kernel)
    t_sim, t_rng = best_of([sim, rng], 2 if quick else 3)
    return t_rng / t_sim


def vec_vs_loop(quick: bool) -> float:
    d, P, R = 10, 64, 8
    n = 20 if quick else 100
    prob = ck.LeastSquares.gaussian(d=d, spectrum="1/i", seed=0)
    step = ck.PolyDecay(0.5, 0.75)
    algo = ck.LocalSGD(P, step, comm="every:10")
    mask = ck.Every(10).mask(n)

    def vec():
        ck.simulate(prob, algo, steps=n, replicates=R, seed=1, n_record=10)

    def loop():
        naive_local_sgd(prob, P, step.values(n), mask, replicates=R, seed=1, n_record=10)

    vec()
    t_vec, t_loop = best_of([vec, loop], 1 if quick else 2)
    return t_loop / t_vec


def peak_memory_ratio(quick: bool) -> float:
    R, P, d = (16, 16, 500) if quick else (64, 32, 2000)
    prob = ck.LeastSquares.gaussian(d=d, spectrum="1/i", seed=0)
    algo = ck.LocalSGD(P, ck.PolyDecay(0.5, 0.75), comm="every:10")
    ck.simulate(
        prob, algo, steps=10, replicates=2, seed=0
    )  # warm caches outside the trace (10 steps: one period of every:10)
    tracemalloc.start()
    ck.simulate(prob, algo, steps=20, replicates=R, seed=1, n_record=5)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state = R * P * d * 8
    sample = R * P * (d + 1) * 8
    return peak / (state + sample)


def measure(quick: bool = False) -> dict[str, dict]:
    out = {}
    for d in (10, 100, 1000):
        out[f"mc_vs_rng_d{d}"] = {
            "value": mc_vs_rng(d, quick),
            "goal": 0.7,
            "higher_is_better": True,
        }
    out["vec_vs_loop_d10_P64"] = {"value": vec_vs_loop(quick), "goal": 20, "higher_is_better": True}
    out["peak_memory_ratio"] = {
        "value": peak_memory_ratio(quick),
        "goal": 2,
        "higher_is_better": False,
    }
    return out
