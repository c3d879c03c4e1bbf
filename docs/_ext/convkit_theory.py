"""The theory pages, written at build time from the bounds registry.

One page per topic module of :mod:`convkit.bounds` (the module whose factory registered the
result): the module's docstring (its theory notes), then every result of the library it holds
with its statement (``TheoryResult.latex``, i.e. ``sympy.latex`` of the expression, rendered
as display maths), kind, conditions, unknown constants, provenance, notes, the checks of the
registry that cover it, and, for a result derived here, the derivation function's docstring
and source.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import sympy as sp

#: A readable title per topic module.
TOPIC_TITLES = {
    "sgd_stability": "Mean-square stability of SGD",
    "averaged_sgd": "Averaged SGD (Polyak-Juditsky)",
    "local_sgd": "Communication of Local-SGD",
    "local_sgd_large_steps": "Local-SGD with large steps: a model of the trade-off",
    "decentralized": "Decentralized SGD: D-PSGD, DeepSqueeze, CHOCO-SGD",
    "mixing": "Mixing matrices W_eta",
    "compression": "Compressors and error feedback",
}

_DERIVED = re.compile(r"derived here: ([A-Za-z_][\w.]*)")


def _heading(text: str, char: str = "=") -> list[str]:
    return [text, char * len(text), ""]


def escape(text: str) -> str:
    """``text`` with the reStructuredText inline markup characters escaped."""
    return re.sub(r"([\\`*_|<>\[\]])", r"\\\1", str(text))


def _math(latex: str) -> list[str]:
    return [".. math::", "", "   " + latex.replace("\n", " "), ""]


def derivation_of(provenance: str) -> Any | None:
    """The derivation function named in a ``"derived here: module.function"`` provenance."""
    m = _DERIVED.search(provenance)
    if m is None:
        return None
    modname, _, func = m.group(1).rpartition(".")
    try:
        return getattr(importlib.import_module(modname), func)
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"provenance {provenance!r} names no derivation") from exc


def result_block(res: Any, checks: list[str]) -> list[str]:
    """The reStructuredText of one result: statement, fields, derivation."""
    lines = _heading(res.name, "-")
    lines += _math(res.latex())
    fields = [
        ("kind", f"``{res.kind}``"),
        ("quantity", escape(res.quantity)),
    ]
    if res.conditions:
        fields.append(("conditions", ", ".join(f":math:`{sp.latex(c)}`" for c in res.conditions)))
    if res.variable is not None:
        fields.append(("limit", f":math:`{sp.latex(res.variable)} \\to \\infty`"))
    if res.constants:
        fields.append(
            ("unknown constants", ", ".join(f":math:`{sp.latex(c)}`" for c in res.constants))
        )
    if res.parameters:
        fields.append(("parameters", ", ".join(f"``{p}``" for p in res.parameters)))
    fields.append(("provenance", escape(res.provenance)))
    if res.notes:
        fields.append(("notes", escape(res.notes)))
    fields.append(("checked by", ", ".join(f"``{c}``" for c in checks) if checks else "no check"))
    for key, value in fields:
        lines.append(f":{key}: {value}")
    lines.append("")
    func = derivation_of(res.provenance)
    if func is not None:
        path = f"{func.__module__}.{func.__qualname__}"
        lines += [
            f"**Derivation** (:py:func:`{path}`):",
            "",
            f".. autofunction:: {path}",
            "   :no-index:",
            "",
            ".. code-block:: python",
            "",
        ]
        src = inspect.getsource(inspect.unwrap(func))
        lines += ["   " + ln if ln.strip() else "" for ln in src.splitlines()] + [""]
    return lines


def write_theory(outdir: Path) -> list[Path]:
    """Write ``outdir/index.rst`` and one page per topic module of the library."""
    from convkit.bounds import COVERS, LIBRARY, get, names

    outdir.mkdir(parents=True, exist_ok=True)
    by_topic: dict[str, list[str]] = {}
    for n in names():
        by_topic.setdefault(LIBRARY[n].__module__, []).append(n)
    covering: dict[str, list[str]] = {}
    for check, covered in COVERS.items():
        for r in covered:
            covering.setdefault(r, []).append(check)

    written = []
    rows = []
    for modname, results in by_topic.items():
        short = modname.rsplit(".", 1)[-1]
        title = TOPIC_TITLES.get(short, short)
        lines = _heading(title)
        lines += [
            f"Topic module :py:mod:`{modname}`: {len(results)} results. Statements are",
            "rendered from the SymPy expressions of the registry (``TheoryResult.latex``).",
            "",
            f".. automodule:: {modname}",
            "   :no-members:",
            "   :no-index:",
            "",
        ]
        for n in results:
            res = get(n)
            lines += result_block(res, covering.get(n, []))
            rows.append((n, res.kind, short, res.provenance))
        p = outdir / f"{short}.rst"
        p.write_text("\n".join(lines))
        written.append(p)

    idx = _heading("Theory")
    idx += [
        f"The library of results (:py:data:`convkit.bounds.registry.LIBRARY`): {len(rows)}",
        "results, each a SymPy statement with its conditions and provenance, a derivation",
        "when it is derived here, and a check against simulation",
        "(``convkit check``, :py:func:`convkit.bounds.registry.run_checks`). The verdict of",
        "every check row is one of :py:data:`convkit.verdicts.VERDICTS`.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 30 15 55",
        "",
        "   * - result",
        "     - kind",
        "     - provenance",
    ]
    for n, kind, short, prov in rows:
        idx += [
            f"   * - :doc:`{n} <{short}>`",
            f"     - ``{kind}``",
            f"     - {escape(prov)}",
        ]
    idx += ["", ".. toctree::", "   :maxdepth: 2", ""]
    idx += [f"   {modname.rsplit('.', 1)[-1]}" for modname in by_topic] + [""]
    p = outdir / "index.rst"
    p.write_text("\n".join(idx))
    written.append(p)
    return written
