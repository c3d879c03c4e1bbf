"""Mini-batch averaging, Local-SGD and one-shot averaging as one family.

Patel & Dieuleveut (2019, arXiv 1904.11325): ``P`` workers start from the same model and run
SGD with the same step sizes ``gamma_k`` on independent samples,

    theta_i <- theta_i - gamma_k g_i(theta_i),      g_i = mini-batch gradient of size b,

and after every communication step ``k`` of the schedule they all replace their model by the
average ``(1/P) sum_i theta_i``.  The schedule alone distinguishes

* mini-batch averaging (MBA, :class:`~convkit.schedules.EveryStep`): ``n`` rounds;
* Local-SGD (:class:`~convkit.schedules.Every`, :class:`~convkit.schedules.Rounds`, ...);
* one-shot averaging (OSA, :class:`~convkit.schedules.Final`): one round.

The round's end is a *server update* (:mod:`convkit.algorithms.server`), an optax-style
transform of the pseudo-gradient ``g = x - (1/P) sum_i theta_i`` (``x``: the model the round
started from) after which every worker restarts from ``x + u``.  Local-SGD's own is
:func:`~convkit.algorithms.server.average` (``u = -g``: the workers' mean, computed as above
without ``x``); a variant overrides :meth:`LocalSGD.server_update` (FedAvg with server
momentum and FedAdam, :mod:`convkit.algorithms.federated`), which withdraws Local-SGD's exact
model and fused segments (:mod:`convkit.algorithms.capabilities`).

The estimator is the Polyak-Ruppert average of the worker mean (computed by the engine).
Communication accounting: a round is an all-reduce in which each of the ``P`` workers sends
its model (``d`` floats of ``float_bits`` bits) once: ``P`` messages and ``P d float_bits``
bits per round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..backend import namespace_of
from ..schedule_spec import comm_from_spec
from ..schedules import CommSchedule, Constant, EveryStep, Final, StepSize
from ..validation import Parameter, check_int, instance
from .base import FLOAT_BITS, Algorithm
from .capabilities import UPDATE_METHODS, AlgorithmIdentity, Capabilities
from .server import ServerUpdate, average

__all__ = ["MBA", "OSA", "LocalSGD", "LocalState", "ServerState"]


@dataclass
class LocalState:
    """Workers' models ``theta`` (R, P, d) and their mean ``mean`` (R, d) after the last step."""

    theta: Any
    mean: Any


@dataclass
class ServerState(LocalState):
    """:class:`LocalState` plus the server's model ``x`` (R, d), the model the round started
    from, and the state of the server update (a tree of (R, d) arrays, or None)."""

    x: Any = None
    server: Any = None


#: the communication schedule of the Local-SGD family and SCAFFOLD (parsed by
#: :func:`convkit.schedule_spec.comm_from_spec`)
COMM = instance(
    "a CommSchedule or a spec such as 'every:10', 'rounds:100', 'mba', 'osa'",
    default="mba",
    wrong=("no-such-schedule:3", 1.5),
)


def mba_of(algo: Algorithm) -> LocalSGD:
    """Mini-batch averaging with ``algo``'s workers, step sizes and batch (the reference of
    the identities that end at MBA)."""
    return MBA(algo.workers, algo.step_size, algo.batch)


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
    identities = (
        AlgorithmIdentity(
            "one local step per round (every:1) is mini-batch averaging",
            {"comm": "every:1"},
            mba_of,
            source="the schedules' masks: Every(1) communicates after every step, as EveryStep",
        ),
    )
    #: the update is also the server's transform of the round (overriding it withdraws the
    #: exact model and the fused segments, which average)
    update_methods = (*UPDATE_METHODS, "server_update")
    parameters: ClassVar[dict[str, Parameter]] = {
        "comm": COMM,
        "float_bits": FLOAT_BITS,
    }

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Four workers, a constant step, a round every two steps, batch 2."""
        return {"workers": 4, "step": Constant(0.05), "comm": "every:2", "batch": 2}

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
        self.float_bits = self.checked("float_bits", float_bits)

    def server_update(self) -> ServerUpdate:
        """The server's transform of the round's pseudo-gradient
        (:mod:`convkit.algorithms.server`): :func:`~convkit.algorithms.server.average`, the
        workers' mean.  A variant of the family overrides this method only."""
        return average()

    def prepare(self, n: int) -> None:
        super().prepare(n)
        self.comm.validate(n)
        self._comm_mask = self.comm.mask(n)
        self._server = self.server_update()

    def init(self, theta0: Any, stream: Any) -> LocalState:
        xp = namespace_of(theta0)
        mean = xp.mean(theta0, axis=1)
        server = self.server_update()
        if server.averages:
            return LocalState(theta0, mean)
        x = xp.asarray(mean, copy=True)
        return ServerState(theta0, mean, x, server.init(x))

    def step(self, state: LocalState, oracle: Any, k: int, stream: Any) -> LocalState:
        oracle.sgd_update(state.theta, self.gamma(k), mean=state.mean)
        if self._comm_mask[k - 1]:
            if self._server.averages:
                if self.workers > 1:
                    state.theta[...] = state.mean[:, None, :]
            else:
                self._server_round(state)
        return state

    def _server_round(self, state: ServerState) -> None:
        """The server update at a round's end (:mod:`convkit.algorithms.server`): ``g = x -
        mean``, ``(u, s) = update(g, s)``, ``x <- mean + (u + g)`` (= ``x + u``), every
        worker restarts from ``x``."""
        g = state.x - state.mean
        u, state.server = self._server.update(g, state.server)
        state.x = state.mean + (u + g)
        state.theta[...] = state.x[:, None, :]
        state.mean[...] = state.x

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
        out = {**super().describe(), "comm": self.comm.describe()}
        server = self.server_update()
        if not server.averages:
            out["server"] = server.describe()
        return out

    def default_label(self) -> str:
        shown = self.shown_label()
        return f"{type(self).__name__}(P={self.workers}, b={self.batch}, {self.comm.label}{shown})"


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
