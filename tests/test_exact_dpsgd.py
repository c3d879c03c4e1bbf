"""Exact D-PSGD (no compression): structure, special cases, Monte Carlo agreement."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit import topology as tp
from convkit.algorithms.decentralized import DPSGD
from convkit.exact import expected_error
from convkit.exact.dpsgd import dpsgd_curves, mixing_structure

FORMS = ("step_then_gossip", "gossip_then_step")


def test_walk_regular_detection():
    """Rings, tori, hypercubes and complete graphs are walk-regular; paths and stars not."""
    for topo in (tp.ring(9), tp.torus(3, 4), tp.hypercube(8), tp.complete(5)):
        ms = mixing_structure(topo.W)
        assert ms.walk_regular, topo
        np.testing.assert_allclose(ms.U @ np.diag(ms.lam) @ ms.U.T, topo.W, atol=1e-12)
        np.testing.assert_allclose(ms.U[:, 0], 1 / np.sqrt(topo.n))
    for topo in (tp.path(6), tp.star(5)):
        assert not mixing_structure(topo.W).walk_regular, topo


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_fast_path_equals_dense_path(form, design):
    """Walk-regular W: the O(n d) eigen-mode path equals the dense O(d n^3) node path."""
    prob = getattr(ck.LeastSquares, design)(4, spectrum="1/i", noise=0.5, seed=3)
    algo = DPSGD(tp.torus(3, 3), ck.PolyDecay(0.3, 0.75), form, batch=2)
    z2 = (np.ones(4) - prob.theta_star) ** 2
    rec = np.arange(1, 151)
    a, _ = dpsgd_curves(prob.h, z2, 0.25, design, algo, 150, rec, 76)
    b, _ = dpsgd_curves(prob.h, z2, 0.25, design, algo, 150, rec, 76, force_dense=True)
    cols = [0, 1, 2, 3, 4, 5, 7]
    np.testing.assert_allclose(a[:, cols], b[:, cols], rtol=1e-12, equal_nan=True)
    # consensus = node variance - variance of the mean: a difference, compared at the scale
    # of the node variance (about 1 here)
    np.testing.assert_allclose(a[:, 6], b[:, 6], rtol=0, atol=1e-12)


def test_complete_graph_is_mba_and_edgeless_is_osa():
    """W = J (step then gossip) is MBA; W = I: the network mean is one-shot averaging."""
    prob = ck.LeastSquares.gaussian(5, spectrum="1/i", noise=0.5, rotate=True, seed=1)
    st = ck.PolyDecay(0.4, 0.75)
    res = expected_error(
        prob,
        [
            DPSGD(tp.complete(6), st, "step_then_gossip", batch=2, name="J"),
            ck.MBA(6, st, batch=2, name="mba"),
            DPSGD(tp.edgeless(6), st, "gossip_then_step", batch=2, name="I"),
            ck.OSA(6, st, batch=2, name="osa"),
        ],
        steps=400,
        theta0=np.ones(5),
    )
    for a, b in (("J", "mba"), ("I", "osa")):
        for it in ("avg", "tail", "last"):
            x = res.curve(a, "hnorm2", it)["mean"].to_numpy()
            y = res.curve(b, "hnorm2", it)["mean"].to_numpy()
            np.testing.assert_allclose(x, y, rtol=1e-12)
    cons = res.curve("J", "consensus", "state")["mean"].to_numpy()
    assert np.all(np.abs(cons) < 1e-12)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("topo", [tp.ring(8), tp.path(5)], ids=["ring8", "path5"])
def test_matches_monte_carlo(form, topo):
    """Every record point of every metric (avg/tail/last errors, consensus, grad_norm2) within
    4 SE of the Monte Carlo mean (2000 replicates, seed fixed; about 270 correlated
    comparisons per case, so 4 SE: P(|z| > 4) = 6e-5 each)."""
    prob = ck.LeastSquares.gaussian(3, spectrum="1/i", noise=0.5, rotate=True, seed=3)
    algo = DPSGD(topo, ck.PolyDecay(0.3, 0.75), form, batch=2, name="D")
    ex = expected_error(prob, algo, steps=150, theta0=np.ones(3))
    mc = ck.simulate(prob, algo, steps=150, theta0=np.ones(3), replicates=2000, seed=11)
    m = ex.frame.merge(mc.frame, on=["config", "step", "iterate", "metric"], suffixes=("_e", "_m"))
    assert len(m) == len(ex.frame) == len(mc.frame)
    z = (m["mean_m"] - m["mean_e"]) / m["se_m"]
    assert np.abs(z).max() < 4, m.loc[np.abs(z).idxmax()]


def full_moment_reference(H, noise, W, form, gammas, b, eta0, tail_start):
    """Independent reference written here: the full second moment ``C = E[z z^T]`` of the
    stacked node errors ``z = (z_1, ..., z_n)``, ``z_i = x_i - theta*``, an ``(n d) x (n d)``
    matrix in the ORIGINAL coordinates (no eigenbasis of H, no eigen-modes of W), Gaussian
    design, batch ``b``, nodes' samples independent.

    Node ``i``'s stochastic gradient at ``u`` is ``A_i u - xi_i`` with ``A_i = (1/b) sum x x^T``
    (``E A_i = H``) and ``E[xi xi^T] = sigma^2 H / b``; by Isserlis
    (``E[x x^T S x x^T] = 2 H S H + tr(H S) H``) the fluctuation ``(A_i - H) u`` has second
    moment ``K(S) = (H S H + tr(H S) H) / b`` for ``S = E[u u^T]``.  So, with
    ``Wb = W (x) I_d`` and ``Fb = I_n (x) (I - g H)``:

    * step then gossip (``x <- W (x - g G(x))``):
      ``C <- Wb (Fb C Fb^T + g^2 blockdiag_i(K(C_ii) + sigma^2 H / b)) Wb^T``;
    * gossip then step (Lian et al.: ``x_i <- sum_j W_ij x_j - g G_i(x_i)``, gradient at the
      node's own model): ``C <- G C G^T + g^2 blockdiag_i(K(C_ii) + sigma^2 H / b)`` with
      ``G = Wb - g I_n (x) H``.

    Network mean ``zbar``: ``V = (1/n^2) sum_ij C_ij``; since ``W`` is doubly stochastic,
    ``E[zbar_t | past] = F_t zbar_{t-1}``, so the Polyak-Ruppert second moment is
    ``A_t = F_t A_{t-1} + V_t``, ``Q_t = Q_{t-1} + A_t + A_t^T - V_t`` (tail: from
    ``tail_start``).  Returns per step: avg (hnorm2, dist2), tail (hnorm2, dist2), last
    (hnorm2, dist2), consensus and grad_norm2 of the last iterate."""
    n, d = W.shape[0], H.shape[0]
    eye, In = np.eye(d), np.eye(n)
    z0 = np.tile(eta0, n)
    C = np.outer(z0, z0)
    Wb = np.kron(W, eye)
    A = np.zeros((d, d))
    At = np.zeros((d, d))
    Q = np.zeros((d, d))
    Qt = np.zeros((d, d))
    out = np.full((gammas.size, 8), np.nan)

    def injected(C, g):
        out = np.zeros_like(C)
        for i in range(n):
            blk = slice(i * d, (i + 1) * d)
            S = C[blk, blk]
            K = (H @ S @ H + np.trace(H @ S) * H) / b
            out[blk, blk] = g * g * (K + noise**2 * H / b)
        return out

    for k in range(1, gammas.size + 1):
        g = gammas[k - 1]
        F = eye - g * H
        if form == "step_then_gossip":
            Fb = np.kron(In, F)
            C = Wb @ (Fb @ C @ Fb.T + injected(C, g)) @ Wb.T
        else:
            G = Wb - g * np.kron(In, H)
            C = G @ C @ G.T + injected(C, g)
        V = C.reshape(n, d, n, d).sum(axis=(0, 2)) / n**2
        A = F @ A + V
        Q = Q + A + A.T - V
        out[k - 1, 0:2] = [np.trace(H @ Q) / k**2, np.trace(Q) / k**2]
        if k >= tail_start:
            At = F @ At + V
            Qt = Qt + At + At.T - V
            m = k - tail_start + 1
            out[k - 1, 2:4] = [np.trace(H @ Qt) / m**2, np.trace(Qt) / m**2]
        out[k - 1, 4:6] = [np.trace(H @ V), np.trace(V)]
        out[k - 1, 6] = np.trace(C) / n - np.trace(V)
        out[k - 1, 7] = np.trace(H @ H @ V)
    return out


@pytest.mark.parametrize("form", FORMS)
def test_ring_of_64_eigen_mode_path_equals_full_moment_reference(form, monkeypatch):
    """A ring of 64 nodes is walk-regular, so expected_error runs the O(n d) eigen-mode path
    (checked with a spy on the structure it computes); its curves equal the full
    (n d) x (n d) second-moment recursion written in this file (original coordinates, rotated
    H, d = 4, b = 2, 120 steps, start at 1) at every step, every iterate and metric, to 1e-11
    relative (measured: about 1e-13; both sum a few hundred terms per step in different
    orders); the consensus (a difference of terms of the size of the node variance) to 1e-11
    of the node variance."""
    import convkit.exact.dpsgd as ed

    seen = []
    orig = ed.mixing_structure

    def spy(W, *a, **kw):
        ms = orig(W, *a, **kw)
        seen.append((np.asarray(W).shape[0], ms.walk_regular))
        return ms

    monkeypatch.setattr(ed, "mixing_structure", spy)
    d, n_steps, b = 4, 120, 2
    prob = ck.LeastSquares.gaussian(d, spectrum="1/i", noise=0.7, rotate=True, seed=5)
    topo = tp.ring(64)
    algo = DPSGD(topo, ck.PolyDecay(0.4, 0.75), form, batch=b, name="D")
    theta0 = np.ones(d)
    rec = range(1, n_steps + 1)
    res = expected_error(prob, algo, steps=n_steps, theta0=theta0, record=rec)
    assert seen and all(s == (64, True) for s in seen), seen
    tail_start = n_steps // 2 + 1
    ref = full_moment_reference(
        prob.H,
        prob.noise,
        topo.W,
        form,
        algo.step_size.values(n_steps),
        b,
        theta0 - prob.theta_star,
        tail_start,
    )
    cols = {
        ("avg", "hnorm2"): 0,
        ("avg", "dist2"): 1,
        ("tail", "hnorm2"): 2,
        ("tail", "dist2"): 3,
        ("last", "hnorm2"): 4,
        ("last", "dist2"): 5,
        ("state", "grad_norm2"): 7,
    }
    for (it, metric), j in cols.items():
        c = res.curve("D", metric, it)
        steps = c["step"].to_numpy()
        assert steps.size >= n_steps // 2 - 1, (it, metric)
        np.testing.assert_allclose(c["mean"].to_numpy(), ref[steps - 1, j], rtol=1e-11, atol=0)
    c = res.curve("D", "excess_risk", "avg")
    np.testing.assert_allclose(c["mean"], 0.5 * ref[c["step"].to_numpy() - 1, 0], rtol=1e-11)
    c = res.curve("D", "consensus", "state")
    steps = c["step"].to_numpy()
    scale = ref[steps - 1, 6] + ref[steps - 1, 5]  # node variance
    assert np.all(np.abs(c["mean"].to_numpy() - ref[steps - 1, 6]) <= 1e-11 * scale)
    assert ref[-1, 6] > 1e-4 * scale[-1]  # the consensus error is not trivially zero


def test_compressed_algorithms_are_refused():
    from convkit.algorithms.decentralized import CHOCOSGD

    prob = ck.LeastSquares.gaussian(3)
    algo = CHOCOSGD(tp.ring(4), ck.Constant(0.1), "top-k:1", 0.5)
    with pytest.raises(TypeError, match="uncompressed"):
        expected_error(prob, algo, steps=10)
