"""CHOCO-SGD's two published orders and the start of the public copies, against steps
computed by hand (d = 3, 3 nodes, top-1, explicit arrays; every number is dyadic, so the
expected values are exact in floating point and the comparisons are to 1e-15).

Paper order: ``h = x - gamma g``; ``x_hat <- x_hat + top1(h - x_hat)``;
``x <- h + gamma_c (W - I) x_hat`` (new copies). Reference-code order: ``h = x - gamma g``;
``x <- h + gamma_c (W - I) x_hat`` (old copies); ``x_hat <- x_hat + top1(x - x_hat)``.
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit import _kernel_switch, _kernels
from convkit.algorithms.decentralized import CHOCOSGD, DPSGD, ECDPSGD
from convkit.compression import Identity, TopK
from convkit.topology import from_matrix, ring

W = np.array([[0.5, 0.5, 0.0], [0.5, 0.25, 0.25], [0.0, 0.25, 0.75]])
X0 = np.array([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0], [2.0, 2.0, -1.0]])
G = np.array([[2.0, 0.0, -1.0], [1.0, 1.0, 1.0], [0.0, -4.0, 2.0]])
GAMMA, GAMMA_C = 0.5, 0.5

# by hand (see the module docstring); H = X0 - GAMMA G = [[0, -2, 1], [-0.5, 0.5, 2.5], [2, 4, -2]]
HAND = {
    # paper, x_hat_0 = x_0: q = top1(-gamma G) (row 1: a three-way tie, lowest index kept)
    ("paper", "x0"): (
        [[-0.125, -1.25, 1.625], [-0.0625, 0.125, 1.375], [1.6875, 3.625, -1.5]],
        [[0.0, -2.0, 0.5], [-0.5, 1.0, 3.0], [2.0, 4.0, -1.0]],
    ),
    # paper, x_hat_0 = 0: q = top1(H)
    ("paper", "zero"): (
        [[0.0, -1.5, 1.625], [-0.5, 0.5, 1.5625], [2.0, 3.5, -1.6875]],
        [[0.0, -2.0, 0.0], [0.0, 0.0, 2.5], [0.0, 4.0, 0.0]],
    ),
    # reference code, x_hat_0 = x_0: mix with X0, then q = top1(x_new - X0)
    ("reference_code", "x0"): (
        [[-0.25, -1.25, 1.625], [0.0, -0.125, 1.375], [1.75, 3.875, -1.5]],
        [[-0.25, -2.0, 0.5], [0.0, 1.0, 1.375], [2.0, 3.875, -1.0]],
    ),
    # reference code, x_hat_0 = 0: the mix of zero copies is zero, x_new = H, q = top1(H)
    ("reference_code", "zero"): (
        [[0.0, -2.0, 1.0], [-0.5, 0.5, 2.5], [2.0, 4.0, -2.0]],
        [[0.0, -2.0, 0.0], [0.0, 0.0, 2.5], [0.0, 4.0, 0.0]],
    ),
}


class FixedGradient:
    """An oracle whose stochastic gradient is the fixed array ``G`` (per replicate)."""

    def __init__(self, g: np.ndarray) -> None:
        self.g = g

    def grad(self, x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.g, x.shape).copy()

    def sgd_update(self, x: np.ndarray, gamma: float, mean=None) -> np.ndarray:
        x -= gamma * self.g
        return x


def _one_step(order: str, start: str, fused: bool, monkeypatch) -> tuple[np.ndarray, np.ndarray]:
    algo = CHOCOSGD(
        from_matrix(W), ck.Constant(GAMMA), TopK(k=1), GAMMA_C, order=order, copies_start=start
    )
    algo.prepare(1)
    with monkeypatch.context() as m:
        if not fused:
            m.setitem(_kernel_switch._BUILT, _kernels.TOPK_KERNELS, None)
        state = algo.init(X0[None].copy(), None)
        state = algo.step(state, FixedGradient(G), 1, None)
    return state.x[0], state.x_hat[0]


@pytest.mark.parametrize("fused", [False, True], ids=["generic", "fused"])
@pytest.mark.parametrize(("order", "start"), list(HAND))
def test_one_step_by_hand(order, start, fused, monkeypatch):
    if fused and not _kernels.numba_available():
        pytest.skip("numba not available: only the generic path exists")
    x, xh = _one_step(order, start, fused, monkeypatch)
    want_x, want_xh = (np.array(a) for a in HAND[(order, start)])
    np.testing.assert_allclose(x, want_x, rtol=0, atol=1e-15)
    np.testing.assert_allclose(xh, want_xh, rtol=0, atol=1e-15)


def test_orders_differ_and_default_is_paper(monkeypatch):
    assert CHOCOSGD(ring(3), ck.Constant(0.1), TopK(k=1), 0.5).order == "paper"
    assert CHOCOSGD(ring(3), ck.Constant(0.1), TopK(k=1), 0.5).copies_start == "x0"
    a = _one_step("paper", "x0", False, monkeypatch)[0]
    b = _one_step("reference_code", "x0", False, monkeypatch)[0]
    assert np.max(np.abs(a - b)) >= 0.1


def test_identity_compressor_reductions():
    """C = identity, gamma_c = 1: the paper's order is step-then-gossip D-PSGD, the reference
    code's gossip-then-step D-PSGD (20 steps, 1e-12)."""
    prob = ck.LeastSquares.gaussian(d=3, noise=0.5, seed=1)
    topo = from_matrix(W)
    algos = [
        CHOCOSGD(topo, ck.Constant(0.1), Identity(), 1.0, name="paper"),
        CHOCOSGD(topo, ck.Constant(0.1), Identity(), 1.0, order="reference_code", name="ref"),
        DPSGD(topo, ck.Constant(0.1), "step_then_gossip", name="stg"),
        DPSGD(topo, ck.Constant(0.1), "gossip_then_step", name="gts"),
    ]
    res = ck.simulate(prob, algos, steps=20, replicates=3, seed=2, theta0=np.ones(3))

    def v(name: str) -> np.ndarray:  # avg, tail, last of the metrics D-PSGD records
        cv = res.values[name]
        keep = [cv.metrics.index(m) for m in res.values["stg"].metrics]
        return cv.values[:, :3][:, :, keep]

    np.testing.assert_allclose(v("paper"), v("stg"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(v("ref"), v("gts"), rtol=0, atol=1e-12)
    assert np.nanmax(np.abs(v("paper") - v("gts"))) > 1e-4


def test_invalid_order_and_start_name_the_parameter():
    with pytest.raises(ValueError, match="order"):
        CHOCOSGD(ring(3), ck.Constant(0.1), TopK(k=1), 0.5, order="code")
    with pytest.raises(ValueError, match="copies_start"):
        CHOCOSGD(ring(3), ck.Constant(0.1), TopK(k=1), 0.5, copies_start="x_0")
    with pytest.raises(ValueError, match="copies_start"):
        ECDPSGD(ring(3), ck.Constant(0.1), "qsgd:2", copies_start=0)


def test_ecd_copies_start_by_hand():
    """ECD-PSGD, t = 1: y_1 = (1 - 2) y_0 + 2 C(z_1) with C = identity, z_1 = (1/2) x_0 +
    (1/2) h, h = W y_0 - gamma g: y_0 = x_0 or 0."""
    topo = from_matrix(W)
    for start, y0 in (("x0", X0), ("zero", np.zeros_like(X0))):
        algo = ECDPSGD(topo, ck.Constant(GAMMA), Identity(), copies_start=start)
        algo.prepare(1)
        st = algo.step(algo.init(X0[None].copy(), None), FixedGradient(G), 1, None)
        h = W @ y0 - GAMMA * G
        np.testing.assert_allclose(st.x[0], h, rtol=0, atol=1e-15)
        np.testing.assert_allclose(st.y[0], -y0 + 2 * (0.5 * X0 + 0.5 * h), rtol=0, atol=1e-15)
