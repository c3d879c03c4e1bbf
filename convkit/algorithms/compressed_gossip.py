"""Compressed gossip with a consensus step: CHOCO-SGD and DeepSqueeze.

The two algorithms of the decentralized family (:mod:`convkit.algorithms.decentralized`, whose
conventions, shapes, communication accounting and metrics they share) that damp the mixing
of compressed messages by a consensus step in ``(0, 1]`` (CHOCO-SGD's ``gamma_c``,
DeepSqueeze's ``eta``) and accept any compressor, biased ones included. With ``H = X - gamma
G(X)`` and ``W_c = (1 - c) I + c W``:

* :class:`CHOCOSGD` (Koloskova, Stich, Jaggi 2019), ``c = gamma_c``: ``order="paper"``
  (default): ``X_hat <- X_hat + C(H - X_hat)``, ``X <- H + gamma_c (W - I) X_hat``;
  ``order="reference_code"`` (the authors' public code, the theory note):
  ``X <- H + gamma_c (W - I) X_hat``, ``X_hat <- X_hat + C(X - X_hat)``. The public copies
  ``X_hat`` start at ``x_0`` or 0 (``copies_start``).
* :class:`DeepSqueeze` (Tang et al. 2019, arXiv 1907.07346, rule of the public
  implementations), ``c = eta``: ``V = C(H + Delta)``, ``Delta <- H + Delta - V``,
  ``X <- H + eta (W - I) V``.

Both keep ``mean(X_{t+1}) = mean(X_t) - gamma mean(G_t)`` whatever the compressor
(``1^T (W - I) = 0``) **[derived]** (exact statements and their sources:
``shared/theory/decentralized.md``; the identities are tested in
``tests/test_decentralized.py``). With :class:`~convkit.compression.TopK` on NumPy float64
blocks the compression and the lines after it run as one compiled pass (the ``topk_*``
kernels of :mod:`convkit._kernels`), with the same numbers. The names are re-exported by
:mod:`convkit.algorithms.decentralized`, :mod:`convkit.algorithms` and :mod:`convkit`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._kernels import (
    topk_choco_copies_mix_update,
    topk_choco_copies_update,
    topk_choco_mix_update,
    topk_choco_update,
    topk_deepsqueeze_mix_update,
    topk_deepsqueeze_update,
)
from ..backend import namespace_of
from ..compression import Compressor
from ..schedules import StepSize
from ..topology import Topology
from ..validation import Parameter, options, real
from .capabilities import Capabilities
from .decentralized import COPIES_STARTS, DecentralizedAlgorithm, _copies, _mean_sq_norm

__all__ = ["CHOCOSGD", "DeepSqueeze"]

#: the two published orders of CHOCO-SGD (:class:`CHOCOSGD`)
CHOCO_ORDERS = ("paper", "reference_code")


# --------------------------------------------------------------------------- states


@dataclass
class CHOCOState:
    """CHOCO-SGD: models ``x`` and the public copies ``x_hat``."""

    x: Any
    x_hat: Any


@dataclass
class DeepSqueezeState:
    """DeepSqueeze: models ``x``, error memory ``delta`` and the last messages ``v``
    (``v`` is kept for inspection and the identity tests; zeros before the first step)."""

    x: Any
    delta: Any
    v: Any


# --------------------------------------------------------------------------- CHOCO


class CHOCOSGD(DecentralizedAlgorithm):
    """CHOCO-SGD (Koloskova, Stich, Jaggi 2019, "Decentralized stochastic optimization and
    gossip algorithms with compressed communication"), in one of its two published orders.

    ``order="paper"`` (default; the paper's CHOCO-SGD pseudo-code):

        ``h_i = x_i - gamma g_i(x_i)``, ``q_i = C(h_i - x_hat_i)``,
        ``x_hat_j <- x_hat_j + q_j`` (for itself and its neighbours, everywhere),
        ``x_i <- h_i + gamma_c sum_j W_ij (x_hat_j - x_hat_i)`` (the *updated* copies).

    ``order="reference_code"`` (the authors' public convex code, epfml/ChocoSGD
    ``convex_code``, and the rule of ``shared/theory/decentralized.md``): mixes with the *old*
    copies, then compresses the new model:

        ``h_i = x_i - gamma g_i(x_i)``, ``x_i <- h_i + gamma_c sum_j W_ij (x_hat_j - x_hat_i)``,
        ``q_i = C(x_i - x_hat_i)``, ``x_hat_i <- x_hat_i + q_i`` (everywhere).

    The two are different trajectories. With ``C = identity`` and ``gamma_c = 1`` the paper's
    order is step-then-gossip D-PSGD (``X_hat = H``, ``X <- W H``), the reference code's is
    gossip-then-step D-PSGD (``X_hat_t = X_t``, ``X <- W X - gamma G``) **[derived]**; both
    keep ``mean(X_{t+1}) = mean(X_t) - gamma mean(G_t)``.

    ``copies_start`` is the start ``x_hat_0`` of the public copies: ``"x0"`` (default; the
    common starting model, which every node knows, as in the public convex code) or
    ``"zero"`` (as in the other public codes, the deep-learning ones). With the engine's
    default ``theta0 = 0`` the two coincide.

    Which figure used which: the committed ``figures/decentralized_bits.*`` (commit c1fb942)
    ran the ``"reference_code"`` order, the only rule then, with ``theta0 = 0`` (so
    ``x_hat_0 = x_0 = 0``: both starts); a regeneration with the default runs the paper's
    order. The library checks ``choco.rate``, ``choco.rate_weighted`` and
    ``choco.average_dynamics`` (:mod:`convkit.bounds.decentralized`) run the paper's order
    with ``x_hat_0 = x_0``. The comparisons with the authors' code
    (``tests/test_decentralized.py``: the per-node loop of
    ``benchmarks/naive_decentralized.py``; ``tests/test_dcd_ecd_reference.py`` covers DCD
    and ECD) use ``"reference_code"``.

    Works with biased contractive compressors at any compression ratio once ``gamma_c`` is
    small enough (:func:`~convkit.algorithms.gossip.tune_consensus_step` picks it by simulating pure gossip); strongly
    convex rate **[classic]** ``O(1/(P T) + 1/(T delta^2 omega)^2)`` for the weighted average
    with weights ``(t + a)^2`` (record it with ``simulate(..., weight_shift=...)``, iterate
    ``"wavg2"``). ``gamma_c`` must lie in ``(0, 1]``.

    Parameters
    ----------
    topology, step, compressor:
        Graph, step-size schedule and compressor (see :class:`~convkit.algorithms.decentralized.DecentralizedAlgorithm`).
    consensus_step:
        ``gamma_c`` in ``(0, 1]``.
    order:
        ``"paper"`` (default) or ``"reference_code"``.
    copies_start:
        ``"x0"`` (default) or ``"zero"``.
    """

    state_arrays = 2
    state_metrics = ("consensus", "grad_norm2", "replica_gap")
    #: the exact CHOCO-SGD recursion of :mod:`convkit.exact.compressed` (identity and rand-k
    #: compressors, static topologies); the compiled SGD step and fused top-k updates
    capabilities = Capabilities(
        exact={"least_squares": "choco"}, kernels=("sgd-update", "topk-choco")
    )
    parameters: ClassVar[dict[str, Parameter]] = {
        "consensus_step": real(low=0.0, high=1.0, low_inclusive=False, symbol="gamma_c",
                               shown=True, doc="consensus step size gamma_c"),
        "order": options(*CHOCO_ORDERS, default="paper", shown="changed",
                         doc="the paper's order or the reference code's"),
        "copies_start": options(*COPIES_STARTS, default="x0", shown="changed",
                                doc="start of the copies x_hat"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """The family's example with consensus step 0.3, the reference code's order and
        copies starting at zero."""
        return {**super().example_settings(), "consensus_step": 0.3,
                "order": "reference_code", "copies_start": "zero"}  # fmt: skip

    def __init__(
        self,
        topology: Topology,
        step: StepSize,
        compressor: Compressor | str,
        consensus_step: float,
        *,
        order: str = "paper",
        copies_start: str = "x0",
        batch: int = 1,
        workers: int | None = None,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        self.consensus_step = self.checked("consensus_step", consensus_step)
        self.order = self.checked("order", order)
        self.copies_start = self.checked("copies_start", copies_start)
        super().__init__(
            topology,
            step,
            compressor,
            batch=batch,
            workers=workers,
            name=name,
            float_bits=float_bits,
        )
        self._W_gc = self.topology.W_eta(self.consensus_step)

    def init(self, theta0: Any, stream: Any) -> CHOCOState:
        return CHOCOState(theta0, _copies(theta0, self.copies_start))

    def step(self, state: CHOCOState, oracle: Any, k: int, stream: Any) -> CHOCOState:
        X = oracle.sgd_update(state.x, self.gamma(k))  # h = x - gamma g
        Xh = state.x_hat
        kk = self._fused_topk(X)
        csr = None if kk is None else self._W_gc.sparse_block_csr(X, k - 1, self.mixing)
        if self.order == "paper":
            # x_hat <- x_hat + C(h - x_hat), then x <- h + gamma_c (W - I) x_hat (new copies)
            if csr is not None and topk_choco_copies_mix_update(X, Xh, kk, csr):  # all 4 lines
                state.x = X
                return state
            if kk is None or not topk_choco_copies_update(X, Xh, kk):  # fused: the 2 lines
                D = X - Xh
                Xh += self._compress(D, stream)
            X += self._W_gc.mix(Xh, t=k - 1, method=self.mixing)
            X -= Xh
            state.x = X
            return state
        # gamma_c (W - I) X_hat = W_gc X_hat - X_hat with W_gc = (1 - gamma_c) I + gamma_c W
        if csr is not None and topk_choco_mix_update(X, Xh, kk, csr):  # mixing and lines below
            state.x = X
            return state
        M = self._W_gc.mix(Xh, t=k - 1, method=self.mixing)
        if kk is not None and topk_choco_update(X, M, Xh, kk):  # the lines below, one pass
            state.x = X
            return state
        X += M
        X -= Xh
        D = X - Xh
        Xh += self._compress(D, stream)
        state.x = X
        return state

    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        return self._copy_holder_counts(n, d)

    def _memory_metrics(self, state: CHOCOState) -> dict[str, Any]:
        return {"replica_gap": _mean_sq_norm(state.x_hat - state.x)}


# --------------------------------------------------------------------------- DeepSqueeze


class DeepSqueeze(DecentralizedAlgorithm):
    """DeepSqueeze (Tang, Lian, Qiu, Yuan, Zhang, Zhang, Liu 2019, arXiv 1907.07346), per node
    (rule of the public implementations, ``shared/theory/decentralized.md``):

    1. ``g_i`` = stochastic gradient at ``x_i``;   2. ``h_i = x_i - gamma g_i``;
    3. ``v_i = C(h_i + delta_i)``;   4. ``delta_i <- h_i + delta_i - v_i``;
    5. send ``v_i`` to every neighbour;   6. ``x_i <- h_i + eta sum_j (W_ij - [i == j]) v_j``.

    ``eta`` in ``(0, 1]`` is the consensus step (``W_eta = (1 - eta) I + eta W``); the error
    memory ``delta`` starts at 0 (there are no public copies, so no ``copies_start``; every
    committed DeepSqueeze figure uses this rule and start). Claimed rate **[paper, from a
    summary of the paper, not its text]** ``E||grad f(x_bar)||^2 <~ 1/sqrt(P T) + C_2 / T``
    for ``gamma <= 1 / (3 L sqrt(C_2))``. The compressed quantity is a
    model, so the memory does not shrink with ``gamma`` **[derived]**. Any compressor is
    accepted: a non-contractive one (scaled rand-k) is allowed so that its divergence can be
    shown.
    """

    state_arrays = 3
    state_metrics = ("consensus", "grad_norm2", "memory")
    #: the exact DeepSqueeze recursion of :mod:`convkit.exact.compressed` (identity and
    #: rand-k compressors, static topologies); the compiled SGD step and fused top-k updates
    capabilities = Capabilities(
        exact={"least_squares": "deep_squeeze"}, kernels=("sgd-update", "topk-deepsqueeze")
    )
    parameters: ClassVar[dict[str, Parameter]] = {
        "eta": real(
            low=0.0, high=1.0, low_inclusive=False, shown=True, doc="consensus step size eta"
        ),
    }

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """The family's example with eta 0.2."""
        return {**super().example_settings(), "eta": 0.2}

    def __init__(
        self,
        topology: Topology,
        step: StepSize,
        compressor: Compressor | str,
        eta: float,
        *,
        batch: int = 1,
        workers: int | None = None,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        self.eta = self.checked("eta", eta)
        super().__init__(
            topology,
            step,
            compressor,
            batch=batch,
            workers=workers,
            name=name,
            float_bits=float_bits,
        )
        self._W_eta = self.topology.W_eta(self.eta)

    def init(self, theta0: Any, stream: Any) -> DeepSqueezeState:
        xp = namespace_of(theta0)
        return DeepSqueezeState(theta0, xp.zeros_like(theta0), xp.zeros_like(theta0))

    def step(self, state: DeepSqueezeState, oracle: Any, k: int, stream: Any) -> DeepSqueezeState:
        X = oracle.sgd_update(state.x, self.gamma(k))  # h = x - gamma g
        U = state.delta
        kk = self._fused_topk(X)
        if kk is not None:
            csr = self._W_eta.sparse_block_csr(X, k - 1, self.mixing)
            V = None if csr is None else topk_deepsqueeze_mix_update(X, U, kk, csr)
            if V is not None:  # the 5 lines below and the mixing, fused
                state.x = X
                state.v = V
                return state
        V = None if kk is None else topk_deepsqueeze_update(X, U, kk)  # 4 lines below, fused
        if V is None:
            U += X  # h + delta
            V = self._compress(U, stream)
            U -= V  # new delta = h + delta - v
            # eta (W - I) V = W_eta V - V with W_eta = (1 - eta) I + eta W
            X -= V
        X += self._W_eta.mix(V, t=k - 1, method=self.mixing)
        state.x = X
        state.v = V
        return state

    def _memory_metrics(self, state: DeepSqueezeState) -> dict[str, Any]:
        return {"memory": _mean_sq_norm(state.delta)}
