"""Render ``README.md`` from ``README.template.md`` so that every number in it comes from
committed data.

Usage: ``python tools/render_readme.py`` writes ``README.md``; ``python tools/render_readme.py
--check`` writes nothing and exits 1 with a unified diff when ``README.md`` differs from the
rendering (``tests/test_readme_data.py`` runs it).

The template is Markdown with placeholders ``{{ SOURCE.PATH }}``:

``{{ <analysis>.<key> }}``
    ``facts(data)[key]`` of the analysis module ``analyses/<analysis>.py``, where ``data`` is
    ``pandas.read_csv("figures/<analysis>.csv")``.  Every analysis module exposes
    ``facts(data) -> dict[str, str]``; a missing hook or key is an error naming it.
``{{ checks.<analysis>.<result>.<field> }}``
    Field ``field`` (``verdict``, ``measured``, ``setting``, ``theoretical``, ``reason`` or any
    other key of the row) of the check row whose ``result`` is ``<result>`` in
    ``figures/checks.json``.  When several rows share a result, ``<result>#k`` takes the
    ``k``-th (1-based).  ``<result>`` is a claim id: a registered result of the theory library
    or a claim of the analysis' ``CLAIMS`` (:func:`convkit.verdicts.declare_claims`, named
    by its full id or by its short id without the ``<analysis>.`` prefix); the field ``statement`` (also ``source``, ``kind``) gives the declared claim's statement.
    ``{{ checks.<analysis>.counts }}`` gives the number of rows per verdict.
``{{ bench.<metric>.<field> }}``
    From the recorded runs ``benchmarks/history/*.json`` (each ``{"recorded", "modules",
    "metrics": {name: {"value", "goal", "higher_is_better"}}}``): ``last`` (the most recent
    value), ``range`` (lowest to highest over the runs that measured it, with their number),
    ``runs``, ``goal`` (``>= g`` or ``<= g``) and ``met`` (whether the last value meets it).

Numbers are rendered rounded (3 significant digits for the benchmarks; check values as stored,
rounded to 4 significant digits).  Every error of a rendering is reported at once, each naming
its placeholder and what is allowed.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import math
import pkgutil
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}")
HEADER = (
    "<!-- README.md is rendered from README.template.md by tools/render_readme.py "
    "(numbers from figures/*.csv, figures/checks.json and benchmarks/history/): edit the "
    "template, then run `python tools/render_readme.py`. -->\n"
)
BENCH_FIELDS = ("last", "range", "runs", "goal", "met")
#: fields of a check placeholder read from the analysis' declared claim, not from the row
CLAIM_FIELDS = ("statement", "source", "kind")


class RenderError(ValueError):
    """A placeholder that cannot be filled (unknown source, analysis, key, row or metric)."""


@dataclass
class Sources:
    """Where the rendered data live, with caches of what has been read.

    Parameters
    ----------
    figures : Path
        Directory with ``<analysis>.csv`` and ``checks.json``.
    analyses : Path
        Directory of the analysis modules (a package importable from its parent).
    history : Path
        Directory of the recorded benchmark runs (``*.json``).
    """

    figures: Path = REPO / "figures"
    analyses: Path = REPO / "analyses"
    history: Path = REPO / "benchmarks" / "history"
    _facts: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    _checks: dict | None = field(default=None, repr=False)
    _bench: dict[str, list[tuple[str, dict]]] | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ analyses' facts
    def analysis_names(self) -> list[str]:
        """Names of the analysis modules."""
        return sorted(
            m.name for m in pkgutil.iter_modules([str(self.analyses)]) if not m.name.startswith("_")
        )

    def facts(self, name: str) -> dict[str, str]:
        """``facts(data)`` of analysis ``name`` on its committed CSV (cached)."""
        if name not in self._facts:
            import pandas as pd

            parent = str(Path(self.analyses).resolve().parent)
            if parent not in sys.path:
                sys.path.insert(0, parent)
            mod = importlib.import_module(f"{Path(self.analyses).name}.{name}")
            hook = getattr(mod, "facts", None)
            if not callable(hook):
                raise RenderError(
                    f"analysis {name!r} has no facts(data) -> dict[str, str] hook "
                    f"(analyses/{name}.py)"
                )
            csv = Path(self.figures) / f"{name}.csv"
            if not csv.exists():
                raise RenderError(f"analysis {name!r}: no committed data at {csv}")
            got = hook(pd.read_csv(csv))
            if not isinstance(got, dict):
                raise RenderError(
                    f"analysis {name!r}: facts(data) returned {type(got).__name__}, "
                    "expected dict[str, str]"
                )
            self._facts[name] = got
        return self._facts[name]

    # ------------------------------------------------------------------ checks.json
    def checks(self) -> dict:
        """The rows of ``checks.json`` per analysis (cached)."""
        if self._checks is None:
            path = Path(self.figures) / "checks.json"
            if not path.exists():
                raise RenderError(f"no {path}: run `convkit figures --checks-only` first")
            self._checks = json.loads(path.read_text())
        return self._checks

    def claims(self, name: str) -> dict[str, Any]:
        """The declared claims (``CLAIMS``) of analysis ``name`` (none if it declares none)."""
        parent = str(Path(self.analyses).resolve().parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        mod = importlib.import_module(f"{Path(self.analyses).name}.{name}")
        return dict(getattr(mod, "CLAIMS", {}))

    # ------------------------------------------------------------------ benchmark history
    def bench(self) -> dict[str, list[tuple[str, dict]]]:
        """Per metric, ``(recorded, entry)`` of every recorded run that measured it, oldest
        first (cached)."""
        if self._bench is None:
            runs = []
            for path in sorted(Path(self.history).glob("*.json")):
                body = json.loads(path.read_text())
                if not isinstance(body, dict) or not isinstance(body.get("metrics"), dict):
                    raise RenderError(f"{path}: expected an object with a 'metrics' object")
                runs.append((str(body.get("recorded", path.stem)), body["metrics"]))
            runs.sort(key=lambda r: r[0])
            self._bench = {}
            for recorded, metrics in runs:
                for name, entry in metrics.items():
                    self._bench.setdefault(name, []).append((recorded, entry))
        return self._bench


def _close(word: str, options) -> str:
    near = difflib.get_close_matches(word, list(options), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(map(repr, near))}?" if near else ""


def _plain(v: Any) -> str:
    """A value as text: floats to 4 significant digits, lists element-wise, None as '-',
    ``|`` escaped (``\\|``) so that a value never splits a Markdown table cell."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{float(f'{v:.4g}'):g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_plain(x) for x in v) + "]"
    return str(v).replace("|", "\\|")  # a literal bar, also inside a Markdown table


def _num(v: float) -> str:
    """A benchmark value: 3 significant digits, thousands with a separator."""
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{float(f'{v:.3g}'):g}"


def _facts_value(expr: str, src: Sources) -> str:
    name, _, key = expr.partition(".")
    names = src.analysis_names()
    if name not in names:
        raise RenderError(
            f"{{{{ {expr} }}}}: unknown source {name!r}; allowed: 'checks', 'bench' or an "
            f"analysis among {names}{_close(name, names)}"
        )
    if not key:
        raise RenderError(f"{{{{ {expr} }}}}: name a key, as in {{{{ {name}.<key> }}}}")
    facts = src.facts(name)
    if key not in facts:
        raise RenderError(
            f"{{{{ {expr} }}}}: facts of analysis {name!r} have no key {key!r}; keys: "
            f"{sorted(facts)}{_close(key, facts)}"
        )
    value = facts[key]
    if not isinstance(value, str):
        raise RenderError(
            f"{{{{ {expr} }}}}: facts of {name!r} give {type(value).__name__} for {key!r}; "
            "facts values must be formatted strings"
        )
    return value


def _checks_value(expr: str, src: Sources) -> str:
    rest = expr[len("checks.") :]
    analysis, _, rest = rest.partition(".")
    checks = src.checks()
    if analysis not in checks:
        raise RenderError(
            f"{{{{ {expr} }}}}: figures/checks.json has no analysis {analysis!r}; analyses: "
            f"{sorted(checks)}{_close(analysis, checks)}"
        )
    rows = checks[analysis]
    if rest == "counts":
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        return ", ".join(f"{v} {n}" for v, n in sorted(counts.items(), key=lambda x: -x[1]))
    result, dot, fld = rest.rpartition(".")
    if not dot or not result:
        raise RenderError(
            f"{{{{ {expr} }}}}: expected checks.<analysis>.<result>.<field> or "
            "checks.<analysis>.counts"
        )
    index = None
    m = re.fullmatch(r"(.*)#(\d+)", result)
    if m:
        result, index = m.group(1), int(m.group(2))
    hits = [r for r in rows if r.get("result") == result]
    if not hits:  # a declared claim by its short id: <analysis>.<short id>
        hits = [r for r in rows if r.get("result") == f"{analysis}.{result}"]
        if hits:
            result = f"{analysis}.{result}"
    if not hits:
        results = sorted({r.get("result", "") for r in rows})
        raise RenderError(
            f"{{{{ {expr} }}}}: analysis {analysis!r} has no check row with result "
            f"{result!r}; results: {results}"
        )
    if index is None and len(hits) > 1:
        raise RenderError(
            f"{{{{ {expr} }}}}: {len(hits)} rows of {analysis!r} have result {result!r}; "
            f"choose one with '{result}#k', k in 1..{len(hits)}"
        )
    if index is not None and not 1 <= index <= len(hits):
        raise RenderError(
            f"{{{{ {expr} }}}}: row #{index} of {result!r} does not exist; k in 1..{len(hits)}"
        )
    row = hits[(index or 1) - 1]
    if fld in CLAIM_FIELDS and fld not in row:
        claims = src.claims(analysis)
        if result not in claims:
            raise RenderError(
                f"{{{{ {expr} }}}}: {result!r} is not a claim declared by analysis "
                f"{analysis!r} (a registered result's statement is on the theory pages); "
                f"declared: {sorted(claims)}"
            )
        return _plain(getattr(claims[result], fld))
    if fld not in row:
        raise RenderError(f"{{{{ {expr} }}}}: the row has no field {fld!r}; fields: {sorted(row)}")
    return _plain(row[fld])


def _bench_value(expr: str, src: Sources) -> str:
    metric, dot, fld = expr[len("bench.") :].rpartition(".")
    bench = src.bench()
    if not dot or fld not in BENCH_FIELDS:
        raise RenderError(
            f"{{{{ {expr} }}}}: expected bench.<metric>.<field> with field in {BENCH_FIELDS}"
        )
    if metric not in bench:
        raise RenderError(
            f"{{{{ {expr} }}}}: no recorded run in benchmarks/history measured {metric!r}"
            f"{_close(metric, bench)}"
        )
    runs = bench[metric]
    values = [float(e["value"]) for _, e in runs]
    last = runs[-1][1]
    goal, higher = last.get("goal"), bool(last.get("higher_is_better", True))
    if fld == "last":
        return _num(values[-1])
    if fld == "runs":
        return str(len(values))
    if fld == "range":
        lo, hi = _num(min(values)), _num(max(values))
        n = len(values)
        span = lo if lo == hi else f"{lo}-{hi}"
        return f"{span} ({n} run{'s' if n > 1 else ''})"
    if goal is None:
        return "-" if fld == "goal" else "no goal"
    if fld == "goal":
        return f"{'>=' if higher else '<='} {_num(goal)}"
    met = values[-1] >= goal if higher else values[-1] <= goal
    return "met" if met else "not met"


def resolve(expr: str, src: Sources) -> str:
    """The text of one placeholder ``{{ expr }}`` (see the module docstring)."""
    expr = expr.strip()
    if expr.startswith("checks."):
        return _checks_value(expr, src)
    if expr.startswith("bench."):
        return _bench_value(expr, src)
    return _facts_value(expr, src)


def render(template: str, src: Sources | None = None) -> str:
    """The README text: ``HEADER`` and ``template`` with every placeholder filled.

    Parameters
    ----------
    template : str
        Markdown with ``{{ ... }}`` placeholders.
    src : Sources or None
        Where the data are (default: this repository's committed data).

    Returns
    -------
    str
        The rendered text.

    Raises
    ------
    RenderError
        Listing every placeholder that could not be filled, each with the reason.
    """
    src = src or Sources()
    errors: list[str] = []

    def fill(m: re.Match) -> str:
        try:
            return resolve(m.group(1), src)
        except RenderError as exc:
            errors.append(str(exc))
            return m.group(0)

    text = PLACEHOLDER.sub(fill, template)
    if errors:
        raise RenderError(
            f"{len(errors)} placeholder(s) could not be filled:\n  " + "\n  ".join(errors)
        )
    return HEADER + text


def diff(current: str, rendered: str, name: str = "README.md") -> str:
    """Unified diff from ``current`` to ``rendered`` (empty when equal)."""
    return "".join(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            rendered.splitlines(keepends=True),
            fromfile=f"{name} (committed)",
            tofile=f"{name} (rendered from the template and the data)",
        )
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns 0 (written, or up to date with ``--check``), 1 (``--check``: the
    README differs; the diff is printed) or 2 (a placeholder could not be filled)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    p.add_argument("--template", default=str(REPO / "README.template.md"))
    p.add_argument("--readme", default=str(REPO / "README.md"))
    p.add_argument("--figures", default=str(REPO / "figures"))
    p.add_argument("--analyses", default=str(REPO / "analyses"))
    p.add_argument("--history", default=str(REPO / "benchmarks" / "history"))
    args = p.parse_args(argv)
    src = Sources(Path(args.figures), Path(args.analyses), Path(args.history))
    try:
        text = render(Path(args.template).read_text(), src)
    except RenderError as exc:
        print(f"render_readme: {exc}", file=sys.stderr)
        return 2
    readme = Path(args.readme)
    if args.check:
        current = readme.read_text() if readme.exists() else ""
        d = diff(current, text, readme.name)
        if d:
            print(d, end="")
            print(
                f"render_readme: {readme} differs from the rendering of {args.template}; run "
                "`python tools/render_readme.py` (and commit) after changing the template or "
                "the data",
                file=sys.stderr,
            )
            return 1
        print(f"render_readme: {readme} is up to date with the data")
        return 0
    readme.write_text(text)
    print(f"render_readme: wrote {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
