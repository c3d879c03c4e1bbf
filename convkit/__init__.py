"""convkit: check the theory of communication-efficient distributed SGD against simulation.

Quick start::

    import convkit as ck
    prob = ck.problems.LeastSquares.gaussian(d=50, spectrum="1/i", noise=1.0, seed=0)
    algo = ck.LocalSGD(workers=16, step=ck.PolyDecay(C=0.5, alpha=0.75), comm=ck.Rounds(100))
    res = ck.simulate(prob, algo, gradients=10**6, replicates=200, seed=1)
    res.frame  # tidy pandas DataFrame

Heavy modules (sympy-based ``convkit.bounds``, ``checks``, ``exact``, ``sweep``, ...) and the
decentralized algorithms are imported lazily, on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import problems
from ._kernel_switch import kernels, kernels_enabled
from ._version import __version__
from .algorithms.base import Algorithm
from .algorithms.federated import FedAdam, FedAvgM
from .algorithms.local import MBA, OSA, LocalSGD
from .algorithms.scaffold import SCAFFOLD
from .backend import Backend
from .problems import (
    FiniteLeastSquares,
    FiniteLogistic,
    HeterogeneousLeastSquares,
    HeterogeneousLogistic,
    LeastSquares,
    LogisticRegression,
)
from .recording import WEIGHTED_ITERATES
from .result import Result
from .schedules import (
    At,
    Constant,
    DriftClockRounds,
    Every,
    EveryStep,
    Final,
    Geometric,
    GeometricRounds,
    PolyDecay,
    Polynomial,
    PowerRounds,
    QuadraticRounds,
    Rounds,
)
from .simulate import DivergenceWarning, simulate

_LAZY_MODULES = {
    "bounds",
    "checks",
    "compression",
    "topology",
    "exact",
    "sweep",
    "algorithms",
}

__all__ = [
    "MBA",
    "OSA",
    "WEIGHTED_ITERATES",
    "Algorithm",
    "At",
    "Backend",
    "Constant",
    "DivergenceWarning",
    "DriftClockRounds",
    "Every",
    "EveryStep",
    "Final",
    "Geometric",
    "GeometricRounds",
    "FiniteLeastSquares",
    "FiniteLogistic",
    "HeterogeneousLeastSquares",
    "HeterogeneousLogistic",
    "LeastSquares",
    "LogisticRegression",
    "LocalSGD",
    "PolyDecay",
    "Polynomial",
    "PowerRounds",
    "QuadraticRounds",
    "Result",
    "Rounds",
    "SCAFFOLD",
    "FedAdam",
    "FedAvgM",
    "__version__",
    "kernels",
    "kernels_enabled",
    "problems",
    "simulate",
]


# names exported lazily (their modules import networkx / scipy): name -> module
_LAZY_NAMES = {
    "DPSGD": "algorithms.decentralized",
    "DCDPSGD": "algorithms.decentralized",
    "ECDPSGD": "algorithms.decentralized",
    "CHOCOSGD": "algorithms.compressed_gossip",
    "DeepSqueeze": "algorithms.compressed_gossip",
    "tune_consensus_step": "algorithms.decentralized",
    "ErrorFeedbackSGD": "algorithms.feedback",
    "copy_holder_messages": "algorithms.gossip",
    "best_rounds_exact": "schedule_search",
    "best_power_mc": "schedule_search",
    "BestSchedule": "schedule_search",
    "BestPower": "schedule_search",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f".{_LAZY_NAMES[name]}", __name__), name)
    from ._migration import missing_attribute  # a removed name says what replaced it

    raise missing_attribute("convkit", name)
