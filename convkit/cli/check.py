"""``convkit check [--quick] [--json PATH] [--only NAME ...] [--module MODULE ...] [--list]``:
run the theory-vs-simulation checks registered by the topic modules of :mod:`convkit.bounds`
(:func:`convkit.bounds.run_checks`) and print a table with the columns result, setting,
measured, theoretical, verdict, reason.

Every verdict is one of :data:`convkit.verdicts.VERDICTS` (``holds``, ``violated``,
``consistent_unresolved``, ``not_identifiable``, ``inconclusive``, ``measured``, ``crashed``);
the reason is one sentence of detail. The summary line counts the rows per verdict.

``--json PATH`` also writes the rows as a JSON list of objects with the keys ``result``,
``setting``, ``measured``, ``theoretical``, ``verdict``, ``reason`` (plus ``check``,
``margin``, ``details`` and ``seconds`` where present); ``--json -`` writes them to standard
output, and the table and summary then go to standard error, so that the output can be piped
(``convkit check --json - | jq``); with ``--list`` the JSON is the list of checks, objects
with the keys ``check`` and ``covers``. ``--only`` selects checks by check name or library result
name (exact, dotted prefix such as ``compression``, or a shell glob such as ``'sgd.*'``).

``--module MODULE`` (repeatable) first imports a user's module, a path to a ``.py`` file
(``my_claims.py``; its directory goes first on ``sys.path``, as for ``python my_claims.py``)
or a dotted module name importable from the current directory (``mypkg.claims``), whose
``@result`` and ``@register_check`` decorators add its claims to the registry; without
``--only`` the checks that the module registered are the ones run. A module that cannot be
imported, that calls ``sys.exit`` while imported, or that registers no check, is an argument
error.

Before any check runs, every result that a user's module registered and every result that a
selected check covers is built and validated (:func:`convkit.bounds.registry.validate_checks`):
an unknown ``kind``, a factory returning a result of another name, an undefined expression
(``gamma / 0``) or a covered name that is not registered is an argument error naming the
result, even when the check never calls ``get``.

The exit code is 0 unless a check crashed (1) or the arguments are wrong (2, one line on
stderr): a ``violated`` verdict is a measured result, not an error. The ``--json`` path is
checked (its directory exists and is writable) before any check runs.
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

from convkit.user_modules import describe_import_error, import_user_module

__all__ = ["format_table", "import_user_module", "main"]

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
    p.add_argument(
        "--json",
        metavar="PATH",
        help="also write the rows as a JSON list ('-': to standard output, the table to stderr)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help="check or result names (exact, dotted prefix or glob) to run",
    )
    p.add_argument(
        "--module",
        action="append",
        metavar="MODULE",
        help="import a module of your own claims first (a .py path or a dotted name) and run "
        "its checks (repeatable)",
    )
    p.add_argument("--list", action="store_true", help="list the checks and what they cover (as JSON with --json)")
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


def _import_modules(
    specs: Sequence[str], checks: dict[str, Any], library: dict[str, Any] | None = None
) -> tuple[list[str], str, list[str]]:
    """Import every module of ``specs``; returns the names of the checks they registered (or
    replaced), an error line (empty when all went well) and the names of the results (of
    ``library``) they registered or replaced."""
    registered: list[str] = []
    library = {} if library is None else library
    results: list[str] = []
    for spec in specs:
        before = dict(checks)
        before_results = dict(library)
        try:
            import_user_module(spec)
        except SystemExit as exc:
            code = "" if exc.code is None else repr(exc.code)
            return (
                registered,
                f"argument --module: {spec} called sys.exit({code}) "
                f"while being imported; a module of claims only defines results and checks "
                f"(move a script's code under if __name__ == '__main__':)",
                results,
            )
        except Exception as exc:  # noqa: BLE001 - any failure of the user's code is reported
            return (
                registered,
                f"argument --module: cannot import {spec}: {describe_import_error(exc)}",
                results,
            )
        results += [n for n in library if before_results.get(n) is not library[n]]
        new = [n for n in checks if before.get(n) is not checks[n]]
        if not new:
            return (
                registered,
                f"argument --module: {spec} registers no check (decorate a function with "
                f"convkit.bounds.register_check)",
                results,
            )
        registered += [n for n in new if n not in registered]
    return registered, "", results


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit check``; returns the exit code (2 for bad arguments, such as a
    ``--json`` path that cannot be written: checked before any check runs)."""
    args = _parser().parse_args(argv)
    to_stdout = args.json == "-"
    if args.json and not to_stdout:
        why = _json_target_problem(args.json)
        if why:
            print(
                f"convkit check: argument --json: cannot write {args.json}: {why}", file=sys.stderr
            )
            return 2
    from convkit import bounds
    from convkit.bounds import registry
    from convkit.verdicts import CRASHED, VERDICTS

    user_checks: list[str] = []
    user_results: list[str] = []
    if args.module:
        user_checks, error, user_results = _import_modules(
            args.module, bounds.CHECKS, bounds.LIBRARY
        )
        if error:
            print(f"convkit check: {error}", file=sys.stderr)
            return 2
    if args.list:
        listing = [{"check": n, "covers": list(bounds.COVERS[n])} for n in bounds.CHECKS]
        if to_stdout:
            json.dump(listing, sys.stdout, indent=1)
            print(flush=True)
            return 0
        if args.json:
            try:
                with open(args.json, "w", encoding="utf-8") as fh:
                    json.dump(listing, fh, indent=1)
            except OSError as exc:  # checked up front; a late failure (disk full, ...)
                print(
                    f"convkit check: argument --json: cannot write {args.json}: {exc}",
                    file=sys.stderr,
                )
                return 2
        for item in listing:
            print(f"{item['check']}: {', '.join(item['covers'])}")
        return 0
    try:
        selected = user_checks if args.module and not args.only else bounds.select(args.only)
        registry.validate_results(user_results)
        registry.validate_checks(selected)
    except ValueError as exc:
        print(f"convkit check: {exc}", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    rows = bounds.run_checks(quick=args.quick, only=selected, progress=progress)
    elapsed = time.perf_counter() - t0
    table_out = sys.stderr if to_stdout else sys.stdout
    print(format_table(rows), file=table_out)
    crashed = [r for r in rows if r["verdict"] == CRASHED]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n) or "no rows"
    print(
        f"\n{len(rows)} rows from {len(selected)} checks in {elapsed:.1f} s "
        f"({'quick' if args.quick else 'full'} mode): {summary}",
        file=table_out,
    )
    if to_stdout:
        json.dump([_jsonable(r) for r in rows], sys.stdout, indent=1)
        print(flush=True)
    elif args.json:
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
