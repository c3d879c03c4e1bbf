"""Monte Carlo growth rates of a linear random recursion ``eta_{t+1} = A_t eta_t``, the
criteria of stability behind :func:`convkit.checks.stability_bracket`.

* :func:`log_moment_growth_rate` -- robust Monte Carlo growth rate of ``E log ||eta_t||^2``
  (top Lyapunov exponent: almost-sure stability).
* :func:`mean_square_growth_rate` -- Monte Carlo growth rate of ``E ||eta_t||^2`` by
  importance resampling (mean-square stability, robust to heavy tails).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from convkit.checks import _check_level, _DictMixin

__all__ = ["GrowthRate", "log_moment_growth_rate", "mean_square_growth_rate"]


@dataclasses.dataclass(frozen=True)
class GrowthRate(_DictMixin):
    """Result of :func:`log_moment_growth_rate`: ``rate`` per time unit of ``E log ||eta_t||^2``
    with standard error ``se`` (across replicates), ``interval`` at ``level`` (normal),
    ``n_replicates``, ``n_diverged`` (replicates with non-finite values, counted at the
    overflow level), and ``stable``: True if the interval is below 0, False if above,
    ``None`` if it contains 0 (undecided: run longer or with more replicates)."""

    rate: float
    se: float
    interval: tuple[float, float]
    level: float
    n_replicates: int
    n_diverged: int
    stable: bool | None


def log_moment_growth_rate(
    samples_over_time: Any,
    times: Sequence[float] | np.ndarray | None = None,
    *,
    squared_norms: bool = True,
    level: float = 0.99,
) -> GrowthRate:
    """Growth rate of the log-moment ``E log ||eta_t||^2``: a robust divergence criterion.

    ``samples_over_time`` has shape ``(n_times, R)`` holding ``||eta_t||^2`` per replicate
    (``squared_norms=True``) or ``(n_times, R, ...)`` holding the vectors ``eta_t`` (then
    ``squared_norms=False`` and the squared norm over the trailing axes is taken). For each
    replicate the least-squares slope of ``log ||eta_t||^2`` on ``t`` is computed; the rate
    is their mean and its standard error their standard deviation / sqrt(R) (replicates are
    independent, so this is honest even though times within a replicate are correlated).

    Why not the sample mean of ``||eta_t||^2``: with multiplicative noise, ``eta_t`` is a
    product of random matrices and ``||eta_t||^2`` is heavy-tailed (log-normal-like). Near
    the limit, the second moment is dominated by rare huge replicates, so a sample mean
    over R replicates typically *underestimates* it and its standard error is meaningless.
    ``log ||eta_t||^2`` averages well (its fluctuations grow like sqrt(t), not exponentially).

    Caution -- what it measures: the log-moment rate is the top Lyapunov exponent (almost
    sure stability). By Jensen, ``E log ||eta||^2 <= log E ||eta||^2``, so it is <= the
    mean-square rate, and the almost-sure stability region is *larger* than the mean-square
    one: just above the mean-square limit ``gamma*`` of
    :func:`convkit.bounds.sgd_stability.sgd_stability_limit`, typical trajectories still
    converge while ``E ||eta_t||^2`` diverges. The gap is large: in 1-D with a Gaussian design
    and b = 1 the mean-square limit is ``gamma h = 2/3`` while the Lyapunov exponent
    ``E log (1 - gamma h Z^2)^2`` vanishes only at ``gamma h ~ 2.42`` (quadrature). Use this
    rate to detect divergence of typical runs; to check a derived *mean-square* limit use
    :func:`mean_square_growth_rate` (resampling) or the exact second-moment recursion.

    Non-finite values (overflow of a diverging run) are replaced by ``log(float max)``,
    which can only bias the rate of a diverging run downwards towards the overflow level;
    such replicates are counted in ``n_diverged``. Exact zeros (underflow of a converging
    noise-free run) are floored at the smallest normal float, which biases the rate of such a
    run upwards (towards 0): pass times before underflow for a precise rate.
    """
    from scipy import stats

    _check_level("level", level)
    a = np.asarray(samples_over_time, dtype=float)
    if not squared_norms:
        if a.ndim < 3:
            raise ValueError("with squared_norms=False, samples must have shape (n_times, R, ...)")
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.sum(a.reshape(a.shape[0], a.shape[1], -1) ** 2, axis=-1)
    if a.ndim != 2:
        raise ValueError(f"samples must have shape (n_times, R), got {a.shape}")
    n_t, R = a.shape
    if n_t < 2 or R < 2:
        raise ValueError(f"need at least 2 times and 2 replicates, got {a.shape}")
    t = np.arange(n_t, dtype=float) if times is None else np.asarray(times, dtype=float)
    if t.shape != (n_t,):
        raise ValueError(f"times must have length {n_t}, got shape {t.shape}")
    bad = ~np.isfinite(a)
    if np.any(a[~bad] < 0):
        raise ValueError("squared norms must be >= 0")
    cap = math.log(np.finfo(float).max)
    floor = np.finfo(float).tiny
    la = np.where(bad, cap, np.log(np.maximum(np.where(bad, 1.0, a), floor)))
    tc = t - t.mean()
    slopes = (tc @ (la - la.mean(axis=0))) / float(tc @ tc)
    rate = float(slopes.mean())
    se = float(slopes.std(ddof=1) / math.sqrt(R))
    q = float(stats.norm.ppf(0.5 + level / 2))
    interval = (rate - q * se, rate + q * se)
    stable = True if interval[1] < 0 else False if interval[0] > 0 else None
    return GrowthRate(rate, se, interval, float(level), int(R), int(bad.any(axis=0).sum()), stable)


def mean_square_growth_rate(
    step: Callable[[np.ndarray], np.ndarray],
    eta0: Any,
    n_steps: int,
    *,
    rng: np.random.Generator,
    n_systems: int = 8,
    burn_in: int | None = None,
    level: float = 0.99,
) -> GrowthRate:
    """Per-step growth rate of the second moment ``E ||eta_t||^2`` of a *linear homogeneous*
    random recursion ``eta_{t+1} = A_t eta_t`` (e.g. the noise-free SGD error recursion on
    least squares), estimated by importance resampling (a particle / Feynman-Kac estimator).

    ``step(eta)`` maps an array of shape ``(n, d)`` of independent particles to the next
    iterate (drawing its own randomness, vectorized over the first axis). Linearity is not
    needed, only positive homogeneity ``step(c eta) = c step(eta)`` for ``c > 0`` (in
    distribution): this covers error-compensated methods with top-k or scaled-sign
    compressors when the state vector includes the memory (flatten ``(P, d)`` states to rows). ``eta0`` has shape
    ``(R, d)`` (``R`` particles per system) or ``(d,)`` (broadcast). ``n_systems``
    independent particle systems run side by side (one array of ``n_systems * R`` rows).

    At each step every particle is normalized to unit norm, stepped, and weighted by
    ``w = ||eta'||^2``; the system records ``log mean(w)`` and resamples its particles with
    probabilities proportional to ``w``. The product of the mean weights is an unbiased
    estimator of ``E ||eta_t||^2 / ||eta_0||^2`` (for unit-norm starts), so the average of the
    recorded ``log mean(w)`` after ``burn_in`` steps (default ``n_steps // 4``) estimates the
    mean-square growth rate ``log rho`` (``rho``: spectral radius of the second-moment map),
    with a bias O(1/R). The standard error comes from the spread across the independent
    systems (Student-t interval with ``n_systems - 1`` degrees of freedom). ``stable`` is True
    when the interval at ``level`` lies below 0, False when above, None when undecided.

    Why resampling: the plain sample mean of ``||eta_t||^2`` over replicates is dominated by
    rare huge values near the limit (heavy tails) and underestimates the second moment;
    resampling keeps the particles where the moment mass is, so the estimate stays precise
    for any horizon. Unlike :func:`log_moment_growth_rate` it targets the *mean-square*
    rate, which is what the derived limits of :mod:`convkit.bounds.sgd_stability` describe.
    Additive noise does not change mean-square stability (only the homogeneous part
    matters), so drop it from ``step``.
    """
    from scipy import stats

    from convkit.validation import check_int

    _check_level("level", level)
    n_steps = check_int("n_steps", n_steps, low=2)
    n_systems = check_int("n_systems", n_systems, low=2)
    burn = (
        n_steps // 4 if burn_in is None else check_int("burn_in", burn_in, low=0, high=n_steps - 1)
    )
    e0 = np.atleast_2d(np.asarray(eta0, dtype=float))
    R, d = e0.shape
    if R < 2:
        e0 = np.broadcast_to(e0, (64, d))
        R = 64
    eta = np.tile(e0, (n_systems, 1))  # (K * R, d)
    logs = np.zeros((n_steps, n_systems))
    shift = np.arange(n_systems, dtype=float)[:, None]
    for t in range(n_steps):  # loop over time only
        nrm = np.linalg.norm(eta, axis=1, keepdims=True)
        if np.any(nrm == 0) or not np.all(np.isfinite(nrm)):
            raise ValueError(f"particle norms must be positive and finite (step {t})")
        eta = step(eta / nrm)
        w = np.sum(eta * eta, axis=1).reshape(n_systems, R)
        if not np.all(np.isfinite(w)):
            raise ValueError(f"non-finite weights at step {t}: reduce the step size range")
        mw = w.mean(axis=1)
        logs[t] = np.log(mw)
        # multinomial resampling within each system, vectorized over systems
        cdf = np.cumsum(w / (mw[:, None] * R), axis=1)
        cdf[:, -1] = 1.0
        flat = np.searchsorted((cdf + shift).ravel(), (rng.random((n_systems, R)) + shift).ravel())
        eta = eta[flat]
    per_system = logs[burn:].mean(axis=0)
    rate = float(per_system.mean())
    se = float(per_system.std(ddof=1) / math.sqrt(n_systems))
    q = float(stats.t.ppf(0.5 + level / 2, n_systems - 1))
    interval = (rate - q * se, rate + q * se)
    stable = True if interval[1] < 0 else False if interval[0] > 0 else None
    return GrowthRate(rate, se, interval, float(level), int(R * n_systems), 0, stable)
