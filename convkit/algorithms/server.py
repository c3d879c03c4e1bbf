"""The server update of the Local-SGD family: an optax-style transform of the round's
pseudo-gradient.

At the end of a round of :class:`~convkit.algorithms.local.LocalSGD` the workers hold
``y_i`` and the server (or every worker, after an all-reduce) holds the model ``x`` the
round started from.  The round's *pseudo-gradient* is

    g = x - (1/P) sum_i y_i,

minus the average of the workers' displacement over the round (Reddi et al. 2021, "Adaptive
Federated Optimization", ICLR, call ``Delta = -g`` the pseudo-gradient: the sign here is
optax's, so that ``g`` plays the part of a gradient).  A *server update* is a gradient
transformation in optax's sense: ``init(x) -> state`` and ``update(g, state) -> (u, state)``,
after which the server's model is ``x + u`` and every worker restarts from it.  Transforms
compose with :func:`chain`, as in optax (``chain(trace(beta), scale(-lr))`` is SGD with
heavy-ball momentum on ``g``):

* :func:`average` (the default): ``u = -g``, so ``x + u`` is the workers' mean, plain
  Local-SGD;
* :func:`scale` ``(c)``: ``u = c g`` (``scale(-eta)``: server step ``eta``);
* :func:`trace` ``(decay)``: ``t <- decay t + g``, ``u = t`` (``t_0 = 0``; optax's
  ``trace``);
* :func:`scale_by_fedadam` ``(b1, b2, tau)``: ``m <- b1 m + (1 - b1) g``,
  ``v <- b2 v + (1 - b2) g^2``, ``u = m / (sqrt(v) + tau)`` (``m_0 = 0``, ``v_0 = tau^2``),
  the server Adam of Reddi et al. (2021, Algorithm 2: no bias correction, ``tau`` the
  degree of adaptivity; its start ``v_{-1} >= tau^2`` is taken at equality.  The update is
  quoted from memory of the paper and agrees with APPFL's ``FedAdamServer``; the paper's
  text was not re-read for this module).

A server update sees the round's pseudo-gradient only: SCAFFOLD's control variates also
correct every local step (``g_i - c_i + c``), so SCAFFOLD stays a class of its own
(:mod:`convkit.algorithms.scaffold`), whose server step ``eta_g`` would be ``scale(-eta_g)``.

The new model is computed as ``mean + (u + g)`` (equal to ``x + u``), so that a transform
whose ``u`` is exactly ``-g`` (``trace(0)`` then ``scale(-1)``) gives the workers' mean bit for
bit, as :func:`average` does.  The state is a tree of ``(R, d)`` arrays (replicates on the
leading axis, the contract of :mod:`convkit.algorithms.base`; ``None`` for a stateless
transform); the transforms are vectorised over replicates and use only array-API operations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..backend import namespace_of
from ..validation import check_real

__all__ = [
    "ServerUpdate",
    "average",
    "chain",
    "scale",
    "scale_by_fedadam",
    "trace",
]


class ServerUpdate:
    """A gradient transformation of the round's pseudo-gradient (module docstring):
    ``init(x) -> state`` and ``update(g, state) -> (u, state)``; ``describe()`` its kind and
    settings (JSON)."""

    #: the transform's name in :meth:`describe`
    kind: ClassVar[str] = ""
    #: whether this is :func:`average` (the workers' mean, Local-SGD's own round)
    averages: ClassVar[bool] = False

    def init(self, x: Any) -> Any:
        """The transform's state for the server model ``x`` of shape ``(R, d)``."""
        return None

    def update(self, g: Any, state: Any) -> tuple[Any, Any]:
        """``(u, new state)`` for the pseudo-gradient ``g`` of shape ``(R, d)``."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **vars(self)}


@dataclass(frozen=True)
class _Average(ServerUpdate):
    kind = "average"
    averages = True

    def update(self, g: Any, state: Any) -> tuple[Any, Any]:
        return -g, state


@dataclass(frozen=True)
class _Scale(ServerUpdate):
    kind = "scale"
    step: float

    def update(self, g: Any, state: Any) -> tuple[Any, Any]:
        return self.step * g, state


@dataclass(frozen=True)
class _Trace(ServerUpdate):
    kind = "trace"
    decay: float

    def init(self, x: Any) -> Any:
        return namespace_of(x).zeros_like(x)

    def update(self, g: Any, state: Any) -> tuple[Any, Any]:
        t = self.decay * state + g
        return t, t


@dataclass(frozen=True)
class _ScaleByFedAdam(ServerUpdate):
    kind = "scale_by_fedadam"
    b1: float
    b2: float
    tau: float

    def init(self, x: Any) -> Any:
        xp = namespace_of(x)
        return (xp.zeros_like(x), xp.zeros_like(x) + self.tau**2)

    def update(self, g: Any, state: Any) -> tuple[Any, Any]:
        m, v = state
        m = self.b1 * m + (1.0 - self.b1) * g
        v = self.b2 * v + (1.0 - self.b2) * (g * g)
        return m / (namespace_of(v).sqrt(v) + self.tau), (m, v)


@dataclass(frozen=True)
class _Chain(ServerUpdate):
    kind = "chain"
    parts: tuple[ServerUpdate, ...]

    def init(self, x: Any) -> Any:
        return tuple(p.init(x) for p in self.parts)

    def update(self, g: Any, state: Any) -> tuple[Any, Any]:
        new = []
        for p, s in zip(self.parts, state, strict=True):
            g, s = p.update(g, s)
            new.append(s)
        return g, tuple(new)

    def describe(self) -> dict[str, Any]:
        return {"kind": "chain", "parts": [p.describe() for p in self.parts]}


_AVERAGE = _Average()


def average() -> ServerUpdate:
    """The workers' mean (``u = -g``): plain Local-SGD, the default server update."""
    return _AVERAGE


def scale(step: float) -> ServerUpdate:
    """``u = step g`` (optax's ``scale``; ``scale(-eta)`` is a server step ``eta``)."""
    return _Scale(check_real("step", step))


def trace(decay: float) -> ServerUpdate:
    """Heavy-ball momentum ``t <- decay t + g``, ``u = t``, ``t_0 = 0`` (optax's ``trace``),
    ``decay`` in ``[0, 1)``."""
    return _Trace(check_real("decay", decay, low=0, high=1, high_inclusive=False))


def scale_by_fedadam(b1: float, b2: float, tau: float) -> ServerUpdate:
    """Reddi et al. (2021)'s server Adam: ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2)
    g^2``, ``u = m / (sqrt(v) + tau)``, from ``m = 0``, ``v = tau^2`` (no bias correction);
    ``b1``, ``b2`` in ``[0, 1)``, ``tau > 0``."""
    return _ScaleByFedAdam(
        check_real("beta1", b1, low=0, high=1, high_inclusive=False),
        check_real("beta2", b2, low=0, high=1, high_inclusive=False),
        check_real("tau", tau, low=0, low_inclusive=False),
    )


def chain(*transforms: ServerUpdate) -> ServerUpdate:
    """The transforms applied in turn (optax's ``chain``): each one's ``u`` is the next
    one's ``g``."""
    for t in transforms:
        if not isinstance(t, ServerUpdate):
            raise TypeError(f"chain takes server updates (scale, trace, ...), got {t!r}")
    return _Chain(tuple(transforms))
