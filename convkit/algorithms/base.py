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

The state is typed by a contract, not guessed: it is an array or a tree of arrays (dicts,
dataclasses, tuples and lists of them, as optax's states are pytrees) whose every array has
the replicates on its leading axis; other leaves (numbers, strings, None) are shared by every
replicate.  :meth:`Algorithm.select_rows` and :meth:`Algorithm.concat_rows` (replicate rows
of a state, and states of consecutive rows joined) follow it; an algorithm whose state holds
arrays shared by all replicates overrides both.  The metrics are declared on the class:
:attr:`Algorithm.state_metrics` names what :meth:`Algorithm.extra_metrics` returns, in its
order, and :meth:`Algorithm.metric_names` says which of them a problem allows, so that the
engines lay out their outputs without running the algorithm.  ``tests/test_algorithm_contract.py``
checks the contract for every registered algorithm and problem.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any, ClassVar

import numpy as np

from ..backend import namespace_of
from ..problems.base import GradientOracle, Problem
from ..schedules import StepSize
from ..validation import Declared, Parameter, check_int, instance, integer, text
from .capabilities import UPDATE_METHODS, AlgorithmIdentity, Capabilities, withdraw_on_override

__all__ = ["Algorithm", "algorithm_list", "concat_state_rows", "select_state_rows"]


def _is_array(x: Any) -> bool:
    """An array with at least one axis (NumPy, CuPy, array-API arrays)."""
    shape = getattr(x, "shape", None)
    return shape is not None and len(shape) >= 1 and hasattr(x, "__getitem__")


def _dataclass_items(state: Any) -> list[tuple[str, Any]]:
    return [(f.name, getattr(state, f.name)) for f in fields(state) if f.init]


def select_state_rows(state: Any, rows: slice) -> Any:
    """Replicates ``rows`` of a state tree (the module's contract): every array indexed
    ``[rows, ...]`` on its leading axis, dicts, dataclasses, tuples (named too) and lists
    rebuilt around them, other leaves kept."""
    if _is_array(state):
        return state[rows, ...]
    if isinstance(state, dict):
        return type(state)((k, select_state_rows(v, rows)) for k, v in state.items())
    if is_dataclass(state) and not isinstance(state, type):
        return replace(state, **{k: select_state_rows(v, rows) for k, v in _dataclass_items(state)})
    if isinstance(state, tuple):
        items = [select_state_rows(v, rows) for v in state]
        return type(state)(*items) if hasattr(state, "_fields") else type(state)(items)
    if isinstance(state, list):
        return [select_state_rows(v, rows) for v in state]
    return state


def concat_state_rows(states: Sequence[Any]) -> Any:
    """States of consecutive replicate rows joined into one (the inverse of
    :func:`select_state_rows`): arrays concatenated on their leading axis, trees rebuilt,
    other leaves taken from the first state."""
    first = states[0]
    if _is_array(first):
        return namespace_of(first).concat(list(states), axis=0)
    if isinstance(first, dict):
        return type(first)((k, concat_state_rows([s[k] for s in states])) for k in first)
    if is_dataclass(first) and not isinstance(first, type):
        return replace(
            first,
            **{
                k: concat_state_rows([getattr(s, k) for s in states])
                for k, _ in _dataclass_items(first)
            },
        )
    if isinstance(first, tuple | list):
        items = [concat_state_rows([s[i] for s in states]) for i in range(len(first))]
        if hasattr(first, "_fields"):
            return type(first)(*items)
        return type(first)(items)
    return first


def has_full_gradient(problem: Problem) -> bool:
    """Whether ``problem`` has a full gradient ``grad`` (it overrides
    :meth:`Problem.grad <convkit.problems.base.Problem.grad>`, which raises)."""
    return type(problem).grad is not Problem.grad


#: the step-size schedule of every algorithm (its check is the constructor's)
STEP = instance("a StepSize (e.g. PolyDecay(C, alpha) or Constant(gamma))", wrong=(0.1, "poly"))
#: bits per transmitted (uncompressed) float, for the bit accounting
FLOAT_BITS = integer(low=1, default=32, doc="bits per transmitted float (bit accounting)")


class Algorithm(Declared, ABC):
    """Base class of convkit algorithms (see the module docstring).

    Its parameters are declared once, in ``parameters``
    (:class:`convkit.validation.Parameter`; a subclass declares those it adds or changes):
    the declaration validates the constructor's arguments (:meth:`checked`), and gives the
    sweep schema, the command line's options and the generated invalid-value tests;
    :meth:`example_settings` gives the small instance the contract and label tests build.
    """

    parameters: ClassVar[dict[str, Parameter]] = {
        "workers": integer(low=1, doc="number of workers P"),
        "step": STEP,
        "batch": integer(low=1, default=1, doc="per-worker batch size b"),
        "name": text(default=None, optional=True, doc="display name (default: the label)"),
    }

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
    #: names of the metrics :meth:`extra_metrics` returns, in its order (the frame's iterate
    #: ``"state"``); a subclass returning metrics declares them here
    state_metrics: tuple[str, ...] = ()
    #: those of :attr:`state_metrics` that need the problem's full gradient (``problem.grad``):
    #: left out on a problem without one
    gradient_metrics: tuple[str, ...] = ()
    #: what the class can run on (exact models, fused segments, compiled kernels), declared
    #: once on the class and read by every engine path
    #: (:mod:`convkit.algorithms.capabilities`); a subclass that overrides one of
    #: :data:`update_methods` without declaring its own gets none
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: the identities its mathematics implies (with some settings it computes what another
    #: algorithm computes; :class:`convkit.algorithms.capabilities.AlgorithmIdentity`), checked for
    #: every registered class by ``tests/test_algorithm_contract.py``; withdrawn with the
    #: capabilities
    identities: ClassVar[tuple[AlgorithmIdentity, ...]] = ()
    #: the methods that define the update (overriding one withdraws inherited capabilities)
    update_methods: ClassVar[tuple[str, ...]] = UPDATE_METHODS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        withdraw_on_override(cls, cls.update_methods)

    def __init__(self, workers: int, step: StepSize, batch: int = 1, name: str | None = None):
        self.workers = self.checked("workers", workers)
        self.batch = self.checked("batch", batch)
        if not isinstance(step, StepSize):
            raise TypeError(
                f"step must be a StepSize (e.g. PolyDecay(C, alpha) or Constant(gamma)), got {step!r}"
            )
        self.step_size = step
        self.name = self.checked("name", name)

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
        """Algorithm-specific metrics of the state (e.g. consensus distance), each of shape
        (R,), named and ordered as :meth:`metric_names` declares."""
        return {}

    def metric_names(self, problem: Problem) -> tuple[str, ...]:
        """The names :meth:`extra_metrics` returns on ``problem``, in its order:
        :attr:`state_metrics` without the :attr:`gradient_metrics` when ``problem`` has no
        full gradient (no state is needed: the engines lay out their outputs from this)."""
        full = has_full_gradient(problem)
        return tuple(m for m in self.state_metrics if full or m not in self.gradient_metrics)

    def select_rows(self, state: Any, rows: slice) -> Any:
        """Replicates ``rows`` (a slice of the leading axis) of ``state``: every array of the
        state tree sliced, the rest kept (:func:`select_state_rows`; views where the backend
        gives them).  Override it, with :meth:`concat_rows`, for a state holding arrays
        shared by all replicates."""
        return select_state_rows(state, rows)

    def concat_rows(self, states: Sequence[Any]) -> Any:
        """States of consecutive replicate rows joined, the inverse of :meth:`select_rows`
        (:func:`concat_state_rows`)."""
        return concat_state_rows(states)

    @abstractmethod
    def comm_counts(self, n: int, d: int) -> dict[str, np.ndarray]:
        """Cumulative ``rounds``, ``messages`` and ``bits`` after each local step 1..n."""

    def comm_counts_at(self, steps: Any, n: int, d: int) -> dict[str, np.ndarray]:
        """:meth:`comm_counts` at the local steps ``steps`` only (1-based, in ``[1, n]``).
        Algorithms whose counts have a closed form override it to avoid ``n``-long arrays
        (the exact engine asks for record points only)."""
        at = np.asarray(steps, dtype=np.int64) - 1
        return {key: np.asarray(v)[at] for key, v in self.comm_counts(n, d).items()}

    def settings(self) -> dict[str, Any]:
        """The declared settings of the instance that are plain values (numbers, strings,
        booleans; not ``workers``, ``batch``, ``name`` nor the objects a class parses), by
        their constructor names, read from the attributes of the same name: what
        :meth:`describe` shows of the declaration."""
        out = {}
        for key, p in type(self).declared().items():
            if key in ("workers", "batch", "name") or p.kind == "object":
                continue
            value = getattr(self, key, None)
            if isinstance(value, bool | int | float | str):
                out[key] = value
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description: the class, ``P``, ``b``, the step sizes and the
        declared settings (:meth:`settings`); a subclass adds the objects it parses
        (schedule, topology, compressor)."""
        return {
            "kind": type(self).__name__,
            "workers": self.workers,
            "batch": self.batch,
            "step": self.step_size.describe(),
            **self.settings(),
        }

    @property
    def label(self) -> str:
        """Display name: ``name`` if given, else built from the description
        (:meth:`default_label`): the class name and its settings, each ``key=value`` part
        named by its constructor argument (``consensus_step=0.4``), except the shorthands
        ``P`` (``workers``) and ``b`` (``batch``) that every label shares; nested names
        (a compressor, a schedule, a topology) are theirs."""
        if self.name:
            return self.name
        return self.default_label()

    def default_label(self) -> str:
        return f"{type(self).__name__}(P={self.workers}, b={self.batch})"

    def shown_label(self) -> str:
        """The label's part of the declared settings marked ``shown``
        (:class:`convkit.validation.Parameter`), in declaration order: ``, name=value`` for
        each (numbers as ``:g``), always for ``shown=True``, for ``shown="changed"`` only
        when the value is not the declared default."""
        parts = []
        for key, p in type(self).declared().items():
            value = getattr(self, key, None)
            if not p.shown or (p.shown == "changed" and value == p.default):
                continue
            number = isinstance(value, float | int) and not isinstance(value, bool)
            text = f"{value:g}" if number else str(value)
            parts.append(f", {key}={text}")
        return "".join(parts)

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
