"""Invalid input raises a clear error naming the parameter, the value and what is allowed."""

from __future__ import annotations

import re

import numpy as np
import pytest

import convkit as ck

PROB = ck.LeastSquares.gaussian(d=3, seed=0)
STEP = ck.PolyDecay(0.5, 0.75)

CASES = [
    # (description, callable, exception, pattern the message must contain)
    ("C <= 0", lambda: ck.PolyDecay(C=0, alpha=0.5), ValueError, r"C must be in \(0, inf\), got 0"),
    ("alpha < 0", lambda: ck.PolyDecay(C=1, alpha=-0.1), ValueError, r"alpha must be in \[0, 1\]"),
    ("alpha > 1", lambda: ck.PolyDecay(C=1, alpha=1.5), ValueError, r"alpha must be in \[0, 1\]"),
    ("gamma <= 0", lambda: ck.Constant(-1.0), ValueError, r"gamma must be in \(0, inf\)"),
    ("gamma NaN", lambda: ck.Constant(float("nan")), ValueError, r"gamma must be finite"),
    ("H <= 0", lambda: ck.Every(0), ValueError, r"H must be in \[1, inf\), got 0"),
    ("H not an int", lambda: ck.Every(2.5), TypeError, r"H must be an integer, got 2.5"),
    ("N <= 0", lambda: ck.Rounds(0), ValueError, r"N \(rounds\) must be in \[1, inf\)"),
    (
        "more rounds than steps",
        lambda: ck.simulate(PROB, ck.LocalSGD(2, STEP, comm=ck.Rounds(50)), steps=10),
        ValueError,
        r"N \(rounds\) must be <= the number of local steps n = 10, got 50",
    ),
    (
        "batch <= 0",
        lambda: ck.LocalSGD(2, STEP, batch=0),
        ValueError,
        r"batch must be in \[1, inf\)",
    ),
    ("workers <= 0", lambda: ck.LocalSGD(0, STEP), ValueError, r"workers must be in \[1, inf\)"),
    ("step not a schedule", lambda: ck.LocalSGD(2, 0.1), TypeError, r"step must be a StepSize"),
    ("bad comm spec", lambda: ck.LocalSGD(2, STEP, comm="sometimes"), ValueError, r"comm must be"),
    (
        "replicates <= 0",
        lambda: ck.simulate(PROB, ck.MBA(2, STEP), steps=5, replicates=0),
        ValueError,
        r"replicates must be in \[1, inf\), got 0",
    ),
    (
        "mismatched d of theta0",
        lambda: ck.simulate(PROB, ck.MBA(2, STEP), steps=5, theta0=np.zeros(4)),
        ValueError,
        r"theta0 must have shape \(d,\) = \(3,\)",
    ),
    (
        "NaN in theta0",
        lambda: ck.simulate(PROB, ck.MBA(2, STEP), steps=5, theta0=[0, np.nan, 0]),
        ValueError,
        r"theta0 must contain only finite values",
    ),
    (
        "gradients not divisible by P b",
        lambda: ck.simulate(PROB, ck.MBA(3, STEP), gradients=100),
        ValueError,
        r"gradients must be a multiple of workers \* batch = 3",
    ),
    (
        "both gradients and steps",
        lambda: ck.simulate(PROB, ck.MBA(2, STEP), gradients=100, steps=50),
        ValueError,
        r"exactly one of gradients",
    ),
    ("negative noise", lambda: ck.LeastSquares.gaussian(3, noise=-1), ValueError, r"noise must be"),
    (
        "bad spectrum",
        lambda: ck.LeastSquares.gaussian(3, spectrum="1/x"),
        ValueError,
        r"spectrum must be",
    ),
    (
        "non-positive eigenvalue",
        lambda: ck.LeastSquares.gaussian(3, spectrum=[1.0, 0.0, 1.0]),
        ValueError,
        r"eigenvalues must be finite and > 0",
    ),
    (
        "bad design",
        lambda: ck.LeastSquares([1.0], design="cauchy"),
        ValueError,
        r"design must be one of",
    ),
    (
        "theta_star of the wrong dimension",
        lambda: ck.LeastSquares.gaussian(3, theta_star=[1.0, 2.0]),
        ValueError,
        r"theta_star must have last dimension d = 3",
    ),
    (
        "tail outside [0, 1)",
        lambda: ck.simulate(PROB, ck.MBA(2, STEP), steps=5, tail=1.0),
        ValueError,
        r"tail must be in \[0, 1\)",
    ),
    (
        "duplicate labels",
        lambda: ck.simulate(PROB, [ck.MBA(2, STEP), ck.MBA(2, STEP)], steps=5),
        ValueError,
        r"labels must be unique",
    ),
    (
        "bad backend",
        lambda: ck.Backend("jax"),
        ValueError,
        r"backend must be one of \['numpy', 'cupy', 'array_api_strict'\], got 'jax'",
    ),
    ("bad dtype", lambda: ck.Backend("numpy", "float16"), ValueError, r"dtype must be one of"),
    (
        "geometric ratio < 1",
        lambda: ck.Geometric(first=1, ratio=0.5),
        ValueError,
        r"ratio must be in \[1, inf\)",
    ),
    (
        "record step < 1",
        lambda: ck.simulate(PROB, ck.MBA(2, STEP), steps=5, record=[0]),
        ValueError,
        r"record must list local steps >= 1",
    ),
    (
        "explicit step beyond n",
        lambda: ck.simulate(PROB, ck.LocalSGD(2, STEP, comm=ck.At((3, 9))), steps=5),
        ValueError,
        r"at must list local steps in \[1, n = 5\]",
    ),
]


@pytest.mark.parametrize("desc,func,exc,pattern", CASES, ids=[c[0] for c in CASES])
def test_invalid_input_is_rejected_clearly(desc, func, exc, pattern):
    with pytest.raises(exc, match=pattern):
        func()


def test_there_are_at_least_15_distinct_invalid_inputs():
    assert len({c[0] for c in CASES}) >= 15


def test_messages_name_parameter_and_value():
    with pytest.raises(ValueError) as info:
        ck.PolyDecay(C=-2.0, alpha=0.5)
    msg = str(info.value)
    assert re.search(r"\bC\b", msg) and "-2" in msg
