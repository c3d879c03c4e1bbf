"""Online well-specified logistic regression with Gaussian design.

Model (Bach & Moulines 2013; Patel & Dieuleveut 2019): ``x ~ N(0, H)`` with
``H = Q diag(h) Q^T``, labels ``y in {-1, +1}`` with ``P(y = 1 | x) = sigmoid(<x, theta*>)``
and the logistic loss

    f(theta) = E log(1 + exp(-y <x, theta>)).

The model is well specified, so ``theta*`` (the parameter that generates the labels)
minimises ``f``.  Everything below is *derived here*.

Exact reduction to two dimensions.  Write ``t = <x, theta*>`` and ``delta = <x, eta>`` with
``eta = theta - theta*``: ``(t, delta)`` is a centred Gaussian pair with covariance
``C = [[theta*^T H theta*, theta*^T H eta], [., eta^T H eta]]``.  Taking the expectation over
``y`` first,

    f(theta) - f* = E[ B(t, t + delta) ],   B(t, a) = sp(a) - sp(t) - sigmoid(t) (a - t) >= 0,

with ``sp(z) = log(1 + e^z)``: ``B`` is the Kullback-Leibler divergence between Bernoulli
laws with logits ``t`` and ``a``, computed without cancellation as
``log1p(s expm1(delta)) - s delta`` (``delta <= 0``, ``s = sigmoid(t)``) or
``log1p((1 - s) expm1(-delta)) + (1 - s) delta`` (``delta > 0``).  The expectation is a
two-dimensional Gauss-Hermite product rule (``n_quad`` nodes per axis, nodes of negligible
weight dropped; the integrand and the rule being symmetric under ``(t, delta) -> (-t, -delta)``,
one node of each symmetric pair with twice its weight), evaluated by a compiled kernel when numba is available
(:func:`convkit._logistic_kernels.kl_quadrature`, same formulas).  Likewise the population
gradient is
``E[(sigmoid(<x, theta>) - sigmoid(t)) x] = H [theta*, eta] C^+ E[g(t, delta) (t, delta)^T]``
(because ``E[x | t, delta] = H [theta*, eta] C^+ (t, delta)^T``).

Hessian at the optimum.  With ``w(t) = sigmoid(t) (1 - sigmoid(t))``, ``u = H theta*`` and
``v = theta*^T H theta*``, the decomposition ``x = u t / v + x_perp`` (``x_perp`` independent
of ``t``) gives

    H* = E[w(t) x x^T] = E[w(t)] (H - u u^T / v) + E[w(t) t^2] u u^T / v^2,

two one-dimensional Gauss-Hermite integrals (``H* = H / 4`` when ``theta* = 0``).  The two
scalars are computed with 201 nodes; the difference with 101 nodes is stored in
``hstar_quadrature_error`` (about 1e-16 for ``||theta*||_H <= 10``).

Constants: ``L = lambda_max(H) / 4`` (since ``w <= 1/4``), ``mu = lambda_min(H*)``.

Metrics.  ``errors`` reports ``excess_risk`` by the quadrature above (default;
``excess_risk="sample"`` uses instead the fixed evaluation sample), ``hnorm2 =
||theta - theta*||_{H*}^2`` and ``dist2``.  The sample estimator is the mean of ``B(t_i, a_i)``
over a fixed seeded evaluation sample ``x_1..x_N`` (``eval_size`` points, common to every
``theta`` so that differences between parameters are precise; labels are integrated out, which
only lowers the variance); :meth:`LogisticRegression.excess_risk_se` gives its standard error
``std_i B / sqrt(N)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._logistic_kernels import kl_quadrature, logistic_sgd_update
from ..backend import RandomStream, namespace_of, to_numpy
from ..validation import (
    Parameter,
    instance,
    integer,
    options,
    seed,
)
from .base import METRICS, Problem, as_float_array
from .least_squares import _random_orthogonal, covariance
from .least_squares import spectrum as _spectrum_of

__all__ = [
    "LogisticBatch",
    "LogisticRegression",
    "LogisticSteps",
    "bernoulli_kl_logits",
    "labelled_batch",
    "sigmoid",
]


def sigmoid(z: Any) -> Any:
    """Numerically stable ``1 / (1 + exp(-z))`` for any array namespace (no overflow)."""
    xp = namespace_of(z)
    e = xp.exp(-xp.abs(z))
    inv = 1.0 / (1.0 + e)
    return xp.where(z >= 0, inv, e * inv)


def bernoulli_kl_logits(t: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``sp(a) - sp(t) - sigmoid(t) (a - t)`` (>= 0), the Bregman divergence of the softplus.

    Equal to ``KL(Bernoulli(sigmoid(t)) || Bernoulli(sigmoid(a)))``; computed without
    overflow and without cancellation when ``a`` is close to ``t`` (relative error about
    ``2e-16 / |a - t|``, checked against 50-digit arithmetic).  NumPy arrays, broadcast together.
    """
    t = np.asarray(t, dtype=np.float64)
    delta = np.asarray(a, dtype=np.float64) - t
    t = np.broadcast_to(t, delta.shape)
    # with p = sigmoid(t) if delta <= 0 else sigmoid(-t), the divergence equals
    # log(1 - p + p e^{-|delta|}) + p |delta|; the log term is log1p(p expm1(-|delta|)) (no
    # cancellation for small |delta|) while that argument is > -1/2, and
    # logaddexp(log(1 - p), log p - |delta|) otherwise (no underflow to log 0)
    st = np.where(delta <= 0, t, -t)
    p = sigmoid(st)
    ad = np.abs(delta)
    arg = p * np.expm1(-ad)
    far = arg <= -0.5
    out = np.log1p(np.where(far, 0.0, arg))
    if far.any():
        sf, af = st[far], ad[far]
        out[far] = np.logaddexp(-np.logaddexp(0.0, sf), -np.logaddexp(0.0, -sf) - af)
    out += p * ad
    return np.maximum(out, 0.0, out=out)


def _gh(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilists' Gauss-Hermite nodes and weights normalised to sum 1 (for N(0, 1))."""
    z, w = np.polynomial.hermite_e.hermegauss(n)
    return z, w / w.sum()


@dataclass
class LogisticBatch:
    """Features ``x`` (R, P, b, d) and labels ``y`` in {-1, +1} (R, P, b)."""

    x: Any
    y: Any


def labelled_batch(stream: RandomStream, x: Any, t: Any) -> LogisticBatch:
    """The batch of features ``x`` (R, P, b, d) with labels ``y = +1`` with probability
    ``sigmoid(t)``, else -1 (one uniform draw per sample from ``stream``)."""
    xp, dt = stream.xp, stream.dtype
    u = stream.uniform(tuple(t.shape))
    y = xp.where(u < sigmoid(t), 1.0, -1.0)
    return LogisticBatch(x, xp.astype(y, dt) if hasattr(xp, "astype") else y)


class LogisticSteps:
    """The logistic loss's stochastic gradient and SGD step, shared by the logistic problems
    (:class:`LogisticRegression`, :class:`convkit.problems.HeterogeneousLogistic`): a mixin
    placed before :class:`~convkit.problems.base.Problem` in the bases."""

    def stochastic_grad(self, theta: Any, batch: LogisticBatch) -> Any:
        """``(1/b) sum_j -y_j sigmoid(-y_j <x_j, theta>) x_j`` (shape (R, P, d); each worker
        ``p`` on its own samples, axis 1)."""
        x, y = batch.x, batch.y
        b = x.shape[-2]
        margin = (x @ theta[..., :, None])[..., 0] * y  # (R, P, b)
        c = -y * sigmoid(-margin)
        return (c[..., None, :] @ x)[..., 0, :] / b

    def sgd_update(self, theta: Any, batch: LogisticBatch, gamma: float, mean: Any = None) -> Any:
        """In place ``theta -= gamma * stochastic_grad(theta, batch)``; one fused pass through
        the numba kernel of :mod:`convkit._logistic_kernels` for NumPy arrays when available
        (the generic path otherwise).  If ``mean`` (R, d) is given it receives the workers'
        mean of the updated ``theta``."""
        if type(theta) is np.ndarray and logistic_sgd_update(theta, batch.x, batch.y, gamma, mean):
            return theta
        return super().sgd_update(theta, batch, gamma, mean)  # type: ignore[misc]


class LogisticRegression(LogisticSteps, Problem):
    """Online well-specified logistic regression, ``x ~ N(0, H)`` (see the module docstring).

    Build with :meth:`gaussian`.

    Parameters
    ----------
    h:
        Eigenvalues of ``H`` (shape (d,)).
    Q:
        Orthonormal eigenvectors (``H = Q diag(h) Q^T``), or None for diagonal ``H``.
    theta_star:
        The true parameter (default: seeded i.i.d. N(0, 1/d) entries).
    eval_size:
        Size of the fixed evaluation sample of the sample-based excess risk.
    n_quad:
        Gauss-Hermite nodes per axis of the two-dimensional rule.
    excess_risk:
        ``"quadrature"`` (default, deterministic) or ``"sample"`` (fixed evaluation sample),
        the estimator :meth:`errors` reports.
    seed:
        Seeds ``theta_star`` (when not given) and the evaluation sample.
    """

    fused_model: ClassVar[str | None] = "logistic"
    parameters: ClassVar[dict[str, Parameter]] = {
        "h": instance("eigenvalues of the features' covariance: a non-empty 1-D array, finite "
                      "and > 0", wrong=([1.0, 0.0], [[1.0]], "flat")),
        "Q": instance("orthonormal eigenvectors, a (d, d) matrix", default=None, optional=True,
                      wrong=(np.eye(3), 2 * np.eye(4))),
        "theta_star": instance(
            "the optimum: a finite vector of shape (d,)", default=None, optional=True,
            wrong=([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],),
        ),
        "eval_size": integer(low=2, default=65536, doc="held-out samples of the sampled metrics"),
        "n_quad": integer(low=2, high=400, default=48, doc="Gauss-Hermite nodes per axis"),
        "excess_risk": options("quadrature", "sample", default="quadrature",
                               doc="how the excess risk is computed"),
        "seed": seed(default=0, optional=True, doc="seed of theta* and the held-out samples"),
    }  # fmt: skip
    #: small settings of the kinds its class-method constructors register (the sweep
    #: registry's ``logistic_regression_gaussian``)
    constructor_examples: ClassVar[dict[str, dict[str, Any]]] = {
        "gaussian": {"d": 4, "eval_size": 512}
    }

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Four coordinates of unit variance, 512 held-out samples."""
        return {"h": np.ones(4), "eval_size": 512}

    def __init__(
        self,
        h: Any,
        Q: np.ndarray | None = None,
        theta_star: Any = None,
        eval_size: int = 65536,
        n_quad: int = 48,
        excess_risk: str = "quadrature",
        seed: int | None = 0,
    ) -> None:
        self.h = as_float_array("h", h)
        if self.h.ndim != 1 or self.h.size < 1:
            raise ValueError(f"h must be a non-empty 1-D array, got shape {self.h.shape}")
        if not np.all(np.isfinite(self.h)) or np.any(self.h <= 0):
            raise ValueError("h (eigenvalues of H) must be finite and > 0")
        self.d = d = int(self.h.size)
        if Q is not None:
            Q = np.asarray(Q, dtype=np.float64)
            if Q.shape != (d, d) or not np.allclose(Q.T @ Q, np.eye(d), atol=1e-10):
                raise ValueError(f"Q must be an orthogonal ({d}, {d}) matrix")
        self.Q = Q
        self.seed = self.checked("seed", seed)
        self.eval_size = self.checked("eval_size", eval_size)
        self.n_quad = self.checked("n_quad", n_quad)
        self.excess_risk_method = self.checked("excess_risk", excess_risk)
        if theta_star is None:
            rng = np.random.default_rng(np.random.SeedSequence([0 if seed is None else seed, 1]))
            theta_star = rng.standard_normal(d) / np.sqrt(d)
        theta_star = as_float_array("theta_star", theta_star)
        self.check_theta(theta_star, "theta_star")
        if theta_star.ndim != 1 or not np.all(np.isfinite(theta_star)):
            raise ValueError("theta_star must be a finite vector of shape (d,)")
        self.theta_star = theta_star
        self.sqrt_h = np.sqrt(self.h)
        self.noise = None
        H = self.H
        self.v_star = float(theta_star @ H @ theta_star)
        self.H_star, self.hstar_quadrature_error = self._hessian_at_optimum(H)
        z, w = _gh(201)
        t = np.sqrt(self.v_star) * z
        self.f_star = float(
            w @ (sigmoid(t) * np.logaddexp(0, -t) + sigmoid(-t) * np.logaddexp(0, t))
        )
        self.L = float(self.h.max()) / 4.0
        self.mu = float(np.linalg.eigvalsh(self.H_star)[0])
        # two-dimensional product rule, negligible nodes dropped
        z1, w1 = _gh(self.n_quad)
        Z1, Z2 = np.meshgrid(z1, z1, indexing="ij")
        W = np.outer(w1, w1)
        keep = W > 1e-15 * W.max()
        self._qz1, self._qz2, self._qw = Z1[keep], Z2[keep], W[keep] / W[keep].sum()
        # the excess risk's half rule: the nodes and weights are symmetric under
        # (z1, z2) -> (-z1, -z2) (exactly, as hermegauss returns them) and so is the integrand
        # (t, delta) -> (-t, -delta), B(-t, -t - delta) = B(t, t + delta) (the KL divergence of
        # Bernoulli laws is unchanged when both labels are swapped), node by node in floating
        # point too: one node of each pair with twice its weight gives the same sum (up to its
        # order), at half the cost
        z1, z2 = self._qz1, self._qz2
        half = (z1 > 0) | ((z1 == 0) & (z2 > 0))
        centre = (z1 == 0) & (z2 == 0)
        self._hz1 = np.r_[z1[half], z1[centre]]
        self._hz2 = np.r_[z2[half], z2[centre]]
        self._hw = np.r_[2.0 * self._qw[half], self._qw[centre]]
        self._eval: tuple[np.ndarray, np.ndarray] | None = None
        self._cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def gaussian(
        cls,
        d: int,
        spectrum: str | Callable | Any = "flat",
        theta_star: Any = None,
        rotate: bool = False,
        eval_size: int = 65536,
        n_quad: int = 48,
        excess_risk: str = "quadrature",
        seed: int | None = 0,
    ) -> LogisticRegression:
        """Gaussian design ``x ~ N(0, H)``, ``H``'s eigenvalues from ``spectrum`` (see
        :func:`convkit.problems.least_squares.spectrum`), rotated by a seeded random orthogonal
        matrix when ``rotate``."""
        h = _spectrum_of(spectrum, d)
        Q = _random_orthogonal(d, seed) if rotate else None
        obj = cls(h, Q, theta_star, eval_size, n_quad, excess_risk, seed)
        obj.spectrum_spec = spectrum if isinstance(spectrum, str) else "custom"
        return obj

    # ------------------------------------------------------------------ constants
    @property
    def H(self) -> np.ndarray:
        """Design covariance ``E[x x^T] = Q diag(h) Q^T``."""
        return covariance(self.h, self.Q)

    def _hessian_at_optimum(self, H: np.ndarray) -> tuple[np.ndarray, float]:
        v = self.v_star
        if v == 0.0:
            return H / 4.0, 0.0

        def scalars(n: int) -> np.ndarray:
            z, w = _gh(n)
            t = np.sqrt(v) * z
            wt = sigmoid(t) * sigmoid(-t)
            return np.array([w @ wt, w @ (wt * t * t)])

        fine, coarse = scalars(201), scalars(101)
        alpha, beta = fine
        u = H @ self.theta_star
        Hs = alpha * (H - np.outer(u, u) / v) + beta * np.outer(u, u) / v**2
        Hs = 0.5 * (Hs + Hs.T)
        err = float(np.max(np.abs(fine - coarse) * np.array([1.0, 1.0 / v])))
        return Hs, err

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "logistic_online",
            "d": self.d,
            "spectrum": getattr(self, "spectrum_spec", "custom"),
            "rotated": self.Q is not None,
            "theta_star_hnorm": float(np.sqrt(self.v_star)),
            "excess_risk": self.excess_risk_method,
            "eval_size": self.eval_size,
            "n_quad": self.n_quad,
            "seed": self.seed,
        }

    def _on(self, xp: Any, name: str, dtype: Any) -> Any:
        key = (id(xp), name, str(dtype))
        if key not in self._cache:
            self._cache[key] = xp.asarray(np.asarray(getattr(self, name)), dtype=dtype)
        return self._cache[key]

    # ------------------------------------------------------------------ sampling
    def _features(self, stream: RandomStream, shape: tuple[int, ...]) -> Any:
        xp, dt = stream.xp, stream.dtype
        x = stream.normal((*shape, self.d))
        x *= self._on(xp, "sqrt_h", dt)
        if self.Q is not None:
            x = x @ self._on(xp, "Q", dt).T
        return x

    def sample(self, stream: RandomStream, shape: tuple[int, int, int]) -> LogisticBatch:
        """``x ~ N(0, H)`` and ``y = +1`` with probability ``sigmoid(<x, theta*>)``, else -1."""
        R, P, b = shape
        xp, dt = stream.xp, stream.dtype
        x = self._features(stream, (R, P, b))
        t = x @ self._on(xp, "theta_star", dt)
        return labelled_batch(stream, x, t)

    # ------------------------------------------------------------------ objective
    def _pair_moments(self, eta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cholesky coefficients of (t, delta) = (s1 z1, c21 z1 + c22 z2) for eta (m, d)."""
        H = self.H
        Heta = eta @ H
        v = self.v_star
        cd = Heta @ self.theta_star
        vd = np.einsum("md,md->m", Heta, eta)
        s1 = np.sqrt(v)
        if s1 > 0:
            c21 = cd / s1
            c22 = np.sqrt(np.maximum(vd - c21 * c21, 0.0))
        else:
            c21 = np.zeros_like(vd)
            c22 = np.sqrt(np.maximum(vd, 0.0))
        return c21, c22, Heta

    def _flat(self, theta: Any) -> tuple[np.ndarray, tuple[int, ...], Any]:
        xp = namespace_of(theta)
        th = np.asarray(to_numpy(theta), dtype=np.float64)
        self.check_theta(th)
        return th.reshape(-1, self.d), th.shape[:-1], xp

    def excess_risk_quadrature(self, theta: Any) -> np.ndarray:
        """``f(theta) - f*`` by the two-dimensional Gauss-Hermite rule (shape ``theta.shape[:-1]``)."""
        th, lead, _ = self._flat(theta)
        eta = th - self.theta_star
        c21, c22, _ = self._pair_moments(eta)
        s1 = np.sqrt(self.v_star)
        t = s1 * self._hz1
        fused = kl_quadrature(t, self._hz1, self._hz2, self._hw, c21, c22)
        if fused is not None:  # the same sum node by node, compiled (no (m, q) temporaries)
            return fused.reshape(lead)
        out = np.empty(th.shape[0])
        chunk = max(1, 2**21 // self._hw.size)
        for i in range(0, th.shape[0], chunk):
            sl = slice(i, i + chunk)
            delta = c21[sl, None] * self._hz1 + c22[sl, None] * self._hz2
            out[sl] = bernoulli_kl_logits(t, t + delta) @ self._hw
        return out.reshape(lead)

    def _eval_sample(self) -> tuple[np.ndarray, np.ndarray]:
        if self._eval is None:
            rng = np.random.default_rng(
                np.random.SeedSequence([0 if self.seed is None else self.seed, 2])
            )
            x = rng.standard_normal((self.eval_size, self.d)) * self.sqrt_h
            if self.Q is not None:
                x = x @ self.Q.T
            self._eval = (x, x @ self.theta_star)
        return self._eval

    def _sample_terms(self, theta: Any) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        th, lead, _ = self._flat(theta)
        x, t = self._eval_sample()
        mean = np.empty(th.shape[0])
        se = np.empty(th.shape[0])
        chunk = max(1, 2**22 // self.eval_size)
        N = self.eval_size
        for i in range(0, th.shape[0], chunk):
            a = th[i : i + chunk] @ x.T  # (m, N)
            B = bernoulli_kl_logits(t, a)
            mean[i : i + chunk] = B.mean(axis=1)
            se[i : i + chunk] = B.std(axis=1, ddof=1) / np.sqrt(N)
        return mean, se, lead

    def excess_risk_sample(self, theta: Any) -> np.ndarray:
        """``f(theta) - f*`` estimated on the fixed evaluation sample (unbiased, >= 0)."""
        mean, _, lead = self._sample_terms(theta)
        return mean.reshape(lead)

    def excess_risk_se(self, theta: Any) -> np.ndarray:
        """Standard error of :meth:`excess_risk_sample` (``std_i B_i / sqrt(eval_size)``)."""
        _, se, lead = self._sample_terms(theta)
        return se.reshape(lead)

    def errors(self, theta: Any) -> dict[str, Any]:
        """``excess_risk`` (quadrature or evaluation sample), ``hnorm2 = ||eta||_{H*}^2``,
        ``dist2 = ||eta||^2`` for ``theta`` of shape (..., d)."""
        return self._selected_errors(theta, METRICS)

    def errors_of(self, theta: Any, metrics: tuple[str, ...] = METRICS) -> dict[str, Any]:
        """:meth:`errors` restricted to ``metrics`` (in :data:`METRICS` order), computing only
        those: without ``excess_risk`` the quadrature (or the evaluation sample), which costs
        about ten times the rest, is not evaluated.  The same numbers as :meth:`errors`; a
        subclass that overrides :meth:`errors` gets the base rule (its :meth:`errors`, filtered)."""
        if type(self).errors is not LogisticRegression.errors:
            return super().errors_of(theta, metrics)
        return self._selected_errors(theta, metrics)

    def _selected_errors(self, theta: Any, metrics: tuple[str, ...]) -> dict[str, Any]:
        """The metrics ``metrics`` of ``theta``, each computed only when asked for."""
        xp = namespace_of(theta)
        th, lead, _ = self._flat(theta)
        eta = th - self.theta_star
        out: dict[str, Any] = {}
        for m in metrics:
            if m == "excess_risk":
                if self.excess_risk_method == "quadrature":
                    v = self.excess_risk_quadrature(theta)
                else:
                    v = self.excess_risk_sample(theta)
            elif m == "hnorm2":
                v = np.einsum("md,md->m", eta @ self.H_star, eta).reshape(lead)
            elif m == "dist2":
                v = np.einsum("md,md->m", eta, eta).reshape(lead)
            else:
                raise ValueError(f"metrics: unknown metric {m!r}; allowed: {list(METRICS)}")
            out[m] = xp.asarray(v)
        return out

    def loss(self, theta: Any) -> Any:
        """``f(theta) = f* + excess risk`` (quadrature)."""
        return self.excess_risk_quadrature(theta) + self.f_star

    def grad(self, theta: Any) -> Any:
        """Population gradient ``E[(sigmoid(<x, theta>) - sigmoid(<x, theta*>)) x]`` (quadrature)."""
        xp = namespace_of(theta)
        th, lead, _ = self._flat(theta)
        eta = th - self.theta_star
        c21, c22, Heta = self._pair_moments(eta)
        s1 = np.sqrt(self.v_star)
        t = s1 * self._qz1
        delta = c21[:, None] * self._qz1 + c22[:, None] * self._qz2
        g = sigmoid(t + delta) - sigmoid(t)  # (m, q)
        Et = (g * t) @ self._qw
        Ed = (g * delta) @ self._qw
        v = self.v_star
        cd = s1 * c21
        vd = c21 * c21 + c22 * c22
        C = np.empty((th.shape[0], 2, 2))
        C[:, 0, 0], C[:, 0, 1], C[:, 1, 0], C[:, 1, 1] = v, cd, cd, vd
        coef = np.linalg.pinv(C, rtol=1e-13, hermitian=True) @ np.stack([Et, Ed], -1)[..., None]
        u = self.H @ self.theta_star
        out = coef[:, 0, :] * u + coef[:, 1, :] * Heta
        return xp.asarray(out.reshape(*lead, self.d))
