"""What every engine records, and from where it starts: shared by Monte Carlo and exact engines.

:func:`convkit.simulate` (Monte Carlo) and :func:`convkit.exact.expected_error` (exact) take
the same ``theta0``, ``record`` and ``n_record`` arguments and fill the same frame layout; the
helpers here make them agree:

* :data:`ITERATES`: the estimators recorded at each record point (``avg``, ``tail``, ``last``);
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

__all__ = ["ITERATES", "DivergenceWarning", "record_steps", "starting_point"]

ITERATES = ("avg", "tail", "last")


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
        ex = np.asarray(list(extra), dtype=np.int64)
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


def starting_point(theta0: Any, d: int) -> np.ndarray:
    """``theta0`` validated as a finite float64 vector of shape ``(d,)`` (None: zeros)."""
    if theta0 is None:
        return np.zeros(d)
    t0 = np.asarray(to_numpy(theta0), dtype=np.float64)
    if t0.shape != (d,):
        raise ValueError(
            f"theta0 must have shape (d,) = ({d},) to match the problem, got {t0.shape}"
        )
    if not np.all(np.isfinite(t0)):
        raise ValueError("theta0 must contain only finite values")
    return t0
