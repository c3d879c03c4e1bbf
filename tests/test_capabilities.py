"""What an algorithm can run on is declared on its class (``capabilities``), and every engine
path reads the declaration, never the concrete type: a subclass that changes the update
inherits no exact model and no fused segments (issue 32, item 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import convkit as ck
from convkit import topology as T
from convkit.algorithms.decentralized import DPSGD
from convkit.algorithms.local import LocalState
from convkit.backend import namespace_of

STEP = ck.Constant(0.05)


@dataclass
class MomentumState(LocalState):
    """Local-SGD's state plus the server's model ``x`` and momentum ``v`` (R, d)."""

    x: Any = None
    v: Any = None


class ServerMomentumSGD(ck.LocalSGD):
    """FedAvg with server momentum: at a round, ``v <- beta v + (x - mean)``, ``x <- x - v``
    (beta = 0 is Local-SGD)."""

    def __init__(self, workers, step, comm="every:5", beta=0.5, name=None):
        super().__init__(workers, step, comm, name=name)
        self.beta = float(beta)

    def init(self, theta0, stream):
        xp = namespace_of(theta0)
        m = xp.mean(theta0, axis=1)
        return MomentumState(theta0, m, xp.asarray(m, copy=True), xp.zeros_like(m))

    def step(self, state, oracle, k, stream):
        oracle.sgd_update(state.theta, self.gamma(k), mean=state.mean)
        if self._comm_mask[k - 1]:
            state.v = self.beta * state.v + (state.x - state.mean)
            state.x = state.x - state.v
            state.theta[...] = state.x[:, None, :]
            state.mean[...] = state.x
        return state


class RenamedLocalSGD(ck.LocalSGD):
    """Local-SGD under another label: the update is untouched, the exact model inherited."""

    def default_label(self) -> str:
        return f"Renamed(P={self.workers})"


def test_a_subclass_that_changes_the_update_is_refused_by_the_exact_engines():
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    algo = ServerMomentumSGD(4, STEP, beta=0.5, name="momentum")
    with pytest.raises(TypeError) as info:
        ck.exact.expected_error(prob, algo, steps=200)
    msg = str(info.value)
    for part in ("ServerMomentumSGD", "overrides", "step", "LocalSGD", "capabilities"):
        assert part in msg, (part, msg)
    het = ck.HeterogeneousLeastSquares(4, 4, 1.0, noise=0.5, seed=0)
    with pytest.raises(TypeError, match=r"ServerMomentumSGD.*overrides.*step"):
        ck.exact.expected_error_nodes(het, algo, steps=200)


def test_the_subclass_runs_on_the_generic_step_path_and_differs_from_local_sgd():
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    algo = ServerMomentumSGD(4, STEP, beta=0.5, name="momentum")
    plain = ck.LocalSGD(4, STEP, comm="every:5", name="plain")
    res = ck.simulate(prob, [algo, plain], steps=200, replicates=64, seed=1, threads=1)
    path = res.meta["path"]["algorithms"]
    assert path["momentum"]["name"] == "compiled-steps"
    assert "ServerMomentumSGD" in path["momentum"]["declined"]["fused-local-least-squares"]
    assert path["momentum"]["capabilities"]["withdrawn"] == {
        "class": "ServerMomentumSGD",
        "methods": ["init", "step"],
        "base": "LocalSGD",
    }
    assert path["plain"]["capabilities"]["withdrawn"] is None
    alone = ck.simulate(prob, algo, steps=200, replicates=64, seed=1, threads=1)
    assert alone.meta["path"]["name"] == "compiled-steps"
    np.testing.assert_array_equal(alone.values["momentum"].values, res.values["momentum"].values)
    last = res.frame.query("iterate == 'last' and metric == 'hnorm2' and step == 200")
    m = dict(zip(last["config"], last["mean"], strict=True))
    assert abs(m["momentum"] - m["plain"]) > 0.05 * m["plain"]
    # beta = 0 is Local-SGD: same samples, same numbers to rounding
    zero = ServerMomentumSGD(4, STEP, beta=0.0, name="zero")
    with ck.kernels(enabled=False):
        both = ck.simulate(prob, [zero, plain], steps=200, replicates=64, seed=1, threads=1)
    np.testing.assert_allclose(
        both.values["zero"].values, both.values["plain"].values, rtol=1e-10, atol=1e-14
    )


def test_a_subclass_keeps_the_models_it_does_not_touch_or_declares_again():
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    plain = ck.LocalSGD(4, STEP, comm="every:5", name="plain")
    renamed = RenamedLocalSGD(4, STEP, comm="every:5")
    assert RenamedLocalSGD.capabilities == ck.LocalSGD.capabilities
    a = ck.exact.expected_error(prob, plain, steps=100).values["plain"].values
    b = ck.exact.expected_error(prob, renamed, steps=100).values[renamed.label].values
    np.testing.assert_array_equal(a, b)
    sim = ck.simulate(prob, renamed, steps=50, replicates=8, seed=1, threads=1)
    assert sim.meta["path"]["name"] == "fused-local-least-squares"

    class Declared(ServerMomentumSGD):
        """Says, wrongly but explicitly, that its exact model is Local-SGD's."""

        capabilities = ck.LocalSGD.capabilities.replace(fused=())

    declared = Declared(4, STEP, beta=0.5, name="declared")
    got = ck.exact.expected_error(prob, declared, steps=100).values["declared"].values
    np.testing.assert_array_equal(got, a)
    assert ck.simulate(prob, declared, steps=50, replicates=8, seed=1).meta["path"]["name"] == (
        "compiled-steps"
    )


def test_every_exported_algorithm_declares_its_capabilities_on_the_class():
    from convkit.algorithms.capabilities import Capabilities

    dec = pytest.importorskip("convkit.algorithms.decentralized")
    classes = [ck.LocalSGD, ck.SCAFFOLD, ck.ErrorFeedbackSGD, dec.DPSGD, dec.DCDPSGD,
               dec.ECDPSGD, dec.CHOCOSGD, dec.DeepSqueeze, ck.FedAvgM, ck.FedAdam]  # fmt: skip
    for cls in classes:
        assert isinstance(cls.capabilities, Capabilities), cls
        assert "capabilities" in vars(cls) or cls.capabilities.exact == {}, cls
    assert ck.LocalSGD.capabilities.exact_model("least_squares") == "local"
    assert ck.LocalSGD.capabilities.exact_model("heterogeneous_least_squares") == "local"
    assert dec.DPSGD.capabilities.exact_model("least_squares") == "dpsgd"
    assert dec.CHOCOSGD.capabilities.exact_model("least_squares") == "choco"
    assert dec.DeepSqueeze.capabilities.exact_model("least_squares") == "deep_squeeze"
    assert ck.SCAFFOLD.capabilities.exact_model("least_squares") is None
    assert set(ck.LocalSGD.capabilities.fused) == {"logistic", "least_squares"}
    assert ck.SCAFFOLD.capabilities.fused == ()
    # the server-update variants: Local-SGD's compiled step, neither its exact model nor its
    # fused segments (which average; FedAvgM has its own exact model); their own identities
    for cls in (ck.FedAvgM, ck.FedAdam):
        assert cls.capabilities.fused == ()
        assert cls.capabilities.kernels == ck.LocalSGD.capabilities.kernels
    assert ck.FedAvgM.capabilities.exact == {"least_squares": "server_momentum"}
    assert ck.FedAdam.capabilities.exact == {}
    assert ck.FedAdam.identities == () and ck.FedAvgM.identities != ck.LocalSGD.identities


def test_an_instance_attribute_named_like_a_model_grants_nothing():
    """The former rule read ``getattr(algo, "W")``: an attribute no longer makes D-PSGD."""
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    ef = ck.ErrorFeedbackSGD(4, STEP, "top-k:0.5")
    ef.W = T.ring(4).W
    ef.form = "gossip_then_step"
    with pytest.raises(TypeError, match="ErrorFeedbackSGD"):
        ck.exact.expected_error(prob, ef, steps=50)
    ok = ck.exact.expected_error(prob, DPSGD(T.ring(4), STEP), steps=50)
    assert ok.meta["path"]["algorithms"][DPSGD(T.ring(4), STEP).label]["engine"] == "dpsgd"


@pytest.mark.parametrize("kind", ["logistic", "least-squares"])
def test_a_mixed_call_runs_a_path_per_algorithm_on_common_random_numbers(kind):
    """Local-SGD schedules beside SCAFFOLD and D-PSGD (issue 32, item 2): the Local-SGD ones
    stay on the fused segments (logistic regression; least squares at d = 2, batch 1, where
    the segments are bit-identical to the step-by-step kernels), the others run step by step,
    and every algorithm's numbers are those it has alone in a call (bit for bit), whatever the
    threads.  (A call draws its samples for its largest workers and batch, ``(P_max,
    b_max)``: the same here for every algorithm, alone or together.)"""
    if kind == "logistic":
        prob = ck.LogisticRegression.gaussian(3, eval_size=512)
    else:
        prob = ck.LeastSquares.gaussian(2, "1/i", 0.5, seed=1)
    step = ck.PolyDecay(0.5, 0.75)

    def algos():
        return [
            ck.MBA(4, step),
            ck.LocalSGD(4, step, comm="every:5", name="every5"),
            ck.SCAFFOLD(4, step, comm="every:5"),
            DPSGD(T.ring(4), step),
            ck.OSA(4, step),
        ]

    kw = dict(steps=120, replicates=300, seed=5)
    mixed = ck.simulate(prob, algos(), threads=1, **kw)
    path = mixed.meta["path"]
    fused = f"fused-local-{kind}"
    assert path["name"] == f"{fused} + compiled-steps"
    on = {label: p["name"] for label, p in path["algorithms"].items()}
    assert on == {
        "MBA(P=4, b=1)": fused,
        "every5": fused,
        algos()[2].label: "compiled-steps",
        algos()[3].label: "compiled-steps",
        "OSA(P=4, b=1)": fused,
    }
    threaded = ck.simulate(prob, algos(), threads=2, **kw)
    for a in algos():
        alone = ck.simulate(prob, a, threads=1, **kw)
        for res in (mixed, threaded):
            np.testing.assert_array_equal(res.values[a.label].values, alone.values[a.label].values)
            np.testing.assert_array_equal(
                res.values[a.label].diverged_at, alone.values[a.label].diverged_at
            )


def test_least_squares_keeps_whole_calls_on_one_path():
    """Beyond d = 2 with batch 1 the least-squares segments agree with the step-by-step
    kernels to rounding only: a mixed call stays step by step (its numbers unchanged), and the
    declined reason says so."""
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    algos = [ck.MBA(4, STEP), ck.SCAFFOLD(4, STEP, comm="every:5")]
    res = ck.simulate(prob, algos, steps=50, replicates=16, seed=1, threads=1)
    path = res.meta["path"]
    assert path["name"] == "compiled-steps"
    why = path["algorithms"]["MBA(P=4, b=1)"]["declined"]["fused-local-least-squares"]
    assert "rounding" in why and "SCAFFOLD" in why


def test_every_engine_records_its_path_in_one_schema():
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    het = ck.HeterogeneousLeastSquares(4, 4, 1.0, noise=0.5, seed=0)
    algos = [ck.MBA(4, STEP), DPSGD(T.ring(4), STEP)]
    metas = {
        "simulate": ck.simulate(prob, algos, steps=30, replicates=8, seed=1).meta["path"],
        "exact": ck.exact.expected_error(prob, algos, steps=30).meta["path"],
        "nodes": ck.exact.expected_error_nodes(het, algos, steps=30).meta["path"],
    }
    keys = {"engine", "name", "reason", "declined", "kernels", "engines", "algorithms"}
    per = {"name", "reason", "declined", "engine", "capabilities"}
    for which, meta in metas.items():
        assert set(meta) == keys, which
        assert list(meta["algorithms"]) == [a.label for a in algos], which
        for entry in meta["algorithms"].values():
            assert set(entry) == per, which
            assert entry["capabilities"]["exact"], which
    assert metas["simulate"]["engine"] == "simulate"
    assert metas["exact"]["engine"] == metas["nodes"]["engine"] == "exact"
    assert metas["nodes"]["name"] == "exact-node-moments-numpy"
    assert metas["nodes"]["engines"] == {a.label: m for a, m in zip(algos, ("local", "dpsgd"))}
    assert metas["exact"]["engines"] == {a.label: m for a, m in zip(algos, ("local", "dpsgd"))}
    assert set(metas["simulate"]["engines"].values()) == {"simulate"}


def test_a_declaration_travels_with_its_class():
    """A class defined in a notebook or a test goes by value to Dask workers
    (cloudpickle), its declaration with it."""
    cloudpickle = pytest.importorskip("cloudpickle")
    import pickle

    class Local(ServerMomentumSGD):  # defined here: pickled by value
        """A class no module holds."""

        def prepare(self, n):
            super().prepare(n)

    back = pickle.loads(cloudpickle.dumps(Local(4, STEP, name="local")))
    assert type(back).capabilities == Local.capabilities
    assert Local.capabilities.withdrawn == ("ServerMomentumSGD", ("init", "step"), "LocalSGD")
    assert pickle.loads(pickle.dumps(ck.LocalSGD.capabilities)) == ck.LocalSGD.capabilities


def test_the_exact_engines_take_the_budget_split_from_the_plan_not_simulate():
    """Issue 32, item 3: local_steps_of and the budget split live in convkit.plan; no module
    of convkit/exact imports convkit.simulate (the exact engines sit beside it, not above)."""
    import ast
    import sys
    from pathlib import Path

    import convkit.exact
    import convkit.plan

    sim = sys.modules["convkit.simulate"]  # the module (convkit.simulate is the function)
    assert sim.local_steps_of is convkit.plan.local_steps_of
    assert sim.budget_local_steps is convkit.plan.budget_local_steps
    for path in Path(convkit.exact.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target = ("." * node.level) + (node.module or "")
                assert target not in ("..simulate", "convkit.simulate"), path.name
            elif isinstance(node, ast.Import):
                assert all(a.name != "convkit.simulate" for a in node.names), path.name
