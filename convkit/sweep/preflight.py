"""Checks of every configuration before anything runs: its objects are built and validated
once (what :func:`convkit.simulate` checks before its first step), and the names listed in
``[record]`` are compared with those the configuration's problem and algorithms report.

The distinct errors are collected over the whole sweep and raised as one :class:`SpecError`
that lists each message once, with the number of configurations it affects and the first of
them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from convkit.sweep.cache import _canonical
from convkit.sweep.errors import SpecError, _Context, _suggest

#: columns of the result frame that a ``record.metrics`` entry might be mistaken for
_COLUMNS = ("gradients", "rounds", "messages", "bits", "step", "config", "iterate")
#: the iterates every algorithm reports (``state`` only with algorithm metrics)
_BASE_ITERATES = ("avg", "tail", "last")


def _make(category: str, spec: Any) -> Any:
    """Build one ``{kind = ...}`` table (nested tables first), as :func:`build` does."""
    from convkit.sweep.registry import _lookup

    if not isinstance(spec, dict):
        return spec
    kind = _lookup(category, spec["kind"])
    if kind is None:
        raise ValueError(f"unknown {category} kind {spec['kind']!r}")
    kw = {}
    for name, v in spec.items():
        if name == "kind":
            continue
        p = kind.params.get(name)
        if p is not None and p.nested is not None and isinstance(v, dict) and "kind" in v:
            v = _make(p.nested, v)
        kw[name] = v
    return kind.builder(**kw)


def probe(
    setting: Mapping[str, Any], seed: int, problems: dict[str, Any] | None = None
) -> tuple[set[str], set[str]]:
    """Build and validate the objects of one normalised setting, as the run will.

    Checks what :func:`convkit.simulate` checks before it starts (unique labels, the
    workers a problem with nodes needs, ``tail``,
    the local steps of each algorithm -- ``gradients`` a multiple of ``P b`` --, the step
    schedule over those steps, the record points), and reads the names of each algorithm's
    metrics from its declaration (:meth:`~convkit.algorithms.base.Algorithm.metric_names`).  ``problems`` memoises built problems
    by their canonical table (grids usually vary the algorithm, not the problem).

    Returns ``(iterates, metrics)`` the configuration's frame can hold; raises what the
    constructors raise.
    """
    from convkit.algorithms.base import algorithm_list
    from convkit.algorithms.local import local_steps_for
    from convkit.backend import get_backend
    from convkit.problems.base import METRICS, Problem
    from convkit.recording import record_steps
    from convkit.simulate import check_workers
    from convkit.validation import check_real

    key = _canonical(setting["problem"])
    if problems is not None and key in problems:
        problem = problems[key]
    else:
        problem = _make("problem", setting["problem"])
        if problems is not None:
            problems[key] = problem
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a convkit Problem, got {type(problem).__name__}")
    specs = setting["algorithms"] if "algorithms" in setting else [setting["algorithm"]]
    algos = algorithm_list([_make("algorithm", a) for a in specs])
    check_workers(problem, algos)  # one worker per node of the problem, as simulate checks
    rec = setting["record"]
    check_real("tail", rec["tail"], low=0, high=1, high_inclusive=False)
    get_backend("numpy", setting["dtype"])  # the dtype, as simulate checks it
    metrics, iterates = set(METRICS), set(_BASE_ITERATES)
    for a in algos:
        n = (
            setting["steps"]
            if "steps" in setting
            else local_steps_for(setting["gradients"], a.workers, a.batch)
        )
        a.prepare(n)
        record_steps(n, rec["n_record"], rec["steps"])
        extra = list(a.metric_names(problem))  # declared on the class: no state needed
        if extra:
            metrics.update(extra)
            iterates.add("state")
    return iterates, metrics


def _name_errors(
    rec: Mapping[str, Any], iterates: set[str], metrics: set[str]
) -> list[tuple[tuple[str, ...], str]]:
    """``(path, message)`` of every ``record`` name the configuration cannot report."""
    out: list[tuple[tuple[str, ...], str]] = []
    for field, avail in (("iterates", iterates), ("metrics", metrics)):
        if rec.get(field) == []:
            out.append(
                (
                    ("record", field),
                    f"record.{field} is empty: it would keep no rows (omit it to keep all)",
                )
            )
        for name in rec.get(field) or []:
            if name in avail:
                continue
            if field == "metrics" and name in _COLUMNS:
                hint = f"; {name!r} is a column of the frame, not a metric"
            else:
                hint = _suggest(name, sorted(avail))
            extra = ""
            if field == "iterates" and name == "state":
                extra = " ('state' holds algorithm metrics; these algorithms report none)"
            out.append(
                (
                    ("record", field),
                    f"record.{field}: {name!r} is not reported by this configuration{extra}; "
                    f"available: {sorted(avail)}{hint}",
                )
            )
    if not out and rec.get("iterates") is not None and rec.get("metrics") is not None:
        base = _base_metrics()
        its, mets = set(rec["iterates"]), set(rec["metrics"])
        if not ((its - {"state"} and mets & base) or ("state" in its and mets - base)):
            out.append(
                (
                    ("record",),
                    f"record: iterates {sorted(its)} x metrics {sorted(mets)} select no rows "
                    "(algorithm metrics are reported under iterate 'state', the problem's "
                    "metrics under 'avg', 'tail' and 'last')",
                )
            )
    return out


def _base_metrics() -> set[str]:
    from convkit.problems.base import METRICS

    return set(METRICS)


def check_configurations(
    configurations: Sequence[Any], seed: int, ctx: _Context | None = None
) -> None:
    """Probe every configuration (:func:`probe`) and check its ``[record]`` names; raise one
    :class:`SpecError` listing each distinct problem once (with how many configurations it
    affects and the first of them), or return None when every configuration is valid."""
    ctx = ctx or _Context(None, None)
    problems: dict[str, Any] = {}
    found: dict[str, tuple[tuple[str, ...] | None, list[Any]]] = {}
    for c in configurations:
        if "function" in c.setting:  # a function call builds no objects (sweep.functions)
            continue
        try:
            iterates, metrics = probe(c.setting, c.seed, problems)
        except Exception as exc:
            text = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            found.setdefault(text, (None, []))[1].append(c)
            continue
        for path, text in _name_errors(c.setting["record"], iterates, metrics):
            found.setdefault(text, (path, []))[1].append(c)
    if not found:
        return
    lines = []
    for text, (_, cs) in found.items():
        n = len(cs)
        first = cs[0]
        where = f"configuration {first.index}"
        if first.params:
            where += f": {first.params}"
        count = f"{n} configuration{'s' if n != 1 else ''}"
        if n == len(configurations) and n > 1:
            count = f"all {count}"
        lines.append(f"{text} [{count}; first: {where}]")
    total = len({c.index for _, cs in found.values() for c in cs})
    paths = {p for p, _ in found.values() if p is not None}
    path = next(iter(paths)) if len(found) == 1 and paths else ()
    if len(lines) == 1:
        message = lines[0]
    else:
        message = (
            f"{total} of {len(configurations)} configurations are invalid "
            f"({len(lines)} distinct errors):\n  - " + "\n  - ".join(lines)
        )
    raise SpecError(message, key=None, line=ctx.line_of(path) if path else None, source=ctx.source)
