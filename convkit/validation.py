"""Parameter validation with precise messages.

Every public constructor validates its arguments with these helpers, so that a mistake
raises a :class:`ValueError` (or :class:`TypeError`) naming the parameter, the value
received and what is allowed, in the style of scikit-learn.

The algorithms declare each parameter once (:class:`Parameter`, built by :func:`integer`,
:func:`real`, :func:`options`, :func:`flag`, :func:`text`, :func:`instance`, in a class's
``parameters``: :class:`Declared`); that declaration drives the constructors' validation,
the sweep schema (:mod:`convkit.sweep.registry`), the command line's options
(:mod:`convkit.cli.simulate`) and the generated invalid-value tests
(``tests/test_parameter_declarations.py``).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "PARAMETER_KINDS",
    "REQUIRED",
    "Declared",
    "Parameter",
    "check_finite_array",
    "check_in",
    "check_int",
    "check_real",
    "check_seed",
    "flag",
    "seed",
    "instance",
    "integer",
    "options",
    "real",
    "text",
]


def _fmt(value: Any) -> str:
    return repr(value)


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float in the stated interval, or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_fmt(value)}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {_fmt(value)}")
    _check_interval(name, v, low, high, low_inclusive, high_inclusive)
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int in [low, high], or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {_fmt(value)}")
    v = int(value)
    _check_interval(name, v, low, high, True, True)
    return v


def _check_interval(
    name: str,
    v: float,
    low: float | None,
    high: float | None,
    low_inclusive: bool,
    high_inclusive: bool,
) -> None:
    bad_low = low is not None and (v < low if low_inclusive else v <= low)
    bad_high = high is not None and (v > high if high_inclusive else v >= high)
    if bad_low or bad_high:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        left = "[" if (low_inclusive and low is not None) else "("
        right = "]" if (high_inclusive and high is not None) else ")"
        raise ValueError(f"{name} must be in {left}{lo}, {hi}{right}, got {v:g}")


def check_in(name: str, value: Any, allowed: tuple | list | set) -> Any:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(map(str, allowed))}, got {_fmt(value)}")
    return value


def check_seed(name: str, value: Any) -> int:
    """``value`` as a seed of NumPy's ``SeedSequence``: an integer ``>= 0`` (``TypeError`` /
    ``ValueError`` naming ``name`` otherwise)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer >= 0, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {int(value)}")
    return int(value)


def check_finite_array(name: str, arr: Any) -> Any:
    """Raise if a dense or sparse array holds NaN or infinity."""
    data = arr.data if hasattr(arr, "tocsr") else np.asarray(arr)
    if not np.all(np.isfinite(data)):
        bad = int(np.size(data) - np.count_nonzero(np.isfinite(data)))
        raise ValueError(f"{name} must contain only finite values, found {bad} NaN or inf")
    return arr


# ------------------------------------------------------------------ declared parameters
class _Required:
    """The default of a parameter without one (a required argument)."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: the default of a required parameter (:class:`Parameter`)
REQUIRED: Any = _Required()

#: the kinds of :class:`Parameter`: an integer or a real number in an interval, a boolean, a
#: string, one of fixed options, or an object its class parses (a schedule, a topology...)
PARAMETER_KINDS = ("int", "real", "bool", "str", "options", "seed", "object")


@dataclass(frozen=True)
class Parameter:
    """One parameter of a class, declared once (in the spirit of scikit-learn's
    ``_parameter_constraints``: ``Interval``, ``StrOptions``, one validator).

    ``kind`` is one of :data:`PARAMETER_KINDS`; ``low``, ``high`` (and whether each is
    included) bound an ``int`` or ``real``; ``options`` are the values of an ``options``
    parameter; ``default`` is :data:`REQUIRED` for a required one; ``optional``: None is
    allowed as well; ``symbol``: the notation shown after the name in messages
    (``consensus_step (gamma_c) must be in (0, 1]``); ``doc``: what it is; ``wrong``: for an
    ``object`` parameter, values its class refuses (its check lives in the class's parser),
    which the generated invalid-value tests pass; ``shown``: the default label shows
    it as ``name=value`` (``True``: always, ``"changed"``: when it is not the default;
    :meth:`convkit.algorithms.base.Algorithm.shown_label`).  :meth:`check` validates a value with the
    helpers above (the messages name the parameter, the value and what is allowed);
    :meth:`invalid_values` gives values :meth:`check` refuses, :meth:`allowed` the allowed
    range in words (help texts).  The class declares its parameters in a ``parameters``
    mapping (:class:`Declared`).
    """

    kind: str
    default: Any = REQUIRED
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    options: tuple[Any, ...] = ()
    optional: bool = False
    symbol: str = ""
    doc: str = ""
    wrong: tuple[Any, ...] = ()
    shown: bool | str = False

    def __post_init__(self) -> None:
        if self.kind not in PARAMETER_KINDS:
            raise ValueError(f"Parameter kind must be one of {PARAMETER_KINDS}, got {self.kind!r}")
        if self.kind == "options" and not self.options:
            raise ValueError("an options Parameter needs its options")
        if self.shown not in (False, True, "changed"):
            raise ValueError(
                f"Parameter shown must be False, True or 'changed', got {self.shown!r}"
            )

    @property
    def required(self) -> bool:
        """Whether the parameter has no default."""
        return self.default is REQUIRED

    def check(self, name: str, value: Any) -> Any:
        """``value`` validated (and converted: an ``int``, a ``float``, a ``bool``), or a
        ``ValueError`` / ``TypeError`` naming ``name`` (with the symbol), the value and what
        is allowed; an ``object`` parameter is returned as it is (its class parses it)."""
        shown = f"{name} ({self.symbol})" if self.symbol else name
        if value is None and self.optional:
            return None
        if self.kind == "int":
            return check_int(shown, value, low=self.low, high=self.high)  # type: ignore[arg-type]
        if self.kind == "real":
            return check_real(
                shown, value, low=self.low, high=self.high,
                low_inclusive=self.low_inclusive, high_inclusive=self.high_inclusive,
            )  # fmt: skip
        if self.kind == "bool":
            if not isinstance(value, bool | np.bool_):
                raise TypeError(f"{shown} must be True or False, got {_fmt(value)}")
            return bool(value)
        if self.kind == "str":
            if not isinstance(value, str):
                raise TypeError(f"{shown} must be a string, got {_fmt(value)}")
            return value
        if self.kind == "options":
            return check_in(shown, value, self.options)
        if self.kind == "seed":
            return check_seed(shown, value)
        return value

    def allowed(self) -> str:
        """The allowed values in words: ``integer >= 1``, ``number in [0, 1)``, ``one of
        ['paper', 'reference_code']``, ..."""
        none = " or None" if self.optional else ""
        if self.kind in ("int", "real"):
            what = "integer" if self.kind == "int" else "number"
            lo, hi = self.low, self.high
            if lo is not None and hi is not None:
                left = "[" if self.low_inclusive else "("
                right = "]" if self.high_inclusive else ")"
                return f"{what} in {left}{lo:g}, {hi:g}{right}{none}"
            if lo is not None:
                return f"{what} {'>=' if self.low_inclusive else '>'} {lo:g}{none}"
            if hi is not None:
                return f"{what} {'<=' if self.high_inclusive else '<'} {hi:g}{none}"
            return f"{what}{none}"
        if self.kind == "bool":
            return "True or False"
        if self.kind == "str":
            return f"a string{none}"
        if self.kind == "options":
            return f"one of {list(self.options)}{none}"
        if self.kind == "seed":
            return f"integer >= 0{none}"
        return (self.doc or "an object") + none

    def invalid_values(self) -> tuple[Any, ...]:
        """Values :meth:`check` (or, for an ``object``, the class) refuses: outside the
        interval, of the wrong type, not an option (the generated invalid-value tests)."""
        if self.kind in ("int", "real"):
            out: list[Any] = ["1"]
            if self.low is not None:
                out.append(self.low - 1 if self.low_inclusive else self.low)
            if self.high is not None:
                out.append(self.high + 1 if self.high_inclusive else self.high)
            if self.kind == "int":
                out.append(1.5)
            else:
                out.append(float("nan"))
            return tuple(out)
        if self.kind == "bool":
            return ("yes", 1)
        if self.kind == "str":
            return (5,)
        if self.kind == "options":
            return ("no-such-option",)
        if self.kind == "seed":
            return (-1, "1", 1.5)
        return self.wrong


def integer(*, low: int | None = None, high: int | None = None, **kw: Any) -> Parameter:
    """An ``int`` :class:`Parameter` in ``[low, high]``."""
    return Parameter("int", low=low, high=high, **kw)


def real(**kw: Any) -> Parameter:
    """A ``real`` :class:`Parameter` (``low``, ``high``, ``low_inclusive``, ...)."""
    return Parameter("real", **kw)


def options(*values: Any, **kw: Any) -> Parameter:
    """An ``options`` :class:`Parameter`: one of ``values``."""
    return Parameter("options", options=tuple(values), **kw)


def flag(default: bool, **kw: Any) -> Parameter:
    """A ``bool`` :class:`Parameter`."""
    return Parameter("bool", default=default, **kw)


def text(**kw: Any) -> Parameter:
    """A ``str`` :class:`Parameter`."""
    return Parameter("str", **kw)


def seed(**kw: Any) -> Parameter:
    """A ``seed`` :class:`Parameter`: an integer ``>= 0`` (:func:`check_seed`)."""
    return Parameter("seed", **kw)


def instance(doc: str, *, wrong: tuple[Any, ...], **kw: Any) -> Parameter:
    """An ``object`` :class:`Parameter` its class parses (``doc``: what it must be; ``wrong``:
    values the class refuses)."""
    return Parameter("object", doc=doc, wrong=wrong, **kw)


class Declared:
    """A class whose parameters are declared once, in ``parameters`` (name ->
    :class:`Parameter`; a subclass declares what it adds or changes).

    :meth:`declared` merges the declarations along the class hierarchy, :meth:`checked`
    validates one value against its declaration (the constructors call it), and
    :meth:`example` builds a small instance from :meth:`example_settings` (the contract and
    label tests build every registered class from it; the generated invalid-value tests
    replace one setting at a time by an invalid value)."""

    parameters: ClassVar[Mapping[str, Parameter]] = {}
    #: declared parameters the constructor fixes itself (a subclass passing ``loss`` to its
    #: base's constructor, taking the rest as ``**kwargs``)
    fixed_parameters: ClassVar[tuple[str, ...]] = ()

    #: the declared parameters of the class's named constructors (its class methods such as
    #: ``LeastSquares.gaussian(d, spectrum, ...)``): method name -> parameter name ->
    #: :class:`Parameter`, read by :meth:`named_constructor_parameters`
    named_constructors: ClassVar[Mapping[str, Mapping[str, Parameter]]] = {}

    @classmethod
    def named_constructor_parameters(cls, method: str) -> dict[str, Parameter]:
        """The declared parameters of the named constructor ``method`` (a class method,
        :attr:`named_constructors`), in declaration order; a ``ValueError`` naming the
        methods that declare theirs if ``method`` is not one of them."""
        if method not in cls.named_constructors:
            raise ValueError(
                f"method of {cls.__name__} must be one of {sorted(cls.named_constructors)} "
                f"(its named constructors that declare their parameters), got {method!r}"
            )
        return dict(cls.named_constructors[method])

    @classmethod
    def declared(cls) -> dict[str, Parameter]:
        """Every declared parameter of the class (its own and its bases', the nearest
        declaration of a name winning)."""
        out: dict[str, Parameter] = {}
        for klass in reversed(cls.__mro__):
            out.update(vars(klass).get("parameters", {}))
        return out

    @classmethod
    def constructor_parameters(cls) -> dict[str, Parameter]:
        """The declared parameters the constructor takes (those of :meth:`declared` in its
        signature, in the signature's order; all of them for a constructor taking
        ``**kwargs``): the sweep schema, the command line and the generated tests read these."""
        declared = cls.declared()
        params = inspect.signature(cls).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return {k: v for k, v in declared.items() if k not in cls.fixed_parameters}
        return {name: declared[name] for name in params if name in declared}

    @classmethod
    def checked(cls, name: str, value: Any) -> Any:
        """``value`` validated against the declaration of ``name`` (:meth:`Parameter.check`)."""
        return cls.declared()[name].check(name, value)

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """Small settings of a valid instance, every required parameter given and the
        optional settings a label shows set away from their defaults."""
        raise NotImplementedError(f"{cls.__name__} declares no example_settings")

    @classmethod
    def example(cls) -> Any:
        """A small instance: ``cls(**cls.example_settings())``."""
        return cls(**cls.example_settings())
