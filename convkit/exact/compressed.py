r"""Exact expected error of CHOCO-SGD and DeepSqueeze with random *linear* compressors.

Derived here.  A compressor that multiplies every coordinate by an independent-of-the-state
random factor, ``C(u)_l = xi_l u_l`` (identity: ``xi = 1``; rand-k: ``xi_l`` = keep
indicator, ``E xi = k/d``, ``E xi^2 = k/d``; scaled rand-k: ``(d/k)`` times it, ``E xi = 1``,
``E xi^2 = d/k``), drawn independently across nodes and steps, keeps the dynamics *linear in
the state with random coefficients*.  With a diagonal ``H`` in the compressor's coordinates
(a non-rotated problem; any ``H`` for the identity compressor) the coordinate-diagonal
second moments close exactly, coordinate by coordinate:

* the SGD step acts as in :mod:`convkit.exact.dpsgd` (factor ``r_l = 1 - g h_l`` on the model
  components, node-diagonal Isserlis injection coupling the coordinates only through
  ``sum_m h_m E z_i,m^2``);
* a compression ``v_i = xi_i o u_i`` of a linear function ``u = L y`` of the state, entering as
  ``y' = F y + G v``: with ``a = E xi_l`` and ``s = E xi_l^2 - a^2``,
  ``E[y' y'^T] = (F + a G L) M (F + a G L)^T + G Diag(s (L M L^T)_ii) G^T``
  (the fluctuation ``(xi - a) o u`` has mean zero, is independent of the state and across
  nodes; only the *marginal* ``E xi_l^2`` of each coordinate enters, so the negative
  correlation of rand-k's coordinates does not matter).

State per coordinate ``l`` (``n`` nodes), errors ``z = x - theta*``:

* CHOCO-SGD (:class:`~convkit.algorithms.decentralized.CHOCOSGD`): ``y = (z, z_hat)``,
  ``z_hat = x_hat - theta*`` (``x_hat_0 = x_0``: ``z_hat_0 = z_0``; ``x_hat_0 = 0``:
  ``z_hat_0 = -theta*``; the update is homogeneous in ``y``, ``theta*`` cancels in
  ``z - z_hat``); ``z <- z - g G``, then in the order of ``algo.order``: ``"paper"``:
  ``z_hat <- z_hat + C(z - z_hat)``; ``z <- z + gamma_c (W - I) z_hat``;
  ``"reference_code"``: ``z <- z + gamma_c (W - I) z_hat``; ``z_hat <- z_hat + C(z - z_hat)``
  (both linear maps of ``y``, so the second-moment recursion is the same two factors in the
  other order).
* DeepSqueeze (:class:`~convkit.algorithms.decentralized.DeepSqueeze`):
  ``y = (z, delta, 1)``: the compressed quantity ``h + delta`` is an *absolute* model, so
  ``theta*_l`` enters through the constant component;
  ``z <- z - g G``; ``u = z + delta + theta*_l``; ``v = C(u)``; ``delta <- u - v``;
  ``z <- z + eta (W - I) v``.

The network average moves exactly like mini-batch SGD for both (``1^T (W - I) = 0``), so
``E[zbar_t | F_s] = prod (I - g_k H) zbar_s`` and the Polyak-Ruppert recursions of
:mod:`convkit.exact.local` apply.  Cost ``O(d (m n)^3)`` per step with dense node matrices
(``m`` = 2 state components); no eigen-mode shortcut is implemented for these two.

Not covered (and why): top-k, QSGD, sign and stochastic rounding are not linear with a
state-independent random factor (they depend on the norm or the ordering of the vector), so
their second moments do not close; DCD/ECD-PSGD are not handled here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compression import Identity, RandK
from .moments import design_coefficients

__all__ = ["compressed_curves", "compressor_moments", "is_exact_compressed"]


def compressor_moments(compressor: Any, d: int) -> tuple[float, float] | None:
    """``(E xi, E xi^2 - (E xi)^2)`` per coordinate, or None when not a random linear
    compressor with state-independent factors."""
    if isinstance(compressor, Identity):
        return 1.0, 0.0
    if isinstance(compressor, RandK):
        p = compressor.k_for(d) / d
        if compressor.scaled:
            return 1.0, 1.0 / p - 1.0
        return p, p * (1.0 - p)
    return None


#: the recursion of each exact model this engine handles
_KINDS = {"choco": "CHOCOSGD", "deep_squeeze": "DeepSqueeze"}


def _kind(algo: Any) -> str | None:
    """``"CHOCOSGD"`` or ``"DeepSqueeze"``: the recursion of the exact model ``algo``'s class
    declares for least squares (``capabilities``), or None."""
    caps = getattr(algo, "capabilities", None)
    return None if caps is None else _KINDS.get(caps.exact_model("least_squares"))


def is_exact_compressed(algo: Any, problem: Any) -> tuple[bool, str]:
    """Whether :func:`compressed_curves` handles ``algo`` on ``problem`` (and why not)."""
    kind = _kind(algo)
    if kind is None:
        return False, (
            f"{type(algo).__name__} declares no CHOCO-SGD or DeepSqueeze exact model (capabilities)"
        )
    mom = compressor_moments(getattr(algo, "compressor", None), problem.d)
    if mom is None:
        return False, (
            f"compressor {algo.compressor.name} is not linear with a state-independent random "
            "factor (exact second moments need identity, rand-k or scaled rand-k)"
        )
    if mom[1] != 0.0 and getattr(problem, "Q", None) is not None:
        return False, "a random compressor needs a diagonal (non-rotated) H for exact moments"
    if getattr(algo.topology, "time_varying", False):
        return False, "the exact engine needs a static topology"
    return True, ""


def compressed_curves(
    h: np.ndarray,
    z0: np.ndarray,
    theta_star: np.ndarray,
    sigma2: float,
    design: str,
    algo: Any,
    n: int,
    rec: np.ndarray,
    tail_start: int,
    *,
    threshold: float = np.inf,
) -> tuple[np.ndarray, int, list[str]]:
    """Raw exact curves (columns of :func:`convkit.exact.local.local_curves`, then the state
    metrics ``consensus``, ``grad_norm2`` and ``replica_gap`` (CHOCO) or ``memory``
    (DeepSqueeze)), the divergence step and the state metric names.  ``z0`` is the signed
    start ``theta0 - theta*`` and ``theta_star`` the optimum, both in H's eigenbasis."""
    kind = _kind(algo)
    W = np.asarray(algo.topology.W, dtype=np.float64)
    nn = W.shape[0]
    d = h.size
    a, s = compressor_moments(algo.compressor, d)
    gammas = np.asarray(algo.step_size.values(n), dtype=np.float64)
    b = int(algo.batch)
    c_sq, c_tr = design_coefficients(design, b)
    eye = np.eye(nn)
    WI = W - eye
    zx = slice(0, nn)  # model block
    if kind == "CHOCOSGD":
        N = 2 * nn
        zh0 = z0 if algo.copies_start == "x0" else -np.asarray(theta_star, dtype=np.float64)
        y0 = np.concatenate([np.tile(z0[:, None], (1, nn)), np.tile(zh0[:, None], (1, nn))], 1)
        mix_first = algo.order == "reference_code"
        gc = algo.consensus_step
        F_mix = np.eye(N)
        F_mix[zx, nn:] = gc * WI
        L = np.broadcast_to(np.hstack([eye, -eye]), (d, nn, N))
        F_c = np.eye(N)
        G = np.vstack([np.zeros((nn, nn)), eye])
        extra = ["consensus", "grad_norm2", "replica_gap"]
    else:
        N = 2 * nn + 1
        y0 = np.concatenate([np.tile(z0[:, None], (1, nn)), np.zeros((d, nn)), np.ones((d, 1))], 1)
        eta = algo.eta
        L = np.zeros((d, nn, N))
        L[:, :, :nn] = eye
        L[:, :, nn : 2 * nn] = eye
        L[:, :, -1] = theta_star[:, None]
        F_c = np.zeros((d, N, N))
        F_c[:, :nn, :nn] = eye  # z' = z (+ G v)
        F_c[:, nn : 2 * nn, :] = L  # delta' = u (- v)
        F_c[:, -1, -1] = 1.0
        G = np.vstack([eta * WI, -eye, np.zeros((1, nn))])
        extra = ["consensus", "grad_norm2", "memory"]
    M = y0[:, :, None] * y0[:, None, :]  # (d, N, N): deterministic start
    B = F_c + a * (G @ L)  # (d, N, N) or (N, N) broadcast
    raw = np.full((rec.size, 6 + len(extra)), np.nan)
    A = np.zeros(d)
    At = np.zeros(d)
    q = np.zeros(2)
    qt = np.zeros(2)
    pos = 0
    idx = np.arange(nn)
    with np.errstate(all="ignore"):
        for k in range(1, n + 1):
            g = gammas[k - 1]
            r = 1.0 - g * h
            vn = M[:, idx, idx]  # (d, n) pre-step node variances of z
            tr = h @ vn
            e = (
                g
                * g
                * (
                    (c_sq - 1.0) * (h * h)[:, None] * vn
                    + (h / b)[:, None] * (c_tr * tr[None, :] + sigma2)
                )
            )
            M[:, zx, :] *= r[:, None, None]
            M[:, :, zx] *= r[:, None, None]
            M[:, idx, idx] += e
            if kind == "CHOCOSGD" and mix_first:
                M = F_mix @ M @ F_mix.T
            LM = L @ M
            uu = np.einsum("lin,lin->li", LM, L)  # diag(L M L^T): (d, n)
            M = B @ M @ np.swapaxes(B, -1, -2) + (G[None] * (s * uu)[:, None, :]) @ G.T
            if kind == "CHOCOSGD" and not mix_first:
                M = F_mix @ M @ F_mix.T
            zz = M[:, zx, zx]
            V = zz.sum(axis=(1, 2)) / nn**2
            A = r * A + V
            VV = np.array([h @ V, V.sum()])
            q += 2.0 * np.array([h @ A, A.sum()]) - VV
            if k >= tail_start:
                At = r * At + V
                qt += 2.0 * np.array([h @ At, At.sum()]) - VV
            if not (VV[1] <= threshold):
                raw[rec >= k] = np.nan
                return raw, k, extra
            if pos < rec.size and rec[pos] == k:
                raw[pos, 0:2] = q / k**2
                if k >= tail_start:
                    raw[pos, 2:4] = qt / (k - tail_start + 1) ** 2
                raw[pos, 4:6] = VV
                node_var = np.trace(zz, axis1=1, axis2=2) / nn
                raw[pos, 6] = node_var.sum() - VV[1]
                raw[pos, 7] = (h * h) @ V
                if kind == "CHOCOSGD":
                    zh = M[:, nn:, nn:]
                    cross = M[:, idx, nn + idx]
                    raw[pos, 8] = (
                        np.trace(zh, axis1=1, axis2=2) / nn + node_var - 2.0 * cross.mean(axis=1)
                    ).sum()
                else:
                    raw[pos, 8] = (M[:, nn + idx, nn + idx].mean(axis=1)).sum()
                pos += 1
    return raw, 0, extra
