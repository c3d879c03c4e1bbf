"""The `convkit bounds` and `convkit figures` command lines: every option is honoured, and a
bad request is one line on stderr with exit code 2, before any work."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from convkit.cli import main

FAKE = """
import pandas as pd
from pathlib import Path

from convkit import verdicts as V

TITLE = "fake analysis {name}"
CLAIMS = V.declare_claims(
    "{name}", {{"sum_of_y": V.Claim("the sum of y", "a fake analysis", kind=V.MEASUREMENT)}}
)


def run(quick):
    return pd.DataFrame({{"x": [1, 2], "y": [1.0, 3.0]}})


def plot(data, outdir):
    path = Path(outdir) / "{name}.png"
    path.write_bytes(b"not a real png")
    return [path]


def checks(data):
    return [dict(result="{name}.sum_of_y", setting="two rows", measured=float(data.y.sum()),
                 theoretical=None, verdict="measured", reason="")]
"""


def _analyses(tmp_path: Path, names: tuple[str, ...] = ("alpha", "beta")) -> Path:
    """A package of tiny analyses under a name unique to the test (module caching)."""
    pkg = tmp_path / f"an_{tmp_path.name}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for n in names:
        (pkg / f"{n}.py").write_text(FAKE.format(name=n))
    return pkg


def _code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse errors
        return int(exc.code)


def _one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_bounds_list_honours_kind(capsys):
    """`--list --kind identity` listed every result (the kind was ignored with --list)."""
    assert main(["bounds", "--kind", "identity", "--json"]) == 0

    identities = [r["name"] for r in json.loads(capsys.readouterr().out)]
    assert identities
    assert main(["bounds", "--list", "--kind", "identity"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == identities
    assert main(["bounds", "--list"]) == 0
    assert len(capsys.readouterr().out.split()) > len(listed)


def test_figures_only_without_names_is_refused(tmp_path, capsys):
    """`--only` with no names ran every analysis; now one line and exit 2."""
    pkg = _analyses(tmp_path)
    out = tmp_path / "out"
    assert _code(["figures", "--only", "--analyses", str(pkg), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert "--only" in line and "expected at least one argument" in line
    assert not out.exists()


def test_figures_folder_without_analyses_is_refused(tmp_path, capsys):
    """An --analyses folder holding no analysis module exited 0 (an empty index)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out"
    assert _code(["figures", "--analyses", str(empty), "--out", str(out)]) == 2
    assert f"no analyses in {empty}" in _one_error_line(capsys)
    assert not out.exists()


def _refuses_writes(folder: Path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return True
    return False


@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A factory of directories this process cannot write into, holding the given files: a
    chmod 0o555 folder, or, as root (whom permissions do not stop), the same folder made
    immutable with ``chattr +i`` (undone at teardown); a directory of the read-only sysfs
    (which holds no files of ours) as the last resort."""
    import shutil
    import subprocess

    made: list[Path] = []

    def make(files: dict[str, str] | None = None) -> Path:
        folder = tmp_path / f"read_only{len(made)}"
        folder.mkdir()
        for name, text in (files or {}).items():
            (folder / name).write_text(text)
        folder.chmod(0o555)
        if _refuses_writes(folder):
            return folder
        chattr = shutil.which("chattr")
        if chattr and subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode == 0:
            made.append(folder)
            if _refuses_writes(folder):
                return folder
        if not files and _refuses_writes(Path("/sys/kernel")):
            return Path("/sys/kernel")
        pytest.skip("no directory here refuses writes")

    yield make
    for folder in made:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)


@pytest.mark.parametrize("mode", [[], ["--checks-only"], ["--replot"]])
def test_figures_unwritable_out_is_one_line(tmp_path, capsys, mode, read_only_dir):
    """A read-only --out ended in tracebacks (or exit 1 after running); now one line, exit
    2, before any analysis runs (--checks-only/--replot: with the data they read there)."""
    pkg = _analyses(tmp_path)
    data = {f"{n}.csv": "x,y\n1,1.0\n2,3.0\n" for n in ("alpha", "beta")} if mode else None
    out = read_only_dir(data)
    argv = ["figures", *mode, "--analyses", str(pkg), "--out", str(out)]
    assert _code(argv) == 2
    line = _one_error_line(capsys)
    assert f"cannot write into the output directory {out}" in line


def test_figures_out_under_a_file_is_one_line(tmp_path, capsys):
    pkg = _analyses(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _code(["figures", "--analyses", str(pkg), "--out", str(blocker / "out")]) == 2
    assert "cannot write into the output directory" in _one_error_line(capsys)


@pytest.mark.parametrize("mode", ["--checks-only", "--replot"])
def test_checks_only_and_replot_on_an_empty_folder_are_one_line(tmp_path, capsys, mode):
    """An empty folder gave one traceback per analysis and exit 1; now one line, exit 2, and
    nothing written.  With --only, a named analysis without its CSV is refused the same way;
    without --only, the analyses whose CSV is there are re-evaluated."""
    pkg = _analyses(tmp_path)
    empty = tmp_path / "empty_out"
    empty.mkdir()
    assert _code(["figures", mode, "--analyses", str(pkg), "--out", str(empty)]) == 2
    line = _one_error_line(capsys)
    assert f"{mode} reads the data of an earlier run" in line and "alpha.csv" in line
    assert sorted(os.listdir(empty)) == []
    (empty / "alpha.csv").write_text("x,y\n1,1.0\n2,3.0\n")
    argv = ["figures", mode, "--analyses", str(pkg), "--out", str(empty)]
    assert _code([*argv, "--only", "alpha", "beta"]) == 2
    assert "beta.csv" in _one_error_line(capsys)
    assert _code(argv) == 0
    assert (empty / "checks.json").is_file()


def test_sweep_option_errors_are_one_line(tmp_path, capsys):
    """A missing --out printed argparse's usage block and the error; now one line, exit 2."""
    assert _code(["sweep", str(tmp_path / "spec.toml")]) == 2
    line = _one_error_line(capsys)
    assert "--out" in line and "(see convkit sweep --help)" in line


def test_sweep_unwritable_out_is_one_line(tmp_path, capsys, read_only_dir):
    """`convkit sweep --out` into a read-only folder (or under a file) ended in a traceback."""
    from sweep_helpers import tiny_spec

    from convkit import sweep as sw

    spec = tmp_path / "spec.toml"
    spec.write_text(
        'seed = 11\nsteps = 24\nreplicates = 8\n[problem]\nkind = "least_squares"\nd = 5\n'
        '[algorithm]\nkind = "mba"\nworkers = 2\nstep = 0.1\n'
    )
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out in (blocker / "out", read_only_dir() / "out"):
        assert _code(["sweep", str(spec), "--out", str(out), "--quiet"]) == 2
        assert f"cannot write into the output directory {out}" in _one_error_line(capsys)
    with pytest.raises(sw.SweepOutputError, match="cannot write into the output directory"):
        sw.run(tiny_spec(), blocker / "out")
