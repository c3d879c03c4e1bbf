"""``tools/portable_env.py`` (``make test-portable``): a command runs as on another machine of the
same kind, other default thread counts and, where this CPU has AVX512, none of it in numba's
kernels, NumPy's loops or OpenBLAS; NumPy accepts every feature it is told to disable."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from portable_probe import PORTABLE_KEYS, TOOL

KEYS = PORTABLE_KEYS

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


# --------------------------------------------------------------------------- portable_compare


def _compare_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "portable_compare", TOOL.parent / "portable_compare.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["portable_compare"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _write(path, rows):
    import pandas as pd

    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_portable_compare_rules(tmp_path):
    pc = _compare_module()
    assert 2.0**-28 < pc.EPS < 1.0001 * 2.0**-28  # 2^17 steps x 2 gamma_{2^7}
    base = {"config": ["a", "b", "c"], "n_diverged": [0, 1, 0], "mean": [1.0, 2e-3, np.nan]}
    here = _write(tmp_path / "here.csv", base)
    assert pc.compare_csv(here, _write(tmp_path / "same.csv", base)).identical
    # rounding: a few ulps of the value, or 2^-30 of the column's scale (NaN equals NaN)
    near = {**base, "mean": [1.0 + 4e-16, 2e-3 + 1e-12, np.nan]}
    rep = pc.compare_csv(here, _write(tmp_path / "near.csv", near))
    assert not rep.identical and rep.problems == [] and 0 < rep.max_rel < 1e-9
    # negative controls: a float beyond the tolerance, an integer count, a text label, NaN
    for name, change in (
        ("float", {"mean": [1.0 + 1e-8, 2e-3, np.nan]}),
        ("count", {"n_diverged": [0, 2, 0]}),
        ("text", {"config": ["a", "b", "d"]}),
        ("nan", {"mean": [1.0, 2e-3, 5.0]}),
    ):
        rep = pc.compare_csv(here, _write(tmp_path / f"{name}.csv", {**base, **change}))
        assert len(rep.problems) == 1, (name, rep.problems)


def test_portable_compare_scale_is_the_columns_typical_value(tmp_path):
    pc = _compare_module()
    # a long-format column: a diverging run's 1e12 beside errors of 1e-3; a 1 % move of an
    # error is caught (the tolerance follows the median, not the largest value) ...
    col = [1e12, 2e-3, 3e-3, 4e-3, 0.0]
    here = _write(tmp_path / "here.csv", {"mean": col})
    moved = _write(tmp_path / "moved.csv", {"mean": [1e12, 2.02e-3, 3e-3, 4e-3, 0.0]})
    assert len(pc.compare_csv(here, moved).problems) == 1
    # ... while a residue of a value that is zero by construction may move (error of its
    # operands' scale, 1e-33 here against values of 1e-3)
    residue = _write(tmp_path / "residue.csv", {"mean": [1e12, 2e-3, 3e-3, 4e-3, 1e-33]})
    assert pc.compare_csv(here, residue).problems == []


def test_portable_compare_skips_wall_clock_columns_only(tmp_path):
    pc = _compare_module()
    here = _write(tmp_path / "here.csv", {"seconds": [0.17], "fit_seconds": [2.0], "v": [1.0]})
    there = _write(tmp_path / "there.csv", {"seconds": [0.09], "fit_seconds": [3.0], "v": [1.0]})
    assert pc.compare_csv(here, there).problems == []
    moved = _write(tmp_path / "moved.csv", {"seconds": [0.09], "fit_seconds": [3.0], "v": [1.1]})
    assert len(pc.compare_csv(here, moved).problems) == 1


def test_portable_compare_checks_and_missing_files(tmp_path):
    pc = _compare_module()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    rows = {"x": [{"result": "x.r", "verdict": "holds", "measured": "1.00"}]}
    (a / "checks.json").write_text(json.dumps(rows))
    rows["x"][0]["measured"] = "1.01"  # the text of a measurement may round otherwise
    (b / "checks.json").write_text(json.dumps(rows))
    _write(a / "x.csv", {"v": [1.0]}), _write(b / "x.csv", {"v": [1.0]})
    reports, checks = pc.compare_dirs(a, b)
    assert checks == [] and [r.identical for r in reports] == [True]
    rows["x"][0]["verdict"] = "violated"
    (b / "checks.json").write_text(json.dumps(rows))
    _write(b / "y.csv", {"v": [1.0]})
    reports, checks = pc.compare_dirs(a, b)
    assert len(checks) == 1 and "verdicts differ" in checks[0]
    assert [r.name for r in reports if r.problems] == ["y.csv"]
