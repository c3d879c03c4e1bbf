"""``simulate(metrics=...)``: the selected error metrics, bit for bit those of the full call,
the others not computed, and the argument validated before any work."""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.problems.base import METRICS


def _algos():
    step = ck.PolyDecay(C=1.0, alpha=0.75)
    return [ck.MBA(4, step), ck.LocalSGD(4, step, comm=ck.At((5, 20, 60)), name="local")]


PROBLEMS = {
    "logistic": lambda: ck.LogisticRegression.gaussian(3, "1/i", theta_star=np.ones(3)),
    "least_squares": lambda: ck.LeastSquares.gaussian(3, "1/i", noise=0.5),
}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
@pytest.mark.parametrize("chosen", [("hnorm2",), ("dist2", "excess_risk")])
def test_selected_metrics_are_those_of_the_full_call(name, chosen):
    prob = PROBLEMS[name]()
    kw = dict(steps=60, replicates=300, seed=4, n_record=6, progress=False)
    full = ck.simulate(prob, _algos(), **kw)
    part = ck.simulate(prob, _algos(), **kw, metrics=list(chosen))
    order = [m for m in METRICS if m in chosen]  # recorded in METRICS order
    for label, cv in part.values.items():
        ref = full.values[label]
        assert cv.metrics == order
        for m in order:
            a = cv.values[:, :, cv.metrics.index(m), :]
            b = ref.values[:, :, ref.metrics.index(m), :]
            assert np.array_equal(a, b, equal_nan=True)
    assert set(part.frame.metric) == set(order)
    if "hnorm2" not in chosen:  # a metric not recorded is named as such
        with pytest.raises(ValueError, match="unknown metric 'hnorm2'"):
            part.final("hnorm2")


def test_logistic_without_excess_risk_skips_the_quadrature(monkeypatch):
    """Leaving ``excess_risk`` out does not evaluate the quadrature (negative control: with
    it, the same call reaches the quadrature)."""
    prob = PROBLEMS["logistic"]()
    kw = dict(steps=60, replicates=8, seed=1, n_record=3, progress=False)
    ck.simulate(prob, _algos(), **kw, metrics=["hnorm2"])  # warm-up compiles outside the patch

    def boom(*a, **k):
        raise AssertionError("quadrature evaluated")

    monkeypatch.setattr(type(prob), "excess_risk_quadrature", boom)
    ck.simulate(prob, _algos(), **kw, metrics=["hnorm2", "dist2"])
    with pytest.raises(AssertionError, match="quadrature evaluated"):
        ck.simulate(prob, _algos(), **kw, metrics=["excess_risk"])


def test_a_subclass_overriding_errors_keeps_its_errors():
    """A LogisticRegression subclass that overrides ``errors`` is recorded through its own
    ``errors`` (filtered), not the parent's selective path."""

    class Shifted(ck.LogisticRegression):
        def errors(self, theta):
            out = super().errors(theta)
            return {k: v + 1.0 for k, v in out.items()}

    base = PROBLEMS["logistic"]()
    sub = Shifted(base.h, base.Q, base.theta_star)
    theta = np.zeros((4, 3))
    got = sub.errors_of(theta, ("hnorm2",))["hnorm2"]
    assert np.array_equal(got, base.errors(theta)["hnorm2"] + 1.0)


@pytest.mark.parametrize(
    "bad, match",
    [
        (["hnorm"], "unknown"),
        ([], "empty"),
        (["hnorm2", "hnorm2"], "twice"),
        ("hnorm2", "sequence"),
    ],
)
def test_invalid_metrics_are_refused_before_any_work(bad, match):
    prob = PROBLEMS["least_squares"]()
    with pytest.raises((ValueError, TypeError), match=match) as err:
        ck.simulate(prob, _algos(), steps=10**9, replicates=10**6, metrics=bad)
    assert "metrics" in str(err.value)
