"""Progress bars for long loops (the figure analyses' cells, tuning calls): :func:`progress_bar`.

A bar is a ``tqdm`` bar on stderr, shown only where someone watches: when stderr is a
terminal and the process does not run under pytest (``PYTEST_CURRENT_TEST``, also set in the
subprocesses of a test).  ``CONVKIT_PROGRESS=1`` forces the bars on (also into a file or a
pipe), ``CONVKIT_PROGRESS=0`` off.  Without a bar, :func:`progress_bar` returns the iterable
itself, so a loop costs nothing more.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["progress_bar", "progress_enabled"]

_T = TypeVar("_T")


def progress_enabled(stream: Any = None) -> bool:
    """Whether progress bars are shown on ``stream`` (default ``sys.stderr``): the
    ``CONVKIT_PROGRESS`` setting (``1`` on, ``0`` off), otherwise a terminal outside pytest."""
    env = os.environ.get("CONVKIT_PROGRESS", "").strip().lower()
    if env in ("1", "true", "yes", "on"):
        return True
    if env in ("0", "false", "no", "off"):
        return False
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def progress_bar(
    items: Iterable[_T], desc: str, total: int | None = None, unit: str = "it"
) -> Iterable[_T] | Iterator[_T]:
    """``items`` wrapped in a tqdm bar on stderr when :func:`progress_enabled`, else ``items``
    itself.

    Parameters
    ----------
    items : iterable
        What the loop runs over.
    desc : str
        The bar's label (e.g. ``"local_sgd_large_steps cells"``).
    total : int or None
        The number of items (default ``len(items)`` where it has one).
    unit : str
        What one item is (``"cell"``).
    """
    if not progress_enabled():
        return items
    from tqdm import tqdm

    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    return tqdm(items, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False)
