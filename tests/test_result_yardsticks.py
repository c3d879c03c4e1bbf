"""The yardsticks every statistical test leans on, checked against the per-replicate values.

Every "within k SE" test of the suite uses the frame's ``mean`` / ``se`` / ``count`` or
:meth:`Result.compare`; here each is recomputed directly from ``Result.values`` (the
``(records, iterates, metrics, R)`` arrays and the divergence steps) and must agree to near
machine precision.  An SE inflated (or deflated) by any factor fails here.

Direct formulas (replicate r counts at record step k when it had not diverged by k, i.e.
``diverged_at[r] == 0 or k < diverged_at[r]``, and its value is finite):

* ``mean = (1/n) sum x_r``, ``se = s / sqrt(n)`` with ``s^2 = sum (x_r - mean)^2 / (n - 1)``;
* paired (replicates counted in both a and b): ``diff = mean(a_r - b_r)``,
  ``diff_se = sd(a_r - b_r) / sqrt(n)`` (ddof 1);
* ratio ``r = mean(a) / mean(b)`` with the delta method for g(u, v) = u / v at the sample means:
  grad g = (1/v, -u/v^2), ``Var(r) ~ grad' S grad / n`` where S is the 2x2 sample covariance
  (ddof 1) of the pairs (a_r, b_r); ``ratio_se = sqrt(Var(r))``.

Which rows are infinite follows from the definitions (a single pair; a baseline whose values
sum to exactly 0), never from a rounded value: when a and b are identical (or nearly), Var(r)
is 0 (or nearly) and the quadratic form rounds to either side of 0 depending on the BLAS's
summation order (its AVX512 kernels gave -6e-36, a NaN square root), so ``ratio_se`` is checked
as a variance.
"""

import math

import numpy as np
import pandas as pd
import pytest

import convkit as ck
from convkit.result import ConfigValues, Result, frame_from_values

RTOL = 1e-12
EPS = np.finfo(np.float64).eps
ITERATES = ("avg", "tail", "last")
METRICS = ("hnorm2", "dist2", "excess_risk")


@pytest.fixture(scope="module")
def stable() -> Result:
    prob = ck.LeastSquares.gaussian(d=6, spectrum="1/i", noise=0.7, seed=0)
    st = ck.PolyDecay(0.4, 0.75)
    algos = [ck.MBA(4, st), ck.LocalSGD(4, st, comm="every:5"), ck.OSA(4, st)]
    return ck.simulate(prob, algos, steps=300, replicates=40, seed=2)


@pytest.fixture(scope="module")
def partly() -> Result:
    """1-D, gamma = 1.5: some replicates of "edge" diverge (see test_result_divergence)."""
    prob = ck.LeastSquares.gaussian(d=1, seed=0)
    algos = [ck.OSA(1, ck.Constant(1.5), name="edge"), ck.OSA(1, ck.Constant(0.1), name="calm")]
    with pytest.warns(ck.DivergenceWarning):
        res = ck.simulate(prob, algos, steps=3000, replicates=200, seed=1)
    assert 0 < len(res.diverged) < 200
    return res


# ------------------------------------------------------------------ direct computations
def _alive(cv: ConfigValues) -> np.ndarray:
    """(n_rec, R): replicate counted at each record step."""
    div = cv.diverged_at
    return (div[None, :] == 0) | (cv.steps[:, None] < div[None, :])


def _series(cv: ConfigValues, iterate: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    x = cv.values[:, cv.iterates.index(iterate), cv.metrics.index(metric), :]
    return x, _alive(cv) & np.isfinite(x)


def _direct_frame(res: Result) -> pd.DataFrame:
    rows = []
    for name, cv in res.values.items():
        for it in cv.iterates:
            for me in cv.metrics:
                x, ok = _series(cv, it, me)
                for k, step in enumerate(cv.steps):
                    v = x[k, ok[k]]
                    n = v.size
                    if n == 0:
                        continue
                    se = np.std(v, ddof=1) / np.sqrt(n) if n > 1 else np.inf
                    rows.append((name, int(step), it, me, v.mean(), se, n))
    return pd.DataFrame(
        rows, columns=["config", "step", "iterate", "metric", "mean", "se", "count"]
    )


def _direct_compare(res: Result, a: str, b: str, it: str, me: str) -> pd.DataFrame:
    """The paired comparison from the definitions, with ``ratio_var`` (Var(r), the square of
    ``ratio_se``; inf where ``ratio_se`` is), ``var_scale`` (the scale its rounding error is
    measured on, see :func:`_check_compare`) and ``infinite`` (``ratio_se`` is inf by
    definition: a single pair, or a baseline whose values sum to exactly 0)."""
    ca, cb = res.values[a], res.values[b]
    xa, oka = _series(ca, it, me)
    xb, okb = _series(cb, it, me)
    rows = []
    for ka, step in enumerate(ca.steps):
        hit = np.flatnonzero(cb.steps == step)
        if hit.size == 0:
            continue
        kb = int(hit[0])
        ok = oka[ka] & okb[kb]
        u, w = xa[ka, ok], xb[kb, ok]
        n = u.size
        if n == 0:
            continue
        mu, mw = u.mean(), w.mean()
        # a zero baseline mean decided on the exact sum (fsum), and never within rounding of 0
        zero = math.fsum(w) == 0
        assert zero or abs(math.fsum(w)) > 4 * n * EPS * np.abs(w).sum(), "ill-posed zero mean"
        ratio = math.copysign(np.inf, mu) if zero else mu / mw
        if n > 1:
            diff_se = np.std(u - w, ddof=1) / np.sqrt(n)
        else:
            diff_se = np.inf
        if n > 1 and not zero:
            S = np.cov(np.vstack([u, w]), ddof=1)
            grad = np.array([1 / mw, -mu / mw**2])
            ratio_var = grad @ S @ grad / n  # may round below 0 when Var(r) is (nearly) 0
            var_scale = 2 * (S[0, 0] + ratio**2 * S[1, 1]) / (n * mw**2)
        else:
            ratio_var, var_scale = np.inf, 0.0
        rows.append(
            (int(step), mu, mw, (u - w).mean(), diff_se, ratio, ratio_var, var_scale, n, zero)
        )
    cols = "step mean baseline_mean diff diff_se ratio ratio_var var_scale count zero_baseline"
    out = pd.DataFrame(rows, columns=cols.split())
    out["infinite"] = (out["count"] == 1) | out["zero_baseline"]
    return out


def _check_frame(res: Result) -> None:
    key = ["config", "step", "iterate", "metric"]
    direct = _direct_frame(res).sort_values(key).reset_index(drop=True)
    frame = res.frame.sort_values(key).reset_index(drop=True)
    assert len(frame) == len(direct)
    pd.testing.assert_frame_equal(frame[key], direct[key], check_dtype=False)
    np.testing.assert_array_equal(frame["count"], direct["count"])
    np.testing.assert_allclose(frame["mean"], direct["mean"], rtol=RTOL, atol=0)
    np.testing.assert_allclose(frame["se"], direct["se"], rtol=RTOL, atol=0)


def _check_compare(res: Result, a: str, b: str, it: str, me: str) -> None:
    got = res.compare(a, b, metric=me, iterate=it).reset_index(drop=True)
    want = _direct_compare(res, a, b, it, me)
    assert len(want) > 0
    np.testing.assert_array_equal(got["step"], want["step"])
    np.testing.assert_array_equal(got["count"], want["count"])
    for col in ("mean", "baseline_mean", "ratio"):
        np.testing.assert_allclose(got[col], want[col], rtol=RTOL, atol=0, err_msg=col)
    # which SEs are infinite: from the definitions (single pair, zero baseline), exactly
    single = (want["count"] == 1).to_numpy()
    np.testing.assert_array_equal(np.isposinf(got["diff_se"]), single, err_msg="diff_se")
    infinite = want["infinite"].to_numpy()
    np.testing.assert_array_equal(np.isposinf(got["ratio_se"]), infinite, err_msg="ratio_se")
    # a difference (and an SE) can be far below the means it comes from: near machine
    # precision relative to the scale of the means
    scale = np.maximum(np.abs(want["mean"]), np.abs(want["baseline_mean"])).to_numpy()
    for col in ("diff", "diff_se"):
        g, w = got[col].to_numpy()[~single], want[col].to_numpy()[~single]
        assert np.all(np.abs(g - w) <= RTOL * (np.abs(w) + scale[~single])), col
    # ratio_se as a variance V = ratio_se^2 (a square root would turn a rounding error of
    # V near 0 into one of its square root).  Either formula (the library's sd(a - R b)^2 /
    # (n mu_b^2), this delta method) computes V from n centred pairs, so its rounding error is
    # at most gamma_{n+5} sum_r (|da_r| + |R| |db_r|)^2 / (n (n - 1) mu_b^2) (Higham, Accuracy
    # and Stability of Numerical Algorithms, 2002, sec. 3.1: gamma_k = k u / (1 - k u)), and
    # (x + y)^2 <= 2 (x^2 + y^2) bounds that sum by var_scale = 2 (Var a + R^2 Var b) /
    # (n mu_b^2).  gamma_{n+5} <= 2.4e-14 for n <= 200: RTOL leaves a 40-fold margin.
    fin = ~infinite
    g2 = got["ratio_se"].to_numpy()[fin] ** 2
    w2 = want["ratio_var"].to_numpy()[fin]
    assert np.all(np.abs(g2 - w2) <= RTOL * want["var_scale"].to_numpy()[fin]), "ratio_se"


# ------------------------------------------------------------------ frame yardsticks
def test_frame_mean_se_count_match_the_replicates(stable):
    _check_frame(stable)
    assert (stable.frame["count"] == 40).all()


def test_frame_mean_se_count_match_the_replicates_after_partial_divergence(partly):
    _check_frame(partly)
    edge = partly.frame[partly.frame.config == "edge"]
    assert edge["count"].min() < 200  # the premise: counts drop after divergence


def test_se_is_sample_sd_over_sqrt_count_not_a_multiple(stable):
    """The plain formula on one curve, spelled out (guards against a factor in se)."""
    cv = stable.values["OSA(P=4, b=1)"]
    x = cv.values[-1, cv.iterates.index("last"), cv.metrics.index("dist2"), :]
    row = stable.final(metric="dist2", iterate="last").set_index("config").loc["OSA(P=4, b=1)"]
    s2 = ((x - x.mean()) ** 2).sum() / (x.size - 1)
    assert row["se"] == pytest.approx(np.sqrt(s2 / x.size), rel=RTOL)
    assert row["mean"] == pytest.approx(x.sum() / x.size, rel=RTOL)
    assert row["count"] == x.size


def test_final_rows_are_the_direct_values_at_each_last_step(stable, partly):
    for res in (stable, partly):
        direct = _direct_frame(res)
        for it in ITERATES:
            for me in METRICS:
                fin = res.final(metric=me, iterate=it)
                for _, row in fin.iterrows():
                    d = direct[
                        (direct.config == row["config"])
                        & (direct.iterate == it)
                        & (direct.metric == me)
                    ]
                    d = d[d.step == d.step.max()].iloc[0]
                    assert row["step"] == d["step"] and row["count"] == d["count"]
                    assert row["mean"] == pytest.approx(d["mean"], rel=RTOL)
                    assert row["se"] == pytest.approx(d["se"], rel=RTOL)


# ------------------------------------------------------------------ compare yardsticks
@pytest.mark.parametrize("it", ITERATES)
@pytest.mark.parametrize("me", METRICS)
def test_compare_matches_the_paired_replicates(stable, it, me):
    _check_compare(stable, "OSA(P=4, b=1)", "MBA(P=4, b=1)", it, me)
    _check_compare(stable, "LocalSGD(P=4, b=1, every(H=5))", "OSA(P=4, b=1)", it, me)


@pytest.mark.parametrize("it", ITERATES)
@pytest.mark.parametrize("me", ["hnorm2", "dist2"])
def test_compare_matches_the_paired_replicates_after_partial_divergence(partly, it, me):
    _check_compare(partly, "edge", "calm", it, me)
    _check_compare(partly, "calm", "edge", it, me)
    cmp_ = partly.compare("calm", "edge", metric=me, iterate=it)
    assert cmp_["count"].min() < 200  # pairs drop with the diverged replicates of "edge"


def test_ratio_se_with_a_negative_baseline_is_positive_and_exact():
    """SE of a ratio is sqrt(Var)/|mu_b|: positive whatever the sign of the baseline mean."""
    steps = np.array([1, 2])
    axes = {k: steps.copy() for k in ("gradients", "rounds", "messages", "bits")}
    rng = np.random.default_rng(3)
    va = rng.normal(1.0, 0.3, size=(2, 1, 1, 50))
    vb = -rng.normal(2.0, 0.3, size=(2, 1, 1, 50)) + 0.2 * va
    values = {
        "a": ConfigValues(steps, axes, ["avg"], ["m"], va, np.zeros(50, dtype=np.int64)),
        "b": ConfigValues(steps, axes, ["avg"], ["m"], vb, np.zeros(50, dtype=np.int64)),
    }
    res = Result(frame_from_values(values), {}, values)
    got = res.compare("a", "b", metric="m")
    assert (got["ratio_se"] > 0).all()
    _check_compare(res, "a", "b", "avg", "m")


def test_identical_paired_series_have_zero_standard_errors():
    """Two configurations with the same per-replicate values (as Local-SGD and one-shot
    averaging before their first communication): ``ratio = 1`` and ``diff = diff_se =
    ratio_se = 0`` exactly (sd(a - 1 b) = 0), not inf; the oracle agrees although its
    quadratic form rounds to either side of 0."""
    steps = np.arange(1, 41)
    axes = {k: steps.copy() for k in ("gradients", "rounds", "messages", "bits")}
    va = np.random.default_rng(5).lognormal(0.0, 0.5, size=(40, 1, 1, 40))
    values = {
        name: ConfigValues(steps, axes, ["avg"], ["m"], va.copy(), np.zeros(40, dtype=np.int64))
        for name in ("a", "b")
    }
    res = Result(frame_from_values(values), {}, values)
    got = res.compare("a", "b", metric="m")
    assert (got["ratio"] == 1).all() and (got["diff"] == 0).all()
    assert (got["diff_se"] == 0).all() and (got["ratio_se"] == 0).all()
    want = _direct_compare(res, "a", "b", "avg", "m")
    assert not want["infinite"].any()
    _check_compare(res, "a", "b", "avg", "m")


def test_paired_diff_se_is_not_the_independent_se(stable):
    """Common random numbers: diff_se uses the paired differences; with strongly correlated
    configurations it is well below sqrt(se_a^2 + se_b^2) (a test that would pass with the
    independent formula is not testing the pairing)."""
    a, b = "LocalSGD(P=4, b=1, every(H=5))", "MBA(P=4, b=1)"
    cmp_ = stable.compare(a, b).iloc[-1]
    fin = stable.final().set_index("config")
    assert cmp_["diff_se"] < 0.5 * np.hypot(fin.loc[a, "se"], fin.loc[b, "se"])


# ------------------------------------------------------------------ accessor errors
def test_unknown_label_metric_iterate_raise_value_errors_listing_what_exists(stable):
    labels = stable.configs
    with pytest.raises(ValueError, match=r"'OSA'.*MBA\(P=4, b=1\)"):
        stable.compare("OSA")
    with pytest.raises(ValueError, match=r"'nope'.*OSA\(P=4, b=1\)"):
        stable.compare(labels[0], "nope")
    with pytest.raises(ValueError, match=r"'loss'.*hnorm2"):
        stable.compare(labels[1], metric="loss")
    with pytest.raises(ValueError, match=r"'mean'.*tail"):
        stable.compare(labels[1], iterate="mean")
    with pytest.raises(ValueError, match=r"'OSA'.*MBA\(P=4, b=1\)"):
        stable.curve("OSA")
    with pytest.raises(ValueError, match=r"'loss'.*dist2"):
        stable.curve(labels[0], metric="loss")
    with pytest.raises(ValueError, match=r"'mean'.*last"):
        stable.curve(labels[0], iterate="mean")
    with pytest.raises(ValueError, match=r"'loss'.*excess_risk"):
        stable.final(metric="loss")
    with pytest.raises(ValueError, match=r"'mean'.*avg"):
        stable.final(iterate="mean")


def _with_state_metric() -> Result:
    """The "avg" iterate has hnorm2 only, "state" has consensus only (as decentralized ones)."""
    steps = np.array([1, 2])
    axes = {k: steps.copy() for k in ("gradients", "rounds", "messages", "bits")}
    v = np.full((2, 2, 2, 3), np.nan)
    v[:, 0, 0, :] = 1.0 + np.arange(3)
    v[:, 1, 1, :] = 2.0 + np.arange(3)
    cv = ConfigValues(steps, axes, ["avg", "state"], ["hnorm2", "consensus"], v, np.zeros(3))
    return Result(frame_from_values({"x": cv}), {}, {"x": cv})


def test_a_combination_without_rows_names_what_exists():
    res = _with_state_metric()
    assert len(res.curve("x", "consensus", "state")) == 2
    with pytest.raises(ValueError, match=r"consensus.*'avg'.*state"):
        res.curve("x", "consensus", "avg")
    with pytest.raises(ValueError, match=r"consensus.*'avg'.*state"):
        res.final(metric="consensus", iterate="avg")
    with pytest.raises(ValueError, match=r"consensus.*'avg'.*state"):
        res.compare("x", "x", metric="consensus", iterate="avg")


def test_compare_without_per_replicate_values_says_so(stable):
    bare = Result(stable.frame, stable.meta)
    with pytest.raises(ValueError, match="per-replicate values"):
        bare.compare(stable.configs[1])
