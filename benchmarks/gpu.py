"""GPU check and throughput: CuPy against NumPy on the same settings, one prepared script.

Usage::

    python benchmarks/gpu.py [--backend cupy|numpy] [--sizes 1e6 1e7 1e8] [--quick]
                             [--dtype float64|float32] [--json PATH] [--latest PATH]

(a) **Agreement.** Local-SGD (``P = 4``, communication every 5 steps) and DeepSqueeze (ring
of 8, top-k with ``k = d/10``, ``eta = 0.5``) on least squares (Gaussian design, ``d = 20``,
flat spectrum, noise 1, constant step 0.02) run with NumPy and with ``--backend``.  The random
streams differ (CuPy draws with cuRAND; with ``--backend numpy`` the second run uses another
seed), so the final excess risks (last iterate and Polyak-Ruppert average) are compared
statistically: ``|mean_a - mean_b| <= 4 sqrt(se_a^2 + se_b^2)`` (independent runs).

(b) **Throughput**, in local steps x R x P per second (every worker's step counts, whatever
``d``), of ``convkit.simulate`` itself (sampling, step, worker mean, divergence check; two
record points), for Local-SGD (``comm="every:10"``) and DeepSqueeze (ring, top-k ``d/10``)
at ``R P d`` in ``--sizes`` with ``P = 16``, ``d = 100`` and ``R = size / (P d)``.  For each
size the NumPy (CPU) and the ``--backend`` throughput are measured side by side in this run
(a two-step warm-up run first, then enough steps for about two seconds by the warm-up's
pace, best of two where that is cheap); the GPU/CPU ratio is printed.  Sizes whose estimated memory (state, samples and
temporaries) exceeds half the machine's available memory are skipped on that side and
reported as skipped.  With ``--backend numpy`` there is no second library: the script checks
NumPy against NumPy and reports throughput only.

With ``--backend cupy`` the ratio at ``1e7`` is merged into ``--latest`` (default
``benchmarks/latest.json``, other keys kept) as ``gpu_vs_cpu_1e7`` (the smaller of the
Local-SGD and DeepSqueeze ratios; goal 30, higher is better), with the two ratios under
``gpu_vs_cpu_1e7_local_sgd`` and ``gpu_vs_cpu_1e7_deepsqueeze``.  ``--json PATH`` writes the
whole report.  The exit status is 1 when an agreement check fails.

Run time (estimated from this project's 2-core CPU, where NumPy makes about 1e5 worker-steps
of ``d = 100`` per second for Local-SGD and 4e4 for DeepSqueeze): about 5 minutes in all,
most of it the CPU side at ``1e8`` (five steps of each algorithm, 10-25 s each).
``--sizes 1e6 1e7`` takes about one minute.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # allow `python benchmarks/gpu.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


import convkit as ck
from convkit.algorithms.decentralized import DeepSqueeze
from convkit.backend import Backend
from convkit.topology import ring

HERE = Path(__file__).resolve().parent
P_THROUGHPUT, D_THROUGHPUT = 16, 100
GOAL_1E7 = 30.0


# --------------------------------------------------------------------------- settings


def _check_algorithms() -> list:
    step = ck.Constant(0.02)
    return [
        ck.LocalSGD(4, step, comm="every:5", name="local_sgd"),
        DeepSqueeze(ring(8), step, "top-k:0.1", 0.5, name="deepsqueeze"),
    ]


def _throughput_algorithm(kind: str):
    step = ck.Constant(0.005)  # gamma tr(H) = 0.5: stable for d = 100
    if kind == "local_sgd":
        return ck.LocalSGD(P_THROUGHPUT, step, comm="every:10", name=kind)
    return DeepSqueeze(ring(P_THROUGHPUT), step, "top-k:0.1", 0.5, name=kind)


def _bytes_needed(kind: str, size: int, itemsize: int) -> int:
    """Rough peak memory of one simulate call: state arrays, the sample block and about four
    full-size temporaries (gradient, compressor scores / mask, mixing output)."""
    arrays = (1 if kind == "local_sgd" else 3) + 2 + 4
    return int(arrays * size * itemsize)


def _available_bytes(backend: str) -> int:
    if backend == "cupy":  # pragma: no cover - needs a GPU
        import cupy

        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))


# --------------------------------------------------------------------------- (a) agreement


def agreement(backend: str, dtype: str, quick: bool) -> list[dict[str, Any]]:
    """Final excess risks of NumPy and ``backend`` runs, compared within 4 SE."""
    problem = ck.LeastSquares.gaussian(d=20, noise=1.0, seed=0)
    steps, R = (30, 100) if quick else (200, 1000)
    kw = dict(steps=steps, replicates=R, n_record=4, dtype=dtype)
    ref = ck.simulate(problem, _check_algorithms(), seed=1, **kw)
    other = ck.simulate(problem, _check_algorithms(), seed=2, backend=Backend(backend, dtype), **kw)
    rows = []
    for it in ("last", "avg"):
        a = ref.final("excess_risk", it).set_index("config")
        b = other.final("excess_risk", it).set_index("config")
        for cfg in a.index:
            diff = float(b.loc[cfg, "mean"] - a.loc[cfg, "mean"])
            se = float(math.hypot(a.loc[cfg, "se"], b.loc[cfg, "se"]))
            z = diff / se if se > 0 else (0.0 if diff == 0 else math.inf)
            rows.append(
                {
                    "algorithm": cfg,
                    "iterate": it,
                    "numpy": float(a.loc[cfg, "mean"]),
                    backend if backend != "numpy" else "numpy_seed2": float(b.loc[cfg, "mean"]),
                    "z": z,
                    "ok": bool(abs(z) <= 4.0),
                }
            )
    return rows


# --------------------------------------------------------------------------- (b) throughput


def _sync(backend: str) -> None:
    if backend == "cupy":  # pragma: no cover - needs a GPU
        import cupy

        cupy.cuda.Device().synchronize()


def _run(problem, kind: str, R: int, steps: int, backend: str, dtype: str) -> float:
    algo = _throughput_algorithm(kind)
    _sync(backend)
    t0 = time.perf_counter()
    ck.simulate(
        problem,
        algo,
        steps=steps,
        replicates=R,
        seed=0,
        n_record=1,
        backend=Backend(backend, dtype),
        dtype=dtype,
        memory_limit=1e15,  # one chunk: the size was checked against the memory already
        progress=False,
    )
    _sync(backend)
    return time.perf_counter() - t0


def throughput(kind: str, size: int, backend: str, dtype: str, target_s: float) -> dict[str, Any]:
    """Local steps x R x P per second of ``simulate`` on ``backend`` at ``R P d = size``."""
    R = max(1, size // (P_THROUGHPUT * D_THROUGHPUT))
    itemsize = 4 if dtype == "float32" else 8
    need = _bytes_needed(kind, R * P_THROUGHPUT * D_THROUGHPUT, itemsize)
    avail = _available_bytes(backend)
    if need > avail / 2:
        return {
            "skipped": f"needs about {need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB available "
            "(limit: half of it)"
        }
    problem = ck.LeastSquares.gaussian(d=D_THROUGHPUT, noise=1.0, seed=0)
    # warm-up: compiles kernels, allocates pools; 10 steps, one period of "every:10" (a
    # schedule refuses fewer local steps than its period)
    warm = _run(problem, kind, R, 10, backend, dtype)
    per_step = max(warm, 1e-6) / 10  # an overestimate (compilation included): fewer steps
    steps = int(min(500, max(10, math.ceil(target_s / per_step))))
    repeats = 2 if per_step * steps < 5.0 else 1
    best = min(_run(problem, kind, R, steps, backend, dtype) for _ in range(repeats))
    work = steps * R * P_THROUGHPUT
    return {
        "R": R,
        "P": P_THROUGHPUT,
        "d": D_THROUGHPUT,
        "steps": steps,
        "seconds": best,
        "warmup_seconds": warm,
        "throughput": work / best,
    }


# --------------------------------------------------------------------------- main


def _merge_latest(path: Path, entries: dict[str, dict]) -> None:
    previous = json.loads(path.read_text()) if path.exists() else {}
    previous.update(entries)
    path.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("cupy", "numpy"), default="cupy")
    p.add_argument("--sizes", nargs="+", type=float, default=None, help="R P d values")
    p.add_argument("--quick", action="store_true", help="small sizes and samples (seconds)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--json", default=None, help="write the whole report here")
    p.add_argument("--latest", default=str(HERE / "latest.json"), help="benchmark metrics file")
    args = p.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ([1e5] if args.quick else [1e6, 1e7, 1e8]))]
    target = 0.2 if args.quick else 2.0
    backend = args.backend
    Backend(backend, args.dtype)  # a clear error now if CuPy or the GPU is missing

    report: dict[str, Any] = {
        "backend": backend,
        "dtype": args.dtype,
        "quick": args.quick,
        "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count()},
    }
    if backend == "cupy":  # pragma: no cover - needs a GPU
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props.get("name", b"?")
        report["machine"]["gpu"] = (
            name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        )
        report["machine"]["cupy"] = cupy.__version__

    t0 = time.perf_counter()
    rows = agreement(backend, args.dtype, args.quick)
    report["agreement"] = rows
    print(f"(a) agreement, NumPy vs {backend} (independent streams; |z| <= 4 passes)")
    for r in rows:
        print(f"    {r['algorithm']:<12} {r['iterate']:<5} z = {r['z']:+6.2f}  ok={r['ok']}")
    print(f"    [{time.perf_counter() - t0:.1f} s]")

    print(f"(b) throughput, local steps x R x P per second (P={P_THROUGHPUT}, d={D_THROUGHPUT})")
    sides = ["numpy"] if backend == "numpy" else ["numpy", backend]
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in ("local_sgd", "deepsqueeze"):
        for size in sizes:
            entry: dict[str, Any] = {}
            for side in sides:
                entry[side] = throughput(kind, size, side, args.dtype, target)
            if backend != "numpy":
                a, b = entry["numpy"], entry[backend]
                if "throughput" in a and "throughput" in b:
                    entry["ratio"] = b["throughput"] / a["throughput"]
            results.setdefault(kind, {})[f"{size:.0e}"] = entry
            cells = []
            for side in sides:
                e = entry[side]
                cells.append(
                    f"{side}: {e['throughput']:.3g}/s"
                    if "throughput" in e
                    else f"{side}: skipped ({e['skipped']})"
                )
            if "ratio" in entry:
                cells.append(f"GPU/CPU = {entry['ratio']:.1f}x")
            print(f"    {kind:<12} R P d = {size:.0e}: " + ", ".join(cells), flush=True)
    report["throughput"] = results

    if backend == "cupy":  # pragma: no cover - needs a GPU
        at = {k: results[k].get("1e+07", {}).get("ratio") for k in results}
        if all(v is not None for v in at.values()):
            entries = {
                "gpu_vs_cpu_1e7": {
                    "value": float(min(at.values())),
                    "goal": GOAL_1E7,
                    "higher_is_better": True,
                },
                **{
                    f"gpu_vs_cpu_1e7_{k}": {
                        "value": float(v),
                        "goal": GOAL_1E7,
                        "higher_is_better": True,
                    }
                    for k, v in at.items()
                },
            }
            _merge_latest(Path(args.latest), entries)
            report["latest"] = entries
            print(f"gpu_vs_cpu_1e7 = {min(at.values()):.1f} (goal {GOAL_1E7:g}) -> {args.latest}")
    report["seconds"] = time.perf_counter() - t0
    print(f"[total {report['seconds']:.0f} s]")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
