"""Algorithms: the Local-SGD family (and, as they land, the decentralized family)."""

from .base import Algorithm
from .local import MBA, OSA, LocalSGD

__all__ = ["MBA", "OSA", "Algorithm", "LocalSGD"]
