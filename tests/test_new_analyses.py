"""The step-size limit study (analyses/step_size_limits.py) and the breast-cancer panel
(analyses/real_data.py): closed forms, the bisection, the check logic on constructed data (each
check can fail), and reduced runs through run -> CSV -> checks/facts/plot.

Statistical tests use fixed seeds; their margins are stated per test.  Set ``CONVKIT_FULL=1``
for the larger replicate counts of the slow tests.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analyses import real_data as rd  # noqa: E402
from analyses import step_size_limits as ssl  # noqa: E402
from convkit import verdicts as V  # noqa: E402

FULL = os.environ.get("CONVKIT_FULL") == "1"


def _plain_rows(rows: list[dict]) -> None:
    for r in rows:
        assert r["verdict"] in V.VERDICTS
        assert r["reason"]
        for k in ("measured", "theoretical"):
            v = r[k]
            assert v is not None
            assert type(v) in (float, int, str), (k, type(v))


# ------------------------------------------------------------------ step-size limits: exact
@pytest.mark.parametrize("b", [1, 2, 16])
def test_derived_limit_matches_closed_forms(b):
    """Isotropic H = I_10: Gaussian 2b/((b + d + 1) h), Rademacher 2b/((b + d - 1) h),
    additive 2/h (closed forms of convkit.bounds.sgd_stability), to 1e-12."""
    h, d = np.ones(10), 10
    assert ssl.derived_limit(h, b, "gaussian") == pytest.approx(2 * b / (b + d + 1), rel=1e-12)
    assert ssl.derived_limit(h, b, "rademacher") == pytest.approx(2 * b / (b + d - 1), rel=1e-12)
    assert ssl.derived_limit(h, b, "additive") == 2.0


@pytest.mark.parametrize("design", ["gaussian", "rademacher", "additive"])
@pytest.mark.parametrize("spec", ["flat", "1/i", "1/i^2"])
def test_sufficient_bound_below_derived_limit(design, spec):
    """The Lyapunov bound 2b/(R^2 + (b-1)L) is a sufficient condition: never above gamma*."""
    import convkit as ck

    h = ck.LeastSquares.gaussian(10, spec).h
    for b in (1, 2, 4, 16, 64):
        assert ssl.sufficient_limit(h, b, design) <= ssl.derived_limit(h, b, design) * (1 + 1e-12)


def test_sufficient_bound_is_tight_for_isotropic_gaussian_b1():
    """Gaussian, H = h I_d, b = 1: R^2 = (d + 2) h, so the bound equals 2/((d + 2) h) = gamma*."""
    h = np.full(7, 0.5)
    assert ssl.sufficient_limit(h, 1, "gaussian") == pytest.approx(2 / (9 * 0.5), rel=1e-14)
    assert ssl.derived_limit(h, 1, "gaussian") == pytest.approx(2 / (9 * 0.5), rel=1e-12)


def test_invalid_design_names_the_parameter():
    with pytest.raises(ValueError, match="design must be one of"):
        ssl.derived_limit(np.ones(3), 1, "laplace")
    with pytest.raises(ValueError, match="design must be one of"):
        ssl.sufficient_limit(np.ones(3), 1, "laplace")


def test_exact_bisection_brackets_the_derived_limit():
    """Gaussian, h_i = 1/i, b = 4, horizon 2e4: the bracket is narrower than 1e-5 relative and
    its midpoint is within bracket + 3 x ln(F)/(n kappa) of gamma* (the stated tolerance)."""
    prob = ssl._problem("1/i", "gaussian", 0.0)
    g = ssl.derived_limit(prob.h, 4, "gaussian")
    n = 2 * 10**4
    ex = ssl.exact_boundary(prob, 4, n, g)
    assert ex["hi"] - ex["lo"] <= ssl.BISECT_RTOL * ex["hi"] * 1.0001
    kappa = ssl._kappa(prob.h, 4, "gaussian", g)
    assert kappa > 0
    tol = (ex["hi"] - ex["lo"]) / g + 3 * math.log(ssl.EXACT_FACTOR) / (n * kappa)
    assert abs(math.sqrt(ex["lo"] * ex["hi"]) / g - 1) <= tol
    # the detected boundary is never below gamma* by more than the bracket (bounded below it)
    assert ex["hi"] >= g * (1 - ssl.BISECT_RTOL)


def test_exact_bisection_starts_from_a_wrong_guess():
    """A guess 3x too small still finds the limit (the bracket widens)."""
    prob = ssl._problem("flat", "rademacher", 0.0)
    g = ssl.derived_limit(prob.h, 2, "rademacher")
    ex = ssl.exact_boundary(prob, 2, 10**4, g / 3)
    assert ex["lo"] <= g * (1 + 1e-2) and ex["hi"] >= g * (1 - 1e-5)


def test_monte_carlo_grid_no_divergence_below_limit():
    """Rademacher, flat spectrum, b = 1, R = 64, 400 steps (seed fixed): no replicate diverges
    at 0.9 gamma* (bounded second moment: Markov gives P(||eta||^2 > 1e12) < 1e-10 per
    replicate), and every replicate diverges at 2 gamma* (a per-trajectory growth factor
    1 + 2 c (2 c - 2) > 1 per unit of (x^T eta)^2 / ||eta||^2, c = gamma ||x||^2 / 2 = 2)."""
    import warnings

    import convkit as ck
    from convkit.recording import DivergenceWarning

    prob = ssl._problem("flat", "rademacher", 1.0)
    g = ssl.derived_limit(prob.h, 1, "rademacher")
    algos = [ck.MBA(1, ck.Constant(r * g), name=f"r={r}") for r in (0.9, 2.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        res = ck.simulate(prob, algos, steps=400, replicates=64, seed=3, threads=1, n_record=2)
    counts = res.diverged.groupby("config").size().to_dict()
    assert counts.get("r=0.9", 0) == 0
    assert counts.get("r=2.0", 0) == 64


def _limit_row(rel: float, design: str = "gaussian", b: int = 1) -> dict:
    g = 0.5
    return {
        "design": design, "spectrum": "flat", "d": 10, "L": 1.0, "trH": 10.0, "row": "limit",
        "b": b, "gamma_derived": g, "gamma_sufficient": 0.4, "gamma_mean": 2.0,
        "exact_lo": g * (1 + rel) * (1 - 5e-6), "exact_hi": g * (1 + rel) * (1 + 5e-6),
        "exact_gamma": g * (1 + rel), "exact_steps": 10**6, "exact_factor": 1e6,
        "exact_evaluations": 17, "kappa": 1.0, "horizon_bias": math.log(1e6) / 1e6,
    }  # fmt: skip


def _mc_rows(first_div: float, below: int = 0, design: str = "gaussian", b: int = 1) -> list:
    rows = []
    for r in ssl.MC_GRID:
        nd = 5 if r >= first_div else (below if r < 1 else 0)
        rows.append({"design": design, "spectrum": "flat", "d": 10, "row": "mc", "b": b,
                     "gamma_derived": 0.5, "ratio": r, "gamma": r * 0.5, "replicates": 64,
                     "mc_steps": 400, "n_diverged": nd})  # fmt: skip
    return rows


def test_step_checks_pass_and_fail_on_constructed_data():
    """Exact row: holds at a relative error 1e-5 (tolerance ~5e-5), violated at 1e-3. MC row:
    holds when the first divergence is at 1.05 (bracket [0.95, 1.05]), measured when at 1.25,
    violated when replicates diverge below gamma*. Sufficient: violated when above exact_lo."""
    ok = pd.DataFrame([_limit_row(1e-5), *_mc_rows(1.05)])
    rows = ssl.checks(ok)
    _plain_rows(rows)
    by = {r["result"]: r for r in rows}
    assert by["step_size_limits.exact_boundary_is_derived_limit"]["verdict"] == V.HOLDS
    assert by["step_size_limits.mc_boundary_vs_derived_limit"]["verdict"] == V.HOLDS
    bad = pd.DataFrame([_limit_row(1e-3), *_mc_rows(1.25)])
    by = {r["result"]: r for r in ssl.checks(bad)}
    assert by["step_size_limits.exact_boundary_is_derived_limit"]["verdict"] == V.VIOLATED
    mc = by["step_size_limits.mc_boundary_vs_derived_limit"]
    assert mc["verdict"] == V.MEASURED and "[1.1, 1.25]" in mc["reason"]
    worse = pd.DataFrame([_limit_row(0.0), *_mc_rows(1.05, below=2)])
    by = {r["result"]: r for r in ssl.checks(worse)}
    assert (
        by["step_size_limits.mc_boundary_vs_derived_limit"]["verdict"] == V.VIOLATED
    )
    row = _limit_row(0.0)
    row["gamma_sufficient"] = 0.6  # above the measured boundary 0.5
    by = {r["result"]: r for r in ssl.checks(pd.DataFrame([row, *_mc_rows(1.05)]))}
    assert by["step_size_limits.sufficient_bound_below_boundary"]["verdict"] == V.VIOLATED


def test_step_mc_brackets_edges():
    br = ssl.mc_brackets(pd.DataFrame(_mc_rows(0.8)))  # first grid point diverges
    assert br["ratio_lo"].iloc[0] == 0.0 and br["ratio_hi"].iloc[0] == 0.8
    br = ssl.mc_brackets(pd.DataFrame(_mc_rows(99.0)))  # none diverges
    assert br["ratio_hi"].iloc[0] == math.inf and br["ratio_lo"].iloc[0] == 2.0


@pytest.mark.slow
def test_step_size_limits_reduced_run_roundtrip(tmp_path, monkeypatch):
    """A reduced run (2 settings; exact horizon 2e4, MC R = 32 x 200 steps; the full grid of
    the quick mode with CONVKIT_FULL=1) through CSV: every exact row holds, checks and facts
    are the same from the CSV, the figures are written."""
    small = {
        "spectra": ("1/i",), "batches": (1, 4), "designs": ("gaussian",),
        "n_exact": 2 * 10**4, "n_mc": 200, "R": 32,
    }  # fmt: skip
    if not FULL:
        monkeypatch.setattr(ssl, "_grid", lambda quick: small)
    df = ssl.run(quick=True)
    df.to_csv(tmp_path / "s.csv", index=False)
    back = pd.read_csv(tmp_path / "s.csv")
    rows = ssl.checks(back)
    _plain_rows(rows)
    assert rows == ssl.checks(df)
    exact = [r for r in rows if r["result"] == "step_size_limits.exact_boundary_is_derived_limit"]
    assert exact and all(r["verdict"] == V.HOLDS for r in exact)
    mc = [r for r in rows if r["result"] == "step_size_limits.mc_boundary_vs_derived_limit"]
    assert mc and all(r["verdict"] != V.VIOLATED for r in mc)
    assert ssl.facts(back) == ssl.facts(df)
    files = ssl.plot(back, tmp_path)
    assert all(Path(f).stat().st_size > 10_000 for f in files)


# ------------------------------------------------------------------ real data
def _dec_frame(curves: dict[str, list[float]], se: float = 0.0) -> pd.DataFrame:
    rows = []
    for c, vals in curves.items():
        for k, v in enumerate(vals):
            rows.append({"part": "decentralized", "split": "iid", "iterate": "last",
                         "config": c, "step": k + 1, "bits": 100.0 * (k + 1), "mean": v,
                         "se": se})  # fmt: skip
    return pd.DataFrame(rows)


def test_bits_to_target_first_crossing_and_bracket():
    """Means 0.1, 0.01, 0.004 reach 0.005 at the third record (300 bits); with se = 0.001 the
    band mean +- 1.96 se reaches it at records 3 (lower) and 4 (upper) for the D-PSGD curve."""
    curves = {c: [0.1, 0.01, 0.004, 0.0001] for c in rd.DEC_ORDER}
    bt = rd.bits_to_target(_dec_frame(curves), "iid", target=0.005)
    assert (bt["bits"] == 300.0).all()
    bt = rd.bits_to_target(_dec_frame(curves, se=0.001), "iid", target=0.005)
    assert bt.loc["D-PSGD", "bits_lo"] == 300.0 and bt.loc["D-PSGD", "bits_hi"] == 400.0
    never = {c: [0.1, 0.1] for c in rd.DEC_ORDER}
    assert np.isinf(rd.bits_to_target(_dec_frame(never), "iid", target=0.005)["bits"]).all()


@pytest.fixture(scope="module")
def real_small(tmp_path_factory):
    """A reduced real-data run (T = 2^13, R = 4; ring n = 100, R = 3; the quick sizes with
    CONVKIT_FULL=1) and its CSV read back."""
    sizes = rd._sizes(True) if FULL else {"T": 2**13, "R_local": 4, "n_dec": 100, "R_dec": 3}
    orig, orig_tune = rd._sizes, rd.tune_consensus_step
    rd._sizes = lambda quick: sizes
    if not FULL:  # the gossip tuning has its own tests; a fixed gamma_c keeps this one short
        rd.tune_consensus_step = lambda *a, **k: type("T", (), {"gamma_c": 0.3})()
    try:
        df = rd.run(quick=True)
    finally:
        rd._sizes, rd.tune_consensus_step = orig, orig_tune
    path = tmp_path_factory.mktemp("rd") / "real_data.csv"
    df.to_csv(path, index=False)
    return df, pd.read_csv(path), path.parent


@pytest.mark.slow
def test_real_data_reduced_run_checks_and_facts(real_small):
    """Checks and facts are identical from the CSV; rows in the vocabulary with plain numbers;
    at the large step OSA is worse than MBA by more than 3 paired SE (a reduced run already
    shows it: the gap is tens of SE in the quick run); the compressed methods need fewer bits
    than D-PSGD to the target (D-PSGD sends 10x more bits per step), which is ``measured``
    where both reach it at the same record point (the ratio is then the message size)."""
    df, back, outdir = real_small
    rows = rd.checks(back)
    _plain_rows(rows)
    assert rows == rd.checks(df)
    assert rd.facts(back) == rd.facts(df)
    by = {(r["result"], r["setting"]): r for r in rows}
    osa = [r for (res, _), r in by.items() if res == "real_data.osa_worse_large_step"]
    assert len(osa) == 1 and osa[0]["verdict"] == V.HOLDS
    bits = [r for (res, _), r in by.items() if res == "real_data.fewer_bits_than_dpsgd"]
    assert len(bits) == 6 and all(
        r["verdict"] in (V.HOLDS, V.INCONCLUSIVE, V.MEASURED) for r in bits
    )
    # fewer bits at the same record point is the message-size ratio, not a gain: measured
    assert all("message-size ratio" in r["reason"] for r in bits if r["verdict"] == V.MEASURED)
    files = rd.plot(back, outdir)
    assert Path(files[0]).stat().st_size > 10_000


def test_real_data_osa_check_can_fail(real_small):
    """Setting OSA's paired difference to 1 SE turns the OSA check into violated."""
    _, back, _ = real_small
    bad = back.copy()
    m = (bad.part == "local") & (bad.config == "OSA")
    bad.loc[m, "diff"] = bad.loc[m, "diff_se"]
    row = next(r for r in rd.checks(bad) if r["result"] == "real_data.osa_worse_large_step")
    assert row["verdict"] == V.VIOLATED


def test_real_data_constants_are_the_problem_s(real_small):
    """The stored constants are those of the breast-cancer logistic problem (lam = 0.01):
    f* and the initial excess risk match a fresh solve to 1e-9."""
    from convkit.problems.datasets import breast_cancer

    df, _, _ = real_small
    prob = breast_cancer().logistic(lam=rd.LAM)
    loc = df[df.part == "local"]
    assert loc["f_star"].iloc[0] == pytest.approx(prob.f_star, rel=1e-9)
    e0 = float(prob.errors(np.zeros((1, prob.d)))["excess_risk"][0])
    assert loc["initial_error"].iloc[0] == pytest.approx(e0, rel=1e-9)
