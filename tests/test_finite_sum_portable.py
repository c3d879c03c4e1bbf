"""The finite-sum problems compute the same bits on every x86-64 CPU (issue 36).

``theta*`` (Newton with a fixed-order Cholesky factor), the constants (``mu``, ``L`` by the
Jacobi method, ``sigma2``, ``zeta2``), the metrics, the objective and the gradients of
:class:`~convkit.problems.finite_sum.FiniteSum` sum in an order fixed by the code and take
the logistic loss's ``exp`` / ``log1p`` from the C library
(:mod:`convkit.problems._libm_loss`).  Checked here: the hashes of all of them agree between
this environment and ``tools/portable_env.py`` (no AVX512 in numba, NumPy or OpenBLAS); the
negative control is the old formulas (the BLAS's products, NumPy's SIMD ``exp``, LAPACK's
``eigvalsh`` and Cholesky) on the same inputs, which differ there.  Also: the compiled and
the pure-Python paths of the elementwise functions give the same bits, and they agree with
NumPy's formulas to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from portable_probe import host_has_avx512, run_probe

import convkit as ck
from convkit.problems import _libm_loss
from convkit.problems._fixed_order import cholesky_solve
from convkit.problems.logistic import bernoulli_kl_logits
from convkit.problems.logistic import sigmoid as numpy_sigmoid

PROBE = """
import hashlib, json
import numpy as np
from convkit.problems.datasets import breast_cancer, split_by_label
from convkit.problems.finite_sum import IndexBatch

def h(a):
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes()).hexdigest()[:16]

ds = breast_cancer()
rng = np.random.default_rng(0)
th = 0.3 * rng.standard_normal((32, 8, ds.d))
idx = rng.integers(0, ds.n, size=(32, 8, 4))
out = {}
for tag, prob in (
    ("logistic", ds.logistic(lam=0.01)),
    ("logistic-split", ds.logistic(lam=0.01, partition=split_by_label(ds.y, 8, seed=0))),
    ("squares", ds.least_squares(lam=0.01)),
):
    if OLD:  # the old formulas on the same data: BLAS, LAPACK, NumPy's SIMD exp
        from convkit.problems.logistic import bernoulli_kl_logits, sigmoid
        A = prob.A
        z = th.reshape(-1, ds.d) @ A.T
        out[tag + " A theta"] = h(z)
        out[tag + " sigmoid"] = h(sigmoid(z))
        out[tag + " kl"] = h(bernoulli_kl_logits(z, 0.5 * z))
        out[tag + " eig"] = h(np.linalg.eigvalsh(A.T @ A))
        continue
    for name in ("theta_star", "mu", "L", "L_max", "sigma2", "zeta2", "f_star"):
        out[tag + " " + name] = h(getattr(prob, name))
    for k, v in prob.errors(th).items():
        out[tag + " " + k] = h(v)
    out[tag + " loss"] = h(prob.loss(th))
    out[tag + " grad"] = h(prob.grad(th))
    out[tag + " worker_grads"] = h(prob.worker_grads(th[0, 0]))
    out[tag + " stochastic_grad"] = h(prob.stochastic_grad(th, IndexBatch(idx)))
print(json.dumps(out))
"""


def _hashes(old: bool, portable: bool) -> dict:
    return run_probe(f"OLD = {old}\n" + PROBE, portable)


def test_finite_sum_constants_metrics_and_gradients_are_the_same_bits_in_the_portable_environment():
    here, there = _hashes(False, False), _hashes(False, True)
    assert len(here) == 3 * 14
    assert here == there, {k: (here[k], there[k]) for k in here if here[k] != there[k]}
    if host_has_avx512():  # negative control: the old formulas move in the portable environment
        old_here, old_there = _hashes(True, False), _hashes(True, True)
        assert sum(old_here[k] != old_there[k] for k in old_here) >= 3, (old_here, old_there)


# ---------------------------------------------------------------- the elementwise functions
def _points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 800.0, -800.0, 1e-300, 36.0, -36.0]
    x = np.concatenate([10.0 * rng.standard_normal(2000), special])
    t = 5.0 * rng.standard_normal(2000)
    a = t + rng.standard_normal(2000) * np.logspace(-12, 1, 2000)
    return x, t, a


def test_compiled_and_python_paths_give_the_same_bits():
    pytest.importorskip("numba")
    x, t, a = _points()
    compiled = (_libm_loss.sigmoid(x), _libm_loss.softplus(x), _libm_loss.bernoulli_kl(t, a))
    with ck.kernels(enabled=False):
        python = (_libm_loss.sigmoid(x), _libm_loss.softplus(x), _libm_loss.bernoulli_kl(t, a))
    for c, p in zip(compiled, python, strict=True):
        assert c.dtype == np.float64 and c.shape == p.shape
        assert np.array_equal(c, p, equal_nan=True)


def test_elementwise_functions_agree_with_numpy_formulas_to_rounding():
    x, t, a = _points()
    s = _libm_loss.sigmoid(x)
    ref = numpy_sigmoid(x)
    fin = np.isfinite(ref)
    assert np.array_equal(np.isnan(s), np.isnan(ref))
    assert np.max(np.abs(s[fin] - ref[fin]) / np.maximum(ref[fin], 1e-300)) <= 4 * 2.0**-53
    sp = _libm_loss.softplus(x)
    with np.errstate(invalid="ignore"):
        ref = np.logaddexp(0.0, x)
    fin = np.isfinite(ref)
    assert np.array_equal(sp[~fin], ref[~fin], equal_nan=True)
    assert np.max(np.abs(sp[fin] - ref[fin]) / np.maximum(ref[fin], 1e-300)) <= 4 * 2.0**-53
    kl = _libm_loss.bernoulli_kl(t, a)
    ref = bernoulli_kl_logits(t, a)
    assert np.all(kl >= 0)
    # the formula's error is about 2e-16 / |a - t| relative (bernoulli_kl_logits) times the
    # condition of its terms; both evaluate it, so they agree within that
    scale = np.maximum(1.0, 1.0 / np.abs(a - t))
    assert np.max(np.abs(kl - ref) / np.maximum(ref, 1e-300) / scale) <= 1e-10
    assert np.median(np.abs(kl - ref) / np.maximum(ref, 1e-300) / scale) <= 4 * 2.0**-53


def test_cholesky_solve_matches_lapack_and_refuses_an_indefinite_matrix():
    rng = np.random.default_rng(2)
    for d in (1, 2, 7, 30, 64):
        B = rng.standard_normal((d, d))
        H = B @ B.T + 0.1 * np.eye(d)
        g = rng.standard_normal(d)
        x = cholesky_solve(H, g)
        ref = np.linalg.solve(H, g)
        cond = np.linalg.cond(H)
        assert np.max(np.abs(x - ref)) <= 8 * d * cond * 2.0**-53 * np.max(np.abs(ref))
    assert cholesky_solve(-np.eye(3), np.ones(3)) is None
    assert cholesky_solve(np.diag([1.0, 0.0]), np.ones(2)) is None
    with pytest.raises(ValueError, match="cholesky_solve"):
        cholesky_solve(np.eye(3), np.ones(2))


def test_eigenvalues_by_jacobi_up_to_the_portable_size_and_lapack_above():
    from convkit._symmetric_eigen import symmetric_eigenvalues
    from convkit.problems.finite_sum import PORTABLE_EIGEN_MAX, FiniteLogistic

    rng = np.random.default_rng(3)
    for d in (5, PORTABLE_EIGEN_MAX + 1):
        A = rng.standard_normal((2 * d, d))
        y = np.where(rng.standard_normal(2 * d) > 0, 1.0, -1.0)
        prob = FiniteLogistic(A, y, lam=0.1)
        solver = symmetric_eigenvalues if d <= PORTABLE_EIGEN_MAX else np.linalg.eigvalsh
        assert prob.mu == max(float(solver(prob.H_star)[0]), 0.0)
        assert abs(prob.mu - float(np.linalg.eigvalsh(prob.H_star)[0])) <= 1e-12 * prob.L
