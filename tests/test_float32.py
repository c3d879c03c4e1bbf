"""float32 against float64 on well-conditioned settings, with tolerances derived from the
float32 unit roundoff ``u = 2^-24 ~ 6e-8``.

Setting: least squares, Gaussian design, ``d = 10``, flat spectrum (``H = I``, ``mu = L = 1``,
``tr H = 10``), noise ``sigma = 1``, constant step ``gamma = 0.02`` (``gamma tr H = 0.2``, far
from the stability limit), Local-SGD family with ``P = 4``, DeepSqueeze and CHOCO-SGD on a
ring of 8.

* NumPy's float32 draws are different numbers from its float64 draws (checked below), so
  runs with the engine's own float32 stream are compared *statistically*: the final mean
  excess risks of independent runs agree within 4 standard errors of their difference.
* With the *same* samples (float64 draws rounded to float32, through a test backend) the
  float32 run follows the float64 run to rounding error.  Tolerance, derived: one step
  perturbs the iterate by about ``c d u ||theta||`` (a ``d``-term dot product and a few
  operations, ``c ~ 3``); the error recursion ``e <- (I - gamma x x^T) e + rounding``
  contracts at rate ``1 - gamma mu`` per step, so the iterate error stays below
  ``c d u ||theta|| / (gamma mu) ~ 3 * 10 * 6e-8 / 0.02 ~ 1e-4`` (``||theta|| ~ 1``).  The
  excess risk moves by ``2 ||e|| / ||theta - theta*||`` relative, with ``||theta - theta*||``
  at least the noise floor ``sqrt(gamma sigma^2 tr H / 2) ~ 0.3`` here: ``~ 7e-4``; the
  Polyak-Ruppert sum adds ``n u`` relative per coordinate (``2e-5`` at ``n = 300``).  So
  ``rtol = 1e-3`` on every recorded mean (measured: about ``1e-5``).  Compressors whose
  choice depends on the values (top-k) are excluded from this comparison: a selection
  flipped by one rounding error sends the two runs on different (equally valid) paths; rand-k
  (keys independent of the values) is used instead.
* Where float32 is not advisable: a long Polyak-Ruppert average.  Its running sum grows like
  ``n ||theta||`` while its error shrinks like ``1/sqrt(n)``, so the relative error of the
  float32 average's excess risk grows about linearly in ``n`` (``n u`` times a constant);
  the slow test measures it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import convkit as ck
from convkit import topology as T
from convkit.algorithms.decentralized import CHOCOSGD, DeepSqueeze
from convkit.backend import Backend, RandomStream

FULL = bool(os.environ.get("CONVKIT_FULL"))
STEP = ck.Constant(0.02)
PROBLEM = ck.LeastSquares.gaussian(d=10, spectrum="flat", noise=1.0, seed=0)


class _CastStream(RandomStream):
    """float64 draws rounded to the stream's dtype (float32): the float64 run's samples."""

    def normal(self, shape):
        return self.generator.standard_normal(size=shape).astype(self.dtype)

    def uniform(self, shape):
        return self.generator.random(size=shape).astype(self.dtype)


class SameSamples(Backend):
    """NumPy float32 arithmetic on the float64 run's random numbers."""

    def stream(self, seed, *key):
        return _CastStream(Backend("numpy").stream(seed, *key).generator, np, np.float32)


def _algorithms(compressor):
    return [
        ck.MBA(4, STEP, name="mba"),
        ck.LocalSGD(4, STEP, comm="every:5", name="local"),
        ck.OSA(4, STEP, name="osa"),
        DeepSqueeze(T.ring(8), STEP, compressor, 0.5, name="deepsqueeze"),
        CHOCOSGD(T.ring(8), STEP, compressor, 0.3, name="choco"),
    ]


def test_float32_draws_are_different_numbers():
    """The premise of the statistical comparison below."""
    a = Backend("numpy", "float32").stream(1).normal((100,))
    b = Backend("numpy", "float64").stream(1).normal((100,))
    assert a.dtype == np.float32 and b.dtype == np.float64
    assert np.mean(np.abs(a - b) > 1e-3) > 0.9


def test_same_samples_float32_follows_float64():
    kw = dict(steps=300, replicates=40, seed=3)
    r64 = ck.simulate(PROBLEM, _algorithms("rand-k:0.3"), **kw)
    r32 = ck.simulate(
        PROBLEM,
        _algorithms("rand-k:0.3"),
        backend=SameSamples("numpy", "float32"),
        dtype="float32",
        **kw,
    )
    assert r32.meta["dtype"] == "float32"
    m64, m32 = r64.frame["mean"].to_numpy(), r32.frame["mean"].to_numpy()
    np.testing.assert_allclose(m32, m64, rtol=1e-3)
    # float32 arithmetic did happen: the runs are not bit-identical
    assert np.max(np.abs(m32 - m64) / np.abs(m64)) > 1e-9


def test_float32_stream_agrees_statistically():
    """Independent float32 (engine's float32 draws) and float64 runs, top-k compression:
    final excess risk of the last iterate and of the Polyak-Ruppert average within 4 SE of
    the difference."""
    kw = dict(steps=200, replicates=400)
    r64 = ck.simulate(PROBLEM, _algorithms("top-k:0.3"), seed=21, **kw)
    r32 = ck.simulate(PROBLEM, _algorithms("top-k:0.3"), seed=22, dtype="float32", **kw)
    for it in ("last", "avg"):
        a = r64.final("excess_risk", it).set_index("config")
        b = r32.final("excess_risk", it).set_index("config")
        for cfg in a.index:
            se = math.hypot(a.loc[cfg, "se"], b.loc[cfg, "se"])
            z = (b.loc[cfg, "mean"] - a.loc[cfg, "mean"]) / se
            assert abs(z) <= 4, (cfg, it, z)


def _pr_relative_error(n: int, noise: float = 1.0) -> tuple[float, float]:
    """Median over replicates of |E32 - E64| / E64 for the excess risk E of the final
    Polyak-Ruppert average and of the last iterate (same samples)."""
    prob = ck.LeastSquares.gaussian(d=10, spectrum="flat", noise=noise, seed=0)
    algo = ck.MBA(1, STEP, name="sgd")
    kw = dict(steps=n, replicates=8, seed=5, n_record=2)
    v64 = ck.simulate(prob, algo, **kw).values["sgd"]
    v32 = ck.simulate(
        prob, algo, backend=SameSamples("numpy", "float32"), dtype="float32", **kw
    ).values["sgd"]
    m = v64.metrics.index("excess_risk")
    out = []
    for it in ("avg", "last"):
        i = v64.iterates.index(it)
        a, b = v64.values[-1, i, m], v32.values[-1, i, m]
        out.append(float(np.median(np.abs(b - a) / a)))
    return out[0], out[1]


@pytest.mark.slow
def test_float32_polyak_ruppert_average_keeps_its_digits():
    """``simulate`` accumulates the Polyak-Ruppert and tail sums in float64 whatever the run's
    dtype.  (With float32 sums the relative error of the average grew linearly in n: measured
    2e-5 after 1e4 steps, 1.6e-4 after 1e5, 4e-3 after 1e6.)  So the float32 average's
    relative error stays at the level of the float32 trajectory itself: below 1e-4 after
    ``n_long`` steps and far from linear growth (10x more steps: less than 4x the error),
    while the last iterate's stays at rounding level (< 1e-5)."""
    n_short, n_long = (10**4, 10**6) if FULL else (2 * 10**3, 2 * 10**4)
    short_avg, short_last = _pr_relative_error(n_short)
    long_avg, long_last = _pr_relative_error(n_long)
    assert long_avg < 1e-4, (short_avg, long_avg)
    assert long_avg < 0.4 * (n_long / n_short) * max(short_avg, 1e-7), (short_avg, long_avg)
    assert max(short_last, long_last) < 1e-5
