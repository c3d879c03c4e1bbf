"""``convkit.sweep.points.run_points``: a list of function calls as one sweep, reduced to
their frames in order (cached, verified, parallel, failures raised after the others ran)."""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest

from convkit.sweep.points import SweepPointError, run_points

MODULE = textwrap.dedent(
    """
    import os
    import pandas as pd

    def rows(a, k=2):
        if a < 0:
            raise ValueError(f"a = {a} must be >= 0")
        return pd.DataFrame({"a": [a] * k, "j": list(range(k)), "sq": [a * a + j for j in range(k)],
                             "threads": [os.environ.get("CONVKIT_THREADS", "")] * k})
    """
)


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    path = tmp_path_factory.mktemp("points") / "points_fixture_mod.py"
    path.write_text(MODULE)
    return str(path)


def _expected(points):
    return [
        pd.DataFrame(
            {
                "a": [p["a"]] * p.get("k", 2),
                "j": list(range(p.get("k", 2))),
                "sq": [p["a"] ** 2 + j for j in range(p.get("k", 2))],
            }
        )  # fmt: skip
        for p in points
    ]


def test_frames_in_order_cached_and_the_same_in_parallel(mod, tmp_path):
    points = [{"a": 3}, {"a": 1, "k": 3}, {"a": 2}]
    kw = dict(imports=[mod], cache=tmp_path / "cache")
    serial = run_points("points_fixture_mod", "rows", points, tmp_path / "s", **kw)
    assert serial.summary.computed == 3
    for got, want in zip(serial.frames, _expected(points), strict=True):
        pd.testing.assert_frame_equal(got.drop(columns="threads"), want, check_dtype=False)
    assert serial.frame()["a"].tolist() == [3, 3, 1, 1, 1, 2, 2]
    again = run_points("points_fixture_mod", "rows", points, tmp_path / "s2", **kw)
    assert again.summary.cached == 3 and again.summary.computed == 0
    par = run_points("points_fixture_mod", "rows", points, tmp_path / "p", jobs=2,
                     imports=[mod], cache=tmp_path / "cache-par")  # fmt: skip
    assert par.summary.computed == 3
    # worker processes run each call on one thread; the serial run leaves the setting alone
    assert set(par.frame()["threads"].astype(str)) == {"1"}
    pd.testing.assert_frame_equal(
        par.frame().drop(columns="threads"), serial.frame().drop(columns="threads")
    )
    # a new version is a new cache key: recomputed
    v2 = run_points("points_fixture_mod", "rows", points, tmp_path / "v2", version="2", **kw)
    assert v2.summary.computed == 3


def test_a_failed_call_raises_after_the_others_are_cached(mod, tmp_path):
    points = [{"a": 1}, {"a": -1}, {"a": 2}]
    kw = dict(imports=[mod], cache=tmp_path / "cache")
    with pytest.raises(SweepPointError, match=r"1 of 3 calls .*point 1 \{'a': -1\}.*a = -1"):
        run_points("points_fixture_mod", "rows", points, tmp_path / "s", **kw)
    kept = run_points("points_fixture_mod", "rows", points, tmp_path / "s", raise_on_failure=False,
                      **kw)  # fmt: skip
    assert kept.summary.cached == 2 and kept.frames[1] is None and 1 in kept.summary.failed
    assert kept.frame()["a"].tolist() == [1, 1, 2, 2]


def _live_loky_workers() -> int:
    from joblib.externals.loky import reusable_executor

    ex = getattr(reusable_executor, "_executor", None)
    procs = getattr(ex, "_processes", None) or {}
    return sum(p.is_alive() for p in list(procs.values()))


def test_parallel_points_leave_no_idle_workers(mod, tmp_path, monkeypatch):
    """A parallel sweep shuts its worker processes down when it ends: loky keeps idle ones
    for 300 s, and a process that ran a sweep in a pool worker of its own (``convkit figures
    --jobs N``) waited for them before it could end (negative control: without the release,
    the workers are still there)."""
    import convkit.sweep.executors as ex

    points = [{"a": float(a)} for a in range(4)]
    kw = dict(imports=[mod], jobs=2)
    run_points("points_fixture_mod", "rows", points, tmp_path / "a", **kw)
    assert _live_loky_workers() == 0
    release = ex._release_workers
    monkeypatch.setattr(ex, "_release_workers", lambda: None)
    run_points("points_fixture_mod", "rows", points, tmp_path / "b", **kw)
    assert _live_loky_workers() > 0
    release()
    assert _live_loky_workers() == 0
