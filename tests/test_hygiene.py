"""One definition per helper shared across packages (issue 32, item 7)."""

from __future__ import annotations

from pathlib import Path


def test_one_json_default_for_results_and_sweeps():
    """The metadata of results and sweeps is written by one ``json_default`` (there were two,
    one of which wrote NumPy booleans as the string 'True')."""
    import json

    import numpy as np

    import convkit.sweep.cache as cache
    import convkit.sweep.executors as executors
    import convkit.sweep.runner as runner
    from convkit.result import json_default

    meta = {"b": np.bool_(True), "i": np.int64(3), "f": np.float32(0.5), "a": np.arange(2)}
    assert json.loads(json.dumps(meta, default=json_default)) == {
        "b": True, "i": 3, "f": 0.5, "a": [0, 1]
    }  # fmt: skip
    for module in (cache, executors, runner):
        assert module.json_default is json_default
        assert not hasattr(module, "_json_default")


def _package(module: str, root) -> str:
    """The package a module belongs to: ``convkit.<sub>`` for a subpackage, ``convkit`` for a
    top-level module, ``analyses``."""
    parts = module.split(".")
    if parts[0] != "convkit":
        return parts[0]
    if len(parts) > 1 and (root / "convkit" / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "convkit"


def test_no_private_name_is_imported_across_packages():
    """A helper another package needs is public (``convkit.result.json_default``,
    ``convkit.topology_spec.TOPOLOGY_CONSTRUCTORS``, ``convkit.sweep.runner.check_output``):
    no ``from <module of another package> import _name`` in convkit/ or analyses/."""
    import ast

    from test_import_cycles import ROOT, _modules, import_target

    found = []
    for module, path in _modules().items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = import_target(node, module, is_package)
            if target.split(".")[0] not in ("convkit", "analyses"):
                continue
            source = target if (ROOT / Path(*target.split("."))).is_dir() else target + ".x"
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and _package(source, ROOT) != _package(module, ROOT):
                    found.append(f"{module}: from {target} import {alias.name}")
    assert not found, "private names imported across packages:\n" + "\n".join(found)
