"""Sweeps on Dask: an embedded LocalCluster (2 worker processes) and a running cluster reached
through its scheduler address give bit-for-bit the serial results.

Most of the time is the start of the worker processes (each imports pandas and convkit).
"""

from __future__ import annotations

import pandas as pd
import pytest
from sweep_helpers import payload_digests, tiny_spec

from convkit import sweep as sw

pytest.importorskip("distributed")


def test_embedded_local_cluster_gives_identical_results(tmp_path):
    s = sw.Sweep.from_dict(tiny_spec())
    serial = sw.run(s, tmp_path / "serial", jobs=1, progress=False)
    emb = sw.run(s, tmp_path / "dask", dask=True, jobs=2, progress=False)
    assert emb.summary.executor == "dask (LocalCluster)"
    assert (emb.summary.computed, emb.summary.failed) == (len(s), {})
    pd.testing.assert_frame_equal(emb.frame, serial.frame, check_exact=True)
    assert payload_digests(tmp_path / "dask", s) == payload_digests(tmp_path / "serial", s)
    assert (tmp_path / "dask" / "frame.parquet").read_bytes() == (
        tmp_path / "serial" / "frame.parquet"
    ).read_bytes()


def test_running_cluster_by_address(tmp_path):
    """``scheduler=ADDRESS`` connects to a running cluster (here in-process threads, which
    start in a fraction of a second; the process-based path is tested above)."""
    from distributed import LocalCluster

    s = sw.Sweep.from_dict(tiny_spec(n_c=2))
    serial = sw.run(s, tmp_path / "serial", jobs=1, progress=False)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        addr = cluster.scheduler_address
        remote = sw.run(s, tmp_path / "remote", scheduler=addr, progress=False)
        assert remote.summary.executor == f"dask ({addr})"
        assert remote.summary.computed == len(s)
        # a cached re-run submits nothing
        again = sw.run(s, tmp_path / "remote", scheduler=addr, progress=False)
        assert (again.summary.computed, again.summary.cached) == (0, len(s))
    pd.testing.assert_frame_equal(remote.frame, serial.frame, check_exact=True)
    assert payload_digests(tmp_path / "remote", s) == payload_digests(tmp_path / "serial", s)
