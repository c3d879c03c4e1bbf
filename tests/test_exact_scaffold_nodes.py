"""The exact SCAFFOLD model on node Hessians and optima (convkit/exact/scaffold_nodes.py).

* Monte Carlo (``convkit.simulate`` with SCAFFOLD on the same problem, 20000 replicates, a
  fixed seed) within 4 standard errors at every recorded value of every iterate and metric
  (each a mean of R i.i.d. replicates; 4 SE over about 70 values, correlated, gives a false
  alarm probability below 0.5 %), with two negative controls: the same Monte Carlo is
  rejected (some |z| > 4) by the exact curve of Local-SGD and by SCAFFOLD's with the server
  step 1 -> 0.9;
* exact identities to near machine precision: one local step per round is MBA (declared on
  SCAFFOLD, :class:`~convkit.algorithms.capabilities.AlgorithmIdentity`); one node is SGD
  (Local-SGD with P = 1); deterministic identical nodes (zeta^2 = 0, sigma = 0, additive
  design) keep the control variates at zero, hence Local-SGD's curve; until the first round
  ends SCAFFOLD is Local-SGD;
* with sigma = 0 and zeta^2 > 0, SCAFFOLD's error goes to zero while Local-SGD's stalls at
  its drift floor.

``CONVKIT_FULL=1`` runs the Monte Carlo comparison with 80000 replicates and twice the steps.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import convkit as ck
from convkit.exact.heterogeneous import expected_error_nodes
from convkit.problems.heterogeneous import HeterogeneousLeastSquares

FULL = os.environ.get("CONVKIT_FULL") == "1"
R = 80000 if FULL else 20000
STEPS = 120 if FULL else 60
REC = [3, 7, 20, 40, 60] + ([90, 120] if FULL else [])
THETA0 = np.linspace(-1.0, 1.0, 4)


def _problem(design: str, noise: float = 0.5, zeta2: float = 3.0) -> HeterogeneousLeastSquares:
    return HeterogeneousLeastSquares(
        4, 4, zeta2, spectrum="1/i", noise=noise, seed=2, hessian_dissimilarity=0.3,
        design=design,
    )  # fmt: skip


def _scaffolds() -> list:
    return [
        ck.SCAFFOLD(4, ck.Constant(0.15), comm="every:6", name="constant"),
        ck.SCAFFOLD(4, ck.PolyDecay(0.2, 0.5), comm="every:5", batch=2, server_step=0.7,
                    name="decaying"),
    ]  # fmt: skip


def _zscores(exact, mc, exact_label: str, mc_label: str) -> np.ndarray:
    """(MC mean - exact) / MC SE at every recorded value both engines define."""
    e, m = exact.values[exact_label], mc.values[mc_label]
    out = []
    for it in e.iterates:
        for met in e.metrics:
            want = e.values[:, e.iterates.index(it), e.metrics.index(met), 0]
            got = m.values[:, m.iterates.index(it), m.metrics.index(met), :]
            ok = ~np.isnan(want)
            se = got.std(axis=1, ddof=1) / np.sqrt(got.shape[1])
            out.append(((got.mean(axis=1) - want) / se)[ok])
    return np.concatenate(out)


@pytest.mark.parametrize("design", ["gaussian", "additive"])
def test_exact_scaffold_matches_monte_carlo(design):
    p = _problem(design)
    algos = _scaffolds()
    kw = dict(steps=STEPS, record=REC, n_record=2, theta0=THETA0)
    ex = expected_error_nodes(p, algos, **kw)
    mc = ck.simulate(p, algos, replicates=R, seed=3, progress=False, **kw)
    assert ex.meta["path"]["name"] == "exact-node-moments-numpy"
    for a in algos:
        assert ex.meta["path"]["algorithms"][a.label]["engine"] == "scaffold"
        z = _zscores(ex, mc, a.label, a.label)
        assert z.size >= 60, z.size
        assert np.all(np.abs(z) <= 4), (design, a.label, np.round(z, 2))
    # negative controls: the same Monte Carlo rejects Local-SGD's exact curve and SCAFFOLD's
    # with another server step
    wrong = [ck.LocalSGD(4, ck.Constant(0.15), comm="every:6", name="local"),
             ck.SCAFFOLD(4, ck.Constant(0.15), comm="every:6", server_step=0.9, name="eta")]  # fmt: skip
    ctrl = expected_error_nodes(p, wrong, **kw)
    for lab in ("local", "eta"):
        z = _zscores(ctrl, mc, lab, "constant")
        assert np.max(np.abs(z)) > 4, (design, lab, np.round(z, 2))


@pytest.mark.parametrize("design", ["gaussian", "additive"])
@pytest.mark.parametrize("step", [ck.Constant(0.15), ck.PolyDecay(0.3, 0.6)], ids=["const", "poly"])
def test_one_local_step_per_round_is_mba(design, step):
    """SCAFFOLD's declared identity (comm = every step, server_step = 1: MBA), in the exact
    engine: the same curves to 1e-13 (two recursions of the same moments)."""
    p = _problem(design)
    algo = ck.SCAFFOLD(4, step, comm="every:7", batch=2)
    (identity,) = [i for i in ck.SCAFFOLD.identities if i.settings.get("comm") == "mba"]
    mine = ck.SCAFFOLD(4, step, batch=2, **identity.settings)
    ref = identity.reference(mine)
    res = expected_error_nodes(p, [mine, ref], steps=150, theta0=np.linspace(-1, 1, 4))
    a, b = res.values[mine.label].values, res.values[ref.label].values
    assert np.isfinite(b).any()
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)
    # negative control: every 7 steps is not MBA
    other = expected_error_nodes(p, algo, steps=150, theta0=np.linspace(-1, 1, 4))
    assert np.nanmax(np.abs(other.values[algo.label].values / b - 1)) > 1e-3


def test_one_node_is_sgd():
    """P = 1: the control variate equals the server's (c_1 = c), the correction vanishes."""
    p = HeterogeneousLeastSquares(5, 1, 0.0, spectrum="1/i", noise=0.5, seed=2)
    algos = [ck.SCAFFOLD(1, ck.Constant(0.2), comm="every:7", name="s"),
             ck.LocalSGD(1, ck.Constant(0.2), comm="every:7", name="l")]  # fmt: skip
    res = expected_error_nodes(p, algos, steps=100, theta0=np.linspace(-1, 1, 5))
    np.testing.assert_allclose(res.values["s"].values, res.values["l"].values, rtol=1e-13)


def test_identical_deterministic_nodes_are_local_sgd():
    """zeta^2 = 0, sigma = 0, equal Hessians, additive design: every node computes the same
    deterministic gradient, so c_i = c at every round and SCAFFOLD is Local-SGD."""
    p = HeterogeneousLeastSquares(5, 4, 0.0, spectrum="1/i", noise=0.0, seed=2, design="additive")
    algos = [ck.SCAFFOLD(4, ck.Constant(0.2), comm="every:7", name="s"),
             ck.LocalSGD(4, ck.Constant(0.2), comm="every:7", name="l")]  # fmt: skip
    res = expected_error_nodes(p, algos, steps=100, theta0=np.linspace(-1, 1, 5))
    np.testing.assert_allclose(res.values["s"].values, res.values["l"].values, rtol=1e-13)


@pytest.mark.parametrize("design", ["gaussian", "additive"])
def test_first_round_is_local_sgd_and_later_rounds_are_not(design):
    """Until the first round ends c = c_i = 0: the curves agree to rounding at the record
    points up to step 10 (the round's average too: the nodes' mean takes Local-SGD's step);
    after it, zeta^2 = 3 and noise separate them."""
    p = _problem(design)
    algos = [ck.SCAFFOLD(4, ck.Constant(0.15), comm="every:10", name="s"),
             ck.LocalSGD(4, ck.Constant(0.15), comm="every:10", name="l")]  # fmt: skip
    res = expected_error_nodes(p, algos, steps=60, record=[2, 5, 9, 10, 30, 60], n_record=2,
                               theta0=THETA0)  # fmt: skip
    s, loc = res.values["s"], res.values["l"]
    before = s.steps <= 10
    np.testing.assert_allclose(s.values[before], loc.values[before], rtol=1e-13)
    last = s.iterates.index("last")
    gap = np.abs(s.values[~before, last, :3] / loc.values[~before, last, :3] - 1)
    assert gap.size == 6 and np.all(gap > 1e-3), gap


def test_deterministic_gradients_converge_while_local_sgd_stalls():
    """sigma = 0, zeta^2 = 3, distinct Hessians: SCAFFOLD's last iterate goes to theta*
    (error below 1e-12 after 2000 steps), Local-SGD's stays at its drift floor (> 1e-3, the
    same after 1000 and 2000 steps, both round ends)."""
    p = _problem("additive", noise=0.0)
    algos = [ck.SCAFFOLD(4, ck.Constant(0.2), comm="every:5", name="s"),
             ck.LocalSGD(4, ck.Constant(0.2), comm="every:5", name="l")]  # fmt: skip
    res = expected_error_nodes(p, algos, steps=2000, record=[1000, 2000], n_record=2)
    s, loc = res.values["s"], res.values["l"]
    it, met = s.iterates.index("last"), s.metrics.index("hnorm2")
    assert s.values[-1, it, met, 0] < 1e-12
    assert loc.values[-1, it, met, 0] > 1e-3
    np.testing.assert_allclose(loc.values[-1, it, met, 0], loc.values[-2, it, met, 0], rtol=1e-6)


def test_divergence_and_refusals():
    p = _problem("gaussian")
    with pytest.warns(ck.DivergenceWarning):
        res = expected_error_nodes(p, ck.SCAFFOLD(4, ck.Constant(3.0), name="big"), steps=200)
    cv = res.values["big"]
    assert cv.diverged_at[0] > 0
    assert np.all(np.isnan(cv.values[cv.steps >= cv.diverged_at[0]]))
    with pytest.raises(ValueError, match="workers = 4 nodes"):
        expected_error_nodes(p, ck.SCAFFOLD(3, ck.Constant(0.1)), steps=10)
    # the declaration is per problem kind: no exact model on iid least squares
    with pytest.raises(TypeError, match="SCAFFOLD declares no exact model"):
        ck.exact.expected_error(ck.LeastSquares.gaussian(4), ck.SCAFFOLD(4, ck.Constant(0.1)),
                                steps=10)  # fmt: skip
