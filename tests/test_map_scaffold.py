"""The SCAFFOLD regime map (analyses/map_scaffold.py), quick form: the located boundary lies
on the ray derived from the errors' linearity, SCAFFOLD wins where the drift dominates with
additive noise and loses everywhere with the Gaussian design, each negative control makes its
target say violated, and the figures are written."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from convkit import verdicts as V

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
mod = importlib.import_module("analyses.map_scaffold")


@pytest.fixture(scope="module")
def data():
    return mod.run(quick=True)


def test_the_derived_ray_is_the_errors_linearity():
    """err = A zeta^2 + B sigma^2 from theta*: a third point is predicted to 1e-12."""
    ray = mod.derived_ray("additive", 100)
    s, loc = mod.errors(3.0, 0.5, "additive", 100)
    np.testing.assert_allclose(s, 3 * ray["A_scaffold"] + 0.5 * ray["B_scaffold"], rtol=1e-12)
    np.testing.assert_allclose(loc, 3 * ray["A_local"] + 0.5 * ray["B_local"], rtol=1e-12)
    assert ray["c"] > 0


def test_quick_map_verdicts(data):
    rows = {r["result"]: r for r in mod.checks(data)}
    ray = rows["map_scaffold.boundary_on_derived_ray"]
    assert ray["verdict"] == V.HOLDS, ray
    assert ray["details"]["crossings"] >= 4
    c = ray["details"]["c"]
    assert ray["details"]["ratio_lo"] <= c <= ray["details"]["ratio_hi"]
    assert 0.1 < c < 0.3
    assert rows["map_scaffold.scaffold_wins_when_drift_dominates"]["verdict"] == V.HOLDS
    assert rows["map_scaffold.noise_penalty"]["verdict"] == V.MEASURED
    gauss = rows["map_scaffold.gaussian_design_ratio"]
    assert gauss["details"]["ratio_min"] > 1 and gauss["details"]["crossings"] == 0
    # the points of the map are exact: lo = hi = measured
    pts = data[data.part == "point"]
    np.testing.assert_array_equal(pts["lo"], pts["measured"])
    np.testing.assert_allclose(pts["measured"], pts.err_scaffold / pts.err_local, rtol=1e-15)


def test_each_control_makes_its_target_violated(data):
    for ctl in mod.checks.controls(data):
        rows = {r["result"]: r for r in mod.checks.raw(ctl.data)}
        for target in ctl.targets:
            assert rows[target]["verdict"] == V.VIOLATED, (ctl.name, rows[target])


def test_crossings_bracket_the_ratio_one(data):
    """Each crossing's bisection interval brackets where the exact ratio equals 1: the ratio
    at the interval's ends lies on either side of 1 (recomputed here, not read from the
    map)."""
    cr = data[(data.part == "crossing") & (data.design == "additive")]
    n = int(data.n.iloc[0])
    for r in cr.head(3).itertuples():
        ends = []
        for v in (r.interval_lo, r.interval_hi):
            z, s = (v, r.fixed) if r.along == "zeta2" else (r.fixed, v)
            a, b = mod.errors(z, s, "additive", n)
            ends.append(a / b - 1)
        assert ends[0] * ends[1] < 0, (r.along, r.fixed, ends)


def test_plot_and_facts(data, tmp_path):
    paths = mod.plot(data, tmp_path)
    assert [p.name for p in paths] == ["map_scaffold_additive.png", "map_scaffold_gaussian.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
    f = mod.facts(data)
    assert math.isclose(
        float(f["c_additive"]), float(f"{mod.derived_ray('additive', 200)['c']:.3g}")
    )
    assert float(f["c_gaussian"]) < 0
