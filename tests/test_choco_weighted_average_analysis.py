"""analyses/choco_weighted_average.py: the check logic on constructed data (it can fail), and
the committed CSV through checks and facts (plain rounded values, the verdict vocabulary)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyses import choco_weighted_average as cwa  # noqa: E402
from convkit import verdicts as V  # noqa: E402

CSV = Path(__file__).resolve().parents[1] / "figures" / "choco_weighted_average.csv"


def _data(exponent: float, rel_se: float = 0.01) -> pd.DataFrame:
    Ts = np.unique(np.round(np.geomspace(100, 16000, 14)).astype(int))
    rows = []
    for o in cwa.ORDERS:
        for it in cwa.ITERATES:
            for T in Ts:
                m = float((T + cwa.A) ** exponent)
                rows.append(
                    {
                        "kind": "curve",
                        "order": o,
                        "iterate": it,
                        "T": int(T),
                        "mean": m,
                        "se": rel_se * m,
                    }
                )
    for it in ("last", "wavg2"):
        for T in Ts:
            rows.append(
                {
                    "kind": "ratio",
                    "order": "reference_code/paper",
                    "iterate": it,
                    "T": int(T),
                    "mean": 1.0,
                    "se": 0.001,
                }
            )
    out = pd.DataFrame(rows)
    out["replicates"], out["gamma_c"], out["a"] = 100, 0.5, cwa.A
    return out


@pytest.mark.parametrize(
    ("exponent", "verdict"),
    [(-1.0, V.HOLDS), (-1.5, V.HOLDS), (-0.5, V.VIOLATED), (-0.9, V.VIOLATED)],
)
def test_check_logic_on_constructed_curves(exponent, verdict):
    rows = cwa.checks(_data(exponent))
    claims = [r for r in rows if r["result"].startswith("choco.rate_strongly_convex")]
    assert len(claims) == 2
    for r in claims:
        assert r["verdict"] == verdict, r
        assert r["measured"] == pytest.approx(exponent, abs=1e-9)


def test_wide_interval_is_unresolved():
    rows = cwa.checks(_data(-1.0, rel_se=0.5))
    claims = [r for r in rows if r["result"].startswith("choco.rate_strongly_convex")]
    assert all(r["verdict"] == V.CONSISTENT_UNRESOLVED for r in claims)


def test_committed_data_checks_and_facts():
    data = pd.read_csv(CSV)
    rows = cwa.checks(data)
    assert len(rows) == 10
    for r in rows:
        assert r["verdict"] in V.VERDICTS
        assert isinstance(r["measured"], float) and type(r["measured"]) is float
        assert r["reason"]
    facts = cwa.facts(data)
    assert all(isinstance(v, str) and v for v in facts.values())
    assert set(facts) >= {"slope_wavg2_paper", "ratio_ref_over_paper_wavg2", "T_max"}
