"""A user's own claim: registering results and checks again (a notebook cell run twice), the
``convkit check --module`` command, ``--json -``, and the worked example of
``docs/own_claim.md``, executed as it stands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from convkit import bounds
from convkit.bounds import registry
from convkit.cli import check as check_cli
from convkit.verdicts import HOLDS, VERDICTS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "own_claim.md"
PY_BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
CONSOLE = re.findall(r"```console\n\$ (.*?)\n```", DOC.read_text(), flags=re.S)


@pytest.fixture
def clean_registry():
    """Leave the registry as it was: drop what a test registered or replaced."""
    saved = (dict(registry.LIBRARY), dict(registry.CHECKS), dict(registry.COVERS))
    yield
    for live, old in zip((registry.LIBRARY, registry.CHECKS, registry.COVERS), saved):
        live.clear()
        live.update(old)
    registry.get.cache_clear()


CELL = textwrap.dedent(
    """
    import sympy as sp
    from convkit.bounds import TheoryResult, check_row, register_check, result, symbol

    @result("tmp.claim")
    def claim():
        return TheoryResult(name="tmp.claim", expression=FACTOR * symbol("x"),
                            kind="upper_bound", quantity="q", provenance="derived here: test")

    @register_check("tmp.claim", covers=["tmp.claim"])
    def check_claim(quick):
        return [check_row("tmp.claim", "s", FACTOR, FACTOR, "measured", "r")]
    """
)


def _run_cell(factor: float, module: str = "__main__") -> None:
    exec(compile(CELL, "<cell>", "exec"), {"__name__": module, "FACTOR": factor})


def test_running_a_cell_again_replaces_the_claim_and_its_check(clean_registry):
    """The same definitions registered twice (a notebook cell run again, here with a new
    factor) replace the earlier ones, in place, and ``get`` forgets the cached result."""
    _run_cell(2.0)
    assert float(bounds.get("tmp.claim").evaluate(x=1.0)) == 2.0
    order = list(registry.CHECKS)
    _run_cell(3.0)
    assert float(bounds.get("tmp.claim").evaluate(x=1.0)) == 3.0
    assert list(registry.CHECKS) == order
    rows = bounds.run_checks(only=["tmp.claim"])
    assert [r["measured"] for r in rows] == [3.0]


def test_the_same_name_from_another_module_raises_naming_both(clean_registry):
    _run_cell(2.0, module="first_module")
    with pytest.raises(
        ValueError,
        match=r"registered twice: by first_module\.claim and by "
        r"second_module\.claim",
    ):
        _run_cell(2.0, module="second_module")
    # another function of the same module is another definition too
    with pytest.raises(ValueError, match="check 'tmp.claim' registered twice"):
        registry.register_check("tmp.claim", ["tmp.claim"])(lambda quick: [])
    # replace=True replaces on purpose
    registry.register_check("tmp.claim", ["tmp.claim"], replace=True)(lambda quick: [])
    assert registry.CHECKS["tmp.claim"](True) == []


def test_register_check_needs_covers():
    with pytest.raises(ValueError, match="covers must be a non-empty list of result names"):
        registry.register_check("tmp.x", covers="tmp.x")


MODULE = textwrap.dedent(
    """
    from convkit.bounds import check_row, register_check

    @register_check("w_eta.user_check", covers=["w_eta.gap_condition"])
    def user_check(quick):
        return [check_row("w_eta.gap_condition", "user setting", 1.0, 1.0, "holds", "equal")]
    """
)


def test_check_module_path_runs_its_checks(clean_registry, tmp_path, capsys):
    """``convkit check --module path.py`` imports the file and runs the checks it registered
    (and only those); ``--json -`` writes the rows to standard output, the table to stderr,
    and no file named ``-``."""
    path = tmp_path / "user_claims_path.py"
    path.write_text(MODULE)
    rc = check_cli.main(["--module", str(path), "--json", "-", "--quiet"])
    assert rc == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert [r["check"] for r in rows] == ["w_eta.user_check"]
    assert rows[0]["verdict"] == HOLDS
    assert "user setting" in err and "1 holds" in err
    assert not (Path.cwd() / "-").exists() and not (tmp_path / "-").exists()


def test_check_module_dotted_name(clean_registry, tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "user_pkg_dotted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "claims.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert check_cli.main(["--module", "user_pkg_dotted.claims", "--quiet"]) == 0
    assert "1 holds" in capsys.readouterr().out
    sys.modules.pop("user_pkg_dotted.claims", None)
    sys.modules.pop("user_pkg_dotted", None)


@pytest.mark.parametrize(
    ("content", "arg", "message"),
    [
        (
            None,
            "no_such_file.py",
            "cannot import no_such_file.py: ValueError: no_such_file.py is not a file",
        ),
        ("x = 1\n", "user_claims_empty.py", "registers no check"),
        ("raise RuntimeError('boom')\n", "user_claims_boom.py", "RuntimeError: boom"),
        (None, "no_such_package.claims", "ModuleNotFoundError"),
    ],
)
def test_check_module_errors_are_argument_errors(
    clean_registry, tmp_path, monkeypatch, capsys, content, arg, message
):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / arg).write_text(content)
    assert check_cli.main(["--module", arg, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("convkit check: argument --module:") and message in err


def test_json_dash_on_the_command_line(tmp_path):
    """``python -m convkit.cli check --only CHEAP --json -``: JSON on stdout, no file '-'."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "convkit.cli",
            "check",
            "--quick",
            "--only",
            "w_eta.gap_condition",
            "--json",
            "-",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 2 and all(r["verdict"] in VERDICTS for r in rows)
    assert not (tmp_path / "-").exists()


# ============================================================================ the docs page
def test_the_page_has_its_example():
    assert len(PY_BLOCKS) == 2 and PY_BLOCKS[0].startswith("# my_claims.py")
    assert CONSOLE == ["convkit check --module my_claims.py --quick"]
    for block in PY_BLOCKS:
        assert not re.search(r"import .*\b_[a-z]|from convkit\S*\._", block), "private import"


def test_the_worked_example_runs_on_the_command_line(tmp_path):
    """The module of the page, written to ``my_claims.py``, checked by the command of the
    page (with ``--json -``): its one row holds (the stationary value 0.1/1.7 = 0.0588
    against the bound 0.1: a gap of some 40 standard errors at 2000 replicates)."""
    (tmp_path / "my_claims.py").write_text(PY_BLOCKS[0])
    cmd = CONSOLE[0].split()
    assert cmd[0] == "convkit"
    proc = subprocess.run(
        [sys.executable, "-m", "convkit.cli", *cmd[1:], "--json", "-"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = json.loads(proc.stdout)
    assert row["result"] == "my.noise_floor_bound" and row["verdict"] == HOLDS, row
    assert row["theoretical"] == pytest.approx(0.1, rel=1e-12)
    assert abs(row["measured"] - 0.1 / 1.7) < 0.01  # stationary value, ~4 SE at R = 2000


def test_the_worked_example_runs_in_a_notebook_twice(tmp_path):
    """The module's code as a notebook cell, then the notebook cell of the page; the cell run
    a second time replaces the claim instead of raising (fresh interpreter, ``__main__``)."""
    script = "\n".join(
        [
            f"CELL = {PY_BLOCKS[0]!r}",
            f"RUN = {PY_BLOCKS[1]!r}",
            "exec(CELL); exec(RUN)",
            "exec(CELL); exec(RUN)",
            "print(len(rows), rows[0]['verdict'])",
        ]
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "1 holds"


# ============================================================================ validated up front
def _claim_module(factory_body: str, check_body: str = "return [check_row(NAME, 's', 1.0, 1.0, "
                  "'holds', 'r')]", covers: str = "[NAME]", extra: str = "") -> str:
    """Source of a module of claims: one result ``my.v33`` built by ``factory_body`` and one
    check covering ``covers`` whose body is ``check_body``."""
    return textwrap.dedent(
        """
        import sys
        from convkit.bounds import TheoryResult, check_row, register_check, result, symbol

        NAME = "my.v33"
        {extra}

        @result(NAME)
        def claim():
            {factory_body}

        @register_check(NAME, covers={covers})
        def check_claim(quick):
            open(RAN, "w").close()
            {check_body}
        """
    ).format(factory_body=factory_body, check_body=check_body, covers=covers, extra=extra)


GOOD = (
    "return TheoryResult(name=NAME, expression=symbol('gamma'), kind='upper_bound', "
    "quantity='q', provenance='derived here: test')"
)


@pytest.mark.parametrize(
    ("factory_body", "covers", "message"),
    [
        (GOOD.replace("'upper_bound'", "'upper bound'"), "[NAME]",
         r"result 'my\.v33'.*kind must be one of \['upper_bound'.*got 'upper bound'"),
        (GOOD.replace("'upper_bound'", "'scaling'"), "[NAME]",
         r"result 'my\.v33'.*got 'scaling'"),
        (GOOD.replace("name=NAME", "name='my.other'"), "[NAME]",
         r"result 'my\.v33'.*built a result named 'my\.other'"),
        (GOOD.replace("symbol('gamma')", "symbol('gamma') / 0"), "[NAME]",
         r"result 'my\.v33'.*expression zoo.*undefined"),
        (GOOD, "[NAME, 'my.not_registered']",
         r"check 'my\.v33' covers 'my\.not_registered', which is not a registered result"),
    ],
    ids=["kind-with-space", "kind-scaling", "other-name", "zoo", "covers-unregistered"],
)
def test_a_claim_is_validated_before_any_check_runs(
    clean_registry, tmp_path, monkeypatch, capsys, factory_body, covers, message
):
    """Every result the module registers is built and validated, and every covered name must
    be registered, before any check runs: an argument error (exit 2) naming the result, and
    the check (which would print 'holds' without calling get()) never ran."""
    monkeypatch.chdir(tmp_path)
    ran = tmp_path / "ran"
    (tmp_path / "user_claims_v33.py").write_text(
        _claim_module(factory_body, covers=covers, extra=f"RAN = {str(ran)!r}")
    )
    sys.modules.pop("user_claims_v33", None)
    rc = check_cli.main(["--module", "user_claims_v33.py", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert re.search(message, err, flags=re.S), err
    assert not ran.exists()
    sys.modules.pop("user_claims_v33", None)


def test_run_checks_validates_before_running(clean_registry, tmp_path):
    """The notebook path too: run_checks raises before any check of the selection runs."""
    ran = tmp_path / "ran"
    source = _claim_module(
        GOOD.replace("'upper_bound'", "'upper bound'"), extra=f"RAN = {str(ran)!r}"
    )
    exec(compile(source, "<cell>", "exec"), {"__name__": "__main__"})
    with pytest.raises(ValueError, match=r"result 'my\.v33'.*'upper bound'"):
        bounds.run_checks(only=["my.v33"])
    assert not ran.exists()


def test_a_check_returning_one_row_is_told_to_return_a_list(clean_registry, tmp_path, capsys):
    ran = tmp_path / "ran"
    source = _claim_module(
        GOOD,
        check_body="return check_row(NAME, 's', 1.0, 1.0, 'holds', 'r')",
        extra=f"RAN = {str(ran)!r}",
    )
    exec(compile(source, "<cell>", "exec"), {"__name__": "__main__"})
    (row,) = bounds.run_checks(only=["my.v33"])
    assert row["verdict"] == "crashed"
    assert "returned one row (a dict), not a list of rows: return [row]" in row["reason"]


@pytest.mark.parametrize("code", ["sys.exit(0)", "sys.exit()", "sys.exit(3)"])
def test_a_module_that_calls_sys_exit_is_an_argument_error(
    clean_registry, tmp_path, monkeypatch, capsys, code
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "user_claims_exit.py").write_text(f"import sys\n{code}\n")
    rc = check_cli.main(["--module", "user_claims_exit.py", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "argument --module: user_claims_exit.py called sys.exit" in err, err


def test_a_check_that_calls_sys_exit_is_a_crash(clean_registry, tmp_path, capsys):
    ran = tmp_path / "ran"
    source = _claim_module(GOOD, check_body="sys.exit(0)", extra=f"RAN = {str(ran)!r}")
    exec(compile(source, "<cell>", "exec"), {"__name__": "__main__"})
    (row,) = bounds.run_checks(only=["my.v33"])
    assert row["verdict"] == "crashed" and row["reason"].startswith("SystemExit"), row


def test_the_page_lists_the_kinds_and_the_frame_columns():
    """The page names every allowed ``kind`` of a result and every column of the frame a
    check reads (``Result.frame``), each in backticks."""
    from convkit.bounds.core import KINDS
    from convkit.result import FRAME_COLUMNS

    text = DOC.read_text()
    missing = [k for k in (*KINDS, *FRAME_COLUMNS) if f"`{k}`" not in text]
    assert not missing, missing


def test_code_blocks_wrap():
    """The page's code blocks are up to 94 characters wide: wider than the article column,
    they scrolled inside their block, behind a scroll bar that overlay scroll bars do not show
    until one scrolls, and looked cut at the right edge. The site's stylesheet wraps them
    (the browser test, tests/test_docs.py, measures the laid-out page)."""
    css = re.sub(r"/\*.*?\*/", "", (ROOT / "docs" / "_static" / "convkit.css").read_text(),
                 flags=re.S)
    rules = {
        sel.strip(): body
        for sels, body in re.findall(r"([^{}]+)\{([^}]*)\}", css)
        for sel in sels.split(",")
    }
    assert "white-space: pre-wrap" in rules.get("div.highlight pre", ""), rules
    widest = max(len(line) for block in PY_BLOCKS for line in block.splitlines())
    assert widest > 80  # the page does have blocks wider than a narrow column
