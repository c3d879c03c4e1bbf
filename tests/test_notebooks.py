"""Every notebook in notebooks/ executes without error (they use small settings)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_is_a_notebook():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "error"
    ]
    assert not errors
    # a notebook that draws shows its figures inline (no non-interactive backend forced)
    if any("plt." in "".join(c.source) for c in nb.cells if c.cell_type == "code"):
        images = [
            o
            for c in nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if "image/png" in o.get("data", {})
        ]
        assert images, f"{path.name} draws a figure but displays none"
