"""Run every benchmark (``make bench``): print a table and write ``benchmarks/latest.json``.

Each ``benchmarks/bench_*.py`` module exposes ``measure(quick=False) -> dict`` mapping a
metric name to ``{"value": x, "goal": g, "higher_is_better": bool}``.  Every value is a ratio
(or a time) measured side by side within one run, so the machine's noise cancels out as far
as possible; absolute times from different runs are never compared.

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
from pathlib import Path

HERE = Path(__file__).resolve().parent


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
            goal = v["goal"]
            previous[k] = {
                "value": float(v["value"]),
                "goal": None if goal is None or goal != goal else float(goal),
                "higher_is_better": bool(v["higher_is_better"]),
            }
        out.write_text(json.dumps(previous, indent=2, sort_keys=True) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
