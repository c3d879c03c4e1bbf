"""REFERENCE CODE (not part of convkit): per-worker-loop CHOCO-SGD and DeepSqueeze.

Written in the style of the public research codes (e.g. the ChocoSGD and DeepSqueeze
repositories): one run (one replicate) at a time, the models stacked as a ``(P, d)`` matrix,
a Python loop over workers for the stochastic gradients and the compression of each
worker's vector, and one matrix product ``W @ X`` for the mixing. It exists for two reasons:

* a test oracle: given identical samples and a deterministic compressor (top-k), its
  trajectories must equal those of the vectorized :class:`convkit.algorithms.decentralized.
  CHOCOSGD` and :class:`~convkit.algorithms.decentralized.DeepSqueeze` to rounding error
  (``tests/test_decentralized.py``);
* the baseline of ``benchmarks/bench_decentralized.py`` (``*_topk_vs_loop``).

Update rules are those of ``shared/theory/decentralized.md`` (and of convkit):

* CHOCO-SGD, ``order="reference_code"`` (the authors' convex code, the default here):
  ``h_i = x_i - gamma g_i``; ``x_i = h_i + gamma_c sum_j W_ij (xh_j - xh_i)``;
  ``q_i = topk(x_i - xh_i)``; ``xh_i += q_i``. ``order="paper"`` (convkit's default, the
  paper's pseudo-code): ``h_i = x_i - gamma g_i``; ``xh_i += topk(h_i - xh_i)``;
  ``x_i = h_i + gamma_c sum_j W_ij (xh_j - xh_i)`` with the updated copies.
* DeepSqueeze: ``h_i = x_i - gamma g_i``; ``v_i = topk(h_i + delta_i)``;
  ``delta_i = h_i + delta_i - v_i``; ``x_i = h_i + eta sum_j (W_ij - [i == j]) v_j``.

``grad(i, x_i)`` is a callable returning worker ``i``'s stochastic gradient at ``x_i`` for the
current step.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["LoopCHOCO", "LoopDeepSqueeze", "least_squares_grad", "topk_vector"]

GradFn = Callable[[int, np.ndarray], np.ndarray]


def topk_vector(u: np.ndarray, k: int) -> np.ndarray:
    """Top-k of one vector: keep the ``k`` largest ``|u_j|``, zero the rest."""
    idx = np.argpartition(np.abs(u), -k)[-k:]
    out = np.zeros_like(u)
    out[idx] = u[idx]
    return out


def least_squares_grad(batch, r: int, theta_star: np.ndarray, noise: float) -> GradFn:
    """Per-worker least-squares gradient of replicate ``r`` of a convkit ``LSBatch``:
    ``g_i(x) = (1/b) sum_j a_j (<a_j, x - theta*> - sigma eps_j)``."""
    xr, er = batch.x[r], batch.eps[r]

    def grad(i: int, x: np.ndarray) -> np.ndarray:
        a = xr[i]  # (b, d)
        res = a @ (x - theta_star) - noise * er[i]
        return a.T @ res / a.shape[0]

    return grad


class LoopCHOCO:
    """CHOCO-SGD for one run: models ``x`` and public copies ``xh`` of shape ``(P, d)``."""

    def __init__(
        self,
        W: np.ndarray,
        x0: np.ndarray,
        k: int,
        gamma_c: float,
        order: str = "reference_code",
    ) -> None:
        if order not in ("paper", "reference_code"):
            raise ValueError(f"order must be 'paper' or 'reference_code', got {order!r}")
        self.W = np.asarray(W, dtype=np.float64)
        self.x = np.array(x0, dtype=np.float64)
        self.xh = self.x.copy()  # x_hat starts at x_0, as in convkit
        self.k = k
        self.gamma_c = gamma_c
        self.order = order

    def step(self, grad: GradFn, gamma: float) -> None:
        P = self.x.shape[0]
        h = np.empty_like(self.x)
        for i in range(P):
            h[i] = self.x[i] - gamma * grad(i, self.x[i])
        if self.order == "paper":  # compress h - x_hat, then mix with the updated copies
            for i in range(P):
                self.xh[i] += topk_vector(h[i] - self.xh[i], self.k)
            self.x = h + self.gamma_c * (self.W @ self.xh - self.xh)
            return
        self.x = h + self.gamma_c * (self.W @ self.xh - self.xh)
        for i in range(P):
            self.xh[i] += topk_vector(self.x[i] - self.xh[i], self.k)


class LoopDeepSqueeze:
    """DeepSqueeze for one run: models ``x`` and error memories ``delta`` of shape ``(P, d)``."""

    def __init__(self, W: np.ndarray, x0: np.ndarray, k: int, eta: float) -> None:
        self.W = np.asarray(W, dtype=np.float64)
        self.x = np.array(x0, dtype=np.float64)
        self.delta = np.zeros_like(self.x)
        self.v = np.zeros_like(self.x)
        self.k = k
        self.eta = eta

    def step(self, grad: GradFn, gamma: float) -> None:
        P = self.x.shape[0]
        h = np.empty_like(self.x)
        for i in range(P):
            h[i] = self.x[i] - gamma * grad(i, self.x[i])
            u = h[i] + self.delta[i]
            self.v[i] = topk_vector(u, self.k)
            self.delta[i] = u - self.v[i]
        self.x = h + self.eta * (self.W @ self.v - self.v)
