"""What an algorithm can run on, declared once on its class.

Every :class:`~convkit.algorithms.base.Algorithm` class carries a :class:`Capabilities`
declaration, ``capabilities``: the exact model it has for a problem kind (the exact engines
of :mod:`convkit.exact`), the problem kinds on which the fused Local-SGD segments of
:mod:`convkit._fused_local` may run its steps, and the compiled one-step kernels its step
uses.  The engines and their execution paths read this declaration, never the concrete
class (the pattern of scikit-learn's estimator tags and benchopt's ``skip``: eligibility is
stated by the component).

Inheritance follows the mathematics.  A subclass that declares nothing inherits its base's
declaration only while it leaves the update alone: one that overrides a method of
:data:`UPDATE_METHODS` (``init``, ``step``, ``prepare``, ``models``, ``worker_mean``) gets the
base's declaration *withdrawn* (no exact model, no fused segments, no kernels), and the exact
engines refuse it with a message naming the class, the overridden methods and how to declare
a model (:meth:`Capabilities.refusal`).  A subclass whose changed update still has its base's
model says so itself, in one line of its class body::

    class MyLocalSGD(LocalSGD):
        capabilities = LocalSGD.capabilities  # same exact model and fused segments

Problem kinds (the keys of ``exact`` and the entries of ``fused``): ``"least_squares"``
(:class:`~convkit.problems.least_squares.LeastSquares`, :func:`convkit.exact.expected_error`;
fused: its unrotated Gaussian design), ``"heterogeneous_least_squares"``
(:class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares`,
:func:`convkit.exact.expected_error_nodes`) and ``"logistic"`` (fused segments on
:class:`~convkit.problems.logistic.LogisticRegression`).  Exact models: ``"local"`` (the
Local-SGD family's second-moment recursion), ``"dpsgd"``, ``"choco"``, ``"deep_squeeze"``,
``"server_momentum"`` (Local-SGD with server momentum, :mod:`convkit.exact.server_momentum`),
``"scaffold"`` (SCAFFOLD on node Hessians and optima, :mod:`convkit.exact.scaffold_nodes`)
(:data:`EXACT_MODELS`).  A model reads its parameters from the instance, as its class
(the declaring one) names them: ``"local"`` and the fused segments ``workers``, ``batch``,
``step_size`` and ``comm`` (:class:`~convkit.algorithms.local.LocalSGD`'s), ``"dpsgd"``
``topology`` and ``form``, ``"choco"`` and ``"deep_squeeze"`` those of
:class:`~convkit.algorithms.decentralized.CHOCOSGD` and
:class:`~convkit.algorithms.decentralized.DeepSqueeze`, ``"server_momentum"`` Local-SGD's and
``beta``, ``server_lr`` (:class:`~convkit.algorithms.federated.FedAvgM`'s), ``"scaffold"``
``workers``, ``batch``, ``step_size``, ``comm`` and ``server_step``
(:class:`~convkit.algorithms.scaffold.SCAFFOLD`'s).  A declaration is a statement about
the mathematics: the engines trust it, so a class declares only the model of its own update.

A class also declares the *identities* its mathematics implies (``identities``, a tuple of
:class:`AlgorithmIdentity`, the pattern of diffrax's ``order()`` on a solver class): with some
settings it computes exactly what another algorithm computes (``FedAvgM`` with ``beta = 0``
is Local-SGD; one local step per round is mini-batch averaging).  Identities are withdrawn
with the capabilities (a subclass that changes the update declares its own), and
``tests/test_algorithm_contract.py`` checks every declared identity of every registered
algorithm class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "EXACT_MODELS",
    "FUSED_KINDS",
    "AlgorithmIdentity",
    "PROBLEM_KINDS",
    "UPDATE_METHODS",
    "Capabilities",
    "withdraw_on_override",
]

#: the methods that define an algorithm's mathematics: overriding one withdraws the
#: inherited declaration (module docstring)
UPDATE_METHODS = ("init", "step", "prepare", "models", "worker_mean")
#: the problem kinds a declaration may name
PROBLEM_KINDS = ("least_squares", "heterogeneous_least_squares", "logistic")
#: the exact models of :mod:`convkit.exact`
EXACT_MODELS = ("local", "dpsgd", "choco", "deep_squeeze", "server_momentum", "scaffold")
#: the problem kinds of the fused Local-SGD segments
FUSED_KINDS = ("logistic", "least_squares")


@dataclass(frozen=True)
class Capabilities:
    """What an algorithm class can run on (module docstring).

    ``exact``: problem kind -> exact model (:data:`EXACT_MODELS`); ``fused``: the problem
    kinds on which its steps may run as fused Local-SGD segments (the update is Local-SGD's:
    SGD steps of every worker, averaging at the communication steps of ``_comm_mask``, step
    sizes ``_gammas``); ``kernels``: the compiled one-step kernels its step uses (recorded in
    the run plan).  ``withdrawn``: set by inheritance only, ``(class, overridden methods,
    base)`` when a subclass's override withdrew its base's declaration.
    """

    exact: Mapping[str, str] = field(default_factory=dict)
    fused: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    withdrawn: tuple[str, tuple[str, ...], str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.exact, Mapping):
            raise TypeError(f"exact must map problem kinds to exact models, got {self.exact!r}")
        for kind, model in self.exact.items():
            if kind not in PROBLEM_KINDS or model not in EXACT_MODELS:
                raise ValueError(
                    f"exact: {kind!r} -> {model!r}; allowed: problem kinds {list(PROBLEM_KINDS)} "
                    f"-> exact models {list(EXACT_MODELS)}"
                )
        bad = [k for k in self.fused if k not in FUSED_KINDS]
        if bad:
            raise ValueError(f"fused: unknown problem kinds {bad}; allowed: {list(FUSED_KINDS)}")
        # a plain dict copy (a mappingproxy would not pickle: classes defined in a notebook
        # or a test travel by value to Dask workers, their declaration with them)
        object.__setattr__(self, "exact", dict(self.exact))
        object.__setattr__(self, "fused", tuple(self.fused))
        object.__setattr__(self, "kernels", tuple(self.kernels))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Capabilities):
            return NotImplemented
        return (dict(self.exact), self.fused, self.kernels, self.withdrawn) == (
            dict(other.exact),
            other.fused,
            other.kernels,
            other.withdrawn,
        )

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.exact.items())), self.fused, self.kernels, self.withdrawn))

    def replace(self, **changes: Any) -> Capabilities:
        """A copy with ``changes`` (``exact``, ``fused``, ``kernels``)."""
        return replace(self, **{"withdrawn": None, **changes})

    def exact_model(self, kind: str) -> str | None:
        """The exact model declared for problem kind ``kind``, or None."""
        return self.exact.get(kind)

    def runs_fused(self, kind: str) -> bool:
        """Whether the fused Local-SGD segments may run the steps on problem kind ``kind``."""
        return kind in self.fused

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable form: ``exact``, ``fused``, ``kernels`` and ``withdrawn`` (None,
        or the class, the overridden methods and the base whose declaration they withdrew)."""
        withdrawn = None
        if self.withdrawn is not None:
            owner, methods, base = self.withdrawn
            withdrawn = {"class": owner, "methods": list(methods), "base": base}
        return {
            "exact": dict(self.exact),
            "fused": list(self.fused),
            "kernels": list(self.kernels),
            "withdrawn": withdrawn,
        }

    def refusal(self, cls: type, kind: str, what: str = "exact model") -> str:
        """Why class ``cls`` has no ``what`` (``"exact model"`` or ``"fused Local-SGD
        segments"``) for problem kind ``kind``: the override that withdrew its base's
        declaration and how to declare one, or what the class declares."""
        name = cls.__name__
        exact = what == "exact model"
        example = f"exact={{{kind!r}: <model>}}" if exact else f"fused=({kind!r},)"
        if self.withdrawn is not None:
            owner, methods, base = self.withdrawn
            over = ", ".join(methods)
            who = name if owner == name else f"{name} derives from {owner}, which"
            return (
                f"{who} overrides {over} of {base}, so it does not inherit {base}'s "
                f"capabilities (they describe {base}'s update, not this one); if {name}'s "
                f"update still has {base}'s {what}, declare it on the class: `capabilities = "
                f"{base}.capabilities` (or convkit.algorithms.capabilities.Capabilities("
                f"{example}))" + ("; otherwise run it with convkit.simulate" if exact else "")
            )
        declared = f"exact={dict(self.exact)}" if exact else f"fused={self.fused}"
        return (
            f"{name} declares no {what} for problem kind {kind!r} (its class declares "
            f"{declared}); a class declares one with `capabilities = Capabilities({example})` "
            "(convkit.algorithms.capabilities)"
        )


@dataclass(frozen=True)
class AlgorithmIdentity:
    """A declared identity (module docstring): the class built with ``settings`` (constructor
    arguments, over an instance's own) computes what ``reference(algo)`` computes, on every
    problem and with the same samples: bit for bit when ``rtol == 0``, else to relative
    rounding ``rtol``.  ``claim`` states it in words, ``source`` where it comes from."""

    claim: str
    settings: Mapping[str, Any]
    reference: Callable[[Any], Any]
    rtol: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", dict(self.settings))
        if not callable(self.reference):
            raise TypeError(f"reference must build the equal algorithm, got {self.reference!r}")


def withdraw_on_override(cls: type, update_methods: tuple[str, ...] = UPDATE_METHODS) -> None:
    """Called for every new subclass (``Algorithm.__init_subclass__``): a class that declares
    no ``capabilities`` of its own but overrides one of ``update_methods`` gets its inherited
    declaration withdrawn (module docstring), and one that declares no ``identities`` of its
    own loses the inherited ones."""
    if "identities" not in vars(cls) and any(m in vars(cls) for m in update_methods):
        cls.identities = ()  # type: ignore[attr-defined]
    if "capabilities" in vars(cls):
        caps = vars(cls)["capabilities"]
        if not isinstance(caps, Capabilities):
            raise TypeError(
                f"{cls.__name__}.capabilities must be a Capabilities, got {type(caps).__name__}"
            )
        return
    inherited: Capabilities = cls.capabilities  # type: ignore[attr-defined]
    changed = tuple(m for m in update_methods if m in vars(cls))
    if not changed or not (inherited.exact or inherited.fused or inherited.kernels):
        return
    base = next(b.__name__ for b in cls.__mro__[1:] if "capabilities" in vars(b))
    cls.capabilities = Capabilities(withdrawn=(cls.__name__, changed, base))  # type: ignore[attr-defined]
