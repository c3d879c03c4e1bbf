"""Exact expected-error engines where the maths allows (least squares).

* :func:`expected_error`: the drop-in exact counterpart of :func:`convkit.simulate` for
  :class:`~convkit.problems.least_squares.LeastSquares` problems and the Local-SGD family
  (MBA, Local-SGD, OSA), D-PSGD (:mod:`convkit.exact.dpsgd`) and CHOCO-SGD / DeepSqueeze
  with identity or (scaled) rand-k compressors (:mod:`convkit.exact.compressed`);
* :func:`expected_error_nodes`: the same for
  :class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares` (node Hessians and
  optima; the Local-SGD family and D-PSGD, :mod:`convkit.exact.heterogeneous`, and SCAFFOLD,
  :mod:`convkit.exact.scaffold_nodes`);
* :func:`stability_limit`: the mean-square stability limit of constant steps from the same
  recursion;
* :func:`communication_threshold`: the rounds Local-SGD needs to match MBA (exact curves).
"""

from .dispatch import EXACT_COUNT, expected_error
from .heterogeneous import expected_error_nodes
from .local import LocalSpec, local_curves, second_moment_matrix, stability_limit
from .moments import design_coefficients
from .threshold import communication_threshold, rounds_error

__all__ = [
    "EXACT_COUNT",
    "communication_threshold",
    "rounds_error",
    "LocalSpec",
    "design_coefficients",
    "expected_error",
    "expected_error_nodes",
    "local_curves",
    "second_moment_matrix",
    "stability_limit",
]
