"""Theory engine: SymPy results with provenance, derivations and the library of claims.

Importing this package imports SymPy (``import convkit`` alone does not).

Public API
----------
:class:`TheoryResult`, :func:`symbol`, :func:`fit_constants`, :class:`ConstantFit`,
:class:`ConditionError`, :data:`KINDS` (from :mod:`convkit.bounds.core`);
:data:`LIBRARY`, :func:`get`, :func:`names`, :func:`all_results` (from
:mod:`convkit.bounds.library`); the derivations live in :mod:`convkit.bounds.derivations`
(for example :func:`~convkit.bounds.derivations.sgd_stability_limit`).
"""

from convkit.bounds.core import (
    KINDS,
    ConditionError,
    ConstantFit,
    TheoryResult,
    fit_constants,
    symbol,
)
from convkit.bounds.library import LIBRARY, all_results, get, names

__all__ = [
    "KINDS",
    "LIBRARY",
    "ConditionError",
    "ConstantFit",
    "TheoryResult",
    "all_results",
    "fit_constants",
    "get",
    "names",
    "symbol",
]
