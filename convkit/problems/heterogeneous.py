"""Least squares with a different optimum on every node, at an exactly controlled dissimilarity.

Model (derived here). Node ``i = 1..P`` sees Gaussian rows ``x ~ N(0, H)``, ``H = diag(h)``,
with labels ``y = <x, theta*_i> + sigma eps``, ``eps ~ N(0, 1)``, so that its objective is

    f_i(theta) = 1/2 E (y - <x, theta>)^2 = 1/2 ||theta - theta*_i||_H^2 + sigma^2 / 2,

and the network objective ``f = (1/P) sum_i f_i`` has the minimiser ``theta* = mean_i theta*_i``
(common ``H``), the optimal value ``f* = sigma^2 / 2 + (1/(2P)) sum_i ||u_i||_H^2`` with
``u_i = theta*_i - theta*``, and the exact excess risk ``f(theta) - f* = 1/2 ||theta -
theta*||_H^2`` (the cross term vanishes because ``sum_i u_i = 0``).

Dissimilarity. ``grad f_i(theta*) = H (theta* - theta*_i) = -H u_i``, hence

    zeta^2 = (1/P) sum_i ||grad f_i(theta*)||^2 = (1/P) sum_i ||H u_i||^2.

The offsets are built as seeded Gaussian vectors, centred over the nodes (``sum_i u_i = 0``)
and scaled by one factor so that this equals the requested ``zeta2`` to rounding. The inner
(sampling) variance at ``theta*`` is, for the Gaussian design (``E (x x^T - H) A (x x^T - H) =
tr(A H) H + H A H`` for symmetric ``A``; derived here),

    sigma_*^2 = (1/P) sum_i E||g_i(theta*) - grad f_i(theta*)||^2
              = sigma^2 tr(H) + (1/P) sum_i (tr(H) ||u_i||_H^2 + ||H u_i||^2).

This is the problem the claims of decentralized SGD with non-iid data are about (outer
variance ``zeta^2`` in D-PSGD's rate, Lian et al. 2017; the ``C_2`` term of DeepSqueeze,
Tang et al. 2019); with ``zeta2 = 0`` it is the iid problem of
:class:`~convkit.problems.least_squares.LeastSquares` on every node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import RandomStream, namespace_of
from ..validation import check_int, check_real
from .base import Problem
from .least_squares import spectrum as _spectrum

__all__ = ["HeterogeneousLeastSquares", "NodeBatch"]


@dataclass
class NodeBatch:
    """Raw draws ``z`` (R, P, b, d) (features ``x = z * sqrt(h)``) and label noise ``eps``
    (R, P, b)."""

    z: Any
    eps: Any


class HeterogeneousLeastSquares(Problem):
    """Least squares with node optima ``theta*_i`` at dissimilarity ``zeta2`` (module docstring).

    Parameters
    ----------
    d:
        Dimension ``d >= 1``.
    workers:
        Number of nodes ``P >= 1`` (``P >= 2`` when ``zeta2 > 0``); the engine's batches must
        have ``P`` workers.
    zeta2:
        Outer variance ``zeta^2 = (1/P) sum_i ||grad f_i(theta*)||^2 >= 0`` (exact).
    spectrum:
        Eigenvalues of ``H`` (a preset of :func:`convkit.problems.least_squares.spectrum`,
        a callable or an array).
    noise:
        Label noise standard deviation ``sigma >= 0``.
    theta_star:
        The global optimum (default: seeded ``N(0, I/d)``, so ``E||theta*||^2 = 1``).
    seed:
        Seed of ``theta*`` and of the offsets' directions.

    Attributes
    ----------
    node_optima:
        ``theta*_i`` stacked, shape (P, d).
    offsets:
        ``u_i = theta*_i - theta*``, shape (P, d), ``sum_i u_i = 0``.
    zeta2, sigma2:
        The outer variance (as requested, exact) and the inner variance ``sigma_*^2`` at
        ``theta*`` (formula of the module docstring).
    """

    heterogeneous = True

    def __init__(
        self,
        d: int,
        workers: int,
        zeta2: float,
        spectrum: str | Callable | Any = "flat",
        noise: float = 1.0,
        theta_star: Any = None,
        seed: int = 0,
    ) -> None:
        self.d = check_int("d", d, low=1)
        self.P = check_int("workers", workers, low=1)
        self.zeta2 = check_real("zeta2", zeta2, low=0)
        if self.zeta2 > 0 and self.P < 2:
            raise ValueError(
                f"zeta2 = {self.zeta2:g} > 0 needs workers >= 2 (one node cannot disagree with "
                f"itself), got workers = {self.P}"
            )
        self.noise = check_real("noise", noise, low=0)
        self.seed = int(seed)
        self.h = _spectrum(spectrum, self.d)
        self.spectrum_spec = spectrum if isinstance(spectrum, str) else "custom"
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 13, self.P, self.d]))
        if theta_star is None:
            theta_star = rng.standard_normal(self.d) / np.sqrt(self.d)
        theta_star = np.asarray(theta_star, dtype=np.float64)
        self.check_theta(theta_star, "theta_star")
        if theta_star.shape != (self.d,) or not np.all(np.isfinite(theta_star)):
            raise ValueError(f"theta_star must be a finite vector of shape ({self.d},)")
        self.theta_star = theta_star
        u = rng.standard_normal((self.P, self.d))
        u -= u.mean(axis=0, keepdims=True)
        raw = float(np.mean(np.sum((u * self.h) ** 2, axis=1)))
        self.offsets = u * np.sqrt(self.zeta2 / raw) if self.zeta2 > 0 else np.zeros_like(u)
        self.node_optima = self.theta_star + self.offsets
        self.sqrt_h = np.sqrt(self.h)
        self.L = float(self.h.max())
        self.mu = float(self.h.min())
        self.R2 = float(self.h.sum())
        hu2 = np.sum(self.offsets**2 * self.h, axis=1)  # ||u_i||_H^2
        self.f_star = 0.5 * self.noise**2 + 0.5 * float(hu2.mean())
        self.sigma2 = self.noise**2 * self.R2 + float(
            np.mean(self.R2 * hu2 + np.sum((self.offsets * self.h) ** 2, axis=1))
        )

    # ------------------------------------------------------------------ constants
    @property
    def H(self) -> np.ndarray:
        """The common Hessian ``H = diag(h)``."""
        return np.diag(self.h)

    @property
    def H_star(self) -> np.ndarray:
        """Hessian at the optimum (``H``)."""
        return self.H

    @property
    def workers(self) -> int:
        """Number of nodes ``P``."""
        return self.P

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "heterogeneous_least_squares",
            "d": self.d,
            "workers": self.P,
            "zeta2": self.zeta2,
            "spectrum": self.spectrum_spec,
            "noise": self.noise,
            "seed": self.seed,
        }

    # ------------------------------------------------------------------ sampling, gradients
    def sample(self, stream: RandomStream, shape: tuple[int, int, int]) -> NodeBatch:
        R, P, b = shape
        if P != self.P:
            raise ValueError(
                f"HeterogeneousLeastSquares has workers = {self.P} nodes (one optimum each); "
                f"the engine asked for a batch with P = {P}: run algorithms on {self.P} nodes"
            )
        return NodeBatch(stream.normal((R, P, b, self.d)), stream.normal((R, P, b)))

    def stochastic_grad(self, theta: Any, batch: NodeBatch) -> Any:
        """``(1/b) sum_j x_j (<x_j, theta_i - theta*_i> - sigma eps_j)`` for node ``i`` (axis 1)."""
        # NumPy's own functions for NumPy arrays: the same operations without the namespace
        # wrappers (about a third of this method's time in the decentralized studies)
        xp = np if type(theta) is np.ndarray else namespace_of(theta)
        if theta.ndim != 3 or theta.shape[1] != self.P:
            raise ValueError(
                f"theta must have shape (R, P = {self.P}, d = {self.d}), got {tuple(theta.shape)}"
            )
        eta = theta - xp.asarray(self.node_optima, dtype=theta.dtype)
        x = batch.z * xp.asarray(self.sqrt_h, dtype=theta.dtype)
        b = x.shape[-2]
        if b == 1:
            x1 = x[..., 0, :]
            r = xp.sum(x1 * eta, axis=-1) - self.noise * batch.eps[..., 0]
            return x1 * r[..., None]
        r = xp.sum(x * eta[..., None, :], axis=-1) - self.noise * batch.eps
        return (r[..., None, :] @ x)[..., 0, :] / b

    # ------------------------------------------------------------------ objective
    def errors(self, theta: Any) -> dict[str, Any]:
        """``hnorm2 = ||theta - theta*||_H^2``, ``excess_risk = hnorm2 / 2`` (exact, see the
        module docstring), ``dist2 = ||theta - theta*||^2``."""
        xp = namespace_of(theta)
        eta = theta - xp.asarray(self.theta_star, dtype=theta.dtype)
        hn = xp.sum(eta * eta * xp.asarray(self.h, dtype=theta.dtype), axis=-1)
        return {"excess_risk": 0.5 * hn, "hnorm2": hn, "dist2": xp.sum(eta * eta, axis=-1)}

    def loss(self, theta: Any) -> Any:
        """``f(theta) = f* + 1/2 ||theta - theta*||_H^2``."""
        return self.errors(theta)["excess_risk"] + self.f_star

    def grad(self, theta: Any) -> Any:
        """Full gradient of the network objective, ``H (theta - theta*)``."""
        xp = namespace_of(theta)
        h = xp.asarray(self.h, dtype=theta.dtype)
        return (theta - xp.asarray(self.theta_star, dtype=theta.dtype)) * h

    def worker_grads(self, theta: Any) -> np.ndarray:
        """``grad f_i(theta) = H (theta - theta*_i)`` of every node, shape (P, d)."""
        th = np.asarray(theta, dtype=np.float64).reshape(self.d)
        return (th[None, :] - self.node_optima) * self.h
