"""Reference (not the product): Local-SGD written as per-run, per-worker Python loops.

This is the way the public research codes implement MBA / Local-SGD / OSA: one run at a
time, each worker a separate parameter vector updated in a Python loop, averaging by hand.
It draws its samples exactly as :func:`convkit.simulate` does (same streams, same shapes),
so given the same seed it must produce the same trajectories as the vectorized engine.  The
tests use it as an independent check of the engine; ``bench_core.py`` uses it as the
baseline of ``vec_vs_loop_d10_P64``.

Only least-squares problems (Gaussian or Rademacher design) are supported.
"""

from __future__ import annotations

import numpy as np

from convkit.backend import Backend
from convkit.simulate import record_steps


def naive_local_sgd(
    problem, workers, gammas, comm_mask, batch=1, replicates=1, seed=0, n_record=40
):
    """Run Local-SGD with Python loops over replicates and workers.

    Returns ``(steps, avg, last)``: record steps and, at each, the Polyak-Ruppert average and
    the last worker-mean iterate of every replicate, arrays of shape (n_rec, R, d).
    """
    n = len(gammas)
    stream = Backend().stream(seed, "samples", 0)
    rec = record_steps(n, n_record)
    d = problem.d
    theta = [[np.zeros(d) for _ in range(workers)] for _ in range(replicates)]
    sums = [np.zeros(d) for _ in range(replicates)]
    avg_out, last_out = [], []
    theta_star = problem.theta_star
    for k in range(1, n + 1):
        sample = problem.sample(stream, (replicates, workers, batch))
        x_all, eps_all = sample.x, sample.eps
        gamma = gammas[k - 1]
        for r in range(replicates):
            for p in range(workers):
                th = theta[r][p]
                grad = np.zeros(d)
                for j in range(batch):
                    x = x_all[r, p, j]
                    grad += x * (x @ (th - theta_star) - problem.noise * eps_all[r, p, j])
                theta[r][p] = th - gamma * grad / batch
            if comm_mask[k - 1]:
                mean = sum(theta[r]) / workers
                theta[r] = [mean.copy() for _ in range(workers)]
            sums[r] = sums[r] + sum(theta[r]) / workers
        if k in rec:
            avg_out.append([s / k for s in sums])
            last_out.append([sum(theta[r]) / workers for r in range(replicates)])
    return rec, np.array(avg_out), np.array(last_out)
