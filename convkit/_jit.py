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

from typing import TypeVar

__all__ = ["cacheable"]

_T = TypeVar("_T")


def cacheable(helper: _T, name: str) -> _T:
    """``helper`` (a numba dispatcher or intrinsic) with the fixed identity ``convkit:name``;
    ``name`` must be unique within the package (module and function, e.g.
    ``"_fused_local.sigmoid"``)."""
    options = getattr(helper, "targetoptions", None)
    if isinstance(options, dict) and isinstance(options.get("fastmath"), (set, frozenset)):
        options["fastmath"] = {flag: True for flag in sorted(options["fastmath"])}
    try:
        helper._set_uuid(f"convkit:{name}")  # type: ignore[attr-defined]
    except (AttributeError, AssertionError):  # another numba, or an identity already given:
        pass  # still correct, only compiled once per process
    return helper
