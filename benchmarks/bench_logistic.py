"""Online logistic regression: :func:`convkit.simulate` against a hand-fused numba loop.

Setting (issue "Speed", item 3): ``LogisticRegression.gaussian(2, spectrum="flat",
theta_star=(1, 1)/sqrt(2))`` (d = 2, well specified), six Local-SGD schedules
``LocalSGD(8, PolyDecay(1.0, 0.75), comm=Rounds(N))`` for ``N`` in 1, 4, 16, 64, 256, 1024
(P = 8 workers, batch 1; C = 1.0 is half the mean-square stability limit of H / 4) on common
random numbers, n = 12500 local steps, R = 600 replicates (quick mode: n = 1250, R = 128).

* ``logistic_simulate_final_seconds``: one call
  ``simulate(prob, algos, steps=n, replicates=R, seed=1, n_record=1, progress=False)``
  (``threads`` = all cores; the metrics of the last, averaged and tail-averaged iterates at the
  first and last steps), the result's ``frame`` included: the computation of the reference
  below, and a little more.  On this problem and these algorithms the steps run by segments
  through :mod:`convkit._fused_local` when numba is installed.
  ``logistic_simulate_final_1core_seconds``: the same call with ``threads=1``.
* ``logistic_simulate_seconds``: the same call with its default records (40 record points, at
  each the three metrics, quadrature excess risk included, of the three iterates of every
  schedule: 240 record points of 600 replicates, more work than the steps themselves).
* ``logistic_fused_seconds`` (``logistic_fused_1core_seconds``): one call of
  :func:`benchmarks.fused_logistic.fused_local_sgd_logistic` on the same setting, parallel
  over replicates on all the cores numba may use (on one core): sampling, the six schedules'
  steps and averaging, running Polyak-Ruppert sums and the final ``H*``-norm error of the
  averaged iterate (no intermediate records).  Compiled before timing.
* ``logistic_vs_fused_loop`` = fused seconds / simulate-final seconds, both on all cores: the
  same computation (goal >= 1, higher is better); ``logistic_vs_fused_loop_1core`` the same
  with both on one core.  ``logistic_vs_fused_loop_final`` is the headline ratio under its
  earlier name and ``logistic_vs_fused_loop_final_1core`` the one-core reference against the
  simulate call on all cores (informational); ``logistic_vs_fused_loop_default_records`` is
  the reference against the call with the default records (informational: different work).

The five runs are interleaved and each keeps the best of several repeats (3, quick 2).
"""

from __future__ import annotations

import numpy as np

import convkit as ck
from benchmarks.timing import best_of

ROUNDS = (1, 4, 16, 64, 256, 1024)
P = 8
C = 1.0


def setting(quick: bool) -> tuple[ck.LogisticRegression, list, int, int]:
    """``(problem, algorithms, n, R)`` of the benchmark."""
    prob = ck.LogisticRegression.gaussian(2, spectrum="flat", theta_star=np.ones(2) / np.sqrt(2))
    step = ck.PolyDecay(C, 0.75)
    algos = [ck.LocalSGD(P, step, comm=ck.Rounds(N), name=f"N={N}") for N in ROUNDS]
    n, R = (1250, 128) if quick else (12500, 600)
    return prob, algos, n, R


def timings(quick: bool = False) -> dict[str, float]:
    """Best seconds of simulate (default records, first and last step only), the fused loop on all
    cores and on one core."""
    import numba

    from benchmarks.fused_logistic import fused_local_sgd_logistic

    prob, algos, n, R = setting(quick)
    masks = np.stack([ck.Rounds(N).mask(n) for N in ROUNDS])
    gammas = ck.PolyDecay(C, 0.75).values(n)
    theta0 = np.zeros(prob.d)

    def sim() -> None:
        res = ck.simulate(prob, algos, steps=n, replicates=R, seed=1, progress=False)
        res.frame  # noqa: B018 - the summary is part of the cost

    def sim_final(threads: int | None = None) -> None:
        res = ck.simulate(
            prob, algos, steps=n, replicates=R, seed=1, n_record=1, progress=False, threads=threads
        )
        res.frame  # noqa: B018

    def fused() -> None:
        fused_local_sgd_logistic(
            prob.sqrt_h, prob.theta_star, theta0, prob.H_star, gammas, masks, P, R, seed=1
        )

    threads = numba.get_num_threads()

    def fused_1core() -> None:
        numba.set_num_threads(1)
        try:
            fused()
        finally:
            numba.set_num_threads(threads)

    ck.simulate(prob, algos, steps=ROUNDS[-1], replicates=8, seed=0, progress=False)  # compile
    fused_local_sgd_logistic(
        prob.sqrt_h, prob.theta_star, theta0, prob.H_star, gammas[:20], masks[:, :20], P, 8
    )
    t_sim, t_final, t_final_one, t_fused, t_one = best_of(
        [sim, sim_final, lambda: sim_final(1), fused, fused_1core], 2 if quick else 3
    )
    return {
        "simulate": t_sim,
        "simulate_final": t_final,
        "simulate_final_1core": t_final_one,
        "fused": t_fused,
        "fused_1core": t_one,
        "cores": threads,
    }


def measure(quick: bool = False) -> dict[str, dict]:
    t = timings(quick)
    info = {"goal": None, "higher_is_better": False}
    ratio = {"goal": None, "higher_is_better": True}
    return {
        "logistic_vs_fused_loop": {
            "value": t["fused"] / t["simulate_final"],
            "goal": 1.0,
            "higher_is_better": True,
        },
        "logistic_vs_fused_loop_1core": {
            "value": t["fused_1core"] / t["simulate_final_1core"],
            **ratio,
        },
        "logistic_vs_fused_loop_final": {"value": t["fused"] / t["simulate_final"], **ratio},
        "logistic_vs_fused_loop_final_1core": {
            "value": t["fused_1core"] / t["simulate_final"],
            **ratio,
        },
        "logistic_vs_fused_loop_default_records": {"value": t["fused"] / t["simulate"], **ratio},
        "logistic_simulate_seconds": {"value": t["simulate"], **info},
        "logistic_simulate_final_seconds": {"value": t["simulate_final"], **info},
        "logistic_simulate_final_1core_seconds": {"value": t["simulate_final_1core"], **info},
        "logistic_fused_seconds": {"value": t["fused"], **info},
        "logistic_fused_1core_seconds": {"value": t["fused_1core"], **info},
    }


if __name__ == "__main__":
    import sys

    print(timings(quick="--quick" in sys.argv))
