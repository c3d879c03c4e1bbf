"""``convkit figures --compare DIR``: the CSVs of a run in ``DIR`` against the committed ones.

For every CSV of either directory (:func:`compare_dirs`), one :class:`CsvDiff`: the largest
relative difference of its numeric columns, ``|new - ref| / max(|new|, |ref|)`` (0 where both
are equal, NaN included; infinite where one is NaN or infinite and the other is not), with its
column and row; every numeric column with values above the tolerance (how many, the largest
and an example); every other column whose text differs (how many rows, an example); columns
and rows present on one side only; and a CSV present on one side only.  Rows are compared by
position (the analyses write them in a fixed order).

A value differs when its relative difference exceeds ``rtol`` (default :data:`RTOL`) and its
absolute difference exceeds ``atol`` (default 0).  Rounding differs across machines at about
1e-13 relative (other BLAS, other vector widths), far below the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RTOL", "CsvDiff", "compare_csv", "compare_dirs", "report"]

#: the default relative tolerance of ``--compare``
RTOL = 1e-9


@dataclass
class CsvDiff:
    """How one CSV of the run differs from the reference (module docstring).

    ``status`` is ``"ok"``, ``"differs"`` (something above the tolerance, or a structural
    difference), ``"missing"`` (in the reference only) or ``"extra"`` (in the run only).
    ``numeric`` maps a column with values above the tolerance to ``(count, largest relative
    difference, row, reference value, new value)``; ``text`` a non-numeric column that
    differs to ``(count, row, reference value, new value)``.
    """

    name: str
    status: str = "ok"
    max_rel: float = 0.0
    where: tuple[str, int] | None = None
    numeric: dict[str, tuple[int, float, int, Any, Any]] = field(default_factory=dict)
    text: dict[str, tuple[int, int, Any, Any]] = field(default_factory=dict)
    missing_columns: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)
    rows: tuple[int, int] = (0, 0)

    @property
    def above(self) -> bool:
        """Whether anything differs beyond the tolerance (or the files' shapes differ)."""
        return self.status != "ok"


def _read(path: Path) -> Any:
    import pandas as pd

    return pd.read_csv(path)


def _relative(ref: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``|new - ref| / max(|new|, |ref|)``: 0 where equal (NaN and infinities included),
    ``inf`` where one side is NaN or infinite and the other is not."""
    ref, new = ref.astype(float), new.astype(float)
    same = (ref == new) | (np.isnan(ref) & np.isnan(new))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        rel = np.abs(new - ref) / np.maximum(np.abs(new), np.abs(ref))
    rel = np.where(np.isfinite(rel), rel, np.inf)
    return np.where(same, 0.0, rel)


def _is_numeric(col: Any) -> bool:
    import pandas as pd

    return pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)


def compare_csv(ref_path: Path, new_path: Path, rtol: float = RTOL, atol: float = 0.0) -> CsvDiff:
    """Compare the CSV ``new_path`` with the reference ``ref_path`` (module docstring)."""
    diff = CsvDiff(Path(new_path).name)
    ref, new = _read(ref_path), _read(new_path)
    diff.rows = (len(ref), len(new))
    diff.missing_columns = [c for c in ref.columns if c not in new.columns]
    diff.extra_columns = [c for c in new.columns if c not in ref.columns]
    n = min(len(ref), len(new))
    for col in [c for c in ref.columns if c in new.columns]:
        a, b = ref[col].iloc[:n], new[col].iloc[:n]
        if _is_numeric(a) and _is_numeric(b):
            av, bv = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
            rel = _relative(av, bv)
            if rel.size and rel.max() > diff.max_rel:
                i = int(np.argmax(rel))
                diff.max_rel, diff.where = float(rel[i]), (str(col), i)
            with np.errstate(invalid="ignore"):  # inf - inf: equal infinities, rel is 0
                bad = (rel > rtol) & ~(np.abs(bv - av) <= atol)
            if bad.any():
                i = int(np.argmax(np.where(bad, rel, -1.0)))
                diff.numeric[str(col)] = (int(bad.sum()), float(rel[i]), i, av[i], bv[i])
        else:
            na_a, na_b = a.isna().to_numpy(), b.isna().to_numpy()
            sa, sb = a.astype(str).to_numpy(), b.astype(str).to_numpy()
            bad = (na_a != na_b) | (~na_a & ~na_b & (sa != sb))
            if bad.any():
                i = int(np.argmax(bad))
                diff.text[str(col)] = (int(bad.sum()), i, a.iloc[i], b.iloc[i])
    structural = diff.missing_columns or diff.extra_columns or len(ref) != len(new)
    if structural or diff.numeric or diff.text:
        diff.status = "differs"
    return diff


def compare_dirs(
    new_dir: Path,
    ref_dir: Path,
    rtol: float = RTOL,
    atol: float = 0.0,
    names: Sequence[str] | None = None,
) -> list[CsvDiff]:
    """One :class:`CsvDiff` per CSV of ``new_dir`` or ``ref_dir`` (by name; ``names``:
    only the analyses ``NAME.csv`` of those names), sorted by file name."""
    new_dir, ref_dir = Path(new_dir), Path(ref_dir)
    files = {p.name for p in new_dir.glob("*.csv")} | {p.name for p in ref_dir.glob("*.csv")}
    if names:
        files &= {f"{n}.csv" for n in names}
    out = []
    for f in sorted(files):
        ref, new = ref_dir / f, new_dir / f
        if not new.is_file():
            out.append(CsvDiff(f, status="missing"))
        elif not ref.is_file():
            out.append(CsvDiff(f, status="extra"))
        elif ref.read_bytes() == new.read_bytes():
            n = max(0, len(ref.read_bytes().splitlines()) - 1)
            out.append(CsvDiff(f, rows=(n, n)))
        else:
            out.append(compare_csv(ref, new, rtol, atol))
    return out


def _value(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.17g}"
    return repr(v) if isinstance(v, str) else str(v)


def report(diffs: Sequence[CsvDiff], new_dir: Path, ref_dir: Path, rtol: float) -> list[str]:
    """The lines that ``--compare`` prints: a header, one line per CSV (its status and largest
    relative difference) with, below it, everything above the tolerance, and a summary."""
    lines = [f"convkit figures --compare {new_dir}: {len(diffs)} CSV(s) against {ref_dir} "
             f"(relative tolerance {rtol:g})"]  # fmt: skip
    width = max((len(d.name) for d in diffs), default=0)
    for d in diffs:
        if d.status == "missing":
            lines.append(f"  MISSING  {d.name:<{width}}  in {ref_dir}, not in {new_dir}")
            continue
        if d.status == "extra":
            lines.append(f"  EXTRA    {d.name:<{width}}  in {new_dir}, not in {ref_dir}")
            continue
        where = f" ({d.where[0]}, row {d.where[1]})" if d.where and d.max_rel > 0 else ""
        tag = "DIFFERS " if d.above else "ok      "
        lines.append(
            f"  {tag} {d.name:<{width}}  largest relative difference {d.max_rel:.3g}{where}"
        )
        if d.rows[0] != d.rows[1]:
            lines.append(f"      rows: {d.rows[0]} in {ref_dir}, {d.rows[1]} in {new_dir}")
        if d.missing_columns:
            lines.append(f"      columns missing: {', '.join(d.missing_columns)}")
        if d.extra_columns:
            lines.append(f"      columns added: {', '.join(d.extra_columns)}")
        for col, (count, rel, row, a, b) in d.numeric.items():
            lines.append(
                f"      column {col}: {count} value(s) above {rtol:g}, largest {rel:.3g} at row "
                f"{row}: {_value(a)} -> {_value(b)}"
            )
        for col, (count, row, a, b) in d.text.items():
            lines.append(
                f"      column {col}: {count} row(s) differ, first at row {row}: "
                f"{_value(a)} -> {_value(b)}"
            )
    bad = sum(d.above for d in diffs)
    lines.append(
        f"{bad} of {len(diffs)} CSV(s) differ beyond the tolerance"
        if bad
        else f"all {len(diffs)} CSV(s) agree within the tolerance"
    )
    return lines
