"""``convkit check``: the command line of the theory-vs-simulation checks.

Runs one cheap check (``w_eta.gap_condition``, exact eigenvalue computations, well under a
second) through :func:`convkit.cli.check.main` and through a subprocess
(``python -m convkit.cli check ...``), and verifies the JSON output (every row with a verdict
of the vocabulary and a reason); plus the coverage test (every result of the library has a
check).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from convkit import bounds as tc
from convkit.bounds import names
from convkit.cli import check as check_cli
from convkit.verdicts import CRASHED, HOLDS, VERDICTS, VIOLATED

KEYS = {"result", "setting", "measured", "theoretical", "verdict", "reason"}
CHEAP = "w_eta.gap_condition"
ROOT = Path(__file__).resolve().parents[1]


def _check_json(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    assert isinstance(data, list) and data
    for row in data:
        assert KEYS <= set(row), row
        assert row["result"] == "w_eta.gap_condition"
        assert row["verdict"] == HOLDS and row["verdict"] in VERDICTS
        assert isinstance(row["reason"], str) and row["reason"]
        assert isinstance(row["setting"], str) and row["setting"]
    return data


def test_main_quick_only_json(tmp_path, capsys):
    """main(['--quick', '--only', CHEAP, '--json', PATH]) returns 0, prints a table with the
    six column names and a summary counting the verdicts, and writes a JSON list of objects
    with the six keys."""
    out = tmp_path / "checks.json"
    rc = check_cli.main(["--quick", "--only", CHEAP, "--json", str(out), "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    for col in ("result", "setting", "measured", "theoretical", "verdict", "reason"):
        assert col in text.splitlines()[0]
    assert "w_eta.gap_condition" in text and "holds" in text
    assert "(quick mode): 2 holds" in text
    data = _check_json(out)
    assert len(data) == 2


def test_subprocess_cli(tmp_path):
    """`python -m convkit.cli check --quick --only CHEAP --json PATH` exits 0 and writes the
    same JSON structure."""
    out = tmp_path / "checks.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "convkit.cli",
            "check",
            "--quick",
            "--only",
            CHEAP,
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verdict" in proc.stdout
    _check_json(out)


def test_unknown_only_name_is_an_argument_error(capsys):
    """An --only name that matches no check gives exit code 2 and names the known checks."""
    assert check_cli.main(["--quick", "--only", "no.such.check"]) == 2
    assert "matches no check" in capsys.readouterr().err


def test_crash_gives_exit_code_1(monkeypatch, tmp_path, capsys):
    """A crashing check is reported as a 'crashed' row (the error as its reason) and makes the
    exit code 1 (a 'violated' verdict would not)."""

    def boom(quick):
        raise RuntimeError("deliberate failure")

    monkeypatch.setitem(tc.CHECKS, CHEAP, boom)
    out = tmp_path / "c.json"
    assert check_cli.main(["--quick", "--only", CHEAP, "--json", str(out), "--quiet"]) == 1
    data = json.loads(out.read_text())
    assert data[0]["verdict"] == CRASHED
    assert data[0]["reason"].startswith("RuntimeError: deliberate failure")
    assert "1 crashed" in capsys.readouterr().out


def test_violated_is_not_a_crash(monkeypatch, capsys):
    """A check whose verdict is 'violated' still exits 0."""

    def fails(quick):
        return [
            {
                "result": "w_eta.gap_condition",
                "setting": "s",
                "measured": 2.0,
                "theoretical": 1.0,
                "verdict": VIOLATED,
                "reason": "measured above the bound",
            }
        ]

    monkeypatch.setitem(tc.CHECKS, CHEAP, fails)
    assert check_cli.main(["--only", CHEAP, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "violated" in out and "measured above the bound" in out and "1 violated" in out


def test_free_text_verdict_is_a_crash(monkeypatch, capsys):
    """A row whose verdict is not in the vocabulary (or that lacks a reason) makes its check a
    crash: the vocabulary is enforced by the registry."""

    def free_text(quick):
        return [
            {
                "result": "w_eta.gap_condition",
                "setting": "s",
                "measured": 2.0,
                "theoretical": 1.0,
                "verdict": "does not hold",
                "reason": "r",
            }
        ]

    monkeypatch.setitem(tc.CHECKS, CHEAP, free_text)
    assert check_cli.main(["--only", CHEAP, "--quiet"]) == 1
    assert "verdict 'does not hold' is not one of" in capsys.readouterr().err


def test_list(capsys):
    """--list prints every check with the results it covers."""
    assert check_cli.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in tc.CHECKS:
        assert name in out


def test_every_library_result_has_a_check():
    """Coverage: every name of convkit.bounds.names() is covered by a registered check."""
    missing = set(names()) - tc.covered_results()
    assert not missing, sorted(missing)


@pytest.mark.parametrize(
    "value, text", [(0.1234567891, "0.123457"), (float("inf"), "inf"), ("N* = [1]", "N* = [1]")]
)
def test_table_cells(value, text):
    """Numbers are printed with 6 significant digits; strings as they are."""
    table = check_cli.format_table(
        [
            {
                "result": "r",
                "setting": "s",
                "measured": value,
                "theoretical": 1.0,
                "verdict": "v",
                "reason": "why",
            }
        ]
    )
    assert text in table


def test_list_with_json_writes_json(tmp_path, capsys):
    """--list --json - wrote the plain list and ignored --json; now a JSON list of
    {"check", "covers"} objects goes to stdout (or to the file)."""
    assert check_cli.main(["--list", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["check"] for d in data] == list(tc.CHECKS)
    assert all(d["covers"] == list(tc.COVERS[d["check"]]) for d in data)
    out = tmp_path / "list.json"
    assert check_cli.main(["--list", "--json", str(out)]) == 0
    assert json.loads(out.read_text()) == data
