"""Least squares' metrics, gradients and rotation summed in an order fixed by the code (issue 36).

:mod:`convkit.problems._fixed_order`: ``row_dot`` (NumPy's pairwise add-reduction of the
elementwise products), ``vec_mat`` (rows in increasing order, compiled or NumPy, the same bits)
and ``orthogonal_factor`` (Householder QR through them).  Checked here: the orders are the ones
the module states (against explicit loops, with a reversed or BLAS order told apart: the
negative controls), the values agree with the BLAS's formulas to the rounding bound of a dot
product, and :class:`LeastSquares` / :class:`HeterogeneousLeastSquares` (metrics, gradients,
rotations) and a CHOCO-SGD / DeepSqueeze top-k and a DCD-PSGD run's recorded values have the
same bits in the environment of ``tools/portable_env.py`` (no AVX512 in numba, NumPy or
OpenBLAS, other thread counts) as here; the BLAS's ``vecdot`` and LAPACK's QR do not.
"""

from __future__ import annotations

import numpy as np
import pytest
from portable_probe import host_has_avx512, run_probe

import convkit as ck
from convkit.problems._fixed_order import orthogonal_factor, row_dot, vec_mat
from convkit.problems.heterogeneous import HeterogeneousLeastSquares

U = 2.0**-53


def _pairwise(x: np.ndarray) -> float:
    """NumPy's ``pairwise_sum`` (``numpy/_core/src/umath/loops_utils.h.src``) written out."""
    n = x.size
    if n < 8:
        res = -0.0
        for v in x:
            res += v
        return res
    if n <= 128:
        r = [x[j] for j in range(8)]
        for i in range(8, n - n % 8, 8):
            for j in range(8):
                r[j] += x[i + j]
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(n - n % 8, n):
            res += x[i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(x[:n2]) + _pairwise(x[n2:])


@pytest.mark.parametrize("n", [1, 2, 7, 8, 13, 50, 100, 128, 129, 300, 1000])
def test_row_dot_is_numpys_pairwise_sum_of_the_products(n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((6, n)), rng.standard_normal((6, n))
    got = row_dot(np, a, b)
    want = np.array([_pairwise(a[r] * b[r]) for r in range(6)])
    assert np.array_equal(got, want)
    if n >= 50:  # negative control: left to right is another order, with other bits
        seq = np.array([float(np.cumsum(a[r] * b[r])[-1]) for r in range(6)])
        assert not np.array_equal(got, seq)


def _increasing(v: np.ndarray, M: np.ndarray, reverse: bool = False) -> np.ndarray:
    """``y_j = sum_i v_i M_ij`` by the loop over ``i`` (increasing, or decreasing)."""
    idx = range(M.shape[0] - 1, -1, -1) if reverse else range(M.shape[0])
    out = None
    for i in idx:
        term = v[..., i, None] * M[i]
        out = term if out is None else out + term
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(4096, 2), (256, 100), (3, 5, 37)])
def test_vec_mat_sums_rows_in_increasing_order_compiled_or_not(shape, dtype):
    rng = np.random.default_rng(1)
    v = rng.standard_normal(shape).astype(dtype)
    M = rng.standard_normal((shape[-1], shape[-1] + 3)).astype(dtype)
    want = _increasing(v, M)
    got = vec_mat(np, v, M)
    assert got.dtype == dtype and got.shape == (*shape[:-1], M.shape[1])
    assert np.array_equal(got, want)
    with ck.kernels(enabled=False):  # NumPy's reduction over a non-last axis: the same bits
        assert np.array_equal(vec_mat(np, v, M), want)
    if shape[-1] > 2:  # negative controls: the reversed order and the BLAS's product
        assert not np.array_equal(got, _increasing(v, M, reverse=True))
        assert not np.array_equal(got, v @ M)
    with pytest.raises(ValueError, match="M has"):
        vec_mat(np, v, M[1:])


@pytest.mark.parametrize("d", [1, 2, 3, 20, 100])
def test_orthogonal_factor_is_scipys_haar_rotation_to_rounding(d):
    from scipy.stats import ortho_group

    z = np.random.default_rng(d).normal(size=(d, d))
    Q = orthogonal_factor(z)
    assert np.abs(Q.T @ Q - np.eye(d)).max() <= 4 * d * U
    R = Q.T @ z
    assert np.abs(np.tril(R, -1)).max() <= 4 * d * U * np.abs(z).max() * d
    assert np.all(np.diag(R) > 0)
    ref = ortho_group.rvs(d, random_state=np.random.default_rng(d)) if d > 1 else np.sign(z)
    assert np.abs(Q - ref).max() <= 8 * d * U
    with ck.kernels(enabled=False):
        assert np.array_equal(orthogonal_factor(z), Q)
    with pytest.raises(ValueError, match="square"):
        orthogonal_factor(z[:, :0] if d > 1 else np.ones((2, 1)))


@pytest.mark.parametrize("rotate", [False, True])
@pytest.mark.parametrize("d", [2, 100])
def test_least_squares_metrics_agree_with_the_blas_to_a_dot_products_rounding(d, rotate):
    prob = ck.LeastSquares.gaussian(d=d, spectrum="1/i", noise=0.5, rotate=rotate, seed=1)
    theta = np.random.default_rng(2).standard_normal((512, d))
    eta = theta - prob.theta_star
    got = prob.errors(theta)
    H = prob.H
    Heta = eta @ H
    old_h, old_d = np.vecdot(eta, Heta), np.vecdot(eta, eta)
    gamma = lambda m: m * U / (1 - m * U)  # noqa: E731 - Higham's gamma_m
    # a dot product of length d in two orders: within 2 gamma_d of sum |a_i b_i|; the rotated
    # H eta adds two products of length d, each within gamma_d of |Q| |Q^T| |eta| h
    bound_h = 2 * gamma(d) * np.vecdot(np.abs(eta), np.abs(Heta))
    if rotate:
        absQ = np.abs(prob.Q)
        bound_h += 3 * gamma(d) * np.vecdot(np.abs(eta), ((np.abs(eta) @ absQ) * prob.h) @ absQ.T)
    assert np.all(np.abs(got["hnorm2"] - old_h) <= bound_h)
    assert np.all(np.abs(got["dist2"] - old_d) <= 2 * gamma(d) * old_d)
    assert np.array_equal(got["excess_risk"], 0.5 * got["hnorm2"])
    assert np.allclose(prob.grad(theta), Heta, rtol=0, atol=4 * d * U * np.abs(Heta).max())


def test_minibatch_gradients_are_the_blas_formula_to_rounding():
    stream = ck.Backend().stream(3)
    for prob in (
        ck.LeastSquares.gaussian(d=30, spectrum="1/i", noise=0.5, rotate=True, seed=1),
        HeterogeneousLeastSquares(d=30, workers=4, zeta2=1.0, hessian_dissimilarity=0.3, seed=2),
    ):
        theta = np.random.default_rng(4).standard_normal((8, 4, 30))
        batch = prob.sample(stream, (8, 4, 5))
        got = prob.stochastic_grad(theta, batch)
        optimum = getattr(prob, "node_optima", prob.theta_star)
        x = batch.x if hasattr(batch, "x") else batch.z * prob.sqrt_node_h[:, None, :]
        r = np.vecdot(x, (theta - optimum)[..., None, :]) - prob.noise * batch.eps
        want = (r[..., None, :] @ x)[..., 0, :] / 5
        assert np.allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


# the problems' metrics, gradients and rotations, and recorded runs, hashed; with the BLAS's
# vecdot and LAPACK's QR of the same operands as the negative control
PROBE = """
import hashlib, json
import numpy as np
import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD, DCDPSGD, DeepSqueeze
from convkit.compression import QSGD, TopK
from convkit.problems.heterogeneous import HeterogeneousLeastSquares
from convkit.topology import ring

out, blas = {}, {}
def put(key, value):
    out[key] = hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest()
rng = np.random.default_rng(7)
for d in (2, 100):
    for rot in (False, True):
        prob = ck.LeastSquares.gaussian(d=d, spectrum="1/i", noise=0.5, rotate=rot, seed=1)
        tag = f"ls d={d} rotate={rot}"
        if rot:
            put(tag + " Q", prob.Q)
            blas[tag + " Q"] = np.linalg.qr(np.random.default_rng(1).normal(size=(d, d)))[0]
        th = rng.standard_normal((512, d))
        for k, v in prob.errors(th).items():
            put(f"{tag} {k}", v)
        put(tag + " grad", prob.grad(th))
        eta = th - prob.theta_star
        blas[tag + " vecdot"] = np.vecdot(eta, eta * prob.h)
        stream = ck.Backend().stream(3)
        for b in (1, 4):
            th = rng.standard_normal((16, 8, d))
            batch = prob.sample(stream, (16, 8, b))
            put(f"{tag} sample b={b}", batch.x)
            put(f"{tag} stochastic_grad b={b}", prob.stochastic_grad(th, batch))
        add = ck.LeastSquares.additive(d=d, spectrum="1/i", noise=0.5, rotate=rot, seed=1)
        put(tag + " additive grad", add.stochastic_grad(th, add.sample(stream, (16, 8, 2))))
for delta in (0.0, 0.5):
    prob = HeterogeneousLeastSquares(d=50, workers=8, zeta2=1.0, spectrum="1/i", noise=0.5,
                                     hessian_dissimilarity=delta, seed=2)
    tag = f"hls delta={delta}"
    for k, v in prob.errors(rng.standard_normal((512, 50))).items():
        put(f"{tag} {k}", v)
    models = rng.standard_normal((64, 8, 50))
    with ck.kernels(enabled=False):
        for k, v in prob.node_errors(models).items():
            put(f"{tag} {k}", v)
    stream = ck.Backend().stream(3)
    for b in (1, 4):
        batch = prob.sample(stream, (16, 8, b))
        put(f"{tag} stochastic_grad b={b}", prob.stochastic_grad(rng.standard_normal((16, 8, 50)), batch))
prob = ck.LeastSquares.gaussian(d=50, spectrum="1/i", noise=0.5, seed=0)
topo, g = ring(8), ck.Constant(0.05)
algos = [
    CHOCOSGD(topo, g, TopK(k=5), 0.3, name="choco"),
    DeepSqueeze(topo, g, TopK(k=5), 0.1, name="deepsqueeze"),
    DCDPSGD(topo, g, QSGD(s=16), name="dcd"),
]
res = ck.simulate(prob, algos, steps=300, replicates=8, seed=0, n_record=6, progress=False)
for name, cv in res.values.items():
    put(f"run {name}", cv.values)
    put(f"run {name} diverged", cv.diverged_at)
# the studies' bits to a target (a tuning rule ranks steps by it): the C library's scalar
# log and exp; NumPy's SIMD ones of the same formula as the control
from analyses._decentralized_common import level_crossing
xs = np.sort(rng.uniform(1.0, 1e6, (4000, 8)), axis=1)
es = np.sort(rng.uniform(1e-6, 1.0, (4000, 8)), axis=1)[:, ::-1]
lv = rng.uniform(1e-6, 1.0, 4000)
put("level_crossing", np.array([level_crossing(x, e, l) for x, e, l in zip(xs, es, lv)]))
j = np.argmax(es <= lv[:, None], axis=1).clip(1)
i = np.arange(4000)
e0, e1, x0, x1 = es[i, j - 1], es[i, j], xs[i, j - 1], xs[i, j]
t = (np.log(e0) - np.log(lv)) / (np.log(e0) - np.log(e1))
blas["level_crossing simd"] = np.exp(np.log(x0) + t * (np.log(x1) - np.log(x0)))
print(json.dumps({"fixed": out, "blas": {k: v.tobytes().hex() for k, v in blas.items()}}))
"""


def _probe(portable: bool) -> dict:
    return run_probe(PROBE, portable)


def test_least_squares_values_have_the_same_bits_in_the_portable_environment():
    pytest.importorskip("numba")
    here, portable = _probe(False), _probe(True)
    differ = sorted(k for k in here["fixed"] if here["fixed"][k] != portable["fixed"][k])
    assert not differ, differ
    assert len(here["fixed"]) >= 60
    if host_has_avx512():  # negative control: the BLAS's vecdot and LAPACK's QR move
        moved = [k for k in here["blas"] if here["blas"][k] != portable["blas"][k]]
        assert len(moved) >= 3, moved
