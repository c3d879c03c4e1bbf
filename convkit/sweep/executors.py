"""Executors: :func:`_execute` runs one configuration in any process (it is pickled by
reference into joblib and Dask workers); serial, joblib and Dask drivers yield its results."""

from __future__ import annotations

import json
import os
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from convkit.result import json_default
from convkit.sweep.cache import frame_to_bytes
from convkit.sweep.setting import build
from convkit.user_modules import import_user_module


def _execute(task: Mapping[str, Any]) -> dict[str, Any]:
    """Run one configuration (in any process); never raises.

    Returns ``{"index", "key", "ok": True, "payload": bytes, "format", "meta", "seconds"}`` or
    ``{"index", "key", "ok": False, "error", "traceback", "seconds"}``.
    """
    if "function" in task["setting"]:  # a function setting (convkit.sweep.functions)
        from convkit.sweep.functions import execute_function

        return execute_function(task)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"index": task["index"], "key": task["key"]}
    try:
        for mod in task.get("imports", ()):
            import_user_module(mod, again=False)
        from convkit.problems.base import METRICS
        from convkit.simulate import DivergenceWarning, simulate

        setting = task["setting"]
        problem, algos = build(setting)
        rec = setting["record"]
        budget = (
            {"gradients": setting["gradients"]}
            if "gradients" in setting
            else {"steps": setting["steps"]}
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DivergenceWarning)
            res = simulate(
                problem,
                algos,
                **budget,
                replicates=setting["replicates"],
                seed=task["seed"],
                record=rec["steps"] or None,
                n_record=rec["n_record"],
                tail=rec["tail"],
                backend=setting["backend"],
                dtype=setting["dtype"],
                progress=False,
                # parallel executors run one configuration per worker: one thread each (the
                # numbers do not depend on the thread count)
                threads=task.get("threads"),
                # the problem's error metrics the record keeps (None: all); the others are
                # not computed (the kept values are the same, bit for bit)
                metrics=[m for m in rec["metrics"] if m in METRICS] or None
                if rec["metrics"] is not None
                else None,
            )
        frame = res.frame
        if rec["iterates"] is not None:
            frame = frame[frame["iterate"].isin(rec["iterates"])]
        if rec["metrics"] is not None:
            frame = frame[frame["metric"].isin(rec["metrics"])]
        frame = frame.reset_index(drop=True)
        meta = dict(res.meta)
        out.update(
            ok=True,
            payload=frame_to_bytes(frame, task["format"]),
            format=task["format"],
            meta=json.loads(json.dumps(meta, default=json_default)),
        )
    except Exception as exc:
        out.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    out["seconds"] = time.perf_counter() - t0
    return out


def _serial(tasks: list[dict]) -> Iterator[dict]:
    for t in tasks:
        yield _execute(t)


#: seconds between two checks of the parent process by a worker's watchdog thread
_WATCH_INTERVAL = 0.5


def _watch_parent(parent: int) -> None:
    """Exit this process (at once, no cleanup) as soon as process ``parent`` is gone."""
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(_WATCH_INTERVAL)


def _worker_init(parent: int) -> None:
    """Initializer of the joblib (loky) worker processes: die with the sweep's process.

    Loky keeps idle workers for minutes (its reusable executor) and does not notice a parent
    killed by SIGKILL.  A daemon thread in each worker watches ``os.getppid()``, which
    changes when the parent dies and the worker is re-parented, and ends the worker within
    :data:`_WATCH_INTERVAL` seconds; a parent that died before this ran is caught at once.
    ``prctl(PR_SET_PDEATHSIG)`` is not used: it fires when the *thread* that spawned the
    worker exits, and loky may spawn workers from a thread that ends while the reusable
    executor lives on.
    """
    import threading

    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(
        target=_watch_parent, args=(parent,), name="convkit-watch-parent", daemon=True
    ).start()


def _joblib(tasks: list[dict], jobs: int) -> Iterator[dict]:
    from joblib import Parallel, delayed

    par = Parallel(
        n_jobs=jobs,
        backend="loky",
        return_as="generator_unordered",
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    try:
        yield from par(delayed(_execute)({**t, "threads": 1}) for t in tasks)
    finally:
        _release_workers()


def _release_workers() -> None:
    """Shut loky's reusable executor down, its workers with it.

    Loky keeps idle workers for 300 s, and a process that ran a sweep from a pool worker of
    its own (``convkit figures --jobs N`` runs each analysis so) does not end before they do:
    a fresh clone's ``make figures`` waited five minutes after its last analysis.  A later
    sweep starts new workers (about a second)."""
    from joblib.externals.loky import reusable_executor

    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)


def _dask(tasks: list[dict], jobs: int | None, scheduler: str | None) -> Iterator[dict]:
    import logging

    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        futures = [
            client.submit(
                _execute, {**t, "threads": 1}, key=f"convkit-sweep-{t['key']}", pure=False
            )
            for t in tasks
        ]
        for fut, res in as_completed(futures, with_results=True):
            fut.release()
            yield res
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
