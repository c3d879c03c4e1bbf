"""What the README names exists and agrees: every repository path it mentions (in code spans and
links), the example's own command line, the notebooks and the way to run them (the extra it
installs, the notebooks it lists, the ``jupyter execute`` command it shows)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = ("README.template.md", "README.md")

#: Paths the README names as outputs of a command (they exist once that command ran).
OUTPUTS = {"docs/_build/html", "figures-quick/", "runs/example"}

#: The shell commands of the README's notebooks section, in order.
NOTEBOOK_COMMANDS = (
    '.venv/bin/python -m pip install -e ".[notebooks]"',
    ".venv/bin/jupyter lab notebooks/",
    ".venv/bin/jupyter execute notebooks/local_sgd_tradeoffs.ipynb",
)


def _text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def repo_paths(text: str) -> set[str]:
    """Repository paths named in ``text``: words with a ``/`` inside code spans, and the
    targets of relative Markdown links (templates' ``{{ }}`` placeholders are not paths)."""
    out = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        for word in span.split():
            word = word.strip(",;:()\"'")
            if "/" in word and re.fullmatch(r"[\w.*\-]+(/[\w.*\-]*)+", word):
                out.add(word)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+://|#|mailto:", target):
            out.add(target)
    return out


@pytest.mark.parametrize("readme", READMES)
def test_every_path_the_readme_names_exists(readme):
    paths = repo_paths(_text(readme))
    assert "examples/sweep_example.toml" in paths and "notebooks/" in paths  # the parser sees them
    missing = [
        p
        for p in sorted(paths - OUTPUTS)
        if not (list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists())
    ]
    assert not missing, f"{readme} names paths that do not exist: {missing}"


@pytest.mark.parametrize("readme", READMES)
def test_the_example_command_is_the_readmes(readme):
    """The sweep example states the command that runs it; the README shows the same one."""
    example = _text("examples/sweep_example.toml")
    commands = re.findall(r"^#\s+(convkit sweep .+?)\s*$", example, flags=re.M)
    assert commands, "examples/sweep_example.toml states no 'convkit sweep' command"
    for cmd in commands:
        assert cmd in _text(readme), f"{readme} does not show the example's command {cmd!r}"


@pytest.mark.parametrize("readme", READMES)
def test_notebooks_section_lists_the_notebooks_and_how_to_run_them(readme):
    text = _text(readme)
    assert "## Notebooks" in text
    section = text.split("## Notebooks", 1)[1].split("\n## ", 1)[0]
    on_disk = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    named = set(re.findall(r"`([\w-]+\.ipynb)`", section))
    assert named == on_disk, f"listed {sorted(named)}, on disk {sorted(on_disk)}"
    for cmd in NOTEBOOK_COMMANDS:
        assert cmd in section, f"{readme}: the notebooks section does not show {cmd!r}"


def test_the_notebooks_extra_provides_the_commands():
    extras = tomllib.loads(_text("pyproject.toml"))["project"]["optional-dependencies"]
    assert "notebooks" in extras
    names = {re.split(r"[<>=\[ ]", req, maxsplit=1)[0] for req in extras["notebooks"]}
    assert {"jupyter", "nbclient", "ipykernel"} <= names  # lab and execute, and the kernel
    notebook = NOTEBOOK_COMMANDS[2].split()[-1]
    assert (ROOT / notebook).is_file()


def test_jupyter_execute_is_a_valid_command():
    """The headless command: ``jupyter execute`` (from nbclient, a test dependency) accepts the
    call shown.  Running the notebook itself is tests/test_notebooks.py's job."""
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.exists():
        pytest.skip("jupyter is not installed in this environment (the notebooks extra)")
    out = subprocess.run(
        [str(jupyter), "execute", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "notebook" in (out.stdout + out.stderr).lower()
