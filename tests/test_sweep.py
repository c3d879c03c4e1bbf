"""Sweeps: spec parsing and errors, normalisation, registry, cache, corruption, failures, CLI.

Executors (joblib, Dask) and the SIGKILL resume test are in ``test_sweep_exec.py``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import convkit
from convkit import sweep as sw
from convkit.cli.sweep import main as sweep_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sweep_example.toml"


def tiny(**over):
    """A tiny spec (each configuration simulates in a few milliseconds)."""
    spec = {
        "seed": 3,
        "steps": 16,
        "replicates": 6,
        "problem": {"kind": "least_squares", "d": 4, "spectrum": "1/i", "noise": 1.0},
        "algorithm": {
            "kind": "local_sgd",
            "workers": 2,
            "comm": "rounds:4",
            "step": {"kind": "poly", "C": 0.5, "alpha": 0.75},
        },
        "record": {"n_record": 4},
        "grid": {"algorithm.workers": [1, 2], "algorithm.step.C": [0.25, 0.5]},
    }
    for k, v in over.items():
        if v is None:
            spec.pop(k, None)
        else:
            spec[k] = v
    return spec


def run_quiet(spec, out, **kw):
    kw.setdefault("jobs", 1)
    return sw.run(spec, out, progress=False, **kw)


# ------------------------------------------------------------------------- spec & grids
def test_example_spec_parses():
    s = sw.Sweep.from_toml(EXAMPLE)
    assert len(s) == 3 * 2 * 4
    assert s.grid_keys == [
        "algorithm.workers",
        "algorithm.step.C",
        "algorithm.comm",
        "algorithm.name",
    ]
    c = s.configurations[0]
    assert c.params == {
        "algorithm.workers": 2,
        "algorithm.step.C": 0.25,
        "algorithm.comm": "mba",
        "algorithm.name": "MBA",
    }
    assert c.setting["algorithm"]["comm"] == {"kind": "mba"}
    # zipped keys vary together and fastest (last axis)
    assert [x.params["algorithm.name"] for x in s.configurations[:4]] == [
        "MBA",
        "Local-SGD N=64",
        "Local-SGD N=8",
        "OSA",
    ]
    assert s.configurations[1].setting["algorithm"]["comm"] == {"kind": "rounds", "N": 64}
    problem, algos = sw.build(c.setting)
    assert isinstance(problem, convkit.LeastSquares) and problem.d == 20
    assert algos[0].workers == 2 and algos[0].label == "MBA"


def test_cross_product_and_zip_counts():
    spec = tiny(zip=[{"record.n_record": [3, 4, 5], "replicates": [4, 5, 6]}])
    s = sw.Sweep.from_dict(spec)
    assert len(s) == 2 * 2 * 3
    assert len({c.key for c in s}) == len(s)
    assert {(c.params["record.n_record"], c.params["replicates"]) for c in s} == {
        (3, 4),
        (4, 5),
        (5, 6),
    }
    no_grid = sw.Sweep.from_dict(tiny(grid=None))
    assert len(no_grid) == 1 and no_grid.configurations[0].params == {}


def test_python_dict_equals_toml():
    text = textwrap.dedent(
        """
        seed = 3
        steps = 16
        replicates = 6
        [problem]
        kind = "least_squares"
        d = 4
        spectrum = "1/i"
        noise = 1
        [algorithm]
        kind = "local_sgd"
        workers = 2
        comm = {kind = "rounds", N = 4}
        step = {kind = "poly", C = 0.5, alpha = 0.75}
        [record]
        n_record = 4
        [grid]
        "algorithm.workers" = [1, 2]
        "algorithm.step.C" = [0.25, 0.5]
        """
    )
    a = sw.Sweep.from_toml_text(text)
    b = sw.Sweep.from_dict(tiny())
    # "rounds:4" == {kind = "rounds", N = 4}, noise = 1 == 1.0: equal normalised settings
    assert [c.key for c in a] == [c.key for c in b]
    assert [c.seed for c in a] == [c.seed for c in b]


def test_normalisation_fills_defaults():
    c = sw.Sweep.from_dict(tiny(grid=None)).configurations[0]
    assert c.setting["problem"] == {
        "kind": "least_squares",
        "design": "gaussian",
        "d": 4,
        "spectrum": "1/i",
        "noise": 1.0,
        "rotate": False,
        "seed": 0,
    }
    assert c.setting["algorithm"]["batch"] == 1
    assert c.setting["algorithm"]["step"] == {"kind": "poly", "C": 0.5, "alpha": 0.75, "k0": 0.0}
    assert c.setting["replicates"] == 6 and "gradients" not in c.setting
    explicit = copy.deepcopy(tiny(grid=None))
    explicit["problem"]["design"] = "gaussian"
    explicit["algorithm"]["batch"] = 1
    assert sw.Sweep.from_dict(explicit).configurations[0].key == c.key


def test_key_depends_on_seed_and_version(monkeypatch):
    c = sw.Sweep.from_dict(tiny(grid=None)).configurations[0]
    other_seed = sw.Sweep.from_dict(tiny(grid=None, seed=4)).configurations[0]
    assert other_seed.key != c.key and other_seed.seed != c.seed
    monkeypatch.setattr(convkit, "__version__", "999.0")
    bumped = sw.Sweep.from_dict(tiny(grid=None)).configurations[0]
    assert bumped.key != c.key
    assert bumped.seed == c.seed  # the seed depends on (sweep seed, setting) only
    doc = {"setting": c.setting, "sweep_seed": 3, "convkit": "999.0", "format": sw.CACHE_FORMAT}
    expected = hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert bumped.key == expected


def test_seed_derivation_ignores_record_options():
    a = sw.Sweep.from_dict(tiny(grid=None)).configurations[0]
    spec = tiny(grid=None)
    spec["record"] = {"n_record": 7, "iterates": ["avg"]}
    b = sw.Sweep.from_dict(spec).configurations[0]
    assert a.key != b.key and a.seed == b.seed
    from convkit.backend import derive_seed

    key = {k: v for k, v in a.setting.items() if k != "record"}
    assert a.seed == int(derive_seed(3, key).generate_state(1)[0])


def test_algorithms_list_and_index_grid(tmp_path):
    spec = tiny(grid={"algorithms.1.comm": ["rounds:2", "osa"]})
    algo = spec.pop("algorithm")
    spec["algorithms"] = [{**algo, "comm": "mba", "name": "mba"}, {**algo, "name": "local"}]
    s = sw.Sweep.from_dict(spec)
    assert [c.setting["algorithms"][1]["comm"] for c in s] == [
        {"kind": "rounds", "N": 2},
        {"kind": "osa"},
    ]
    res = run_quiet(s, tmp_path)
    assert set(res.frame["config"]) == {"mba", "local"}
    # the two configurations have independent seeds: their (identical) MBA runs differ
    mba = res.frame[res.frame.config == "mba"]
    a, b = (g["mean"].to_numpy() for _, g in mba.groupby("config_id"))
    assert a.shape == b.shape and not np.array_equal(a, b)


# ------------------------------------------------------------------------- invalid specs
BASE_TOML = """\
seed = 1
gradients = 64
replicates = 4

[problem]
kind = "least_squares"
d = 4

[algorithm]
kind = "local_sgd"
workers = 2
comm = "rounds:4"
step = {kind = "poly", C = 0.5, alpha = 0.75}

[grid]
"algorithm.workers" = [1, 2]
"""


def edit(old: str, new: str) -> str:
    assert old in BASE_TOML
    return BASE_TOML.replace(old, new)


# (toml text, key named, line, fragment of the message)
INVALID = {
    "unknown top-level key": (
        edit("replicates = 4", "replicate = 4"),
        "replicate",
        3,
        "did you mean 'replicates'",
    ),
    "unknown problem key": (edit("d = 4", "d = 4\ndim = 4"), "problem.dim", 8, "unknown key 'dim'"),
    "unknown kind": (
        edit('kind = "least_squares"', 'kind = "quadratic"'),
        "problem.kind",
        6,
        "unknown problem kind 'quadratic'",
    ),
    "empty grid": (
        edit('"algorithm.workers" = [1, 2]', '"algorithm.workers" = []'),
        "grid.algorithm.workers",
        16,
        "non-empty",
    ),
    "grid key to unknown field": (
        edit('"algorithm.workers" = [1, 2]', '"algorithm.wokers" = [1, 2]'),
        "algorithm.wokers",
        16,
        "did you mean 'workers'",
    ),
    "wrong type": (edit("d = 4", 'd = "four"'), "problem.d", 7, "must be an integer"),
    "wrong type in grid": (
        edit("[1, 2]", "[1, 2.5]"),
        "algorithm.workers",
        16,
        "must be an integer, got 2.5",
    ),
    "wrong type in inline table": (
        edit("C = 0.5", 'C = "half"'),
        "algorithm.step.C",
        13,
        "must be a number",
    ),
    "zip of unequal lengths": (
        BASE_TOML + '[[zip]]\n"algorithm.step.C" = [0.1, 0.2]\n"replicates" = [4, 5, 6]\n',
        "zip.0.algorithm.step.C",
        18,
        "equal lengths",
    ),
    "missing required key": (edit("d = 4", ""), "problem.d", 5, "missing required key 'd'"),
    "both gradients and steps": (
        edit("gradients = 64", "gradients = 64\nsteps = 8"),
        "gradients",
        2,
        "exactly one of gradients",
    ),
    "grid value not an array": (
        edit("[1, 2]", "2"),
        "grid.algorithm.workers",
        16,
        "must be an array",
    ),
    "duplicate grid values": (edit("[1, 2]", "[2, 2]"), "grid.algorithm.workers", 16, "distinct"),
    "key varied twice": (
        BASE_TOML + '[[zip]]\n"algorithm.workers" = [4, 8]\n',
        "zip.0.algorithm.workers",
        18,
        "varied twice",
    ),
    "sweep option in grid": (
        BASE_TOML + '"seed" = [1, 2]\n',
        "grid.seed",
        17,
        "cannot be varied",
    ),
    "bad comm spec": (
        edit('comm = "rounds:4"', 'comm = "sometimes"'),
        "algorithm.comm",
        12,
        "comm must be",
    ),
    "unknown step kind": (
        edit('kind = "poly"', 'kind = "cosine"'),
        "algorithm.step.kind",
        13,
        "unknown step kind 'cosine'",
    ),
    "identical configurations": (
        edit(
            '"algorithm.workers" = [1, 2]',
            '"algorithm.comm" = ["rounds:4", {kind = "rounds", N = 4}]',
        ),
        "algorithm.comm",
        16,
        "identical",
    ),
    "negative seed": (edit("seed = 1", "seed = -1"), "seed", 1, "must be >= 0"),
    "invalid TOML": (edit("d = 4", "d = = 4"), None, 7, "invalid TOML"),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_spec_errors(case):
    text, key, line, fragment = INVALID[case]
    with pytest.raises(sw.SpecError) as info:
        sw.Sweep.from_toml_text(text, source="spec.toml")
    err = info.value
    assert fragment in str(err), str(err)
    assert err.key == key, str(err)
    assert err.line == line, str(err)
    assert str(err).startswith(f"spec.toml, line {line}"), str(err)


def test_base_toml_is_valid():
    assert len(sw.Sweep.from_toml_text(BASE_TOML)) == 2


def test_errors_from_python_dicts_name_the_key():
    bad = tiny()
    bad["algorithm"]["workers"] = "two"
    with pytest.raises(sw.SpecError, match="'algorithm.workers'.*must be an integer") as info:
        sw.Sweep.from_dict(tiny(grid=None) | {"algorithm": bad["algorithm"]})
    assert info.value.line is None
    with pytest.raises(sw.SpecError, match="record.*iterates must be among"):
        sw.Sweep.from_dict(tiny(record={"iterates": ["mean"]}))
    with pytest.raises(sw.SpecError, match="exactly one of \\[algorithm\\]"):
        sw.Sweep.from_dict(tiny(algorithm=None, grid=None))
    with pytest.raises(sw.SpecError, match="not a table"):
        sw.Sweep.from_dict(tiny(grid={"algorithm.comm.N": [2, 4]}))
    with pytest.raises(sw.SpecError, match="in configuration 1"):
        sw.Sweep.from_dict(tiny(grid={"algorithm.kind": ["local_sgd", "mba"]}))


def test_toml_positions_scanner():
    pos = sw.toml_positions(BASE_TOML + '[[zip]]\n"a.b" = [1]\n[[zip]]\n"c" = [2]\n')
    assert pos[("problem", "d")] == 7
    assert pos[("algorithm", "step", "alpha")] == 13
    assert pos[("grid", "algorithm.workers")] == 16
    assert pos[("zip", 0, "a.b")] == 18 and pos[("zip", 1, "c")] == 20


# ------------------------------------------------------------------------- registry
def test_registry_builtin_and_lazy_kinds():
    k = sw.kinds()
    assert {"least_squares"} <= set(k["problem"])
    assert {"local_sgd", "mba", "osa"} <= set(k["algorithm"])
    assert {"poly", "constant"} <= set(k["step"])
    assert {"mba", "osa", "every", "rounds", "at", "geometric", "polynomial"} <= set(k["comm"])
    assert {"ring", "torus", "complete"} <= set(k["topology"])  # from convkit.topology
    assert "top_k" in k["compressor"]  # from convkit.compression
    with pytest.raises(ValueError, match="already registered"):
        sw.register("problem", "least_squares", lambda d: None)


def test_register_custom_kind(tmp_path):
    from convkit.problems import LeastSquares

    def isotropic(d: int, noise: float = 1.0) -> LeastSquares:
        return LeastSquares.gaussian(d=d, spectrum="flat", noise=noise)

    sw.register("problem", "isotropic_test", isotropic, replace=True)
    assert sw.kinds("problem").count("isotropic_test") == 1
    spec = tiny(grid={"problem.noise": [0.5, 1]})
    spec["problem"] = {"kind": "isotropic_test", "d": 3}
    s = sw.Sweep.from_dict(spec)
    assert s.configurations[1].setting["problem"] == {
        "kind": "isotropic_test",
        "d": 3,
        "noise": 1.0,
    }
    with pytest.raises(sw.SpecError, match="unknown key 'spectrum'"):
        sw.Sweep.from_dict(
            spec | {"problem": {"kind": "isotropic_test", "d": 3, "spectrum": "1/i"}}
        )
    res = run_quiet(s, tmp_path)
    assert res.summary.computed == 2 and res.summary.ok


# ------------------------------------------------------------------------- running & cache
def test_run_output_and_rerun_reuses_cache(tmp_path):
    spec = tiny(record={"n_record": 4, "iterates": ["avg", "last"], "metrics": ["hnorm2"]})
    res = run_quiet(spec, tmp_path / "out")
    s = res.summary
    assert (s.total, s.computed, s.cached, s.failed, s.invalid) == (4, 4, 0, {}, {})
    f = res.frame
    assert list(f.columns[:4]) == [
        "config_id",
        "config_key",
        "algorithm.workers",
        "algorithm.step.C",
    ]
    assert set(f.iterate) == {"avg", "last"} and set(f.metric) == {"hnorm2"}
    assert sorted(f.config_id.unique()) == [0, 1, 2, 3]
    assert (f.groupby("config_id")["algorithm.workers"].first().to_list()) == [1, 1, 2, 2]
    # one configuration = one simulate call with the derived seed
    c = sw.Sweep.from_dict(spec).configurations[3]
    problem, algos = sw.build(c.setting)
    direct = convkit.simulate(problem, algos, steps=16, replicates=6, seed=c.seed, n_record=4)
    d = direct.frame
    d = d[d.iterate.isin(["avg", "last"]) & (d.metric == "hnorm2")].reset_index(drop=True)
    mine = f[f.config_id == 3].reset_index(drop=True)[list(d.columns)]
    pd.testing.assert_frame_equal(mine, d, check_exact=True, check_dtype=False)

    again = run_quiet(spec, tmp_path / "out")
    assert (again.summary.computed, again.summary.cached) == (0, 4)
    pd.testing.assert_frame_equal(again.frame, f, check_exact=True)
    loaded = sw.load(tmp_path / "out")
    pd.testing.assert_frame_equal(loaded.frame, f, check_exact=True)
    fin = loaded.final("hnorm2", "last")
    assert list(fin.config_id) == [0, 1, 2, 3] and set(fin.step) == {16}
    assert fin["mean"].to_list() == [
        f[(f.config_id == i) & (f.iterate == "last") & (f.step == 16)]["mean"].item()
        for i in range(4)
    ]
    assert list(loaded.configurations.status) == ["cached"] * 4
    assert loaded.summary.cached == 4
    assert [c["status"] for c in loaded.meta["configurations"]] == ["cached"] * 4
    assert not list((tmp_path / "out").rglob(".tmp-*"))
    # a shared cache serves another output directory
    other = run_quiet(spec, tmp_path / "other", cache=tmp_path / "out" / "cache")
    assert other.summary.cached == 4


def test_load_detects_altered_frame(tmp_path):
    run_quiet(tiny(grid=None), tmp_path)
    p = tmp_path / "frame.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        sw.load(tmp_path)


def _entry_files(cache: Path, key: str) -> tuple[Path, Path]:
    return cache / key[:2] / f"{key}.parquet", cache / key[:2] / f"{key}.json"


def test_corrupted_cache_entries_are_recomputed(tmp_path):
    spec = tiny(grid={"algorithm.step.C": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]})
    first = run_quiet(spec, tmp_path)
    assert first.summary.computed == 6
    keys = [c.key for c in sw.Sweep.from_dict(spec)]
    cache = tmp_path / "cache"
    payloads = [_entry_files(cache, k)[0] for k in keys]
    records = [_entry_files(cache, k)[1] for k in keys]
    # 0: truncated payload; 1: one payload byte flipped; 2: record truncated;
    # 3: a record value altered (checksum no longer matches); 4: payload replaced by a valid
    # parquet file with other numbers (would be silently wrong without the checksum);
    # 5: payload deleted.
    payloads[0].write_bytes(payloads[0].read_bytes()[:100])
    b = bytearray(payloads[1].read_bytes())
    b[len(b) // 2] ^= 0x01
    payloads[1].write_bytes(bytes(b))
    records[2].write_bytes(records[2].read_bytes()[:-40])
    records[3].write_bytes(records[3].read_bytes().replace(b'"replicates":6', b'"replicates":7'))
    frame = pd.read_parquet(payloads[4])
    frame["mean"] *= 1.01
    frame.to_parquet(payloads[4], index=False)
    payloads[5].unlink()
    store = sw.Cache(cache)
    for k in keys:
        assert store.get(k) is None
        assert store.last_problem not in (None, "missing")

    second = run_quiet(spec, tmp_path)
    s = second.summary
    assert (s.computed, s.cached) == (6, 0)
    assert sorted(s.invalid) == [0, 1, 2, 3, 4, 5]
    assert "payload corrupted" in s.invalid[0] and "record corrupted" in s.invalid[2]
    pd.testing.assert_frame_equal(second.frame, first.frame, check_exact=True)
    assert all(store.get(k) is not None for k in keys)
    third = run_quiet(spec, tmp_path)
    assert (third.summary.computed, third.summary.cached, third.summary.invalid) == (0, 6, {})


def test_cache_rejects_entry_of_other_setting(tmp_path):
    spec = tiny(grid=None)
    run_quiet(spec, tmp_path)
    c = sw.Sweep.from_dict(spec).configurations[0]
    store = sw.Cache(tmp_path / "cache")
    assert store.get(c.key, c.setting) is not None
    other = copy.deepcopy(c.setting)
    other["replicates"] = 99
    assert store.get(c.key, other) is None
    assert store.last_problem == "record holds another configuration"


def test_failures_reported_and_others_continue(tmp_path, capsys):
    # gradients = 24 is not a multiple of workers = 5, and alpha = 1.5 is out of range: the
    # spec is refused when read (test_sweep_hardening.py); with check=False both fail when
    # the configuration is built or run, and the others continue
    spec = tiny(
        steps=None,
        gradients=24,
        grid={"algorithm.workers": [2, 3, 5], "algorithm.step.alpha": [0.75, 1.5]},
    )
    with pytest.raises(sw.SpecError, match="4 of 6 configurations are invalid"):
        sw.Sweep.from_dict(spec)
    spec = sw.Sweep.from_dict(spec, check=False)
    res = run_quiet(spec, tmp_path)
    s = res.summary
    assert s.total == 6 and s.computed == 2 and len(s.failed) == 4
    assert "gradients must be a multiple of workers * batch = 5" in s.failed[4]
    assert "alpha must be in [0, 1], got 1.5" in s.failed[1]
    assert sorted(res.frame.config_id.unique()) == [0, 2]
    assert "FAILED [4]" in str(s)
    statuses = [c["status"] for c in res.meta["configurations"]]
    assert statuses == ["computed", "failed", "computed", "failed", "failed", "failed"]
    again = run_quiet(spec, tmp_path)  # failures are not cached: tried again
    assert (again.summary.cached, len(again.summary.failed)) == (2, 4)


def test_divergence_is_counted(tmp_path):
    spec = tiny(grid={"algorithm.step": [{"kind": "constant", "gamma": 0.1}, 50.0]})
    res = run_quiet(spec, tmp_path)
    s = res.summary
    assert s.ok and s.computed == 2
    assert list(s.diverged) == [1]
    assert sum(s.diverged[1].values()) == 6  # every replicate diverges with gamma = 50
    assert "diverged [1]" in str(s)
    # the diverged configuration's table value is written as JSON in its column
    assert set(res.frame["algorithm.step"]) == {'{"gamma":0.1,"kind":"constant"}', "50.0"}


def test_grid_column_colliding_with_result_column(tmp_path):
    spec = tiny(steps=None, gradients=32, grid={"gradients": [32, 64]})
    res = run_quiet(spec, tmp_path)
    assert "grid.gradients" in res.frame.columns
    last = res.frame.groupby("config_id")["gradients"].max().to_list()
    assert last == [32, 64]


def test_csv_format(tmp_path):
    res = run_quiet(tiny(grid=None), tmp_path, fmt="csv")
    assert (tmp_path / "frame.csv").exists() and not (tmp_path / "frame.parquet").exists()
    pq = run_quiet(tiny(grid=None), tmp_path / "pq")
    pd.testing.assert_frame_equal(
        res.frame, pq.frame, check_exact=True, check_dtype=False, check_column_type=False
    )
    assert run_quiet(tiny(grid=None), tmp_path, fmt="csv").summary.cached == 1


# ------------------------------------------------------------------------- command line
def test_main_runs_and_reports(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text(BASE_TOML)
    out = tmp_path / "out"
    assert sweep_cli([str(spec), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    assert "2 computed, 0 reused" in capsys.readouterr().out
    assert sweep_cli([str(spec), "--out", str(out), "--quiet", "--dry-run"]) == 0
    assert "2 configurations (2 cached)" in capsys.readouterr().out
    assert sweep_cli([str(spec), "--out", str(out), "--quiet"]) == 0
    assert "0 computed, 2 reused from cache" in capsys.readouterr().out
    assert len(sw.load(out).frame) > 0


def test_the_command_line_moved_to_the_front_ends():
    """``convkit.sweep.main`` made the sweep package import the command line (layer 5 -> 6);
    it is ``convkit.cli.sweep.main``, and the old name says so."""
    with pytest.raises(AttributeError, match=r"main moved to convkit\.cli\.sweep\.main"):
        sw.main  # noqa: B018
    with pytest.raises(AttributeError, match=r"has no attribute 'nothing'$"):
        sw.nothing  # noqa: B018
    assert "main" not in sw.__all__


def test_main_errors(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "s.toml"
    spec.write_text(BASE_TOML.replace("d = 4", "d = 4.5"))
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "invalid spec" in err and "line 7" in err and "problem.d" in err
    assert sweep_cli([str(tmp_path / "missing.toml"), "--out", str(tmp_path / "o")]) == 2
    assert sweep_cli([str(spec)]) == 2  # --out is required
    assert sweep_cli([str(spec), "--out", "o", "--dask", "--scheduler", "tcp://x:1"]) == 2
    spec.write_text(BASE_TOML.replace("gradients = 64", "gradients = 63"))
    # a value error is a spec error (before anything runs), not a failed configuration
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o"), "--jobs", "1", "--quiet"]) == 2
    assert "gradients must be a multiple" in capsys.readouterr().err
    # a configuration failing at run time: exit status 1

    def failing(tasks):
        for t in tasks:
            yield {"index": t["index"], "key": t["key"], "ok": False, "error": "boom"}

    monkeypatch.setattr("convkit.sweep.runner._serial", failing)
    spec.write_text(BASE_TOML)
    assert sweep_cli([str(spec), "--out", str(tmp_path / "o"), "--jobs", "1", "--quiet"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_stray_temporary_files_are_ignored(tmp_path):
    spec = tiny(grid=None)
    run_quiet(spec, tmp_path)
    c = sw.Sweep.from_dict(spec).configurations[0]
    sub = tmp_path / "cache" / c.key[:2]
    # what a writer killed between mkstemp and os.replace leaves behind
    (sub / ".tmp-abc123.json").write_bytes(b'{"key": "trunc')
    (sub / ".tmp-def456.parquet").write_bytes(b"PAR1")
    assert sw.Cache(tmp_path / "cache").keys() == [c.key]
    again = run_quiet(spec, tmp_path)
    assert (again.summary.cached, again.summary.invalid) == (1, {})


def test_imports_option(tmp_path):
    with pytest.raises(sw.SpecError, match="cannot import module 'no_such_module_xyz'"):
        sw.Sweep.from_dict(tiny(imports=["no_such_module_xyz"]))
    s = sw.Sweep.from_dict(tiny(grid=None, imports=["convkit.topology"]))
    assert s.imports == ["convkit.topology"]
    assert run_quiet(s, tmp_path).summary.ok


def test_decentralized_kind_from_lazy_registry(tmp_path):
    # the module is part of the project: a broken registration fails here, never skips
    import convkit.algorithms.decentralized  # noqa: F401
    from convkit.sweep import registry

    kinds = sw.kinds("algorithm")
    assert registry._LAZY_ERRORS == {}, registry._LAZY_ERRORS
    assert "dpsgd" in kinds, f"no D-PSGD kind registered; algorithm kinds: {kinds}"
    spec = tiny(grid={"algorithm.topology.kind": ["ring", "complete"]})
    spec["algorithm"] = {
        "kind": "dpsgd",
        "workers": 4,
        "topology": {"kind": "ring", "n": 4},
        "step": {"kind": "constant", "gamma": 0.05},
    }
    s = sw.Sweep.from_dict(spec)
    assert s.configurations[1].setting["algorithm"]["topology"]["kind"] == "complete"
    res = run_quiet(s, tmp_path)
    assert res.summary.ok and res.summary.computed == 2, str(res.summary)
    with pytest.raises(sw.SpecError, match="unknown topology kind 'rign'.*did you mean 'ring'"):
        sw.Sweep.from_dict(spec | {"grid": {"algorithm.topology.kind": ["rign"]}})


def test_all_failed_still_writes_output(tmp_path):
    spec = tiny(steps=None, gradients=7, grid={"algorithm.workers": [2, 4]})
    res = run_quiet(sw.Sweep.from_dict(spec, check=False), tmp_path)
    assert len(res.summary.failed) == 2 and res.summary.computed == 0
    assert res.frame.empty and "algorithm.workers" in res.frame.columns
    assert sw.load(tmp_path).frame.empty


def test_executor_crash_is_reported_and_resumable(tmp_path, monkeypatch):
    spec = tiny()

    def crashing(tasks):
        from convkit.sweep import _execute

        yield _execute(tasks[0])
        raise RuntimeError("worker process died")

    monkeypatch.setattr("convkit.sweep.runner._serial", crashing)
    res = run_quiet(spec, tmp_path)
    s = res.summary
    assert s.computed == 1 and sorted(s.failed) == [1, 2, 3]
    assert "executor failed" in s.failed[1] and "worker process died" in s.failed[1]
    monkeypatch.undo()
    again = run_quiet(spec, tmp_path)
    assert (again.summary.cached, again.summary.computed, again.summary.failed) == (1, 3, {})


def test_params_from_signature():
    from convkit.schedules import EveryStep

    every = EveryStep()

    def builder(workers: int, step, gamma: float = 0.1, tag: str = "x", flag=False, comm=every):
        return None

    ps = sw.params_from_signature(builder)
    assert ps["workers"].type == "int" and ps["workers"].required
    assert ps["step"].nested == "step" and ps["step"].required
    assert ps["gamma"].type == "float" and ps["gamma"].default == 0.1
    assert ps["tag"].type == "str" and ps["flag"].type == "bool"
    assert ps["comm"].nested == "comm"
    sw.register("algorithm", "sig_test", builder, replace=True)
    ctx = sw._Context(None, None)
    out = sw._normalize_kind(
        "algorithm", {"kind": "sig_test", "workers": 2, "step": 0.5}, ("algorithm",), ctx
    )
    # a default that is not JSON (an object) is left to the builder, not put in the setting
    assert out == {
        "kind": "sig_test",
        "workers": 2,
        "step": {"kind": "constant", "gamma": 0.5},
        "gamma": 0.1,
        "tag": "x",
        "flag": False,
    }
    with pytest.raises(sw.SpecError, match="'algorithm.gamma': must be a number"):
        sw._normalize_kind(
            "algorithm",
            {"kind": "sig_test", "workers": 2, "step": 0.5, "gamma": "big"},
            ("algorithm",),
            ctx,
        )


def test_logistic_alias():
    from convkit.sweep import registry

    kinds = sw.kinds("problem")
    assert registry._LAZY_ERRORS == {}, registry._LAZY_ERRORS
    assert "logistic_regression_gaussian" in kinds, f"problem kinds: {kinds}"
    s = sw.Sweep.from_dict(tiny(grid=None) | {"problem": {"kind": "logistic", "d": 3}})
    p = s.configurations[0].setting["problem"]
    assert p["kind"] == "logistic_regression_gaussian" and p["d"] == 3
