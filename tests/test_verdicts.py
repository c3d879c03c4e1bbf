"""The verdict vocabulary (:mod:`convkit.verdicts`): the exponent rule branch by branch, and
every row of the library checks carries a verdict of the vocabulary with a reason."""

from __future__ import annotations

import math

import pytest

from convkit.verdicts import (
    CONSISTENT_UNRESOLVED,
    HOLDS,
    MAX_HALF_WIDTH,
    NOT_IDENTIFIABLE,
    VERDICTS,
    VIOLATED,
    check_verdict,
    exponent_verdict,
)


def test_wide_interval_containing_the_claim_is_unresolved():
    """The motivating case: N* exponent 0.31 with interval [-0.36, 0.99] against the claimed
    1/2 (alternatives 0 and 1). The claim is inside, but so is 0, and the half-width 0.675 is
    far above 0.25: consistent_unresolved, not holds."""
    verdict, reason = exponent_verdict((-0.36, 0.99), 0.5, alternatives=(0.0, 1.0))
    assert verdict == CONSISTENT_UNRESOLVED
    assert "half-width" in reason and "[-0.36, 0.99]" in reason


def test_interval_excluding_the_claim_is_violated():
    verdict, reason = exponent_verdict((0.633, 1.015), 0.5, alternatives=(0.0, 1.0))
    assert verdict == VIOLATED
    assert "excludes the claimed 0.5" in reason


def test_narrow_interval_containing_the_claim_holds():
    verdict, reason = exponent_verdict((1.96, 2.06), 2.0, alternatives=(0.0, 1.0))
    assert verdict == HOLDS
    assert "contains 2" in reason


def test_narrow_interval_containing_an_alternative_is_unresolved():
    """Half-width 0.2 <= 0.25, but the alternative 0.8 is inside too."""
    verdict, reason = exponent_verdict((0.4, 0.8), 0.5, alternatives=(0.0, 0.8))
    assert verdict == CONSISTENT_UNRESOLVED
    assert "also 0.8" in reason


def test_half_width_limit_is_inclusive():
    lo, hi = 0.5 - MAX_HALF_WIDTH, 0.5 + MAX_HALF_WIDTH
    assert exponent_verdict((lo, hi), 0.5)[0] == HOLDS
    assert exponent_verdict((lo - 0.01, hi), 0.5)[0] == CONSISTENT_UNRESOLVED


@pytest.mark.parametrize("interval", [None, (-math.inf, 0.3), (0.1, math.nan)])
def test_no_interval_is_not_identifiable(interval):
    verdict, reason = exponent_verdict(interval, 0.5)
    assert verdict == NOT_IDENTIFIABLE and reason


def test_check_verdict_rejects_free_text():
    assert check_verdict(HOLDS) == HOLDS
    with pytest.raises(ValueError, match="not one of"):
        check_verdict("does not hold")


def test_every_row_of_cheap_checks_has_a_vocabulary_verdict_and_a_reason():
    """``run_checks`` on a few cheap checks (exact eigenvalue computations, compressor
    identities, a short crash-free registry run): every row has a verdict in VERDICTS and a
    non-empty string reason."""
    from convkit.bounds import run_checks

    rows = run_checks(
        quick=True, only=["w_eta.eigenvalues", "w_eta.gap_condition", "compression.scaled_sign"]
    )
    assert len(rows) == 6
    for r in rows:
        assert r["verdict"] in VERDICTS, r
        assert isinstance(r["reason"], str) and r["reason"], r
