"""The ``convkit figures`` command line: parse the options and run the figure pipeline of
:mod:`convkit.figures` (:func:`~convkit.figures.run_figures`) headless."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from convkit import figures as pipeline


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit figures``; returns the exit code (0 success, 1 some analysis
    failed, 2 bad analyses directory or unknown analysis names)."""
    import matplotlib

    matplotlib.use("Agg")
    p = argparse.ArgumentParser(
        prog="convkit figures", description=pipeline.__doc__.splitlines()[0]
    )
    p.add_argument("--quick", action="store_true", help="small settings (for tests)")
    p.add_argument("--only", nargs="*", default=None, help="analysis names to run")
    p.add_argument("--out", default=str(pipeline.REPO / "figures"), help="output directory")
    p.add_argument("--analyses", default=str(pipeline.REPO / "analyses"), help="analyses directory")
    p.add_argument(
        "--checks-only",
        action="store_true",
        help="simulate nothing: re-evaluate the checks on the data already in --out and "
        "rewrite checks.json and index.md",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run up to N analyses at once in separate processes (default 1; they are "
        "independent, so the outputs do not depend on N)",
    )
    args = p.parse_args(list(argv) if argv is not None else None)
    if args.jobs < 1:
        p.error(f"--jobs must be an integer >= 1, got {args.jobs}")
    return pipeline.run_figures(
        args.only,
        Path(args.out),
        args.quick,
        Path(args.analyses),
        checks_only=args.checks_only,
        jobs=args.jobs,
    )
