"""Stable identities for compiled helpers, so that the kernels which call them are cached.

numba's on-disk cache (``cache=True``) keys a compiled function by its signature, its
bytecode and the pickled contents of its closure.  The kernels of this package are built in
factory functions (numba is imported only when a kernel is first needed), so the helpers
they call (a sigmoid, a compensated sum, a selection pass) are closure variables, and a
numba dispatcher or intrinsic pickles with a random per-process identity (a ``uuid``).
Every new process then missed the cache: each kernel was compiled again (2-4 s for the
fused Local-SGD segment, measured) and one more entry was written to ``__pycache__``.

:func:`cacheable` gives a helper a fixed identity derived from its name, and writes its
fast-math flags as a dict in sorted order: a ``set`` of flag names pickles in an order that
depends on the process's string hashing (``PYTHONHASHSEED``).  The pickle of a helper still
holds its Python function by value (code and constants), so a kernel is recompiled when a
helper it calls changes, also in another file (``tests/test_jit_cache.py``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TypeVar

__all__ = ["cacheable", "compile_seconds", "compile_notice_enabled", "watch_compilation"]

_T = TypeVar("_T")


def cacheable(helper: _T, name: str) -> _T:
    """``helper`` (a numba dispatcher or intrinsic) with the fixed identity ``convkit:name``;
    ``name`` must be unique within the package (module and function, e.g.
    ``"_fused_local.sigmoid"``)."""
    watch_compilation()
    options = getattr(helper, "targetoptions", None)
    if isinstance(options, dict) and isinstance(options.get("fastmath"), (set, frozenset)):
        options["fastmath"] = {flag: True for flag in sorted(options["fastmath"])}
    try:
        helper._set_uuid(f"convkit:{name}")  # type: ignore[attr-defined]
    except (AttributeError, AssertionError):  # another numba, or an identity already given:
        pass  # still correct, only compiled once per process
    return helper


# ---------------------------------------------------------------- the first compilation, said once
#: The estimate in the compile notice, in seconds, rounded up from a measurement: the workload
#: of ``tests/test_jit_cache.py`` (every family of kernels: least squares, logistic, top-k,
#: finite sums, the exact engine) spent 7.7 s compiling from an empty cache
#: (``NUMBA_CACHE_DIR`` fresh, 2 shared cores, 2026-12-05); one getting-started ``simulate``
#: 1.5 s, one logistic ``simulate`` 2.8 s.
COMPILE_SECONDS = 10

_LOCK = threading.Lock()
_clock = time.perf_counter  # the compile timer (a test replaces it)
_STATE: dict[str, Any] = {"installed": False, "said": False, "depth": 0, "t0": 0.0, "seconds": 0.0}


def compile_notice_enabled() -> bool:
    """Whether the compile notice is printed: ``CONVKIT_COMPILE_NOTICE=1`` forces it on, ``=0``
    off; otherwise on, except under pytest (``PYTEST_CURRENT_TEST`` set, also in the
    subprocesses of a test), where a test asks for it explicitly."""
    env = os.environ.get("CONVKIT_COMPILE_NOTICE")
    if env is not None and env.strip() != "":
        return env.strip() not in ("0", "false", "no", "off")
    return "PYTEST_CURRENT_TEST" not in os.environ


def compile_notice() -> str:
    """The line printed before the first kernel compilation of a process."""
    return (
        f"convkit: compiling kernels, first run only, about {COMPILE_SECONDS} s "
        "(numba caches them in __pycache__ for later runs)"
    )


def compile_seconds() -> float:
    """Seconds this process has spent compiling numba kernels so far (outermost compilations
    only, a kernel's helpers compiled inside it counted once; loads from the cache are not
    compilations)."""
    with _LOCK:
        extra = _clock() - _STATE["t0"] if _STATE["depth"] else 0.0
        return float(_STATE["seconds"] + extra)


def _on_start() -> None:
    with _LOCK:
        _STATE["depth"] += 1
        if _STATE["depth"] > 1:
            return
        _STATE["t0"] = _clock()
        say = not _STATE["said"]
        _STATE["said"] = True
    if say and compile_notice_enabled():
        print(compile_notice(), file=sys.stderr, flush=True)


def _on_end() -> None:
    with _LOCK:
        _STATE["depth"] = max(0, _STATE["depth"] - 1)
        if _STATE["depth"] == 0:
            _STATE["seconds"] += _clock() - _STATE["t0"]


def watch_compilation() -> None:
    """Listen (once per process) to numba's ``"numba:compile"`` events: the first one prints
    :func:`compile_notice` on stderr (when :func:`compile_notice_enabled`), and every
    compilation's time is added to :func:`compile_seconds`.  Does nothing without numba."""
    if _STATE["installed"]:
        return
    try:
        from numba.core import event
    except ImportError:  # numba is optional
        return

    class _Listener(event.Listener):  # type: ignore[misc]
        def on_start(self, ev: Any) -> None:
            _on_start()

        def on_end(self, ev: Any) -> None:
            _on_end()

    with _LOCK:
        if _STATE["installed"]:
            return
        _STATE["installed"] = True
    event.register("numba:compile", _Listener())
