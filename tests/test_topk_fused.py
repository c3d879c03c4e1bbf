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
from convkit import _kernel_switch, _kernels
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
            m.setitem(_kernel_switch._BUILT, _kernels.TOPK_KERNELS, None)
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
        # sparse W (ring(32): 3/32 of the entries, one-peer exponential(16): 2/16): the
        # *_mix_update kernels, mixing included, against SciPy's CSR product
        lambda: CHOCOSGD(ring(32), ck.Constant(0.05), TopK(k=3), 0.3, name="a"),
        lambda: CHOCOSGD(
            ring(32), ck.Constant(0.05), TopK(k=3), 0.3, order="reference_code", name="a"
        ),
        lambda: DeepSqueeze(ring(32), ck.Constant(0.05), TopK(fraction=0.2), 0.3, name="a"),
        lambda: CHOCOSGD(one_peer_exponential(16), ck.Constant(0.05), "top-k:2", 0.5, name="a"),
        lambda: DeepSqueeze(one_peer_exponential(16), ck.Constant(0.05), "top-k:2", 0.5, name="a"),
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
    """The path users call (the algorithms' step on NumPy float blocks) uses the kernels: the
    ``*_mix_update`` ones (mixing fused) on a sparse W such as the benchmark's ring(64), the
    others on a dense W (ring(8))."""
    calls = []
    names = (
        "topk_choco_update",
        "topk_choco_copies_update",
        "topk_deepsqueeze_update",
        "topk_choco_mix_update",
        "topk_choco_copies_mix_update",
        "topk_deepsqueeze_mix_update",
    )
    for name in names:
        real = getattr(_kernels, name)
        monkeypatch.setattr(
            f"convkit.algorithms.compressed_gossip.{name}",
            lambda *a, _real=real, _name=name, **kw: calls.append(_name) or _real(*a, **kw),
        )
    prob = ck.LeastSquares.gaussian(d=20, noise=1.0, seed=0)
    # dense W (P = 8): the fused mixing with the "ordered" product (the default of the
    # compressed algorithms), the BLAS's with the old fast path "auto"; sparse W: fused always
    cases = ((8, "auto", "_update"), (8, "ordered", "_mix_update"), (64, "auto", "_mix_update"))
    for P, mixing, suffix in cases:
        calls.clear()
        for algo in (
            CHOCOSGD(ring(P), ck.Constant(0.01), TopK(k=2), 0.2),
            CHOCOSGD(ring(P), ck.Constant(0.01), TopK(k=2), 0.2, order="reference_code"),
            DeepSqueeze(ring(P), ck.Constant(0.01), TopK(k=2), 0.2),
        ):
            algo.mixing = mixing
            algo.prepare(3)
            stream = ck.Backend().stream(0)
            state = algo.init(np.zeros((2, P, 20)), stream)
            for k in (1, 2, 3):
                batch = prob.sample(stream, (2, P, 1))
                state = algo.step(state, GradientOracle(prob, batch), k, None)
        assert len(calls) == 9 and all(c.endswith(suffix) for c in calls), (P, calls)
        if suffix == "_update":
            assert not any(c.endswith("_mix_update") for c in calls)


def _scores(rng, n, d, dtype):
    """Absolute values of every kind the selection meets: Gaussian, heavy-tailed, tied small
    integers, zeros, a huge dynamic range (subnormals to 1e300), inf and NaN."""
    kind = int(rng.integers(0, 6))
    if kind == 0:
        x = rng.standard_normal((n, d))
    elif kind == 1:
        x = rng.standard_cauchy((n, d))
    elif kind == 2:
        x = rng.integers(-3, 4, size=(n, d)) * 0.5
    elif kind == 3:
        x = rng.standard_normal((n, d)) * np.exp(rng.uniform(-700, 690, (n, d)))
    elif kind == 4:
        x = np.zeros((n, d))
        x[:, : int(rng.integers(0, d + 1))] = 1.0
    else:
        x = rng.standard_normal((n, d))
        x[rng.random(x.shape) < 0.2] = np.nan
        x[rng.random(x.shape) < 0.1] = -np.inf
        x[rng.random(x.shape) < 0.2] = 0.0
    with np.errstate(over="ignore"):
        return np.abs(x.astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_selection_equals_numpy_partition(dtype):
    """The k-th largest score of every row (compiled ``kth_rows``) is NumPy's partition
    threshold, bit for bit (NaN: both NaN), for every k, rows short and long, candidate sets
    of every size (rank count over 16 or 32 slots, quickselect above)."""
    rng = np.random.default_rng(5)
    for _ in range(400):
        d = int(rng.integers(1, 200))
        k = int(rng.integers(1, d + 1))
        s = _scores(rng, int(rng.integers(1, 40)), d, dtype)
        want = np.partition(s, d - k, axis=-1)[:, d - k]
        before = s.copy()
        got = _kernels._thresholds(s, k)
        assert got.dtype == s.dtype
        assert np.array_equal(got, want, equal_nan=True), (d, k)
        assert np.array_equal(s, before, equal_nan=True)  # the scores are left alone


def test_mix_update_kernels_match_generic_path_on_tied_blocks(generic):
    """One fused CHOCO-SGD (both orders) / DeepSqueeze step, mixing with a sparse W_t
    included, against the NumPy expressions and Topology.mix (SciPy's CSR product): every
    output array equal."""
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.float32):
        for topo, t in ((ring(32).W_eta(0.3), 0), (one_peer_exponential(16).W_eta(0.5), 3)):
            P = topo.n
            for d, k in ((12, 3), (12, 1), (12, 11), (30, 3)):
                X, Xh = (_tied_block(rng, (3, P, d), dtype) for _ in range(2))
                X += rng.standard_normal(X.shape).astype(dtype)  # rounding in the mixing
                csr = topo.sparse_block_csr(X, t)
                assert csr is not None
                comp = TopK(k=k)

                a = [X.copy(), Xh.copy()]
                assert _kernels.topk_choco_copies_mix_update(a[0], a[1], k, csr)
                b = [X.copy(), Xh.copy()]
                b[1] += generic(comp.compress, b[0] - b[1])
                b[0] += topo.mix(b[1], t)
                b[0] -= b[1]
                assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True)), (d, k)

                a = [X.copy(), Xh.copy()]
                assert _kernels.topk_choco_mix_update(a[0], a[1], k, csr)
                b = [X.copy(), Xh.copy()]
                b[0] += topo.mix(b[1], t)
                b[0] -= b[1]
                b[1] += generic(comp.compress, b[0] - b[1])
                assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True)), (d, k)

                a = [X.copy(), Xh.copy()]
                va = _kernels.topk_deepsqueeze_mix_update(a[0], a[1], k, csr)
                b = [X.copy(), Xh.copy()]
                b[1] += b[0]
                vb = generic(comp.compress, b[1])
                b[1] -= vb
                b[0] -= vb
                b[0] += topo.mix(vb, t)
                assert np.array_equal(va, vb)
                assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True)), (d, k)


def test_sparse_block_csr_is_the_operator_of_mix():
    """sparse_block_csr gives the CSR arrays mix uses for a sparse W (their compiled product
    equals mix bit for bit), and None where mix uses another product."""
    from convkit.topology import _compiled_csr_matches_scipy

    assert _compiled_csr_matches_scipy()
    rng = np.random.default_rng(4)
    topo = ring(40)
    for dtype in (np.float64, np.float32):
        X = rng.standard_normal((3, 40, 17)).astype(dtype)
        indptr, indices, data = topo.sparse_block_csr(X)
        assert data.dtype == dtype and indptr.shape == (3 * 40 + 1,)
        got = _kernels.csr_product(indptr, indices, data, X.reshape(120, 17))
        assert np.array_equal(got.reshape(X.shape), topo.mix(X))
    X = np.ones((2, 8, 5))
    assert ring(8).sparse_block_csr(X) is None  # dense W: mix uses a matrix product
    assert topo.sparse_block_csr(np.ones((2, 40, 5), dtype=np.int64)) is None
    assert topo.sparse_block_csr(np.ones((40, 5))) is None
    assert not _kernels.topk_choco_copies_mix_update(X, X.copy(), 2, None)
    assert _kernels.topk_deepsqueeze_mix_update(X, X.copy(), 2, None) is None


def test_fused_mixing_path_identical_for_any_threads_and_memory_limit():
    """The *_mix_update kernels (sparse ring(32)) give the same values whatever the thread
    count and the memory limit (replicate blocks split across threads and chunks)."""
    import sys
    import warnings

    sim = sys.modules["convkit.simulate"]
    block = sim.REPLICATE_BLOCK
    prob = ck.LeastSquares.gaussian(d=8, noise=0.5, seed=1)
    algos = [
        CHOCOSGD(ring(32), ck.Constant(0.05), TopK(k=2), 0.3, name="choco"),
        CHOCOSGD(ring(32), ck.Constant(0.05), TopK(k=2), 0.3, order="reference_code", name="r"),
        DeepSqueeze(ring(32), ck.Constant(0.05), TopK(k=2), 0.3, name="ds"),
    ]
    per = sim._state_bytes_per_replicate(prob, algos, "float64")
    runs = []
    for limit, threads in ((1e12, 1), (1e12, 2), (block * per + 1, 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ck.DivergenceWarning)
            runs.append(
                ck.simulate(
                    prob,
                    algos,
                    steps=8,
                    replicates=2 * block + 20,
                    seed=3,
                    memory_limit=limit,
                    threads=threads,
                )
            )
    assert runs[-1].meta["chunks"] > 1 and runs[1].meta["parallel"]["threads"] == 2
    for res in runs[1:]:
        for label, cv in runs[0].values.items():
            assert np.array_equal(cv.values, res.values[label].values, equal_nan=True), label


def test_fused_selection_is_declared_and_not_inherited_by_an_override():
    """The fused top-k path reads the compressor's declaration, never its class: a subclass
    that overrides ``compress`` loses it (negative control: it would otherwise be fused with
    TopK's selection instead of its own), one that does not keeps it."""
    import numpy as np

    from convkit import Constant
    from convkit.algorithms import CHOCOSGD
    from convkit.compression import TopK
    from convkit.topology import ring

    class Halved(TopK):
        def compress(self, x, stream=None):
            return 0.5 * super().compress(x, stream)

    class Same(TopK):
        pass

    X = np.ones((4, 8))
    assert TopK(k=2).fused_selection == "top-k" and Same(k=2).fused_selection == "top-k"
    assert Halved(k=2).fused_selection is None
    fused = [
        CHOCOSGD(ring(4), Constant(0.1), comp, 0.5)._fused_topk(X)
        for comp in (TopK(k=2), Same(k=2), Halved(k=2))
    ]
    assert fused == [2, 2, None]
