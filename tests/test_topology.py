"""Topologies: mixing matrices, spectral constants, mixing strategies, validation."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convkit import topology as T
from convkit.topology_spec import get_topology

EXACT = 1e-12

STATIC = [
    T.ring(2),
    T.ring(9),
    T.ring(16, "metropolis"),
    T.ring(12, lazy=True),
    T.torus(3, 4),
    T.torus(4),
    T.complete(6),
    T.complete(7, "metropolis"),
    T.star(7),
    T.path(5),
    T.path(5, "uniform", lazy=True),
    T.hypercube(16),
    T.exponential(12),
    T.exponential(16, "metropolis"),
    T.erdos_renyi(20, 0.25, seed=3),
    T.random_regular(14, 3, seed=5),
    T.from_graph(nx.petersen_graph(), "metropolis"),
    T.from_graph(nx.karate_club_graph(), "uniform", lazy=True),
    T.edgeless(5),
]


def _ids(tops):
    return [t.name for t in tops]


@pytest.mark.parametrize("top", STATIC, ids=_ids(STATIC))
def test_doubly_stochastic_symmetric_nonnegative(top):
    W = top.W
    assert W.shape == (top.n, top.n)
    np.testing.assert_allclose(W.sum(axis=0), 1.0, rtol=0, atol=EXACT)
    np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=0, atol=EXACT)
    np.testing.assert_array_equal(W, W.T)
    assert W.min() >= 0.0
    # supported on the graph's edges plus the diagonal
    adj = nx.to_numpy_array(top.graph, nodelist=range(top.n)) != 0
    off = (W != 0) & ~np.eye(top.n, dtype=bool)
    assert not (off & ~adj).any()
    assert top.period == 1 and not top.time_varying


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 64])
def test_ring_uniform_eigenvalues(n):
    top = T.ring(n)
    if n >= 3:
        np.testing.assert_allclose(np.diag(top.W), 1 / 3, rtol=0, atol=EXACT)
        assert top.W[0, 1] == pytest.approx(1 / 3, abs=EXACT)
        assert top.W[0, n - 1] == pytest.approx(1 / 3, abs=EXACT)
        expected = (1 + 2 * np.cos(2 * np.pi * np.arange(n) / n)) / 3
        np.testing.assert_allclose(top.eigenvalues, np.sort(expected)[::-1], rtol=0, atol=EXACT)
    lam = top.eigenvalues
    assert lam[0] == pytest.approx(1.0, abs=EXACT)
    assert top.lambda_2 == lam[1] and top.lambda_n == lam[-1]
    assert top.rho == pytest.approx(max(abs(lam[1]), abs(lam[-1])), abs=0)
    assert top.spectral_gap == pytest.approx(1 - top.rho, abs=0)
    assert top.beta == pytest.approx(np.linalg.norm(np.eye(n) - top.W, 2), abs=EXACT)


@pytest.mark.parametrize("top", STATIC[:-1], ids=_ids(STATIC[:-1]))
def test_rho_is_norm_of_W_minus_J(top):
    n = top.n
    assert top.rho == pytest.approx(np.linalg.norm(top.W - np.full((n, n), 1 / n), 2), abs=EXACT)
    assert 0 <= top.spectral_gap <= 1


def test_known_spectra():
    assert T.complete(8).rho == pytest.approx(0.0, abs=EXACT)
    np.testing.assert_allclose(T.complete(8).W, np.full((8, 8), 1 / 8), atol=EXACT)
    # hypercube 2^k with uniform weights 1/(k+1): eigenvalues 1 - 2 m/(k+1), m = 0..k
    top = T.hypercube(8)
    np.testing.assert_allclose(np.unique(top.eigenvalues.round(12)), [-0.5, 0.0, 0.5, 1.0])
    # lazy: eigenvalues (1 + lambda)/2
    base, lazy = T.ring(10), T.ring(10, lazy=True)
    np.testing.assert_allclose(lazy.eigenvalues, (1 + base.eigenvalues) / 2, atol=EXACT)
    assert lazy.lambda_n >= 0
    edge = T.edgeless(4)
    np.testing.assert_array_equal(edge.W, np.eye(4))
    assert edge.lambda_2 == 1.0 and edge.spectral_gap == 0.0


def test_metropolis_weights_star():
    top = T.star(5)  # hub degree 4, leaves degree 1: W_0j = 1/5, W_jj = 4/5, W_00 = 1/5
    assert top.W[0, 1] == pytest.approx(1 / 5, abs=EXACT)
    assert top.W[1, 1] == pytest.approx(4 / 5, abs=EXACT)
    assert top.W[0, 0] == pytest.approx(1 / 5, abs=EXACT)


def test_exponential_graph_neighbours():
    top = T.exponential(16)
    nbrs = sorted(top.graph.neighbors(0))
    assert nbrs == sorted({1, 2, 4, 8, 15, 14, 12})
    assert top.mix_method(numpy=False) == "shift"


def test_torus_structure():
    top = T.torus(4, 5)
    assert top.n == 20
    assert all(d == 4 for _, d in top.graph.degree())
    assert top.graph.has_edge(0, 4) and top.graph.has_edge(0, 15)


def test_seeded_random_graphs_reproducible():
    a, b = T.erdos_renyi(30, 0.15, seed=7), T.erdos_renyi(30, 0.15, seed=7)
    c = T.erdos_renyi(30, 0.15, seed=8)
    np.testing.assert_array_equal(a.W, b.W)
    assert not np.array_equal(a.W, c.W)
    assert nx.is_connected(a.graph)
    r = T.random_regular(20, 4, seed=1)
    assert all(d == 4 for _, d in r.graph.degree()) and nx.is_connected(r.graph)
    np.testing.assert_array_equal(r.W, T.random_regular(20, 4, seed=1).W)


# ------------------------------------------------------------------------ mixing


MIXABLE = [t for t in STATIC] + [T.ring(70), T.torus(8, 9), T.exponential(64)]


@pytest.mark.parametrize("top", MIXABLE, ids=_ids(MIXABLE))
def test_mix_strategies_agree(top):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, top.n, 5))
    X0 = X.copy()
    ref = np.einsum("ij,rjd->rid", top.W, X)
    methods = ["dense", "sparse", "auto"]
    if top.mix_method(numpy=False) == "shift":
        methods.append("shift")
    for m in methods:
        Y = top.mix(X, method=m)
        assert Y.shape == X.shape and Y.dtype == X.dtype
        np.testing.assert_allclose(Y, ref, rtol=0, atol=EXACT, err_msg=m)
    np.testing.assert_array_equal(X, X0)
    for r in range(3):  # (W X)[r] = W @ X[r]
        np.testing.assert_allclose(top.mix(X)[r], top.W @ X[r], rtol=0, atol=EXACT)


@pytest.mark.parametrize("n", [5, 6, 17])
def test_shift_mix_general_circulant(n):
    """A symmetric circulant W with distinct weights on several offsets (also 0 and n/2)."""
    rng = np.random.default_rng(n)
    half = rng.random(n // 2 + 1)
    first = np.zeros(n)
    for s in range(n // 2 + 1):
        first[s] = first[(-s) % n] = half[s]
    first[2 % n] = first[(-2) % n] = 0.0  # a missing offset
    first /= first.sum()
    W = first[(np.arange(n)[None, :] - np.arange(n)[:, None]) % n]
    top = T.from_matrix(W)
    assert (
        top.mix_method(numpy=False) == "shift" or np.count_nonzero(first[1:]) > T.SHIFT_MAX_OFFSETS
    )
    X = rng.standard_normal((2, n, 3))
    np.testing.assert_allclose(top.mix(X, method="shift"), top.mix(X, method="dense"), atol=EXACT)


def test_mix_auto_rule():
    # NumPy: CSR when at most 1/8 of W's entries are non-zero, dense otherwise
    assert T.ring(256).mix_method() == "sparse"
    assert T.ring(24).mix_method() == "sparse"  # density 3/24
    assert T.ring(16).mix_method() == "dense"  # density 3/16
    assert T.torus(16).mix_method() == "sparse"  # density 5/256
    assert T.exponential(16).mix_method() == "dense"
    assert T.complete(64).mix_method() == "dense"
    assert T.one_peer_exponential(32).mix_method(t=3) == "sparse"
    # other array libraries: shift for circulant W with few offsets, dense otherwise
    assert T.ring(256).mix_method(numpy=False) == "shift"
    assert T.exponential(16).mix_method(numpy=False) == "shift"  # 7 offsets
    assert T.complete(64).mix_method(numpy=False) == "dense"  # circulant, but 63 offsets
    assert T.torus(16).mix_method(numpy=False) == "dense"
    assert T.hypercube(8).mix_method(numpy=False) == "dense"


def test_mix_other_array_library():
    """The generic path (array API: shift via roll, dense via matmul) on array-api-strict."""
    xps = pytest.importorskip("array_api_strict")
    X = np.random.default_rng(7).standard_normal((2, 12, 3))
    for top in (T.ring(12), T.torus(3, 4), T.one_peer_exponential(8)):
        Xn = X[:, : top.n]
        Xs = xps.asarray(Xn)
        for t in range(2):
            ref = top.W_at(t) @ Xn
            for m in ("auto", "dense") + (
                ("shift",) if top.name.startswith(("ring", "one")) else ()
            ):
                Y = top.mix(Xs, t=t, method=m)
                assert type(Y) is type(Xs)
                np.testing.assert_allclose(np.asarray(Y), ref, rtol=0, atol=EXACT, err_msg=m)
    with pytest.raises(ValueError, match="NumPy arrays only"):
        T.ring(5).mix(xps.asarray(np.ones((1, 5, 2))), method="sparse")


def test_mix_float32_and_noncontiguous():
    top = T.ring(11)
    X = np.random.default_rng(1).standard_normal((4, 5, 11)).astype(np.float32)
    Xt = X.transpose(0, 2, 1)  # (4, 11, 5), non-contiguous
    ref = np.einsum("ij,rjd->rid", top.W, Xt.astype(np.float64))
    for m in ("dense", "sparse", "shift"):
        Y = top.mix(Xt, method=m)
        assert Y.dtype == np.float32
        np.testing.assert_allclose(Y, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mix_numpy_fast_path_is_the_chosen_product(dtype):
    """``method="auto"`` on NumPy arrays (its own short path) returns exactly what the
    method it picks returns, for a sparse (ring 24, torus 4x4), a dense (exponential 16) and a
    time-varying graph, contiguous or not."""
    rng = np.random.default_rng(5)
    for top in (T.ring(24), T.torus(4, 4), T.exponential(16), T.one_peer_exponential(16)):
        X = rng.standard_normal((3, 7, top.n)).astype(dtype).transpose(0, 2, 1)
        for t in range(3):
            for Xi in (X, np.ascontiguousarray(X)):
                Y = top.mix(Xi, t=t)
                assert Y.dtype == dtype
                np.testing.assert_array_equal(Y, top.mix(Xi, t=t, method=top.mix_method(t)))


def test_mix_preserves_average():
    top = T.erdos_renyi(25, 0.3, seed=2)
    X = np.random.default_rng(3).standard_normal((2, 25, 4))
    np.testing.assert_allclose(top.mix(X).mean(axis=1), X.mean(axis=1), rtol=0, atol=EXACT)


def test_complete_uniform_mix_is_average_and_edgeless_is_identity():
    X = np.random.default_rng(4).standard_normal((2, 6, 3))
    Y = T.complete(6).mix(X)
    np.testing.assert_allclose(Y, np.broadcast_to(X.mean(1, keepdims=True), X.shape), atol=EXACT)
    np.testing.assert_array_equal(T.edgeless(6).mix(X), X)


# ------------------------------------------------------------------------ W_eta


@pytest.mark.parametrize("top", [T.ring(10), T.torus(3, 5), T.star(6), T.hypercube(8)])
@pytest.mark.parametrize("eta", [0.05, 0.3, 0.5, 0.9, 1.0])
def test_W_eta_eigenvalues_and_gap(top, eta):
    We = top.W_eta(eta)
    np.testing.assert_allclose(We.W, (1 - eta) * np.eye(top.n) + eta * top.W, atol=EXACT)
    np.testing.assert_allclose(We.eigenvalues, 1 - eta * (1 - top.eigenvalues), atol=EXACT)
    l2, ln = top.lambda_2, top.lambda_n
    if eta <= 2 / (2 - l2 - ln):
        assert We.spectral_gap == pytest.approx(eta * (1 - l2), abs=EXACT)
    X = np.random.default_rng(5).standard_normal((2, top.n, 3))
    np.testing.assert_allclose(We.mix(X), (1 - eta) * X + eta * top.mix(X), atol=EXACT)


def test_W_eta_gap_beyond_threshold():
    # ring(4) with W = 0.1 I + 0.45 (S + S^-1): eigenvalues 1, 0.1, 0.1, -0.8, so
    # 2/(2 - lambda_2 - lambda_n) = 2/2.7 < 1; past it the gap is set by lambda_n instead
    S = np.roll(np.eye(4), 1, axis=1)
    top = T.from_matrix(0.1 * np.eye(4) + 0.45 * (S + S.T), nx.cycle_graph(4))
    l2, ln = top.lambda_2, top.lambda_n
    assert (l2, ln) == (pytest.approx(0.1, abs=EXACT), pytest.approx(-0.8, abs=EXACT))
    eta_star = 2 / (2 - l2 - ln)
    assert eta_star < 1
    eta = (eta_star + 1) / 2
    assert top.W_eta(eta).spectral_gap == pytest.approx(1 - abs(1 - eta * (1 - ln)), abs=EXACT)
    assert top.W_eta(eta).spectral_gap < eta * (1 - l2)


# ------------------------------------------------------------------------ time-varying


@pytest.mark.parametrize("n", [2, 4, 8, 32])
def test_one_peer_exponential_exact_averaging(n):
    top = T.one_peer_exponential(n)
    tau = int(np.log2(n))
    assert top.period == tau and top.time_varying == (tau > 1)
    J = np.full((n, n), 1 / n)
    for start in range(tau):  # any tau consecutive iterations
        prod = np.eye(n)
        for t in range(start, start + tau):
            Wt = top.W_at(t)
            np.testing.assert_allclose(Wt.sum(0), 1, atol=EXACT)
            np.testing.assert_allclose(Wt.sum(1), 1, atol=EXACT)
            k = t % tau
            assert Wt[0, 0] == 0.5 and Wt[0, (1 << k) % n] == 0.5
            prod = Wt @ prod
        np.testing.assert_allclose(prod, J, rtol=0, atol=EXACT)
    assert top.rho == 0.0 and top.spectral_gap == 1.0
    X = np.random.default_rng(6).standard_normal((3, n, 4))
    Y = X
    for t in range(tau):
        Yd = top.mix(Y, t=t, method="dense")
        Y = top.mix(Y, t=t)
        np.testing.assert_allclose(Y, Yd, rtol=0, atol=EXACT)
    np.testing.assert_allclose(Y, np.broadcast_to(X.mean(1, keepdims=True), X.shape), atol=EXACT)


def test_time_varying_spectral_errors_and_static_ignores_t():
    top = T.one_peer_exponential(8)
    with pytest.raises(ValueError, match="time-varying"):
        _ = top.lambda_2
    ring = T.ring(8)
    assert ring.W_at(5) is ring.W
    X = np.ones((1, 8, 2))
    np.testing.assert_array_equal(ring.mix(X, t=3), ring.mix(X, t=0))
    assert top.W_eta(0.5).period == 3


# ------------------------------------------------------------------------ from_matrix / errors


def test_from_matrix_accepts_valid():
    W = T.ring(6, "metropolis").W
    top = T.from_matrix(W, nx.cycle_graph(6))
    np.testing.assert_array_equal(top.W, W)
    top2 = T.from_matrix(W)
    assert nx.utils.graphs_equal(top2.graph, T.ring(6).graph)


def _ring_W(n=5):
    return T.ring(n).W.copy()


def _bad_symmetric():
    W = _ring_W()
    W[0, 1] += 0.3
    W[0, 0] -= 0.3
    return W


def _bad_stochastic():
    return 1.2 * _ring_W()


INVALID = [
    ("nonsquare", lambda: T.from_matrix(np.ones((3, 4)) / 4), "square"),
    (
        "not symmetric",
        lambda: T.from_matrix(_bad_symmetric()),
        r"not symmetric: max \|W - W\^T\| = 0.3",
    ),
    ("not stochastic", lambda: T.from_matrix(_bad_stochastic()), "not doubly stochastic"),
    (
        "column sums",
        lambda: T.validate_mixing_matrix(np.array([[0.5, 0.5], [0.2, 0.8]]), symmetric=False),
        "column sums",
    ),
    ("negative", lambda: T.from_matrix(np.array([[1.5, -0.5], [-0.5, 1.5]])), "negative"),
    (
        "off support",
        lambda: T.from_matrix(T.complete(5).W, nx.cycle_graph(5)),
        "not supported on the graph's edges",
    ),
    (
        "disconnected W",
        lambda: T.from_matrix(np.kron(np.eye(2), np.full((3, 3), 1 / 3))),
        r"disconnected \(2 connected components\)",
    ),
    ("disconnected graph", lambda: T.from_graph(nx.Graph([(0, 1), (2, 3)])), "disconnected"),
    ("nan", lambda: T.from_matrix(np.full((2, 2), np.nan)), "finite"),
    ("P<2 ring", lambda: T.ring(1), r"n must be in \[2, inf\), got 1"),
    ("P<2 graph", lambda: T.from_graph(nx.empty_graph(1)), "P >= 2"),
    ("P<2 matrix", lambda: T.from_matrix(np.ones((1, 1))), "P >= 2"),
    ("eta=0", lambda: T.ring(5).W_eta(0.0), r"eta must be in \(0, 1\], got 0"),
    ("eta>1", lambda: T.ring(5).W_eta(1.5), r"eta must be in \(0, 1\], got 1.5"),
    ("eta<0", lambda: T.ring(5).W_eta(-0.1), "eta must be in"),
    ("weights", lambda: T.ring(5, weights="laplace"), "weights must be one of"),
    ("hypercube n", lambda: T.hypercube(12), "power of two"),
    ("one-peer n", lambda: T.one_peer_exponential(6), "power of two"),
    ("ER hopeless", lambda: T.erdos_renyi(50, 0.01, max_tries=3), "no connected Erdos-Renyi"),
    ("regular parity", lambda: T.random_regular(5, 3), "even"),
    ("mix shape", lambda: T.ring(5).mix(np.ones((2, 4, 3))), r"P = 5"),
    ("mix method", lambda: T.ring(5).mix(np.ones((2, 5, 3)), method="fft"), "method must be"),
    ("shift non-circulant", lambda: T.star(5).mix(np.ones((1, 5, 1)), method="shift"), "circulant"),
    ("Topology shape", lambda: T.Topology("x", np.ones((2, 3)), nx.path_graph(2)), "square"),
    ("Topology nodes", lambda: T.Topology("x", np.eye(3), nx.path_graph(2)), "graph has 2 nodes"),
    ("directed graph", lambda: T.from_graph(nx.DiGraph([(0, 1), (1, 0)])), "undirected"),
]


@pytest.mark.parametrize(
    "make,match", [(m, r) for _, m, r in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_invalid_inputs_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_mix_rejects_integer_arrays():
    with pytest.raises(TypeError, match="floating-point"):
        T.ring(5).mix(np.ones((1, 5, 2), dtype=int))


def test_topology_copies_and_freezes_W():
    W = T.ring(4).W.copy()
    top = T.Topology("mine", W, nx.cycle_graph(4))
    W[0, 0] = 7.0  # the caller's array stays theirs
    assert top.W[0, 0] == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        top.W[0, 0] = 1.0


def test_negative_weight_message_names_entry():
    W = np.array([[0.6, 0.5, -0.1], [0.5, 0.5, 0.0], [-0.1, 0.0, 1.1]])
    with pytest.raises(ValueError, match=r"min W_ij = -0.1 at \(i, j\) = \(0, 2\)"):
        T.from_matrix(W)


def test_get_topology():
    assert get_topology("ring", 6).name == T.ring(6).name
    assert get_topology("one-peer-exponential", 4).period == 2
    with pytest.raises(ValueError, match="topology must be one of"):
        get_topology("moebius", 4)


# ------------------------------------------------------------------------ property-based


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    n=st.integers(2, 40),
    p=st.floats(0.05, 1.0),
    seed=st.integers(0, 2**31 - 1),
    weights=st.sampled_from(T.WEIGHT_RULES),
    lazy=st.booleans(),
    eta=st.floats(0.01, 1.0),
)
def test_random_graphs_properties(n, p, seed, weights, lazy, eta):
    """Any connected graph: W symmetric, doubly stochastic, eigenvalues in [-1, 1] with a
    simple eigenvalue 1 (connected), lazy => eigenvalues >= 0; mixing strategies agree and
    preserve the average; W_eta's spectrum is 1 - eta (1 - lambda)."""
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(n, p, seed=seed)
    G.add_edges_from((i, i + 1) for i in range(n - 1))  # make it connected
    top = T.from_graph(G, weights, lazy)
    W = top.W
    np.testing.assert_array_equal(W, W.T)
    np.testing.assert_allclose(W.sum(1), 1.0, rtol=0, atol=EXACT)
    assert W.min() >= 0
    lam = top.eigenvalues
    assert lam[0] == pytest.approx(1.0, abs=1e-10) and lam[1] < 1 - 1e-10
    assert lam[-1] >= -1 - 1e-12
    if lazy:
        assert lam[-1] >= -1e-12
    T.validate_mixing_matrix(W, top.graph)  # the constructors' output passes the validator
    X = rng.standard_normal((2, n, 3))
    ref = np.einsum("ij,rjd->rid", W, X)
    for m in ("dense", "sparse", "auto"):
        np.testing.assert_allclose(top.mix(X, method=m), ref, rtol=0, atol=EXACT)
    np.testing.assert_allclose(top.mix(X).mean(1), X.mean(1), rtol=0, atol=EXACT)
    np.testing.assert_allclose(top.W_eta(eta).eigenvalues, 1 - eta * (1 - lam), atol=1e-10)
