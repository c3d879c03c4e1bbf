"""A sweep specification (:class:`Sweep`, :func:`load_spec`): the base setting and its grids,
expanded into normalised :class:`Configuration` objects with their cache keys and seeds."""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convkit.sweep.cache import CACHE_FORMAT, _canonical
from convkit.sweep.errors import (
    SpecError,
    _Context,
    _fmt_path,
    _suggest,
    _type_name,
    toml_positions,
)
from convkit.sweep.registry import Param
from convkit.sweep.setting import _SETTING_KEYS, _SPEC_KEYS, _check_type, normalize_setting
from convkit.user_modules import describe_import_error, import_user_module

#: The most configurations a sweep builds unless told otherwise (``max_configurations``):
#: each is normalised, hashed and held in memory (about 1 ms and a few kB each), so a grid
#: past this is refused, with its count, before any is built.
MAX_CONFIGURATIONS = 10_000


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
    from convkit import __version__

    doc = {"setting": setting, "sweep_seed": seed, "convkit": __version__, "format": CACHE_FORMAT}
    return hashlib.sha256(_canonical(doc).encode()).hexdigest()


def config_seed(setting: Mapping[str, Any], seed: int) -> int:
    """The simulation seed of a configuration: ``derive_seed(seed, setting without record)``."""
    from convkit.backend import derive_seed

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
    construction, so a spec error surfaces before anything runs: with ``check=True`` (the
    default) every configuration's objects are also built once and its ``[record]`` names
    checked (:func:`convkit.sweep.preflight.check_configurations`); the distinct errors are
    raised together as one :class:`SpecError`.  ``check=False`` skips that step (a value
    error then fails its configuration at run time).

    Attributes: ``spec`` (the raw spec), ``name``, ``seed``, ``imports``, ``axes`` (list of
    key tuples: one per grid key, one per zipped group), ``configurations`` (list of
    :class:`Configuration`).

    The number of configurations (the product of the grid and zip lengths) is counted before
    any is built; past ``max_configurations`` (default :data:`MAX_CONFIGURATIONS`) the spec
    is refused with that count and the way out.
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        source: str | None = None,
        positions: dict[tuple, int] | None = None,
        check: bool = True,
        max_configurations: int | None = None,
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
        for mod in self.imports:  # a dotted name or a path to a .py file, as check --module
            try:
                import_user_module(mod, again=False)
            except (Exception, SystemExit) as exc:  # the user's code: any failure is reported
                raise ctx.error(
                    f"cannot import module {mod!r}: {describe_import_error(exc)}", ("imports",)
                ) from exc
        self.base = {k: v for k, v in spec.items() if k in _SETTING_KEYS}
        self.axes, values = self._parse_grids(spec.get("grid", {}), spec.get("zip", []), ctx)
        self._check_count(values, max_configurations, ctx)
        self.configurations = self._expand(values, ctx)
        if check:
            from convkit.sweep.preflight import check_configurations

            check_configurations(self.configurations, self.seed, ctx)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_dict(
        cls, spec: Mapping[str, Any], *, check: bool = True, max_configurations: int | None = None
    ) -> Sweep:
        """The same spec as a Python dict (e.g. ``{"problem": {...}, "grid": {...}}``)."""
        return cls(spec, check=check, max_configurations=max_configurations)

    @classmethod
    def from_toml(
        cls,
        path: str | os.PathLike,
        *,
        check: bool = True,
        max_configurations: int | None = None,
    ) -> Sweep:
        """Read a TOML spec file."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SpecError(
                f"cannot read the sweep spec: {exc.strerror or exc}", source=str(path)
            ) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError(
                f"not UTF-8 text (invalid byte at offset {exc.start}); a sweep spec is a TOML file",
                source=str(path),
            ) from None
        return cls.from_toml_text(
            text, source=str(path), check=check, max_configurations=max_configurations
        )

    @classmethod
    def from_toml_text(
        cls,
        text: str,
        source: str | None = None,
        *,
        check: bool = True,
        max_configurations: int | None = None,
    ) -> Sweep:
        """Parse TOML text."""
        import tomllib

        try:
            spec = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"line (\d+)", str(exc))
            raise SpecError(
                f"invalid TOML: {exc}", line=int(m.group(1)) if m else None, source=source
            ) from None
        return cls(
            spec,
            source=source,
            positions=toml_positions(text),
            check=check,
            max_configurations=max_configurations,
        )

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

    def _check_count(self, values: list[list[tuple]], limit: int | None, ctx: _Context) -> None:
        """Refuse a grid of more than ``limit`` configurations, counted without building any
        (the product of the axes' lengths, exact in Python integers)."""
        if limit is None:
            limit = MAX_CONFIGURATIONS
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"max_configurations must be an integer >= 1, got {limit!r}")
        count = math.prod(len(v) for v in values)
        if count <= limit:
            return
        sizes = " x ".join(str(len(v)) for v in values)
        raise ctx.error(
            f"the grid has {count:,} configurations ({sizes} over {self.grid_keys}), more than "
            f"the limit of {limit:,} (each is built, hashed and held in memory before anything "
            f"runs); shrink the grid, split it into several sweeps, or raise the limit: "
            f"convkit sweep --max-configurations {count}, or "
            f"Sweep(..., max_configurations={count})",
            ("grid",),
        )

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
