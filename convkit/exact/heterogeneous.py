r"""Exact expected error of MBA / Local-SGD / OSA on least squares with node Hessians and node
optima (:class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares`).

Derived here. Node ``i`` has ``x ~ N(0, H_i)``, ``H_i = diag(h_i)``, optimum ``theta*_i =
theta* + u_i`` and gradient offset ``w_i = H_i u_i`` (``sum_i w_i = 0``). With ``e_i = theta_i -
theta*`` and ``r_i = e_i - u_i``, a local step of batch ``b`` is

    e_i' = e_i - gamma (1/b) sum_l x_l (x_l^T r_i - sigma eps_l),

so that ``E[e_i' | past] = (I - gamma H_i) e_i + gamma w_i``: the nodes drift (first moments
matter) and are no longer exchangeable. All ``H_i`` being diagonal, coordinate ``j`` of the
first moments ``m_i = E e_i`` and of the cross-node second moments ``M_ik = E[e_i e_k^T]_jj``
closes on itself (``P`` and ``P x P`` numbers per coordinate); with ``a_i = 1 - gamma h_i``
(coordinate-wise)::

    m_i'  = a_i m_i + gamma w_i,
    M_ik' = a_i a_k M_ik + gamma ((a m)_i w_k + w_i (a m)_k) + gamma^2 w_i w_k      (i != k),
    M_ii' = (1 - 2 gamma h_i) M_ii + 2 gamma w_i m_i + gamma^2 [c_sq h_i^2 E r_i^2
            + (h_i / b) (sum_l h_il E r_il^2 + sigma^2)],    E r_i^2 = M_ii - 2 u_i m_i + u_i^2,

``c_sq = 1 + 1/b`` (Gaussian fourth moments, ``E[x x^T A x x^T] = 2 H A H + tr(HA) H``; the
same one-step recursion as :mod:`convkit.exact.local` with ``r`` for ``e``, which it reduces to
when ``u = 0``). The additive design (gradient ``H_i r_i - xi``) has ``c_sq = 1`` and no
trace term: ``M_ii' = a_i^2 M_ii + 2 gamma a_i w_i m_i + gamma^2 (w_i^2 + sigma^2 h_i / b)``,
the same formula. Independent samples on different nodes make the cross terms noise-free. A
communication round replaces every ``e_i`` by the mean ``ebar``: ``m_i <- mean_k m_k`` and
every ``M_ik <- V = (1/P^2) sum_{i,k} M_ik``.

Averages over time. With ``S_t = sum_{s<=t} ebar_s``, the cross moments ``B_i(t) = E[e_i,t
S_t]`` satisfy ``B(t) = G_t (a B(t-1) + gamma w E S_{t-1}) + (1/P) sum_k M_.k(t)`` (``G_t``
the round's averaging, or the identity), since ``E[e_t | past] = G_t (a e_{t-1} + gamma w)``;
then ``Q(t) = E S_t^2 = Q(t-1) + 2 mean_i B_i(t) - V(t)`` and ``E||avg_t - theta*||_H^2 =
sum_j h_j Q_j(t) / t^2`` (``H = (1/P) sum_i H_i``); the tail average restarts ``B``, ``E S``
and ``Q`` at ``s0``. The last iterate: ``sum_j h_j V_j``. The nodes' mean error:
``(1/P) sum_i sum_j h_j M_ii,j`` (``node_hnorm2``).

D-PSGD (uncompressed, static ``W``, :func:`node_dpsgd_curves`): the same local-step
recursion, with the gossip's linear map for the averaging: ``X <- W (X - gamma G)`` maps
``m, M, B`` by ``W`` after the step; ``x_i <- (W x)_i - gamma g_i(x_i)`` replaces ``diag(a)``
by ``K = W - gamma diag(h_.j)`` (per coordinate) in the mean part, the noise injection being
that of the local step (the gradient is taken at the node's own point). The time averages
follow as above with ``G_t`` = the step's linear map.

SCAFFOLD (:mod:`convkit.exact.scaffold_nodes`): the same step with control variates, the
stacked state of node errors, control variates and server model being affine in the noise.

Cost ``O(P^2 d)`` per local step for the Local-SGD family
(:class:`~convkit.algorithms.local.LocalSGD`: MBA, Local-SGD, OSA, any step and communication
schedule, any batch), ``O(P^3 d)`` for D-PSGD, in NumPy. Gaussian or additive design. :func:`expected_error_nodes` returns the
:class:`~convkit.result.Result` of :func:`convkit.exact.expected_error`, with the node metrics
under the iterate ``"state"`` as :func:`convkit.simulate` records them.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..algorithms.base import Algorithm, algorithm_list
from ..plan import RunPlan, local_steps_of, plan
from ..problems.heterogeneous import NODE_METRICS, HeterogeneousLeastSquares
from ..recording import algorithms_meta, record_steps, starting_point
from ..validation import check_real
from .dispatch import EXACT_COUNT, result_from_raw
from .dpsgd import dpsgd_mixing
from .local import LocalSpec, local_specs
from .moments import design_coefficients, node_record_row
from .scaffold_nodes import node_scaffold_curves, scaffold_units

__all__ = ["EXACT_NODE_MOMENTS", "expected_error_nodes", "node_dpsgd_curves", "node_local_curves"]

#: the problem kind of this engine in the algorithms' declarations (``capabilities``)
KIND = "heterogeneous_least_squares"
#: the exact models this engine runs (:data:`convkit.algorithms.capabilities.EXACT_MODELS`)
NODE_MODELS = ("local", "dpsgd", "scaffold")


class _NodeMoments:
    """The execution path of :func:`expected_error_nodes`: the node-moment recursions of the
    module docstring in NumPy (no compiled form)."""

    name = "exact-node-moments-numpy"

    def supports(self, plan: RunPlan) -> tuple[bool, str]:
        if plan.engine != "exact":
            return False, "exact engine only"
        return True, (
            "the node-moment recursions in NumPy (O(P^2 d) per step for the Local-SGD family, "
            "O(P^3 d) for D-PSGD and SCAFFOLD)"
        )


#: the one execution path of :func:`expected_error_nodes`
EXACT_NODE_MOMENTS = _NodeMoments()

#: steps timed before the estimate of a call (or :data:`_TIMING_SECONDS`, whichever first)
_TIMING_STEPS = 20
_TIMING_SECONDS = 1.0


class _StepTimer:
    """The estimate of an :func:`expected_error_nodes` call, as :func:`convkit.simulate`
    makes one: the seconds of the first :data:`_TIMING_STEPS` local steps (or of
    :data:`_TIMING_SECONDS`), per unit of cost (``P^2 d`` per step of the Local-SGD family,
    ``P^3 d`` of D-PSGD), times the cost of the whole call; above ``limit`` seconds, one
    ``UserWarning`` with the estimate."""

    def __init__(self, total_units: float, steps: int, P: int, d: int, limit: float) -> None:
        self.total_units, self.steps, self.limit = total_units, steps, limit
        self.P, self.d = P, d
        self.t0 = time.perf_counter()
        self.units = 0.0
        self.ticks = 0
        self.estimate: float | None = None

    def tick(self, units: float) -> None:
        """One local step of ``units`` cost is done."""
        if self.estimate is not None:
            return
        self.units += units
        self.ticks += 1
        elapsed = time.perf_counter() - self.t0
        if self.ticks < _TIMING_STEPS and elapsed < _TIMING_SECONDS:
            return
        self.estimate = elapsed / self.units * self.total_units
        if self.estimate > self.limit:
            warnings.warn(
                f"expected_error_nodes: estimated {self.estimate:.0f} s for {self.steps} local "
                f"steps of the exact node recursion (O(P^2 d) per step for the Local-SGD "
                f"family, O(P^3 d) for D-PSGD; P = {self.P}, d = {self.d}), measured on the "
                f"first {self.ticks} steps; fewer steps, a smaller P or d, or "
                "convkit.simulate with few replicates cost less",
                UserWarning,
                stacklevel=4,
            )


def node_local_curves(
    problem: HeterogeneousLeastSquares,
    spec: LocalSpec,
    theta0: Any = None,
    threshold: float = np.inf,
    timer: _StepTimer | None = None,
) -> tuple[np.ndarray, int]:
    """Raw exact curves of one Local-SGD configuration on ``problem`` (module docstring).

    Returns ``(raw, diverged_at)``: ``raw`` of shape ``(len(rec), 9)`` with columns
    ``E||avg||_H^2, E||avg||^2, E||tail||_H^2, E||tail||^2, E||last||_H^2, E||last||^2`` (of
    the nodes' mean, minus ``theta*``) and the node metrics ``node_excess_risk, node_hnorm2,
    node_dist2`` (means over nodes of each node's own error); NaN where undefined (tail
    before its start, after divergence). ``diverged_at``: the first step with
    ``E||ebar||^2 > threshold`` (0 if none)."""
    if spec.workers != problem.P:
        raise ValueError(
            f"the problem has workers = {problem.P} nodes; the algorithm runs {spec.workers} "
            "workers"
        )
    return _node_curves(
        problem, spec.gammas, spec.mask, None, "local", spec.batch, spec.tail_start,
        spec.rec, theta0, threshold, timer,
    )  # fmt: skip


def node_dpsgd_curves(
    problem: HeterogeneousLeastSquares,
    algo: Any,
    n: int,
    rec: np.ndarray,
    tail_start: int,
    theta0: Any = None,
    threshold: float = np.inf,
    timer: _StepTimer | None = None,
) -> tuple[np.ndarray, int]:
    """Raw exact curves (as :func:`node_local_curves`) of uncompressed D-PSGD on a static
    topology (:func:`convkit.exact.dpsgd.is_exact_dpsgd`), either order of gossip and step:
    ``"step_then_gossip"`` maps the local step's moments by ``W`` (``m <- W m``, ``M <- W M
    W^T``, ``B <- W B``); ``"gossip_then_step"`` (``e_i' = (W e)_i - gamma g_i(e_i)``) takes
    ``K = W - gamma diag(h_.j)`` for the local step's ``diag(a)`` in the module docstring's
    recursion (``M <- K M K^T + ...``, ``O(P^3 d)`` per step)."""
    W, order = dpsgd_mixing(algo, KIND)
    if W.shape[0] != problem.P:
        raise ValueError(
            f"the problem has workers = {problem.P} nodes; the topology has {W.shape[0]}"
        )
    gam = np.asarray(algo.step_size.values(n), dtype=np.float64)
    return _node_curves(
        problem, gam, None, W, order, algo.batch, tail_start, rec, theta0, threshold, timer
    )


def _node_curves(
    problem: HeterogeneousLeastSquares,
    gam: np.ndarray,
    comm: np.ndarray | None,
    W: np.ndarray | None,
    order: str,
    batch: int,
    s0: int,
    rec: Any,
    theta0: Any,
    threshold: float,
    timer: _StepTimer | None = None,
) -> tuple[np.ndarray, int]:
    """The recursion of the module docstring, coordinates first: ``m`` (d, P), ``M`` (d, P,
    P), ``B`` (d, P). ``order``: ``"local"`` (averaging after the steps where ``comm``),
    ``"step_then_gossip"`` or ``"gossip_then_step"`` (mixing ``W``)."""
    P, d = problem.P, problem.d
    hn = np.ascontiguousarray(problem.node_h.T, dtype=np.float64)  # (d, P)
    hbar = problem.h
    u = problem.offsets.T
    w = hn * u
    sigma2 = float(problem.noise) ** 2
    b = float(batch)
    c_sq, c_tr = design_coefficients(problem.design, batch)
    e0 = starting_point(theta0, d) - problem.theta_star
    m = np.repeat(e0[:, None], P, axis=1)
    M = np.repeat((e0 * e0)[:, None, None], P, axis=1).repeat(P, axis=2)
    eye = np.arange(P)
    B = np.zeros((d, P))
    Bt = np.zeros((d, P))
    mean_sum = np.zeros(d)  # E S_t
    mean_sum_t = np.zeros(d)
    Q = np.zeros(d)
    Qt = np.zeros(d)
    ww = w[:, :, None] * w[:, None, :]
    rec = np.asarray(rec, dtype=np.int64)
    raw = np.full((rec.size, 9), np.nan)
    pos = 0
    units = float(P) ** (3 if order == "gossip_then_step" else 2) * d
    with np.errstate(all="ignore"):
        for k in range(1, gam.size + 1):
            if timer is not None:
                timer.tick(units)
            g = gam[k - 1]
            S = M[:, eye, eye]  # (d, P) same-node moments
            Er2 = S - 2.0 * u * m + u * u
            extra = (g * g) * (
                (c_sq - 1.0) * hn * hn * Er2 + hn / b * (c_tr * (_node_trace(hn, Er2)) + sigma2)
            )
            if order == "gossip_then_step":
                K = np.broadcast_to(W, (d, P, P)) * 1.0
                K[:, eye, eye] -= g * hn
                Km = np.einsum("jik,jk->ji", K, m)
                M = K @ M @ np.swapaxes(K, 1, 2)
                KB = np.einsum("jik,jk->ji", K, B)
                KBt = np.einsum("jik,jk->ji", K, Bt)
            else:
                a = 1.0 - g * hn
                Km = a * m
                M = a[:, :, None] * M * a[:, None, :]
                KB, KBt = a * B, a * Bt
            M += g * (Km[:, :, None] * w[:, None, :] + w[:, :, None] * Km[:, None, :])
            M += (g * g) * ww
            M[:, eye, eye] += extra
            m = Km + g * w
            Bn = KB + g * w * mean_sum[:, None]
            Btn = KBt + g * w * mean_sum_t[:, None]
            if order == "step_then_gossip":
                M = W @ M @ W.T
                m, Bn, Btn = m @ W.T, Bn @ W.T, Btn @ W.T
            elif order == "local" and comm[k - 1] and P > 1:
                m = np.repeat(m.mean(axis=1, keepdims=True), P, axis=1)
                M = np.broadcast_to(M.mean(axis=(1, 2))[:, None, None], (d, P, P)).copy()
                Bn = np.repeat(Bn.mean(axis=1, keepdims=True), P, axis=1)
                Btn = np.repeat(Btn.mean(axis=1, keepdims=True), P, axis=1)
            V = M.mean(axis=(1, 2))  # E ebar_j^2
            cross = M.mean(axis=2)  # E[e_i ebar], (d, P)
            B = Bn + cross
            mbar = m.mean(axis=1)
            Q = Q + 2.0 * B.mean(axis=1) - V
            mean_sum = mean_sum + mbar
            if k >= s0:
                Bt = Btn + cross
                Qt = Qt + 2.0 * Bt.mean(axis=1) - V
                mean_sum_t = mean_sum_t + mbar
            v1 = float(V.sum())
            if not v1 <= threshold:
                raw[rec >= k] = np.nan
                return raw, k
            if pos < rec.size and rec[pos] == k:
                node_record_row(raw[pos], hbar, Q, Qt, V, M[:, eye, eye], k, s0)
                pos += 1
    return raw, 0


def _node_trace(hn: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_l h_il x_il`` for every node ``i`` (arrays (d, P)), shape (1, P)."""
    return np.sum(hn * x, axis=0, keepdims=True)


def expected_error_nodes(
    problem: HeterogeneousLeastSquares,
    algorithms: Algorithm | Sequence[Algorithm],
    *,
    gradients: int | None = None,
    steps: int | None = None,
    theta0: Any = None,
    record: Sequence[int] | None = None,
    n_record: int = 40,
    tail: float = 0.5,
    divergence_factor: float = 1e12,
) -> Any:
    """Exact expected errors of ``algorithms`` (the Local-SGD family, D-PSGD, SCAFFOLD: the
    exact models of :data:`NODE_MODELS`) on ``problem`` (node Hessians
    and optima; module docstring), as a :class:`~convkit.result.Result` laid out as
    :func:`convkit.exact.expected_error`'s (``se = 0``, ``count = 0``), with the node metrics
    ``node_excess_risk``, ``node_hnorm2``, ``node_dist2`` under the iterate ``"state"``.
    Arguments as :func:`convkit.exact.expected_error`'s.

    The first local steps are timed, as :func:`convkit.simulate` times its own: a call
    estimated to take more than :data:`convkit.simulate.LONG_RUN_SECONDS` warns
    (``UserWarning``) with the estimate, and ``meta["timing"]["estimated_seconds"]`` holds it
    (``None`` for a call too short to time)."""
    t_start = time.perf_counter()
    if not isinstance(problem, HeterogeneousLeastSquares):
        raise TypeError(
            "expected_error_nodes handles HeterogeneousLeastSquares problems, got "
            f"{type(problem).__name__}"
        )
    algos = algorithm_list(algorithms)
    models = []
    for a in algos:
        caps = a.capabilities
        model = caps.exact_model(KIND)
        if model not in NODE_MODELS:
            why = (
                caps.refusal(type(a), KIND)
                if model is None
                else f"its exact model {model!r} has no node-moment form here"
            )
            raise TypeError(
                "expected_error_nodes handles the exact models 'local' (LocalSGD: MBA, "
                "Local-SGD, OSA), 'dpsgd' (uncompressed D-PSGD on a static topology) and "
                "'scaffold' (SCAFFOLD, convkit.exact.scaffold_nodes); "
                f"got {a.label} ({type(a).__name__}): {why}"
            )
        models.append(model)
    labels = [a.label for a in algos]
    tail = check_real("tail", tail, low=0, high=1, high_inclusive=False)
    check_real("divergence_factor", divergence_factor, low=1)
    ns = local_steps_of(algos, gradients, steps)
    e0 = starting_point(theta0, problem.d) - problem.theta_star
    threshold = divergence_factor * max(float(e0 @ e0), 1.0)
    recs = [record_steps(n, n_record, record, n_max=max(ns)) for n in ns]
    run_plan = plan(
        problem,
        algos,
        engine="exact",
        steps=ns,
        record=recs,
        paths=(EXACT_NODE_MOMENTS,),
        kernels=False,
        engines=models,
    )
    raws, div = [], np.zeros(len(algos), dtype=np.int64)
    P, d = problem.P, problem.d
    cost = [
        scaffold_units(P, d) if m == "scaffold" else float(P) ** (2 if m == "local" else 3) * d
        for m in models
    ]
    timer = _StepTimer(
        sum(c * n for c, n in zip(cost, ns, strict=True)),
        sum(ns),
        P,
        d,
        sys.modules["convkit.simulate"].LONG_RUN_SECONDS,  # simulate's limit, read per call
    )
    for i, a in enumerate(algos):
        s0 = int(math.floor(tail * ns[i])) + 1
        if models[i] == "local":
            spec = local_specs([a], [ns[i]], record, n_record, tail, n_max=max(ns), recs=[recs[i]])
            raw, dv = node_local_curves(problem, spec[0], theta0, threshold, timer)
        elif models[i] == "scaffold":
            spec = local_specs([a], [ns[i]], record, n_record, tail, n_max=max(ns), recs=[recs[i]])
            raw, dv = node_scaffold_curves(
                problem, spec[0], a.server_step, theta0, threshold, timer
            )
        else:
            raw, dv = node_dpsgd_curves(problem, a, ns[i], recs[i], s0, theta0, threshold, timer)
        raws.append(raw)
        div[i] = dv
    meta = {
        "problem": problem.describe(),
        "algorithms": algorithms_meta(algos, labels, ns),
        "engine": "exact",
        "path": run_plan.describe(),
        "replicates": None,
        "count": EXACT_COUNT,
        "theta0": starting_point(theta0, problem.d).tolist(),
        "tail": tail,
        "timing": {
            "seconds": time.perf_counter() - t_start,
            "estimated_seconds": timer.estimate,
        },
    }
    extras = dict.fromkeys(labels, list(NODE_METRICS))
    return result_from_raw(labels, algos, ns, recs, raws, div, problem.d, meta, extras)
