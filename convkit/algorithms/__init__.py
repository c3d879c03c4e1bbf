"""Algorithms: the Local-SGD family (with its federated variants FedAvgM and FedAdam), SCAFFOLD, the decentralized family and error feedback.

The decentralized classes are imported on first use (they need networkx and scipy).
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Algorithm
from .federated import FedAdam, FedAvgM
from .local import MBA, OSA, LocalSGD
from .scaffold import SCAFFOLD

_LAZY = {
    "DPSGD": "decentralized",
    "DCDPSGD": "decentralized",
    "ECDPSGD": "decentralized",
    "CHOCOSGD": "compressed_gossip",
    "DeepSqueeze": "compressed_gossip",
    "tune_consensus_step": "decentralized",
    "ErrorFeedbackSGD": "feedback",
}

__all__ = ["MBA", "OSA", "SCAFFOLD", "Algorithm", "FedAdam", "FedAvgM", "LocalSGD", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'convkit.algorithms' has no attribute {name!r}")
