"""Negative controls of the library checks (issue 30, item 2, library half) and the
registry-reading meta-test (item 3).

* Every registered check has controls (:data:`convkit.bounds.controls.CONTROLS`): a false
  variant of its claim substituted in the registry, on which the same check code must say
  ``violated`` in the rows each control targets; and every ``holds`` row of the real check is
  made ``violated`` by some control (the rule of :func:`convkit.verdicts.apply_controls`:
  otherwise it would have to say ``measured``). The count controls / checks is printed.
* Every check reads its prediction from the registry: perturbing a covered result's
  expression (a constant, then an exponent) changes the ``theoretical`` of the check's rows
  of that result.

Quick mode (the checks simulate; the whole file takes well under a minute on two cores).
"""

from __future__ import annotations

import functools

import pytest
import sympy as sp

from convkit.bounds import CHECKS, COVERS, get
from convkit.bounds.controls import CONTROLS, run_control, scaled, substituted, times_power
from convkit.verdicts import HOLDS, VIOLATED, apply_controls


@functools.cache
def real_rows(check: str) -> tuple[dict, ...]:
    return tuple(CHECKS[check](True))


@functools.cache
def control_rows(check: str, i: int) -> tuple[dict, ...]:
    return tuple(run_control(check, CONTROLS[check][i], quick=True))


def test_every_check_has_a_control():
    assert set(CONTROLS) == set(CHECKS)
    n = sum(len(c) for c in CONTROLS.values())
    print(f"\nnegative controls: {n} controls for {len(CHECKS)} / {len(CHECKS)} checks")
    for check, controls in CONTROLS.items():
        assert controls, check
        for c in controls:
            assert c.result in COVERS[check], (check, c.result)


def test_substituted_restores_the_registry():
    before = get("compression.top_k")
    with substituted("compression.top_k", scaled(2)(before)):
        assert get("compression.top_k").evaluate(k=1, d=4) == pytest.approx(1.5)
    assert get("compression.top_k") is not None
    assert get("compression.top_k").evaluate(k=1, d=4) == pytest.approx(0.75)
    with pytest.raises(RuntimeError), substituted("compression.top_k", scaled(2)(before)):
        raise RuntimeError("inside")
    assert get("compression.top_k").evaluate(k=1, d=4) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="named"):
        with substituted("compression.rand_k", before):
            pass


@pytest.mark.parametrize(
    ("check", "i"), [(c, i) for c, cs in CONTROLS.items() for i in range(len(cs))]
)
def test_control_makes_the_check_say_violated(check, i):
    """The control's false claim makes each targeted row of the check say violated."""
    control = CONTROLS[check][i]
    rows = control_rows(check, i)
    results = {control.result, *control.also}
    hit = [
        r
        for r in rows
        if r["result"] in results and any(t in r["setting"] for t in control.targets)
    ]
    assert hit, f"{check}: control {control.describe!r} targets no row"
    bad = [
        (r["setting"][-60:], r["verdict"], r["reason"][:120])
        for r in hit
        if r["verdict"] != VIOLATED
    ]
    assert not bad, f"{check}: control {control.describe!r} left rows not violated: {bad}"


@pytest.mark.parametrize("check", list(CHECKS))
def test_every_holds_row_has_a_working_control(check):
    """apply_controls: a holds row keeps holds only if a control made the same row say
    violated; no row of a library check may lose its holds that way (a row no control can
    make fail reports measured in the check itself)."""
    rows = [dict(r) for r in real_rows(check)]
    ctl = {
        c.describe: [dict(r) for r in control_rows(check, i)] for i, c in enumerate(CONTROLS[check])
    }
    after = apply_controls(rows, ctl)
    lost = [
        r["setting"][-80:]
        for r, a in zip(rows, after)
        if r["verdict"] == HOLDS and a["verdict"] != HOLDS
    ]
    assert not lost, f"{check}: holds rows without a working control: {lost}"


#: checks whose rows compare the measured value with the registered one inside ``measured``
#: (a deviation to a tolerance, ``theoretical`` its target 0): for them a perturbation shows
#: in ``measured``
DEVIATION_ROWS = {
    "polyak_juditsky.exact_1d",
    "deepsqueeze.average_dynamics",
    "choco.average_dynamics",
    "w_eta.eigenvalues",
    "compression.scaled_sign",
}


def _perturbations(name: str) -> list:
    """A constant (x 1.37) and exponent (+1/2) perturbations of the result ``name``."""
    res = get(name)
    out = [scaled(1.37)]
    syms = {s.name for s in res.expression.free_symbols if isinstance(s, sp.Symbol)}
    out += [times_power(v, 0.5) for v in ("T", "T_all", "gamma", "gap", "omega", "P") if v in syms]
    return out


@pytest.mark.parametrize("check", list(CHECKS))
def test_checks_take_their_predictions_from_the_registry(check):
    """Perturbing each covered result changes the ``theoretical`` of the check's rows of that
    result, for at least one perturbation: the falsifications of the check's controls (their
    runs are reused), else a constant x 1.37 or an exponent + 1/2 (an exponent check does not
    move with a constant). The prediction is read from the registry, not typed in the check.
    For the checks of :data:`DEVIATION_ROWS` the perturbation shows in ``measured``."""
    base = real_rows(check)
    field = "measured" if check in DEVIATION_ROWS else "theoretical"
    for name in COVERS[check]:
        before = [str(r[field]) for r in base if r["result"] == name]

        def moved(rows: tuple | list, name: str = name, before: list = before) -> bool:
            return [str(r[field]) for r in rows if r["result"] == name] != before

        if any(
            moved(control_rows(check, i))
            for i, c in enumerate(CONTROLS[check])
            if name in (c.result, *c.also)
        ):
            continue
        for falsify in _perturbations(name):
            with substituted(name, falsify(get(name))):
                if moved(CHECKS[check](True)):
                    break
        else:
            raise AssertionError(f"{check}: no perturbation of {name} moves its {field}")
