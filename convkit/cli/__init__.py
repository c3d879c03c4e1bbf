"""The ``convkit`` command line: the dispatcher of its subcommands.

Subcommands (one module each, ``convkit.cli.<name>`` with ``main(argv) -> int``, imported only
when used):

* ``convkit figures [--quick] [--only NAME] [--out DIR]``: run every analysis in
  ``analyses/`` and write its figures, data (CSV) and the check table
  (:mod:`convkit.cli.figures`, pipeline in :mod:`convkit.figures`);
* ``convkit bounds``: print the library of theoretical results (:mod:`convkit.cli.bounds`);
* ``convkit check [--quick] [--json PATH|-] [--only NAME ...] [--module MODULE ...]``:
  theory-vs-simulation checks, the library's and a user's own module's, as a table
  (:mod:`convkit.cli.check`);
* ``convkit sweep SPEC.toml --out DIR [--jobs N] [--dask | --scheduler ADDR]``: parameter sweeps
  (:mod:`convkit.cli.sweep`);
* ``convkit simulate``: one Local-SGD run from the command line, printed as a table
  (:mod:`convkit.cli.simulate`);
* ``convkit map CLAIM --x NAME=lo:hi:n --y NAME=lo:hi:n [--module PATH]``: the regime map of a
  claim, its boundary located with an interval (:mod:`convkit.cli.map`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["main"]

# subcommand -> help; each is implemented by convkit.cli.<subcommand>.main(argv) -> int
_COMMANDS: dict[str, str] = {
    "bounds": "print the library of theoretical results",
    "check": "run the theory-vs-simulation checks",
    "sweep": "run a parameter sweep from a TOML spec",
    "figures": "reproduce every figure",
    "simulate": "one Local-SGD run printed as a table",
    "map": "draw the regime map of a claim (where it holds, where it stops)",
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``convkit`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        lines = ["usage: convkit COMMAND [options]", "", "commands:"]
        lines += [f"  {name:<10} {help_}" for name, help_ in _COMMANDS.items()]
        lines += ["", "Run `convkit COMMAND --help` for a command's options."]
        print("\n".join(lines))
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from convkit import __version__

        print(__version__)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in _COMMANDS:
        print(
            f"convkit: unknown command {name!r}; choose from {sorted(_COMMANDS)}", file=sys.stderr
        )
        return 2
    module = importlib.import_module(f"convkit.cli.{name}")
    try:
        return int(module.main(rest) or 0)
    except BrokenPipeError:
        # the reader closed the pipe (``convkit ... | head``): nothing more can be shown, and
        # Python's flush of stdout at exit must not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
