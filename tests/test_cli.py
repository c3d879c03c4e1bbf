"""The command line: help, simulate, figures (quick) through the real entry points."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from convkit.cli import main
from convkit.figures import REPO, discover
from convkit.verdicts import VERDICTS


def test_help_lists_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("figures", "bounds", "check", "sweep", "simulate"):
        assert cmd in out


def test_unknown_command_fails(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_simulate_prints_a_table():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "convkit.cli",
            "simulate",
            "--d",
            "3",
            "--workers",
            "2",
            "--gradients",
            "200",
            "--replicates",
            "5",
            "--comm",
            "every:5",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    header = out.splitlines()[0].split()
    assert header == ["step", "gradients", "rounds", "hnorm2_avg", "se", "count"]
    assert out.splitlines()[-1].split()[0] == "100"


def test_simulate_header_names_the_metric(capsys):
    """The value column was headed `mean` whatever --metric chose (the tables of hnorm2 and
    dist2 could not be told apart); it is headed by the metric of the averaged iterate."""
    args = ["simulate", "--d", "3", "--workers", "2", "--gradients", "40", "--replicates", "3"]
    tables = {}
    for metric in ("hnorm2", "dist2", "excess_risk"):
        assert main([*args, "--metric", metric]) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[0].split() == ["step", "gradients", "rounds", f"{metric}_avg", "se", "count"]
        tables[metric] = [line.split()[3] for line in lines[1:]]
    assert tables["hnorm2"] != tables["dist2"]


def test_simulate_floor_remainder_and_position_schedules(capsys):
    """`--gradients-remainder floor` runs floor(T / P) local steps (the last row has 99 of the
    100 gradients for P = 3); without it the same budget is refused; `quadratic:N` places its
    rounds at ceil(n (j/N)^2) (the rounds column ends at N = 5)."""
    args = ["simulate", "--d", "3", "--workers", "3", "--gradients", "100", "--replicates", "4"]
    assert main([*args, "--gradients-remainder", "floor", "--comm", "quadratic:5"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert (int(last[0]), int(last[1]), int(last[2])) == (33, 99, 5)
    assert main(args) == 2
    assert "multiple of workers" in capsys.readouterr().err


@pytest.mark.parametrize("name", discover(REPO / "analyses"))
def test_every_analysis_replots_and_checks_its_committed_data(name, tmp_path):
    """The fast smoke test of every analysis (``make test``): `convkit figures --replot --only
    NAME` on a copy of its committed CSV draws at least one figure and gives check rows with
    the six keys and a verdict of the vocabulary, without simulating. The quick run of every
    analysis (the test below) is in ``make test-full``."""
    (tmp_path / f"{name}.csv").write_bytes((REPO / "figures" / f"{name}.csv").read_bytes())
    assert main(["figures", "--replot", "--only", name, "--out", str(tmp_path)]) == 0
    assert list(tmp_path.glob("*.png"))
    checks = json.loads((tmp_path / "checks.json").read_text())[name]
    assert checks, "an analysis must state at least one check"
    for c in checks:
        assert set(c) >= {"result", "setting", "measured", "theoretical", "verdict", "reason"}
        assert c["verdict"] in VERDICTS, c


@pytest.mark.figures_full
@pytest.mark.parametrize("name", discover(REPO / "analyses"))
def test_every_analysis_runs_quick_and_writes_its_figure(name, tmp_path):
    """`convkit figures --quick --only NAME` writes data, at least one figure and checks that
    each carry the five keys of the check table. Together a whole `convkit figures --quick`
    (about half an hour on a loaded 2-core machine): ``make test-full`` runs it, ``make test``
    deselects it (marker ``figures_full``)."""
    assert main(["figures", "--quick", "--only", name, "--out", str(tmp_path)]) == 0
    assert (tmp_path / f"{name}.csv").stat().st_size > 0
    assert list(tmp_path.glob("*.png"))
    checks = json.loads((tmp_path / "checks.json").read_text())[name]
    assert checks, "an analysis must state at least one check"
    for c in checks:
        assert set(c) >= {"result", "setting", "measured", "theoretical", "verdict", "reason"}
        assert c["verdict"] in VERDICTS, c
    assert (tmp_path / "index.md").read_text().count("|") > 5
