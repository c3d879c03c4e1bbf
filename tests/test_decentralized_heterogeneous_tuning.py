"""The two step-tuning rules of the heterogeneous decentralized study (smallest tail error and
fewest bits to a target, :func:`analyses._decentralized_common.tune_steps`), the quick run of
``decentralized_heterogeneous`` end to end, and its committed data at both tuned steps."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyses import _decentralized_common as C
from analyses import _decentralized_heterogeneous_settings as S
from convkit.compression import QSGD, TopK
from convkit.problems.heterogeneous import HeterogeneousLeastSquares
from convkit.verdicts import VERDICTS

FIGURES = Path(__file__).resolve().parents[1] / "figures"
GRID = np.array([0.01, 0.02, 0.04, 0.08])


def _dpsgd_tuning(target: float | None) -> dict:
    """D-PSGD (exact messages) on the ring, homogeneous least squares with label noise: the
    stationary error grows with gamma (~ gamma sigma^2 tr(H^2) / (4P), about 1e-3 at 0.01 and
    1e-2 at 0.08 here) while the transient shrinks with it (~ exp(-2 gamma t) from 0.5), so the
    tail rule (last quarter of 20 log-spaced record points: steps ~ 400 to 2000, where the
    transient at 0.01 is ~ 1e-4) wants the smallest step and the bits rule, for a loose target,
    the largest."""
    prob = HeterogeneousLeastSquares(32, C.P, 0.0, noise=0.5, seed=0)
    topo = C.topology("ring")
    return C.tune_steps(
        prob,
        {"D-PSGD": lambda g, name: C.make_method("D-PSGD", topo, g, None, name=name)},
        GRID,
        steps=2000,
        replicates=4,
        seed=5,
        target=target,
    )


def test_bits_rule_picks_the_fast_step_the_tail_rule_the_low_floor():
    tuned = _dpsgd_tuning(0.1)
    g_tail, e_tail = tuned["tail"]["D-PSGD"]
    g_bits, b_bits = tuned["bits"]["D-PSGD"]
    assert g_tail == 0.01 and g_bits == 0.08
    assert np.isfinite(b_bits) and e_tail < 0.1
    # the tail rule is read off the same call: asking for the bits rule does not move it
    assert _dpsgd_tuning(None)["tail"] == tuned["tail"]


def test_bits_rule_unreachable_target_and_ties():
    # no grid step reaches 1e-9: infinite bits, the tail rule's step is returned
    never = _dpsgd_tuning(1e-9)
    assert never["bits"]["D-PSGD"] == (never["tail"]["D-PSGD"][0], float("inf"))
    # a target above the initial error (about 0.5): every step is below it at the first
    # record point, all tie on bits, and the tie goes to the smaller tail error
    tie = _dpsgd_tuning(10.0)
    assert tie["bits"]["D-PSGD"][0] == tie["tail"]["D-PSGD"][0]
    assert np.isfinite(tie["bits"]["D-PSGD"][1])


def _two_method_tuning(grid: np.ndarray, max_extensions: int, **kw) -> dict:
    """D-PSGD (exact messages) and DCD-PSGD (QSGD, random: it draws from its own stream) on
    the problem of :func:`_dpsgd_tuning`, target 0.1."""
    prob = HeterogeneousLeastSquares(32, C.P, 0.0, noise=0.5, seed=0)
    topo = C.topology("ring")
    comp = {"D-PSGD": None, "DCD-PSGD": QSGD(s=4)}
    return C.tune_steps(
        prob,
        {m: (lambda g, name, m=m: C.make_method(m, topo, g, comp[m], name=name)) for m in comp},
        grid,
        steps=2000,
        replicates=4,
        seed=5,
        target=0.1,
        max_extensions=max_extensions,
        **kw,
    )


def test_upward_extension_moves_a_top_choice_up_until_the_step_above_diverges():
    """On the grid {0.01, 0.02} D-PSGD's bits rule sits at the top (0.02, censored); the
    extension doubles the top while it does and stops at 0.08, whose next step 0.16 diverges
    (single-sample Hessians x x^T with ||x||^2 ~ d = 32: stable below about 2 / 32). The tail
    rule's choice 0.01 sits at the bottom, so the grid also gets 0.005 (worse)."""
    short = np.array([0.01, 0.02])
    capped = _two_method_tuning(short, 0)
    assert capped["bits"]["D-PSGD"][0] == 0.02
    assert capped["above"]["bits"]["D-PSGD"] == "cap" and capped["extensions"] == 0
    tuned = _two_method_tuning(short, 5)
    g_bits, b_bits = tuned["bits"]["D-PSGD"]
    assert g_bits == 0.08 and b_bits < capped["bits"]["D-PSGD"][1]
    np.testing.assert_array_equal(tuned["grid"]["D-PSGD"], [0.005, 0.01, 0.02, 0.04, 0.08, 0.16])
    assert tuned["above"]["bits"]["D-PSGD"] == "diverges"
    assert all(
        tuned["grid"][m][0] < tuned[rule][m][0] < tuned["grid"][m][-1]
        for rule in ("tail", "bits")
        for m in tuned["tail"]
    )
    for side in ("above", "below"):
        assert "cap" not in {a for rule in tuned[side].values() for a in rule.values()}
    assert 1 <= tuned["extensions"] <= 5
    # the extension stops at the cap and says so
    one = _two_method_tuning(short, 1)
    assert one["bits"]["D-PSGD"][0] == 0.04 and one["above"]["bits"]["D-PSGD"] == "cap"


def test_upward_extension_keeps_the_earlier_random_streams():
    """New grid values are appended after every earlier (method, gamma) pair of the call, so
    the pairs already there keep their positions and random streams: the DCD-PSGD (QSGD)
    scores at its unchanged choices are bit-for-bit those of the call without extension."""
    grid = np.array([0.005, 0.01, 0.02])
    plain = _two_method_tuning(grid, 0)
    ext = _two_method_tuning(grid, 5)
    assert ext["extensions"] >= 1  # D-PSGD's bits choice was at the top and moved
    assert ext["bits"]["D-PSGD"][0] > plain["bits"]["D-PSGD"][0] == 0.02
    assert ext["tail"]["DCD-PSGD"] == plain["tail"]["DCD-PSGD"]
    assert ext["tail"]["D-PSGD"] == plain["tail"]["D-PSGD"]


def test_downward_extension_moves_a_bottom_choice_down():
    """On the grid {0.04, 0.08} the tail rule's choices sit at the bottom (0.04, censored: the
    stationary error ~ gamma, :func:`_dpsgd_tuning`); the extension halves the bottom while
    they do (after doubling D-PSGD's top once: its bits choice 0.08 sits at the top) and
    stops at 0.01, whose next smaller step 0.005 is worse (its transient, ~ exp(-2 gamma t),
    has not died out in the tail window). Pairs already in the grid keep their random
    streams: DCD-PSGD's bits choice 0.04 (interior, both neighbours worse) keeps its
    bits bit-for-bit."""
    grid = np.array([0.04, 0.08])
    capped = _two_method_tuning(grid, 0)
    for m in ("D-PSGD", "DCD-PSGD"):
        assert capped["tail"][m][0] == 0.04 and capped["below"]["tail"][m] == "cap"
    assert capped["below"]["bits"]["DCD-PSGD"] == "cap"
    tuned = _two_method_tuning(grid, 5)
    assert tuned["extensions_up"] == 1 and tuned["extensions_down"] == 3
    assert tuned["extensions"] == 4
    for m in ("D-PSGD", "DCD-PSGD"):
        g, e = tuned["tail"][m]
        assert g == 0.01 and e < capped["tail"][m][1]
        assert tuned["grid"][m][0] == 0.005 and tuned["below"]["tail"][m] == "worse"
        assert tuned["grid"][m][0] < tuned["bits"][m][0] < tuned["grid"][m][-1]
    assert tuned["bits"]["DCD-PSGD"] == capped["bits"]["DCD-PSGD"]
    assert tuned["bits"]["D-PSGD"] == capped["bits"]["D-PSGD"]
    assert tuned["above"]["bits"]["D-PSGD"] == "diverges"
    # one halving only: the tail choices move to 0.02 and are censored there
    one = _two_method_tuning(grid, 1)
    assert one["tail"]["D-PSGD"][0] == 0.02 and one["below"]["tail"]["D-PSGD"] == "cap"


def test_unreached_target_keeps_the_tail_step_and_its_edge():
    """With a target no step reaches, the bits rule has no choice of its own: it keeps the
    tail rule's step, which alone drives the extension, and the steps next to it do not
    reach the target."""
    tuned = _two_method_tuning(np.array([0.04, 0.08]), 5)
    none = C.tune_steps(
        HeterogeneousLeastSquares(32, C.P, 0.0, noise=0.5, seed=0),
        {"D-PSGD": lambda g, name: C.make_method("D-PSGD", C.topology("ring"), g, None, name=name)},
        np.array([0.04, 0.08]),
        steps=2000,
        replicates=4,
        seed=5,
        target=1e-6,
        max_extensions=5,
    )
    assert none["bits"]["D-PSGD"] == (none["tail"]["D-PSGD"][0], float("inf"))
    assert none["tail"]["D-PSGD"][0] == tuned["tail"]["D-PSGD"][0] == 0.01
    assert none["below"]["bits"]["D-PSGD"] == "not reached"
    assert none["above"]["bits"]["D-PSGD"] == "not reached"


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_tune_steps_rejects_a_bad_max_extensions(bad):
    with pytest.raises(ValueError, match="max_extensions must be a non-negative integer"):
        C.tune_steps(None, {}, GRID, steps=10, replicates=1, seed=0, max_extensions=bad)


@pytest.mark.parametrize("target", [0.0, -1.0, float("nan"), float("inf")])
def test_tune_steps_rejects_a_bad_target(target):
    with pytest.raises(ValueError, match="target must be a positive finite"):
        C.tune_steps(None, {}, GRID, steps=10, replicates=1, seed=0, target=target)


def test_tune_steps_rejects_a_bad_grid():
    with pytest.raises(ValueError, match="grid must be"):
        C.tune_steps(None, {}, np.array([0.1, -0.2]), steps=10, replicates=1, seed=0)


def _same_run_when_same_step(data: pd.DataFrame) -> int:
    """Asserts that a bits-tuned step equal to the tail-tuned one carries the tail run's
    numbers exactly; returns how many (setting, method) pairs moved their step."""
    keys = ["problem", "split", "topology", "method"]
    moved = 0
    for _, g in data.groupby(keys, sort=False):
        t = g[g.steps_kind == "tuned_tail"].reset_index(drop=True)
        b = g[g.steps_kind == "tuned_bits"].reset_index(drop=True)
        assert len(t) == len(b) > 0
        if t.gamma.iloc[0] == b.gamma.iloc[0]:
            for col in ("step", "bits", "mean", "se", "count"):
                np.testing.assert_array_equal(t[col], b[col])
        else:
            moved += 1
    return moved


def test_quick_heterogeneous_study(tmp_path):
    """Quick mode end to end: three step kinds per method, the bits-tuned run shared with the
    tail-tuned one where the step is the same, checks in the vocabulary, one ranking row per
    setting and the summary row."""
    M = importlib.import_module("analyses.decentralized_heterogeneous")
    data = M.run(quick=True, cache=tmp_path / "cache")
    assert set(data.steps_kind) == {"tuned_tail", "tuned_bits", "common"}
    _same_run_when_same_step(data)
    rows = M.checks(data)
    assert all(r["verdict"] in VERDICTS for r in rows)
    ranking = [
        r for r in rows if r["result"] == "decentralized_heterogeneous.ranking_by_tuning_rule"
    ]
    n_settings = len(data.drop_duplicates(["problem", "split", "topology"]))
    assert len(ranking) == n_settings
    assert any(r["result"] == "decentralized_heterogeneous.tuning_changes_ranking" for r in rows)
    edge = [r for r in rows if r["result"] == "decentralized_heterogeneous.steps_inside_grid"]
    assert len(edge) == 1 and edge[0]["verdict"] in (VERDICTS[0], VERDICTS[1])


def test_committed_data_at_both_tuned_steps():
    """The committed data: the bits-tuned step is, on the tuning seed, never worse in bits
    than the tail-tuned one (it minimises them over a grid holding the latter), reuses its
    run when the step is the same, and the README facts exist for both rules."""
    M = importlib.import_module("analyses.decentralized_heterogeneous")
    data = pd.read_csv(FIGURES / "decentralized_heterogeneous.csv")
    assert set(data.steps_kind) == {"tuned_tail", "tuned_bits", "common"}
    _same_run_when_same_step(data)
    facts = M.facts(data)
    for prefix in ("bits_fixed", "bitstuned_fixed", "gamma_tail", "gamma_bits"):
        assert f"{prefix}_zeta_0_ring_deepsqueeze" in facts


def test_committed_tuning_is_uncensored_at_both_ends():
    """Every tuned step of the committed data lies strictly inside its method's (extended)
    grid, and the steps above and below it diverge, never reach the target or are worse,
    except ECD-PSGD where no step lowers the error below the initial one (its error grows at
    every step; a smaller step only lowers how far): in every setting the no-gain stop ended
    its halving, and its choice is the bottom of its grid (``step_below == "no gain"``). The
    edge check row says the same. A bits-rule choice with no step reaching the target is the
    tail rule's step, and the steps next to it do not reach the target."""
    M = importlib.import_module("analyses.decentralized_heterogeneous")
    data = pd.read_csv(FIGURES / "decentralized_heterogeneous.csv")
    e = M.grid_edges(data)
    assert len(e) == 2 * len(data.drop_duplicates(["problem", "split", "topology", "method"]))
    inside = e[e.edge == ""]
    assert set(e.step_above) | set(inside.step_below) <= {"diverges", "not reached", "worse"}
    assert (inside.grid_bottom < inside.gamma).all() and (e.gamma < e.grid_top).all()
    edge = e[e.edge != ""]
    assert (edge.edge == "bottom").all() and (edge.step_below == "no gain").all()
    assert edge.no_gain.all() and (edge.method == "ECD-PSGD").all()
    n_settings = len(data.drop_duplicates(["problem", "split", "topology"]))
    assert len(edge) == 2 * n_settings  # every (setting, ECD-PSGD) pair, both rules
    assert "cap" not in set(e.step_below) | set(e.step_above)
    fallback = e[~e.reached]
    assert (fallback.steps_kind == "tuned_bits").all()
    tail = e[e.steps_kind == "tuned_tail"].set_index(["problem", "split", "topology", "method"])
    for r in fallback.itertuples():
        assert r.gamma == tail.loc[(r.problem, r.split, r.topology, r.method), "gamma"]
        assert {r.step_above, r.step_below} <= {"diverges", "not reached", "no gain"}
        assert r.step_below != "no gain" or r.no_gain
    row = [
        r for r in M.checks(data) if r["result"] == "decentralized_heterogeneous.steps_inside_grid"
    ]
    assert len(row) == 1 and row[0]["verdict"] == "holds"


def test_edge_check_counts_a_no_gain_stop_with_gain_as_censored():
    """Negative control of the no-gain stop in the edge check: the committed data with one
    ECD-PSGD tail-rule tuning error lowered below the initial excess risk (a step that did
    lower the error, yet its halving stopped) makes the row say violated."""
    M = importlib.import_module("analyses.decentralized_heterogeneous")
    data = pd.read_csv(FIGURES / "decentralized_heterogeneous.csv")
    first = data[(data.method == "ECD-PSGD") & (data.steps_kind == "tuned_tail")].iloc[0]
    keys = ["problem", "split", "topology", "method", "steps_kind"]
    sel = np.logical_and.reduce([data[k] == first[k] for k in keys])
    data.loc[sel, "tuning_score"] = 0.5 * data.loc[sel, "initial_error"]
    row = M._grid_edge_check(data, 1000)
    assert row["verdict"] == "violated"


# ---------------------------------------------------------------------- pair runs, keyed
def _small_tuning(builders: dict, grid, **kw) -> dict:
    """:func:`C.tune_steps` on the least-squares problem of :func:`_dpsgd_tuning`, short runs."""
    prob = HeterogeneousLeastSquares(32, C.P, 0.0, noise=0.5, seed=0)
    return C.tune_steps(
        prob, builders, np.asarray(grid), steps=200, replicates=2, seed=5, target=0.3, **kw
    )


def _builders(*methods: str) -> dict:
    topo = C.topology("ring")
    comp = {
        "D-PSGD": None,
        "DCD-PSGD": QSGD(s=4),
        "ECD-PSGD": QSGD(s=4),
        "CHOCO-SGD": TopK(fraction=0.25),
    }
    return {
        m: (lambda g, name, m=m: C.make_method(m, topo, g, comp[m], gamma_c=0.5, name=name))
        for m in methods
    }


def test_pair_scores_do_not_depend_on_the_other_pairs_or_their_order():
    """A (method, gamma) pair's scores are bit-for-bit the same whether it is tuned with other
    methods or alone, and whatever the order of the grid: DCD-PSGD and ECD-PSGD (QSGD, their
    own random numbers: one call per pair) and D-PSGD and CHOCO-SGD (top-k: no random numbers
    of their own, declared ``stream_free``: their pairs share a call behind a QSGD pair), each
    against its method tuned alone on the reversed grid. The scores are not trivially equal:
    the two steps, and another seed, give other numbers."""
    grid = [0.01, 0.02]
    methods = ("D-PSGD", "ECD-PSGD", "CHOCO-SGD", "DCD-PSGD")
    free = ("D-PSGD", "CHOCO-SGD")
    both = _small_tuning(_builders(*methods), grid, stream_free=free)["pairs"]
    for m in methods:
        alone = _small_tuning(_builders(m), grid[::-1])["pairs"]
        for g in grid:
            assert both[(m, g)] == alone[(m, g)]
        assert alone[(m, 0.01)].tail != alone[(m, 0.02)].tail
    assert all(np.isfinite(both[("DCD-PSGD", g)].tail) for g in grid)
    prob = HeterogeneousLeastSquares(32, C.P, 0.0, noise=0.5, seed=0)
    other = C.tune_steps(
        prob, _builders("DCD-PSGD"), np.array(grid), steps=200, replicates=2, seed=6, target=0.3
    )["pairs"]
    assert other[("DCD-PSGD", 0.01)].tail != both[("DCD-PSGD", 0.01)].tail


def test_a_random_method_declared_stream_free_would_change_its_numbers():
    """Negative control of the shared calls: DCD-PSGD (QSGD draws) wrongly declared
    ``stream_free`` runs behind ECD-PSGD's pair, on the stream of position 1, and its scores
    are no longer those it has alone."""
    grid = [0.01]
    shared = _small_tuning(_builders("ECD-PSGD", "DCD-PSGD"), grid, stream_free=("DCD-PSGD",))[
        "pairs"
    ]
    alone = _small_tuning(_builders("DCD-PSGD"), grid)["pairs"]
    assert shared[("DCD-PSGD", 0.01)] != alone[("DCD-PSGD", 0.01)]


@pytest.mark.parametrize("free", [(), ("D-PSGD",)])
def test_an_extension_simulates_only_its_new_pairs(monkeypatch, free):
    """Every (method, gamma) pair is simulated once however many times the grid is extended:
    the simulated pairs are exactly those of the final grids. Without ``stream_free`` each
    call runs one pair; with D-PSGD declared stream-free its pairs share the calls, behind at
    most one DCD-PSGD pair (first), so there are fewer calls than pairs."""
    calls: list[list[str]] = []
    simulate = C.simulate_quiet

    def counting(prob, algos, **kw):
        calls.append([a.name for a in algos])
        return simulate(prob, algos, **kw)

    monkeypatch.setattr(C, "simulate_quiet", counting)
    tuned = _two_method_tuning(np.array([0.01, 0.02]), 5, stream_free=free)
    assert tuned["extensions"] >= 2
    names = [name for c in calls for name in c]
    assert len(set(names)) == len(names)
    expected = {C._config_name(m, g) for m, gs in tuned["grid"].items() for g in gs}
    assert set(names) == expected and len(tuned["pairs"]) == len(names)
    drawing = [[n for n in c if n.startswith("DCD-PSGD")] for c in calls]
    assert all(len(d) <= 1 and (not d or c[0] == d[0]) for c, d in zip(calls, drawing))
    if free:
        assert len(calls) < len(names)
    else:
        assert all(len(c) == 1 for c in calls)


class _Scored:
    """A stand-in problem for :func:`C.tune_steps`: initial excess risk 1 at theta = 0."""

    d = 2

    def errors(self, theta):
        return {"excess_risk": 1.0}


def _synthetic_tuning(
    monkeypatch, tails: dict, no_gain_stop: bool, grid=(0.04, 0.08), bits: dict | None = None
) -> dict:
    """:func:`C.tune_steps` with each pair's tail error ``tails[label](gamma)`` (``inf``:
    diverges) and bits to target ``bits[label](gamma)`` (default infinite: not reached)
    instead of a simulation."""

    def score(label: str, g: float) -> C.PairScore:
        e = float(tails[label](g))
        b = float(bits[label](g)) if bits else float("inf")
        return C.PairScore(e, b, not np.isfinite(e))

    monkeypatch.setattr(C, "_run_pairs", lambda prob, b, new, *rest: {p: score(*p) for p in new})
    return C.tune_steps(
        _Scored(),
        dict.fromkeys(tails),
        np.array(grid),
        steps=10,
        replicates=1,
        seed=0,
        target=0.5,
        max_extensions=8,
        no_gain_stop=no_gain_stop,
    )


def test_no_gain_stop_ends_the_halving_where_no_step_lowers_the_error(monkeypatch):
    """A method whose every step diverges above 0.015 and, below, leaves the error above its
    initial value 1 (1 + gamma: a smaller step only lowers how far) is halved until its first
    finite step (0.01) and no further: ``"no gain"`` below it; without the stop it is halved
    8 times and censored there (``"cap"``). A method with an interior optimum (0.005: the
    tail error (gamma - 0.005)^2 + 0.1) is tuned alike with and without the stop."""
    tails = {
        "flat": lambda g: 1.0 + g if g < 0.015 else np.inf,
        "optimum": lambda g: (g - 0.005) ** 2 + 0.1,
    }
    stop = _synthetic_tuning(monkeypatch, tails, True)
    full = _synthetic_tuning(monkeypatch, tails, False)
    assert stop["tail"]["flat"] == (0.01, 1.01) and stop["grid"]["flat"][0] == 0.01
    assert stop["extensions_down"] == 4  # the optimum's halvings: 0.02 ... 0.0025 (worse)
    assert stop["below"]["tail"]["flat"] == stop["below"]["bits"]["flat"] == "no gain"
    assert full["extensions_down"] == 8 and full["below"]["tail"]["flat"] == "cap"
    assert full["tail"]["flat"][0] == 0.08 / 2**9
    for rule in ("tail", "bits"):
        assert stop[rule]["optimum"] == full[rule]["optimum"]
        assert stop["tail"]["optimum"][0] == 0.005
    assert set(stop["pairs"]) <= set(full["pairs"])


def test_no_gain_stop_leaves_a_bits_choice_that_reaches_the_target_to_the_halving(monkeypatch):
    """The stop reads the tail rule only: a method with no gain in the tail (1 + gamma) whose
    mean curve still reaches the target (finite bits, fewer at smaller steps) keeps being
    halved for its bits-rule choice, as without the stop, and ends at the cap there."""
    tails = {"dip": lambda g: 1.0 + g}
    bits = {"dip": lambda g: 1e3 * g}
    stop = _synthetic_tuning(monkeypatch, tails, True, bits=bits)
    full = _synthetic_tuning(monkeypatch, tails, False, bits=bits)
    assert stop["extensions_down"] == full["extensions_down"] == 8
    assert stop["bits"] == full["bits"] and stop["below"]["bits"]["dip"] == "cap"
    assert stop["below"]["tail"]["dip"] == "no gain" and full["below"]["tail"]["dip"] == "cap"


def test_consensus_parameters_are_computed_once_per_key(monkeypatch):
    """The consensus parameters depend only on (graph, top-k fraction, d, seed): the study
    computes them once per key (the three least-squares zeta^2 share each graph's)."""
    keys = []

    def fake(topo, comp, d, seed):
        keys.append((topo.name, comp.name, d, seed))
        return 0.5, 0.25

    monkeypatch.setattr(C, "consensus_params", fake)
    S.consensus_params.cache_clear()
    try:
        for kind in ("ring", "torus", "ring", "ring", "torus"):
            assert S.consensus_params(kind, 32) == (0.5, 0.25)
        S.consensus_params("ring", 30)
    finally:
        S.consensus_params.cache_clear()
    assert len(keys) == len(set(keys)) == 3


# ---------------------------------------------------------------------- the sweep of settings
def test_setting_points_identify_each_setting_once():
    """The points (quick, problem, split, topology) are distinct and in the order of the
    settings; an unknown point raises a ValueError naming its arguments and the settings."""
    for quick, count in ((True, 3), (False, 15)):
        pts = S.setting_points(quick)
        assert len(pts) == count
        assert len({tuple(sorted(p.items())) for p in pts}) == count
        assert [(p["problem"], p["split"], p["topology"]) for p in pts] == [
            (meta["problem"], meta["split"], tk) for _, tk, _, _, meta in S.settings(quick)
        ]
    # the torus exists in full mode only
    with pytest.raises(
        ValueError,
        match=r"problem='least-squares', split='zeta2=0', topology='torus' \(quick=True\).*'ring'",
    ):
        S.setting_point(True, "least-squares", "zeta2=0", "torus")


def _direct_rows(quick: bool, index: int) -> pd.DataFrame:
    """Setting ``index`` computed here as the study did before its sweep: tuning and final
    runs in this process, the excess-risk rows."""
    n, R, Rt = S.RUN_SIZES[quick]
    prob, tk, grid, common, meta = S.settings(quick)[index]
    out = pd.concat(S._setting_runs(prob, tk, grid, common, n, R, Rt, meta), ignore_index=True)
    return out[out.metric == "excess_risk"].reset_index(drop=True)


def test_a_setting_point_is_its_direct_computation_cached_and_verified(tmp_path):
    """One quick setting through the sweep: bit for bit the rows of its direct computation;
    a second run reads them from the cache; a damaged cache entry is detected, recomputed
    (with a warning) and gives the same rows again."""
    point = S.setting_points(True)[2]  # breast-cancer, Dirichlet split, ring
    assert point["problem"] == "logistic breast-cancer"
    want = _direct_rows(True, 2)
    cache = tmp_path / "cache"
    first = S.setting_frames(True, points=[point], cache=cache, jobs=1)
    assert first.summary.computed == 1 and first.summary.cached == 0
    got = first.frames[0]
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    for col in ("mean", "se", "bits", "gamma", "tuning_score"):
        assert np.array_equal(got[col].to_numpy(), want[col].to_numpy(), equal_nan=True), col
    # negative control: one unit in the last place of one mean is a difference
    off = want.copy()
    off.loc[len(off) // 2, "mean"] = np.nextafter(off.loc[len(off) // 2, "mean"], np.inf)
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(got, off, check_exact=True)

    again = S.setting_frames(True, points=[point], cache=cache, jobs=1)
    assert again.summary.cached == 1 and again.summary.computed == 0
    pd.testing.assert_frame_equal(again.frames[0], want, check_exact=True)

    payloads = [p for p in cache.glob("??/*") if p.suffix != ".json"]
    assert len(payloads) == 1
    blob = bytearray(payloads[0].read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    payloads[0].write_bytes(bytes(blob))
    with pytest.warns(UserWarning, match="recomputed"):
        mended = S.setting_frames(True, points=[point], cache=cache, jobs=1)
    assert mended.summary.computed == 1 and set(mended.summary.invalid) == {0}
    pd.testing.assert_frame_equal(mended.frames[0], want, check_exact=True)
