"""The code blocks of ARCHITECTURE.md run as they stand (each in a fresh interpreter, so that
the example registrations do not leak into the rest of the suite)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_blocks import python_blocks, run_block

DOC = Path(__file__).resolve().parents[1] / "ARCHITECTURE.md"
BLOCKS = python_blocks(DOC)


def test_the_doc_has_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs(index, tmp_path):
    assert run_block(BLOCKS[index], tmp_path).strip(), "every example prints its outcome"


def test_examples_import_no_private_names():
    """The examples use the public API only: no ``from x import _name`` and no ``x._name``
    of convkit."""
    for block in BLOCKS:
        for line in block.splitlines():
            assert not re.search(r"^\s*from convkit\S* import .*\b_\w", line), line
            assert not re.search(r"\bconvkit(\.\w+)*\._\w", line), line
