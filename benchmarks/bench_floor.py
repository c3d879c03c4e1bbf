"""The Local-SGD logistic step against its machine floor, on one core.

Setting: the logistic cell of the large-step studies (``analyses/_local_sgd_cells.py``):
``d = 2``, flat spectrum, ``theta* = (1, 1) / sqrt 2``, ``C L = 2`` (``PolyDecay(C, 0.75)``),
``P = 8`` workers of batch 1, ``T = 1e5`` (``n = T / P = 12500`` local steps), 64 replicates,
with every schedule of the cell (:func:`analyses._local_sgd_cells.configurations`: MBA, OSA,
the even budgets, the geometric, drift-clock and power families at ``N`` = 16 and 64; ``S =
22`` schedules) on common random numbers.  Quick mode: ``T = 1e4``.

* ``floor_convkit_ns_per_gradient``: one call ``convkit.simulate(prob, algos, steps=n,
  replicates=64, n_record=1, progress=False, threads=1)`` (numba on one thread), the path a
  user calls (the fused segments of :mod:`convkit._fused_local`), in nanoseconds per
  worker-gradient: ``seconds / (R n P S)``.
* ``floor_ns_per_gradient``: :func:`floor_loop`, a compiled loop doing only what every
  worker-gradient of that call cannot avoid, with the same counts: per local step, the
  block's ``R P d`` standard normals and ``R P`` uniforms from an SFC64 generator (the bit
  generator of convkit's blocks, through numba's ``Generator`` methods as the segment
  kernel draws them), the features ``x = z sqrt(h)``, the margin ``<x, theta*>`` and the
  label through libm's ``exp`` (as :meth:`LogisticRegression.sample`); per schedule and
  worker, the margin ``<x, theta>``, the coefficient ``-y sigmoid(-y <x, theta>) gamma_k``
  with :mod:`convkit._fastexp`'s ``exp`` and the update ``theta -= c x``, in the kernel's
  vectorizable layout (coordinate, then replicate and worker contiguous), one pass per
  schedule and step with ``d`` a compile-time constant (the fastest of the forms tried:
  three passes, margins, coefficients and update, as the segment kernel makes them, took
  about 10 % longer).  No averaging, no
  running sums, no divergence check, no schedule mask: the bookkeeping the engine adds.
* ``floor_fraction`` = floor / convkit (goal >= 0.5, higher is better): the share of the
  engine's time the unavoidable work would take.

The two are timed interleaved in one process, each keeping its best of several repeats (5,
quick 3), after a compilation run; ``numba.set_num_threads(1)`` throughout.  Times are the
process's CPU time (:func:`best_cpu_of`: on a shared machine wall time also counts the other
processes' turns on the core); the wall times are printed beside them.

Usage: ``python -m benchmarks.bench_floor [--quick] [--repeats N]``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import convkit as ck

#: the cell (fields of ``analyses._local_sgd_cells.Cell``)
CELL = dict(problem="logistic", d=2, spectrum="flat", theta_norm=1.0, CL=2.0, alpha=0.75, P=8)
T_FULL, T_QUICK = 100_000, 10_000
REPLICATES = 64

_FLOOR: dict[int, Any] = {}


def setting(quick: bool = False) -> tuple[Any, list[Any], np.ndarray, int, int]:
    """``(problem, algorithms, theta0, n, R)`` of the cell."""
    from analyses import _local_sgd_cells as cells

    cell = cells.Cell(**CELL, T=T_QUICK if quick else T_FULL, replicates=REPLICATES)
    prob, C, theta0 = cells.problem_of(cell)
    step = ck.PolyDecay(C=C, alpha=cell.alpha)
    cfg = cells.configurations(cell, prob, step, theta0)
    return prob, cells._algorithms(cell, step, cfg), theta0, cell.n, cell.replicates


def _compile(D: int) -> Any:
    """The floor's loop for dimension ``D`` (a compile-time constant: its loops unrolled)."""
    import numba

    from convkit._fastexp import helpers

    sigmoid = helpers()[1]

    @numba.njit(fastmath={"contract"}, nogil=True, error_model="numpy")
    def floor(gen, sqrt_h, theta_star, gammas, theta, x, y, n):  # pragma: no cover - compiled
        # theta (S, D, R P): each schedule's workers, coordinate-major; x (D, R P), y (R P)
        S, _, m = theta.shape
        for k in range(n):
            for w in range(m):
                for i in range(D):
                    x[i, w] = gen.standard_normal()
            for w in range(m):
                t = 0.0
                for i in range(D):
                    xi = x[i, w] * sqrt_h[i]
                    x[i, w] = xi
                    t += xi * theta_star[i]
                e = np.exp(-abs(t))
                inv = 1.0 / (1.0 + e)
                y[w] = 1.0 if gen.random() < (inv if t >= 0 else e * inv) else -1.0
            g = gammas[k]
            for s in range(S):  # one pass per schedule: margin, coefficient, update
                for w in range(m):
                    a = 0.0
                    for i in range(D):
                        a += x[i, w] * theta[s, i, w]
                    yw = y[w]
                    c = -yw * sigmoid(-yw * a) * g
                    for i in range(D):
                        theta[s, i, w] -= c * x[i, w]
        return theta

    return floor


def floor_loop(prob: Any, S: int, P: int, R: int, gammas: np.ndarray, seed: int = 1) -> np.ndarray:
    """The floor's loop (module docstring) for ``S`` schedules of ``P`` workers, ``R``
    replicates and the steps ``gammas``; returns the workers ``(S, d, R P)``."""
    d, m = prob.d, R * P
    if d not in _FLOOR:
        _FLOOR[d] = _compile(d)
    gen = np.random.Generator(np.random.SFC64(seed))
    theta = np.zeros((S, d, m))
    return _FLOOR[d](
        gen,
        np.ascontiguousarray(prob.sqrt_h, dtype=np.float64),
        np.ascontiguousarray(prob.theta_star, dtype=np.float64),
        np.ascontiguousarray(gammas, dtype=np.float64),
        theta,
        np.empty((d, m)),
        np.empty(m),
        gammas.size,
    )


def best_cpu_of(funcs: Sequence[Callable[[], object]], repeats: int) -> list[tuple[float, float]]:
    """``(CPU seconds, wall seconds)`` of each of ``funcs``, each the best over ``repeats``
    interleaved rounds (one call of each per round, in order).  CPU time is the process's
    (``time.process_time``): on a shared machine it leaves out the time other processes hold
    the core, which wall time counts."""
    cpu = [math.inf] * len(funcs)
    wall = [math.inf] * len(funcs)
    for _ in range(repeats):
        for i, f in enumerate(funcs):
            c0, w0 = time.process_time(), time.perf_counter()
            f()
            cpu[i] = min(cpu[i], time.process_time() - c0)
            wall[i] = min(wall[i], time.perf_counter() - w0)
    return list(zip(cpu, wall, strict=True))


def timings(quick: bool = False, repeats: int | None = None) -> dict[str, float]:
    """Best seconds of the simulate call and of the floor loop on one core, and the counts."""
    import numba

    prob, algos, theta0, n, R = setting(quick)
    S, P = len(algos), CELL["P"]
    gammas = np.asarray(algos[0].step_size.values(n), dtype=np.float64)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)

    def sim() -> None:
        ck.simulate(
            prob, algos, steps=n, replicates=R, seed=1, theta0=theta0, n_record=1,
            progress=False, threads=1,
        )  # fmt: skip

    def floor() -> None:
        floor_loop(prob, S, P, R, gammas)

    try:
        ck.simulate(prob, algos, steps=n, replicates=2, seed=0, n_record=1, progress=False)
        floor_loop(prob, S, P, 2, gammas)  # compile both
        (t_sim, w_sim), (t_floor, w_floor) = best_cpu_of(
            [sim, floor], repeats or (3 if quick else 5)
        )
    finally:
        numba.set_num_threads(threads)
    grads = float(R) * n * P * S
    return {
        "simulate": t_sim,
        "floor": t_floor,
        "simulate_wall": w_sim,
        "floor_wall": w_floor,
        "gradients": grads,
        "S": S,
        "n": n,
        "R": R,
    }


def measure(quick: bool = False) -> dict[str, dict]:
    t = timings(quick)
    ns_sim = t["simulate"] / t["gradients"] * 1e9
    ns_floor = t["floor"] / t["gradients"] * 1e9
    info = {"goal": None, "higher_is_better": False}
    return {
        "floor_convkit_ns_per_gradient": {"value": ns_sim, **info},
        "floor_ns_per_gradient": {"value": ns_floor, **info},
        "floor_fraction": {"value": ns_floor / ns_sim, "goal": 0.5, "higher_is_better": True},
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"T = {T_QUICK} instead of {T_FULL}")
    p.add_argument("--repeats", type=int, default=None, help="interleaved repeats (best of)")
    args = p.parse_args(argv)
    t = timings(args.quick, args.repeats)
    ns_sim = t["simulate"] / t["gradients"] * 1e9
    ns_floor = t["floor"] / t["gradients"] * 1e9
    print(
        f"Local-SGD logistic cell, one core: S = {t['S']} schedules, P = {CELL['P']}, "
        f"n = {t['n']}, R = {t['R']} ({t['gradients']:.3g} worker-gradients)"
    )
    print("                  CPU s   ns per worker-gradient   (wall s)")
    for name, key, ns in (
        ("convkit.simulate", "simulate", ns_sim),
        ("floor loop", "floor", ns_floor),
    ):
        print(f"{name:<16} {t[key]:7.3f}   {ns:6.2f}                   ({t[key + '_wall']:.3f})")
    print(f"fraction of the floor (floor / convkit, CPU time): {ns_floor / ns_sim:.1%}")
    print(f"the same by wall time: {t['floor_wall'] / t['simulate_wall']:.1%}")
    return 0 if math.isfinite(ns_sim) else 1


if __name__ == "__main__":
    raise SystemExit(main())
