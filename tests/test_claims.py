"""One claim namespace: every check row of an analysis names a registered result of the theory
library or a claim the analysis declares in its ``CLAIMS``
(:func:`convkit.verdicts.declare_claims`), and :func:`convkit.verdicts.validate_row` refuses
any other name, in the figure pipeline as in the gallery."""

from __future__ import annotations

import importlib
import sys
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from convkit import verdicts as V
from convkit.figures import claim_namespace, discover

ROOT = Path(__file__).resolve().parents[1]
ANALYSES = discover(ROOT / "analyses")

TOY_CLAIMS = V.declare_claims(
    "toy",
    {
        "decays": V.Claim("the error decays", "derived here: toy"),
        "rate": V.Claim("the measured rate", "read against nothing", kind=V.MEASUREMENT),
    },
)


def _toy_namespace() -> V.ClaimNamespace:
    return V.ClaimNamespace(frozenset({"sgd.ms_stability.1d"}), TOY_CLAIMS, owner="analysis toy")


# ============================================================================ the mechanism
def test_declare_claims_prefixes_the_ids_and_refuses_bad_ones():
    assert list(TOY_CLAIMS) == ["toy.decays", "toy.rate"]
    with pytest.raises(ValueError, match="claim id 'de-cays' of toy"):
        V.declare_claims("toy", {"de-cays": V.Claim("s", "p")})
    with pytest.raises(ValueError, match="prefix must be an analysis module name"):
        V.declare_claims("toy.sub", {})
    with pytest.raises(TypeError, match="toy.x must be a convkit.verdicts.Claim, got str"):
        V.declare_claims("toy", {"x": "the error decays"})
    with pytest.raises(ValueError, match="Claim.kind must be one of"):
        V.Claim("s", "p", kind="guess")
    with pytest.raises(ValueError, match="Claim.source must be a non-empty string"):
        V.Claim("s", " ")


def test_validate_row_refuses_a_name_outside_the_namespace():
    ns = _toy_namespace()
    for name in ("toy.decays", "sgd.ms_stability.1d"):
        row = V.check_row(name, "s", 1.0, 1.0, V.HOLDS, "r")
        assert V.validate_row(row, where="analysis toy", namespace=ns) is row
    bad = V.check_row("toy.decay", "s", 1.0, 1.0, V.HOLDS, "r")
    with pytest.raises(
        ValueError,
        match="neither a registered result .* nor a claim declared by "
        "analysis toy.*did you mean 'toy.decays'",
    ):
        V.validate_row(bad, where="analysis toy", namespace=ns)
    free = V.check_row("the error decays like 1/T", "s", 1.0, 1.0, V.MEASURED, "r")
    with pytest.raises(ValueError, match="analysis toy: row result 'the error decays like 1/T'"):
        V.validate_row(free, where="analysis toy", namespace=ns)
    # without a namespace (a library check, a row built anywhere) any name passes
    assert V.validate_row(free) is free


def test_a_measurement_cannot_hold_or_be_violated():
    ns = _toy_namespace()
    V.validate_row(V.check_row("toy.rate", "s", 1.0, "-", V.MEASURED, "r"), namespace=ns)
    for verdict in (V.HOLDS, V.VIOLATED):
        row = V.check_row("toy.rate", "s", 1.0, 1.0, verdict, "r")
        with pytest.raises(ValueError, match="declared a measurement"):
            V.validate_row(row, where="analysis toy", namespace=ns)


def _toy_package(tmp_path: Path, result: str) -> tuple[Path, Path]:
    ana = tmp_path / f"toy_claims_{abs(hash(result))}"
    ana.mkdir()
    (ana / "__init__.py").write_text("")
    (ana / "toy.py").write_text(
        "import pandas as pd\n"
        "from convkit import verdicts as V\n"
        "TITLE = 'toy'\n"
        "CLAIMS = V.declare_claims('toy', {'decays': V.Claim('the error decays', 'toy')})\n"
        "def run(quick=False):\n    return pd.DataFrame({'x': [1.0]})\n"
        "def plot(data, outdir):\n    return []\n"
        "def checks(data):\n"
        f"    return [V.check_row({result!r}, 's', 1.0, 1.0, V.MEASURED, 'why')]\n"
    )
    out = tmp_path / f"out_{abs(hash(result))}"
    out.mkdir()
    (out / "toy.csv").write_text("x\n1.0\n")
    return ana, out


def test_the_pipeline_refuses_a_row_naming_an_undeclared_claim(tmp_path):
    """``convkit figures --checks-only`` on an analysis whose row names a claim it never
    declared fails that analysis with the refusal; the declared name passes."""
    from convkit import figures

    ana, out = _toy_package(tmp_path, "toy.grows")
    res = figures._run_one(str(ana), "toy", str(out), False, True)
    assert "error" in res, res
    assert "'toy.grows' is neither a registered result" in res["error"]
    ana, out = _toy_package(tmp_path, "toy.decays")
    res = figures._run_one(str(ana), "toy", str(out), False, True)
    assert "error" not in res, res
    assert [r["result"] for r in res["checks"]] == ["toy.decays"]


# ============================================================================ the analyses
def _module(name: str):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"analyses.{name}")


@cache
def _raw_rows(name: str) -> tuple[list[dict], list[tuple[str, list[dict]]]]:
    mod = _module(name)
    data = pd.read_csv(ROOT / "figures" / f"{name}.csv")
    raw = getattr(mod.checks, "raw", mod.checks)
    controls = list(mod.checks.controls(data)) if hasattr(mod.checks, "controls") else []
    return raw(data), [(c, raw(c.data)) for c in controls]


@pytest.mark.parametrize("name", ANALYSES)
def test_every_row_of_an_analysis_is_in_its_namespace(name):
    """On the committed data, every row of the check (and of each negative control) and every
    control target names a registered result or a declared claim of the analysis; every
    declared claim is prefixed by the analysis' name."""
    mod = _module(name)
    ns = claim_namespace(name, mod)
    assert all(cid.startswith(f"{name}.") for cid in ns.claims), list(ns.claims)
    rows, controls = _raw_rows(name)
    for r in rows:
        V.validate_row(r, where=f"analysis {name}", namespace=ns)
    for c, crows in controls:
        for r in crows:
            V.validate_row(r, where=f"analysis {name}, control {c.name!r}", namespace=ns)
        for t in c.targets:
            assert t in ns, f"{name}: control {c.name!r} targets {t!r}, outside the namespace"
