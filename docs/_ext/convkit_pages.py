"""Sphinx extension writing the generated pages of the site before the sources are read.

On ``builder-inited`` it writes, under the documentation source directory (all ignored by
git, rewritten on every build):

* ``api/``: the API reference (:mod:`convkit_api`);
* ``theory/``: the theory pages from the bounds registry (:mod:`convkit_theory`);
* ``gallery/``: the figure gallery from ``figures/`` (:mod:`convkit_gallery`);
* ``notebooks/``: copies of ``notebooks/*.ipynb`` with their committed outputs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from convkit_api import HOMES, write_api
from convkit_gallery import write_gallery
from convkit_theory import write_theory

#: Generated directories of the source tree (removed and rewritten on every build).
GENERATED = ("api", "theory", "gallery", "notebooks")


def write_notebooks(outdir: Path, notebooks_dir: Path) -> list[Path]:
    """Copy the notebooks and write their index page."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = sorted(notebooks_dir.glob("*.ipynb"))
    for nb in paths:
        shutil.copyfile(nb, outdir / nb.name)
    lines = [
        "Notebooks",
        "=========",
        "",
        "Each notebook is a short story that runs top to bottom in about a minute",
        "(``jupyter lab notebooks/``). They are shown here with the outputs they were committed",
        "with; the test suite executes them on reduced settings (``CONVKIT_NOTEBOOK_QUICK=1``).",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
        *[f"   {nb.stem}" for nb in paths],
        "",
    ]
    idx = outdir / "index.rst"
    idx.write_text("\n".join(lines))
    return [*(outdir / nb.name for nb in paths), idx]


def generate(app: Any) -> None:
    """Write every generated page (connected to ``builder-inited``)."""
    src = Path(app.srcdir)
    repo = src.parent
    for name in GENERATED:
        shutil.rmtree(src / name, ignore_errors=True)
    write_api(src / "api")
    write_theory(src / "theory")
    write_gallery(src / "gallery", repo / "figures", repo / "analyses")
    write_notebooks(src / "notebooks", repo / "notebooks")


def resolve_reexport(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve a Python reference to a re-exported name (``convkit.exact.expected_error``,
    or ``TheoryResult`` inside ``convkit.bounds``) to the page of the module defining it."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    candidates = [target]
    if node.get("py:module"):
        candidates.append(f"{node['py:module']}.{target}")
    for name in candidates:
        home = HOMES.get(name)
        if home is not None:
            domain = env.get_domain("py")
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, "obj", home, node, contnode
            )
    return None


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", generate)
    app.connect("missing-reference", resolve_reexport)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
