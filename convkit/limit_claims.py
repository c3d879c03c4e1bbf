"""Limit claims ("the ratio decreases towards 1", "the excess vanishes as T grows") tested on
the limit, not on a decrease: the excess over the limit is fitted as a power law in the growing
variable, and the claim holds only when the fitted exponent is resolved below 0 and the power
law describes the points (:func:`limit_verdict`). A decrease that may level off above the limit
is ``measured``. The rule is one of the verdict rules of :mod:`convkit.verdicts`; it lives here,
in the statistics layer, because it fits (:func:`convkit.checks.fit_exponent`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from convkit.checks import fit_exponent
from convkit.verdicts import (
    HOLDS,
    MEASURED,
    NOT_IDENTIFIABLE,
    VIOLATED,
    interval_text,
)

__all__ = ["limit_verdict"]


#: the decay in the upper half of ``x`` must be at least this fraction as steep (log-log
#: slope) as in the lower half: a power law keeps its slope, a decrease that levels off above
#: the limit flattens towards 0 (fixed before looking at any data)
MIN_TAIL_STEEPNESS = 0.5
#: the excess at the largest ``x`` must be at most this fraction of the one at the smallest:
#: a decrease too slight to show over the observed range cannot show the limit
MIN_FALL = 0.5


def limit_verdict(
    x: Any,
    excess: Any,
    se: Any,
    toward: str,
    level: float = 0.95,
    min_points: int = 4,
) -> tuple[str, str, dict[str, Any]]:
    """Verdict on a limit claim ``quantity -> limit`` as ``x`` grows, from the ``excess``
    (``quantity - limit``, positive) and its standard errors ``se`` (``None`` or zeros: exact
    values): a claim of a limit is tested on the limit, not on a decrease.

    The excess is fitted as a power law ``excess ~ x^a`` over the lower and the upper half of
    the points (:func:`convkit.checks.fit_exponent`, weighted where every SE is positive,
    intervals widened by ``sqrt(chi2/dof)``; for exact values with two points in a half, the
    exact slope between them). A power-law decay to the limit keeps its exponent; a decrease
    that levels off above the limit (``c + b x^a``, ``c > 0``) has an exponent that flattens
    towards 0. The claim

    * ``holds`` when the upper half's exponent is resolved below
      ``MIN_TAIL_STEEPNESS`` times the lower half's (its interval's upper end; for exact
      values its value): the excess still falls, at least half as steeply, where ``x`` is
      largest; and the excess at the largest ``x`` is at most ``MIN_FALL`` (a half) of the
      one at the smallest (both thresholds are fixed rules, not fitted);
    * is ``violated`` when the upper half's interval lies at or above 0 (the excess stops
      shrinking);
    * is ``measured`` otherwise: a decrease the data do not carry to the limit (a limit
      above ``toward`` fits as well).

    ``details`` has both exponents and their intervals."""
    xa, ea = np.asarray(x, dtype=float), np.asarray(excess, dtype=float)
    sa = np.zeros_like(ea) if se is None else np.asarray(se, dtype=float)
    keep = np.isfinite(xa) & np.isfinite(ea) & (xa > 0)
    xa, ea, sa = xa[keep], ea[keep], sa[keep]
    if xa.size < min_points:
        return NOT_IDENTIFIABLE, f"fewer than {min_points} points", {}
    if np.any(ea <= 0):
        return (
            MEASURED,
            f"the excess over {toward} is not positive at every point: no decay to fit",
            {},
        )
    order = np.argsort(xa)
    xa, ea, sa = xa[order], ea[order], sa[order]
    exact = not np.all(sa > 0)

    def fit(sel: slice) -> tuple[float, tuple[float, float]]:
        xs, es = xa[sel], ea[sel]
        if exact and xs.size == 2:
            a = float(np.log(es[1] / es[0]) / np.log(xs[1] / xs[0]))
            return a, (a, a)
        f = fit_exponent(xs, es, None if exact else sa[sel], level=level)
        return f.slope, (float(f.interval[0]), float(f.interval[1]))

    half = (xa.size + 1) // 2  # both halves hold the middle point of an odd count
    a_head, iv_head = fit(slice(0, half))
    a_tail, iv_tail = fit(slice(xa.size - half, None))
    details = {
        "head_exponent": a_head,
        "head_interval": list(iv_head),
        "tail_exponent": a_tail,
        "tail_interval": list(iv_tail),
    }
    txt = (
        f"exponent of the excess {a_head:.3g} {interval_text(iv_head)} over the lower half of "
        f"x, {a_tail:.3g} {interval_text(iv_tail)} over the upper half"
    )
    if iv_tail[0] >= 0:
        return VIOLATED, f"the excess over {toward} stops shrinking: {txt}", details
    bar = MIN_TAIL_STEEPNESS * min(a_head, 0.0)
    halved = bool(ea[-1] <= MIN_FALL * ea[0])
    details["fall"] = float(ea[-1] / ea[0])
    if iv_tail[1] < bar and halved:
        return HOLDS, f"the excess over {toward} keeps decaying: {txt}", details
    return (
        MEASURED,
        f"a decrease not carried to {toward} (the decay flattens or is not resolved: {txt}); "
        f"a limit above {toward} fits as well",
        details,
    )
