"""No import cycles among convkit's modules and the analyses, and no import upward through the
layers of ARCHITECTURE.md.

The graph has an edge A -> B for every ``import`` / ``from ... import`` of a convkit module B
anywhere in module A (at top level, inside functions and methods, in ``try`` blocks), except
inside ``if TYPE_CHECKING:`` blocks. ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module, else to ``pkg``; relative imports are resolved. Importing a submodule is an
edge to that submodule only (not to its parent package's ``__init__``), so a package that
re-exports its submodules is not a cycle by itself.

The layers are read from the table "Layers and what may import what" of ARCHITECTURE.md (its
second column names the modules of each layer), so that the document and the rule are one:
every module of ``convkit/`` and ``analyses/`` must sit in a layer, and no edge may go to a
higher one.  ``import convkit`` itself loads layers 0-2 (layer 2 here).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "convkit"
ANALYSES = ROOT / "analyses"
#: cycles among the analyses known today, through function-level imports (a plotting module
#: and the study it draws import each other's helpers); the test fails when one disappears,
#: so that its line goes with it
KNOWN_ANALYSES_CYCLES: list[list[str]] = []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """The modules of ``convkit/`` and ``analyses/`` by dotted name."""
    return {_module_name(p): p for base in (PKG, ANALYSES) for p in sorted(base.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_target(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` in ``module`` reads from (relative imports
    resolved against the module's package)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Every imported dotted name in ``tree`` (``from a import b`` gives ``a.b`` and ``a``),
    outside ``if TYPE_CHECKING:`` blocks."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = import_target(node, module, is_package)
            for alias in node.names:
                found.append(f"{target}.{alias.name}\0{target}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the convkit modules it imports."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for item in _imports(tree, name, path.name == "__init__.py"):
            if "\0" in item:
                full, base = item.split("\0")
                target = full if full in mods else base
            else:
                target = item
                while target and target not in mods:
                    target = target.rpartition(".")[0]
            if target in mods and target != name:
                graph[name].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of size > 1 (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return comps


def test_no_import_cycles_among_convkit_modules_and_the_analyses():
    cycles = find_cycles(import_graph())
    new = [c for c in cycles if c not in KNOWN_ANALYSES_CYCLES]
    assert not new, "import cycles among convkit modules and analyses:\n" + "\n".join(
        " <-> ".join(c) for c in new
    )
    gone = [c for c in KNOWN_ANALYSES_CYCLES if c not in cycles]
    assert not gone, f"resolved, remove from KNOWN_ANALYSES_CYCLES: {gone}"


def architecture_layers() -> dict[str, int]:
    """Top-level name (``simulate``, ``exact``, ``analyses``, ``cli``, ...) -> layer, from the
    table of ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    table = text.split("## Layers and what may import what", 1)[1].split("\n\n", 2)[1]
    layers: dict[str, int] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0][:1].isdigit():
            continue
        for name in re.findall(r"`([^`]+)`", cells[1]):
            name = name.rstrip("/")
            if "/" not in name and " " not in name:
                layers[name] = int(cells[0].split()[0])
    return layers


def _layer(module: str, layers: dict[str, int]) -> int | None:
    parts = module.split(".")
    if parts[-1] == "__main__":
        return layers["__main__"]
    if module == "convkit":
        return 2
    return layers.get(parts[0] if parts[0] == "analyses" else parts[1])


def test_no_module_imports_upward_through_the_layers():
    """Every module sits in a layer of ARCHITECTURE.md's table, and every import goes to its
    own layer or below (the sweep package imported the command line until issue 32)."""
    layers = architecture_layers()
    assert layers["sweep"] < layers["cli"] and layers["analyses"] == layers["sweep"]
    graph = import_graph()
    missing = sorted(m for m in graph if _layer(m, layers) is None)
    assert not missing, f"modules in no layer of ARCHITECTURE.md's table: {missing}"
    upward = [
        f"{a} (layer {_layer(a, layers)}) -> {b} (layer {_layer(b, layers)})"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if _layer(b, layers) > _layer(a, layers)
    ]
    assert not upward, "imports upward through the layers:\n" + "\n".join(upward)


def test_the_detector_finds_a_cycle_and_ignores_type_checking_blocks(tmp_path):
    """The detector itself: a two-module cycle is found (through a function-level relative
    import), and an import under ``if TYPE_CHECKING:`` is not an edge."""
    a = ast.parse("def f():\n    from . import b\n")
    b = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    ea = _imports(a, "pkg.a", False)
    eb = _imports(b, "pkg.b", False)
    assert ea == ["pkg.b\0pkg"]
    assert not [e for e in eb if e.startswith("pkg.a")]
    assert find_cycles({"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}) == [["pkg.a", "pkg.b"]]
    assert find_cycles({"pkg.a": {"pkg.b"}, "pkg.b": set()}) == []


@pytest.mark.parametrize(
    "module", ["convkit.simulate", "convkit.exact", "convkit.sweep", "analyses.local_vs_minibatch"]
)
def test_graph_sees_the_main_modules(module):
    graph = import_graph()
    assert any(m == module or m.startswith(module + ".") for m in graph)
