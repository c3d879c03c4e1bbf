"""Provenance of the results: the papers the claims come from, and :func:`derived` for the
results derived here.

A result's ``provenance`` is either ``"<paper>: <statement>"`` (one of the references below,
or another citation in full) or ``"derived here: <module>.<function>"``, naming the SymPy
derivation that produces its expression (:func:`derived` builds that string from the function
itself, so it always names the module the derivation lives in).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["KOLOSKOVA", "LIAN", "PATEL", "TANG", "derived"]

PATEL = (
    "Patel & Dieuleveut 2019, 'Communication trade-offs for synchronized distributed SGD with "
    "large step size' (arXiv 1904.11325)"
)
TANG = (
    "Tang, Lian, Qiu, Yuan, Zhang, Zhang, Liu 2019, 'DeepSqueeze: Decentralization meets "
    "error-compensated compression' (arXiv 1907.07346)"
)
LIAN = (
    "Lian, Zhang, Zhang, Hsieh, Zhang, Liu 2017, 'Can decentralized algorithms outperform "
    "centralized algorithms?' (NeurIPS 2017)"
)
KOLOSKOVA = (
    "Koloskova, Stich, Jaggi 2019, 'Decentralized stochastic optimization and gossip "
    "algorithms with compressed communication' (ICML 2019)"
)


def derived(func: Callable[..., object]) -> str:
    """``"derived here: <module>.<function>"`` for the derivation ``func`` (cached functions
    keep their module and name through :func:`functools.wraps`)."""
    return f"derived here: {func.__module__}.{func.__qualname__}"
