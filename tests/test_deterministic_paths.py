"""The CPU-independent paths of the decentralized algorithms (issue 36).

``Topology.mix(method="ordered")`` sums every row in a fixed order (``acc = 0``, then
``acc += W_ij x_j`` for the row's non-zero ``W_ij`` in increasing ``j``, a multiply then an
add), whatever ``W``'s density; D-PSGD and the compressed algorithms mix with it, so that a top-k
selection (or a stochastic rounding) sees the same bits on every x86-64 CPU.  Checked here:
the product equals that loop exactly (a reversed order is told apart: the negative control),
which algorithms use it, and that CHOCO-SGD and DeepSqueeze with top-k and D-PSGD step to the same bits
in the environment of ``tools/portable_env.py`` (no AVX512 in numba, NumPy or OpenBLAS, other
thread counts) as here.
"""

from __future__ import annotations

import numpy as np
import pytest
from portable_probe import host_has_avx512, run_probe

import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD, DCDPSGD, DPSGD, ECDPSGD, DeepSqueeze
from convkit.compression import QSGD, TopK
from convkit.topology import complete, from_matrix, ring


def _ordered_loop(W: np.ndarray, X: np.ndarray, reverse: bool = False) -> np.ndarray:
    """``(W X)[r, i] = sum_j W_ij X[r, j]`` by the fixed-order loop over the non-zero
    ``W_ij`` (increasing ``j``, or decreasing with ``reverse``), vectorized over r and d."""
    out = np.zeros_like(X)
    for i in range(W.shape[0]):
        cols = np.flatnonzero(W[i])
        acc = np.zeros_like(X[:, 0])
        for j in cols[::-1] if reverse else cols:
            acc = acc + W[i, j] * X[:, j]  # a rounded product, then a rounded sum
        out[:, i] = acc
    return out


def _dense_doubly_stochastic(P: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.random((P, P))
    A = (A + A.T) / 2
    for _ in range(200):  # Sinkhorn: symmetric, doubly stochastic, every entry non-zero
        A /= A.sum(axis=1, keepdims=True)
        A = (A + A.T) / 2
    return A


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("which", ["ring8", "ring16", "complete16", "dense12"])
def test_ordered_mixing_is_the_fixed_order_sum(which, dtype):
    topo = {
        "ring8": lambda: ring(8),
        "ring16": lambda: ring(16),
        "complete16": lambda: complete(16),
        "dense12": lambda: from_matrix(_dense_doubly_stochastic(12, 0)),
    }[which]()
    X = np.random.default_rng(1).standard_normal((5, topo.n, 37)).astype(dtype)
    W = topo.W.astype(dtype)
    got = topo.mix(X, method="ordered")
    assert got.dtype == dtype
    assert np.array_equal(got, _ordered_loop(W, X))
    if which in ("complete16", "dense12"):  # many terms per row: the order shows in the bits
        assert not np.array_equal(got, _ordered_loop(W, X, reverse=True))


def test_decentralized_algorithms_mix_in_order():
    topo, g = ring(8), ck.Constant(0.01)
    compressed = (
        CHOCOSGD(topo, g, TopK(k=2), 0.3),
        DeepSqueeze(topo, g, TopK(k=2), 0.1),
        DCDPSGD(topo, g, QSGD(s=4)),
        ECDPSGD(topo, g, QSGD(s=4)),
    )
    assert all(a.mixing == "ordered" for a in compressed)
    assert DPSGD(topo, g).mixing == "ordered"
    # the dense ring's CSR arrays are offered to the fused kernels for "ordered" only
    X = np.zeros((2, 8, 5))
    assert topo.sparse_block_csr(X, 0) is None
    indptr, indices, data = topo.sparse_block_csr(X, 0, "ordered")
    assert indptr.shape == (17,) and data.size == 2 * 8 * 3


# one run of every compressed top-k engine on the dense rings of the committed analyses:
# the hash of every state after every step
PROBE = """
import hashlib, json
import numpy as np
import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD, DPSGD, DeepSqueeze
from convkit.compression import TopK
from convkit.problems.base import GradientOracle
from convkit.topology import complete, ring
out = {}
prob = ck.LeastSquares.gaussian(d=50, noise=0.5, seed=0)
for tname, topo in (("ring16", ring(16)), ("complete8", complete(8))):
    g = ck.Constant(0.05)
    algos = {
        "choco": CHOCOSGD(topo, g, TopK(k=5), 0.3),
        "choco-ref": CHOCOSGD(topo, g, TopK(k=5), 0.3, order="reference_code"),
        "deepsqueeze": DeepSqueeze(topo, g, TopK(k=5), 0.1),
        "dpsgd": DPSGD(topo, g),
    }
    for name, algo in algos.items():
        algo.mixing = MIXING
        algo.prepare(60)
        stream = ck.Backend().stream(3)
        state = algo.init(np.zeros((8, topo.n, 50)), stream)
        h = hashlib.sha1()
        for k in range(1, 61):
            state = algo.step(state, GradientOracle(prob, prob.sample(stream, (8, topo.n, 1))), k, stream)
            h.update(state.x.tobytes())
        out[tname + " " + name] = h.hexdigest()
from convkit.algorithms.decentralized import log_grid, tune_consensus_step
tuned = tune_consensus_step(ring(16), TopK(k=5), d=50, seed=0)
out["tuner"] = [tuned.gamma_c.hex(), [r.hex() for r in tuned.rates.tolist()]]
out["grids"] = [v.hex() for v in log_grid(1e-3, 1.0, 41).tolist() + log_grid(0.01, 1.0, 25).tolist()]
print(json.dumps(out))
"""


def _hashes(mixing: str, portable: bool) -> dict:
    return run_probe(f"MIXING = {mixing!r}\n" + PROBE, portable)


def test_topk_engines_step_to_the_same_bits_in_the_portable_environment():
    pytest.importorskip("numba")
    assert _hashes("ordered", False) == _hashes("ordered", True)
    if host_has_avx512():  # negative control: the BLAS's product (old fast path) moves them
        fast, narrow = _hashes("auto", False), _hashes("auto", True)
        assert sum(fast[k] != narrow[k] for k in fast) >= 3, (fast, narrow)


def test_log_grid_is_the_libm_formula():
    from convkit.algorithms.decentralized import log_grid

    g = log_grid(1e-3, 1.0, 41)
    assert g[0] == 1e-3 and g[-1] == 1.0 and np.all(np.diff(g) > 0)
    assert np.array_equal(g, [10.0 ** (-3 + 3 * i / 40) for i in range(41)])
    assert np.allclose(
        g, np.geomspace(1e-3, 1.0, 41), rtol=2e-15, atol=0
    )  # geomspace: <= 8 ulps off
    with pytest.raises(ValueError, match="low"):
        log_grid(0.0, 1.0, 5)
    with pytest.raises(ValueError, match="n"):
        log_grid(0.1, 1.0, 1)
