"""Hardened command line: `convkit simulate` answers a bad value with one line and exit code
2, documents every option; `convkit check --json` refuses an unwritable path before running
anything; printed tables never show numpy reprs, unrounded floats or None."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from convkit.cli import check as check_cli
from convkit.cli import simulate as simulate_cli

SMALL = ["--d", "3", "--workers", "2", "--gradients", "40", "--replicates", "3"]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "convkit.cli", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "option, value",
    [
        ("--alpha", "2"),
        ("--seed", "-4"),
        ("--d", "0"),
        ("--workers", "0"),
        ("--noise", "-1"),
        ("--C", "-1"),
        ("--C", "nan"),
        ("--gradients", "0"),
        ("--gradients", "7"),  # not a multiple of workers
        ("--replicates", "0"),
        ("--spectrum", "foo"),
        ("--metric", "foo"),
        ("--comm", "rounds:abc"),
        ("--comm", "every:0"),
        ("--comm", "rounds:500"),  # more rounds than local steps
        ("--comm", "foo"),
        ("--d", "abc"),
    ],
)
def test_simulate_bad_value_is_one_line_and_exit_2(option, value, capsys):
    argv = [*SMALL, option, value]
    with pytest.raises(SystemExit) as info:
        rc = simulate_cli.main(argv)
        raise SystemExit(rc)
    assert info.value.code == 2
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert "Traceback" not in captured.err
    assert err, "an error line is expected on stderr"
    last = err[-1]
    assert option in last and value in last, last
    assert "must" in last or "choose" in last or "invalid" in last, last
    assert captured.out == ""


def test_simulate_bad_value_through_the_entry_point():
    out = _run(["simulate", *SMALL, "--alpha", "2"])
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "--alpha" in lines[0] and "2" in lines[0] and "[0, 1]" in lines[0]


def test_simulate_help_documents_every_option(capsys):
    with pytest.raises(SystemExit) as info:
        simulate_cli.main(["--help"])
    assert info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # help lines wrap anywhere
    parser = simulate_cli.build_parser()
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 11
    for action in options:
        assert action.help and len(action.help) > 15, action.dest
        assert "default" in action.help, action.dest
        assert action.option_strings[0] in out, action.dest
    for opt in ("--alpha", "--seed", "--comm", "--metric", "--spectrum", "--gradients"):
        assert opt in out
    assert "[0, 1]" in out  # allowed range of alpha
    assert "every:H" in out and "rounds:N" in out


def test_simulate_table_is_rounded():
    out = _run(["simulate", *SMALL, "--comm", "every:5"])
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "np.float64" not in text and "None" not in text and "nan" not in text.lower()
    lines = text.splitlines()
    assert lines[0].split() == ["step", "gradients", "rounds", "hnorm2_avg", "se", "count"]
    for line in lines[1:]:
        for cell in line.split():
            digits = re.sub(r"[^0-9]", "", cell.split("e")[0]).lstrip("0")
            assert len(digits) <= 6, line  # at most 6 significant digits


def test_check_json_into_a_missing_directory_fails_before_running(tmp_path, monkeypatch, capsys):
    from convkit import bounds

    def boom(**kwargs):
        raise AssertionError("checks ran although the output path is unusable")

    monkeypatch.setattr(bounds, "run_checks", boom)
    target = tmp_path / "missing" / "x.json"
    assert check_cli.main(["--quick", "--json", str(target), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--json" in err[0] and str(target.parent) in err[0]
    assert not target.parent.exists()


def test_check_json_into_a_directory_fails_before_running(tmp_path, monkeypatch, capsys):
    from convkit import bounds

    monkeypatch.setattr(bounds, "run_checks", lambda **kw: pytest.fail("checks ran"))
    assert check_cli.main(["--json", str(tmp_path), "--quiet"]) == 2
    assert "--json" in capsys.readouterr().err


def test_check_json_missing_directory_through_the_entry_point(tmp_path):
    target = tmp_path / "missing" / "x.json"
    out = _run(["check", "--quick", "--only", "w_eta.gap_condition", "--json", str(target)])
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == ""  # nothing ran, no table


@pytest.mark.parametrize(
    "value, text, banned",
    [
        (__import__("numpy").float64(0.1234567891), "0.123457", "np.float64"),
        ([__import__("numpy").float64(1.23456789), 2.0], "[1.23457, 2]", "np.float64"),
        ((0.333333333333, 3), "(0.333333, 3)", "0.33333333"),
        ({"a": __import__("numpy").float64(0.5)}, "a=0.5", "np.float64"),
        (None, "", "None"),
        (__import__("numpy").int64(7), "7", "np."),
        (__import__("numpy").array([1.0, 2.123456789]), "[1, 2.12346]", "2.123456789"),
    ],
)
def test_check_table_cells_are_clean(value, text, banned):
    table = check_cli.format_table(
        [
            {
                "result": "r",
                "setting": "s",
                "measured": value,
                "theoretical": 1.0,
                "verdict": "holds",
                "reason": "why",
            }
        ]
    )
    row = table.splitlines()[2]
    measured = row.split("|")[2].strip()
    assert measured == text
    assert banned not in table
