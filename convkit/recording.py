"""What every engine records, and from where it starts: shared by Monte Carlo and exact engines.

:func:`convkit.simulate` (Monte Carlo) and :func:`convkit.exact.expected_error` (exact) take
the same ``theta0``, ``record`` and ``n_record`` arguments and fill the same frame layout; the
helpers here make them agree:

* :data:`ITERATES`: the estimators recorded at each record point (``avg``, ``tail``, ``last``);
* :data:`WEIGHTED_ITERATES`: the weighted averages ``wavg1``, ``wavg2`` (weights
  ``(j + tau)^p``), recorded by :func:`convkit.simulate` on request (``weight_shift``), with
  :func:`resolve_weight_shift` and the online sums :class:`WeightedSums`;
* :func:`record_steps`: the local steps at which an engine records;
* :func:`starting_point`: ``theta0`` validated as a float64 vector (None: zeros);
* :class:`DivergenceWarning`: issued by both engines when a run diverges.

:mod:`convkit.simulate` re-exports these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .backend import to_numpy
from .validation import check_int

__all__ = [
    "ITERATES",
    "algorithms_meta",
    "WEIGHTED_ITERATES",
    "DivergenceWarning",
    "WeightedSums",
    "record_at",
    "record_steps",
    "resolve_weight_shift",
    "starting_point",
    "store_record",
]

ITERATES = ("avg", "tail", "last")
#: weighted averages ``sum_j w_j m_j / sum_j w_j`` with ``w_j = (j + tau)^p``, ``p = 1, 2``
WEIGHTED_ITERATES = ("wavg1", "wavg2")


class DivergenceWarning(UserWarning):
    """Some replicates diverged (see ``Result.diverged``)."""


def record_steps(
    n: int,
    n_record: int = 40,
    extra: Sequence[int] | None = None,
    n_max: int | None = None,
) -> np.ndarray:
    """Log-spaced local steps in ``[1, n]`` (about ``n_record`` of them), ``extra`` ones and ``n``.

    ``extra`` steps must lie in ``[1, n_max]`` (``n_max`` defaults to ``n``; an engine running
    several algorithms of different ``n`` passes the longest): a step outside raises a
    :class:`ValueError` naming ``record``, the steps and the bound; steps in ``(n, n_max]``
    are recorded only by the runs that reach them (left out here).
    """
    n = check_int("n (local steps)", n, low=1)
    n_record = check_int("n_record", n_record, low=1)
    n_max = n if n_max is None else check_int("n_max", n_max, low=n)
    pts = np.unique(np.round(np.logspace(0, np.log10(n), n_record)).astype(np.int64))
    if extra is not None:
        ex = _integer_steps(extra)
        if ex.size and ex.min() < 1:
            raise ValueError(f"record must list local steps >= 1, got {int(ex.min())}")
        beyond = np.unique(ex[ex > n_max])
        if beyond.size:
            longest = "" if n_max == n else " (the longest run of this call)"
            raise ValueError(
                f"record must list local steps <= n, got {beyond.tolist()} beyond "
                f"n = {n_max}{longest}; give steps in [1, {n_max}]"
            )
        pts = np.concatenate([pts, ex[ex <= n]])
    return np.unique(np.concatenate([pts, [n]]))


def _integer_steps(extra: Sequence[Any]) -> np.ndarray:
    """``extra`` (the ``record`` argument) as int64 local steps, refusing what is not an
    integer (``1.5`` was truncated to step 1): integer-valued floats (``7.0``) are accepted."""
    raw = np.asarray(list(extra))
    if raw.size == 0:
        return np.zeros(0, dtype=np.int64)
    if raw.ndim != 1 or raw.dtype.kind not in "iuf":
        raise TypeError(
            f"record must list local steps as integers, got {list(extra)[:5]!r} (of "
            f"dtype {raw.dtype})"
        )
    if raw.dtype.kind == "f":
        bad = ~np.isfinite(raw) | (raw != np.floor(raw))
        if np.any(bad):
            raise ValueError(
                f"record must list local steps as integers, got {raw[bad][:5].tolist()}; "
                "give whole steps in [1, n]"
            )
        if np.any(np.abs(raw) >= 2.0**62):
            raise ValueError(
                f"record must list local steps in [1, n], got {raw[np.abs(raw) >= 2.0**62][:5]}"
            )
    return raw.astype(np.int64)


def starting_point(theta0: Any, d: int) -> np.ndarray:
    """``theta0`` validated as a finite float64 vector of shape ``(d,)`` (None: zeros); an entry
    that is not a number is a ``TypeError`` naming ``theta0``."""
    if theta0 is None:
        return np.zeros(d)
    try:
        t0 = np.asarray(to_numpy(theta0), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"theta0 must be an array of real numbers, got {theta0!r} ({exc})"
        ) from None
    if t0.shape != (d,):
        raise ValueError(
            f"theta0 must have shape (d,) = ({d},) to match the problem, got {t0.shape}"
        )
    if not np.all(np.isfinite(t0)):
        raise ValueError("theta0 must contain only finite values")
    return t0


def resolve_weight_shift(weight_shift: Any, step_size: Any) -> float | None:
    """The shift ``tau`` of the weighted averages for an algorithm with ``step_size``.

    Parameters
    ----------
    weight_shift:
        ``None`` (no weighted averages: returns None), a number ``tau >= 0``, or ``"step"``:
        the shift of CHOCO-SGD's strongly convex theorem (Koloskova, Stich, Jaggi 2019,
        Theorem 4.1: steps ``eta_t = 4 / (mu (a + t))`` and weights ``w_t = (a + t)^2`` on
        the iterate ``x^(t)``, ``t = 0, 1, ...``), read off a step
        ``PolyDecay(C, alpha=1, k0)``: convkit's step ``k`` (counted from 1) is the theorem's
        ``t = k - 1``, so ``a = k0 + 1``, and the iterate after step ``j`` is ``x^(j)``, of
        weight ``(a + j)^2``: ``tau = k0 + 1``.
    step_size:
        The algorithm's :class:`~convkit.schedules.StepSize` (its ``describe()`` is read).

    Returns
    -------
    float or None
        ``tau``, or None when ``weight_shift`` is None.
    """
    if weight_shift is None:
        return None
    if isinstance(weight_shift, str):
        if weight_shift != "step":
            raise ValueError(
                f"weight_shift must be None, a number tau >= 0 or 'step', got {weight_shift!r}"
            )
        desc = step_size.describe()
        if desc.get("kind") != "poly" or float(desc.get("alpha", -1)) != 1.0:
            raise ValueError(
                "weight_shift='step' needs a step PolyDecay(C, alpha=1, k0) (gamma_k = C / "
                f"(k + k0), the theorem's 4 / (mu (a + t))), got the step {desc}; give "
                "weight_shift a number instead"
            )
        return float(desc["k0"]) + 1.0
    if isinstance(weight_shift, bool) or not isinstance(weight_shift, (int, float, np.number)):
        raise ValueError(
            f"weight_shift must be None, a number tau >= 0 or 'step', got {weight_shift!r}"
        )
    tau = float(weight_shift)
    if not (np.isfinite(tau) and tau >= 0):
        raise ValueError(f"weight_shift (tau) must be a finite number >= 0, got {weight_shift!r}")
    return tau


class WeightedSums:
    """Online weighted averages of a sequence of vectors, in ``O(d)`` memory.

    After :meth:`add` of ``m_1, ..., m_k`` (arrays of one shape), :meth:`average` ``(p)`` is

        ``sum_{j<=k} (j + tau)^p m_j / sum_{j<=k} (j + tau)^p``,   ``p = 1, 2``

    (iterates ``wavg1``, ``wavg2``; with ``tau = a`` and ``p = 2`` the weighted average of
    Koloskova, Stich, Jaggi 2019, Theorem 4.1, whose sum runs over ``x^(0..T-1)``; here, as
    for ``avg``, over the iterates after steps ``1..k``). The vector sums are kept in
    float64 whatever the dtype of ``m`` (as the engine's ``avg``), the weight sums as Python
    floats. ``xp`` is the array namespace of the sums.

    Any finite ``tau >= 0`` works: the weights are kept as ``(j + tau) / 2^e`` with
    ``2^e`` the largest power of two ``<= max(1, tau)``.  The averages are ratios, so the
    common factor cancels; dividing by a power of two is exact in binary floating point, so
    the averages are bit for bit those of the unscaled weights wherever these are finite
    (``tau < 2``: ``e = 0``, nothing changes at all), while ``(j + tau)^2`` no longer
    overflows for ``tau`` beyond about ``1e154`` (``wavg2`` was ``inf / inf``).
    """

    def __init__(self, xp: Any, shape: tuple[int, ...], tau: float) -> None:
        self.xp = xp
        self.tau = float(tau)
        if not (np.isfinite(self.tau) and self.tau >= 0):
            raise ValueError(f"weight_shift (tau) must be a finite number >= 0, got {tau!r}")
        #: 2^-e, the exact power-of-two scale of the weights (1.0 for tau < 2)
        self.scale = float(np.ldexp(1.0, -int(np.frexp(max(1.0, self.tau))[1]) + 1))
        self.sums = {p: xp.zeros(shape, dtype=xp.float64) for p in (1, 2)}
        self.weights = {1: 0.0, 2: 0.0}

    def add(self, m: Any, j: int) -> None:
        """Add the iterate ``m`` of step ``j`` (steps added in order ``1, 2, ...``)."""
        xp = self.xp
        if m.dtype != xp.float64:
            m = xp.astype(m, xp.float64)
        w = (j + self.tau) * self.scale
        self.sums[1] += w * m
        self.sums[2] += (w * w) * m
        self.weights[1] += w
        self.weights[2] += w * w

    def average(self, p: int, rows: slice = slice(None)) -> Any:
        """The weighted average with weights ``(j + tau)^p`` (of the leading-axis ``rows``)."""
        return self.sums[p][rows, ...] / self.weights[p]


def record_at(
    problem,
    algo,
    state,
    m,
    sums,
    tails,
    k,
    tail_start,
    wsums=None,
    rows=slice(None),
    metrics: tuple[str, ...] | None = None,
) -> dict[tuple[str, str], Any]:
    """The error metrics ``metrics`` (default all, :meth:`Problem.errors_of`) of every
    recorded iterate at local step ``k`` (worker mean ``m``, running sums, tail sums from
    ``tail_start``, weighted sums), the algorithm's extra metrics and the problem's node
    metrics (of the nodes' models), keyed ``(iterate, metric)``."""
    out: dict[tuple[str, str], Any] = {}
    estimates = {"avg": sums / k, "last": m}
    if k >= tail_start:
        estimates["tail"] = tails / (k - tail_start + 1)
    if wsums is not None:
        estimates["wavg1"] = wsums.average(1, rows)
        estimates["wavg2"] = wsums.average(2, rows)
    for it, theta in estimates.items():
        values = problem.errors(theta) if metrics is None else problem.errors_of(theta, metrics)
        for metric, v in values.items():
            out[(it, metric)] = v
    for name, v in algo.extra_metrics(state, problem).items():
        out[("state", name)] = v
    if getattr(problem, "node_metrics", ()):  # the mean error of the nodes' own models
        for name, v in problem.node_errors(algo.models(state)).items():
            out[("state", name)] = v
    return out


def store_record(arr: np.ndarray, pos: int, vals: dict, layout: Any, r0: int, r1: int) -> None:
    """Write ``vals`` (:func:`record_at`) into record ``pos`` of ``arr`` (n_rec, iterates,
    metrics, R), replicates ``r0:r1``, at the positions of ``layout``."""
    for (it, metric), v in vals.items():
        if it not in layout.iterates or metric not in layout.metrics:
            raise ValueError(
                f"the recorded value ({it!r}, {metric!r}) is not in the layout (iterates "
                f"{layout.iterates}, metrics {layout.metrics}): an algorithm declares every "
                "name its extra_metrics returns in its class attribute state_metrics"
            )
        arr[pos, layout.iterates.index(it), layout.metrics.index(metric), r0:r1] = to_numpy(v)


def algorithms_meta(algos: Sequence[Any], labels: Sequence[str], ns: Sequence[int]) -> dict:
    """``Result.meta["algorithms"]`` of both engines: per label the algorithm's
    ``describe()``, its local steps ``n`` and its gradients ``n P b``."""
    return {
        labels[i]: {
            **a.describe(),
            "local_steps": ns[i],
            "gradients": ns[i] * a.workers * a.batch,
        }
        for i, a in enumerate(algos)
    }
