"""Run a command as on another machine of the same kind: narrower SIMD, other thread counts.

Numbers that depend on the machine (the SIMD width the compiled kernels and NumPy's loops use,
the BLAS's summation order, the number of threads) must be tested with tolerances derived from
that dependence.  This runs a command (``make test-portable``: the test suite) in an
environment that changes all of them at once, so that a test which holds only on the machine
it was written on fails here first:

* ``CONVKIT_THREADS=3``: ``convkit.simulate``'s default thread count (all available cores
  otherwise), and ``NUMBA_NUM_THREADS=1``: the exact engine's configurations run serially;
* where the CPU has AVX512, none of its code paths are used: numba compiles for
  ``NUMBA_CPU_NAME=haswell`` with the host's features less every ``avx512*`` / ``evex512`` /
  ``amx*`` one (``NUMBA_CPU_FEATURES``), NumPy's AVX512 dispatch targets enabled on this CPU
  are disabled (``NPY_DISABLE_CPU_FEATURES``: only targets of NumPy's dispatch may be named,
  its baseline may not) and OpenBLAS runs its Haswell kernels (``OPENBLAS_CORETYPE``);
* ``NUMBA_CACHE_DIR=.convkit-cache/numba-portable``: kernels compiled for that target are
  cached apart from the host's.

Variables already set in the environment are kept.  Usage::

    python tools/portable_env.py [--show] [--] COMMAND [ARG ...]

``--show`` prints the variables and exits.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the prefixes of the CPU features (LLVM's names) that numba may not use here
_WIDE_LLVM = ("avx512", "evex512", "amx")


def numpy_avx512_targets() -> list[str]:
    """NumPy's dispatch targets that use AVX512 and are enabled on this CPU (``AVX512F``,
    ``AVX512_SKX``, ... up to NumPy 2.3; ``X86_V4``, ``AVX512_ICL``, ... from 2.4).  Its
    baseline (never AVX512 in the wheels) cannot be disabled, and naming a feature that is not
    a dispatch target only draws a warning, so both are left out."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:  # pragma: no cover - NumPy 1.x
        from numpy.core import _multiarray_umath as umath
    found, baseline = umath.__cpu_features__, set(umath.__cpu_baseline__)
    return [
        name
        for name in umath.__cpu_dispatch__
        if (name.startswith("AVX512") or name == "X86_V4")
        and found.get(name, False)
        and name not in baseline
    ]


def numba_features_without_avx512() -> tuple[str, list[str]] | None:
    """The host's CPU features in LLVM's syntax with every AVX512 (and AMX) one turned off,
    and the names turned off; None when the host has none of them (or no numba)."""
    try:
        import llvmlite.binding as ll
    except ImportError:
        return None
    features = ll.get_host_cpu_features().flatten().split(",")
    wide = [f[1:] for f in features if f.startswith("+") and f[1:].startswith(_WIDE_LLVM)]
    if not wide:
        return None
    return ",".join("-" + f[1:] if f[1:] in wide else f for f in features), wide


def portable_environment() -> dict[str, str]:
    """The variables this tool sets (those already in the environment are not overridden)."""
    env = {
        "CONVKIT_THREADS": "3",
        "NUMBA_NUM_THREADS": "1",
        "NUMBA_CACHE_DIR": str(ROOT / ".convkit-cache" / "numba-portable"),
    }
    narrowed = numba_features_without_avx512()
    if narrowed is not None:
        env["NUMBA_CPU_NAME"] = "haswell"
        env["NUMBA_CPU_FEATURES"] = narrowed[0]
        env["OPENBLAS_CORETYPE"] = "Haswell"
    targets = numpy_avx512_targets()
    if targets:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(targets)
        env.setdefault("OPENBLAS_CORETYPE", "Haswell")
    return {k: v for k, v in env.items() if k not in os.environ}


def _describe(env: dict[str, str]) -> str:
    shown = dict(env)
    if "NUMBA_CPU_FEATURES" in shown:
        narrowed = numba_features_without_avx512()
        off = ",".join(narrowed[1]) if narrowed else "?"
        shown["NUMBA_CPU_FEATURES"] = f"<host features less {off}>"
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in shown.items())


def main(argv: list[str]) -> int:
    show = bool(argv) and argv[0] == "--show"
    if show:
        argv = argv[1:]
    if argv and argv[0] == "--":
        argv = argv[1:]
    env = portable_environment()
    if show:
        print(_describe(env))
        return 0
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print(
            "usage: python tools/portable_env.py [--show] [--] COMMAND [ARG ...]", file=sys.stderr
        )
        return 2
    if not any(k in env for k in ("NUMBA_CPU_FEATURES", "NPY_DISABLE_CPU_FEATURES")):
        print("portable_env: no AVX512 here; only the thread counts change", file=sys.stderr)
    print(f"portable_env: {_describe(env)}", file=sys.stderr)
    Path(env.get("NUMBA_CACHE_DIR", ROOT)).mkdir(parents=True, exist_ok=True)
    os.execvpe(argv[0], argv, {**os.environ, **env})
    return 127  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
