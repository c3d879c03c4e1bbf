"""The ``convkit figures`` command line: parse the options and run the figure pipeline of
:mod:`convkit.figures` (:func:`~convkit.figures.run_figures`) headless.

``convkit figures`` (what ``make figures`` runs) reproduces the committed set in ``figures/``;
``convkit figures --quick`` writes reduced-setting runs to the scratch directory
``figures-quick/`` (or ``--out DIR``) and never into ``figures/``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

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
    args = p.parse_args(argv)
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
    )
