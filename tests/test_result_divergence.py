"""What a Result reports after divergence (the rule of the ``Result`` docstring).

* a curve stops at the last record step with at least one surviving replicate; no row after;
* ``final()`` reports every configuration at its last scheduled record step, never at an
  earlier one (which mixed steps across configurations): the survivors' mean with
  ``diverged`` (replicates diverged by that step), and for a configuration whose every
  replicate diverged ``mean = se = inf``, ``count = 0``, ``all_diverged = True``;
* ``compare()`` only over the steps where at least one replicate survives in both;
* one surviving replicate: ``se = inf`` (no spread estimate), never NaN; no NaN anywhere in
  ``mean``, ``se``, ``diff``, ``diff_se``, ``ratio``, ``ratio_se``.
"""

import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.result import ConfigValues, Result, frame_from_values

R_ALL = 20
R_PART = 200


@pytest.fixture(scope="module")
def all_diverge() -> Result:
    """gamma = 3 on flat H, d = 5: far above the mean-square limit, every replicate of "big"
    diverges by step ~15; "ok" (gamma = 0.05) is stable.  Dense record points (every step up
    to 39), so that the counts of "big" drop one record step at a time."""
    prob = ck.LeastSquares.gaussian(d=5, seed=0)
    algos = [ck.OSA(2, ck.Constant(3.0), name="big"), ck.OSA(2, ck.Constant(0.05), name="ok")]
    with pytest.warns(ck.DivergenceWarning):
        return ck.simulate(prob, algos, steps=500, replicates=R_ALL, seed=0, record=range(1, 40))


@pytest.fixture(scope="module")
def partly_diverge() -> Result:
    """1-D, gamma = 1.5: only some replicates of "edge" diverge in 3000 steps; "calm" is
    stable (see test_engine_statistics.test_partial_divergence_...)."""
    prob = ck.LeastSquares.gaussian(d=1, seed=0)
    algos = [ck.OSA(1, ck.Constant(1.5), name="edge"), ck.OSA(1, ck.Constant(0.1), name="calm")]
    with pytest.warns(ck.DivergenceWarning):
        return ck.simulate(prob, algos, steps=3000, replicates=R_PART, seed=1)


def _survivors(cv: ConfigValues) -> np.ndarray:
    """(n_rec,) replicates not diverged at each record step (diverged at k: excluded at k)."""
    div = cv.diverged_at
    return ((div[None, :] == 0) | (cv.steps[:, None] < div[None, :])).sum(axis=1)


def _diverged_by(cv: ConfigValues, step: int) -> int:
    return int(np.count_nonzero((cv.diverged_at > 0) & (cv.diverged_at <= step)))


NUMERIC = ["mean", "se"]
COMPARE_NUMERIC = ["mean", "baseline_mean", "diff", "diff_se", "ratio", "ratio_se"]


# ------------------------------------------------------------------ every replicate diverges
def test_all_diverged_curve_stops_at_the_last_step_with_a_survivor(all_diverge):
    cv = all_diverge.values["big"]
    assert np.all(cv.diverged_at > 0)  # the premise: every replicate diverged
    alive = _survivors(cv)
    last_alive = int(cv.steps[alive > 0].max())
    for it in ("avg", "last"):
        for metric in ("hnorm2", "dist2", "excess_risk"):
            c = all_diverge.curve("big", metric, it)
            assert int(c["step"].iloc[-1]) == last_alive
            np.testing.assert_array_equal(c["count"], alive[alive > 0])
            # flagged: replicates diverged by each step, and count + diverged = R
            np.testing.assert_array_equal(c["diverged"], [_diverged_by(cv, s) for s in c["step"]])
            assert (c["count"] + c["diverged"] == R_ALL).all()
    f = all_diverge.frame
    assert f[f.config == "big"]["step"].max() == last_alive


def test_all_diverged_final_reports_the_last_step_as_infinite(all_diverge):
    cv = all_diverge.values["big"]
    assert np.all((cv.diverged_at > 0) & (cv.diverged_at < 500))  # the premise
    for metric, it in (("hnorm2", "avg"), ("dist2", "last"), ("excess_risk", "tail")):
        fin = all_diverge.final(metric, it).set_index("config")
        assert {"step", "last_step", "all_diverged", "diverged"} <= set(fin.columns)
        # one step for every configuration: no row taken from before the divergence
        assert (fin["step"] == 500).all() and (fin["last_step"] == 500).all()
        big = fin.loc["big"]
        assert np.isposinf(big["mean"]) and np.isposinf(big["se"]) and big["count"] == 0
        assert big["all_diverged"] is True or big["all_diverged"] == np.True_
        assert fin["all_diverged"].dtype == bool and big["diverged"] == R_ALL
        assert big["rounds"] == 1 and big["gradients"] == 500 * 2  # the axes at step 500
        assert not bool(fin.loc["ok", "all_diverged"]) and fin.loc["ok", "diverged"] == 0
        assert fin.loc["ok", "count"] == R_ALL and np.isfinite(fin.loc["ok", "mean"])
        assert fin[NUMERIC].notna().all().all()


def test_single_survivor_has_infinite_se_and_no_nan_anywhere(all_diverge):
    f = all_diverge.frame
    assert f[NUMERIC].notna().all().all()
    assert np.isposinf(f.loc[f["count"] == 1, "se"]).all()
    assert np.isfinite(f.loc[f["count"] > 1, "se"]).all()
    # one replicate in all: every row has a single survivor (guaranteed, whatever the stream)
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    algos = [ck.OSA(2, ck.Constant(0.05), name="s"), ck.MBA(2, ck.Constant(0.05), name="m")]
    one = ck.simulate(prob, algos, steps=30, replicates=1, seed=0)
    assert (one.frame["count"] == 1).all() and np.isposinf(one.frame["se"]).all()
    assert one.frame["mean"].notna().all()
    cmp_ = one.compare("s", "m")
    assert cmp_[COMPARE_NUMERIC].notna().all().all()
    assert np.isposinf(cmp_[["diff_se", "ratio_se"]]).all().all()
    fin = one.final()
    assert np.isposinf(fin["se"]).all() and not fin["all_diverged"].any()


@pytest.mark.parametrize("pair", [("ok", "big"), ("big", "ok")])
def test_compare_against_an_all_diverged_config_only_over_shared_steps(all_diverge, pair):
    a, b = pair
    cmp_ = all_diverge.compare(a, b)
    assert not cmp_.empty
    assert (cmp_["count"] >= 1).all()
    assert cmp_[COMPARE_NUMERIC].notna().all().all()
    big = all_diverge.curve("big")
    assert set(cmp_["step"]) == set(big["step"])  # "ok" keeps all; the shared steps are big's
    np.testing.assert_array_equal(cmp_["count"], big["count"])
    one = cmp_["count"] == 1
    assert np.isposinf(cmp_.loc[one, ["diff_se", "ratio_se"]]).all().all()
    assert np.isfinite(cmp_.loc[~one, ["diff_se", "ratio_se"]]).all().all()


# ------------------------------------------------------------------ some replicates diverge
def test_partial_divergence_final_is_complete_and_counts_the_diverged(partly_diverge):
    cv = partly_diverge.values["edge"]
    n_div = _diverged_by(cv, 3000)
    assert 0 < n_div < R_PART
    fin = partly_diverge.final().set_index("config")
    assert (fin["step"] == 3000).all() and (fin["last_step"] == 3000).all()
    assert not fin["all_diverged"].any()
    assert fin.loc["edge", "count"] == R_PART - n_div
    assert fin.loc["edge", "diverged"] == n_div and fin.loc["calm", "diverged"] == 0
    cmp_ = partly_diverge.compare("edge", "calm")
    assert cmp_["step"].iloc[-1] == 3000 and cmp_["count"].iloc[-1] == R_PART - n_div
    assert cmp_[COMPARE_NUMERIC].notna().all().all()
    c = partly_diverge.curve("edge", "dist2", "last")
    assert (c["count"] + c["diverged"] == R_PART).all()


# ------------------------------------------------------------------ hand-made values
def _hand_made() -> Result:
    """Three replicates, four record steps.  "a": replicate 0 diverges at step 2, 1 at step 3,
    2 at step 4 (counts 3, 2, 1, 0); "b": never diverges, zero at step 1 (zero baseline)."""
    steps = np.array([1, 2, 3, 4])
    axes = {k: steps.copy() for k in ("gradients", "rounds", "messages", "bits")}
    rng = np.random.default_rng(0)
    va = rng.uniform(1, 2, size=(4, 1, 1, 3))
    vb = rng.uniform(1, 2, size=(4, 1, 1, 3))
    vb[0] = 0.0
    values = {
        "a": ConfigValues(steps, axes, ["avg"], ["hnorm2"], va, np.array([2, 3, 4])),
        "b": ConfigValues(steps, axes, ["avg"], ["hnorm2"], vb, np.array([0, 0, 0])),
    }
    return Result(frame_from_values(values), {}, values)


def test_hand_made_rule():
    res = _hand_made()
    f = res.frame
    assert f[NUMERIC].notna().all().all()
    a = res.curve("a")
    assert a["step"].tolist() == [1, 2, 3] and a["count"].tolist() == [3, 2, 1]
    assert a["diverged"].tolist() == [0, 1, 2]
    assert np.isposinf(a["se"].iloc[-1]) and np.isfinite(a["se"].iloc[:-1]).all()
    fin = res.final().set_index("config")
    assert fin.loc["a", "step"] == 4 and bool(fin.loc["a", "all_diverged"])
    assert np.isposinf(fin.loc["a", "mean"]) and fin.loc["a", "diverged"] == 3
    assert fin.loc["b", "step"] == 4 and not bool(fin.loc["b", "all_diverged"])
    assert fin.loc["b", "mean"] == pytest.approx(res.curve("b")["mean"].iloc[-1], rel=0)
    for x, y in (("a", "b"), ("b", "a")):
        cmp_ = res.compare(x, y)
        assert cmp_["step"].tolist() == [1, 2, 3]
        assert cmp_[COMPARE_NUMERIC].notna().all().all()
        assert np.isposinf(cmp_["diff_se"].iloc[-1]) and np.isposinf(cmp_["ratio_se"].iloc[-1])
    # zero baseline mean at step 1: no finite ratio, reported as inf (never NaN)
    zero = res.compare("a", "b").iloc[0]
    assert np.isposinf(zero["ratio"]) and np.isposinf(zero["ratio_se"])


def test_replicates_with_no_common_survivor_give_no_compare_row():
    """Both report step 2, but not with the same replicate: nothing to pair, no row."""
    steps = np.array([1, 2])
    axes = {k: steps.copy() for k in ("gradients", "rounds", "messages", "bits")}
    v = np.ones((2, 1, 1, 2))
    values = {
        "a": ConfigValues(steps, axes, ["avg"], ["hnorm2"], v, np.array([2, 0])),
        "b": ConfigValues(steps, axes, ["avg"], ["hnorm2"], v, np.array([0, 2])),
    }
    res = Result(frame_from_values(values), {}, values)
    assert res.curve("a")["step"].tolist() == res.curve("b")["step"].tolist() == [1, 2]
    cmp_ = res.compare("a", "b")
    assert cmp_["step"].tolist() == [1]
    assert cmp_[COMPARE_NUMERIC].notna().all().all()


# ------------------------------------------------------------------ exact engine
def test_exact_engine_compare_has_zero_se_and_final_flags_divergence():
    """An exact result (one pseudo-replicate, se = 0): paired SEs are 0, not NaN; a
    mean-square divergent step size is reported as infinite at the last step in final()."""
    from convkit.exact import expected_error, stability_limit

    prob = ck.LeastSquares.gaussian(4, spectrum="1/i", noise=0.5)
    g = stability_limit(prob, batch=1)
    algos = [ck.OSA(1, ck.Constant(1.05 * g), name="up"), ck.OSA(1, ck.Constant(0.5 * g))]
    with pytest.warns(ck.DivergenceWarning):
        ex = expected_error(prob, algos, steps=20000)
    fin = ex.final().set_index("config")
    assert bool(fin.loc["up", "all_diverged"]) and (fin["step"] == 20000).all()
    assert np.isposinf(fin.loc["up", "mean"]) and fin.loc["up", "diverged"] == 1
    assert not fin.drop(index="up")["all_diverged"].any()
    cmp_ = ex.compare("up", algos[1].label)
    assert cmp_[COMPARE_NUMERIC].notna().all().all()
    assert (cmp_["diff_se"] == 0).all() and (cmp_["ratio_se"] == 0).all()
    assert cmp_["step"].max() < ex.meta["diverged"]["up"]


def test_no_warning_and_nothing_flagged_without_divergence():
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ck.simulate(prob, ck.OSA(2, ck.Constant(0.05), name="s"), steps=50, replicates=5)
    fin = res.final()
    assert not fin["all_diverged"].any() and (fin["diverged"] == 0).all()


# ------------------------------------------------------------------ a start at the edge of float64
@pytest.mark.parametrize("start", [1e160, 1e200])
def test_a_start_whose_error_overflows_is_refused_up_front(start):
    """||theta0 - theta*||^2 overflows float64: before, an empty frame and no divergence
    report; now a ValueError naming theta0, the size of the start and what is allowed."""
    prob = ck.LeastSquares.gaussian(d=5, seed=0)
    with pytest.raises(ValueError, match=r"theta0: .*overflows float64.*1e\+(160|200).*below"):
        ck.simulate(
            prob,
            ck.MBA(2, ck.Constant(0.05)),
            steps=5,
            replicates=2,
            seed=0,
            theta0=np.full(5, start),
        )


# the standard error of survivors near 1e150 overflows in Result's summary (se = inf), a
# separate matter from the divergence flag tested here
@pytest.mark.filterwarnings("ignore:overflow encountered in square:RuntimeWarning")
def test_a_distance_that_overflows_during_the_run_is_a_divergence():
    """A start at 1e150 (its squared error 5e300 is finite, but 1e12 times it is not): a step
    that blows up reaches an infinite distance, which is reported diverged (before, the
    threshold itself was inf, the replicates were never flagged and the frame was empty)."""
    prob = ck.LeastSquares.gaussian(d=5, seed=0)
    with pytest.warns(ck.DivergenceWarning):
        res = ck.simulate(
            prob,
            ck.OSA(2, ck.Constant(3.0), name="big"),
            steps=40,
            replicates=4,
            seed=0,
            theta0=np.full(5, 1e150),
        )
    assert res.meta["diverged"]["big"] == 4
    assert bool(res.final()["all_diverged"].iloc[0])
