"""Step-size and communication schedules.

Local steps are counted from ``k = 1``: on every worker, local step ``k`` uses the step size
``gamma_k`` and, if ``k`` is a communication step, the workers average their models right
after it.

Step sizes (Patel & Dieuleveut 2019, arXiv 1904.11325, use ``gamma_k = C k^-alpha`` with
"large" steps ``1/2 < alpha < 1``):

* :class:`Constant`: ``gamma_k = gamma``;
* :class:`PolyDecay`: ``gamma_k = C (k + k0)^-alpha``.

Communication schedules map the number ``n`` of local steps to the sorted local steps after
which models are averaged.  The last step ``n`` is always a communication step (the output is
the averaged model), so every schedule has at least one round.

One rule for every schedule: a schedule refuses (``ValueError`` from
:meth:`CommSchedule.validate`, which :meth:`CommSchedule.steps`, ``LocalSGD`` and the exact
engine call) a number ``n`` of local steps in which it cannot place the communication it
describes, rather than silently degrading to one-shot averaging: ``Rounds(N)`` needs
``N <= n``, ``Every(H)`` needs ``H <= n``, ``At(at)`` needs every listed step ``<= n``,
``Geometric(first, ...)`` needs its first gap ``ceil(first) <= n`` and
``Polynomial(power, scale)`` its first round ``ceil(scale) <= n``.  Later rounds of the growing
schedules that fall beyond ``n`` are dropped (that is their design), and the last interval of
``Every(H)`` may be shorter than ``H``.

* :class:`EveryStep`: mini-batch averaging (MBA), ``n`` rounds;
* :class:`Final`: one-shot averaging (OSA), one round at ``n``;
* :class:`Every`: every ``H`` local steps (plus ``n``);
* :class:`Rounds`: ``N`` rounds evenly spaced, round ``j`` after local step ``ceil(j n / N)``;
* :class:`At`: an explicit list of steps (plus ``n``);
* :class:`Geometric`: gaps growing geometrically, ``H_j = first * ratio^j``;
* :class:`Polynomial`: communication at ``ceil(c j^power)``, i.e. gaps growing like
  ``j^(power - 1)``.

Position forms (what papers write: round ``j`` of a budget of ``N`` placed after a given local
step; duplicates removed, the last step ``n`` always a round, :meth:`CommSchedule.rounds` the
actual number of distinct rounds, at most ``N``; ``N <= n`` required, as for ``Rounds``):

* :class:`PowerRounds`: round ``j`` after step ``ceil(n (j/N)^p)`` (``p = 1``: even, the
  positions of ``Rounds(N)``; ``p = 2``: :func:`QuadraticRounds`);
* :class:`GeometricRounds`: round ``j`` after step ``ceil(n^(j/N))``;
* :class:`DriftClockRounds`: positions fixed before the run at equal increments of a
  step-size/drift clock computed from ``mu``, ``L``, ``sigma^2`` and ``||theta0 - theta*||``
  (not adaptive: it reads no iterate; the rule and its derivation, a bias/variance balance
  derived here, are in its docstring).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from .validation import check_int, check_real

__all__ = [
    "At",
    "CommSchedule",
    "Constant",
    "DriftClockRounds",
    "Every",
    "EveryStep",
    "Final",
    "Geometric",
    "GeometricRounds",
    "PolyDecay",
    "Polynomial",
    "PowerRounds",
    "QuadraticRounds",
    "Rounds",
    "StepSize",
]


class StepSize(ABC):
    """A deterministic step-size sequence ``gamma_k``, ``k = 1, 2, ...``."""

    @abstractmethod
    def values(self, n: int) -> np.ndarray:
        """``[gamma_1, ..., gamma_n]`` as a float64 array."""

    def __call__(self, k: int) -> float:
        return float(self.values(k)[-1])

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-serialisable description."""


@dataclass(frozen=True)
class Constant(StepSize):
    """Constant step ``gamma_k = gamma``."""

    gamma: float

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "gamma", check_real("gamma", self.gamma, low=0, low_inclusive=False)
        )

    def values(self, n: int) -> np.ndarray:
        return np.full(check_int("n", n, low=0), self.gamma)

    def describe(self) -> dict[str, Any]:
        return {"kind": "constant", "gamma": self.gamma}


@dataclass(frozen=True)
class PolyDecay(StepSize):
    """Decaying step ``gamma_k = C (k + k0)^-alpha`` (k counts local steps from 1).

    ``alpha = 0`` is a constant step, ``1/2 < alpha < 1`` the "large step" regime of
    Patel & Dieuleveut (2019), ``alpha = 1`` the classical Robbins-Monro rate.
    """

    C: float
    alpha: float
    k0: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "C", check_real("C", self.C, low=0, low_inclusive=False))
        object.__setattr__(self, "alpha", check_real("alpha", self.alpha, low=0, high=1))
        object.__setattr__(self, "k0", check_real("k0", self.k0, low=0))

    def values(self, n: int) -> np.ndarray:
        k = np.arange(1, check_int("n", n, low=0) + 1, dtype=np.float64)
        return self.C * (k + self.k0) ** (-self.alpha)

    def describe(self) -> dict[str, Any]:
        return {"kind": "poly", "C": self.C, "alpha": self.alpha, "k0": self.k0}


class CommSchedule(ABC):
    """When workers average their models, as a function of the number of local steps."""

    def steps(self, n: int) -> np.ndarray:
        """Sorted unique local steps in ``[1, n]`` after which models are averaged (``n``
        included); raises ``ValueError`` if the schedule cannot place its rounds in ``n`` local
        steps (:meth:`validate`)."""
        n = check_int("n (local steps)", n, low=1)
        self.validate(n)
        raw = np.asarray(self._raw_steps(n), dtype=np.int64)
        raw = raw[(raw >= 1) & (raw <= n)]
        return _sorted_unique_with_last(raw, n)

    def rounds(self, n: int) -> int:
        """Number of communication rounds over ``n`` local steps."""
        return int(self.steps(n).size)

    def rounds_at(self, n: int, steps: Any) -> np.ndarray:
        """Cumulative number of rounds after each local step of ``steps`` (values in
        ``[1, n]``), in ``O(rounds + len(steps) log rounds)`` without an ``n``-long array."""
        at = np.asarray(steps, dtype=np.int64)
        return np.searchsorted(self.steps(n), at, side="right").astype(np.int64)

    def period(self, n: int) -> int:
        """``H`` when the rounds are exactly the multiples of ``H`` in ``[1, n]`` plus ``n``
        (``EveryStep``: 1, ``Every(H)``: ``H``), else 0: lets engines test ``k % H == 0``
        instead of storing the round positions."""
        return 0

    def mask(self, n: int) -> np.ndarray:
        """Boolean array ``comm[k-1]``: True when local step ``k`` ends with an average."""
        m = np.zeros(n, dtype=bool)
        m[self.steps(n) - 1] = True
        return m

    def validate(self, n: int) -> None:
        """Raise ``ValueError`` if the schedule cannot place its rounds in ``n`` local steps
        (the rule of the module docstring); the default accepts every ``n >= 1``."""

    def check_step(self, step: StepSize) -> None:
        """Raise ``ValueError`` if the schedule cannot serve an algorithm whose step sizes are
        ``step`` (called by the algorithms that take a ``comm``); the default accepts every
        step. :class:`DriftClockRounds` computes its positions from its own step sizes and
        refuses another step."""

    @abstractmethod
    def _raw_steps(self, n: int) -> Any: ...

    @abstractmethod
    def describe(self) -> dict[str, Any]: ...

    @property
    def label(self) -> str:
        d = self.describe()
        rest = ",".join(f"{k}={v}" for k, v in d.items() if k != "kind")
        return f"{d['kind']}({rest})" if rest else d["kind"]


@dataclass(frozen=True)
class EveryStep(CommSchedule):
    """Mini-batch averaging (MBA): average after every local step."""

    def _raw_steps(self, n: int) -> Any:
        return np.arange(1, n + 1)

    def steps(self, n: int) -> np.ndarray:
        return np.arange(1, check_int("n (local steps)", n, low=1) + 1, dtype=np.int64)

    def rounds(self, n: int) -> int:
        return check_int("n (local steps)", n, low=1)

    def rounds_at(self, n: int, steps: Any) -> np.ndarray:
        check_int("n (local steps)", n, low=1)
        return np.asarray(steps, dtype=np.int64).copy()

    def period(self, n: int) -> int:
        return 1

    def mask(self, n: int) -> np.ndarray:
        return np.ones(check_int("n (local steps)", n, low=1), dtype=bool)

    def describe(self) -> dict[str, Any]:
        return {"kind": "mba"}


@dataclass(frozen=True)
class Final(CommSchedule):
    """One-shot averaging (OSA): a single average after the last step."""

    def _raw_steps(self, n: int) -> Any:
        return np.array([n])

    def rounds(self, n: int) -> int:
        check_int("n (local steps)", n, low=1)
        return 1

    def describe(self) -> dict[str, Any]:
        return {"kind": "osa"}


@dataclass(frozen=True)
class Every(CommSchedule):
    """Average every ``H`` local steps (and after the last one).

    ``H`` must not exceed the ``n`` local steps of the run: ``Every(H)`` with ``H > n`` is
    refused (``ValueError``), like ``Rounds(N)`` with ``N > n`` (use :class:`Final` for
    one-shot averaging).
    """

    H: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "H", check_int("H", self.H, low=1))

    def validate(self, n: int) -> None:
        if self.H > n:
            raise ValueError(
                f"H (local steps between rounds) must be <= the number of local steps "
                f"n = {n}, got {self.H}"
            )

    def _raw_steps(self, n: int) -> Any:
        return np.arange(self.H, n + 1, self.H)

    def rounds(self, n: int) -> int:
        n = check_int("n (local steps)", n, low=1)
        self.validate(n)
        return -(-n // self.H)  # ceil(n / H): the multiples of H plus n itself

    def rounds_at(self, n: int, steps: Any) -> np.ndarray:
        n = check_int("n (local steps)", n, low=1)
        self.validate(n)
        at = np.asarray(steps, dtype=np.int64)
        return at // self.H + ((at == n) & (n % self.H != 0))

    def period(self, n: int) -> int:
        return self.H

    def describe(self) -> dict[str, Any]:
        return {"kind": "every", "H": self.H}


@dataclass(frozen=True)
class Rounds(CommSchedule):
    """``N`` rounds evenly spaced: round ``j`` after local step ``ceil(j n / N)``, j = 1..N.

    ``N`` must not exceed the ``n`` local steps of the run (refused with ``ValueError``
    otherwise), the same rule as ``Every(H)`` with ``H > n``.
    """

    N: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "N", check_int("N (rounds)", self.N, low=1))

    def validate(self, n: int) -> None:
        if self.N > n:
            raise ValueError(
                f"N (rounds) must be <= the number of local steps n = {n}, got {self.N}"
            )

    def _raw_steps(self, n: int) -> Any:
        j = np.arange(1, self.N + 1, dtype=np.int64)
        return -((-j * n) // self.N)  # exact integer ceil(j n / N)

    def rounds(self, n: int) -> int:
        n = check_int("n (local steps)", n, low=1)
        self.validate(n)
        return self.N  # ceil(j n / N) is strictly increasing in j for N <= n

    def rounds_at(self, n: int, steps: Any) -> np.ndarray:
        n = check_int("n (local steps)", n, low=1)
        self.validate(n)
        # rounds j with ceil(j n / N) <= k  <=>  j <= k N / n
        return (np.asarray(steps, dtype=np.int64) * self.N) // n

    def describe(self) -> dict[str, Any]:
        return {"kind": "rounds", "N": self.N}


@dataclass(frozen=True)
class At(CommSchedule):
    """Average after the given local steps (and after the last one).

    Every listed step must lie in the ``n`` local steps of the run (refused with
    ``ValueError`` otherwise).
    """

    at: tuple[int, ...]

    def __post_init__(self) -> None:
        steps = tuple(sorted({check_int("at[i]", s, low=1) for s in self.at}))
        object.__setattr__(self, "at", steps)

    def validate(self, n: int) -> None:
        if self.at and self.at[-1] > n:
            raise ValueError(f"at must list local steps in [1, n = {n}], got a step {self.at[-1]}")

    def _raw_steps(self, n: int) -> Any:
        return np.array(self.at, dtype=np.int64)

    def describe(self) -> dict[str, Any]:
        return {"kind": "at", "at": list(self.at)}


@dataclass(frozen=True)
class Geometric(CommSchedule):
    """Gaps growing geometrically: ``H_j = ceil(first * ratio^j)``, j = 0, 1, ...

    Communication becomes sparser as iterates converge, following the "adaptive
    communication frequency" of Patel & Dieuleveut (2019).  The first gap must fit in the
    ``n`` local steps of the run (``ceil(first) <= n``, refused with ``ValueError``
    otherwise); later rounds beyond ``n`` are dropped.
    """

    first: float = 1.0
    ratio: float = 2.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "first", check_real("first", self.first, low=1))
        object.__setattr__(self, "ratio", check_real("ratio", self.ratio, low=1))

    def validate(self, n: int) -> None:
        if math.ceil(self.first) > n:
            raise ValueError(
                f"first (the first gap) must be <= the number of local steps n = {n}, "
                f"got {self.first:g}"
            )

    def _raw_steps(self, n: int) -> Any:
        out, t, j = [], 0, 0
        while t < n:
            t += max(1, math.ceil(self.first * self.ratio**j))
            out.append(min(t, n))
            j += 1
        return np.array(out, dtype=np.int64)

    def describe(self) -> dict[str, Any]:
        return {"kind": "geometric", "first": self.first, "ratio": self.ratio}


@dataclass(frozen=True)
class Polynomial(CommSchedule):
    """Communication at steps ``ceil(scale * j^power)``, j = 1, 2, ... (gaps ~ j^(power-1)).

    The first round must fit in the ``n`` local steps of the run (``ceil(scale) <= n``,
    refused with ``ValueError`` otherwise); later rounds beyond ``n`` are dropped.
    """

    power: float = 2.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "power", check_real("power", self.power, low=1))
        object.__setattr__(
            self, "scale", check_real("scale", self.scale, low=0, low_inclusive=False)
        )

    def validate(self, n: int) -> None:
        if math.ceil(self.scale) > n:
            raise ValueError(
                f"scale (the first round, ceil(scale)) must be <= the number of local steps "
                f"n = {n}, got {self.scale:g}"
            )

    def _raw_steps(self, n: int) -> Any:
        jmax = math.ceil((n / self.scale) ** (1 / self.power)) + 1
        j = np.arange(1, jmax + 1, dtype=np.float64)
        return np.ceil(self.scale * j**self.power).astype(np.int64)

    def describe(self) -> dict[str, Any]:
        return {"kind": "polynomial", "power": self.power, "scale": self.scale}


def _check_budget(N: int, n: int) -> None:
    if N > n:
        raise ValueError(f"N (rounds) must be <= the number of local steps n = {n}, got {N}")


def _ceil_guarded(x: np.ndarray, p: float = 1.0) -> np.ndarray:
    """``ceil(x)`` of float values, where a value within its rounding error of an integer
    (``max(1e-9, 16 eps |x| (1 + |p|))``, ``p`` the power that produced it) counts as that
    integer: ``ceil(3.0000000000000004) = 3``, not 4."""
    x = np.asarray(x, dtype=np.float64)
    r = np.rint(x)
    tol = np.maximum(1e-9, 16.0 * np.finfo(np.float64).eps * np.abs(x) * (1.0 + abs(p)))
    return np.where(np.abs(x - r) <= tol, r, np.ceil(x)).astype(np.int64)


def _power_positions(n: int, N: int, p: float) -> np.ndarray:
    """``ceil(n (j/N)^p)``, j = 1..N: exact integers ``ceil(n j^p / N^p)`` for integer ``p``
    (int64 when ``n N^p < 2^62``, Python integers otherwise), else guarded floats."""
    j = np.arange(1, N + 1, dtype=np.int64)
    if float(p).is_integer():
        q = int(p)
        if n * N**q < 2**62:
            return -((-n * j**q) // N**q)
        num = np.array([n * int(v) ** q for v in j], dtype=object)
        return np.array(-((-num) // N**q), dtype=np.int64)
    return _ceil_guarded(n * (j / N) ** p, p)


@dataclass(frozen=True)
class PowerRounds(CommSchedule):
    """A budget of ``N`` rounds at positions ``ceil(n (j/N)^p)``, j = 1..N.

    ``p = 1``: evenly spaced (the positions of :class:`Rounds`); ``p > 1``: gaps growing
    like ``j^(p-1)`` (communicate often early, rarely late); ``0 < p < 1``: shrinking gaps.
    Integer ``p`` uses exact integer arithmetic (``ceil(n j^p / N^p)``), other ``p`` floats
    with :func:`_ceil_guarded` (a value within rounding error of an integer is that integer).
    Duplicate positions (several small ``j`` sharing a step) are removed, so
    :meth:`rounds` is the actual number of distinct rounds, ``<= N``; the last one is always
    ``n`` (``j = N``).  ``N <= n`` is required (``ValueError`` otherwise, as ``Rounds``).

    Parameters
    ----------
    N : int
        Nominal number of rounds (the budget), ``>= 1``.
    p : float
        Power of the positions, ``> 0``.
    """

    N: int
    p: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "N", check_int("N (rounds)", self.N, low=1))
        object.__setattr__(self, "p", check_real("p (power)", self.p, low=0, low_inclusive=False))
        if self.p > 64:
            raise ValueError(f"p (power) must be in (0, 64], got {self.p:g}")

    def validate(self, n: int) -> None:
        _check_budget(self.N, n)

    def _raw_steps(self, n: int) -> Any:
        return _power_positions(n, self.N, self.p)

    def describe(self) -> dict[str, Any]:
        return {"kind": "power_rounds", "N": self.N, "p": self.p}


def QuadraticRounds(N: int) -> PowerRounds:
    """``N`` rounds at ``ceil(n (j/N)^2)`` (exact integers ``ceil(n j^2 / N^2)``):
    ``PowerRounds(N, 2)``."""
    return PowerRounds(N, 2.0)


@dataclass(frozen=True)
class GeometricRounds(CommSchedule):
    """A budget of ``N`` rounds at positions ``ceil(n^(j/N))``, j = 1..N (gaps growing
    geometrically by the factor ``n^(1/N)``).

    Computed in floats with :func:`_ceil_guarded` (``n^(j/N)`` within rounding error of an
    integer is that integer; ``j = N`` gives exactly ``n``); duplicates are removed, so
    :meth:`rounds` (the actual number of distinct rounds) may be far below ``N`` when
    ``n^(1/N)`` is close to 1.  ``N <= n`` is required.

    Parameters
    ----------
    N : int
        Nominal number of rounds (the budget), ``>= 1``.
    """

    N: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "N", check_int("N (rounds)", self.N, low=1))

    def validate(self, n: int) -> None:
        _check_budget(self.N, n)

    def _raw_steps(self, n: int) -> Any:
        j = np.arange(1, self.N + 1, dtype=np.float64)
        out = _ceil_guarded(np.exp(j / self.N * math.log(n)))
        out[-1] = n
        return np.minimum(out, n)

    def describe(self) -> dict[str, Any]:
        return {"kind": "geometric_rounds", "N": self.N}


#: ``sqrt`` of the largest float64: the largest ``L`` whose square
#: :class:`DriftClockRounds` can form.
_SQRT_FLOAT_MAX = math.sqrt(np.finfo(np.float64).max)


@dataclass(frozen=True)
class DriftClockRounds(CommSchedule):
    r"""A budget of ``N`` rounds fixed before the run by a step-size/drift clock (derived here).

    Not adaptive: the positions are computed once from ``mu``, ``L``, the noise ``sigma^2``,
    the step sizes and ``dist0 = ||theta0 - theta*||`` (so ``theta*`` must be known), and
    nothing is decided from the iterates of the run.  The clock puts the rounds where the
    workers are expected to drift apart fastest.

    Rule
    ----
    Round ``j`` after the first local step ``k`` with ``tau(k) >= j tau(n) / N``
    (``j = 1..N``; duplicates removed, ``n`` always a round), for the clock

    ``tau(k) = sum_{i <= k} gamma_i sqrt(sigma^2 + L^2 e_i^2)``,

    ``e_i = dist0 prod_{l <= i} max(|1 - mu gamma_l|, |1 - L gamma_l|)`` the deterministic
    recursion of the distance of the averaged iterate to ``theta*`` (the mean iterate of a
    quadratic contracts by ``I - gamma H``; the slower of the extreme directions is kept, so
    steps with ``gamma L > 2`` overshoot).  The local gap is ``H(k) ~ 1 / (gamma_k s_k)``.

    Derivation
    ----------
    Between two rounds the workers run independently and their spread around the mean grows
    by ``r_i = (1 - 1/P) gamma_i^2 s_i^2`` per step, where ``s_i^2 = sigma^2 + L^2 e_i^2``
    bounds the gradient-noise variance at distance ``e_i`` from the optimum (additive plus
    multiplicative noise); a round resets it.  The spread is what averaging the models cannot
    undo: through the third derivative of the loss it becomes a drift of the mean (the
    mechanism of :mod:`convkit.bounds.local_sgd_large_steps`), and a drift at step ``i`` adds
    about ``drift_i / mu`` to the sum of the biases that the Polyak-Ruppert average carries,
    whatever ``i`` (the relaxation time ``1 / (mu gamma_i)`` times the step ``gamma_i``).  So
    the harm of a schedule is ``sum_i r_i (i - s(i))`` (``s(i)`` the last round before ``i``),
    i.e. ``sum_k r_k H(k) / 2`` in a continuous gap density, under the budget
    ``sum_k 1 / H(k) = N``.  The Lagrange condition ``r_k = lambda / H(k)^2`` gives
    ``H(k) ~ r_k^(-1/2)``: round density proportional to ``gamma_k s_k``, the clock above (the
    constant ``1 - 1/P`` cancels).  Far from the optimum (large ``e_i``) the rounds are dense;
    near it the gaps grow like ``1 / gamma_k``, the relaxation time, and for
    ``gamma_k = C k^-alpha`` the late positions follow ``n (j/N)^(1/(1 - alpha))``.  This makes
    computable the statement of Patel & Dieuleveut (2019) that the needed communication
    frequency depends on the distance to the optimum.

    Assumptions: strongly convex and smooth (``mu``, ``L``); the noise bound above; gaps
    shorter than the relaxation time (beyond it the spread saturates and the rule
    over-weights early rounds); a constant third derivative.  It is a heuristic with no
    optimality claim, compared with the best schedule found by
    :mod:`convkit.schedule_search`.  Cost: ``O(n)`` vectorized work per :meth:`steps`.

    Parameters
    ----------
    N : int
        Nominal number of rounds (budget), ``1 <= N <= n``.
    step : StepSize
        The step sizes ``gamma_k`` of the run: the algorithm that uses the rule must have
        this step (:meth:`check_step`; another step is refused).
    mu, L : float
        Strong convexity and smoothness constants, ``0 < mu <= L``.
    dist0 : float
        ``||theta0 - theta*||`` (``>= 0``).
    noise : float
        ``sigma^2``, the gradient-noise variance at ``theta*`` (``> 0``).

    Raises
    ------
    ValueError
        Before any position is computed: ``L > sqrt(float max)`` (about ``1.34e154``, where
        ``L^2`` overflows float64; at construction); a step with ``gamma_k L > 2`` for some
        ``k <= n`` (the mean recursion diverges, ``e_i`` grows without bound and the rule
        would crowd its budget into the last steps; ``gamma_k L = 2`` is accepted); a clock
        ``tau(n)`` that is not finite in float64 (e.g. ``L dist0`` beyond about ``1e154``)
        (both in :meth:`validate`).
    """

    N: int
    step: StepSize
    mu: float
    L: float
    dist0: float
    noise: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "N", check_int("N (rounds)", self.N, low=1))
        if not isinstance(self.step, StepSize):
            raise TypeError(f"step must be a StepSize, got {type(self.step).__name__}")
        object.__setattr__(self, "mu", check_real("mu", self.mu, low=0, low_inclusive=False))
        object.__setattr__(self, "L", check_real("L (must be >= mu)", self.L, low=self.mu))
        if self.L > _SQRT_FLOAT_MAX:
            raise ValueError(
                f"DriftClockRounds: L = {self.L:.6g} is too large: the clock uses L**2, which "
                f"overflows float64; allowed: mu <= L <= {_SQRT_FLOAT_MAX:.4g}"
            )
        object.__setattr__(self, "dist0", check_real("dist0", self.dist0, low=0))
        object.__setattr__(
            self, "noise", check_real("noise", self.noise, low=0, low_inclusive=False)
        )

    @staticmethod
    def unstable_step(step: StepSize, L: float, n: int) -> str | None:
        """Why the rule has no meaningful positions for ``step`` over ``n`` local steps
        (``gamma_k L > 2`` for some ``k <= n``: the mean recursion diverges), or ``None`` when
        every step is within the rule's domain (``gamma_k L = 2`` is accepted, with a
        rounding slack of ``1e-12`` for steps set to exactly ``2 / L``)."""
        g = np.asarray(step.values(n), dtype=np.float64)
        k = int(np.argmax(g))
        gl = float(g[k]) * float(L)
        if gl <= 2.0 * (1.0 + 1e-12):
            return None
        return (
            f"the step {step.describe()} has gamma_{k + 1} L = {gl:.6g} (gamma_{k + 1} = "
            f"{g[k]:.6g}, L = {float(L):.6g}): with gamma L > 2 the averaged iterate diverges "
            "and the rule has no meaningful positions; allowed: gamma_k L <= 2 for every "
            "local step k <= n"
        )

    def check_step(self, step: StepSize) -> None:
        """``ValueError`` unless ``step`` is the rule's own step (the same description): the
        positions were computed for the rule's step sizes and belong to no other run."""
        if not isinstance(step, StepSize) or step.describe() != self.step.describe():
            mine = self.step.describe()
            theirs = step.describe() if isinstance(step, StepSize) else repr(step)
            raise ValueError(
                f"comm: DriftClockRounds computes its positions from its own step {mine}, but "
                f"the algorithm's step is {theirs}; allowed: the same step, e.g. "
                f"DriftClockRounds(N, step, ...) with the algorithm's step"
            )

    def validate(self, n: int) -> None:
        """The budget (``N <= n``), a stable mean recursion (``gamma_k L <= 2`` for every
        ``k <= n``) and a finite clock; ``ValueError`` naming the parameter otherwise."""
        _check_budget(self.N, n)
        unstable = self.unstable_step(self.step, self.L, n)
        if unstable is not None:
            raise ValueError(f"DriftClockRounds: {unstable}")
        with np.errstate(over="ignore", invalid="ignore"):
            finite = bool(np.isfinite(self.clock(n)[-1]))
        if not finite:
            raise ValueError(
                f"DriftClockRounds: the clock tau(n) is not finite in float64 (L = {self.L:.6g}, "
                f"dist0 = {self.dist0:.6g}, noise = {self.noise:.6g}, n = {n}): "
                "sigma^2 + L^2 dist0^2 overflows; allowed: L dist0 and sqrt(noise) below "
                "about 1e154"
            )

    def clock(self, n: int) -> np.ndarray:
        """``tau(1..n)`` of the rule (increasing, float64)."""
        g = np.asarray(self.step.values(n), dtype=np.float64)
        e2 = np.zeros(n)
        if self.dist0 > 0:
            rho = np.maximum(np.abs(1.0 - self.mu * g), np.abs(1.0 - self.L * g))
            with np.errstate(divide="ignore"):
                log_e = math.log(self.dist0) + np.cumsum(np.log(rho))
            # no cap: an e_i^2 beyond float64 makes the clock infinite, which validate()
            # refuses (a cap at e^700 gave every early step the same drift, silently)
            with np.errstate(over="ignore"):
                e2 = np.exp(2.0 * log_e)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.cumsum(g * np.sqrt(self.noise + self.L**2 * e2))

    def targets(self, n: int) -> np.ndarray:
        """The ``N`` targets of the rule before duplicates are removed: the ``j``-th is the
        first local step ``k`` with ``tau(k) >= j tau(n) / N`` (``j = 1..N``, the last one
        ``n``; non-decreasing, ``int64``).  :meth:`steps` keeps the distinct ones; a study
        that needs exactly ``N`` rounds can spread repeated targets itself."""
        n = check_int("n (local steps)", n, low=1)
        self.validate(n)
        return self._raw_steps(n)

    def _raw_steps(self, n: int) -> Any:
        tau = self.clock(n)
        targets = tau[-1] * np.arange(1, self.N + 1, dtype=np.float64) / self.N
        pos = np.searchsorted(tau, targets * (1.0 - 1e-12), side="left") + 1
        pos[-1] = n
        return np.minimum(pos, n)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "drift_clock_rounds",
            "N": self.N,
            "step": self.step.describe(),
            "mu": self.mu,
            "L": self.L,
            "dist0": self.dist0,
            "noise": self.noise,
        }


def _sorted_unique_with_last(raw: np.ndarray, n: int) -> np.ndarray:
    """Sorted unique values of ``raw`` (all in ``[1, n]``) with ``n`` appended when absent:
    one linear pass for the non-decreasing arrays every built-in schedule produces (no sort of
    ``n`` elements), a sort only for a user schedule that lists its steps out of order."""
    if raw.size and np.any(raw[1:] < raw[:-1]):
        raw = np.sort(raw)
    if raw.size > 1:
        keep = np.empty(raw.size, dtype=bool)
        keep[0] = True
        np.not_equal(raw[1:], raw[:-1], out=keep[1:])
        raw = raw[keep]
    if raw.size and raw[-1] == n:
        return raw
    return np.concatenate([raw, np.array([n], dtype=np.int64)])


def __getattr__(name: str) -> Any:
    """A removed name (``AdaptiveRounds``) raises an ``AttributeError`` naming its successor
    (:data:`convkit._migration.REMOVED_NAMES`)."""
    from ._migration import missing_attribute

    raise missing_attribute(__name__, name)
