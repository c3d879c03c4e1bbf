"""The test suite fits its budget (issue 33 item 6): ``make test`` deselects the tests that
run a whole ``convkit figures --quick`` (marker ``figures_full``, run by ``make test-full``),
keeps the fast per-analysis smoke test, and prints the 15 slowest tests."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipe(target: str) -> str:
    """The command lines of a Makefile target."""
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, flags=re.M)
    assert m, f"no target {target} in the Makefile"
    return m.group(1)


def test_make_test_deselects_the_whole_figures_run_and_prints_the_slowest_tests():
    test = _recipe("test")
    assert '-m "not figures_full"' in test and "--durations=15" in test
    full = _recipe("test-full")
    assert "figures_full" not in full and "CONVKIT_FULL=1" in full


def test_the_marker_selects_the_quick_run_of_every_analysis_only():
    """Collected under make test's selection: the replot smoke test of every analysis is in,
    the quick run of every analysis is out (and it is the only test the marker removes from
    tests/test_cli.py)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not figures_full",
         "tests/test_cli.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    ids = [line for line in out.splitlines() if "::" in line]
    assert any("test_every_analysis_replots_and_checks_its_committed_data" in i for i in ids)
    assert not any("test_every_analysis_runs_quick" in i for i in ids)
    assert any("test_help_lists_commands" in i for i in ids)
