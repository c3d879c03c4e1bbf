"""``convkit map CLAIM [--x NAME=lo:hi:n] [--y NAME=lo:hi:n] [--log-x] [--log-y] [--module PATH]
[--set NAME=VALUE ...] [--refine TOL | --no-refine] [--jobs N] [--dask | --scheduler ADDR]
[--out DIR] [--quick]``: draw the regime map of a claim (:mod:`convkit.maps`).

``CLAIM`` names a map claim: a module-level function or an object declared with
:func:`convkit.maps.map_claim` in a user's module (``--module``, a ``.py`` path or a dotted
name, imported as ``convkit check --module`` imports it; repeatable), or a built-in map
(:data:`convkit.maps.BUILTIN_MAPS`: ``woodworth``, ``osa_gap``). A plain function is read as
the claim "its measured quantity is below 1" and must return a :class:`convkit.maps.MapPoint`.

``--x`` and ``--y`` give the axes, ``NAME=lo:hi:n`` (``NAME`` a keyword of the point
function, ``n >= 2``), evenly spaced, or in ``log10`` with ``--log-x`` / ``--log-y`` (then
``lo > 0``); a declared claim's own axes are the default. ``--set NAME=VALUE`` fixes another
keyword (the value read as JSON, else as a string). ``--refine TOL`` locates the boundary by
bisection to ``TOL`` of each axis' span (default 0.01; ``--no-refine``: the grid only).
``--quick``: at most 4 values per axis and a tolerance of at least 0.1.

Every point runs through the sweep runner (cached in ``DIR/cache``: a second run reads the
cache; ``--jobs N`` processes, ``--dask`` an embedded Dask cluster, ``--scheduler`` a running
one). Writes ``DIR/map_<claim>_points.csv``, ``DIR/map_<claim>_crossings.csv`` and
``.json`` (each crossing's position and interval) and ``DIR/map_<claim>.png``, and prints the
crossings. Exit code 0, or 2 with one line on stderr for a bad argument (an unknown claim, an
axis that is not a parameter of the point function, a bad range) before any point runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convkit.cli._parser import OneLineParser
from convkit.user_modules import describe_import_error, import_user_module

__all__ = ["main"]

#: ``--quick``: the most values per axis and the coarsest tolerance
QUICK_N, QUICK_TOL = 4, 0.1


def _parser() -> OneLineParser:
    p = OneLineParser(prog="convkit map", description="Draw the regime map of a claim.")
    p.add_argument("claim", help="a map claim: built-in (woodworth, osa_gap) or of --module")
    p.add_argument("--x", help="x axis NAME=lo:hi:n (default: the claim's own)")
    p.add_argument("--y", help="y axis NAME=lo:hi:n (default: the claim's own)")
    p.add_argument("--log-x", action="store_true", help="log-spaced x values (lo > 0)")
    p.add_argument("--log-y", action="store_true", help="log-spaced y values (lo > 0)")
    p.add_argument("--module", action="append", default=[], help="a user's module (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a fixed keyword setting of the point function (repeatable)")  # fmt: skip
    p.add_argument("--refine", type=float, default=0.01, help="bisection tolerance (fraction)")
    p.add_argument("--no-refine", action="store_true", help="the grid only, no boundary")
    p.add_argument("--jobs", type=int, default=1, help="parallel processes (-1: all cores)")
    p.add_argument("--dask", action="store_true", help="run on an embedded Dask cluster")
    p.add_argument("--scheduler", help="address of a running Dask scheduler")
    p.add_argument("--out", help="output directory (default map-CLAIM)")
    p.add_argument("--quick", action="store_true", help="a small grid and a coarse tolerance")
    return p


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _settings(items: Sequence[str], parser: OneLineParser) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip().isidentifier():
            parser.error(f"--set {item!r}: write NAME=VALUE with NAME a keyword")
        out[name.strip()] = _value(value)
    return out


def _modules(specs: Sequence[str], parser: OneLineParser) -> list[Any]:
    mods = []
    for spec in specs:
        try:
            before = set(sys.modules)
            import_user_module(spec)
        except (Exception, SystemExit) as exc:  # the user's code: any failure is reported
            parser.error(f"--module {spec}: cannot import it: {describe_import_error(exc)}")
        name = Path(spec).stem if spec.endswith(".py") or Path(spec).is_file() else spec
        mod = sys.modules.get(name)
        if mod is None:  # pragma: no cover - imported under another name
            new = [m for m in set(sys.modules) - before]
            mod = sys.modules[new[-1]] if new else None
        mods.append(mod)
    return mods


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit map``."""
    from convkit.maps import find_claim, parse_axis, run_map
    from convkit.maps.point import Axis

    parser = _parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    mods = _modules(args.module, parser)
    settings = _settings(args.set, parser)
    try:
        claim = find_claim(args.claim, mods)
        x = parse_axis(args.x, args.log_x) if args.x else claim.x
        y = parse_axis(args.y, args.log_y) if args.y else claim.y
        if x is None or y is None:
            raise ValueError(f"map claim {claim.name!r} declares no default axes: give --x and --y")
        refine = None if args.no_refine else args.refine
        if args.quick:
            x, y = (Axis(a.name, a.lo, a.hi, min(a.n, QUICK_N), a.log) for a in (x, y))
            refine = None if refine is None else max(refine, QUICK_TOL)
        if args.dask and args.scheduler:
            raise ValueError("give --dask (embedded cluster) or --scheduler ADDR, not both")
        out = Path(args.out or f"map-{claim.name}")
        res = run_map(
            claim, x, y, settings=settings, out=out, refine=refine, jobs=args.jobs,
            dask=args.dask, scheduler=args.scheduler, imports=list(args.module),
        )  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    paths = res.write(out)
    s = res.summary
    print(
        f"convkit map {claim.name}: {s['points']} points ({s.get('computed', 0)} computed, "
        f"{s.get('cached', 0)} from the cache, {s.get('failed', 0)} failed) in "
        f"{s['seconds']:.1f} s; {s['crossings']} boundary crossings"
    )
    if len(res.crossings):
        cols = ["along", "fixed_name", "fixed", "from_verdict", "to_verdict", "position",
                "interval_lo", "interval_hi"]  # fmt: skip
        print(res.crossings[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for p in paths:
        print(f"wrote {p}")
    return 0
