"""The command line closed early by its reader (``convkit ... | head``) ends quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_output_cut_by_a_closed_pipe_ends_without_a_traceback(tmp_path):
    """``convkit sweep --dry-run`` prints one line per configuration; a reader that closes the
    pipe after the first line (``| head -1``) used to leave a BrokenPipeError traceback."""
    cmd = (
        f"{sys.executable} -m convkit.cli sweep {REPO / 'examples' / 'sweep_example.toml'} "
        f"--out {tmp_path / 'o'} --dry-run | head -1"
    )
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, cwd=REPO,
        timeout=120,
    )
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
