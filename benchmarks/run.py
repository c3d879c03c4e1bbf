"""Run every benchmark (``make bench``): print a table and write ``benchmarks/latest.json``.

Each ``benchmarks/bench_*.py`` module exposes ``measure(quick=False) -> dict`` mapping a
metric name to ``{"value": x, "goal": g, "higher_is_better": bool}``.  Every value is a ratio
(or a time) measured side by side within one run, so the machine's noise cancels out as far
as possible; absolute times from different runs are never compared.

Every full run into the default ``latest.json`` is also recorded on its own in
``benchmarks/history/<YYYY-MM-DD>-<HHMMSS>.json`` (the metrics that run measured), so that the
README can state the range of each metric over the recorded runs (``tools/render_readme.py``).
``latest.json`` keeps the most recent value of every metric ever measured.

Usage: ``python -m benchmarks.run [--quick] [--only NAME ...] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
HISTORY = HERE / "history"


def _entry(v: dict) -> dict:
    goal = v["goal"]
    return {
        "value": float(v["value"]),
        "goal": None if goal is None or goal != goal else float(goal),
        "higher_is_better": bool(v["higher_is_better"]),
    }


def write_history(
    results: dict[str, dict],
    directory: Path = HISTORY,
    when: datetime | None = None,
    modules: list[str] | None = None,
) -> Path:
    """Record one run's metrics as ``directory/<YYYY-MM-DD>-<HHMMSS>.json``.

    Parameters
    ----------
    results : dict
        Metric name -> ``{"value", "goal", "higher_is_better"}`` as measured by this run.
    directory : Path
        The history directory (created if missing).
    when : datetime or None
        Time of the run (default now, UTC); a second run within the same second gets a
        ``-2``, ``-3``, ... suffix rather than overwriting.
    modules : list of str or None
        The benchmark modules that ran (recorded with the metrics).

    Returns
    -------
    Path
        The file written: ``{"recorded": ISO time, "modules": [...], "metrics": {...}}``.
    """
    when = when or datetime.now(UTC)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = when.strftime("%Y-%m-%d-%H%M%S")
    path, k = directory / f"{stem}.json", 2
    while path.exists():
        path, k = directory / f"{stem}-{k}.json", k + 1
    body = {
        "recorded": when.isoformat(timespec="seconds"),
        "modules": sorted(modules or {v.get("source", "") for v in results.values()} - {""}),
        "metrics": {k: _entry(v) for k, v in sorted(results.items())},
    }
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path


def discover() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (seconds, for tests)")
    p.add_argument("--only", nargs="*", default=None, help="bench modules to run (e.g. bench_core)")
    p.add_argument("--out", default=str(HERE / "latest.json"))
    args = p.parse_args(argv)
    names = args.only or discover()
    results: dict[str, dict] = {}
    failed = []
    for name in names:
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(f"benchmarks.{name}")
            got = mod.measure(quick=args.quick)
        except Exception:  # report and continue with the other benchmarks
            traceback.print_exc()
            failed.append(name)
            continue
        for metric, entry in got.items():
            results[metric] = {**entry, "source": name}
        print(f"[{name}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
    print(f"{'metric':<44} {'value':>12} {'goal':>10}  better  met")
    for metric, e in results.items():
        better = "higher" if e["higher_is_better"] else "lower"
        goal = e["goal"]
        if goal is None or goal != goal:  # informational entry (no goal)
            print(f"{metric:<44} {e['value']:>12.4g} {'-':>10}  {better:<6}  -")
            continue
        met = e["value"] >= goal if e["higher_is_better"] else e["value"] <= goal
        print(
            f"{metric:<44} {e['value']:>12.4g} {goal:>10.4g}  {better:<6}  {'yes' if met else 'NO'}"
        )
    if not args.quick or args.out != str(HERE / "latest.json"):
        out = Path(args.out)
        previous = json.loads(out.read_text()) if out.exists() else {}
        for k, v in results.items():
            previous[k] = _entry(v)
        out.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")
        if not args.quick and args.out == str(HERE / "latest.json") and results:
            print(f"recorded in {write_history(results, modules=names)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
