"""communication_threshold: bisection against a brute-force scan, and the study's API."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import convkit as ck
from convkit.exact import communication_threshold, rounds_error, stability_limit
from convkit.schedules import PolyDecay


@pytest.mark.parametrize(("alpha", "r0", "eps"), [(0.75, 0.0, 0.05), (0.5, 1.0, 0.05)])
def test_bisection_equals_brute_force(alpha, r0, eps):
    """N* from bisection is the smallest N in [1, n] with err(N) <= (1 + eps) err(MBA),
    found by scanning every N (n = 250 local steps), when err is monotone in N."""
    d, T, P = 5, 1000, 4
    prob = ck.LeastSquares.gaussian(d, spectrum="1/i", noise=1.0, theta_star=np.zeros(d))
    theta0 = np.full(d, r0 / np.sqrt(d))
    out = communication_threshold(T, P, alpha, eps, problem=prob, theta0=theta0, C_frac=0.9)
    n = out["n"]
    assert 1 < out["N_star"] < n  # an interior threshold (the bisection has work to do)
    gam = PolyDecay(out["C"], alpha).values(n)
    errs = rounds_error(prob, n, P, gam, np.arange(1, n + 1), theta0=theta0)
    assert errs[-1] == pytest.approx(out["err_mba"], rel=1e-14)
    ok = np.flatnonzero(errs <= (1 + eps) * errs[-1])
    if out["monotone"] and np.all(np.diff(errs) <= 1e-12 * errs[:-1]):
        assert out["N_star"] == ok[0] + 1
    else:  # bisection still returns a feasible N with an infeasible N - 1
        assert errs[out["N_star"] - 1] <= (1 + eps) * errs[-1]


def test_osa_enough_and_defaults():
    """eps above the OSA/MBA gap gives N* = 1; default C is half the stability limit."""
    prob = ck.LeastSquares.gaussian(10, spectrum="1/i", noise=1.0)
    out = communication_threshold(4000, 4, 0.75, 10.0, problem=prob)
    assert out["N_star"] == 1
    assert out["C"] == pytest.approx(0.5 * stability_limit(prob), rel=1e-12)
    assert out["ratio_osa_mba"] >= 1.0


def test_study_module_api(tmp_path):
    """analyses/local_sgd_threshold.py: checks() returns the agreed keys; plot() writes files
    (on a small hand-made frame, the study itself is run by `make figures`)."""
    path = Path(__file__).resolve().parents[1] / "analyses" / "local_sgd_threshold.py"
    spec = importlib.util.spec_from_file_location("local_sgd_threshold", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    prob = ck.LeastSquares.gaussian(4, spectrum="1/i", noise=1.0, theta_star=np.zeros(4))
    rows = []
    for T in (2000, 8000):
        for P in (2, 8):
            r = communication_threshold(T, P, 0.75, 0.01, problem=prob, C_frac=0.9)
            rows.append(
                {
                    "spectrum": "1/i",
                    "alpha": 0.75,
                    "C_frac": 0.9,
                    "r0": 0.0,
                    "eps": 0.01,
                    **r,
                    "sqrt_PT": float(np.sqrt(P * T)),
                }
            )
    import pandas as pd

    df = pd.DataFrame(rows)
    df["interior"] = (df.N_star > 1) & (df.N_star < df.n)
    res = mod.checks(df)
    keys = {"result", "setting", "measured", "theoretical", "verdict", "reason"}
    # the six keys of a row, plus the optional details (decay exponents, negative controls)
    assert res and all(keys <= set(c) <= keys | {"details"} for c in res)
    files = mod.plot(df, tmp_path)
    assert all(Path(f).exists() for f in files)


def test_agrees_with_checks_find_threshold():
    """On the full exact curve err(N), N = 1..n, convkit.checks.find_threshold (se = 0) gives
    first_holding = N* of the bisection (err monotone here)."""
    from convkit.checks import find_threshold

    d, T, P, alpha, eps = 5, 1000, 4, 0.5, 0.05
    prob = ck.LeastSquares.gaussian(d, spectrum="1/i", noise=1.0, theta_star=np.zeros(d))
    theta0 = np.full(d, 1 / np.sqrt(d))
    out = communication_threshold(T, P, alpha, eps, problem=prob, theta0=theta0, C_frac=0.9)
    n = out["n"]
    Ns = np.arange(1, n + 1)
    errs = rounds_error(prob, n, P, PolyDecay(out["C"], alpha).values(n), Ns, theta0=theta0)
    th = find_threshold(Ns, errs / errs[-1], np.zeros(n), eps=eps, mode="ratio")
    assert th.first_holding == out["N_star"]
