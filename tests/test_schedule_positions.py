"""Position forms of the communication schedules: PowerRounds, QuadraticRounds,
GeometricRounds, DriftClockRounds (positions as stated, duplicates, last step, validation)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from convkit.schedule_spec import comm_from_spec
from convkit.schedules import (
    Constant,
    DriftClockRounds,
    GeometricRounds,
    PolyDecay,
    PowerRounds,
    QuadraticRounds,
    Rounds,
    _ceil_guarded,
)


def _ref_power(n: int, N: int, p: Fraction) -> list[int]:
    """ceil(n (j/N)^p) for rational p = a/b with integer arithmetic only: the least m with
    m^b N^a >= n^b j^a."""
    a, b = p.numerator, p.denominator
    out = []
    for j in range(1, N + 1):
        m = max(1, int(n * (j / N) ** float(p)) - 2)
        while m**b * N**a < n**b * j**a:
            m += 1
        out.append(m)
    return sorted(set(out) | {n})


@pytest.mark.parametrize("n,N", [(10, 3), (100, 7), (1000, 1000), (17, 1), (1234, 55)])
def test_power_one_is_rounds(n, N):
    np.testing.assert_array_equal(PowerRounds(N, 1).steps(n), Rounds(N).steps(n))


@pytest.mark.parametrize(
    "n,N,p",
    [
        (100, 10, Fraction(2)),
        (1000, 31, Fraction(2)),
        (999, 17, Fraction(3)),
        (16, 4, Fraction(1, 2)),
        (27, 3, Fraction(3, 2)),
        (500, 40, Fraction(5, 2)),
        (10**6, 300, Fraction(2)),
        (1234, 50, Fraction(7, 4)),
    ],
)
def test_power_positions_exact(n, N, p):
    sched = PowerRounds(N, float(p))
    ref = _ref_power(n, N, p)
    np.testing.assert_array_equal(sched.steps(n), ref)
    assert sched.rounds(n) == len(ref) <= N
    assert sched.steps(n)[-1] == n


def test_quadratic_positions_and_duplicates():
    np.testing.assert_array_equal(QuadraticRounds(10).steps(100), [j * j for j in range(1, 11)])
    # n = 10, N = 10: ceil(10 j^2 / 100) = 1,1,1,2,3,4,5,7,9,10 -> 8 distinct rounds
    steps = QuadraticRounds(10).steps(10)
    np.testing.assert_array_equal(steps, [1, 2, 3, 4, 5, 7, 9, 10])
    assert QuadraticRounds(10).rounds(10) == 8
    assert QuadraticRounds(4) == PowerRounds(4, 2.0)


def test_integer_power_beyond_int64_uses_python_integers():
    n, N = 10**9, 3000  # n N^3 > 2^62
    steps = PowerRounds(N, 3).steps(n)
    j = np.array([1, 2, 1500, 2999])
    for jj in j:
        assert -(-(n * int(jj) ** 3) // N**3) in steps
    assert steps[-1] == n


@pytest.mark.parametrize("n,N", [(1000, 5), (1000, 3), (10**6, 6), (64, 6), (4096, 12), (50, 50)])
def test_geometric_positions(n, N):
    steps = GeometricRounds(N).steps(n)
    ref = set()
    for j in range(1, N + 1):
        x = n ** (j / N)
        r = round(x)
        # exact integer test: n^(j/N) == r  <=>  r^N == n^j
        ref.add(r if r**N == n**j else math.ceil(x))
    np.testing.assert_array_equal(steps, sorted(ref | {n}))
    assert GeometricRounds(N).rounds(n) == len(ref | {n}) <= N


def test_geometric_exact_powers_are_not_bumped():
    # 64^(j/6) = 2^j exactly: the float value 2^j +- ulp must not round up to 2^j + 1
    np.testing.assert_array_equal(GeometricRounds(6).steps(64), [2, 4, 8, 16, 32, 64])
    np.testing.assert_array_equal(GeometricRounds(3).steps(1000), [10, 100, 1000])


def test_ceil_guard():
    x = np.array([3.0000000000000004, 2.9999999999999996, 3.1, 5.0, 1e6 * (1 + 1e-15)])
    np.testing.assert_array_equal(_ceil_guarded(x), [3, 3, 4, 5, 1000000])


@pytest.mark.parametrize("cls", [lambda N: PowerRounds(N, 2.0), GeometricRounds, Rounds])
def test_budget_above_n_refused(cls):
    with pytest.raises(
        ValueError, match=r"N \(rounds\) must be <= the number of local steps n = 5"
    ):
        cls(6).steps(5)


def test_invalid_parameters_named():
    with pytest.raises(ValueError, match=r"p \(power\)"):
        PowerRounds(3, 0.0)
    with pytest.raises(ValueError, match=r"N \(rounds\)"):
        GeometricRounds(0)
    with pytest.raises(TypeError, match="step must be a StepSize"):
        DriftClockRounds(3, 0.1, mu=1.0, L=1.0, dist0=1.0, noise=1.0)
    with pytest.raises(ValueError, match="L"):
        DriftClockRounds(3, Constant(0.1), mu=1.0, L=0.5, dist0=1.0, noise=1.0)
    with pytest.raises(ValueError, match="noise"):
        DriftClockRounds(3, Constant(0.1), mu=1.0, L=1.0, dist0=1.0, noise=0.0)


def test_labels_and_specs():
    assert PowerRounds(5, 2.5).label == "power_rounds(N=5,p=2.5)"
    assert GeometricRounds(4).label == "geometric_rounds(N=4)"
    assert comm_from_spec("power:5:2.5") == PowerRounds(5, 2.5)
    assert comm_from_spec("quadratic:4") == QuadraticRounds(4)
    assert comm_from_spec("Geometric_Rounds: 3") == GeometricRounds(3)
    with pytest.raises(ValueError, match=r"comm must be .*'power:N:p'.*got 'power:5'"):
        comm_from_spec("power:5")


def test_drift_clock_rule_equal_clock_increments():
    step = PolyDecay(4.0, 0.75)
    sched = DriftClockRounds(10, step, mu=0.3, L=0.5, dist0=1.0, noise=0.25)
    n = 10_000
    tau = sched.clock(n)
    g = step.values(n)
    e = 1.0 * np.cumprod(np.maximum(np.abs(1 - 0.3 * g), np.abs(1 - 0.5 * g)))
    np.testing.assert_allclose(tau, np.cumsum(g * np.sqrt(0.25 + 0.25 * e**2)), rtol=1e-12)
    steps = sched.steps(n)
    assert steps.size == 10 and steps[-1] == n
    for j, k in enumerate(steps[:-1], start=1):  # first step reaching j tau(n) / N
        assert tau[k - 1] >= j * tau[-1] / 10 * (1 - 1e-12)
        assert k == 1 or tau[k - 2] < j * tau[-1] / 10 * (1 - 1e-12)


def test_drift_clock_denser_early_when_far_and_power_law_near():
    step = PolyDecay(4.0, 0.75)
    near = DriftClockRounds(10, step, mu=0.3, L=0.5, dist0=0.0, noise=0.25).steps(10_000)
    far = DriftClockRounds(10, step, mu=0.3, L=0.5, dist0=3.0, noise=0.25).steps(10_000)
    assert np.all(far[:-1] <= near[:-1]) and far[0] < near[0]
    # at theta* the clock is sqrt(sigma^2) sum gamma: round j at the first k whose partial
    # sum of the steps reaches j / N of the total
    g = step.values(10_000)
    cs = np.cumsum(g)
    ref = [int(np.searchsorted(cs, j / 10 * cs[-1] * (1 - 1e-12))) + 1 for j in range(1, 11)]
    ref[-1] = 10_000
    np.testing.assert_array_equal(near, ref)


def test_drift_clock_rounds_is_the_one_name_of_the_clock_schedule():
    """The rule places its rounds before the run by a deterministic clock and reads no
    iterate, so it is not called adaptive: one name, ``DriftClockRounds``, in the package,
    its ``__all__``, the schedules module and the table of schedule kinds; no alias."""
    import convkit
    import convkit.schedules as schedules
    from convkit.schedule_spec import COMM_KINDS, resolve_comm_kind

    assert "DriftClockRounds" in convkit.__all__ and "DriftClockRounds" in schedules.__all__
    assert convkit.DriftClockRounds is schedules.DriftClockRounds
    for module in (convkit, schedules):
        assert "AdaptiveRounds" not in module.__all__
        assert not hasattr(module, "AdaptiveRounds")
    assert COMM_KINDS["drift_clock_rounds"][0] is schedules.DriftClockRounds
    assert resolve_comm_kind("drift-clock-rounds") == ("drift_clock_rounds", {})
    for old in ("adaptive_rounds", "adaptive-rounds", "adaptive"):
        assert resolve_comm_kind(old) is None


@pytest.mark.parametrize("module_name", ["convkit", "convkit.schedules"])
def test_a_removed_name_points_to_its_successor(module_name):
    """``convkit.AdaptiveRounds`` raised a bare "no attribute" AttributeError; it now names the
    successor and what changed (one table of pointers, convkit._migration.REMOVED_NAMES)."""
    import importlib

    module = importlib.import_module(module_name)
    with pytest.raises(AttributeError, match=r"AdaptiveRounds was renamed DriftClockRounds.*"
                       r"not adaptive.*same arguments") as err:
        module.AdaptiveRounds  # noqa: B018
    assert err.value.name == "AdaptiveRounds"
    with pytest.raises(AttributeError, match=r"has no attribute 'NoSuchName'$"):
        module.NoSuchName  # noqa: B018


@pytest.mark.parametrize("spec", ["adaptive_rounds:4", {"kind": "adaptive_rounds", "N": 4}])
def test_a_removed_schedule_kind_points_to_its_successor(spec):
    from convkit.schedule_spec import comm_from_spec, comm_from_table

    build = comm_from_table if isinstance(spec, dict) else comm_from_spec
    with pytest.raises(ValueError, match=r"adaptive_rounds.*renamed drift_clock_rounds"):
        build(spec)


def test_a_removed_schedule_kind_in_a_sweep_points_to_its_successor():
    # the sweep's message suggested 'quadratic_rounds' for adaptive_rounds
    import sys
    from pathlib import Path

    import convkit.sweep as sw

    sys.path.insert(0, str(Path(__file__).parent))
    from sweep_helpers import tiny_spec

    spec = tiny_spec()
    spec["algorithm"]["comm"] = {"kind": "adaptive_rounds", "N": 3}
    with pytest.raises(sw.SpecError, match=r"adaptive_rounds was renamed drift_clock_rounds") as e:
        sw.Sweep.from_dict(spec)
    assert "did you mean" not in str(e.value)
