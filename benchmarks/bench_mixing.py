"""Mixing speed: neighbour-shift / sparse products against one dense product.

``ring_sparse_vs_dense_P256``: time of the dense product ``W @ X`` divided by the time of
``Topology.mix(X)`` with ``method="auto"`` (for NumPy, the CSR product ``kron(I_R, W)``),
for an ``(R, P, d) = (16, 256, 100)`` block, measured side by side (interleaved repeats,
best of each). Also reported: the neighbour-shift product on the same ring (what ``auto``
uses for other array libraries), and a 16 x 16 torus (CSR).

BLAS is limited to one thread while measuring (``threadpoolctl``, when installed): the
structured products are single-threaded, and on a shared machine a multi-threaded dense
product is slowed far more by other load than by its own work, which would inflate the
ratio. One thread is the conservative, reproducible comparison.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import numpy as np

from convkit import topology as T

R, P, D = 16, 256, 100


def _best_side_by_side(fns: dict[str, Callable[[], object]], repeats: int, number: int):
    """Best-of-``repeats`` seconds per call for each function, repeats interleaved."""
    best = dict.fromkeys(fns, float("inf"))
    for fn in fns.values():  # warm-up (plans, caches, allocator)
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            best[name] = min(best[name], (time.perf_counter() - t0) / number)
    return best


def _one_blas_thread() -> contextlib.AbstractContextManager:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def measure(quick: bool = False) -> dict[str, dict]:
    """Speed-ups of structured mixing over the dense product (higher is better)."""
    repeats, number = (5, 5) if quick else (15, 10)
    X = np.random.default_rng(0).standard_normal((R, P, D))
    ring = T.ring(P)
    torus = T.torus(16)
    assert ring.mix_method() == "sparse" and torus.mix_method() == "sparse"
    with _one_blas_thread():
        t = _best_side_by_side(
            {
                "ring_dense": lambda: ring.mix(X, method="dense"),
                "ring_auto": lambda: ring.mix(X),
                "ring_shift": lambda: ring.mix(X, method="shift"),
                "torus_dense": lambda: torus.mix(X, method="dense"),
                "torus_auto": lambda: torus.mix(X),
            },
            repeats,
            number,
        )
    return {
        "ring_sparse_vs_dense_P256": {
            "value": t["ring_dense"] / t["ring_auto"],
            "goal": 5.0,
            "higher_is_better": True,
        },
        "ring_shift_vs_dense_P256": {
            "value": t["ring_dense"] / t["ring_shift"],
            "goal": 1.0,
            "higher_is_better": True,
        },
        "torus_sparse_vs_dense_P256": {
            "value": t["torus_dense"] / t["torus_auto"],
            "goal": 1.0,
            "higher_is_better": True,
        },
    }
