"""Problems that know their constants (theta*, f*, L, mu, noise)."""

from . import datasets
from .base import METRICS, GradientOracle, Problem
from .datasets import (
    Dataset,
    binary_labels,
    breast_cancer,
    load_svmlight,
    split_by_label,
    split_dirichlet,
    split_iid,
    synthetic_least_squares,
    synthetic_logistic,
    synthetic_sparse,
)
from .finite_sum import FiniteLeastSquares, FiniteLogistic, FiniteSum, IndexBatch
from .heterogeneous import HeterogeneousLeastSquares
from .heterogeneous_logistic import HeterogeneousLogistic
from .least_squares import LeastSquares, LSBatch, spectrum
from .logistic import LogisticBatch, LogisticRegression, bernoulli_kl_logits, sigmoid

__all__ = [
    "METRICS",
    "Dataset",
    "FiniteLeastSquares",
    "FiniteLogistic",
    "FiniteSum",
    "GradientOracle",
    "HeterogeneousLeastSquares",
    "HeterogeneousLogistic",
    "IndexBatch",
    "LSBatch",
    "LeastSquares",
    "LogisticBatch",
    "LogisticRegression",
    "Problem",
    "bernoulli_kl_logits",
    "binary_labels",
    "breast_cancer",
    "datasets",
    "load_svmlight",
    "sigmoid",
    "spectrum",
    "split_by_label",
    "split_dirichlet",
    "split_iid",
    "synthetic_least_squares",
    "synthetic_logistic",
    "synthetic_sparse",
]
