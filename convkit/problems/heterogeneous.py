"""Least squares with a different optimum, and optionally a different Hessian, on every node,
at exactly controlled first- and second-order dissimilarity.

Model (derived here). Node ``i = 1..P`` sees Gaussian rows ``x ~ N(0, H_i)``,
``H_i = diag(h_i)``, with labels ``y = <x, theta*_i> + sigma eps``, ``eps ~ N(0, 1)``, so that
its objective is

    f_i(theta) = 1/2 E (y - <x, theta>)^2 = 1/2 ||theta - theta*_i||_{H_i}^2 + sigma^2 / 2.

The network objective ``f = (1/P) sum_i f_i`` is a quadratic of Hessian
``H = (1/P) sum_i H_i`` (``H_i = H`` for every node in the default, equal-Hessian problem).

Optimum. ``grad f(theta) = (1/P) sum_i H_i (theta - theta*_i)`` vanishes at

    theta* = (sum_i H_i)^{-1} sum_i H_i theta*_i.

Write ``u_i = theta*_i - theta*`` (the offsets) and ``w_i = H_i u_i``: ``theta*`` is the
optimum exactly when ``sum_i w_i = 0``. Expanding ``f_i`` around ``theta*``, the cross term
``-(1/P) sum_i (theta - theta*)^T w_i`` vanishes, hence

    f(theta) - f* = 1/2 ||theta - theta*||_H^2   (exact excess risk),
    f* = sigma^2 / 2 + (1/(2P)) sum_i ||u_i||_{H_i}^2.

First-order dissimilarity. ``grad f_i(theta*) = H_i (theta* - theta*_i) = -w_i``, hence

    zeta^2 = (1/P) sum_i ||grad f_i(theta*)||^2 = (1/P) sum_i ||w_i||^2.

The gradient offsets ``w_i`` are built as seeded Gaussian vectors, centred over the nodes
(``sum_i w_i = 0``) and scaled by one factor so that this equals the requested ``zeta2`` to
rounding; then ``u_i = H_i^{-1} w_i`` and ``theta*_i = theta* + u_i``. (With equal Hessians the
same construction reads: centred ``u_i`` scaled so that ``(1/P) sum_i ||H u_i||^2 = zeta2``,
the historical code path, kept verbatim so that its numbers do not move.)

Second-order dissimilarity (Hessian dissimilarity). Following assumption (A2), "delta-bounded
Hessian dissimilarity", of Karimireddy et al. 2020 ("SCAFFOLD: Stochastic Controlled
Averaging for Federated Learning", ICML),
``||grad^2 f_i(x) - grad^2 f(x)|| <= delta`` for all ``i`` and ``x``; for these quadratics the
Hessians are constant and the smallest such constant is::

    delta = max_i ||H_i - H||_op = max_{i, j} |h_{ij} - h_j|,

set by ``hessian_dissimilarity``. The node spectra are ``h_i = hbar * (1 + s v_i)`` with
``hbar`` the ``spectrum``, ``v_i`` seeded uniform on ``[-1, 1]^d`` centred over the nodes
(``sum_i v_i = 0``) and the scale ``s`` chosen so that the maximum above equals ``delta``;
``H`` is then the computed mean of the ``H_i`` (equal to ``diag(hbar)`` to rounding), and
``delta`` is exact to rounding with respect to it. The positive spectra need
``s max_{i,j}(-v_{ij}) < 1``; a larger ``delta`` raises. Reported alongside it:
the mean-square version ``delta_ms = (1/P) sum_i ||H_i - H||_op^2`` (the same assumption
averaged over nodes, defined here), ``delta_ms <= delta^2``. Explicit node spectra can be
given instead (``node_spectra``, shape (P, d)); ``delta`` is then measured from them.

Inner variance. For the Gaussian design (``E (x x^T - H_i) A (x x^T - H_i) = tr(A H_i) H_i +
H_i A H_i`` for symmetric ``A``; derived here) the sampling variance at ``theta*`` is

    sigma_*^2 = (1/P) sum_i E||g_i(theta*) - grad f_i(theta*)||^2
              = (1/P) sum_i (sigma^2 tr(H_i) + tr(H_i) ||u_i||_{H_i}^2 + ||H_i u_i||^2).

Additive noise (``design="additive"``): the stochastic gradient of node ``i`` is
``H_i (theta - theta*_i) - xi``, ``xi ~ N(0, sigma^2 H_i / b)`` independent of ``theta`` (the
additive-noise model of :class:`~convkit.problems.least_squares.LeastSquares`), so that
``sigma_*^2 = (sigma^2 / P) sum_i tr(H_i)`` does not depend on ``zeta^2``: what ``zeta^2`` and
``delta`` change is then the drift of local steps alone, not the sampling variance (with the
Gaussian design, ``zeta^2`` also raises the multiplicative noise ``tr(H_i) ||u_i||_{H_i}^2``).

Metrics. :meth:`HeterogeneousLeastSquares.errors` gives the error of a point (the engine
evaluates the nodes' average): ``excess_risk = 1/2 ||theta - theta*||_H^2``, ``hnorm2``,
``dist2``. :meth:`HeterogeneousLeastSquares.node_errors` gives the mean error of the nodes'
own models, ``node_excess_risk = (1/P) sum_i f(theta_i) - f*``, ``node_hnorm2`` and
``node_dist2`` (means over nodes); by the parallel-axis identity
``node_hnorm2 = hnorm2(theta_bar) + (1/P) sum_i ||theta_i - theta_bar||_H^2``.

This is the problem the claims of decentralized SGD with non-iid data are about (outer
variance ``zeta^2`` in D-PSGD's rate, Lian et al. 2017; the ``C_2`` term of DeepSqueeze,
Tang et al. 2019; client drift and SCAFFOLD, Karimireddy et al. 2020). With equal Hessians the
mean of the nodes' expected gradients is ``H (theta_bar - theta*)`` whatever their spread
(the ``w_i`` cancel), so ``zeta^2`` only adds sampling variance to the average of Local-SGD;
distinct Hessians make the drift of local steps bias the average. With ``zeta2 = 0`` and
equal Hessians it is the iid problem of :class:`~convkit.problems.least_squares.LeastSquares`
on every node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..backend import RandomStream, namespace_of
from ..validation import (
    Parameter,
    instance,
    integer,
    options,
    real,
    seed,
)
from ._heterogeneous_kernel import node_error_sums, node_ls_sgd_update
from .base import Problem, as_float_array
from .least_squares import spectrum as _spectrum

__all__ = ["NODE_METRICS", "HeterogeneousLeastSquares", "NodeBatch", "node_spectra"]

#: the mean over nodes of the error of each node's own model (:meth:`node_errors`)
NODE_METRICS: tuple[str, ...] = ("node_excess_risk", "node_hnorm2", "node_dist2")


@dataclass
class NodeBatch:
    """Raw draws ``z`` (R, P, b, d) (features ``x = z * sqrt(h_i)`` on node ``i``) and label
    noise ``eps`` (R, P, b)."""

    z: Any
    eps: Any


def node_spectra(
    hbar: np.ndarray,
    workers: int,
    delta: float,
    seed: int,
    parameter: str = "hessian_dissimilarity",
) -> np.ndarray:
    """Node spectra ``h_i = hbar (1 + s v_i)`` at Hessian dissimilarity ``delta`` (module
    docstring): ``v_i`` seeded uniform on ``[-1, 1]^d``, centred over the ``workers`` nodes, and
    ``s`` such that ``max_{i,j} hbar_j s |v_ij| = delta``. Shape (P, d), every entry > 0.

    Raises ValueError when ``delta`` would make a spectrum non-positive (the message names
    ``parameter``, the caller's name of ``delta``, and gives the largest allowed value)."""
    P, d = int(workers), hbar.size
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 17, P, d]))
    v = rng.uniform(-1.0, 1.0, (P, d))
    v -= v.mean(axis=0, keepdims=True)
    spread = float(np.max(np.abs(v) * hbar))
    neg = float(np.max(-v))
    if delta == 0.0 or spread == 0.0:
        return np.broadcast_to(hbar, (P, d)).copy()
    s = delta / spread
    if not s * neg < 1.0:
        raise ValueError(
            f"{parameter} = {delta:g} makes a node spectrum non-positive for this "
            f"spectrum, P = {P}, d = {d} and seed = {seed}; allowed: 0 <= "
            f"{parameter} < {spread / neg:.6g}"
        )
    return hbar * (1.0 + s * v)


class HeterogeneousLeastSquares(Problem):
    """Least squares with node optima ``theta*_i`` at dissimilarity ``zeta2`` and node Hessians
    ``H_i`` at Hessian dissimilarity ``hessian_dissimilarity`` (module docstring).

    Parameters
    ----------
    d:
        Dimension ``d >= 1``.
    workers:
        Number of nodes ``P >= 1`` (``P >= 2`` when ``zeta2 > 0`` or the Hessians differ); the
        engine's batches must have ``P`` workers.
    zeta2:
        Outer variance ``zeta^2 = (1/P) sum_i ||grad f_i(theta*)||^2 >= 0`` (exact).
    spectrum:
        Eigenvalues ``hbar`` of the mean Hessian (a preset of
        :func:`convkit.problems.least_squares.spectrum`, a callable or an array).
    noise:
        Label noise standard deviation ``sigma >= 0``.
    theta_star:
        The global optimum (default: seeded ``N(0, I/d)``, so ``E||theta*||^2 = 1``).
    seed:
        Seed of ``theta*``, of the offsets' directions and of the node spectra.
    hessian_dissimilarity:
        ``delta = max_i ||H_i - H||_op >= 0`` (Karimireddy et al. 2020, A2; exact to rounding);
        0 (default): every node has ``H_i = diag(hbar)``.
    node_spectra:
        Explicit node spectra ``h_i`` (shape (P, d), entries > 0) instead of
        ``hessian_dissimilarity`` (which must then be 0; ``spectrum`` is ignored).
    design:
        ``"gaussian"`` (rows ``x ~ N(0, H_i)``, the default) or ``"additive"`` (gradient
        ``H_i (theta - theta*_i) - xi``, module docstring).

    Attributes
    ----------
    h:
        Spectrum of the network Hessian ``H = (1/P) sum_i H_i``.
    node_h:
        Node spectra ``h_i``, shape (P, d).
    equal_hessians:
        Whether every ``H_i`` equals ``H`` (the historical problem, whose numbers are kept).
    node_optima:
        ``theta*_i`` stacked, shape (P, d).
    offsets:
        ``u_i = theta*_i - theta*``, shape (P, d), ``sum_i H_i u_i = 0``.
    zeta2, sigma2:
        The outer variance (as requested, exact) and the inner variance ``sigma_*^2`` at
        ``theta*`` (formula of the module docstring).
    delta, delta_ms:
        Hessian dissimilarity ``max_i ||H_i - H||_op`` and ``(1/P) sum_i ||H_i - H||_op^2``.
    """

    heterogeneous = True
    node_metrics = NODE_METRICS

    parameters: ClassVar[dict[str, Parameter]] = {
        "d": integer(low=1, doc="dimension"),
        "workers": integer(low=1, doc="number of nodes P"),
        "zeta2": real(low=0, doc="heterogeneity zeta^2 of the node optima"),
        "spectrum": instance("eigenvalues: 'flat', '1/i', '1/i^2', 'kappa:K', a function or "
                             "an array", default="flat", wrong=("sharp", "kappa:x")),
        "noise": real(low=0, default=1.0, doc="label noise standard deviation sigma"),
        "theta_star": instance(
            "the optimum: a finite vector of shape (d,)", default=None, optional=True,
            wrong=([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],),
        ),
        "seed": seed(default=0, doc="seed of the instance"),
        "hessian_dissimilarity": real(low=0, default=0.0, doc="dissimilarity of node Hessians"),
        "node_spectra": instance("one spectrum per node, (P, d)", default=None, optional=True,
                                 wrong=(np.ones((2, 4)),)),
        "design": options("gaussian", "additive", default="gaussian", doc="the features' law"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Four coordinates, four nodes, zeta^2 = 1, label noise 0.5."""
        return {"d": 4, "workers": 4, "zeta2": 1.0, "noise": 0.5}

    def __init__(
        self,
        d: int,
        workers: int,
        zeta2: float,
        spectrum: str | Callable | Any = "flat",
        noise: float = 1.0,
        theta_star: Any = None,
        seed: int = 0,
        hessian_dissimilarity: float = 0.0,
        node_spectra: Any = None,
        design: str = "gaussian",
    ) -> None:
        self.d = self.checked("d", d)
        self.P = self.checked("workers", workers)
        self.zeta2 = self.checked("zeta2", zeta2)
        delta = self.checked("hessian_dissimilarity", hessian_dissimilarity)
        if self.zeta2 > 0 and self.P < 2:
            raise ValueError(
                f"zeta2 = {self.zeta2:g} > 0 needs workers >= 2 (one node cannot disagree with "
                f"itself), got workers = {self.P}"
            )
        if delta > 0 and self.P < 2:
            raise ValueError(
                f"hessian_dissimilarity = {delta:g} > 0 needs workers >= 2 (one node's Hessian "
                f"is the mean Hessian), got workers = {self.P}"
            )
        if node_spectra is not None and delta > 0:
            raise ValueError(
                "give either node_spectra or hessian_dissimilarity > 0, not both (got "
                f"hessian_dissimilarity = {delta:g} with node_spectra)"
            )
        self.noise = self.checked("noise", noise)
        self.design = self.checked("design", design)
        self.seed = self.checked("seed", seed)
        self.h = _spectrum(spectrum, self.d)
        self.spectrum_spec = spectrum if isinstance(spectrum, str) else "custom"
        node_h = self._node_spectra(node_spectra, delta)
        self._explicit_spectra = node_spectra is not None
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 13, self.P, self.d]))
        if theta_star is None:
            theta_star = rng.standard_normal(self.d) / np.sqrt(self.d)
        theta_star = as_float_array("theta_star", theta_star)
        self.check_theta(theta_star, "theta_star")
        if theta_star.shape != (self.d,) or not np.all(np.isfinite(theta_star)):
            raise ValueError(f"theta_star must be a finite vector of shape ({self.d},)")
        self.theta_star = theta_star
        u = rng.standard_normal((self.P, self.d))
        self.equal_hessians = node_h is None
        if node_h is None:  # the historical construction (numbers kept bit for bit)
            u -= u.mean(axis=0, keepdims=True)
            raw = float(np.mean(np.sum((u * self.h) ** 2, axis=1)))
            self.offsets = u * np.sqrt(self.zeta2 / raw) if self.zeta2 > 0 else np.zeros_like(u)
            self.node_h = np.broadcast_to(self.h, (self.P, self.d))
        else:  # gradient offsets w_i = H_i u_i, centred and scaled; u_i = w_i / h_i
            w = u - u.mean(axis=0, keepdims=True)
            raw = float(np.mean(np.sum(w * w, axis=1)))
            w = w * np.sqrt(self.zeta2 / raw) if self.zeta2 > 0 else np.zeros_like(w)
            self.node_h = node_h
            self.h = node_h.mean(axis=0)
            self.offsets = w / node_h
        self.node_optima = self.theta_star + self.offsets
        self.sqrt_h = np.sqrt(self.h)
        self.sqrt_node_h = np.sqrt(self.node_h)
        self._kernel_arrays: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
        dev = np.abs(self.node_h - self.h).max(axis=1)  # ||H_i - H||_op
        self.delta = float(dev.max())
        self.delta_ms = float(np.mean(dev * dev))
        self.L = float(self.node_h.max())
        self.mu = float(self.h.min())
        # a tiny node spectrum with zeta2 > 0 overflows here: _check_finite_constants says so
        with np.errstate(over="ignore", invalid="ignore"):
            if self.equal_hessians:
                self.R2 = float(self.h.sum())
                hu2 = np.sum(self.offsets**2 * self.h, axis=1)  # ||u_i||_H^2
                self.f_star = 0.5 * self.noise**2 + 0.5 * float(hu2.mean())
                self.sigma2 = self.noise**2 * self.R2 + float(
                    np.mean(self.R2 * hu2 + np.sum((self.offsets * self.h) ** 2, axis=1))
                )
            else:
                tr = self.node_h.sum(axis=1)  # tr(H_i)
                self.R2 = float(tr.max())
                hu2 = np.sum(self.offsets**2 * self.node_h, axis=1)  # ||u_i||_{H_i}^2
                self.f_star = 0.5 * self.noise**2 + 0.5 * float(hu2.mean())
                self.sigma2 = float(
                    np.mean(
                        self.noise**2 * tr
                        + tr * hu2
                        + np.sum((self.offsets * self.node_h) ** 2, axis=1)
                    )
                )
            if self.design == "additive":
                self.sigma2 = self.noise**2 * float(np.mean(self.node_h.sum(axis=1)))
        self._check_finite_constants()

    def _check_finite_constants(self) -> None:
        """``ValueError`` when the node optima or the constants overflow float64 (a tiny
        node spectrum with ``zeta2 > 0`` puts a node optimum at ``~ 1 / h``), naming the
        smallest node spectrum entry."""
        values = {
            "node optima": float(np.max(np.abs(self.node_optima))),
            "f_star": self.f_star,
            "sigma2": self.sigma2,
        }
        bad = [k for k, v in values.items() if not np.isfinite(v)]
        if not bad:
            return
        i, j = np.unravel_index(int(np.argmin(self.node_h)), self.node_h.shape)
        given = "node_spectra" if self._explicit_spectra else "spectrum"
        raise ValueError(
            f"{given}: the smallest entry {self.node_h[i, j]:g} (node_spectra[{i}, {j}]) with "
            f"zeta2 = {self.zeta2:g} puts the node optima at up to ~zeta / h and makes "
            f"{', '.join(bad)} overflow float64 ({', '.join(f'{k} = {values[k]:g}' for k in bad)}); "
            f"allowed: spectra whose constants are finite (larger smallest entries, or a "
            f"smaller zeta2)"
        )

    def _node_spectra(self, given: Any, delta: float) -> np.ndarray | None:
        """The node spectra (P, d), or None for equal Hessians (``delta = 0``, none given)."""
        if given is not None:
            h = as_float_array("node_spectra", given)
            if h.shape != (self.P, self.d):
                raise ValueError(
                    f"node_spectra must be finite and > 0 of shape (workers, d) = ({self.P}, "
                    f"{self.d}), got shape {h.shape}"
                )
            bad = np.argwhere(~(np.isfinite(h) & (h > 0)))
            if bad.size:
                i, j = (int(x) for x in bad[0])
                raise ValueError(
                    f"node_spectra[{i}, {j}] = {h[i, j]:g} (node {i}, coordinate {j}; "
                    f"{len(bad)} bad entries in all); allowed: finite and > 0"
                )
            return h.copy()
        if delta == 0:
            return None
        return node_spectra(self.h, self.P, delta, self.seed)

    # ------------------------------------------------------------------ constants
    @property
    def H(self) -> np.ndarray:
        """The network Hessian ``H = (1/P) sum_i diag(h_i)``."""
        return np.diag(self.h)

    @property
    def H_star(self) -> np.ndarray:
        """Hessian at the optimum (``H``)."""
        return self.H

    @property
    def workers(self) -> int:
        """Number of nodes ``P``."""
        return self.P

    @property
    def required_workers(self) -> int:
        """Every algorithm runs on the ``P`` nodes (one distribution each)."""
        return self.P

    def describe(self) -> dict[str, Any]:
        out = {
            "kind": "heterogeneous_least_squares",
            "d": self.d,
            "workers": self.P,
            "zeta2": self.zeta2,
            "spectrum": self.spectrum_spec,
            "noise": self.noise,
            "seed": self.seed,
        }
        if not self.equal_hessians:
            out["hessian_dissimilarity"] = self.delta
            if self._explicit_spectra:  # not reproducible from the numbers above
                digest = hashlib.sha256(np.ascontiguousarray(self.node_h).tobytes()).hexdigest()
                out["node_spectra_sha256"] = digest[:16]
        if self.design != "gaussian":
            out["design"] = self.design
        return out

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
        """``(1/b) sum_j x_j (<x_j, theta_i - theta*_i> - sigma eps_j)`` for node ``i`` (axis 1),
        ``x_j = z_j * sqrt(h_i)``."""
        # NumPy's own functions for NumPy arrays: the same operations without the namespace
        # wrappers (about a third of this method's time in the decentralized studies)
        xp = np if type(theta) is np.ndarray else namespace_of(theta)
        if theta.ndim != 3 or theta.shape[1] != self.P:
            raise ValueError(
                f"theta must have shape (R, P = {self.P}, d = {self.d}), got {tuple(theta.shape)}"
            )
        eta = theta - xp.asarray(self.node_optima, dtype=theta.dtype)
        if self.design == "additive":
            return self._additive_grad(xp, eta, batch)
        if not self.equal_hessians:
            return self._node_hessian_grad(xp, eta, batch)
        x = batch.z * xp.asarray(self.sqrt_h, dtype=theta.dtype)
        b = x.shape[-2]
        if b == 1:
            x1 = x[..., 0, :]
            r = xp.sum(x1 * eta, axis=-1) - self.noise * batch.eps[..., 0]
            return x1 * r[..., None]
        r = xp.sum(x * eta[..., None, :], axis=-1) - self.noise * batch.eps
        return xp.sum(r[..., None] * x, axis=-2) / b  # NumPy: j = 0, 1, ... in turn; no BLAS

    def _node_hessian_grad(self, xp: Any, eta: Any, batch: NodeBatch) -> Any:
        """The stochastic gradient with node spectra: ``x_j = z_j * sqrt(h_i)`` on node ``i``."""
        s = xp.asarray(self.sqrt_node_h, dtype=eta.dtype)  # (P, d)
        b = batch.z.shape[-2]
        if b == 1:
            x1 = batch.z[..., 0, :] * s
            r = xp.sum(x1 * eta, axis=-1) - self.noise * batch.eps[..., 0]
            return x1 * r[..., None]
        x = batch.z * s[:, None, :]
        r = xp.sum(x * eta[..., None, :], axis=-1) - self.noise * batch.eps
        return xp.sum(r[..., None] * x, axis=-2) / b  # NumPy: j = 0, 1, ... in turn; no BLAS

    def _additive_grad(self, xp: Any, eta: Any, batch: NodeBatch) -> Any:
        """``H_i (theta - theta*_i) - sigma sqrt(h_i) (1/b) sum_j z_j`` on node ``i``."""
        h = xp.asarray(self.node_h, dtype=eta.dtype)
        s = xp.asarray(self.sqrt_node_h, dtype=eta.dtype)
        return h * eta - (self.noise * s) * xp.mean(batch.z, axis=-2)

    def sgd_update(self, theta: Any, batch: NodeBatch, gamma: float, mean: Any = None) -> Any:
        """In place SGD step; with node Hessians, through the compiled one-pass kernel of
        :mod:`convkit.problems._heterogeneous_kernel` when it can run (equal to the generic
        step to rounding). The equal-Hessian problem keeps the generic step."""
        if not self.equal_hessians and self.design == "gaussian" and type(theta) is np.ndarray:
            arrays = self._kernel_arrays.get(theta.dtype)
            if arrays is None:
                arrays = tuple(
                    np.ascontiguousarray(a, dtype=theta.dtype)
                    for a in (self.sqrt_node_h, self.node_optima)
                )
                self._kernel_arrays[theta.dtype] = arrays
            if node_ls_sgd_update(theta, batch.z, batch.eps, *arrays, self.noise, gamma, mean):
                return theta
        return super().sgd_update(theta, batch, gamma, mean)

    # ------------------------------------------------------------------ objective
    def errors(self, theta: Any) -> dict[str, Any]:
        """``hnorm2 = ||theta - theta*||_H^2``, ``excess_risk = hnorm2 / 2`` (exact, see the
        module docstring), ``dist2 = ||theta - theta*||^2``."""
        xp = namespace_of(theta)
        eta = theta - xp.asarray(self.theta_star, dtype=theta.dtype)
        hn = xp.sum(eta * eta * xp.asarray(self.h, dtype=theta.dtype), axis=-1)
        return {"excess_risk": 0.5 * hn, "hnorm2": hn, "dist2": xp.sum(eta * eta, axis=-1)}

    def node_errors(self, models: Any) -> dict[str, Any]:
        """The mean error of the nodes' own models ``models`` (shape ``(..., P, d)``):
        ``node_excess_risk = (1/P) sum_i f(theta_i) - f*``, ``node_hnorm2``, ``node_dist2``
        (means over the node axis of :meth:`errors`), each of shape ``(...)``."""
        xp = namespace_of(models)
        if models.ndim < 2 or models.shape[-2] != self.P or models.shape[-1] != self.d:
            raise ValueError(
                f"models must have shape (..., P = {self.P}, d = {self.d}), got "
                f"{tuple(models.shape)}"
            )
        fused = None
        if type(models) is np.ndarray:
            fused = node_error_sums(models, self.theta_star, self.h)
        if fused is not None:  # the means over nodes, in one compiled pass
            hn, dist = fused
            return {"node_excess_risk": 0.5 * hn, "node_hnorm2": hn, "node_dist2": dist}
        if type(models) is np.ndarray:
            hn, dist = self._node_sums_numpy(models)
        else:
            eta = models - xp.asarray(self.theta_star, dtype=models.dtype)
            sq = eta * eta
            hn = xp.sum(sq * xp.asarray(self.h, dtype=sq.dtype), axis=-1)
            dist = xp.sum(sq, axis=-1)
        hn, dist = xp.mean(hn, axis=-1), xp.mean(dist, axis=-1)
        return {"node_excess_risk": 0.5 * hn, "node_hnorm2": hn, "node_dist2": dist}

    def _node_sums_numpy(self, models: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``||theta_i - theta*||_H^2`` and ``||theta_i - theta*||^2`` of NumPy models, by
        slices of the leading axis whose temporary stays in cache (a full-size temporary costs
        more in fresh pages than in arithmetic: 7 ms against 1 ms at R P d = 4e5).  Both sums
        are NumPy's pairwise add-reductions (:func:`~convkit.problems._fixed_order.row_dot`:
        an order fixed by NumPy's source), not the BLAS's product."""
        lead = models.shape[:-1]
        flat = models.reshape(-1, self.d)
        hn = np.empty(flat.shape[0], dtype=models.dtype)
        dist = np.empty_like(hn)
        ts = self.theta_star.astype(models.dtype, copy=False)
        h = self.h.astype(models.dtype, copy=False)
        rows = max(1, 16384 // self.d)
        for a in range(0, flat.shape[0], rows):
            sq = np.subtract(flat[a : a + rows], ts)
            np.multiply(sq, sq, out=sq)
            np.add.reduce(sq, axis=-1, out=dist[a : a + rows])
            np.multiply(sq, h, out=sq)
            np.add.reduce(sq, axis=-1, out=hn[a : a + rows])
        return hn.reshape(lead), dist.reshape(lead)

    def loss(self, theta: Any) -> Any:
        """``f(theta) = f* + 1/2 ||theta - theta*||_H^2``."""
        return self.errors(theta)["excess_risk"] + self.f_star

    def node_losses(self, theta: Any) -> np.ndarray:
        """``f_i(theta) = 1/2 ||theta - theta*_i||_{H_i}^2 + sigma^2 / 2`` of every node at the
        points ``theta`` (shape ``(..., d)``), shape ``(..., P)`` (NumPy)."""
        th = np.asarray(theta, dtype=np.float64)[..., None, :]
        eta = th - self.node_optima
        return 0.5 * np.sum(eta * eta * self.node_h, axis=-1) + 0.5 * self.noise**2

    def grad(self, theta: Any) -> Any:
        """Full gradient of the network objective, ``H (theta - theta*)``."""
        xp = namespace_of(theta)
        h = xp.asarray(self.h, dtype=theta.dtype)
        return (theta - xp.asarray(self.theta_star, dtype=theta.dtype)) * h

    def worker_grads(self, theta: Any) -> np.ndarray:
        """``grad f_i(theta) = H_i (theta - theta*_i)`` of every node, shape (P, d)."""
        th = np.asarray(theta, dtype=np.float64).reshape(self.d)
        return (th[None, :] - self.node_optima) * self.node_h
