r"""Exact expected error of D-PSGD (no compression) on least squares, any mixing matrix W.

Derived here.  ``n`` nodes, symmetric doubly stochastic ``W``, errors ``eta_i = x_i - theta*``
(rows of ``E``), all nodes start at ``theta0``.  Two orders of the update:

* ``"step_then_gossip"``: ``X <- W (X - gamma G)`` (DeepSqueeze with the identity compressor);
* ``"gossip_then_step"``: ``x_i <- sum_j W_ij x_j - gamma g_i(x_i)`` (Lian et al. 2017).

In ``H``'s eigenbasis only the coordinate-diagonal second moments matter (as for Local-SGD,
see :mod:`convkit.exact.local`), so for each coordinate ``l`` we track the ``n x n`` node
matrix ``M^l_ij = E[z_i,l z_j,l]``.  Node samples are independent, so one local step maps

    M^l -> r_l^2 M^l + Diag(e^l),   r_l = 1 - g h_l,
    e^l_i = g^2 [(c_sq - 1) h_l^2 M^l_ii + (h_l / b) (c_tr sum_m h_m M^m_ii + sigma^2)]

(the same-node extra of the Isserlis recursion over the cross-node product; ``c_sq, c_tr``
from :func:`convkit.exact.moments.design_coefficients`).  Step then gossip:
``M' = W (r^2 M + Diag(e)) W``; gossip then step: ``M' = (W - g h I) M (W - g h I) + Diag(e)``.

Structure of W: in the eigenbasis ``W = U diag(lambda) U^T`` (first column ``1/sqrt(n)``),
if ``W`` is *walk-regular* (every spectral projector has a constant diagonal: rings, tori,
hypercubes, complete graphs, any circulant ``W``) then, since the start ``z0^2 1 1^T`` and the
injections ``e I`` are uniform over nodes, ``U^T M U`` stays diagonal and every node has the
same variance ``v_l = (1/n) sum_k mu_k,l``.  With modes ``mu_k,l``::

    step then gossip:  mu_k' = lambda_k^2 (r_l^2 mu_k + e_l)
    gossip then step:  mu_k' = (lambda_k - g h_l)^2 mu_k + e_l

``O(n d)`` per step (a ring of 64 nodes costs 64 d per step).  Otherwise a dense path keeps
the ``d`` matrices ``n x n`` (``O(d n^3)`` per step).

The network average ``zbar = (1/n) 1^T Z`` has ``E[zbar_l^2] = mu_0,l / n`` (dense:
``1^T M^l 1 / n^2``) and, because ``W`` is doubly stochastic,
``E[zbar_t | F_s] = prod_{s<k<=t} (I - g_k H) zbar_s``: the Polyak-Ruppert recursions of
:mod:`convkit.exact.local` apply unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .moments import design_coefficients

__all__ = ["ORDERS", "dpsgd_curves", "dpsgd_mixing", "is_exact_dpsgd", "mixing_structure"]

ORDERS = ("step_then_gossip", "gossip_then_step")


@dataclass
class MixingStructure:
    """Eigen-structure of ``W``: eigenvalues, eigenvectors (first = constant), walk-regular."""

    lam: np.ndarray
    U: np.ndarray
    walk_regular: bool


def mixing_structure(W: np.ndarray, tol: float = 1e-9) -> MixingStructure:
    """Eigenvalues/vectors of a symmetric doubly stochastic ``W`` with ``U[:, 0] = 1/sqrt(n)``
    and whether ``W`` is walk-regular (each spectral projector has a constant diagonal)."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    if W.shape != (n, n) or not np.allclose(W, W.T, atol=1e-12):
        raise ValueError(f"W must be a symmetric (n, n) matrix, got shape {W.shape}")
    if not np.allclose(W.sum(axis=1), 1.0, atol=1e-10):
        raise ValueError("W must be doubly stochastic (rows summing to 1)")
    one = np.full((n, 1), 1.0 / np.sqrt(n))
    # orthonormal basis of the complement of 1, then diagonalize W there
    B = np.linalg.qr(np.hstack([one, np.eye(n)[:, : n - 1]]))[0][:, 1:]
    lam_r, V = np.linalg.eigh(B.T @ W @ B)
    lam = np.concatenate([[1.0], lam_r])
    U = np.hstack([one, B @ V])
    walk = True
    order = np.argsort(lam)
    groups: list[list[int]] = [[int(order[0])]]
    for i in order[1:]:
        if abs(lam[i] - lam[groups[-1][-1]]) <= tol:
            groups[-1].append(int(i))
        else:
            groups.append([int(i)])
    for gidx in groups:
        diag = np.sum(U[:, gidx] ** 2, axis=1)
        if np.ptp(diag) > 1e-8:
            walk = False
            break
    return MixingStructure(lam, U, walk)


def is_exact_dpsgd(algo: Any, kind: str = "least_squares") -> bool:
    """Whether ``algo``'s class declares the exact D-PSGD model for problem kind ``kind``
    (``capabilities``, :mod:`convkit.algorithms.capabilities`; never an attribute of the
    instance): :class:`convkit.algorithms.decentralized.DPSGD`, whose ``topology`` and
    ``form`` (one of :data:`ORDERS`) this engine reads."""
    caps = getattr(algo, "capabilities", None)
    return caps is not None and caps.exact_model(kind) == "dpsgd"


def dpsgd_mixing(algo: Any, kind: str = "least_squares") -> tuple[np.ndarray, str]:
    """``(W, form)`` of an algorithm whose class declares the exact D-PSGD model for problem
    ``kind`` (``TypeError`` otherwise; ``ValueError`` for a time-varying topology)."""
    if not is_exact_dpsgd(algo, kind):
        raise TypeError(
            "the exact engine handles LocalSGD (MBA, Local-SGD, OSA) and uncompressed D-PSGD, "
            f"got {type(algo).__name__}"
        )
    topo = algo.topology
    if getattr(topo, "time_varying", False):
        raise ValueError(
            f"the exact D-PSGD engine needs a static topology (one W), got {topo.name}"
        )
    if algo.form not in ORDERS:
        raise ValueError(f"form must be one of {list(ORDERS)}, got {algo.form!r}")
    return np.asarray(topo.W, dtype=np.float64), algo.form


def dpsgd_curves(
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
    force_dense: bool = False,
) -> tuple[np.ndarray, int]:
    """Raw exact curves of one D-PSGD configuration and the divergence step (0 if none).

    Columns: the six of :func:`convkit.exact.local.local_curves`, then the exact
    ``consensus = E (1/n) sum_i ||x_i - x_bar||^2 = sum_l (v_l - E zbar_l^2)`` (mean node
    variance minus the mean's) and ``grad_norm2 = E||H (x_bar - theta*)||^2
    = sum_l h_l^2 E zbar_l^2`` of the last iterate (the ``"state"`` metrics of
    :class:`convkit.algorithms.decentralized.DPSGD`)."""
    W, order = dpsgd_mixing(algo)
    gammas = np.asarray(algo.step_size.values(n), dtype=np.float64)
    b = int(algo.batch)
    c_sq, c_tr = design_coefficients(design, b)
    ms = mixing_structure(W)
    nn = W.shape[0]
    d = h.size
    fast = ms.walk_regular and not force_dense
    raw = np.full((rec.size, 8), np.nan)
    if fast:
        lam = ms.lam[None, :]  # (1, n)
        mu = np.zeros((d, nn))
        mu[:, 0] = nn * z2
    else:
        M = np.broadcast_to(z2[:, None, None], (d, nn, nn)).copy()
        eye = np.eye(nn)
    A = np.zeros(d)
    At = np.zeros(d)
    q = np.zeros(2)
    qt = np.zeros(2)
    pos = 0
    with np.errstate(all="ignore"):
        for k in range(1, n + 1):
            g = gammas[k - 1]
            r = 1.0 - g * h
            if fast:
                v = mu.mean(axis=1)  # node variance per coordinate
            else:
                vn = np.diagonal(M, axis1=1, axis2=2)  # (d, n) node variances
                v = vn
            tr = h @ v  # scalar (fast) or (n,) per node (dense)
            if fast:
                e = g * g * ((c_sq - 1.0) * h * h * v + h / b * (c_tr * tr + sigma2))
                if order == "step_then_gossip":
                    mu = lam**2 * ((r * r)[:, None] * mu + e[:, None])
                else:
                    mu = (lam - (g * h)[:, None]) ** 2 * mu + e[:, None]
                V = mu[:, 0] / nn
                node_var = mu.mean(axis=1)
            else:
                e = (
                    g
                    * g
                    * (
                        (c_sq - 1.0) * (h * h)[:, None] * vn
                        + (h / b)[:, None] * (c_tr * tr[None, :] + sigma2)
                    )
                )  # (d, n)
                if order == "step_then_gossip":
                    inner = (r * r)[:, None, None] * M + e[:, :, None] * eye
                    M = W @ inner @ W
                else:
                    G = W[None] - (g * h)[:, None, None] * eye
                    M = G @ M @ G + e[:, :, None] * eye
                V = M.sum(axis=(1, 2)) / nn**2
                node_var = np.diagonal(M, axis1=1, axis2=2).mean(axis=1)
            A = r * A + V
            VV = np.array([h @ V, V.sum()])
            q += 2.0 * np.array([h @ A, A.sum()]) - VV
            if k >= tail_start:
                At = r * At + V
                qt += 2.0 * np.array([h @ At, At.sum()]) - VV
            if not (VV[1] <= threshold):
                raw[rec >= k] = np.nan
                return raw, k
            if pos < rec.size and rec[pos] == k:
                raw[pos, 0:2] = q / k**2
                if k >= tail_start:
                    raw[pos, 2:4] = qt / (k - tail_start + 1) ** 2
                raw[pos, 4:6] = VV
                raw[pos, 6] = node_var.sum() - VV[1]
                raw[pos, 7] = (h * h) @ V
                pos += 1
    return raw, 0
