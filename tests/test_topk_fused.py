"""The compiled top-k kernels of :mod:`convkit._kernels` against the generic path.

The kernels (``topk_compress``, and the fused CHOCO-SGD / DeepSqueeze updates) must select
exactly the entries of the generic NumPy path (ties at the threshold: lowest indices) and
round exactly as it does, so every comparison here is ``np.array_equal`` (bit-identical up to
the sign of zeros): on random blocks full of ties and zeros, on NaN / inf inputs (against the
rule of the previous compiled kernel: NumPy's partition threshold, NaN never kept), on single
steps and on whole ``simulate`` runs (``Result.values``).
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit import _kernels
from convkit.algorithms.decentralized import CHOCOSGD, DeepSqueeze
from convkit.compression import TopK
from convkit.problems.base import GradientOracle
from convkit.topology import one_peer_exponential, ring

pytestmark = pytest.mark.skipif(
    not _kernels.numba_available(), reason="numba not available: only the generic path exists"
)


@pytest.fixture
def generic(monkeypatch):
    """A function running its argument on the generic path (compiled top-k switched off)."""

    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(_kernels, "_TOPK", None)
            return fn(*args, **kwargs)

    return run


def _tied_block(rng, shape, dtype):
    """Small integers (many ties and zeros), scaled so that the values are exact."""
    return (rng.integers(-3, 4, size=shape) * 0.5).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_topk_compress_matches_generic_path_with_ties(dtype, generic):
    rng = np.random.default_rng(0)
    for _ in range(150):
        d = int(rng.integers(1, 40))
        k = int(rng.integers(1, d + 1))
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 7)), d)
        x = (
            _tied_block(rng, shape, dtype)
            if rng.random() < 0.7
            else rng.standard_normal(shape).astype(dtype)
        )
        comp = TopK(k=k)
        got = comp.compress(x)
        want = generic(comp.compress, x)
        assert got.dtype == x.dtype and got.shape == x.shape
        assert np.array_equal(got, want), (d, k)
        kept = np.count_nonzero(got, axis=-1)
        assert (kept <= k).all() and (kept == np.minimum(k, np.count_nonzero(x, axis=-1))).all()


def _old_rule(x, k):
    """The previous compiled kernel's rule: threshold = k-th largest |x| by np.partition (NaN
    above everything); keep |x| > thr, then |x| == thr in index order up to k."""
    flat = x.reshape(-1, x.shape[-1])
    d = flat.shape[1]
    thr = np.partition(np.abs(flat), d - k, axis=-1)[:, d - k]
    out = np.zeros_like(flat)
    for r in range(flat.shape[0]):
        s = np.abs(flat[r])
        keep = s > thr[r]
        for j in np.flatnonzero(s == thr[r]):
            if keep.sum() >= k:
                break
            keep[j] = True
        out[r, keep] = flat[r, keep]
    return out.reshape(x.shape)


def test_topk_compress_nan_and_inf_follow_numpy_order():
    rng = np.random.default_rng(1)
    for _ in range(100):
        d = int(rng.integers(2, 20))
        k = int(rng.integers(1, d))
        x = _tied_block(rng, (6, d), np.float64)
        x[rng.random(x.shape) < 0.15] = np.nan
        x[rng.random(x.shape) < 0.1] = np.inf
        x[rng.random(x.shape) < 0.1] = -np.inf
        got = _kernels.topk_compress(x, k)
        assert np.array_equal(got, _old_rule(x, k), equal_nan=True)


def test_fused_steps_match_generic_path_on_tied_blocks(generic):
    """One CHOCO-SGD / DeepSqueeze update on states full of ties: every output array equal."""
    rng = np.random.default_rng(2)
    for dtype in (np.float64, np.float32):
        for d, k in ((12, 3), (12, 1), (12, 11), (7, 4), (30, 3)):
            X, M, Xh = (_tied_block(rng, (3, 4, d), dtype) for _ in range(3))
            a = [X.copy(), Xh.copy()]
            assert _kernels.topk_choco_update(a[0], M, a[1], k)
            b = [X.copy(), Xh.copy()]
            b[0] += M
            b[0] -= b[1]
            b[1] += generic(TopK(k=k).compress, b[0] - b[1])
            assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True)), (d, k)

            U = _tied_block(rng, (3, 4, d), dtype)
            a = [X.copy(), U.copy()]
            va = _kernels.topk_deepsqueeze_update(a[0], a[1], k)
            b = [X.copy(), U.copy()]
            b[1] += b[0]
            vb = generic(TopK(k=k).compress, b[1])
            b[1] -= vb
            b[0] -= vb
            assert np.array_equal(va, vb)
            assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True)), (d, k)


def test_fused_kernels_decline_what_they_cannot_do():
    x = np.ones((2, 3, 5))
    assert not _kernels.topk_choco_update(x, x.copy(), x[..., ::-1], 2)  # not contiguous
    assert not _kernels.topk_choco_update(x, x.astype(np.float32), x.copy(), 2)
    assert not _kernels.topk_choco_update(x, x.copy(), x.copy(), 5)  # k = d: generic copy
    assert not _kernels.topk_choco_copies_update(x, x[..., ::-1], 2)  # not contiguous
    assert not _kernels.topk_choco_copies_update(x, x.astype(np.float32), 2)
    assert not _kernels.topk_choco_copies_update(x, x.copy(), 5)
    assert _kernels.topk_deepsqueeze_update(x, np.ones((2, 3, 4)), 2) is None
    assert _kernels.topk_compress(np.ones(4, dtype=int), 2) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: CHOCOSGD(ring(8), ck.Constant(0.05), TopK(k=3), 0.3, name="a"),
        lambda: DeepSqueeze(ring(8), ck.Constant(0.05), TopK(fraction=0.2), 0.3, name="a"),
        lambda: CHOCOSGD(one_peer_exponential(8), ck.Constant(0.05), "top-k:2", 0.5, name="a"),
        lambda: CHOCOSGD(
            ring(8), ck.Constant(0.05), TopK(k=3), 0.3, order="reference_code", name="a"
        ),
        lambda: CHOCOSGD(
            one_peer_exponential(8),
            ck.Constant(0.05),
            "top-k:2",
            0.5,
            copies_start="zero",
            order="reference_code",
            name="a",
        ),
    ],
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_simulate_values_bit_identical(make, dtype, generic):
    prob = ck.LeastSquares.gaussian(d=12, noise=0.5, seed=3)
    kw = {"steps": 60, "replicates": 5, "seed": 7, "n_record": 6, "dtype": dtype}
    fused = ck.simulate(prob, make(), **kw)
    plain = generic(ck.simulate, prob, make(), **kw)
    assert np.array_equal(fused.values["a"].values, plain.values["a"].values, equal_nan=True)


def test_benchmark_configuration_takes_the_fused_path(monkeypatch):
    """The path users call (the algorithms' step on NumPy float blocks) uses the kernels."""
    calls = []
    for name in ("topk_choco_update", "topk_choco_copies_update", "topk_deepsqueeze_update"):
        real = getattr(_kernels, name)
        monkeypatch.setattr(
            f"convkit.algorithms.decentralized.{name}",
            lambda *a, _real=real, **kw: calls.append(1) or _real(*a, **kw),
        )
    prob = ck.LeastSquares.gaussian(d=20, noise=1.0, seed=0)
    for algo in (
        CHOCOSGD(ring(8), ck.Constant(0.01), TopK(k=2), 0.2),
        CHOCOSGD(ring(8), ck.Constant(0.01), TopK(k=2), 0.2, order="reference_code"),
        DeepSqueeze(ring(8), ck.Constant(0.01), TopK(k=2), 0.2),
    ):
        algo.prepare(3)
        stream = ck.Backend().stream(0)
        state = algo.init(np.zeros((2, 8, 20)), stream)
        for k in (1, 2, 3):
            state = algo.step(state, GradientOracle(prob, prob.sample(stream, (2, 8, 1))), k, None)
    assert len(calls) == 9
