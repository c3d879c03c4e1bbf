"""Mini-batch averaging, Local-SGD and one-shot averaging as one family.

Patel & Dieuleveut (2019, arXiv 1904.11325): ``P`` workers start from the same model and run
SGD with the same step sizes ``gamma_k`` on independent samples,

    theta_i <- theta_i - gamma_k g_i(theta_i),      g_i = mini-batch gradient of size b,

and after every communication step ``k`` of the schedule they all replace their model by the
average ``(1/P) sum_i theta_i``.  The schedule alone distinguishes

* mini-batch averaging (MBA, :class:`~convkit.schedules.EveryStep`): ``n`` rounds;
* Local-SGD (:class:`~convkit.schedules.Every`, :class:`~convkit.schedules.Rounds`, ...);
* one-shot averaging (OSA, :class:`~convkit.schedules.Final`): one round.

The estimator is the Polyak-Ruppert average of the worker mean (computed by the engine).
Communication accounting: a round is an all-reduce in which each of the ``P`` workers sends
its model (``d`` floats of ``float_bits`` bits) once: ``P`` messages and ``P d float_bits``
bits per round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import namespace_of
from ..schedule_spec import comm_from_spec
from ..schedules import CommSchedule, EveryStep, Final, StepSize
from ..validation import check_int
from .base import Algorithm
from .capabilities import Capabilities

__all__ = ["MBA", "OSA", "LocalSGD", "LocalState"]


@dataclass
class LocalState:
    """Workers' models ``theta`` (R, P, d) and their mean ``mean`` (R, d) after the last step."""

    theta: Any
    mean: Any


class LocalSGD(Algorithm):
    """Local-SGD with ``workers`` workers, step sizes ``step`` and communication ``comm``.

    Parameters
    ----------
    workers:
        Number of workers ``P``.
    step:
        Step-size schedule, e.g. ``PolyDecay(C=0.5, alpha=0.75)``.
    comm:
        Communication schedule (``EveryStep()`` = MBA, ``Final()`` = OSA, ``Every(H)``,
        ``Rounds(N)``, ...) or a short spec (``"mba"``, ``"osa"``, ``"every:10"``, ``"rounds:100"``).
    batch:
        Per-worker batch size ``b``.
    float_bits:
        Bits per transmitted float, for the bit accounting.
    """

    state_arrays = 1
    #: the Local-SGD recursion of :mod:`convkit.exact.local` (and of
    #: :mod:`convkit.exact.heterogeneous` with node optima), the fused segments of
    #: :mod:`convkit._fused_local`, the problems' compiled SGD step
    capabilities = Capabilities(
        exact={"least_squares": "local", "heterogeneous_least_squares": "local"},
        fused=("logistic", "least_squares"),
        kernels=("sgd-update",),
    )

    def __init__(
        self,
        workers: int,
        step: StepSize,
        comm: CommSchedule | str = "mba",
        batch: int = 1,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        super().__init__(workers, step, batch, name)
        self.comm = comm_from_spec(comm)
        self.comm.check_step(step)
        self.float_bits = check_int("float_bits", float_bits, low=1)

    def prepare(self, n: int) -> None:
        super().prepare(n)
        self.comm.validate(n)
        self._comm_mask = self.comm.mask(n)

    def init(self, theta0: Any, stream: Any) -> LocalState:
        xp = namespace_of(theta0)
        return LocalState(theta0, xp.mean(theta0, axis=1))

    def step(self, state: LocalState, oracle: Any, k: int, stream: Any) -> LocalState:
        oracle.sgd_update(state.theta, self.gamma(k), mean=state.mean)
        if self._comm_mask[k - 1] and self.workers > 1:
            state.theta[...] = state.mean[:, None, :]
        return state

    def models(self, state: LocalState) -> Any:
        return state.theta

    def worker_mean(self, state: LocalState) -> Any:
        return state.mean

    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        rounds = np.cumsum(self.comm.mask(n)).astype(np.int64)
        messages = rounds * self.workers
        return {"rounds": rounds, "messages": messages, "bits": messages * d * self.float_bits}

    def comm_counts_at(self, steps: Any, n: int, d: int) -> dict[str, np.ndarray]:
        rounds = self.comm.rounds_at(n, steps)
        messages = rounds * self.workers
        return {"rounds": rounds, "messages": messages, "bits": messages * d * self.float_bits}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "comm": self.comm.describe()}

    def default_label(self) -> str:
        return f"LocalSGD(P={self.workers}, b={self.batch}, {self.comm.label})"


def MBA(workers: int, step: StepSize, batch: int = 1, name: str | None = None) -> LocalSGD:
    """Mini-batch averaging: Local-SGD communicating after every local step."""
    return LocalSGD(workers, step, EveryStep(), batch, name=name or f"MBA(P={workers}, b={batch})")


def OSA(workers: int, step: StepSize, batch: int = 1, name: str | None = None) -> LocalSGD:
    """One-shot averaging: Local-SGD communicating once, after the last step."""
    return LocalSGD(workers, step, Final(), batch, name=name or f"OSA(P={workers}, b={batch})")


def local_steps_for(gradients: int, workers: int, batch: int) -> int:
    """Local steps ``n = T / (P b)`` for a budget of ``T`` stochastic gradients (must divide)."""
    T = check_int("gradients", gradients, low=1)
    per = workers * batch
    if T % per:
        raise ValueError(
            f"gradients must be a multiple of workers * batch = {per} (so that n = T / (P b) is "
            f"an integer), got {T}"
        )
    return T // per
