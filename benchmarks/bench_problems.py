"""Problem speed: finite-data sampling against Gaussian sampling.

* ``finite_vs_gaussian_d100``: local steps per second of Local-SGD in :func:`convkit.simulate`
  on finite-sum least squares (n = 2000 rows, d = 100, sampling with replacement) divided by
  the same on online Gaussian least squares (d = 100), same R = 256, P = 16, b = 1, one round
  every 10 steps, two record points (so that the metrics, whose cost differs between the two
  problems, are a negligible part).  A finite-data step draws R P b integers and gathers rows;
  a Gaussian step draws R P b d normals.
* ``finite_sparse_vs_dense_d1000``: the same rate on a 1%-dense CSR matrix (n = 4000 rows,
  1000 in quick mode; d = 1000) divided by the rate on the same matrix stored dense: what
  keeping sparse data sparse buys.

Each ratio interleaves the two measurements and keeps the best of several repeats.
"""

from __future__ import annotations

import convkit as ck
from benchmarks.timing import best_of
from convkit.problems.datasets import synthetic_least_squares, synthetic_sparse
from convkit.problems.finite_sum import FiniteLeastSquares


def _runner(prob, R, P, n):
    algo = ck.LocalSGD(P, ck.Constant(0.01), comm="every:10")

    def run():
        ck.simulate(prob, algo, steps=n, replicates=R, seed=1, n_record=2, progress=False)

    return run


def finite_vs_gaussian(quick: bool) -> float:
    d, R, P = 100, 256, 16
    n = 100 if quick else 400
    data, _ = synthetic_least_squares(2000, d, spectrum="1/i", seed=0)
    finite = FiniteLeastSquares(data.X, data.y)
    gauss = ck.LeastSquares.gaussian(d=d, spectrum="1/i", seed=0)
    runs = [_runner(finite, R, P, n), _runner(gauss, R, P, n)]
    for f in runs:  # warm up (compilation of the fused kernels, caches)
        f()
    t_finite, t_gauss = best_of(runs, 2 if quick else 5)
    return t_gauss / t_finite


def sparse_vs_dense(quick: bool) -> float:
    R, P = 64, 16
    n = 30 if quick else 200
    rows = 1000 if quick else 4000
    data, _ = synthetic_sparse(rows, 1000, density=0.01, task="least_squares", seed=0)
    sparse = FiniteLeastSquares(data.X, data.y, lam=1e-3)
    dense = FiniteLeastSquares(data.X.toarray(), data.y, lam=1e-3)
    runs = [_runner(sparse, R, P, n), _runner(dense, R, P, n)]
    for f in runs:
        f()
    t_sparse, t_dense = best_of(runs, 2 if quick else 5)
    return t_dense / t_sparse


def measure(quick: bool = False) -> dict[str, dict]:
    return {
        "finite_vs_gaussian_d100": {
            "value": finite_vs_gaussian(quick),
            "goal": 3.0,
            "higher_is_better": True,
        },
        "finite_sparse_vs_dense_d1000": {
            "value": sparse_vs_dense(quick),
            "goal": 1.0,
            "higher_is_better": True,
        },
    }


if __name__ == "__main__":
    import sys

    for name, row in measure("--quick" in sys.argv).items():
        print(f"{name:32s} {row['value']:10.3f}  (goal {row['goal']})")
