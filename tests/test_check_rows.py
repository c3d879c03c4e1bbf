"""Check rows: the public row builder, the one row validator shared by the theory registry,
the figure pipeline and the documentation gallery, and the one paired ratio."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from convkit import verdicts as V

ROOT = Path(__file__).resolve().parents[1]


# ============================================================================ check_row
def test_check_row_builds_the_six_keys_with_plain_values():
    row = V.check_row(
        "sgd.x",
        "d = 1",
        np.float64(0.5),
        np.array([1.0, 2.0]),
        V.HOLDS,
        "|diff| 0",
        margin="3 SE",
        n=np.int64(4),
        flags=np.array([True, False]),
    )
    assert list(row) == [*V.ROW_KEYS, "margin", "details"]
    assert row["measured"] == 0.5 and type(row["measured"]) is float
    assert row["theoretical"] == [1.0, 2.0] and type(row["theoretical"][0]) is float
    assert row["details"] == {"n": 4, "flags": [True, False]}
    assert type(row["details"]["n"]) is int and type(row["details"]["flags"][0]) is bool
    json.dumps(row)
    # without margin and details the row has exactly the six keys
    assert list(V.check_row("a", "s", 1, 2, V.MEASURED, "r")) == list(V.ROW_KEYS)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"verdict": "does not hold"}, ValueError, "verdict 'does not hold' is not one of"),
        ({"reason": None}, TypeError, "reason must be a string"),
        ({"result": ""}, ValueError, "result must be a non-empty string"),
        ({"setting": 3}, TypeError, "setting must be a string"),
    ],
)
def test_check_row_rejects_bad_fields_naming_them(kwargs, error, match):
    args = {
        "result": "a",
        "setting": "s",
        "measured": 1.0,
        "theoretical": 1.0,
        "verdict": V.HOLDS,
        "reason": "r",
    }
    with pytest.raises(error, match=match):
        V.check_row(**{**args, **kwargs})


def test_the_row_helpers_are_public_in_the_theory_package():
    """A user module states a claim with public names only (no ``_`` import)."""
    import convkit.bounds as b
    from convkit.bounds import checking

    assert b.check_row is V.check_row and checking.check_row is V.check_row
    for name in ("mean_se", "within", "final_values", "tolerance_verdict", "check_stream"):
        assert name in checking.__all__ and callable(getattr(checking, name))
    assert checking.mean_se([1.0, 2.0, 3.0]) == (2.0, 1.0 / math.sqrt(3))
    assert checking.within(1.0, 1.2, 0.1) and not checking.within(1.0, 1.4, 0.1)


# ============================================================================ validate_row
BAD_ROWS = [
    (
        {"setting": "s", "measured": 1, "theoretical": 1, "verdict": "holds", "reason": "r"},
        KeyError,
        r"lacks the keys \['result'\]",
    ),
    (
        {"result": "a", "measured": 1, "theoretical": 1, "verdict": "holds", "reason": "r"},
        KeyError,
        r"lacks the keys \['setting'\]",
    ),
    (
        {
            "result": "a",
            "setting": "s",
            "measured": 1,
            "theoretical": 1,
            "verdict": "ok",
            "reason": "r",
        },
        ValueError,
        "verdict 'ok' is not one of",
    ),
    (
        {
            "result": "a",
            "setting": "s",
            "measured": 1,
            "theoretical": 1,
            "verdict": "holds",
            "reason": 3,
        },
        TypeError,
        "reason must be a string",
    ),
]


@pytest.mark.parametrize(("row", "error", "match"), BAD_ROWS)
def test_one_validator_for_registry_pipeline_and_gallery(row, error, match, tmp_path, monkeypatch):
    """The same malformed row is refused, with the same message, by the theory registry, the
    figure pipeline and the gallery of the documentation (one validator,
    :func:`convkit.verdicts.validate_row`)."""
    from convkit import figures
    from convkit.bounds import registry

    with pytest.raises(error, match=match):
        V.validate_row(row, where="x")
    monkeypatch.setitem(registry.COVERS, "x.check", ("a",))
    with pytest.raises(error, match=match):
        registry._validate_row("x.check", dict(row))
    with pytest.raises(error, match=match):
        figures._validated("an_analysis", [dict(row)])
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        from convkit_gallery import write_gallery
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    figs = tmp_path / "figures"
    figs.mkdir()
    (figs / "checks.json").write_text(json.dumps({"an_analysis": [row]}))
    with pytest.raises(error, match=match):
        write_gallery(tmp_path / "out", figs, tmp_path)


def test_validate_row_checks_the_result_against_what_the_check_covers():
    row = V.check_row("b", "s", 1, 1, V.HOLDS, "r")
    assert V.validate_row(row, where="c", covers=("b",)) is row
    with pytest.raises(ValueError, match="c: row result 'b' is not one of the covered"):
        V.validate_row(row, where="c", covers=("a",))


# ============================================================================ paired_ratio
def test_one_paired_ratio():
    """``paired_ratio`` is one function: the statistics module's, re-exported by the
    schedule search and used by the Local-SGD cells' row builder."""
    from convkit import checks, schedule_search

    sys.path.insert(0, str(ROOT))
    try:
        from analyses import _local_sgd_rows as cells
    finally:
        sys.path.remove(str(ROOT))
    assert schedule_search.paired_ratio is checks.paired_ratio
    assert cells.paired_ratio is checks.paired_ratio


def test_paired_ratio_values_are_the_delta_method_bit_for_bit():
    """1-D samples give plain floats equal, bit for bit, to the formula
    ``r = mean(a) / mean(b)``, ``se = sqrt(var(a - r b, ddof=1) / R) / |mean(b)|``."""
    from convkit.checks import paired_ratio

    rng = np.random.default_rng(5)
    b = rng.exponential(size=101)
    a = 1.3 * b + 0.2 * rng.standard_normal(101)
    r, se = paired_ratio(a, b)
    assert type(r) is float and type(se) is float
    r_ref = a.mean() / b.mean()
    se_ref = np.sqrt((a - r_ref * b).var(ddof=1) / 101) / abs(b.mean())
    assert r == r_ref and se == se_ref


def test_paired_ratio_single_replicate_and_bad_shapes():
    from convkit.checks import paired_ratio

    with pytest.raises(ValueError, match="at least 2 replicates"):
        paired_ratio([2.0], [4.0])
    r, se = paired_ratio(np.array([2.0]), np.array([4.0]), single="nan")
    assert r == 0.5 and math.isnan(se)
    with pytest.raises(ValueError, match=r"paired samples of matching shapes.*\(3,\).*\(2,\)"):
        paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="single must be 'raise' or 'nan'"):
        paired_ratio([1.0, 2.0], [1.0, 2.0], single="zero")


# ============================================================================ no rows by hand
def _hand_built_rows(path: Path) -> list[int]:
    """Lines of ``path`` where a check row is built by hand: a dict display or a ``dict(...)``
    call with a ``verdict`` key."""
    import ast

    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
            keys = [k.arg for k in node.keywords]
        else:
            continue
        if "verdict" in keys:
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("folder", ["analyses", "convkit/bounds"])
def test_rows_are_built_by_check_row(folder):
    """Analyses and topic modules build their rows with ``check_row`` (validated where they are
    written), not as dicts by hand; the registry's ``crashed`` rows are the one exception."""
    found = {
        p.name: lines
        for p in sorted((ROOT / folder).glob("*.py"))
        if p.name != "registry.py" and (lines := _hand_built_rows(p))
    }
    assert not found, f"rows built by hand (file: lines): {found}"


def test_topic_modules_import_no_private_helpers():
    import re

    for p in sorted((ROOT / "convkit" / "bounds").glob("*.py")):
        text = p.read_text()
        assert not re.search(r"from convkit\.bounds\.checking import[^\n]*\b_\w", text), p.name
        assert not re.search(r"from convkit\.bounds\.checking import \([^)]*\b_\w", text), p.name


@pytest.mark.parametrize("measured", [math.nan, math.inf, [0.5, math.nan], {"a": -math.inf}])
def test_a_row_with_a_non_finite_measurement_cannot_hold(measured):
    """A NaN or infinite ``measured`` (also inside a list or dict) cannot carry ``holds``; the
    same row with ``not_identifiable`` is valid."""
    with pytest.raises(ValueError, match="cannot carry 'holds'"):
        V.check_row("a", "s", measured, 1.0, V.HOLDS, "r")
    V.check_row("a", "s", measured, 1.0, V.NOT_IDENTIFIABLE, "r")
