"""The figure gallery, written at build time from ``figures/``.

For every analysis of ``figures/checks.json`` (the committed check rows, ``{analysis: [row,
...]}``) one page shows its title (the ``TITLE`` of ``analyses/<name>.py``, read with
:mod:`ast`, nothing imported), its figures (``figures/<name>*.png``, each PNG assigned to the
analysis with the longest matching name) and its verdict table (result, setting, measured,
theoretical, verdict, reason), numbers rounded by :func:`convkit.plotting.plain`, no ``None``.
The index counts the verdicts per analysis.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from convkit_theory import escape

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


def verdict_table(rows: list[dict]) -> list[str]:
    """A list-table of the check rows."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :class: verdict-table",
        "",
        "   * - " + "\n     - ".join(COLUMNS),
    ]
    for row in rows:
        cells = [cell(row.get(k)) for k in COLUMNS]
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
        for row in rows:
            validate_row(row, where=f"figures/checks.json: {name}")
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
        lines += _heading("Checks", "-")
        lines += verdict_table(rows)
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
