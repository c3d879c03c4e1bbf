"""Problems that know their constants (theta*, f*, L, mu, noise)."""

from .base import METRICS, Problem
from .least_squares import LeastSquares, spectrum

__all__ = ["METRICS", "LeastSquares", "Problem", "spectrum"]
