"""``convkit check [--quick] [--json PATH] [--only NAME ...] [--list]``: run the
theory-vs-simulation checks registered by the topic modules of :mod:`convkit.bounds`
(:func:`convkit.bounds.run_checks`) and print a table with the columns result, setting,
measured, theoretical, verdict, reason.

Every verdict is one of :data:`convkit.verdicts.VERDICTS` (``holds``, ``violated``,
``consistent_unresolved``, ``not_identifiable``, ``inconclusive``, ``measured``, ``crashed``);
the reason is one sentence of detail. The summary line counts the rows per verdict.

``--json PATH`` also writes the rows as a JSON list of objects with the keys ``result``,
``setting``, ``measured``, ``theoretical``, ``verdict``, ``reason`` (plus ``check``,
``margin``, ``details`` and ``seconds`` where present). ``--only`` selects checks by check name
or library result name (exact, dotted prefix such as ``compression``, or a shell glob such as
``'sgd.*'``). The exit code is 0 unless a check crashed (or the arguments are wrong): a
``violated`` verdict is a measured result, not an error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["format_table", "main"]

COLUMNS = ("result", "setting", "measured", "theoretical", "verdict", "reason")
_WIDTHS = {
    "result": 38,
    "setting": 50,
    "measured": 14,
    "theoretical": 14,
    "verdict": 21,
    "reason": 50,
}


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.6g}"
    if isinstance(v, int):
        return str(v)
    return str(v)


def format_table(rows: Sequence[dict[str, Any]], width: dict[str, int] | None = None) -> str:
    """Plain-text table of the rows (long cells wrap inside their column)."""
    w = dict(_WIDTHS, **(width or {}))
    header = " | ".join(c.ljust(w[c]) for c in COLUMNS)
    lines = [header, "-+-".join("-" * w[c] for c in COLUMNS)]
    for r in rows:
        cells = [textwrap.wrap(_cell(r.get(c, "")), w[c]) or [""] for c in COLUMNS]
        for i in range(max(len(x) for x in cells)):
            lines.append(
                " | ".join(
                    (cells[j][i] if i < len(cells[j]) else "").ljust(w[c])
                    for j, c in enumerate(COLUMNS)
                ).rstrip()
            )
    return "\n".join(lines)


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    try:
        import numpy as np

        if isinstance(v, np.ndarray):
            return _jsonable(v.tolist())
        if isinstance(v, np.generic):
            return _jsonable(v.item())
    except ImportError:  # pragma: no cover
        pass
    return str(v)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="convkit check",
        description="Run the theory-vs-simulation checks: (measured, theoretical) pairs for "
        "every result of the library, with a verdict.",
    )
    p.add_argument("--quick", action="store_true", help="small settings (under 3 minutes)")
    p.add_argument("--json", metavar="PATH", help="also write the rows as a JSON list")
    p.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="check or result names (exact, dotted prefix or glob) to run",
    )
    p.add_argument("--list", action="store_true", help="list the checks and what they cover")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit check``; returns the exit code."""
    args = _parser().parse_args(argv)
    from convkit import bounds
    from convkit.verdicts import CRASHED, VERDICTS

    if args.list:
        for name in bounds.CHECKS:
            print(f"{name}: {', '.join(bounds.COVERS[name])}")
        return 0
    try:
        selected = bounds.select(args.only)
    except ValueError as exc:
        print(f"convkit check: {exc}", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    rows = bounds.run_checks(quick=args.quick, only=selected, progress=progress)
    elapsed = time.perf_counter() - t0
    print(format_table(rows))
    crashed = [r for r in rows if r["verdict"] == CRASHED]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no rows"
    print(
        f"\n{len(rows)} rows from {len(selected)} checks in {elapsed:.1f} s "
        f"({'quick' if args.quick else 'full'} mode): {summary}"
    )
    if args.json:
        out = [_jsonable(r) for r in rows]
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
        progress(f"wrote {args.json}")
    for r in crashed:
        print(
            f"\n{r['check']} crashed: {r.get('reason', '')}\n"
            f"{r.get('details', {}).get('traceback', '')}",
            file=sys.stderr,
        )
    return 1 if crashed else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
