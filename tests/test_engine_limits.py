"""Limits of :func:`convkit.simulate`, checked before any work.

* ``record=`` steps beyond the run are refused (naming ``record``, the steps and ``n``);
* a request whose estimated memory exceeds the available memory is refused before anything
  large is allocated, with the estimate and the ways out;
* a run estimated to take long says so up front and shows progress;
* a large rotated least-squares problem warns about the cost of its random rotation.
"""

from __future__ import annotations

import re
import sys
import time
import tracemalloc
import warnings

import numpy as np
import pytest

import convkit as ck
from convkit.problems import least_squares
from convkit.recording import record_steps

sim = sys.modules["convkit.simulate"]
memory = sys.modules["convkit._memory"]

PROB = ck.LeastSquares.gaussian(d=4, seed=0)
STEP = ck.PolyDecay(0.3, 0.75)


# --------------------------------------------------------------------------- record= beyond n


def test_record_steps_beyond_n_are_refused():
    with pytest.raises(ValueError, match=r"record.*\[12, 30\].*n = 10"):
        record_steps(10, 5, [3, 12, 30])


def test_simulate_refuses_record_beyond_n():
    with pytest.raises(ValueError, match=r"record.*\[11\].*10"):
        ck.simulate(PROB, ck.MBA(2, STEP), steps=10, replicates=3, record=[5, 11])


def test_record_within_the_longest_run_is_kept_for_the_runs_that_reach_it():
    """With ``gradients=`` the algorithms run different n; a step beyond a shorter run but
    within the longest is recorded only where reached (not an error)."""
    algos = [ck.MBA(1, STEP), ck.MBA(4, STEP)]  # n = 40 and n = 10
    res = ck.simulate(PROB, algos, gradients=40, replicates=3, record=[7, 25], n_record=2)
    assert 25 in res.values[algos[0].label].steps
    assert 25 not in res.values[algos[1].label].steps
    assert 7 in res.values[algos[1].label].steps
    with pytest.raises(ValueError, match=r"record.*\[41\].*40"):
        ck.simulate(PROB, algos, gradients=40, replicates=3, record=[41])


# --------------------------------------------------------------------------- memory


def test_huge_request_is_refused_before_any_allocation():
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(MemoryError) as info:
            ck.simulate(PROB, ck.MBA(2, STEP), steps=100, replicates=1e9)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - t0
    assert peak < 20 * 2**20, peak  # nothing of the request's size was allocated
    assert elapsed < 5, elapsed
    msg = str(info.value)
    assert "replicates=1000000000" in msg
    assert "GiB" in msg and "available" in msg
    assert "fewer replicates" in msg
    # the recorded values alone exceed memory here: chunking cannot help, and it says so
    assert "chunking does not help" in msg
    assert "n_record" in msg


def test_refusal_names_float32_and_memory_limit_when_the_state_is_the_problem(monkeypatch):
    """A request whose chunk state (not its recorded values) exceeds memory: the ways out are
    float32 and a smaller memory_limit."""
    monkeypatch.setattr(memory, "available_memory", lambda backend=None: 50 * 2**20)
    prob = ck.LeastSquares.gaussian(d=200, seed=0)
    with pytest.raises(MemoryError) as info:
        ck.simulate(prob, ck.MBA(8, STEP), steps=10, replicates=2000, memory_limit=1e12)
    msg = str(info.value)
    assert 'dtype="float32"' in msg
    assert "memory_limit" in msg
    assert "chunking does not help" not in msg
    # the suggested memory_limit works: the same request, chunked, fits
    limit = float(re.search(r"e\.g\. memory_limit=([0-9.e+]+)", msg).group(1))
    res = ck.simulate(prob, ck.MBA(8, STEP), steps=10, replicates=2000, memory_limit=limit)
    assert res.meta["chunks"] > 1


def test_available_memory_is_positive():
    assert sim.available_memory() > 0


# --------------------------------------------------------------------------- long runs


def test_long_run_warns_up_front_and_shows_progress(monkeypatch, capsys):
    monkeypatch.setattr(sim, "LONG_RUN_SECONDS", 0.0)
    with pytest.warns(UserWarning, match=r"simulate: estimated .* s"):
        res = ck.simulate(PROB, ck.MBA(2, STEP), steps=30, replicates=5)
    assert res.meta["timing"]["estimated_seconds"] >= 0
    assert "simulate" in capsys.readouterr().err  # the progress bar


class _FakeTime:
    """``time.perf_counter`` of :mod:`convkit._parallel`, set by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def _estimate(monkeypatch, seconds_of_step) -> tuple[float, str | None]:
    """The Clock's estimate for 10000 steps of one replicate whose step ``k`` takes
    ``seconds_of_step(k)``, and its long-run message (limit 120 s)."""
    from convkit import _parallel

    fake = _FakeTime()
    monkeypatch.setattr(_parallel, "time", fake)
    clock = _parallel.Clock(10_000, 1, 0, 1, False, 120.0)
    k = 0
    while clock.estimate is None:
        k += 1
        fake.now += seconds_of_step(k)
        clock._time(k, 1)
    return clock.estimate, clock._message


def test_one_stall_in_the_timed_steps_does_not_multiply_the_estimate(monkeypatch):
    """1 ms steps with a 0.3 s stall at step 5: the first window (20 steps) alone would say
    160 s and warn; the faster of two windows says 10 s, silently.  A run that is slow in both
    windows (20 ms per step) still warns (200 s)."""
    est, msg = _estimate(monkeypatch, lambda k: 0.001 + (0.3 if k == 5 else 0.0))
    assert est == pytest.approx(10.0, rel=0.01) and msg is None
    est, msg = _estimate(monkeypatch, lambda k: 0.02)
    assert est == pytest.approx(200.0, rel=0.01) and "estimated 200 s" in msg


def test_short_run_is_silent(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ck.simulate(PROB, ck.MBA(2, STEP), steps=30, replicates=5)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- rotation cost


def test_large_rotation_warns_with_cost_and_alternative(monkeypatch):
    monkeypatch.setattr(least_squares, "ROTATION_WARN_SECONDS", 1e-9)
    with pytest.warns(UserWarning, match=r"rotate=True.*d = 30.*rotate=False"):
        prob = ck.LeastSquares.gaussian(d=30, rotate=True)
    assert prob.Q is not None


def test_small_rotation_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ck.LeastSquares.gaussian(d=30, rotate=True)
    assert least_squares.rotation_seconds(20000) > least_squares.ROTATION_WARN_SECONDS


def test_records_do_not_change_values():
    """record= adds record points without changing the numbers."""
    a = ck.simulate(PROB, ck.MBA(2, STEP), steps=10, replicates=4, n_record=3)
    b = ck.simulate(PROB, ck.MBA(2, STEP), steps=10, replicates=4, n_record=3, record=[4])
    va, vb = a.values["MBA(P=2, b=1)"], b.values["MBA(P=2, b=1)"]
    keep = np.isin(vb.steps, va.steps)
    assert np.array_equal(va.values, vb.values[keep], equal_nan=True)
