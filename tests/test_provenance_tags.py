"""Provenance tags: DeepSqueeze's rate and step limit come from a summary of the paper (the
paper's text was not available), and say so; derived and paper-text results are told apart."""

from __future__ import annotations

import pytest

from convkit.bounds import get
from convkit.bounds.provenance import KOLOSKOVA, TANG, TANG_SUMMARY, from_summary, source_of


@pytest.mark.parametrize("name", ["deepsqueeze.rate", "deepsqueeze.step_limit"])
def test_deepsqueeze_claims_are_tagged_as_from_a_summary(name):
    prov = get(name).provenance
    assert source_of(prov) == "summary"
    assert prov.startswith(TANG) and TANG_SUMMARY in prov
    assert "not its text" in prov


def test_other_sources():
    assert source_of(get("choco.rate_strongly_convex").provenance) == "paper"
    assert source_of(get("deepsqueeze.average_dynamics").provenance) == "derived"
    assert from_summary(KOLOSKOVA, "a", "b").endswith("; a]: b")


def test_empty_fields_are_refused():
    with pytest.raises(ValueError, match="statement"):
        from_summary(TANG, TANG_SUMMARY, " ")
