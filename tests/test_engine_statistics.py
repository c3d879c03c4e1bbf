"""Monte Carlo against exact expectations, reproducibility and chunking.

Statistical assertions use fixed seeds and tolerances in standard errors (SE) of the
Monte Carlo means.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import convkit as ck
from convkit.backend import Backend, RandomStream

FULL = bool(os.environ.get("CONVKIT_FULL"))


def exact_scalar_sgd(h: float, sigma: float, gammas: np.ndarray, eta0: float):
    """Exact E[eta_t^2] and E[(avg_t eta)^2] for 1-D least squares, x ~ N(0, h), b = 1.

    Derived here: eta' = (1 - gamma x^2) eta + gamma sigma eps x with E x^2 = h, E x^4 = 3 h^2,
    so  E eta'^2 = (1 - 2 gamma h + 3 gamma^2 h^2) E eta^2 + gamma^2 sigma^2 h.
    For the average, S_t = sum_{s<=t} eta_s:  E[S_{t-1} eta_t] = (1 - gamma_t h) B_{t-1} with
    B_t = E[S_t eta_t] = (1 - gamma_t h) B_{t-1} + E eta_t^2, and
    E S_t^2 = E S_{t-1}^2 + 2 (1 - gamma_t h) B_{t-1} + E eta_t^2.
    """
    n = gammas.size
    m2 = eta0**2
    B = 0.0
    S2 = 0.0
    last, avg = np.empty(n), np.empty(n)
    for t in range(1, n + 1):
        g = gammas[t - 1]
        m2_new = (1 - 2 * g * h + 3 * g**2 * h**2) * m2 + g**2 * sigma**2 * h
        cross = (1 - g * h) * B
        S2 = S2 + 2 * cross + m2_new
        B = cross + m2_new
        m2 = m2_new
        last[t - 1] = m2
        avg[t - 1] = S2 / t**2
    return last, avg


Z_MAX = 4.5  # Bonferroni: 6 curves x 40 points, P(|z| > 4.5) = 6.8e-6 each, 0.2 % in all


@pytest.mark.parametrize(
    "step",
    [ck.Constant(0.2), ck.PolyDecay(C=0.5, alpha=0.6), ck.PolyDecay(C=1.0, alpha=1.0, k0=2.0)],
)
def test_monte_carlo_matches_exact_scalar_recursion(step):
    """1-D least squares, h = 1.3, sigma = 0.8, theta0 - theta* = -1: every record point of the
    Monte Carlo mean of (theta - theta*)^2 (last iterate and Polyak-Ruppert average) lies within
    Z_MAX = 4.5 SE of the exact value of the recursion derived above (40 record points per
    curve, 240 comparisons in the three cases: 4.5 SE is the Bonferroni bound for a family-wise
    0.2 %; 3 SE, the former margin, is exceeded somewhere with probability about 20 % per case:
    measured max |z| over 20 seeds up to 3.6). The 1/k schedule starts at k0 = 2
    (gamma_1 h = 0.43): from k0 = 0 its first steps (gamma_1 h = 1.3) are above the mean-square
    limit 2/3, which makes the squared error heavy-tailed, so that the sample SE is not a
    standard error there (measured over 6 seeds: z with mean -1.06 and sd 1.6, max |z| 7.9)."""
    h, sigma, n = 1.3, 0.8, 400
    prob = ck.LeastSquares([h], noise=sigma, theta_star=[1.0])
    res = ck.simulate(prob, ck.OSA(1, step, name="sgd"), steps=n, replicates=4000, seed=21)
    last, avg = exact_scalar_sgd(h, sigma, step.values(n), eta0=-1.0)
    for it, exact in (("last", last), ("avg", avg)):
        c = res.curve("sgd", "dist2", it)
        assert len(c) >= 30
        z = (c["mean"].to_numpy() - exact[c["step"].to_numpy() - 1]) / c["se"].to_numpy()
        assert np.all(np.abs(z) < Z_MAX), (it, np.abs(z).max())


def test_same_seed_identical_frame_and_different_seeds_differ():
    prob = ck.LeastSquares.gaussian(d=6, spectrum="1/i", seed=0)
    algo = ck.LocalSGD(4, ck.PolyDecay(0.4, 0.75), comm="rounds:5")
    a = ck.simulate(prob, algo, steps=100, replicates=30, seed=7)
    b = ck.simulate(prob, algo, steps=100, replicates=30, seed=7)
    c = ck.simulate(prob, algo, steps=100, replicates=30, seed=8)
    assert a.frame.equals(b.frame)
    assert not np.allclose(a.frame["mean"], c.frame["mean"])


def test_chunked_and_unchunked_runs_agree_statistically():
    """Chunks use their own streams, so values differ sample by sample; the means agree within
    4 SE of their difference (independent runs) at every record point of the final curve."""
    prob = ck.LeastSquares.gaussian(d=8, spectrum="1/i", seed=0)
    algo = ck.LocalSGD(4, ck.PolyDecay(0.4, 0.75), comm="every:4")
    whole = ck.simulate(prob, algo, steps=200, replicates=1200, seed=3)
    limit = 1200 * 8 * 4 * 8 * 4 / 5  # about five chunks
    chunked = ck.simulate(prob, algo, steps=200, replicates=1200, seed=3, memory_limit=limit)
    assert chunked.meta["chunks"] > 1 and whole.meta["chunks"] == 1
    a = whole.curve(metric="hnorm2")
    b = chunked.curve(metric="hnorm2")
    assert (b["count"] == 1200).all()
    z = (a["mean"] - b["mean"]) / np.sqrt(a["se"] ** 2 + b["se"] ** 2)
    assert np.all(np.abs(z) < 4), np.abs(z).max()


def test_paired_comparison_is_more_precise_than_independent_runs():
    """Common random numbers: the SE of the paired difference OSA - MBA is well below the SE
    of a difference of independent means (sqrt(se_a^2 + se_b^2))."""
    prob = ck.LeastSquares.gaussian(d=10, spectrum="1/i", seed=0)
    st = ck.PolyDecay(0.5, 0.75)
    res = ck.simulate(prob, [ck.MBA(8, st), ck.OSA(8, st)], gradients=8 * 500, replicates=400)
    cmp_ = res.compare("OSA(P=8, b=1)", "MBA(P=8, b=1)").iloc[-1]
    fin = res.final()
    independent_se = np.sqrt((fin["se"] ** 2).sum())
    assert cmp_["diff_se"] < 0.5 * independent_se
    # OSA's last-point error exceeds MBA's (multiplicative noise), significantly
    assert cmp_["diff"] > 3 * cmp_["diff_se"]


def test_divergence_is_reported_with_its_step_and_never_as_nan():
    """gamma = 3 on flat H with d = 5 is far above the mean-square stability limit
    (about 2 / (tr H + 2 lambda_max) = 0.29 for Gaussian design): every replicate diverges,
    the step is recorded, and the frame holds no NaN."""
    prob = ck.LeastSquares.gaussian(d=5, seed=0)
    algo = ck.OSA(2, ck.Constant(3.0), name="big")
    with pytest.warns(ck.DivergenceWarning):
        res = ck.simulate(prob, algo, steps=2000, replicates=20, seed=0)
    div = res.diverged
    assert len(div) == 20
    assert div["step"].between(1, 2000).all()
    assert res.frame["mean"].notna().all()
    assert np.isfinite(res.frame["mean"]).all()
    # after the last divergence there is nothing left to report
    last_div = div["step"].max()
    assert res.frame["step"].max() < last_div


def test_partial_divergence_excludes_only_the_diverged_replicates():
    """1-D, h = 1, gamma = 1.5: far above the mean-square limit 2/(3h) but below the almost-sure
    limit (E log|1 - gamma x^2| = -0.27 < 0 per step), so the log-error is a random walk with
    negative drift and only some replicates reach the divergence threshold in 3000 steps; the
    others keep being counted."""
    prob = ck.LeastSquares.gaussian(d=1, seed=0)
    algo = ck.OSA(1, ck.Constant(1.5), name="edge")
    with pytest.warns(ck.DivergenceWarning):
        res = ck.simulate(prob, algo, steps=3000, replicates=200, seed=1)
    n_div = len(res.diverged)
    assert 0 < n_div < 200
    final = res.curve("edge", "dist2", "last").iloc[-1]
    assert final["count"] == 200 - n_div


def test_float32_and_float64_independent_runs_agree_in_distribution():
    """The engine's own float32 stream draws different numbers from its float64 stream, so
    these are independent runs: the final means (every iterate and metric) agree within 4 SE of
    their difference, sqrt(se_32^2 + se_64^2), at the last step (flat spectrum, d = 10, 500 steps, 200
    replicates; 9 comparisons when written, P(max |z| > 4) < 6e-4)."""
    prob = ck.LeastSquares.gaussian(d=10, seed=0)
    algo = ck.LocalSGD(4, ck.PolyDecay(0.2, 0.75), comm="every:5")
    a = ck.simulate(prob, algo, steps=500, replicates=200, seed=2)
    b = ck.simulate(prob, algo, steps=500, replicates=200, seed=2, dtype="float32")
    last = [f[f["step"] == f["step"].max()] for f in (a.frame, b.frame)]
    m = last[0].merge(last[1], on=["iterate", "metric"], suffixes=("_64", "_32"))
    assert len(m) == len(last[0]) == len(last[1]) >= 3
    z = (m["mean_64"] - m["mean_32"]) / np.sqrt(m["se_64"] ** 2 + m["se_32"] ** 2)
    assert np.all(np.abs(z) < 4), np.abs(z).max()


class _CastStream(RandomStream):
    """float64 draws rounded to the stream's dtype: the float64 run's samples in float32."""

    def normal(self, shape):
        return self.generator.standard_normal(size=shape).astype(self.dtype)

    def uniform(self, shape):
        return self.generator.random(size=shape).astype(self.dtype)


class _SameSamples(Backend):
    """NumPy float32 arithmetic on the float64 run's random numbers (same seed, same keys)."""

    def stream(self, seed, *key):
        return _CastStream(Backend("numpy").stream(seed, *key).generator, np, np.float32)


def test_float32_follows_float64_on_the_same_samples():
    """Same seed and the same samples (the float64 draws rounded to float32 through a test
    backend): every per-replicate value (each record step, iterate and metric) of the float32
    run equals the float64 one to 1e-3 relative, the rounding-error tolerance derived in
    tests/test_float32.py (c d u ||theta|| / (gamma mu) with u = 6e-8; measured here 1.2e-5
    per replicate, 2e-7 on the means), and float32 arithmetic did happen (not bit-identical)."""
    prob = ck.LeastSquares.gaussian(d=10, seed=0)
    algo = ck.LocalSGD(4, ck.PolyDecay(0.2, 0.75), comm="every:5")
    a = ck.simulate(prob, algo, steps=500, replicates=200, seed=2)
    b = ck.simulate(
        prob,
        algo,
        steps=500,
        replicates=200,
        seed=2,
        backend=_SameSamples("numpy", "float32"),
        dtype="float32",
    )
    assert b.meta["dtype"] == "float32"
    va, vb = a.values[algo.label], b.values[algo.label]
    np.testing.assert_array_equal(va.steps, vb.steps)
    # NaN only where nothing is defined (the tail average before its start), in both runs
    np.testing.assert_array_equal(np.isnan(vb.values), np.isnan(va.values))
    assert np.isfinite(va.values).mean() > 0.5
    np.testing.assert_allclose(vb.values, va.values, rtol=1e-3, atol=0, equal_nan=True)
    np.testing.assert_allclose(b.frame["mean"], a.frame["mean"], rtol=1e-3, atol=0)
    assert np.nanmax(np.abs(vb.values - va.values) / np.abs(va.values)) > 1e-9


def test_save_and_load_round_trip(tmp_path):
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    st = ck.PolyDecay(0.4, 0.75)
    res = ck.simulate(prob, [ck.MBA(2, st), ck.OSA(2, st)], steps=50, replicates=10, seed=1)
    res.save(tmp_path / "r")
    back = ck.Result.load(tmp_path / "r")
    # loaded metadata equals the original's (tuples and NumPy scalars/arrays compared in
    # their JSON form: lists and Python numbers)
    assert back.meta == _plain(res.meta)
    assert back.meta["seed"] == 1 and back.meta["replicates"] == 10
    assert list(back.frame.columns) == list(res.frame.columns)
    for col in res.frame.columns:
        if res.frame[col].dtype.kind in "fiu":
            np.testing.assert_array_equal(back.frame[col].to_numpy(), res.frame[col].to_numpy())
        else:
            assert back.frame[col].astype(str).tolist() == res.frame[col].astype(str).tolist()
    assert back.values.keys() == res.values.keys()
    for name, cv in res.values.items():
        np.testing.assert_array_equal(back.values[name].values, cv.values)
        np.testing.assert_array_equal(back.values[name].steps, cv.steps)
    pd_cmp = back.compare("OSA(P=2, b=1)", "MBA(P=2, b=1)")
    np.testing.assert_allclose(
        pd_cmp["diff"], res.compare("OSA(P=2, b=1)", "MBA(P=2, b=1)")["diff"]
    )


def _plain(o):
    """JSON form of a metadata tree, written here (not the library's encoder): dicts with str
    keys, tuples as lists, NumPy scalars and arrays as Python numbers and lists."""
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(v) for v in o]
    if isinstance(o, np.ndarray):
        return _plain(o.tolist())
    if isinstance(o, np.generic):
        return o.item()
    return o
