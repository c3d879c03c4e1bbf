"""Side-by-side timing shared by the benchmarks: the machine is noisy, so every ratio is taken
from runs interleaved in one process, each function's best over the repeats."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def best_of(funcs: Sequence[Callable[[], object]], repeats: int) -> list[float]:
    """Best wall time of each of ``funcs`` over ``repeats`` interleaved rounds (one call of
    each function per round, in order)."""
    best = [float("inf")] * len(funcs)
    for _ in range(repeats):
        for i, f in enumerate(funcs):
            t0 = time.perf_counter()
            f()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best
