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
    assert "Data of every analysis: quick run" in (b / "index.md").read_text()


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


# ---------------------------------------------------------------- modes, provenance, partial runs
FAKE = """
import numpy as np
import pandas as pd
from pathlib import Path

from convkit import verdicts as V

TITLE = "fake analysis {name}"
CLAIMS = V.declare_claims(
    "{name}", {{"sum_of_y": V.Claim("the sum of y", "a fake analysis", kind=V.MEASUREMENT)}}
)


def run(quick):
    return pd.DataFrame({{"x": [1, 2], "y": [1.0 if quick else 2.0, 3.0]}})


def plot(data, outdir):
    path = Path(outdir) / "{name}.png"
    path.write_bytes(b"not a real png " + str(float(data.y.sum())).encode())
    return [path]


def checks(data):
    return [dict(result="{name}.sum_of_y", setting="two rows", measured=np.float64(data.y.sum() / 7),
                 theoretical=None, verdict="measured", reason="")]
"""


def _fake_analyses(tmp_path, names=("alpha", "beta")):
    """A package of tiny analyses under a name unique to the test (module caching)."""
    pkg = tmp_path / f"an_{tmp_path.name}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for n in names:
        (pkg / f"{n}.py").write_text(FAKE.format(name=n))
    return pkg


def _figures(*args):
    return main(["figures", *map(str, args)])


def test_quick_default_out_is_the_scratch_directory(monkeypatch):
    from convkit import figures as pipeline

    seen = {}

    def fake_run(names, out, quick, analyses_dir, **kw):
        seen.update(out=out, quick=quick, **kw)
        return 0

    monkeypatch.setattr(pipeline, "run_figures", fake_run)
    assert _figures("--quick", "--only", "error_memory") == 0
    assert seen["out"] == pipeline.QUICK_OUT and seen["quick"] is True
    assert seen["command"] == "convkit figures --quick --only error_memory"
    assert _figures() == 0
    assert seen["out"] == pipeline.COMMITTED and seen["command"] == "convkit figures"
    assert f"{pipeline.QUICK_OUT.name}/" in (REPO / ".gitignore").read_text().split()


def test_quick_run_into_the_committed_set_is_refused(capsys):
    before = {p.name: p.stat().st_mtime_ns for p in (REPO / "figures").iterdir()}
    assert _figures("--quick", "--only", "error_memory", "--out", REPO / "figures") == 2
    assert "never writes into the committed set" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in (REPO / "figures").iterdir()} == before


def test_checks_only_and_replot_exclude_each_other(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        _figures("--checks-only", "--replot", "--out", tmp_path)
    assert e.value.code == 2
    assert "--checks-only and --replot" in capsys.readouterr().err


def test_partial_runs_keep_the_other_analyses_and_record_each_command(tmp_path):
    pkg, out = _fake_analyses(tmp_path), tmp_path / "out"
    assert _figures("--only", "alpha", "--out", out, "--analyses", pkg) == 0
    assert _figures("--quick", "--only", "beta", "--out", out, "--analyses", pkg) == 0
    checks = json.loads((out / "checks.json").read_text())
    runs = json.loads((out / "runs.json").read_text())
    assert set(checks) == set(runs) == {"alpha", "beta"}
    cmd_a = f"convkit figures --only alpha --out {out} --analyses {pkg}"
    cmd_b = f"convkit figures --quick --only beta --out {out} --analyses {pkg}"
    assert runs["alpha"]["mode"] == "full" and runs["alpha"]["data"] == cmd_a
    assert runs["beta"]["mode"] == "quick" and runs["beta"]["data"] == cmd_b
    index = (out / "index.md").read_text()
    assert f"This index was written by `{cmd_b}`." in index
    assert "Data modes differ between analyses: alpha: full, beta: quick." in index
    assert "## alpha" in index and "## beta" in index
    assert "![alpha.png](alpha.png)" in index and "![beta.png](beta.png)" in index
    assert f"Data, figures and checks: full run, `{cmd_a}`" in index
    assert f"Data, figures and checks: quick run, `{cmd_b}`" in index
    # numbers are rounded plain values in the table, a missing value is "-"
    assert "| beta.sum_of_y | two rows | 0.5714 | - | measured |  |" in index
    assert "np.float64" not in index and "None" not in index


def test_replot_and_checks_only_keep_the_data_provenance(tmp_path):
    pkg, out = _fake_analyses(tmp_path, ("gamma",)), tmp_path / "out"
    assert _figures("--out", out, "--analyses", pkg) == 0
    data_cmd = json.loads((out / "runs.json").read_text())["gamma"]["data"]
    (out / "gamma.png").unlink()
    assert _figures("--replot", "--out", out, "--analyses", pkg) == 0
    rec = json.loads((out / "runs.json").read_text())["gamma"]
    assert (out / "gamma.png").read_bytes() == b"not a real png 5.0"  # drawn from the CSV
    assert rec["mode"] == "full" and rec["data"] == data_cmd
    assert (
        rec["figures"] == rec["checks"] == f"convkit figures --replot --out {out} --analyses {pkg}"
    )
    assert _figures("--checks-only", "--out", out, "--analyses", pkg) == 0
    rec2 = json.loads((out / "runs.json").read_text())["gamma"]
    assert rec2["figures"] == rec["figures"] and rec2["data"] == data_cmd
    assert rec2["checks"].startswith("convkit figures --checks-only")
    index = (out / "index.md").read_text()
    assert "Data of every analysis: full run" in index
    assert f"Data: full run, `{data_cmd}`" in index and f"figures: `{rec['figures']}`" in index


# ---------------------------------------------------------------- AFTER: order of the analyses
TIMED = """
import time
from pathlib import Path

import pandas as pd

from convkit import verdicts as V

TITLE = "timed {name}"
AFTER = {after!r}
CLAIMS = V.declare_claims("{name}", {{"ran": V.Claim("it ran", "a timed fake", kind=V.MEASUREMENT)}})


def run(quick):
    t0 = time.time()
    time.sleep({sleep})
    return pd.DataFrame({{"start": [t0], "end": [time.time()]}})


def plot(data, outdir):
    return []


def checks(data):
    return [dict(result="{name}.ran", setting="-", measured=1.0, theoretical=None,
                 verdict="measured", reason="")]
"""


def _timed_analyses(tmp_path, spec):
    pkg = tmp_path / f"an_{tmp_path.name}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, (after, sleep) in spec.items():
        (pkg / f"{name}.py").write_text(TIMED.format(name=name, after=after, sleep=sleep))
    return pkg


def test_jobs_start_an_analysis_after_those_of_its_after(tmp_path):
    """With two processes, ``a_dep`` (AFTER ``z_base``) starts only when ``z_base`` has
    finished, while the independent ``m_free`` runs beside ``z_base``; serially the order
    honours AFTER too."""
    spec = {"a_dep": (("z_base",), 0.0), "m_free": ((), 0.0), "z_base": ((), 1.5)}
    pkg = _timed_analyses(tmp_path, spec)
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        assert _figures("--quick", "--analyses", pkg, "--out", out, "--jobs", jobs) == 0
        t = {n: pd.read_csv(out / f"{n}.csv").iloc[0] for n in spec}
        assert t["a_dep"].start >= t["z_base"].end
        if jobs == "2":
            assert t["m_free"].start < t["z_base"].end  # beside it, not after it


def test_after_naming_no_analysis_or_a_cycle_is_refused(tmp_path, capsys):
    pkg = _timed_analyses(tmp_path, {"one": (("nothing",), 0.0), "two": ((), 0.0)})
    assert _figures("--quick", "--analyses", pkg, "--out", tmp_path / "o") == 2
    assert "'nothing'" in capsys.readouterr().err
    pkg2 = tmp_path / "cyc"
    pkg2.mkdir()
    (pkg2 / "__init__.py").write_text("")
    for name, other in (("p", "q"), ("q", "p")):
        (pkg2 / f"{name}.py").write_text(TIMED.format(name=name, after=(other,), sleep=0))
    assert _figures("--quick", "--analyses", pkg2, "--out", tmp_path / "o2") == 2
    assert "cycle" in capsys.readouterr().err


def test_committed_after_names_exist():
    from convkit.figures import discover, run_after

    names = discover(REPO / "analyses")
    after = run_after(REPO / "analyses", names)
    assert after["local_sgd_schedules"] == ("local_sgd_large_steps",)
    assert after["local_sgd_variations"] == ("local_sgd_large_steps",)


def test_checks_only_lists_only_the_analysis_own_figures(tmp_path):
    """``--checks-only`` finds an analysis' PNGs by name: ``alpha.png`` and ``alpha_x.png``
    are ``alpha``'s, ``alpha_beta.png`` belongs to the analysis ``alpha_beta``."""
    pkg = _fake_analyses(tmp_path, names=("alpha", "alpha_beta"))
    out = tmp_path / "out"
    assert _figures("--quick", "--analyses", pkg, "--out", out) == 0
    (out / "alpha_x.png").write_bytes(b"extra figure of alpha")
    assert _figures("--checks-only", "--analyses", pkg, "--out", out) == 0
    index = (out / "index.md").read_text()
    alpha_part = index.split("fake analysis alpha_beta")[0]
    assert "(alpha.png)" in alpha_part and "(alpha_x.png)" in alpha_part
    assert "(alpha_beta.png)" not in alpha_part
    assert "(alpha_beta.png)" in index.split("fake analysis alpha_beta")[1]


def test_index_lists_own_figures_of_analyses_outside_the_run(tmp_path):
    """An analysis that ``--only`` leaves out keeps its own PNGs in the index, not those of an
    analysis whose name extends it (the index used to glob ``alpha*.png`` for it)."""
    pkg = _fake_analyses(tmp_path, names=("alpha", "alpha_beta"))
    out = tmp_path / "out"
    assert _figures("--quick", "--analyses", pkg, "--out", out) == 0
    assert _figures("--replot", "--only", "alpha_beta", "--analyses", pkg, "--out", out) == 0
    index = (out / "index.md").read_text()
    alpha_part = index.split("fake analysis alpha_beta")[0]
    assert "(alpha.png)" in alpha_part
    assert "(alpha_beta.png)" not in alpha_part


def test_a_rerun_with_the_same_data_leaves_the_record_and_index_as_they_were(tmp_path):
    """Rerunning where the data was made leaves runs.json and index.md byte for byte (so
    ``git status`` stays clean); ``--record-times`` records the new run; changed data is
    recorded with its command (negative control: the quick data differs)."""
    pkg, out = _fake_analyses(tmp_path, ("delta",)), tmp_path / "out"
    assert _figures("--out", out, "--analyses", pkg) == 0
    files = ("runs.json", "index.md", "checks.json", "delta.csv")
    first = {f: (out / f).read_bytes() for f in files}
    assert _figures("--jobs", "1", "--out", out, "--analyses", pkg) == 0
    assert {f: (out / f).read_bytes() for f in files} == first
    assert _figures("--record-times", "--out", out, "--analyses", pkg) == 0
    rec = json.loads((out / "runs.json").read_text())["delta"]
    assert rec["data"].startswith("convkit figures --record-times")
    assert (out / "index.md").read_bytes() != first["index.md"]
    assert _figures("--quick", "--out", out, "--analyses", pkg) == 0  # new data: recorded
    rec = json.loads((out / "runs.json").read_text())["delta"]
    assert rec["mode"] == "quick" and "--quick" in rec["data"]
    assert "This index was written by `convkit figures --quick" in (out / "index.md").read_text()


def test_a_whole_run_with_record_times_records_its_time(tmp_path, capsys):
    """``--record-times`` on a run of every analysis records the whole run's wall time (with
    date, machine, jobs and command) under ``_whole_runs`` of ``runs.json``, and the next run's
    plan says it; a partial run or one without the option records none (negative controls),
    and the analyses' entries are unchanged in kind (the index lists analyses only)."""
    from convkit.figures import WHOLE_RUNS

    pkg, out = _fake_analyses(tmp_path), tmp_path / "out"
    assert _figures("--out", out, "--analyses", pkg) == 0
    assert WHOLE_RUNS not in json.loads((out / "runs.json").read_text())
    assert _figures("--only", "alpha", "--record-times", "--out", out, "--analyses", pkg) == 0
    assert WHOLE_RUNS not in json.loads((out / "runs.json").read_text())
    assert _figures("--record-times", "--out", out, "--analyses", pkg) == 0
    runs = json.loads((out / "runs.json").read_text())
    rec = runs[WHOLE_RUNS]["full"]
    assert set(rec) == {"seconds", "analyses", "jobs", "date", "machine", "command"}
    assert rec["analyses"] == len(runs) - 1 and rec["seconds"] >= 0 and rec["jobs"] == 1
    assert "--record-times" in rec["command"]
    assert "## _whole_runs" not in (out / "index.md").read_text()
    capsys.readouterr()
    assert _figures("--out", out, "--analyses", pkg) == 0
    assert "; the last whole full run took" in capsys.readouterr().out
    assert json.loads((out / "runs.json").read_text())[WHOLE_RUNS] == runs[WHOLE_RUNS]
