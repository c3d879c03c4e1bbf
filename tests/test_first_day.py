"""First-day surprises (issue 33 item 5): the README tour prints what it computes when run as
a script, shows ``final(metric="excess_risk")``, says how to pick CHOCO-SGD's consensus step,
and ``Result.final`` states its default metric and iterate."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from test_readme_snippets import python_blocks

import convkit as ck

README = Path(__file__).resolve().parents[1] / "README.md"
TEMPLATE = Path(__file__).resolve().parents[1] / "README.template.md"


def test_the_tour_prints_its_results_when_run_as_a_script():
    """A value left on its own line (``res.frame``) shows in a notebook and nothing in a
    script: every top-level expression statement of the README's python blocks is a call of
    ``print``."""
    for text in (README.read_text(), TEMPLATE.read_text()):
        for i, block in enumerate(python_blocks(text)):
            tree = ast.parse(block)
            silent = [
                ast.get_source_segment(block, n)
                for n in tree.body
                if isinstance(n, ast.Expr)
                and not (
                    isinstance(n.value, ast.Call)
                    and isinstance(n.value.func, ast.Name)
                    and n.value.func.id == "print"
                )
            ]
            assert not silent, f"README python block {i + 1} shows nothing of: {silent}"


def test_the_readme_shows_final_with_a_metric_and_how_to_pick_the_consensus_step():
    text = README.read_text()
    assert 'final(metric="excess_risk"' in text
    assert "tune_consensus_step(" in text


def test_final_states_its_default_metric_and_iterate():
    doc = inspect.getdoc(ck.Result.final)
    assert 'metric="hnorm2"' in doc and 'iterate="avg"' in doc, doc
    sig = inspect.signature(ck.Result.final)
    assert sig.parameters["metric"].default == "hnorm2"
    assert sig.parameters["iterate"].default == "avg"
