"""Decentralized SGD on a graph: D-PSGD, DCD-PSGD, ECD-PSGD, CHOCO-SGD and DeepSqueeze.

D-PSGD, DCD-PSGD, ECD-PSGD and the family's base class are defined here; CHOCO-SGD and
DeepSqueeze, the compressed gossip with a consensus step, in
:mod:`convkit.algorithms.compressed_gossip` (re-exported here).

Every algorithm here runs on the engine of :func:`convkit.simulate` with state arrays of
shape ``(R, P, d)`` (replicates, nodes, parameters). Stacking the nodes' vectors as rows
``X``, mixing with the topology's matrix ``W_t`` is :meth:`convkit.topology.Topology.mix`
(one product over the whole block, ``t = k - 1`` at local step ``k``, so that time-varying
topologies such as :func:`convkit.topology.one_peer_exponential` work), and compression is
one call of the compressor on the whole block, with its randomness from the ``stream`` the
engine passes to :meth:`step`. ``G`` is the stochastic gradient of every node at its own model
(node ``i`` sees its own data distribution: axis 1 of the problem's batch).

Update rules (exact statements and their sources: ``shared/theory/decentralized.md``):

* :class:`DPSGD` (Lian et al. 2017): ``X <- W X - gamma G(X)`` ("gossip_then_step") or
  ``X <- W (X - gamma G(X))`` ("step_then_gossip").
* :class:`DCDPSGD` (Tang et al. 2018, difference compression):
  ``X <- X + C(W X - gamma G(X) - X)``. The neighbours' replicas equal their models
  exactly (every node applies the same ``q_j``), so the simulation holds one copy.
* :class:`ECDPSGD` (Tang et al. 2018, extrapolation), ``t = k``:
  ``H = W Y - gamma G(X)``, ``Z = (1 - t/2) X + (t/2) H``, ``X <- H``,
  ``Y <- (1 - 2/t) Y + (2/t) C(Z)``.
* :class:`CHOCOSGD` (Koloskova, Stich, Jaggi 2019), ``H = X - gamma G(X)``, then
  ``order="paper"`` (default): ``X_hat <- X_hat + C(H - X_hat)``,
  ``X <- H + gamma_c (W - I) X_hat``; ``order="reference_code"`` (the authors' public code,
  the theory note): ``X <- H + gamma_c (W - I) X_hat``, ``X_hat <- X_hat + C(X - X_hat)``.
* :class:`DeepSqueeze` (Tang et al. 2019, arXiv 1907.07346, rule of the public
  implementations): ``H = X - gamma G(X)``, ``V = C(H + Delta)``, ``Delta <- H + Delta - V``,
  ``X <- H + eta (W - I) V``.

Starting values (``copies_start``): the public copies ``X_hat`` of CHOCO-SGD and the
estimates ``Y`` of ECD-PSGD start at the common starting model ``x_0`` (``"x0"``, default),
which every node knows, as in the public CHOCO-SGD convex code (epfml/ChocoSGD,
``convex_code``, which also implements CHOCO, DCD and ECD), or at 0 (``"zero"``, as the other
public codes); with the engine's default ``theta0 = 0`` the two coincide. Not offered where
it does not apply: DCD-PSGD's replicas *are* the models (they start equal and receive the
same ``q_j``; a replica started elsewhere would stay off by ``x_0`` forever), and
DeepSqueeze keeps no copies (its error memory ``Delta`` starts at 0).

Compressor requirements (a decision): DCD-PSGD and ECD-PSGD raise a ``ValueError`` for a
biased compressor (their analysis assumes ``E C(x) = x``) unless ``allow_biased=True``;
CHOCO-SGD and DeepSqueeze accept any compressor (DeepSqueeze with a non-contractive one, such
as scaled rand-k, diverges: ``tests/test_decentralized_behaviour.py``).

Order of CHOCO-SGD's operations (``order``): the theory note (and the public convex code)
mixes with the old public copies and then compresses the new model (``"reference_code"``);
the paper's pseudo-code compresses ``x_i - gamma g_i - x_hat_i`` first and mixes with the
updated copies (``"paper"``, the default). With ``C = identity`` and ``gamma_c = 1`` the
reference code's order reduces to gossip-then-step D-PSGD (below), the paper's to
step-then-gossip.

Observed, not a bug (``X_hat``/``Y`` as in the note): ECD-PSGD with a constant step drifts
even with an accurate compressor (8-bit stochastic rounding), because the estimate's error
obeys ``Var(y_t) = (1 - 2/t)^2 Var(y_{t-1}) + (2/t)^2 Var(C(z_t))`` with
``z_t = x_{t-1} + (t/2)(x_t - x_{t-1})``: its variance grows like ``t omega ||x_t - x_{t-1}||^2``
**[derived]** when the steps ``x_t - x_{t-1}`` do not shrink, and it enters the average.

Exact identities **[derived]** (tested in ``tests/test_decentralized.py``):

* DeepSqueeze: ``X_{t+1} = W_eta V_t + Delta_t - Delta_{t-1}`` with
  ``W_eta = (1 - eta) I + eta W``; with ``C = identity`` it is step-then-gossip D-PSGD with
  ``W_eta``;
* DeepSqueeze and CHOCO-SGD: ``mean(X_{t+1}) = mean(X_t) - gamma mean(G_t)`` whatever the
  compressor (``1^T (W - I) = 0``); not DCD-/ECD-PSGD with a random compressor;
* CHOCO-SGD with ``C = identity`` and ``gamma_c = 1``: ``order="reference_code"`` is
  gossip-then-step D-PSGD (``X_hat_t = X_t``, so
  ``X_{t+1} = X_t - gamma G + (W - I) X_t = W X_t - gamma G``), ``order="paper"`` is
  step-then-gossip D-PSGD (``X_hat = H``, ``X_{t+1} = H + (W - I) H = W H``); DCD-PSGD and
  ECD-PSGD with ``C = identity`` are gossip-then-step D-PSGD (ECD: ``Y_t = X_t`` by
  induction from ``Y_0 = X_0``);
* ``W = J`` (complete graph, uniform weights): step-then-gossip D-PSGD is mini-batch SGD (MBA);
  edgeless graph (``W = I``): every form is local SGD, and its worker mean is one-shot averaging.

Communication accounting: D-PSGD and DeepSqueeze, which keep nothing of their neighbours
between steps, send at local step ``k`` one message from node ``j`` to every node ``i != j``
with ``(W_{k-1})_ij != 0`` (one message per directed edge; ``2 |E|`` for a static symmetric
graph, ``P`` for the one-peer exponential graph). DCD-PSGD, ECD-PSGD and CHOCO-SGD keep
copies of their neighbours' models (replicas, estimates ``y_j``, public copies
``x_hat_j``): the simulation holds one copy per node, which is correct only if every node
that will ever mix with ``j``'s copy applies each of ``j``'s updates, so node ``j`` sends
every step to all its eventual neighbours (the union over the topology's period,
:func:`copy_holder_messages`): the same ``2 |E|`` on a static graph, ``P log2 P`` (24 for
``P = 8``) on the one-peer exponential graph. A step with at least one message is a round.
Bits: messages times the message size, ``d float_bits`` for D-PSGD and
``compressor.bits_per_message(d, float_bits)`` for the compressed algorithms.

Metrics (:meth:`extra_metrics`, iterate ``"state"`` of the result frame): ``consensus``
``= (1/P) sum_i ||x_i - x_bar||^2``; ``grad_norm2 = ||grad f(x_bar)||^2`` (when the problem
has a full gradient); ``memory = (1/P) sum_i ||delta_i||^2`` (DeepSqueeze); ``replica_gap
= (1/P) sum_i ||x_hat_i - x_i||^2`` (CHOCO-SGD); ``estimate_gap = (1/P) sum_i ||y_i - x_i||^2``
(ECD-PSGD).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..backend import namespace_of
from ..compression import Compressor
from ..schedules import Constant, StepSize
from ..topology import Topology, ring
from ..validation import Parameter, check_int, flag, instance, integer, options
from .base import FLOAT_BITS, Algorithm
from .capabilities import Capabilities
from .gossip import (
    ConsensusTuning,
    _check_compressor,
    _check_topology,
    consensus_distance,
    contraction_rates,
    copy_holder_messages,
    directed_messages,
    eta_spectral_gap,
    log_grid,
    tune_consensus_step,
)

#: the public names of :mod:`convkit.algorithms.compressed_gossip`, re-exported here and
#: loaded on first use (that module imports this one), and the other names it is asked for
_COMPRESSED_GOSSIP = ("CHOCOSGD", "DeepSqueeze")
_COMPRESSED_GOSSIP_OTHERS = ("CHOCOState", "DeepSqueezeState", "CHOCO_ORDERS")

__all__ = [
    *_COMPRESSED_GOSSIP,
    "DCDPSGD",
    "DPSGD",
    "ECDPSGD",
    "ConsensusTuning",
    "DecentralizedAlgorithm",
    "consensus_distance",
    "contraction_rates",
    "copy_holder_messages",
    "directed_messages",
    "eta_spectral_gap",
    "log_grid",
    "tune_consensus_step",
]

DPSGD_FORMS = ("gossip_then_step", "step_then_gossip")
#: starts of the public copies / estimates (CHOCO-SGD's ``x_hat``, ECD-PSGD's ``y``)
COPIES_STARTS = ("x0", "zero")


def __getattr__(name: str) -> Any:
    """The names of :mod:`convkit.algorithms.compressed_gossip` re-exported here (PEP 562)."""
    if name in _COMPRESSED_GOSSIP or name in _COMPRESSED_GOSSIP_OTHERS:
        return getattr(importlib.import_module(".compressed_gossip", __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- helpers


def _copies(theta0: Any, start: str) -> Any:
    """The start of public copies / estimates: a copy of ``theta0`` (``"x0"``) or zeros."""
    xp = namespace_of(theta0)
    return xp.asarray(theta0, copy=True) if start == "x0" else xp.zeros_like(theta0)


def _mean_sq_norm(A: Any) -> Any:
    """``(1/P) sum_i ||a_i||^2`` per replicate."""
    xp = namespace_of(A)
    return xp.mean(xp.sum(A * A, axis=-1), axis=1)


def _grad_norm2(problem: Any, xbar: Any) -> Any | None:
    """``||grad f(x_bar)||^2`` (shape (R,)), or None if the problem has no full gradient."""
    try:
        g = problem.grad(xbar)
    except NotImplementedError:
        return None
    xp = namespace_of(g)
    return xp.sum(g * g, axis=-1)


# --------------------------------------------------------------------------- base


class DecentralizedAlgorithm(Algorithm):
    """Shared parts: topology, optional compressor, accounting and metrics.

    Parameters
    ----------
    topology:
        A :class:`~convkit.topology.Topology` on ``P >= 2`` nodes (static or time-varying).
    step:
        Step-size schedule ``gamma_k``.
    compressor:
        A :class:`~convkit.compression.Compressor` or spec (``"top-k:0.1"``), where used.
    batch:
        Per-node batch size ``b``.
    workers:
        Optional check: must equal ``topology.n``.
    float_bits:
        Bits per uncompressed float (bit accounting).
    """

    compressed = True
    #: the product of :meth:`convkit.topology.Topology.mix`: ``"ordered"`` (the same numbers
    #: on every x86-64 CPU: a compressed algorithm's compressor decides on the values, top-k's
    #: selection, stochastic rounding's coin flips, and a last-bit difference of the BLAS's
    #: product would lead to another trajectory; D-PSGD's step tuning and its rows of the
    #: studies' tables too) or ``"auto"`` (the fastest product, the BLAS's for a dense ``W``:
    #: ``benchmarks/bench_deterministic.py`` times both)
    mixing: str = "ordered"
    #: each algorithm of the family declares its own (none here)
    capabilities = Capabilities()
    state_metrics: tuple[str, ...] = ("consensus", "grad_norm2")
    gradient_metrics: tuple[str, ...] = ("grad_norm2",)
    parameters: ClassVar[dict[str, Parameter]] = {
        "topology": instance(
            "a convkit.topology.Topology on P >= 2 nodes or a spec such as 'ring:16'",
            wrong=(4, "no-such-graph:4", "ring:1"),
        ),
        "compressor": instance(
            "a convkit Compressor or a spec string such as 'top-k:0.1'",
            wrong=(None, 5, "no-such-compressor:3"),
        ),
        "workers": integer(low=2, default=None, optional=True,
                           doc="optional check: must equal the topology's size P"),
        "float_bits": FLOAT_BITS,
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """A ring of four nodes, a constant step, top-k keeping half the coordinates."""
        return {"topology": ring(4), "step": Constant(0.05), "compressor": "top-k:0.5"}

    def __init__(
        self,
        topology: Topology,
        step: StepSize,
        compressor: Compressor | str | None = None,
        *,
        batch: int = 1,
        workers: int | None = None,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        topology = _check_topology(topology, self.checked("workers", workers))
        super().__init__(topology.n, step, batch, name)
        self.topology = topology
        self.float_bits = self.checked("float_bits", float_bits)
        self.compressor: Compressor | None = (
            _check_compressor(compressor) if self.compressed else None
        )
        self._messages = directed_messages(topology)

    # ------------------------------------------------------------------ helpers
    def _mix(self, X: Any, k: int) -> Any:
        return self.topology.mix(X, t=k - 1, method=self.mixing)

    def _compress(self, X: Any, stream: Any) -> Any:
        return self.compressor.compress(X, stream)

    def _fused_topk(self, X: Any) -> int | None:
        """``k`` of the compressor if its class declares the top-k selection
        (``Compressor.fused_selection``: the compiled kernels of :mod:`convkit._kernels` may
        then fuse the selection with the update that follows it), else None.  Raises as
        ``TopK.compress`` would if ``k > d``."""
        comp = self.compressor
        if comp is None or comp.fused_selection != "top-k" or not isinstance(X, np.ndarray):
            return None
        return comp.k_for(int(X.shape[-1]))

    def bits_per_message(self, d: int) -> int:
        """Bits of one message of a ``d``-vector."""
        if self.compressor is None:
            return check_int("d", d, low=1) * self.float_bits
        return int(self.compressor.bits_per_message(d, self.float_bits))

    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        """Cumulative rounds, messages and bits after steps ``1..n``: the current out-edges
        of ``W_{k-1}`` at step ``k`` (D-PSGD, DeepSqueeze: nothing is kept between steps)."""
        n = self.validate_steps(n)
        return self._counts(self._messages[np.arange(n) % self._messages.size], d)

    def _copy_holder_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        """Counts of an algorithm keeping neighbours' copies: :func:`copy_holder_messages`
        every step (each update reaches every eventual neighbour)."""
        n = self.validate_steps(n)
        per = np.full(n, copy_holder_messages(self.topology), dtype=np.int64)
        return self._counts(per, d)

    def _counts(self, per: np.ndarray, d: int) -> dict[str, np.ndarray]:
        messages = np.cumsum(per).astype(np.int64)
        rounds = np.cumsum(per > 0).astype(np.int64)
        return {
            "rounds": rounds,
            "messages": messages,
            "bits": messages * np.int64(self.bits_per_message(d)),
        }

    def models(self, state: Any) -> Any:
        return state.x

    def extra_metrics(self, state: Any, problem: Any) -> dict[str, Any]:
        X = state.x
        xp = namespace_of(X)
        out = {"consensus": consensus_distance(X)}
        g2 = _grad_norm2(problem, xp.mean(X, axis=1))
        if g2 is not None:
            out["grad_norm2"] = g2
        out.update(self._memory_metrics(state))
        return out

    def _memory_metrics(self, state: Any) -> dict[str, Any]:
        return {}

    def describe(self) -> dict[str, Any]:
        out = {
            **super().describe(),
            "topology": self.topology.name,
            "nodes": self.topology.n,
        }
        if self.compressor is not None:
            out["compressor"] = self.compressor.name
        return out

    def _label_objects(self) -> str:
        """The label's part of the objects the class parses: the topology's name and the
        compressor's, if any."""
        comp = f", {self.compressor.name}" if self.compressor is not None else ""
        return f"{self.topology.name}{comp}"

    def default_label(self) -> str:
        """``Name(topology, compressor, key=value..., b=batch)``: the settings marked shown in
        the declaration (:meth:`shown_label`) after the objects."""
        return f"{type(self).__name__}({self._label_objects()}{self.shown_label()}, b={self.batch})"


def _require_unbiased(algo: str, compressor: Compressor, allow_biased: bool) -> None:
    if not compressor.unbiased and not allow_biased:
        raise ValueError(
            f"{algo} needs an unbiased compressor (its analysis assumes E C(x) = x), got "
            f"{compressor.name}; use e.g. RandK(fraction=..., scaled=True) or QSGD(s), or pass "
            "allow_biased=True to simulate it anyway"
        )


# --------------------------------------------------------------------------- states


@dataclass
class GossipState:
    """State of D-PSGD / DCD-PSGD: the models ``x`` (R, P, d)."""

    x: Any


@dataclass
class ECDState:
    """ECD-PSGD: models ``x`` and the shared estimates ``y`` of every node's model."""

    x: Any
    y: Any


# --------------------------------------------------------------------------- D-PSGD


class DPSGD(DecentralizedAlgorithm):
    """Decentralized parallel SGD (Lian et al. 2017, "Can decentralized algorithms outperform
    centralized algorithms?").

    ``form="gossip_then_step"`` (the paper's): ``x_i <- sum_j W_ij x_j - gamma g_i(x_i)``;
    ``form="step_then_gossip"``: ``X <- W (X - gamma G(X))``. Rate **[classic]**:
    ``O(sigma / sqrt(P T) + (P zeta^2)^(1/3) / T^(2/3))``. Messages carry full models
    (``d float_bits`` bits).
    """

    compressed = False
    state_arrays = 1
    #: the exact D-PSGD recursions (:mod:`convkit.exact.dpsgd`, node optima:
    #: :mod:`convkit.exact.heterogeneous`; static topologies); the problems' compiled SGD step
    #: (form ``"step_then_gossip"``)
    capabilities = Capabilities(
        exact={"least_squares": "dpsgd", "heterogeneous_least_squares": "dpsgd"},
        kernels=("sgd-update",),
    )
    parameters: ClassVar[dict[str, Parameter]] = {
        "form": options(*DPSGD_FORMS, default="gossip_then_step", shown=True,
                        doc="gossip then step (the paper's) or step then gossip"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """A ring of four nodes, a constant step, the other form."""
        return {"topology": ring(4), "step": Constant(0.05), "form": "step_then_gossip"}

    def __init__(
        self,
        topology: Topology,
        step: StepSize,
        form: str = "gossip_then_step",
        *,
        batch: int = 1,
        workers: int | None = None,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        self.form = self.checked("form", form)
        super().__init__(
            topology, step, None, batch=batch, workers=workers, name=name, float_bits=float_bits
        )

    def init(self, theta0: Any, stream: Any) -> GossipState:
        return GossipState(theta0)

    def step(self, state: GossipState, oracle: Any, k: int, stream: Any) -> GossipState:
        gamma = self.gamma(k)
        if self.form == "step_then_gossip":
            X = oracle.sgd_update(state.x, gamma)
            state.x = self._mix(X, k)
        else:
            G = oracle.grad(state.x)
            X = self._mix(state.x, k)
            G *= gamma
            X -= G
            state.x = X
        return state


# --------------------------------------------------------------------------- DCD / ECD


class _UnbiasedCompressionAlgorithm(DecentralizedAlgorithm):
    """Base of DCD-PSGD and ECD-PSGD, whose analyses need an unbiased compressor: a biased
    one raises unless ``allow_biased=True``."""

    paper_name = ""
    parameters: ClassVar[dict[str, Parameter]] = {
        "allow_biased": flag(False, doc="accept a biased compressor (the analyses need an "
                             "unbiased one)"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """A ring of four nodes, a constant step, scaled rand-k of half the coordinates."""
        return {"topology": ring(4), "step": Constant(0.05), "compressor": "rand-k-scaled:0.5"}

    def __init__(
        self,
        topology: Topology,
        step: StepSize,
        compressor: Compressor | str,
        *,
        allow_biased: bool = False,
        batch: int = 1,
        workers: int | None = None,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        super().__init__(
            topology,
            step,
            compressor,
            batch=batch,
            workers=workers,
            name=name,
            float_bits=float_bits,
        )
        _require_unbiased(
            self.paper_name, self.compressor, self.checked("allow_biased", allow_biased)
        )

    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        return self._copy_holder_counts(n, d)


class DCDPSGD(_UnbiasedCompressionAlgorithm):
    """DCD-PSGD, difference compression (Tang, Gan, Zhang, Zhang, Liu 2018, "Communication
    compression for decentralized training", Algorithm 1).

    ``h_i = sum_j W_ij x_j - gamma g_i(x_i)``, ``q_i = C(h_i - x_i)``, ``x_i <- x_i + q_i``
    (every neighbour applies the same ``q_i`` to its replica, so replicas equal models).
    Needs an unbiased, accurate compressor and diverges under aggressive compression
    **[classic]** (a biased compressor raises unless ``allow_biased=True``).
    """

    state_arrays = 1
    #: no exact model in :mod:`convkit.exact`: step by step
    capabilities = Capabilities()
    paper_name = "DCD-PSGD"

    def init(self, theta0: Any, stream: Any) -> GossipState:
        return GossipState(theta0)

    def step(self, state: GossipState, oracle: Any, k: int, stream: Any) -> GossipState:
        gamma = self.gamma(k)
        X = state.x
        G = oracle.grad(X)
        D = self._mix(X, k)
        G *= gamma
        D -= G
        D -= X  # h - x
        X += self._compress(D, stream)
        return state


class ECDPSGD(_UnbiasedCompressionAlgorithm):
    """ECD-PSGD, extrapolation compression (Tang et al. 2018, Algorithm 2), ``t = k``:

    ``h_i = sum_j W_ij y_j - gamma g_i(x_i)``, ``z_i = (1 - t/2) x_i + (t/2) h_i``,
    ``x_i <- h_i``, ``y_i <- (1 - 2/t) y_i + (2/t) C(z_i)`` (every holder of ``y_i`` applies
    the same update). Needs an unbiased compressor.

    ``copies_start`` is the start ``y_0`` of the shared estimates: ``"x0"`` (default; the
    common starting model, as in the public CHOCO-SGD convex code's ECD implementation) or
    ``"zero"``. At ``t = 1`` the update ``y_1 = -y_0 + 2 C(z_1)`` depends on it.
    """

    state_arrays = 2
    #: no exact model in :mod:`convkit.exact`: step by step
    capabilities = Capabilities()
    state_metrics = ("consensus", "grad_norm2", "estimate_gap")
    paper_name = "ECD-PSGD"
    parameters: ClassVar[dict[str, Parameter]] = {
        "copies_start": options(
            *COPIES_STARTS, default="x0", shown="changed", doc="start y_0 of the estimates"
        ),
    }

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """The family's example with estimates starting at zero."""
        return {**super().example_settings(), "copies_start": "zero"}

    def __init__(
        self,
        topology: Topology,
        step: StepSize,
        compressor: Compressor | str,
        *,
        copies_start: str = "x0",
        allow_biased: bool = False,
        batch: int = 1,
        workers: int | None = None,
        name: str | None = None,
        float_bits: int = 32,
    ) -> None:
        self.copies_start = self.checked("copies_start", copies_start)
        super().__init__(
            topology,
            step,
            compressor,
            allow_biased=allow_biased,
            batch=batch,
            workers=workers,
            name=name,
            float_bits=float_bits,
        )

    def init(self, theta0: Any, stream: Any) -> ECDState:
        return ECDState(theta0, _copies(theta0, self.copies_start))

    def default_label(self) -> str:
        """As the family's, with the shown settings after ``b`` (``copies_start`` when
        changed)."""
        return f"ECDPSGD({self._label_objects()}, b={self.batch}{self.shown_label()})"

    def step(self, state: ECDState, oracle: Any, k: int, stream: Any) -> ECDState:
        gamma = self.gamma(k)
        t = float(k)
        G = oracle.grad(state.x)
        H = self._mix(state.y, k)
        G *= gamma
        H -= G
        Z = (1.0 - t / 2.0) * state.x
        Z += (t / 2.0) * H
        state.x = H
        Y = state.y
        Y *= 1.0 - 2.0 / t
        Y += (2.0 / t) * self._compress(Z, stream)
        return state

    def _memory_metrics(self, state: ECDState) -> dict[str, Any]:
        return {"estimate_gap": _mean_sq_norm(state.y - state.x)}
