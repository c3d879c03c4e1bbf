"""The Local-SGD family's server update (issue 32, item 4): FedAvg with server momentum and
FedAdam are Local-SGD's rounds plus a transform of the round's pseudo-gradient
(:mod:`convkit.algorithms.server`).  Checked against an independent per-replicate,
per-worker NumPy loop on the same samples; refused by the exact engines (they declare no
exact model); off the fused segments; in sweeps."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.server import average, chain, scale, scale_by_fedadam, trace
from convkit.backend import get_backend
from convkit.problems.base import GradientOracle

P, D, R, B = 3, 3, 4, 2
STEP = ck.Constant(0.05)


def _drive(problem, algo, n):
    """``n`` steps of ``algo`` from theta0 = 0.3 on R replicates; the batches it used."""
    be = get_backend("numpy", "float64")
    algo.prepare(n)
    stream = be.stream(0, "server-update")
    state = algo.init(np.full((R, algo.workers, problem.d), 0.3), stream)
    batches = []
    for k in range(1, n + 1):
        batch = problem.sample(stream, (R, algo.workers, algo.batch))
        batches.append(batch)
        state = algo.step(state, GradientOracle(problem, batch), k, stream)
    return state, batches


def _reference(problem, algo, batches, server):
    """Per replicate, per worker, per step: least-squares SGD from 0.3, ``server(r, g)`` at a
    round's end (``g = x - mean``) returning the new server model."""
    n = len(batches)
    mask = algo.comm.mask(n)
    gam = algo.step_size.values(n)
    sqrt_h = np.sqrt(problem.h)
    out = np.empty((R, algo.workers, problem.d))
    for r in range(R):
        x = np.full(problem.d, 0.3)
        y = [x.copy() for _ in range(algo.workers)]
        for k in range(n):
            for i in range(algo.workers):
                g = np.zeros(problem.d)
                for j in range(algo.batch):
                    a = batches[k].z[r, i, j] * sqrt_h
                    res = a @ (y[i] - problem.theta_star) - problem.noise * batches[k].eps[r, i, j]
                    g += a * res
                y[i] = y[i] - gam[k] * g / algo.batch
            if mask[k]:
                mean = sum(y) / algo.workers
                x = server(r, x - mean, x)
                y = [x.copy() for _ in range(algo.workers)]
        out[r] = np.array(y)
    return out


def _problem():
    return ck.LeastSquares.gaussian(D, "1/i", 1.0, seed=0)


def test_fedavgm_is_its_recursion_on_every_replicate():
    prob, beta, lr = _problem(), 0.6, 0.8
    algo = ck.FedAvgM(P, STEP, "every:4", beta=beta, server_lr=lr, batch=B)
    state, batches = _drive(prob, algo, 30)
    v = np.zeros((R, D))

    def momentum(r, g, x):
        v[r] = beta * v[r] + g
        return x - lr * v[r]

    ref = _reference(prob, algo, batches, momentum)
    np.testing.assert_allclose(algo.models(state), ref, rtol=1e-12, atol=1e-14)
    plain, _ = _drive(prob, ck.LocalSGD(P, STEP, "every:4", batch=B), 30)
    assert np.abs(plain.theta - state.theta).max() > 1e-3  # momentum changes the iterates


def test_fedadam_is_its_recursion_on_every_replicate():
    prob = _problem()
    lr, b1, b2, tau = 0.05, 0.8, 0.95, 1e-2
    algo = ck.FedAdam(P, STEP, "every:3", server_lr=lr, beta1=b1, beta2=b2, tau=tau, batch=B)
    state, batches = _drive(prob, algo, 30)
    m, v = np.zeros((R, D)), np.full((R, D), tau**2)

    def adam(r, g, x):
        delta = -g  # Reddi et al.'s pseudo-gradient: the workers' mean displacement
        m[r] = b1 * m[r] + (1 - b1) * delta
        v[r] = b2 * v[r] + (1 - b2) * delta**2
        return x + lr * m[r] / (np.sqrt(v[r]) + tau)

    ref = _reference(prob, algo, batches, adam)
    np.testing.assert_allclose(algo.models(state), ref, rtol=1e-12, atol=1e-14)


def test_a_transform_that_returns_minus_g_is_the_average_bit_for_bit():
    """The model is computed as mean + (u + g): trace(0) then scale(-1) gives the mean."""
    x = np.random.default_rng(0).standard_normal((5, 3))
    mean = np.random.default_rng(1).standard_normal((5, 3))
    g = x - mean
    t = chain(trace(0.0), scale(-1.0))
    u, _ = t.update(g, t.init(x))
    np.testing.assert_array_equal(mean + (u + g), mean)
    u, _ = average().update(g, None)
    np.testing.assert_array_equal(mean + (u + g), mean)
    assert average().averages and not t.averages


def test_fedadam_is_refused_by_the_exact_engines_with_the_reason():
    algo = ck.FedAdam(4, STEP, "every:5")
    with pytest.raises(TypeError, match=r"FedAdam declares no exact model"):
        ck.exact.expected_error(_problem(), algo, steps=50)
    het = ck.HeterogeneousLeastSquares(4, 4, 1.0, noise=0.5, seed=0)
    for a in (algo, ck.FedAvgM(4, STEP, "every:5")):  # no node-moment model for either
        with pytest.raises(TypeError, match=rf"{type(a).__name__} declares no exact model"):
            ck.exact.expected_error_nodes(het, a, steps=50)
    assert ck.FedAdam.capabilities.exact == {} and ck.FedAdam.capabilities.fused == ()
    assert ck.FedAvgM.capabilities.exact == {"least_squares": "server_momentum"}
    assert ck.FedAvgM.capabilities.fused == ()


@pytest.mark.parametrize(
    "design, batch, step, comm",
    [
        ("gaussian", 1, ck.PolyDecay(0.3, 0.6), "every:5"),
        ("gaussian", 2, ck.Constant(0.05), "rounds:7"),
        ("rademacher", 1, ck.Constant(0.05), "every:3"),
        ("additive", 2, ck.PolyDecay(0.3, 0.6), "quadratic:6"),
    ],
)
def test_fedavgm_exact_model_at_momentum_zero_is_local_sgds(design, batch, step, comm):
    """beta = 0, server_lr = 1: the server-momentum recursion gives Local-SGD's exact curves
    (to rounding: the round's covariance map is computed, not skipped)."""
    prob = getattr(ck.LeastSquares, design)(4, "1/i", 1.0, seed=0)
    zero = ck.FedAvgM(4, step, comm, beta=0.0, server_lr=1.0, batch=batch, name="zero")
    local = ck.LocalSGD(4, step, comm, batch=batch, name="local")
    res = ck.exact.expected_error(prob, [zero, local], steps=120, use_numba=False)
    assert res.meta["path"]["engines"] == {"zero": "server_momentum", "local": "local"}
    why = res.meta["path"]["algorithms"]["zero"]["reason"]
    assert "'server_momentum', on NumPy" in why
    np.testing.assert_allclose(
        res.values["zero"].values, res.values["local"].values, rtol=1e-12, atol=1e-15
    )


def test_fedavgm_exact_model_agrees_with_monte_carlo():
    """With momentum the exact curves differ from Local-SGD's and agree with 20000 Monte
    Carlo replicates within 4 standard errors at every record point."""
    prob = _problem()
    algo = ck.FedAvgM(4, STEP, "every:5", beta=0.7, server_lr=0.8, batch=2, name="m")
    plain = ck.LocalSGD(4, STEP, "every:5", batch=2, name="plain")
    exact = ck.exact.expected_error(prob, [algo, plain], steps=150, n_record=6)
    mc = ck.simulate(prob, algo, steps=150, replicates=20000, seed=3, n_record=6)
    keys = ["config", "step", "iterate", "metric"]
    both = mc.frame.merge(exact.frame, on=keys, suffixes=("", "_exact"))
    both = both[both["metric"] != "excess_risk"]
    assert len(both) >= 20
    z = (both["mean"] - both["mean_exact"]) / both["se"]
    assert np.abs(z).max() < 4, both.assign(z=z)
    last = exact.frame.query("step == 150 and iterate == 'last' and metric == 'hnorm2'")
    m = dict(zip(last["config"], last["mean"], strict=True))
    assert abs(m["m"] - m["plain"]) > 0.2 * m["plain"]


def test_the_variants_leave_the_fused_segments_to_local_sgd():
    """On logistic regression Local-SGD keeps the fused segments beside the variants, which
    run step by step (their server update is not in the segment kernel), with the reason."""
    prob = ck.LogisticRegression.gaussian(3, eval_size=256)
    algos = [ck.LocalSGD(4, STEP, "every:5"), ck.FedAvgM(4, STEP, "every:5"),
             ck.FedAdam(4, STEP, "every:5")]  # fmt: skip
    res = ck.simulate(prob, algos, steps=40, replicates=16, seed=1, threads=1)
    on = res.meta["path"]["algorithms"]
    assert on[algos[0].label]["name"] == "fused-local-logistic"
    for a in algos[1:]:
        assert on[a.label]["name"] == "compiled-steps"
        why = on[a.label]["declined"]["fused-local-logistic"]
        assert f"{type(a).__name__} declares no fused Local-SGD segments" in why
        alone = ck.simulate(prob, a, steps=40, replicates=16, seed=1, threads=1)
        np.testing.assert_array_equal(alone.values[a.label].values, res.values[a.label].values)


def test_labels_descriptions_and_invalid_values():
    a = ck.FedAvgM(4, STEP, "every:5", beta=0.5)
    assert a.label == "FedAvgM(P=4, b=1, every(H=5), beta=0.5, server_lr=1)"
    assert a.describe()["server"] == {
        "kind": "chain",
        "parts": [{"kind": "trace", "decay": 0.5}, {"kind": "scale", "step": -1.0}],
    }
    f = ck.FedAdam(4, STEP, "every:5")
    assert (
        f.label == "FedAdam(P=4, b=1, every(H=5), server_lr=0.1, beta1=0.9, beta2=0.99, tau=0.001)"
    )
    assert "server" not in ck.LocalSGD(4, STEP, "every:5").describe()
    for bad, match in [(dict(beta=1.0), "beta"), (dict(server_lr=0.0), "server_lr")]:
        with pytest.raises(ValueError, match=match):
            ck.FedAvgM(4, STEP, **bad)
    for bad, match in [(dict(tau=0.0), "tau"), (dict(beta2=1.0), "beta2")]:
        with pytest.raises(ValueError, match=match):
            ck.FedAdam(4, STEP, **bad)
    with pytest.raises(TypeError, match="chain"):
        chain(trace(0.5), 1.0)
    # the prepared instance (its server update) pickles, for process pools
    a.prepare(20)
    assert pickle.loads(pickle.dumps(a)).label == a.label
    assert scale_by_fedadam(0.9, 0.99, 1e-3).describe()["kind"] == "scale_by_fedadam"


def test_the_variants_are_sweep_kinds(tmp_path):
    import convkit.sweep as sw

    assert {"fed_avg_m", "fed_adam"} <= set(sw.kinds("algorithm"))
    spec = sw.Sweep.from_dict({
        "seed": 1, "steps": 20, "replicates": 4,
        "problem": {"kind": "least_squares", "d": 3},
        "algorithm": {"kind": "fed_avg_m", "workers": 2, "comm": "every:5",
                      "step": {"kind": "constant", "gamma": 0.05}},
        "grid": {"algorithm.beta": [0.0, 0.5]},
    })  # fmt: skip
    assert len(spec) == 2
    res = sw.run(spec, tmp_path / "out", jobs=1, progress=False)
    assert set(res.frame["config"]) == {
        "FedAvgM(P=2, b=1, every(H=5), beta=0, server_lr=1)",
        "FedAvgM(P=2, b=1, every(H=5), beta=0.5, server_lr=1)",
    }
    assert not res.summary.failed


def test_a_subclass_that_overrides_the_server_update_loses_local_sgds_models():
    """Overriding ``server_update`` (one of LocalSGD's update methods) withdraws the exact
    model, the fused segments and the identities; the refusal names the method."""

    class HalfStep(ck.LocalSGD):
        def server_update(self):
            return scale(-0.5)

    assert HalfStep.capabilities.withdrawn == ("HalfStep", ("server_update",), "LocalSGD")
    assert HalfStep.identities == ()
    with pytest.raises(TypeError, match=r"HalfStep overrides server_update of LocalSGD"):
        ck.exact.expected_error(_problem(), HalfStep(4, STEP, "every:5"), steps=50)
    res = ck.simulate(_problem(), HalfStep(4, STEP, "every:5"), steps=40, replicates=8, seed=1)
    assert res.meta["path"]["name"] == "compiled-steps"


def test_the_command_line_runs_the_variants(capsys):
    """``convkit simulate --algorithm fedavgm``: momentum 0 with server step 1 prints Local-SGD's
    table; a bad --tau is one line naming the option."""
    from convkit.cli import main

    base = ["simulate", "--d", "3", "--workers", "2", "--gradients", "200", "--replicates", "4",
            "--comm", "every:5"]  # fmt: skip
    tables = []
    for extra in ([], ["--algorithm", "fedavgm", "--beta", "0", "--server-lr", "1"],
                  ["--algorithm", "fedavgm", "--beta", "0.5"], ["--algorithm", "fedadam"]):  # fmt: skip
        assert main(base + extra) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and tables[2] != tables[0] and tables[3] != tables[0]
    with pytest.raises(SystemExit) as info:
        main(base + ["--algorithm", "fedadam", "--tau", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--tau" in err and "(0, inf)" in err and len(err.strip().splitlines()) == 1


def test_the_server_updates_run_on_the_array_api():
    """The transforms use array-API operations only: array-api-strict gives NumPy's numbers
    (kernels off on both), and replicate blocks and threads change nothing."""
    pytest.importorskip("array_api_strict")
    prob = _problem()
    algos = [ck.FedAvgM(4, STEP, "every:5", beta=0.5), ck.FedAdam(4, STEP, "every:5")]
    kw = dict(steps=40, replicates=8, seed=1, threads=1)
    with ck.kernels(enabled=False):
        plain = ck.simulate(prob, algos, **kw)
    strict = ck.simulate(prob, algos, backend="array_api_strict", **kw)
    assert strict.meta["path"]["name"] == "array-steps"
    for a in algos:
        np.testing.assert_allclose(
            strict.values[a.label].values, plain.values[a.label].values, rtol=1e-12, atol=1e-15
        )
    big = ck.simulate(prob, algos, steps=30, replicates=600, seed=2, threads=1)
    two = ck.simulate(prob, algos, steps=30, replicates=600, seed=2, threads=2)
    for a in algos:
        np.testing.assert_array_equal(big.values[a.label].values, two.values[a.label].values)
