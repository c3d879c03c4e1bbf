"""What a reader decodes from a figure: colours, markers and scales, checked on the Axes the
plotting functions draw from the committed data in ``figures/`` (nothing is simulated).

Colour distances are CIE76 ``Delta E`` in CIELAB (:func:`convkit.plotting.color_distance`)
against :data:`convkit.plotting.MIN_LINE_DELTA_E`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from convkit import plotting as cp  # noqa: E402

FIGURES = Path(__file__).resolve().parents[1] / "figures"


@pytest.fixture
def drawn(monkeypatch) -> Iterator[Callable[..., list]]:
    """``drawn(fn, *args)`` calls a plotting function with ``plt.close`` disabled and returns
    the figures it made (closed at the end of the test)."""
    made: list = []

    def call(fn, *args):
        before = set(plt.get_fignums())
        monkeypatch.setattr(plt, "close", lambda *a, **k: None)
        try:
            fn(*args)
        finally:
            monkeypatch.undo()
        figs = [plt.figure(n) for n in sorted(set(plt.get_fignums()) - before)]
        made.extend(figs)
        return figs

    yield call
    for f in made:
        plt.close(f)


def _data_lines(ax) -> list:
    """The labelled data lines of ``ax`` (theory and reference lines, black or grey, left out)."""
    out = []
    for ln in ax.get_lines():
        rgb = np.asarray(mcolors.to_rgb(ln.get_color()))
        grey = np.ptp(rgb) < 1e-6
        if ln.get_label().startswith("_") or grey or not len(ln.get_xdata()):
            continue
        out.append(ln)
    return out


# --- the palette helpers ------------------------------------------------------------------


def test_cielab_of_reference_colours():
    """White, black and sRGB primaries at their tabulated CIELAB values (D65; within 0.05)."""
    np.testing.assert_allclose(cp.cielab("white"), [100, 0, 0], atol=0.05)
    np.testing.assert_allclose(cp.cielab("black"), [0, 0, 0], atol=0.05)
    np.testing.assert_allclose(cp.cielab("#ff0000"), [53.24, 80.09, 67.20], atol=0.05)
    np.testing.assert_allclose(cp.cielab("#0000ff"), [32.30, 79.19, -107.86], atol=0.05)
    assert cp.color_distance("white", "black") == pytest.approx(100.0, abs=0.05)


def test_shades_are_apart_for_every_palette_colour():
    for key in cp.ALGORITHM_COLORS:
        s = cp.shades(key, 4)
        worst = min(cp.color_distance(a, b) for a, b in itertools.combinations(s, 2))
        assert worst >= cp.MIN_LINE_DELTA_E, (key, worst)
        lightness = [cp.cielab(c)[0] for c in s]
        assert lightness == sorted(lightness, reverse=True), key  # light to dark
    with pytest.raises(ValueError, match="m"):
        cp.shades("even", 0)


# --- local_sgd_curves: one distinct colour per line ----------------------------------------


def test_local_sgd_curves_lines_have_distinct_colours(drawn, tmp_path):
    """The curves of MBA, every N and OSA are pairwise distinct in colour (they were four
    olive shades about 10 Delta E apart); the N lines keep the hue of the evenly spaced
    schedule and MBA, OSA their palette colours."""
    from analyses import local_sgd_curves as lc

    data = pd.read_csv(FIGURES / "local_sgd_curves.csv")
    (fig,) = drawn(lc.plot, data, tmp_path)
    for ax in fig.axes:
        lines = {ln.get_label(): ln.get_color() for ln in _data_lines(ax)}
        assert {"MBA", "OSA"} <= set(lines) and sum(k.startswith("N=") for k in lines) == 4
        for (a, ca), (b, cb) in itertools.combinations(lines.items(), 2):
            de = cp.color_distance(ca, cb)
            assert de >= cp.MIN_LINE_DELTA_E, f"{ax.get_title()!r}: {a} vs {b}, Delta E {de:.1f}"
        assert mcolors.same_color(lines["MBA"], cp.color("MBA"))
        assert mcolors.same_color(lines["OSA"], cp.color("OSA"))
        hue = cp.cielab(cp.color("even"))
        for k, c in lines.items():
            if k.startswith("N="):
                lab = cp.cielab(c)
                angle = np.degrees(np.arctan2(lab[2], lab[1]) - np.arctan2(hue[2], hue[1]))
                assert abs((angle + 180) % 360 - 180) < 10, (k, lab)


# --- local_sgd_large_steps_gap: P and T in different encodings ----------------------------


def test_large_steps_gap_encodes_p_and_t_apart(drawn, tmp_path):
    """Lines of a worker count P and of a budget T never share a colour (one map each, every
    P colour at least MIN_LINE_DELTA_E from every T colour) nor a marker; levels within one
    map are apart too."""
    from analyses import _local_sgd_plots as lp
    from analyses import local_sgd_large_steps as ls

    df = pd.read_csv(FIGURES / "local_sgd_large_steps.csv")
    (fig,) = drawn(lp.plot_osa_gap, df, tmp_path / "gap.png", ls.study_tables())
    p_lines, t_lines = {}, {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            line = handle.lines[0] if hasattr(handle, "lines") else handle
            if re.fullmatch(r"P=\d+", label):
                p_lines[label] = line
            elif re.fullmatch(r"T=[\d.e+]+", label):
                t_lines[label] = line
    assert len(p_lines) >= 4 and len(t_lines) >= 4
    for group in (p_lines, t_lines):
        for (a, la), (b, lb) in itertools.combinations(group.items(), 2):
            de = cp.color_distance(la.get_color(), lb.get_color())
            assert de >= cp.MIN_LINE_DELTA_E, f"{a} vs {b}: Delta E {de:.1f}"
    cross = min(
        (cp.color_distance(p.get_color(), t.get_color()), a, b)
        for a, p in p_lines.items()
        for b, t in t_lines.items()
    )
    assert cross[0] >= cp.MIN_LINE_DELTA_E, f"{cross[1]} and {cross[2]} share a colour: {cross}"
    p_markers = {ln.get_marker() for ln in p_lines.values()}
    t_markers = {ln.get_marker() for ln in t_lines.values()}
    assert len(p_markers) == len(t_markers) == 1 and p_markers != t_markers


# --- local_sgd_threshold_mc_T: one marker per meaning --------------------------------------


def test_threshold_mc_marks_each_status_with_its_own_marker(drawn, tmp_path):
    """In the N* figures a marker means one thing: the settings where one-shot averaging
    suffices (N* = 1, a measured answer) and those where N* is not identifiable (no answer)
    are drawn with different markers, each named by its own legend entry, and every drawn
    point of a status sits at a setting of that status in the data."""
    from analyses import local_sgd_threshold_mc as mc

    df = pd.read_csv(FIGURES / "local_sgd_threshold_mc.csv")
    figs = drawn(mc.plot, df, tmp_path)
    fig_t = figs[0]
    assert "against T" in fig_t._suptitle.get_text()
    th = df[(df.kind == "threshold") & df.sweep.str.contains("T")]
    legend = {
        t.get_text(): h
        for t, h in zip(fig_t.legends[0].texts, fig_t.legends[0].legend_handles, strict=True)
    }
    markers = {}
    for status in ("osa_suffices", "not_identifiable"):
        entries = [k for k in legend if mc_status_label(status) in k]
        assert len(entries) == 1, (status, list(legend))
        markers[status] = legend[entries[0]].get_marker()
    assert markers["osa_suffices"] != markers["not_identifiable"], markers
    assert len(set(markers.values()) | {"o", "+"}) == 4  # nor the interior or exact markers
    for ax in fig_t.axes:
        m = re.match(r"(\w+), alpha = ([\d.]+)", ax.get_title())
        problem, alpha = m.group(1), float(m.group(2))
        panel = th[(th.problem == problem) & (th.alpha == alpha)]
        for status, marker in markers.items():
            drawn_x = [
                x
                for ln in ax.get_lines()
                if ln.get_marker() == marker
                for x in np.asarray(ln.get_xdata(), float)
            ]
            expected = panel[panel.status == status]["T"].to_numpy(float)
            assert sorted(drawn_x) == sorted(expected), (problem, alpha, status)


def mc_status_label(status: str) -> str:
    """The words of the legend entry of a status (each status has exactly one entry)."""
    return {"osa_suffices": "OSA suffices", "not_identifiable": "not identifiable"}[status]


# --- step_size_limits: the additive row on the scale of the designs above ------------------


def test_step_size_limits_panels_share_each_columns_scale(drawn, tmp_path):
    """Every design of a spectrum is drawn on one step-size scale (the additive row had its own
    axis from 1.9 to 2.1, so that its +-5 % Monte Carlo grid brackets filled the panel and
    looked like the widest uncertainty of the figure), and the additive panels say that the
    derived limit, the sufficient bound and 2/L coincide there (two of the legend's lines are
    hidden under the third)."""
    from analyses import step_size_limits as ssl

    data = pd.read_csv(FIGURES / "step_size_limits.csv")
    figs = drawn(ssl.plot, data, tmp_path)
    fig = figs[0]
    grid = np.array(fig.axes[:9]).reshape(3, 3)
    for j in range(3):
        limits = {tuple(np.round(ax.get_ylim(), 12)) for ax in grid[:, j]}
        assert len(limits) == 1, f"column {j}: y-limits {limits}"
    for ax in grid[2]:
        assert ax.get_title().startswith("additive")
        lo, hi = ax.get_ylim()
        mc_bars = [c for c in ax.collections if c.get_label().startswith("Monte Carlo")]
        (bars,) = mc_bars
        seg = np.array([s[:, 1] for s in bars.get_segments()])
        share = np.log(seg[:, 1] / seg[:, 0]).max() / np.log(hi / lo)
        assert share < 0.25, f"{ax.get_title()}: a bracket spans {share:.0%} of the axis"
        texts = " ".join(t.get_text() for t in ax.texts)
        assert "coincide" in texts, ax.get_title()
