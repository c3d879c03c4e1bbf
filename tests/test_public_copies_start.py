"""The start of the public copies ``x_hat_0`` (CHOCO-SGD) and of the estimates ``y_0``
(ECD-PSGD): ``copies_start="x0"`` (default, the public convex code) or ``"zero"`` (the
other public codes)."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD, DCDPSGD, ECDPSGD, DeepSqueeze
from convkit.compression import QSGD, TopK
from convkit.topology import ring

TOPO = ring(6)
GAMMA = ck.Constant(0.05)


def _makers(start: str):
    return [
        CHOCOSGD(TOPO, GAMMA, TopK(k=2), 0.4, copies_start=start, name="choco"),
        CHOCOSGD(
            TOPO, GAMMA, TopK(k=2), 0.4, order="reference_code", copies_start=start, name="ref"
        ),
        ECDPSGD(TOPO, GAMMA, QSGD(s=4), copies_start=start, name="ecd"),
    ]


def test_init_states():
    theta0 = np.arange(1.0, 2 * 6 * 3 + 1).reshape(2, 6, 3)
    for x0_algo, zero_algo in zip(_makers("x0"), _makers("zero"), strict=True):
        a, b = x0_algo.init(theta0.copy(), None), zero_algo.init(theta0.copy(), None)
        copies = "x_hat" if isinstance(x0_algo, CHOCOSGD) else "y"
        np.testing.assert_array_equal(getattr(a, copies), theta0)
        np.testing.assert_array_equal(getattr(b, copies), np.zeros_like(theta0))
        assert getattr(a, copies) is not a.x  # a copy, not the model itself


def test_same_at_theta0_zero_different_elsewhere():
    """With theta0 = 0 both starts are the same run (bit-identical values); with theta0 != 0
    the trajectories differ."""
    prob = ck.LeastSquares.gaussian(d=8, noise=0.5, seed=2)
    kw = {"steps": 40, "replicates": 3, "seed": 4, "n_record": 5}
    a = ck.simulate(prob, _makers("x0"), **kw)
    b = ck.simulate(prob, _makers("zero"), **kw)
    for name in ("choco", "ref", "ecd"):
        assert np.array_equal(a.values[name].values, b.values[name].values, equal_nan=True)
    t0 = np.full(8, 2.0)
    a = ck.simulate(prob, _makers("x0"), theta0=t0, **kw)
    b = ck.simulate(prob, _makers("zero"), theta0=t0, **kw)
    for name in ("choco", "ref", "ecd"):
        diff = np.nanmax(np.abs(a.values[name].values - b.values[name].values))
        assert diff > 1e-3, name


def test_label_and_describe():
    algo = CHOCOSGD(TOPO, GAMMA, TopK(k=2), 0.4, copies_start="zero")
    assert "copies_start=zero" in algo.label
    assert algo.describe()["copies_start"] == "zero"
    assert algo.describe()["order"] == "paper"
    assert "copies_start" not in CHOCOSGD(TOPO, GAMMA, TopK(k=2), 0.4).label


def test_not_offered_where_it_does_not_apply():
    """DCD-PSGD's replicas are its models, DeepSqueeze keeps no copies."""
    with pytest.raises(TypeError, match="copies_start"):
        DCDPSGD(TOPO, GAMMA, QSGD(s=2), copies_start="zero")
    with pytest.raises(TypeError, match="copies_start"):
        DeepSqueeze(TOPO, GAMMA, TopK(k=2), 0.4, copies_start="zero")
