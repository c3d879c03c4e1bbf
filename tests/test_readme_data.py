"""README.md is rendered from README.template.md and the committed data
(tools/render_readme.py): the committed README agrees with the rendering, the renderer fills
facts, check rows and benchmark ranges and names what it cannot fill, benchmark runs are
recorded one by one, and the facts of the threshold analyses agree with figures/checks.json."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools import render_readme as rr  # noqa: E402


def test_committed_readme_agrees_with_the_data(capsys):
    code = rr.main(["--check"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err


# ------------------------------------------------------------------ the renderer on fake data
FAKE = """
def facts(data):
    return {"total": f"{data.x.sum():.1f}", "rows": str(len(data)), "bad": 3}
"""


@pytest.fixture()
def src(tmp_path):
    """Fake figures/, analyses/ (one analysis with facts, one without) and a history."""
    pkg = tmp_path / f"an_{tmp_path.name}"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "withfacts.py").write_text(FAKE)
    (pkg / "nofacts.py").write_text("TITLE = 'no facts here'\n")
    figs = tmp_path / "figures"
    figs.mkdir()
    pd.DataFrame({"x": [1.25, 2.5]}).to_csv(figs / "withfacts.csv", index=False)
    pd.DataFrame({"x": [1.0]}).to_csv(figs / "nofacts.csv", index=False)
    rows = [
        dict(result="r", setting="s1 ||x||", measured=0.123456, verdict="holds"),
        dict(result="dup", setting="a", measured=[1.0, 2.0], verdict="violated"),
        dict(result="dup", setting="b", measured=None, verdict="holds"),
    ]
    (figs / "checks.json").write_text(json.dumps({"withfacts": rows}))
    hist = tmp_path / "history"
    hist.mkdir()
    for stamp, value in (("2026-01-02T00:00:00", 3.0), ("2026-01-01T00:00:00", 1.5)):
        body = {
            "recorded": stamp,
            "metrics": {"speed": {"value": value, "goal": 2.0, "higher_is_better": True}},
        }
        (hist / f"{stamp[:10]}.json").write_text(json.dumps(body))
    return rr.Sources(figs, pkg, hist)


def test_facts_are_filled_from_the_analysis_data(src):
    text = rr.render("sum {{ withfacts.total }} over {{withfacts.rows}} rows", src)
    assert text == rr.HEADER + "sum 3.8 over 2 rows"


def test_check_rows_fields_duplicates_and_counts(src):
    assert rr.render("{{ checks.withfacts.r.measured }}", src).endswith("0.1235")
    assert rr.render("{{ checks.withfacts.r.setting }}", src).endswith("s1 \\|\\|x\\|\\|")
    assert rr.render("{{ checks.withfacts.dup#1.measured }}", src).endswith("[1, 2]")
    assert rr.render("{{ checks.withfacts.dup#2.measured }}", src).endswith("-")
    assert rr.render("{{ checks.withfacts.counts }}", src).endswith("holds 2, violated 1")
    with pytest.raises(rr.RenderError, match=r"2 rows .* 'dup#k', k in 1..2"):
        rr.render("{{ checks.withfacts.dup.verdict }}", src)


def test_benchmark_range_over_recorded_runs(src):
    got = rr.render(
        "{{ bench.speed.last }}|{{ bench.speed.range }}|{{ bench.speed.goal }}|"
        "{{ bench.speed.met }}|{{ bench.speed.runs }}",
        src,
    )
    # the most recent run (by its recorded time, not its file name) is the last value
    assert got == rr.HEADER + "3|1.5-3 (2 runs)|>= 2|met|2"


@pytest.mark.parametrize(
    ("placeholder", "message"),
    [
        ("{{ nofacts.x }}", "analysis 'nofacts' has no facts"),
        ("{{ withfacts.totl }}", "no key 'totl'.*did you mean 'total'"),
        ("{{ withfacts.bad }}", "give int for 'bad'"),
        ("{{ elsewhere.x }}", "unknown source 'elsewhere'"),
        ("{{ checks.other.r.verdict }}", "no analysis 'other'"),
        ("{{ checks.withfacts.nothing.verdict }}", "no check row with result 'nothing'"),
        ("{{ checks.withfacts.r.colour }}", "no field 'colour'"),
        ("{{ checks.withfacts.dup#3.verdict }}", "row #3 of 'dup' does not exist"),
        ("{{ bench.sped.last }}", "measured 'sped'.*did you mean 'speed'"),
        ("{{ bench.speed.median }}", "field in"),
    ],
)
def test_unfillable_placeholders_are_named(src, placeholder, message):
    with pytest.raises(rr.RenderError, match=message):
        rr.render(f"text {placeholder} text", src)


def test_every_error_is_reported_at_once(src):
    with pytest.raises(rr.RenderError) as e:
        rr.render("{{ withfacts.a }} {{ bench.b.last }} {{ withfacts.total }}", src)
    assert str(e.value).startswith("2 placeholder(s) could not be filled")


def test_check_mode_prints_the_diff_and_fails(src, tmp_path, capsys):
    template, readme = tmp_path / "T.md", tmp_path / "README.md"
    template.write_text("total {{ withfacts.total }}\n")
    args = ["--template", str(template), "--readme", str(readme), "--figures", str(src.figures)]
    args += ["--analyses", str(src.analyses), "--history", str(src.history)]
    assert rr.main(args) == 0 and readme.read_text().endswith("total 3.8\n")
    assert rr.main([*args, "--check"]) == 0
    readme.write_text(readme.read_text().replace("3.8", "3.9"))
    capsys.readouterr()
    assert rr.main([*args, "--check"]) == 1
    out = capsys.readouterr().out
    assert "-total 3.9" in out and "+total 3.8" in out
    template.write_text("{{ withfacts.missing }}\n")
    assert rr.main([*args, "--check"]) == 2


# ------------------------------------------------------------------ benchmark history
def test_each_bench_run_is_recorded_without_overwriting(tmp_path):
    from benchmarks.run import write_history

    when = datetime(2026, 12, 1, 13, 5, 9, tzinfo=UTC)
    res = {"m": {"value": 1.5, "goal": float("nan"), "higher_is_better": False, "source": "b"}}
    p1 = write_history(res, tmp_path, when)
    p2 = write_history(res, tmp_path, when)
    assert (p1.name, p2.name) == ("2026-12-01-130509.json", "2026-12-01-130509-2.json")
    body = json.loads(p1.read_text())
    assert body["metrics"] == {"m": {"value": 1.5, "goal": None, "higher_is_better": False}}
    assert body["modules"] == ["b"] and body["recorded"] == "2026-12-01T13:05:09+00:00"


def test_committed_history_starts_with_the_committed_latest():
    latest = json.loads((REPO / "benchmarks" / "latest.json").read_text())
    first = sorted((REPO / "benchmarks" / "history").glob("*.json"))[0]
    metrics = json.loads(first.read_text())["metrics"]
    assert set(metrics) <= set(latest)


# ------------------------------------------------------------------ facts against checks.json
def _facts(name):
    from importlib import import_module

    mod = import_module(f"analyses.{name}")
    return mod.facts(pd.read_csv(REPO / "figures" / f"{name}.csv"))


@pytest.fixture(scope="module")
def committed_checks():
    return json.loads((REPO / "figures" / "checks.json").read_text())


def test_monte_carlo_facts_agree_with_the_committed_checks(committed_checks):
    f = _facts("local_sgd_threshold_mc")
    assert all(isinstance(v, str) for v in f.values())
    rows = committed_checks["local_sgd_threshold_mc"]
    for var in ("T", "P"):
        ex = [r for r in rows if r["result"] == f"local_sgd_threshold_mc.nstar_exponent_{var}"]
        ok = [r for r in ex if r["verdict"] != "not_identifiable"]
        v = var.lower()
        assert f[f"{v}_settings"] == str(len(ex)) and f[f"{v}_identifiable"] == str(len(ok))
        for verdict, key in (("violated", "violated"), ("consistent_unresolved", "unresolved")):
            assert f[f"{v}_{key}"] == str(sum(r["verdict"] == verdict for r in ok))
        slopes = sorted(float(r["measured"].split()[0]) for r in ok)
        assert f[f"{v}_exponent_range"] == f"{slopes[0]:.2f} to {slopes[-1]:.2f}"


def test_exact_facts_agree_with_the_committed_checks(committed_checks):
    f = _facts("local_sgd_threshold")
    rows = committed_checks["local_sgd_threshold"]
    setting = "spectrum=1/i, alpha=0.75, C_frac=0.5, r0=0.0, eps=0.01 "
    for var in ("T", "P"):
        (row,) = [
            r
            for r in rows
            if r["result"] == f"local_sgd_threshold.nstar_exponent_{var}"
            and r["setting"].startswith(setting)
        ]
        assert f[f"headline_e_{var}"].startswith(f"{float(row['measured']):.2f} [")
    holds = sum(r["verdict"] == "holds" for r in rows if "nstar_exponent" in r["result"])
    assert f["exponent_holds"] == str(holds)
    data = pd.read_csv(REPO / "figures" / "local_sgd_threshold.csv")
    assert f["n_thresholds"] == str(len(data)) == "196"
    assert int(f["n_osa_enough"]) + int(f["n_mba_needed"]) + int(f["n_interior"]) == len(data)


def test_readme_links_point_to_committed_files():
    """Every relative link of the README (figures, notebooks, files) names a committed path."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    text = (repo / "README.md").read_text()
    links = re.findall(r"\]\(((?!https?://|#)[^)\s]+)\)", text)
    assert links, "no relative links found: the pattern is wrong"
    missing = [link for link in links if not (repo / link.split("#")[0]).exists()]
    assert not missing, f"README links to missing paths: {missing}"
