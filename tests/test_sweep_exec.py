"""Sweep executors and crash safety.

* Determinism: the same spec gives bit-for-bit identical frames (and identical cache payloads)
  serially and with joblib (2 processes); Dask is in ``test_sweep_dask.py``.  Most of the
  time is the start of the worker processes (each imports pandas and convkit).
* Resume: ``python -m convkit.sweep`` in a real subprocess is killed with SIGKILL once some
  cache entries exist; the restart recomputes none of them and the final frame equals an
  uninterrupted run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from sweep_helpers import payload_digests, tiny_spec

from convkit import sweep as sw

ROOT = Path(__file__).resolve().parents[1]


def test_joblib_gives_identical_results(tmp_path):
    """Serial and joblib (2 processes): bit-for-bit identical frames and cache payloads."""
    s = sw.Sweep.from_dict(tiny_spec())
    serial = sw.run(s, tmp_path / "serial", jobs=1, progress=False)
    assert serial.summary.executor == "serial"
    par = sw.run(s, tmp_path / "joblib", jobs=2, progress=False)
    assert par.summary.executor == "joblib (2 jobs)"
    assert_identical(tmp_path, s, serial, par, "joblib")


def resume_spec_toml() -> str:
    """30 configurations of roughly 0.1 s each."""
    C = ", ".join(f"{0.05 * (i + 1):.2f}" for i in range(10))
    return f"""
seed = 5
steps = 150
replicates = 16

[problem]
kind = "least_squares"
d = 8
spectrum = "1/i"

[algorithm]
kind = "local_sgd"
workers = 2
comm = "rounds:10"
step = {{kind = "poly", C = 0.5, alpha = 0.75}}

[record]
n_record = 8
iterates = ["avg", "last"]

[grid]
"algorithm.workers" = [1, 2, 4]
"algorithm.step.C" = [{C}]
"""


def assert_identical(tmp_path: Path, s: sw.Sweep, serial, res, name: str) -> None:
    assert (res.summary.computed, res.summary.failed) == (len(s), {}), name
    pd.testing.assert_frame_equal(res.frame, serial.frame, check_exact=True, obj=name)
    assert payload_digests(tmp_path / name, s) == payload_digests(tmp_path / "serial", s)
    assert (tmp_path / name / "frame.parquet").read_bytes() == (
        tmp_path / "serial" / "frame.parquet"
    ).read_bytes(), name


def test_sigkill_and_resume(tmp_path):
    spec = tmp_path / "resume.toml"
    spec.write_text(resume_spec_toml())
    s = sw.Sweep.from_toml(spec)
    assert len(s) == 30
    out = tmp_path / "killed"
    cache = sw.Cache(out / "cache")
    proc = subprocess.Popen(
        [sys.executable, "-m", "convkit.sweep", str(spec), "--out", str(out), "--jobs", "1"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 50
        while len(cache.keys()) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, (
        f"the sweep ended on its own (status {proc.returncode}) before it could be killed"
    )
    assert not (out / "sweep.json").exists()
    done = [c.index for c in s.configurations if cache.get(c.key, c.setting) is not None]
    # every committed record is a complete, verified entry (payload written first)
    assert len(done) == len(cache.keys())
    assert 3 <= len(done) < 30

    resumed = sw.run(s, out, jobs=1, progress=False)
    summ = resumed.summary
    assert (summ.cached, summ.computed, summ.failed, summ.invalid) == (
        len(done),
        30 - len(done),
        {},
        {},
    )
    statuses = {c["config_id"]: c["status"] for c in resumed.meta["configurations"]}
    assert sorted(i for i, st in statuses.items() if st == "cached") == done

    full = sw.run(s, tmp_path / "uninterrupted", jobs=1, progress=False)
    assert full.summary.computed == 30
    pd.testing.assert_frame_equal(resumed.frame, full.frame, check_exact=True)
    loaded = sw.load(out)
    pd.testing.assert_frame_equal(loaded.frame, full.frame, check_exact=True)
    assert json.loads((out / "sweep.json").read_text())["summary"]["cached"] == len(done)
