"""Online least squares with Gaussian or Rademacher design.

Model (Patel & Dieuleveut 2019; Bach & Moulines 2013): ``x ~ D`` with ``E[x x^T] = H``,
``y = <x, theta*> + sigma eps`` with ``eps ~ N(0, 1)`` independent of ``x``, and

    f(theta) = 1/2 E (y - <x, theta>)^2 = 1/2 ||theta - theta*||_H^2 + sigma^2 / 2,

so ``f* = sigma^2/2`` and the excess risk is exactly ``1/2 (theta - theta*)^T H (theta - theta*)``.

Designs:

* ``"gaussian"``: ``x = Q diag(sqrt(h)) z`` with ``z ~ N(0, I)``;
* ``"rademacher"``: ``x = Q diag(sqrt(h)) s`` with independent random signs ``s``; same
  covariance, lighter fourth moment, and much cheaper to sample;
* ``"additive"``: the additive-noise model, stochastic gradient ``H (theta - theta*) - xi``
  with ``xi ~ N(0, sigma^2 H)`` independent of ``theta``.  The iterates are affine in the
  noise, so mini-batch, local and one-shot averaging have identical expected error
  (derived in :mod:`convkit.bounds`): every gap between schedules comes from multiplicative
  noise or a non-quadratic loss.

``Q`` is the identity, or a seeded random orthogonal matrix (``rotate=True``).

Every sum of products that feeds a trajectory or a recorded metric (the residuals
``<x_j, theta - theta*>``, the mini-batch sums, the products with ``Q`` and ``Q^T``, the
metrics) is summed in an order fixed by the code (:mod:`convkit.problems._fixed_order`), not
by the BLAS kernel of the CPU: the same seed gives the same bits on every x86-64 CPU.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._kernels import ls_sgd_update
from ..backend import RandomStream, namespace_of
from ..validation import (
    Parameter,
    check_int,
    check_real,
    check_seed,
    flag,
    instance,
    integer,
    options,
    real,
    seed,
)
from ._fixed_order import orthogonal_factor, row_dot, vec_mat
from .base import Problem, as_float_array

__all__ = ["LeastSquares", "spectrum"]

DESIGNS = ("gaussian", "rademacher", "additive")


#: the one message of a malformed spectrum spec (the constructors, sweeps and the command line)
_SPECTRUM_FORMS = (
    "spectrum must be 'flat', '1/i', '1/i^2', 'kappa:K' (K >= 1), a callable or an array"
)


def spectrum(spec: str | Callable[[int], Any] | Any, d: int) -> np.ndarray:
    """Eigenvalues ``h_1 >= ... >= h_d > 0`` of the design covariance.

    ``spec`` is a preset (``"flat"``: 1; ``"1/i"``: 1/i; ``"1/i^2"``: 1/i^2;
    ``"kappa:K"``: log-spaced from 1 down to 1/K, condition number K), a callable
    ``d -> array`` or an explicit array of length d.
    """
    d = check_int("d", d, low=1)
    i = np.arange(1, d + 1, dtype=np.float64)
    if isinstance(spec, str):
        key, _, arg = spec.partition(":")
        if key == "flat":
            h = np.ones(d)
        elif key == "1/i":
            h = 1.0 / i
        elif key in ("1/i^2", "1/i**2"):
            h = 1.0 / i**2
        elif key == "kappa" and arg:
            try:
                kappa = float(arg)
            except ValueError:
                raise ValueError(_SPECTRUM_FORMS + f", got {spec!r} (K must be a number)") from None
            kappa = check_real("kappa", kappa, low=1)
            h = np.logspace(0.0, -np.log10(kappa), d) if d > 1 else np.ones(1)
        else:
            raise ValueError(_SPECTRUM_FORMS + f", got {spec!r}")
    elif callable(spec):
        h = as_float_array("spectrum", spec(d))
    else:
        h = as_float_array("spectrum", spec)
    if h.shape != (d,):
        raise ValueError(f"spectrum must give d = {d} eigenvalues, got shape {h.shape}")
    if not np.all(np.isfinite(h)) or np.any(h <= 0):
        raise ValueError("spectrum eigenvalues must be finite and > 0")
    return h


def covariance(h: np.ndarray, Q: np.ndarray | None) -> np.ndarray:
    """``Q diag(h) Q^T`` (``diag(h)`` when ``Q`` is None)."""
    return np.diag(h) if Q is None else (Q * h) @ Q.T


#: ``rotate=True`` warns when its random rotation is estimated to take longer (seconds)
ROTATION_WARN_SECONDS = 10.0
#: speed of the rotation's dense linear algebra in d^3 per second: the fixed-order Householder
#: QR of a Gaussian d x d matrix (:func:`~convkit.problems._fixed_order.orthogonal_factor`,
#: compiled) and the orthogonality check Q^T Q took 0.7 s for d = 1000 on the 2 shared cores
#: of the development machine (2026-12-05; without numba 2.3 s)
_ROTATION_CUBES_PER_SECOND = 1e9


def rotation_seconds(d: int) -> float:
    """Estimated seconds to build (and check) a random ``d x d`` rotation: ``~ d^3`` flops."""
    return float(d) ** 3 / _ROTATION_CUBES_PER_SECOND


def _random_orthogonal(d: int, seed: int | None) -> np.ndarray:
    """Haar-random orthogonal matrix (QR of a Gaussian matrix with sign correction).

    The draws of SciPy's ``ortho_group.rvs(d, random_state=default_rng(seed))`` (a ``d x d``
    standard normal matrix) and its construction, Householder QR with ``R``'s diagonal made
    positive, computed by :func:`~convkit.problems._fixed_order.orthogonal_factor`: every sum in
    an order fixed by the code, so that ``Q`` has the same bits on every x86-64 CPU (LAPACK's
    QR differs by up to 9e-12 relative between an AVX512 and an AVX2 machine at d = 100; the
    two constructions agree to 1e-14).

    Warns first (:class:`UserWarning`) when this is estimated to take more than
    :data:`ROTATION_WARN_SECONDS` (:func:`rotation_seconds`), naming the cost and the
    alternative ``rotate=False``.
    """
    if seed is not None:
        seed = check_seed("seed", seed)
    seconds = rotation_seconds(d)
    if seconds > ROTATION_WARN_SECONDS:
        warnings.warn(
            f"rotate=True with d = {d}: the random rotation (QR of a d x d Gaussian matrix, "
            f"about d^3 = {float(d) ** 3:.2g} flops, and {3 * 8 * d * d / 2**30:.2g} GiB for "
            f"the dense d x d matrices) is estimated to take about {seconds:.0f} s before "
            "anything else; pass rotate=False for a diagonal H with the same spectrum (no "
            "cheaper structured rotation is offered)",
            UserWarning,
            stacklevel=4,
        )
    if d == 1:
        return np.ones((1, 1))
    return orthogonal_factor(np.random.default_rng(seed).normal(size=(d, d)))


@dataclass
class LSBatch:
    """A least-squares batch.

    ``z`` (R, P, b, d) holds the raw draws and ``eps`` (R, P, b) the label noise; the features
    are ``x = z * scale`` (``scale`` = sqrt of the eigenvalues for a diagonal ``H``, or None
    when ``z`` already holds the features).  Keeping the scaling apart lets the fused kernel
    apply it on the fly instead of making a pass over the block.  For the additive design
    ``z`` holds the noise vectors ``xi`` and ``eps`` is None.
    """

    z: Any
    eps: Any
    scale: Any = None

    @property
    def x(self) -> Any:
        """The features (R, P, b, d)."""
        return self.z if self.scale is None else self.z * self.scale


class LeastSquares(Problem):
    """Online least squares ``y = <x, theta*> + sigma eps`` with ``E[x x^T] = H``.

    Build with :meth:`gaussian`, :meth:`rademacher` or :meth:`additive`.

    Parameters
    ----------
    h:
        Eigenvalues of ``H`` (shape (d,)).
    noise:
        Label noise standard deviation ``sigma >= 0``.
    design:
        ``"gaussian"``, ``"rademacher"`` or ``"additive"`` (see the module docstring).
    Q:
        Orthonormal eigenvectors of ``H`` (``H = Q diag(h) Q^T``), or None for diagonal ``H``.
    theta_star:
        The optimum (default: a seeded vector with i.i.d. N(0, 1/d) entries, so
        ``E||theta*||^2 = 1``).
    """

    fused_model: ClassVar[str | None] = "least_squares"
    parameters: ClassVar[dict[str, Parameter]] = {
        "h": instance("eigenvalues of H: a non-empty 1-D array, finite and > 0",
                      wrong=([1.0, 0.0], [[1.0]], "flat")),
        "noise": real(low=0, default=1.0, doc="label noise standard deviation sigma"),
        "design": options(*DESIGNS, default="gaussian", doc="the features' law"),
        "Q": instance("orthonormal eigenvectors of H, a (d, d) matrix", default=None,
                      optional=True, wrong=(np.eye(3), 2 * np.eye(4))),
        "theta_star": instance(
            "the optimum: a finite vector of shape (d,)", default=None, optional=True,
            wrong=([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],),
        ),
        "seed": seed(default=0, optional=True, doc="seed of theta* (when not given)"),
    }  # fmt: skip
    #: the parameters of the named constructors :meth:`gaussian`, :meth:`rademacher` and
    #: :meth:`additive` (the same for the three designs; ``noise`` and ``theta_star`` as the
    #: class's own)
    named_constructors: ClassVar[dict[str, dict[str, Parameter]]] = dict.fromkeys(DESIGNS, {
        "d": integer(low=1, doc="dimension of the problem"),
        "spectrum": instance(
            "eigenvalues h_i of the design covariance: 'flat' (1), '1/i', '1/i^2' or "
            "'kappa:K' (log-spaced from 1 to 1/K, K >= 1)", default="flat",
            wrong=("foo", "kappa:0.5", "kappa:abc"),
        ),
        "noise": parameters["noise"],
        "rotate": flag(False, doc="a random orthogonal Q (eigenvectors of H, from seed)"),
        "theta_star": parameters["theta_star"],
        "seed": seed(default=0, optional=True, doc="seed of theta* (when not given) and of Q"),
    })  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Four coordinates with eigenvalues 1/i and label noise 0.5."""
        return {"h": 1.0 / np.arange(1.0, 5.0), "noise": 0.5}

    def __init__(
        self,
        h: Any,
        noise: float = 1.0,
        design: str = "gaussian",
        Q: np.ndarray | None = None,
        theta_star: Any = None,
        seed: int | None = 0,
    ) -> None:
        self.h = as_float_array("h", h)
        if self.h.ndim != 1 or self.h.size < 1:
            raise ValueError(f"h must be a non-empty 1-D array, got shape {self.h.shape}")
        if not np.all(np.isfinite(self.h)) or np.any(self.h <= 0):
            raise ValueError("h (eigenvalues of H) must be finite and > 0")
        self.d = int(self.h.size)
        self.noise = self.checked("noise", noise)
        self.design = self.checked("design", design)
        if Q is not None:
            Q = np.asarray(Q, dtype=np.float64)
            if Q.shape != (self.d, self.d) or not np.allclose(Q.T @ Q, np.eye(self.d), atol=1e-10):
                raise ValueError(f"Q must be an orthogonal ({self.d}, {self.d}) matrix")
        self.Q = Q
        #: ``Q^T`` contiguous (the products ``v Q^T`` of :func:`vec_mat`), or None
        self._QT = None if Q is None else np.ascontiguousarray(Q.T)
        self.seed = self.checked("seed", seed)
        if theta_star is None:
            rng = np.random.default_rng(np.random.SeedSequence([0 if seed is None else seed, 1]))
            theta_star = rng.standard_normal(self.d) / np.sqrt(self.d)
        theta_star = as_float_array("theta_star", theta_star)
        self.check_theta(theta_star, "theta_star")
        if not np.all(np.isfinite(theta_star)):
            raise ValueError("theta_star must contain only finite values")
        self.theta_star = theta_star
        self.sqrt_h = np.sqrt(self.h)
        self.ones = np.ones(self.d)
        self.f_star = 0.5 * self.noise**2
        self.L = float(self.h.max())
        self.mu = float(self.h.min())
        #: E||x||^2 = tr(H), the constant that limits SGD step sizes on least squares
        self.R2 = float(self.h.sum())
        self._cache: dict[Any, Any] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def gaussian(
        cls,
        d: int,
        spectrum: str | Callable | Any = "flat",
        noise: float = 1.0,
        rotate: bool = False,
        theta_star: Any = None,
        seed: int | None = 0,
    ) -> LeastSquares:
        """Gaussian design ``x ~ N(0, H)`` with ``H``'s eigenvalues from ``spectrum``."""
        return cls._build("gaussian", d, spectrum, noise, rotate, theta_star, seed)

    @classmethod
    def rademacher(
        cls,
        d: int,
        spectrum: str | Callable | Any = "flat",
        noise: float = 1.0,
        rotate: bool = False,
        theta_star: Any = None,
        seed: int | None = 0,
    ) -> LeastSquares:
        """Rademacher design ``x = Q diag(sqrt(h)) s`` with random signs ``s``."""
        return cls._build("rademacher", d, spectrum, noise, rotate, theta_star, seed)

    @classmethod
    def additive(
        cls,
        d: int,
        spectrum: str | Callable | Any = "flat",
        noise: float = 1.0,
        rotate: bool = False,
        theta_star: Any = None,
        seed: int | None = 0,
    ) -> LeastSquares:
        """Additive-noise model: gradient ``H (theta - theta*) - xi``, ``xi ~ N(0, sigma^2 H)``."""
        return cls._build("additive", d, spectrum, noise, rotate, theta_star, seed)

    @classmethod
    def _build(cls, design, d, spec, noise, rotate, theta_star, seed) -> LeastSquares:
        declared = cls.named_constructor_parameters(design)
        d = declared["d"].check("d", d)
        rotate = declared["rotate"].check("rotate", rotate)
        seed = declared["seed"].check("seed", seed)
        h = spectrum(spec, d)
        Q = _random_orthogonal(d, seed) if rotate else None
        obj = cls(h, noise=noise, design=design, Q=Q, theta_star=theta_star, seed=seed)
        obj.spectrum_spec = spec if isinstance(spec, str) else "custom"
        return obj

    # ------------------------------------------------------------------ constants
    @property
    def H(self) -> np.ndarray:
        """The covariance (= Hessian) ``H = Q diag(h) Q^T``."""
        return covariance(self.h, self.Q)

    @property
    def H_star(self) -> np.ndarray:
        """Hessian at the optimum (equal to ``H`` for least squares)."""
        return self.H

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "least_squares",
            "design": self.design,
            "d": self.d,
            "spectrum": getattr(self, "spectrum_spec", "custom"),
            "noise": self.noise,
            "rotated": self.Q is not None,
            "seed": self.seed,
        }

    def _on(self, xp: Any, name: str, dtype: Any) -> Any:
        """Problem constants as arrays of namespace ``xp`` and ``dtype`` (cached)."""
        key = (id(xp), name, dtype)
        if key not in self._cache:
            self._cache[key] = xp.asarray(np.asarray(getattr(self, name)), dtype=dtype)
        return self._cache[key]

    # ------------------------------------------------------------------ sampling
    def sample(self, stream: RandomStream, shape: tuple[int, int, int]) -> LSBatch:
        R, P, b = shape
        xp, dt = stream.xp, stream.dtype
        if self.design == "rademacher":
            z = stream.rademacher((R, P, b, self.d))
        else:
            z = stream.normal((R, P, b, self.d))
        if self.design == "additive":
            z *= self._on(xp, "sqrt_h", dt)
            if self.Q is not None:
                z = vec_mat(xp, z, self._on(xp, "_QT", dt))  # z Q^T
            z *= self.noise
            return LSBatch(z, None)
        eps = stream.normal((R, P, b))
        if self.Q is not None:
            z *= self._on(xp, "sqrt_h", dt)
            return LSBatch(vec_mat(xp, z, self._on(xp, "_QT", dt)), eps)
        return LSBatch(z, eps, self._on(xp, "sqrt_h", dt))

    def stochastic_grad(self, theta: Any, batch: LSBatch) -> Any:
        """``(1/b) sum_j x_j (<x_j, theta> - y_j)``, i.e. ``x_j (<x_j, theta - theta*> - sigma eps_j)``.

        For the additive design: ``H (theta - theta*) - mean_j xi_j``.  Every sum in an order
        fixed by the code (:func:`row_dot`; the sum over ``j`` in increasing ``j``).
        """
        xp = namespace_of(theta)
        eta = theta - self._on(xp, "theta_star", theta.dtype)
        x = batch.x
        b = x.shape[-2]
        if self.design == "additive":
            return self._H_times(xp, eta) - xp.mean(x, axis=-2)
        if b == 1:
            x1 = x[..., 0, :]
            r = row_dot(xp, x1, eta) - self.noise * batch.eps[..., 0]
            return x1 * r[..., None]
        r = row_dot(xp, x, eta[..., None, :]) - self.noise * batch.eps
        return xp.sum(r[..., None] * x, axis=-2) / b

    def sgd_update(self, theta: Any, batch: LSBatch, gamma: float, mean: Any = None) -> Any:
        """In place SGD step, through the fused kernel of :mod:`convkit._kernels` when possible."""
        if self.design != "additive" and type(theta) is np.ndarray:
            scale = batch.scale if batch.scale is not None else self._on(np, "ones", theta.dtype)
            ts = self._on(np, "theta_star", theta.dtype)
            if ls_sgd_update(theta, batch.z, batch.eps, scale, ts, self.noise, gamma, mean):
                return theta
        return super().sgd_update(theta, batch, gamma, mean)

    def _H_times(self, xp: Any, eta: Any) -> Any:
        """``H eta = Q (h * (Q^T eta))`` (``h * eta`` for a diagonal ``H``), the products with
        ``Q`` in a fixed order (:func:`vec_mat`)."""
        h = self._on(xp, "h", eta.dtype)
        if self.Q is None:
            return eta * h
        y = vec_mat(xp, eta, self._on(xp, "Q", eta.dtype)) * h  # h * (Q^T eta), as rows
        return vec_mat(xp, y, self._on(xp, "_QT", eta.dtype))

    # ------------------------------------------------------------------ objective
    def errors(self, theta: Any) -> dict[str, Any]:
        """Exact metrics: ``hnorm2 = ||theta - theta*||_H^2``, ``excess_risk = hnorm2 / 2``,
        ``dist2 = ||theta - theta*||^2``.

        With ``y = Q^T (theta - theta*)`` (``y = theta - theta*`` for a diagonal ``H``),
        ``hnorm2 = sum_i y_i (h_i y_i)``; every sum in an order fixed by the code
        (:func:`row_dot`, :func:`vec_mat`), the same bits on every x86-64 CPU."""
        xp = namespace_of(theta)
        eta = theta - self._on(xp, "theta_star", theta.dtype)
        y = eta if self.Q is None else vec_mat(xp, eta, self._on(xp, "Q", eta.dtype))
        hnorm2 = row_dot(xp, y, y * self._on(xp, "h", eta.dtype))
        return {"excess_risk": 0.5 * hnorm2, "hnorm2": hnorm2, "dist2": row_dot(xp, eta, eta)}

    def loss(self, theta: Any) -> Any:
        return self.errors(theta)["excess_risk"] + self.f_star

    def grad(self, theta: Any) -> Any:
        xp = namespace_of(theta)
        return self._H_times(xp, theta - self._on(xp, "theta_star", theta.dtype))
