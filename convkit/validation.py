"""Parameter validation with precise messages.

Every public constructor validates its arguments with these helpers, so that a mistake
raises a :class:`ValueError` (or :class:`TypeError`) naming the parameter, the value
received and what is allowed, in the style of scikit-learn.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = [
    "check_finite_array",
    "check_in",
    "check_int",
    "check_real",
]


def _fmt(value: Any) -> str:
    return repr(value)


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float in the stated interval, or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_fmt(value)}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {_fmt(value)}")
    _check_interval(name, v, low, high, low_inclusive, high_inclusive)
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int in [low, high], or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {_fmt(value)}")
    v = int(value)
    _check_interval(name, v, low, high, True, True)
    return v


def _check_interval(
    name: str,
    v: float,
    low: float | None,
    high: float | None,
    low_inclusive: bool,
    high_inclusive: bool,
) -> None:
    bad_low = low is not None and (v < low if low_inclusive else v <= low)
    bad_high = high is not None and (v > high if high_inclusive else v >= high)
    if bad_low or bad_high:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        left = "[" if (low_inclusive and low is not None) else "("
        right = "]" if (high_inclusive and high is not None) else ")"
        raise ValueError(f"{name} must be in {left}{lo}, {hi}{right}, got {v:g}")


def check_in(name: str, value: Any, allowed: tuple | list | set) -> Any:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(map(str, allowed))}, got {_fmt(value)}")
    return value


def check_finite_array(name: str, arr: Any) -> Any:
    """Raise if a dense or sparse array holds NaN or infinity."""
    data = arr.data if hasattr(arr, "tocsr") else np.asarray(arr)
    if not np.all(np.isfinite(data)):
        bad = int(np.size(data) - np.count_nonzero(np.isfinite(data)))
        raise ValueError(f"{name} must contain only finite values, found {bad} NaN or inf")
    return arr
