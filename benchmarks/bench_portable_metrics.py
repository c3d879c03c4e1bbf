"""Cost of least squares' CPU-independent sums (issue 36): the old BLAS path and the new one.

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
* the random rotation (``rotate=True``, once per problem) at ``d = 100`` and ``1000``.

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
from convkit.problems._fixed_order import orthogonal_factor, vec_mat

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
    width = max(len(r[0]) for r in rows)
    print(f"{'call':<{width}}  {'old (BLAS)':>12}  {'new (fixed)':>12}  {'new/old':>8}")
    for label, t_old, t_new in rows:
        print(f"{label:<{width}}  {t_old * 1e6:10.1f}us  {t_new * 1e6:10.1f}us  "
              f"{t_new / t_old:8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
