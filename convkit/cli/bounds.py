"""``convkit bounds``: print the library of theoretical results (:mod:`convkit.bounds`).

Usage: ``convkit bounds [--latex] [--name NAME ...] [--kind KIND] [--json] [--list]``.
"""

from __future__ import annotations

import argparse
import json
import sys

from convkit.cli._parser import OneLineParser

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from convkit.bounds.core import KINDS

    p = OneLineParser(
        prog="convkit bounds",
        description="Print the library of results: expression, conditions, provenance.",
    )
    p.add_argument(
        "--name",
        action="append",
        default=None,
        metavar="NAME",
        help="only this result (repeatable); a trailing '*' matches a prefix",
    )
    p.add_argument("--kind", choices=KINDS, default=None, help="only results of this kind")
    p.add_argument("--latex", action="store_true", help="print the LaTeX statement too")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of text")
    p.add_argument(
        "--list",
        action="store_true",
        help="only list the names (fast; with --kind the results are built to read their kind)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 success, 2 unknown name)."""
    from convkit.bounds import get, names

    args = _parser().parse_args(argv)
    selected = names()
    if args.name:
        chosen = []
        for pattern in args.name:
            if pattern.endswith("*"):
                hits = [n for n in selected if n.startswith(pattern[:-1])]
            else:
                hits = [n for n in selected if n == pattern]
            if not hits:
                print(
                    f"convkit bounds: unknown result {pattern!r}; known: {', '.join(selected)}",
                    file=sys.stderr,
                )
                return 2
            chosen.extend(h for h in hits if h not in chosen)
        selected = chosen
    results = [get(n) for n in selected] if args.kind or not args.list else []
    if args.kind:
        results = [r for r in results if r.kind == args.kind]
        selected = [r.name for r in results]
    if args.list:
        print("\n".join(selected))
        return 0
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return 0
    for r in results:
        print(r.describe())
        if args.latex:
            print(f"  latex: {r.latex()}")
        print()
    print(f"{len(results)} result(s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
