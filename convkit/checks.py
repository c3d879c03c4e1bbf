"""Measured versus theory: statistical checks that return data.

Every check returns a small frozen dataclass with a ``to_dict()``; tests and the
``convkit check`` command assert on / print those. Inputs are curves of Monte Carlo means with
standard errors (or exact curves with ``se = 0``).

* :func:`check_bound` -- does an upper bound hold at a one-sided confidence level, and how
  tight is it (ratio measured / bound along the curve)?
* :func:`fit_exponent` -- log-log slope over a window with a confidence interval, compared
  with a predicted exponent.
* :func:`paired_ratio` -- ratio of means of paired replicates (common random numbers) with
  its delta-method standard error, the input of :func:`find_threshold`.
* :func:`find_threshold` -- the smallest x (e.g. number of communication rounds N) from which
  a paired comparison holds, e.g. ``err(N) <= (1 + eps) err(MBA)``, with a confidence bracket.
* :func:`stability_bracket` -- bisection in log(gamma) for a bracket of the largest stable step
  of any stability criterion (the exact mean-square limit of least squares is
  :func:`convkit.exact.stability_limit`, a number).
* :func:`mean_se` -- mean and standard error of independent replicates (the one definition;
  :mod:`convkit.bounds.checking` re-exports it).

The growth rates that decide stability (:func:`convkit.growth_rates.log_moment_growth_rate`,
:func:`convkit.growth_rates.mean_square_growth_rate`) are in :mod:`convkit.growth_rates`.

This module does not import SymPy (it works on numbers); statistics come from SciPy, imported
lazily.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from convkit.verdicts import misfit_inflation

__all__ = [
    "BoundCheck",
    "ExponentFit",
    "ADEQUACY_LEVEL",
    "StabilityBracket",
    "Threshold",
    "check_bound",
    "chi2_dof_range",
    "fit_adequacy",
    "find_threshold",
    "fit_exponent",
    "mean_se",
    "paired_ratio",
    "residual_trend_adequacy",
    "stability_bracket",
]


def mean_se(values: Any) -> tuple[float, float]:
    """Mean and standard error ``sd / sqrt(R)`` (sample standard deviation, ``ddof=1``) of
    the ``R`` independent replicates ``values`` (all elements of the array). ``R = 1`` gives
    the standard error NaN (no spread to estimate)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return float(v.mean()), math.nan
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def __getattr__(name: str) -> Any:
    """A name removed from this module raises an ``AttributeError`` naming its successor
    (:mod:`convkit._migration`)."""
    from convkit._migration import missing_attribute

    raise missing_attribute(__name__, name)


def _to_builtin(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple):
        return [_to_builtin(x) for x in v]
    return v


class _DictMixin:
    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (arrays become lists)."""
        return {f.name: _to_builtin(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _z_one_sided(confidence: float) -> float:
    from scipy.stats import norm

    _check_level("confidence", confidence)
    return float(norm.ppf(confidence))


def _check_level(name: str, v: float) -> None:
    if not (isinstance(v, int | float) and 0.0 < float(v) < 1.0):
        raise ValueError(f"{name} must be in (0, 1), got {v!r}")


def _curve(
    x: Any, mean: Any, se: Any, *, need_se: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Accept arrays or a pandas DataFrame with columns x / mean / se (``x`` is the frame)."""
    if hasattr(x, "columns"):
        frame = x
        if mean is not None or se is not None:
            raise ValueError("pass either a DataFrame (x=frame) or arrays x, mean, se")
        for col in ("x", "mean"):
            if col not in frame.columns:
                raise ValueError(
                    f"the frame needs columns 'x', 'mean' (and 'se'); got {list(frame.columns)}"
                )
        x = frame["x"].to_numpy()
        mean = frame["mean"].to_numpy()
        se = frame["se"].to_numpy() if "se" in frame.columns else None
    xa = np.asarray(x, dtype=float).ravel()
    ma = np.asarray(mean, dtype=float).ravel()
    if xa.shape != ma.shape:
        raise ValueError(f"x and mean must have the same length, got {xa.size} and {ma.size}")
    if xa.size == 0:
        raise ValueError("x must not be empty")
    sa = None
    if se is not None:
        sa = np.broadcast_to(np.asarray(se, dtype=float), ma.shape).astype(float)
        if np.any(sa < 0) or not np.all(np.isfinite(sa)):
            raise ValueError("se must be finite and >= 0")
    elif need_se:
        sa = np.zeros_like(ma)
    if not np.all(np.isfinite(xa)):
        raise ValueError("x must contain only finite values")
    return xa, ma, sa


# ============================================================================ bound
@dataclasses.dataclass(frozen=True)
class BoundCheck(_DictMixin):
    """Result of :func:`check_bound`.

    ``holds``: no point violates the bound at the stated confidence;
    ``violated``: boolean per point (``mean - z se > bound``); ``ratio``: measured / bound per
    point (tightness; <= 1 where the point estimate is below the bound); ``max_ratio`` and
    ``x_max_ratio``: the largest ratio and where; ``x_worst`` / ``worst_z``: the point with the
    most significant violation and its z-score ``(mean - bound)/se`` (``inf`` for an exact
    violation with ``se = 0``; ``None`` when nothing is violated); ``z``: the critical value.
    """

    holds: bool
    confidence: float
    z: float
    x: np.ndarray
    ratio: np.ndarray
    violated: np.ndarray
    max_ratio: float
    x_max_ratio: float
    n_violations: int
    x_worst: float | None
    worst_z: float | None


def check_bound(
    x: Any,
    mean: Any = None,
    se: Any = None,
    bound_values: Any = None,
    confidence: float = 0.99,
    rtol: float = 1e-12,
) -> BoundCheck:
    """One-sided test that measured values stay below an upper bound.

    At each point the bound is declared violated iff ``mean - z * se > bound`` with
    ``z = Phi^{-1}(confidence)`` (one-sided). With ``se = 0`` (exact curves) this is simply
    ``mean > bound``. ``rtol`` absorbs floating-point round-off: a point is violated only if
    ``mean - z se > bound + rtol |bound|``. ``x`` may be a pandas DataFrame with columns ``x``, ``mean``, ``se``
    (then pass ``bound_values`` by keyword).
    No correction for multiple points is applied: with m independent points the family-wise
    false-alarm rate is up to ``m (1 - confidence)``; choose ``confidence`` accordingly.
    """
    xa, ma, sa = _curve(x, mean, se, need_se=True)
    if bound_values is None:
        raise ValueError("bound_values is required")
    b = np.broadcast_to(np.asarray(bound_values, dtype=float), ma.shape)
    if not np.all(np.isfinite(b)):
        raise ValueError("bound_values must be finite")
    z = _z_one_sided(confidence)
    violated = ma - z * sa > b + float(rtol) * np.abs(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b != 0, ma / b, np.where(ma > 0, np.inf, 1.0))
    i_max = int(np.argmax(ratio))
    x_worst = worst_z = None
    if violated.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            zs = np.where(sa > 0, (ma - b) / sa, np.inf)
        zs = np.where(violated, zs, -np.inf)
        iw = int(np.argmax(np.where(np.isinf(zs) & (zs > 0), np.finfo(float).max, zs)))
        if np.isinf(zs[iw]):  # exact violations: take the largest excess
            exact = violated & (sa == 0)
            iw = int(np.argmax(np.where(exact, ma - b, -np.inf)))
        x_worst, worst_z = float(xa[iw]), float(zs[iw])
    return BoundCheck(
        holds=not bool(violated.any()),
        confidence=float(confidence),
        z=z,
        x=xa,
        ratio=ratio,
        violated=violated,
        max_ratio=float(ratio[i_max]),
        x_max_ratio=float(xa[i_max]),
        n_violations=int(violated.sum()),
        x_worst=x_worst,
        worst_z=worst_z,
    )


# ============================================================================ exponent
@dataclasses.dataclass(frozen=True)
class ExponentFit(_DictMixin):
    """Result of :func:`fit_exponent`: ``slope`` of log(mean) against log(x) with its
    standard error ``se`` and ``interval`` at ``level``; ``intercept`` (natural log);
    ``predicted`` and ``consistent`` (predicted lies in the interval; ``None`` without a
    prediction); ``method``: ``"weighted"`` (delta-method weights from se) or ``"ols"``;
    ``n_points`` used; ``chi2_dof``: reduced chi-square of the weighted fit (``None`` for
    OLS) -- much larger than 1 means the power law does not describe the window;
    ``adequate`` / ``adequacy``: whether a power law describes the window at all, and why
    (:func:`fit_adequacy`; ``None`` when the points cannot tell)."""

    slope: float
    se: float
    interval: tuple[float, float]
    level: float
    intercept: float
    predicted: float | None
    consistent: bool | None
    method: str
    n_points: int
    window: tuple[float, float]
    chi2_dof: float | None
    adequate: bool | None = None
    adequacy: str = ""


def fit_exponent(
    x: Any,
    mean: Any = None,
    se: Any = None,
    window: tuple[float, float] | None = None,
    predicted: float | None = None,
    level: float = 0.95,
) -> ExponentFit:
    """Log-log least-squares slope over ``window = (lo, hi)`` (inclusive, in x units).

    With standard errors: weighted least squares of ``log mean`` on ``log x`` with weights
    ``1 / var(log mean)``, ``var(log mean) ~ (se / mean)^2`` (delta method); the slope's
    standard error is the weighted-LS one (known variances) and the interval uses the normal
    quantile, widened by ``sqrt(chi2/dof)`` when the points scatter more than their standard
    errors allow (:func:`convkit.verdicts.misfit_inflation`). Points with ``se = 0`` are exact: if all are exact, or without ``se``, ordinary
    least squares is used with the residual-based standard error and a Student-t interval
    (``n - 2`` degrees of freedom). An exact power law thus gives the exponent with an
    interval of width ~0. ``x`` may be a DataFrame with columns x / mean / se.
    """
    from scipy import stats

    _check_level("level", level)
    xa, ma, sa = _curve(x, mean, se, need_se=False)
    lo, hi = (-np.inf, np.inf) if window is None else (float(window[0]), float(window[1]))
    if lo > hi:
        raise ValueError(f"window must satisfy lo <= hi, got {window}")
    keep = (xa >= lo) & (xa <= hi)
    if np.any(ma[keep] <= 0) or np.any(xa[keep] <= 0):
        raise ValueError("x and mean must be positive inside the window for a log-log fit")
    n = int(keep.sum())
    if n < 2:
        raise ValueError(f"need at least 2 points in the window {window}, got {n}")
    lx, ly = np.log(xa[keep]), np.log(ma[keep])
    weighted = sa is not None and np.all(sa[keep] > 0)
    if weighted:
        var = (sa[keep] / ma[keep]) ** 2
        w = 1.0 / var
        X = np.column_stack([np.ones(n), lx])
        A = X.T @ (w[:, None] * X)
        cov = np.linalg.inv(A)
        beta = cov @ (X.T @ (w * ly))
        slope_se = math.sqrt(cov[1, 1])
        resid = ly - X @ beta
        chi2 = float(np.sum(w * resid**2) / max(n - 2, 1))
        q = float(stats.norm.ppf(0.5 + level / 2))
        method = "weighted"
    else:
        if n < 3:
            slope = float((ly[1] - ly[0]) / (lx[1] - lx[0]))
            beta = np.array([ly[0] - slope * lx[0], slope])
            slope_se, q, chi2 = math.inf, math.inf, None
        else:
            X = np.column_stack([np.ones(n), lx])
            beta, *_ = np.linalg.lstsq(X, ly, rcond=None)
            resid = ly - X @ beta
            s2 = float(resid @ resid) / (n - 2)
            sxx = float(np.sum((lx - lx.mean()) ** 2))
            slope_se = math.sqrt(s2 / sxx) if sxx > 0 else math.inf
            q = float(stats.t.ppf(0.5 + level / 2, n - 2))
            chi2 = None
        method = "ols"
    slope = float(beta[1])
    if weighted:
        adequate, adequacy = fit_adequacy(chi2, n - 2)
    else:
        adequate, adequacy = residual_trend_adequacy(lx, ly)
    half = q * slope_se if math.isfinite(slope_se) else math.inf
    # the verdict rule: a weighted fit that misfits its standard errors (chi2/dof > 1) has its
    # interval widened by sqrt(chi2/dof) (convkit.verdicts.misfit_inflation)
    half *= misfit_inflation(chi2 if weighted else None)
    # exact data: allow floating-point round-off in the interval
    half = max(half, 1e-9 * max(1.0, abs(slope)))
    interval = (slope - half, slope + half)
    consistent = None
    if predicted is not None:
        consistent = bool(interval[0] <= float(predicted) <= interval[1])
    return ExponentFit(
        slope=slope,
        se=float(slope_se),
        interval=interval,
        level=float(level),
        intercept=float(beta[0]),
        predicted=None if predicted is None else float(predicted),
        consistent=consistent,
        method=method,
        n_points=n,
        window=(float(xa[keep].min()), float(xa[keep].max())),
        chi2_dof=chi2,
        adequate=adequate,
        adequacy=adequacy,
    )


#: level of the power-law adequacy tests (:func:`fit_adequacy`, :func:`residual_trend_adequacy`)
ADEQUACY_LEVEL = 0.99


def chi2_dof_range(dof: int, level: float = ADEQUACY_LEVEL) -> tuple[float, float]:
    """Central ``level`` range of ``chi2/dof`` for ``dof`` degrees of freedom: under a correct
    model with correct standard errors, ``sum w r^2 ~ chi^2_dof``, so ``chi2/dof`` lies in
    ``[chi2.ppf((1 - level)/2, dof), chi2.ppf((1 + level)/2, dof)] / dof`` with probability
    ``level``."""
    from scipy import stats

    if dof < 1:
        raise ValueError(f"dof must be at least 1, got {dof}")
    _check_level("level", level)
    a = (1.0 - level) / 2
    return float(stats.chi2.ppf(a, dof) / dof), float(stats.chi2.ppf(1.0 - a, dof) / dof)


def fit_adequacy(
    chi2_dof: float | None, dof: int, level: float = ADEQUACY_LEVEL
) -> tuple[bool | None, str]:
    """Whether a weighted fit describes its points: ``chi2/dof`` not above its central
    ``level`` range (:func:`chi2_dof_range`).  Above the range the model misses the points by
    more than their standard errors allow: the power law does not hold over the window
    (``False``).  Below the range the points scatter less than their standard errors say
    (conservative errors, or points correlated through common random numbers, as along one
    Monte Carlo curve); the power law fits, and the reason says so.  Returns ``(None, reason)``
    when nothing can be tested (``dof < 1`` or no ``chi2``)."""
    if chi2_dof is None or not math.isfinite(chi2_dof) or dof < 1:
        return None, f"adequacy untestable ({dof} degrees of freedom)"
    lo, hi = chi2_dof_range(dof, level)
    text = f"chi2/dof {chi2_dof:.3g} vs its {level:.0%} range [{lo:.3g}, {hi:.3g}] ({dof} dof)"
    if chi2_dof > hi:
        return False, f"power law misfits: {text}"
    if chi2_dof < lo:
        return True, f"{text}: scatter below the standard errors"
    return True, text


def residual_trend_adequacy(
    lx: Any, ly: Any, level: float = ADEQUACY_LEVEL
) -> tuple[bool | None, str]:
    """Power-law adequacy of an unweighted log-log fit (no standard errors): the residuals of
    the fitted plane must show no trend.  ``lx`` holds the log regressors, shape ``(n,)`` or
    ``(n, k)`` (a joint fit in several variables); the test adds the curvature term
    ``c_j (log x_j - mean)^2`` of every variable with at least 3 distinct values and asks
    whether they are jointly zero (F-test, ``m`` and ``n - 1 - k - m`` dof, at ``level``; for
    one variable this is the Student-t test of the one curvature term).  A curved log-log plot
    means the slope depends on the window, so no single exponent describes the points.
    ``(None, reason)`` when no degree of freedom is left for the test."""
    from scipy import stats

    ly = np.asarray(ly, float)
    lx = np.asarray(lx, float).reshape(ly.size, -1)
    n, k = lx.shape
    u = lx - lx.mean(axis=0)
    curved = [u[:, j] ** 2 for j in range(k) if np.unique(lx[:, j]).size >= 3]
    m = len(curved)
    dof = n - 1 - k - m
    if m == 0 or dof < 1:
        return None, f"adequacy untestable ({n} points for {k} exponents, no trend test)"
    X0 = np.column_stack([np.ones(n), u])
    X1 = np.column_stack([X0, *curved])
    r0 = ly - X0 @ np.linalg.lstsq(X0, ly, rcond=None)[0]
    r1 = ly - X1 @ np.linalg.lstsq(X1, ly, rcond=None)[0]
    rss0, rss1 = float(r0 @ r0), float(r1 @ r1)
    # round-off floor: exact power laws leave residuals of a few ulps of log y per point
    floor = n * (64 * np.finfo(float).eps * max(1.0, float(np.abs(ly).max()))) ** 2
    F = max(rss0 - rss1, 0.0) / m / (max(rss1, floor) / dof)
    q = float(stats.f.ppf(level, m, dof))
    text = f"curvature F = {F:.3g} vs {q:.3g} ({level:.0%}, {m} and {dof} dof)"
    if F > q:
        return False, f"log-log residuals trend: {text}"
    return True, text


# ============================================================================ pairing
def paired_ratio(a: Any, b: Any, axis: int = 0, single: str = "raise") -> tuple[Any, Any]:
    """Ratio of means ``mean(a) / mean(b)`` of *paired* replicates and its standard error.

    ``a`` and ``b`` hold per-replicate values computed with common random numbers (replicate
    r of ``a`` and of ``b`` share their data), replicates along ``axis``; ``b`` may have size 1
    along the other axes (a reference curve at one point, e.g. err(MBA)). Delta method
    (e.g. Casella and Berger, *Statistical Inference*, 5.5.4):
    ``se = sqrt(Var(a - r b) / R) / |mean(b)|`` with ``r`` the ratio and ``Var`` the sample
    variance (``ddof=1``); pairing makes ``Var(a - r b)`` small when ``a`` and ``b`` are
    strongly correlated. Returns ``(ratio, se)`` with the replicate axis removed: plain floats
    for 1-D samples, arrays otherwise.

    A single replicate has a ratio but no standard error: ``single="raise"`` (the default)
    raises ``ValueError``, ``single="nan"`` returns the ratio with an SE of NaN (tables that
    keep a row for a one-replicate cell). Shapes that do not pair (do not broadcast) and a
    zero ``mean(b)`` raise ``ValueError``.

    This is the one paired ratio of the package (the schedule search and the analyses use
    it).
    """
    if single not in ("raise", "nan"):
        raise ValueError(f"single must be 'raise' or 'nan', got {single!r}")
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    try:
        a, b = np.broadcast_arrays(a, b)
    except ValueError:
        raise ValueError(
            f"a and b must be paired samples of matching shapes (b may have size 1 off the "
            f"replicate axis), got {a.shape} and {b.shape}"
        ) from None
    R = a.shape[axis]
    if R < 2 and single == "raise":
        raise ValueError(f"need at least 2 replicates along axis {axis}, got {R}")
    ma, mb = a.mean(axis=axis), b.mean(axis=axis)
    if np.any(mb == 0):
        raise ValueError("mean(b) must be nonzero")
    r = ma / mb
    if R < 2:
        se = np.full_like(np.asarray(r), np.nan)
    else:
        resid = a - np.expand_dims(r, axis) * b
        se = np.sqrt(resid.var(axis=axis, ddof=1) / R) / np.abs(mb)
    if np.ndim(r) == 0:
        return float(r), float(se)
    return r, se


# ============================================================================ threshold
@dataclasses.dataclass(frozen=True)
class Threshold(_DictMixin):
    """Result of :func:`find_threshold`.

    ``estimate``: x* where the point estimate crosses the level, interpolated linearly in
    (log x if ``log_x``) between the last failing and the first holding grid point (``None``
    if the comparison never holds from some point on); ``first_holding``: the first grid x from
    which the point estimate holds at every larger x; ``bracket = (lo, hi)``: ``hi`` is the
    first grid x from which it holds *with confidence* at every larger x, ``lo`` the last x
    before ``hi`` where it fails with confidence (``None`` when never/always); ``margin``:
    mean - level per point; ``holds`` / ``holds_confident``: per-point booleans.
    """

    estimate: float | None
    first_holding: float | None
    bracket: tuple[float | None, float | None]
    confidence: float
    level: np.ndarray
    x: np.ndarray
    margin: np.ndarray
    holds: np.ndarray
    holds_confident: np.ndarray


def find_threshold(
    x: Any,
    values: Any,
    se: Any = None,
    *,
    eps: float = 0.0,
    mode: str = "ratio",
    reference: Any = None,
    confidence: float = 0.95,
    log_x: bool = True,
) -> Threshold:
    """Smallest x from which a paired comparison holds, e.g. the rounds N* with
    ``err(N) <= (1 + eps) err(MBA)``.

    ``values`` (with standard errors ``se``, 0 or ``None`` for exact curves) is, per x:

    * ``mode="ratio"``: ``err(x) / err_ref`` -- holds when ``<= 1 + eps``;
    * ``mode="difference"``: ``err(x) - err_ref`` -- holds when ``<= eps * reference``
      (``reference`` = ``err_ref``, scalar or per-x array; required if ``eps != 0``);
    * ``mode="margin"``: a quantity that holds when ``<= 0`` (e.g. per-replicate
      ``err(x) - (1 + eps) err_ref`` averaged: the most precise choice with common random
      numbers, since its se already contains the pairing).

    For Monte Carlo curves compute the values *per replicate with common random numbers*
    (same data for both methods) and pass their mean and standard error: the paired se is far
    smaller than the unpaired one. The comparison is expected to hold for large x (error
    decreasing in x); the result reports the point estimate x* (log-interpolated crossing),
    and a bracket from the one-sided confidence tests ``mean -/+ z se`` vs the level.
    """
    from convkit.validation import check_in

    check_in("mode", mode, ("ratio", "difference", "margin"))
    xa, va, sa = _curve(x, values, se, need_se=True)
    if np.any(np.diff(xa) <= 0):
        raise ValueError("x must be strictly increasing")
    if log_x and np.any(xa <= 0):
        raise ValueError("x must be positive when log_x=True")
    if mode == "ratio":
        level = np.full_like(va, 1.0 + float(eps))
    elif mode == "difference":
        if eps != 0 and reference is None:
            raise ValueError("mode='difference' with eps != 0 needs reference (err_ref)")
        ref = 0.0 if reference is None else reference
        level = float(eps) * np.broadcast_to(np.asarray(ref, dtype=float), va.shape)
    else:
        if eps != 0:
            raise ValueError("mode='margin' already includes eps; pass eps=0")
        level = np.zeros_like(va)
    z = _z_one_sided(confidence)
    margin = va - level
    holds = margin <= 0
    holds_conf = margin + z * sa <= 0
    fails_conf = margin - z * sa > 0

    def first_from(mask: np.ndarray) -> int | None:
        # first index i such that mask[i:] is all True
        if not mask[-1]:
            return None
        bad = np.nonzero(~mask)[0]
        return 0 if bad.size == 0 else int(bad[-1] + 1)

    i_hold = first_from(holds)
    estimate = first = None
    if i_hold is not None:
        first = float(xa[i_hold])
        if i_hold == 0:
            estimate = first
        else:
            x0, x1 = xa[i_hold - 1], xa[i_hold]
            m0, m1 = margin[i_hold - 1], margin[i_hold]
            t = m0 / (m0 - m1) if m0 != m1 else 1.0
            if log_x:
                estimate = float(math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0))))
            else:
                estimate = float(x0 + t * (x1 - x0))
    i_conf = first_from(holds_conf)
    hi = None if i_conf is None else float(xa[i_conf])
    upto = xa.size if i_conf is None else i_conf
    fails_before = np.nonzero(fails_conf[:upto])[0]
    lo = float(xa[fails_before[-1]]) if fails_before.size else None
    return Threshold(
        estimate=estimate,
        first_holding=first,
        bracket=(lo, hi),
        confidence=float(confidence),
        level=level,
        x=xa,
        margin=margin,
        holds=holds,
        holds_confident=holds_conf,
    )


# ============================================================================ stability
@dataclasses.dataclass(frozen=True)
class StabilityBracket(_DictMixin):
    """Result of :func:`stability_bracket`: ``lo`` (stable) < limit <= ``hi`` (unstable);
    ``estimate`` = geometric mean; ``n_evaluations`` of ``is_stable``; ``history`` of
    ``(gamma, stable)`` pairs in evaluation order."""

    lo: float
    hi: float
    estimate: float
    n_evaluations: int
    history: tuple[tuple[float, bool], ...]


def stability_bracket(
    is_stable: Callable[[float], bool],
    lo: float,
    hi: float,
    rtol: float = 1e-3,
    max_evaluations: int = 100,
) -> StabilityBracket:
    """Bracket the largest stable step of the criterion ``is_stable`` by bisection in
    log(gamma) (the mean-square limit of least squares in closed or numerical form is
    :func:`convkit.exact.stability_limit`, one number; this is the bracket of any criterion).

    Requires ``is_stable(lo)`` True and ``is_stable(hi)`` False (checked; ``ValueError``
    otherwise), and assumes a single transition in between. Stops when ``hi / lo - 1 <= rtol``.
    ``is_stable`` may be exact (spectral radius of the moment recursion) or statistical (e.g.
    ``log_moment_growth_rate(...).rate < 0``); for a statistical criterion the bracket is only
    as reliable as each decision, so use criteria with a stated confidence.
    """
    from convkit.validation import check_real

    lo = check_real("lo", lo, low=0.0, low_inclusive=False)
    hi = check_real("hi", hi, low=lo, low_inclusive=False)
    check_real("rtol", rtol, low=0.0, low_inclusive=False)
    history: list[tuple[float, bool]] = []

    def ev(g: float) -> bool:
        s = bool(is_stable(g))
        history.append((g, s))
        return s

    if not ev(lo):
        raise ValueError(f"is_stable(lo) must be True, got False at lo={lo:g}")
    if ev(hi):
        raise ValueError(f"is_stable(hi) must be False, got True at hi={hi:g}")
    while hi / lo - 1.0 > rtol:
        if len(history) >= max_evaluations:
            break
        mid = math.sqrt(lo * hi)
        if ev(mid):
            lo = mid
        else:
            hi = mid
    return StabilityBracket(lo, hi, math.sqrt(lo * hi), len(history), tuple(history))
