"""One verdict vocabulary for every theory-vs-simulation check (library checks and analyses).

Every check row has a ``verdict`` from the fixed set :data:`VERDICTS` and a ``reason``: one
sentence of detail (which bound, which interval, why undecided). The set:

``holds``
    the claim agrees with the measurement, and the measurement is precise enough to mean it:
    an identity to its stated tolerance, a bound above every point within its standard errors,
    or an exponent whose interval contains the claim *and* is narrow (rule below);
``violated``
    the measurement contradicts the claim (a point outside the bound by more than its SE, an
    exponent interval that excludes the claimed value);
``consistent_unresolved``
    the claim lies inside the interval, but the interval is too wide to tell it from the
    alternatives in play;
``not_identifiable``
    the setting cannot measure the quantity at all (fewer than the points a fit needs, every
    threshold capped by the horizon, a quantity that does not exist in the setting);
``inconclusive``
    the measurement was made but cannot decide (a censored bracket, overlapping intervals, a
    diverged run);
``measured``
    the row reports a measured quantity with no claim to hold it against;
``crashed``
    the check itself raised (the reason is the exception).

**The exponent rule** (:func:`exponent_verdict`): with a two-sided interval ``[lo, hi]`` for a
measured exponent and a claimed value ``e``,

* ``violated`` if ``e`` lies outside ``[lo, hi]``;
* otherwise ``holds`` if the half-width ``(hi - lo) / 2 <= 0.25`` (:data:`MAX_HALF_WIDTH`) and
  the interval excludes every alternative exponent named by the caller (for N* in T, the
  alternatives are 0 and 1: "no growth" and "as many rounds as MBA");
* otherwise ``consistent_unresolved``.

For a one-sided claim (``side="at_least"``: the exponent is at least ``e``, e.g. an
``O(gamma^2)`` upper bound on a quantity that vanishes as ``gamma -> 0``; ``side="at_most"``
the mirror image) an interval entirely on the claimed side ``holds``, one entirely on the other
side is ``violated``, and one that contains ``e`` follows the two-sided rule.

**Fit adequacy.** An exponent means something only where a power law describes the points.
When the caller passes the ``fit`` (anything with ``adequate`` and ``adequacy``, such as
:class:`convkit.checks.ExponentFit` or the dict of a joint fit), a fit that fails its
adequacy test (weighted fits: ``chi2/dof`` outside its central 99 % range; unweighted fits: a
significant curvature of the log-log residuals; :func:`convkit.checks.fit_adequacy`) gives
``not_identifiable`` whatever the interval says, with the test in the reason; a fit whose
adequacy cannot be tested (too few points) may be ``consistent_unresolved`` at best, never
``holds``.

The half-width 0.25 is half the distance between the claimed exponents the theory confronts
(1/2 against 0 and 1): an interval of that width around 1/2 cannot contain either alternative.

**Rules before a claim may hold** (every check, library and analyses):

* a fit's interval is widened by ``sqrt(max(1, chi2/dof))`` when the points scatter more than
  their standard errors allow (:func:`misfit_inflation`, :func:`widened`;
  :func:`convkit.checks.fit_exponent` applies it);
* a verdict on a window chosen from the data stands only when every adequate window agrees,
  else ``consistent_unresolved`` with the windows listed (:func:`window_agreement`);
* a limit claim ("-> 1", "-> 0") is tested on the limit, not on a decrease
  (:func:`convkit.limit_claims.limit_verdict`);
* a ``holds`` needs a negative control: a false variant of the data or of the claim on which
  the same check code said ``violated`` (:class:`Control`, :func:`apply_controls`,
  :func:`controlled`; library checks: :mod:`convkit.bounds.controls`); without one the row
  reports ``measured``.

**Rows.** A check row is a dict with the keys :data:`ROW_KEYS` (``result``, ``setting``,
``measured``, ``theoretical``, ``verdict``, ``reason``; optionally ``margin``, the stated
tolerance, and ``details``, numbers the tests assert on), in the PEPit idiom of a (measured,
theoretical) pair. :func:`check_row` builds one (and refuses a bad verdict or reason at once);
:func:`validate_row` is the one validator of rows, used by the theory registry
(:func:`convkit.bounds.run_checks`), the figure pipeline (:mod:`convkit.figures`) and the
documentation's gallery.

**Claims.** Every row names a claim in one namespace: a registered result of the theory
library (``"choco.rate_strongly_convex"``, :mod:`convkit.bounds.registry`) or a claim the
analysis declares itself, once, in its module-level ``CLAIMS`` (:func:`declare_claims`: id
``"<analysis>.<short_id>"`` -> :class:`Claim`, the statement, its source and whether it is a
claim or a measurement with no claim). :class:`ClaimNamespace` is the set of names a row of
one analysis may carry; :func:`validate_row` with ``namespace=`` refuses any other name, so
that every verdict links to a statement (the theory pages for a registered result, the
analysis' gallery page for a declared claim).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CLAIM",
    "CLAIM_KINDS",
    "CONSISTENT_UNRESOLVED",
    "Claim",
    "ClaimNamespace",
    "Control",
    "CRASHED",
    "HOLDS",
    "INCONCLUSIVE",
    "MAX_HALF_WIDTH",
    "MEASURED",
    "MEASUREMENT",
    "NOT_IDENTIFIABLE",
    "ROW_KEYS",
    "VERDICTS",
    "VIOLATED",
    "apply_controls",
    "check_row",
    "check_verdict",
    "controlled",
    "declare_claims",
    "exponent_verdict",
    "interval_text",
    "misfit_inflation",
    "plain_values",
    "validate_row",
    "verdict_of",
    "widened",
    "window_agreement",
]

HOLDS = "holds"
VIOLATED = "violated"
CONSISTENT_UNRESOLVED = "consistent_unresolved"
NOT_IDENTIFIABLE = "not_identifiable"
INCONCLUSIVE = "inconclusive"
MEASURED = "measured"
CRASHED = "crashed"

#: the fixed set, in order of decisiveness
VERDICTS: tuple[str, ...] = (
    HOLDS,
    VIOLATED,
    CONSISTENT_UNRESOLVED,
    NOT_IDENTIFIABLE,
    INCONCLUSIVE,
    MEASURED,
    CRASHED,
)

#: largest interval half-width at which an exponent can "hold" (see the module docstring)
MAX_HALF_WIDTH = 0.25

#: the keys every check row has, in the order rows are written
ROW_KEYS: tuple[str, ...] = ("result", "setting", "measured", "theoretical", "verdict", "reason")


# ============================================================================ claims
#: a declared claim: a statement the analysis' check decides (any verdict)
CLAIM = "claim"
#: a declared measurement: a quantity reported with no claim to hold it against (rows say
#: ``measured``, ``not_identifiable``, ``inconclusive`` or ``crashed``, never ``holds`` or
#: ``violated``)
MEASUREMENT = "measurement"
#: the kinds of a declared claim
CLAIM_KINDS: tuple[str, ...] = (CLAIM, MEASUREMENT)

_SHORT_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PREFIX = re.compile(r"[a-z][a-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim of an analysis, declared once in its module-level ``CLAIMS``
    (:func:`declare_claims`) and named by its check rows.

    ``statement`` is the claim in one sentence (what would hold; for a measurement, what is
    reported), ``source`` where it comes from (a paper with the place in it, ``"derived
    here: ..."``, ``"hypothesis formed here ..."``, or for a measurement what it is read
    against), ``kind`` one of :data:`CLAIM_KINDS`: ``"claim"`` (decided by the check) or
    ``"measurement"`` (no claim: its rows never say ``holds`` or ``violated``)."""

    statement: str
    source: str
    kind: str = CLAIM

    def __post_init__(self) -> None:
        for field in ("statement", "source"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"Claim.{field} must be a non-empty string, got {value!r}")
        if self.kind not in CLAIM_KINDS:
            raise ValueError(f"Claim.kind must be one of {list(CLAIM_KINDS)}, got {self.kind!r}")


def declare_claims(prefix: str, claims: Mapping[str, Claim]) -> dict[str, Claim]:
    """The ``CLAIMS`` of analysis ``prefix`` (its module name): ``{"<prefix>.<short>":
    claim}`` for every ``short -> claim`` of ``claims``, in order.

    A short id is letters, digits and underscores, starting with a letter
    (``"compressed_converge_like_dpsgd"``); the full id ``"<prefix>.<short>"`` is what a check
    row's ``result`` names. ``ValueError`` names a bad prefix or id, ``TypeError`` a value
    that is not a :class:`Claim`."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise ValueError(
            f"prefix must be an analysis module name (lower-case letters, digits, underscores), "
            f"got {prefix!r}"
        )
    out: dict[str, Claim] = {}
    for short, claim in claims.items():
        if not isinstance(short, str) or not _SHORT_ID.fullmatch(short):
            raise ValueError(
                f"claim id {short!r} of {prefix}: use letters, digits and "
                "underscores, starting with a letter"
            )
        if not isinstance(claim, Claim):
            raise TypeError(
                f"claim {prefix}.{short} must be a convkit.verdicts.Claim, got "
                f"{type(claim).__name__}"
            )
        out[f"{prefix}.{short}"] = claim
    return out


@dataclasses.dataclass(frozen=True)
class ClaimNamespace:
    """The names a check row of one analysis may carry: the ``registered`` results of the
    theory library and the analysis' declared ``claims`` (id -> :class:`Claim`); ``owner``
    names the analysis in messages. ``name in namespace`` tests membership;
    :meth:`kind_of` gives ``"claim"`` for a registered result, the declared kind otherwise."""

    registered: frozenset[str]
    claims: Mapping[str, Claim]
    owner: str = "the analysis"

    def __contains__(self, name: object) -> bool:
        return name in self.registered or name in self.claims

    def kind_of(self, name: str) -> str:
        """The kind of claim ``name`` (``KeyError`` if it is not in the namespace)."""
        if name in self.claims:
            return self.claims[name].kind
        if name in self.registered:
            return CLAIM
        raise KeyError(name)

    def refusal(self, name: str) -> str:
        """Why ``name`` is refused, with the closest names of the namespace."""
        near = difflib.get_close_matches(
            str(name), [*self.claims, *self.registered], n=3, cutoff=0.6
        )
        hint = f"; did you mean {', '.join(map(repr, near))}?" if near else ""
        return (
            f"row result {name!r} is neither a registered result (convkit.bounds.names()) nor "
            f"a claim declared by {self.owner} (its CLAIMS, convkit.verdicts.declare_claims: "
            f"{len(self.claims)} declared){hint}"
        )


def check_verdict(verdict: str) -> str:
    """Return ``verdict`` if it is one of :data:`VERDICTS`, else raise ``ValueError``."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {list(VERDICTS)}")
    return verdict


def check_row(
    result: str,
    setting: str,
    measured: Any,
    theoretical: Any,
    verdict: str,
    reason: str,
    margin: str | None = None,
    **details: Any,
) -> dict[str, Any]:
    """One check row: the claim ``result`` (a library name or the analysis' own name) tested
    in ``setting`` (one sentence: the problem, its parameters, the engine), the ``measured``
    and ``theoretical`` values (numbers, lists or text such as ``"<= 1"``), the ``verdict``
    (one of :data:`VERDICTS`) and its ``reason`` (one sentence of detail).

    ``margin`` (optional) is the stated tolerance (``"3 SE"``, ``"relative difference <=
    1e-6"``); further keyword arguments go to ``details`` (numbers the tests assert on). NumPy
    scalars and arrays in ``measured``, ``theoretical`` and ``details`` become plain Python
    values (:func:`plain_values`), so that the row is JSON as it stands. The keys are in the
    order of :data:`ROW_KEYS`, then ``margin``, then ``details``. The row is checked by
    :func:`validate_row` before it is returned: a verdict outside the vocabulary or a reason
    that is not a string raises here, where the row is written.

    Example::

        check_row("sgd.noise_floor_1d", "d = 1, gamma = 0.1", 0.0526, 0.0526, HOLDS,
                  "|diff| 3e-05, SE 0.0004", margin="3 SE")
    """
    out: dict[str, Any] = {
        "result": result,
        "setting": setting,
        "measured": plain_values(measured),
        "theoretical": plain_values(theoretical),
        "verdict": verdict,
        "reason": reason,
    }
    if margin is not None:
        out["margin"] = margin
    if details:
        out["details"] = {k: plain_values(v) for k, v in details.items()}
    return validate_row(out, where=f"row of {result!r}")


def plain_values(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays (also inside lists, tuples and dicts) replaced
    by plain Python numbers and lists; anything else unchanged."""
    if isinstance(value, np.ndarray):
        return [plain_values(x) for x in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [plain_values(x) for x in value]
    if isinstance(value, dict):
        return {k: plain_values(x) for k, x in value.items()}
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    return value


def validate_row(
    row: dict[str, Any],
    where: str = "check row",
    covers: Sequence[str] | None = None,
    namespace: ClaimNamespace | None = None,
) -> dict[str, Any]:
    """Return ``row`` if it is a valid check row, else raise naming ``where`` (the check or
    analysis it comes from), the field and what is allowed.

    A valid row has every key of :data:`ROW_KEYS` (``KeyError`` otherwise), a non-empty string
    ``result`` (one of ``covers`` when given: the library results its check covers; in
    ``namespace`` when given: a registered result or a claim the analysis declared,
    :class:`ClaimNamespace`), a string ``setting`` and ``reason`` (``TypeError``) and a verdict
    of :data:`VERDICTS` (``ValueError``); a ``holds`` row's ``measured`` must be finite (a NaN
    or an infinity, also inside a list, is ``ValueError``: nothing was measured that could
    hold), and a row naming a declared measurement may not say ``holds`` or ``violated``
    (``ValueError``: there is no claim to decide). This is the one validator of rows: the
    theory registry, the figure pipeline and the documentation's gallery call it.
    """
    if not isinstance(row, dict):
        raise TypeError(f"{where}: a check row must be a dict, got {type(row).__name__}")
    missing = [k for k in ROW_KEYS if k not in row]
    if missing:
        raise KeyError(f"{where}: row lacks the keys {missing} (a row has {list(ROW_KEYS)})")
    if not isinstance(row["result"], str) or not row["result"]:
        raise ValueError(f"{where}: result must be a non-empty string, got {row['result']!r}")
    if covers is not None and row["result"] not in covers:
        raise ValueError(
            f"{where}: row result {row['result']!r} is not one of the covered results "
            f"{list(covers)}"
        )
    if namespace is not None:
        if row["result"] not in namespace:
            raise ValueError(f"{where}: {namespace.refusal(row['result'])}")
        if namespace.kind_of(row["result"]) == MEASUREMENT and row.get("verdict") in (
            HOLDS,
            VIOLATED,
        ):
            raise ValueError(
                f"{where}: row of {row['result']!r} says {row['verdict']!r}, but "
                f"{row['result']!r} is declared a measurement (no claim to decide): say "
                f"{MEASURED!r}, or declare it with kind {CLAIM!r}"
            )
    if not isinstance(row["setting"], str):
        raise TypeError(f"{where}: setting must be a string, got {row['setting']!r}")
    if row["verdict"] not in VERDICTS:
        raise ValueError(f"{where}: verdict {row['verdict']!r} is not one of {list(VERDICTS)}")
    if not isinstance(row["reason"], str):
        raise TypeError(f"{where}: reason must be a string, got {row['reason']!r}")
    if row["verdict"] == HOLDS and _has_non_finite(row["measured"]):
        raise ValueError(
            f"{where}: a row whose measured value is not finite ({row['measured']!r}) cannot "
            f"carry {HOLDS!r}: say {NOT_IDENTIFIABLE!r} or {INCONCLUSIVE!r} with the reason"
        )
    return row


def _has_non_finite(value: Any) -> bool:
    """Whether ``value`` (a number, or a list / tuple / dict / array of them) holds a NaN or
    an infinity; text and other objects count as finite."""
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple, np.ndarray)):
        return any(_has_non_finite(v) for v in value)
    if isinstance(value, (float, np.floating)):
        return not math.isfinite(float(value))
    return False


def interval_text(interval: Sequence[float], spec: str = ".3g") -> str:
    """``[lo, hi]``, each end formatted by the format ``spec`` (default three significant
    digits; ``".2f"``: two decimals)."""
    return f"[{float(interval[0]):{spec}}, {float(interval[1]):{spec}}]"


def exponent_verdict(
    interval: Sequence[float] | None,
    claimed: float,
    alternatives: Iterable[float] = (),
    max_half_width: float = MAX_HALF_WIDTH,
    side: str = "two",
    fit: Any = None,
) -> tuple[str, str]:
    """Verdict and reason for a measured exponent with two-sided ``interval`` against the
    ``claimed`` exponent, by the rule of the module docstring.

    ``interval=None`` (or non-finite ends) means the exponent could not be fitted:
    ``not_identifiable``. ``alternatives`` are the competing exponents the claim must be told
    apart from; a narrow interval that still contains one of them is ``consistent_unresolved``.
    ``side`` is ``"two"`` (the exponent equals ``claimed``), ``"at_least"`` or ``"at_most"``.
    ``fit`` (optional) carries the fit's adequacy (module docstring: an inadequate fit is
    ``not_identifiable``, an untestable one cannot ``hold``).
    """
    if side not in ("two", "at_least", "at_most"):
        raise ValueError(f"side must be 'two', 'at_least' or 'at_most', got {side!r}")
    if interval is None:
        return NOT_IDENTIFIABLE, "no exponent could be fitted in this setting"
    adequate, adequacy = _adequacy_of(fit)
    if adequate is False:
        return NOT_IDENTIFIABLE, f"no single exponent describes the points ({adequacy})"
    verdict, reason = _interval_verdict(interval, claimed, alternatives, max_half_width, side)
    if adequate is None and fit is not None and verdict == HOLDS:
        return CONSISTENT_UNRESOLVED, f"{reason}, but {adequacy}"
    return verdict, reason


def _adequacy_of(fit: Any) -> tuple[bool | None, str]:
    """``(adequate, adequacy)`` of a fit object or dict (``(None, "")`` without a fit)."""
    if fit is None:
        return None, ""
    if isinstance(fit, dict):
        flag, why = fit.get("adequate"), fit.get("adequacy", "")
    else:
        flag, why = getattr(fit, "adequate", None), getattr(fit, "adequacy", "")
    # a flag read back from a frame may be a NumPy bool, or NaN for "untested"
    if flag is None or (isinstance(flag, float) and math.isnan(flag)):
        return None, str(why)
    return bool(flag), str(why)


def _interval_verdict(
    interval: Sequence[float],
    claimed: float,
    alternatives: Iterable[float],
    max_half_width: float,
    side: str,
) -> tuple[str, str]:
    """The interval part of :func:`exponent_verdict` (module docstring)."""
    lo, hi = float(interval[0]), float(interval[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return NOT_IDENTIFIABLE, f"interval {interval_text((lo, hi))} is unbounded"
    iv = interval_text((lo, hi))
    if side == "at_least" and lo > claimed:
        return HOLDS, f"interval {iv} lies above {claimed:g}"
    if side == "at_most" and hi < claimed:
        return HOLDS, f"interval {iv} lies below {claimed:g}"
    if not lo <= claimed <= hi:
        return VIOLATED, f"interval {iv} excludes the claimed {claimed:g}"
    half = (hi - lo) / 2
    inside = [a for a in alternatives if lo <= a <= hi and a != claimed]
    if half > max_half_width:
        return (
            CONSISTENT_UNRESOLVED,
            f"interval {iv} contains {claimed:g} but its half-width {half:.2g} exceeds "
            f"{max_half_width:g}",
        )
    if inside:
        alts = ", ".join(f"{a:g}" for a in inside)
        return CONSISTENT_UNRESOLVED, f"interval {iv} contains {claimed:g} and also {alts}"
    return HOLDS, f"interval {iv} contains {claimed:g} (half-width {half:.2g})"


def verdict_of(ok: bool | None, reason_ok: str = "", reason_bad: str = "") -> tuple[str, str]:
    """``(holds, reason_ok)`` if ``ok``, ``(violated, reason_bad)`` if not, and
    ``(inconclusive, ...)`` for ``None``: the common two-way test with its reason."""
    if ok is None:
        return INCONCLUSIVE, reason_bad or reason_ok
    return (HOLDS, reason_ok) if ok else (VIOLATED, reason_bad)


# ============================================================================ verdict rules
# The rules every check follows before a claim may say ``holds`` (module docstring, "Rules"):
# intervals widened for lack of fit, windows chosen from the data agree, limits tested as
# limits, and a negative control that made the same check code say ``violated``.


def misfit_inflation(chi2_dof: float | None) -> float:
    """``sqrt(max(1, chi2/dof))``: the factor by which a fit's interval is widened when the
    model fits worse than the standard errors allow (the Birge ratio; Particle Data Group's
    scale factor). ``None`` or NaN (no ``chi2``: an unweighted fit, whose interval already
    comes from the residuals) gives 1."""
    if chi2_dof is None or not math.isfinite(float(chi2_dof)):
        return 1.0
    return math.sqrt(max(1.0, float(chi2_dof)))


def widened(center: float, half_width: float, chi2_dof: float | None) -> tuple[float, float]:
    """``center -+ half_width * sqrt(max(1, chi2/dof))`` (:func:`misfit_inflation`)."""
    h = half_width * misfit_inflation(chi2_dof)
    return center - h, center + h


def window_agreement(per_window: Sequence[tuple[str, str, str]]) -> tuple[str, str]:
    """Verdict of a claim tested on several windows chosen from the data (every adequate
    window, each with at least the minimum number of points): ``per_window`` holds
    ``(window label, verdict, reason)`` per window.

    A window picked after looking at the data cannot decide alone: the verdict is that of the
    windows when every one agrees, and ``consistent_unresolved`` with the windows listed when
    they do not (no window: ``not_identifiable``)."""
    if not per_window:
        return NOT_IDENTIFIABLE, "no adequate window"
    verdicts = {v for _, v, _ in per_window}
    listing = "; ".join(f"{w}: {v}" for w, v, _ in per_window)
    if len(verdicts) == 1:
        (v,) = verdicts
        first = per_window[0][2]
        if len(per_window) == 1:
            return v, f"{first} (the only adequate window)"
        return v, f"every adequate window agrees ({listing}); {first}"
    return CONSISTENT_UNRESOLVED, f"the adequate windows disagree ({listing})"


# ============================================================================ negative controls
@dataclasses.dataclass(frozen=True)
class Control:
    """A negative control of a check: the same check code run on ``data``, a deliberately
    false variant of the setting or of the claim (an ordering reversed, a decay removed, an
    exponent shifted, a bound tightened past what was measured), on which every claim named
    in ``targets`` must come out ``violated``.

    ``name`` says what was falsified ("C_2 ordering reversed"). A ``holds`` row of the real
    data keeps its verdict only when some control made the row of the same claim say
    ``violated`` (:func:`apply_controls`)."""

    name: str
    data: Any
    targets: tuple[str, ...] = ()


def _row_key(row: dict[str, Any]) -> tuple[str, str]:
    return row["result"], row["setting"]


def apply_controls(
    rows: list[dict[str, Any]], control_rows: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """``rows`` with the negative-control rule applied: a ``holds`` row keeps ``holds`` only
    when the row of the same claim (same ``result`` and ``setting``; or the same ``result``
    where that name is unique in both lists) says ``violated`` under at least one control of
    ``control_rows`` (control name -> the check's rows on that control's data); its
    ``details["negative_control"]`` then names the controls. Every other ``holds`` becomes
    ``measured``: a check that nothing could make fail may report, not decide. Rows of other
    verdicts pass unchanged. Returns new dicts (``rows`` is not modified)."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["result"]] = counts.get(r["result"], 0) + 1
    failed_by: dict[tuple[str, str], list[str]] = {}
    failed_by_result: dict[str, list[str]] = {}
    for name, crow in control_rows.items():
        ccounts: dict[str, int] = {}
        for r in crow:
            ccounts[r["result"]] = ccounts.get(r["result"], 0) + 1
        for r in crow:
            if r["verdict"] != VIOLATED:
                continue
            failed_by.setdefault(_row_key(r), []).append(name)
            if ccounts[r["result"]] == 1:
                failed_by_result.setdefault(r["result"], []).append(name)
    out = []
    for r in rows:
        r = {**r, "details": dict(r.get("details") or {})}
        if r["verdict"] == HOLDS:
            names = failed_by.get(_row_key(r)) or (
                failed_by_result.get(r["result"]) if counts[r["result"]] == 1 else None
            )
            if names:
                r["details"]["negative_control"] = sorted(set(names))
            else:
                r["verdict"] = MEASURED
                r["reason"] = (
                    f"no negative control made this check say violated (would hold: {r['reason']})"
                )
        if not r["details"]:
            del r["details"]
        out.append(validate_row(r, where=f"row of {r['result']!r}"))
    return out


def controlled(
    controls: Callable[[Any], Iterable[Control]],
) -> Callable[[Callable[[Any], list[dict[str, Any]]]], Callable[[Any], list[dict[str, Any]]]]:
    """Decorator of an analysis' ``checks(data)``: run the check on ``data`` and on every
    negative control ``controls(data)`` returns, and apply :func:`apply_controls`.

    The wrapped function keeps the raw check as ``.raw`` and the control factory as
    ``.controls`` (the test suite runs every control and asserts that each makes each of its
    ``targets`` say ``violated``)."""

    def deco(
        checks_fn: Callable[[Any], list[dict[str, Any]]],
    ) -> Callable[[Any], list[dict[str, Any]]]:
        @functools.wraps(checks_fn)
        def wrapper(data: Any) -> list[dict[str, Any]]:
            rows = checks_fn(data)
            ctl = {c.name: checks_fn(c.data) for c in controls(data)}
            return apply_controls(rows, ctl)

        wrapper.raw = checks_fn  # type: ignore[attr-defined]
        wrapper.controls = controls  # type: ignore[attr-defined]
        return wrapper

    return deco
