"""The Local-SGD logistic cell in JAX against :func:`convkit.simulate`, both on one core.

Setting: the cell of ``benchmarks/bench_floor.py`` (``d = 2``, flat spectrum, ``C L = 2``,
``PolyDecay(C, 0.75)``, ``P = 8``, ``T = 1e5``, 64 replicates, the cell's 21 schedules of
``analyses/_local_sgd_cells.py`` on common random numbers; quick mode ``T = 1e4``).

The JAX program (float64, ``jax_enable_x64``): one replicate is a ``jax.lax.scan`` over the
local steps ``k = 1..n`` whose carry is every schedule's workers ``(S, P, d)`` and running sum
``(S, d)``; per step it draws the workers' samples from ``fold_in(key, k)`` (``x = z
sqrt(h)``, ``y = +1`` when ``u < sigmoid(<x, theta*>)``, else -1), shared by the schedules,
and applies to each schedule (``jax.vmap`` over the schedule axis) the step ``theta -=
gamma_k (-y sigmoid(-y <x, theta>)) x``, the worker mean ``m``, ``sum += m`` and ``theta <-
m`` where the schedule's mask averages; the final error is ``||sum / n - theta*||^2_{H*}``,
the metric ``hnorm2`` of the averaged iterate that the cells read.  ``jax.vmap`` over the
replicates' keys and ``jax.jit`` around it all.  Its random numbers are JAX's, so the errors
agree with convkit's statistically: every schedule's mean within :data:`Z_MAX` standard errors
(``|mean_ck - mean_jax| / sqrt(se_ck^2 + se_jax^2)``).  A check against gross errors: with 64
replicates it rejects JAX run at twice the steps (largest 8.3 SE, quick mode) but not at 1.2
times (2.1 SE).

One core: the process is pinned to one CPU (``os.sched_setaffinity``, as ``taskset``), XLA
gets ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` (set before JAX is
imported), numba one thread and ``simulate`` ``threads=1``.  Compilation is excluded (each
side runs once before the timing); the two are timed interleaved, best of several repeats (3,
quick 2), in CPU time (:func:`benchmarks.bench_floor.best_cpu_of`; wall times beside).  ``jax_vs_convkit`` = JAX seconds / convkit seconds (higher: convkit faster).

Needs the optional extra ``jax`` (``pip install convkit[jax]``); without JAX it says so and
measures nothing.

Usage: ``python -m benchmarks.bench_jax [--quick] [--repeats N]``.
"""

from __future__ import annotations

import importlib.util
import math
import os
from typing import Any

import numpy as np

from benchmarks.bench_floor import CELL, best_cpu_of, setting

#: the largest |difference of means| / SE the agreement check accepts for any schedule
Z_MAX = 4.0
XLA_ONE_CORE = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def available() -> bool:
    """Whether JAX is installed."""
    return importlib.util.find_spec("jax") is not None


def _one_core() -> set[int] | None:
    """Pin this process to one CPU and XLA to one thread (the flags work when set before JAX
    starts its backend); returns the CPUs the process had (None where affinity is not
    supported), for :func:`timings` to give them back."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " " + XLA_ONE_CORE).strip()
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = set(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {min(cpus)})
    return cpus


def jax_cell(prob: Any, gammas: np.ndarray, masks: np.ndarray, P: int, theta0: np.ndarray) -> Any:
    """The jitted function ``keys (R, 2) -> errors (S, R)`` of the cell (module docstring);
    ``masks (S, n)``: average after step ``k + 1`` where ``masks[s, k]``."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    sqrt_h = jnp.asarray(prob.sqrt_h, dtype=jnp.float64)
    theta_star = jnp.asarray(prob.theta_star, dtype=jnp.float64)
    H_star = jnp.asarray(prob.H_star, dtype=jnp.float64)
    gam = jnp.asarray(gammas, dtype=jnp.float64)
    avg = jnp.asarray(masks, dtype=jnp.bool_).T  # (n, S)
    S, n = masks.shape
    d = sqrt_h.shape[0]
    steps = jnp.arange(1, n + 1)

    def schedule_step(theta, total, x, y, g, average):  # one schedule: theta (P, d)
        margin = jnp.sum(x * theta, axis=-1)
        c = -y * jax.nn.sigmoid(-y * margin) * g
        theta = theta - c[:, None] * x
        m = jnp.mean(theta, axis=0)
        theta = jnp.where(average, jnp.broadcast_to(m, theta.shape), theta)
        return theta, total + m

    every_schedule = jax.vmap(schedule_step, in_axes=(0, 0, None, None, None, 0))

    def replicate(key):
        def body(carry, inputs):
            theta, total = carry
            k, g, average = inputs
            kz, ku = jax.random.split(jax.random.fold_in(key, k))
            x = jax.random.normal(kz, (P, d), dtype=jnp.float64) * sqrt_h
            u = jax.random.uniform(ku, (P,), dtype=jnp.float64)
            y = jnp.where(u < jax.nn.sigmoid(x @ theta_star), 1.0, -1.0)
            return every_schedule(theta, total, x, y, g, average), None

        start = (
            jnp.broadcast_to(jnp.asarray(theta0, dtype=jnp.float64), (S, P, d)),
            jnp.zeros((S, d), dtype=jnp.float64),
        )
        (_, total), _ = jax.lax.scan(body, start, (steps, gam, avg))
        e = total / n - theta_star
        return jnp.einsum("si,ij,sj->s", e, H_star, e)

    run = jax.jit(jax.vmap(replicate))
    return lambda keys: run(keys).T


def _convkit_errors(prob: Any, algos: list, theta0: np.ndarray, n: int, R: int) -> np.ndarray:
    import convkit as ck

    res = ck.simulate(
        prob, algos, steps=n, replicates=R, seed=1, theta0=theta0, n_record=1,
        progress=False, threads=1,
    )  # fmt: skip
    out = []
    for a in algos:
        cv = res.values[a.name]
        out.append(cv.values[-1, cv.iterates.index("avg"), cv.metrics.index("hnorm2"), :])
    return np.asarray(out, dtype=float)


def _mean_se(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return e.mean(axis=1), e.std(axis=1, ddof=1) / math.sqrt(e.shape[1])


def timings(quick: bool = False, repeats: int | None = None) -> dict[str, Any]:
    """Best seconds of convkit and JAX on one core, and the agreement of their means."""
    import numba

    cpus, threads = _one_core(), numba.get_num_threads()
    try:
        return _timings(quick, repeats)
    finally:  # the other benchmarks of a run get the machine back
        numba.set_num_threads(threads)
        if cpus is not None:
            os.sched_setaffinity(0, cpus)


def _timings(quick: bool, repeats: int | None) -> dict[str, Any]:
    import jax
    import numba

    prob, algos, theta0, n, R = setting(quick)
    for a in algos:
        a.prepare(n)
    masks = np.array([np.asarray(a._comm_mask[:n], dtype=bool) for a in algos])
    gammas = np.asarray(algos[0].step_size.values(n), dtype=np.float64)
    numba.set_num_threads(1)
    fn = jax_cell(prob, gammas, masks, CELL["P"], theta0)
    keys = jax.random.split(jax.random.PRNGKey(1), R)
    holder: dict[str, np.ndarray] = {}

    def ck_run() -> None:
        holder["convkit"] = _convkit_errors(prob, algos, theta0, n, R)

    def jax_run() -> None:
        holder["jax"] = np.asarray(jax.block_until_ready(fn(keys)))

    ck_run()  # compile both
    jax_run()
    (t_ck, w_ck), (t_jax, w_jax) = best_cpu_of([ck_run, jax_run], repeats or (2 if quick else 3))
    m_ck, se_ck = _mean_se(holder["convkit"])
    m_jax, se_jax = _mean_se(holder["jax"])
    z = np.abs(m_ck - m_jax) / np.sqrt(se_ck**2 + se_jax**2)
    return {
        "convkit": t_ck,
        "jax": t_jax,
        "convkit_wall": w_ck,
        "jax_wall": w_jax,
        "z": z,
        "labels": [a.name for a in algos],
        "mean_convkit": m_ck,
        "mean_jax": m_jax,
        "jax_version": jax.__version__,
        "gradients": float(R) * n * CELL["P"] * len(algos),
    }


def measure(quick: bool = False) -> dict[str, dict]:
    if not available():
        print("bench_jax: JAX is not installed (pip install convkit[jax]): skipped")
        return {}
    t = timings(quick)
    if not float(t["z"].max()) <= Z_MAX:
        raise AssertionError(
            f"convkit and JAX disagree: max |difference of means| / SE = {t['z'].max():.2f} "
            f"> {Z_MAX} (schedule {t['labels'][int(np.argmax(t['z']))]})"
        )
    info = {"goal": None, "higher_is_better": False}
    return {
        "jax_vs_convkit": {
            "value": t["jax"] / t["convkit"],
            "goal": None,
            "higher_is_better": True,
        },
        "jax_seconds": {"value": t["jax"], **info},
        "jax_convkit_seconds": {"value": t["convkit"], **info},
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="T = 1e4 instead of 1e5")
    p.add_argument("--repeats", type=int, default=None, help="interleaved repeats (best of)")
    args = p.parse_args(argv)
    if not available():
        print("JAX is not installed (the optional extra: pip install convkit[jax]): nothing run")
        return 0
    t = timings(args.quick, args.repeats)
    g = t["gradients"]
    print(f"Local-SGD logistic cell, one core, JAX {t['jax_version']}: {g:.3g} worker-gradients")
    print("                   CPU s   ns per worker-gradient   (wall s)")
    for name, key in (("convkit.simulate", "convkit"), ("JAX jit+vmap+scan", "jax")):
        print(
            f"{name:<17} {t[key]:7.3f}   {t[key] / g * 1e9:6.2f}                   ({t[key + '_wall']:.3f})"
        )
    print(f"ratio JAX / convkit (CPU time): {t['jax'] / t['convkit']:.2f}")
    print(f"the same by wall time: {t['jax_wall'] / t['convkit_wall']:.2f}")
    worst = int(np.argmax(t["z"]))
    ok = float(t["z"].max()) <= Z_MAX
    print(
        f"means agree: {'yes' if ok else 'NO'} (largest |difference| / SE {t['z'][worst]:.2f} "
        f"at {t['labels'][worst]}: {t['mean_convkit'][worst]:.4g} vs {t['mean_jax'][worst]:.4g})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
