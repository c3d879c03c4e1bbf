"""``tools/portable_env.py`` (``make test-portable``): a command runs as on another machine of the
same kind, other default thread counts and, where this CPU has AVX512, none of it in numba's
kernels, NumPy's loops or OpenBLAS; NumPy accepts every feature it is told to disable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "portable_env.py"
KEYS = (
    "CONVKIT_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMBA_CACHE_DIR",
    "NUMBA_CPU_NAME",
    "NUMBA_CPU_FEATURES",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
)

# run under the tool: what numba compiles for, which AVX512 targets NumPy still uses, the
# registers of a small vectorizable compiled loop
PROBE = """
import json, os
import numpy as np
import numba
try:
    from numpy._core import _multiarray_umath as um
except ImportError:
    from numpy.core import _multiarray_umath as um

@numba.njit
def axpy(a, x, y):
    for i in range(x.size):
        y[i] += a * x[i]

x = np.ones(4096)
axpy(2.0, x, x.copy())
asm = next(iter(axpy.inspect_asm().values()))
wide = [n for n in um.__cpu_dispatch__ if (n.startswith("AVX512") or n == "X86_V4")]
print(json.dumps({
    "env": {k: os.environ.get(k) for k in KEYS_HERE},
    "cpu_name": numba.config.CPU_NAME,
    "numba_threads": numba.config.NUMBA_NUM_THREADS,
    "numpy_avx512_on": [n for n in wide if um.__cpu_features__.get(n)],
    "zmm": asm.count("zmm"),
}))
""".replace("KEYS_HERE", repr(KEYS))


def _host_has_avx512() -> bool:
    ll = pytest.importorskip("llvmlite.binding")
    return "+avx512f" in ll.get_host_cpu_features().flatten().split(",")


def test_a_command_runs_as_on_a_narrower_machine(tmp_path):
    pytest.importorskip("numba")
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")  # kept by the tool: no shared cache
    # -W error: a feature NumPy cannot disable would be an ImportWarning, hence an error
    cmd = [sys.executable, str(TOOL), sys.executable, "-W", "error", "-c", PROBE]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "portable_env: CONVKIT_THREADS=3" in proc.stderr
    got = json.loads(proc.stdout)
    assert got["env"]["CONVKIT_THREADS"] == "3" and got["numba_threads"] == 1
    assert got["env"]["NUMBA_CACHE_DIR"] == str(tmp_path / "numba")
    if _host_has_avx512():
        assert got["cpu_name"] == "haswell"
        assert "-avx512f" in got["env"]["NUMBA_CPU_FEATURES"].split(",")
        assert got["zmm"] == 0  # no 512-bit register in the compiled loop
        assert got["numpy_avx512_on"] == []
        assert got["env"]["OPENBLAS_CORETYPE"] == "Haswell"
    else:
        assert got["env"]["NUMBA_CPU_NAME"] is None


def test_variables_already_set_are_kept_and_a_command_is_required(monkeypatch):
    monkeypatch.setenv("CONVKIT_THREADS", "5")
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--show"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "CONVKIT_THREADS" not in proc.stdout
    assert "NUMBA_NUM_THREADS" in proc.stdout or "NUMBA_NUM_THREADS" in os.environ
    bare = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and "usage:" in bare.stderr
