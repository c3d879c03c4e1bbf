"""The Parameters sections of the API pages list the real parameters, each described once.

The API pages render numpy-style docstrings with ``sphinx.ext.napoleon``; this parses every
public function, class and public method of the pages (``docs/_ext/convkit_api``) the same way
and compares the documented names with :func:`inspect.signature`. Free prose inside a
Parameters section is parsed as parameters (a paragraph became eleven "parameters" of
``simulate``); two names on one line (``backend, dtype:``) are rendered as two entries with one
copied description.
Several names on one line remain allowed elsewhere (numpy style, ``N, n : int``).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1] / "docs"


def documented_parameters(doc: str) -> list[tuple[str, str]]:
    """``(name, description)`` of each entry of the Parameters / Other Parameters sections of
    a numpy-style docstring, as napoleon renders them (one entry per name of a ``a, b`` line)."""
    from sphinx.ext.napoleon import Config
    from sphinx.ext.napoleon.docstring import NumpyDocstring

    text = str(NumpyDocstring(doc, Config(napoleon_use_param=True, napoleon_use_rtype=False)))
    out = []
    fields = re.finditer(r"^:param ([^:]+):(.*?)(?=^:\w|\Z)", text, flags=re.M | re.S)
    for m in fields:
        name = m.group(1).strip().replace("\\", "").lstrip("*")
        out.append((name, " ".join(m.group(2).split())))
    return out


def _api_objects() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every public function, class and public method shown on the API pages."""
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        api = importlib.import_module("convkit_api")
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    pages, _ = api.build_pages()
    for modname, page in pages.items():
        for name, obj in page.own:
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{modname}.{name}", obj
            if inspect.isclass(obj):
                for meth_name, meth in vars(obj).items():
                    if inspect.isfunction(meth) and not meth_name.startswith("_"):
                        yield f"{modname}.{name}.{meth_name}", meth


def _signature_names(obj: Callable[..., Any]) -> list[str]:
    params = inspect.signature(obj).parameters.values()
    return [p.name for p in params if p.name not in ("self", "cls")]


def test_parser_reads_entries_and_prose_as_napoleon_does():
    doc = "S.\n\nParameters\n----------\nx : int\n    A.\nb, c:\n    B.\n\nFree prose, here.\n"
    got = documented_parameters(doc)
    assert [n for n, _ in got] == ["x", "b", "c", "Free prose", "here."]
    assert got[0] == ("x", "A.") and got[1][1] == got[2][1] == "B."


def test_no_documented_parameter_outside_the_signature():
    """Every name of a Parameters section is a parameter of the object: no prose parsed as
    parameters, no stale names. (Several names on one line, ``N, n : int``, are numpy style
    and allowed here.)"""
    problems = []
    for path, obj in _api_objects():
        entries = documented_parameters(inspect.getdoc(obj) or "")
        if not entries:
            continue
        names = _signature_names(obj)
        bogus = [n for n, _ in entries if n not in names]
        if bogus:
            problems.append(f"{path}: documented but not parameters: {bogus}")
    assert not problems, "\n".join(problems)


def test_simulate_documents_exactly_its_parameters():
    """The page of the engine lists each parameter of its signature once, in signature order,
    each with a description of its own."""
    from convkit.simulate import simulate

    entries = documented_parameters(inspect.getdoc(simulate) or "")
    assert [n for n, _ in entries] == _signature_names(simulate)
    descriptions = [d for _, d in entries]
    shared = [n for n, d in entries if descriptions.count(d) > 1]
    assert not shared, f"parameters sharing one copied description: {shared}"
