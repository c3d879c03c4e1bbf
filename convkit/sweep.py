"""Parameter sweeps: declarative grids, a content-addressed cache, resume, parallel and
cluster execution.

A sweep is a **base setting** plus **grids**.  The setting describes one call of
:func:`convkit.simulate`::

    seed = 1                         # sweep seed: every configuration's seed derives from it
    gradients = 4096                 # or steps = n (local steps)
    replicates = 50

    [problem]
    kind = "least_squares"
    design = "gaussian"
    d = 20
    spectrum = "1/i"
    noise = 1.0

    [algorithm]                      # or algorithms = [{...}, {...}] (common random numbers)
    kind = "local_sgd"
    workers = 8
    comm = "rounds:10"
    step = {kind = "poly", C = 0.5, alpha = 0.75}

    [record]                         # optional
    n_record = 20
    iterates = ["avg", "last"]       # keep only these rows (default: all)

    [grid]                           # cross product of every key
    "algorithm.workers" = [2, 4, 8]
    "algorithm.step.C" = [0.25, 0.5]

    [[zip]]                          # a zipped group: its lists vary together
    "algorithm.comm" = ["mba", "rounds:10", "osa"]
    "record.n_record" = [10, 20, 30]

Grid keys address nested fields with dots (``"algorithms.0.workers"`` for a list).  The
configurations are the cross product of the grid keys (in the order written) and the zipped
groups; the last axis varies fastest.  The same structure as a Python dict gives the same sweep
(:meth:`Sweep.from_dict`).

Objects are built through a small **registry of kinds** (:func:`register`): categories
``problem``, ``algorithm``, ``step``, ``comm`` (built in), ``topology`` and ``compressor`` (from
:mod:`convkit.topology` / :mod:`convkit.compression`), and, when those modules exist,
logistic / finite-sum problems and decentralized algorithms (registered lazily on first use,
from the :class:`~convkit.problems.base.Problem` and
:class:`~convkit.algorithms.base.Algorithm` subclasses they export, under their snake-case
class names; a problem's public classmethod constructors also as ``<kind>_<method>``, e.g.
``logistic_regression_gaussian``, alias ``logistic``).  A kind's parameters, their types and
defaults come from an explicit schema or from the builder's signature.  Kinds registered by
user code must be importable in worker processes: list their modules under ``imports``.  Every configuration is normalised (defaults filled in, numbers
coerced, ``comm = "rounds:10"`` written as ``{kind = "rounds", N = 10}``) before it is hashed,
so equivalent spellings share one cache entry.

**Errors.**  Unknown keys, unknown kinds, empty or duplicated grids, zipped groups of unequal
length and wrong types raise :class:`SpecError`, which names the key and, for a TOML file, the
line.  Range errors raised by the constructors themselves (``alpha = 2``) are reported per
configuration at run time: that configuration fails, the others continue.

**Seeds.**  Configuration ``c`` runs with seed
``derive_seed(sweep_seed, setting_c without "record").generate_state(1)[0]``
(:func:`convkit.backend.derive_seed`), so it does not depend on the executor, on the order of
execution or on the record options.

**Cache** (:class:`Cache`).  Each configuration's result is stored under
``sha256(sorted JSON of {setting, sweep seed, convkit version, cache format})``, as two files in
``<cache>/<key[:2]>/``: ``<key>.parquet`` (the result frame; CSV when pyarrow is missing) and
``<key>.json`` (one line of canonical JSON: configuration, seed, ``Result.meta``, the payload's
size and sha256; then a line ``sha256:<digest of that line>``).  Both are written atomically
(temporary file in the same directory, ``os.replace``), payload first, and the record is
fsynced before its rename: the record is the commit marker.  On read every checksum is
verified; a missing, truncated or altered file makes the entry invalid and it is recomputed,
never used.  Nothing is unpickled.

**Who writes the cache.**  Workers (joblib processes, Dask workers, possibly on machines
without the output disk) return the serialised payload to the parent, and the parent writes
each entry as soon as its result arrives (``return_as="generator_unordered"`` with joblib,
``as_completed`` with Dask).  A sweep killed with SIGKILL loses only the configurations that
were running (with joblib, which batches short tasks automatically, those of the batches in
flight); a restart reuses every committed entry.  If the executor itself fails (a worker killed
by the OS, a lost cluster), what arrived is committed and the rest is reported as failed.

**Executors.**  ``jobs=1``: serial in-process; otherwise joblib (loky processes; ``jobs=None``
or ``-1``, the default, uses all cores); ``dask=True``: an embedded :class:`distributed.LocalCluster` (processes);
``scheduler="tcp://host:port"``: a running Dask cluster.  Results are bit-for-bit identical.

**Output.**  ``<out>/frame.parquet`` (CSV without pyarrow): the result frames of all
configurations, in configuration order, with the columns ``config_id``, ``config_key``, one
column per grid key (named by the key; ``grid.<key>`` if it collides with a result column;
tables and lists as JSON text) and the :data:`convkit.result.FRAME_COLUMNS`.  ``<out>/sweep.json``:
the spec, every configuration with its status, the summary and versions.  :func:`load` reads
both back.  The CLI is :func:`main` (``convkit sweep`` / ``python -m convkit.sweep``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import hashlib
import importlib
import inspect
import io
import itertools
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "Cache",
    "Configuration",
    "Kind",
    "Param",
    "SpecError",
    "Sweep",
    "SweepResult",
    "SweepSummary",
    "build",
    "kinds",
    "load",
    "load_spec",
    "main",
    "register",
    "run",
]

#: bump when the cache layout or the payload changes meaning
CACHE_FORMAT = 1
_REQUIRED = object()
#: default of a signature parameter whose default is not JSON: left to the builder
_OMIT = object()


# =====================================================================================
# errors and TOML positions
# =====================================================================================
class SpecError(ValueError):
    """An invalid sweep specification.

    Attributes ``key`` (dotted key, or None), ``line`` (1-based line in the TOML file, or
    None) and ``source`` (file name, or None).
    """

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        line: int | None = None,
        source: str | None = None,
    ) -> None:
        self.message = message
        self.key = key
        self.line = line
        self.source = source
        where = []
        if source:
            where.append(str(source))
        if line is not None:
            where.append(f"line {line}")
        prefix = ", ".join(where)
        if key:
            prefix = f"{prefix}: key {key!r}" if prefix else f"key {key!r}"
        super().__init__(f"{prefix}: {message}" if prefix else message)


_KEY_RE = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED_RE = rf"{_KEY_RE}(?:\s*\.\s*{_KEY_RE})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED_RE})\s*\]\]?")
_ASSIGN = re.compile(rf"^\s*({_DOTTED_RE})\s*=\s*(.*)$")
_INLINE_ASSIGN = re.compile(rf"[{{,]\s*({_DOTTED_RE})\s*=")


def _split_key(text: str) -> tuple[str, ...]:
    parts = []
    for seg in re.findall(_KEY_RE, text):
        if seg[:1] in "\"'":
            seg = seg[1:-1]
            if text and seg and "\\" in seg:
                seg = json.loads(f'"{seg}"')
        parts.append(seg)
    return tuple(parts)


def toml_positions(text: str) -> dict[tuple, int]:
    """Map key paths of a TOML document to their (1-based) line numbers.

    Paths are tuples of keys (and indices for arrays of tables, ``("zip", 0, "a.b")``); keys
    of an inline table are mapped to the line of the table.  A best-effort scanner, used only
    to point error messages at a line.
    """
    pos: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    table: tuple = ()
    in_ml: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw
        if in_ml is not None:
            if line.count(in_ml) % 2 == 1:
                in_ml = None
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _HEADER.match(line)
        if m and not _ASSIGN.match(line):
            path = _split_key(m.group(2))
            if m.group(1) == "[[":
                idx = counts.get(path, 0)
                counts[path] = idx + 1
                pos.setdefault(path, lineno)
                table = (*path, idx)
            else:
                table = path
            pos.setdefault(table, lineno)
            continue
        m = _ASSIGN.match(line)
        if m:
            path = (*table, *_split_key(m.group(1)))
            pos.setdefault(path, lineno)
            rest = m.group(2)
            if rest.lstrip().startswith("{"):
                for km in _INLINE_ASSIGN.finditer(rest):
                    pos.setdefault((*path, *_split_key(km.group(1))), lineno)
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_ml = quote
    return pos


# =====================================================================================
# registry of kinds
# =====================================================================================
_TYPES = ("any", "int", "float", "str", "bool", "int_list", "float_list", "str_list", "table")


@dataclass(frozen=True)
class Param:
    """One parameter of a kind.

    ``type``: one of ``any, int, float, str, bool, int_list, float_list, str_list, table``;
    ``default``: the default (omit for a required parameter); ``choices``: allowed values;
    ``nested``: a registry category whose ``{kind = ...}`` tables this parameter accepts (the
    table is built into an object before the kind's builder is called; strings pass through
    unchanged unless the category knows how to parse them).
    """

    type: str = "any"
    default: Any = _REQUIRED
    choices: tuple | None = None
    nested: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"Param type must be one of {_TYPES}, got {self.type!r}")

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class Kind:
    """A registered kind: its category, name, builder and parameters."""

    category: str
    name: str
    builder: Callable[..., Any]
    params: dict[str, Param]
    doc: str = ""


_REGISTRY: dict[str, dict[str, Kind]] = {}
_ALIASES: dict[str, dict[str, str]] = {}
#: parameters named like this take nested {kind = ...} tables of that category
_NESTED_BY_NAME = {
    "step": "step",
    "comm": "comm",
    "topology": "topology",
    "graph": "topology",
    "compressor": "compressor",
    "compression": "compressor",
}
_ANNOTATION_TYPES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "list[int]": "int_list",
    "list[float]": "float_list",
    "list[str]": "str_list",
    "tuple[int, ...]": "int_list",
    "Sequence[int]": "int_list",
}


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return s.replace("-", "_").lower()


def params_from_signature(builder: Callable[..., Any]) -> dict[str, Param]:
    """Parameters of ``builder`` read from its signature.

    Types come from simple annotations (``int``, ``float``, ``str``, ``bool``, ``X | None``)
    or, without one, from a ``bool`` or ``str`` default; anything else is ``any``.  Parameters
    named ``step``, ``comm``, ``topology``/``graph`` and ``compressor``/``compression`` accept
    nested tables of that category.
    """
    target = builder.__init__ if inspect.isclass(builder) else builder
    sig = inspect.signature(target)
    out: dict[str, Param] = {}
    for name, p in sig.parameters.items():
        if name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
        parts = [a.strip() for a in str(ann).split("|") if a.strip() and a.strip() != "None"]
        typ = "any"
        if len(parts) == 1 and parts[0] in _ANNOTATION_TYPES:
            typ = _ANNOTATION_TYPES[parts[0]]
        elif p.default is not p.empty and isinstance(p.default, bool | str):
            typ = "bool" if isinstance(p.default, bool) else "str"
        nested = _NESTED_BY_NAME.get(name)
        if nested:
            typ = "any"
        default = _REQUIRED if p.default is p.empty else p.default
        if default is not _REQUIRED and not _jsonable(default):
            default = _OMIT
        out[name] = Param(typ, default, nested=nested)
    return out


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def register(
    category: str,
    kind: str,
    builder: Callable[..., Any],
    params: Mapping[str, Param] | None = None,
    *,
    aliases: Iterable[str] = (),
    replace: bool = False,
    doc: str = "",
) -> Kind:
    """Register ``kind`` in ``category`` (e.g. ``register("algorithm", "dpsgd", DPSGD)``).

    ``builder(**params)`` builds the object; ``params`` (name -> :class:`Param`) defaults to
    :func:`params_from_signature`.  Registering an existing kind raises unless
    ``replace=True``.  Kinds used by a sweep running in worker processes must be registered
    in an importable module: list it under ``imports = [...]`` in the spec.
    """
    if not isinstance(category, str) or not category:
        raise ValueError(f"category must be a non-empty string, got {category!r}")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {builder!r}")
    table = _REGISTRY.setdefault(category, {})
    if kind in table and not replace:
        raise ValueError(f"{category} kind {kind!r} is already registered (pass replace=True)")
    ps = dict(params) if params is not None else params_from_signature(builder)
    for name, p in ps.items():
        if not isinstance(p, Param):
            raise TypeError(f"params[{name!r}] must be a Param, got {p!r}")
    k = Kind(category, kind, builder, ps, doc or (inspect.getdoc(builder) or "").split("\n")[0])
    table[kind] = k
    for a in aliases:
        _ALIASES.setdefault(category, {})[a] = kind
    return k


def kinds(category: str | None = None) -> dict[str, list[str]] | list[str]:
    """Registered kind names: of one category (a list) or of all (a dict)."""
    _ensure_registry()
    if category is not None:
        return sorted(_REGISTRY.get(category, {}))
    return {c: sorted(t) for c, t in sorted(_REGISTRY.items())}


def _lookup(category: str, kind: Any) -> Kind | None:
    _ensure_registry()
    table = _REGISTRY.get(category, {})
    if not isinstance(kind, str):
        return None
    name = _ALIASES.get(category, {}).get(kind, kind)
    if name not in table:
        alt = _snake(kind)
        name = _ALIASES.get(category, {}).get(alt, alt)
    return table.get(name)


# ----------------------------------------------------------------- built-in kinds
_BUILTINS_DONE = False
_LAZY_DONE = False
#: (category, module, base class path) scanned lazily for subclasses to register
_LAZY_MODULES = (
    ("problem", "convkit.problems.logistic"),
    ("problem", "convkit.problems.datasets"),
    ("problem", "convkit.problems.finite_sum"),
    ("algorithm", "convkit.algorithms.decentralized"),
    ("algorithm", "convkit.algorithms.feedback"),
)


def _least_squares(design: str = "gaussian", **kw: Any) -> Any:
    from .problems import LeastSquares

    return getattr(LeastSquares, design)(**kw)


def _local(comm_default: str | None) -> Callable[..., Any]:
    def build(**kw: Any) -> Any:
        from .algorithms.local import LocalSGD
        from .schedules import EveryStep, Final

        if comm_default == "mba":
            kw["comm"] = EveryStep()
        elif comm_default == "osa":
            kw["comm"] = Final()
        name = kw.get("name")
        if name is None and comm_default is not None:
            kw["name"] = f"{comm_default.upper()}(P={kw['workers']}, b={kw.get('batch', 1)})"
        return LocalSGD(**kw)

    return build


def _schedule(cls_name: str) -> Callable[..., Any]:
    def build(**kw: Any) -> Any:
        from . import schedules

        if cls_name == "At":
            return schedules.At(tuple(kw["at"]))
        return getattr(schedules, cls_name)(**kw)

    return build


def _register_builtins() -> None:
    P = Param
    register(
        "problem",
        "least_squares",
        _least_squares,
        {
            "design": P("str", "gaussian", choices=("gaussian", "rademacher", "additive")),
            "d": P("int"),
            "spectrum": P("any", "flat", doc="'flat', '1/i', '1/i^2', 'kappa:K' or a list"),
            "noise": P("float", 1.0),
            "rotate": P("bool", False),
            "seed": P("int", 0, doc="seed of the problem instance (theta*, rotation)"),
        },
        aliases=("ls", "leastsquares"),
        doc="convkit.LeastSquares.<design>(d, spectrum, noise, rotate, seed)",
    )
    algo = {
        "workers": P("int"),
        "step": P("any", nested="step"),
        "batch": P("int", 1),
        "name": P("str", None),
        "float_bits": P("int", 32),
    }
    register(
        "algorithm",
        "local_sgd",
        _local(None),
        {**algo, "comm": P("any", "mba", nested="comm")},
        aliases=("localsgd", "local"),
        doc="convkit.LocalSGD(workers, step, comm, batch, name, float_bits)",
    )
    register("algorithm", "mba", _local("mba"), algo, doc="LocalSGD communicating every step")
    register("algorithm", "osa", _local("osa"), algo, doc="LocalSGD communicating once")
    register(
        "step",
        "poly",
        _schedule("PolyDecay"),
        {"C": P("float"), "alpha": P("float"), "k0": P("float", 0.0)},
        aliases=("polydecay", "poly_decay"),
        doc="gamma_k = C (k + k0)^-alpha",
    )
    register("step", "constant", _schedule("Constant"), {"gamma": P("float")})
    register("comm", "mba", _schedule("EveryStep"), {}, aliases=("every_step", "everystep"))
    register("comm", "osa", _schedule("Final"), {}, aliases=("final", "one_shot"))
    register("comm", "every", _schedule("Every"), {"H": P("int")})
    register("comm", "rounds", _schedule("Rounds"), {"N": P("int")})
    register("comm", "at", _schedule("At"), {"at": P("int_list")})
    register(
        "comm",
        "geometric",
        _schedule("Geometric"),
        {"first": P("float", 1.0), "ratio": P("float", 2.0)},
    )
    register(
        "comm",
        "polynomial",
        _schedule("Polynomial"),
        {"power": P("float", 2.0), "scale": P("float", 1.0)},
    )


def _register_lazy() -> None:
    """Register topology, compressor and (when present) other problems and algorithms."""
    try:
        from . import topology

        for name, fn in getattr(topology, "_CONSTRUCTORS", {}).items():
            if name not in _REGISTRY.get("topology", {}):
                register("topology", name, fn)
    except Exception:  # pragma: no cover - optional module being written
        pass
    try:
        from . import compression

        for name, cls in getattr(compression, "COMPRESSORS", {}).items():
            key = name.replace("-", "_")
            if key not in _REGISTRY.get("compressor", {}):
                register("compressor", key, cls, aliases=(name,))
    except Exception:  # pragma: no cover - optional module being written
        pass
    from .algorithms.base import Algorithm
    from .problems.base import Problem

    bases = {"problem": Problem, "algorithm": Algorithm}
    for category, modname in _LAZY_MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        except Exception:  # pragma: no cover - a module under construction may not import
            continue
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for attr in names:
            obj = getattr(mod, attr, None)
            if not (inspect.isclass(obj) and issubclass(obj, bases[category])):
                continue
            if inspect.isabstract(obj) or obj.__module__ != mod.__name__:
                continue
            key = _snake(attr)
            if key in _REGISTRY.get(category, {}):
                continue
            try:
                register(category, key, obj, aliases=(attr.lower(),))
            except Exception:  # pragma: no cover - unusual signatures
                continue
            # problems built from arrays usually offer scalar-parameter constructors
            # (LogisticRegression.gaussian(d, spectrum, ...)): register them as <kind>_<name>
            for meth, raw in vars(obj).items():
                if meth.startswith("_") or not isinstance(raw, classmethod):
                    continue
                sub = f"{key}_{meth}"
                if sub not in _REGISTRY.get(category, {}):
                    try:
                        register(category, sub, getattr(obj, meth))
                    except Exception:  # pragma: no cover
                        continue
    if "logistic_regression_gaussian" in _REGISTRY.get("problem", {}):
        _ALIASES.setdefault("problem", {}).setdefault("logistic", "logistic_regression_gaussian")


def _ensure_registry() -> None:
    global _BUILTINS_DONE, _LAZY_DONE
    if not _BUILTINS_DONE:
        _BUILTINS_DONE = True
        _register_builtins()
    if not _LAZY_DONE:
        _LAZY_DONE = True
        _register_lazy()


# =====================================================================================
# normalisation and validation of one setting
# =====================================================================================
#: run options of a setting (besides problem / algorithm(s) / record)
_RUN_PARAMS: dict[str, Param] = {
    "gradients": Param("int", None, doc="total stochastic gradients T (or give steps)"),
    "steps": Param("int", None, doc="local steps n (or give gradients)"),
    "replicates": Param("int", 100),
    "dtype": Param("str", "float64", choices=("float64", "float32")),
    "backend": Param("str", "numpy", choices=("numpy", "cupy")),
}
_RECORD_PARAMS: dict[str, Param] = {
    "n_record": Param("int", 40),
    "tail": Param("float", 0.5),
    "steps": Param("int_list", [], doc="extra local steps to record"),
    "iterates": Param("str_list", None, doc="keep only these iterates"),
    "metrics": Param("str_list", None, doc="keep only these metrics"),
}
_SETTING_KEYS = ("problem", "algorithm", "algorithms", "record", *_RUN_PARAMS)
_SPEC_KEYS = ("name", "description", "seed", "imports", "grid", "zip", *_SETTING_KEYS)
_ITERATES = ("avg", "tail", "last", "state")


def _fmt_path(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path)


def _type_name(v: Any) -> str:
    return {dict: "table", list: "array", str: "string", bool: "boolean"}.get(
        type(v), type(v).__name__
    )


class _Context:
    """Where errors point: the source, TOML positions and the grid keys of a configuration."""

    def __init__(self, source: str | None, positions: dict[tuple, int] | None) -> None:
        self.source = source
        self.positions = positions or {}
        self.grid_paths: dict[tuple, tuple] = {}  # setting path -> position path of grid key
        self.where = ""

    def line_of(self, path: Sequence[Any]) -> int | None:
        path = tuple(path)
        for gpath, ppath in self.grid_paths.items():
            if path[: len(gpath)] == gpath:
                if ppath in self.positions:
                    return self.positions[ppath]
        for n in range(len(path), 0, -1):
            if path[:n] in self.positions:
                return self.positions[path[:n]]
        return None

    def error(self, message: str, path: Sequence[Any]) -> SpecError:
        return SpecError(
            message + self.where,
            key=_fmt_path(path) or None,
            line=self.line_of(path),
            source=self.source,
        )


def _suggest(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_type(p: Param, value: Any, path: tuple, ctx: _Context) -> Any:
    t = p.type

    def bad(what: str) -> SpecError:
        return ctx.error(f"must be {what}, got {value!r} ({_type_name(value)})", path)

    if value is None and not p.required and p.default is None:
        return None
    if t == "int":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("an integer")
        if isinstance(value, float):
            if not value.is_integer():
                raise bad("an integer")
            value = int(value)
    elif t == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a number")
        value = float(value)
        if not math.isfinite(value):
            raise bad("a finite number")
    elif t == "str":
        if not isinstance(value, str):
            raise bad("a string")
    elif t == "bool":
        if not isinstance(value, bool):
            raise bad("a boolean (true or false)")
    elif t in ("int_list", "float_list", "str_list"):
        if not isinstance(value, list | tuple):
            raise bad("an array")
        inner = Param(t.split("_")[0])
        value = [_check_type(inner, v, (*path, i), ctx) for i, v in enumerate(value)]
    elif t == "table":
        if not isinstance(value, dict):
            raise bad("a table")
    elif t == "any":
        if isinstance(value, float) and not math.isfinite(value):
            raise bad("a finite number")
    if p.choices is not None and value not in p.choices:
        raise ctx.error(
            f"must be one of {list(p.choices)}, got {value!r}{_suggest(value, map(str, p.choices))}",
            path,
        )
    return value


def _parse_comm(text: str) -> dict[str, Any] | None:
    key, _, arg = text.strip().lower().partition(":")
    if key in ("mba", "every_step", "everystep") and not arg:
        return {"kind": "mba"}
    if key in ("osa", "final", "one_shot") and not arg:
        return {"kind": "osa"}
    if key in ("every", "rounds") and arg:
        try:
            n = int(arg)
        except ValueError:
            return None
        return {"kind": key, ("H" if key == "every" else "N"): n}
    return None


def _normalize_kind(category: str, value: Any, path: tuple, ctx: _Context) -> Any:
    """Normalise a ``{kind = ..., ...}`` table of ``category`` (defaults filled, types coerced)."""
    if category == "comm" and isinstance(value, str):
        parsed = _parse_comm(value)
        if parsed is None:
            raise ctx.error(
                f"comm must be 'mba', 'osa', 'every:H', 'rounds:N' or a table "
                f"{{kind = ...}}, got {value!r}",
                path,
            )
        value = parsed
    elif category == "step" and isinstance(value, int | float) and not isinstance(value, bool):
        value = {"kind": "constant", "gamma": value}
    elif isinstance(value, str) and category not in ("problem", "algorithm", "step"):
        return value  # e.g. compressor "top-k:0.1", topology "ring": the builder parses it
    if not isinstance(value, dict):
        raise ctx.error(
            f"must be a table with a 'kind' key, got {value!r} ({_type_name(value)})", path
        )
    known = kinds(category)
    if "kind" not in value:
        raise ctx.error(f"missing 'kind' (one of {known})", path)
    kind = _lookup(category, value["kind"])
    if kind is None:
        raise ctx.error(
            f"unknown {category} kind {value['kind']!r}; known kinds: {known}"
            f"{_suggest(value['kind'], known)}",
            (*path, "kind"),
        )
    out: dict[str, Any] = {"kind": kind.name}
    for key in value:
        if key != "kind" and key not in kind.params:
            allowed = sorted(kind.params)
            raise ctx.error(
                f"unknown key {key!r} for {category} kind {kind.name!r}; allowed: "
                f"{allowed}{_suggest(key, allowed)}",
                (*path, key),
            )
    for name, p in kind.params.items():
        if name in value:
            v = value[name]
            if p.nested is not None and v is not None:
                out[name] = _normalize_kind(p.nested, v, (*path, name), ctx)
            else:
                out[name] = _check_type(p, v, (*path, name), ctx)
        elif p.required:
            raise ctx.error(
                f"missing required key {name!r} for {category} kind {kind.name!r}", (*path, name)
            )
        elif p.default is _OMIT:
            continue
        elif p.nested is not None and p.default is not None:
            out[name] = _normalize_kind(p.nested, copy.deepcopy(p.default), (*path, name), ctx)
        else:
            out[name] = copy.deepcopy(p.default)
    return out


def _normalize_table(
    params: Mapping[str, Param], value: Any, path: tuple, ctx: _Context, what: str
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.error(f"must be a table, got {value!r} ({_type_name(value)})", path)
    for key in value:
        if key not in params:
            raise ctx.error(
                f"unknown key {key!r} in {what}; allowed: {sorted(params)}{_suggest(key, params)}",
                (*path, key),
            )
    out = {}
    for name, p in params.items():
        if name in value:
            out[name] = _check_type(p, value[name], (*path, name), ctx)
        elif p.required:
            raise ctx.error(f"missing required key {name!r} in {what}", (*path, name))
        elif p.default is _OMIT:
            continue
        else:
            out[name] = copy.deepcopy(p.default)
    return out


def normalize_setting(raw: Mapping[str, Any], ctx: _Context | None = None) -> dict[str, Any]:
    """The canonical form of one setting (every default explicit), or :class:`SpecError`."""
    ctx = ctx or _Context(None, None)
    for key in raw:
        if key not in _SETTING_KEYS:
            raise ctx.error(
                f"unknown key {key!r} in the setting; allowed: {sorted(_SETTING_KEYS)}"
                f"{_suggest(key, _SETTING_KEYS)}",
                (key,),
            )
    out: dict[str, Any] = {}
    if "problem" not in raw:
        raise ctx.error("missing the [problem] table", ("problem",))
    out["problem"] = _normalize_kind("problem", raw["problem"], ("problem",), ctx)
    has_one, has_many = "algorithm" in raw, "algorithms" in raw
    if has_one == has_many:
        raise ctx.error(
            "give exactly one of [algorithm] (a table) or algorithms (an array of tables)",
            ("algorithms" if has_many else "algorithm",),
        )
    if has_one:
        out["algorithm"] = _normalize_kind("algorithm", raw["algorithm"], ("algorithm",), ctx)
    else:
        algos = raw["algorithms"]
        if not isinstance(algos, list) or not algos:
            raise ctx.error(
                f"must be a non-empty array of algorithm tables, got {algos!r}", ("algorithms",)
            )
        out["algorithms"] = [
            _normalize_kind("algorithm", a, ("algorithms", i), ctx) for i, a in enumerate(algos)
        ]
    run = _normalize_table(
        _RUN_PARAMS, {k: raw[k] for k in _RUN_PARAMS if k in raw}, (), ctx, "the setting"
    )
    if (run["gradients"] is None) == (run["steps"] is None):
        raise ctx.error(
            "give exactly one of gradients (total stochastic gradients T) or steps (local steps n)",
            ("gradients" if run["gradients"] is not None else "steps",),
        )
    for name in ("gradients", "steps", "replicates"):
        if run[name] is not None and run[name] < 1:
            raise ctx.error(f"must be >= 1, got {run[name]}", (name,))
        if run[name] is not None:
            out[name] = run[name]
    out["dtype"] = run["dtype"]
    out["backend"] = run["backend"]
    rec = _normalize_table(_RECORD_PARAMS, raw.get("record", {}), ("record",), ctx, "[record]")
    for it in rec["iterates"] or []:
        if it not in _ITERATES:
            raise ctx.error(
                f"iterates must be among {list(_ITERATES)}, got {it!r}", ("record", "iterates")
            )
    out["record"] = rec
    return out


def build(setting: Mapping[str, Any]) -> tuple[Any, list[Any]]:
    """Build ``(problem, [algorithms])`` from a normalised setting."""
    _ensure_registry()

    def make(category: str, spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec
        kind = _lookup(category, spec["kind"])
        if kind is None:
            raise ValueError(f"unknown {category} kind {spec['kind']!r}")
        kw = {}
        for name, v in spec.items():
            if name == "kind":
                continue
            p = kind.params.get(name)
            if p is not None and p.nested is not None and isinstance(v, dict) and "kind" in v:
                v = make(p.nested, v)
            kw[name] = v
        return kind.builder(**kw)

    problem = make("problem", setting["problem"])
    specs = setting["algorithms"] if "algorithms" in setting else [setting["algorithm"]]
    return problem, [make("algorithm", a) for a in specs]


# =====================================================================================
# the sweep
# =====================================================================================
def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class Configuration:
    """One configuration of a sweep.

    ``index`` (position in the sweep), ``params`` (grid key -> value), ``setting``
    (normalised), ``key`` (cache key, sha256 hex) and ``seed`` (the derived int seed).
    """

    index: int
    params: dict[str, Any]
    setting: dict[str, Any]
    key: str
    seed: int


def config_key(setting: Mapping[str, Any], seed: int) -> str:
    """sha256 of the sorted JSON of ``{setting, sweep seed, convkit version, cache format}``."""
    from . import __version__

    doc = {"setting": setting, "sweep_seed": seed, "convkit": __version__, "format": CACHE_FORMAT}
    return hashlib.sha256(_canonical(doc).encode()).hexdigest()


def config_seed(setting: Mapping[str, Any], seed: int) -> int:
    """The simulation seed of a configuration: ``derive_seed(seed, setting without record)``."""
    from .backend import derive_seed

    key = {k: v for k, v in setting.items() if k != "record"}
    return int(derive_seed(seed, key).generate_state(1)[0])


def _set_path(obj: dict, parts: Sequence[str], value: Any, ctx: _Context, key: str) -> None:
    cur: Any = obj
    for i, part in enumerate(parts[:-1]):
        nxt_path = _fmt_path(parts[: i + 1])
        if isinstance(cur, dict):
            if part not in cur:
                cur[part] = {}
            cur = cur[part]
        elif isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                raise ctx.error(
                    f"grid key {key!r}: {part!r} is not an index of the {len(cur)}-element "
                    f"array {_fmt_path(parts[:i])!r}",
                    ("grid", key),
                )
            cur = cur[int(part)]
        if not isinstance(cur, dict | list):
            raise ctx.error(
                f"grid key {key!r}: {nxt_path!r} is {cur!r}, not a table; write it as a table "
                "(e.g. {kind = ..., ...}) to vary one of its fields",
                ("grid", key),
            )
    last = parts[-1]
    if isinstance(cur, list):
        if not last.isdigit() or int(last) >= len(cur):
            raise ctx.error(
                f"grid key {key!r}: {last!r} is not an index of the {len(cur)}-element array",
                ("grid", key),
            )
        cur[int(last)] = copy.deepcopy(value)
    else:
        cur[last] = copy.deepcopy(value)


class Sweep:
    """A sweep: a base setting, grids (cross products and zipped groups), a seed.

    Build with :meth:`from_toml` / :meth:`from_dict`; the constructor takes the parsed spec
    (a dict, as TOML gives it).  Every configuration is normalised and validated at
    construction, so a spec error surfaces before anything runs.

    Attributes: ``spec`` (the raw spec), ``name``, ``seed``, ``imports``, ``axes`` (list of
    key tuples: one per grid key, one per zipped group), ``configurations`` (list of
    :class:`Configuration`).
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        source: str | None = None,
        positions: dict[tuple, int] | None = None,
    ) -> None:
        ctx = _Context(source, positions)
        self._ctx = ctx
        if not isinstance(spec, Mapping):
            raise SpecError(f"a sweep spec must be a table (dict), got {_type_name(spec)}")
        spec = dict(spec)
        self.spec = copy.deepcopy(spec)
        self.source = source
        for key in spec:
            if key not in _SPEC_KEYS:
                raise ctx.error(
                    f"unknown top-level key {key!r}; allowed: {sorted(_SPEC_KEYS)}"
                    f"{_suggest(key, _SPEC_KEYS)}",
                    (key,),
                )
        self.name = _check_type(Param("str", None), spec.get("name"), ("name",), ctx)
        self.description = _check_type(
            Param("str", None), spec.get("description"), ("description",), ctx
        )
        self.seed = _check_type(Param("int"), spec.get("seed", 0), ("seed",), ctx)
        if self.seed < 0:
            raise ctx.error(f"must be >= 0, got {self.seed}", ("seed",))
        self.imports = _check_type(Param("str_list"), spec.get("imports", []), ("imports",), ctx)
        for mod in self.imports:
            try:
                importlib.import_module(mod)
            except ImportError as exc:
                raise ctx.error(f"cannot import module {mod!r}: {exc}", ("imports",)) from exc
        self.base = {k: v for k, v in spec.items() if k in _SETTING_KEYS}
        self.axes, values = self._parse_grids(spec.get("grid", {}), spec.get("zip", []), ctx)
        self.configurations = self._expand(values, ctx)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> Sweep:
        """The same spec as a Python dict (e.g. ``{"problem": {...}, "grid": {...}}``)."""
        return cls(spec)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> Sweep:
        """Read a TOML spec file."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise SpecError(f"cannot read the sweep spec: {exc}", source=str(path)) from exc
        return cls.from_toml_text(text, source=str(path))

    @classmethod
    def from_toml_text(cls, text: str, source: str | None = None) -> Sweep:
        """Parse TOML text."""
        import tomllib

        try:
            spec = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise SpecError(
                f"invalid TOML: {exc}", line=int(m.group(1)) if m else None, source=source
            ) from None
        return cls(spec, source=source, positions=toml_positions(text))

    # ------------------------------------------------------------------ grids
    def _parse_grids(
        self, grid: Any, zips: Any, ctx: _Context
    ) -> tuple[list[tuple[str, ...]], list[list[tuple]]]:
        if not isinstance(grid, dict):
            raise ctx.error(
                f"must be a table of 'dotted.key' = [values], got {_type_name(grid)}", ("grid",)
            )
        if isinstance(zips, dict):
            zips = [zips]
        if not isinstance(zips, list):
            raise ctx.error(
                f"must be an array of tables ([[zip]]), got {_type_name(zips)}", ("zip",)
            )
        groups: list[tuple[list[str], list[tuple], list[tuple]]] = []  # keys, values, pos paths
        for key, vals in grid.items():
            groups.append(
                (
                    [key],
                    [(v,) for v in self._check_list(key, vals, ("grid", key), ctx)],
                    [("grid", key)],
                )
            )
        for gi, group in enumerate(zips):
            if not isinstance(group, dict) or not group:
                raise ctx.error(
                    f"each [[zip]] group must be a non-empty table of 'dotted.key' = [values], "
                    f"got {group!r}",
                    ("zip", gi),
                )
            keys = list(group)
            lists = [self._check_list(k, group[k], ("zip", gi, k), ctx) for k in keys]
            lengths = {k: len(v) for k, v in zip(keys, lists, strict=True)}
            if len(set(lengths.values())) > 1:
                raise ctx.error(
                    f"the lists of a [[zip]] group must have equal lengths, got {lengths}",
                    ("zip", gi, keys[0]),
                )
            tuples = list(zip(*lists, strict=True))
            seen = {}
            for i, t in enumerate(tuples):
                c = _canonical(list(t))
                if c in seen:
                    raise ctx.error(
                        f"[[zip]] group has the same values at positions {seen[c]} and {i}: "
                        f"{dict(zip(keys, t, strict=True))}",
                        ("zip", gi, keys[0]),
                    )
                seen[c] = i
            groups.append((keys, tuples, [("zip", gi, k) for k in keys]))
        # every key once, no key inside another
        owner: dict[str, tuple] = {}
        self._key_pos: dict[str, tuple] = {}
        for keys, _, pos in groups:
            for k, p in zip(keys, pos, strict=True):
                if k in owner:
                    raise ctx.error(f"key {k!r} is varied twice (in grid and/or zip groups)", p)
                owner[k] = p
                self._key_pos[k] = p
        for a in owner:
            for b in owner:
                if a != b and b.startswith(a + "."):
                    raise ctx.error(
                        f"grid keys {a!r} and {b!r} overlap (one is inside the other)", owner[b]
                    )
        return [tuple(k) for k, _, _ in groups], [v for _, v, _ in groups]

    @staticmethod
    def _check_list(key: Any, vals: Any, pos: tuple, ctx: _Context) -> list:
        if not isinstance(key, str) or not key:
            raise ctx.error(f"grid keys must be non-empty strings, got {key!r}", pos)
        parts = key.split(".")
        if any(not p for p in parts):
            raise ctx.error(f"grid key {key!r} has an empty segment", pos)
        if parts[0] not in _SETTING_KEYS:
            reason = (
                "cannot be varied (it is a sweep option, not part of a setting)"
                if parts[0] in _SPEC_KEYS
                else f"is not a setting key; allowed roots: {sorted(_SETTING_KEYS)}"
                f"{_suggest(parts[0], _SETTING_KEYS)}"
            )
            raise ctx.error(f"grid key {key!r} {reason}", pos)
        if not isinstance(vals, list):
            raise ctx.error(
                f"grid values must be an array, got {vals!r} ({_type_name(vals)}); write "
                f"[{vals!r}] for a single value",
                pos,
            )
        if not vals:
            raise ctx.error("grid values must be a non-empty array, got []", pos)
        seen: dict[str, int] = {}
        for i, v in enumerate(vals):
            try:
                c = _canonical(v)
            except ValueError as exc:
                raise ctx.error(f"grid value {v!r} is not valid ({exc})", pos) from None
            if c in seen:
                raise ctx.error(
                    f"grid values must be distinct; {v!r} appears at positions {seen[c]} and {i}",
                    pos,
                )
            seen[c] = i
        return vals

    def _expand(self, values: list[list[tuple]], ctx: _Context) -> list[Configuration]:
        out: list[Configuration] = []
        by_key: dict[str, int] = {}
        for index, combo in enumerate(itertools.product(*values) if values else [()]):
            params: dict[str, Any] = {}
            raw = copy.deepcopy(self.base)
            ctx.grid_paths = {}
            for keys, vals in zip(self.axes, combo, strict=True):
                for k, v in zip(keys, vals, strict=True):
                    params[k] = v
                    parts = k.split(".")
                    path = tuple(int(p) if p.isdigit() else p for p in parts)
                    ctx.grid_paths[path] = self._key_pos[k]
            ctx.where = f" (in configuration {index}: {params})" if params else ""
            for k, v in params.items():
                _set_path(raw, k.split("."), v, ctx, k)
            setting = normalize_setting(raw, ctx)
            key = config_key(setting, self.seed)
            if key in by_key:
                raise ctx.error(
                    f"configurations {by_key[key]} and {index} are identical after "
                    f"normalisation ({params}); remove the duplicate grid value",
                    next(iter(ctx.grid_paths), ()),
                )
            by_key[key] = index
            out.append(Configuration(index, params, setting, key, config_seed(setting, self.seed)))
        ctx.grid_paths, ctx.where = {}, ""
        return out

    # ------------------------------------------------------------------ queries
    @property
    def grid_keys(self) -> list[str]:
        """Every varied key, in axis order."""
        return [k for keys in self.axes for k in keys]

    def __len__(self) -> int:
        return len(self.configurations)

    def __iter__(self) -> Iterator[Configuration]:
        return iter(self.configurations)

    def __repr__(self) -> str:
        return (
            f"Sweep(name={self.name!r}, configurations={len(self)}, seed={self.seed}, "
            f"grid={self.grid_keys})"
        )


def load_spec(path: str | os.PathLike) -> Sweep:
    """Read a sweep spec from a TOML file (same as :meth:`Sweep.from_toml`)."""
    return Sweep.from_toml(path)


# =====================================================================================
# serialisation and the cache
# =====================================================================================
def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def frame_to_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """Serialise a frame as parquet or CSV (floats written to round-trip exactly)."""
    buf = io.BytesIO()
    if fmt == "parquet":
        frame.to_parquet(buf, index=False)
    elif fmt == "csv":
        frame.to_csv(buf, index=False, float_format="%.17g")
    else:
        raise ValueError(f"format must be 'parquet' or 'csv', got {fmt!r}")
    return buf.getvalue()


def frame_from_bytes(data: bytes, fmt: str) -> pd.DataFrame:
    """Inverse of :func:`frame_to_bytes`."""
    return _to_pandas(_decode(data, fmt))


def _decode(data: bytes, fmt: str) -> Any:
    """A payload as a pyarrow Table (parquet) or a DataFrame (CSV)."""
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        # single-threaded, unbuffered: ~3x faster than read_table for these small files
        return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).read(use_threads=False)
    if fmt == "csv":
        # pandas >= 3 parses floats exactly by default (and deprecates the option)
        exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
        return pd.read_csv(io.BytesIO(data), **exact)
    raise ValueError(f"unknown payload format {fmt!r}")


def _to_pandas(part: Any) -> pd.DataFrame:
    return part if isinstance(part, pd.DataFrame) else part.to_pandas()


def _concat(parts: list[Any]) -> pd.DataFrame:
    """Concatenate payloads (arrow tables concatenated before one conversion to pandas)."""
    if parts and not any(isinstance(p, pd.DataFrame) for p in parts):
        import pyarrow as pa

        return pa.concat_tables(parts, promote_options="default").to_pandas()
    frames = [_to_pandas(p) for p in parts]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].copy()


def _json_default(o: Any) -> Any:
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    return str(o)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(
    path: str | os.PathLike, data: bytes, *, fsync: bool = True, fsync_dir: bool = True
) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory,
    ``fsync`` (unless ``fsync=False``), ``os.replace``, then ``fsync`` of the directory
    (unless ``fsync_dir=False``).

    A reader sees the old file or the complete new one, never a partial file, whatever
    happens to the writing process (SIGKILL included); the fsyncs make the new file durable
    against a crash of the machine as well.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if fsync_dir:
        _fsync_dir(path.parent)


@dataclass
class CacheEntry:
    """A verified cache entry: the payload (pyarrow Table or DataFrame) and its record."""

    key: str
    payload: Any
    record: dict[str, Any]

    @property
    def frame(self) -> pd.DataFrame:
        """The result frame of the configuration."""
        return _to_pandas(self.payload)


class Cache:
    """Content-addressed store of configuration results (see the module docstring).

    ``Cache(root)``; :meth:`get` returns a verified :class:`CacheEntry` or None (and sets
    :attr:`last_problem` to the reason: ``"missing"`` or a description of the corruption);
    :meth:`put` writes an entry atomically.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.last_problem: str | None = None

    def paths(self, key: str) -> tuple[Path, Path]:
        """(payload path without suffix, record path) of ``key``."""
        d = self.root / key[:2]
        return d / key, d / f"{key}.json"

    def keys(self) -> list[str]:
        """Keys that have a record file (committed, not necessarily valid)."""
        if not self.root.exists():
            return []
        return sorted(p.stem for p in self.root.glob("??/*.json") if not p.name.startswith("."))

    @staticmethod
    def _encode_record(record: Mapping[str, Any]) -> bytes:
        """Record file: one line of canonical JSON, then ``sha256:<hex digest of that line>``."""
        body = _canonical(record).encode()
        return body + b"\nsha256:" + hashlib.sha256(body).hexdigest().encode() + b"\n"

    @staticmethod
    def _decode_record(data: bytes) -> dict[str, Any] | None:
        body, sep, tail = data.rpartition(b"\nsha256:")
        if not sep or tail.strip() != hashlib.sha256(body).hexdigest().encode():
            return None
        try:
            record = json.loads(body)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def put(
        self,
        key: str,
        setting: Mapping[str, Any],
        seed: int,
        payload: bytes,
        fmt: str,
        meta: Mapping[str, Any],
    ) -> dict[str, Any]:
        """Write the payload, then the record (the commit marker); both atomically.

        Only the record is fsynced (one fsync per entry, ~5 ms here, instead of four): if a
        crash of the machine loses the payload or the last renames, the record's checksum or
        its absence makes the entry invalid and the configuration is recomputed; a killed
        process loses nothing that was renamed.
        """
        from . import __version__

        base, rec_path = self.paths(key)
        payload_path = base.with_suffix("." + fmt)
        atomic_write(payload_path, payload, fsync=False, fsync_dir=False)
        record = {
            "format": CACHE_FORMAT,
            "key": key,
            "convkit": __version__,
            "setting": setting,
            "seed": seed,
            "payload": {
                "file": payload_path.name,
                "format": fmt,
                "bytes": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest(),
            },
            "meta": json.loads(json.dumps(meta, default=_json_default)),
            "written": time.time(),
        }
        atomic_write(rec_path, self._encode_record(record), fsync_dir=False)
        return record

    def get(self, key: str, setting: Mapping[str, Any] | None = None) -> CacheEntry | None:
        """The verified entry of ``key`` or None (reason in :attr:`last_problem`)."""
        self.last_problem = None
        base, rec_path = self.paths(key)
        try:
            text = rec_path.read_bytes()
        except FileNotFoundError:
            self.last_problem = "missing"
            return None
        except OSError as exc:
            self.last_problem = f"unreadable record: {exc}"
            return None
        record = self._decode_record(text)
        if record is None:
            self.last_problem = "record corrupted (checksum mismatch or invalid JSON)"
            return None
        if record.get("key") != key or record.get("format") != CACHE_FORMAT:
            self.last_problem = "record belongs to another key or cache format"
            return None
        if setting is not None and record.get("setting") != setting:
            self.last_problem = "record holds another configuration"
            return None
        info = record.get("payload", {})
        fmt = info.get("format")
        if fmt not in ("parquet", "csv") or info.get("file") != f"{key}.{fmt}":
            self.last_problem = "record names an invalid payload"
            return None
        try:
            data = (base.parent / info["file"]).read_bytes()
        except OSError:
            self.last_problem = "payload missing"
            return None
        if len(data) != info.get("bytes") or hashlib.sha256(data).hexdigest() != info.get("sha256"):
            self.last_problem = (
                f"payload corrupted (size {len(data)} vs {info.get('bytes')}, or checksum mismatch)"
            )
            return None
        try:
            payload = _decode(data, fmt)
        except Exception as exc:  # pragma: no cover - checksum passed but unreadable
            self.last_problem = f"payload unreadable: {exc}"
            return None
        return CacheEntry(key, payload, record)


# =====================================================================================
# execution
# =====================================================================================
def _execute(task: Mapping[str, Any]) -> dict[str, Any]:
    """Run one configuration (in any process); never raises.

    Returns ``{"index", "key", "ok": True, "payload": bytes, "format", "meta", "seconds"}`` or
    ``{"index", "key", "ok": False, "error", "traceback", "seconds"}``.
    """
    t0 = time.perf_counter()
    out: dict[str, Any] = {"index": task["index"], "key": task["key"]}
    try:
        for mod in task.get("imports", ()):
            importlib.import_module(mod)
        from .simulate import DivergenceWarning, simulate

        setting = task["setting"]
        problem, algos = build(setting)
        rec = setting["record"]
        budget = (
            {"gradients": setting["gradients"]}
            if "gradients" in setting
            else {"steps": setting["steps"]}
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DivergenceWarning)
            res = simulate(
                problem,
                algos,
                **budget,
                replicates=setting["replicates"],
                seed=task["seed"],
                record=rec["steps"] or None,
                n_record=rec["n_record"],
                tail=rec["tail"],
                backend=setting["backend"],
                dtype=setting["dtype"],
                progress=False,
            )
        frame = res.frame
        if rec["iterates"] is not None:
            frame = frame[frame["iterate"].isin(rec["iterates"])]
        if rec["metrics"] is not None:
            frame = frame[frame["metric"].isin(rec["metrics"])]
        frame = frame.reset_index(drop=True)
        meta = dict(res.meta)
        out.update(
            ok=True,
            payload=frame_to_bytes(frame, task["format"]),
            format=task["format"],
            meta=json.loads(json.dumps(meta, default=_json_default)),
        )
    except Exception as exc:
        out.update(ok=False, error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    out["seconds"] = time.perf_counter() - t0
    return out


def _serial(tasks: list[dict]) -> Iterator[dict]:
    for t in tasks:
        yield _execute(t)


def _joblib(tasks: list[dict], jobs: int) -> Iterator[dict]:
    from joblib import Parallel, delayed

    par = Parallel(n_jobs=jobs, return_as="generator_unordered")
    yield from par(delayed(_execute)(t) for t in tasks)


def _dask(tasks: list[dict], jobs: int | None, scheduler: str | None) -> Iterator[dict]:
    import logging

    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        futures = [
            client.submit(_execute, t, key=f"convkit-sweep-{t['key']}", pure=False) for t in tasks
        ]
        for fut, res in as_completed(futures, with_results=True):
            fut.release()
            yield res
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# =====================================================================================
# summary, result, output
# =====================================================================================
@dataclass
class SweepSummary:
    """What a run did.

    ``total`` configurations; ``computed`` (run now), ``cached`` (reused from the cache),
    ``failed`` (index -> error), ``diverged`` (index -> {algorithm label: diverged
    replicates}), ``invalid`` (cache entries found corrupted and recomputed: index -> reason),
    ``seconds``, ``executor``.
    """

    total: int
    computed: int = 0
    cached: int = 0
    failed: dict[int, str] = field(default_factory=dict)
    diverged: dict[int, dict[str, int]] = field(default_factory=dict)
    invalid: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0
    executor: str = "serial"

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for k in ("failed", "diverged", "invalid"):
            d[k] = {str(i): v for i, v in d[k].items()}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepSummary:
        d = dict(d)
        for k in ("failed", "diverged", "invalid"):
            d[k] = {int(i): v for i, v in d.get(k, {}).items()}
        return cls(**d)

    def __str__(self) -> str:
        lines = [
            f"sweep: {self.total} configurations in {self.seconds:.1f} s ({self.executor}): "
            f"{self.computed} computed, {self.cached} reused from cache, "
            f"{len(self.failed)} failed, {len(self.diverged)} with diverged replicates"
        ]
        if self.invalid:
            lines.append(f"  {len(self.invalid)} corrupted cache entries were recomputed")
        for i, err in sorted(self.failed.items()):
            lines.append(f"  FAILED [{i}]: {err}")
        for i, div in sorted(self.diverged.items()):
            lines.append(f"  diverged [{i}]: {div}")
        return "\n".join(lines)


@dataclass
class SweepResult:
    """The tidy frame of a whole sweep, its metadata and (after :func:`run`) the summary."""

    frame: pd.DataFrame
    meta: dict[str, Any]
    summary: SweepSummary | None = None

    @property
    def configurations(self) -> pd.DataFrame:
        """One row per configuration: id, key, seed, status, grid values, error."""
        return pd.DataFrame(self.meta.get("configurations", []))

    def final(self, metric: str = "hnorm2", iterate: str = "avg") -> pd.DataFrame:
        """The last record point of every (configuration, algorithm), with the grid columns."""
        f = self.frame[(self.frame["metric"] == metric) & (self.frame["iterate"] == iterate)]
        if f.empty:
            return f.reset_index(drop=True)
        idx = f.groupby(["config_id", "config"], sort=True)["step"].idxmax()
        return f.loc[idx.to_numpy()].reset_index(drop=True)


def _column_values(values: list[Any]) -> list[Any]:
    """Grid values as parquet-friendly column entries (tables / lists / mixed types -> JSON)."""
    if all(isinstance(v, bool) for v in values) or all(isinstance(v, str) for v in values):
        return values
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        if all(isinstance(v, int) for v in values):
            return values
        return [float(v) for v in values]
    return [v if isinstance(v, str) else _canonical(v) for v in values]


def _assemble(sweep: Sweep, frames: dict[int, Any]) -> pd.DataFrame:
    from .result import FRAME_COLUMNS

    order = [c for c in sweep.configurations if c.index in frames]
    base_cols = list(FRAME_COLUMNS)
    if not order:
        cols = ["config_id", "config_key", *sweep.grid_keys, *base_cols]
        return pd.DataFrame({c: [] for c in cols})
    parts = [frames[c.index] for c in order]
    counts = np.array([len(p) if isinstance(p, pd.DataFrame) else p.num_rows for p in parts])
    frame = _concat(parts)
    extra: dict[str, Any] = {
        "config_id": np.repeat(np.array([c.index for c in order], dtype=np.int64), counts),
        "config_key": np.repeat(np.array([c.key for c in order], dtype=object), counts),
    }
    for key in sweep.grid_keys:
        name = f"grid.{key}" if key in frame.columns or key in extra else key
        vals = _column_values([c.params[key] for c in order])
        arr = np.empty(len(vals), dtype=object)
        arr[:] = vals
        col = np.repeat(arr, counts)
        extra[name] = pd.Series(col).infer_objects().to_numpy() if len(col) else col
    front = pd.DataFrame(extra)
    return pd.concat([front, frame.reset_index(drop=True)], axis=1)


def _versions() -> dict[str, str]:
    import platform

    from . import __version__

    return {
        "convkit": __version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "python": platform.python_version(),
    }


def run(
    sweep: Sweep | Mapping[str, Any] | str | os.PathLike,
    out: str | os.PathLike,
    *,
    jobs: int | None = None,
    dask: bool = False,
    scheduler: str | None = None,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    fmt: str | None = None,
) -> SweepResult:
    """Run every configuration of ``sweep`` not already cached and write the sweep's output.

    Parameters
    ----------
    sweep:
        A :class:`Sweep`, a spec dict, or the path of a TOML spec.
    out:
        Output directory: ``frame.parquet`` (or ``.csv``), ``sweep.json`` and, unless
        ``cache`` is given, the cache in ``out/cache``.
    jobs:
        Parallel processes: ``None`` or ``-1`` = all cores (joblib), ``1`` = serial, ``N``.
        With ``dask=True``, the number of LocalCluster workers.
    dask:
        Run on an embedded Dask ``LocalCluster`` (processes).
    scheduler:
        Address of a running Dask scheduler (``"tcp://host:port"``); implies Dask.
    cache:
        Cache directory (share one between sweeps to reuse results across them).
    progress:
        Show a tqdm progress bar.
    fmt:
        Payload and output format, ``"parquet"`` (default when pyarrow is installed) or
        ``"csv"``.

    Returns the :class:`SweepResult`; ``result.summary`` says what was computed, reused,
    failed and diverged.  Failing configurations are reported, never raised.
    """
    t0 = time.perf_counter()
    if not isinstance(sweep, Sweep):
        if isinstance(sweep, Mapping):
            sweep = Sweep.from_dict(sweep)
        else:
            sweep = Sweep.from_toml(sweep)
    if fmt is None:
        fmt = "parquet" if _have_pyarrow() else "csv"
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"fmt must be 'parquet' or 'csv', got {fmt!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs == 0):
        raise ValueError(f"jobs must be a non-zero integer or None (all cores), got {jobs!r}")
    if dask and scheduler:
        raise ValueError("give dask=True (embedded LocalCluster) or scheduler=ADDRESS, not both")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    store = Cache(cache if cache is not None else out / "cache")

    summary = SweepSummary(total=len(sweep))
    frames: dict[int, Any] = {}  # index -> payload (arrow Table or DataFrame)
    metas: dict[int, dict] = {}
    tasks: list[dict[str, Any]] = []
    for c in sweep.configurations:
        entry = store.get(c.key, c.setting)
        if entry is not None:
            frames[c.index] = entry.payload
            metas[c.index] = entry.record.get("meta", {})
            summary.cached += 1
            continue
        if store.last_problem != "missing":
            summary.invalid[c.index] = store.last_problem or "invalid"
        tasks.append(
            {
                "index": c.index,
                "key": c.key,
                "setting": c.setting,
                "seed": c.seed,
                "imports": list(sweep.imports),
                "format": fmt,
            }
        )

    n_cpu = os.cpu_count() or 1
    if scheduler or dask:
        executor = f"dask ({scheduler})" if scheduler else "dask (LocalCluster)"
        results: Iterable[dict] = _dask(tasks, jobs, scheduler) if tasks else []
    elif jobs == 1 or (jobs in (None, -1) and n_cpu == 1) or len(tasks) <= 1:
        executor = "serial"
        results = _serial(tasks)
    else:
        n = n_cpu if jobs in (None, -1) else jobs
        executor = f"joblib ({n} jobs)"
        results = _joblib(tasks, n)
    summary.executor = executor

    from tqdm.auto import tqdm

    by_index = {c.index: c for c in sweep.configurations}
    computed_idx: set[int] = set()
    bar = tqdm(
        total=len(sweep),
        initial=summary.cached,
        disable=not progress,
        desc="sweep",
        unit="config",
        file=sys.stderr,
    )
    try:
        for res in results:
            i = res["index"]
            c = by_index[i]
            if res["ok"]:
                record = store.put(
                    c.key, c.setting, c.seed, res["payload"], res["format"], res["meta"]
                )
                frames[i] = _decode(res["payload"], res["format"])
                metas[i] = record["meta"]
                computed_idx.add(i)
                summary.computed += 1
            else:
                summary.failed[i] = res["error"]
                bar.write(f"sweep: configuration {i} {c.params} failed: {res['error']}")
            bar.update(1)
            if summary.failed:
                bar.set_postfix(failed=len(summary.failed))
    except Exception as exc:
        # the executor itself failed (a worker process killed by the OS, a lost cluster):
        # what was received is committed; the rest is reported as failed and a re-run resumes
        msg = f"executor failed before this configuration returned: {type(exc).__name__}: {exc}"
        for t in tasks:
            if t["index"] not in computed_idx and t["index"] not in summary.failed:
                summary.failed[t["index"]] = msg
        bar.write(f"sweep: {msg}")
    finally:
        bar.close()

    for i, meta in metas.items():
        div = {k: int(v) for k, v in (meta.get("diverged") or {}).items() if v}
        if div:
            summary.diverged[i] = div
    summary.seconds = time.perf_counter() - t0

    frame = _assemble(sweep, frames)
    payload = frame_to_bytes(frame, fmt)
    frame_file = f"frame.{fmt}"
    atomic_write(out / frame_file, payload)
    other = out / ("frame.csv" if fmt == "parquet" else "frame.parquet")
    if other.exists():
        other.unlink()
    configs = []
    for c in sweep.configurations:
        if c.index in summary.failed:
            status = "failed"
        elif c.index in computed_idx:
            status = "computed"
        else:
            status = "cached"
        configs.append(
            {
                "config_id": c.index,
                "config_key": c.key,
                "seed": c.seed,
                "status": status,
                "params": c.params,
                "setting": c.setting,
                "error": summary.failed.get(c.index),
                "seconds": (metas.get(c.index) or {}).get("timing", {}).get("seconds"),
            }
        )
    meta = {
        "name": sweep.name,
        "description": sweep.description,
        "seed": sweep.seed,
        "spec": sweep.spec,
        "source": sweep.source,
        "grid_keys": sweep.grid_keys,
        "frame": {"file": frame_file, "sha256": hashlib.sha256(payload).hexdigest()},
        "cache": str(store.root),
        "configurations": configs,
        "summary": summary.to_dict(),
        "versions": _versions(),
    }
    # no indent: the C encoder is ~10x faster, and this file grows with the sweep
    atomic_write(out / "sweep.json", json.dumps(meta, default=_json_default).encode())
    return SweepResult(frame, meta, summary)


def load(path: str | os.PathLike) -> SweepResult:
    """Read a sweep output directory written by :func:`run` (verifies the frame checksum)."""
    path = Path(path)
    meta_path = path / "sweep.json"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no sweep output in {path} (missing sweep.json)") from None
    info = meta.get("frame", {})
    data = (path / info["file"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != info.get("sha256"):
        raise ValueError(f"{path / info['file']} does not match the checksum in sweep.json")
    fmt = info["file"].rsplit(".", 1)[1]
    frame = frame_from_bytes(data, fmt)
    summary = SweepSummary.from_dict(meta["summary"]) if "summary" in meta else None
    return SweepResult(frame, meta, summary)


# =====================================================================================
# command line
# =====================================================================================
def main(argv: Sequence[str] | None = None) -> int:
    """``convkit sweep SPEC.toml --out DIR [--jobs N] [--dask | --scheduler ADDR] [--quiet]``.

    Exit status: 0 when every configuration succeeded, 1 when some failed, 2 for an invalid
    spec or command line.
    """
    p = argparse.ArgumentParser(
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
        "--dry-run", action="store_true", help="validate and list the configurations only"
    )
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else 2
    if args.jobs is not None and args.jobs == 0:
        print("convkit sweep: --jobs must be a non-zero integer", file=sys.stderr)
        return 2
    try:
        sweep = Sweep.from_toml(args.spec)
    except SpecError as exc:
        print(f"convkit sweep: invalid spec: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        store = Cache(args.cache if args.cache else Path(args.out) / "cache")
        cached = sum(store.get(c.key, c.setting) is not None for c in sweep.configurations)
        print(f"{len(sweep)} configurations ({cached} cached), grid keys {sweep.grid_keys}")
        for c in sweep.configurations:
            print(f"  [{c.index}] {c.key[:12]} {c.params}")
        return 0
    result = run(
        sweep,
        args.out,
        jobs=args.jobs,
        dask=args.dask,
        scheduler=args.scheduler,
        cache=args.cache,
        progress=not args.quiet,
    )
    print(result.summary)
    return 0 if result.summary.ok else 1


if __name__ == "__main__":
    from convkit.sweep import main as _main

    raise SystemExit(_main())
