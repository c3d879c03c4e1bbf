"""The ``convkit simulate`` command line: one Local-SGD run (or one of its federated variants,
FedAvgM and FedAdam, :mod:`convkit.algorithms.federated`) on a Gaussian least-squares problem,
its averaged-iterate curve printed as a table.

Every option is documented by ``convkit simulate --help`` (meaning, default, allowed values).
A bad value is answered by one line on stderr naming the option, the value and what is allowed,
and exit code 2 (never a traceback): ranges are checked while parsing, and the errors the
library raises while building and running (a budget that is not a multiple of the workers, more
rounds than local steps) are mapped back to the option they come from.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from convkit.cli._parser import OneLineParser

__all__ = ["build_parser", "main"]

PROG = "convkit simulate"
#: columns of the curve printed; "mean" is printed under the name of what it is the mean of,
#: ``<metric>_avg`` (the metric of the averaged iterate, e.g. ``hnorm2_avg``)
COLUMNS = ["step", "gradients", "rounds", "mean", "se", "count"]


class UsageError(Exception):
    """A bad command-line value: ``option``, its ``value`` and the message (what is allowed)."""

    def __init__(self, option: str, value: Any, message: str) -> None:
        super().__init__(f"{option} {value}: {message}")
        self.option, self.value, self.message = option, value, message


def _integer(low: int) -> Callable[[str], int]:
    """Argparse type: an integer ``>= low``."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text}")
        return v

    parse.__name__ = f"integer >= {low}"
    return parse


def _real(interval: str, test: Callable[[float], bool]) -> Callable[[str], float]:
    """Argparse type: a finite real number in ``interval`` (``test`` says whether it is)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = math.nan
        if not math.isfinite(v) or not test(v):
            raise argparse.ArgumentTypeError(f"must be a number in {interval}, got {text!r}")
        return v

    parse.__name__ = f"number in {interval}"
    return parse


def _declared(name: str, cls_names: Sequence[str]) -> tuple[Any, Any]:
    """The declaration of parameter ``name`` in the classes ``cls_names`` of convkit
    (:class:`convkit.validation.Parameter`), and its default where they all share it (else
    None: each class's own default applies)."""
    import convkit as ck

    decls = [getattr(ck, c).declared()[name] for c in cls_names]
    first = decls[0]
    same = all(d.default == first.default for d in decls)
    return first, first.default if same and not first.required else None


def _gaussian_parameter(name: str) -> Any:
    """The declaration of parameter ``name`` of ``LeastSquares.gaussian`` (the problem this
    command builds: :meth:`convkit.validation.Declared.named_constructor_parameters`)."""
    import convkit as ck

    return ck.LeastSquares.named_constructor_parameters("gaussian")[name]


def _declared_type(p: Any) -> Callable[[str], Any]:
    """Argparse type of a declared ``int``, ``seed`` or ``real`` parameter: its interval,
    checked by the declaration itself (:meth:`convkit.validation.Parameter.check`)."""
    if p.kind == "seed":
        return _integer(0)
    if p.kind == "int":
        return _integer(int(p.low))
    lo = "-inf" if p.low is None else f"{p.low:g}"
    hi = "inf" if p.high is None else f"{p.high:g}"
    left = "[" if p.low is not None and p.low_inclusive else "("
    right = "]" if p.high is not None and p.high_inclusive else ")"

    def test(v: float) -> bool:
        try:
            p.check("value", v)
        except (TypeError, ValueError):
            return False
        return True

    return _real(f"{left}{lo}, {hi}{right}", test)


def _comm(text: str) -> str:
    """Argparse type: a communication spec, read by the one parser of such specs
    (:func:`convkit.schedule_spec.comm_from_spec`, as ``LocalSGD`` and the sweeps read it); its
    message is the library's, unchanged."""
    from convkit.schedule_spec import comm_from_spec

    try:
        comm_from_spec(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _spectrum(text: str) -> str:
    """Argparse type: a spectrum preset, read by the library's one parser
    (:func:`convkit.problems.least_squares.spectrum`); its message unchanged."""
    from convkit.problems.least_squares import spectrum

    try:
        spectrum(text, 2)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``convkit simulate`` (every option with its meaning, default, range)."""
    from convkit.problems.base import METRICS

    p = OneLineParser(
        prog=PROG,
        description="One Local-SGD run (--algorithm: or FedAvgM, FedAdam) on a Gaussian "
        "least-squares problem; prints the curve of "
        "the Polyak-Ruppert averaged iterate as a table, one row per record step: step (local "
        "steps k), gradients (k P), rounds (communication rounds up to step k), METRIC_avg "
        "(the mean over replicates of --metric at the averaged iterate, e.g. hnorm2_avg), se "
        "(its standard error) and count (the replicates averaged).",
    )
    add = p.add_argument

    def opt(name: str, help: str, **kwargs: Any) -> None:
        add(name, help=f"{help}; default: %(default)s", **kwargs)

    pos = _integer(1)
    # the problem's settings from the declaration of LeastSquares.gaussian (the command's own
    # defaults: d = 20, spectrum 1/i)
    d = _gaussian_parameter("d")
    opt("--d", f"{d.doc}; {d.allowed()}", type=_declared_type(d), default=20)
    opt("--spectrum", _gaussian_parameter("spectrum").doc, type=_spectrum, default="1/i")
    noise, noise_default = _declared("noise", ["LeastSquares"])
    opt(
        "--noise",
        type=_declared_type(noise),
        default=noise_default,
        help=f"{noise.doc}; {noise.allowed()}",
    )
    workers, _ = _declared("workers", ["LocalSGD"])
    opt("--workers", f"{workers.doc}; {workers.allowed()}", type=_declared_type(workers), default=8)
    opt(
        "--algorithm",
        choices=tuple(ALGORITHMS),
        default="local_sgd",
        help="'local_sgd' (the workers' mean at each round), 'fedavgm' (FedAvg with server "
        "momentum --beta and server step --server-lr) or 'fedadam' (server Adam of Reddi et "
        "al. 2021 with --server-lr and --tau)",
    )
    # the variants' settings, each from its declaration (convkit.validation.Parameter)
    for name in dict.fromkeys(n for _, reads in ALGORITHMS.values() for n in reads):
        users = [key for key, (_, reads) in ALGORITHMS.items() if name in reads]
        classes = [ALGORITHMS[key][0] for key in users]
        decl, default = _declared(name, classes)
        unset = ""
        if default is None:
            defaults = ", ".join(f"{_declared(name, [c])[0].default:g} for {c}" for c in classes)
            unset = f" (unset: the class's default, {defaults})"
        opt(
            "--" + name.replace("_", "-"),
            type=_declared_type(decl),
            default=default,
            help=f"{decl.doc} of --algorithm {' or '.join(users)}; {decl.allowed()}{unset}",
        )
    opt(
        "--comm",
        type=_comm,
        default="rounds:10",
        help="communication schedule: 'mba' (average after every local step), 'osa' (once, at "
        "the end), 'every:H' (every H local steps, 1 <= H <= n), 'rounds:N' (N evenly spaced "
        "rounds, 1 <= N <= n), 'quadratic:N' (after steps ceil(n (j/N)^2)), 'power:N:p' "
        "(ceil(n (j/N)^p)), 'geometric_rounds:N' (ceil(n^(j/N))), 'geometric:first:ratio' or "
        "'polynomial:power:scale', where n = gradients / workers is the number of local steps "
        "(the forms of convkit.schedule_spec.COMM_KINDS and COMM_ALIASES, as in LocalSGD and sweeps)",
    )
    opt(
        "--C",
        type=_real("(0, inf)", lambda v: v > 0),
        default=0.5,
        help="step-size scale C of gamma_k = C k^-alpha; number > 0",
    )
    opt(
        "--alpha",
        type=_real("[0, 1]", lambda v: 0 <= v <= 1),
        default=0.75,
        help="step-size decay exponent alpha of gamma_k = C k^-alpha; number in [0, 1] "
        "(0: constant step, 1/2 < alpha < 1: the large-step regime)",
    )
    opt(
        "--gradients",
        type=pos,
        default=8 * 2000,
        help="total stochastic gradients T over all workers; a positive multiple of --workers "
        "(each worker runs n = T / P local steps) unless --gradients-remainder floor",
    )
    opt(
        "--gradients-remainder",
        choices=("error", "floor"),
        default="error",
        help="when --workers does not divide --gradients: 'error' (refuse) or 'floor' (run "
        "n = floor(T / P) local steps and use n P gradients)",
    )
    opt(
        "--replicates",
        type=pos,
        default=100,
        help="independent replicates R the mean and standard error are taken over; integer >= 1",
    )
    problem_seed = _gaussian_parameter("seed")
    opt(
        "--seed",
        type=_declared_type(problem_seed),
        default=problem_seed.default,
        help="random seed of the problem and of the run (same seed, same table); "
        f"{replace(problem_seed, optional=False).allowed()}",
    )
    opt(
        "--metric",
        choices=METRICS,
        default="hnorm2",
        help="error printed: 'excess_risk' (f(theta) - f(theta*)), 'hnorm2' "
        "(||theta - theta*||_H^2) or 'dist2' (||theta - theta*||^2)",
    )
    return p


# library parameter name (start of its error message) -> option, per stage
_PROBLEM = {"d": "--d", "spectrum": "--spectrum", "noise": "--noise", "seed": "--seed"}
_STEP = {"C": "--C", "alpha": "--alpha"}
_ALGO = {
    "workers": "--workers",
    "comm": "--comm",
    "H": "--comm",
    "N": "--comm",
    "beta": "--beta",
    "server_lr": "--server-lr",
    "tau": "--tau",
}
#: --algorithm -> (class name in convkit, the options it reads besides workers and comm)
ALGORITHMS = {
    "local_sgd": ("LocalSGD", ()),
    "fedavgm": ("FedAvgM", ("beta", "server_lr")),
    "fedadam": ("FedAdam", ("server_lr", "tau")),
}
_RUN = {
    "gradients": "--gradients",
    "replicates": "--replicates",
    "seed": "--seed",
    "N": "--comm",
    "H": "--comm",
    "at": "--comm",
    "first": "--comm",
    "scale": "--comm",
    "workers": "--workers",
}


def _stage(
    args: argparse.Namespace, options: dict[str, str], fallback: str, build: Callable[[], Any]
) -> Any:
    """Run ``build``; turn its ``ValueError``/``TypeError`` into a :class:`UsageError` naming the
    option its message is about (its first word), ``fallback`` when none matches."""
    try:
        return build()
    except (TypeError, ValueError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        first = message.split(" ", 1)[0]
        option = options.get(first, fallback)
        value = getattr(args, option.lstrip("-"))
        raise UsageError(option, value, message) from exc


def _build(args: argparse.Namespace) -> tuple[Any, Any]:
    """The problem and the algorithm of the options; raises :class:`UsageError`."""
    import convkit as ck

    prob = _stage(
        args,
        _PROBLEM,
        "--spectrum",
        lambda: ck.LeastSquares.gaussian(args.d, args.spectrum, args.noise, seed=args.seed),
    )
    step = _stage(args, _STEP, "--alpha", lambda: ck.PolyDecay(args.C, args.alpha))
    cls, reads = ALGORITHMS[args.algorithm]
    settings = {k: getattr(args, k) for k in reads if getattr(args, k) is not None}
    algo = _stage(
        args,
        _ALGO,
        "--comm",
        lambda: getattr(ck, cls)(args.workers, step, comm=args.comm, **settings),
    )
    return prob, algo


def _run(args: argparse.Namespace) -> str:
    """Build, run and format; raises :class:`UsageError` for a bad combination of values."""
    import convkit as ck

    prob, algo = _build(args)
    res = _stage(
        args,
        _RUN,
        "--gradients",
        lambda: ck.simulate(
            prob,
            algo,
            gradients=args.gradients,
            gradients_remainder=args.gradients_remainder,
            replicates=args.replicates,
            seed=args.seed,
        ),
    )
    curve = res.curve(metric=args.metric, iterate="avg")[COLUMNS]
    curve = curve.rename(columns={"mean": f"{args.metric}_avg"})
    return curve.to_string(index=False, float_format=lambda v: f"{v:.6g}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``convkit simulate``; returns the exit code (2 for a bad value)."""
    args = build_parser().parse_args(None if argv is None else list(argv))
    try:
        table = _run(args)
    except UsageError as exc:
        got = "" if str(exc.value) in exc.message else f" (got {exc.value})"
        print(f"{PROG}: argument {exc.option}: {exc.message}{got}", file=sys.stderr)
        return 2
    print(table)
    return 0
