"""The notebooks of notebooks/: committed with their outputs, executed here on reduced settings.

Every notebook runs top to bottom with ``CONVKIT_NOTEBOOK_QUICK=1`` (the notebooks read it and
shrink their grids). ``MPLBACKEND=Agg`` is set for the kernel, as on a headless machine: a
notebook that draws must still show its figures inline (``%matplotlib inline``), which is what
a non-interactive backend forced in the notebook used to prevent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: The stories the site and the README point to (besides the quick tour).
STORIES = ("local_sgd_tradeoffs", "decentralized_compression", "bounds_playground")


def _code(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def _draws(nb) -> bool:
    return any("plt." in c.source for c in _code(nb))


def _images(nb) -> list:
    return [o for c in _code(nb) for o in c.outputs if "image/png" in o.get("data", {})]


def test_the_stories_are_there():
    stems = {p.stem for p in NOTEBOOKS}
    assert set(STORIES) <= stems, f"missing notebooks: {set(STORIES) - stems}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_with_outputs(path):
    """The site renders the committed outputs: every code cell ran, in order, without error,
    and a notebook that draws carries its figures."""
    nb = nbformat.read(path, as_version=4)
    counts = [c.execution_count for c in _code(nb)]
    assert all(isinstance(n, int) for n in counts), f"{path.name}: cells not executed: {counts}"
    assert counts == sorted(counts), f"{path.name}: cells executed out of order: {counts}"
    errors = [o for c in _code(nb) for o in c.outputs if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: committed with an error output"
    if _draws(nb):
        assert _images(nb), f"{path.name} draws but its committed outputs hold no figure"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_public_api_only(path):
    """Notebooks use ``import convkit as ck`` and public submodules, no private names."""
    nb = nbformat.read(path, as_version=4)
    src = "\n".join(c.source for c in _code(nb))
    private = re.findall(r"(?:from|import)\s+convkit(?:\.\w+)*\._\w+|import\s+_\w+", src)
    assert not private, f"{path.name} imports private names: {private}"
    if path.stem in STORIES:
        assert "CONVKIT_NOTEBOOK_QUICK" in src, f"{path.name} has no reduced settings"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch):
    monkeypatch.setenv("CONVKIT_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    for c in _code(nb):
        c.outputs = []
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in _code(nb) for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    if _draws(nb):
        assert _images(nb), f"{path.name} draws a figure but displays none"
