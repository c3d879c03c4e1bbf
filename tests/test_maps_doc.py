"""``docs/regime_maps.md`` ("map your own claim"), executed as it stands: the module block written
as ``floor_claims.py``, the command line, then the Python run (every point from the cache).
Every located crossing holds the theory's boundary ``gamma sigma^2 / (2 - 3 gamma) = 0.05``,
and the intervals the page quotes are the computed ones."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from doc_blocks import python_blocks, run_block

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "regime_maps.md"


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
    f = cr.fixed.to_numpy()
    truth = np.where(
        cr.along == "gamma",
        0.1 / (f**2 + 0.15),  # along gamma at sigma = f: gamma* = 0.1 / (sigma^2 + 0.15)
        np.sqrt(0.05 * np.abs(2 - 3 * f) / f),  # along sigma at gamma = f (< 2/3)
    )
    assert len(cr) >= 5 and ((cr.interval_lo <= truth) & (truth <= cr.interval_hi)).all()
    text = DOC.read_text()
    for sigma in (0.5, 1.0):
        r = cr[(cr.along == "gamma") & np.isclose(cr.fixed, sigma)].iloc[0]
        assert f"[{r.interval_lo:.3f}, {r.interval_hi:.3f}]" in text
    out = run_block(script, tmp_path)
    assert "'computed': 0" in out and "map_noise_floor.png" in out
