"""The algorithm protocol driven by :func:`convkit.simulate`.

An algorithm is a small object with explicit state (in the spirit of optax):

* :meth:`Algorithm.init` builds the state from the starting models ``(R, P, d)``;
* :meth:`Algorithm.step` performs local step ``k``: it asks the step's
  :class:`~convkit.problems.base.GradientOracle` for stochastic gradients at the points it
  needs (all gradient calls of one step share the same samples) and returns the new state (it
  may update arrays in place: the engine owns the state);
* :meth:`Algorithm.models` gives the workers' current models ``(R, P, d)``; the engine
  Polyak-Ruppert-averages their mean over workers;
* :meth:`Algorithm.comm_counts` reports the communication, cumulated after each local step
  (rounds, messages, bits).

Local step ``k`` runs from 1 to ``n``.  All workers take the same step size ``gamma_k``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..backend import namespace_of
from ..problems.base import GradientOracle
from ..schedules import StepSize
from ..validation import check_int

__all__ = ["Algorithm", "algorithm_list"]


class Algorithm(ABC):
    """Base class of convkit algorithms (see the module docstring)."""

    #: number of workers / nodes P
    workers: int
    #: per-worker batch size b
    batch: int
    #: step-size schedule
    step_size: StepSize
    #: number of (R, P, d) arrays the state holds (for memory planning)
    state_arrays: int = 1
    #: display name (unique within one simulate call)
    name: str | None = None

    def __init__(self, workers: int, step: StepSize, batch: int = 1, name: str | None = None):
        self.workers = check_int("workers", workers, low=1)
        self.batch = check_int("batch", batch, low=1)
        if not isinstance(step, StepSize):
            raise TypeError(
                f"step must be a StepSize (e.g. PolyDecay(C, alpha) or Constant(gamma)), got {step!r}"
            )
        self.step_size = step
        self.name = name

    # ---------------------------------------------------------------- protocol
    def prepare(self, n: int) -> None:
        """Precompute schedules for ``n`` local steps (called once by the engine)."""
        # Python floats: a NumPy scalar times an array of another library (array-api-strict,
        # CuPy) would become a NumPy array
        self._gammas = self.step_size.values(n).tolist()

    @abstractmethod
    def init(self, theta0: Any, stream: Any) -> Any:
        """State from starting models ``theta0`` of shape ``(R, P, d)`` (the engine's copy)."""

    @abstractmethod
    def step(self, state: Any, oracle: GradientOracle, k: int, stream: Any) -> Any:
        """Apply local step ``k`` (1-based); ``oracle`` gives this step's stochastic gradients,
        ``stream`` the algorithm's own random numbers (e.g. for compression)."""

    @abstractmethod
    def models(self, state: Any) -> Any:
        """The workers' current models, shape ``(R, P, d)``."""

    def worker_mean(self, state: Any) -> Any:
        """The workers' mean model, shape ``(R, d)`` (the point the engine averages).

        NumPy: ``sum / P``, which is how ``np.mean`` computes it (same pairwise sum, same
        division, same dtype), without its per-call overhead (called every step)."""
        m = self.models(state)
        if type(m) is np.ndarray and m.dtype in (np.float64, np.float32):
            return np.add.reduce(m, axis=1) / m.shape[1]
        return namespace_of(m).mean(m, axis=1)

    def extra_metrics(self, state: Any, problem: Any) -> dict[str, Any]:
        """Algorithm-specific metrics of the state (e.g. consensus distance), each of shape (R,)."""
        return {}

    @abstractmethod
    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        """Cumulative ``rounds``, ``messages`` and ``bits`` after each local step 1..n."""

    def comm_counts_at(self, steps: Any, n: int, d: int) -> dict[str, np.ndarray]:
        """:meth:`comm_counts` at the local steps ``steps`` only (1-based, in ``[1, n]``).
        Algorithms whose counts have a closed form override it to avoid ``n``-long arrays
        (the exact engine asks for record points only)."""
        at = np.asarray(steps, dtype=np.int64) - 1
        return {key: np.asarray(v)[at] for key, v in self.comm_counts(n, d).items()}

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description."""
        return {
            "kind": type(self).__name__,
            "workers": self.workers,
            "batch": self.batch,
            "step": self.step_size.describe(),
        }

    @property
    def label(self) -> str:
        """Display name: ``name`` if given, else built from the description."""
        if self.name:
            return self.name
        return self.default_label()

    def default_label(self) -> str:
        return f"{type(self).__name__}(P={self.workers}, b={self.batch})"

    def gamma(self, k: int) -> float:
        """Step size of local step ``k`` (after :meth:`prepare`)."""
        return self._gammas[k - 1]

    @staticmethod
    def validate_steps(n: int) -> int:
        return check_int("n (local steps)", n, low=1)


def algorithm_list(algorithms: Any) -> list[Algorithm]:
    """The algorithms of one engine call as a list (one :class:`Algorithm` or a sequence of
    them), checked the way every engine and the sweep preflight need: non-empty, every item an
    :class:`Algorithm`, labels unique (they key the results)."""
    algos = [algorithms] if isinstance(algorithms, Algorithm) else list(algorithms)
    if not algos:
        raise ValueError("algorithms must hold at least one algorithm, got an empty sequence")
    for a in algos:
        if not isinstance(a, Algorithm):
            raise TypeError(f"algorithms must be convkit Algorithms, got {type(a).__name__}")
    labels = [a.label for a in algos]
    if len(set(labels)) != len(labels):
        raise ValueError(f"algorithm labels must be unique (pass name=...), got {labels}")
    return algos
