"""Cost of the CPU-independent eigenvalues (issue 36): LAPACK's ``eigvalsh`` against
:func:`convkit._symmetric_eigen.symmetric_eigenvalues` (cyclic Jacobi, an order fixed by the
code: the same bits on every x86-64 CPU).

For ``n = 8, 16, 32, 64`` this prints, side by side in one run, the best time of each on a
random symmetric matrix and on the mixing matrix of a ring (the compiled path, numba kernel
warmed first), their ratio, and the NumPy path's time (kernels off) for reference.  A
topology's eigenvalues are computed once and cached, so milliseconds are affordable.
Interleaved timings, the best of several repeats (:func:`benchmarks.timing.best_of`).  Run:
``python benchmarks/bench_symmetric_eigen.py`` (the table), or through ``benchmarks/run.py``
(:func:`measure`: the ratios on the random matrices).
"""

from __future__ import annotations

import time

import numpy as np

if __package__ in (None, ""):  # allow `python benchmarks/bench_symmetric_eigen.py`
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import convkit as ck
from benchmarks.timing import best_of
from convkit._symmetric_eigen import symmetric_eigenvalues
from convkit.topology import ring

SIZES = (8, 16, 32, 64)


def _repeats(n: int) -> int:
    return max(5, 400 // n)


def _rows(sizes: tuple[int, ...]) -> list[tuple[str, int, float, float, float]]:
    """``(matrix, n, eigvalsh seconds, Jacobi seconds, NumPy path seconds)`` per case."""
    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        B = rng.standard_normal((n, n))
        for label, M in (("random", (B + B.T) / 2), ("ring uniform", ring(n).W)):
            symmetric_eigenvalues(M)  # warm: the kernel compiled or loaded from the cache
            t_lapack, t_jacobi = best_of(
                [lambda M=M: np.linalg.eigvalsh(M), lambda M=M: symmetric_eigenvalues(M)],
                _repeats(n),
            )
            with ck.kernels(enabled=False):
                t0 = time.perf_counter()
                symmetric_eigenvalues(M)
                t_numpy = time.perf_counter() - t0
            rows.append((label, n, t_lapack, t_jacobi, t_numpy))
    return rows


def measure(quick: bool = False) -> dict:
    """``symmetric_eigen_vs_eigvalsh_n{n}``: the Jacobi eigenvalues' time over ``eigvalsh``'s
    on a random symmetric ``n x n`` matrix (informational: no goal; the cost of the same bits
    on every CPU, paid once per topology)."""
    return {
        f"symmetric_eigen_vs_eigvalsh_n{n}": {
            "value": t_jacobi / t_lapack,
            "goal": None,
            "higher_is_better": False,
        }
        for label, n, t_lapack, t_jacobi, _ in _rows(SIZES[:2] if quick else SIZES)
        if label == "random"
    }


def main() -> None:
    print(f"{'matrix':<14}{'n':>4}{'eigvalsh':>12}{'jacobi':>12}{'ratio':>8}{'numpy path':>13}")
    for label, n, t_lapack, t_jacobi, t_numpy in _rows(SIZES):
        print(
            f"{label:<14}{n:>4}{t_lapack * 1e6:>10.1f}us{t_jacobi * 1e6:>10.1f}us"
            f"{t_jacobi / t_lapack:>8.1f}{t_numpy * 1e3:>11.1f}ms"
        )


if __name__ == "__main__":
    main()
