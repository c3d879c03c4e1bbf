"""Cost of the CPU-independent ("ordered") mixing of the decentralized algorithms.

The algorithms of :mod:`convkit.algorithms.decentralized` (D-PSGD and the compressed ones) mix with
``Topology.mix(method="ordered")``: a CSR product summing each row in a fixed order (SciPy's
``csr_matvecs``, or the compiled row product of the fused top-k kernels, which rounds as it),
the same bits on every x86-64 CPU, instead of the BLAS's ``gemm`` for a dense ``W`` (the
``"auto"`` method; the kernel the BLAS selects for the CPU sets the summation order).  This
prints, side by side in one run, the time of one step of each algorithm (and of the mixing
alone) with the old fast path (``mixing = "auto"``) and the ordered one, and their ratio, on
the rings of the committed analyses (P = 8, 16: dense ``W`` by the ``"auto"`` rule) and a
larger sparse ring (P = 64, already a CSR product: ratio about 1).

Least squares with Gaussian design, batch 1, ``R = 16`` replicates, top-k with ``k = d/10``;
pre-drawn batches, interleaved timings, the best of several repeats.  Run:
``python benchmarks/bench_deterministic.py``.
"""

from __future__ import annotations

import time

import numpy as np

if __package__ in (None, ""):  # allow `python benchmarks/bench_deterministic.py`
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD, DCDPSGD, DPSGD, DeepSqueeze
from convkit.backend import Backend
from convkit.compression import QSGD, TopK
from convkit.problems.base import GradientOracle
from convkit.topology import ring

R, STEPS, REPEATS = 16, 20, 5


def _builders(P: int, d: int) -> dict:
    topo, g, top = ring(P), ck.Constant(0.01), TopK(k=max(1, d // 10))
    return {
        "D-PSGD": lambda: DPSGD(topo, g),
        "CHOCO-SGD top-k": lambda: CHOCOSGD(topo, g, top, 0.3),
        "DeepSqueeze top-k": lambda: DeepSqueeze(topo, g, top, 0.1),
        "DCD-PSGD QSGD": lambda: DCDPSGD(topo, g, QSGD(s=4)),
    }


def _time_steps(algo, problem, batches, stream) -> float:
    """Best time of STEPS steps from a fresh state (the state copy is not timed)."""
    best = np.inf
    theta0 = np.zeros((R, algo.topology.n, problem.d))
    algo.prepare(len(batches))
    for _ in range(REPEATS):
        state = algo.init(theta0.copy(), stream)
        t0 = time.perf_counter()
        for k, batch in enumerate(batches, start=1):
            state = algo.step(state, GradientOracle(problem, batch), k, stream)
        best = min(best, time.perf_counter() - t0)
    return best / len(batches)


def _time_mix(topo, X, method: str) -> float:
    best = np.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(STEPS):
            topo.mix(X, method=method)
        best = min(best, time.perf_counter() - t0)
    return best / STEPS


def run() -> list[dict]:
    rows = []
    be = Backend()
    for P, d in ((8, 30), (16, 50), (16, 100), (64, 100)):
        problem = ck.LeastSquares.gaussian(d=d, noise=0.5, seed=0)
        stream = be.stream(0)
        batches = [problem.sample(stream, (R, P, 1)) for _ in range(STEPS)]
        X = be.stream(1).normal((R, P, d))
        topo = ring(P)
        fast, ordered = _time_mix(topo, X, "auto"), _time_mix(topo, X, "ordered")
        rows.append(
            {
                "case": f"mix alone, ring P={P} d={d} ({topo.mix_method(0)})",
                "auto": fast,
                "ordered": ordered,
            }
        )
        for name, make in _builders(P, d).items():
            old, new = make(), make()
            old.mixing = "auto"  # the old fast path, kept callable for this comparison
            t_old = _time_steps(old, problem, batches, stream)
            t_new = _time_steps(new, problem, batches, stream)
            t_old = min(t_old, _time_steps(old, problem, batches, stream))  # interleaved
            rows.append({"case": f"{name}, ring P={P} d={d}", "auto": t_old, "ordered": t_new})
    return rows


def main() -> None:
    rows = run()
    print(f"R = {R}, time per step (us); ratio = ordered / auto (old fast path)")
    print(f"{'case':<44} {'auto':>9} {'ordered':>9} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['case']:<44} {1e6 * r['auto']:9.1f} {1e6 * r['ordered']:9.1f} "
            f"{r['ordered'] / r['auto']:6.2f}"
        )


if __name__ == "__main__":
    main()
