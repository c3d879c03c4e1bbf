"""The registry of kinds: :class:`Param`, :class:`Kind`, :func:`register`, :func:`kinds`,
the built-in kinds and those discovered in the modules of the packages
:mod:`convkit.problems` and :mod:`convkit.algorithms` (every public concrete subclass of
``Problem`` / ``Algorithm`` defined there, under its snake-case name: no list to keep).
A class that declares its parameters (:class:`convkit.validation.Declared`) gets its schema
from the declaration (:func:`params_from_declaration`) and its example
(``example_settings``) as the kind's."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_REQUIRED = object()
#: default of a signature parameter whose default is not JSON: left to the builder
_OMIT = object()

_TYPES = ("any", "int", "float", "str", "bool", "int_list", "float_list", "str_list", "table")


@dataclass(frozen=True)
class Param:
    """One parameter of a kind.

    ``type``: one of ``any, int, float, str, bool, int_list, float_list, str_list, table``;
    ``default``: the default (omit for a required parameter); ``choices``: allowed values;
    ``nested``: a registry category whose ``{kind = ...}`` tables this parameter accepts (the
    table is built into an object before the kind's builder is called; strings pass through
    unchanged unless the category knows how to parse them).
    """

    type: str = "any"
    default: Any = _REQUIRED
    choices: tuple | None = None
    nested: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.type not in _TYPES:
            raise ValueError(f"Param type must be one of {_TYPES}, got {self.type!r}")

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class Kind:
    """A registered kind: its category, name, builder and parameters."""

    category: str
    name: str
    builder: Callable[..., Any]
    params: dict[str, Param]
    doc: str = ""
    #: small settings of a valid instance (``builder(**example())``), or None: the contract
    #: tests build every registered kind from it
    example: Callable[[], dict[str, Any]] | None = None


_REGISTRY: dict[str, dict[str, Kind]] = {}
_ALIASES: dict[str, dict[str, str]] = {}


def _comm_resolver(name: str) -> tuple[str, dict[str, Any]] | None:
    from convkit.schedule_spec import resolve_comm_kind

    return resolve_comm_kind(name)


def _compressor_resolver(name: str) -> tuple[str, dict[str, Any]] | None:
    from convkit.compression import resolve_compressor_kind

    hit = resolve_compressor_kind(name)
    return None if hit is None else (hit[0].replace("-", "_"), hit[1])


#: categories whose names (and aliases, some of which fix parameters: ``quadratic_rounds`` is
#: ``power_rounds`` with ``p = 2``) resolve through the model module's own table: category ->
#: name -> ``(registered kind, fixed parameters)`` or None
_RESOLVERS: dict[str, Callable[[str], tuple[str, dict[str, Any]] | None]] = {
    "comm": _comm_resolver,
    "compressor": _compressor_resolver,
}
#: parameters named like this take nested {kind = ...} tables of that category
_NESTED_BY_NAME = {
    "step": "step",
    "comm": "comm",
    "topology": "topology",
    "graph": "topology",
    "compressor": "compressor",
    "compression": "compressor",
}
_ANNOTATION_TYPES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "list[int]": "int_list",
    "list[float]": "float_list",
    "list[str]": "str_list",
    "tuple[int, ...]": "int_list",
    "Sequence[int]": "int_list",
}


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return s.replace("-", "_").lower()


def params_from_signature(builder: Callable[..., Any]) -> dict[str, Param]:
    """Parameters of ``builder`` read from its signature.

    Types come from simple annotations (``int``, ``float``, ``str``, ``bool``, ``X | None``)
    or, without one, from a ``bool`` or ``str`` default; anything else is ``any``.  Parameters
    named ``step``, ``comm``, ``topology``/``graph`` and ``compressor``/``compression`` accept
    nested tables of that category.
    """
    target = builder.__init__ if inspect.isclass(builder) else builder
    sig = inspect.signature(target)
    out: dict[str, Param] = {}
    for name, p in sig.parameters.items():
        if name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
        parts = [a.strip() for a in str(ann).split("|") if a.strip() and a.strip() != "None"]
        typ = "any"
        if len(parts) == 1 and parts[0] in _ANNOTATION_TYPES:
            typ = _ANNOTATION_TYPES[parts[0]]
        elif p.default is not p.empty and isinstance(p.default, bool | str):
            typ = "bool" if isinstance(p.default, bool) else "str"
        nested = _NESTED_BY_NAME.get(name)
        if nested:
            typ = "any"
        default = _REQUIRED if p.default is p.empty else p.default
        if default is not _REQUIRED and not _jsonable(default):
            default = _OMIT
        out[name] = Param(typ, default, nested=nested)
    return out


#: sweep type of each kind of declared parameter (:data:`convkit.validation.PARAMETER_KINDS`)
_DECLARED_TYPES = {
    "int": "int",
    "real": "float",
    "bool": "bool",
    "str": "str",
    "options": "str",
    "seed": "int",
    "object": "any",
}


def params_from_declaration(cls: type) -> dict[str, Param]:
    """Parameters of a class that declares them (``cls.constructor_parameters()``,
    :class:`convkit.validation.Declared`): type, default, options and doc from the
    declaration, nested tables by name as :func:`params_from_signature`; a constructor
    argument the class does not declare is read from the signature."""
    from convkit.validation import REQUIRED

    out = params_from_signature(cls)
    for name, p in cls.constructor_parameters().items():  # type: ignore[attr-defined]
        nested = _NESTED_BY_NAME.get(name)
        default = _REQUIRED if p.default is REQUIRED else p.default
        if default is not _REQUIRED and not _jsonable(default):
            default = _OMIT
        out[name] = Param(
            "any" if nested else _DECLARED_TYPES[p.kind],
            default,
            choices=p.options or None,
            nested=nested,
            doc=p.allowed() if p.kind == "object" or not p.doc else f"{p.doc}; {p.allowed()}",
        )
    return out


def _declares(builder: Any) -> bool:
    return inspect.isclass(builder) and callable(getattr(builder, "constructor_parameters", None))


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def register(
    category: str,
    kind: str,
    builder: Callable[..., Any],
    params: Mapping[str, Param] | None = None,
    *,
    aliases: Iterable[str] = (),
    replace: bool = False,
    doc: str = "",
    example: Callable[[], dict[str, Any]] | None = None,
) -> Kind:
    """Register ``kind`` in ``category`` (e.g. ``register("algorithm", "dpsgd", DPSGD)``).

    ``builder(**params)`` builds the object; ``params`` (name -> :class:`Param`) defaults to
    :func:`params_from_declaration` for a class that declares its parameters, else
    :func:`params_from_signature`; ``example`` gives small settings of a valid instance (a
    declaring class's ``example_settings`` by default).  Registering an existing kind raises unless
    ``replace=True``.  Kinds used by a sweep running in worker processes must be registered
    in an importable module: list it under ``imports = [...]`` in the spec.
    """
    if not isinstance(category, str) or not category:
        raise ValueError(f"category must be a non-empty string, got {category!r}")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"kind must be a non-empty string, got {kind!r}")
    if not callable(builder):
        raise TypeError(f"builder must be callable, got {builder!r}")
    table = _REGISTRY.setdefault(category, {})
    if kind in table and not replace:
        raise ValueError(f"{category} kind {kind!r} is already registered (pass replace=True)")
    if params is not None:
        ps = dict(params)
    else:
        ps = (
            params_from_declaration(builder)
            if _declares(builder)
            else params_from_signature(builder)
        )
    if example is None and _declares(builder):
        example = builder.example_settings
    for name, p in ps.items():
        if not isinstance(p, Param):
            raise TypeError(f"params[{name!r}] must be a Param, got {p!r}")
    first = (inspect.getdoc(builder) or "").split("\n")[0]
    k = Kind(category, kind, builder, ps, doc or first, example)
    table[kind] = k
    for a in aliases:
        _ALIASES.setdefault(category, {})[a] = kind
    return k


def kinds(category: str | None = None) -> dict[str, list[str]] | list[str]:
    """Registered kind names: of one category (a list) or of all (a dict)."""
    _ensure_registry()
    if category is not None:
        return sorted(_REGISTRY.get(category, {}))
    return {c: sorted(t) for c, t in sorted(_REGISTRY.items())}


def aliases(category: str) -> list[str]:
    """The other names a category's kinds answer to (sorted), besides :func:`kinds`."""
    _ensure_registry()
    names = set(_ALIASES.get(category, {}))
    if category == "comm":
        from convkit.schedule_spec import COMM_ALIASES

        names |= set(COMM_ALIASES)
    elif category == "compressor":
        from convkit.compression import COMPRESSOR_ALIASES

        names |= set(COMPRESSOR_ALIASES)
    return sorted(names - set(_REGISTRY.get(category, {})))


def resolve(category: str, kind: Any) -> tuple[Kind | None, dict[str, Any]]:
    """The registered kind a name stands for and the parameters the name fixes (an alias such
    as ``quadratic_rounds`` fixes ``p = 2``; ``{}`` for a plain name), ``(None, {})`` when
    unknown.  Comm and compressor names resolve through the model modules' tables
    (:data:`convkit.schedule_spec.COMM_ALIASES`, :data:`convkit.compression.COMPRESSOR_ALIASES`),
    the others through the aliases given to :func:`register`."""
    _ensure_registry()
    resolver = _RESOLVERS.get(category)
    hit = resolver(kind) if resolver is not None and isinstance(kind, str) else None
    if hit is not None and hit[0] in _REGISTRY.get(category, {}):
        return _REGISTRY[category][hit[0]], dict(hit[1])
    return _lookup(category, kind), {}


def _lookup(category: str, kind: Any) -> Kind | None:
    _ensure_registry()
    table = _REGISTRY.get(category, {})
    if not isinstance(kind, str):
        return None
    name = _ALIASES.get(category, {}).get(kind, kind)
    if name not in table:
        alt = _snake(kind)
        name = _ALIASES.get(category, {}).get(alt, alt)
    return table.get(name)


# ----------------------------------------------------------------- built-in kinds
_BUILTINS_DONE = False
_LAZY_DONE = False
#: modules of the project whose kinds could not be registered: module -> "Error: message"
#: (named in "unknown kind" errors; a module that does not exist is not an error)
_LAZY_ERRORS: dict[str, str] = {}
#: the packages whose modules are scanned for the kinds of a category
_PACKAGES = (("problem", "convkit.problems"), ("algorithm", "convkit.algorithms"))


def _package_modules() -> list[tuple[str, str]]:
    """``(category, module)`` for every public module of the :data:`_PACKAGES` (those whose
    name does not start with an underscore), in name order."""
    out = []
    for category, package in _PACKAGES:
        pkg = importlib.import_module(package)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                out.append((category, f"{package}.{info.name}"))
    return out


def _least_squares(design: str = "gaussian", **kw: Any) -> Any:
    from convkit.problems import LeastSquares

    return getattr(LeastSquares, design)(**kw)


def _local(comm_default: str | None) -> Callable[..., Any]:
    def build(**kw: Any) -> Any:
        from convkit.algorithms.local import LocalSGD
        from convkit.schedules import EveryStep, Final

        if comm_default == "mba":
            kw["comm"] = EveryStep()
        elif comm_default == "osa":
            kw["comm"] = Final()
        name = kw.get("name")
        if name is None and comm_default is not None:
            kw["name"] = f"{comm_default.upper()}(P={kw['workers']}, b={kw.get('batch', 1)})"
        return LocalSGD(**kw)

    return build


def _schedule(cls_name: str) -> Callable[..., Any]:
    """A builder of the step-size class ``cls_name`` of :mod:`convkit.schedules`."""

    def build(**kw: Any) -> Any:
        from convkit import schedules

        return getattr(schedules, cls_name)(**kw)

    return build


def _register_builtins() -> None:
    P = Param
    register(
        "problem",
        "least_squares",
        _least_squares,
        {
            "design": P("str", "gaussian", choices=("gaussian", "rademacher", "additive")),
            "d": P("int"),
            "spectrum": P("any", "flat", doc="'flat', '1/i', '1/i^2', 'kappa:K' or a list"),
            "noise": P("float", 1.0),
            "rotate": P("bool", False),
            "seed": P("int", 0, doc="seed of the problem instance (theta*, rotation)"),
        },
        aliases=("ls", "leastsquares"),
        doc="convkit.LeastSquares.<design>(d, spectrum, noise, rotate, seed)",
        example=lambda: {"d": 4, "spectrum": "1/i"},
    )
    from convkit.algorithms.local import LocalSGD

    # LocalSGD's declared parameters; MBA and OSA fix the communication
    local = params_from_declaration(LocalSGD)
    algo = {k: v for k, v in local.items() if k != "comm"}
    register(
        "algorithm",
        "local_sgd",
        _local(None),
        local,
        aliases=("localsgd", "local"),
        doc="convkit.LocalSGD(workers, step, comm, batch, name, float_bits)",
        example=LocalSGD.example_settings,
    )

    def fixed_comm() -> dict[str, Any]:
        return {k: v for k, v in LocalSGD.example_settings().items() if k != "comm"}

    register(
        "algorithm", "mba", _local("mba"), algo, doc="LocalSGD communicating every step",
        example=fixed_comm,
    )  # fmt: skip
    register(
        "algorithm", "osa", _local("osa"), algo, doc="LocalSGD communicating once",
        example=fixed_comm,
    )  # fmt: skip
    register(
        "step",
        "poly",
        _schedule("PolyDecay"),
        {"C": P("float"), "alpha": P("float"), "k0": P("float", 0.0)},
        aliases=("polydecay", "poly_decay"),
        doc="gamma_k = C (k + k0)^-alpha",
    )
    register("step", "constant", _schedule("Constant"), {"gamma": P("float")})
    from convkit.schedule_spec import COMM_KINDS

    # one name per schedule class, from the schedules' own table (its aliases resolve through
    # convkit.schedule_spec.COMM_ALIASES, see _RESOLVERS)
    for name, (cls, _) in COMM_KINDS.items():
        register("comm", name, cls, doc=(inspect.getdoc(cls) or "").split("\n")[0])


def _register_lazy() -> None:
    """Register topology, compressor and (when present) other problems and algorithms."""
    from convkit.topology_spec import TOPOLOGY_CONSTRUCTORS

    for name, fn in TOPOLOGY_CONSTRUCTORS.items():
        if name not in _REGISTRY.get("topology", {}):
            register("topology", name, fn)
    from convkit.compression import COMPRESSORS

    # one kind per compressor class; the aliases resolve through _RESOLVERS
    for name, cls in COMPRESSORS.items():
        key = name.replace("-", "_")
        if key not in _REGISTRY.get("compressor", {}):
            register("compressor", key, cls)
    from convkit.algorithms.base import Algorithm
    from convkit.problems.base import Problem
    from convkit.validation import Declared

    bases = {"problem": Problem, "algorithm": Algorithm}
    skip = set(
        vars(Declared)
    )  # the declaration's own class methods (example_settings) build no kind
    for category, modname in _package_modules():
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name != modname:  # the module exists but one of its imports is missing
                _LAZY_ERRORS[modname] = f"{type(exc).__name__}: {exc}"
            continue
        except Exception as exc:  # a broken module: its kinds are missing, and we say why
            _LAZY_ERRORS[modname] = f"{type(exc).__name__}: {exc}"
            continue
        names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
        for attr in names:
            obj = getattr(mod, attr, None)
            if not (inspect.isclass(obj) and issubclass(obj, bases[category])):
                continue
            if inspect.isabstract(obj) or obj.__module__ != mod.__name__:
                continue
            key = _snake(attr)
            if key in _REGISTRY.get(category, {}):
                continue
            try:
                register(category, key, obj, aliases=(attr.lower(),))
            except Exception as exc:  # pragma: no cover - unusual signatures
                _LAZY_ERRORS[f"{modname}.{attr}"] = f"{type(exc).__name__}: {exc}"
                continue
            # problems built from arrays usually offer scalar-parameter constructors
            # (LogisticRegression.gaussian(d, spectrum, ...)): register them as <kind>_<name>
            for meth, raw in vars(obj).items():
                if meth.startswith("_") or not isinstance(raw, classmethod) or meth in skip:
                    continue
                sub = f"{key}_{meth}"
                if sub not in _REGISTRY.get(category, {}):
                    examples = getattr(obj, "constructor_examples", {})
                    example = None
                    if meth in examples:
                        example = (lambda settings: lambda: dict(settings))(examples[meth])
                    try:
                        register(category, sub, getattr(obj, meth), example=example)
                    except Exception:  # pragma: no cover
                        continue
    if "logistic_regression_gaussian" in _REGISTRY.get("problem", {}):
        _ALIASES.setdefault("problem", {}).setdefault("logistic", "logistic_regression_gaussian")


def _ensure_registry() -> None:
    global _BUILTINS_DONE, _LAZY_DONE
    if not _BUILTINS_DONE:
        _BUILTINS_DONE = True
        _register_builtins()
    if not _LAZY_DONE:
        _LAZY_DONE = True
        _register_lazy()
