"""Reproduce every figure: ``convkit figures [--quick] [--only NAME ...] [--out DIR]``.

Each module ``analyses/<name>.py`` of the repository exposes

* ``TITLE``: one line saying what the figure shows;
* ``run(quick: bool) -> pandas.DataFrame``: simulate or compute the data;
* ``plot(data, outdir: Path) -> list[Path]``: write the figure files;
* ``checks(data) -> list[dict]``: the claims the figure tests, each a dict with keys
  ``result``, ``setting``, ``measured``, ``theoretical``, ``verdict`` (one of
  :data:`convkit.verdicts.VERDICTS`) and ``reason`` (the detail behind the verdict).

For every analysis this writes ``<out>/<name>.csv`` (the data), its figures, and finally
``<out>/index.md`` (figures and check table) and ``<out>/checks.json``.  Data are written as
each analysis finishes, so an interrupted run keeps what it computed.

``checks_only=True`` (``convkit figures --checks-only``) simulates nothing: it reads each
analysis' committed ``<out>/<name>.csv``, re-evaluates ``checks(data)`` and rewrites
``checks.json`` and ``index.md`` (for example after a change of the verdict rule).

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


def _validated(name: str, rows: list[dict]) -> list[dict]:
    """The check rows of analysis ``name``, each with a vocabulary verdict and a reason."""
    from convkit.verdicts import VERDICTS

    for row in rows:
        if row.get("verdict") not in VERDICTS:
            raise ValueError(
                f"analysis {name}: verdict {row.get('verdict')!r} of {row.get('result')!r} "
                f"is not one of {list(VERDICTS)}"
            )
        row.setdefault("reason", "")
    return rows


def _mode_line(quick: bool, checks_only: bool) -> str:
    if checks_only:
        return (
            "Checks re-evaluated from the committed data by `convkit figures --checks-only` "
            "(data and figures from `make figures`)."
        )
    if quick:
        return "Quick run: `convkit figures --quick` (reduced settings, not the committed set)."
    return "Full run: `make figures` (`convkit figures`)."


def run_figures(
    names: Sequence[str] | None,
    out: Path,
    quick: bool,
    analyses_dir: Path,
    checks_only: bool = False,
    jobs: int = 1,
) -> int:
    """Run the analyses ``names`` (None or empty: all of ``analyses_dir``) and write their data,
    figures, ``checks.json`` and ``index.md`` into ``out``; with ``checks_only`` re-evaluate
    the checks on the data already in ``out`` instead. ``jobs > 1`` runs that many analyses at
    once in separate processes (they are independent; each writes its own files, and
    ``checks.json`` is rewritten by this process as each finishes). Returns the exit code
    (0 success, 1 some analysis failed, 2 no analyses directory or unknown names)."""
    analyses_dir = Path(analyses_dir).resolve()
    if not analyses_dir.is_dir():
        print(f"convkit figures: no analyses directory at {analyses_dir}", file=sys.stderr)
        return 2
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = list(names or discover(analyses_dir))
    unknown = set(names) - set(discover(analyses_dir))
    if unknown:
        print(f"convkit figures: unknown analyses {sorted(unknown)}", file=sys.stderr)
        return 2
    index_path = out / "checks.json"
    all_checks: dict[str, list] = json.loads(index_path.read_text()) if index_path.exists() else {}
    files: dict[str, list[str]] = {}
    titles: dict[str, str] = {
        n: getattr(_load(analyses_dir, n), "TITLE", n)
        for n in all_checks
        if n in discover(analyses_dir)
    }
    failed = []
    tasks = [(str(analyses_dir), name, str(out), quick, checks_only) for name in names]
    if jobs > 1 and len(tasks) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # slowest first would be better; analyses are independent, so any order is correct
        with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(_run_one, *t) for t in tasks]
            outcomes = (f.result() for f in as_completed(futures))
            _collect(outcomes, titles, files, all_checks, failed, index_path)
    else:
        _collect((_run_one(*t) for t in tasks), titles, files, all_checks, failed, index_path)
    write_index(out, titles, files, all_checks, _mode_line(quick, checks_only))
    if failed:
        print("failed analyses:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def _run_one(analyses_dir: str, name: str, out: str, quick: bool, checks_only: bool) -> dict:
    """Run one analysis (in this process or a worker): data, figures and validated checks;
    a failure is returned, not raised, so that the others go on."""
    import matplotlib

    matplotlib.use("Agg")
    t0 = time.perf_counter()
    outdir = Path(out)
    try:
        mod = _load(Path(analyses_dir), name)
        title = getattr(mod, "TITLE", name)
        if checks_only:
            import pandas as pd

            data = pd.read_csv(outdir / f"{name}.csv")
            written = sorted(outdir.glob(f"{name}*.png"))
        else:
            data = mod.run(quick=quick)
            data.to_csv(outdir / f"{name}.csv", index=False)
            written = mod.plot(data, outdir)
        rows = _validated(name, mod.checks(data))
    except Exception as exc:  # keep going: report the failure at the end
        import traceback

        traceback.print_exc()
        return {"name": name, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "name": name,
        "title": title,
        "files": [Path(f).name for f in written],
        "checks": rows,
        "seconds": time.perf_counter() - t0,
    }


def _collect(outcomes, titles, files, all_checks, failed, index_path) -> None:
    """Record each finished analysis (its checks written to ``checks.json`` at once)."""
    for o in outcomes:
        name = o["name"]
        if "error" in o:
            failed.append(f"{name}: {o['error']}")
            continue
        titles[name], files[name], all_checks[name] = o["title"], o["files"], o["checks"]
        index_path.write_text(json.dumps(all_checks, indent=2, default=str))
        print(f"[{name}] {len(o['files'])} figure(s) in {o['seconds']:.1f} s", flush=True)
        for c in o["checks"]:
            print(f"    {c['verdict']:<14} {c['result']}: measured {c['measured']}")


def _cell(v: object) -> str:
    """A table cell: floats to 4 significant digits, no ``None``, no ``|``."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "/")


def write_index(
    out: Path,
    titles: dict,
    files: dict,
    checks: dict,
    mode: str = "Full run: `make figures` (`convkit figures`).",
) -> None:
    """Write ``out/index.md``: the mode line, then per analysis (sorted) its title, figures and
    check table (result, setting, measured, theoretical, verdict, reason)."""
    from convkit.verdicts import VERDICTS

    lines = ["# convkit figures", "", mode, ""]
    lines += [
        "Verdicts (one vocabulary, `convkit.verdicts`): "
        + ", ".join(f"`{v}`" for v in VERDICTS)
        + ". An exponent holds only when its interval contains the claim and its half-width is "
        "at most 0.25.",
        "",
    ]
    for name in sorted(checks):
        lines += [f"## {name}", "", titles.get(name, ""), ""]
        pngs = files.get(name) or [f.name for f in sorted(out.glob(f"{name}*.png"))]
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
