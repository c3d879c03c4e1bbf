"""Running a probe script here and under ``tools/portable_env.py`` (the tests that compare the
bits of a computation across the two environments share this)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "portable_env.py"
#: the variables of tools/portable_env.py
PORTABLE_KEYS = (
    "CONVKIT_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMBA_CACHE_DIR",
    "NUMBA_CPU_NAME",
    "NUMBA_CPU_FEATURES",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
)


def run_probe(code: str, portable: bool) -> dict:
    """The JSON that ``python -c code`` prints, run in this machine's own environment or
    under the portable one.  The variables of the tool are dropped for both runs (the tool
    keeps variables already set, and ``make test-portable`` sets them)."""
    cmd = [sys.executable, "-c", code]
    if portable:
        cmd = [sys.executable, str(TOOL), *cmd]
    env = {k: v for k, v in os.environ.items() if k not in PORTABLE_KEYS}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def host_has_avx512() -> bool:
    """Whether this CPU has AVX512F (then the portable environment turns it off)."""
    ll = pytest.importorskip("llvmlite.binding")
    return "+avx512f" in ll.get_host_cpu_features().flatten().split(",")
