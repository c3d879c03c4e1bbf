"""Heterogeneous least squares: the node-Hessian problem's engine throughput.

* ``mc_vs_rng_node_hessians_d100``: :mod:`benchmarks.bench_core`'s ``mc_vs_rng`` measurement
  (local steps per second of Local-SGD, R = 256, P = 16, one round every 10 steps, ten
  record points, divided by the rate of merely drawing the same Gaussian samples from the
  same generator) on :class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares` with
  node Hessians (``hessian_dissimilarity = 0.5``, ``zeta2 = 1``, spectrum ``1/i``, d = 100):
  the compiled node-Hessian step and the nodes' metrics (the mean error of the nodes' models
  at every record point) included.
* ``mc_vs_rng_equal_hessians_d100``: the same on the equal-Hessian problem (``zeta2 = 1``,
  the generic NumPy step, kept unchanged so that its numbers stay bit for bit), for
  comparison.

Each ratio interleaves the two measurements and keeps the best of several repeats.
"""

from __future__ import annotations

import convkit as ck
from benchmarks.timing import best_of
from convkit.problems.heterogeneous import HeterogeneousLeastSquares


def mc_vs_rng_heterogeneous(d: int, delta: float, quick: bool) -> float:
    P, R = 16, 256  # as bench_core.mc_vs_rng
    n = max(8 if quick else 20, int((3e6 if quick else 2e7) / (R * P * d)))
    prob = HeterogeneousLeastSquares(d, P, 1.0, spectrum="1/i", seed=0,
                                     hessian_dissimilarity=delta)  # fmt: skip
    algo = ck.LocalSGD(P, ck.PolyDecay(0.5, 0.75), comm="every:10")

    def sim():
        ck.simulate(prob, algo, steps=n, replicates=R, seed=1, n_record=10, progress=False)

    def rng():
        s = ck.Backend().stream(1, "samples", 0)
        for _ in range(n):
            s.normal((R, P, 1, d))
            s.normal((R, P, 1))

    sim()  # warm up (compilation of the node-Hessian kernel)
    t_sim, t_rng = best_of([sim, rng], 2 if quick else 3)
    return t_rng / t_sim


def measure(quick: bool = False) -> dict[str, dict]:
    return {
        "mc_vs_rng_node_hessians_d100": {
            "value": mc_vs_rng_heterogeneous(100, 0.5, quick),
            "goal": 0.7,
            "higher_is_better": True,
        },
        "mc_vs_rng_equal_hessians_d100": {
            "value": mc_vs_rng_heterogeneous(100, 0.0, quick),
            "goal": None,
            "higher_is_better": True,
        },
    }
