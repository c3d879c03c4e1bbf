"""Exact identities, special cases, accounting and input checks of the decentralized family.

Identities come from ``shared/theory/decentralized.md`` (re-derived in the docstrings of
``convkit/algorithms/decentralized.py``). Each is checked on the same samples and the same
compressor randomness, to ``1e-12`` absolute on quantities of order one (the only
differences being the order of floating-point sums). Most tests step the algorithms
directly with one :class:`~convkit.problems.base.GradientOracle` per step; the special cases
against the Local-SGD family also go through :func:`convkit.simulate` (common random
numbers).
"""

from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest

import convkit as ck
from benchmarks.naive_decentralized import LoopCHOCO, LoopDeepSqueeze, least_squares_grad
from convkit.algorithms.decentralized import (
    CHOCOSGD,
    DCDPSGD,
    DPSGD,
    ECDPSGD,
    DeepSqueeze,
    consensus_distance,
    directed_messages,
    tune_consensus_step,
)
from convkit.algorithms.feedback import ErrorFeedbackSGD
from convkit.backend import Backend, namespace_of
from convkit.compression import QSGD, Identity, RandK, ScaledSign, StochasticRounding, TopK
from convkit.problems.base import METRICS, GradientOracle, Problem
from convkit.topology import (
    Topology,
    complete,
    edgeless,
    one_peer_exponential,
    ring,
    star,
    torus,
)

ATOL = 1e-12
GAMMA = ck.Constant(0.05)


# --------------------------------------------------------------------------- a non-iid problem


class NonIIDLeastSquares(Problem):
    """Least squares where worker ``p`` has its own optimum ``theta*_p`` (test helper).

    Worker ``p`` draws ``x ~ N(0, diag(h))`` and ``y = <x, theta*_p> + sigma eps``, so
    ``f_p(theta) = 1/2 ||theta - theta*_p||_H^2 + sigma^2/2`` and
    ``f = (1/P) sum_p f_p`` has optimum ``theta* = mean_p theta*_p`` (the offsets
    ``u_p = theta*_p - theta*`` sum to zero) and excess risk ``1/2 ||theta - theta*||_H^2``.
    The outer variance ``zeta^2 = (1/P) sum_p ||grad f_p(theta*)||^2 = (1/P) sum_p ||H u_p||^2``
    is set exactly by scaling the offsets, and reported by :meth:`describe`.
    """

    heterogeneous = True

    def __init__(self, d: int, workers: int, zeta2: float, noise: float = 0.5, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.d, self.workers, self.noise = d, workers, noise
        self.h = np.linspace(1.0, 0.2, d)
        self.theta_star = rng.standard_normal(d) / np.sqrt(d)
        u = rng.standard_normal((workers, d))
        u -= u.mean(axis=0)
        cur = np.mean(np.sum((u * self.h) ** 2, axis=1))
        u *= np.sqrt(zeta2 / cur) if zeta2 > 0 else 0.0
        self.offsets = u
        self.theta_stars = self.theta_star + u
        self.zeta2 = float(np.mean(np.sum((u * self.h) ** 2, axis=1)))
        self.f_star = 0.5 * noise**2 + 0.5 * float(np.mean(np.sum(u * u * self.h, axis=1)))
        self.L, self.mu = float(self.h.max()), float(self.h.min())

    def sample(self, stream, shape):
        R, P, b = shape
        if P != self.workers:
            raise ValueError(f"this problem has {self.workers} workers, sample asked for {P}")
        x = stream.normal((R, P, b, self.d)) * np.sqrt(self.h)
        return {"x": x, "eps": stream.normal((R, P, b))}

    def stochastic_grad(self, theta, batch):
        x, eps = batch["x"], batch["eps"]
        dev = theta - self.theta_stars[: theta.shape[1]]
        r = np.einsum("rpbd,rpd->rpb", x, dev) - self.noise * eps
        return np.einsum("rpb,rpbd->rpd", r, x) / x.shape[2]

    def errors(self, theta):
        e = theta - self.theta_star
        hn = np.sum(e * e * self.h, axis=-1)
        return {"excess_risk": 0.5 * hn, "hnorm2": hn, "dist2": np.sum(e * e, axis=-1)}

    def grad(self, theta):
        return (theta - self.theta_star) * self.h

    def describe(self):
        return {"kind": "noniid_ls_test", "d": self.d, "workers": self.workers, "zeta2": self.zeta2}


P, D, R = 8, 12, 3


@pytest.fixture(scope="module")
def noniid():
    return NonIIDLeastSquares(D, P, zeta2=0.3, seed=1)


def drive(problem, algos, steps, replicates=R, seed=0, theta0=None, hook=None):
    """Step ``algos`` on the same samples; each gets its own compressor stream.

    ``hook(k, i, algo, state_before_copy, state_after, G)`` is called after every step with
    a deep copy of the state before the step and the stochastic gradient ``G`` at the old
    models. Returns the models after every step, one array (steps + 1, R, P, d) per algorithm.
    """
    be = Backend()
    sample_stream = be.stream(seed, "samples")
    comp_streams = [be.stream(seed, "compressor", i) for i in range(len(algos))]
    Pw = algos[0].workers
    x0 = np.zeros(problem.d) if theta0 is None else np.asarray(theta0, dtype=float)
    states = []
    for a, s in zip(algos, comp_streams):
        a.prepare(steps)
        states.append(a.init(np.zeros((replicates, Pw, problem.d)) + x0, s))
    traj = [[a.models(st).copy()] for a, st in zip(algos, states)]
    for k in range(1, steps + 1):
        batch = problem.sample(sample_stream, (replicates, Pw, 1))
        oracle = GradientOracle(problem, batch)
        for i, a in enumerate(algos):
            before = _copy_state(states[i]) if hook else None
            G = oracle.grad(a.models(states[i]).copy()) if hook else None
            states[i] = a.step(states[i], oracle, k, comp_streams[i])
            if hook:
                hook(k, i, a, before, states[i], G)
            traj[i].append(a.models(states[i]).copy())
    return [np.stack(t) for t in traj]


def assert_close(actual, desired):
    """Equal to rounding error: ``|a - b| <= 1e-12 max(1, max|b|)`` (the scale matters only for
    compressors that blow the iterates up, such as scaled rand-k)."""
    scale = max(1.0, float(np.max(np.abs(desired))))
    np.testing.assert_allclose(actual, desired, rtol=0, atol=ATOL * scale)


def _copy_state(state):
    return type(state)(**{k: np.array(v, copy=True) for k, v in vars(state).items()})


# --------------------------------------------------------------------------- DeepSqueeze


COMPRESSORS = [
    TopK(fraction=0.25),
    RandK(fraction=0.25),
    RandK(fraction=0.25, scaled=True),
    QSGD(s=2),
    ScaledSign(),
    StochasticRounding(bits=2),
]


@pytest.mark.parametrize("comp", COMPRESSORS, ids=lambda c: c.name)
@pytest.mark.parametrize("topo", [ring(P), torus(2, 4), one_peer_exponential(P)], ids=repr)
def test_deepsqueeze_W_eta_identity(noniid, comp, topo):
    """X_{t+1} = W_eta V_t + Delta_t - Delta_{t-1} with W_eta = (1 - eta) I + eta W_t
    (W_t the matrix of step t: also for the time-varying one-peer exponential graph)."""
    eta = 0.3
    algo = DeepSqueeze(topo, GAMMA, comp, eta)
    W_eta = topo.W_eta(eta)
    checked = []

    def hook(k, i, a, before, after, G):
        Wt = W_eta.W_at(k - 1)
        rhs = np.einsum("ij,rjd->rid", Wt, after.v) + after.delta - before.delta
        assert_close(after.x, rhs)
        checked.append(k)

    drive(noniid, [algo], steps=25, hook=hook)
    assert checked == list(range(1, 26))


AVERAGE_PRESERVING = [
    lambda t, c: DeepSqueeze(t, GAMMA, c, 0.4),
    lambda t, c: CHOCOSGD(t, GAMMA, c, 0.3),
]


@pytest.mark.parametrize("make", AVERAGE_PRESERVING, ids=["DeepSqueeze", "CHOCO"])
@pytest.mark.parametrize("comp", COMPRESSORS, ids=lambda c: c.name)
@pytest.mark.parametrize("topo", [ring(P), one_peer_exponential(P)], ids=repr)
def test_average_moves_like_minibatch_sgd(noniid, make, comp, topo):
    """mean(X_{t+1}) = mean(X_t) - gamma mean(G_t) whatever the compressor (1^T (W - I) = 0)."""
    worst = []

    def hook(k, i, a, before, after, G):
        lhs = after.x.mean(axis=1)
        rhs = before.x.mean(axis=1) - 0.05 * G.mean(axis=1)
        scale = max(1.0, float(np.max(np.abs(after.x))))
        worst.append(np.max(np.abs(lhs - rhs)) / scale)

    drive(noniid, [make(topo, comp)], steps=25, hook=hook)
    assert len(worst) == 25 and max(worst) < ATOL


@pytest.mark.parametrize(
    "make",
    [
        lambda c: DCDPSGD(ring(P), GAMMA, c),
        lambda c: ECDPSGD(ring(P), GAMMA, c),
    ],
    ids=["DCD", "ECD"],
)
def test_average_dynamics_fail_for_dcd_ecd_with_random_compressor(noniid, make):
    """DCD-/ECD-PSGD do not preserve the average dynamics with a random compressor: the
    deviation from mean(X_t) - gamma mean(G_t) is of order one per step (> 1e-3 here at every
    step after the first), while with the identity compressor it is rounding error."""
    dev = {}
    for comp in (Identity(), RandK(fraction=0.5, scaled=True)):
        devs = []

        def hook(k, i, a, before, after, G, devs=devs):
            rhs = before.x.mean(axis=1) - 0.05 * G.mean(axis=1)
            devs.append(np.max(np.abs(after.x.mean(axis=1) - rhs)))

        drive(noniid, [make(comp)], steps=10, theta0=np.ones(D), hook=hook)
        dev[comp.name] = np.array(devs)
    assert dev["identity"].max() < ATOL
    assert dev["rand-k-scaled(fraction=0.5)"][1:].min() > 1e-3


def test_deepsqueeze_identity_compressor_is_step_then_gossip_with_W_eta(noniid):
    """With C = identity: Delta = 0 and X_{t+1} = W_eta (X_t - gamma G_t)."""
    for topo in (ring(P), one_peer_exponential(P)):
        eta = 0.35
        ds = DeepSqueeze(topo, GAMMA, Identity(), eta)
        dp = DPSGD(topo.W_eta(eta), GAMMA, "step_then_gossip")
        a, b = drive(noniid, [ds, dp], steps=40)
        np.testing.assert_allclose(a, b, rtol=0, atol=ATOL)
        assert np.max(np.abs(a[-1] - a[0])) > 0.1  # the trajectories moved


# --------------------------------------------------------------------------- reductions to D-PSGD


def test_choco_identity_gamma_c_1_is_gossip_then_step(noniid):
    """CHOCO-SGD in the reference code's order (that of the theory note) with C = identity and
    gamma_c = 1 keeps X_hat_t = X_t, so X_{t+1} = W X_t - gamma G(X_t): gossip-then-step
    D-PSGD, *not* step-then-gossip (checked to differ by more than 1e-3); in the paper's order
    X_hat = H and X_{t+1} = W H: step-then-gossip."""
    topo = ring(P)
    theta0 = np.full(D, 0.5)
    choco, paper, gts, stg = drive(
        noniid,
        [
            CHOCOSGD(topo, GAMMA, Identity(), 1.0, order="reference_code"),
            CHOCOSGD(topo, GAMMA, Identity(), 1.0, order="paper"),
            DPSGD(topo, GAMMA, "gossip_then_step"),
            DPSGD(topo, GAMMA, "step_then_gossip"),
        ],
        steps=40,
        theta0=theta0,
    )
    np.testing.assert_allclose(choco, gts, rtol=0, atol=ATOL)
    assert np.max(np.abs(choco - stg)) > 1e-3
    np.testing.assert_allclose(paper, stg, rtol=0, atol=ATOL)


@pytest.mark.parametrize("cls", [DCDPSGD, ECDPSGD], ids=["DCD", "ECD"])
def test_dcd_ecd_identity_compressor_is_gossip_then_step(noniid, cls):
    """DCD: X + (W X - gamma G - X) = W X - gamma G. ECD: Y_t = X_t by induction (Y_0 = X_0),
    so H = W X - gamma G. Both are gossip-then-step D-PSGD with C = identity."""
    topo = torus(2, 4)
    a, b = drive(
        noniid,
        [cls(topo, GAMMA, Identity()), DPSGD(topo, GAMMA, "gossip_then_step")],
        steps=40,
        theta0=np.full(D, 0.5),
    )
    np.testing.assert_allclose(a, b, rtol=0, atol=ATOL)


def test_time_varying_dpsgd_uses_W_of_step(noniid):
    """D-PSGD on the one-peer exponential graph applies W_{k-1} at local step k (period 3)."""
    topo = one_peer_exponential(P)
    hits = []

    def hook(k, i, a, before, after, G):
        Wt = topo.W_at(k - 1)
        expected = np.einsum("ij,rjd->rid", Wt, before.x - 0.05 * G)
        np.testing.assert_allclose(after.x, expected, rtol=0, atol=ATOL)
        other = np.einsum("ij,rjd->rid", topo.W_at(k), before.x - 0.05 * G)
        hits.append(np.max(np.abs(after.x - other)))

    drive(noniid, [DPSGD(topo, GAMMA, "step_then_gossip")], steps=9, theta0=np.ones(D), hook=hook)
    assert min(hits) > 1e-3  # the matrices of different steps really differ


# --------------------------------------------------------------------------- Local-SGD family


def _vals(res, config):
    cv = res.values[config]
    its = [cv.iterates.index(i) for i in ("avg", "tail", "last")]
    mets = [cv.metrics.index(m) for m in METRICS]
    return cv.values[:, its][:, :, mets]


def test_complete_graph_uniform_is_mba():
    """W = J (complete graph, weights 1/P): step-then-gossip D-PSGD is MBA, through the
    engine with common random numbers (every iterate and metric at every record point)."""
    prob = ck.LeastSquares.gaussian(d=10, spectrum="1/i", noise=0.7, seed=2)
    topo = complete(P)
    np.testing.assert_allclose(topo.W, np.full((P, P), 1.0 / P), rtol=0, atol=1e-15)
    step = ck.PolyDecay(C=0.3, alpha=0.6)
    algos = [DPSGD(topo, step, "step_then_gossip", name="dpsgd"), ck.MBA(P, step, name="mba")]
    res = ck.simulate(prob, algos, steps=300, replicates=10, seed=4)
    np.testing.assert_allclose(_vals(res, "dpsgd"), _vals(res, "mba"), rtol=1e-11, atol=1e-14)
    cons = res.curve("dpsgd", "consensus", "state")["mean"].to_numpy()
    assert np.max(cons) < 1e-25  # every node holds the average


def test_edgeless_graph_plus_final_average_is_osa():
    """Edgeless graph (W = I): D-PSGD is local SGD with no communication; the engine's
    worker mean (= the final average) equals one-shot averaging at every record point."""
    prob = ck.LeastSquares.gaussian(d=10, spectrum="1/i", noise=0.7, seed=2)
    step = ck.PolyDecay(C=0.3, alpha=0.6)
    algos = [
        DPSGD(edgeless(P), step, "gossip_then_step", name="gts"),
        DPSGD(edgeless(P), step, "step_then_gossip", name="stg"),
        ck.OSA(P, step, name="osa"),
    ]
    res = ck.simulate(prob, algos, steps=300, replicates=10, seed=4)
    for name in ("gts", "stg"):
        np.testing.assert_allclose(_vals(res, name), _vals(res, "osa"), rtol=1e-11, atol=1e-14)
    c = algos[0].comm_counts(300, 10)
    assert c["rounds"][-1] == 0 and c["messages"][-1] == 0 and c["bits"][-1] == 0


def test_error_feedback_identity_is_mba(noniid):
    """EF-SGD with C = identity: e = 0 and x <- x - gamma mean(g): MBA."""
    a, b = drive(noniid, [ErrorFeedbackSGD(P, GAMMA, Identity()), ck.MBA(P, GAMMA)], steps=30)
    np.testing.assert_allclose(a, b, rtol=0, atol=ATOL)


def test_error_feedback_memory_recursion(noniid):
    """EF-SGD: e_{t+1} = gamma g_t + e_t - C(gamma g_t + e_t) and
    x_{t+1} = x_t - mean_i C(p_i) (all workers hold the same model)."""
    comp = TopK(k=2)
    count = []

    def hook(k, i, a, before, after, G):
        p = 0.05 * G + before.e
        Cp = comp.compress(p)
        np.testing.assert_allclose(after.e, p - Cp, rtol=0, atol=ATOL)
        np.testing.assert_allclose(
            after.x, before.x - Cp.mean(axis=1, keepdims=True), rtol=0, atol=ATOL
        )
        assert np.ptp(after.x, axis=1).max() == 0.0
        count.append(k)

    drive(noniid, [ErrorFeedbackSGD(P, GAMMA, comp)], steps=10, hook=hook)
    assert len(count) == 10


# --------------------------------------------------------------------------- reference loops


@pytest.mark.parametrize("kind", ["choco", "choco_paper", "deepsqueeze"])
def test_vectorized_equals_per_worker_loop(kind):
    """The vectorized CHOCO-SGD (both orders) / DeepSqueeze reproduce the per-worker reference
    loops of benchmarks/naive_decentralized.py (same samples, deterministic top-k) for every
    replicate (the loops are the baselines of benchmarks/bench_decentralized.py)."""
    prob = ck.LeastSquares.gaussian(d=D, noise=0.5, seed=3)
    topo = ring(P)
    k, steps, gamma = 3, 30, 0.05
    if kind == "choco":
        # the loop follows the authors' public code: mix with the old copies, then compress
        vec = CHOCOSGD(topo, ck.Constant(gamma), TopK(k=k), 0.4, order="reference_code")
    elif kind == "choco_paper":  # the default: compress h - x_hat, mix with the new copies
        vec = CHOCOSGD(topo, ck.Constant(gamma), TopK(k=k), 0.4)
    else:
        vec = DeepSqueeze(topo, ck.Constant(gamma), TopK(k=k), 0.4)
    be = Backend()
    stream = be.stream(7, "samples")
    batches = [prob.sample(stream, (R, P, 1)) for _ in range(steps)]
    vec.prepare(steps)
    st = vec.init(np.zeros((R, P, D)), None)
    for t, b in enumerate(batches, start=1):
        st = vec.step(st, GradientOracle(prob, b), t, None)
    for r in range(R):
        if kind == "choco":
            loop = LoopCHOCO(topo.W, np.zeros((P, D)), k, 0.4)
        elif kind == "choco_paper":
            loop = LoopCHOCO(topo.W, np.zeros((P, D)), k, 0.4, order="paper")
        else:
            loop = LoopDeepSqueeze(topo.W, np.zeros((P, D)), k, 0.4)
        for b in batches:
            loop.step(least_squares_grad(b, r, prob.theta_star, prob.noise), gamma)
        np.testing.assert_allclose(vec.models(st)[r], loop.x, rtol=0, atol=ATOL)
        if kind == "deepsqueeze":
            np.testing.assert_allclose(st.delta[r], loop.delta, rtol=0, atol=ATOL)
        else:
            np.testing.assert_allclose(st.x_hat[r], loop.xh, rtol=0, atol=ATOL)
    assert np.max(np.abs(vec.models(st))) > 0.05


# --------------------------------------------------------------------------- accounting, metrics


def test_comm_counts():
    """Directed messages per step: 2|E| for a static graph; P for DeepSqueeze on the one-peer
    graph (no copies kept), P log2 P for the copy-keeping CHOCO/DCD/ECD there (every eventual
    neighbour receives each update); EF with P > 1: P uploads and P downloads of the averaged
    update; bits = messages x bits of one message (EF: downloads of min(d float_bits,
    P b_up) bits); every step with messages is a round. (The one-peer and EF expectations
    were P before: they counted only current out-edges and uploads.)"""
    n, d = 7, 20
    comp = TopK(k=2)
    cases = [
        (DPSGD(ring(P), GAMMA), 2 * P, d * 32),
        (DPSGD(star(P), GAMMA, float_bits=64), 2 * (P - 1), d * 64),
        (CHOCOSGD(ring(P), GAMMA, comp, 0.5), 2 * P, comp.bits_per_message(d)),
        (DeepSqueeze(one_peer_exponential(P), GAMMA, comp, 0.5), P, comp.bits_per_message(d)),
        (DCDPSGD(torus(2, 4), GAMMA, QSGD(s=2)), 24, QSGD(s=2).bits_per_message(d)),
        (CHOCOSGD(one_peer_exponential(P), GAMMA, comp, 0.5), 3 * P, comp.bits_per_message(d)),
        (
            DCDPSGD(one_peer_exponential(P), GAMMA, QSGD(s=2)),
            3 * P,
            QSGD(s=2).bits_per_message(d),
        ),
        (ErrorFeedbackSGD(1, GAMMA, comp), 1, comp.bits_per_message(d)),
    ]
    for algo, per_step, bits in cases:
        c = algo.comm_counts(n, d)
        steps = np.arange(1, n + 1)
        np.testing.assert_array_equal(c["rounds"], steps)
        np.testing.assert_array_equal(c["messages"], per_step * steps)
        np.testing.assert_array_equal(c["bits"], per_step * steps * bits)
    ef = ErrorFeedbackSGD(P, GAMMA, comp).comm_counts(n, d)
    up, down = comp.bits_per_message(d), min(d * 32, P * comp.bits_per_message(d))
    np.testing.assert_array_equal(ef["messages"], 2 * P * np.arange(1, n + 1))
    np.testing.assert_array_equal(ef["bits"], P * (up + down) * np.arange(1, n + 1))
    # torus(2, 4): two horizontal neighbours and one vertical (the two vertical wraps of a
    # 2-row torus coincide): 12 edges, 24 directed messages
    assert torus(2, 4).graph.number_of_edges() == 12
    assert directed_messages(torus(2, 4))[0] == 24


def test_extra_metrics_in_frame(noniid):
    """consensus, grad_norm2, memory and replica_gap are recorded under iterate 'state' and
    equal their definitions on the final state."""
    topo = ring(P)
    algos = [
        DeepSqueeze(topo, GAMMA, TopK(k=3), 0.3, name="ds"),
        CHOCOSGD(topo, GAMMA, TopK(k=3), 0.3, name="choco"),
        ErrorFeedbackSGD(P, GAMMA, TopK(k=3), name="ef"),
    ]
    res = ck.simulate(noniid, algos, steps=50, replicates=4, seed=0)
    got = {
        (c, m): res.curve(c, m, "state")["mean"].to_numpy()[-1]
        for c, m in [
            ("ds", "consensus"),
            ("ds", "grad_norm2"),
            ("ds", "memory"),
            ("choco", "replica_gap"),
            ("choco", "consensus"),
            ("ef", "memory"),
            ("ef", "grad_norm2"),
        ]
    }
    assert all(np.isfinite(v) and v > 0 for v in got.values())
    assert res.meta["problem"]["zeta2"] == pytest.approx(0.3, rel=1e-12)
    # definitions, on a hand-made state
    X = np.random.default_rng(0).standard_normal((2, P, D))
    xbar = X.mean(axis=1)
    manual = np.mean(np.sum((X - xbar[:, None]) ** 2, axis=-1), axis=1)
    np.testing.assert_allclose(consensus_distance(X), manual, rtol=1e-13)
    from convkit.algorithms.decentralized import DeepSqueezeState

    st = DeepSqueezeState(X, 0.5 * X, X)
    m = algos[0].extra_metrics(st, noniid)
    np.testing.assert_allclose(m["consensus"], manual, rtol=1e-13)
    np.testing.assert_allclose(
        m["grad_norm2"], np.sum(((xbar - noniid.theta_star) * noniid.h) ** 2, -1), rtol=1e-13
    )
    np.testing.assert_allclose(m["memory"], np.mean(np.sum(0.25 * X * X, -1), 1), rtol=1e-13)


def test_noniid_problem_zeta2(noniid):
    """The test problem: grad f(theta*) = 0 and zeta^2 = (1/P) sum_p ||grad f_p(theta*)||^2."""
    be = Backend()
    batch = noniid.sample(be.stream(0), (20000, P, 1))
    ts = np.broadcast_to(noniid.theta_star, (20000, P, D))
    g = noniid.stochastic_grad(ts, batch)  # unbiased for grad f_p(theta*) = -H u_p
    exact = -(noniid.offsets * noniid.h)
    se = g.std(axis=0) / np.sqrt(g.shape[0])
    assert np.all(np.abs(g.mean(axis=0) - exact) < 5 * se)  # 5 standard errors per coordinate
    assert np.mean(np.sum(exact**2, axis=1)) == pytest.approx(noniid.zeta2, rel=1e-12)
    np.testing.assert_allclose(exact.mean(axis=0), 0.0, atol=1e-15)


def test_finite_sum_noniid_partition():
    """With the finite-sum least squares of convkit.problems (non-iid: rows sorted by their
    first feature, in which the targets have a quadratic term the linear model cannot fit,
    and cut into P blocks), DeepSqueeze's exact average dynamics still hold and zeta^2 is
    reported by the engine's metadata."""
    fs = pytest.importorskip("convkit.problems.finite_sum")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((160, D))
    y = A @ rng.standard_normal(D) + A[:, 0] ** 2 + 0.3 * rng.standard_normal(160)
    order = np.argsort(A[:, 0])
    prob = fs.FiniteLeastSquares(A, y, partition=list(order.reshape(P, 20)))
    assert prob.zeta2 > 0.1
    worst = []

    def hook(k, i, a, before, after, G):
        rhs = before.x.mean(axis=1) - 0.05 * G.mean(axis=1)
        worst.append(np.max(np.abs(after.x.mean(axis=1) - rhs)))

    drive(prob, [DeepSqueeze(ring(P), GAMMA, TopK(k=2), 0.3)], steps=20, hook=hook)
    assert max(worst) < ATOL
    res = ck.simulate(prob, DPSGD(ring(P), GAMMA, name="d"), steps=20, replicates=2, seed=0)
    assert res.meta["problem"]["zeta2"] == pytest.approx(prob.zeta2)


# --------------------------------------------------------------------------- gamma_c tuner


def test_tuner_identity_compressor_rate_is_rho_squared():
    """Pure gossip with C = identity and gamma_c = 1 is X <- W X (after the first step), so
    the consensus distance contracts by lambda_2^2 = rho^2 per step (ring(8): slowest modes
    lambda_2 with multiplicity 2; next |lambda| = 1/3, negligible after 100 steps)."""
    topo = ring(P)
    tu = tune_consensus_step(topo, Identity(), grid=[0.5, 1.0], d=10, iterations=200)
    assert tu.rates[1] == pytest.approx(topo.rho**2, rel=1e-8)
    assert tu.gamma_c == 1.0
    # with gamma_c = 0.5: W_eta = (I + W) / 2, slowest mode (1 + lambda_2) / 2
    assert tu.rates[0] == pytest.approx(((1 + topo.lambda_2) / 2) ** 2, rel=1e-8)


def test_tuner_topk_picks_a_converging_step():
    """With top-k (k/d = 0.1) gamma_c = 1 does not converge on the ring while the tuned
    gamma_c does (rate < 0.99) and is strictly inside the grid; the grid is simulated at once."""
    tu = tune_consensus_step(ring(P), TopK(fraction=0.1), d=20, iterations=200)
    assert tu.rates.shape == tu.grid.shape == (41,)
    assert tu.rate < 0.99 and tu.rate == tu.rates.min()
    assert tu.grid[0] < tu.gamma_c < 1.0
    assert tu.rates[-1] >= 1.0


# --------------------------------------------------------------------------- invalid inputs


def _one_node() -> Topology:
    return Topology("single", np.eye(1), nx.empty_graph(1))


INVALID = [
    ("eta", lambda: DeepSqueeze(ring(P), GAMMA, TopK(k=2), 0.0)),
    ("eta", lambda: DeepSqueeze(ring(P), GAMMA, TopK(k=2), 1.5)),
    ("eta", lambda: DeepSqueeze(ring(P), GAMMA, TopK(k=2), -0.1)),
    ("gamma_c", lambda: CHOCOSGD(ring(P), GAMMA, TopK(k=2), 0.0)),
    ("gamma_c", lambda: CHOCOSGD(ring(P), GAMMA, TopK(k=2), 1.01)),
    ("P >= 2", lambda: DPSGD(_one_node(), GAMMA)),
    ("does not match", lambda: DPSGD(ring(P), GAMMA, workers=P + 1)),
    ("unbiased", lambda: DCDPSGD(ring(P), GAMMA, TopK(k=2))),
    ("unbiased", lambda: ECDPSGD(ring(P), GAMMA, RandK(k=2))),
    ("unbiased", lambda: DCDPSGD(ring(P), GAMMA, QSGD(s=2, rescaled=True))),
    ("form", lambda: DPSGD(ring(P), GAMMA, form="gossip")),
    ("compressor", lambda: CHOCOSGD(ring(P), GAMMA, None, 0.5)),
    ("unknown compressor", lambda: DeepSqueeze(ring(P), GAMMA, "top-q", 0.5)),
    ("float_bits", lambda: DPSGD(ring(P), GAMMA, float_bits=0)),
    ("batch", lambda: DPSGD(ring(P), GAMMA, batch=0)),
    ("grid value", lambda: tune_consensus_step(ring(P), TopK(k=2), grid=[0.5, 0.0])),
    ("iterations", lambda: tune_consensus_step(ring(P), TopK(k=2), iterations=1)),
    ("k = 30 exceeds", lambda: DeepSqueeze(ring(P), GAMMA, TopK(k=30), 0.5).comm_counts(5, 20)),
]


@pytest.mark.parametrize(
    "match,make", INVALID, ids=[f"{i}-{m}" for i, (m, _) in enumerate(INVALID)]
)
def test_invalid_inputs(match, make):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: DPSGD(np.eye(4), GAMMA),
        lambda: DPSGD(ring(P), 0.1),
        lambda: ErrorFeedbackSGD(P, GAMMA, None),
        lambda: CHOCOSGD(ring(P), GAMMA, 3, 0.5),
    ],
)
def test_invalid_types(make):
    with pytest.raises(TypeError):
        make()


def test_biased_allowed_on_request(noniid):
    """DCD-PSGD with a biased compressor runs when explicitly allowed."""
    algo = DCDPSGD(ring(P), GAMMA, TopK(k=4), allow_biased=True)
    (traj,) = drive(noniid, [algo], steps=5)
    assert np.all(np.isfinite(traj))


def test_namespace_of_state_is_kept(noniid):
    """States stay NumPy float64 arrays of shape (R, P, d) (no accidental copies to lists)."""
    algo = DeepSqueeze(ring(P), GAMMA, TopK(k=2), 0.5)
    algo.prepare(3)
    st = algo.init(np.zeros((R, P, D)), None)
    assert namespace_of(st.x) is namespace_of(st.delta)
    assert st.x.shape == st.delta.shape == (R, P, D)


def test_compressor_randomness_comes_from_the_engine_stream():
    """Same seed, same trajectory (random compressors draw from the engine's stream); another
    seed changes the compressor draws (and the samples) and so the result."""
    prob = ck.LeastSquares.gaussian(d=D, noise=0.5, seed=3)

    def run(seed):
        algo = DeepSqueeze(ring(P), GAMMA, RandK(k=3), 0.3, name="ds")
        res = ck.simulate(prob, algo, steps=30, replicates=3, seed=seed, n_record=5)
        return res.values["ds"].values

    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a, b)
    assert np.nanmax(np.abs(a - c)) > 1e-6  # (the tail iterate is NaN before it starts)


def test_all_algorithms_run_in_float32():
    """Every algorithm keeps float32 states and gives finite results through the engine."""
    prob = ck.LeastSquares.gaussian(d=D, noise=0.5, seed=3)
    topo = ring(P)
    algos = [
        DPSGD(topo, GAMMA),
        DPSGD(topo, GAMMA, "step_then_gossip"),
        DCDPSGD(topo, GAMMA, QSGD(s=8)),
        ECDPSGD(topo, GAMMA, StochasticRounding(bits=8)),
        CHOCOSGD(topo, GAMMA, TopK(k=3), 0.3),
        DeepSqueeze(one_peer_exponential(P), GAMMA, TopK(k=3), 0.3),
        ErrorFeedbackSGD(P, GAMMA, ScaledSign()),
    ]
    res = ck.simulate(prob, algos, steps=20, replicates=2, seed=0, dtype="float32")
    assert res.meta["dtype"] == "float32"
    assert np.all(np.isfinite(res.frame["mean"].to_numpy()))
    assert len(res.diverged) == 0
    be = Backend(dtype="float32")
    for a in algos:
        a.prepare(1)
        st = a.init(np.zeros((2, P, D), dtype=np.float32), be.stream(0))
        batch = prob.sample(be.stream(1), (2, P, 1))
        st = a.step(st, GradientOracle(prob, batch), 1, be.stream(2))
        assert a.models(st).dtype == np.float32, a.label


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_worker_mean_is_numpy_mean_bit_for_bit(dtype):
    """The engine's worker mean (``sum / P`` on NumPy arrays) equals ``np.mean`` over the
    workers exactly, dtype included, on states of several shapes and scales."""
    rng = np.random.default_rng(7)
    for shape in ((R, P, D), (3, 1, 5), (2, 64, 9), (256, 8, 100)):
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 6, size=shape)
        algo = DPSGD(ring(max(shape[1], 3)), GAMMA)
        got = algo.worker_mean(SimpleNamespace(x=x.astype(dtype)))
        want = np.mean(x.astype(dtype), axis=1)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_compressed_gossip_names_reexported_and_registered_once():
    # CHOCO-SGD and DeepSqueeze live in convkit.algorithms.compressed_gossip; the older import
    # paths give the same objects and the sweep registry knows each under one kind
    import convkit.algorithms as algorithms
    import convkit.algorithms.compressed_gossip as cg
    import convkit.algorithms.decentralized as dec
    import convkit.sweep as sweep
    from convkit.sweep import registry

    for name in ("CHOCOSGD", "DeepSqueeze"):
        cls = getattr(cg, name)
        assert cls.__module__ == "convkit.algorithms.compressed_gossip"
        assert getattr(dec, name) is cls and getattr(algorithms, name) is cls
        assert getattr(ck, name) is cls
    assert dec.CHOCOState is cg.CHOCOState and dec.DeepSqueezeState is cg.DeepSqueezeState
    with pytest.raises(AttributeError, match="no_such_name"):
        dec.no_such_name  # noqa: B018
    kinds = sweep.kinds("algorithm")
    assert {"chocosgd", "deep_squeeze", "dpsgd", "dcdpsgd", "ecdpsgd"} <= set(kinds)
    assert registry._REGISTRY["algorithm"]["chocosgd"].builder is cg.CHOCOSGD
    assert registry._REGISTRY["algorithm"]["deep_squeeze"].builder is cg.DeepSqueeze
    assert registry._LAZY_ERRORS == {}, registry._LAZY_ERRORS
