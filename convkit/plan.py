"""The run plan: what one engine call will run, and on which execution path, decided once.

:func:`convkit.simulate` and :func:`convkit.exact.expected_error` validate their arguments,
then build one :class:`RunPlan` with :func:`plan`: the problem, the algorithms, each one's
local steps and record steps, the replicates, the backend and dtype, the threads, the
weighted-average shifts, the state of the kernel switch (``convkit.kernels``) and the
*execution path* that will run the call, with the reason it was chosen.  Nothing downstream
decides the path again: the engine reads ``plan.path``, and ``Result.meta["path"]``
(:meth:`RunPlan.describe`) says which path ran and why the faster ones did not apply.

An execution path is an object with a ``name`` and a method ``supports(plan) -> (bool,
reason)`` (:class:`ExecutionPath`).  An engine lists its paths, fastest first, and
:func:`plan` takes the first that supports the call:

* Monte Carlo (:data:`convkit.simulate.SIMULATE_PATHS`): the fused Local-SGD segments
  (:class:`convkit._fused_local.FusedLocalSegments`, logistic regression and Gaussian least
  squares), then :data:`COMPILED_STEPS` (step by step, the compiled one-step kernels where the
  arrays allow), then :data:`ARRAY_STEPS` (step by step on the array API, always);
* exact (:data:`convkit.exact.dispatch.EXACT_PATHS`): the compiled second-moment recursion of
  the Local-SGD family, then its NumPy form.

Every path computes the same quantities; the compiled ones agree with the array-API ones
bit for bit or to rounding, as their modules document.  The pattern is that of
scikit-learn's solver selection (``LogisticRegression(solver="auto")``) made explicit and
recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ._kernel_switch import kernels_enabled, numba_usable
from .algorithms.base import Algorithm
from .backend import Backend
from .problems.base import Problem

__all__ = ["ARRAY_STEPS", "COMPILED_STEPS", "ExecutionPath", "RunPlan", "plan"]

#: the engines that build plans
ENGINES = ("simulate", "exact")


@dataclass(frozen=True, eq=False)
class RunPlan:
    """One engine call, decided before any work (built by :func:`plan`; see the module).

    ``steps[i]`` and ``record[i]`` are algorithm ``i``'s local steps ``n`` and record steps;
    ``replicates``, ``backend``, ``threads`` and ``weight_shifts`` are the Monte Carlo
    engine's (``None`` / ``1`` / ``()`` for the exact one); ``kernels``: whether compiled
    kernels may run (the switch ``convkit.kernels`` when planned, or the exact engine's
    ``use_numba``); ``engines``: the exact engine of each algorithm (``"local"``,
    ``"dpsgd"``, ``"compressed"``); ``path`` and ``reason``: the chosen execution path;
    ``declined``: ``(name, reason)`` of the faster paths that do not support the call.
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

    @property
    def dtype(self) -> str | None:
        """The floating dtype of the Monte Carlo state (None for the exact engine)."""
        return None if self.backend is None else self.backend.dtype

    @property
    def weighted(self) -> bool:
        """Whether any algorithm records the weighted averages ``wavg1``, ``wavg2``."""
        return any(tau is not None for tau in self.weight_shifts)

    def describe(self) -> dict[str, Any]:
        """``Result.meta["path"]``: the chosen path, its reason, and the faster paths declined
        with theirs (JSON-serialisable)."""
        out: dict[str, Any] = {
            "name": self.path,
            "reason": self.reason,
            "declined": dict(self.declined),
            "kernels": self.kernels,
        }
        if self.engines:
            labels = [a.label for a in self.algorithms]
            out["engines"] = dict(zip(labels, self.engines, strict=True))
        return out


class ExecutionPath(Protocol):
    """A way of running a planned call: ``supports(plan)`` says whether it can, and why."""

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
    """The :class:`RunPlan` of one engine call, on the first of ``paths`` that supports it.

    The arguments are the engine's, already validated; ``kernels=None`` reads the switch
    (:func:`convkit._kernel_switch.kernels_enabled`).  Raises ``ValueError`` when ``engine``
    is unknown or no path supports the call (the engines' last paths support every call).
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
    declined: list[tuple[str, str]] = []
    for path in paths:
        ok, why = path.supports(draft)
        if ok:
            return replace(draft, path=path.name, reason=why, declined=tuple(declined))
        declined.append((path.name, why))
    raise ValueError(f"no execution path supports this {engine} call: {dict(declined)}")
