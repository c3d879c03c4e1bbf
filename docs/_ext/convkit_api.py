"""The API reference pages, written at build time from the package itself.

Every public module of :mod:`convkit` (no component starting with ``_``) gets one page with
its docstring and every public name it defines: the names of its ``__all__``, or, for a
module without ``__all__``, the classes and functions defined in it whose names do not start
with ``_``. Each object is described once, on the page of the module that defines it (its
*home*); a package that re-exports it links there. The index page lists every name of
``import convkit as ck`` (``convkit.__all__`` and the lazily loaded names) with its summary.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Sections of the API index: title -> module prefixes (first match wins, in this order).
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Engines and results",
        ("convkit.simulate", "convkit.result", "convkit.recording", "convkit.exact"),
    ),
    ("Problems", ("convkit.problems",)),
    ("Algorithms", ("convkit.algorithms",)),
    ("Schedules", ("convkit.schedules",)),
    ("Topologies and compressors", ("convkit.topology", "convkit.compression")),
    ("Theory (bounds)", ("convkit.bounds",)),
    ("Checks and verdicts", ("convkit.checks", "convkit.verdicts")),
    ("Sweeps", ("convkit.sweep",)),
    ("Figures and command line", ("convkit.figures", "convkit.plotting", "convkit.cli")),
    ("Infrastructure", ("convkit.backend", "convkit.validation", "convkit")),
)


@dataclass
class ModulePage:
    """What one module page shows: its own objects and the names it re-exports."""

    name: str
    is_package: bool
    own: list[tuple[str, Any]] = field(default_factory=list)
    reexports: list[tuple[str, str]] = field(default_factory=list)  # (name, home path)


def public_modules() -> list[str]:
    """Names of the public modules of convkit, imported (package first, then sorted)."""
    import convkit

    out = ["convkit"]
    for info in pkgutil.walk_packages(convkit.__path__, "convkit."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]):
            continue
        importlib.import_module(info.name)
        out.append(info.name)
    return sorted(set(out), key=lambda n: (n != "convkit", n))


def _is_package(mod: Any) -> bool:
    return hasattr(mod, "__path__")


def public_names(modname: str) -> list[str]:
    """The public names of module ``modname``: its ``__all__`` (plus lazily loaded names of a
    package), else its own classes and functions without a leading underscore."""
    mod = importlib.import_module(modname)
    if hasattr(mod, "__all__"):
        names = list(mod.__all__)
        names += [n for n in getattr(mod, "_LAZY_NAMES", {}) if n not in names]
        return [n for n in names if n != "__version__"]
    return [
        n
        for n, obj in vars(mod).items()
        if not n.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == modname
    ]


def _kind(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj) and hasattr(obj, "__name__") and hasattr(obj, "__module__"):
        return "function"
    return "data"


def build_pages() -> tuple[dict[str, ModulePage], dict[str, str]]:
    """Module pages and the home path (``module.name``) of every public name."""
    modules = public_modules()
    pages = {m: ModulePage(m, _is_package(importlib.import_module(m))) for m in modules}
    plain_modules = [m for m in modules if not pages[m].is_package]
    homes: dict[int, str] = {}  # id(obj) -> home module
    home_path: dict[str, str] = {}  # "module.name" as exported -> home "module.name"
    for m in modules:
        mod = importlib.import_module(m)
        for n in public_names(m):
            obj = getattr(mod, n)
            kind = _kind(obj)
            if kind == "module":
                continue
            if id(obj) in homes:
                home_path[f"{m}.{n}"] = f"{homes[id(obj)]}.{n}"
                continue
            defined = getattr(obj, "__module__", None) if kind != "data" else None
            if defined in pages and getattr(obj, "__name__", n) == n:
                home = defined
            else:
                home = next(
                    (
                        p
                        for p in plain_modules
                        if n in getattr(importlib.import_module(p), "__all__", ())
                        and getattr(importlib.import_module(p), n, None) is obj
                    ),
                    m,
                )
            homes[id(obj)] = home
            pages[home].own.append((n, obj))
            home_path[f"{m}.{n}"] = f"{home}.{n}"
    for m in modules:
        for n in public_names(m):
            target = home_path.get(f"{m}.{n}")
            if target is not None and target != f"{m}.{n}":
                pages[m].reexports.append((n, target))
    return pages, home_path


def summary(obj: Any) -> str:
    """The first sentence block of ``obj``'s docstring, on one line."""
    doc = inspect.getdoc(obj) or ""
    first = doc.strip().split("\n\n")[0]
    return " ".join(first.split())


def _heading(text: str, char: str = "=") -> list[str]:
    return [text, char * len(text), ""]


def _has_doc_comment(modname: str, name: str) -> bool:
    """Whether the module documents ``name`` with a ``#:`` comment or a string after it."""
    from sphinx.pycode import ModuleAnalyzer

    try:
        return ("", name) in ModuleAnalyzer.for_module(modname).find_attr_docs()
    except Exception:  # no source (compiled or generated module)
        return False


def _object_block(modname: str, name: str, obj: Any) -> list[str]:
    kind = _kind(obj)
    path = f"{modname}.{name}"
    if kind == "class":
        return [f".. autoclass:: {path}", "   :members:", ""]
    if kind == "function":
        return [f".. autofunction:: {path}", ""]
    if _has_doc_comment(modname, name):
        return [f".. autodata:: {path}", "   :no-value:", ""]
    # autodata would show the docstring of the value's type (``dict``): state the type only
    return [
        f".. py:data:: {path}",
        f"   :type: {type(obj).__name__}",
        "",
        "   (no description in the source)",
        "",
    ]


def module_page(page: ModulePage) -> str:
    """The reStructuredText of one module page."""
    lines = _heading(f"``{page.name}``")
    lines += [f".. automodule:: {page.name}", "   :no-members:", ""]
    if page.own:
        lines += _heading("Contents", "-")
        lines += [f"* :py:obj:`~{page.name}.{n}`" for n, _ in page.own] + [""]
        for n, obj in page.own:
            lines += _object_block(page.name, n, obj)
    if page.reexports:
        lines += _heading("Also available here", "-")
        lines += [f"* ``{page.name}.{n}``: :py:obj:`{t}`" for n, t in page.reexports] + [""]
    return "\n".join(lines)


def _section_of(modname: str) -> str:
    for title, prefixes in SECTIONS:
        if any(modname == p or modname.startswith(p + ".") for p in prefixes):
            return title
    return SECTIONS[-1][0]


def index_page(pages: dict[str, ModulePage], home_path: dict[str, str]) -> str:
    """The API index: every name of ``import convkit as ck``, then the module pages."""
    import convkit

    lines = _heading("API reference")
    lines += [
        "Every public name of convkit, described once on the page of the module that defines",
        "it. Names re-exported by a package link to that page. Docstrings follow the numpy",
        "style; the maths of each result of the theory is on the :doc:`theory pages",
        "<../theory/index>`.",
        "",
    ]
    lines += _heading("``import convkit as ck``", "-")
    lines += [".. list-table::", "   :header-rows: 1", "   :widths: 25 75", ""]
    lines += ["   * - name", "     - summary"]
    names = [n for n in public_names("convkit")]
    for n in names:
        obj = getattr(convkit, n)
        target = home_path.get(f"convkit.{n}", f"convkit.{n}")
        text = summary(obj).replace("\n", " ") or "-"
        lines += [f"   * - :py:obj:`ck.{n} <{target}>`", f"     - {text}"]
    lines.append("")
    lines += [
        "Submodules loaded on first use: "
        + ", ".join(f":doc:`ck.{m} <convkit.{m}>`" for m in sorted(convkit._LAZY_MODULES))
        + ".",
        "",
    ]
    grouped: dict[str, list[str]] = {title: [] for title, _ in SECTIONS}
    for m in pages:
        grouped[_section_of(m)].append(m)
    for title, mods in grouped.items():
        if not mods:
            continue
        lines += _heading(title, "-")
        lines += [".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {m}" for m in mods] + [""]
    return "\n".join(lines)


#: Exported path -> home path of every public name, filled by :func:`write_api` (used to
#: resolve a reference to a re-exported name, ``convkit.exact.expected_error``, to its page).
HOMES: dict[str, str] = {}


def write_api(outdir: Path) -> list[Path]:
    """Write ``outdir/index.rst`` and one ``outdir/<module>.rst`` per public module."""
    outdir.mkdir(parents=True, exist_ok=True)
    pages, home_path = build_pages()
    HOMES.clear()
    HOMES.update({k: v for k, v in home_path.items() if k != v})
    written = []
    for m, page in pages.items():
        p = outdir / f"{m}.rst"
        p.write_text(module_page(page))
        written.append(p)
    idx = outdir / "index.rst"
    idx.write_text(index_page(pages, home_path))
    written.append(idx)
    return written
