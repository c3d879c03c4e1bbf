"""The ``convkit figures`` command line: parse the options and run the figure pipeline of
:mod:`convkit.figures` (:func:`~convkit.figures.run_figures`) headless.

``convkit figures`` (what ``make figures`` runs) reproduces the committed set in ``figures/``;
``convkit figures --quick`` writes reduced-setting runs to the scratch directory
``figures-quick/`` (or ``--out DIR``) and never into ``figures/``.  ``convkit figures --compare
DIR`` runs nothing: it compares the CSVs of ``DIR`` with the committed ones
(:mod:`convkit.figures_compare`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convkit import figures as pipeline
from convkit.cli._parser import OneLineParser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit figures``.

    Parameters
    ----------
    argv : sequence of str or None
        The options (default ``sys.argv[2:]``, after ``convkit figures``).

    Returns
    -------
    int
        Exit code: 0 success, 1 some analysis failed, 2 bad options (``--only`` without a
        name), an analyses directory without analyses, unknown analysis names, an output
        directory that cannot be written, ``--checks-only``/``--replot`` on a directory
        without the data, or a quick run aimed at the committed set (one line on stderr).
        With ``--compare DIR``: 0 every CSV within the tolerance, 1 something above it (or a
        CSV, column or row on one side only), 2 ``DIR`` is not a directory or has no CSV.
    """
    import sys

    import matplotlib

    matplotlib.use("Agg")
    argv = list(sys.argv[2:] if argv is None else argv)
    p = OneLineParser(prog="convkit figures", description=pipeline.__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"reduced settings; written to {pipeline.QUICK_OUT.name}/ unless --out is given, "
        "never into the committed figures/",
    )
    p.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NAME",
        help="analysis names to run (at least one; omit --only to run them all)",
    )
    p.add_argument(
        "--out",
        default=None,
        help=f"output directory (default {pipeline.COMMITTED.name}/, or "
        f"{pipeline.QUICK_OUT.name}/ with --quick)",
    )
    p.add_argument("--analyses", default=str(pipeline.REPO / "analyses"), help="analyses directory")
    p.add_argument(
        "--checks-only",
        action="store_true",
        help="simulate nothing: re-evaluate the checks on the data already in --out and "
        "rewrite checks.json and index.md",
    )
    p.add_argument(
        "--replot",
        action="store_true",
        help="simulate nothing: draw the figures again from the data already in --out and "
        "re-evaluate the checks",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run up to N analyses at once in separate processes (default 1; they are "
        "independent, so the outputs do not depend on N)",
    )
    p.add_argument(
        "--record-times",
        action="store_true",
        help="record this run's times in runs.json even for analyses whose data and checks "
        "came out as they were (how a fresh clone's times are recorded); without it such an "
        "analysis keeps its record, so rerunning where the data was made leaves git clean",
    )
    p.add_argument(
        "--compare",
        default=None,
        metavar="DIR",
        help="run nothing: compare every CSV of DIR with the committed one in figures/ (or "
        "--out DIR): the largest relative difference per CSV, and everything above --rtol; "
        "exit code 1 when something is above it",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=None,
        metavar="R",
        help="relative tolerance of --compare (default 1e-9; rounding differs across machines "
        "at about 1e-13)",
    )
    args = p.parse_args(argv)
    if args.compare is not None:
        return _compare(p, args)
    if args.rtol is not None:
        p.error("--rtol goes with --compare DIR")
    if args.jobs < 1:
        p.error(f"--jobs must be an integer >= 1, got {args.jobs}")
    if args.checks_only and args.replot:
        p.error("--checks-only and --replot exclude each other; choose one")
    out = Path(args.out) if args.out is not None else pipeline.default_out(args.quick)
    return pipeline.run_figures(
        args.only,
        out,
        args.quick,
        Path(args.analyses),
        checks_only=args.checks_only,
        jobs=args.jobs,
        replot=args.replot,
        command=shlex.join(["convkit", "figures", *argv]),
        record_times=args.record_times,
    )


def _compare(p: OneLineParser, args: Any) -> int:
    """``--compare DIR``: print the comparison with the reference (``--out`` or figures/)."""
    import sys

    from convkit import figures_compare as fc

    rtol = fc.RTOL if args.rtol is None else args.rtol
    if not rtol >= 0:
        p.error(f"--rtol must be a number >= 0, got {args.rtol}")
    new = Path(args.compare)
    ref = Path(args.out) if args.out is not None else pipeline.COMMITTED
    for d in (new, ref):
        if not d.is_dir():
            print(f"convkit figures: --compare: no directory {d}", file=sys.stderr)
            return 2
    if not any(new.glob("*.csv")):
        print(f"convkit figures: --compare: no CSV in {new}", file=sys.stderr)
        return 2
    diffs = fc.compare_dirs(new, ref, rtol=rtol, names=args.only)
    for line in fc.report(diffs, new, ref, rtol):
        print(line)
    return 1 if any(d.above for d in diffs) else 0
