"""Sweep specification errors and what they point at: :class:`SpecError`, the line numbers
of the keys of a TOML document, and the context that turns a key path into an error."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any


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


class SweepOutputError(ValueError):
    """An output directory that cannot be used as asked: it holds another sweep (pass
    ``overwrite``), another process is running a sweep in it, or its ``sweep.json`` is
    damaged.  The message is one line naming the directory or the file."""
