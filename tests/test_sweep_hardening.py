"""Sweep hardening: record names and per-configuration values validated at spec time, output
directories guarded (another sweep, a concurrent run), workers that die with their parent,
damaged files, file modes and the repr of a loaded sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sweep_helpers import tiny_spec

from convkit import sweep as sw
from convkit.cli.sweep import main as sweep_cli

ROOT = Path(__file__).resolve().parents[1]


def quiet(spec, out, **kw):
    """Run serially without a progress bar."""
    kw.setdefault("jobs", 1)
    return sw.run(spec, out, progress=False, **kw)


def with_record(**record) -> dict:
    """The tiny spec with ``record`` options added."""
    spec = tiny_spec()
    spec["record"] = {**spec["record"], **record}
    return spec


# ------------------------------------------------------------------ 1. names and values
def test_unknown_metric_is_a_spec_error():
    with pytest.raises(sw.SpecError, match=r"record\.metrics.*'foo'") as info:
        sw.Sweep.from_dict(with_record(metrics=["foo"]))
    assert "hnorm2" in str(info.value)  # lists what is available
    with pytest.raises(sw.SpecError, match=r"'hnrom2'.*did you mean 'hnorm2'"):
        sw.Sweep.from_dict(with_record(metrics=["hnrom2"]))
    with pytest.raises(sw.SpecError, match=r"record\.iterates.*'avgg'.*did you mean 'avg'"):
        sw.Sweep.from_dict(with_record(iterates=["avgg"]))
    # communication counts are columns of the frame, not metrics
    with pytest.raises(sw.SpecError, match=r"'bits' is a column"):
        sw.Sweep.from_dict(with_record(metrics=["bits"]))
    # Local SGD reports no algorithm metric: consensus (D-PSGD) is not available here
    with pytest.raises(sw.SpecError, match=r"'consensus'"):
        sw.Sweep.from_dict(with_record(metrics=["consensus"]))
    with pytest.raises(sw.SpecError, match=r"'state'"):
        sw.Sweep.from_dict(with_record(iterates=["state"]))
    ok = sw.Sweep.from_dict(with_record(metrics=["hnorm2", "dist2"], iterates=["avg"]))
    assert len(ok) == 6


def test_algorithm_metrics_are_valid_for_their_algorithm(tmp_path):
    spec = tiny_spec()
    spec["grid"] = {"algorithm.step.gamma": [0.05, 0.1]}
    spec["algorithm"] = {
        "kind": "dpsgd",
        "workers": 4,
        "topology": {"kind": "ring", "n": 4},
        "step": {"kind": "constant", "gamma": 0.05},
    }
    spec["record"] = {"n_record": 4, "metrics": ["consensus", "hnorm2"]}
    res = quiet(spec, tmp_path)
    assert res.summary.ok and set(res.frame["metric"]) == {"consensus", "hnorm2"}
    spec["record"]["metrics"] = ["consensu"]
    with pytest.raises(sw.SpecError, match=r"did you mean 'consensus'"):
        sw.Sweep.from_dict(spec)
    # consensus is reported under iterate 'state' only: this selection keeps no rows
    spec["record"] |= {"metrics": ["consensus"], "iterates": ["avg"]}
    with pytest.raises(sw.SpecError, match=r"select no rows"):
        sw.Sweep.from_dict(spec)
    spec["record"] |= {"metrics": ["consensus"], "iterates": ["state"]}
    assert len(sw.Sweep.from_dict(spec)) == 2
    with pytest.raises(sw.SpecError, match=r"record\.metrics is empty"):
        sw.Sweep.from_dict(with_record(metrics=[]))


def test_cli_dry_run_rejects_unknown_metric(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(
        textwrap.dedent(
            """
            steps = 8
            replicates = 2
            [problem]
            kind = "least_squares"
            d = 3
            [algorithm]
            kind = "local_sgd"
            workers = 2
            step = {kind = "constant", gamma = 0.1}
            [record]
            metrics = ["foo"]
            [grid]
            "algorithm.workers" = [1, 2, 3]
            """
        )
    )
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "record.metrics" in err and "'foo'" in err and "line 12" in err
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o"), "--quiet", "--jobs", "1"]) == 2
    assert not (tmp_path / "o" / "frame.parquet").exists()


def test_bad_values_are_one_spec_error_with_counts(tmp_path, capsys):
    spec = tiny_spec()
    spec.pop("steps")
    spec["gradients"] = 24
    spec["grid"] = {"algorithm.workers": [2, 3, 5], "algorithm.step.alpha": [0.75, 1.5]}
    with pytest.raises(sw.SpecError) as info:
        sw.Sweep.from_dict(spec)
    msg = str(info.value)
    assert msg.count("alpha must be in [0, 1], got 1.5") == 1
    assert msg.count("gradients must be a multiple of workers * batch = 5") == 1
    assert "3 configurations" in msg and "1 configuration" in msg
    assert "configuration 1:" in msg and "configuration 4:" in msg
    # the CLI: --dry-run reports it, exit 2
    path = tmp_path / "s.toml"
    path.write_text(
        textwrap.dedent(
            """
            gradients = 24
            replicates = 2
            [problem]
            kind = "least_squares"
            d = 3
            [algorithm]
            kind = "local_sgd"
            workers = 2
            step = {kind = "poly", C = 0.5, alpha = 0.75}
            [record]
            n_record = 0
            [grid]
            "algorithm.workers" = [2, 3, 5]
            """
        )
    )
    assert sweep_cli([str(path), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("n_record must be in [1, inf), got 0") == 1 and "3 configurations" in err


# ------------------------------------------------------------------ 2. output directory
def test_another_sweep_into_an_existing_out_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    first = quiet(tiny_spec(), out)
    other = tiny_spec(n_c=2)
    with pytest.raises(sw.SweepOutputError, match=str(out)):
        quiet(other, out)
    assert sw.load(out).frame.equals(first.frame)  # untouched
    again = quiet(tiny_spec(), out)  # the same spec resumes
    assert again.summary.cached == 6
    replaced = quiet(other, out, overwrite=True)
    assert replaced.summary.total == 4 and len(sw.load(out).configurations) == 4
    # the command line: exit 2, one line naming the directory; --overwrite replaces
    spec = tmp_path / "s.toml"
    spec.write_text(SLOW_TOML.replace("steps = 40000", "steps = 20"))
    assert sweep_cli([str(spec), "--out", str(out), "--quiet", "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(out) in err and "--overwrite" in err and len(err.splitlines()) == 1
    assert sweep_cli([str(spec), "--out", str(out), "--quiet", "--jobs", "1", "--overwrite"]) == 0


def test_concurrent_sweep_on_one_directory_fails_at_once(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fh = open({str(out / '.lock')!r}, 'a+')\n"
            "fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "fh.seek(0); fh.truncate(); fh.write(str(os.getpid())); fh.flush()\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.perf_counter()
        with pytest.raises(sw.SweepOutputError, match=rf"{out}.*pid {holder.pid}"):
            quiet(tiny_spec(), out)
        assert time.perf_counter() - t0 < 5
        assert not (out / "cache").exists()  # nothing computed
        spec = tmp_path / "s.toml"
        spec.write_text(SLOW_TOML.replace("steps = 40000", "steps = 20"))
        assert sweep_cli([str(spec), "--out", str(out), "--quiet", "--jobs", "1"]) == 2
        err = capsys.readouterr().err
        assert f"pid {holder.pid}" in err and str(out) in err
    finally:
        holder.kill()
        holder.wait()
    assert quiet(tiny_spec(), out).summary.computed == 6  # the lock is released with its holder


# ------------------------------------------------------------------ 3. workers die with parent
SLOW_TOML = """
seed = 2
steps = 40000
replicates = 4

[problem]
kind = "least_squares"
d = 4

[algorithm]
kind = "local_sgd"
workers = 2
step = {kind = "constant", gamma = 0.01}

[record]
n_record = 4

[grid]
"algorithm.workers" = [1, 2, 3, 4]
"""


def test_workers_exit_when_the_parent_is_killed(tmp_path):
    psutil = pytest.importorskip("psutil")
    spec = tmp_path / "slow.toml"
    spec.write_text(SLOW_TOML)
    cmd = [sys.executable, "-m", "convkit.cli", "sweep", str(spec), "--out", str(tmp_path / "o")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [*cmd, "--jobs", "2", "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = psutil.Process(proc.pid)
    workers: list = []
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            kids = parent.children(recursive=True)
            workers = [k for k in kids if _is_worker(k)]
            if len(workers) >= 2:
                break
            assert proc.poll() is None, "the sweep ended before its workers started"
            time.sleep(0.2)
        assert len(workers) >= 2, "no worker processes appeared"
        kids = parent.children(recursive=True)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    gone, alive = psutil.wait_procs(kids, timeout=10)
    for p in alive:  # do not leave them behind whatever the outcome
        p.kill()
    assert not alive, f"still alive 10 s after the parent was killed: {alive}"


def _is_worker(p) -> bool:
    try:
        return "loky" in " ".join(p.cmdline()) or "multiprocessing" in " ".join(p.cmdline())
    except Exception:
        return False


# ------------------------------------------------------------------ 4. damaged files
def test_damaged_sweep_json_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "out"
    quiet(tiny_spec(), out)
    (out / "sweep.json").write_bytes(b'{"name": nul')
    with pytest.raises(sw.SweepOutputError, match=rf"{out / 'sweep.json'}.*not valid JSON"):
        sw.load(out)
    with pytest.raises(sw.SweepOutputError, match="sweep.json"):
        quiet(tiny_spec(), out)
    spec = tmp_path / "s.toml"
    spec.write_text(SLOW_TOML.replace("steps = 40000", "steps = 20"))
    assert sweep_cli([str(spec), "--out", str(out), "--quiet", "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "sweep.json" in err and len(err.splitlines()) == 1
    assert quiet(tiny_spec(), out, overwrite=True).summary.cached == 6


def test_binary_spec_file_is_a_spec_error(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01")
    with pytest.raises(sw.SpecError, match=rf"{spec}.*not UTF-8 text"):
        sw.Sweep.from_toml(spec)
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(spec) in err and len(err.splitlines()) == 1


# ------------------------------------------------------------------ 5. file modes
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        out = tmp_path / "out"
        quiet(tiny_spec(n_c=1), out)
        files = [out / "frame.parquet", out / "sweep.json", *(out / "cache").glob("??/*")]
        assert len(files) > 2
        for f in files:
            assert f.stat().st_mode & 0o777 == 0o666 & ~umask, f
    finally:
        os.umask(old)


# ------------------------------------------------------------------ 6. repr
def test_sweep_result_repr_is_short(tmp_path):
    out = tmp_path / "out"
    res = quiet(tiny_spec(), out)
    loaded = sw.load(out)
    for r in (res, loaded):
        text = repr(r)
        assert len(text) < 300, text
        assert "configurations=6" in text and f"rows={len(r.frame)}" in text
        assert "failed=0" in text and "diverged=" in text and str(out) in text
    assert loaded.directory == out
    json.loads((out / "sweep.json").read_text())  # still the full metadata on disk


def test_dry_run_checks_the_workers_of_a_problem_with_nodes(tmp_path, capsys):
    """A problem with 4 nodes and an algorithm with 8 workers failed only at run time (in
    the problem's sample); the dry run now refuses the configurations that mismatch, with
    the count, and keeps those that match."""
    spec = tmp_path / "s.toml"
    spec.write_text(
        textwrap.dedent(
            """
            steps = 8
            replicates = 2
            [problem]
            kind = "heterogeneous_least_squares"
            d = 3
            workers = 4
            zeta2 = 0.1
            [algorithm]
            kind = "local_sgd"
            workers = 4
            step = {kind = "constant", gamma = 0.1}
            [grid]
            "algorithm.workers" = [4, 8]
            """
        )
    )
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "HeterogeneousLeastSquares has 4 nodes" in err, err
    assert "workers = 8" in err and "1 configuration" in err, err


KIND_MODULE = textwrap.dedent(
    """
    import convkit.sweep as sw
    from convkit.problems.least_squares import LeastSquares


    def spiked_v33(d: int = 5, spike: float = 10.0, seed: int = 0):
        return LeastSquares.gaussian(d, [spike] + [1.0] * (d - 1), 1.0, seed=seed)


    sw.register("problem", "spiked_v33", spiked_v33, replace=True)
    """
)


def test_imports_accepts_a_path_as_check_module_does(tmp_path, monkeypatch):
    """``imports = ["kinds.py"]`` (a path, as ``convkit check --module`` takes) registers the
    module's kinds, in this process and in the worker processes of a run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kinds_v33.py").write_text(KIND_MODULE)
    spec = tiny_spec()
    spec["imports"] = [str(tmp_path / "kinds_v33.py")]
    spec["problem"] = {"kind": "spiked_v33", "d": 5}
    spec["grid"] = {"problem.spike": [2.0, 4.0]}
    s = sw.Sweep.from_dict(spec)
    assert len(s) == 2
    res = quiet(spec, tmp_path / "out", jobs=2)
    assert len(res.frame) > 0
    sys.modules.pop("kinds_v33", None)


@pytest.mark.parametrize("as_path", [True, False], ids=["path", "dotted"])
def test_imports_shows_a_modules_syntax_error(tmp_path, monkeypatch, as_path):
    """A syntax error in an imported module is a SpecError naming the module, the file, the
    line and the text (was a raw SyntaxError traceback from the spec constructor)."""
    bad = tmp_path / "broken_v33.py"
    bad.write_text("x = 1\ndef f(:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tiny_spec()
    spec["imports"] = [str(bad) if as_path else "broken_v33"]
    with pytest.raises(
        sw.SpecError,
        match=r"cannot import module .*broken_v33.*SyntaxError"
        r".*broken_v33\.py.*line 2.*def f\(:",
    ):
        sw.Sweep.from_dict(spec)
    sys.modules.pop("broken_v33", None)
