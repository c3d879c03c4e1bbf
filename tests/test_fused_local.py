"""The fused Local-SGD segments on logistic regression (convkit._fused_local) against the
step-by-step engine, and the thread plan that splits blocks by algorithm."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

import convkit as ck
from convkit import _fused_local, _parallel
from convkit import topology as T
from convkit.algorithms.decentralized import CHOCOSGD
from convkit.compression import TopK
from convkit.plan import plan

sim = sys.modules["convkit.simulate"]

pytest.importorskip("numba")


def _run(prob, algos, fused: bool, **kw):
    """The call on the fused segments, or (``fused=False``) on the next path of the plan, the
    step-by-step engine with the compiled one-step kernels (the fused paths left out of the
    engine's list of paths); the path taken is checked."""
    paths = sim.SIMULATE_PATHS
    if not fused:
        paths = tuple(p for p in paths if not isinstance(p, _fused_local.FusedLocalSegments))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sim, "SIMULATE_PATHS", paths)
        res = ck.simulate(prob, algos, seed=3, progress=False, **kw)
    kind = "logistic" if isinstance(prob, ck.LogisticRegression) else "least-squares"
    assert res.meta["path"]["name"] == (f"fused-local-{kind}" if fused else "compiled-steps")
    return res


def _assert_same(a, b, exact: bool = True) -> None:
    assert list(a.values) == list(b.values)
    for name in a.values:
        va, vb = a.values[name], b.values[name]
        np.testing.assert_array_equal(va.diverged_at, vb.diverged_at)
        if exact:
            np.testing.assert_array_equal(va.values, vb.values)
        else:  # rounding of a rotated design (BLAS against the kernel's sums)
            np.testing.assert_allclose(va.values, vb.values, rtol=1e-12, atol=1e-300)


def _algos(P: int = 4):
    step = ck.PolyDecay(1.0, 0.75)
    return [
        ck.MBA(P, step),
        ck.OSA(P, step),
        ck.LocalSGD(P, step, comm=ck.Rounds(7), name="R7"),
        ck.LocalSGD(2, step, comm="every:3", batch=3, name="P2b3"),
        ck.LocalSGD(1, ck.PolyDecay(0.5, 0.6), name="single"),
    ]


def test_fused_path_is_taken_only_where_it_applies():
    prob = ck.LogisticRegression.gaussian(2, spectrum="flat")

    def path(problem, algos, dtype="float64", weighted=False, kernels=None):
        be = ck.backend.get_backend("numpy", dtype)
        n = len(algos)
        return plan(problem, algos, engine="simulate", steps=[50] * n,
                    record=[np.array([50])] * n, paths=sim.SIMULATE_PATHS, backend=be,
                    weight_shifts=tuple(1.0 if weighted else None for _ in algos),
                    kernels=kernels).path  # fmt: skip

    assert path(prob, _algos()) == "fused-local-logistic"
    assert path(ck.LeastSquares.gaussian(2), _algos()) == "fused-local-least-squares"
    assert path(prob, _algos(), dtype="float32") == "compiled-steps"
    assert path(prob, _algos(), weighted=True) == "compiled-steps"
    assert path(ck.LeastSquares.gaussian(2, rotate=True), _algos()) == "compiled-steps"
    assert path(ck.LeastSquares.rademacher(2), _algos()) == "compiled-steps"
    choco = CHOCOSGD(T.ring(4), ck.PolyDecay(1.0, 0.75), TopK(k=1), 0.3)
    # a path per algorithm: the Local-SGD ones stay on the segments beside CHOCO-SGD where the
    # segments' numbers are the step-by-step ones bit for bit (logistic, unrotated) ...
    assert path(prob, [*_algos(), choco]) == "fused-local-logistic + compiled-steps"
    # ... and not where they agree to rounding only: the call runs step by step
    ls = ck.LeastSquares.gaussian(2)
    assert path(ls, [*_algos(), choco]) == "compiled-steps"
    rotated = ck.LogisticRegression.gaussian(2, rotate=True, eval_size=256)
    assert path(rotated, [*_algos(), choco]) == "compiled-steps"
    assert path(prob, _algos(), kernels=False) == "array-steps"
    with ck.kernels(enabled=False):
        assert path(prob, _algos()) == "array-steps"
    assert path(prob, _algos()) == "fused-local-logistic"


def test_fused_segments_equal_the_step_by_step_engine_bit_for_bit():
    # d = 2, batch 1 (the large-step Local-SGD studies): the same operations in the same order
    prob = ck.LogisticRegression.gaussian(2, spectrum="1/i", theta_star=np.ones(2))
    algos = [a for a in _algos() if a.batch == 1]
    kw = dict(steps=300, replicates=300, n_record=9, tail=0.5)
    fused, plain = _run(prob, algos, True, **kw), _run(prob, algos, False, **kw)
    _assert_same(fused, plain)
    assert all(v.values.shape[0] == 9 for v in fused.values.values())


@pytest.mark.parametrize("d", [2, 5, 12])
def test_fused_segments_with_batches_or_higher_dimension_are_bit_identical(d):
    # batch > 1 (the P2b3 algorithm) and d > 2, also above the unrolled dimensions (d = 12):
    # both logistic kernels add in the same order (no "reassoc": convkit._fastexp)
    prob = ck.LogisticRegression.gaussian(d, spectrum="1/i", theta_star=np.ones(d))
    kw = dict(steps=300, replicates=100, n_record=9)
    _assert_same(_run(prob, _algos(), True, **kw), _run(prob, _algos(), False, **kw))


def test_fused_segments_with_a_rotated_design_agree_to_rounding():
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    prob = ck.LogisticRegression(np.array([2.0, 1.0, 0.5]), Q=Q, theta_star=np.ones(3))
    kw = dict(steps=200, replicates=40, n_record=5)
    _assert_same(_run(prob, _algos(), True, **kw), _run(prob, _algos(), False, **kw), exact=False)


@pytest.mark.parametrize("d", [2, 30])
def test_least_squares_segments_equal_the_step_by_step_engine(d):
    # batch 1 at d = 2: bit for bit; batch 3, or d = 30: sums over samples and coordinates may
    # be reassociated differently by the two kernels (measured <= 5e-14 relative)
    prob = ck.LeastSquares.gaussian(d, spectrum="1/i", noise=0.5, seed=1)
    step = ck.PolyDecay(0.3, 0.6)
    algos = [ck.MBA(4, step), ck.LocalSGD(3, step, "rounds:4"), ck.LocalSGD(2, step, "every:5", 3)]
    kw = dict(steps=250, replicates=300, n_record=6, tail=0.3)
    fused, plain = _run(prob, algos, True, **kw), _run(prob, algos, False, **kw)
    for name, a in zip(fused.values, algos, strict=True):
        exact = d == 2 and a.batch == 1
        va, vb = fused.values[name], plain.values[name]
        np.testing.assert_array_equal(va.diverged_at, vb.diverged_at)
        if exact:
            np.testing.assert_array_equal(va.values, vb.values)
        else:
            np.testing.assert_allclose(va.values, vb.values, rtol=1e-12, atol=1e-300)
    _assert_same(fused, _run(prob, algos, True, threads=1, **kw))


def test_fused_segments_detect_divergence_at_the_same_step():
    prob = ck.LogisticRegression.gaussian(2, spectrum="flat", theta_star=np.ones(2))
    algos = [ck.MBA(2, ck.Constant(60.0)), ck.OSA(2, ck.Constant(0.5))]
    kw = dict(steps=400, replicates=64, divergence_factor=2.0)
    with pytest.warns(ck.DivergenceWarning):
        fused = _run(prob, algos, True, **kw)
    with pytest.warns(ck.DivergenceWarning):
        plain = _run(prob, algos, False, **kw)
    assert (next(iter(fused.values.values())).diverged_at > 0).sum() > 0
    _assert_same(fused, plain)


def test_long_runs_cross_segment_boundaries():
    prob = ck.LogisticRegression.gaussian(2, spectrum="flat")
    n = 2 * _fused_local.MAX_SEGMENT + 17
    algos = [
        ck.MBA(2, ck.PolyDecay(1.0, 0.75)),
        ck.LocalSGD(2, ck.PolyDecay(1.0, 0.75), "rounds:5"),
    ]
    kw = dict(steps=n, replicates=8, n_record=3)
    _assert_same(_run(prob, algos, True, **kw), _run(prob, algos, False, **kw))


@pytest.mark.parametrize("replicates", [200, 600])
def test_threads_and_memory_limits_give_identical_values(replicates):
    # 200: one block, split by algorithm on two threads; 600: two whole blocks and the third
    # split by algorithm
    prob = ck.LogisticRegression.gaussian(2, spectrum="flat")
    kw = dict(steps=300, replicates=replicates, n_record=4)  # large enough to split by algorithm
    serial = _run(prob, _algos(), True, threads=1, **kw)
    assert serial.meta["parallel"]["threads"] == 1
    two = _run(prob, _algos(), True, threads=2, **kw)
    assert two.meta["parallel"]["threads"] == 2
    _assert_same(serial, two)
    if replicates > 256:  # one block (of 413 kB) per chunk
        small = _run(prob, _algos(), True, threads=2, memory_limit=500_000, **kw)
        assert small.meta["parallel"]["parts"] > two.meta["parallel"]["parts"]
        _assert_same(serial, small)
    _assert_same(serial, _run(prob, _algos(), False, threads=2, **kw), exact=False)


@pytest.mark.parametrize(
    ("blocks", "threads", "costs"),
    [(1, 2, [1, 1, 1]), (3, 2, [5, 1, 1, 1, 1, 1]), (4, 2, [1, 2]), (5, 3, [1]), (2, 4, [1, 3]),
     (1, 1, [1, 1]), (7, 2, [2, 2, 2])],
)  # fmt: skip
def test_thread_plan_covers_every_block_and_algorithm_once(blocks, threads, costs):
    plan = _parallel.plan_threads(10, 10 + blocks, threads, costs)
    assert 1 <= len(plan) <= threads
    seen = []
    for tasks in plan:
        for j0, j1, which in tasks:
            assert 10 <= j0 < j1 <= 10 + blocks
            algos = range(len(costs)) if which is None else which
            seen += list(itertools.product(range(j0, j1), algos))
    assert sorted(seen) == sorted(itertools.product(range(10, 10 + blocks), range(len(costs))))


def test_thread_plan_balances_a_single_block_by_cost():
    plan = _parallel.plan_threads(0, 1, 2, [4, 1, 1, 1, 1])
    assert plan == [[(0, 1, (0,))], [(0, 1, (1, 2, 3, 4))]]
    # three blocks, two threads: one whole block each, the third split
    plan = _parallel.plan_threads(0, 3, 2, [1, 1, 1, 1])
    assert plan == [[(0, 1, None), (2, 3, (0, 2))], [(1, 2, None), (2, 3, (1, 3))]]


@pytest.mark.parametrize(
    ("workers", "unstable_step"), [((8, 8, 8), 3.5), ((16, 2, 6), 4.5), ((4, 5, 1), 2.0)]
)
def test_bookkeeping_is_bit_identical_for_every_worker_count(workers, unstable_step):
    # the bookkeeping of the segment kernel: P = 8 compiled as a constant, the other powers of
    # two (1, 2, 4, 16) dividing by a multiplication with 1 / P, the others (5, 6) by a
    # division; with all workers of the buffers, batch 1, d = 2, the workers' step is one
    # pass: every variant against the step-by-step engine, with averaging every step (MBA),
    # rounds, a tail average and divergent replicates
    prob = ck.LogisticRegression.gaussian(2, spectrum="1/i", theta_star=np.ones(2))
    step = ck.PolyDecay(1.5, 0.6)
    P0, P1, P2 = workers
    algos = [
        ck.MBA(P0, step),
        ck.LocalSGD(P1, step, comm=ck.Rounds(9), name="R9"),
        ck.LocalSGD(P2, step, comm="every:4", name="E4"),
        ck.LocalSGD(P0, ck.Constant(unstable_step), comm="every:2", name="unstable"),
    ]
    kw = dict(steps=260, replicates=70, n_record=5, tail=0.4, divergence_factor=2.0)
    with pytest.warns(ck.DivergenceWarning):
        fused = _run(prob, algos, True, **kw)
    with pytest.warns(ck.DivergenceWarning):
        plain = _run(prob, algos, False, **kw)
    unstable = fused.values["unstable"].diverged_at
    assert 0 < (unstable > 0).sum() < unstable.size  # some replicates diverge, not all
    _assert_same(fused, plain)


def test_fused_segments_read_the_problem_declaration_not_its_class():
    """A problem subclass that overrides how samples are drawn loses the declared fused model
    (negative control: the fused kernels would draw the parent's samples), one that overrides
    nothing keeps it and its numbers."""
    import convkit as ck

    class Shifted(ck.LogisticRegression):
        def sample(self, stream, shape):
            return super().sample(stream, shape)

    class Same(ck.LogisticRegression):
        pass

    base = ck.LogisticRegression.gaussian(2, "flat", theta_star=np.ones(2))
    assert base.fused_model == "logistic" and Shifted.fused_model is None
    assert Same.fused_model == "logistic"
    algo = ck.LocalSGD(4, ck.Constant(0.1), comm="every:5")
    paths = {}
    for cls in (ck.LogisticRegression, Same, Shifted):
        prob = cls(base.h, theta_star=base.theta_star)
        res = ck.simulate(prob, algo, steps=20, replicates=8, seed=3, threads=1, progress=False)
        paths[cls.__name__] = res.meta["path"]["algorithms"][algo.label]["name"]
    assert paths["LogisticRegression"] == paths["Same"] == "fused-local-logistic"
    assert paths["Shifted"] != "fused-local-logistic"
