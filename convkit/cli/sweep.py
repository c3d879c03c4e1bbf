"""The ``convkit sweep`` command line (also ``python -m convkit.sweep``): validate a TOML
spec, list its configurations (``--dry-run``) or run it and print the summary."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from convkit.cli._parser import OneLineParser
from convkit.sweep.cache import Cache
from convkit.sweep.errors import SpecError, SweepOutputError
from convkit.sweep.runner import check_output, run
from convkit.sweep.spec import MAX_CONFIGURATIONS, Sweep


def main(argv: Sequence[str] | None = None) -> int:
    """``convkit sweep SPEC.toml --out DIR [--jobs N] [--dask | --scheduler ADDR] [--quiet]
    [--overwrite] [--dry-run] [--max-configurations N]``.

    Exit status: 0 when every configuration succeeded, 1 when some failed, 2 for an invalid
    spec or command line, or an output directory that holds another sweep, is in use or is
    damaged.
    """
    p = OneLineParser(
        prog="convkit sweep",
        description="Run a parameter sweep from a TOML spec (cached, resumable, parallel).",
    )
    p.add_argument("spec", help="sweep specification (TOML)")
    p.add_argument("--out", required=True, help="output directory (frame, metadata, cache)")
    p.add_argument(
        "--jobs", type=int, default=None, help="processes (default: all cores; 1 = serial)"
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--dask", action="store_true", help="run on an embedded Dask LocalCluster")
    group.add_argument("--scheduler", default=None, help="address of a running Dask scheduler")
    p.add_argument("--cache", default=None, help="cache directory (default: OUT/cache)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the output of a different sweep found in --out",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="validate and list the configurations only"
    )
    p.add_argument(
        "--max-configurations",
        type=int,
        default=MAX_CONFIGURATIONS,
        metavar="N",
        help="refuse a spec of more than N configurations, counted before any is built "
        f"(default {MAX_CONFIGURATIONS})",
    )
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else 2
    if args.jobs is not None and args.jobs == 0:
        print("convkit sweep: --jobs must be a non-zero integer", file=sys.stderr)
        return 2
    if args.max_configurations < 1:
        print(
            f"convkit sweep: --max-configurations must be an integer >= 1, got "
            f"{args.max_configurations}",
            file=sys.stderr,
        )
        return 2
    try:
        sweep = Sweep.from_toml(args.spec, max_configurations=args.max_configurations)
    except SpecError as exc:
        print(f"convkit sweep: invalid spec: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        store = Cache(args.cache if args.cache else Path(args.out) / "cache")
        cached = sum(store.get(c.key, c.setting) is not None for c in sweep.configurations)
        print(f"{len(sweep)} configurations ({cached} cached), grid keys {sweep.grid_keys}")
        if not args.overwrite:
            try:
                check_output(Path(args.out), sweep, False)
            except SweepOutputError as exc:
                print(f"  note: running it would fail: {exc}")
        for c in sweep.configurations:
            print(f"  [{c.index}] {c.key[:12]} {c.params}")
        return 0
    try:
        result = run(
            sweep,
            args.out,
            jobs=args.jobs,
            dask=args.dask,
            scheduler=args.scheduler,
            cache=args.cache,
            progress=not args.quiet,
            overwrite=args.overwrite,
        )
    except SweepOutputError as exc:
        print(f"convkit sweep: {exc}", file=sys.stderr)
        return 2
    print(result.summary)
    return 0 if result.summary.ok else 1
