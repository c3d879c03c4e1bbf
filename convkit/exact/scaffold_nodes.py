r"""Exact expected error of SCAFFOLD on least squares with node Hessians and node optima.

Derived here, on the node recursion of :mod:`convkit.exact.heterogeneous` (same notation:
node ``i`` has ``H_i = diag(h_i)``, offset ``u_i = theta*_i - theta*``, gradient offset
``w_i = H_i u_i``, ``e_i = y_i - theta*``, ``r_i = e_i - u_i``, ``a_i = 1 - gamma h_i``
coordinate-wise).  SCAFFOLD (Karimireddy et al. 2020, Algorithm 1, option II, full
participation; :mod:`convkit.algorithms.scaffold`) takes the local step::

    y_i <- y_i - gamma (g_i(y_i) - c_i + cbar),      cbar = (1/P) sum_k c_k,

and at a round's end, with ``Gamma`` the round's total step and ``eta`` the server step::

    c_i <- c_i - cbar + (x - y_i) / Gamma,   x <- x + eta (ybar - x),   y_i <- x.

The stochastic gradient is ``g_i(y_i) = H_i r_i - xi_i`` with ``E[xi_i | past] = 0``, so in
the errors the local step reads ``e_i' = a_i e_i + gamma w_i + gamma (c_i - cbar) +
gamma xi_i``: every update is affine in the state and the noise enters additively.  All
``H_i`` being diagonal, coordinate ``j`` of the stacked state::

    z = (e_1, ..., e_P, c_1, ..., c_P, x - theta*)          (n = 2P + 1 numbers)

closes on itself.  Per coordinate, a local step is ``z' = A z + beta + (gamma xi, 0, 0)``
with ``A = I + gamma N``::

    N = [[-diag(h_.j), I - J/P, 0], [0, 0, 0], [0, 0, 0]],     beta = (gamma w_.j, 0, 0)

(``J`` the all-ones matrix), and a round's end is ``z <- G z`` with the fixed matrix::

    G: c_i <- c_i - cbar + (x - e_i) / Gamma,  x <- (1 - eta) x + eta ebar,  e_i <- x (new).

Hence the mean ``m = E z`` and the second moment ``M = E[z z^T]`` (per coordinate, ``n x n``)
follow::

    m' = A m + beta,   M' = A M A^T + (A m) beta^T + beta (A m)^T + beta beta^T
                            + gamma^2 diag(v_1, ..., v_P, 0, ..., 0),

then ``m <- G m``, ``M <- G M G^T`` at a round's end.  The noise variance ``v_i`` of node
``i``'s gradient is that of :mod:`convkit.exact.heterogeneous` (independent samples on
different nodes: no cross-node noise), a function of ``E r_i^2 = M_ii - 2 u_i m_i + u_i^2``
alone::

    v_i = (c_sq - 1) h_i^2 E r_i^2 + (h_i / b) (c_tr sum_l h_il E r_il^2 + sigma^2),

``(c_sq, c_tr)`` of the design (:func:`convkit.exact.moments.design_coefficients`;
additive noise: ``v_i = sigma^2 h_i / b``).  The off-diagonal coordinates of the noise
covariance never feed back (``A`` and ``G`` act coordinate-wise).

Averages over time, as in :mod:`convkit.exact.heterogeneous`: with ``p = (1/P, ..., 1/P, 0,
..., 0)`` the recorded iterate is ``ebar_t = p^T z_t`` (the nodes' mean model, ``x`` right
after a round), ``S_t = sum_{s <= t} ebar_s``, and the cross moments ``B(t) = E[z_t S_t]``
satisfy ``B(t) = G_t (A B(t-1) + beta E S_{t-1}) + M_t p`` (``G_t`` the round's map or the
identity; the noise is independent of the past); then ``Q(t) = E S_t^2 = Q(t-1) + 2 p^T B(t)
- p^T M_t p`` and the error of the running average is ``sum_j hbar_j Q_j(t) / t^2``; the tail
average restarts ``B``, ``E S`` and ``Q`` at ``s0``.  The node metrics are the nodes' own
errors, the diagonal of ``M``'s node block.

Checks (``tests/test_exact_scaffold_nodes.py``): Monte Carlo of
:class:`~convkit.algorithms.scaffold.SCAFFOLD` on the same problem within 4 standard errors;
one local step per round is mini-batch averaging (MBA's exact curve of
:mod:`convkit.exact.heterogeneous` to rounding: the correction averages to zero); with
deterministic identical nodes the control variates stay zero (Local-SGD's curve); with
``sigma = 0`` and ``zeta^2 > 0`` SCAFFOLD's error goes to zero while Local-SGD's stalls.

Cost ``O(n^3 d) = O(P^3 d)`` per local step (two batched ``n x n`` products), in NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..problems.heterogeneous import HeterogeneousLeastSquares
from ..recording import starting_point
from .local import LocalSpec
from .moments import design_coefficients, node_record_row

__all__ = ["node_scaffold_curves", "round_matrix", "scaffold_units", "step_generator"]


def scaffold_units(P: int, d: int) -> float:
    """The cost of one local step of :func:`node_scaffold_curves` in the units of the node
    engine's timer: ``n^3 d`` with ``n = 2P + 1`` (module docstring)."""
    return float(2 * P + 1) ** 3 * d


def step_generator(node_h: np.ndarray) -> np.ndarray:
    """``N`` of the module docstring for every coordinate: shape ``(d, n, n)`` from the node
    spectra ``node_h`` (P, d); a local step of size ``gamma`` maps the state by ``I + gamma
    N``."""
    P, d = node_h.shape
    n = 2 * P + 1
    N = np.zeros((d, n, n))
    idx = np.arange(P)
    N[:, idx, idx] = -node_h.T
    N[:, :P, P : 2 * P] = np.eye(P) - 1.0 / P
    return N


def round_matrix(P: int, inv_round_step: float, server_step: float) -> np.ndarray:
    """``G`` of the module docstring (n x n, the same for every coordinate): the control
    variates' update ``c_i <- c_i - cbar + (x - e_i) / Gamma`` (``inv_round_step = 1 /
    Gamma``), the server's ``x <- (1 - eta) x + eta ebar`` (``eta = server_step``) and the
    nodes' restart from the new ``x``."""
    n = 2 * P + 1
    G = np.zeros((n, n))
    cs = slice(P, 2 * P)
    G[cs, cs] = np.eye(P) - 1.0 / P
    G[cs, :P] = -inv_round_step * np.eye(P)
    G[cs, 2 * P] = inv_round_step
    x_row = np.zeros(n)
    x_row[:P] = server_step / P
    x_row[2 * P] = 1.0 - server_step
    G[2 * P] = x_row
    G[:P] = x_row
    return G


def _inverse_round_steps(gam: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``1 / Gamma`` at each round's last step (0 elsewhere, and for a round of zero total
    step): ``Gamma`` the sum of the round's step sizes, as :class:`SCAFFOLD` computes it."""
    ends = np.flatnonzero(mask)
    csum = np.concatenate(([0.0], np.cumsum(gam)))
    starts = np.concatenate(([0], ends[:-1] + 1))
    totals = csum[ends + 1] - csum[starts]
    inv = np.zeros(gam.size)
    with np.errstate(divide="ignore"):
        inv[ends] = np.where(totals > 0, 1.0 / totals, 0.0)
    return inv


def node_scaffold_curves(
    problem: HeterogeneousLeastSquares,
    spec: LocalSpec,
    server_step: float,
    theta0: Any = None,
    threshold: float = np.inf,
    timer: Any = None,
) -> tuple[np.ndarray, int]:
    """Raw exact curves of SCAFFOLD on ``problem`` (module docstring), laid out as
    :func:`convkit.exact.heterogeneous.node_local_curves`'s: ``(raw, diverged_at)``, ``raw``
    of shape ``(len(spec.rec), 9)`` (columns ``E||avg||_H^2, E||avg||^2, E||tail||_H^2,
    E||tail||^2, E||last||_H^2, E||last||^2`` of the nodes' mean minus ``theta*``, then
    ``node_excess_risk, node_hnorm2, node_dist2``), NaN where undefined; ``diverged_at`` the
    first step with ``E||ebar||^2 > threshold`` (0 if none).  ``spec`` holds the step sizes,
    rounds, workers, batch, tail start and record steps (:class:`~convkit.exact.local.LocalSpec`
    built from the SCAFFOLD instance); ``server_step`` is ``eta``; ``timer`` (optional) has
    ``tick(units)``, called once per local step."""
    P, d = problem.P, problem.d
    if spec.workers != P:
        raise ValueError(
            f"the problem has workers = {P} nodes; the algorithm runs {spec.workers} workers"
        )
    n = 2 * P + 1
    gam, mask = spec.gammas, spec.mask
    inv = _inverse_round_steps(gam, mask)
    hn = np.ascontiguousarray(problem.node_h.T, dtype=np.float64)  # (d, P)
    hbar = problem.h
    u = problem.offsets.T
    beta0 = np.zeros((d, n))
    beta0[:, :P] = hn * u  # w_i, coordinates first
    sigma2 = float(problem.noise) ** 2
    c_sq, c_tr = design_coefficients(problem.design, spec.batch)
    b = float(spec.batch)
    N = step_generator(problem.node_h)
    eye_n = np.eye(n)
    nodes = np.arange(P)
    p = np.zeros(n)
    p[:P] = 1.0 / P
    e0 = starting_point(theta0, d) - problem.theta_star
    m = np.zeros((d, n))
    m[:, :P] = e0[:, None]
    m[:, 2 * P] = e0
    M = m[:, :, None] * m[:, None, :]
    B, Bt = np.zeros((d, n)), np.zeros((d, n))
    mean_sum, mean_sum_t = np.zeros(d), np.zeros(d)
    Q, Qt = np.zeros(d), np.zeros(d)
    rec = np.asarray(spec.rec, dtype=np.int64)
    s0 = spec.tail_start
    raw = np.full((rec.size, 9), np.nan)
    pos = 0
    units = scaffold_units(P, d)
    G_cache: dict[float, np.ndarray] = {}
    A_cache: tuple[float, np.ndarray] | None = None
    with np.errstate(all="ignore"):
        for k in range(1, gam.size + 1):
            if timer is not None:
                timer.tick(units)
            g = float(gam[k - 1])
            if A_cache is None or A_cache[0] != g:
                A_cache = (g, eye_n + g * N)
            A = A_cache[1]
            S = M[:, nodes, nodes]  # (d, P): E e_i^2
            Er2 = S - 2.0 * u * m[:, :P] + u * u
            trace = np.sum(hn * Er2, axis=0, keepdims=True)
            noise = (g * g) * ((c_sq - 1.0) * hn * hn * Er2 + hn / b * (c_tr * trace + sigma2))
            beta = g * beta0
            Am = np.einsum("jab,jb->ja", A, m)
            M = A @ M @ np.swapaxes(A, 1, 2)
            M += Am[:, :, None] * beta[:, None, :] + beta[:, :, None] * Am[:, None, :]
            M += beta[:, :, None] * beta[:, None, :]
            M[:, nodes, nodes] += noise
            m = Am + beta
            Bn = np.einsum("jab,jb->ja", A, B) + beta * mean_sum[:, None]
            Btn = np.einsum("jab,jb->ja", A, Bt) + beta * mean_sum_t[:, None]
            if mask[k - 1]:
                key = float(inv[k - 1])
                G = G_cache.get(key)
                if G is None:
                    G = G_cache[key] = round_matrix(P, key, server_step)
                M = G @ M @ G.T
                m, Bn, Btn = m @ G.T, Bn @ G.T, Btn @ G.T
            cross = M @ p  # E[z ebar], (d, n)
            V = cross @ p  # E ebar_j^2
            B = Bn + cross
            mbar = m @ p
            Q = Q + 2.0 * (B @ p) - V
            mean_sum = mean_sum + mbar
            if k >= s0:
                Bt = Btn + cross
                Qt = Qt + 2.0 * (Bt @ p) - V
                mean_sum_t = mean_sum_t + mbar
            v1 = float(V.sum())
            if not v1 <= threshold:
                raw[rec >= k] = np.nan
                return raw, k
            if pos < rec.size and rec[pos] == k:
                node_record_row(raw[pos], hbar, Q, Qt, V, M[:, nodes, nodes], k, s0)
                pos += 1
    return raw, 0
