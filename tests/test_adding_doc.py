"""The toy algorithm of docs/adding.md is added by following the page: its code blocks run as
they stand, each in a fresh interpreter (issue 32, item 7)."""

from __future__ import annotations

from pathlib import Path

from doc_blocks import python_blocks, run_block

DOC = Path(__file__).resolve().parents[1] / "docs" / "adding.md"
BLOCKS = python_blocks(DOC)


def test_the_page_has_one_block_the_toy_algorithm():
    assert len(BLOCKS) == 1 and "class ServerStep(LocalSGD)" in BLOCKS[0]


def test_the_documented_snippet_runs(tmp_path):
    out = run_block(BLOCKS[0], tmp_path)
    assert "ServerStep(P=4, b=1, every(H=5), eta=1.5)" in out
    assert "ServerStep declares no exact model" in out
    assert "3 configurations" in out
