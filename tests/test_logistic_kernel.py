"""The fused numba SGD step of online logistic regression (``convkit._logistic_kernels``):
same numbers as the generic array path to rounding, the switches, divergence detection."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import convkit as ck
from convkit import _kernel_switch, _logistic_kernels
from convkit.problems.logistic import LogisticBatch, LogisticRegression, sigmoid

pytestmark = pytest.mark.skipif(
    not _logistic_kernels.logistic_numba_available(),
    reason="numba not installed (or CONVKIT_NO_NUMBA set): only the generic path exists",
)

STEP = ck.PolyDecay(0.8, 0.75)


def _run(prob, algos, monkeypatch=None, generic=False, **kw):
    with ck.kernels(enabled=not generic):
        return ck.simulate(prob, algos, **kw)


@pytest.mark.parametrize(
    ("d", "rotate", "P", "b"),
    [(1, False, 1, 1), (2, False, 8, 1), (3, True, 4, 3), (7, True, 2, 5)],
)
def test_kernel_matches_generic_path(d, rotate, P, b, monkeypatch):
    """Same seed: kernel and generic path agree to rounding on every value (all recorded
    iterates, last and averaged, and every metric), for MBA, Local-SGD and OSA together (the
    smaller ones on sliced, non-contiguous batches)."""
    prob = LogisticRegression.gaussian(d, spectrum="1/i", rotate=rotate, eval_size=1024, seed=d)
    algos = [
        ck.MBA(P, STEP, batch=b, name="mba"),
        ck.LocalSGD(P, STEP, comm="every:3", batch=b, name="local"),
        ck.OSA(max(1, P // 2), STEP, batch=max(1, b - 1), name="osa"),
    ]
    kw = {"steps": 60, "replicates": 9, "seed": 5, "n_record": 6}
    fused = _run(prob, algos, **kw)
    generic = _run(prob, algos, monkeypatch, generic=True, **kw)
    assert set(fused.values) == set(generic.values)
    for name, cv in fused.values.items():
        ref = generic.values[name]
        assert {"last", "avg"} <= set(cv.iterates)
        np.testing.assert_allclose(cv.values, ref.values, rtol=1e-12, atol=0, err_msg=name)
        np.testing.assert_array_equal(cv.diverged_at, ref.diverged_at)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("with_mean", [False, True])
def test_one_step_and_mean_protocol(dtype, with_mean):
    """One step against ``theta - gamma * stochastic_grad``; ``mean`` receives the worker
    mean of the updated models, ``None`` skips it."""
    prob = LogisticRegression.gaussian(4, spectrum="1/i", rotate=True, eval_size=1024, seed=1)
    stream = ck.Backend(dtype=np.dtype(dtype).name).stream(3, "samples", 0)
    batch = prob.sample(stream, (5, 3, 2))
    rng = np.random.default_rng(0)
    theta = (prob.theta_star + 3 * rng.standard_normal((5, 3, 4))).astype(dtype)
    expected = theta - dtype(0.7) * prob.stochastic_grad(theta, batch)
    mean = np.full((5, 4), np.nan, dtype=dtype) if with_mean else None
    assert _logistic_kernels.logistic_sgd_update(theta, batch.x, batch.y, 0.7, mean)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(theta, expected, rtol=tol, atol=tol)
    if with_mean:
        np.testing.assert_allclose(mean, theta.mean(axis=1), rtol=tol, atol=tol)


def test_sgd_update_dispatches_to_the_kernel_and_switches_disable_it(monkeypatch):
    prob = LogisticRegression.gaussian(2, eval_size=1024, seed=0)
    batch = LogisticBatch(np.ones((1, 1, 1, 2)), np.ones((1, 1, 1)))
    calls = []
    real = _logistic_kernels._get_kernel()

    def spy(*args):
        calls.append(1)
        return real[0](*args)

    monkeypatch.setitem(_kernel_switch._BUILT, _logistic_kernels.LOGISTIC_KERNELS, (spy, real[1]))
    prob.sgd_update(np.zeros((1, 1, 2)), batch, 0.1)
    assert calls == [1]
    with ck.kernels(enabled=False):  # the public switch of every compiled kernel
        theta = prob.sgd_update(np.zeros((1, 1, 2)), batch, 0.1)
        assert not _logistic_kernels.logistic_numba_available()
    assert calls == [1]
    np.testing.assert_allclose(theta, 0.05 * np.ones((1, 1, 2)))  # -gamma * (-1/2) * x
    assert _logistic_kernels.logistic_numba_available()  # restored after the block


def test_extreme_margins_stay_finite_and_nan_propagates():
    """Margins of +-1e6 (exp would overflow without the stable sigmoid) give finite
    updates; a NaN model stays NaN (the engine detects divergence from it)."""
    x = np.array([[[[1e6, 0.0]], [[-1e6, 0.0]]]])  # (1, 2, 1, 2)
    y = np.ones((1, 2, 1))
    theta = np.ones((1, 2, 2))
    with np.errstate(all="raise"):
        assert _logistic_kernels.logistic_sgd_update(theta, x, y, 1e-6)
    # y <x, theta> = 1e6: sigmoid(-1e6) = 0, no change; -1e6: sigmoid(1e6) = 1, +gamma x
    np.testing.assert_allclose(theta, [[[1.0, 1.0], [0.0, 1.0]]], atol=1e-12)
    theta[0, 0, 0] = np.nan
    mean = np.zeros((1, 2))
    _logistic_kernels.logistic_sgd_update(theta, x, y, 1e-6, mean)
    assert np.isnan(theta[0, 0, 0]) and np.isnan(mean[0, 0])


def test_divergence_detected_with_the_kernel():
    """A huge constant step diverges (models of norm >> the threshold): DivergenceWarning,
    every replicate flagged, and no NaN row in the reported frame."""
    prob = LogisticRegression.gaussian(3, eval_size=1024, seed=0)
    algos = [ck.MBA(4, ck.Constant(1e15), name="big"), ck.MBA(4, ck.Constant(0.1), name="ok")]
    with pytest.warns(ck.DivergenceWarning):
        res = ck.simulate(prob, algos, steps=30, replicates=6, seed=0, record=range(1, 31))
    assert np.all(res.values["big"].diverged_at > 0)
    assert np.all(res.values["ok"].diverged_at == 0)
    num = res.frame.select_dtypes("number")
    assert not num.isna().to_numpy().any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res.final()


EPS = np.finfo(np.float64).eps  # 2^-52; the unit roundoff is u = EPS / 2


def _quadrature_difference_bound(prob: LogisticRegression, th: np.ndarray) -> np.ndarray:
    """Bound on |compiled quadrature - NumPy rule| for each model of ``th``, from the rule's
    own intermediate values.

    Node by node both evaluate ``v = B(t, t + delta)`` with the same IEEE operations in the
    same order (the kernel has no fast-math) and the same ``p = sigmoid(st)``, but different
    elementary functions: the kernel calls the C library's ``expm1``, ``log1p``, ``exp``, while
    NumPy may dispatch its own SIMD ones (on AVX512, its ``expm1`` and ``log1p`` differ from the
    C library's in the last bit on about 1.4 % of arguments).  Each is within 1 ulp of the
    correctly rounded value (NumPy's float64 validation sets; glibc's ulps tables), so two
    differ by at most 3 ulp, a relative ``FN = 3 EPS``.  To first order, with ``m =
    expm1(-|delta|)``, ``arg = p m``, ``L = log1p(arg)`` (the branch ``arg > -1/2``):
    ``|d arg| <= (FN + 2u) |arg|`` (the product rounded from two different inputs), ``|d L| <=
    |d arg| / (1 + arg) + FN |L|``; this is what cancels in ``v = L + p |delta|`` (``v ~ p (1 - p)
    delta^2 / 2`` against terms ``~ p |delta|``: a relative error up to ``~ 6 EPS / |delta|``).
    In the logaddexp branch every ``logaddexp(a, b) = max + log1p(exp(-|a - b|))`` adds at most
    ``2 FN`` (``exp <= 1``, ``log1p <= ln 2``) and ``2u`` times its inputs and output, three
    of them in a chain: ``6 FN + 2u`` (the magnitudes).  The final sum ``+ p |delta|`` adds
    ``2u |v|``, ``max(v, 0)`` nothing.  The sums over the q nodes differ in order (the kernel:
    sequential; NumPy: the BLAS's ``B @ w``, blocked by SIMD width, maybe fused multiply-adds):
    each is within ``gamma_q sum_k w_k |v_k|`` of the exact sum of its terms (Higham, Accuracy
    and Stability of Numerical Algorithms, 2002, eq. 3.5; ``gamma_q = q u / (1 - q u)``).
    """
    u = EPS / 2
    fn = 3 * EPS
    c21, c22, _ = prob._pair_moments(th - prob.theta_star)
    t = np.sqrt(prob.v_star) * prob._hz1
    delta = (t + (c21[:, None] * prob._hz1 + c22[:, None] * prob._hz2)) - t
    st = np.where(delta <= 0, t, -t)
    p, ad = sigmoid(st), np.abs(delta)
    arg = p * np.expm1(-ad)
    near = arg > -0.5
    log_term = np.log1p(np.where(near, arg, 0.0))
    d_near = (fn + 2 * u) * np.abs(arg) / (1 + arg) + fn * np.abs(log_term)
    a = -np.logaddexp(0.0, st)
    b = -np.logaddexp(0.0, -st) - ad
    outer = np.logaddexp(a, b)
    magnitudes = 3 * np.abs(st) + ad + np.abs(a) + np.abs(b) + np.abs(a - b) + np.abs(outer)
    d_far = 6 * fn + 2 * u * magnitudes
    v = np.maximum(np.where(near, log_term, outer) + p * ad, 0.0)
    d_v = np.where(near, d_near, d_far) + 2 * u * v
    q = prob._hw.size
    gamma_q = q * u / (1 - q * u)
    return (1 + gamma_q) * (d_v @ prob._hw) + 2 * gamma_q * (v @ prob._hw)


def test_quadrature_kernel_matches_numpy_rule(monkeypatch):
    """The compiled excess-risk quadrature equals the NumPy rule to rounding, from models at
    1e-9 of theta* (cancellation-prone) to far ones (the logaddexp branch), and keeps NaN.
    "To rounding": within the bound derived from the rule's values (the elementary functions
    of the C library and NumPy's may differ in the last bit, and near theta* the divergence
    amplifies that by ~1 / |delta|), which far from theta* is below 1e-12 relative."""
    prob = LogisticRegression.gaussian(3, spectrum="1/i", rotate=True, eval_size=1024, seed=2)
    rng = np.random.default_rng(4)
    scales = np.r_[np.zeros(1), np.logspace(-9, 1.5, 40)]
    th = prob.theta_star + scales[:, None] * rng.standard_normal((scales.size, 3))
    th = np.r_[th, [[np.nan, 0.0, 0.0]]]
    with np.errstate(invalid="ignore"):
        fused = prob.excess_risk_quadrature(th)
        with ck.kernels(enabled=False):
            ref = prob.excess_risk_quadrature(th)
    assert np.isnan(fused[-1]) and np.isnan(ref[-1])
    bound = _quadrature_difference_bound(prob, th[:-1])
    assert np.all(np.abs(fused[:-1] - ref[:-1]) <= bound)
    well_conditioned = scales >= 1e-2  # |delta| ~ 1e-2 or more: the bound is that of the sums
    assert np.all(bound[well_conditioned] <= 1e-12 * ref[:-1][well_conditioned])
    assert fused[0] == 0.0 and np.all(fused[1:-1] > 0)
