"""Federated variants of Local-SGD: a server update on the round's pseudo-gradient.

Each class is Local-SGD's rounds (:class:`~convkit.algorithms.local.LocalSGD`: ``P`` workers
run SGD from the server's model ``x``, step sizes ``gamma_k``, rounds of the communication
schedule) with its own :meth:`~convkit.algorithms.local.LocalSGD.server_update`, an
optax-style transform of the pseudo-gradient ``g = x - (1/P) sum_i y_i``
(:mod:`convkit.algorithms.server`), and one declaration of what it runs on: overriding the
server update withdraws Local-SGD's exact model and fused segments, so the variants run step
by step in :func:`convkit.simulate` (the problems' compiled SGD step).  FedAvgM declares its
own exact model on least squares (:mod:`convkit.exact.server_momentum`: the server update is
linear); the exact engines refuse FedAdam (its update is not), saying that it declares no exact
model.  Communication is counted as for
Local-SGD: after the all-reduce every worker holds the mean and applies the same
deterministic server update, so no broadcast is needed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from ..schedules import CommSchedule, StepSize
from ..validation import Parameter, real
from .capabilities import AlgorithmIdentity, Capabilities
from .local import COMM, LocalSGD
from .server import ServerUpdate, chain, scale, scale_by_fedadam, trace

__all__ = ["FedAdam", "FedAvgM"]

#: Local-SGD's compiled SGD step, no exact model, no fused segments (FedAdam's declaration)
STEP_BY_STEP = Capabilities(kernels=("sgd-update",))


def _local_sgd_of(algo: LocalSGD) -> LocalSGD:
    return LocalSGD(algo.workers, algo.step_size, algo.comm, algo.batch)


class FedAvgM(LocalSGD):
    """FedAvg with server momentum (Hsu, Qi & Brown 2019, arXiv 1909.06335; Reddi et al.
    2021's FedAvgM): at each round's end, from ``v = 0``,

        v <- beta v + g,      x <- x - server_lr v,      g = x - (1/P) sum_i y_i,

    ``chain(trace(beta), scale(-server_lr))``; ``beta = 0``, ``server_lr = 1`` is Local-SGD."""

    #: its exact model (:mod:`convkit.exact.server_momentum`); step by step otherwise
    capabilities = Capabilities(exact={"least_squares": "server_momentum"}, kernels=("sgd-update",))
    identities = (
        AlgorithmIdentity("beta = 0, server_lr = 1 is Local-SGD", {"beta": 0.0, "server_lr": 1.0},
                          _local_sgd_of, source="then v = g and x - v is the workers' mean"),
    )  # fmt: skip
    parameters: ClassVar[dict[str, Parameter]] = {
        "comm": replace(COMM, default="every:10"),
        "beta": real(low=0, high=1, high_inclusive=False, default=0.9, shown=True,
                     doc="server momentum (0 with server_lr 1: Local-SGD)"),
        "server_lr": real(low=0, low_inclusive=False, default=1.0, shown=True,
                          doc="server step size"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Local-SGD's example with momentum 0.5 and server step 0.8."""
        return {**super().example_settings(), "beta": 0.5, "server_lr": 0.8}

    def __init__(self, workers: int, step: StepSize, comm: CommSchedule | str = "every:10",
                 beta: float = 0.9, server_lr: float = 1.0, batch: int = 1,
                 name: str | None = None, float_bits: int = 32) -> None:  # fmt: skip
        super().__init__(workers, step, comm, batch, name, float_bits)
        self.beta = self.checked("beta", beta)
        self.server_lr = self.checked("server_lr", server_lr)

    def server_update(self) -> ServerUpdate:
        return chain(trace(self.beta), scale(-self.server_lr))


class FedAdam(LocalSGD):
    """FedAdam (Reddi et al. 2021, "Adaptive Federated Optimization", ICLR, Algorithm 2):
    server Adam on the pseudo-gradient, from ``m = 0``, ``v = tau^2``, without bias correction,

        m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g^2,
        x <- x - server_lr m / (sqrt(v) + tau),

    ``tau`` the degree of adaptivity (provenance:
    :func:`~convkit.algorithms.server.scale_by_fedadam`)."""

    capabilities = STEP_BY_STEP
    parameters: ClassVar[dict[str, Parameter]] = {
        "comm": replace(COMM, default="every:10"),
        "server_lr": real(low=0, low_inclusive=False, default=0.1, shown=True,
                          doc="server step size"),
        "beta1": real(low=0, high=1, high_inclusive=False, default=0.9, shown=True,
                      doc="decay of the first moment m"),
        "beta2": real(low=0, high=1, high_inclusive=False, default=0.99, shown=True,
                      doc="decay of the second moment v"),
        "tau": real(low=0, low_inclusive=False, default=1e-3, shown=True,
                    doc="degree of adaptivity tau (v_0 = tau^2)"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Local-SGD's example with server step 0.05, beta1 0.8 and tau 0.01."""
        return {**super().example_settings(), "server_lr": 0.05, "beta1": 0.8, "tau": 0.01}

    def __init__(self, workers: int, step: StepSize, comm: CommSchedule | str = "every:10",
                 server_lr: float = 0.1, beta1: float = 0.9, beta2: float = 0.99,
                 tau: float = 1e-3, batch: int = 1, name: str | None = None,
                 float_bits: int = 32) -> None:  # fmt: skip
        super().__init__(workers, step, comm, batch, name, float_bits)
        self.server_lr = self.checked("server_lr", server_lr)
        self._adam = scale_by_fedadam(
            self.checked("beta1", beta1), self.checked("beta2", beta2), self.checked("tau", tau)
        )
        self.beta1, self.beta2, self.tau = self._adam.b1, self._adam.b2, self._adam.tau

    def server_update(self) -> ServerUpdate:
        return chain(self._adam, scale(-self.server_lr))
