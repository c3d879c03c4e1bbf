"""The vectorizable exp, sigmoid and workers' sum of the logistic kernels (convkit._fastexp)."""

from __future__ import annotations

import numpy as np
import pytest

from convkit import _fastexp

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module")
def compiled():
    exp_nonpos, sigmoid, worker_sums, worker_sums_rpd = _fastexp.helpers()

    @numba.njit(fastmath={"contract"})
    def exp_all(x, out):
        for i in range(x.shape[0]):
            out[i] = exp_nonpos(x[i])

    @numba.njit(fastmath={"contract"})
    def sigmoid_all(z, out):
        for i in range(z.shape[0]):
            out[i] = sigmoid(z[i])

    @numba.njit(fastmath={"contract"})
    def exp_scalar(x):  # one call, outside a vectorized loop
        return exp_nonpos(x)

    @numba.njit(fastmath={"contract"})
    def sums_flat(theta, base, P, d, out):
        worker_sums(theta, np.uint64(base), np.uint64(P), np.uint64(P), d, out)

    @numba.njit(fastmath={"contract"})
    def sums_rpd(theta, r, out):
        worker_sums_rpd(theta, r, out)

    return exp_all, sigmoid_all, exp_scalar, sums_flat, sums_rpd


def _ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    ref = np.exp(x.astype(np.longdouble))
    return np.abs((got - ref) / np.spacing(ref.astype(np.float64)).astype(np.longdouble))


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 60, reason="needs an extended long double")
def test_exp_within_one_ulp_of_an_extended_precision_exp(compiled):
    """Normal results over [-708, 0] (where the sigmoid's exponent lies) within 0.9 ulp of
    np.longdouble's exp, like libm to the last bit for most arguments; subnormal results
    within one unit of 2^-1074."""
    rng = np.random.default_rng(0)
    x = np.concatenate([
        -rng.exponential(3.0, 400_000), -rng.uniform(0.0, 708.0, 200_000),
        -np.ldexp(rng.uniform(0.5, 1.0, 20_000), -rng.integers(1, 60, 20_000)),
        -np.arange(0, 1024) * np.log(2.0),  # where k changes
    ])  # fmt: skip
    out = np.empty_like(x)
    compiled[0](x, out)
    ulps = _ulps(out, x)
    assert float(ulps.max()) < 0.9
    assert float(ulps.mean()) < 0.3
    assert np.mean(out != np.exp(x)) < 0.1  # the last bit differs from libm's at times
    sub = -rng.uniform(708.4, 745.1, 10_000)
    got = np.empty_like(sub)
    compiled[0](sub, got)
    ref = np.exp(sub.astype(np.longdouble))
    assert float(np.max(np.abs(got - ref))) <= 2.0**-1074
    assert np.all(got > 0)


def test_exp_special_values_and_scalar_calls_agree(compiled):
    """exp(0) = 1, exp(-0) = 1, exp(-inf) = 0, exp(nan) = nan, exp(-800) = 0; a scalar call
    (not in a vectorized loop) gives the same bits as the loop."""
    x = np.array([0.0, -0.0, -np.inf, np.nan, -800.0, -745.2, -1e-300, -0.5, -30.0])
    out = np.empty_like(x)
    compiled[0](x, out)
    np.testing.assert_array_equal(out[:5], [1.0, 1.0, 0.0, np.nan, 0.0])
    assert out[5] == 0.0 and out[6] == 1.0
    for xi, oi in zip(x, out, strict=True):
        np.testing.assert_array_equal(compiled[2](xi), oi)


def test_sigmoid_is_the_overflow_free_formula(compiled):
    """sigmoid(z) for both signs from the one exp, within 1e-15 relative of the generic
    sigmoid; +-inf give 1 and 0, nan stays nan, and sigmoid(z) + sigmoid(-z) = 1 to rounding."""
    from convkit.problems.logistic import sigmoid

    z = np.concatenate([np.linspace(-40, 40, 8001), [np.inf, -np.inf, np.nan, 800.0, -800.0]])
    out = np.empty_like(z)
    compiled[1](z, out)
    ref = sigmoid(z)
    fin = np.isfinite(z)
    np.testing.assert_allclose(out[fin], ref[fin], rtol=1e-15, atol=0)
    np.testing.assert_array_equal(out[-5:], [1.0, 0.0, np.nan, 1.0, 0.0])
    mirror = np.empty_like(z)
    compiled[1](-z, mirror)
    np.testing.assert_allclose((out + mirror)[fin], 1.0, rtol=0, atol=2.3e-16)


@pytest.mark.parametrize("P", [1, 2, 3, 4, 5, 7, 8, 16, 17])
def test_workers_sum_order(compiled, P):
    """Both sums add worker p = 4 m + l to partial sum l in order of m and return
    (s0 + s1) + (s2 + s3), bit for bit, for the flat workers-last and the (R, P, d) layouts."""
    rng = np.random.default_rng(P)
    d, R = 3, 2
    theta = rng.normal(size=(R, P, d)) * np.logspace(0, 12, P)[None, :, None]
    expected = np.empty((R, d))
    for r in range(R):
        for i in range(d):
            s = [0.0, 0.0, 0.0, 0.0]
            for p in range(P):
                s[p % 4 if p < P - P % 4 else 0] += theta[r, p, i]
            expected[r, i] = (s[0] + s[1]) + (s[2] + s[3])
    flat = np.ascontiguousarray(theta.transpose(0, 2, 1)).ravel()  # (R, d, P), workers last
    for r in range(R):
        a = np.empty(d)
        b = np.empty(d)
        compiled[3](flat, r * d * P, P, d, a)
        compiled[4](theta, r, b)
        np.testing.assert_array_equal(a, expected[r])
        np.testing.assert_array_equal(b, expected[r])
