"""Sweep grids are counted before any configuration is built: past the limit the spec is
refused at once with the count and the way out (a 1000 x 1000 `--dry-run` printed nothing
for minutes; 2e9 configurations grew memory without end)."""

from __future__ import annotations

import time

import pytest
from sweep_helpers import tiny_spec

from convkit import sweep as sw
from convkit.cli import main
from convkit.sweep.spec import MAX_CONFIGURATIONS


def _toml(spec: dict) -> str:
    """TOML text of a tiny_spec-shaped dict (scalars, one-level tables, the grid)."""

    def value(v: object) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v) if not isinstance(v, str) else f'"{v}"'

    lines = [f"{k} = {value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    for table, body in spec.items():
        if isinstance(body, dict):
            lines.append(f"[{table}]")
            for k, v in body.items():
                if isinstance(v, dict):
                    inner = ", ".join(f"{a} = {value(b)}" for a, b in v.items())
                    lines.append(f"{k} = {{{inner}}}")
                else:
                    lines.append(f'"{k}" = {value(v)}' if "." in k else f"{k} = {value(v)}")
    return "\n".join(lines) + "\n"


def _huge(n_axis: int) -> dict:
    spec = tiny_spec()
    spec["grid"] = {
        "algorithm.step.C": [0.001 * (i + 1) for i in range(n_axis)],
        "algorithm.step.alpha": [0.5 + 0.4 * i / n_axis for i in range(n_axis)],
    }
    return spec


@pytest.mark.timeout(60)
def test_a_grid_past_the_limit_is_refused_before_it_is_built():
    """45000 x 45000 = 2.025e9 configurations: refused in well under a second (building them
    took ~1 ms each), the message has the count, the sizes and both ways out."""
    t0 = time.perf_counter()
    with pytest.raises(sw.SpecError) as info:
        sw.Sweep.from_dict(_huge(45_000))
    assert time.perf_counter() - t0 < 5.0
    text = str(info.value)
    assert "2,025,000,000 configurations (45000 x 45000" in text
    assert f"limit of {MAX_CONFIGURATIONS:,}" in text
    assert "--max-configurations 2025000000" in text
    assert "max_configurations=2025000000" in text


def test_the_limit_can_be_raised_and_lowered():
    spec = tiny_spec()  # 2 x 3 = 6 configurations
    with pytest.raises(sw.SpecError, match=r"the grid has 6 configurations \(2 x 3 over"):
        sw.Sweep.from_dict(spec, max_configurations=5)
    assert len(sw.Sweep.from_dict(spec, max_configurations=6)) == 6
    with pytest.raises(ValueError, match="max_configurations must be an integer >= 1, got 0"):
        sw.Sweep.from_dict(spec, max_configurations=0)


@pytest.mark.timeout(60)
def test_cli_dry_run_of_a_huge_grid_is_one_line_and_exit_2(tmp_path, capsys):
    """The 1000 x 1000 `--dry-run` of the issue: one line on stderr, exit 2, at once."""
    path = tmp_path / "huge.toml"
    path.write_text(_toml(_huge(1000)))
    t0 = time.perf_counter()
    code = main(["sweep", str(path), "--out", str(tmp_path / "out"), "--dry-run"])
    assert time.perf_counter() - t0 < 5.0
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1,000,000 configurations" in err[0], err
    assert "--max-configurations 1000000" in err[0]
    small = tmp_path / "small.toml"
    small.write_text(_toml(tiny_spec()))
    args = ["sweep", str(small), "--out", str(tmp_path / "o2"), "--dry-run"]
    assert main([*args, "--max-configurations", "5"]) == 2
    assert "6 configurations" in capsys.readouterr().err
    assert main(args) == 0
    assert main([*args, "--max-configurations", "0"]) == 2
    assert "--max-configurations must be an integer >= 1" in capsys.readouterr().err
