"""How a :func:`convkit.simulate` run is laid out in memory: what is recorded per algorithm
(:class:`_Layout`), the bytes of one replicate's state, and the plan of chunks of whole
replicate blocks (the unit of randomness, :data:`REPLICATE_BLOCK`)."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .algorithms.base import Algorithm
from .problems.base import METRICS, Problem
from .recording import ITERATES, WEIGHTED_ITERATES

#: replicates per block, the unit of randomness (one stream per block and purpose)
REPLICATE_BLOCK = 256
#: bytes of one recorded value (the values array is float64 whatever the dtype)
_VALUE_BYTES = 8


@dataclass
class _Layout:
    """What is recorded for one algorithm: record steps, iterates, metrics."""

    steps: np.ndarray
    iterates: list[str]
    metrics: list[str]
    #: the problem's error metrics recorded (the first of :attr:`metrics`); None: all of
    #: them, as :meth:`Problem.errors` gives them
    error_metrics: tuple[str, ...] | None = None

    @property
    def bytes_per_replicate(self) -> int:
        return self.steps.size * len(self.iterates) * len(self.metrics) * _VALUE_BYTES


def _layout(
    problem: Problem,
    algo: Algorithm,
    steps: np.ndarray,
    weighted: bool = False,
    error_metrics: tuple[str, ...] | None = None,
) -> _Layout:
    """The recorded iterates and metrics of ``algo``: the problem's error metrics
    ``error_metrics`` (a subset of :data:`~convkit.problems.base.METRICS`) and the
    algorithm's declared state metrics (:meth:`~convkit.algorithms.base.Algorithm.metric_names`,
    under the iterate ``"state"``), so that the values array is allocated, and its size
    checked, up front; ``weighted``: the weighted averages too. The problem's node metrics
    (:attr:`~convkit.problems.base.Problem.node_metrics`) follow the algorithm's."""
    names = list(algo.metric_names(problem)) + list(getattr(problem, "node_metrics", ()))
    iterates = list(ITERATES) + (list(WEIGHTED_ITERATES) if weighted else [])
    iterates += ["state"] if names else []
    errors = list(METRICS if error_metrics is None else error_metrics)
    return _Layout(steps, iterates, errors + names, error_metrics)


def check_metrics(metrics: Any) -> tuple[str, ...] | None:
    """The ``metrics`` argument of :func:`convkit.simulate`: ``None`` (all of
    :data:`~convkit.problems.base.METRICS`, returned as None) or a non-empty sequence of
    distinct names from it, returned in :data:`~convkit.problems.base.METRICS` order."""
    if metrics is None:
        return None
    if isinstance(metrics, str) or not hasattr(metrics, "__iter__"):
        raise TypeError(
            f"metrics must be None or a sequence of metric names, got {metrics!r}; "
            f"allowed names: {list(METRICS)}"
        )
    names = list(metrics)
    bad = [m for m in names if m not in METRICS]
    if bad or not names or len(set(names)) != len(names):
        why = f"unknown {bad}" if bad else "empty" if not names else "a name given twice"
        raise ValueError(
            f"metrics = {names!r} ({why}): give a non-empty selection of distinct names "
            f"from {list(METRICS)}, or None for all"
        )
    return tuple(m for m in METRICS if m in names)


def _state_bytes_per_replicate(
    problem: Problem, algos: list[Algorithm], dtype: str, weighted: int = 0
) -> int:
    """Bytes of one replicate's state: the sample batch (and a temporary), each algorithm's
    ``state_arrays`` plus two temporaries, and the running sums (``weighted``: algorithms
    with the two weighted sums of float64 ``d``-vectors too)."""
    itemsize = 4 if dtype == "float32" else 8
    P_max = max(a.workers for a in algos)
    b_max = max(a.batch for a in algos)
    d = problem.d
    return (
        itemsize
        * (
            P_max * b_max * (d + 1) * 2  # sample block (+ a temporary)
            + sum(a.workers * d * (a.state_arrays + 2) + 4 * d for a in algos)
        )
        + 16 * d * weighted
    )


def _plan_chunks(R: int, per_rep: int, memory_limit: float) -> list[tuple[int, int]]:
    """Chunks as ranges of block indices ``[j0, j1)``: as many whole blocks per chunk as
    ``memory_limit`` allows, at least one (with a warning when one block exceeds it)."""
    n_blocks = math.ceil(R / REPLICATE_BLOCK)
    block_reps = min(R, REPLICATE_BLOCK)
    block_bytes = per_rep * block_reps
    per_chunk = max(1, min(n_blocks, int(memory_limit // block_bytes)))
    if block_bytes > memory_limit:
        warnings.warn(
            f"memory_limit={memory_limit:g} bytes is below the {block_bytes:,} bytes that one "
            f"replicate block ({block_reps} replicates) needs; running one block per chunk. "
            "Blocks are the unit of randomness and never split, so that the numbers do not "
            "depend on memory_limit",
            UserWarning,
            stacklevel=3,
        )
    return [(j, min(n_blocks, j + per_chunk)) for j in range(0, n_blocks, per_chunk)]
