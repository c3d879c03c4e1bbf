"""``docs/getting_started.md`` as it stands: its code runs in a fresh interpreter and prints
what the page shows, the make targets it names exist, and its table of extras is the one of
``pyproject.toml``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "getting_started.md"
TEXT = DOC.read_text()
#: each ``python`` block with the ``text`` block that shows its output
EXAMPLES = re.findall(r"```python\n(.*?)```\s*```text\n(.*?)```", TEXT, flags=re.S)
SEPARATOR = "----- next block -----"


def test_the_page_has_examples_with_output():
    assert len(EXAMPLES) >= 2
    assert "ck.simulate(" in EXAMPLES[0][0]
    assert len(re.findall(r"```python\n", TEXT)) == len(EXAMPLES), "a code block without output"


def test_examples_print_what_the_page_shows(tmp_path):
    """The blocks run in order in one fresh interpreter (later blocks use earlier names), each
    printing exactly the text block below it (the engines' numbers are bit-identical for a
    seed, whatever the machine's cores)."""
    code = f"\nprint({SEPARATOR!r})\n".join(block for block, _ in EXAMPLES)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = proc.stdout.split(SEPARATOR + "\n")
    assert len(printed) == len(EXAMPLES)
    for (block, shown), out in zip(EXAMPLES, printed, strict=True):
        assert out.rstrip() == shown.rstrip(), f"block:\n{block}\nprinted:\n{out}"


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    named = set(re.findall(r"`make (\w[\w-]*)", TEXT))
    assert {"figures", "test", "docs"} <= named
    for target in named:
        assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target


def test_extras_table_matches_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \|", TEXT, flags=re.M)
    documented = {name for name, _ in rows}
    assert documented == set(extras) - {"dev"}, (documented, set(extras))
