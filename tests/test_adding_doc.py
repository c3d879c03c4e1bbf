"""The toy algorithm of docs/adding.md is added by following the page: its code blocks run as
they stand, each in a fresh interpreter (issue 32, item 7)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "adding.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_the_toy_algorithm():
    assert any("class ServerStep(LocalSGD)" in block for block in BLOCKS)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_the_documented_snippet_runs(index, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "ServerStep(P=4, b=1, every(H=5), eta=1.5)" in out
    assert "ServerStep declares no exact model" in out
    assert "3 configurations" in out
