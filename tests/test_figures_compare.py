"""``convkit figures --compare DIR``: per CSV the largest relative difference against the
reference, everything above the tolerance listed, exit code 1 when something is."""

from __future__ import annotations

import pandas as pd
import pytest

from convkit.cli import main
from convkit.figures_compare import compare_dirs


def _write(d, name, frame):
    d.mkdir(exist_ok=True)
    frame.to_csv(d / name, index=False)


def _frame(changes=None):
    f = pd.DataFrame(
        {
            "method": ["MBA", "OSA", "Local-SGD"],
            "T": [100, 200, 400],
            "err": [0.125, 3.0e-5, 1.0 / 3.0],
            "note": ["", "heavy tail", ""],
        }
    )
    for (col, row), v in (changes or {}).items():
        f.loc[row, col] = v
    return f


def _pair(tmp_path, new_frame, name="a.csv"):
    ref, new = tmp_path / "ref", tmp_path / "new"
    _write(ref, name, _frame())
    _write(ref, "b.csv", pd.DataFrame({"x": [1.0, 2.0]}))
    _write(new, name, new_frame)
    _write(new, "b.csv", pd.DataFrame({"x": [1.0, 2.0]}))
    return ref, new


def _compare(capsys, new, ref, *more):
    rc = main(["figures", "--compare", str(new), "--out", str(ref), *map(str, more)])
    return rc, capsys.readouterr().out


def test_identical_directories_agree(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame())
    rc, out = _compare(capsys, new, ref)
    assert rc == 0
    assert "all 2 CSV(s) agree within the tolerance" in out
    assert all(d.max_rel == 0 and not d.above for d in compare_dirs(new, ref))


def test_a_changed_value_is_listed_with_its_column_and_relative_difference(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame({("err", 2): 1.0 / 3.0 * (1 + 4e-6)}))
    rc, out = _compare(capsys, new, ref)
    assert rc == 1
    (d,) = [d for d in compare_dirs(new, ref) if d.name == "a.csv"]
    assert d.where == ("err", 2) and d.max_rel == pytest.approx(4e-6, rel=1e-4)
    assert set(d.numeric) == {"err"} and d.numeric["err"][:1] == (1,)
    assert "DIFFERS  a.csv  largest relative difference 4e-06 (err, row 2)" in out
    assert "column err: 1 value(s) above 1e-09, largest 4e-06 at row 2" in out
    assert "1 of 2 CSV(s) differ beyond the tolerance" in out
    # the same change within a looser tolerance: reported as the largest, not listed
    rc, out = _compare(capsys, new, ref, "--rtol", "1e-5")
    assert rc == 0 and "ok       a.csv  largest relative difference 4e-06 (err, row 2)" in out


def test_rounding_at_1e_13_is_within_the_default_tolerance(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame({("err", 0): 0.125 * (1 + 2e-13)}))
    rc, out = _compare(capsys, new, ref)
    assert rc == 0 and "largest relative difference 2e-13 (err, row 0)" in out


def test_a_changed_string_and_an_integer(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame({("method", 1): "SCAFFOLD", ("T", 0): 101}))
    rc, out = _compare(capsys, new, ref)
    assert rc == 1
    assert "column method: 1 row(s) differ, first at row 1: 'OSA' -> 'SCAFFOLD'" in out
    assert "column T: 1 value(s) above 1e-09, largest 0.0099 at row 0: 100 -> 101" in out


def test_nan_on_one_side_only_differs_and_on_both_agrees(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame({("err", 1): float("nan")}))
    rc, out = _compare(capsys, new, ref)
    assert rc == 1 and "largest relative difference inf (err, row 1)" in out
    both = tmp_path / "both"
    _write(both, "a.csv", _frame({("err", 1): float("nan")}))
    rc, _ = _compare(capsys, both, both)
    assert rc == 0


def test_missing_and_extra_files_columns_and_rows(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame().drop(columns="note").assign(extra=1).iloc[:2])
    (new / "b.csv").unlink()
    _write(new, "c.csv", pd.DataFrame({"y": [1]}))
    rc, out = _compare(capsys, new, ref)
    assert rc == 1
    assert f"MISSING  b.csv  in {ref}, not in {new}" in out
    assert f"EXTRA    c.csv  in {new}, not in {ref}" in out
    assert f"rows: 3 in {ref}, 2 in {new}" in out
    assert "columns missing: note" in out and "columns added: extra" in out
    assert "3 of 3 CSV(s) differ beyond the tolerance" in out


def test_only_restricts_and_bad_directories_are_refused(tmp_path, capsys):
    ref, new = _pair(tmp_path, _frame({("err", 0): 1.0}))
    rc, out = _compare(capsys, new, ref, "--only", "b")
    assert rc == 0 and "a.csv" not in out and "b.csv" in out
    assert main(["figures", "--compare", str(tmp_path / "nowhere")]) == 2
    assert "no directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["figures", "--compare", str(tmp_path / "empty")]) == 2
    assert "no CSV" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["figures", "--rtol", "1e-6"])  # --rtol without --compare
