"""Row helpers shared by the theory-vs-simulation checks of the topic modules.

Every check returns rows in the PEPit idiom of a (measured, theoretical) pair::

    {"result": "sgd.ms_stability.1d",            # the library name
     "setting": "1-D Gaussian design, h = 2, b = 1, exact engine",
     "measured": 0.3333333, "theoretical": 0.3333333,
     "verdict": "holds",                         # one of convkit.verdicts.VERDICTS
     "reason": "the exact limit equals ...",     # one sentence of detail
     "margin": "relative difference <= 1e-6",    # optional: the stated tolerance
     "details": {...}}                           # optional: numbers the tests assert on

built by :func:`_row`. A claim that does not hold in the simulated setting gets the verdict
``violated``: that is a measured result, not a failure of the check. Settings are fixed a
priori (stated in the ``setting`` text and in each check's docstring), never tuned until a
verdict changes. Statistical verdicts use standard errors from independent replicates (fixed
seeds) and say how many SE (or which confidence) they allow; exponents are judged by
:func:`convkit.verdicts.exponent_verdict` (:func:`_rate_exponent_verdict` for the exponent
of an upper bound on a rate, where a faster decay also satisfies the bound).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from convkit.bounds.core import TheoryResult
from convkit.bounds.registry import get
from convkit.verdicts import HOLDS, VIOLATED, exponent_verdict, verdict_of


def _row(
    result: str,
    setting: str,
    measured: Any,
    theoretical: Any,
    verdict: str,
    reason: str,
    margin: str | None = None,
    **details: Any,
) -> dict[str, Any]:
    """One check row (NumPy scalars and arrays in ``measured``, ``theoretical`` and
    ``details`` become plain Python values)."""
    out: dict[str, Any] = {
        "result": result,
        "setting": setting,
        "measured": _num(measured),
        "theoretical": _num(theoretical),
        "verdict": verdict,
        "reason": reason,
    }
    if margin is not None:
        out["margin"] = margin
    if details:
        out["details"] = {k: _num(v) for k, v in details.items()}
    return out


def _num(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [_num(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_num(x) for x in v]
    if isinstance(v, dict):
        return {k: _num(x) for k, x in v.items()}
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        return v.item()
    return v


def _lib(name: str) -> TheoryResult:
    """The library result ``name`` (:func:`convkit.bounds.registry.get`)."""
    return get(name)


def _stream(seed: int, *key: Any) -> Any:
    """The checks' random stream for ``seed`` and ``key`` (the stream family keeps the name
    ``"theory_checks"``, so the draws are those of every earlier run)."""
    from convkit.backend import Backend

    return Backend().stream(seed, "theory_checks", *key)


def _final(res: Any, label: str, metric: str, iterate: str) -> np.ndarray:
    """Per-replicate values (R,) of ``metric``/``iterate`` at the last record point."""
    cv = res.values[label]
    i, m = cv.iterates.index(iterate), cv.metrics.index(metric)
    return np.asarray(cv.values[-1, i, m, :], dtype=float)


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    v = np.asarray(v, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def _within(measured: float, theory: float, se: float, k: float = 3.0) -> bool:
    """``|measured - theory| <= k se`` (plus round-off, 1e-12 relative: some Monte Carlo
    values are deterministic, e.g. scaled rand-k with k = d/2)."""
    return abs(measured - theory) <= k * se + 1e-12 * max(1.0, abs(theory))


def _fmt_interval(iv: Sequence[float]) -> str:
    return f"[{iv[0]:.3g}, {iv[1]:.3g}]"


def _tolerance_verdict(ok: bool, quantity: str, value: float, tolerance: str) -> tuple[str, str]:
    """``holds`` / ``violated`` for a measured ``quantity`` (``value``) against a stated
    ``tolerance`` (text such as ``"<= 1e-12"``), with the reason sentence."""
    return verdict_of(
        bool(ok),
        f"{quantity} is {value:.3g}, within the tolerance {tolerance}",
        f"{quantity} is {value:.3g}, outside the tolerance {tolerance}",
    )


def _rate_exponent_verdict(
    interval: Sequence[float], claimed: float, alternatives: Iterable[float] = ()
) -> tuple[str, str]:
    """Verdict for the measured exponent of a quantity bounded *above* by a rate with
    leading exponent ``claimed``: the exponent rule one-sided
    (:func:`convkit.verdicts.exponent_verdict` with ``side="at_most"``): an interval wholly
    below ``claimed`` (a faster decay) satisfies the bound."""
    verdict, reason = exponent_verdict(interval, claimed, alternatives, side="at_most")
    if verdict == HOLDS and float(interval[1]) < claimed:
        reason += ": the decay is faster, which satisfies the upper bound"
    if verdict == VIOLATED:
        reason += " (slower decay than the bound)"
    return verdict, reason
