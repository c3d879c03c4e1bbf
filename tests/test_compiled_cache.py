"""One cache of compiled kernels: :func:`convkit._kernel_switch.compiled`.

Every compiled kernel of the package is built by ``compiled(name, builder)``: once per name
and process, under a lock, and not at all while ``convkit.kernels`` is off or numba cannot be
used.  No other module keeps a lazy cache of its own (a module-level variable filled through
``global``, or a ``functools`` cache around a builder): an ``ast`` scan of the package says
so, and is seen failing on such a cache.
"""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import convkit as ck
from convkit import _kernel_switch
from convkit._kernel_switch import compiled

ROOT = Path(ck.__file__).parent
#: the one module allowed to keep compiled kernels (and its process-wide switch)
HOME = ROOT / "_kernel_switch.py"
_CACHES = {"cache", "lru_cache", "cached_property"}


def _imports_numba(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "numba" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numba":
            return True
    return False


def _decorator_name(dec: ast.expr) -> str:
    if isinstance(dec, ast.Call):
        dec = dec.func
    if isinstance(dec, ast.Attribute):
        return dec.attr
    return dec.id if isinstance(dec, ast.Name) else ""


def lazy_caches(source: str) -> list[str]:
    """The hand-written lazy caches of a module that compiles kernels (imports numba):
    ``global`` statements in its functions and ``functools`` caches on its functions."""
    tree = ast.parse(source)
    if not _imports_numba(tree):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                if _decorator_name(dec) in _CACHES:
                    found.append(f"line {node.lineno}: @{_decorator_name(dec)} on {node.name}")
    return found


def test_no_module_keeps_its_own_cache_of_compiled_kernels():
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted(ROOT.rglob("*.py"))
        if path != HOME and (found := lazy_caches(path.read_text()))
    }
    assert not offenders, (
        f"lazy caches of compiled kernels outside convkit._kernel_switch.compiled: {offenders}"
    )


def test_the_scan_sees_a_hand_written_cache():
    """Negative control: the patterns this test forbids are found."""
    by_global = (
        "_K = None\n"
        "def kernel():\n"
        "    global _K\n"
        "    if _K is None:\n"
        "        import numba\n"
        "        _K = numba.njit(lambda x: x)\n"
        "    return _K\n"
    )
    by_functools = (
        "import functools\n"
        "@functools.cache\n"
        "def kernel():\n"
        "    import numba\n"
        "    return numba.njit(lambda x: x)\n"
    )
    assert lazy_caches(by_global) == ["line 3: global _K"]
    assert lazy_caches(by_functools) == ["line 3: @cache on kernel"]
    assert lazy_caches(by_global.replace("import numba\n", "pass\n")) == []


@pytest.fixture
def fresh(monkeypatch):
    """An empty kernel cache for the test (the package's kernels come back afterwards)."""
    monkeypatch.setattr(_kernel_switch, "_BUILT", {})
    monkeypatch.setattr(_kernel_switch, "numba_usable", lambda: True)


def test_compiled_builds_once_under_concurrent_calls(fresh):
    calls = []
    barrier = threading.Barrier(8)

    def builder():
        calls.append(threading.get_ident())
        time.sleep(0.05)  # a slow compilation: the other threads arrive meanwhile
        return object()

    got = [None] * 8

    def ask(i):
        barrier.wait()
        got[i] = compiled("test.kernel", builder)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert all(g is got[0] for g in got) and got[0] is not None
    assert compiled("test.kernel", builder) is got[0] and len(calls) == 1
    assert compiled("test.other", builder) is not got[0] and len(calls) == 2


def test_compiled_builds_nothing_while_switched_off_or_without_numba(fresh, monkeypatch):
    calls = []

    def builder():
        calls.append(1)
        return "kernel"

    with ck.kernels(enabled=False):
        assert compiled("test.kernel", builder) is None
        # a kernel governed by its caller's argument (the exact engine's use_numba) is built
        assert compiled("test.exact", builder, switched=False) == "kernel"
    assert calls == [1]
    assert compiled("test.kernel", builder) == "kernel" and calls == [1, 1]
    monkeypatch.setattr(_kernel_switch, "numba_usable", lambda: False)
    assert compiled("test.new", builder) is None and calls == [1, 1]
    assert compiled("test.kernel", builder) == "kernel"  # built ones stay cached


def test_a_cached_none_sends_callers_down_the_generic_path(fresh):
    """Tests set an entry to None to run a kernel's callers on their generic path."""
    _kernel_switch._BUILT["test.kernel"] = None
    assert compiled("test.kernel", lambda: "kernel") is None


def test_the_public_switch_carries_the_cache():
    assert ck.kernels.compiled is compiled


def test_an_engine_call_runs_on_its_plans_kernel_setting(fresh):
    """Inside an engine call's threads the plan's setting governs (planned_kernels), not the
    process-wide switch: the kernels are chosen once, by the plan."""
    from convkit._kernel_switch import kernels_enabled, planned_kernels

    _kernel_switch._BUILT["test.kernel"] = "kernel"
    seen = {}

    def other_thread():
        seen["other"] = compiled("test.kernel", lambda: "kernel")

    with planned_kernels(False):
        assert not kernels_enabled() and compiled("test.kernel", lambda: "kernel") is None
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        with ck.kernels(enabled=True), planned_kernels(False):
            assert compiled("test.kernel", lambda: "kernel") is None
    assert seen["other"] == "kernel"  # another thread reads the process-wide switch
    with ck.kernels(enabled=False):
        with planned_kernels(True):
            assert compiled("test.kernel", lambda: "kernel") == "kernel"
        assert compiled("test.kernel", lambda: "kernel") is None  # restored


def test_a_switch_flipped_during_a_call_changes_nothing_of_it(monkeypatch):
    """simulate reads the switch once, into its plan; flipping it from inside the run (a
    problem's sampling, here) leaves the call on the planned kernels: the compiled step runs
    at every step, as in a run left alone, with the same numbers."""
    from convkit import _kernels

    real = _kernels._get_kernel()
    if real is None:
        pytest.skip("numba is not usable")
    calls = []

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setitem(_kernel_switch._BUILT, "_kernels.ls_step", spy)
    prob = ck.LeastSquares.rademacher(3, "1/i", seed=0)  # not on the fused segments
    algo = ck.MBA(2, ck.Constant(0.1))
    ref = ck.simulate(prob, algo, steps=30, replicates=4, seed=1, threads=1)
    n_ref = len(calls)

    class Flipping(ck.LeastSquares):
        def sample(self, stream, shape):
            ck.kernels(enabled=False)  # process-wide, mid-run
            return super().sample(stream, shape)

    flip = Flipping(prob.h, prob.noise, "rademacher", theta_star=prob.theta_star)
    try:
        got = ck.simulate(flip, algo, steps=30, replicates=4, seed=1, threads=1)
    finally:
        ck.kernels(enabled=True)
    assert n_ref >= 30 and len(calls) == 2 * n_ref
    assert got.meta["path"]["kernels"] is True
    a, b = ref.values[algo.label].values, got.values[algo.label].values
    assert np.array_equal(a, b, equal_nan=True)
