"""One setting (one call of :func:`convkit.simulate`): normalisation and validation into
its canonical form (:func:`normalize_setting`), and building its objects (:func:`build`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

from convkit.sweep.errors import SpecError, _Context, _suggest, _type_name
from convkit.sweep.registry import _OMIT, Param, _ensure_registry, aliases, kinds, resolve

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
_SETTING_KEYS = ("problem", "algorithm", "algorithms", "record", "function", *_RUN_PARAMS)
_SPEC_KEYS = ("name", "description", "seed", "imports", "grid", "zip", *_SETTING_KEYS)
_ITERATES = ("avg", "tail", "last", "state")


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


def _string_spec(category: str, text: str) -> dict[str, Any] | None:
    """The table of a string spec of ``category``, read by the model module's one parser
    (the parser the constructors and the command line use), or None for a category without
    string specs.  A malformed spec raises the parser's ``ValueError``."""
    if category == "comm":
        from convkit.schedule_spec import parse_comm_spec

        return parse_comm_spec(text)
    if category == "compressor":
        from convkit.compression import parse_compressor_spec

        return parse_compressor_spec(text)
    if category == "topology":
        from convkit.topology_spec import parse_topology_spec

        return parse_topology_spec(text)
    return None


def _alias_note(category: str) -> str:
    names = aliases(category)
    return f" (aliases: {names})" if names else ""


def _normalize_kind(category: str, value: Any, path: tuple, ctx: _Context) -> Any:
    """Normalise a ``{kind = ..., ...}`` table of ``category`` (defaults filled, types coerced)."""
    if isinstance(value, str) and category in ("comm", "compressor", "topology"):
        try:
            value = _string_spec(category, value)
        except ValueError as exc:
            raise ctx.error(str(exc), path) from None
    elif category == "step" and isinstance(value, int | float) and not isinstance(value, bool):
        value = {"kind": "constant", "gamma": value}
    elif isinstance(value, str) and category not in ("problem", "algorithm", "step"):
        return value  # a string of a category registered by the user: its builder parses it
    if not isinstance(value, dict):
        raise ctx.error(
            f"must be a table with a 'kind' key, got {value!r} ({_type_name(value)})", path
        )
    known = kinds(category)
    if "kind" not in value:
        raise ctx.error(f"missing 'kind' (one of {known})", path)
    kind, fixed = resolve(category, value["kind"])
    if kind is None:
        from convkit.sweep.registry import _LAZY_ERRORS

        broken = "".join(f"; {m} could not be registered ({e})" for m, e in _LAZY_ERRORS.items())
        names = [*known, *aliases(category)]
        from convkit._migration import removed_kind_hint

        # a removed kind names its successor instead of a look-alike suggestion
        hint = removed_kind_hint(value["kind"]) if category == "comm" else ""
        raise ctx.error(
            f"unknown {category} kind {value['kind']!r}; known kinds: {known}"
            f"{_alias_note(category)}{hint or _suggest(value['kind'], names)}{broken}",
            (*path, "kind"),
        )
    for key, fixed_value in fixed.items():
        if key in value and value[key] != fixed_value:
            raise ctx.error(
                f"{category} kind {value['kind']!r} is {kind.name!r} with {key} = "
                f"{fixed_value!r}; got {key} = {value[key]!r} (use kind {kind.name!r})",
                (*path, key),
            )
    value = {**value, **fixed}
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
    if "function" in raw:  # a function call instead of a simulation (convkit.sweep.functions)
        from convkit.sweep.functions import normalize_function_setting

        return normalize_function_setting(raw, ctx)
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
                f"iterates must be among {list(_ITERATES)}, got {it!r}{_suggest(it, _ITERATES)}",
                ("record", "iterates"),
            )
    out["record"] = rec
    return out


def build(setting: Mapping[str, Any]) -> tuple[Any, list[Any]]:
    """Build ``(problem, [algorithms])`` from a normalised setting."""
    from convkit.sweep.preflight import _make

    _ensure_registry()
    problem = _make("problem", setting["problem"])
    specs = setting["algorithms"] if "algorithms" in setting else [setting["algorithm"]]
    return problem, [_make("algorithm", a) for a in specs]
