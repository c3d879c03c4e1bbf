"""benchmarks/gpu.py runs on the CPU with --backend numpy (quick): NumPy against NumPy with
independent seeds (the statistical check must pass), throughput only, no GPU/CPU ratio and no
write to the metrics file; sizes too large for the memory are skipped and said so."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import gpu  # noqa: E402


def test_quick_numpy_run(tmp_path):
    report_path = tmp_path / "report.json"
    latest = tmp_path / "latest.json"
    rc = gpu.main(
        ["--backend", "numpy", "--quick", "--json", str(report_path), "--latest", str(latest)]
    )
    assert rc == 0
    report = json.loads(report_path.read_text())
    assert report["backend"] == "numpy"
    rows = report["agreement"]
    assert {(r["algorithm"], r["iterate"]) for r in rows} == {
        (a, i) for a in ("local_sgd", "deepsqueeze") for i in ("last", "avg")
    }
    assert all(r["ok"] and abs(r["z"]) <= 4 for r in rows)
    for kind in ("local_sgd", "deepsqueeze"):
        entry = report["throughput"][kind]["1e+05"]
        assert set(entry) == {"numpy"}  # throughput only: no second library, no ratio
        e = entry["numpy"]
        assert e["R"] * e["P"] * e["d"] == 62 * 16 * 100 and e["throughput"] > 0
        assert e["throughput"] == pytest.approx(e["steps"] * e["R"] * e["P"] / e["seconds"])
    assert not latest.exists()


def test_size_beyond_memory_is_skipped(monkeypatch):
    monkeypatch.setattr(gpu, "_available_bytes", lambda backend: 10 * 2**20)
    out = gpu.throughput("deepsqueeze", 10**6, "numpy", "float64", 0.1)
    assert "skipped" in out and "GiB" in out["skipped"]


def test_merge_latest_keeps_other_keys(tmp_path):
    path = tmp_path / "latest.json"
    path.write_text(json.dumps({"other": {"value": 1.0, "goal": 2.0, "higher_is_better": True}}))
    new = {"gpu_vs_cpu_1e7": {"value": 40.0, "goal": 30.0, "higher_is_better": True}}
    gpu._merge_latest(path, new)
    got = json.loads(path.read_text())
    assert set(got) == {"other", "gpu_vs_cpu_1e7"} and got["other"]["value"] == 1.0


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_cupy_without_cupy_fails_at_the_start():
    with pytest.raises(RuntimeError, match=r"backend='cupy' needs CuPy"):
        gpu.main(["--backend", "cupy", "--quick"])
