"""The run plan (convkit.plan) and the public kernel switch (convkit.kernels): the path of a
call is decided once, recorded in ``Result.meta["path"]`` with its reason, and the switch
reaches every compiled kernel."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import convkit as ck
from convkit import _kernels, _logistic_kernels
from convkit import topology as T
from convkit.algorithms.decentralized import CHOCOSGD, DPSGD
from convkit.compression import TopK
from convkit.plan import ARRAY_STEPS, COMPILED_STEPS, plan

sim = sys.modules["convkit.simulate"]
numba = pytest.importorskip("numba")

STEP = ck.PolyDecay(0.5, 0.75)


def test_the_switch_works_as_a_call_and_as_a_context_manager():
    assert ck.kernels_enabled()
    with ck.kernels(enabled=False) as switch:
        assert not ck.kernels_enabled() and repr(switch) == "kernels(enabled=False)"
        assert not _kernels.numba_available()
        assert not _logistic_kernels.logistic_numba_available()
        with ck.kernels(enabled=True):
            assert ck.kernels_enabled()
        assert not ck.kernels_enabled()
    assert ck.kernels_enabled() and _kernels.numba_available()
    try:
        ck.kernels(enabled=False)  # a plain call: from now on
        assert not ck.kernels_enabled()
    finally:
        ck.kernels(enabled=True)
    with pytest.raises(TypeError, match="True or False, got 0"):
        ck.kernels(enabled=0)
    assert ck.kernels_enabled()


def test_simulate_records_the_path_and_why_the_faster_ones_declined():
    prob = ck.LeastSquares.gaussian(3, "1/i", 1.0, seed=0)
    algos = [ck.MBA(2, STEP), ck.OSA(2, STEP)]
    kw = dict(steps=30, replicates=6, seed=1, threads=1)
    fused = ck.simulate(prob, algos, **kw)
    path = fused.meta["path"]
    assert path["name"] == "fused-local-least-squares" and "segments" in path["reason"]
    assert "LogisticRegression" in path["declined"]["fused-local-logistic"]
    f32 = ck.simulate(prob, algos, dtype="float32", **kw).meta["path"]
    assert f32["name"] == "compiled-steps"
    assert "float64" in f32["declined"]["fused-local-least-squares"]
    with ck.kernels(enabled=False):
        off = ck.simulate(prob, algos, **kw)
    assert off.meta["path"]["name"] == "array-steps" and off.meta["path"]["kernels"] is False
    assert "switched off" in off.meta["path"]["declined"]["compiled-steps"]
    # the generic path agrees with the fused one to rounding (reassociated sums)
    for name in fused.values:
        np.testing.assert_allclose(
            fused.values[name].values, off.values[name].values, rtol=1e-12, atol=1e-300
        )
    dec = ck.simulate(prob, [CHOCOSGD(T.ring(2), STEP, TopK(k=1), 0.5)], **kw).meta["path"]
    assert dec["name"] == "compiled-steps"
    assert "CHOCOSGD" in dec["declined"]["fused-local-least-squares"]


def test_expected_error_records_its_path_and_checks_every_algorithm_first():
    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    algos = [ck.MBA(4, STEP), DPSGD(T.ring(4), STEP)]
    on = ck.exact.expected_error(prob, algos, steps=50)
    assert on.meta["path"]["name"] == "exact-compiled"
    assert on.meta["path"]["engines"] == {algos[0].label: "local", algos[1].label: "dpsgd"}
    with ck.kernels(enabled=False):
        off = ck.exact.expected_error(prob, algos, steps=50)
    forced = ck.exact.expected_error(prob, algos, steps=50, use_numba=False)
    assert off.meta["path"]["name"] == forced.meta["path"]["name"] == "exact-numpy"
    np.testing.assert_array_equal(off.frame["mean"], forced.frame["mean"])
    np.testing.assert_allclose(off.frame["mean"], on.frame["mean"], rtol=1e-10)
    with ck.kernels(enabled=False):  # an explicit use_numba=True overrides the switch
        assert (
            ck.exact.expected_error(prob, algos, steps=50, use_numba=True).meta["path"]["name"]
            == "exact-compiled"
        )
    ef = ck.ErrorFeedbackSGD(4, STEP, "top-k:0.5")
    with pytest.raises(TypeError, match="ErrorFeedbackSGD"):
        ck.exact.expected_error(prob, [*algos, ef], steps=50)


def test_plan_takes_the_first_path_that_supports_the_call():
    prob = ck.LogisticRegression.gaussian(2, eval_size=256)
    be = ck.backend.get_backend("numpy", "float64")
    kw = dict(engine="simulate", steps=[10], record=[np.array([10])], backend=be)
    algo = [ck.MBA(2, STEP)]
    assert plan(prob, algo, paths=sim.SIMULATE_PATHS, **kw).path == "fused-local-logistic"
    p = plan(prob, algo, paths=(COMPILED_STEPS, ARRAY_STEPS), **kw)
    assert p.path == "compiled-steps" and p.declined == ()
    assert (
        plan(prob, algo, paths=(ARRAY_STEPS,), kernels=False, **kw).describe()["kernels"] is False
    )
    with pytest.raises(ValueError, match="no execution path supports"):
        plan(prob, algo, paths=(COMPILED_STEPS,), kernels=False, **kw)
    with pytest.raises(ValueError, match="engine must be one of"):
        plan(prob, algo, paths=(ARRAY_STEPS,), **{**kw, "engine": "magic"})


def test_direct_exact_curves_follow_the_switch():
    """local_curves(use_numba=None), called directly (schedule search, thresholds), takes the
    NumPy recursion while the kernels are switched off; its numbers agree to rounding."""
    from convkit.exact.local import local_curves, local_specs
    from convkit.exact.moments import problem_arrays

    prob = ck.LeastSquares.gaussian(4, "1/i", 1.0, seed=0)
    h, z2, s2 = problem_arrays(prob, None)
    specs = local_specs([ck.MBA(4, STEP)], [200], None, 10, 0.5)
    calls = []
    real = ck.exact.local.local_kernel

    def spy():
        calls.append(1)
        return real()

    with pytest.MonkeyPatch.context() as m:
        m.setattr(ck.exact.local, "local_kernel", spy)
        on, _ = local_curves(h, z2, s2, prob.design, specs)
        with ck.kernels(enabled=False):
            off, _ = local_curves(h, z2, s2, prob.design, specs)
    assert calls == [1]
    np.testing.assert_allclose(on[0], off[0], rtol=1e-10)


def test_a_dask_part_runs_under_the_plans_switch(monkeypatch):
    """A Dask worker process has its own switch (on by default): the part applies the plan's.
    The parts are run here, in-process, by a stand-in for the Dask executor that switches the
    kernels on around them, as a fresh worker would have them."""
    from dataclasses import replace

    prob = ck.LeastSquares.gaussian(5, "1/i", 1.0, seed=0)
    algo = ck.LocalSGD(4, STEP, comm="every:3", batch=2, name="x")
    kw = dict(steps=60, replicates=8, seed=2, threads=1, weight_shift=1.0)
    on = ck.simulate(prob, algo, **kw).values["x"].values
    with ck.kernels(enabled=False):
        off = ck.simulate(prob, algo, **kw).values["x"].values
    assert not np.array_equal(on, off)  # the compiled step rounds differently

    def dask_like(run, chunks, threads, clock):
        spec = replace(run, values=[], diverged=[])
        with ck.kernels(enabled=True):  # a worker's default
            for j0, j1 in chunks:
                r0, values, diverged = sim._dask_part(spec, j0, j1)
                r1 = r0 + diverged[0].size
                for i in range(len(run.algos)):
                    run.values[i][..., r0:r1] = values[i]
                    run.diverged[i][r0:r1] = diverged[i]
        return {"threads": 1, "parts": len(chunks), "dask": "in-process"}

    monkeypatch.setattr(sim, "_execute", dask_like)
    with ck.kernels(enabled=False):
        res = ck.simulate(prob, algo, **kw)
    assert res.meta["parallel"]["dask"] == "in-process"
    assert res.meta["path"]["name"] == "array-steps"
    np.testing.assert_array_equal(res.values["x"].values, off)
