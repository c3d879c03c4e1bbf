r"""What every exact engine shares: the design coefficients and the start in H's eigenbasis.

The exact engines (:mod:`convkit.exact.local`, :mod:`convkit.exact.dpsgd`,
:mod:`convkit.exact.compressed`) all propagate coordinate-diagonal second moments in the
eigenbasis of ``H`` with the one-step injection derived in :mod:`convkit.exact.local`::

    s_j' = s_j (1 - 2 g h_j + c_sq g^2 h_j^2) + (g^2 h_j / b) (c_tr sum_l h_l s_l + sigma^2)

* :func:`design_coefficients`: ``(c_sq, c_tr)`` of a design and batch;
* :func:`problem_arrays`: ``h``, the squared start ``z0^2`` and ``sigma^2`` of a
  :class:`~convkit.problems.least_squares.LeastSquares` problem;
* :func:`signed_start`: the signed start ``z0`` and ``Q^T theta*`` (compressed engines).

Every engine module imports from here (downward only); nothing here imports an engine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..problems.least_squares import LeastSquares
from ..recording import starting_point

__all__ = ["design_coefficients", "problem_arrays", "signed_start"]


def design_coefficients(design: str, b: int) -> tuple[float, float]:
    """``(c_sq, c_tr)`` of the diagonal recursion (module docstring) for a design and batch."""
    if design == "gaussian":
        return 1.0 + 1.0 / b, 1.0
    if design == "rademacher":
        return 1.0 - 1.0 / b, 1.0
    if design == "additive":
        return 1.0, 0.0
    raise ValueError(f"design must be 'gaussian', 'rademacher' or 'additive', got {design!r}")


def problem_arrays(problem: LeastSquares, theta0: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """``h``, ``z0^2`` (start in H's eigenbasis, squared) and ``sigma^2``."""
    if not isinstance(problem, LeastSquares):
        raise TypeError(
            f"the exact engine handles convkit LeastSquares problems only, got {type(problem).__name__}"
        )
    eta0 = starting_point(theta0, problem.d) - problem.theta_star
    z0 = eta0 if problem.Q is None else problem.Q.T @ eta0
    return problem.h.copy(), z0 * z0, float(problem.noise) ** 2


def signed_start(problem: LeastSquares, theta0: Any) -> tuple[np.ndarray, np.ndarray]:
    """``z0 = Q^T (theta0 - theta*)`` (signed) and ``Q^T theta*``."""
    eta0 = starting_point(theta0, problem.d) - problem.theta_star
    if problem.Q is None:
        return eta0, problem.theta_star.copy()
    return problem.Q.T @ eta0, problem.Q.T @ problem.theta_star


def node_record_row(
    row: np.ndarray,
    hbar: np.ndarray,
    Q: np.ndarray,
    Qt: np.ndarray,
    V: np.ndarray,
    Sd: np.ndarray,
    k: int,
    s0: int,
) -> None:
    """Fill one record row of the node engines (``expected_error_nodes``' models) at step
    ``k``: ``||theta_bar - theta*||^2`` in the ``hbar`` norm and plain, of the running average
    (``Q``: the second moment of its sum, divided by ``k^2``) and of the tail average from
    step ``s0`` (``Qt``, divided by ``(k - s0 + 1)^2``), of the last iterate (``V``), and the
    nodes' mean error (``Sd``: the per-node second moments): excess risk, ``hbar`` norm and
    squared distance."""
    row[0], row[1] = float(hbar @ Q) / k**2, float(Q.sum()) / k**2
    if k >= s0:
        c = (k - s0 + 1) ** 2
        row[2], row[3] = float(hbar @ Qt) / c, float(Qt.sum()) / c
    row[4], row[5] = float(hbar @ V), float(V.sum())
    row[7] = float(np.mean(hbar @ Sd))
    row[6] = 0.5 * row[7]
    row[8] = float(np.mean(Sd.sum(axis=0)))
