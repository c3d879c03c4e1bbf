"""``simulate(..., dask=...)``: the parts of one call computed on a Dask cluster and merged give
the serial run's numbers exactly (``np.array_equal``) and the same meta (except timings and the
parallel settings), on a LocalCluster of 2 workers, threads or processes.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.decentralized import CHOCOSGD
from convkit.compression import RandK
from convkit.topology import ring

sim = sys.modules["convkit.simulate"]
BLOCK = sim.REPLICATE_BLOCK
R = 2 * BLOCK + 100


def _problem_and_algos():
    prob = ck.LeastSquares.gaussian(d=4, spectrum="1/i", seed=0)
    st = ck.PolyDecay(0.3, 0.75)
    algos = [
        ck.LocalSGD(4, st, comm="every:3", name="local"),
        CHOCOSGD(ring(4), ck.Constant(0.05), RandK(fraction=0.5), 0.4, name="choco"),
        ck.MBA(2, ck.Constant(3.0), name="diverging"),
    ]
    return prob, algos


def _sim(**kw):
    prob, algos = _problem_and_algos()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ck.DivergenceWarning)
        warnings.filterwarnings("ignore", message="memory_limit=")
        return ck.simulate(prob, algos, steps=15, replicates=R, seed=3, **kw)


def _assert_same(ref, res) -> None:
    for label, cv in ref.values.items():
        assert np.array_equal(cv.values, res.values[label].values, equal_nan=True), label
        assert np.array_equal(cv.diverged_at, res.values[label].diverged_at), label
    assert res.frame.equals(ref.frame)
    skip = {"timing", "parallel"}
    assert {k: v for k, v in res.meta.items() if k not in skip} == {
        k: v for k, v in ref.meta.items() if k not in skip
    }


def test_local_cluster_of_threads_by_client_and_address():
    distributed = pytest.importorskip("distributed")
    ref = _sim(threads=1)
    assert np.count_nonzero(ref.values["diverging"].diverged_at) > 0
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        res = _sim(dask=client)
        assert res.meta["parallel"]["parts"] == 2  # 3 blocks, one part per worker thread
        _assert_same(ref, res)
        by_address = _sim(dask=cluster.scheduler_address, memory_limit=1.0)  # 1 block a chunk
        assert by_address.meta["parallel"]["dask"] == cluster.scheduler_address
        assert by_address.meta["parallel"]["parts"] == 3
        _assert_same(_sim(threads=1, memory_limit=1.0), by_address)
        assert not client.status == "closed"  # a given client is left open


def test_embedded_local_cluster_of_processes():
    pytest.importorskip("distributed")
    ref = _sim(threads=1)
    res = _sim(dask=True, threads=2)
    assert res.meta["parallel"]["dask"] == "LocalCluster(2 processes)"
    _assert_same(ref, res)


def test_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    prob, algos = _problem_and_algos()
    with pytest.raises(ImportError, match=r"convkit\[cluster\]"):
        ck.simulate(prob, algos[0], steps=2, replicates=3, dask=True)


def test_bad_dask_argument():
    pytest.importorskip("distributed")
    prob, algos = _problem_and_algos()
    with pytest.raises(ValueError, match="dask must be True"):
        ck.simulate(prob, algos[0], steps=2, replicates=3, dask=3)
