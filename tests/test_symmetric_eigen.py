"""Eigenvalues of symmetric matrices with the same bits on every x86-64 CPU (issue 36).

:func:`convkit._symmetric_eigen.symmetric_eigenvalues` (cyclic Jacobi, every operation in an
order fixed by the code) and :func:`~convkit._symmetric_eigen.two_norm`, used by
:class:`convkit.topology.Topology` for its eigenvalues, ``lambda_2``, ``lambda_n``, ``rho``,
``spectral_gap`` and ``beta``.  Checked here: agreement with LAPACK's ``eigvalsh`` and with a
40-digit reference to a multiple of ``n u ||M||_2``, closed forms of the mixing matrices of
rings, tori, stars, complete graphs and hypercubes, exact cases (diagonal, identity, power-of-two
scaling), the compiled kernel and the NumPy path giving the same bits, the input checks, and the
same bits in the environment of ``tools/portable_env.py`` (no AVX512 in numba, NumPy or
OpenBLAS, other thread counts) as here, where ``eigvalsh``'s bits move (the negative control).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from portable_probe import host_has_avx512, run_probe

import convkit as ck
from convkit import _symmetric_eigen as se
from convkit import topology as T
from convkit._symmetric_eigen import symmetric_eigenvalues, two_norm

U = 2.0**-53


def _random_symmetric(n: int, seed: int) -> np.ndarray:
    B = np.random.default_rng(seed).standard_normal((n, n))
    return (B + B.T) / 2


def _bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x, dtype=np.float64).tobytes()


# ------------------------------------------------------------------ accuracy


@pytest.mark.parametrize("n", range(1, 71))
def test_agrees_with_eigvalsh_on_random_symmetric_matrices(n):
    # both are backward stable with an error of a small multiple of n u ||M||_2 (GvL 8.5.4,
    # Demmel & Veselic 1992); measured worst over 20 matrices per size: 1.8 n u ||M||_2
    for seed in range(3):
        M = _random_symmetric(n, seed)
        ref = np.linalg.eigvalsh(M)
        got = symmetric_eigenvalues(M)
        assert got.shape == (n,) and got.dtype == np.float64
        assert np.all(np.diff(got) >= 0)  # ascending
        err = np.max(np.abs(got - ref))
        assert err <= 4 * n * U * np.max(np.abs(ref)), (n, seed, err / (U * np.max(np.abs(ref))))


@pytest.mark.parametrize("n", [5, 20, 40])
def test_within_n_ulp_of_a_40_digit_reference(n):
    mpmath = pytest.importorskip("mpmath")
    M = _random_symmetric(n, 7)
    with mpmath.workdps(40):
        ref = np.array(
            sorted(float(x) for x in mpmath.eigsy(mpmath.matrix(M.tolist()), eigvals_only=True))
        )
    err = np.max(np.abs(symmetric_eigenvalues(M) - ref))
    # measured 0.2 n to 0.3 n ulp of ||M||_2 (eigvalsh: up to 0.9 n)
    assert err <= n * U * np.max(np.abs(ref)), err / (U * np.max(np.abs(ref)))


def test_two_by_two_closed_form():
    rng = np.random.default_rng(3)
    for a, b, c in rng.standard_normal((200, 3)):
        M = np.array([[a, b], [b, c]])
        mid, rad = (a + c) / 2, math.hypot((a - c) / 2, b)
        got = symmetric_eigenvalues(M)
        np.testing.assert_allclose(
            got, [mid - rad, mid + rad], rtol=0, atol=4 * U * (abs(mid) + rad)
        )


def test_exact_cases_diagonal_identity_zero_and_one_by_one():
    d = np.array([3.0, -1.5, 0.0, 2.0**-40, 7.25])
    assert _bits(symmetric_eigenvalues(np.diag(d))) == _bits(np.sort(d))  # no rotation at all
    assert _bits(symmetric_eigenvalues(np.eye(9))) == _bits(np.ones(9))
    assert _bits(symmetric_eigenvalues(np.zeros((4, 4)))) == _bits(np.zeros(4))
    assert _bits(symmetric_eigenvalues(np.array([[-2.5]]))) == _bits(np.array([-2.5]))
    assert symmetric_eigenvalues(np.zeros((0, 0))).shape == (0,)


def test_repeated_eigenvalues_and_a_graded_matrix():
    rng = np.random.default_rng(5)
    Q, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    lam = np.array([1.0, 1, 1, 1, 2, 2, 2, -3, -3, 0, 0, 5])
    M = (Q * lam) @ Q.T
    M = (M + M.T) / 2
    n = 12
    np.testing.assert_allclose(symmetric_eigenvalues(M), np.sort(lam), rtol=0, atol=4 * n * U * 5)
    np.testing.assert_allclose(
        symmetric_eigenvalues(M), np.linalg.eigvalsh(M), rtol=0, atol=4 * n * U * 5
    )
    # graded: diagonal 10^0 .. 10^-14 with couplings 10^-3 of the geometric mean
    g = 10.0 ** -np.arange(15.0)
    G = np.diag(g) + 1e-3 * np.sqrt(np.outer(g, g)) * (1 - np.eye(15))
    ref = np.linalg.eigvalsh(G)
    np.testing.assert_allclose(symmetric_eigenvalues(G), ref, rtol=0, atol=4 * 15 * U * ref[-1])


def test_power_of_two_scaling_is_exact_and_nothing_overflows():
    M = _random_symmetric(17, 11)
    base = symmetric_eigenvalues(M)
    for e in (-600, -30, 30, 600, 1000):
        assert _bits(symmetric_eigenvalues(np.ldexp(M, e))) == _bits(np.ldexp(base, e))
    big = symmetric_eigenvalues(M * 1e300)  # its squares would overflow
    assert np.all(np.isfinite(big))
    np.testing.assert_allclose(
        big, np.linalg.eigvalsh(M * 1e300), rtol=0, atol=4 * 17 * U * 1e300 * 6
    )


# ------------------------------------------------------------------ mixing matrices


@pytest.mark.parametrize("n", [3, 4, 5, 8, 16, 25, 40, 64])
def test_ring_metropolis_closed_form(n):
    # every node has degree 2: W_ij = 1/3 on self and both neighbours (module docstring of
    # convkit.topology), a circulant with eigenvalues 1/3 + 2/3 cos(2 pi k / n)
    topo = T.ring(n, "metropolis")
    exact = np.sort(1 / 3 + 2 / 3 * np.cos(2 * np.pi * np.arange(n) / n))
    np.testing.assert_allclose(symmetric_eigenvalues(topo.W), exact, rtol=0, atol=2 * n * U)
    np.testing.assert_allclose(topo.eigenvalues, exact[::-1], rtol=0, atol=2 * n * U)


def test_torus_star_complete_hypercube_closed_forms():
    cases = []
    r, c = 4, 6  # degree 4, uniform weights 1/5: 1/5 + 2/5 cos(2 pi a / r) + 2/5 cos(2 pi b / c)
    a, b = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
    cases.append(
        (T.torus(r, c), 0.2 + 0.4 * np.cos(2 * np.pi * a / r) + 0.4 * np.cos(2 * np.pi * b / c))
    )
    n = 10  # star, Metropolis: W_0i = 1/n, leaves 1 - 1/n: {0, 1 - 1/n (n - 2 times), 1}
    cases.append((T.star(n), np.r_[0.0, np.full(n - 2, 1 - 1 / n), 1.0]))
    cases.append((T.complete(12), np.r_[np.zeros(11), 1.0]))  # W = J
    d = 4  # hypercube, uniform: (1 + d - 2k) / (1 + d), multiplicity C(d, k)
    cases.append(
        (
            T.hypercube(2**d),
            np.repeat(
                [(1 + d - 2 * k) / (1 + d) for k in range(d + 1)],
                [math.comb(d, k) for k in range(d + 1)],
            ),
        )
    )
    for topo, exact in cases:
        exact = np.sort(exact.ravel())
        np.testing.assert_allclose(
            symmetric_eigenvalues(topo.W), exact, rtol=0, atol=2 * topo.n * U, err_msg=topo.name
        )


@pytest.mark.parametrize(
    "topo",
    [
        T.ring(16),
        T.torus(5),
        T.complete(8),
        T.star(12),
        T.erdos_renyi(30, 0.2, seed=3),
        T.erdos_renyi(64, 0.1, seed=5),
        T.exponential(16),
        T.ring(9, lazy=True),
    ],
    ids=lambda t: t.name,
)
def test_topology_spectral_constants(topo):
    ref = np.sort(np.linalg.eigvalsh(topo.W))[::-1]
    tol = 4 * topo.n * U
    assert _bits(topo.eigenvalues) == _bits(symmetric_eigenvalues(topo.W)[::-1])
    np.testing.assert_allclose(topo.eigenvalues, ref, rtol=0, atol=tol)
    assert abs(topo.eigenvalues[0] - 1.0) <= tol  # doubly stochastic
    assert abs(topo.lambda_2 - ref[1]) <= tol and abs(topo.lambda_n - ref[-1]) <= tol
    assert topo.rho == max(abs(topo.lambda_2), abs(topo.lambda_n))
    assert topo.spectral_gap == 1.0 - topo.rho and topo.beta == 1.0 - topo.lambda_n


def test_time_varying_rho_by_fixed_order_products():
    assert T.one_peer_exponential(8).rho == 0.0  # prod_k (I + S^(2^k)) / 2 = J
    # a period of two different mixing matrices on 12 nodes
    W0, W1 = T.ring(12).W, T.erdos_renyi(12, 0.4, seed=1).W
    G = T.ring(12).graph
    topo = T.Topology("two", W0, G, (W0, W1))
    J = np.full((12, 12), 1 / 12)
    old = np.linalg.norm(W1 @ W0 - J, 2) ** 0.5
    assert abs(topo.rho - old) <= 4 * 12 * U * old
    with ck.kernels(enabled=False):
        again = T.Topology("two", W0, G, (W0, W1)).rho
    assert again == topo.rho


def test_two_norm_of_non_symmetric_matrices():
    rng = np.random.default_rng(8)
    for n in (1, 2, 5, 17, 40):
        M = rng.standard_normal((n, n))
        ref = np.linalg.norm(M, 2)
        got = two_norm(M)
        assert abs(got - ref) <= 4 * n * U * ref, (n, (got - ref) / (U * ref))
        with ck.kernels(enabled=False):
            assert two_norm(M) == got
    assert two_norm(np.zeros((3, 3))) == 0.0
    assert abs(two_norm(np.ldexp(np.eye(4), 900)) - 2.0**900) == 0.0  # scaled, no overflow


# ------------------------------------------------------------------ the two paths, the checks


def test_kernel_and_numpy_paths_give_the_same_bits():
    pytest.importorskip("numba")
    mats = [_random_symmetric(n, n) for n in (1, 2, 3, 8, 13, 31, 50)]
    mats += [t.W for t in (T.ring(20), T.torus(4), T.star(9), T.erdos_renyi(25, 0.3, seed=2))]
    if se._kernel() is None:
        pytest.skip("the compiled kernels cannot be used here (CONVKIT_NO_NUMBA)")
    compiled = [symmetric_eigenvalues(M) for M in mats]
    with ck.kernels(enabled=False):
        assert se._kernel() is None
        numpy_path = [symmetric_eigenvalues(M) for M in mats]
    assert [_bits(x) for x in compiled] == [_bits(x) for x in numpy_path]
    # the comparison sees the last bit: a matrix one ulp away gives other bits
    M = mats[4].copy()
    M[1, 0] = M[0, 1] = np.nextafter(M[0, 1], np.inf)
    assert _bits(symmetric_eigenvalues(M)) != _bits(compiled[4])


def test_input_checks_name_the_parameter():
    with pytest.raises(ValueError, match=r"M must be a square 2-D matrix, got shape \(3, 4\)"):
        symmetric_eigenvalues(np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"W must be a square 2-D matrix, got shape \(3,\)"):
        symmetric_eigenvalues(np.zeros(3), name="W")
    with pytest.raises(TypeError, match="M must be a float64 matrix, got dtype float32"):
        symmetric_eigenvalues(np.eye(3, dtype=np.float32))
    with pytest.raises(TypeError, match="got dtype int64"):
        symmetric_eigenvalues(np.eye(3, dtype=np.int64))
    bad = np.eye(3)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="M must contain only finite values, found 1 NaN or inf"):
        symmetric_eigenvalues(bad)
    asym = np.eye(3)
    asym[0, 2] = 1e-9
    with pytest.raises(ValueError, match=r"M is not symmetric: max \|M - M\^T\| = 1e-09"):
        symmetric_eigenvalues(asym)
    asym[0, 2] = 1e-11  # within SYMMETRY_RTOL of the largest entry: the lower triangle is used
    assert _bits(symmetric_eigenvalues(asym)) == _bits(np.ones(3))
    with pytest.raises(ValueError, match="must be a non-empty square"):
        two_norm(np.zeros((2, 3)))


def test_too_few_sweeps_raise(monkeypatch):
    monkeypatch.setattr(se, "MAX_SWEEPS", 1)
    with pytest.raises(RuntimeError, match=r"not diagonalized after 1 Jacobi sweeps"):
        symmetric_eigenvalues(_random_symmetric(10, 0))


# ------------------------------------------------------------------ portable


PROBE = r"""
import hashlib, json
import numpy as np
from convkit import topology as T
from convkit._symmetric_eigen import symmetric_eigenvalues, two_norm

def h(x):
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float64).tobytes()).hexdigest()[:16]

rng = np.random.default_rng(36)
mats = {}
for n in (3, 8, 16, 24, 33, 48, 64, 70, 100):
    B = rng.standard_normal((n, n))
    mats[f"random {n}"] = (B + B.T) / 2
for t in (T.ring(16), T.ring(25, "metropolis"), T.torus(5), T.torus(4, 6), T.complete(12),
          T.star(10), T.hypercube(16), T.exponential(16), T.erdos_renyi(30, 0.2, seed=3),
          T.erdos_renyi(64, 0.1, seed=5), T.random_regular(40, 3, seed=2)):
    mats[t.name] = t.W
fixed = {k: h(symmetric_eigenvalues(M)) for k, M in mats.items()}
blas = {k: h(np.linalg.eigvalsh(M)) for k, M in mats.items()}
for n in (6, 30):
    M = rng.standard_normal((n, n))
    fixed[f"two_norm {n}"] = h(np.array([two_norm(M)]))
    blas[f"two_norm {n}"] = h(np.array([np.linalg.norm(M, 2)]))
topo = T.erdos_renyi(40, 0.15, seed=4)
fixed["topology"] = h(np.r_[topo.eigenvalues, topo.rho, topo.spectral_gap, topo.beta])
print(json.dumps({"fixed": fixed, "blas": blas}))
"""


def test_eigenvalues_have_the_same_bits_in_the_portable_environment():
    pytest.importorskip("numba")
    here, portable = run_probe(PROBE, False), run_probe(PROBE, True)
    assert len(here["fixed"]) >= 20
    differ = sorted(k for k in here["fixed"] if here["fixed"][k] != portable["fixed"][k])
    assert not differ, differ
    if host_has_avx512():  # negative control: LAPACK's eigvalsh moves (measured: 19 of 20)
        moved = [k for k in here["blas"] if here["blas"][k] != portable["blas"][k]]
        assert moved, "eigvalsh gave the same bits in both environments"
