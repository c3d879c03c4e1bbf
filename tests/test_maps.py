"""Regime maps (convkit.maps): points through the sweep runner (cache, damaged entry,
resumption after SIGKILL), the boundary located by bisection to its tolerance with the true
position inside each interval (and none where there is no boundary), validation before any
work, the function setting of the sweep runner, and the Woodworth map's independent
computation."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convkit import verdicts as V
from convkit.maps import Axis, MapClaim, MapPoint, parse_axis, run_map, threshold_verdict
from convkit.user_modules import import_user_module

ROOT = Path(__file__).resolve().parents[1]

#: synthetic claims with known boundaries, in a module the sweep runner imports by name
SYNTHETIC = textwrap.dedent(
    '''
    import math, os, time
    from convkit.maps import MapPoint, map_claim

    @map_claim(threshold=1.0, side="below", quantity="a / b")
    def ratio(a, b):
        """Boundary: a = b."""
        return MapPoint.decide(a / b, threshold=1.0)

    @map_claim(threshold=0.0, side="below", quantity="a - b (interval +- w)")
    def noisy(a, b, w=0.1):
        """q = a - b with the interval q -+ w: hi crosses 0 at a = b - w, lo at a = b + w."""
        q = a - b
        return MapPoint.decide(q, q - w, q + w, threshold=0.0)

    @map_claim(threshold=1.0)
    def flat(a, b):
        """No boundary: 0.5 everywhere."""
        return MapPoint.decide(0.5, threshold=1.0)

    @map_claim(threshold=1.0)
    def slow(a, b):
        """a / b, a tenth of a second per point (for the resumption test)."""
        time.sleep(0.1)
        return MapPoint.decide(a / b, threshold=1.0)

    CALLS = []

    @map_claim(threshold=1.0)
    def counted(a, b):
        CALLS.append((a, b))
        return MapPoint.decide(a / b, threshold=1.0)
    '''
)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    path = tmp_path_factory.mktemp("claims") / "map_synthetic_claims.py"
    path.write_text(SYNTHETIC)
    import_user_module(str(path), again=False)
    return sys.modules["map_synthetic_claims"], path


# ---------------------------------------------------------------------- points and verdicts
def test_threshold_verdict_reads_the_interval():
    assert threshold_verdict(0.5)[0] == V.HOLDS
    assert threshold_verdict(1.5)[0] == V.VIOLATED
    assert threshold_verdict(1.5, side="above")[0] == V.HOLDS
    assert threshold_verdict(0.9, 0.8, 1.1)[0] == V.CONSISTENT_UNRESOLVED
    assert threshold_verdict(0.5, 0.4, 0.6, max_rel_half_width=0.1)[0] == V.INCONCLUSIVE
    assert threshold_verdict(math.nan)[0] == V.INCONCLUSIVE
    with pytest.raises(ValueError, match="side"):
        threshold_verdict(0.5, side="left")


def test_map_point_round_trips_its_record():
    p = MapPoint(0.5, 0.4, 0.6, V.HOLDS, "ok", {"n": 3})
    assert MapPoint.from_record(p.as_record()) == p
    with pytest.raises(ValueError, match="verdict"):
        MapPoint(0.5, verdict="fine")
    with pytest.raises(ValueError, match="reuse"):
        MapPoint(0.5, extra={"lo": 1})


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "args, match",
    [
        (("a", 0.0, 1.0, 1), "n must be an integer >= 2"),
        (("a", 1.0, 1.0, 3), "lo must be < hi"),
        (("a", 0.0, 1.0, 3, True), "log axis needs lo > 0"),
        (("a b", 0.1, 1.0, 3), "identifier"),
        (("a", math.inf, 1.0, 3), "finite"),
    ],
)
def test_axis_validation(args, match):
    with pytest.raises(ValueError, match=match):
        Axis(*args)


def test_parse_axis():
    a = parse_axis("zeta2=0.5:200:9", log=True)
    assert (a.name, a.lo, a.hi, a.n, a.log) == ("zeta2", 0.5, 200.0, 9, True)
    assert a.values()[0] == 0.5 and a.values()[-1] == 200.0
    for bad in ("zeta2", "zeta2=1:2", "zeta2=a:2:3", "zeta2=1:2:x"):
        with pytest.raises(ValueError, match="NAME=lo:hi:n"):
            parse_axis(bad)


def test_claim_validation_before_any_work(synth, tmp_path):
    mod, _ = synth
    x, y = Axis("a", 0.5, 2.0, 3), Axis("b", 0.5, 2.0, 3)
    with pytest.raises(ValueError, match=r"\['c'\] are not parameters"):
        run_map(mod.ratio, Axis("c", 0.5, 2.0, 3), y, out=tmp_path)
    with pytest.raises(ValueError, match="different parameters"):
        run_map(mod.ratio, x, Axis("a", 1.0, 2.0, 3), out=tmp_path)
    with pytest.raises(ValueError, match="axes and fixed settings"):
        run_map(mod.noisy, x, y, settings={"a": 1.0}, out=tmp_path)
    with pytest.raises(ValueError, match="required parameters"):
        run_map(mod.noisy, x, Axis("w", 0.1, 0.2, 2), out=tmp_path)
    with pytest.raises(ValueError, match="refine"):
        run_map(mod.ratio, x, y, out=tmp_path, refine=1.5)
    with pytest.raises(ValueError, match="declares no default axes"):
        run_map(mod.ratio, out=tmp_path)
    assert not (tmp_path / "sweeps").exists()  # nothing ran

    def local(a, b):
        return MapPoint.decide(a / b)

    with pytest.raises(ValueError, match="top level of a module"):
        MapClaim(local)


# ---------------------------------------------------------------------- the sweep runner
def test_grid_through_the_cache_and_a_damaged_entry(synth, tmp_path):
    mod, _ = synth
    x, y = Axis("a", 0.5, 2.0, 3), Axis("b", 0.5, 2.0, 3)
    first = run_map(mod.counted, x, y, out=tmp_path, refine=None)
    assert first.summary["computed"] == 9 and first.summary["cached"] == 0
    mod.CALLS.clear()
    second = run_map(mod.counted, x, y, out=tmp_path, refine=None)
    assert second.summary["cached"] == 9 and second.summary["computed"] == 0
    assert mod.CALLS == []  # read from the cache, the function never called
    pd.testing.assert_frame_equal(first.points, second.points)
    # damage one payload: it is found invalid and recomputed, never used
    payload = next(p for p in (tmp_path / "cache").glob("??/*") if p.suffix != ".json")
    payload.write_bytes(payload.read_bytes()[:-7] + b"garbage")
    with pytest.warns(UserWarning, match="1 cache entries .* recomputed .*payload corrupted"):
        third = run_map(mod.counted, x, y, out=tmp_path, refine=None)
    assert third.summary["invalid"] == 1 and third.summary["computed"] == 1
    assert len(mod.CALLS) == 1
    pd.testing.assert_frame_equal(first.points, third.points)


def test_a_killed_map_resumes_from_the_cache(synth, tmp_path):
    _, path = synth
    script = textwrap.dedent(
        f"""
        import sys
        from convkit.user_modules import import_user_module
        import_user_module({str(path)!r})
        import map_synthetic_claims as m
        from convkit.maps import Axis, run_map
        r = run_map(m.slow, Axis("a", 0.5, 2.0, 5), Axis("b", 0.5, 2.0, 4), out={str(tmp_path)!r},
                    refine=None)
        print(r.summary["computed"], r.summary["cached"])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE)
    cache = tmp_path / "cache"
    deadline = time.time() + 60
    while time.time() < deadline and len(list(cache.glob("??/*.json"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list(cache.glob("??/*.json")))
    assert 3 <= done < 20
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()  # fmt: skip
    computed, cached = int(out[0]), int(out[1])
    assert cached >= done - 1 and computed + cached == 20  # a kill may lose the entry in flight


def test_the_function_setting_of_a_sweep(synth, tmp_path):
    import convkit.sweep as sw

    spec = {"seed": 0, "function": {"module": "map_synthetic_claims", "name": "ratio",
                                    "args": {"b": 2.0}},
            "grid": {"function.args.a": [1.0, 3.0]}}  # fmt: skip
    res = sw.run(spec, tmp_path / "s", jobs=1, progress=False)
    assert res.summary.computed == 2
    assert res.frame["verdict"].tolist() == [V.HOLDS, V.VIOLATED]
    assert res.frame["measured"].tolist() == [0.5, 1.5]
    # the version string is part of the key: a new version is recomputed
    keys = [c.key for c in sw.Sweep.from_dict(spec)]
    spec2 = {**spec, "function": {**spec["function"], "version": "2"}}
    assert keys != [c.key for c in sw.Sweep.from_dict(spec2)]
    for bad, match in (
        ({"module": "m", "name": "f", "argz": {}}, "unknown key 'argz'"),
        ({"module": "m", "name": "f.<locals>.g"}, "not a module-level name"),
        ({"module": "m", "name": "f", "args": {"x": float("nan")}}, "finite"),
        ({"name": "f"}, "non-empty string"),
    ):
        with pytest.raises(sw.SpecError, match=match):
            sw.Sweep.from_dict({"function": bad})
    with pytest.raises(sw.SpecError, match="only the table 'function'"):
        sw.Sweep.from_dict({"function": {"module": "m", "name": "f"}, "steps": 3})


# ---------------------------------------------------------------------- refinement
@pytest.mark.parametrize("log", [False, True])
def test_refinement_locates_a_known_boundary_to_its_tolerance(synth, tmp_path, log):
    mod, _ = synth
    tol = 0.01
    x, y = Axis("a", 0.5, 2.0, 4, log=log), Axis("b", 0.6, 1.9, 3, log=log)
    res = run_map(mod.ratio, x, y, out=tmp_path, refine=tol)
    cr = res.crossings
    assert len(cr) >= 3
    for r in cr.itertuples():
        axis = x if r.along == "a" else y
        assert r.interval_lo <= r.fixed <= r.interval_hi  # the truth: a = b
        width = float(axis.to_scale(r.interval_hi) - axis.to_scale(r.interval_lo))
        assert 0 < width <= tol * axis.span * (1 + 1e-9)
        assert {r.from_verdict, r.to_verdict} == {V.HOLDS, V.VIOLATED}


def test_refinement_reports_where_lo_and_hi_cross(synth, tmp_path):
    mod, _ = synth
    w, tol = 0.1, 0.005
    x, y = Axis("a", 0.0, 2.0, 5), Axis("b", 0.7, 1.3, 2)
    res = run_map(mod.noisy, x, y, settings={"w": w}, out=tmp_path, refine=tol)
    cr = res.crossings[res.crossings.along == "a"]
    for b, row in cr.groupby("fixed"):
        # hi = a - b + w crosses 0 at a = b - w (holds -> unresolved); lo at a = b + w
        his, los = row.hi_at.dropna(), row.lo_at.dropna()
        assert any(abs(v - (b - w)) <= tol * x.span for v in his)
        assert any(abs(v - (b + w)) <= tol * x.span for v in los)
        assert row.interval_lo.min() <= b - w and row.interval_hi.max() >= b + w


def test_no_boundary_no_crossing(synth, tmp_path):
    mod, _ = synth
    res = run_map(mod.flat, Axis("a", 0.5, 2.0, 4), Axis("b", 0.5, 2.0, 3), out=tmp_path)
    assert len(res.crossings) == 0 and set(res.points.verdict) == {V.HOLDS}
    assert res.summary["refine_steps"] == 0


def test_the_map_writes_its_files(synth, tmp_path):
    mod, _ = synth
    res = run_map(mod.ratio, Axis("a", 0.5, 2.0, 3), Axis("b", 0.5, 2.0, 3), out=tmp_path,
                  refine=0.05)  # fmt: skip
    paths = res.write(tmp_path / "out")
    names = sorted(p.name for p in paths)
    assert names == ["map_ratio.png", "map_ratio_crossings.csv", "map_ratio_crossings.json",
                     "map_ratio_points.csv"]  # fmt: skip
    assert all(p.stat().st_size > 0 for p in paths)


# ---------------------------------------------------------------------- the Woodworth map
def test_woodworth_independent_computation_agrees_with_the_located_interval():
    """One of the three points of the committed map recomputed here (Brent-tuned steps and
    Brent's root in zeta^2) lies inside the located interval; the committed check rows say so
    for all three."""
    from analyses import map_woodworth as mw

    data = pd.read_csv(ROOT / "figures" / "map_woodworth.csv")
    cr = data[(data.part == "crossing") & (data.along == "zeta2")].sort_values("fixed")
    r = cr.iloc[-1]
    got = mw.independent_boundary(float(r.fixed), float(r.segment_lo), float(r.segment_hi))
    assert r.interval_lo <= got["position"] <= r.interval_hi
    ind = data[data.part == "independent"]
    assert len(ind) == 3
    for i in ind.itertuples():
        c = cr[np.isclose(cr.fixed, i.delta)].iloc[0]
        assert c.interval_lo <= i.position <= c.interval_hi
    rows = [x for x in mw.checks(data) if x["result"] == "map_woodworth.independent_agreement"]
    assert [x["verdict"] for x in rows] == [V.HOLDS] * 3


@pytest.mark.parametrize(
    "kw",
    [
        {"jobs": 2},
        {"jobs": 2, "dask": True},  # an embedded Dask cluster: about 10 s to start
    ],
)
def test_parallel_executors_give_the_same_map(synth, tmp_path, kw):
    """joblib processes, and one embedded Dask cluster for the whole map (grid and every
    bisection step), give the serial map's numbers; the user's module reaches the workers
    through ``imports``."""
    mod, path = synth
    x, y = Axis("a", 0.5, 2.0, 3), Axis("b", 0.5, 2.0, 3)
    serial = run_map(mod.ratio, x, y, out=tmp_path / "s", refine=0.05)
    par = run_map(mod.ratio, x, y, out=tmp_path / "p", refine=0.05, imports=[str(path)], **kw)
    assert par.summary["failed"] == 0
    pd.testing.assert_frame_equal(serial.points, par.points)
    pd.testing.assert_frame_equal(serial.crossings, par.crossings)
