"""Public helpers for the checks of theory against simulation: build a row, summarise
replicates, turn a comparison into a verdict.

Every check returns rows in the PEPit idiom of a (measured, theoretical) pair::

    {"result": "sgd.ms_stability.1d",            # the library name
     "setting": "1-D Gaussian design, h = 2, b = 1, exact engine",
     "measured": 0.3333333, "theoretical": 0.3333333,
     "verdict": "holds",                         # one of convkit.verdicts.VERDICTS
     "reason": "the exact limit equals ...",     # one sentence of detail
     "margin": "relative difference <= 1e-6",    # optional: the stated tolerance
     "details": {...}}                           # optional: numbers the tests assert on

built by :func:`check_row` (:func:`convkit.verdicts.check_row`, re-exported here). A claim
that does not hold in the simulated setting gets the verdict ``violated``: that is a measured
result, not a failure of the check. Settings are fixed a priori (stated in the ``setting``
text and in each check's docstring), never tuned until a verdict changes. Statistical verdicts
use standard errors from independent replicates (fixed seeds) and say how many SE (or which
confidence) they allow; exponents are judged by :func:`convkit.verdicts.exponent_verdict`
(:func:`rate_exponent_verdict` for the exponent of an upper bound on a rate, where a faster
decay also satisfies the bound).

The helpers:

* :func:`check_row` -- one row (verdict and reason checked where the row is written);
* :func:`note_sources` -- the rows of a check with ``[unverified source: ...]`` added to the
  reason of each row whose result is known only from a summary of its paper;
* :func:`final_values` -- the per-replicate values of one curve at its last record point;
* :func:`mean_se` -- mean and standard error of independent replicates (:mod:`convkit.checks`);
* :func:`within` -- ``|measured - theory| <= k se`` (the usual 3 SE rule);
* :func:`tolerance_verdict`, :func:`rate_exponent_verdict` -- verdict and reason;
* :func:`check_stream` -- the random stream of the library's checks (for draws outside
  :func:`convkit.simulate`);
* :func:`exponent_in` -- the exponent a registered result predicts in one variable (what an
  exponent check compares with: read from the registry, never typed).

They are public: a check in a topic module of :mod:`convkit.bounds`, in a user's module or in
a notebook uses the same names (see the page "Your own claim" of the documentation).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from convkit.checks import mean_se
from convkit.verdicts import HOLDS, VIOLATED, check_row, exponent_verdict, verdict_of

__all__ = [
    "UNVERIFIED",
    "check_row",
    "check_stream",
    "exponent_in",
    "final_values",
    "mean_se",
    "note_sources",
    "noting_sources",
    "rate_exponent_verdict",
    "tolerance_verdict",
    "within",
]


def check_stream(seed: int, *key: Any) -> Any:
    """The checks' random stream for ``seed`` and ``key``
    (:meth:`convkit.backend.Backend.stream` of the family ``"theory_checks"``: the same seed
    and key give the same draws in every run)."""
    from convkit.backend import Backend

    return Backend().stream(seed, "theory_checks", *key)


def final_values(res: Any, label: str, metric: str, iterate: str) -> np.ndarray:
    """Per-replicate values, shape ``(R,)``, of ``metric`` (``"hnorm2"``, ``"excess_risk"``,
    ...) of the iterate ``iterate`` (``"last"``, ``"avg"``, ...) of the configuration
    ``label`` of the result ``res`` (of :func:`convkit.simulate`) at its last record point."""
    cv = res.values[label]
    i, m = cv.iterates.index(iterate), cv.metrics.index(metric)
    return np.asarray(cv.values[-1, i, m, :], dtype=float)


def within(measured: float, theory: float, se: float, k: float = 3.0) -> bool:
    """``|measured - theory| <= k se`` (plus round-off, 1e-12 relative: some Monte Carlo
    values are deterministic, e.g. scaled rand-k with k = d/2). With ``k = 3`` a true claim
    fails with probability about 0.3 % (normal approximation of the mean)."""
    return abs(measured - theory) <= k * se + 1e-12 * max(1.0, abs(theory))


def tolerance_verdict(ok: bool, quantity: str, value: float, tolerance: str) -> tuple[str, str]:
    """``holds`` / ``violated`` for a measured ``quantity`` (``value``) against a stated
    ``tolerance`` (text such as ``"<= 1e-12"``), with the reason sentence."""
    return verdict_of(
        bool(ok),
        f"{quantity} is {value:.3g}, within the tolerance {tolerance}",
        f"{quantity} is {value:.3g}, outside the tolerance {tolerance}",
    )


def rate_exponent_verdict(
    interval: Sequence[float],
    claimed: float,
    alternatives: Iterable[float] = (),
    fit: Any = None,
) -> tuple[str, str]:
    """Verdict for the measured exponent of a quantity bounded *above* by a rate with
    leading exponent ``claimed``: the exponent rule one-sided
    (:func:`convkit.verdicts.exponent_verdict` with ``side="at_most"``): an interval wholly
    below ``claimed`` (a faster decay) satisfies the bound.  ``fit``: the fit's adequacy, as
    in :func:`convkit.verdicts.exponent_verdict`."""
    verdict, reason = exponent_verdict(interval, claimed, alternatives, side="at_most", fit=fit)
    if verdict == HOLDS and float(interval[1]) < claimed:
        reason += ": the decay is faster, which satisfies the upper bound"
    if verdict == VIOLATED:
        reason += " (slower decay than the bound)"
    return verdict, reason


def exponent_in(result: Any, var: str) -> float:
    """The exponent ``p`` of ``result``'s expression ``~ c var^p`` as ``var -> oo``
    (:meth:`~convkit.bounds.core.TheoryResult.leading_exponent`), ``0.0`` when the expression
    does not involve ``var`` (a claim constant in ``var``)."""
    names = {getattr(s, "name", None) for s in result.expression.free_symbols}
    if var not in names:
        return 0.0
    return float(result.leading_exponent(var))


#: appended to the reason of every row of a result whose provenance is a summary of the paper
UNVERIFIED = "unverified source: the statement is from a summary of the paper, not its text"


def note_sources(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with ``[unverified source: ...]`` appended to the reason of every row whose
    result is a library result with a provenance from a summary of its paper
    (:func:`convkit.bounds.provenance.from_summary`): its verdict is about the statement as
    summarized. The rows are modified in place and returned."""
    from convkit.bounds import registry
    from convkit.bounds.provenance import source_of

    for r in rows:
        name = r["result"]
        if name in registry.LIBRARY and UNVERIFIED not in r["reason"]:
            if source_of(registry.get(name).provenance) == "summary":
                r["reason"] = f"{r['reason']} [{UNVERIFIED}]"
    return rows


def noting_sources(
    check: Callable[[bool], list[dict[str, Any]]],
) -> Callable[[bool], list[dict[str, Any]]]:
    """Decorator of a check (put it under ``@register_check``): its rows go through
    :func:`note_sources`."""

    @functools.wraps(check)
    def wrapper(quick: bool) -> list[dict[str, Any]]:
        return note_sources(check(quick))

    return wrapper
