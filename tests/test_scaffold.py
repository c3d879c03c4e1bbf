"""SCAFFOLD (Karimireddy et al. 2020, option II): the exact identities of its module docstring
(to rounding, or bit for bit where no correction is yet applied), its removal of client drift
against Local-SGD's derived drift floor, and its bit accounting."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms import SCAFFOLD
from convkit.backend import Backend
from convkit.problems.base import GradientOracle, Problem
from convkit.problems.heterogeneous import HeterogeneousLeastSquares


def _trajectories(problem, algos, steps, R=8, seed=0, theta0=None):
    """Drive ``algos`` on common batches; the models of each after every step."""
    be = Backend()
    stream = be.stream(seed, "samples")
    P = algos[0].workers
    t0 = np.zeros(problem.d) if theta0 is None else theta0
    states = []
    for a in algos:
        a.prepare(steps)
        states.append(a.init(np.zeros((R, P, problem.d)) + t0, None))
    out = [[] for _ in algos]
    for k in range(1, steps + 1):
        batch = problem.sample(stream, (R, P, 1))
        for i, a in enumerate(algos):
            states[i] = a.step(states[i], GradientOracle(problem, batch), k, None)
            out[i].append(np.array(a.models(states[i])))
    return [np.stack(o) for o in out]


def _node_problem(P=4, d=6):
    return HeterogeneousLeastSquares(d, P, 2.0, spectrum="1/i", noise=0.5, seed=1,
                                     hessian_dissimilarity=0.3)  # fmt: skip


def test_every_step_is_mba_on_a_heterogeneous_problem():
    """Communicating every step, each node's gradient is taken at x and the corrections
    average to zero: SCAFFOLD's x follows MBA (to rounding; models O(1), 200 steps)."""
    prob = _node_problem()
    step = ck.Constant(0.2)
    sc, mba = _trajectories(prob, [SCAFFOLD(4, step, comm="mba"), ck.MBA(4, step)], 200)
    assert np.max(np.abs(sc - mba)) <= 1e-12
    assert np.max(np.abs(mba)) > 0.1  # the runs moved


@pytest.mark.parametrize("compiled", [False, True])
def test_first_round_is_local_sgd(compiled):
    """Before the first round ends c = c_i = 0, and g - 0 + 0 = g in floating point: the same
    iterates as Local-SGD through the first averaging (step 10), then different ones. Bit for
    bit when Local-SGD takes the generic step; to rounding when it takes the problem's
    compiled node step (which reassociates the sums)."""
    prob = _node_problem()
    step = ck.PolyDecay(0.3, 0.5)
    with ck.kernels(enabled=compiled):  # off: Local-SGD takes the generic step
        sc, ls = _trajectories(prob, [SCAFFOLD(4, step, comm="every:10"),
                                      ck.LocalSGD(4, step, comm="every:10")], 20)  # fmt: skip
    if compiled:
        np.testing.assert_allclose(sc[:10], ls[:10], rtol=0, atol=1e-13)
    else:
        np.testing.assert_array_equal(sc[:10], ls[:10])
    assert np.max(np.abs(sc[10:] - ls[10:])) > 1e-3  # the control variates act afterwards


def test_one_node_is_sgd():
    prob = HeterogeneousLeastSquares(5, 1, 0.0, spectrum="1/i", noise=0.5, seed=0)
    step = ck.Constant(0.3)
    sc, sgd = _trajectories(prob, [SCAFFOLD(1, step, comm="every:7"), ck.MBA(1, step)], 100)
    assert np.max(np.abs(sc - sgd)) <= 1e-13


class _PopulationGradients(Problem):
    """The nodes' exact gradients ``H_i (theta - theta*_i)`` of a heterogeneous least-squares
    problem (deterministic: the sample is ignored)."""

    def __init__(self, base: HeterogeneousLeastSquares) -> None:
        self.base = base
        self.d, self.theta_star, self.f_star = base.d, base.theta_star, base.f_star
        self.L, self.mu, self.noise = base.L, base.mu, 0.0

    def sample(self, stream, shape):
        return np.zeros(shape)

    def stochastic_grad(self, theta, batch):
        return (theta - self.base.node_optima) * self.base.node_h

    def errors(self, theta):
        return self.base.errors(theta)


def test_scaffold_removes_client_drift():
    """Deterministic node gradients (zeta^2 = 10, delta = 0.6), K = 10 local steps of gamma = 0.2. Local-SGD's round maps
    coordinate j to x_j <- mean_i [theta*_ij + a_ij (x_j - theta*_ij)], a_ij = (1 - gamma
    h_ij)^K, whose fixed point x_j = sum_i (1 - a_ij) theta*_ij / sum_i (1 - a_ij) differs
    from theta*_j = sum_i h_ij theta*_ij / sum_i h_ij (the weights 1 - a_ij are not
    proportional to h_ij): the drift floor. It contracts by mean_i a_ij <= 0.16 per round, so
    after 300 rounds Local-SGD sits on the floor to rounding (rel 1e-9 allows for it), while
    SCAFFOLD's excess risk falls below 1e-12 of the floor (its fixed point is theta*)."""
    base = HeterogeneousLeastSquares(4, 4, 10.0, spectrum="flat", noise=0.0, seed=2,
                                     hessian_dissimilarity=0.6)  # fmt: skip
    prob = _PopulationGradients(base)
    gamma, K, rounds = 0.2, 10, 300
    a = (1 - gamma * base.node_h) ** K
    assert np.max(a.mean(axis=0)) <= 0.16
    fixed = np.sum((1 - a) * base.node_optima, axis=0) / np.sum(1 - a, axis=0)
    floor = float(base.errors(fixed)["excess_risk"])
    assert floor > 1e-2  # a real floor
    algos = [ck.LocalSGD(4, ck.Constant(gamma), comm=f"every:{K}", name="local"),
             SCAFFOLD(4, ck.Constant(gamma), comm=f"every:{K}", name="scaffold")]  # fmt: skip
    res = ck.simulate(prob, algos, steps=K * rounds, replicates=2, seed=0, progress=False)
    last = {}
    for lab in ("local", "scaffold"):
        cv = res.values[lab]
        last[lab] = cv.values[-1, cv.iterates.index("last"), cv.metrics.index("excess_risk")]
    np.testing.assert_allclose(last["local"], floor, rtol=1e-9)
    assert np.all(last["scaffold"] <= 1e-12 * floor)


def test_server_step_and_validation():
    prob = _node_problem()
    sc1, sc2 = _trajectories(prob, [SCAFFOLD(4, ck.Constant(0.1), comm="every:3"),
                                    SCAFFOLD(4, ck.Constant(0.1), comm="every:3",
                                             server_step=0.5)], 3, theta0=np.ones(6))  # fmt: skip
    # one round from x = 1: the same local steps, then x <- x + eta_g (mean y - x)
    np.testing.assert_allclose(sc2[2], 1.0 + 0.5 * (sc1[2] - 1.0), rtol=1e-15, atol=1e-15)
    with pytest.raises(ValueError, match="server_step"):
        SCAFFOLD(4, ck.Constant(0.1), server_step=0.0)
    with pytest.raises(ValueError, match="float_bits"):
        SCAFFOLD(4, ck.Constant(0.1), float_bits=0)


def test_bits_twice_local_sgd():
    """A round: each node sends its model and control variate once (2 d floats), P messages."""
    sc = SCAFFOLD(8, ck.Constant(0.1), comm="every:4", float_bits=16)
    ls = ck.LocalSGD(8, ck.Constant(0.1), comm="every:4", float_bits=16)
    c_sc, c_ls = sc.comm_counts(20, 5), ls.comm_counts(20, 5)
    np.testing.assert_array_equal(c_sc["rounds"], c_ls["rounds"])
    np.testing.assert_array_equal(c_sc["messages"], c_ls["messages"])
    np.testing.assert_array_equal(c_sc["bits"], 2 * c_ls["bits"])
    assert c_sc["bits"][-1] == 5 * 8 * 2 * 5 * 16
    at = sc.comm_counts_at([3, 4, 20], 20, 5)
    np.testing.assert_array_equal(at["bits"], c_sc["bits"][[2, 3, 19]])
    both = SCAFFOLD(8, ck.Constant(0.1), comm="every:4", float_bits=16, downlink=True)
    c_both = both.comm_counts(20, 5)
    np.testing.assert_array_equal(c_both["messages"], 2 * c_ls["messages"])
    np.testing.assert_array_equal(c_both["bits"], 4 * c_ls["bits"])
    with pytest.raises(TypeError, match="downlink"):
        SCAFFOLD(8, ck.Constant(0.1), downlink="yes")


def test_sweep_kinds():
    """SCAFFOLD and the heterogeneous problem are sweep kinds (built at spec time)."""
    import convkit.sweep as sw

    spec = sw.Sweep.from_dict({
        "seed": 1, "steps": 20, "replicates": 2,
        "problem": {"kind": "heterogeneous_least_squares", "d": 3, "workers": 2, "zeta2": 1.0,
                    "hessian_dissimilarity": 0.2},
        "algorithm": {"kind": "scaffold", "workers": 2, "comm": "every:5",
                      "step": {"kind": "constant", "gamma": 0.05}},
        "grid": {"algorithm.server_step": [0.5, 1.0]},
    })  # fmt: skip
    assert len(spec) == 2
    spec = sw.Sweep.from_dict({
        "seed": 1, "steps": 20, "replicates": 2,
        "problem": {"kind": "heterogeneous_logistic", "d": 3, "workers": 2, "zeta2": 0.01},
        "algorithm": {"kind": "scaffold", "workers": 2,
                      "step": {"kind": "constant", "gamma": 0.05}},
    })  # fmt: skip
    assert len(spec) == 1


def test_control_variate_is_the_rounds_step_weighted_mean_gradient():
    """At a round's end c_i^+ = c_i - c + (x - y_i) / Gamma = sum_k gamma_k g_i(y_ik) / Gamma
    (Gamma = the round's total step), whatever the step schedule: checked with a decaying step
    against the gradients recorded along the round (to rounding)."""
    prob = _node_problem()
    algo = SCAFFOLD(4, ck.PolyDecay(0.3, 0.7), comm="every:5")
    n, R = 15, 3
    algo.prepare(n)
    state = algo.init(np.zeros((R, 4, prob.d)), None)
    stream = Backend().stream(4, "samples")
    weighted = np.zeros((R, 4, prob.d))
    total = 0.0
    for k in range(1, n + 1):
        batch = prob.sample(stream, (R, 4, 1))
        g = prob.stochastic_grad(state.y.copy(), batch)
        gamma = algo.gamma(k)
        weighted += gamma * g
        total += gamma
        state = algo.step(state, GradientOracle(prob, batch), k, None)
        if k % 5 == 0:
            np.testing.assert_allclose(state.c_nodes, weighted / total, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(state.c, state.c_nodes.mean(axis=1), rtol=1e-14)
            weighted[...] = 0.0
            total = 0.0
