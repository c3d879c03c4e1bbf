"""numba's on-disk cache serves the package's kernels in a new process (convkit._jit).

The kernels call compiled helpers through closure variables; without fixed identities the
helpers pickled differently in every process and every kernel was compiled again (2-4 s
each, one more ``__pycache__`` entry each time)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

_WORKLOAD = textwrap.dedent(
    """
    import gc
    import numpy as np
    import convkit as ck
    from convkit import topology as tp
    from convkit.algorithms.decentralized import CHOCOSGD, DeepSqueeze
    from convkit.compression import TopK
    from convkit.exact import expected_error
    from convkit.problems.datasets import synthetic_logistic
    from convkit.problems.finite_sum import FiniteLogistic
    from numba.core.dispatcher import Dispatcher

    st = ck.PolyDecay(0.5, 0.75)
    kw = dict(steps=20, replicates=4, progress=False, threads=1)
    ck.simulate(ck.LogisticRegression.gaussian(2, spectrum="flat"), [ck.MBA(4, st)], **kw)
    ls = ck.LeastSquares.gaussian(3, spectrum="1/i", noise=0.5)
    ck.simulate(ls, [ck.MBA(4, st), ck.OSA(4, st)], **kw)
    expected_error(ls, [ck.MBA(4, st)], steps=50)
    top = tp.ring(6)
    ck.simulate(ls, [CHOCOSGD(top, st, TopK(k=1), 0.4), DeepSqueeze(top, st, TopK(k=1), 0.5)], **kw)
    data, _ = synthetic_logistic(200, 3, seed=1)
    ck.simulate(FiniteLogistic(data.X, data.y, lam=1e-3), [ck.MBA(2, st)], **kw)
    for f in gc.get_objects():
        if isinstance(f, Dispatcher) and f.py_func.__module__.startswith("convkit"):
            if f.stats.cache_misses:
                print("MISS", f.py_func.__module__, f.py_func.__qualname__)
    """
)


def _run(code: str, cwd: str, seed: str, env_extra: dict[str, str] | None = None) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed, **(env_extra or {}))
    env.pop("CONVKIT_NO_NUMBA", None)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def test_package_kernels_load_from_cache_in_a_new_process(tmp_path):
    """A second process (another string-hash seed) compiles none of the package's kernels."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    _run(_WORKLOAD, str(tmp_path), "1", env)  # fills the cache
    second = _run(_WORKLOAD, str(tmp_path), "2", env)
    assert [line for line in second.splitlines() if line.startswith("MISS")] == []


def test_a_changed_helper_in_another_file_recompiles_the_kernel(tmp_path):
    """The fixed identity does not freeze a helper: editing it (in its own file) gives the
    kernel that calls it a new cache entry, with the new result."""
    (tmp_path / "helper_mod.py").write_text(
        textwrap.dedent(
            """
            import functools
            import numba
            from convkit._jit import cacheable

            @functools.cache
            def helper():
                @numba.njit(cache=True, fastmath={"contract", "afn", "arcp"}, inline="always")
                def h(x):
                    return 2.0 * x + 1.0

                return cacheable(h, "test.h")
            """
        )
    )
    (tmp_path / "kernel_mod.py").write_text(
        textwrap.dedent(
            """
            import numba
            from helper_mod import helper

            def kernel():
                h = helper()

                @numba.njit(cache=True)
                def k(x):
                    return h(x)

                return k
            """
        )
    )
    code = "from kernel_mod import kernel; k = kernel(); print(k(1.0), dict(k.stats.cache_hits))"
    first = _run(code, str(tmp_path), "1").split(maxsplit=1)
    second = _run(code, str(tmp_path), "2").split(maxsplit=1)
    assert first[0] == second[0] == "3.0"
    assert first[1] == "{}" and second[1] != "{}"  # compiled, then served from the cache
    src = (tmp_path / "helper_mod.py").read_text().replace("2.0 * x + 1.0", "2.0 * x + 5.0")
    (tmp_path / "helper_mod.py").write_text(src)
    third = _run(code, str(tmp_path), "3").split(maxsplit=1)
    assert third == ["7.0", "{}"]
