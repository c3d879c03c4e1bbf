"""Importing a user's module of claims or sweep kinds: a path to a ``.py`` file or a dotted
module name, one rule for ``convkit check --module`` and a sweep's ``imports``.

Layer 0 (the standard library only).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["describe_import_error", "import_user_module"]


def import_user_module(spec: str, again: bool = True) -> None:
    """Import the user's module ``spec``: a path to a ``.py`` file (an existing file, or a name
    ending in ``.py``) imported under its stem with its directory first on ``sys.path``, or a
    dotted module name imported with the current directory on ``sys.path`` (as
    ``python -m``). Raises ``ValueError`` saying why it cannot be imported, or what the module
    raises (a ``SyntaxError``, an ``ImportError``, ...: :func:`describe_import_error`).

    A file already imported from the same path is executed again when ``again`` (its
    registrations replace themselves: ``convkit check --module``), and left as it is
    otherwise (a sweep's ``imports``, imported once per process, as a dotted name is)."""
    path = Path(spec)
    if spec.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ValueError(f"{spec} is not a file")
        directory = str(path.resolve().parent)
        if directory not in sys.path:
            sys.path.insert(0, directory)
        name = path.stem
        known = sys.modules.get(name)
        if known is not None and getattr(known, "__file__", None) != str(path.resolve()):
            raise ValueError(
                f"a module named {name!r} is already imported ({getattr(known, '__file__', '')}); "
                f"rename {spec}"
            )
        if known is not None and not again:
            return
        loader_spec = importlib.util.spec_from_file_location(name, path.resolve())
        if loader_spec is None or loader_spec.loader is None:  # pragma: no cover
            raise ValueError(f"{spec} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    importlib.import_module(spec)


def describe_import_error(exc: BaseException) -> str:
    """One line on why a module could not be imported: the exception's type and message,
    and for a ``SyntaxError`` its file, line and the offending text."""
    if isinstance(exc, SyntaxError):
        text = (exc.text or "").strip()
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else f"line {exc.lineno}"
        return f"SyntaxError: {exc.msg} ({where}{': ' + text if text else ''})"
    return f"{type(exc).__name__}: {exc}"
