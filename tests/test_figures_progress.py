"""What ``convkit figures`` prints while it runs (plan, start and end of each analysis,
``k/N done, elapsed, ETA``) and the times it records in ``runs.json`` (seconds, cell cache,
compilation, date and machine; the fresh-clone time kept across warm reruns)."""

from __future__ import annotations

import json
import re

import pytest

from convkit.cli import main
from convkit.figures_progress import (
    CacheWatch,
    Progress,
    duration,
    makespan,
    recorded_time,
    timing_record,
)
from convkit.progress import progress_bar, progress_enabled

#: a fake analysis that reads its result from a cache under the repository's .convkit-cache
#: when there, else computes it (sleeping) and writes it, as the Local-SGD cells do
CACHED = """
import time
from pathlib import Path

import pandas as pd

import convkit._jit as jit
from convkit import verdicts as V

TITLE = "cached {name}"
CLAIMS = V.declare_claims("{name}", {{"ran": V.Claim("it ran", "a cached fake", kind=V.MEASUREMENT)}})
CACHE = Path(__file__).resolve().parents[1] / ".convkit-cache" / "cells" / "{name}.csv"


def run(quick):
    if CACHE.exists():
        return pd.read_csv(CACHE)
    time.sleep({sleep})
    jit._STATE["seconds"] += {compile}  # as if numba compiled for that long inside the run
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    data = pd.DataFrame({{"x": [1.0, 2.0]}})
    tmp = CACHE.with_suffix(".tmp")
    data.to_csv(tmp, index=False)
    tmp.replace(CACHE)
    return data


def plot(data, outdir):
    return []


def checks(data):
    return [dict(result="{name}.ran", setting="-", measured=1.0, theoretical=None,
                 verdict="measured", reason="")]
"""

PLAIN = CACHED.replace("if CACHE.exists():", "if False:").replace(
    "CACHE.parent.mkdir(parents=True, exist_ok=True)", "return pd.DataFrame({{'x': [1.0]}})"
)


def _package(tmp_path, spec):
    """Analyses ``name -> (source, sleep, compile seconds)`` in a package unique to the test."""
    pkg = tmp_path / f"an_{tmp_path.name}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, (src, sleep, comp) in spec.items():
        (pkg / f"{name}.py").write_text(src.format(name=name, sleep=sleep, compile=comp))
    return pkg


def _figures(*args):
    return main(["figures", *map(str, args)])


def test_runs_json_records_time_cache_state_compilation_date_and_machine(tmp_path):
    pkg = _package(tmp_path, {"cells": (CACHED, 0.3, 2.0), "plain": (PLAIN, 0.0, 0.0)})
    out = tmp_path / "out"
    assert _figures("--quick", "--analyses", pkg, "--out", out) == 0
    runs = json.loads((out / "runs.json").read_text())
    cold, plain = runs["cells"], runs["plain"]
    assert cold["cell_cache"] == "cold" and plain["cell_cache"] == "unused"
    assert cold["seconds"] >= 0.3 and cold["compile_seconds"] == pytest.approx(2.0)
    assert plain["compile_seconds"] == 0.0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", cold["date"])
    assert isinstance(cold["machine"]["nproc"], int) and cold["machine"]["nproc"] >= 1
    assert isinstance(cold["machine"]["cpu"], str) and cold["machine"]["cpu"]
    assert cold["jobs"] == 1
    assert cold["fresh"]["seconds"] == cold["seconds"]  # a cold run is a fresh clone's time
    # a rerun recording its times reads the cache: warm, and the fresh-clone time of the
    # first run is kept (without --record-times the unchanged data keeps its record)
    assert (
        _figures("--quick", "--record-times", "--analyses", pkg, "--out", out, "--jobs", "2") == 0
    )
    warm = json.loads((out / "runs.json").read_text())["cells"]
    assert warm["cell_cache"] == "warm"
    assert warm["fresh"] == cold["fresh"] and warm["jobs"] == 2
    seconds, note = recorded_time(warm, "quick")  # what the next run's plan shows
    assert seconds == cold["fresh"]["seconds"] and note.startswith("fresh clone, ")
    assert recorded_time(warm, "full") == (None, "no recorded time")  # another mode's time
    # a full run from the same (warm) cache: the quick run's fresh time is not the full one's
    assert _figures("--record-times", "--analyses", pkg, "--out", out) == 0
    full = json.loads((out / "runs.json").read_text())["cells"]
    assert full["mode"] == "full" and full["cell_cache"] == "warm" and "fresh" not in full


def test_plan_then_start_end_and_eta_lines(tmp_path, capsys):
    """The plan lists every analysis with its recorded time and what it is (fresh clone, warm
    cache, unknown cache state, none) and the total; then each analysis starts and ends, and
    ``k/N done, elapsed, ETA`` follows each."""
    spec = {n: (PLAIN, 0.0, 0.0) for n in ("a_fresh", "b_warm", "c_old", "d_new")}
    pkg, out = _package(tmp_path, spec), tmp_path / "out"
    out.mkdir()
    fresh = {"seconds": 100.0, "date": "2026-01-02T00:00:00Z", "machine": {"nproc": 2}}
    runs = {
        "a_fresh": {"mode": "full", "seconds": 5.0, "cell_cache": "warm", "fresh": fresh},
        "b_warm": {"mode": "full", "seconds": 30.0, "cell_cache": "warm"},
        "c_old": {"mode": "full", "seconds": 60.0},
    }
    (out / "runs.json").write_text(json.dumps(runs))
    assert _figures("--analyses", pkg, "--out", out) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("convkit figures: 4 analyses, full mode, 1 job, into ")
    plan = lines[1:6]
    assert re.fullmatch(r"  a_fresh +1 min 40 s  \(fresh clone, 2026-01-02, 2 cores\)", plan[0])
    assert re.fullmatch(r"  b_warm +30 s  \(warm cell cache: a fresh clone takes longer\)", plan[1])
    assert re.fullmatch(r"  c_old +1 min 00 s  \(cache state not recorded\)", plan[2])
    assert re.fullmatch(r"  d_new +\?  \(no recorded time\)", plan[3])
    assert plan[4] == "  total 3 min 10 s of recorded time and 1 analysis without one"
    body = lines[6:]
    for name in spec:
        start = body.index(next(x for x in body if x.startswith(f"[{name}] started")))
        assert body[start + 1].startswith(f"[{name}] done in ")
    assert "[a_fresh] started (recorded 1 min 40 s)" in body
    done = [x for x in body if re.match(r"\d/4 done, elapsed ", x)]
    assert [x[:3] for x in done] == ["1/4", "2/4", "3/4", "4/4"]
    assert re.search(r"ETA .+ \+ 1 without a recorded time$", done[0]), done[0]
    assert done[2].endswith("ETA ? (no recorded times)") and "ETA" not in done[3]


def test_parallel_run_says_when_each_starts_and_ends(tmp_path, capsys):
    spec = {n: (PLAIN, 0.2, 0.0) for n in ("p", "q", "r")}
    pkg, out = _package(tmp_path, spec), tmp_path / "out"
    assert _figures("--quick", "--analyses", pkg, "--out", out, "--jobs", "2") == 0
    text = capsys.readouterr().out
    assert ", quick mode, 2 jobs, into " in text.splitlines()[0]
    for name in spec:
        assert f"[{name}] started" in text and re.search(rf"\[{name}\] done in [\d.]+ s", text)
    assert [m[:3] for m in re.findall(r"^\d/3 done, elapsed .*$", text, re.M)] == [
        "1/3",
        "2/3",
        "3/3",
    ]


def test_checks_only_prints_no_plan(tmp_path, capsys):
    pkg, out = _package(tmp_path, {"p": (PLAIN, 0.0, 0.0)}), tmp_path / "out"
    assert _figures("--analyses", pkg, "--out", out) == 0
    capsys.readouterr()
    assert _figures("--checks-only", "--analyses", pkg, "--out", out) == 0
    text = capsys.readouterr().out
    assert "started" not in text and "done, elapsed" not in text


def test_eta_scales_recorded_times_by_this_run_speed_and_the_jobs():
    now = [0.0]
    est = {"a": (10.0, ""), "b": (20.0, ""), "c": (40.0, ""), "d": (None, "")}
    p = Progress(["c", "b", "a", "d"], est, jobs=2, clock=lambda: now[0])
    p.started("c")
    p.started("b")
    now[0] = 10.0
    p.finished("b", 10.0)  # recorded 20 s, took 10 s: this run is twice as fast
    assert p.speed() == pytest.approx(0.5)
    p.started("a")
    # c: 0.5 * 40 - 10 = 10 s left on one job; a: 5 s on the other; d unknown
    assert p.eta() == (pytest.approx(10.0), 1)
    assert p.status_line() == "1/4 done, elapsed 10 s, ETA 10 s + 1 without a recorded time"


def test_makespan_and_duration():
    assert makespan([30, 20, 10], 1) == 60
    assert makespan([30, 20, 10], 2) == 30  # 30 | 20 + 10
    assert makespan([10], 2, busy=[25.0]) == 25
    assert [duration(s) for s in (4.84, 59.4, 724, 3725)] == [
        "4.8 s",
        "59 s",
        "12 min 04 s",
        "1 h 02 min",
    ]


def test_timing_record_keeps_the_fresh_time_only_for_the_same_mode():
    first = {"mode": "full", **timing_record(None, "full", 100.0, "cold", 3.0, 2, "D", {"n": 1})}
    warm = timing_record(first, "full", 5.0, "warm", 0.0, 2, "E", {"n": 1})
    assert warm["fresh"] == first["fresh"] and warm["fresh"]["seconds"] == 100.0
    assert "fresh" not in timing_record(first, "quick", 5.0, "warm", 0.0, 2, "E", {"n": 1})
    partial = timing_record(None, "full", 50.0, "partial", 0.0, 1, "F", {"n": 1})
    assert "fresh" not in partial


def test_cache_watch_tells_reads_from_writes(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "old.csv").write_text("x\n1\n")
    (tmp_path / "elsewhere.csv").write_text("x\n1\n")
    with CacheWatch([cache]) as w:
        (tmp_path / "elsewhere.csv").read_text()
    assert w.state == "unused"
    with CacheWatch([cache]) as w:
        (cache / "old.csv").read_text()
    assert w.state == "warm"
    with CacheWatch([cache]) as w:
        (cache / "new.tmp").write_text("x\n2\n")
        (cache / "new.tmp").replace(cache / "new.csv")
        (cache / "new.csv").read_text()  # reading back what it wrote is not a hit
    assert w.state == "cold"
    with CacheWatch([cache]) as w:
        (cache / "old.csv").read_text()
        (cache / "other.csv").write_text("x\n3\n")
    assert w.state == "partial"
    (cache / "old.csv").read_text()  # no watch active: nothing recorded
    assert w.state == "partial" and len(w.read) == 1


def test_progress_bars_only_when_asked_under_pytest(monkeypatch):
    items = [1, 2, 3]
    assert not progress_enabled()
    assert progress_bar(items, "cells") is items  # no bar: the loop is untouched
    monkeypatch.setenv("CONVKIT_PROGRESS", "1")
    bar = progress_bar(items, "cells", unit="cell")
    assert bar is not items and list(bar) == items and bar.total == 3
    monkeypatch.setenv("CONVKIT_PROGRESS", "0")
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    assert not progress_enabled()
