"""Compressors: shapes, non-mutation, exact identities, and their constants checked on random
inputs (property-based, hypothesis).

Statistical checks use fixed seeds (hypothesis derandomized, streams seeded from the example)
and N independent draws computed in one vectorized call; a mean is accepted within
Z = 4 standard errors of its exact expectation (one aggregate statistic per example).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convkit.backend import Backend
from convkit.checks import mean_se
from convkit.compression import (
    QSGD,
    Identity,
    RandK,
    ScaledSign,
    StochasticRounding,
    TopK,
    get_compressor,
)

EXACT = 1e-12
Z = 4.0  # standard errors allowed for statistical checks
N_DRAWS = 2000

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


@st.composite
def blocks(draw, max_d=40):
    """A random (R, P, d) block: shapes, scale 10^[-3, 3], optionally ties and zeros."""
    R = draw(st.integers(1, 3))
    P = draw(st.integers(1, 4))
    d = draw(st.integers(1, max_d))
    scale = 10.0 ** draw(st.integers(-3, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(["normal", "ties", "sparse", "shifted"]))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((R, P, d))
    if kind == "ties":
        x = np.round(2 * x)  # many equal magnitudes and exact zeros
    elif kind == "sparse":
        x = x * (rng.random((R, P, d)) < 0.3)
    elif kind == "shifted":
        x = x + 5.0  # all positive, narrow range relative to the norm
    return scale * x, seed


def _stream(seed, *key):
    return Backend().stream(seed, *key)


def _sq(a):
    return np.sum(a * a, axis=-1)


def _replicate(x, n=N_DRAWS):
    """Read-only broadcast of x to (n, ...) (also checks that compressors never write)."""
    return np.broadcast_to(x, (n, *x.shape))


ALL = [
    Identity(),
    TopK(k=1),
    TopK(fraction=0.3),
    RandK(k=1),
    RandK(fraction=0.25, scaled=True),
    QSGD(s=1),
    QSGD(s=4, rescaled=True),
    ScaledSign(),
    StochasticRounding(bits=1),
    StochasticRounding(bits=4),
]


# ------------------------------------------------------------------------ contract


@SETTINGS
@given(blocks(), st.sampled_from([np.float64, np.float32]))
def test_shape_dtype_and_no_mutation(block, dtype):
    x, seed = block
    x = x.astype(dtype)
    x0 = x.copy()
    for comp in ALL:
        y = comp.compress(x, _stream(seed, comp.name))
        assert y.shape == x.shape and y.dtype == x.dtype, comp.name
        assert np.all(np.isfinite(y)), comp.name
        assert y is not x and not np.shares_memory(y, x), comp.name
        np.testing.assert_array_equal(x, x0, err_msg=comp.name)
    ro = x.copy()
    ro.setflags(write=False)  # a read-only input must be accepted (nothing is written)
    for comp in ALL:
        comp.compress(ro, _stream(seed, "ro", comp.name))


def test_zero_rows_and_constant_rows():
    x = np.zeros((2, 3, 7))
    x[1, 2] = 1.5  # constant row
    for comp in ALL:
        y = comp.compress(x, _stream(0))
        np.testing.assert_array_equal(y[0], 0.0, err_msg=comp.name)
    np.testing.assert_array_equal(StochasticRounding(2).compress(x, _stream(1))[1, 2], 1.5)


def test_reproducible_with_same_stream_seed():
    x = np.random.default_rng(0).standard_normal((3, 4, 20))
    for comp in ALL:
        a = comp.compress(x, _stream(11, "k"))
        b = comp.compress(x, _stream(11, "k"))
        np.testing.assert_array_equal(a, b)
        if comp.random and comp.name != "identity":
            c = comp.compress(x, _stream(12, "k"))
            assert not np.array_equal(a, c), comp.name


def test_identity_and_full_k_are_exact():
    x = np.random.default_rng(1).standard_normal((2, 2, 9))
    for comp in (Identity(), TopK(k=9), RandK(k=9), RandK(k=9, scaled=True)):
        np.testing.assert_array_equal(comp.compress(x, _stream(0)), x)


# ------------------------------------------------------------------------ deterministic


@SETTINGS
@given(blocks(), st.floats(0.01, 1.0))
def test_topk_contraction_and_selection(block, frac):
    x, _ = block
    d = x.shape[-1]
    comp = TopK(fraction=frac)
    k = comp.k_for(d)
    y = comp.compress(x)
    err = _sq(y - x)
    assert np.all(err <= (1 - comp.delta(d)) * _sq(x) * (1 + EXACT) + 1e-300)
    assert comp.delta(d) == k / d
    kept = y != 0
    assert np.all(kept.sum(-1) <= k)
    np.testing.assert_array_equal(y[kept], x[kept])
    if k < d:  # every kept |x_j| >= every dropped |x_j|
        absx = np.abs(x)
        kept_min = np.where(kept, absx, np.inf).min(-1)
        dropped = np.where(kept, -np.inf, absx)
        # zero entries may be "kept" as zeros: compare with the k-th largest magnitude
        kth = -np.sort(-absx, axis=-1)[..., k - 1]
        assert np.all(dropped.max(-1) <= kth)
        assert np.all(np.where(kept.any(-1), kept_min >= kth, True))


def test_keep_largest_tie_fallback_keeps_exactly_k():
    """Ties at the threshold (all scores equal, or zeros for rand-k keys) keep exactly k."""
    from convkit.backend import namespace_of
    from convkit.compression import _keep_largest

    x = np.arange(1.0, 25.0).reshape(2, 3, 4)
    score = np.ones_like(x)
    score[0, 0] = [0.5, 0.5, 0.2, 0.1]  # tie at the 2nd largest
    score[1, 2] = [0.0, 0.0, 0.0, 0.0]  # all zero, must still keep k for rand-k
    for k in (1, 2, 3):
        out = _keep_largest(namespace_of(x), x, score, k, skip_zeros=False)
        np.testing.assert_array_equal(np.count_nonzero(out, axis=-1), k)
        np.testing.assert_array_equal(out[out != 0], x[out != 0])
    out = _keep_largest(namespace_of(x), x, score, 2, skip_zeros=False)
    np.testing.assert_array_equal(out[0, 0], [1.0, 2.0, 0.0, 0.0])


@SETTINGS
@given(blocks())
def test_scaled_sign_error_formula_exact(block):
    x, _ = block
    d = x.shape[-1]
    y = ScaledSign().compress(x)
    lhs = _sq(y - x)
    rhs = _sq(x) - np.sum(np.abs(x), -1) ** 2 / d
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=EXACT * np.max(_sq(x)) + 1e-300)
    assert np.all(lhs <= (1 - ScaledSign().delta(d)) * _sq(x) * (1 + EXACT) + 1e-300)
    # one magnitude per row: ||x||_1 / d
    np.testing.assert_allclose(np.abs(y), np.sum(np.abs(x), -1, keepdims=True) / d + 0 * y)


# ------------------------------------------------------------------------ statistical


def _unbiased_z(comp, x, seed):
    """z-scores of two mean projections of C(x) - x: onto x/||x|| and a random direction."""
    Y = comp.compress(_replicate(x), _stream(seed, comp.name, "bias"))
    E = Y - x  # (N, R, P, d)
    norms = np.sqrt(_sq(x))[..., None]
    safe = np.where(norms > 0, norms, 1.0)
    v = np.random.default_rng(seed).standard_normal(x.shape)
    zs = []
    for direction in (x / safe, v):
        s = np.sum(E * direction / safe, axis=(1, 2, 3))  # one scalar per draw
        m, se = mean_se(s)
        # floor on the SE: deterministic outputs (e.g. d = 1) still carry rounding error
        zs.append(m / max(se, EXACT))
    return zs


UNBIASED = [RandK(k=1, scaled=True), RandK(fraction=0.4, scaled=True), QSGD(s=1), QSGD(s=3)]
UNBIASED += [StochasticRounding(bits=1), StochasticRounding(bits=3)]


@SETTINGS
@given(blocks(max_d=24))
def test_unbiased_compressors_are_unbiased(block):
    x, seed = block
    for comp in UNBIASED:
        assert comp.unbiased
        z = _unbiased_z(comp, x, seed)
        assert max(abs(zz) for zz in z) <= Z, (comp.name, z)


def test_bias_statistic_detects_biased_compressors():
    """Power check: the statistic above flags the rescaled (biased) QSGD and rand-k."""
    x = np.random.default_rng(3).standard_normal((2, 3, 16))
    for comp in (QSGD(s=3, rescaled=True), RandK(k=4), TopK(k=4)):
        assert not comp.unbiased
        z = _unbiased_z(comp, x, 3)
        assert abs(z[0]) > 10 * Z, (comp.name, z)


@pytest.mark.parametrize("d,k", [(5, 1), (20, 3), (50, 25)])
def test_randk_inclusion_is_uniform(d, k):
    """Each coordinate is kept with probability k/d (and exactly k per row). Family-wise
    test over the d coordinates: Bonferroni threshold for a 1e-4 two-sided level."""
    from scipy.stats import norm

    x = np.ones((4, d))
    kept = RandK(k=k).compress(_replicate(x, 5000), _stream(d, k, "incl")) != 0
    np.testing.assert_array_equal(kept.sum(-1), k)
    freq = kept.reshape(-1, d).mean(0)
    n = kept.reshape(-1, d).shape[0]
    p = k / d
    z = (freq - p) / math.sqrt(p * (1 - p) / n)
    assert np.max(np.abs(z)) <= norm.isf(1e-4 / (2 * d)), z


def _normalized_error(comp, x, seed):
    """Per draw: sum over rows of ||C(x) - x||^2 / ||x||^2 (rows with x = 0 skipped)."""
    Y = comp.compress(_replicate(x), _stream(seed, comp.name, "err"))
    nx2 = _sq(x)
    ok = nx2 > 0
    return np.sum(np.where(ok, _sq(Y - x) / np.where(ok, nx2, 1.0), 0.0), axis=(1, 2)), ok


def _assert_mean(samples, expected, what):
    m, se = mean_se(samples)
    assert abs(m - expected) <= Z * se + EXACT * max(1.0, abs(expected)), (what, m, expected, se)


@SETTINGS
@given(blocks(), st.floats(0.01, 1.0))
def test_randk_error_in_expectation(block, frac):
    x, seed = block
    d = x.shape[-1]
    plain, scaled = RandK(fraction=frac), RandK(fraction=frac, scaled=True)
    k = plain.k_for(d)
    s, ok = _normalized_error(plain, x, seed)
    _assert_mean(s, (1 - k / d) * ok.sum(), "rand-k: E||C(x)-x||^2 = (1 - k/d)||x||^2")
    assert plain.delta(d) == k / d
    s, ok = _normalized_error(scaled, x, seed)
    _assert_mean(s, scaled.omega(d) * ok.sum(), "scaled rand-k: E||C(x)-x||^2 = (d/k-1)||x||^2")
    assert scaled.omega(d) == pytest.approx(d / k - 1)


@SETTINGS
@given(blocks(), st.integers(1, 8))
def test_qsgd_variance_and_contraction(block, s):
    x, seed = block
    d = x.shape[-1]
    q, qr = QSGD(s=s), QSGD(s=s, rescaled=True)
    nx2 = _sq(x)
    ok = nx2 > 0
    var = q.exact_variance(x)  # (R, P)
    omega = q.omega(d)
    assert omega == min(d / s**2, math.sqrt(d) / s)
    assert np.all(var <= omega * nx2 * (1 + EXACT) + 1e-300)  # Alistarh et al., Lemma 3.1
    ratio = np.where(ok, var / np.where(ok, nx2, 1.0), 0.0)
    samples, _ = _normalized_error(q, x, seed)
    _assert_mean(samples, ratio.sum(), "QSGD exact variance")
    # rescaled: E||C/tau - x||^2 = (1 - 1/tau)^2 ||x||^2 + Var/tau^2 <= (1 - delta)||x||^2
    tau = 1 + omega
    exact_r = (1 - 1 / tau) ** 2 + ratio / tau**2
    assert qr.delta(d) == pytest.approx(1 / tau)
    assert np.all(np.where(ok, exact_r <= (1 - qr.delta(d)) * (1 + EXACT), True))
    samples, _ = _normalized_error(qr, x, seed)
    _assert_mean(samples, np.where(ok, exact_r, 0.0).sum(), "rescaled QSGD error")
    # outputs on the grid: |C(x)_j| s / ||x|| in {0, ..., s}
    y = q.compress(x, _stream(seed, "grid"))
    norms = np.sqrt(nx2)[..., None]
    lv = np.abs(y) * s / np.where(norms > 0, norms, 1.0)
    np.testing.assert_allclose(lv, np.round(lv), atol=1e-9)
    assert np.all((np.round(lv) >= 0) & (np.round(lv) <= s))
    assert np.all((np.sign(y) == np.sign(x)) | (y == 0))


@SETTINGS
@given(blocks(), st.integers(1, 6))
def test_stochastic_rounding_grid_and_variance(block, bits):
    x, seed = block
    d = x.shape[-1]
    c = StochasticRounding(bits=bits)
    y = c.compress(x, _stream(seed, "grid"))
    lo, hi = x.min(-1, keepdims=True), x.max(-1, keepdims=True)
    step = c.step(x)[..., None]
    assert np.all((y >= lo - 1e-12 * np.abs(lo)) & (y <= hi + 1e-12 * np.abs(hi)))
    m = np.where(step > 0, (y - lo) / np.where(step > 0, step, 1.0), 0.0)
    np.testing.assert_allclose(m, np.round(m), atol=1e-6)
    assert np.all(np.abs(y - x) <= step * (1 + 1e-9) + 1e-12 * np.abs(x))  # neighbouring points
    # the row's min and max are sent exactly
    np.testing.assert_array_equal(np.where(x == lo, y, lo), lo + 0 * y)
    np.testing.assert_array_equal(np.where(x == hi, y, hi), hi + 0 * y)
    var = c.exact_variance(x)
    assert np.all(var <= max(d - 2, 0) * step[..., 0] ** 2 / 4 * (1 + EXACT) + 1e-300)
    assert np.all(var <= c.omega(d) * _sq(x) * (1 + EXACT) + 1e-300)
    nx2 = _sq(x)
    ok = nx2 > 0
    ratio = np.where(ok, var / np.where(ok, nx2, 1.0), 0.0)
    samples, _ = _normalized_error(c, x, seed)
    _assert_mean(samples, ratio.sum(), "stochastic rounding exact variance")


def test_unbiased_delta_is_one_minus_omega_when_below_one():
    assert StochasticRounding(8).delta(100) == pytest.approx(1 - StochasticRounding(8).omega(100))
    assert QSGD(s=1).delta(100) is None  # omega = 10 >= 1
    assert QSGD(s=20).delta(100) == pytest.approx(1 - 0.25)  # omega = min(100/400, 10/20)
    assert RandK(k=10, scaled=True).delta(100) is None
    assert TopK(k=10).omega(100) is None and not TopK(k=10).unbiased


# ------------------------------------------------------------------------ bits


def test_bits_per_message():
    d = 100
    assert Identity().bits_per_message(d) == 3200
    assert TopK(k=10).bits_per_message(d) == 10 * (32 + 7)
    assert TopK(fraction=0.1).bits_per_message(d, float_bits=64) == 10 * (64 + 7)
    assert RandK(k=10, scaled=True).bits_per_message(d) == 10 * 39
    assert QSGD(s=1).bits_per_message(d) == 32 + 2 * d  # 3 symbols -> 2 bits
    assert QSGD(s=4).bits_per_message(d) == 32 + 4 * d  # 9 symbols -> 4 bits
    assert ScaledSign().bits_per_message(d) == d + 32
    assert StochasticRounding(4).bits_per_message(d) == 64 + 4 * d
    assert TopK(k=1).bits_per_message(1) == 32  # no index bits for d = 1


# ------------------------------------------------------------------------ factory


def test_get_compressor_specs():
    assert get_compressor("top-k", k=10) == TopK(k=10)
    assert get_compressor("topk:0.1") == TopK(fraction=0.1)
    assert get_compressor("top-k:10") == TopK(k=10)
    assert get_compressor("rand-k:5") == RandK(k=5)
    assert get_compressor("rand-k-scaled:0.2") == RandK(fraction=0.2, scaled=True)
    assert get_compressor("qsgd:4") == QSGD(s=4)
    assert get_compressor("qsgd-rescaled:2") == QSGD(s=2, rescaled=True)
    assert get_compressor("sign") == ScaledSign()
    assert get_compressor("sr:8") == StochasticRounding(8)
    assert get_compressor("none") == Identity()
    c = TopK(k=3)
    assert get_compressor(c) is c
    assert TopK(fraction=0.1).k_for(100) == 10 and TopK(fraction=0.001).k_for(100) == 1


# ------------------------------------------------------------------------ invalid inputs


INVALID = [
    (
        "k > d",
        lambda: TopK(k=12).compress(np.ones((2, 10))),
        ValueError,
        r"k = 12 exceeds the dimension d = 10",
    ),
    (
        "rand-k k > d",
        lambda: RandK(k=4).compress(np.ones(3), _stream(0)),
        ValueError,
        "exceeds the dimension",
    ),
    ("k = 0", lambda: TopK(k=0), ValueError, r"k must be in \[1, inf\), got 0"),
    ("k < 0", lambda: RandK(k=-2), ValueError, r"k must be in \[1, inf\), got -2"),
    ("k float", lambda: TopK(k=2.5), TypeError, "k must be an integer"),
    ("fraction 0", lambda: TopK(fraction=0.0), ValueError, r"fraction must be in \(0, 1\]"),
    ("fraction > 1", lambda: RandK(fraction=1.5), ValueError, r"fraction must be in \(0, 1\]"),
    ("k and fraction", lambda: TopK(k=2, fraction=0.5), ValueError, "exactly one of k"),
    ("no k", lambda: TopK(), ValueError, "exactly one of k"),
    ("s = 0", lambda: QSGD(s=0), ValueError, r"s must be in \[1, inf\), got 0"),
    ("s < 0", lambda: QSGD(s=-3, rescaled=True), ValueError, "s must be in"),
    ("bits = 0", lambda: StochasticRounding(bits=0), ValueError, r"bits must be in \[1, 52\]"),
    (
        "no stream",
        lambda: QSGD(s=2).compress(np.ones((2, 3))),
        ValueError,
        "is random: pass stream",
    ),
    (
        "int dtype",
        lambda: TopK(k=1).compress(np.ones((2, 3), dtype=int)),
        TypeError,
        "floating-point",
    ),
    ("scalar", lambda: ScaledSign().compress(np.float64(1.0)), ValueError, "at least one axis"),
    ("unknown spec", lambda: get_compressor("powersgd:2"), ValueError, "unknown compressor"),
    ("bad k spec", lambda: get_compressor("top-k:abc"), ValueError, "k must be an integer"),
    ("arg on sign", lambda: get_compressor("sign:3"), ValueError, "takes no argument"),
    ("bits d", lambda: TopK(k=1).bits_per_message(0), ValueError, r"d must be in \[1, inf\)"),
]


@pytest.mark.parametrize(
    "make,exc,match", [(m, e, r) for _, m, e, r in INVALID], ids=[i for i, *_ in INVALID]
)
def test_invalid_inputs_clear_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_numpy_clip_and_safe_division_equal_the_namespace_ones():
    """The NumPy short paths of the quantizers' clip and safe division give the array-API
    namespace's values bit for bit (NaN, zeros and both float dtypes included)."""
    from convkit import compression as cm
    from convkit.backend import namespace_of

    rng = np.random.default_rng(0)
    for dt in (np.float64, np.float32):
        u = (rng.standard_normal(500) * 3).astype(dt)
        u[:4] = [np.nan, -0.0, 0.0, np.inf]
        b = np.abs(rng.standard_normal(500)).astype(dt)
        b[::7] = 0.0
        xp = namespace_of(u)
        for got, ref in (
            (cm._clip(xp, u, 0.0, 2.0), xp.clip(u, 0.0, 2.0)),
            (cm._safe_div(xp, u, b), xp.where(b > 0, u / xp.where(b > 0, b, xp.ones_like(b)), 0.0)),
        ):
            assert got.dtype == ref.dtype == dt
            np.testing.assert_array_equal(got, ref)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
