"""Speed of the exact expected-error engine (:mod:`convkit.exact`).

* ``exact_T1e7_d100_seconds``: one exact curve end to end (``expected_error``, 40 record
  points, frame included) for Local-SGD with P = 4 workers, 1000 evenly spaced rounds,
  ``gamma_k = 0.5 gamma* k^-0.75``, Gaussian design, d = 100, spectrum 1/i, ``n = 1e7`` local
  steps.  Goal <= 2 s.  (Quick mode times 2e6 steps and scales by 5.)
* ``exact_numpy_T1e7_d100_seconds_extrapolated``: the same curve on the NumPy path (no
  numba), timed on 2e4 steps and scaled linearly to 1e7 (the cost per step is constant).  It
  is what justifies the compiled loop: the NumPy path pays ~10 small array operations of
  Python overhead per step.
* ``exact_vs_mc_equal_precision``: speed-up of the exact engine over Monte Carlo for the
  same configuration (d = 20, P = 4, every 10 steps, n = 1e4 local steps) when Monte Carlo is
  run to 1% relative standard error on the final E||avg - theta*||_H^2: replicates needed
  ``R = R0 (relSE(R0) / 0.01)^2`` from the variance measured on ``R0`` replicates, MC cost =
  measured seconds per replicate times ``R``; exact cost = one ``expected_error`` call.
  Timings are best-of-repeats, measured side by side in one run.  Goal >= 1000.
  From ``theta0 = 0`` the final averaged error is mostly (deterministic) bias, so few
  replicates suffice; ``exact_vs_mc_equal_precision_from_optimum`` is the same configuration
  started at ``theta*`` (all variance).
"""

from __future__ import annotations

import time

import convkit as ck
from convkit.exact import expected_error, stability_limit


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _curve_setup(d: int = 100):
    prob = ck.LeastSquares.gaussian(d, spectrum="1/i", noise=1.0)
    C = 0.5 * stability_limit(prob, batch=1)
    algo = ck.LocalSGD(4, ck.PolyDecay(C, 0.75), comm=ck.Rounds(1000), name="local")
    return prob, algo


def measure(quick: bool = False) -> dict[str, dict]:
    repeats = 1 if quick else 3
    prob, algo = _curve_setup()
    expected_error(prob, algo, steps=1000)  # compile / load the cached kernel
    # quick mode: 2e6 steps scaled to 1e7 (the cost per step is constant)
    n_ex = 2 * 10**6 if quick else 10**7
    t_exact = _best(lambda: expected_error(prob, algo, steps=n_ex), repeats) * (10**7 / n_ex)

    n_np = 5_000 if quick else 20_000
    algo_np = ck.LocalSGD(4, algo.step_size, comm=ck.Rounds(2), name="np")
    t_np = _best(lambda: expected_error(prob, algo_np, steps=n_np, use_numba=False), repeats)
    t_np_1e7 = t_np * (10**7 / n_np)

    # exact vs Monte Carlo at equal precision
    d, n, R0 = 20, 10_000, (60 if quick else 200)
    prob2 = ck.LeastSquares.gaussian(d, spectrum="1/i", noise=1.0)
    C2 = 0.5 * stability_limit(prob2, batch=1)
    algo2 = ck.LocalSGD(4, ck.PolyDecay(C2, 0.75), comm="every:10", name="l")
    t_ex2 = _best(lambda: expected_error(prob2, algo2, steps=n), 20 if quick else 50)
    runs = []

    def mc():
        runs.append(ck.simulate(prob2, algo2, steps=n, replicates=R0, seed=len(runs)))

    t_mc = _best(mc, 1 if quick else 2)
    res = runs[-1]
    final = res.final("hnorm2", "avg").iloc[0]
    rel_se = float(final["se"] / final["mean"])
    R_needed = R0 * (rel_se / 0.01) ** 2
    t_mc_needed = t_mc / R0 * R_needed
    # the same configuration started at the optimum: the error is all variance, so Monte
    # Carlo needs many more replicates (same cost per replicate)
    res0 = ck.simulate(prob2, algo2, steps=n, replicates=R0, seed=99, theta0=prob2.theta_star)
    f0 = res0.final("hnorm2", "avg").iloc[0]
    R0_needed = R0 * (float(f0["se"] / f0["mean"]) / 0.01) ** 2
    return {
        "exact_T1e7_d100_seconds": {"value": t_exact, "goal": 2.0, "higher_is_better": False},
        "exact_numpy_T1e7_d100_seconds_extrapolated": {  # informational: without numba
            "value": t_np_1e7,
            "goal": float("nan"),
            "higher_is_better": False,
        },
        "exact_vs_mc_equal_precision": {
            "value": t_mc_needed / t_ex2,
            "goal": 1000.0,
            "higher_is_better": True,
        },
        "exact_vs_mc_equal_precision_from_optimum": {
            "value": t_mc / R0 * R0_needed / t_ex2,
            "goal": 1000.0,
            "higher_is_better": True,
        },
        "exact_vs_mc_replicates_needed": {
            "value": R_needed,
            "goal": float("nan"),
            "higher_is_better": False,
        },
        "exact_vs_mc_exact_seconds": {
            "value": t_ex2,
            "goal": float("nan"),
            "higher_is_better": False,
        },
        "exact_vs_mc_mc_seconds_per_replicate": {
            "value": t_mc / R0,
            "goal": float("nan"),
            "higher_is_better": False,
        },
    }


if __name__ == "__main__":  # pragma: no cover
    import json
    import sys

    print(json.dumps(measure(quick="--quick" in sys.argv), indent=2))
