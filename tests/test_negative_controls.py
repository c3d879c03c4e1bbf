"""Every check can fail: the negative controls of the analyses.

For each analysis whose ``checks`` carries negative controls
(:func:`convkit.verdicts.controlled`), on its committed data: every control is alive (the raw
check says ``violated`` on some row that the real data do not violate), every ``holds`` row
names the controls that made it fail, and an analysis without controls reports no ``holds``.
The count of controls and protected rows is printed (``pytest -s``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pandas as pd
import pytest

from convkit import verdicts as V
from convkit.figures import discover

ROOT = Path(__file__).resolve().parents[1]
ANALYSES = discover(ROOT / "analyses")


def _module(name: str):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"analyses.{name}")


def _data(name: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / "figures" / f"{name}.csv")


@pytest.mark.parametrize("name", ANALYSES)
def test_every_holds_row_has_a_negative_control(name):
    mod = _module(name)
    rows = mod.checks(_data(name))
    holds = [r for r in rows if r["verdict"] == V.HOLDS]
    if not hasattr(mod.checks, "controls"):
        assert not holds, f"{name}: holds rows without any negative control"
        return
    for r in holds:
        assert r.get("details", {}).get("negative_control"), (name, r["result"])
    print(f"{name}: {len(holds)} holds rows protected")


@pytest.mark.parametrize("name", ANALYSES)
def test_every_control_makes_its_check_say_violated(name):
    mod = _module(name)
    data = _data(name)
    if not hasattr(mod.checks, "controls"):  # nothing to run: then nothing may hold
        assert all(r["verdict"] != V.HOLDS for r in mod.checks(data)), name
        return
    real = {(r["result"], r["setting"]): r["verdict"] for r in mod.checks.raw(data)}
    ctl = list(mod.checks.controls(data))
    assert ctl, f"{name}: controls() returned none"
    for c in ctl:
        rows = mod.checks.raw(c.data)
        flipped = [
            r
            for r in rows
            if r["verdict"] == V.VIOLATED
            and real.get((r["result"], r["setting"])) not in (None, V.VIOLATED)
        ]
        assert flipped, f"{name}: control {c.name!r} makes no check say violated"
        violated = {r["result"] for r in rows if r["verdict"] == V.VIOLATED}
        for t in c.targets:  # the claims a control names must be among those it falsifies
            assert t in violated, f"{name}: control {c.name!r} leaves {t!r} not violated"
    assert len({c.name for c in ctl}) == len(ctl), f"{name}: control names repeat"
    print(f"{name}: {len(ctl)} controls alive")


@pytest.mark.parametrize("name", ANALYSES)
def test_the_controls_only_downgrade(name):
    """Applying the controls changes no row but a ``holds`` without a control, which becomes
    ``measured``; rows keep their order, claims and settings."""
    mod = _module(name)
    if not hasattr(mod.checks, "controls"):
        return
    data = _data(name)
    raw, final = mod.checks.raw(data), mod.checks(data)
    assert len(raw) == len(final)
    for a, b in zip(raw, final, strict=True):
        assert (a["result"], a["setting"]) == (b["result"], b["setting"])
        if a["verdict"] != b["verdict"]:
            assert (a["verdict"], b["verdict"]) == (V.HOLDS, V.MEASURED), (name, a["result"])


def test_a_check_without_control_cannot_hold():
    """The rule itself, on an analysis-shaped check: without the decorator's controls a
    ``holds`` becomes ``measured``; ``apply_controls`` with no controls downgrades all."""
    rows = [V.check_row("claim", "s", 1.0, 1.0, V.HOLDS, "why")]
    assert V.apply_controls(rows, {})[0]["verdict"] == V.MEASURED


def test_the_pipeline_downgrades_an_analysis_without_controls(tmp_path):
    """An analysis module whose ``checks`` carries no negative controls reports ``measured``
    where it would say ``holds`` (convkit figures, checks-only)."""
    from convkit import figures

    ana = tmp_path / "toy_analyses_without_controls"
    ana.mkdir()
    (ana / "__init__.py").write_text("")
    (ana / "toy.py").write_text(
        "import pandas as pd\n"
        "from convkit import verdicts as V\n"
        "TITLE = 'toy'\n"
        "CLAIMS = V.declare_claims('toy', {'c': V.Claim('the claim', 'derived here')})\n"
        "def run(quick=False):\n    return pd.DataFrame({'x': [1.0]})\n"
        "def plot(data, outdir):\n    return []\n"
        "def checks(data):\n"
        "    return [V.check_row('toy.c', 's', 1.0, 1.0, V.HOLDS, 'why')]\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "toy.csv").write_text("x\n1.0\n")
    res = figures._run_one(str(ana), "toy", str(out), False, True)
    assert [r["verdict"] for r in res["checks"]] == [V.MEASURED]
    assert "no negative control" in res["checks"][0]["reason"]
