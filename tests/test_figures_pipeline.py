"""The figure pipeline: ``--jobs`` runs analyses in parallel processes with the same outputs,
``--checks-only`` re-evaluates checks from committed data without simulating, and the index
records the mode and uses the verdict vocabulary."""

from __future__ import annotations

import json

import pandas as pd

from convkit.cli import main
from convkit.figures import REPO
from convkit.verdicts import VERDICTS

TWO = ["error_memory", "local_sgd_threshold"]


def test_jobs_give_the_same_outputs_as_serial(tmp_path):
    a, b = tmp_path / "serial", tmp_path / "parallel"
    assert main(["figures", "--quick", "--only", *TWO, "--out", str(a)]) == 0
    assert main(["figures", "--quick", "--only", *TWO, "--out", str(b), "--jobs", "2"]) == 0
    for name in TWO:
        pd.testing.assert_frame_equal(
            pd.read_csv(a / f"{name}.csv"), pd.read_csv(b / f"{name}.csv")
        )
    ca = json.loads((a / "checks.json").read_text())
    cb = json.loads((b / "checks.json").read_text())
    assert ca == cb and set(ca) == set(TWO)
    assert "Quick run" in (b / "index.md").read_text()


def test_checks_only_reads_the_committed_data(tmp_path):
    """Copy one committed CSV and re-evaluate: same rows as the committed checks.json."""
    name = "error_memory"
    (tmp_path / f"{name}.csv").write_bytes((REPO / "figures" / f"{name}.csv").read_bytes())
    assert main(["figures", "--checks-only", "--only", name, "--out", str(tmp_path)]) == 0
    got = json.loads((tmp_path / "checks.json").read_text())[name]
    committed = json.loads((REPO / "figures" / "checks.json").read_text())[name]
    assert got == committed
    assert all(r["verdict"] in VERDICTS and isinstance(r["reason"], str) for r in got)
    assert "--checks-only" in (tmp_path / "index.md").read_text()


def test_committed_checks_use_the_vocabulary():
    checks = json.loads((REPO / "figures" / "checks.json").read_text())
    rows = [r for rs in checks.values() for r in rs]
    assert rows and all(r["verdict"] in VERDICTS for r in rows)
    assert all("reason" in r for r in rows)
