"""The ``convkit`` command line.

Subcommands (each implemented next to the code it drives, imported only when used):

* ``convkit figures [--quick] [--only NAME] [--out DIR]``: run every analysis in
  ``analyses/`` and write its figures, data (CSV) and the check table;
* ``convkit bounds``: print the library of theoretical results;
* ``convkit check [--quick] [--json PATH]``: theory-vs-simulation checks, as a table;
* ``convkit sweep SPEC.toml --out DIR [--jobs N] [--dask | --scheduler ADDR]``: parameter sweeps;
* ``convkit simulate``: one Local-SGD run from the command line, printed as a table.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

# subcommand -> (module, function, help); the function takes the remaining argv
_DELEGATED: dict[str, tuple[str, str, str]] = {
    "bounds": ("convkit.bounds.cli", "main", "print the library of theoretical results"),
    "check": ("convkit.check_cli", "main", "run the theory-vs-simulation checks"),
    "sweep": ("convkit.sweep", "main", "run a parameter sweep from a TOML spec"),
    "figures": ("convkit.figures", "main", "reproduce every figure"),
}


def _simulate_main(argv: Sequence[str]) -> int:
    import convkit as ck

    p = argparse.ArgumentParser(prog="convkit simulate", description="One Local-SGD run.")
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--spectrum", default="1/i")
    p.add_argument("--noise", type=float, default=1.0)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--comm", default="rounds:10", help="mba, osa, every:H or rounds:N")
    p.add_argument("--C", type=float, default=0.5)
    p.add_argument("--alpha", type=float, default=0.75)
    p.add_argument("--gradients", type=int, default=8 * 2000)
    p.add_argument("--replicates", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--metric", default="hnorm2")
    args = p.parse_args(list(argv))
    prob = ck.LeastSquares.gaussian(args.d, args.spectrum, args.noise, seed=args.seed)
    algo = ck.LocalSGD(args.workers, ck.PolyDecay(args.C, args.alpha), comm=args.comm)
    res = ck.simulate(
        prob, algo, gradients=args.gradients, replicates=args.replicates, seed=args.seed
    )
    cols = ["step", "gradients", "rounds", "mean", "se", "count"]
    print(res.curve(metric=args.metric, iterate="avg")[cols].to_string(index=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``convkit`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands: dict[str, tuple[Callable[[Sequence[str]], int] | None, str]] = {
        name: (None, help_) for name, (_, _, help_) in _DELEGATED.items()
    }
    commands["simulate"] = (_simulate_main, "one Local-SGD run printed as a table")
    if not argv or argv[0] in ("-h", "--help"):
        lines = ["usage: convkit COMMAND [options]", "", "commands:"]
        lines += [f"  {name:<10} {help_}" for name, (_, help_) in commands.items()]
        lines += ["", "Run `convkit COMMAND --help` for a command's options."]
        print("\n".join(lines))
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from convkit import __version__

        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in commands:
        print(f"convkit: unknown command {name!r}; choose from {sorted(commands)}", file=sys.stderr)
        return 2
    func = commands[name][0]
    if func is None:
        module, attr, _ = _DELEGATED[name]
        func = getattr(importlib.import_module(module), attr)
    return int(func(rest) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
