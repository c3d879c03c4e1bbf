"""Cost of the CPU-independent sums of least squares and the finite sums (issue 36): the old
BLAS path and the new one.

:class:`~convkit.problems.least_squares.LeastSquares` and
:class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares` sum their metrics, gradients
and products with ``Q`` in an order fixed by the code (:mod:`convkit.problems._fixed_order`:
NumPy's pairwise sum of the products, rows in increasing order, a Householder QR through them),
the same bits on every x86-64 CPU, instead of the BLAS's ``vecdot`` / ``@`` and LAPACK's QR,
whose summation order is the kernel's that the CPU selects.  This prints, side by side in one
run, the time of each call with the old formula (written out here as it was) and the new one,
and their ratio:

* ``errors()`` (a record of a run: every recorded iterate) at ``(R, d) = (4096, 2)`` and
  ``(256, 100)``, with a diagonal ``H`` and a rotated one;
* ``stochastic_grad`` (the decentralized algorithms without a fused step: DCD-PSGD,
  ECD-PSGD) at ``(R, P) = (16, 8)``, ``d = 50``, batch 1 and 4; ``sample`` of a rotated problem;
* the divergence test's squared distance of :func:`convkit.simulate` (every step);
* the random rotation (``rotate=True``, once per problem) at ``d = 100`` and ``1000``;
* the finite-sum logistic problem of ``real_data`` (breast cancer, ``n = 569``, ``d = 30``,
  ``lam = 0.01``): ``errors()`` at ``R = 64`` (products with ``A`` by
  :func:`~convkit.problems._fixed_order.vec_mat` and the loss's ``exp`` / ``log1p`` from the C
  library instead of ``@`` and NumPy's SIMD loops), ``stochastic_grad`` at ``(R, P) = (16, 8)``
  (D-PSGD's gradient), the full gradient of one point (a Newton step's), the Newton system
  (LAPACK's Cholesky / the fixed-order one) and ``H*``'s eigenvalues (LAPACK / Jacobi).

Interleaved timings, the best of several repeats.  Run:
``python benchmarks/bench_portable_metrics.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import numpy as np

if __package__ in (None, ""):  # allow `python benchmarks/bench_portable_metrics.py`
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import convkit as ck
from convkit._symmetric_eigen import symmetric_eigenvalues
from convkit.problems._fixed_order import cholesky_solve, orthogonal_factor, vec_mat
from convkit.problems.datasets import breast_cancer
from convkit.problems.finite_sum import IndexBatch
from convkit.problems.logistic import bernoulli_kl_logits
from convkit.problems.logistic import sigmoid as numpy_sigmoid

REPEATS = 7


def _best(fn: Callable[[], object], number: int) -> float:
    fn()  # warm (compilation, caches)
    best = np.inf
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def _pair(old: Callable[[], object], new: Callable[[], object], number: int) -> tuple:
    """Best times of ``old`` and ``new``, interleaved (old, new, old, new, ...)."""
    t_old = t_new = np.inf
    for _ in range(2):
        t_old = min(t_old, _best(old, number))
        t_new = min(t_new, _best(new, number))
    return t_old, t_new


def _old_errors(prob: ck.LeastSquares, theta: np.ndarray) -> dict:
    """The formula of ``LeastSquares.errors`` before: the BLAS's vecdot and matmul."""
    eta = theta - prob.theta_star
    Heta = eta * prob.h if prob.Q is None else ((eta @ prob.Q) * prob.h) @ prob.Q.T
    h = np.vecdot(eta, Heta)
    return {"excess_risk": 0.5 * h, "hnorm2": h, "dist2": np.vecdot(eta, eta)}


def _old_grad(prob: ck.LeastSquares, theta: np.ndarray, batch) -> np.ndarray:
    """The formula of ``LeastSquares.stochastic_grad`` before (non-additive design)."""
    eta = theta - prob.theta_star
    x = batch.x
    b = x.shape[-2]
    if b == 1:
        x1 = x[..., 0, :]
        return x1 * (np.vecdot(x1, eta) - prob.noise * batch.eps[..., 0])[..., None]
    r = np.vecdot(x, eta[..., None, :]) - prob.noise * batch.eps
    return (r[..., None, :] @ x)[..., 0, :] / b


def _lapack_rotation(d: int) -> np.ndarray:
    """The rotation before: SciPy's ``ortho_group`` (LAPACK's QR of the same draws)."""
    from scipy.stats import ortho_group

    return ortho_group.rvs(d, random_state=np.random.default_rng(1))


def _old_finite_errors(prob, theta: np.ndarray) -> dict:
    """``FiniteSum.errors`` before (logistic): the BLAS's products, NumPy's SIMD exp / log1p."""
    eta = theta - prob.theta_star
    dist2 = np.einsum("md,md->m", eta, eta)
    dz = eta @ prob.A.T
    ms = -prob.y * prob._z_star
    D = bernoulli_kl_logits(ms, ms - prob.y * dz)
    hn = (dz * dz * prob._c_star) @ prob.weights + prob.lam * dist2
    er = D @ prob.weights + 0.5 * prob.lam * dist2 + eta @ prob._grad_star
    return {"excess_risk": np.maximum(er, 0.0), "hnorm2": hn, "dist2": dist2}


def _old_finite_sgrad(prob, theta: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``FiniteSum.stochastic_grad`` before (dense data): batched matmuls (the BLAS)."""
    X, y = prob.A[idx], prob.y[idx]
    z = (X @ theta[..., :, None])[..., 0]
    c = -y * numpy_sigmoid(-y * z) / idx.shape[-1]
    return (c[..., None, :] @ X)[..., 0, :] + prob.lam * theta


def _old_finite_grad(prob, th: np.ndarray) -> np.ndarray:
    """``FiniteSum._full_grad`` before: ``th @ A.T``, ``G @ A``, NumPy's sigmoid."""
    z = th @ prob.A.T
    return (prob.weights * (-prob.y * numpy_sigmoid(-prob.y * z))) @ prob.A + prob.lam * th


def _lapack_cholesky(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    from scipy.linalg import cho_factor, cho_solve

    return cho_solve(cho_factor(H, check_finite=False), g, check_finite=False)


def _finite_sum_rows(rng: np.random.Generator) -> list[tuple[str, float, float]]:
    prob = breast_cancer().logistic(lam=0.01)
    theta = prob.theta_star + 0.1 * rng.standard_normal((64, prob.d))
    th = 0.1 * rng.standard_normal((16, 8, prob.d))
    idx = rng.integers(0, prob.n, size=(16, 8, 1))
    one = theta[:1]
    H, g = prob.H_star, prob.grad(one)[0]
    return [
        ("finite logistic errors()  R=64 n=569 d=30",
         *_pair(partial(_old_finite_errors, prob, theta), partial(prob.errors, theta), 50)),
        ("finite logistic stochastic_grad R=16 P=8 b=1",
         *_pair(partial(_old_finite_sgrad, prob, th, idx),
                partial(prob.stochastic_grad, th, IndexBatch(idx)), 500)),
        ("finite logistic full gradient, one point",
         *_pair(partial(_old_finite_grad, prob, one), partial(prob._full_grad, one), 500)),
        ("Newton system d=30 (LAPACK / fixed Cholesky)",
         *_pair(partial(_lapack_cholesky, H, g), partial(cholesky_solve, H, g), 200)),
        ("eigenvalues of H* d=30 (eigvalsh / Jacobi)",
         *_pair(partial(np.linalg.eigvalsh, H), partial(symmetric_eigenvalues, H), 50)),
    ]  # fmt: skip


def main() -> None:
    rng = np.random.default_rng(0)
    rows: list[tuple[str, float, float]] = []
    for R, d in ((4096, 2), (256, 100)):
        for rotate in (False, True):
            prob = ck.LeastSquares.gaussian(d=d, spectrum="1/i", rotate=rotate, seed=1)
            theta = rng.standard_normal((R, d))
            label = f"errors()  R={R:<4} d={d:<3} {'rotated' if rotate else 'diagonal'}"
            rows.append((label, *_pair(partial(_old_errors, prob, theta),
                                       partial(prob.errors, theta), 200)))  # fmt: skip
    stream = ck.Backend().stream(0)
    for b in (1, 4):
        prob = ck.LeastSquares.gaussian(d=50, spectrum="1/i", seed=1)
        theta = rng.standard_normal((16, 8, 50))
        batch = prob.sample(stream, (16, 8, b))
        rows.append((f"stochastic_grad R=16 P=8 d=50 b={b}",
                     *_pair(partial(_old_grad, prob, theta, batch),
                            partial(prob.stochastic_grad, theta, batch), 500)))  # fmt: skip
    rot = ck.LeastSquares.gaussian(d=100, spectrum="1/i", rotate=True, seed=1)
    z = rng.standard_normal((16, 8, 1, 100))
    QT = np.ascontiguousarray(rot.Q.T)
    rows.append(("sample's z Q^T  R=16 P=8 b=1 d=100",
                 *_pair(lambda: z @ rot.Q.T, lambda: vec_mat(np, z, QT), 500)))  # fmt: skip
    dev = rng.standard_normal((16, 50))
    rows.append(("divergence distance R=16 d=50",
                 *_pair(lambda: np.vecdot(dev, dev),
                        lambda: np.sum(dev * dev, axis=-1), 2000)))  # fmt: skip
    for d in (100, 1000):
        g = np.random.default_rng(1).normal(size=(d, d))
        n = 20 if d == 100 else 1
        rows.append((f"rotation d={d} (LAPACK QR / Householder)",
                     *_pair(partial(_lapack_rotation, d),
                            partial(orthogonal_factor, g), n)))  # fmt: skip
    rows += _finite_sum_rows(rng)
    width = max(len(r[0]) for r in rows)
    print(f"{'call':<{width}}  {'old (BLAS)':>12}  {'new (fixed)':>12}  {'new/old':>8}")
    for label, t_old, t_new in rows:
        print(f"{label:<{width}}  {t_old * 1e6:10.1f}us  {t_new * 1e6:10.1f}us  "
              f"{t_new / t_old:8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
