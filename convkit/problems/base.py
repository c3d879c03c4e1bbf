"""The problem protocol shared by every objective convkit simulates.

A problem is a stochastic objective ``f(theta) = E F(theta; xi)`` that knows its constants
(``theta_star``, ``f_star``, ``L``, ``mu``, noise level) and offers, for the engine:

* :meth:`Problem.sample`: a batch of data for every (replicate, worker, batch-slot), drawn
  from a :class:`~convkit.backend.RandomStream` (shape ``(R, P, b)``; axis 1 is the worker,
  so that non-iid problems can give each worker its own distribution);
* :meth:`Problem.stochastic_grad`: the mini-batch gradient at ``theta`` of shape
  ``(R, P, d)`` (mean over the batch axis);
* :meth:`Problem.errors`: error metrics of parameters of shape ``(..., d)``:
  ``excess_risk`` (``f(theta) - f*``), ``hnorm2`` (``||theta - theta*||_{H*}^2`` with
  ``H*`` the Hessian at the optimum, the Mahalanobis distance of the Local-SGD paper) and
  ``dist2`` (``||theta - theta*||^2``);
* :meth:`Problem.node_errors`: for problems whose nodes hold different data, the mean over
  nodes of the error of each node's own model (:attr:`Problem.node_metrics` names them; the
  engine records them under the iterate ``"state"``, next to the error of the nodes' average).

Sampling once and evaluating gradients at several points is what makes common random
numbers possible: several algorithms are driven by exactly the same batch at every step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from ..backend import RandomStream, namespace_of
from ..validation import Declared

__all__ = ["METRICS", "GradientOracle", "Problem", "as_float_array"]

#: Error metrics every problem reports, in this order.
METRICS: tuple[str, ...] = ("excess_risk", "hnorm2", "dist2")


def as_float_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 NumPy array; ``TypeError`` naming ``name`` when it holds
    something that is not a number (a string: the first such entry is shown) or is ragged."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        try:
            flat = np.asarray(value, dtype=object).ravel()
        except ValueError:  # ragged beyond what an object array holds
            flat = np.empty(0, dtype=object)
        text = next((x for x in flat if isinstance(x, (str, bytes))), None)
        got = f"an entry {text!r}" if text is not None else f"{value!r} ({exc})"
        raise TypeError(f"{name} must be an array of real numbers, got {got}") from None


class Problem(Declared, ABC):
    """Base class of convkit problems (see the module docstring for the protocol)."""

    #: dimension
    d: int
    #: minimiser of the objective (NumPy, shape (d,))
    theta_star: np.ndarray
    #: optimal value f(theta_star)
    f_star: float
    #: smoothness constant (largest eigenvalue of the Hessian bound)
    L: float
    #: strong convexity constant (smallest Hessian eigenvalue at the optimum; 0 if none)
    mu: float
    #: noise level (e.g. the label noise standard deviation sigma); None if not defined
    noise: float | None
    #: number of distinct data distributions across workers (1 = iid)
    heterogeneous: bool = False
    #: names of the metrics :meth:`node_errors` returns, in its order (none by default)
    node_metrics: tuple[str, ...] = ()
    #: the problem model the fused Local-SGD segments (:mod:`convkit._fused_local`) compute
    #: in compiled code (``"logistic"``, ``"least_squares"``), or None.  Declared by the
    #: class; a subclass that overrides how samples, gradients, steps or errors are computed
    #: without declaring it again has none, since the kernels would compute the parent's.
    fused_model: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        overrides = {"sample", "stochastic_grad", "grad", "errors", "sgd_update"} & set(
            cls.__dict__
        )
        if overrides and "fused_model" not in cls.__dict__:
            cls.fused_model = None

    @abstractmethod
    def sample(self, stream: RandomStream, shape: tuple[int, int, int]) -> Any:
        """Draw a batch for shape ``(R, P, b)``: replicates x workers x batch size."""

    @abstractmethod
    def stochastic_grad(self, theta: Any, batch: Any) -> Any:
        """Mini-batch gradient at ``theta`` (shape ``(R, P, d)``) for a batch from :meth:`sample`."""

    @abstractmethod
    def errors(self, theta: Any) -> dict[str, Any]:
        """Error metrics (:data:`METRICS`) of ``theta`` of shape ``(..., d)``, each of shape ``(...)``."""

    def errors_of(self, theta: Any, metrics: tuple[str, ...] = METRICS) -> dict[str, Any]:
        """The error metrics ``metrics`` (a subset of :data:`METRICS`, in that order) of
        ``theta``, the values :meth:`errors` gives.  The engines call this with the metrics a
        run records (:func:`convkit.simulate`'s ``metrics``); a problem whose metrics differ in
        cost overrides it to compute only those asked for (:class:`LogisticRegression` skips
        its excess-risk quadrature), with the same numbers."""
        values = self.errors(theta)
        return {m: values[m] for m in metrics}

    @property
    def required_workers(self) -> int | None:
        """The number of workers every algorithm run on this problem must have (a problem
        with one data distribution per node, or a data partition per worker), or ``None``
        when any number will do. The engines check it before anything runs."""
        return None

    def node_errors(self, models: Any) -> dict[str, Any]:
        """The mean over nodes of the error of each node's model, ``models`` of shape
        ``(..., P, d)``, named as :attr:`node_metrics` declares, each of shape ``(...)``."""
        return {}

    def sgd_update(self, theta: Any, batch: Any, gamma: float, mean: Any = None) -> Any:
        """In place ``theta -= gamma * stochastic_grad(theta, batch)``; returns ``theta``.

        If ``mean`` (shape ``(R, d)``) is given it receives the workers' mean of the updated
        ``theta``.  Problems may override this with a fused kernel (one pass over the state).
        """
        theta -= gamma * self.stochastic_grad(theta, batch)
        if mean is not None:
            mean[...] = namespace_of(theta).mean(theta, axis=1)
        return theta

    def grad(self, theta: Any) -> Any:
        """Full (population or finite-sum) gradient of ``f`` at ``theta`` (shape ``(..., d)``)."""
        raise NotImplementedError(f"{type(self).__name__} has no full gradient")

    def loss(self, theta: Any) -> Any:
        """Objective value ``f(theta)`` (shape ``(...)``)."""
        raise NotImplementedError(f"{type(self).__name__} has no closed-form objective")

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description (for metadata and caching)."""
        return {"kind": type(self).__name__, "d": self.d}

    def check_theta(self, theta: Any, name: str = "theta") -> None:
        """Raise if the last axis of ``theta`` is not ``d``."""
        if theta.shape[-1] != self.d:
            raise ValueError(
                f"{name} must have last dimension d = {self.d} (the problem's dimension), "
                f"got shape {tuple(theta.shape)}"
            )


class GradientOracle:
    """Stochastic gradients of ``problem`` on one batch (one local step, all workers).

    Algorithms receive an oracle at every local step and ask it for what they need: the
    mini-batch gradient at any point of shape ``(R, P, d)`` (:meth:`grad`), or the plain SGD
    update ``x -= gamma grad(x)`` (:meth:`sgd_update`), which problems may fuse into one pass.
    Every call uses the same samples, so gradients at different points are coupled.
    """

    __slots__ = ("batch", "problem")

    def __init__(self, problem: Problem, batch: Any) -> None:
        self.problem = problem
        self.batch = batch

    def grad(self, x: Any) -> Any:
        """Mini-batch stochastic gradient at ``x`` (shape ``(R, P, d)``)."""
        return self.problem.stochastic_grad(x, self.batch)

    def sgd_update(self, x: Any, gamma: float, mean: Any = None) -> Any:
        """In place ``x -= gamma * grad(x)``; returns ``x``.  If ``mean`` (R, d) is given it
        receives the workers' mean of the updated ``x``."""
        return self.problem.sgd_update(x, self.batch, gamma, mean)
