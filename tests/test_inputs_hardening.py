"""Hardened library inputs: communication specs, one rule for schedules that cannot fit in n
local steps, TheoryResult.evaluate outside the symbols' assumptions, the exact-count marker
and the quick-tour notebook's inline figures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import convkit as ck
from convkit.schedule_spec import comm_from_spec

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ comm specs
@pytest.mark.parametrize("spec", ["rounds:abc", "every:x", "rounds:", "every:2.5", "rounds:1e3"])
def test_bad_comm_spec_names_comm_value_and_allowed_forms(spec):
    with pytest.raises(ValueError) as info:
        comm_from_spec(spec)
    msg = str(info.value)
    assert "comm" in msg and repr(spec) in msg
    for form in ("'mba'", "'osa'", "'every:H'", "'rounds:N'"):
        assert form in msg
    assert "invalid literal" not in msg


def test_good_comm_specs_still_parse():
    assert comm_from_spec("rounds:10") == ck.Rounds(10)
    assert comm_from_spec(" every: 5 ") == ck.Every(5)
    assert comm_from_spec("MBA") == ck.EveryStep()
    assert comm_from_spec("osa") == ck.Final()


def test_bad_comm_spec_through_local_sgd():
    with pytest.raises(ValueError, match=r"comm.*'rounds:N'.*got 'rounds:abc'"):
        ck.LocalSGD(4, ck.Constant(0.1), comm="rounds:abc")


# ------------------------------------------------------------------ schedule rule
@pytest.mark.parametrize(
    "schedule, what",
    [
        (ck.Rounds(500), "N"),
        (ck.Every(500), "H"),
        (ck.At((5, 500)), "at"),
        (ck.Geometric(first=500), "first"),
        (ck.Polynomial(power=2, scale=500), "scale"),
    ],
)
def test_a_schedule_that_cannot_fit_in_n_steps_is_refused(schedule, what):
    """One rule for every schedule: refuse n local steps it cannot place its rounds in."""
    with pytest.raises(ValueError, match=rf"{what}.*n = 100"):
        schedule.validate(100)
    with pytest.raises(ValueError, match=rf"{what}.*n = 100"):
        schedule.steps(100)
    with pytest.raises(ValueError, match=rf"{what}.*n = 100"):
        ck.LocalSGD(4, ck.Constant(0.1), comm=schedule).comm_counts(100, d=3)


@pytest.mark.parametrize(
    "schedule",
    [ck.Rounds(100), ck.Every(100), ck.At((100,)), ck.Geometric(first=100), ck.Polynomial(2, 100)],
)
def test_a_schedule_that_just_fits_is_accepted(schedule):
    schedule.validate(100)
    assert schedule.steps(100)[-1] == 100


def test_the_rule_is_stated_in_the_docstrings():
    import convkit.schedules as sch

    assert "cannot place" in sch.__doc__
    for cls in (sch.Every, sch.Rounds, sch.At, sch.Geometric, sch.Polynomial):
        assert "n local steps" in cls.__doc__ or "refused" in cls.__doc__, cls


# ------------------------------------------------------------------ evaluate assumptions
def test_evaluate_outside_a_symbol_assumption_raises():
    from convkit.bounds import get
    from convkit.bounds.core import ConditionError

    lim = get("sgd.ms_stability.1d")
    assert lim.evaluate(h=2.0, b=1) == pytest.approx(1 / 3)
    with pytest.raises(ConditionError, match=r"h.*-2.*positive"):
        lim.evaluate(h=-2, b=1)
    with pytest.raises(ConditionError, match=r"b.*0.*positive"):
        lim.evaluate(h=2.0, b=np.array([1, 0]))
    # check=False allows it (as for the conditions)
    assert np.isfinite(lim.evaluate(h=-2, b=1, check=False))


def test_evaluate_nonnegative_and_real_symbols():
    from convkit.bounds import get
    from convkit.bounds.core import ConditionError

    pj = get("averaged_sgd.polyak_juditsky")
    assert pj.evaluate(T=100, d=3, sigma=0.0) == 0.0  # nonnegative: 0 allowed
    with pytest.raises(ConditionError, match=r"sigma.*-1.*nonnegative"):
        pj.evaluate(T=100, d=3, sigma=-1.0)
    with pytest.raises(ConditionError, match=r"T.*nan"):
        pj.evaluate(T=float("nan"), d=3, sigma=1.0)
    w = get("w_eta.eigenvalues")  # lambda_i is real: negative values are fine
    assert w.evaluate(eta=0.5, lambda_i=-1.0) == pytest.approx(0.0)


def test_condition_error_is_a_value_error():
    from convkit.bounds.core import ConditionError

    assert issubclass(ConditionError, ValueError)


# ------------------------------------------------------------------ exact count marker
def test_exact_frames_carry_a_clear_count_marker():
    from convkit.exact import EXACT_COUNT, expected_error

    assert EXACT_COUNT == 0
    prob = ck.LeastSquares.gaussian(3, noise=0.5)
    ex = expected_error(prob, [ck.LocalSGD(2, ck.Constant(0.1), comm="every:5")], steps=20)
    f = ex.frame
    assert f["count"].dtype == np.int64 and (f["count"] == EXACT_COUNT).all()
    assert (f["se"] == 0).all()
    assert f["count"].max() < 2**31
    mc = ck.simulate(
        prob, [ck.LocalSGD(2, ck.Constant(0.1), comm="every:5")], steps=20, replicates=3
    )
    assert (mc.frame["count"] >= 1).all()  # Monte Carlo rows never carry the marker
    assert ex.meta["count"] == EXACT_COUNT


def test_exact_count_is_documented():
    from convkit.exact import dispatch

    assert "count = 0" in dispatch.__doc__
    assert "2**53" not in dispatch.__doc__
    assert "count = 0" in (REPO / "README.md").read_text()


# ------------------------------------------------------------------ notebook
def test_quickstart_notebook_shows_its_figure_inline():
    nb = json.loads((REPO / "notebooks" / "quickstart.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert 'use("Agg")' not in code and "use('Agg')" not in code
    assert "%matplotlib inline" in code


# ------------------------------------------------------------------ strings and seeds in problems
@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: ck.HeterogeneousLeastSquares(3, 2, 0.0, node_spectra=[["a", 1, 1], [1, 1, 1]]),
         "node_spectra"),
        (lambda: ck.HeterogeneousLeastSquares(3, 2, 0.0, theta_star=["a", 1, 1]), "theta_star"),
        (lambda: ck.HeterogeneousLeastSquares(3, 2, 0.0, spectrum=["a", 1, 1]), "spectrum"),
        (lambda: ck.HeterogeneousLogistic(3, 2, beta=["a", 1, 1]), "beta"),
        (lambda: ck.LeastSquares.gaussian(3, ["a", 1, 1]), "spectrum"),
        (lambda: ck.LeastSquares.gaussian(3, "flat", theta_star=["a", 1, 1]), "theta_star"),
        (lambda: ck.LogisticRegression.gaussian(3, theta_star=["a", 1, 1]), "theta_star"),
    ],
    ids=["hls-node_spectra", "hls-theta_star", "hls-spectrum", "hlog-beta", "ls-spectrum",
         "ls-theta_star", "logistic-theta_star"],
)
def test_a_string_in_a_numeric_array_names_the_parameter(build, name):
    # was: ValueError: could not convert string to float: 'a' (no parameter named)
    with pytest.raises(TypeError, match=rf"^{name} must be an array of real numbers, got an "
                       r"entry 'a'"):
        build()


@pytest.mark.parametrize(
    "build",
    [
        lambda s: ck.HeterogeneousLeastSquares(3, 2, 0.0, seed=s),
        lambda s: ck.HeterogeneousLogistic(3, 2, seed=s),
        lambda s: ck.LeastSquares.gaussian(3, "flat", seed=s),
        lambda s: ck.LogisticRegression.gaussian(3, seed=s, eval_size=64),
    ],
    ids=["hls", "hlog", "ls", "logistic"],
)
def test_a_negative_seed_names_the_parameter(build):
    # was: ValueError: expected non-negative integer (NumPy's SeedSequence, no name)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        build(-1)


def test_a_string_in_theta0_names_theta0():
    # was: ValueError: could not convert string to float: np.str_('a')
    prob = ck.LeastSquares.gaussian(3)
    with pytest.raises(TypeError, match=r"^theta0 must be an array of real numbers, got .*'a'"):
        ck.simulate(prob, ck.MBA(1, ck.Constant(0.1)), steps=5, replicates=2,
                    theta0=["a", 0, 0])
