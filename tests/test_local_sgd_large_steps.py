"""Local-SGD large-step analyses: cells, statistics, CSV columns and check rows.

The analyses run on tiny cell lists by default (a few seconds); ``CONVKIT_FULL=1`` runs their
quick mode instead.  Every cell goes to a temporary cache directory.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import convkit as ck
from analyses import _local_sgd_cells as cells
from analyses import _local_sgd_rows as cell_rows
from analyses import _local_sgd_stats as st
from analyses import local_sgd_large_steps as ls
from analyses import local_sgd_schedules as sch
from analyses import local_sgd_variations as var
from convkit.checks import paired_ratio
from convkit.verdicts import VERDICTS

FULL = os.environ.get("CONVKIT_FULL") == "1"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVKIT_CELL_CACHE", str(tmp_path / "cells"))


def _tiny() -> list[cells.Cell]:
    return [
        cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, 8, replicates=64),
        cells.Cell("least_squares", 2, "flat", 10.0, 0.45, 0.75, 1000, 4, replicates=0),
    ]


def _roundtrip(df: pd.DataFrame, tmp_path, name: str) -> pd.DataFrame:
    path = tmp_path / f"{name}.csv"
    df.to_csv(path, index=False)
    return pd.read_csv(path)


def _well_formed(rows: list[dict]) -> None:
    assert rows
    for r in rows:
        assert {"result", "setting", "measured", "theoretical", "verdict", "reason"} <= set(r)
        assert r["verdict"] in VERDICTS
        for k in ("measured", "theoretical", "reason", "setting"):
            assert r[k] is not None
            assert "np.float64" not in str(r[k]) and "None" not in str(r[k])
        assert not isinstance(r["theoretical"], np.floating)


# ------------------------------------------------------------------------------ schedules
@pytest.mark.parametrize("n,N,p", [(100, 16, 2.0), (1000, 64, 3.0), (37, 16, 4.0), (500, 7, 1.5)])
def test_power_positions_are_the_formula_made_N_distinct_rounds(n, N, p):
    """Exactly N distinct rounds, never earlier than the formula ceil(n (j/N)^p), and equal to
    the formula (and to the library's PowerRounds) wherever the formula already rises by at
    least one step per round."""
    pos = np.array(cells.power_positions(n, N, p))
    raw = np.array([min(n, math.ceil(n * (j / N) ** p - 1e-12)) for j in range(1, N + 1)])
    assert pos.size == N and np.all(np.diff(pos) >= 1) and pos[-1] == n
    assert np.all(pos >= raw)
    lib = ck.schedules.PowerRounds(N, p).steps(n)
    if np.all(np.diff(raw) >= 1) and raw[0] >= 1:
        assert list(pos) == list(raw) == list(lib)
    else:
        assert lib.size < N  # the library removes duplicates: fewer rounds than the budget


@pytest.mark.parametrize("n,N", [(100, 16), (6250, 64), (31, 16), (500_000, 64)])
def test_geometric_positions_have_exactly_N_rounds(n, N):
    """The growing-gap families are compared with even spacing at equal numbers of distinct
    rounds: ceil(n^(j/N)) repeats for small j (the library's GeometricRounds keeps 51-59 of 64
    rounds on the grid of the study), the cells move those rounds to the next free steps."""
    pos = np.array(cells.geometric_positions(n, N))
    lib = ck.schedules.GeometricRounds(N).steps(n)
    raw = np.array([min(n, math.ceil(n ** (j / N) - 1e-9)) for j in range(1, N + 1)])
    assert pos.size == N and np.all(np.diff(pos) >= 1) and pos[-1] == n
    assert np.all(pos >= raw)  # rounds move later, never earlier than the formula
    # the late rounds, where the gaps exceed one step, are the formula's (and the library's)
    assert list(pos[-4:]) == list(raw[-4:]) == list(lib[-4:])
    if N == 64 and n == 6250:
        assert lib.size < 64  # the unequal budget this replaces


def test_distinct_positions_rule():
    """p_j = j + max_{i <= j}(raw_i - i) capped at n - N + j: hand-checked cases."""
    assert cells.distinct_positions(np.array([1, 1, 1, 2, 2, 3, 10]), 10) == (1, 2, 3, 4, 5, 6, 10)
    assert cells.distinct_positions(np.array([5, 5, 10]), 10) == (5, 6, 10)
    assert cells.distinct_positions(np.array([2, 9, 9, 10]), 10) == (2, 8, 9, 10)
    with pytest.raises(ValueError, match="N = 4 rounds"):
        cells.distinct_positions(np.array([1, 2, 3, 3]), 3)


def test_precision_rule_and_top_up():
    """``precise``: se <= 3 % of the ratio; ``futile``: the cap would leave the SE above
    sqrt(2) x 3 %; a logistic cell whose pilot misses the target is topped up per group (more
    replicates, at most the cap), and with no cap it keeps its pilot."""
    assert cells.precise([1.0, 1.0, 2.0, 1.0], [0.03, 0.0301, 0.05, np.nan]).tolist() == [
        True,
        False,
        True,
        False,
    ]
    # 0.06 on 64 replicates: 0.03 needs 256; futile only when 256 > 2 x cap
    assert cells.futile(0.06, 64, 127) and not cells.futile(0.06, 64, 128)
    pilot = cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, 8, replicates=32)
    topped = cells.Cell(
        "logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, 8, replicates=32, max_replicates=160
    )
    assert pilot.seed() == topped.seed() and asdict(pilot) != asdict(topped)  # cached apart
    a, b = cells.logistic_cell(pilot, threads=1), cells.logistic_cell(topped, threads=1)
    assert (a.replicates[a.schedule != "best"] == 32).all()
    R = b.replicates[b.schedule != "best"]
    assert R.max() <= 160 and R.min() >= 32 and R.max() > 32
    assert R[b.schedule == "mba"].iloc[0] == R.max()  # MBA takes part in every top-up
    # every ratio ends precise, futile or at the cap (a best row is reported on the odd half
    # of its powers' common sample: that sample is twice its count)
    rel = cells.relative_se(b)
    sample = np.where(b.schedule == "best", 2 * b.replicates, b.replicates)
    done = (rel <= cells.PRECISION) | (b.schedule == "mba") | (sample >= 160)
    done |= np.array([cells.futile(r, n, 160) for r, n in zip(rel, sample, strict=True)])
    assert done.all()
    more = (b.replicates > a.replicates) & (b.schedule != "best")
    assert cells.relative_se(b)[more].mean() < cells.relative_se(a)[more].mean()
    with pytest.raises(ValueError, match="max_replicates = 16"):
        cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, 8, replicates=32, max_replicates=16)


def test_group_top_ups_give_the_numbers_of_all_schedule_calls(monkeypatch):
    """Per-replicate errors do not depend on the other algorithms of a call: a schedule
    topped up in every stage has, bit for bit, the numbers that calls simulating every
    schedule at the same stage seeds and sizes give it, and a schedule left at its pilot
    has the pilot's numbers; at least one stage leaves some schedules out."""
    cell = cells.Cell(
        "logistic", 2, "flat", 1.0, 2.0, 0.75, 3000, 4, replicates=256, max_replicates=2048
    )
    prob, C, theta0 = cells.problem_of(cell)
    cfg = cells.configurations(cell, prob, ck.PolyDecay(C=C, alpha=cell.alpha), theta0)
    algs = cells._algorithms(cell, ck.PolyDecay(C=C, alpha=cell.alpha), cfg)
    calls, real = [], cells._final_errors

    def spy(cell_, prob_, algs_, theta0_, R, seed, threads):
        calls.append(({a.name for a in algs_}, R, seed))
        return real(cell_, prob_, algs_, theta0_, R, seed, threads)

    monkeypatch.setattr(cells, "_final_errors", spy)
    rows = cells.logistic_cell(cell, threads=1)
    assert len(calls) > 1 and any(len(names) < len(cfg) for names, _, _ in calls[1:])
    everyone = tuple(range(len(cfg)))
    full, pilot = cell_rows.StagedErrors(len(cfg)), cell_rows.StagedErrors(len(cfg))
    for i, (_, R, seed) in enumerate(calls):
        E = real(cell, prob, algs, theta0, R, seed, 1)
        full.add(everyone, E)
        if i == 0:
            pilot.add(everyone, E)
    seen = set()
    for k, c in enumerate(cfg[1:], start=1):
        took = [c["label"] in names for names, _, _ in calls]
        ref = full if all(took) else pilot if not any(took[1:]) else None
        if ref is None:
            continue
        seen.add(ref is full)
        assert (rows.err.iloc[k], rows.err_se.iloc[k]) == ref.mean_se(k)
        assert (rows.ratio_to_mba.iloc[k], rows.ratio_se.iloc[k]) == ref.ratio(k, 0)
    assert seen == {True, False}  # both kinds occur in this cell


def test_even_grid_and_cell_validation():
    c = cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 10_000, 4)
    g = cells.even_grid(c)
    assert g == sorted(set(g)) and all(1 < N < c.n for N in g)
    assert math.ceil(math.sqrt(4 * 10_000)) in g and 1250 in g and 313 in g
    with pytest.raises(ValueError, match="problem"):
        cells.Cell("ridge", 2, "flat", 1.0, 2.0, 0.75, 1000, 4)
    with pytest.raises(ValueError, match="alpha"):
        cells.Cell("logistic", 2, "flat", 1.0, 2.0, 1.5, 1000, 4)
    with pytest.raises(ValueError, match="T = 2"):
        cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 2, 4)


# ------------------------------------------------------------------------------ statistics
def test_paired_ratio_delta_method_exact_cases():
    rng = np.random.default_rng(0)
    b = rng.exponential(size=1000)
    r, s = paired_ratio(b, b)
    assert r == 1.0 and s == pytest.approx(0.0, abs=1e-15)
    r, s = paired_ratio(3.0 * b, b)  # exactly proportional: ratio 3, zero paired SE
    assert r == pytest.approx(3.0, rel=1e-14) and s == pytest.approx(0.0, abs=1e-12)
    a = b + rng.normal(size=1000)
    r, s = paired_ratio(a, b)
    ref = np.std(a - r * b, ddof=1) / np.sqrt(1000) / b.mean()
    assert s == pytest.approx(ref, rel=1e-12)


def test_paired_ratio_se_is_calibrated():
    """Across 400 independent data sets the delta-method SE matches the spread of the ratio
    (tolerance from the sampling error of a standard deviation, about 1/sqrt(2 * 400))."""
    rng = np.random.default_rng(1)
    R, M = 200, 400
    b = rng.exponential(size=(M, R))
    a = 1.5 * b * rng.gamma(4.0, 0.25, size=(M, R))
    rs = np.array([paired_ratio(a[i], b[i]) for i in range(M)])
    spread = rs[:, 0].std(ddof=1)
    assert abs(rs[:, 1].mean() / spread - 1) < 4 / math.sqrt(2 * M)


def test_power_fit_recovers_exact_exponents():
    T = np.repeat([1e3, 1e4, 1e5], 3)
    P = np.tile([2.0, 8.0, 32.0], 3)
    y = 3.0 * T**-0.5 * P**1.5
    f = st.power_fit(T, P, y, 1e-3 * y)
    assert f["slopes"]["T"] == pytest.approx(-0.5, abs=1e-9)
    assert f["slopes"]["P"] == pytest.approx(1.5, abs=1e-9)
    lo, hi = f["intervals"]["T"]
    assert lo < -0.5 < hi and hi - lo < 0.01


def test_nstar_table_on_a_known_curve():
    n = 1000
    N = np.array([1, 4, 16, 64, 256, 500, n])
    ratio = np.array([3.0, 2.5, 1.8, 1.3, 1.05, 1.02, 1.0])
    base = dict(problem="logistic", d=2, theta_norm=1.0, CL=2.0, alpha=0.75, T=4000, P=4, n=n)
    sched = ["osa"] + ["even"] * 5 + ["mba"]
    df = pd.DataFrame(
        [
            dict(base, schedule=s, N=k, ratio_to_mba=r, ratio_se=1e-4)
            for s, k, r in zip(sched, N, ratio, strict=True)
        ]
    )
    nt = st.nstar_table(df)
    row = nt[nt.eps == 0.1].iloc[0]
    assert row.status == "interior"
    # log-interpolated crossing of 1.1 between N = 64 (1.3) and 256 (1.05)
    t = (1.3 - 1.1) / (1.3 - 1.05)
    assert row.N_star == pytest.approx(math.exp(math.log(64) + t * math.log(4)), rel=1e-9)
    assert row.N_lo <= row.N_star <= row.N_hi
    df.loc[(df.N == 256), "ratio_se"] = 0.05  # a bracketing point above 3 % of its ratio
    assert set(st.nstar_table(df)[lambda t: t.eps == 0.1].status) == {"imprecise"}
    df["ratio_se"] = 1e-4
    df.loc[df.schedule == "even", "ratio_to_mba"] = 2.0  # every N < n fails
    assert set(st.nstar_table(df).status) == {"capped"}


# ------------------------------------------------------------------------------ analyses
@pytest.mark.slow
def test_analyses_run_columns_and_checks(tmp_path):
    lst = None if FULL else _tiny()
    df = _roundtrip(ls.run(quick=True, cell_list=lst), tmp_path, "ls")
    assert list(df.columns) == cells.COLUMNS
    assert set(df.schedule) <= set(cells.SCHEDULES)
    every_schedule = {"mba", "osa", "even", "quadratic", "geometric", "drift_clock", "best"}
    assert every_schedule <= set(df.schedule)
    assert set(df.problem) == {"logistic", "least_squares"}
    mba = df[df.schedule == "mba"]
    assert (mba.ratio_to_mba == 1.0).all() and (mba.N == mba.n).all()
    lsq = df[df.problem == "least_squares"]
    assert (lsq.replicates == 0).all() and (lsq.err_se == 0).all() and (lsq.ratio_se == 0).all()
    assert not df.duplicated(
        ["problem", "d", "theta_norm", "CL", "alpha", "T", "P", "schedule", "N"]
    ).any()
    assert (df.rounds <= df.N).all()
    families = df[~df.schedule.isin(["mba", "osa"])]
    assert (families.rounds == families.N).all()  # equal budgets are equal distinct rounds
    # small statistical assertion: at T = 1000, P = 8 one-shot averaging is worse than MBA by
    # far more than 3 paired SE (measured ratio about 23 at 512 replicates)
    osa = df[
        (df.problem == "logistic") & (df.schedule == "osa") & (df.P == 8) & (df["T"] == 1000)
    ].iloc[0]
    assert (osa.ratio_to_mba - 1) / osa.ratio_se > 3
    rows = ls.checks(df)
    _well_formed(rows)
    facts = ls.facts(df)
    assert facts and all(isinstance(v, str) for v in facts.values())
    # the README's verdict facts are the verdicts of the check rows (one rule, two readers)
    for a in sorted(set(df[df.problem == "logistic"].alpha)):
        for x in ("T", "P"):
            (row,) = [
                r
                for r in rows
                if r["result"] == f"local_sgd_large_steps.gap_exponent_{x}"
                and f"alpha={a}," in r["setting"]
            ]
            assert facts[f"ratio_verdict_{x}_a{a}"] == row["verdict"]

    sd = _roundtrip(sch.run(quick=True, cell_list=lst), tmp_path, "sch")
    assert list(sd.columns) == sch.OUT_COLUMNS
    assert (sd.ratio_to_even > 0).all()
    _well_formed(sch.checks(sd))
    assert sch.facts(sd)

    vlist = (
        lst
        if lst is None
        else [
            cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, 4, replicates=32),
            cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, 4, start="star", replicates=32),
        ]
    )
    vd = _roundtrip(var.run(quick=True, cell_list=vlist), tmp_path, "var")
    assert list(vd.columns) == cells.COLUMNS + ["spectrum", "start", "variant"]
    assert {"base (C L=2)", "start at theta*"} <= set(vd.variant)
    _well_formed(var.checks(vd))
    files = ls.plot(df, tmp_path) + sch.plot(sd, tmp_path) + var.plot(vd, tmp_path)
    assert all(p.exists() and p.stat().st_size > 10_000 for p in files)


def test_common_random_numbers_within_a_cell():
    """P = 1: every schedule is plain SGD, so all rows of a cell agree bit for bit (the same
    draws for every configuration)."""
    c = cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 200, 1, replicates=16)
    f = cells.logistic_cell(c)
    f = f[f.schedule != "best"]
    assert np.all(f.err.to_numpy() == f.err.iloc[0])
    assert np.all(f.ratio_to_mba.to_numpy() == 1.0)


def test_vectorized_crossings_match_find_threshold():
    from convkit.checks import find_threshold

    rng = np.random.default_rng(3)
    N = np.array([1.0, 4, 16, 64, 256, 1000])
    draws = 1 + np.abs(rng.normal(0, 0.3, size=(200, 6))) * np.linspace(1, 0, 6)[None, :]
    draws[:7] = 1.05  # holds everywhere
    est = st.crossings(N, draws, 0.1)
    for b in range(draws.shape[0]):
        th = find_threshold(N, draws[b], np.zeros(6), eps=0.1, mode="ratio")
        ref = th.estimate if th.estimate is not None else N[-1]
        assert est[b] == pytest.approx(ref, rel=1e-12)


def test_every_schedule_label_has_its_palette_colour():
    """Each schedule label of the cells and each family of the schedules figure (``power<p>``
    drawn as ``power``) is a key of the palette, so no curve falls back to an anonymous grey
    (the ``drift_clock`` label is drawn in the colour its rule had before its rename)."""
    from convkit import plotting as cp

    families = {"power" if f.startswith("power") else f for f in sch.FAMILIES}
    for label in set(cells.SCHEDULES) | families:
        assert cp.canonical(label) in cp.ALGORITHM_COLORS, label
    assert cp.color("drift_clock") == cp.color("drift-clock") == "#b15928"


def test_imprecise_pairs_carry_no_verdict():
    """Pairs whose paired SE is above 3 % of the ratio are left out of the schedule verdicts:
    a family with only such pairs is not_identifiable, never 'holds' on zero pairs."""
    base = dict(problem="logistic", d=2, theta_norm=1.0, CL=2.0, alpha=0.75, P=4, n=250, N=16)
    data = pd.DataFrame(
        [
            dict(base, T=T, family="geometric", ratio_to_even=0.8, ratio_to_even_se=se)
            for T, se in ((1000, 0.05), (3000, 0.1))
        ]
    )
    (row,) = sch.checks(data)
    assert row["verdict"] == "not_identifiable" and "0/0" in row["measured"]
    data.loc[0, "ratio_to_even_se"] = 0.02  # now one precise pair, saving 20 % > 2 SE
    (row,) = sch.checks(data)
    assert (
        row["verdict"] == "holds" and "1/1" in row["measured"] and "left out: 1" in row["setting"]
    )


def test_drift_clock_positions_are_its_targets_made_N_rounds():
    """The cells' drift-clock schedule: DriftClockRounds.targets (N non-decreasing targets whose
    distinct values are the library's steps) spread to exactly N distinct rounds."""
    cell = cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 100_000, 16)
    prob, C, theta0 = cells.problem_of(cell)
    step = ck.PolyDecay(C=C, alpha=cell.alpha)
    pos = cells.drift_clock_positions(cell, 64, prob, step, theta0)
    rule = ck.DriftClockRounds(
        64, step, mu=float(prob.mu), L=float(prob.L), dist0=1.0, noise=float(np.trace(prob.H_star))
    )
    t = rule.targets(cell.n)
    assert t.size == 64 and np.all(np.diff(t) >= 0) and t[-1] == cell.n
    assert np.array_equal(np.unique(t), rule.steps(cell.n))
    assert pos == cells.distinct_positions(t, cell.n) and len(set(pos)) == 64
    with pytest.raises(ValueError, match="N"):
        rule.targets(10)  # budget above n


def test_cell_cache_reads_only_verified_entries(tmp_path):
    """The cells run on the sweep runner, whose cache entries are verified when read: a
    damaged payload, a payload cut short, a missing or foreign record are detected, warned
    about and recomputed (the same numbers: fixed seeds), never read; a valid entry is read,
    not recomputed (negative control: the payload's bytes are the ones read)."""
    from convkit.sweep.cache import Cache

    cell = cells.Cell("least_squares", 2, "flat", 1.0, 0.45, 0.75, 1000, 4, replicates=0)
    first = cells.cell_frame(cell)
    store = Cache(cells.cache_dir())
    (key,) = store.keys()
    payload = next(p for p in store.paths(key)[0].parent.iterdir() if p.suffix != ".json")
    record = store.paths(key)[1]
    good, good_record = payload.read_bytes(), record.read_text()
    mtime = payload.stat().st_mtime_ns
    pd.testing.assert_frame_equal(cells.cell_frame(cell), first, check_exact=True)
    assert payload.stat().st_mtime_ns == mtime  # read from the cache, not rewritten
    spoils = (  # (spoil, warned): a missing record is an entry never committed (a kill)
        (lambda: payload.write_bytes(good[:-7] + b"garbage"), True),
        (lambda: payload.write_bytes(good[: len(good) // 2]), True),
        (
            lambda: record.write_text(good_record.replace('"theta_norm":1.0', '"theta_norm":10.0')),
            True,
        ),  # fmt: skip
        (lambda: record.unlink(), False),
    )
    for spoil, warned in spoils:
        spoil()
        assert store.get(key) is None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again = cells.cell_frame(cell)
        said = [str(w.message) for w in caught if "were recomputed" in str(w.message)]
        assert len(said) == warned, said
        pd.testing.assert_frame_equal(again, first, check_exact=True)
        assert store.get(key) is not None  # rewritten, verified
        payload.write_bytes(good)
        record.write_text(good_record)


def test_cells_resume_after_a_kill(tmp_path):
    """A run killed (SIGKILL) after some cells committed resumes: the rerun reads those and
    computes only the others, and the rows are those of an uninterrupted run."""
    import signal
    import subprocess
    import sys
    import textwrap

    from convkit.sweep.cache import Cache

    lst = [
        cells.Cell("least_squares", 2, "flat", 1.0, 0.45, 0.75, 1000, P, replicates=0)
        for P in (2, 4, 8, 16)
    ]
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from analyses import _local_sgd_cells as cells
        orig = cells.least_squares_cell
        done = []
        def slow(cell):
            if len(done) == 2:  # after two committed cells: killed mid-run
                os.kill(os.getpid(), 9)
            done.append(cell)
            return orig(cell)
        cells.least_squares_cell = slow
        cells.cells_frame({lst!r}, jobs=1)
        """
    ).replace("Cell(", "cells.Cell(")
    env = {**os.environ, "CONVKIT_CELL_CACHE": str(cells.cache_dir())}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert len(Cache(cells.cache_dir()).keys()) == 2
    resumed = cells.cells_frame(lst, jobs=1)
    assert len(Cache(cells.cache_dir()).keys()) == 4
    fresh = pd.concat([cells.cell_point(**asdict(c)) for c in lst], ignore_index=True)
    pd.testing.assert_frame_equal(resumed, fresh, check_exact=True)


def test_cells_in_parallel_give_the_serial_rows(tmp_path, monkeypatch):
    """Cells run two at a time in worker processes give, bit for bit, the rows of one at a
    time (every cell's numbers come from its own seeds), in the order of the list."""
    lst = [
        cells.Cell("logistic", 2, "flat", 1.0, 2.0, 0.75, 1000, P, replicates=32, max_replicates=96)
        for P in (2, 4, 8)
    ] + _tiny()[1:]
    monkeypatch.setenv("CONVKIT_CELL_CACHE", str(tmp_path / "serial"))
    serial = cells.cells_frame(lst, jobs=1)
    monkeypatch.setenv("CONVKIT_CELL_CACHE", str(tmp_path / "parallel"))
    parallel = cells.cells_frame(lst, jobs=2)
    pd.testing.assert_frame_equal(serial, parallel, check_exact=True)
    order = serial.drop_duplicates(["problem", "P"])[["problem", "P"]]
    assert [tuple(r) for r in order.itertuples(index=False)] == [
        ("logistic", 2),
        ("logistic", 4),
        ("logistic", 8),
        ("least_squares", 4),
    ]
