"""The DeepSqueeze / CHOCO-SGD regime map (analyses/map_deepsqueeze.py), quick form (2 x 2):
the circulant graphs' spectral gaps, each point's ratio from its own bits, the verdicts and
their negative control, the crossings on grid segments and the figure."""

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
mod = importlib.import_module("analyses.map_deepsqueeze")


@pytest.fixture(scope="module")
def data():
    return mod.run(quick=True)


def test_circulant_gaps():
    """Uniform weights 1/(2m+1) on C_16(1..m): gap 1 - (1 + 2 sum_j cos(2 pi j / 16)) / (2m+1);
    m = 8 is the complete graph (gap 1)."""
    for m in (1, 2, 4):
        want = 1 - (1 + 2 * sum(math.cos(2 * math.pi * j / 16) for j in range(1, m + 1))) / (
            2 * m + 1
        )
        assert math.isclose(mod.circulant(m).spectral_gap, want, rel_tol=1e-12)
    assert math.isclose(mod.circulant(8).spectral_gap, 1.0, rel_tol=1e-12)
    with pytest.raises(ValueError, match="neighbours"):
        mod.circulant(9)


def test_points_are_their_bits_ratios(data):
    pts = data[data.part == "point"]
    assert len(pts) == 4 and set(pts.stage) == {"grid"}
    ratio = pts.bits_ds / pts.bits_choco
    np.testing.assert_allclose(pts.measured, ratio, rtol=1e-12)
    assert np.all((pts.lo <= pts.measured) & (pts.measured <= pts.hi))
    # the gap of each point's graph, and k = d k/d
    np.testing.assert_allclose(pts.k, pts.kd * mod.D)
    assert set(np.round(pts.gap, 4)) == {0.0507, 1.0}


def test_verdicts_and_control(data):
    rows = {r["result"]: r for r in mod.checks.raw(data)}
    labels = data[data.part == "point"].label
    some = rows["map_deepsqueeze.fewer_bits_somewhere"]["verdict"]
    assert (some == V.HOLDS) == (labels == "holds").any()
    every = rows["map_deepsqueeze.fewer_bits_everywhere"]["verdict"]
    assert (every == V.VIOLATED) == (labels == "violated").any()
    for ctl in mod.checks.controls(data):
        crow = {r["result"]: r for r in mod.checks.raw(ctl.data)}
        for t in ctl.targets:
            assert crow[t]["verdict"] == V.VIOLATED, (ctl.name, t)


def test_crossings_are_grid_segments(data):
    cr = data[data.part == "crossing"]
    pts = data[data.part == "point"]
    for r in cr.itertuples():
        axis = (pts.kd if r.along == "kd" else pts.neighbours).to_numpy()
        for end in (r.interval_lo, r.interval_hi):  # an end is a grid value (to rounding)
            assert np.isclose(axis, end, rtol=1e-12).any(), (r.along, end)
    assert len(cr) >= 1


def test_plot_and_facts(data, tmp_path):
    (path,) = mod.plot(data, tmp_path)
    assert path.name == "map_deepsqueeze.png" and path.stat().st_size > 10_000
    f = mod.facts(data)
    assert f["grid"] == "2x2" and int(f["n_holds"]) + int(f["n_violated"]) <= 4
