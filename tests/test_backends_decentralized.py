"""The decentralized family, error feedback and the compressors use only the array API standard:
run on array-api-strict arrays they equal the NumPy run to rounding error (same seed: the random
numbers, compressor randomness included, are drawn on the host from the same streams).  The
library-specific helpers of :mod:`convkit.backend` (partition, argpartition + put_along_axis,
sparse products) are each checked against their standard-API fallback."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import convkit as ck
from convkit import topology as T
from convkit.algorithms.decentralized import (
    CHOCOSGD,
    DCDPSGD,
    DPSGD,
    ECDPSGD,
    DeepSqueeze,
    tune_consensus_step,
)
from convkit.algorithms.feedback import ErrorFeedbackSGD
from convkit.backend import (
    Backend,
    array_library,
    kth_largest,
    namespace_of,
    sparse_block_operator,
    sparse_matmul,
    to_numpy,
    topk_mask,
)
from convkit.compression import (
    QSGD,
    Identity,
    RandK,
    ScaledSign,
    StochasticRounding,
    TopK,
)

xps = pytest.importorskip("array_api_strict")

STEP = ck.PolyDecay(0.2, 0.6)
# same numbers on both sides; the only differences are summation orders (dense or shift mixing
# versus NumPy's product): relative 1e-10 is many orders above float64 rounding (1e-16 per
# operation, tens of steps) and far below any algorithmic difference
RTOL, ATOL = 1e-10, 1e-14

COMPRESSORS = {
    "identity": Identity(),
    "top-k": TopK(k=3),
    "rand-k": RandK(k=3),
    "rand-k-scaled": RandK(k=3, scaled=True),
    "qsgd": QSGD(s=2),
    "qsgd-rescaled": QSGD(s=2, rescaled=True),
    "sign": ScaledSign(),
    "sr": StochasticRounding(bits=3),
}


def _algorithms(top, comp):
    algos = [
        CHOCOSGD(top, STEP, comp, 0.4, name="choco"),
        DeepSqueeze(top, STEP, comp, 0.5, name="deepsqueeze"),
        ErrorFeedbackSGD(top.n, STEP, comp, name="ef"),
    ]
    if comp.unbiased:
        algos += [DCDPSGD(top, STEP, comp, name="dcd"), ECDPSGD(top, STEP, comp, name="ecd")]
    return algos


def _pair(problem, algos, monkeypatch, **kw):
    strict = ck.simulate(problem, algos, backend="array_api_strict", **kw)
    with ck.kernels(enabled=False):  # the generic gradient path, as on strict arrays
        ref = ck.simulate(problem, algos, **kw)
    return strict, ref


@pytest.mark.parametrize("comp", list(COMPRESSORS), ids=list(COMPRESSORS))
def test_decentralized_family_on_strict_equals_numpy(comp, monkeypatch):
    """CHOCO-SGD, DeepSqueeze, EF-SGD (and DCD/ECD-PSGD for unbiased compressors) with every
    compressor: the strict run equals the NumPy run, every recorded metric and iterate."""
    prob = ck.LeastSquares.gaussian(d=8, spectrum="1/i", seed=0)
    algos = _algorithms(T.ring(5), COMPRESSORS[comp])
    strict, ref = _pair(prob, algos, monkeypatch, steps=30, replicates=4, seed=2)
    assert strict.meta["backend"] == "array_api_strict"
    assert len(strict.frame) == len(ref.frame) and strict.frame["mean"].notna().all()
    np.testing.assert_allclose(strict.frame["mean"], ref.frame["mean"], rtol=RTOL, atol=ATOL)
    # the compressor acted: the run differs from the uncompressed one unless it is the identity
    if comp != "identity":
        plain = ck.simulate(
            prob, _algorithms(T.ring(5), Identity())[:2], steps=30, replicates=4, seed=2
        )
        a = ref.final("excess_risk", "last").set_index("config")["mean"]["deepsqueeze"]
        b = plain.final("excess_risk", "last").set_index("config")["mean"]["deepsqueeze"]
        assert abs(a - b) > 1e-6 * abs(b)


@pytest.mark.parametrize(
    "top",
    [T.ring(4), T.star(5), T.one_peer_exponential(4)],
    ids=["ring (shift)", "star (dense)", "one-peer (time-varying)"],
)
def test_dpsgd_and_compressed_on_strict_equals_numpy(top, monkeypatch):
    """D-PSGD (both forms) and DeepSqueeze / CHOCO with top-k on circulant, non-circulant and
    time-varying graphs (the strict run mixes by shifts or by a dense product)."""
    # Gaussian design: no exact ties in |x| (Rademacher features with a flat spectrum tie every
    # coordinate, and a tie broken by one rounding error moves top-k's choice)
    prob = ck.LeastSquares.gaussian(d=6, spectrum="1/i", seed=1)
    algos = [
        DPSGD(top, STEP, name="gts"),
        DPSGD(top, STEP, form="step_then_gossip", batch=2, name="stg"),
        DeepSqueeze(top, STEP, TopK(k=2), 0.5, name="ds"),
        CHOCOSGD(top, STEP, RandK(k=2), 0.3, name="choco"),
    ]
    strict, ref = _pair(prob, algos, monkeypatch, steps=25, replicates=3, seed=4)
    np.testing.assert_allclose(strict.frame["mean"], ref.frame["mean"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("comp", list(COMPRESSORS), ids=list(COMPRESSORS))
def test_compressors_on_strict_equal_numpy(comp):
    """One call on an (R, P, d) block: same stream seed, identical output (bit for bit: the
    operations are elementwise or selections)."""
    c = COMPRESSORS[comp]
    x = np.random.default_rng(5).standard_normal((3, 4, 10))
    outs = []
    for name in ("numpy", "array_api_strict"):
        be = Backend(name)
        y = c.compress(be.asarray(x), be.stream(7, "c"))
        assert array_library(y) == ("numpy" if name == "numpy" else "other")
        outs.append(to_numpy(y))
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], x) or comp == "identity"


def test_tune_consensus_step_on_strict_equals_numpy():
    kw = dict(grid=[0.05, 0.2, 0.6], d=6, iterations=20, replicates=2, seed=3)
    a = tune_consensus_step(T.ring(6), TopK(k=2), **kw)
    b = tune_consensus_step(T.ring(6), TopK(k=2), backend=Backend("array_api_strict"), **kw)
    np.testing.assert_allclose(a.rates, b.rates, rtol=1e-10)
    assert a.gamma_c == b.gamma_c


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("k", [1, 3, 10])
def test_kth_largest_library_and_standard_agree(k):
    x = np.random.default_rng(0).standard_normal((4, 3, 10))
    want = np.sort(x, axis=-1)[..., 10 - k : 11 - k]
    np.testing.assert_array_equal(kth_largest(np, x, k), want)
    s = xps.asarray(x)
    np.testing.assert_array_equal(np.asarray(kth_largest(xps, s, k)), want)
    buf = x.copy()
    np.testing.assert_array_equal(kth_largest(np, buf, k, inplace=True), want)
    with pytest.raises(ValueError, match="k must lie in"):
        kth_largest(np, x, 11)


def test_topk_mask_exact_k_with_ties():
    """Exactly k entries per row, all among the k largest values, on rows full of ties; on
    tie-free rows both implementations select the same entries."""
    rng = np.random.default_rng(1)
    tied = rng.integers(0, 3, size=(50, 12)).astype(np.float64)
    free = rng.standard_normal((50, 12))
    for k in (1, 4, 12):
        kth = np.sort(tied, axis=-1)[:, 12 - k][:, None]
        for xp, arr in ((np, tied), (xps, xps.asarray(tied))):
            m = np.asarray(topk_mask(xp, arr, k))
            assert m.dtype == np.bool_ and (m.sum(axis=-1) == k).all()
            assert (tied[m].reshape(50, k) >= kth).all()  # nothing below the k-th largest
            assert ((tied > kth) <= m).all()  # everything above it kept
        a = topk_mask(np, free, k)
        b = np.asarray(topk_mask(xps, xps.asarray(free), k))
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("compiled", [True, False])
def test_topk_with_ties_keeps_k_on_every_backend(compiled):
    """The tie fallback of the sparsifiers (rows whose threshold is shared): exactly k kept, the
    lowest indices among tied entries, on NumPy (compiled or not) and strict arrays alike."""
    x = np.tile(np.array([3.0, -3.0, 1.0, 3.0, 0.0, 2.0]), (2, 3, 1))
    with ck.kernels(enabled=compiled):
        _check_ties_keep_k(x)


def _check_ties_keep_k(x: np.ndarray) -> None:
    for name in ("numpy", "array_api_strict"):
        be = Backend(name)
        y = to_numpy(TopK(k=2).compress(be.asarray(x)))
        assert (np.count_nonzero(y, axis=-1) == 2).all()
        np.testing.assert_array_equal(y[..., :2], x[..., :2])  # ties: lowest indices
        assert not y[..., 2:].any()
        z = to_numpy(RandK(k=2).compress(be.asarray(x), be.stream(0)))
        assert (np.count_nonzero(z, axis=-1) <= 2).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_matmul_library_and_fallback_agree(dtype):
    W = T.torus(3, 4).W
    X = np.random.default_rng(2).standard_normal((5, 12, 7)).astype(dtype)
    want = np.einsum("ij,rjd->rid", W, X.astype(np.float64))
    K = sparse_block_operator(W, 5, X)
    assert K.shape == (60, 60) and K.nnz == 5 * np.count_nonzero(W)
    Y = sparse_matmul(K, X)
    assert Y.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(Y, want, rtol=0, atol=tol)
    Xs = xps.asarray(X)
    Ks = sparse_block_operator(W, 5, Xs)
    Ys = sparse_matmul(Ks, Xs)
    assert namespace_of(Ys) is namespace_of(Xs)
    np.testing.assert_allclose(np.asarray(Ys), want, rtol=0, atol=tol)


def test_step_sizes_reach_the_arrays_as_python_floats():
    """array-api-strict rejects NumPy scalars: the decentralized step functions pass floats."""
    x = xps.zeros((1, 4, 3), dtype=xps.float64)
    with pytest.raises(TypeError):
        x - np.float64(1.0) * x
    prob = ck.LeastSquares.gaussian(d=3, seed=0)
    algos = [DPSGD(T.ring(4), STEP), ErrorFeedbackSGD(4, STEP, "top-k:1")]
    res = ck.simulate(prob, algos, steps=3, replicates=2, backend="array_api_strict")
    assert res.frame["mean"].notna().all()


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_cupy_entry_points_fail_at_the_start():
    """Every entry point that takes a backend builds it first: no CuPy, a clear error."""
    with pytest.raises(RuntimeError, match=r"backend='cupy' needs CuPy"):
        Backend("cupy")
    with pytest.raises(RuntimeError, match=r"backend='cupy' needs CuPy"):
        ck.simulate(
            ck.LeastSquares.gaussian(3),
            DeepSqueeze(T.ring(4), STEP, "top-k:1", 0.5),
            steps=2,
            backend="cupy",
        )
    with pytest.raises(RuntimeError, match=r"backend='cupy' needs CuPy"):
        tune_consensus_step(T.ring(4), "top-k:1", backend=Backend("cupy"))
