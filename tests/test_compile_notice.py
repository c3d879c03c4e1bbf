"""The first kernel compilation of a process says so once on stderr, and a warm numba cache
stays silent (convkit._jit.watch_compilation)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

from convkit import _jit  # noqa: E402

#: two calls of the compiled least-squares step: the second needs no compilation
_CALLS = textwrap.dedent(
    """
    import convkit as ck
    from convkit._jit import compile_seconds
    prob = ck.LeastSquares.gaussian(d=3, spectrum="1/i", noise=1.0, seed=0)
    step = ck.PolyDecay(C=0.3, alpha=0.75)
    for seed in (1, 2):
        ck.simulate(prob, [ck.MBA(2, step)], steps=20, replicates=4, seed=seed, threads=1,
                    progress=False)
    print("compiled for", compile_seconds() > 0)
    """
)


def _run(cache: str, notice: str = "1") -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, CONVKIT_COMPILE_NOTICE=notice)
    env.pop("CONVKIT_NO_NUMBA", None)
    return subprocess.run(
        [sys.executable, "-c", _CALLS], env=env, capture_output=True, text=True, timeout=600,
        check=True,
    )  # fmt: skip


def test_notice_once_when_compiling_and_silent_with_a_warm_cache(tmp_path):
    cold = _run(str(tmp_path))
    notice = _jit.compile_notice()
    assert notice.startswith("convkit: compiling kernels, first run only, about ")
    assert cold.stderr.count(notice) == 1, cold.stderr
    assert "compiled for True" in cold.stdout
    warm = _run(str(tmp_path))  # the same cache directory: every kernel loads from it
    assert "compiling kernels" not in warm.stderr, warm.stderr
    assert "compiled for False" in warm.stdout
    off = _run(str(tmp_path / "other"), notice="0")  # compiles again, but asked to be quiet
    assert "compiling kernels" not in off.stderr and "compiled for True" in off.stdout


def test_listener_says_it_once_and_counts_nested_compilations_once(monkeypatch, capsys):
    """The listener of numba's compile events, driven by hand: the first outermost compile
    prints the notice, nested and later ones do not; the seconds add up per outermost one."""
    monkeypatch.setenv("CONVKIT_COMPILE_NOTICE", "1")
    monkeypatch.setattr(_jit, "_STATE", dict(_jit._STATE, said=False, depth=0, seconds=0.0))
    clock = iter([10.0, 12.5, 20.0, 21.0])
    monkeypatch.setattr(_jit, "_clock", lambda: next(clock))
    _jit._on_start()  # outer compile at t = 10
    _jit._on_start()  # a helper compiled inside it
    _jit._on_end()
    _jit._on_end()  # t = 12.5
    _jit._on_start()  # t = 20
    _jit._on_end()  # t = 21
    err = capsys.readouterr().err
    assert err.count("compiling kernels, first run only") == 1
    assert _jit._STATE["seconds"] == pytest.approx(3.5)


def test_notice_is_off_under_pytest_unless_asked(monkeypatch):
    monkeypatch.delenv("CONVKIT_COMPILE_NOTICE", raising=False)
    assert os.environ.get("PYTEST_CURRENT_TEST")
    assert not _jit.compile_notice_enabled()
    monkeypatch.setenv("CONVKIT_COMPILE_NOTICE", "1")
    assert _jit.compile_notice_enabled()
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setenv("CONVKIT_COMPILE_NOTICE", "0")
    assert not _jit.compile_notice_enabled()
    monkeypatch.delenv("CONVKIT_COMPILE_NOTICE")
    assert _jit.compile_notice_enabled()
