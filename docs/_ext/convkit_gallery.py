"""The figure gallery, written at build time from ``figures/``.

For every analysis of ``figures/checks.json`` (the committed check rows, ``{analysis: [row,
...]}``) one page shows its title (the ``TITLE`` of ``analyses/<name>.py``, read with
:mod:`ast`, nothing imported), its figures (``figures/<name>*.png``, each PNG assigned to the
analysis with the longest matching name), its declared claims (the ``CLAIMS`` of the module,
:func:`convkit.verdicts.declare_claims`: id, kind, statement, source, each with a link target)
and its verdict table (result, setting, measured, theoretical, verdict, reason), numbers rounded
by :func:`convkit.plotting.plain`, no ``None``. The result of every row links to its
statement: a declared claim to its entry on the page, a registered result to its theory page.
Every row is validated against the analysis' claim namespace
(:func:`convkit.figures.claim_namespace`) when its module exists. The index counts the
verdicts per analysis.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from convkit_theory import escape

from convkit.figures import claim_namespace
from convkit.plotting import plain
from convkit.verdicts import VERDICTS, validate_row

_NUMPY_REPR = re.compile(r"np\.(?:float|int)\d*\(([^()]*)\)")
COLUMNS = ("result", "setting", "measured", "theoretical", "verdict", "reason")


def analysis_title(analyses_dir: Path, name: str) -> str:
    """The ``TITLE`` string constant of ``analyses/<name>.py`` ("" if it has none)."""
    path = analyses_dir / f"{name}.py"
    if not path.exists():
        return ""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "TITLE" for t in node.targets
        ):
            try:
                return str(ast.literal_eval(node.value))
            except ValueError:
                return ""
    return ""


def analysis_module(analyses_dir: Path, name: str) -> Any | None:
    """The module ``analyses/<name>.py`` (imported from the parent of ``analyses_dir``), or
    ``None`` when there is no such file."""
    if not (analyses_dir / f"{name}.py").exists():
        return None
    parent = str(analyses_dir.resolve().parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return importlib.import_module(f"{analyses_dir.name}.{name}")


def claim_target(claim_id: str) -> str:
    """The reStructuredText link target of a declared claim (``claim-<id>``)."""
    return "claim-" + claim_id.replace("_", "-").lower()


def claims_block(claims: dict[str, Any]) -> list[str]:
    """The declared claims of an analysis: one entry per id (kind, statement, source), each
    preceded by its link target (:func:`claim_target`)."""
    if not claims:
        return []
    lines = [
        *_heading("Claims", "-"),
        "The claims this analysis declares (``CLAIMS``); its check rows name these ids or",
        "registered results of the theory library.",
        "",
    ]
    for cid, claim in claims.items():
        lines += [
            f".. _{claim_target(cid)}:",
            "",
            f"``{cid}`` ({claim.kind})",
            f"   {escape(claim.statement)}. *Source:* {escape(claim.source)}.",
            "",
        ]
    return lines


def result_link(result: str, claims: dict[str, Any]) -> str:
    """The result cell: a link to the statement of ``result`` (a declared claim's entry, or
    the theory page of a registered result), plain text when it is neither."""
    if result in claims:
        return f":ref:`{result} <{claim_target(result)}>`"
    from convkit.bounds import LIBRARY

    if result in LIBRARY:
        topic = LIBRARY[result].__module__.rsplit(".", 1)[-1]
        return f":doc:`{result} </theory/{topic}>`"
    return cell(result)


def figures_of(names: list[str], pngs: list[Path]) -> dict[str, list[Path]]:
    """Assign each PNG to the analysis with the longest name that prefixes its stem
    (``local_sgd_threshold_mc_T.png`` belongs to ``local_sgd_threshold_mc``)."""
    out: dict[str, list[Path]] = {n: [] for n in names}
    for png in sorted(pngs):
        owners = [n for n in names if png.stem == n or png.stem.startswith(n + "_")]
        if owners:
            out[max(owners, key=len)].append(png)
    return out


def cell(value: Any) -> str:
    """One table cell: numbers rounded to plain floats, lists element-wise, text escaped."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cell(v) for v in value) + "]"
    v = plain(value)
    # numbers written into the text of a row as ``np.float64(500.0)``: show the number
    text = _NUMPY_REPR.sub(r"\1", str(v)).replace("\n", " ").strip()
    if text in ("", "None", "nan"):
        text = "-"
    out = escape(text)
    return "\\" + out if out[:1] in "-+*#" else out


def verdict_table(rows: list[dict], claims: dict[str, Any] | None = None) -> list[str]:
    """A list-table of the check rows, each result linked to its statement
    (:func:`result_link`; ``claims`` the analysis' declared claims)."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :class: verdict-table",
        "",
        "   * - " + "\n     - ".join(COLUMNS),
    ]
    for row in rows:
        cells = [cell(row.get(k)) for k in COLUMNS]
        cells[0] = result_link(str(row.get("result")), claims or {})
        cells[4] = f"**{cells[4]}**"
        lines.append("   * - " + "\n     - ".join(cells))
    return [*lines, ""]


def _heading(text: str, char: str = "=") -> list[str]:
    return [text, char * len(text), ""]


def write_gallery(outdir: Path, figures_dir: Path, analyses_dir: Path) -> list[Path]:
    """Write ``outdir/index.rst`` and one page per analysis, copying its PNGs next to it."""
    outdir.mkdir(parents=True, exist_ok=True)
    checks: dict[str, list[dict]] = json.loads((figures_dir / "checks.json").read_text())
    names = sorted(checks)
    figs = figures_of(names, list(figures_dir.glob("*.png")))
    written = []
    summary = []
    for name in names:
        rows = checks[name]
        module = analysis_module(analyses_dir, name)
        namespace = None if module is None else claim_namespace(name, module)
        claims = {} if namespace is None else dict(namespace.claims)
        for row in rows:
            validate_row(row, where=f"figures/checks.json: {name}", namespace=namespace)
        title = analysis_title(analyses_dir, name)
        lines = _heading(name)
        if title:
            lines += [escape(title), ""]
        lines += [
            f"Data: ``figures/{name}.csv``; code: ``analyses/{name}.py``; reproduce with",
            f"``convkit figures --only {name}``.",
            "",
        ]
        for png in figs[name]:
            shutil.copyfile(png, outdir / png.name)
            lines += [
                f".. figure:: {png.name}",
                "   :width: 100%",
                f"   :alt: {png.stem}",
                "",
                f"   ``{png.name}``",
                "",
            ]
        lines += claims_block(claims)
        lines += _heading("Checks", "-")
        lines += verdict_table(rows, claims)
        p = outdir / f"{name}.rst"
        p.write_text("\n".join(lines))
        written.append(p)
        counts = Counter(r["verdict"] for r in rows)
        summary.append((name, len(figs[name]), counts, figs[name][:1]))

    idx = _heading("Figure gallery")
    idx += [
        "Every analysis of ``analyses/``: its figures and the claims it tests, with the",
        "verdicts of the committed data (``figures/checks.json``). Verdicts:",
        ", ".join(f"``{v}``" for v in VERDICTS) + ".",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - analysis",
        "     - figures",
        "     - verdicts",
    ]
    for name, nfig, counts, _ in summary:
        text = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]) or "-"
        idx += [f"   * - :doc:`{name}`", f"     - {nfig}", f"     - {text}"]
    idx += [""]
    for name, _, _, first in summary:
        if first:
            idx += [
                f".. image:: {first[0].name}",
                "   :width: 45%",
                f"   :alt: {name}",
                f"   :target: {name}.html",
                "",
            ]
    idx += [".. toctree::", "   :maxdepth: 1", "   :hidden:", ""]
    idx += [f"   {n}" for n in names] + [""]
    p = outdir / "index.rst"
    p.write_text("\n".join(idx))
    written.append(p)
    return written
