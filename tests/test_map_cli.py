"""``convkit map`` on a user's module: the files it writes, the cache on a second run, and
the one-line errors (exit code 2) before any point runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]

MODULE = textwrap.dedent(
    '''
    from convkit.maps import MapPoint, map_claim

    @map_claim(threshold=1.0, side="below", quantity="a / b")
    def my_ratio(a: float, b: float, scale: float = 1.0) -> MapPoint:
        return MapPoint.decide(scale * a / b, threshold=1.0)

    def plain(a, b):
        """A plain function: read as 'measured below 1'."""
        return MapPoint.decide(a - b + 1.0, threshold=1.0)
    '''
)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "convkit.cli", "map", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """One directory with the user's module for the whole file (a module is imported once
    per path in a process)."""
    path = tmp_path_factory.mktemp("user")
    (path / "my_claims.py").write_text(MODULE)
    return path


def test_map_of_a_users_claim(user):
    args = ["my_ratio", "--module", "my_claims.py", "--x", "a=0.5:2:4", "--y", "b=0.5:2:3",
            "--refine", "0.05", "--set", "scale=1.0", "--out", "out"]  # fmt: skip
    p = _run(args, user)
    assert p.returncode == 0, p.stderr
    out = user / "out"
    for name in ("map_my_ratio_points.csv", "map_my_ratio_crossings.csv",
                 "map_my_ratio_crossings.json", "map_my_ratio.png"):  # fmt: skip
        assert (out / name).stat().st_size > 0
    cr = pd.read_csv(out / "map_my_ratio_crossings.csv")
    assert len(cr) > 0
    assert ((cr.interval_lo <= cr.fixed) & (cr.fixed <= cr.interval_hi)).all()  # truth: a = b
    doc = json.loads((out / "map_my_ratio_crossings.json").read_text())
    assert doc["claim"] == "my_ratio" and doc["settings"] == {"scale": 1.0}
    assert "boundary crossings" in p.stdout
    again = _run(args, user)
    assert again.returncode == 0 and "0 computed" in again.stdout  # every point from the cache


def _main(args: list[str], user: Path, monkeypatch, capsys) -> tuple[int, str, str]:
    """``convkit map`` in this process (the argument errors raise SystemExit(2))."""
    from convkit.cli.map import main

    monkeypatch.chdir(user)
    try:
        rc = main(args)
    except SystemExit as exc:
        rc = int(exc.code)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_plain_function_and_quick(user, monkeypatch, capsys):
    rc, _, err = _main(["plain", "--module", "my_claims.py", "--x", "a=0.5:2:9", "--y",
                        "b=0.5:2:9", "--quick", "--out", "q"], user, monkeypatch, capsys)  # fmt: skip
    assert rc == 0, err
    pts = pd.read_csv(user / "q" / "map_plain_points.csv")
    assert len(pts[pts.stage == "grid"]) == 16  # --quick: at most 4 values per axis


@pytest.mark.parametrize(
    "args, match",
    [
        (["nope", "--module", "my_claims.py"], "unknown map claim 'nope'"),
        (["my_ratio", "--module", "my_claims.py", "--x", "c=1:2:3", "--y", "b=1:2:3"],
         "['c'] are not parameters"),
        (["my_ratio", "--module", "my_claims.py", "--x", "a=0:2:3", "--log-x", "--y", "b=1:2:3"],
         "log axis needs lo > 0"),
        (["my_ratio", "--module", "my_claims.py", "--x", "a=1:2:1", "--y", "b=1:2:3"],
         "n must be an integer >= 2"),
        (["my_ratio", "--module", "my_claims.py"], "declares no default axes"),
        (["my_ratio", "--module", "missing.py"], "cannot import it"),
        (["my_ratio", "--module", "my_claims.py", "--x", "a=1:2:3", "--y", "b=1:2:3",
          "--set", "1x=2"], "NAME=VALUE"),
    ],
)  # fmt: skip
def test_errors_are_one_line(user, args, match, monkeypatch, capsys):
    rc, _, err = _main(args, user, monkeypatch, capsys)
    assert rc == 2
    assert match in err and len(err.strip().splitlines()) == 1
    assert not (user / "map-my_ratio").exists()
