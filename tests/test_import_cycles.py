"""No import cycles among convkit's modules.

The graph has an edge A -> B for every ``import`` / ``from ... import`` of a convkit module B
anywhere in module A (at top level, inside functions and methods, in ``try`` blocks), except
inside ``if TYPE_CHECKING:`` blocks. ``from pkg import name`` is an edge to ``pkg.name`` when
that is a module, else to ``pkg``; relative imports are resolved. Importing a submodule is an
edge to that submodule only (not to its parent package's ``__init__``), so a package that
re-exports its submodules is not a cycle by itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "convkit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
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


def test_no_import_cycles_among_convkit_modules():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles among convkit modules:\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


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


@pytest.mark.parametrize("module", ["convkit.simulate", "convkit.exact", "convkit.sweep"])
def test_graph_sees_the_main_modules(module):
    graph = import_graph()
    assert any(m == module or m.startswith(module + ".") for m in graph)
