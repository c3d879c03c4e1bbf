"""Centralized SGD with compressed messages and error feedback (EF-SGD / mem-SGD).

Stich, Cordonnier, Jaggi 2018 ("Sparsified SGD with memory"), Karimireddy et al. 2019
("Error feedback fixes SignSGD"), with ``P`` workers and a server. At local step ``k`` every
worker ``i`` holds the common model ``x`` and its error memory ``e_i`` (starting at 0):

    p_i = gamma_k g_i(x) + e_i,    D_i = C(p_i),    e_i <- p_i - D_i,
    x <- x - (1/P) sum_i D_i        (the server averages and broadcasts; all apply it).

The memory is the compression error of a *step* (not of a model), so with a contraction
``delta`` it stays ``E||e||^2 = O(gamma^2)`` **[classic]**: ``||e|| <= sqrt(1 - delta)
||gamma g + e||`` gives ``||e|| <= sqrt(1 - delta) / (1 - sqrt(1 - delta)) gamma ||g||``
(bounded ``g``). Compare :class:`~convkit.algorithms.decentralized.DeepSqueeze`, whose memory
does not shrink with ``gamma``.

State arrays ``(R, P, d)``: the models (identical rows) and the memories. Communication:
every step is a round. With ``P > 1`` workers it has ``P`` uploads (worker -> server) of
``b_up = compressor.bits_per_message(d, float_bits)`` bits and ``P`` downloads (the server's
broadcast of the averaged update to every worker), ``2 P`` messages in all. The average of
``P`` compressed vectors is in general not a compressed vector of the same size (top-k: its
support is the union of the ``P`` supports), so a download is counted at the cheaper of two
exact encodings: the dense vector (``d float_bits`` bits) or the ``P`` uploads forwarded
(``P b_up`` bits, each worker averages them itself): ``b_down = min(d float_bits, P b_up)``.
With ``P = 1`` there is no server to go through: one message of ``b_up`` bits a step (the
compressed update), as before.
Metrics (iterate ``"state"``): ``memory = (1/P) sum_i ||e_i||^2`` and
``grad_norm2 = ||grad f(x)||^2`` (when the problem has a full gradient); no consensus
distance (the models are identical).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..backend import namespace_of
from ..compression import Compressor, get_compressor
from ..schedules import Constant, StepSize
from ..validation import Parameter, check_int, instance
from .base import FLOAT_BITS, Algorithm
from .capabilities import Capabilities

__all__ = ["EFState", "ErrorFeedbackSGD"]


@dataclass
class EFState:
    """Models ``x`` (R, P, d) with identical rows, error memories ``e`` (R, P, d)."""

    x: Any
    e: Any


class ErrorFeedbackSGD(Algorithm):
    """Error-feedback SGD through a server (see the module docstring).

    Parameters
    ----------
    workers:
        Number of workers ``P`` (``>= 1``).
    step:
        Step-size schedule ``gamma_k``.
    compressor:
        A :class:`~convkit.compression.Compressor` or a spec such as ``"top-k:0.1"``.
    batch:
        Per-worker batch size ``b``.
    float_bits:
        Bits per uncompressed float (bit accounting).
    """

    state_arrays = 2
    #: no exact model, no fused segments: step by step
    capabilities = Capabilities()
    state_metrics = ("memory", "grad_norm2")
    gradient_metrics = ("grad_norm2",)

    parameters: ClassVar[dict[str, Parameter]] = {
        "compressor": instance(
            "a convkit Compressor or a spec string such as 'top-k:0.1'",
            wrong=(None, 5, "no-such-compressor:3"),
        ),
        "float_bits": FLOAT_BITS,
    }

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Four workers, a constant step, top-k keeping half the coordinates."""
        return {"workers": 4, "step": Constant(0.05), "compressor": "top-k:0.5"}

    def __init__(
        self,
        workers: int,
        step: StepSize,
        compressor: Compressor | str,
        batch: int = 1,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        super().__init__(workers, step, batch, name)
        if compressor is None or not isinstance(compressor, (Compressor, str)):
            raise TypeError(
                f"compressor must be a convkit Compressor or a spec string, got {compressor!r}"
            )
        self.compressor = get_compressor(compressor)
        self.float_bits = self.checked("float_bits", float_bits)

    def init(self, theta0: Any, stream: Any) -> EFState:
        xp = namespace_of(theta0)
        return EFState(theta0, xp.zeros_like(theta0))

    def step(self, state: EFState, oracle: Any, k: int, stream: Any) -> EFState:
        xp = namespace_of(state.x)
        Pm = oracle.grad(state.x)
        Pm *= self.gamma(k)
        Pm += state.e  # p = gamma g + e
        D = self.compressor.compress(Pm, stream)
        Pm -= D  # e = p - C(p)
        state.e = Pm
        state.x -= xp.mean(D, axis=1, keepdims=True)
        return state

    def models(self, state: EFState) -> Any:
        return state.x

    def extra_metrics(self, state: EFState, problem: Any) -> dict[str, Any]:
        xp = namespace_of(state.e)
        out = {"memory": xp.mean(xp.sum(state.e * state.e, axis=-1), axis=1)}
        try:
            g = problem.grad(state.x[:, 0, :])
        except NotImplementedError:
            return out
        out["grad_norm2"] = xp.sum(g * g, axis=-1)
        return out

    def bits_per_message(self, d: int) -> int:
        return int(self.compressor.bits_per_message(d, self.float_bits))

    def broadcast_bits(self, d: int) -> int:
        """Bits of one download of the averaged update (``P > 1``):
        ``min(d float_bits, P bits_per_message(d))``; 0 for ``P = 1`` (no server)."""
        if self.workers == 1:
            return 0
        d = check_int("d", d, low=1)
        return int(min(d * self.float_bits, self.workers * self.bits_per_message(d)))

    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        """Cumulative rounds, messages and bits after steps ``1..n``: per step ``P`` uploads
        and, with ``P > 1``, ``P`` downloads of :meth:`broadcast_bits` bits."""
        n = self.validate_steps(n)
        rounds = np.arange(1, n + 1, dtype=np.int64)
        down = 0 if self.workers == 1 else self.workers
        messages = rounds * (self.workers + down)
        per_step_bits = self.workers * self.bits_per_message(d) + down * self.broadcast_bits(d)
        return {
            "rounds": rounds,
            "messages": messages,
            "bits": rounds * np.int64(per_step_bits),
        }

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "compressor": self.compressor.name,
        }

    def default_label(self) -> str:
        """``ErrorFeedbackSGD(P=workers, compressor, key=value..., b=batch)``: the settings
        marked shown in the declaration (:meth:`shown_label`; none at present) after the
        compressor."""
        return (
            f"ErrorFeedbackSGD(P={self.workers}, {self.compressor.name}{self.shown_label()}, "
            f"b={self.batch})"
        )
