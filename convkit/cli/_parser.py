"""The argument parser of every ``convkit`` subcommand: a bad option is one line on stderr,
``PROG: message (see PROG --help)``, and exit code 2 (never a usage block or a traceback)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

__all__ = ["OneLineParser"]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
