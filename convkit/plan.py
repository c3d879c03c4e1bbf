"""The run plan: what one engine call will run, and on which execution paths, decided once.

:func:`convkit.simulate`, :func:`convkit.exact.expected_error` and
:func:`convkit.exact.expected_error_nodes` validate their arguments, split the budget
(:func:`local_steps_of`, :func:`budget_local_steps`), then build one :class:`RunPlan` with
:func:`plan`: the problem, the algorithms, each one's local steps and record steps, the
replicates, the backend and dtype, the threads, the weighted-average shifts, the state of the
kernel switch (``convkit.kernels``), each algorithm's engine and the *execution path* of each
algorithm, with the reason it was chosen.  Nothing downstream decides a path again: the
engine reads ``plan.per_algorithm``, and ``Result.meta["path"]`` (:meth:`RunPlan.describe`,
one schema for every engine) says which paths ran and why the faster ones did not apply.

An execution path is an object with a ``name`` and a method ``supports(plan) -> (bool,
reason)``, optionally ``accepts(plan, i)`` and ``shares(plan)`` (:class:`ExecutionPath`).
An engine lists its paths, fastest first, and :func:`plan` puts each algorithm on the first
that supports the call and accepts the algorithm (from the capabilities its class declares,
:mod:`convkit.algorithms.capabilities`, never its concrete class):

* Monte Carlo (:data:`convkit.simulate.SIMULATE_PATHS`): the fused Local-SGD segments
  (:class:`convkit._fused_local.FusedLocalSegments`, logistic regression and Gaussian least
  squares), then :data:`COMPILED_STEPS` (step by step, the compiled one-step kernels where the
  arrays allow), then :data:`ARRAY_STEPS` (step by step on the array API, always);
* exact (:data:`convkit.exact.dispatch.EXACT_PATHS`): the compiled second-moment recursion of
  the Local-SGD family, then its NumPy form; node Hessians and optima
  (:data:`convkit.exact.heterogeneous.EXACT_NODE_MOMENTS`): the NumPy node recursions.

Every path computes the same quantities; the compiled ones agree with the array-API ones
bit for bit or to rounding, as their modules document, and a path that agrees to rounding
only runs whole calls (``shares``), so that an algorithm's numbers never depend on the
algorithms beside it.  The pattern is that of scikit-learn's solver selection
(``LogisticRegression(solver="auto")``) made explicit, per algorithm, and recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ._kernel_switch import kernels_enabled, numba_usable
from .algorithms.base import Algorithm
from .algorithms.local import local_steps_for
from .backend import Backend
from .problems.base import Problem
from .validation import check_int

__all__ = [
    "ARRAY_STEPS",
    "COMPILED_STEPS",
    "GRADIENTS_REMAINDER",
    "AlgorithmPath",
    "ExecutionPath",
    "RunPlan",
    "budget_local_steps",
    "local_steps_of",
    "plan",
]

#: the engines that build plans
ENGINES = ("simulate", "exact")

#: The values :func:`convkit.simulate` and the exact engines accept for
#: ``gradients_remainder``.
GRADIENTS_REMAINDER = ("error", "floor")


def local_steps_of(
    algos: Sequence[Algorithm],
    gradients: int | None,
    steps: int | None,
    remainder: str = "error",
) -> list[int]:
    """Local steps ``n`` of each algorithm of an engine call: ``steps`` for all, or the
    budget ``gradients`` split by each one's ``P b`` (:func:`budget_local_steps`); exactly one
    of the two must be given (``ValueError`` otherwise)."""
    if (gradients is None) == (steps is None):
        raise ValueError("give exactly one of gradients (total T) or steps (local steps n)")
    if steps is not None:
        return [check_int("steps", steps, low=1)] * len(algos)
    return [budget_local_steps(gradients, a.workers, a.batch, remainder) for a in algos]


def budget_local_steps(
    gradients: int, workers: int, batch: int = 1, remainder: str = "error"
) -> int:
    """Local steps ``n`` for a budget of ``T = gradients`` stochastic gradients.

    Parameters
    ----------
    gradients : int
        The budget ``T`` over all workers, ``>= 1``.
    workers, batch : int
        ``P`` and ``b``.
    remainder : {"error", "floor"}
        ``"error"``: ``P b`` must divide ``T`` (``n = T / (P b)``, else ``ValueError``);
        ``"floor"``: ``n = floor(T / (P b))``, the run then uses ``n P b <= T`` gradients
        (``T >= P b`` required).

    Returns
    -------
    int
        ``n``.
    """
    if remainder not in GRADIENTS_REMAINDER:
        raise ValueError(
            f"gradients_remainder must be one of {list(GRADIENTS_REMAINDER)}, got {remainder!r}"
        )
    if remainder == "error":
        return local_steps_for(gradients, workers, batch)
    T = check_int("gradients", gradients, low=1)
    per = workers * batch
    if T < per:
        raise ValueError(
            f"gradients must be >= workers * batch = {per} (at least one local step), got {T}"
        )
    return T // per


@dataclass(frozen=True)
class AlgorithmPath:
    """The execution path of one algorithm of a call: its ``name``, the ``reason`` it was
    chosen, and ``declined``: ``(name, reason)`` of the faster paths that do not run it."""

    name: str
    reason: str
    declined: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, eq=False)
class RunPlan:
    """One engine call, decided before any work (built by :func:`plan`; see the module).

    ``steps[i]`` and ``record[i]`` are algorithm ``i``'s local steps ``n`` and record steps;
    ``replicates``, ``backend``, ``threads`` and ``weight_shifts`` are the Monte Carlo
    engine's (``None`` / ``1`` / ``()`` for the exact one); ``kernels``: whether compiled
    kernels may run (the switch ``convkit.kernels`` when planned, or the exact engine's
    ``use_numba``); ``engines``: the engine of each algorithm (``"simulate"`` for the Monte
    Carlo engine; the exact engine's ``"local"``, ``"dpsgd"``, ``"compressed"``);
    ``per_algorithm[i]``: algorithm ``i``'s path (:class:`AlgorithmPath`); ``path`` and
    ``reason``: the call's path (the algorithms' common path, or their paths joined by
    ``" + "`` in the engine's order); ``declined``: ``(name, reason)`` of the faster paths
    that run none of the call's algorithms.
    """

    engine: str
    problem: Problem
    algorithms: tuple[Algorithm, ...]
    steps: tuple[int, ...]
    record: tuple[np.ndarray, ...]
    replicates: int | None = None
    backend: Backend | None = None
    threads: int = 1
    weight_shifts: tuple[float | None, ...] = ()
    kernels: bool = True
    engines: tuple[str, ...] = ()
    path: str = ""
    reason: str = ""
    declined: tuple[tuple[str, str], ...] = field(default=())
    per_algorithm: tuple[AlgorithmPath, ...] = ()

    @property
    def dtype(self) -> str | None:
        """The floating dtype of the Monte Carlo state (None for the exact engine)."""
        return None if self.backend is None else self.backend.dtype

    @property
    def weighted(self) -> bool:
        """Whether any algorithm records the weighted averages ``wavg1``, ``wavg2``."""
        return any(tau is not None for tau in self.weight_shifts)

    def describe(self) -> dict[str, Any]:
        """``Result.meta["path"]``, one schema for every engine (JSON-serialisable):
        ``engine``; ``name``, ``reason``, ``declined`` (name -> reason) and ``kernels`` of the
        call; ``engines`` (label -> the algorithm's engine); ``algorithms``: label -> its own
        ``name``, ``reason``, ``declined``, ``engine`` and ``capabilities`` (the class's
        declaration, :mod:`convkit.algorithms.capabilities`)."""
        labels = [a.label for a in self.algorithms]
        engines = self.engines or (self.engine,) * len(labels)
        return {
            "engine": self.engine,
            "name": self.path,
            "reason": self.reason,
            "declined": dict(self.declined),
            "kernels": self.kernels,
            "engines": dict(zip(labels, engines, strict=True)),
            "algorithms": {
                label: {
                    "name": p.name,
                    "reason": p.reason,
                    "declined": dict(p.declined),
                    "engine": engine,
                    "capabilities": a.capabilities.describe(),
                }
                for label, a, p, engine in zip(
                    labels, self.algorithms, self.per_algorithm, engines, strict=True
                )
            },
        }


class ExecutionPath(Protocol):
    """A way of running a planned call.

    ``supports(plan)`` says whether it can run the call at all (engine, problem, backend,
    dtype, kernel switch), and why.  Two optional methods make it a path per algorithm:
    ``accepts(plan, i) -> (bool, reason)`` whether it runs algorithm ``i`` (from the
    algorithm's declared capabilities, never its concrete class; every algorithm when
    absent), and ``shares(plan) -> (bool, reason)`` whether it may run some of a call's
    algorithms while others run on later paths (a path whose numbers differ from the
    step-by-step ones, even to rounding, does not: an algorithm's numbers would then depend
    on its neighbours in the call; ``True`` when absent).
    """

    name: str

    def supports(self, plan: RunPlan) -> tuple[bool, str]:
        """``(True, what it will do)`` or ``(False, why not)``."""
        ...


def kernels_unavailable(plan: RunPlan) -> str | None:
    """Why compiled kernels cannot run for ``plan`` (switched off, numba unusable), or None."""
    if not plan.kernels:
        return "compiled kernels switched off (convkit.kernels(enabled=False) or use_numba=False)"
    if not numba_usable():
        return "numba is not installed or CONVKIT_NO_NUMBA is set"
    return None


@dataclass(frozen=True)
class _CompiledSteps:
    """Step by step, with the compiled one-step kernels where the arrays allow."""

    name: str = "compiled-steps"

    def supports(self, plan: RunPlan) -> tuple[bool, str]:
        if plan.engine != "simulate":
            return False, "Monte Carlo engine only"
        if plan.backend is None or plan.backend.name != "numpy":
            name = None if plan.backend is None else plan.backend.name
            return False, f"backend {name!r}: the compiled kernels take NumPy arrays"
        why = kernels_unavailable(plan)
        if why is not None:
            return False, why
        return True, (
            "step by step; the compiled one-step kernels (least-squares and logistic steps, "
            "finite sums, top-k and fused decentralized updates) run where the arrays allow"
        )

    def accepts(self, plan: RunPlan, i: int) -> tuple[bool, str]:
        """Every algorithm; the reason names the compiled kernels its class declares."""
        a = plan.algorithms[i]
        kernels = a.capabilities.kernels
        if kernels:
            return True, f"step by step; its compiled kernels: {', '.join(kernels)}"
        return True, (
            f"step by step; {type(a).__name__} declares no compiled kernel of its own (the "
            "problem's compiled gradients run where it asks for them)"
        )


@dataclass(frozen=True)
class _ArraySteps:
    """Step by step on the array API: supports every Monte Carlo call."""

    name: str = "array-steps"

    def supports(self, plan: RunPlan) -> tuple[bool, str]:
        if plan.engine != "simulate":
            return False, "Monte Carlo engine only"
        return True, "step by step on the array API (no compiled kernel)"


#: step by step with the compiled one-step kernels (NumPy backend, kernels on, numba usable)
COMPILED_STEPS = _CompiledSteps()
#: step by step on the array API (every Monte Carlo call)
ARRAY_STEPS = _ArraySteps()


def plan(
    problem: Problem,
    algorithms: Sequence[Algorithm],
    *,
    engine: str,
    steps: Sequence[int],
    record: Sequence[np.ndarray],
    paths: Sequence[ExecutionPath],
    replicates: int | None = None,
    backend: Backend | None = None,
    threads: int = 1,
    weight_shifts: Sequence[float | None] = (),
    kernels: bool | None = None,
    engines: Sequence[str] = (),
) -> RunPlan:
    """The :class:`RunPlan` of one engine call: each algorithm on the first of ``paths``
    that supports the call and accepts it (:class:`ExecutionPath`).

    A path that does not share a call (``shares``) runs either every algorithm still
    unplaced or none of them.  The arguments are the engine's, already validated;
    ``kernels=None`` reads the switch (:func:`convkit._kernel_switch.kernels_enabled`).
    Raises ``ValueError`` when ``engine`` is unknown or no path runs some algorithm (the
    engines' last paths run every call).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {list(ENGINES)}, got {engine!r}")
    algos = tuple(algorithms)
    if not (len(steps) == len(record) == len(algos)):
        raise ValueError(
            f"steps and record need one entry per algorithm ({len(algos)}), got "
            f"{len(steps)} and {len(record)}"
        )
    draft = RunPlan(
        engine=engine,
        problem=problem,
        algorithms=algos,
        steps=tuple(int(n) for n in steps),
        record=tuple(record),
        replicates=replicates,
        backend=backend,
        threads=int(threads),
        weight_shifts=tuple(weight_shifts),
        kernels=kernels_enabled() if kernels is None else bool(kernels),
        engines=tuple(engines),
    )
    left = list(range(len(algos)))
    chosen: dict[int, AlgorithmPath] = {}
    declined: list[list[tuple[str, str]]] = [[] for _ in algos]
    call_declined: list[tuple[str, str]] = []
    used: list[tuple[str, str]] = []
    for path in paths:
        if not left:
            break
        ok, why = path.supports(draft)
        verdicts = {i: _accepts(path, draft, i) for i in left} if ok else {}
        take = [i for i in left if ok and verdicts[i][0]]
        if take and len(take) < len(left):
            shares, why_not = _shares(path, draft)
            if not shares:
                others = sorted({type(algos[i]).__name__ for i in left if i not in take})
                why_not = f"{why_not}; it runs whole calls only, and {others} cannot run on it"
                verdicts = {i: (False, why_not) if i in take else verdicts[i] for i in left}
                take = []
        if not take:
            refused = why if not ok else "; ".join(dict.fromkeys(v[1] for v in verdicts.values()))
            call_declined.append((path.name, refused))
        else:
            used.append((path.name, why))
        for i in list(left):
            if i in take:
                chosen[i] = AlgorithmPath(path.name, verdicts[i][1], tuple(declined[i]))
                left.remove(i)
            else:
                declined[i].append((path.name, why if not ok else verdicts[i][1]))
    if left:
        raise ValueError(f"no execution path supports this {engine} call: {dict(call_declined)}")
    names = [name for name, _ in used]
    if len(used) == 1:
        name, reason = used[0]
    else:
        name = " + ".join(names)
        counts = [(n, sum(p.name == n for p in chosen.values())) for n in names]
        reason = "one path per algorithm (see meta['path']['algorithms']): " + ", ".join(
            f"{n} runs {c} algorithm{'s' if c > 1 else ''}" for n, c in counts
        )
    last = max(i for i, p in enumerate(paths) if p.name in names)
    faster = {p.name for p in list(paths)[:last]}
    return replace(
        draft,
        path=name,
        reason=reason,
        declined=tuple((n, r) for n, r in call_declined if n in faster),
        per_algorithm=tuple(chosen[i] for i in range(len(algos))),
    )


def _accepts(path: ExecutionPath, plan: RunPlan, i: int) -> tuple[bool, str]:
    """``path.accepts(plan, i)``, or ``(True, path's reason)`` for a path without it."""
    accepts = getattr(path, "accepts", None)
    if accepts is None:
        return True, path.supports(plan)[1]
    return accepts(plan, i)


def _shares(path: ExecutionPath, plan: RunPlan) -> tuple[bool, str]:
    """``path.shares(plan)``, or ``(True, "")`` for a path without it."""
    shares = getattr(path, "shares", None)
    return (True, "") if shares is None else shares(plan)
