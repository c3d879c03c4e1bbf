"""One declaration per parameter (:class:`convkit.validation.Parameter`, declared on the class).

For every registered algorithm and problem class: every constructor argument is declared, with the
signature's default; every declared parameter, set to each of its invalid values in the
class's example, raises a ``ValueError`` / ``TypeError`` naming it (generated from the
declaration, in the manner of scikit-learn's ``check_param_validation``); the example itself
builds (the negative control: the raise comes from the one bad value); the sweep schema of
the kind is the declaration's.
"""

from __future__ import annotations

import argparse
import inspect
import math

import pytest

from convkit.algorithms.base import Algorithm
from convkit.problems.base import Problem
from convkit.sweep.registry import _lookup, kinds
from convkit.validation import REQUIRED, Parameter, check_real, integer, options, real


def _classes() -> list[type]:
    """Every registered algorithm and problem class (LocalSGD too: the registry builds it
    through the builders of local_sgd, mba and osa)."""
    from convkit.algorithms.local import LocalSGD
    from convkit.problems.least_squares import LeastSquares

    out = [LocalSGD, LeastSquares]
    for category in ("algorithm", "problem"):
        for name in kinds(category):
            builder = _lookup(category, name).builder
            if inspect.isclass(builder) and builder not in out:
                out.append(builder)
    return out


CLASSES = _classes()


def _cases() -> list[tuple[type, str, object]]:
    return [
        (cls, name, bad)
        for cls in CLASSES
        for name, p in cls.constructor_parameters().items()
        for bad in p.invalid_values()
    ]


def test_every_registered_class_declares_its_parameters():
    names = {c.__name__ for c in CLASSES}
    assert names >= {"LocalSGD", "FedAvgM", "CHOCOSGD", "SCAFFOLD", "HeterogeneousLogistic"}
    assert names >= {"LeastSquares", "LogisticRegression", "FiniteLogistic"}
    for cls in CLASSES:
        assert issubclass(cls, Algorithm | Problem)
        sig = {
            k: v for k, v in inspect.signature(cls).parameters.items() if v.kind != v.VAR_KEYWORD
        }
        declared = cls.constructor_parameters()
        assert set(sig) <= set(declared), (cls.__name__, set(sig) - set(declared))
        for name, p in declared.items():
            if name not in sig:  # taken through **kwargs: the base's declaration
                continue
            default = sig[name].default
            want = REQUIRED if default is inspect.Parameter.empty else default
            assert p.default == want or (p.default is REQUIRED and want is REQUIRED), (
                f"{cls.__name__}.{name}: declared default {p.default!r}, signature {want!r}"
            )


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_example_builds_and_passes_its_own_checks(cls):
    algo = cls.example()
    assert type(algo) is cls
    for name, p in cls.constructor_parameters().items():
        value = getattr(algo, name, None)
        if p.kind != "object" and isinstance(value, int | float | str):  # kept as given
            assert p.check(name, value) == value


@pytest.mark.parametrize(
    "cls,name,bad", _cases(), ids=lambda v: v.__name__ if inspect.isclass(v) else repr(v)
)
def test_an_invalid_value_raises_naming_the_parameter(cls, name, bad):
    settings = {**cls.example_settings(), name: bad}
    with pytest.raises((ValueError, TypeError)) as info:
        cls(**settings)
    assert name in str(info.value), f"{cls.__name__}({name}={bad!r}): {info.value}"


def test_every_declared_parameter_has_an_invalid_value():
    """An invalid-value test exists for every declared parameter (an object parameter lists
    the values its class refuses)."""
    missing = [
        f"{cls.__name__}.{name}"
        for cls in CLASSES
        for name, p in cls.constructor_parameters().items()
        if not p.invalid_values()
    ]
    assert not missing


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_sweep_schema_is_the_declaration(cls):
    category = "algorithm" if issubclass(cls, Algorithm) else "problem"
    names = [n for n in kinds(category) if _lookup(category, n).builder is cls]
    for kind in names:
        params = _lookup(category, kind).params
        for name, p in cls.constructor_parameters().items():
            q = params[name]
            assert q.required == p.required, (kind, name)
            if not p.required and q.default is not None and isinstance(p.default, int | float):
                assert q.default == p.default, (kind, name)
            if p.kind == "options":
                assert q.choices == p.options, (kind, name)
            if p.kind in ("int", "real"):
                assert q.type == {"int": "int", "real": "float"}[p.kind], (kind, name)


def test_a_declaration_checks_as_the_helpers_do():
    """The declaration's check is the validation helpers' (same messages), and its invalid
    values fail it while a valid value passes (negative control)."""
    beta = real(low=0, high=1, high_inclusive=False, default=0.9)
    assert beta.check("beta", 0.0) == 0.0
    with pytest.raises(ValueError) as a:
        beta.check("beta", 1.0)
    with pytest.raises(ValueError) as b:
        check_real("beta", 1.0, low=0, high=1, high_inclusive=False)
    assert str(a.value) == str(b.value) == "beta must be in [0, 1), got 1"
    for bad in beta.invalid_values():
        with pytest.raises((ValueError, TypeError)):
            beta.check("beta", bad)
    assert any(isinstance(v, float) and math.isnan(v) for v in beta.invalid_values())
    gamma_c = real(low=0, high=1, low_inclusive=False, symbol="gamma_c")
    with pytest.raises(ValueError, match=r"consensus_step \(gamma_c\) must be in \(0, 1\]"):
        gamma_c.check("consensus_step", 0.0)
    order = options("paper", "reference_code", default="paper")
    with pytest.raises(ValueError, match="order must be one of"):
        order.check("order", "papers")
    assert integer(low=1).allowed() == "integer >= 1"
    assert beta.allowed() == "number in [0, 1)"
    with pytest.raises(ValueError, match="Parameter kind"):
        Parameter("float")


def test_the_command_line_options_are_the_declarations():
    """``convkit simulate``'s options of the federated variants take their default, range and
    help from the classes' declarations: every declared invalid value is refused while
    parsing, the declared default is the option's."""
    from convkit.cli.simulate import ALGORITHMS, build_parser

    parser = build_parser()
    actions = {a.dest: a for a in parser._actions}
    seen = 0
    for cls_name, reads in ALGORITHMS.values():
        cls = getattr(__import__("convkit"), cls_name)
        for name in reads:
            p, action = cls.declared()[name], actions[name]
            assert p.allowed() in action.help, (name, action.help)
            assert action.default in (p.default, None)
            for bad in p.invalid_values():
                if isinstance(bad, str):  # a wrong type in Python; on the command line, text
                    continue
                with pytest.raises(argparse.ArgumentTypeError):
                    action.type(str(bad))
            action.type(str(p.default))  # the default parses (negative control)
            seen += 1
    assert seen >= 4


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if issubclass(c, Algorithm)], ids=lambda c: c.__name__
)
def test_describe_and_the_label_show_the_declared_settings(cls):
    """describe() holds every declared plain setting the instance keeps, by its constructor
    name and value; a setting declared ``shown`` appears in the default label as ``name=``
    (``shown="changed"``: only away from its default, also checked on the default value)."""
    algo = cls.example()
    desc = algo.describe()
    for name, p in cls.declared().items():
        value = getattr(algo, name, None)
        if name in ("workers", "batch", "name") or p.kind == "object":
            continue
        if isinstance(value, bool | int | float | str):
            assert desc[name] == value, (cls.__name__, name)
        if p.shown is True or (p.shown == "changed" and value != p.default):
            assert f"{name}=" in algo.default_label(), (cls.__name__, name)
        if p.shown == "changed":
            at_default = cls(**{**cls.example_settings(), name: p.default})
            assert f", {name}=" not in at_default.default_label(), (cls.__name__, name)


def _named_constructor_cases() -> list[tuple[type, str, str, object]]:
    return [
        (cls, method, name, bad)
        for cls in CLASSES
        for method in cls.named_constructors
        for name, p in cls.named_constructor_parameters(method).items()
        for bad in p.invalid_values()
    ]


def test_named_constructors_declare_their_signatures():
    """A class method that declares its parameters (``named_constructors``) declares every
    argument of its signature, with the signature's default."""
    seen = 0
    for cls in CLASSES:
        for method in cls.named_constructors:
            sig = dict(inspect.signature(getattr(cls, method)).parameters)
            declared = cls.named_constructor_parameters(method)
            assert list(declared) == list(sig), (cls.__name__, method)
            for name, p in declared.items():
                default = sig[name].default
                want = REQUIRED if default is inspect.Parameter.empty else default
                assert p.default == want or (p.default is REQUIRED and want is REQUIRED), (
                    f"{cls.__name__}.{method}.{name}: declared {p.default!r}, signature {want!r}"
                )
            seen += 1
    assert seen >= 3  # LeastSquares.gaussian, rademacher, additive
    from convkit.problems.least_squares import LeastSquares

    with pytest.raises(ValueError, match="method of LeastSquares must be one of"):
        LeastSquares.named_constructor_parameters("no_such_design")


@pytest.mark.parametrize(
    "cls,method,name,bad",
    _named_constructor_cases(),
    ids=lambda v: v.__name__ if inspect.isclass(v) else repr(v),
)
def test_a_named_constructor_refuses_an_invalid_value_naming_it(cls, method, name, bad):
    build = getattr(cls, method)
    build(d=4)  # the valid settings build (negative control)
    with pytest.raises((ValueError, TypeError)) as info:
        build(**{"d": 4, name: bad})
    message = str(info.value)
    # a spectrum 'kappa:K' with K < 1 is refused naming K (kappa), as the spectrum's parser does
    assert name in message or (name == "spectrum" and "kappa" in message), (method, message)


def test_the_problem_options_of_the_command_line_are_the_declarations():
    """``convkit simulate --d``, ``--seed`` and ``--spectrum`` take their range and help from
    ``LeastSquares.gaussian``'s declaration: its invalid numbers are refused while parsing."""
    from convkit.cli.simulate import build_parser
    from convkit.problems.least_squares import LeastSquares

    declared = LeastSquares.named_constructor_parameters("gaussian")
    actions = {a.dest: a for a in build_parser()._actions}
    for name in ("d", "seed"):
        p, action = declared[name], actions[name]
        assert p.allowed().removesuffix(" or None") in action.help, (name, action.help)
        for bad in p.invalid_values():
            if isinstance(bad, str):
                continue
            with pytest.raises(argparse.ArgumentTypeError):
                action.type(str(bad))
        action.type("3")  # a valid value parses (negative control)
    assert actions["seed"].default == declared["seed"].default
    assert declared["d"].doc in actions["d"].help
    assert declared["spectrum"].doc in actions["spectrum"].help
    for bad in declared["spectrum"].invalid_values():
        with pytest.raises(argparse.ArgumentTypeError):
            actions["spectrum"].type(bad)
    assert actions["spectrum"].type("kappa:10") == "kappa:10"


#: declared settings a problem's describe() does not show under their constructor names, and
#: why (describe() is kept as it is: results' metadata record it)
_PROBLEM_DESCRIBE_EXCEPTIONS = {
    ("FiniteSum", "tol"): "the solver's tolerance for the optimum, not the problem",
    ("FiniteLeastSquares", "tol"): "the solver's tolerance for the optimum, not the problem",
    ("FiniteLogistic", "tol"): "the solver's tolerance for the optimum, not the problem",
    ("HeterogeneousLeastSquares", "design"): "shown only when not the default 'gaussian'",
    ("HeterogeneousLogistic", "zeta2"): "describe() shows the target; the attribute the "
    "realized zeta^2 of the drawn node optima",
}


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if issubclass(c, Problem)], ids=lambda c: c.__name__
)
def test_a_problem_describe_shows_the_declared_settings(cls):
    """describe() holds every declared plain setting the problem keeps as an attribute, by its
    constructor name and value, except the listed ones (each with its reason, each still an
    exception: a stale entry fails)."""
    problem = cls.example()
    desc = problem.describe()
    for name, p in cls.declared().items():
        value = getattr(problem, name, None)
        if p.kind == "object" or not isinstance(value, bool | int | float | str):
            continue
        shown = name in desc and desc[name] == value
        if (cls.__name__, name) in _PROBLEM_DESCRIBE_EXCEPTIONS:
            assert not shown, f"{cls.__name__}.{name} is shown now: drop its exception"
        else:
            assert shown, (cls.__name__, name, value, desc.get(name))
