"""Theory engine: SymPy results with provenance, derivations and the library of claims.

Importing this package imports SymPy (``import convkit`` alone does not).

Public API
----------
:class:`TheoryResult`, :func:`symbol`, :func:`fit_constants`, :class:`ConstantFit`,
:class:`ConditionError`, :data:`KINDS` (from :mod:`convkit.bounds.core`);
:data:`LIBRARY`, :func:`get`, :func:`names`, :func:`all_results` (from
:mod:`convkit.bounds.library`); the derivations live in :mod:`convkit.bounds.derivations`
(for example :func:`~convkit.bounds.derivations.sgd_stability_limit`).

Example (measured vs theoretical, PEPit style)::

    import numpy as np
    from convkit.bounds import get, fit_constants
    from convkit.checks import check_bound, fit_exponent

    rate = get("deepsqueeze.rate")                    # c/sqrt(nT) + C_2/T, c and C_2 unknown
    fit = fit_constants(rate, {"T": T}, mean, se=se, fixed={"n": 8})
    bound = rate.evaluate(T=T, n=8, check=False, **fit.values)
    check_bound(T, mean, se, bound).holds
    fit_exponent(T, mean, se, window=(1e4, 1e6),
                 predicted=float(rate.leading_exponent("T"))).consistent

    limit = get("sgd.ms_stability.general").evaluate(h=np.array([2.0, 1.0, 0.3]), b=1)
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
