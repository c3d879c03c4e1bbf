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
``'sgd.*'``). The exit code is 0 unless a check crashed (1) or the arguments are wrong (2, one
line on stderr): a ``violated`` verdict is a measured result, not an error. The ``--json`` path
is checked (its directory exists and is writable) before any check runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

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
    """Text of one table cell: numbers (Python or NumPy, also inside lists, tuples, arrays and
    dicts) with 6 significant digits, ``None`` as an empty cell, strings as they are."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        x = float(v)
        return str(x) if math.isnan(x) or math.isinf(x) else f"{x:.6g}"
    if isinstance(v, np.ndarray):
        return _cell(v.tolist()) if v.ndim else _cell(v.item())
    if isinstance(v, list):
        return "[" + ", ".join(_cell(x) if x is not None else "-" for x in v) + "]"
    if isinstance(v, tuple):
        inner = ", ".join(_cell(x) if x is not None else "-" for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_cell(x)}" for k, x in v.items())
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


def _json_target_problem(path: str) -> str | None:
    """Why ``path`` cannot receive the JSON rows (``None`` when it can): its directory must
    exist and be writable, and ``path`` must not be a directory or a read-only file."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        return f"{path} is a directory, not a file"
    if not parent.is_dir():
        return f"the directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the directory {parent} is not writable"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{path} exists and is not writable"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit check``; returns the exit code (2 for bad arguments, such as a
    ``--json`` path that cannot be written: checked before any check runs)."""
    args = _parser().parse_args(argv)
    if args.json:
        why = _json_target_problem(args.json)
        if why:
            print(
                f"convkit check: argument --json: cannot write {args.json}: {why}", file=sys.stderr
            )
            return 2
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
        try:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(out, fh, indent=1)
        except OSError as exc:  # checked up front; this is a late failure (disk full, ...)
            print(
                f"convkit check: argument --json: cannot write {args.json}: {exc}", file=sys.stderr
            )
            return 2
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
