"""Logistic regression whose nodes draw their data from different distributions.

Model (derived here). Node ``i = 1..P`` sees features ``x ~ N(m_i, S_i)``, ``S_i =
diag(s_i)``, and labels ``y in {-1, +1}`` with ``P(y = 1 | x) = sigmoid(<x, beta_i>)``; its
objective is the logistic loss ``f_i(theta) = E_i log(1 + exp(-y <x, theta>))`` and the
network's ``f = (1/P) sum_i f_i``. Three kinds of heterogeneity, each set by one parameter:

* covariate shift of the means: ``m_i`` seeded Gaussian, centred over the nodes and scaled so
  that ``(1/P) sum_i ||m_i||^2 = feature_shift^2`` (exact);
* covariate shift of the covariances: ``s_i = sbar (1 + r v_i)`` as the node spectra of
  :func:`convkit.problems.heterogeneous.node_spectra`, ``max_i ||S_i - Sbar||_op =
  covariance_dissimilarity`` (exact to rounding);
* concept shift: ``beta_i = beta + kappa nu_i`` with ``nu_i`` seeded Gaussian, centred over
  the nodes; ``kappa`` is found by root finding so that the outer variance at the optimum is
  the requested ``zeta2`` (below).

With ``kappa = 0`` every node is well specified with the same ``beta``, which then minimises
every ``f_i``: covariate shift alone changes the Hessians (second-order heterogeneity) but
leaves ``grad f_i(theta*) = 0`` (no first-order heterogeneity); ``zeta2 > 0`` needs the
concept shift.

Exact reduction to one dimension (Stein's lemma). Write ``a = <x, theta>`` and ``c = <x,
beta_i>``, Gaussian with means ``m_i^T theta``, ``m_i^T beta_i``, variances ``theta^T S_i
theta``, ``beta_i^T S_i beta_i`` and covariance ``theta^T S_i beta_i``. Taking the expectation
over ``y`` first, ``f_i(theta) = E[sp(a) - sigmoid(c) a]`` with ``sp(z) = log(1 + e^z)``, and,
by Gaussian integration by parts (``E[(x - m) g(<x, t>)] = S t E[g']``, applied once or
twice)::

    f_i(theta)    = E sp(a) - m_i^T theta E sigmoid(c) - theta^T S_i beta_i E sigmoid'(c),
    grad f_i      = m_i E[sigmoid(a) - sigmoid(c)]
                    + S_i (theta E sigmoid'(a) - beta_i E sigmoid'(c)),
    grad^2 f_i    = (S_i + m_i m_i^T) E sigmoid'(a) + (m_i u^T + u m_i^T) E sigmoid''(a)
                    + u u^T E sigmoid'''(a),     u = S_i theta,

every expectation one-dimensional. Each is ``E phi(mu + s z)``, ``z ~ N(0, 1)``, computed by
the trapezoidal rule in ``z`` on ``[-12, 12]`` with spacing ``dz = min(1/4, 1/(2 s))``: the
integrand is analytic in the strip ``|Im z| < pi / s`` (the sigmoid's poles at ``+-i pi``), so
the rule's error is about ``exp(-2 pi^2 / (s dz)) <= exp(-4 pi^2) ~ 1e-17`` relative, whatever
``s`` (a Gauss-Hermite rule of fixed size is not: with 201 nodes, ``E sigmoid'(a)`` was
measured 3e-5 off at ``s = 8`` and 1e-2 off at ``s = 40``). ``quadrature_error`` stores the
change of the nodes' gradients at ``theta*`` when ``dz`` is halved. ``theta*`` is found by
Newton's method on these gradients and Hessians until ``||grad f(theta*)|| <= 1e-13``
(stored: ``grad_norm_at_optimum``).

First- and second-order heterogeneity at ``theta*`` (numerical, to the quadrature's and
Newton's accuracy): ``zeta^2 = (1/P) sum_i ||grad f_i(theta*)||^2``, set to ``zeta2`` by
Brent's method on ``kappa`` (relative tolerance 1e-13; the value reached is ``zeta2``). As
``kappa`` grows, ``zeta^2`` rises from 0 towards a limit, that of nearly deterministic node
labels (measured for d = 20, P = 8, ``feature_shift = 2``, seed 1: 0.054 at ``kappa = 0.5``,
0.111 at 1, 0.158 at 2, 0.179 at 4, 0.191 at 16, 0.1926 at 256): the smallest ``kappa`` of
the grid ``2^(j/4) <= 2^10`` at or above ``zeta2`` brackets the root with the previous grid
point; a ``zeta2`` that the grid does not reach before ``zeta^2`` levels off (a relative rise
below 1e-3 from one point to the next) raises, naming the largest value found. Reported too:
the Hessian dissimilarity at the optimum, ``delta = max_i ||grad^2 f_i(theta*) -
grad^2 f(theta*)||_op`` (Karimireddy et al. 2020, A2, at ``theta*``; reported, as
``delta_ms``, its mean square over nodes).

Excess risk without cancellation. ``E sp(a) - E sp(a*)`` (``a* = <x, theta*>``) depends on
the two marginals only, so it may be computed under any coupling; with the same ``z`` for
both, ``a = mu + s z`` and ``a* = mu* + s* z``,

    sp(a) - sp(a*) = (a - a*) sigmoid(a*) + B(a*, a),

``B(t, a) = sp(a) - sp(t) - sigmoid(t) (a - t) >= 0`` the Bernoulli divergence of logits
(:func:`~convkit.problems.logistic.bernoulli_kl_logits`, computed without cancellation), hence

    f(theta) - f* = (1/P) sum_i ( E[(a - a*) sigmoid(a*)] + E B(a*, a)
                    - (mu - mu*) E sigmoid(c) - (theta - theta*)^T S_i beta_i E sigmoid'(c) ),

one-dimensional integrals again, whose first-order part (the terms linear in ``theta -
theta*``) sums to ``(theta - theta*)^T grad f(theta*)`` (at most ``1e-13 ||theta -
theta*||``) and whose second-order part ``E B`` is computed to relative precision: no
difference of two values of ``f`` is ever taken. ``hnorm2 = ||theta - theta*||_{H*}^2`` with
``H* = grad^2 f(theta*)``.

Node metrics: ``node_excess_risk = (1/P) sum_j f(theta_j) - f*`` over the nodes' own models
``theta_j``, ``node_hnorm2``, ``node_dist2``, as for
:class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..backend import RandomStream, namespace_of, to_numpy
from ..validation import Parameter, instance, integer, real, seed
from .base import Problem, as_float_array
from .heterogeneous import NODE_METRICS, node_spectra
from .least_squares import spectrum as _spectrum
from .logistic import LogisticBatch, LogisticSteps, bernoulli_kl_logits, labelled_batch, sigmoid

__all__ = ["HeterogeneousLogistic"]

#: Newton's stopping rule on ``||grad f||``
_GRAD_TOL = 1e-13
#: the trapezoidal rule's range in z and its largest spacing
_Z_MAX = 12.0
_DZ_MAX = 0.25
#: at most 2 * _HALF_MAX + 1 nodes (spread s <= 1365 at full accuracy, the error growing as
#: exp(-2 pi^2 / (s dz)) beyond)
_HALF_MAX = 2**15


def _rule(s_max: float, refine: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoidal nodes and weights for ``E phi(mu + s z)``, ``z ~ N(0, 1)``, ``s <= s_max``
    (module docstring): spacing ``min(1/4, 1/(2 s_max)) / refine`` on ``[-12, 12]``, weights
    ``dz N(z)`` normalised to sum 1."""
    dz = max(min(_DZ_MAX, 0.5 / max(float(s_max), 1e-300)) / refine, _Z_MAX / _HALF_MAX)
    half = int(np.ceil(_Z_MAX / dz))
    z = np.arange(-half, half + 1) * dz
    w = np.exp(-0.5 * z * z)
    return z, w / w.sum()


def _sigmoid_derivatives(t: np.ndarray) -> tuple[np.ndarray, ...]:
    """``sigmoid(t)`` and its first three derivatives."""
    s = sigmoid(t)
    q = sigmoid(-t)
    d1 = s * q
    return s, d1, d1 * (q - s), d1 * (1.0 - 6.0 * d1)


#: The largest condition number ``L / mu`` of ``H(theta*)`` a :class:`HeterogeneousLogistic`
#: accepts: beyond it ``mu`` is at the rounding level of ``L`` (float64 resolves 1e-16).
MAX_CONDITION = 1e12


class HeterogeneousLogistic(LogisticSteps, Problem):
    """Logistic regression with node data distributions (module docstring).

    Parameters
    ----------
    d:
        Dimension ``d >= 1``.
    workers:
        Number of nodes ``P >= 1`` (``P >= 2`` for any heterogeneity).
    zeta2:
        Outer variance at the optimum ``(1/P) sum_i ||grad f_i(theta*)||^2 >= 0``, reached by
        scaling the concept shift (numerical; module docstring).
    feature_shift:
        Root mean square ``||m_i||`` of the node feature means (exact); a shift that makes
        ``L / mu`` of ``H(theta*)`` exceed :data:`MAX_CONDITION` (1e12) is refused.
    covariance_dissimilarity:
        ``max_i ||S_i - Sbar||_op`` of the node feature covariances (exact to rounding).
    spectrum:
        The mean covariance ``Sbar``'s eigenvalues (a preset of
        :func:`convkit.problems.least_squares.spectrum`, a callable or an array).
    beta:
        The common label parameter (default: seeded ``N(0, 4 I / d)``, ``E||beta||^2 = 4``).
    seed:
        Seed of ``beta`` and of the shifts' directions.
    """

    heterogeneous = True
    node_metrics = NODE_METRICS

    parameters: ClassVar[dict[str, Parameter]] = {
        "d": integer(low=1, doc="dimension"),
        "workers": integer(low=1, doc="number of nodes P"),
        "zeta2": real(low=0, default=0.0, doc="target heterogeneity zeta^2 of the node optima"),
        "feature_shift": real(low=0, default=0.0, doc="shift of the nodes' feature means"),
        "covariance_dissimilarity": real(low=0, default=0.0,
                                         doc="dissimilarity of the nodes' covariances"),
        "spectrum": instance("eigenvalues: 'flat', '1/i', '1/i^2', 'kappa:K', a function or "
                             "an array", default="flat", wrong=("sharp", "kappa:x")),
        "beta": instance("the labels' shared parameter, a finite vector of shape (d,)",
                         default=None, optional=True, wrong=([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],)),
        "seed": seed(default=0, doc="seed of the instance"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Four coordinates, four nodes, zeta^2 = 0.05, feature shift 0.5."""
        return {"d": 4, "workers": 4, "zeta2": 0.05, "feature_shift": 0.5}

    def __init__(
        self,
        d: int,
        workers: int,
        zeta2: float = 0.0,
        feature_shift: float = 0.0,
        covariance_dissimilarity: float = 0.0,
        spectrum: str | Callable | Any = "flat",
        beta: Any = None,
        seed: int = 0,
    ) -> None:
        self.d = self.checked("d", d)
        self.P = self.checked("workers", workers)
        self.zeta2_target = self.checked("zeta2", zeta2)
        self.feature_shift = self.checked("feature_shift", feature_shift)
        cov_dis = self.checked("covariance_dissimilarity", covariance_dissimilarity)
        if self.P < 2 and (self.zeta2_target > 0 or self.feature_shift > 0 or cov_dis > 0):
            raise ValueError(
                "zeta2, feature_shift and covariance_dissimilarity must be 0 with workers = 1 "
                f"(one node is the network), got zeta2 = {self.zeta2_target:g}, feature_shift "
                f"= {self.feature_shift:g}, covariance_dissimilarity = {cov_dis:g}"
            )
        self.seed = self.checked("seed", seed)
        self.noise = None
        self.spectrum_spec = spectrum if isinstance(spectrum, str) else "custom"
        sbar = _spectrum(spectrum, self.d)
        self.node_s = node_spectra(
            sbar, self.P, cov_dis, self.seed, parameter="covariance_dissimilarity"
        )
        self.s = self.node_s.mean(axis=0)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 29, self.P, self.d]))
        if beta is None:
            beta = 2.0 * rng.standard_normal(self.d) / np.sqrt(self.d)
        else:
            rng.standard_normal(self.d)  # the same directions below whatever beta
        beta = as_float_array("beta", beta)
        if beta.shape != (self.d,) or not np.all(np.isfinite(beta)):
            raise ValueError(f"beta must be a finite vector of shape ({self.d},), got {beta.shape}")
        self.beta = beta
        m = rng.standard_normal((self.P, self.d))
        m -= m.mean(axis=0, keepdims=True)
        raw = float(np.mean(np.sum(m * m, axis=1)))
        self.means = m * (self.feature_shift / np.sqrt(raw)) if self.feature_shift > 0 else 0 * m
        nu = rng.standard_normal((self.P, self.d))
        self._nu = nu - nu.mean(axis=0, keepdims=True)
        self.kappa = self._solve_kappa()
        self.label_params = self.beta + self.kappa * self._nu
        self.theta_star, self.grad_norm_at_optimum = self._newton(self.label_params)
        g = self._node_grads(self.theta_star, self.label_params)
        self.zeta2 = float(np.mean(np.sum(g * g, axis=1)))
        self.grad_at_optimum = g.mean(axis=0)
        Hn = self._node_hessians(self.theta_star)
        self.H_star = Hn.mean(axis=0)
        dev = np.array([np.max(np.abs(np.linalg.eigvalsh(h - self.H_star))) for h in Hn])
        self.delta, self.delta_ms = float(dev.max()), float(np.mean(dev * dev))
        self.f_star = float(np.mean(self._node_losses(self.theta_star, self.label_params)))
        self.quadrature_error = float(
            np.max(np.abs(self._node_grads(self.theta_star, self.label_params, refine=2) - g))
        )
        eig = np.linalg.eigvalsh(self.H_star)
        self.mu = float(eig[0])
        # sigmoid' <= 1/4: grad^2 f_i <= E[x x^T] / 4 = (S_i + m_i m_i^T) / 4
        self.L = max(
            float(np.linalg.eigvalsh(np.diag(s) + np.outer(mi, mi))[-1]) / 4.0
            for s, mi in zip(self.node_s, self.means, strict=True)
        )
        self._check_condition(cov_dis)
        self.sqrt_node_s = np.sqrt(self.node_s)
        self._prepare_excess()

    def _check_condition(self, cov_dis: float) -> None:
        """``ValueError`` when ``L / mu`` exceeds :data:`MAX_CONDITION` (``mu`` of
        ``H(theta*)`` lost to rounding: a large ``feature_shift`` stretches the features along
        the node means while the logistic curvature vanishes there), with the number."""
        cond = self.L / self.mu if self.mu > 0 else float("inf")
        if cond <= MAX_CONDITION:
            return
        raise ValueError(
            f"HeterogeneousLogistic: feature_shift = {self.feature_shift:g} (with "
            f"covariance_dissimilarity = {cov_dis:g}, zeta2 = {self.zeta2_target:g}, d = "
            f"{self.d}, workers = {self.P}, seed = {self.seed}) gives H(theta*) the condition "
            f"number L / mu = {cond:.3g} (mu = {self.mu:.3g}, L = {self.L:.3g}): mu is lost to "
            f"rounding and no step contracts in float64; allowed: L / mu <= "
            f"{MAX_CONDITION:.0e} (a smaller feature_shift or spectrum spread)"
        )

    # ------------------------------------------------------------------ exact 1-D moments
    def _moments(
        self, mean: np.ndarray, var: np.ndarray, refine: int = 1
    ) -> tuple[np.ndarray, ...]:
        """``E[sigmoid^(k)(a)]``, k = 0..3, and ``E sp(a)`` for ``a ~ N(mean, var)``
        (arrays of one shape), by the trapezoidal rule (module docstring)."""
        sd = np.sqrt(np.maximum(var, 0.0))
        z, w = _rule(float(np.max(sd, initial=0.0)), refine)
        a = mean[..., None] + sd[..., None] * z
        s0, s1, s2, s3 = _sigmoid_derivatives(a)
        sp = np.logaddexp(0.0, a)
        return s0 @ w, s1 @ w, s2 @ w, s3 @ w, sp @ w

    def _node_losses(self, theta: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """``f_i(theta)`` of every node, shape (P,)."""
        ma, va = self.means @ theta, np.sum(self.node_s * theta * theta, axis=1)
        mc = np.sum(self.means * labels, axis=1)
        vc = np.sum(self.node_s * labels * labels, axis=1)
        cov = np.sum(self.node_s * theta * labels, axis=1)
        *_, sp_a = self._moments(ma, va)
        s0c, s1c, *_ = self._moments(mc, vc)
        return sp_a - ma * s0c - cov * s1c

    def _node_grads(self, theta: np.ndarray, labels: np.ndarray, refine: int = 1) -> np.ndarray:
        """``grad f_i(theta)`` of every node, shape (P, d)."""
        ma, va = self.means @ theta, np.sum(self.node_s * theta * theta, axis=1)
        mc = np.sum(self.means * labels, axis=1)
        vc = np.sum(self.node_s * labels * labels, axis=1)
        s0a, s1a, *_ = self._moments(ma, va, refine)
        s0c, s1c, *_ = self._moments(mc, vc, refine)
        return self.means * (s0a - s0c)[:, None] + self.node_s * (
            theta[None, :] * s1a[:, None] - labels * s1c[:, None]
        )

    def _node_hessians(self, theta: np.ndarray) -> np.ndarray:
        """``grad^2 f_i(theta)`` of every node, shape (P, d, d)."""
        ma, va = self.means @ theta, np.sum(self.node_s * theta * theta, axis=1)
        _, s1, s2, s3, _ = self._moments(ma, va)
        u = self.node_s * theta
        m = self.means
        out = np.einsum("p,pi,pj->pij", s1, m, m) + np.einsum("p,pi,pj->pij", s3, u, u)
        out += np.einsum("p,pi,pj->pij", s2, m, u) + np.einsum("p,pi,pj->pij", s2, u, m)
        out[:, np.arange(self.d), np.arange(self.d)] += self.node_s * s1[:, None]
        return out

    def _newton(self, labels: np.ndarray) -> tuple[np.ndarray, float]:
        """The minimiser of ``f`` for the label parameters ``labels`` (Newton's method with
        halving steps on the exact gradients and Hessians); its gradient norm."""
        theta = labels.mean(axis=0).copy()
        f = float(np.mean(self._node_losses(theta, labels)))
        for _ in range(100):
            g = self._node_grads(theta, labels).mean(axis=0)
            gn = float(np.linalg.norm(g))
            if gn <= _GRAD_TOL:
                return theta, gn
            step = np.linalg.solve(self._node_hessians(theta).mean(axis=0), g)
            t = 1.0
            while t > 1e-10:
                cand = theta - t * step
                fc = float(np.mean(self._node_losses(cand, labels)))
                if fc <= f + 1e-15 * abs(f):
                    break
                t /= 2
            theta, f = cand, fc
        g = self._node_grads(theta, labels).mean(axis=0)
        gn = float(np.linalg.norm(g))
        if gn > 1e-9:
            raise RuntimeError(f"Newton's method did not converge (||grad f|| = {gn:.3g})")
        return theta, gn

    def _solve_kappa(self) -> float:
        """The concept-shift scale ``kappa`` at which ``zeta^2`` equals the target."""
        target = self.zeta2_target
        if target == 0.0:
            return 0.0
        from scipy.optimize import brentq

        def zeta2_at(kappa: float) -> float:
            labels = self.beta + kappa * self._nu
            theta, _ = self._newton(labels)
            g = self._node_grads(theta, labels)
            return float(np.mean(np.sum(g * g, axis=1)))

        # zeta^2 rises with kappa towards a limit (module docstring): the first grid point at
        # or above the target brackets the smallest root with the previous one
        lo, best, prev = 0.0, (0.0, 0.0), 0.0
        for j in range(-16, 41):  # kappa = 2^(j/4), 1/16 .. 2^10
            kappa = 2.0 ** (j / 4)
            z = zeta2_at(kappa)
            if z >= target:
                return float(
                    brentq(lambda k: zeta2_at(k) - target, lo, kappa, xtol=1e-14, rtol=1e-13)
                )
            best = max(best, (z, kappa))
            if z - prev < 1e-3 * z:  # levelled off
                break
            lo, prev = kappa, z
        raise ValueError(
            f"zeta2 = {target:g} cannot be reached by the concept shift of this problem: the "
            f"largest zeta^2 found is {best[0]:.6g} (at kappa = {best[1]:.4g}); allowed: "
            f"0 <= zeta2 <= about {best[0]:.6g}, or another beta, feature_shift or seed"
        )

    # ------------------------------------------------------------------ constants
    @property
    def workers(self) -> int:
        """Number of nodes ``P``."""
        return self.P

    @property
    def required_workers(self) -> int:
        """Every algorithm runs on the ``P`` nodes (one distribution each)."""
        return self.P

    def describe(self) -> dict[str, Any]:
        digest = hashlib.sha256(np.ascontiguousarray(self.beta).tobytes()).hexdigest()[:16]
        return {
            "kind": "heterogeneous_logistic",
            "d": self.d,
            "workers": self.P,
            "zeta2": self.zeta2_target,
            "feature_shift": self.feature_shift,
            "covariance_dissimilarity": float(np.max(np.abs(self.node_s - self.s))),
            "spectrum": self.spectrum_spec,
            "seed": self.seed,
            "beta_sha256": digest,
        }

    def node_losses(self, theta: Any) -> np.ndarray:
        """``f_i(theta)`` of every node (``theta`` of shape (d,)), shape (P,)."""
        return self._node_losses(np.asarray(theta, dtype=np.float64), self.label_params)

    def worker_grads(self, theta: Any) -> np.ndarray:
        """``grad f_i(theta)`` of every node, shape (P, d) (exact to quadrature accuracy)."""
        return self._node_grads(np.asarray(theta, dtype=np.float64), self.label_params)

    def node_hessians(self, theta: Any) -> np.ndarray:
        """``grad^2 f_i(theta)`` of every node, shape (P, d, d)."""
        return self._node_hessians(np.asarray(theta, dtype=np.float64))

    def grad(self, theta: Any) -> Any:
        """Full gradient of the network objective at ``theta`` (shape (..., d))."""
        xp = namespace_of(theta)
        th = np.asarray(to_numpy(theta), dtype=np.float64)
        flat = th.reshape(-1, self.d)
        out = np.stack([self.worker_grads(t).mean(axis=0) for t in flat])
        return xp.asarray(out.reshape(th.shape))

    def loss(self, theta: Any) -> Any:
        """``f(theta)`` (shape ``theta.shape[:-1]``)."""
        th = np.asarray(to_numpy(theta), dtype=np.float64)
        flat = th.reshape(-1, self.d)
        return np.array([self.node_losses(t).mean() for t in flat]).reshape(th.shape[:-1])

    # ------------------------------------------------------------------ sampling, gradients
    def sample(self, stream: RandomStream, shape: tuple[int, int, int]) -> LogisticBatch:
        """Node ``i``: ``x = m_i + sqrt(s_i) z`` and ``y = +1`` with probability
        ``sigmoid(<x, beta_i>)``, else -1."""
        R, P, b = shape
        if P != self.P:
            raise ValueError(
                f"HeterogeneousLogistic has workers = {self.P} nodes (one distribution each); "
                f"the engine asked for a batch with P = {P}: run algorithms on {self.P} nodes"
            )
        xp, dt = stream.xp, stream.dtype
        z = stream.normal((R, P, b, self.d))
        x = z * xp.asarray(self.sqrt_node_s[:, None, :], dtype=dt) + xp.asarray(
            self.means[:, None, :], dtype=dt
        )
        t = xp.sum(x * xp.asarray(self.label_params[:, None, :], dtype=dt), axis=-1)
        return labelled_batch(stream, x, t)

    # ------------------------------------------------------------------ objective
    def _prepare_excess(self) -> None:
        """The per-node constants of the excess risk: ``mu*``, ``s*`` of ``a*`` and the
        label moments ``E sigmoid(c)``, ``E sigmoid'(c)``."""
        ts, lab = self.theta_star, self.label_params
        self._mu_star = self.means @ ts  # (P,)
        self._s_star = np.sqrt(np.sum(self.node_s * ts * ts, axis=1))
        mc = np.sum(self.means * lab, axis=1)
        vc = np.sum(self.node_s * lab * lab, axis=1)
        self._label_s0, self._label_s1, *_ = self._moments(mc, vc)

    def excess_risk(self, theta: Any) -> np.ndarray:
        """``f(theta) - f*`` for ``theta`` (..., d) by the one-dimensional form of the module
        docstring (rows by chunks: the (rows, P, nodes) temporary stays small)."""
        th = np.asarray(to_numpy(theta), dtype=np.float64)
        lead = th.shape[:-1]
        flat = th.reshape(-1, self.d)
        out = np.empty(flat.shape[0])
        mus, ss = self._mu_star, self._s_star
        lab_s = self.node_s * self.label_params  # (P, d): S_i beta_i, cov - cov* = eta S_i beta_i
        start = 0
        while start < flat.shape[0]:
            rows = flat[start : start + 256]
            sd = np.sqrt(np.maximum((rows * rows) @ self.node_s.T, 0.0))  # (m, P)
            z, w = _rule(max(float(sd.max(initial=0.0)), float(ss.max(initial=0.0))))
            m = max(1, min(rows.shape[0], 2**21 // (self.P * z.size)))
            rows, sd = rows[:m], sd[:m]
            # a - a* from eta, not as a difference of two O(1) numbers (the linear terms
            # cancel to ~ eta^T grad f(theta*) and would otherwise carry 1e-16 absolute)
            eta = rows - self.theta_star
            dmu = eta @ self.means.T  # mu - mu*
            dsd = ((eta * (rows + self.theta_star)) @ self.node_s.T) / (sd + ss)  # sd - s*
            dsd = np.where(sd + ss > 0, dsd, 0.0)
            a_star = mus[:, None] + ss[:, None] * z  # (P, n)
            delta = dmu[..., None] + dsd[..., None] * z  # (m, P, n): a - a*
            first = (delta * sigmoid(a_star)) @ w
            second = bernoulli_kl_logits(a_star, a_star + delta) @ w
            lin = dmu * self._label_s0 + (eta @ lab_s.T) * self._label_s1
            out[start : start + m] = np.mean(first - lin + second, axis=1)
            start += m
        return out.reshape(lead)

    def errors(self, theta: Any) -> dict[str, Any]:
        """``excess_risk`` (module docstring), ``hnorm2 = ||theta - theta*||_{H*}^2``,
        ``dist2`` for ``theta`` of shape (..., d)."""
        xp = namespace_of(theta)
        th = np.asarray(to_numpy(theta), dtype=np.float64)
        self.check_theta(th)
        eta = th - self.theta_star
        er = self.excess_risk(th)
        hn = np.einsum("...d,...d->...", eta @ self.H_star, eta)
        dist = np.einsum("...d,...d->...", eta, eta)
        return {k: xp.asarray(v) for k, v in (("excess_risk", er), ("hnorm2", hn), ("dist2", dist))}

    def node_errors(self, models: Any) -> dict[str, Any]:
        """The mean over nodes of :meth:`errors` of each node's model (``models`` of shape
        (..., P, d)), named ``node_excess_risk``, ``node_hnorm2``, ``node_dist2``."""
        xp = namespace_of(models)
        if models.ndim < 2 or models.shape[-2] != self.P or models.shape[-1] != self.d:
            raise ValueError(
                f"models must have shape (..., P = {self.P}, d = {self.d}), got "
                f"{tuple(models.shape)}"
            )
        e = self.errors(models)
        return {f"node_{k}": xp.mean(v, axis=-1) for k, v in e.items()}
