"""``docs/maps.md`` ("map your own claim"), executed as it stands: the module block written
as ``floor_claims.py``, the command line and the Python run, whose crossings hold the true
boundary (gamma h = 0.25)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
from doc_blocks import python_blocks, run_block

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "maps.md"


def test_the_how_to_runs_as_it_stands(tmp_path):
    module, script = python_blocks(DOC)
    assert module.startswith("# floor_claims.py")
    (tmp_path / "floor_claims.py").write_text(module)
    (command,) = re.findall(r"```console\n\$ (.*?)\n```", DOC.read_text(), flags=re.S)
    args = shlex.split(command)
    assert args[:2] == ["convkit", "map"]
    proc = subprocess.run([sys.executable, "-m", "convkit.cli", *args[1:]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cr = pd.read_csv(tmp_path / "floor-map" / "map_noise_floor_crossings.csv")
    assert len(cr) == 3 and ((cr.interval_lo <= 0.25) & (0.25 <= cr.interval_hi)).all()
    out = run_block(script, tmp_path)  # the same map from Python: every point from the cache
    assert "map_noise_floor.png" in out
