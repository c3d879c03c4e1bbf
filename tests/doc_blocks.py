"""The Python code blocks of a Markdown page, and one block run as it stands in a fresh
interpreter (shared by the tests of ARCHITECTURE.md and docs/adding.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def python_blocks(page: Path) -> list[str]:
    """Every fenced ```` ```python ```` block of ``page``, in order."""
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


def run_block(block: str, cwd: Path, timeout: float = 300) -> str:
    """Run ``block`` with this interpreter in ``cwd``; its stdout (asserting exit code 0,
    with the end of stderr in the message)."""
    proc = subprocess.run(
        [sys.executable, "-c", block], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout
