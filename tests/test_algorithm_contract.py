"""The algorithm contract, checked over every registered algorithm and problem.

Every algorithm kind of the sweep registry (the exported subclasses of
:class:`convkit.algorithms.base.Algorithm` are registered under their snake-case names) is
built with small parameters and run on every registered problem kind, plus one problem
without a full gradient.  For each pair: the state is a tree whose arrays all have the
replicates on their leading axis; ``models`` and ``worker_mean`` have the documented
shapes; the base-class row selection round-trips (``concat_rows`` of ``select_rows`` parts is
the state, bit for bit) and commutes with ``models``; the metrics ``extra_metrics`` returns
are exactly those ``metric_names`` declares, in order, each of shape ``(R,)``; the
communication counts are non-decreasing integers of length ``n`` and ``comm_counts_at``
agrees with them; and a two-block ``simulate`` run records every declared metric.  Every
identity a registered class declares (``identities``,
:class:`convkit.algorithms.capabilities.AlgorithmIdentity`) is checked on heterogeneous least squares
and logistic regression, built from the class's small parameters below.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import fields, is_dataclass

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.base import Algorithm
from convkit.problems.base import GradientOracle, Problem
from convkit.sweep.registry import _lookup, kinds

P, D, R = 4, 4, 5

#: small parameters of every registered algorithm kind: the kind's example (its class's
#: ``example_settings``, :class:`convkit.validation.Declared`; MBA's and OSA's are given where
#: the registry registers them); a kind without one fails the test
ALGORITHM_PARAMS = {
    name: kind.example()
    for name in kinds("algorithm")
    if (kind := _lookup("algorithm", name)).example is not None
}


#: small parameters of every registered problem kind: the kind's example (its class's
#: ``example_settings``, or the example of the class-method constructor it stands for); a
#: kind without one fails the test
PROBLEM_PARAMS = {
    name: kind.example
    for name in kinds("problem")
    if (kind := _lookup("problem", name)).example is not None
}


class NoGradientLeastSquares(ck.LeastSquares):
    """Least squares without a full gradient: the gradient metrics are left out."""

    grad = Problem.grad


def _build(category: str, name: str, params: dict) -> object:
    return _lookup(category, name).builder(**params)


def _algorithms() -> list[tuple[str, Algorithm]]:
    # a registered kind missing from the table fails test_every_registered_kind_is_in_...
    return [
        (name, _build("algorithm", name, ALGORITHM_PARAMS[name]))
        for name in kinds("algorithm")
        if name in ALGORITHM_PARAMS
    ]


def _problems() -> list[tuple[str, Problem]]:
    out = [
        (name, _build("problem", name, PROBLEM_PARAMS[name]()))
        for name in kinds("problem")
        if name in PROBLEM_PARAMS
    ]
    out.append(("no_gradient", NoGradientLeastSquares.gaussian(D, "1/i", seed=0)))
    return out


def test_every_registered_kind_is_in_the_contract_tables():
    how = "declare example_settings on the class (convkit.validation.Declared)"
    missing = set(kinds("algorithm")) - set(ALGORITHM_PARAMS)
    assert not missing, (
        f"registered algorithm kinds without an example: {missing}; declare example_settings "
        "on the class (convkit.validation.Declared)"
    )
    missing = set(kinds("problem")) - set(PROBLEM_PARAMS)
    assert not missing, f"registered problem kinds without an example: {missing}; {how}"
    assert set(ALGORITHM_PARAMS) <= set(kinds("algorithm"))
    assert set(PROBLEM_PARAMS) <= set(kinds("problem"))
    exported = {
        getattr(ck.algorithms, n)
        for n in ck.algorithms.__all__
        if isinstance(getattr(ck.algorithms, n), type)
        and issubclass(getattr(ck.algorithms, n), Algorithm)
        and getattr(ck.algorithms, n) is not Algorithm
    }
    built = {type(a) for _, a in _algorithms()}
    assert exported <= built, f"exported algorithms without a registered kind: {exported - built}"


def _leaves(state):
    """The array leaves of a state tree (the contract of convkit.algorithms.base)."""
    if hasattr(state, "shape") and len(state.shape) >= 1:
        return [state]
    if isinstance(state, dict):
        return [x for v in state.values() for x in _leaves(v)]
    if is_dataclass(state) and not isinstance(state, type):
        return [x for f in fields(state) for x in _leaves(getattr(state, f.name))]
    if isinstance(state, tuple | list):
        return [x for v in state for x in _leaves(v)]
    return []


def _same_tree(a, b) -> bool:
    la, lb = _leaves(a), _leaves(b)
    return (
        type(a) is type(b)
        and len(la) == len(lb)
        and all(
            x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
            for x, y in zip(la, lb, strict=True)
        )
    )


def _advance(problem, algo, steps: int = 3):
    """``steps`` local steps of ``algo`` from theta0 = 0.1 on ``R`` replicates."""
    be = ck.backend.get_backend("numpy", "float64")
    n = 20
    algo.prepare(n)
    stream = be.stream(0, "contract")
    state = algo.init(np.full((R, algo.workers, problem.d), 0.1), stream)
    for k in range(1, steps + 1):
        batch = problem.sample(stream, (R, algo.workers, algo.batch))
        state = algo.step(state, GradientOracle(problem, batch), k, stream)
    return state


@pytest.mark.parametrize("problem_name, problem", _problems(), ids=[n for n, _ in _problems()])
@pytest.mark.parametrize("algo_name, algo", _algorithms(), ids=[n for n, _ in _algorithms()])
def test_algorithm_contract(algo_name, algo, problem_name, problem):
    with np.errstate(all="ignore"):
        state = _advance(problem, algo)
        leaves = _leaves(state)
        assert leaves, "the state holds no array"
        assert all(x.shape[0] == R for x in leaves), [x.shape for x in leaves]
        models = algo.models(state)
        assert models.shape == (R, algo.workers, problem.d)
        mean = algo.worker_mean(state)
        assert mean.shape == (R, problem.d)
        np.testing.assert_allclose(mean, models.mean(axis=1), rtol=1e-13, atol=1e-15)
        # row selection: parts joined give the state back; parts' models are the rows'
        parts = [algo.select_rows(state, slice(0, 2)), algo.select_rows(state, slice(2, R))]
        assert _same_tree(algo.concat_rows(parts), state)
        np.testing.assert_array_equal(algo.models(parts[1]), models[2:])
        # metrics: exactly the declared names, in order, one value per replicate
        metrics = algo.extra_metrics(state, problem)
        assert tuple(metrics) == algo.metric_names(problem)
        assert all(np.shape(v) == (R,) for v in metrics.values())
        extra_in_part = algo.extra_metrics(parts[1], problem)
        for name, v in extra_in_part.items():
            np.testing.assert_allclose(v, np.asarray(metrics[name])[2:], rtol=1e-12)
    # communication counts: non-decreasing integers after each step, the same at given steps
    n = 20
    counts = algo.comm_counts(n, problem.d)
    for key in ("rounds", "messages", "bits"):
        c = np.asarray(counts[key])
        assert c.shape == (n,) and np.issubdtype(c.dtype, np.integer), key
        assert np.all(np.diff(c) >= 0) and c[0] >= 0, key
    at = np.array([1, 7, 20])
    for key, v in algo.comm_counts_at(at, n, problem.d).items():
        np.testing.assert_array_equal(v, np.asarray(counts[key])[at - 1])


@pytest.mark.parametrize("algo_name, algo", _algorithms(), ids=[n for n, _ in _algorithms()])
def test_two_block_runs_record_every_declared_metric(algo_name, algo):
    problem = ck.HeterogeneousLeastSquares(D, P, 1.0, spectrum="1/i", noise=0.5, seed=1)
    res = ck.simulate(problem, algo, steps=4, replicates=260, n_record=2, seed=1, threads=1)
    # the algorithm's declared metrics and the problem's node metrics (Problem.node_metrics)
    declared = set(algo.metric_names(problem)) | set(getattr(problem, "node_metrics", ()))
    assert declared == set(res.frame.loc[res.frame["iterate"] == "state", "metric"])
    assert res.frame["count"].max() == 260


# ------------------------------------------------------------------ declared identities


def _declaring() -> list[tuple[str, type, dict]]:
    """Every registered algorithm class that declares identities, with the small parameters
    of its first kind in ALGORITHM_PARAMS (MBA and OSA are LocalSGD: one entry)."""
    out: dict[type, tuple[str, dict]] = {}
    for name, algo in _algorithms():
        if type(algo).identities and type(algo) not in out:
            out[type(algo)] = (name, ALGORITHM_PARAMS[name])
    return [(name, cls, params) for cls, (name, params) in out.items()]


def _identity_cases() -> list[tuple[str, type, dict, object]]:
    return [
        (f"{cls.__name__}: {ident.claim}", cls, params, ident)
        for _, cls, params in _declaring()
        for ident in cls.identities
    ]


def _subclasses(cls: type) -> set[type]:
    return {s for c in cls.__subclasses__() for s in {c} | _subclasses(c)}


def test_the_declared_identities_cover_the_families():
    """Every class of convkit that declares identities is checked (it is a registered kind),
    and the three families' identities are among them."""
    claims = {case[0] for case in _identity_cases()}
    for cls in ("LocalSGD", "FedAvgM", "SCAFFOLD"):
        assert any(c.startswith(f"{cls}: ") for c in claims), (cls, claims)
    checked = {cls for _, cls, _ in _declaring()}
    declaring = {
        c
        for c in _subclasses(Algorithm)
        if c.__module__.startswith("convkit.") and vars(c).get("identities")
    }
    assert declaring <= checked, f"identities of unregistered classes: {declaring - checked}"


@pytest.mark.parametrize(
    "problem",
    [
        ck.HeterogeneousLeastSquares(D, P, 1.0, spectrum="1/i", noise=0.5, seed=1),
        ck.LogisticRegression.gaussian(D, eval_size=256),
    ],
    ids=["heterogeneous_least_squares", "logistic"],
)
@pytest.mark.parametrize(
    "claim, cls, params, identity", _identity_cases(), ids=[c[0] for c in _identity_cases()]
)
def test_every_declared_identity_holds(claim, cls, params, identity, problem):
    """The class built with the identity's settings computes what its reference computes on
    the same samples: bit for bit (``rtol = 0``) or to the declared rounding, every recorded
    value, each algorithm alone in its call."""
    algo = cls(**{**params, **identity.settings})
    ref = identity.reference(algo)
    kw = dict(steps=40, replicates=32, seed=3, threads=1)
    mine = ck.simulate(problem, algo, **kw).values[algo.label].values
    theirs = ck.simulate(problem, ref, **kw).values[ref.label].values
    assert np.isfinite(mine[~np.isnan(mine)]).all()
    if identity.rtol == 0:
        np.testing.assert_array_equal(mine, theirs)
    else:
        np.testing.assert_allclose(mine, theirs, rtol=identity.rtol, atol=1e-14)


def _exact_identity_cases() -> list[tuple[str, type, dict, object]]:
    """The identities whose two sides both declare an exact model on least squares."""
    out = []
    for case in _identity_cases():
        _, cls, params, identity = case
        algo = cls(**{**params, **identity.settings})
        ref = identity.reference(algo)
        if algo.capabilities.exact_model("least_squares") and ref.capabilities.exact_model(
            "least_squares"
        ):
            out.append(case)
    return out


def test_the_exact_identity_cases_are_not_empty():
    """The exact-engine identity test below runs on something (Local-SGD and FedAvgM)."""
    names = {c[0].split(":")[0] for c in _exact_identity_cases()}
    assert {"LocalSGD", "FedAvgM"} <= names, names


@pytest.mark.parametrize(
    "claim, cls, params, identity",
    _exact_identity_cases(),
    ids=[c[0] for c in _exact_identity_cases()],
)
def test_every_declared_identity_holds_in_the_exact_engine(claim, cls, params, identity):
    """Where both sides declare an exact model on least squares (SCAFFOLD's every-step
    identity has none), their exact curves agree too (to 1e-12 at least: two recursions, or
    one run twice, compute the same moments)."""
    algo = cls(**{**params, **identity.settings})
    ref = identity.reference(algo)
    prob = ck.LeastSquares.gaussian(D, "1/i", 1.0, seed=0)
    mine = ck.exact.expected_error(prob, algo, steps=60).values[algo.label].values
    theirs = ck.exact.expected_error(prob, ref, steps=60).values[ref.label].values
    np.testing.assert_allclose(mine, theirs, rtol=max(identity.rtol, 1e-12), atol=1e-15)


# ------------------------------------------------------------------ user-defined states


class HeavyBallMBA(Algorithm):
    """The example of ARCHITECTURE.md: a dict state."""

    def __init__(self, workers, step, beta=0.5, batch=1, name=None):
        super().__init__(workers, step, batch, name)
        self.beta = float(beta)

    def init(self, theta0, stream):
        return {"x": theta0, "v": theta0 * 0.0}

    def step(self, state, oracle, k, stream):
        g = oracle.grad(state["x"]).mean(axis=1, keepdims=True)
        state["v"] = self.beta * state["v"] + g
        state["x"] = state["x"] - self.gamma(k) * state["v"]
        return state

    def models(self, state):
        return state["x"]

    def comm_counts(self, n, d):
        rounds = np.arange(1, n + 1)
        return {"rounds": rounds, "messages": rounds * self.workers, "bits": rounds * 32 * d}


Pair = namedtuple("Pair", ["x", "v"])


class TupleHeavyBall(HeavyBallMBA):
    """The same algorithm on a named-tuple state with a shared scalar leaf, and a declared
    metric."""

    state_metrics = ("velocity2",)

    def init(self, theta0, stream):
        return (Pair(theta0, theta0 * 0.0), self.beta)

    def step(self, state, oracle, k, stream):
        (x, v), beta = state
        g = oracle.grad(x).mean(axis=1, keepdims=True)
        v = beta * v + g
        return (Pair(x - self.gamma(k) * v, v), beta)

    def models(self, state):
        return state[0].x

    def extra_metrics(self, state, problem):
        v = state[0].v
        return {"velocity2": (v * v).sum(axis=-1).mean(axis=1)}


@pytest.mark.parametrize("cls", [HeavyBallMBA, TupleHeavyBall])
def test_dict_and_tuple_states_run_above_one_replicate_block(cls):
    """600 replicates (three blocks: the engine selects the rows of each block to record): a
    dict state crashed here (the engine indexed it like an array).  A replicate's numbers
    depend on its block only, so the first block equals a run of 256 replicates."""
    prob = ck.LeastSquares.gaussian(5, "flat", 1.0, seed=0)
    algo = cls(4, ck.Constant(0.05))
    big = ck.simulate(prob, algo, steps=60, replicates=600, seed=1, threads=1)
    one = ck.simulate(prob, algo, steps=60, replicates=256, seed=1, threads=1)
    two = ck.simulate(prob, algo, steps=60, replicates=600, seed=1, threads=2)
    v = big.values[algo.label].values
    assert v.shape[-1] == 600 and not np.isnan(v[:, [0, 2], :3]).any()  # avg, last
    if algo.state_metrics:  # the declared metric, under the iterate "state"
        assert not np.isnan(v[:, 3, 3]).any()
    np.testing.assert_array_equal(v[..., :256], one.values[algo.label].values)
    np.testing.assert_array_equal(v, two.values[algo.label].values)


def test_an_undeclared_metric_is_named_in_the_error():
    class Undeclared(HeavyBallMBA):
        def extra_metrics(self, state, problem):
            return {"speed": (state["v"] ** 2).sum(axis=(1, 2))}

    prob = ck.LeastSquares.gaussian(3, "flat", 1.0, seed=0)
    with pytest.raises(ValueError, match="'speed'.*state_metrics"):
        ck.simulate(prob, Undeclared(2, ck.Constant(0.05)), steps=5, replicates=4, threads=1)


def test_the_layout_does_not_run_init():
    """The metrics are declared: a serial one-block run initialises its state once (the
    layout used to probe ``init`` for the metric names)."""
    calls = []

    class Counting(TupleHeavyBall):
        def init(self, theta0, stream):
            calls.append(theta0.shape)
            return super().init(theta0, stream)

    prob = ck.LeastSquares.gaussian(3, "flat", 1.0, seed=0)
    ck.simulate(prob, Counting(2, ck.Constant(0.05)), steps=5, replicates=7, threads=1)
    assert calls == [(7, 2, 3)]
