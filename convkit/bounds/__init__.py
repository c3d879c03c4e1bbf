"""Theory engine: SymPy results with provenance, their derivations and their checks against
simulation, one topic module each (PEPit style).

Importing this package imports SymPy (``import convkit`` alone does not) and the topic modules,
which fill the registry (:mod:`convkit.bounds.registry`) with their results and checks.

Layout
------
* :mod:`convkit.bounds.core`: :class:`TheoryResult`, :func:`symbol`, :func:`fit_constants`,
  :class:`ConstantFit`, :class:`ConditionError`, :data:`KINDS` (the engine);
* :mod:`convkit.bounds.registry`: :data:`LIBRARY` with :func:`result`, :func:`get`,
  :func:`names`, :func:`all_results`; :data:`CHECKS` / :data:`COVERS` with
  :func:`register_check`, :func:`select`, :func:`covered_results`, :func:`run_checks`;
* :mod:`convkit.bounds.provenance` (the papers, :func:`~convkit.bounds.provenance.derived`),
  :mod:`convkit.bounds.symbols` (one meaning per symbol name),
  :mod:`convkit.bounds.controls` (negative controls: false claims substituted in the
  registry with :func:`~convkit.bounds.controls.substituted`),
  :mod:`convkit.bounds.checking` (the public helpers of the checks: :func:`check_row`,
  :func:`mean_se`, :func:`within`, :func:`final_values`, also exported here),
  :mod:`convkit.bounds.moments` (Isserlis / Rademacher moments and the second-moment
  recursion shared by several topics);
* topics, each with its results, derivations and checks:
  :mod:`~convkit.bounds.sgd_stability` (mean-square stability limits, stationary risk),
  :mod:`~convkit.bounds.averaged_sgd` (Polyak-Juditsky), :mod:`~convkit.bounds.local_sgd`
  (communication of Local-SGD), :mod:`~convkit.bounds.decentralized` (D-PSGD, DeepSqueeze,
  CHOCO-SGD), :mod:`~convkit.bounds.mixing` (W_eta), :mod:`~convkit.bounds.compression`
  (compressors, EF-SGD memory), :mod:`~convkit.bounds.heterogeneity` (Local-SGD vs
  mini-batch SGD on iid and heterogeneous nodes, rounds with growing gaps, the topology in
  D-PSGD's rate and its transient time).

The command lines are ``convkit bounds`` (:mod:`convkit.cli.bounds`) and ``convkit check``
(:mod:`convkit.cli.check`); every row of a check has a verdict of :mod:`convkit.verdicts`.

Example (measured vs theoretical, PEPit style)::

    import numpy as np
    from convkit.bounds import get, fit_constants, run_checks
    from convkit.checks import check_bound, fit_exponent
    from convkit.verdicts import exponent_verdict

    rate = get("deepsqueeze.rate")                    # c (1/sqrt(nT) + C_2/T), c, C_2 unknown
    fit = fit_constants(rate, {"T": T}, mean, se=se, fixed={"n": 8})
    bound = rate.evaluate(T=T, n=8, check=False, **fit.values)
    check_bound(T, mean, se, bound).holds
    fe = fit_exponent(T, mean, se, window=(1e4, 1e6))
    exponent_verdict(fe.interval, float(rate.leading_exponent("T")), alternatives=(-1,), fit=fe)

    limit = get("sgd.ms_stability.general").evaluate(h=np.array([2.0, 1.0, 0.3]), b=1)
    rows = run_checks(quick=True, only=["sgd.ms_stability.*"])   # verdict, reason per row

Adding a result
---------------
One edit, in the topic module it belongs to (or a new topic module, imported below): write a
zero-argument factory returning the :class:`TheoryResult` (SymPy expression, kind,
conditions, constants, provenance: a paper of :mod:`~convkit.bounds.provenance` or
``derived(the_derivation)``) and decorate it with ``@result("topic.name")``; put its SymPy
derivation next to it; write its check ``check_xxx(quick) -> list[dict]`` decorated with
``@register_check("check.name", covers=["topic.name"])``, whose rows are built with
:func:`convkit.bounds.checking.check_row` and carry a verdict of :data:`convkit.verdicts.VERDICTS`
with a one-sentence reason (exponents through :func:`convkit.verdicts.exponent_verdict`). The
coverage tests fail until every result has a check. Topic modules import the shared modules
(``convkit.bounds.core``, ``.registry``, ``.checking``, ``.moments``, ``.provenance``) and
engine modules by full submodule name, never this package.
"""

# Importing the topics fills the registry; their order is the order of the library and of
# the checks (single-worker SGD, averaging, Local-SGD, decentralized, mixing, compression).
# isort: off
from convkit.bounds import sgd_stability  # noqa: F401
from convkit.bounds import averaged_sgd  # noqa: F401
from convkit.bounds import local_sgd  # noqa: F401
from convkit.bounds import local_sgd_large_steps  # noqa: F401
from convkit.bounds import decentralized  # noqa: F401
from convkit.bounds import average_dynamics  # noqa: F401
from convkit.bounds import mixing  # noqa: F401
from convkit.bounds import compression  # noqa: F401
from convkit.bounds import heterogeneity  # noqa: F401

# isort: on
from convkit.bounds.checking import check_row, final_values, mean_se, within
from convkit.bounds.core import (
    KINDS,
    ConditionError,
    ConstantFit,
    TheoryResult,
    fit_constants,
    symbol,
)
from convkit.bounds.registry import (
    CHECKS,
    COVERS,
    LIBRARY,
    all_results,
    covered_results,
    get,
    names,
    register_check,
    result,
    run_checks,
    select,
)

__all__ = [
    "CHECKS",
    "COVERS",
    "KINDS",
    "LIBRARY",
    "ConditionError",
    "ConstantFit",
    "TheoryResult",
    "all_results",
    "check_row",
    "covered_results",
    "final_values",
    "fit_constants",
    "get",
    "mean_se",
    "names",
    "register_check",
    "result",
    "run_checks",
    "select",
    "symbol",
    "within",
]
