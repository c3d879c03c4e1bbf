"""SCAFFOLD: Local-SGD with control variates that remove the drift of heterogeneous nodes.

Karimireddy, Kale, Mohri, Reddi, Stich, Suresh 2020, "SCAFFOLD: Stochastic Controlled
Averaging for Federated Learning" (ICML), Algorithm 1 with full participation and the control
variates of option II. The server holds ``x`` and ``c``, node ``i`` its control variate
``c_i`` (all zero at the start). A round starts from ``y_i = x`` on every node; each local step
``k`` of the round is

    y_i <- y_i - gamma_k (g_i(y_i) - c_i + c),

and at the round's end (a communication step of the schedule)

    c_i^+ = c_i - c + (x - y_i) / Gamma,      Gamma = sum of the round's gamma_k,
    x <- x + eta_g (1/P) sum_i (y_i - x),     c <- (1/P) sum_i c_i^+,   c_i <- c_i^+,

and every node restarts from ``y_i = x``. ``Gamma = K gamma`` for ``K`` steps of a constant
step (the paper's ``K eta_l``); with a decaying step it is the round's total step, so that
``(x - y_i) / Gamma`` is still the node's mean corrected gradient over the round. The paper's
``c <- c + (1/P) sum_i (c_i^+ - c_i)`` is the same number, since ``c = (1/P) sum_i c_i`` holds
at every round (both start at zero).

Exact identities (derived here; ``tests/test_scaffold.py``): because ``(1/P) sum_i c_i = c``,
the correction ``-c_i + c`` averages to zero over the nodes, so the nodes' mean takes the
step ``-gamma_k (1/P) sum_i g_i(y_i)``, exactly that of Local-SGD. Hence, with ``eta_g = 1``:

* communicating after every step, every node evaluates its gradient at ``x``: SCAFFOLD is
  mini-batch averaging (MBA) on any problem, heterogeneous or not;
* until the first round ends (``c = c_i = 0``) it is Local-SGD step for step;
* with one node (``c_1 = c``) it is SGD for any schedule.

These hold to rounding (the correction is computed, not cancelled). With deterministic
gradients and node optima or Hessians that differ, Local-SGD with ``K > 1`` local steps stalls
at a drift floor while SCAFFOLD converges to ``theta*``.

Communication accounting, in Local-SGD's convention (:mod:`convkit.algorithms.local`: a
round is an all-reduce in which each node sends its message once): each node sends its model
``y_i`` and its control variate ``c_i^+`` (``2 d`` floats of ``float_bits`` bits), which gives
every node ``(1/P) sum_i y_i`` and ``c``, hence ``x``: ``P`` messages and
``2 P d float_bits`` bits per round, twice Local-SGD's bits (the paper's "twice the
communication"). A server that receives and then broadcasts ``(x, c)`` moves the same amount
again downstream; that direction is not counted by default, as it is not for Local-SGD;
``downlink=True`` counts it too: ``2 P`` messages and ``4 P d float_bits`` bits per round.

The estimator the engine records is the nodes' mean model (``x`` right after a round).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from ..backend import namespace_of
from ..schedule_spec import comm_from_spec
from ..schedules import CommSchedule, StepSize
from ..validation import Parameter, flag, real
from .base import FLOAT_BITS, Algorithm
from .capabilities import AlgorithmIdentity, Capabilities
from .local import COMM, LocalSGD, mba_of

__all__ = ["SCAFFOLD", "ScaffoldState"]


@dataclass
class ScaffoldState:
    """Node models ``y`` (R, P, d), node control variates ``c_nodes`` (R, P, d), the server's
    model ``x`` (R, d) and control variate ``c`` (R, d)."""

    y: Any
    c_nodes: Any
    x: Any
    c: Any


class SCAFFOLD(Algorithm):
    """SCAFFOLD (option II, full participation) with ``workers`` nodes, local step sizes
    ``step``, communication ``comm`` and server step ``server_step`` (module docstring).

    Parameters
    ----------
    workers:
        Number of nodes ``P``.
    step:
        Local step-size schedule ``gamma_k``.
    comm:
        Communication schedule (rounds), as for :class:`~convkit.algorithms.local.LocalSGD`
        (``"every:10"``, ``Rounds(N)``, ``EveryStep()``, ...).
    batch:
        Per-node batch size ``b``.
    server_step:
        Global step size ``eta_g > 0`` (1: the server takes the nodes' mean).
    float_bits:
        Bits per transmitted float, for the bit accounting.
    downlink:
        Count the server's broadcast of ``(x, c)`` as well (``P`` more messages of ``2 d``
        floats per round).
    """

    state_arrays = 2
    #: the exact model of node Hessians and optima (convkit.exact.scaffold_nodes); no fused
    #: segments: step by step (its gradients through the problem's oracle, compiled where the
    #: problem has a kernel)
    capabilities = Capabilities(exact={"heterogeneous_least_squares": "scaffold"})
    identities = (
        AlgorithmIdentity(
            "communicating after every step with server_step = 1 is mini-batch averaging",
            {"comm": "mba", "server_step": 1.0},
            mba_of,
            rtol=1e-9,
            source="module docstring: the corrections average to zero over the nodes (to "
            "rounding: the correction is computed, not cancelled)",
        ),
    )

    parameters: ClassVar[dict[str, Parameter]] = {
        "comm": replace(COMM, default="every:10"),
        "server_step": real(low=0, low_inclusive=False, default=1.0, shown="changed",
                            doc="global step size eta_g (1: the server takes the nodes' mean)"),
        "float_bits": FLOAT_BITS,
        "downlink": flag(False, doc="count the server's broadcast of (x, c) as well"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Local-SGD's example (a round every two steps) with server step 0.5."""
        return {**LocalSGD.example_settings(), "server_step": 0.5}

    def __init__(
        self,
        workers: int,
        step: StepSize,
        comm: CommSchedule | str = "every:10",
        batch: int = 1,
        name: str | None = None,
        server_step: float = 1.0,
        float_bits: int = 32,
        downlink: bool = False,
    ) -> None:
        super().__init__(workers, step, batch, name)
        self.comm = comm_from_spec(comm)
        self.comm.check_step(step)
        self.server_step = self.checked("server_step", server_step)
        self.float_bits = self.checked("float_bits", float_bits)
        self.downlink = self.checked("downlink", downlink)

    def prepare(self, n: int) -> None:
        super().prepare(n)
        self.comm.validate(n)
        mask = self.comm.mask(n)
        self._comm_mask = mask.tolist()
        # 1 / Gamma at each round's last step: Gamma = sum of gamma_k over the round's steps
        gam = np.asarray(self._gammas, dtype=np.float64)
        inv = [0.0] * n
        start = 0
        for k in np.flatnonzero(mask).tolist():
            total = float(np.sum(gam[start : k + 1]))
            inv[k] = 1.0 / total if total > 0 else 0.0
            start = k + 1
        self._inv_round_step = inv

    def init(self, theta0: Any, stream: Any) -> ScaffoldState:
        xp = namespace_of(theta0)
        x = xp.mean(theta0, axis=1)
        return ScaffoldState(theta0, xp.zeros_like(theta0), x, xp.zeros_like(x))

    def step(self, state: ScaffoldState, oracle: Any, k: int, stream: Any) -> ScaffoldState:
        gamma = self.gamma(k)
        g = oracle.grad(state.y)
        state.y -= gamma * (g - state.c_nodes + state.c[:, None, :])
        if self._comm_mask[k - 1]:
            xp = namespace_of(state.y)
            c_new = (
                state.c_nodes
                - state.c[:, None, :]
                + (state.x[:, None, :] - state.y) * self._inv_round_step[k - 1]
            )
            mean_y = xp.mean(state.y, axis=1)
            if self.server_step == 1.0:
                state.x = mean_y
            else:
                state.x = state.x + self.server_step * (mean_y - state.x)
            state.c = xp.mean(c_new, axis=1)
            state.c_nodes = c_new
            state.y[...] = state.x[:, None, :]
        return state

    def models(self, state: ScaffoldState) -> Any:
        return state.y

    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        rounds = np.cumsum(self.comm.mask(n)).astype(np.int64)
        return self._counts(rounds, d)

    def comm_counts_at(self, steps: Any, n: int, d: int) -> dict[str, np.ndarray]:
        return self._counts(self.comm.rounds_at(n, steps), d)

    def _counts(self, rounds: np.ndarray, d: int) -> dict[str, np.ndarray]:
        messages = rounds * self.workers * (2 if self.downlink else 1)
        return {"rounds": rounds, "messages": messages, "bits": messages * 2 * d * self.float_bits}

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "comm": self.comm.describe(),
        }

    def default_label(self) -> str:
        return f"SCAFFOLD(P={self.workers}, b={self.batch}, {self.comm.label}{self.shown_label()})"
