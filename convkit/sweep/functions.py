"""The ``function`` setting of a sweep: a configuration that calls a module-level function
with keyword settings instead of :func:`convkit.simulate`.

A function setting is a table ``function`` with

``module``
    the module that defines the function (a dotted name; a user's ``.py`` file is imported
    under its stem through the sweep's ``imports``, as :func:`convkit.user_modules.import_user_module`
    does for ``convkit check --module``);
``name``
    the function's qualified name in that module (``"ratio_point"``, or ``"Cls.method"``);
``version``
    a string the function's author changes when the function's numbers change (default
    ``"0"``): it is part of the cache key, so a changed function is recomputed;
``args``
    the keyword settings of the call (a table of JSON values: numbers, strings, booleans,
    lists and tables of them).

Example (a sweep over ``a``)::

    {"seed": 0, "function": {"module": "mymod", "name": "f", "args": {"b": 2}},
     "grid": {"function.args.a": [1.0, 2.0]}}

The configuration's cache key is that of every sweep configuration (sha256 of the canonical
JSON of the setting, the sweep seed, convkit's version and the cache format,
:func:`convkit.sweep.spec.config_key`), so it is determined by the function's module and
qualified name, its version string and its settings; the entry is verified and rewritten
like any other (:class:`convkit.sweep.cache.Cache`), a run killed with SIGKILL resumes from
the committed entries, and the executors (serial, joblib, Dask) run it unchanged.

The function returns one record: a mapping of column -> value, or an object with an
``as_record()`` method returning one (:class:`convkit.maps.MapPoint` declares it), or a
``pandas.DataFrame`` of several rows. It becomes the configuration's result frame.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pandas as pd

from convkit.result import json_default
from convkit.sweep.cache import frame_to_bytes
from convkit.sweep.errors import _Context, _suggest, _type_name
from convkit.user_modules import import_user_module

__all__ = ["FUNCTION_KEYS", "execute_function", "normalize_function_setting", "resolve_function"]

#: the keys of a ``function`` table
FUNCTION_KEYS = ("module", "name", "version", "args")


def _check_json(value: Any, path: tuple, ctx: _Context) -> Any:
    """``value`` if it is a JSON value with finite numbers (inside lists and tables too)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ctx.error(f"must be a finite number, got {value!r}", path)
        return value
    if isinstance(value, list | tuple):
        return [_check_json(v, (*path, i), ctx) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {str(k): _check_json(v, (*path, k), ctx) for k, v in value.items()}
    raise ctx.error(
        f"must be a JSON value (number, string, boolean, array or table), got {value!r} "
        f"({_type_name(value)})",
        path,
    )


def normalize_function_setting(raw: Mapping[str, Any], ctx: _Context) -> dict[str, Any]:
    """The canonical form of a function setting ``{"function": {...}}`` (module docstring),
    or :class:`convkit.sweep.SpecError` naming the key, the value and what is allowed."""
    extra = [k for k in raw if k != "function"]
    if extra:
        raise ctx.error(
            f"a function setting has only the table 'function'; got also {extra} (a function "
            "setting runs no simulation: put its settings under function.args)",
            (extra[0],),
        )
    fn = raw["function"]
    if not isinstance(fn, dict):
        raise ctx.error(f"must be a table, got {fn!r} ({_type_name(fn)})", ("function",))
    for key in fn:
        if key not in FUNCTION_KEYS:
            raise ctx.error(
                f"unknown key {key!r} in the function table; allowed: {list(FUNCTION_KEYS)}"
                f"{_suggest(key, FUNCTION_KEYS)}",
                ("function", key),
            )
    out: dict[str, Any] = {}
    for key in ("module", "name"):
        v = fn.get(key)
        if not isinstance(v, str) or not v:
            raise ctx.error(
                f"must be a non-empty string (the function's {key}), got {v!r}", ("function", key)
            )
        out[key] = v
    if "<locals>" in out["name"] or "<lambda>" in out["name"]:
        raise ctx.error(
            f"{out['name']!r} is not a module-level name: a sweep calls a function by its module "
            "and qualified name, so define it at the top level of a module",
            ("function", "name"),
        )
    version = fn.get("version", "0")
    if not isinstance(version, str):
        raise ctx.error(f"must be a string, got {version!r}", ("function", "version"))
    out["version"] = version
    args = fn.get("args", {})
    if not isinstance(args, dict):
        raise ctx.error(f"must be a table, got {args!r}", ("function", "args"))
    out["args"] = _check_json(args, ("function", "args"), ctx)
    return {"function": out}


def resolve_function(module: str, name: str) -> Callable[..., Any]:
    """The object ``module``.``name`` (``name`` may be dotted), imported if needed; raises
    ``ValueError`` naming what is missing."""
    mod = sys.modules.get(module)
    if mod is None:
        mod = importlib.import_module(module)
    obj: Any = mod
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module!r} has no attribute {name!r} (missing {part!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"{module}.{name} is not callable ({type(obj).__name__})")
    return obj


def result_frame(value: Any) -> pd.DataFrame:
    """The result frame of one function call (module docstring: a mapping, an object with
    ``as_record()``, or a DataFrame)."""
    record = value.as_record() if hasattr(value, "as_record") else value
    if isinstance(record, pd.DataFrame):
        return record.reset_index(drop=True)
    if isinstance(record, Mapping):
        return pd.DataFrame([dict(record)])
    raise TypeError(
        "a sweep function must return a mapping of column -> value, an object with "
        f"as_record(), or a DataFrame; got {type(value).__name__}"
    )


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    """Within: ``CONVKIT_THREADS = threads`` when given (a parallel executor runs one call
    per worker process, each :func:`convkit.simulate` of the call on that many threads; the
    numbers do not depend on it), restored after."""
    if threads is None:
        yield
        return
    old = os.environ.get("CONVKIT_THREADS")
    os.environ["CONVKIT_THREADS"] = str(int(threads))
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CONVKIT_THREADS", None)
        else:
            os.environ["CONVKIT_THREADS"] = old


def execute_function(task: Mapping[str, Any]) -> dict[str, Any]:
    """Run one function configuration (in any process); never raises. The same result shape
    as :func:`convkit.sweep.executors._execute`."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"index": task["index"], "key": task["key"]}
    try:
        for mod in task.get("imports", ()):
            import_user_module(mod, again=False)
        fn = task["setting"]["function"]
        obj = resolve_function(fn["module"], fn["name"])
        with _threads(task.get("threads")):
            frame = result_frame(obj(**fn["args"]))
        seconds = time.perf_counter() - t0
        meta = {"timing": {"seconds": seconds}, "function": f"{fn['module']}:{fn['name']}"}
        out.update(
            ok=True,
            payload=frame_to_bytes(frame, task["format"]),
            format=task["format"],
            meta=json.loads(json.dumps(meta, default=json_default)),
        )
    except Exception as exc:
        out.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    out["seconds"] = time.perf_counter() - t0
    return out
