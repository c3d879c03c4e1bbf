r"""Exact expected error of FedAvg with server momentum on least squares (no Monte Carlo noise).

Derived here, on the second-moment recursion of :mod:`convkit.exact.local` (same notation:
``z = Q^T (theta - theta*)`` in the eigenbasis of ``H``, diagonals only, ``(c_sq, c_tr)`` of
the design).  :class:`~convkit.algorithms.federated.FedAvgM` runs Local-SGD's local steps from
the server's model ``x``; at a round's end, with the workers' mean ``m``,

    v' = beta v + (x - m),       x' = x - lr v' = (1 - lr) x + lr m - lr beta v,

and every worker restarts from ``x'``.  The update is linear in ``(x, m, v)``, so the
second moments stay closed.  Per coordinate ``j`` the state is the same-worker and
cross-worker moments ``S = E z_i^2``, ``C = E z_i z_k`` of :mod:`convkit.exact.local`, the
worker-server moments ``Zx = E z_i x``, ``Zv = E z_i v`` and the server's ``X = E x^2``,
``XV = E x v``, ``V = E v^2`` (diagonal parts: off-diagonal entries never feed back, as there).
A local step maps ``S`` as Local-SGD does, ``C -> (1 - g h)^2 C`` and ``Zx, Zv -> (1 - g h)``
times themselves (the step's samples are independent of ``x``, ``v`` and the other
workers, ``E[a a^T] = H``); ``x`` and ``v`` do not move.  At a round's end the covariance of
``(x, m, v)``,

    [[X, Zx, XV], [Zx, S/P + (1 - 1/P) C, Zv], [XV, Zv, V]],

is mapped by the two rows ``a_x = (1 - lr, lr, -lr beta)``, ``a_v = (1, -1, beta)``:
``X' = a_x^T Sigma a_x``, ``XV' = a_x^T Sigma a_v``, ``V' = a_v^T Sigma a_v``, and the restart
gives ``S = C = Zx = X'``, ``Zv = XV'``.

Polyak-Ruppert averages: the conditional means are linear in the state, so the cross-time
moments of the running sum ``Sigma_t = sum_{s<=t} zbar_s`` with the state,
``B_w = E[Sigma_t w_t]`` for ``w`` in ``(z_i, x, v)``, follow the deterministic part of the
same maps (``B_z -> (1 - g h) B_z`` at a local step; ``B_x, B_v`` by ``a_x, a_v`` applied to
``(B_x, B_z, B_v)`` at a round, then ``B_z = B_x``), and
``E Sigma_t^2 = E Sigma_{t-1}^2 + 2 B(t) + E zbar_t^2`` with ``B(t) = E[Sigma_{t-1} zbar_t]``
(``B_z`` between rounds, ``B_x`` after one).  The recorded iterate ``zbar_t`` is the workers'
mean after step ``t`` (``x'`` after a round), as in :func:`convkit.simulate`.  ``beta = 0``,
``lr = 1`` gives ``x' = m``: Local-SGD's recursion (``tests/test_server_update.py`` checks it
against :mod:`convkit.exact.local` and the general case against Monte Carlo).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .moments import design_coefficients

__all__ = ["server_momentum_curves"]


def _quad(a: tuple[float, float, float], c: tuple[float, float, float], sig: dict) -> Any:
    """``a^T Sigma c`` for the per-coordinate covariance of ``(x, m, v)``."""
    keys = ("x", "m", "v")
    return sum(
        a[i] * c[k] * sig[tuple(sorted((keys[i], keys[k])))]
        for i in range(3)
        for k in range(3)
        if a[i] != 0.0 and c[k] != 0.0
    )


def server_momentum_curves(
    h: np.ndarray,
    z2: np.ndarray,
    sigma2: float,
    design: str,
    algo: Any,
    n: int,
    rec: np.ndarray,
    tail_start: int,
    *,
    threshold: float = np.inf,
) -> tuple[np.ndarray, int]:
    """Raw exact curves of one FedAvgM configuration (the six columns of
    :func:`convkit.exact.local.local_curves`) and the divergence step (0 if none); reads
    ``workers``, ``batch``, ``step_size``, ``comm``, ``beta`` and ``server_lr`` of ``algo``."""
    algo.comm.validate(n)
    gammas = np.asarray(algo.step_size.values(n), dtype=np.float64)
    mask = algo.comm.mask(n)
    b, ip = float(algo.batch), 1.0 / float(algo.workers)
    c_sq, c_tr = design_coefficients(design, int(algo.batch))
    beta, lr = float(algo.beta), float(algo.server_lr)
    ax, av = (1.0 - lr, lr, -lr * beta), (1.0, -1.0, beta)
    S, C, Zx, X = (np.array(z2, dtype=np.float64) for _ in range(4))
    Zv, XV, V = (np.zeros_like(S) for _ in range(3))
    B = {w: np.zeros_like(S) for w in ("z", "x", "v")}  # E[Sigma_t w_t], from step 1
    T = {w: np.zeros_like(S) for w in ("z", "x", "v")}  # the same from the tail's start
    q, qt = np.zeros(2), np.zeros(2)
    raw = np.full((rec.size, 6), np.nan)
    is_rec = np.zeros(n + 1, dtype=bool)
    is_rec[rec] = True
    pos = 0
    with np.errstate(all="ignore"):
        for k in range(1, n + 1):
            g = gammas[k - 1]
            gh = g * h
            r = 1.0 - gh
            S = S * (1.0 - 2.0 * gh + c_sq * gh * gh) + g * g / b * (c_tr * (S @ h) + sigma2) * h
            C, Zx, Zv = C * r * r, Zx * r, Zv * r
            for acc in (B, T):
                acc["z"] = acc["z"] * r
            M = ip * S + (1.0 - ip) * C
            if mask[k - 1]:
                sig = {("x", "x"): X, ("m", "x"): Zx, ("v", "x"): XV, ("m", "m"): M,
                       ("m", "v"): Zv, ("v", "v"): V}  # fmt: skip
                X, XV, V = _quad(ax, ax, sig), _quad(ax, av, sig), _quad(av, av, sig)
                S, C, Zx, Zv, M = X, X, X, XV, X
                for acc in (B, T):
                    u = (acc["x"], acc["z"], acc["v"])
                    acc["x"] = sum(c * w for c, w in zip(ax, u, strict=True))
                    acc["v"] = sum(c * w for c, w in zip(av, u, strict=True))
                    acc["z"] = acc["x"]
            # zbar_k: E zbar^2 = M; E[zbar z_i] = M, E[zbar x] = Zx, E[zbar v] = Zv
            last = np.array([M @ h, M.sum()])
            step = 2.0 * B["z"] + M
            q += np.array([step @ h, step.sum()])
            for acc in (B,) + ((T,) if k >= tail_start else ()):
                if acc is T:
                    tstep = 2.0 * T["z"] + M
                    qt += np.array([tstep @ h, tstep.sum()])
                acc["z"] = acc["z"] + M
                acc["x"] = acc["x"] + Zx
                acc["v"] = acc["v"] + Zv
            if not last[1] <= threshold:
                return raw, k
            if is_rec[k]:
                raw[pos, 0:2] = q / k**2
                if k >= tail_start:
                    raw[pos, 2:4] = qt / (k - tail_start + 1) ** 2
                raw[pos, 4:6] = last
                pos += 1
    return raw, 0
