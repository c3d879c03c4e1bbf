"""Reproduce every figure: ``convkit figures [--quick] [--only NAME ...] [--out DIR]``.

Each module ``analyses/<name>.py`` of the repository exposes

* ``TITLE``: one line saying what the figure shows;
* ``run(quick: bool) -> pandas.DataFrame``: simulate or compute the data;
* ``plot(data, outdir: Path) -> list[Path]``: write the figure files;
* ``checks(data) -> list[dict]``: the claims the figure tests, each a dict with keys
  ``result``, ``setting``, ``measured``, ``theoretical``, ``verdict`` (one of
  :data:`convkit.verdicts.VERDICTS`) and ``reason`` (the detail behind the verdict); a
  row's ``result`` names a registered result of :mod:`convkit.bounds` or a claim of the
  module's ``CLAIMS`` (:func:`convkit.verdicts.declare_claims`), any other name is refused
  (:func:`claim_namespace`, :func:`convkit.verdicts.validate_row`);
* ``CLAIMS`` (needed as soon as a row names a claim of its own): ``{"<name>.<short_id>":
  Claim(statement, source, kind)}``, declared once;
* optionally ``AFTER``: names of analyses to run before this one when both are in a run,
  because this one reads what they leave in a cache (the Local-SGD cell cache); the numbers
  do not depend on it, only the time (a cell is simulated once instead of twice at once).

With ``jobs > 1`` the analyses run in that many processes, longest first (the ``seconds`` of
each analysis' last recorded run in ``runs.json``), an analysis starting once every analysis
of its ``AFTER`` has finished; with ``jobs = 1`` they run one by one in an order that honours
``AFTER``.

For every analysis this writes ``<out>/<name>.csv`` (the data), its figures, and finally
``<out>/index.md`` (figures and check table) and ``<out>/checks.json``.  Data are written as
each analysis finishes, so an interrupted run keeps what it computed.

``checks_only=True`` (``convkit figures --checks-only``) simulates nothing: it reads each
analysis' committed ``<out>/<name>.csv``, re-evaluates ``checks(data)`` and rewrites
``checks.json`` and ``index.md`` (for example after a change of the verdict rule);
``replot=True`` (``--replot``) also draws the figures again from that data.

Quick runs (``--quick``) write to the scratch directory ``figures-quick/`` by default (ignored
by git) and are refused in the committed ``figures/``.  ``<out>/runs.json`` records, per
analysis, the mode of its data (``full`` or ``quick``) and the exact commands that produced its
data, figures and checks; ``index.md`` starts with the command that wrote it and shows each
analysis' record.  A partial run (``--only``) keeps the other analyses' entries.  A run that
computes data also records its time per analysis (:mod:`convkit.figures_progress`):
``seconds``, ``cell_cache`` (``cold``, ``warm``, ``partial`` or ``unused``: whether it read cache
entries computed before it), ``compile_seconds`` (numba compilation inside it), ``date``,
``machine`` (``nproc``, ``cpu``) and ``jobs``, and under ``fresh`` the same fields of the last
run of that mode that read no cache entry: the time a fresh clone needs.  A run of every
analysis with ``--record-times`` also records its whole wall time under ``_whole_runs``
(:data:`WHOLE_RUNS`: ``full`` and ``quick``, a quick run's into the committed
``figures/runs.json`` as well), which the next plan quotes.

Before any work the run prints its plan (the analyses, each one's recorded time, the total),
then a line when each analysis starts and ends and ``k/N done, elapsed ..., ETA ...`` after
each (:class:`convkit.figures_progress.Progress`).

This module is the pipeline (:func:`discover`, :func:`run_figures`, :func:`write_index`); the
command line is :mod:`convkit.cli.figures`.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from convkit.figures_progress import (
    TIMING_KEYS,
    CacheWatch,
    Progress,
    cache_dirs,
    machine,
    recorded_time,
    timing_record,
    utc_now,
)

REPO = Path(__file__).resolve().parents[1]


def discover(analyses_dir: Path) -> list[str]:
    """Names of the analysis modules in ``analyses_dir``."""
    return sorted(
        m.name for m in pkgutil.iter_modules([str(analyses_dir)]) if not m.name.startswith("_")
    )


def _load(analyses_dir: Path, name: str):
    parent = str(analyses_dir.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    return importlib.import_module(f"{analyses_dir.name}.{name}")


def claim_namespace(name: str, module: Any) -> Any:
    """The :class:`convkit.verdicts.ClaimNamespace` of analysis ``name``: the registered
    results of the theory library (:func:`convkit.bounds.names`) and the claims its
    ``module`` declares in ``CLAIMS`` (:func:`convkit.verdicts.declare_claims`; none if it
    declares none)."""
    from convkit.bounds import names
    from convkit.verdicts import ClaimNamespace

    return ClaimNamespace(
        registered=frozenset(names()),
        claims=dict(getattr(module, "CLAIMS", {})),
        owner=f"analysis {name} (analyses/{name}.py)",
    )


def _validated(name: str, rows: list[dict], namespace: Any = None) -> list[dict]:
    """The check rows of analysis ``name``, each valid (:func:`convkit.verdicts.validate_row`:
    the six keys, a vocabulary verdict, a string reason, and with ``namespace``, a
    :class:`convkit.verdicts.ClaimNamespace`, a result in it)."""
    from convkit.verdicts import validate_row

    for row in rows:
        validate_row(row, where=f"analysis {name}", namespace=namespace)
    return rows


def _controlled(checks: Any, rows: list[dict]) -> list[dict]:
    """``rows`` as they stand when ``checks`` carries negative controls (it was decorated by
    :func:`convkit.verdicts.controlled`, which applied them); otherwise under the rule with no
    control at all: every ``holds`` becomes ``measured`` (a check that nothing could make fail
    may report, not decide)."""
    from convkit.verdicts import apply_controls

    return rows if hasattr(checks, "controls") else apply_controls(rows, {})


#: Where ``convkit figures`` writes by default: the committed set, and the scratch directory
#: of quick runs (ignored by git), so that a quick run never replaces committed figures.
COMMITTED = REPO / "figures"
QUICK_OUT = REPO / "figures-quick"

_UNRECORDED = "not recorded"
#: the key of ``runs.json`` that holds the whole runs' times (not an analysis):
#: ``{"full": record, "quick": record}``, :func:`whole_run_record`
WHOLE_RUNS = "_whole_runs"


def default_out(quick: bool) -> Path:
    """The default output directory: :data:`QUICK_OUT` for quick runs, :data:`COMMITTED`
    otherwise."""
    return QUICK_OUT if quick else COMMITTED


def _same_dir(a: Path, b: Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _provenance(
    previous: dict | None, command: str, quick: bool, checks_only: bool, replot: bool
) -> dict:
    """The provenance record of one analysis after this run: ``mode`` (``"full"``, ``"quick"``
    or ``"not recorded"``) and the commands that produced its ``data``, ``figures`` and
    ``checks`` (a re-plot keeps the data's record, a checks-only run keeps data and figures)."""
    prev = dict(previous or {})
    rec = {
        "mode": prev.get("mode", _UNRECORDED),
        "data": prev.get("data", _UNRECORDED),
        "figures": prev.get("figures", _UNRECORDED),
        "checks": command,
    }
    rec.update({k: prev[k] for k in (*TIMING_KEYS, "fresh") if k in prev})
    if not checks_only:
        rec["figures"] = command
    if not checks_only and not replot:
        rec.update(mode="quick" if quick else "full", data=command)
    return rec


def analysis_runs(runs: dict[str, dict]) -> dict[str, dict]:
    """The analyses' entries of ``runs.json`` (without :data:`WHOLE_RUNS`)."""
    return {k: v for k, v in runs.items() if k != WHOLE_RUNS}


def whole_run_record(
    seconds: float, analyses: int, jobs: int, when: str, where: dict, command: str
) -> dict[str, Any]:
    """The record of a whole run (every analysis, ``--record-times``) under
    :data:`WHOLE_RUNS` of ``runs.json``: its wall time from the plan to the index (without the
    set-up of ``make figures``), the number of analyses, jobs, date, machine and command."""
    return {
        "seconds": round(float(seconds), 1),
        "analyses": int(analyses),
        "jobs": int(jobs),
        "date": when,
        "machine": where,
        "command": command,
    }


def mode_summary(runs: dict[str, dict], command: str) -> str:
    """The index's first lines: the exact command that wrote it, and the mode of the data of
    every analysis it lists (one mode, or each analysis with its own when they differ)."""
    runs = analysis_runs(runs)
    modes = {r.get("mode", _UNRECORDED) for r in runs.values()}
    head = f"This index was written by `{command}`."
    if modes == {"full"}:
        what = "Data of every analysis: full run (`make figures`, the committed settings)."
    elif modes == {"quick"}:
        what = "Data of every analysis: quick run (reduced settings, not the committed set)."
    else:
        what = (
            "Data modes differ between analyses: "
            + ", ".join(f"{n}: {runs[n].get('mode', _UNRECORDED)}" for n in sorted(runs))
            + "."
        )
    return f"{head} {what}"


def run_figures(
    names: Sequence[str] | None,
    out: Path,
    quick: bool,
    analyses_dir: Path,
    checks_only: bool = False,
    jobs: int = 1,
    *,
    replot: bool = False,
    command: str | None = None,
    record_times: bool = False,
) -> int:
    """Run the analyses ``names`` (None or empty: all of ``analyses_dir``) and write their data,
    figures, ``checks.json``, ``runs.json`` and ``index.md`` into ``out``.

    Parameters
    ----------
    names : sequence of str or None
        Analyses to run; the entries of the other analyses already in ``out`` are kept (a
        partial run never drops them from ``checks.json``, ``runs.json`` or ``index.md``).
    out : Path
        Output directory.  A quick run into the committed set (:data:`COMMITTED`) is refused.
    quick : bool
        Reduced settings (each analysis' ``run(quick=True)``).
    analyses_dir : Path
        Directory of the analysis modules.
    checks_only : bool
        Simulate and draw nothing: re-evaluate the checks on the data already in ``out``.
    jobs : int
        Run that many analyses at once in separate processes (each writes its own files, and
        ``checks.json`` is rewritten by this process as each finishes), longest first, each
        after the analyses of its ``AFTER`` (module docstring).
    replot : bool
        Simulate nothing: draw the figures again from the data already in ``out`` and
        re-evaluate the checks (the data's provenance is kept).
    command : str or None
        The exact command line recorded in ``runs.json`` and ``index.md`` (default: a
        ``convkit figures`` line rebuilt from the arguments).
    record_times : bool
        Record this run's times in ``runs.json`` even for an analysis whose data and checks
        came out as they were.  Without it such an analysis keeps its record as it was (the
        record still says what produced its data, and the recorded time, a fresh clone's
        where one was measured, stays), and a run in which every analysis came out so keeps
        the index's first line: rerunning ``make figures`` where the data was made leaves
        ``git status`` clean.

    Returns
    -------
    int
        Exit code: 0 success, 1 some analysis failed, 2 (one line on stderr, before any work)
        no analyses directory or no analysis in it, unknown names, a quick run aimed at the
        committed set, ``checks_only`` together with ``replot``, ``checks_only`` or ``replot``
        on an ``out`` without the data (without ``names``: the analyses whose CSV is in
        ``out``, at least one), an ``out`` that cannot be written, or an ``AFTER`` naming no
        analysis or forming a cycle.
    """
    t_start = time.perf_counter()
    analyses_dir = Path(analyses_dir).resolve()
    if not analyses_dir.is_dir():
        print(f"convkit figures: no analyses directory at {analyses_dir}", file=sys.stderr)
        return 2
    out = Path(out)
    if checks_only and replot:
        print("convkit figures: choose one of --checks-only and --replot", file=sys.stderr)
        return 2
    if quick and not (checks_only or replot) and _same_dir(out, COMMITTED):
        print(
            f"convkit figures: --quick never writes into the committed set {COMMITTED}; "
            f"use the default scratch directory {QUICK_OUT} or another --out DIR",
            file=sys.stderr,
        )
        return 2
    available = discover(analyses_dir)
    if not available:
        print(
            f"convkit figures: no analyses in {analyses_dir} (an analysis is a module NAME.py "
            "with run, plot and checks)",
            file=sys.stderr,
        )
        return 2
    unknown = set(names or ()) - set(available)
    if unknown:
        print(f"convkit figures: unknown analyses {sorted(unknown)}", file=sys.stderr)
        return 2
    given = bool(names)
    names = list(names or available)
    if checks_only or replot:  # they read the data of an earlier run: it must be there
        have = [n for n in names if (out / f"{n}.csv").is_file()]
        missing = sorted(set(names) - set(have))
        if not have or (given and missing):
            mode = "--checks-only" if checks_only else "--replot"
            print(
                f"convkit figures: {mode} reads the data of an earlier run, and {out} has "
                f"no {', '.join(f'{n}.csv' for n in missing[:5])}"
                f"{f' (and {len(missing) - 5} more)' if len(missing) > 5 else ''}; "
                f"run `convkit figures --out {out}` first",
                file=sys.stderr,
            )
            return 2
        names = have
    unwritable = _unwritable(out)
    if unwritable:
        print(f"convkit figures: {unwritable}", file=sys.stderr)
        return 2
    if command is None:
        parts = ["convkit figures"] + (["--quick"] if quick else [])
        parts += ["--checks-only"] if checks_only else []
        parts += ["--replot"] if replot else []
        parts += [f"--only {' '.join(names)}", f"--out {out}"]
        command = " ".join(parts)
    index_path = out / "checks.json"
    all_checks: dict[str, list] = _read_json(index_path)
    checks_before = {n: _plain(rows) for n, rows in all_checks.items()}
    kept: set[str] = set()
    runs: dict[str, dict] = _read_json(out / "runs.json")
    files: dict[str, list[str]] = {}
    known = set(discover(analyses_dir))
    titles: dict[str, str] = {
        n: getattr(_load(analyses_dir, n), "TITLE", n) for n in all_checks if n in known
    }
    failed: list[str] = []
    tasks = [(str(analyses_dir), name, str(out), quick, checks_only, replot) for name in names]

    def record(name: str, outcome: dict) -> None:
        previous = runs.get(name)
        same = not outcome.get("data_changed", True) and _plain(outcome["checks"]) == (
            checks_before.get(name)
        )
        if previous is not None and same and not record_times:
            kept.add(name)  # the data and checks it records came out as they were
            return
        runs[name] = _provenance(previous, command, quick, checks_only, replot)
        if not (checks_only or replot):
            runs[name].pop("fresh", None)  # kept below only for the same mode
            runs[name].update(
                timing_record(
                    previous,
                    "quick" if quick else "full",
                    outcome["seconds"],
                    outcome.get("cell_cache", "unused"),
                    outcome.get("compile_seconds", 0.0),
                    jobs,
                    when,
                    where,
                )
            )
        (out / "runs.json").write_text(json.dumps(runs, indent=2, sort_keys=True) + "\n")

    try:
        after = run_after(analyses_dir, names)
    except ValueError as exc:
        print(f"convkit figures: {exc}", file=sys.stderr)
        return 2
    by_name = dict(zip(names, tasks, strict=True))
    mode_name = "quick" if quick else "full"
    estimates = _estimates(names, runs, out, mode_name)
    cost = {n: estimates[n][0] or 0.0 for n in names}
    parallel = jobs > 1 and len(tasks) > 1
    order = sorted(names, key=lambda n: -cost[n]) if parallel else _serial_order(names, after)
    computes = not (checks_only or replot)
    progress = Progress(order, estimates, jobs if parallel else 1) if computes else None
    when, where = utc_now(), machine()
    if progress is not None:
        progress.plan(
            f"convkit figures: {len(names)} analys{'is' if len(names) == 1 else 'es'}, "
            f"{mode_name} mode, {progress.jobs} job{'s' if progress.jobs > 1 else ''}, into {out} "
            f"({where['nproc']} cores, {where['cpu']})" + _last_whole_run(out, mode_name)
        )
    if parallel:
        outcomes = _parallel_outcomes(by_name, after, cost, jobs, progress)
    else:
        outcomes = _serial_outcomes(by_name, order, progress)
    _collect(outcomes, titles, files, all_checks, failed, index_path, record, progress)
    for name in all_checks:  # analyses of earlier runs without a record
        runs.setdefault(name, _provenance(None, _UNRECORDED, quick, True, False))
    if computes and kept == set(names) and (header := _index_command(out)) is not None:
        command = header  # nothing changed: the index keeps the command that wrote it
    write_index(out, titles, files, all_checks, mode_summary(runs, command), runs)
    if computes and record_times and not failed and set(names) == set(available):
        ours = analyses_dir == (REPO / "analyses").resolve()  # the committed set's analyses
        _record_whole_run(out, mode_name, time.perf_counter() - t_start, len(names),
                          jobs, when, where, command, ours)  # fmt: skip
    print(f"convkit figures: wrote {out / 'index.md'}", flush=True)
    if failed:
        print("failed analyses:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def _last_whole_run(out: Path, mode: str) -> str:
    """``"; the last whole <mode> run took ..."`` from :data:`WHOLE_RUNS` of ``out/runs.json``
    (else the committed one), or ``""`` when none is recorded."""
    from convkit.figures_progress import duration

    for path in (out / "runs.json", COMMITTED / "runs.json"):
        rec = _read_json(path).get(WHOLE_RUNS, {}).get(mode) if path.exists() else None
        if rec:
            return (
                f"; the last whole {mode} run took {duration(rec['seconds'])} "
                f"({rec['date'][:10]}, {rec['machine'].get('nproc', '?')} cores, "
                f"{rec['jobs']} jobs, without set-up)"
            )
    return ""


def _record_whole_run(
    out: Path,
    mode: str,
    seconds: float,
    analyses: int,
    jobs: int,
    when: str,
    where: dict,
    command: str,
    committed_too: bool = False,
) -> None:
    """Write the whole run's record (:func:`whole_run_record`) under :data:`WHOLE_RUNS`
    ``[mode]`` of ``out/runs.json`` and, for a quick run of the repository's analyses
    (``committed_too``; quick data never goes into the committed set), of the committed
    ``figures/runs.json`` too: ``--record-times`` asks for it, so that both whole times are
    kept where the analyses' are."""
    rec = whole_run_record(seconds, analyses, jobs, when, where, command)
    quick_too = mode == "quick" and committed_too and not _same_dir(out, COMMITTED)
    targets = [out] + ([COMMITTED] if quick_too else [])
    for target in targets:
        path = target / "runs.json"
        if not path.exists() and target == COMMITTED:
            continue
        runs = _read_json(path)
        runs.setdefault(WHOLE_RUNS, {})[mode] = rec
        path.write_text(json.dumps(runs, indent=2, sort_keys=True) + "\n")


def _plain(rows: Any) -> Any:
    """Check rows as ``checks.json`` stores them (JSON types), for comparison."""
    return json.loads(json.dumps(rows, default=str))


def _index_command(out: Path) -> str | None:
    """The command named on the first line of ``out/index.md`` (:func:`mode_summary`), or
    None."""
    import re

    path = out / "index.md"
    if not path.exists():
        return None
    found = re.search(r"This index was written by `(.*?)`\.", path.read_text())
    return found.group(1) if found else None


def _digest(path: Path) -> str | None:
    """SHA-256 of a file's bytes, or None when it does not exist."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def _estimates(
    names: Sequence[str], runs: dict[str, dict], out: Path, mode: str
) -> dict[str, tuple[float | None, str]]:
    """Per analysis its recorded time for a run of ``mode`` into ``out``
    (:func:`convkit.figures_progress.recorded_time`): from ``out/runs.json``, else from the
    committed ``figures/runs.json``."""
    committed = {} if _same_dir(out, COMMITTED) else _read_json(COMMITTED / "runs.json")
    result = {}
    for n in names:
        est = recorded_time(runs.get(n), mode)
        if est[0] is None and n in committed:
            est = recorded_time(committed[n], mode)
        result[n] = est
    return result


def _unwritable(out: Path) -> str | None:
    """Why files cannot be written into ``out`` (created if missing), or None when they can:
    a real write is tried, since permissions alone do not tell (a read-only file system)."""
    import tempfile

    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        return f"cannot write into the output directory {out}: {exc.strerror or exc}"
    return None


def run_after(analyses_dir: Path, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each analysis' ``AFTER`` restricted to ``names`` (the analyses of this run).  An
    ``AFTER`` entry that is not an analysis of ``analyses_dir``, or a cycle, raises a
    ``ValueError`` naming them."""
    known = set(discover(analyses_dir))
    after: dict[str, tuple[str, ...]] = {}
    for n in names:
        want = tuple(getattr(_load(analyses_dir, n), "AFTER", ()))
        bad = sorted(set(want) - known)
        if bad:
            raise ValueError(
                f"analysis {n!r}: AFTER = {want!r} names {bad}, which are not analyses of "
                f"{analyses_dir}; allowed: {sorted(known)}"
            )
        after[n] = tuple(a for a in want if a in names and a != n)
    _serial_order(list(names), after)  # raises on a cycle
    return after


def _serial_order(names: list[str], after: dict[str, tuple[str, ...]]) -> list[str]:
    """``names`` in their order, each moved behind the analyses of its ``after``."""
    out: list[str] = []
    left = list(names)
    while left:
        ready = [n for n in left if all(a in out for a in after.get(n, ()))]
        if not ready:
            raise ValueError(f"the AFTER of the analyses {left} form a cycle")
        out.append(ready[0])
        left.remove(ready[0])
    return out


def _serial_outcomes(tasks: dict[str, tuple], order: list[str], progress: Progress | None = None):
    """Run ``tasks`` (name -> arguments of :func:`_run_one`) one by one in ``order`` and yield
    each outcome, saying when each starts (``progress``)."""
    for n in order:
        if progress is not None:
            progress.started(n)
        yield _run_one(*tasks[n])


def _parallel_outcomes(
    tasks: dict[str, tuple],
    after: dict[str, tuple[str, ...]],
    cost: dict[str, float],
    jobs: int,
    progress: Progress | None = None,
):
    """Run ``tasks`` (name -> arguments of :func:`_run_one`) in ``jobs`` processes and yield
    each outcome as it finishes: the dearest ready analysis first (``cost``), an analysis
    ready when every analysis of its ``after`` has finished (failed ones included); each is
    announced as it is handed to a process (``progress``: at most ``jobs`` are in the pool,
    so it starts then)."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pending = sorted(tasks, key=lambda n: -cost.get(n, 0.0))  # stable: name order on ties
    done: set[str] = set()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
        running: dict[Any, str] = {}
        while pending or running:
            for n in [n for n in pending if all(a in done for a in after.get(n, ()))]:
                if len(running) >= jobs:
                    break
                pending.remove(n)
                if progress is not None:
                    progress.started(n)
                running[pool.submit(_run_one, *tasks[n])] = n
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                done.add(running.pop(f))
                yield f.result()


def own_figures(outdir: Path, name: str, names: Sequence[str]) -> list[Path]:
    """The PNGs of analysis ``name`` in ``outdir`` (``name.png``, ``name_*.png``), without
    those of an analysis whose name extends it (``local_sgd_threshold_mc_P.png`` is not
    ``local_sgd_threshold``'s)."""

    def belongs(stem: str, n: str) -> bool:
        return stem == n or stem.startswith(n + "_")

    longer = [m for m in names if m != name and m.startswith(name)]
    return sorted(
        p
        for p in outdir.glob(f"{name}*.png")
        if belongs(p.stem, name) and not any(belongs(p.stem, m) for m in longer)
    )


def _run_one(
    analyses_dir: str,
    name: str,
    out: str,
    quick: bool,
    checks_only: bool,
    replot: bool = False,
) -> dict:
    """Run one analysis (in this process or a worker): data, figures and validated checks;
    a failure is returned, not raised, so that the others go on."""
    import matplotlib

    from convkit._jit import compile_seconds

    matplotlib.use("Agg")
    t0, c0 = time.perf_counter(), compile_seconds()
    outdir = Path(out)
    changed = True
    watch = CacheWatch(cache_dirs(Path(analyses_dir).parent))
    try:
        mod = _load(Path(analyses_dir), name)
        title = getattr(mod, "TITLE", name)
        if checks_only or replot:
            import pandas as pd

            data = pd.read_csv(outdir / f"{name}.csv")
            if replot:
                written = mod.plot(data, outdir)
            else:
                written = own_figures(outdir, name, discover(Path(analyses_dir)))
        else:
            with watch:
                data = mod.run(quick=quick)
            before = _digest(outdir / f"{name}.csv")
            data.to_csv(outdir / f"{name}.csv", index=False)
            changed = before != _digest(outdir / f"{name}.csv")
            written = mod.plot(data, outdir)
        rows = _validated(name, mod.checks(data), claim_namespace(name, mod))
        rows = _controlled(mod.checks, rows)
    except Exception as exc:  # keep going: report the failure at the end
        import traceback

        traceback.print_exc()
        return {
            "name": name,
            "error": f"{type(exc).__name__}: {exc}",
            "seconds": time.perf_counter() - t0,
        }
    return {
        "name": name,
        "title": title,
        "files": [Path(f).name for f in written],
        "checks": rows,
        "seconds": time.perf_counter() - t0,
        "cell_cache": watch.state,
        "compile_seconds": compile_seconds() - c0,
        "data_changed": changed,
    }


def _collect(
    outcomes, titles, files, all_checks, failed, index_path, record, progress=None
) -> None:
    """Record each finished analysis (its checks written to ``checks.json`` at once); with
    ``progress`` (a run that computes data), its end and ``k/N done, elapsed, ETA``."""
    for o in outcomes:
        name = o["name"]
        if "error" in o:
            failed.append(f"{name}: {o['error']}")
            if progress is not None:
                progress.finished(name, o["seconds"], failed=True)
                progress.status()
            continue
        titles[name], files[name], all_checks[name] = o["title"], o["files"], o["checks"]
        index_path.write_text(json.dumps(all_checks, indent=2, default=str))
        record(name, o)
        if progress is not None:
            progress.finished(name, o["seconds"], note=f"{len(o['files'])} file(s)")
        else:
            print(f"[{name}] {len(o['files'])} file(s) in {o['seconds']:.1f} s", flush=True)
        for c in o["checks"]:
            measured = (
                _cell(c.get("measured"))
                if not isinstance(c.get("measured"), str)
                else c["measured"]
            )
            print(f"    {c['verdict']:<14} {c['result']}: measured {measured}", flush=True)
        if progress is not None:
            progress.status()


def _cell(v: object) -> str:
    """A table cell: numbers rounded to 4 significant digits (plain numbers, never
    ``np.float64(...)``), ``-`` for a missing value, no ``|``."""
    from convkit.plotting import plain

    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_cell(x) for x in v) + "]"
    v = plain(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "/")


def _provenance_line(rec: dict | None) -> str:
    """One line of an analysis' record: its data's mode and the commands behind its data,
    figures and checks (one command when they are the same)."""
    rec = rec or {}
    mode = rec.get("mode", _UNRECORDED)
    secs = f", {rec['seconds']:g} s" if "seconds" in rec else ""
    data, figs, chk = (rec.get(k, _UNRECORDED) for k in ("data", "figures", "checks"))
    if data == figs == chk:
        return f"Data, figures and checks: {mode} run, `{data}`{secs}."
    return f"Data: {mode} run, `{data}`{secs}; figures: `{figs}`; checks: `{chk}`."


def write_index(
    out: Path,
    titles: dict,
    files: dict,
    checks: dict,
    mode: str = "Full run: `make figures` (`convkit figures`).",
    runs: dict | None = None,
) -> None:
    """Write ``out/index.md``.

    Parameters
    ----------
    out : Path
        Output directory (figures are linked relative to it).
    titles, files, checks : dict
        Per analysis: its title, its figure files (default: its own PNGs in ``out``,
        :func:`own_figures`) and its check
        rows (result, setting, measured, theoretical, verdict, reason).
    mode : str
        The first paragraph: which command wrote the index and the data's mode.
    runs : dict or None
        Per analysis its provenance (``runs.json``: mode and the commands that produced its
        data, figures and checks), printed under its title.
    """
    from convkit.verdicts import VERDICTS

    lines = ["# convkit figures", "", mode, ""]
    lines += [
        "Verdicts (one vocabulary, `convkit.verdicts`): "
        + ", ".join(f"`{v}`" for v in VERDICTS)
        + ". An exponent holds only when its interval contains the claim, its half-width is "
        "at most 0.25 and a power law describes the points (chi2/dof inside its 99 % range, or "
        "log-log residuals without trend); a fit that fails that test is `not_identifiable`.",
        "",
    ]
    for name in sorted(checks):
        lines += [f"## {name}", "", titles.get(name, ""), ""]
        if runs is not None:
            lines += [_provenance_line(runs.get(name)), ""]
        pngs = files.get(name) or [f.name for f in own_figures(out, name, list(checks))]
        lines += [f"![{f}]({f})" for f in pngs if f.endswith(".png")]
        lines += [
            "",
            "| result | setting | measured | theoretical | verdict | reason |",
            "|---|---|---|---|---|---|",
        ]
        for c in checks[name]:
            cells = [c.get(k) for k in ("result", "setting", "measured", "theoretical")]
            cells += [c["verdict"], c.get("reason", "")]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
        lines.append("")
    (out / "index.md").write_text("\n".join(lines))
