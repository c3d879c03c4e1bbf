"""Exact engine against Monte Carlo (convkit.simulate) on the grid of issue 5.

Grid: P in {1, 4, 16} x communication in {every step (H = 1), every 10, one-shot} x
alpha in {0.5, 0.75, 1} x d in {1, 5, 20} x b in {1, 4} (Gaussian design, spectrum 1/i,
sigma = 0.5, theta0 = 0, steps gamma_k = C k^-alpha with C = half the single-worker
mean-square stability limit: decaying steps well below the limit).  For P = 1 the three
schedules coincide, so 7 configurations per (alpha, d, b): 126 configurations.

Compared per configuration: the final record point of E||.||_H^2 for the avg, tail and last
iterates and of E||.||^2 for avg (4 z-scores, z = (MC mean - exact) / MC SE).

Multiple comparisons (stated rule): a configuration with some |z| > 3 is re-run once with a
fresh seed and 4x the replicates; the test fails only if it exceeds 3 SE again.  Under the null
each z-score exceeds 3 with probability 0.0027, so the full grid (504 z-scores) flags about 1.4
configurations for a re-run and fails by chance with probability about 504 * 0.0027^2 = 0.4%.

Default suite: a reduced form (4 fixed groups of the grid, incl. the largest P and d; plus a
Rademacher and a rotated additive group); CONVKIT_FULL=1 runs the full grid with more
replicates and steps.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import convkit as ck
from convkit.exact import expected_error, stability_limit

FULL = bool(os.environ.get("CONVKIT_FULL"))
N_STEPS = 200 if FULL else 100
REPLICATES = 2000 if FULL else 400

GROUPS = list(itertools.product([0.5, 0.75, 1.0], [1, 5, 20], [1, 4]))  # (alpha, d, b)
REDUCED = [(0.75, 20, 4), (0.5, 5, 1), (1.0, 1, 4), (0.5, 20, 1)]


def _algos(alpha: float, C: float, b: int) -> list:
    st = ck.PolyDecay(C, alpha)
    out = [ck.OSA(1, st, batch=b, name="P1")]
    for P in (4, 16):
        out += [
            ck.MBA(P, st, batch=b, name=f"P{P}-mba"),
            ck.LocalSGD(P, st, comm="every:10", batch=b, name=f"P{P}-H10"),
            ck.OSA(P, st, batch=b, name=f"P{P}-osa"),
        ]
    return out


def _zscores(prob, algos, R, seed) -> dict[str, float]:
    ex = expected_error(prob, algos, steps=N_STEPS)
    mc = ck.simulate(prob, algos, steps=N_STEPS, replicates=R, seed=seed)
    out = {}
    for a in algos:
        zs = []
        for it, metric in (
            ("avg", "hnorm2"),
            ("tail", "hnorm2"),
            ("last", "hnorm2"),
            ("avg", "dist2"),
        ):
            e = ex.curve(a.label, metric, it).iloc[-1]
            m = mc.curve(a.label, metric, it).iloc[-1]
            assert e["step"] == m["step"] == N_STEPS
            zs.append((m["mean"] - e["mean"]) / m["se"])
        out[a.label] = float(np.max(np.abs(zs)))
    return out


def _check_group(design: str, alpha: float, d: int, b: int, rotate: bool = False) -> None:
    prob = getattr(ck.LeastSquares, design)(d, spectrum="1/i", noise=0.5, rotate=rotate, seed=d)
    C = 0.5 * stability_limit(prob, batch=b)
    algos = _algos(alpha, C, b)
    seed = int(1000 * alpha) + 10 * d + b
    z = _zscores(prob, algos, REPLICATES, seed)
    flagged = [a for a in algos if z[a.label] > 3]
    if flagged:  # the stated re-run rule: fresh seed, 4x replicates, once
        z2 = _zscores(prob, flagged, 4 * REPLICATES, seed + 7919)
        print(f"re-run {design} alpha={alpha} d={d} b={b}: first {z}, re-run {z2}")
        bad = {k: v for k, v in z2.items() if v > 3}
        assert not bad, f"{design} alpha={alpha} d={d} b={b}: |z| after re-run {bad} (first {z})"


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "d", "b"), GROUPS if FULL else REDUCED)
def test_exact_matches_monte_carlo_grid(alpha, d, b):
    _check_group("gaussian", alpha, d, b)


@pytest.mark.parametrize(
    ("design", "rotate"), [("rademacher", False), ("rademacher", True), ("additive", True)]
)
def test_exact_matches_monte_carlo_other_designs(design, rotate):
    _check_group(design, 0.75, 5, 2, rotate=rotate)
