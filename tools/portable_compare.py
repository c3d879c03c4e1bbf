"""Every analysis in quick mode, here and as on another machine of the same kind: same numbers?

``make test-portable`` runs this after the test suite.  It runs ``convkit figures --quick`` for
every analysis that :func:`convkit.figures.discover` finds (none is named here: a new analysis
is covered when it is added) twice, into two scratch directories: once in this environment and
once under ``tools/portable_env.py`` (other default thread counts; where this CPU has AVX512,
none of it in numba's kernels, NumPy's loops or OpenBLAS).  Then it compares:

* ``checks.json``: every check's verdict, exactly (a verdict is a decision);
* every CSV, column by column (rows by position), with the rule of the column's kind:

  - text, integer and boolean columns (configurations, counts, steps, bits, divergence counts,
    brackets written as labels): **exactly**; a difference is a decision taken otherwise;
  - float columns: ``|a - b| <= EPS max(|a|, |b|, s)`` with ``EPS`` derived below and ``s``
    the median ``|value|`` of the column's finite non-zero values in both runs: the scale of
    the operands of a value that cancels (a difference or a spread that is zero by
    construction, left as a residue of ``1e-17`` or ``1e-33``), whose error is relative to
    its operands, not to itself; the median, not the largest value, so that a column mixing
    metrics of different sizes (long-format CSVs; a diverging run's ``1e12``) keeps the
    tolerance of its typical value.  Equal NaN and infinities agree;
  - wall-clock times (a column ``seconds``, ``*_seconds`` or ``seconds_*``): not compared.

``EPS`` is the floating-point error of the computations that may differ between CPUs, as found
by the measurements of issue 36 (``README.md``, "Same numbers on any CPU"): the BLAS's dot
products and matrix products (the summation order is the kernel's) and NumPy's SIMD ``exp`` /
``log`` / ``power`` (at most an ulp or two).  A dot product of length ``m`` in any order has an
error of at most ``gamma_m = m u / (1 - m u)`` of ``sum |a_i b_i|`` (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., Thm 3.1; ``u = 2^-53``), so two orders differ by at
most ``2 gamma_m``; with ``m <= 2^7`` (the analyses' ``d`` and ``P``) that is ``2^-45``.  A
recorded value at step ``n`` of a run whose error dynamics do not expand (the stable runs of the
analyses) carries at most one such difference per step, ``n <= 2^17`` in quick mode:
``EPS = 2^17 * 2 gamma_(2^7)``, about ``2^-28`` (3.7e-9).  Runs that diverge are not
covered by this bound; their counts (``n_diverged``) are integer columns and must agree exactly,
and their values are ``inf`` / NaN or above the divergence threshold on both sides.

Where the computation is the same on every x86-64 CPU the columns agree bit for bit: the
trajectories of the decentralized algorithms (``Topology.mix(method="ordered")`` for D-PSGD and
the compressed ones, the compiled top-k kernels and SGD steps) on least squares and on the
finite-sum problems, hence their selections, divergence counts and brackets; the metrics
computed without the BLAS: least squares' and the finite-sum problems' ``excess_risk`` /
``hnorm2`` / ``dist2`` and node errors, the consensus distance, the error memory (NumPy's
pairwise sums of elementwise products, products with a matrix summed in a fixed order:
:mod:`convkit.problems._fixed_order`; the logistic loss's ``exp`` / ``log1p`` from the C
library: :mod:`convkit.problems._libm_loss`); the finite-sum problems' ``theta*`` and
constants, and the topologies' eigenvalues and spectral gaps (the Jacobi method:
:mod:`convkit._symmetric_eigen`).  What goes through a BLAS product or NumPy's SIMD
``exp`` / ``log`` (the metrics and gradients of logistic regression with a Gaussian design,
its exact constants by quadrature, SCAFFOLD's and the servers' products) differs in its last
bits even on the same trajectory; the report says, per CSV, whether it is bit-identical and
the largest relative difference otherwise.

Usage::

    python tools/portable_compare.py [--jobs N] [--keep DIR] [--only NAME ...]
    python tools/portable_compare.py --compare-only HERE_DIR PORTABLE_DIR

Exit code 0 when everything agrees, 1 otherwise (or when a run fails), 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

#: unit roundoff of float64
U = 2.0**-53
#: the longest dot product / matrix product the analyses hand to the BLAS (d, P)
M_MAX = 2**7
#: the most steps a quick run records at
N_MAX = 2**17
#: relative tolerance of a float column (module docstring): N_MAX * 2 gamma_M_MAX (3.7e-9)
EPS = N_MAX * 2 * M_MAX * U / (1 - M_MAX * U)


@dataclass
class CsvReport:
    """How one CSV of the portable run differs from this machine's."""

    name: str
    identical: bool = False
    max_rel: float = 0.0
    problems: list[str] = field(default_factory=list)


def is_timing(name: str) -> bool:
    """Whether a column holds wall-clock times (``seconds``, ``*_seconds``, ``seconds_*``):
    not compared (they differ between any two runs)."""
    return name == "seconds" or name.endswith("_seconds") or name.startswith("seconds_")


def _is_float(col: pd.Series) -> bool:
    return pd.api.types.is_float_dtype(col)


def compare_csv(here: Path, there: Path) -> CsvReport:
    """Compare one CSV of the two runs by the rules of the module docstring."""
    rep = CsvReport(here.name)
    if here.read_bytes() == there.read_bytes():
        rep.identical = True
        return rep
    a, b = pd.read_csv(here), pd.read_csv(there)
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        rep.problems.append(
            f"shape: columns {list(a.columns)} x {len(a)} rows here, "
            f"{list(b.columns)} x {len(b)} rows portable"
        )
        return rep
    for col in a.columns:
        x, y = a[col], b[col]
        if is_timing(str(col)):
            continue  # a wall-clock time: a measurement of the machine, not a result
        if _is_float(x) and _is_float(y):
            xv, yv = x.to_numpy(float), y.to_numpy(float)
            same = (xv == yv) | (np.isnan(xv) & np.isnan(yv))
            with np.errstate(all="ignore"):
                diff = np.abs(xv - yv)
                mag = np.maximum(np.abs(xv), np.abs(yv))
                rel = np.where(same, 0.0, diff / mag)
                mags = np.abs(np.concatenate([xv, yv]))
                mags = mags[np.isfinite(mags) & (mags > 0)]
                scale = float(np.median(mags)) if mags.size else 0.0
                ok = same | (np.isfinite(diff) & (diff <= EPS * np.maximum(mag, scale)))
            rel = np.where(np.isfinite(rel), rel, np.inf)
            rep.max_rel = max(rep.max_rel, float(rel.max()) if rel.size else 0.0)
            if not ok.all():
                i = int(np.argmax(~ok))
                rep.problems.append(
                    f"column {col}: {int((~ok).sum())} value(s) beyond {EPS:.2g} (relative, or "
                    f"of the column's median scale {scale:.3g}); row {i}: {xv[i]!r} here, {yv[i]!r} "
                    "portable"
                )
        else:
            na_x, na_y = x.isna().to_numpy(), y.isna().to_numpy()
            xs = x.astype(object).where(~na_x, "<empty>").astype(str).to_numpy()
            ys = y.astype(object).where(~na_y, "<empty>").astype(str).to_numpy()
            bad = xs != ys
            if bad.any():
                i = int(np.argmax(bad))
                rep.problems.append(
                    f"column {col} (exact): {int(bad.sum())} row(s) differ; row {i}: "
                    f"{xs[i]!r} here, {ys[i]!r} portable"
                )
    return rep


def compare_checks(here: Path, there: Path) -> list[str]:
    """The checks whose verdict differs (or that one run lacks), one line each."""
    if not here.is_file() or not there.is_file():
        return [f"checks.json missing: here {here.is_file()}, portable {there.is_file()}"]
    a, b = json.loads(here.read_text()), json.loads(there.read_text())
    out = []
    for name in sorted(set(a) | set(b)):
        va = [(r.get("result"), r.get("verdict")) for r in a.get(name, [])]
        vb = [(r.get("result"), r.get("verdict")) for r in b.get(name, [])]
        if va != vb:
            diff = [f"{p} -> {q}" for p, q in zip(va, vb, strict=False) if p != q]
            out.append(f"{name}: verdicts differ ({len(va)} here, {len(vb)} portable): {diff[:3]}")
    return out


def compare_dirs(here: Path, there: Path) -> tuple[list[CsvReport], list[str]]:
    """Every CSV of either run and the verdicts of ``checks.json``."""
    names = sorted({p.name for p in here.glob("*.csv")} | {p.name for p in there.glob("*.csv")})
    reports = []
    for n in names:
        if not (here / n).is_file() or not (there / n).is_file():
            rep = CsvReport(n)
            rep.problems.append(f"only in {'portable' if (there / n).is_file() else 'here'}")
            reports.append(rep)
            continue
        reports.append(compare_csv(here / n, there / n))
    return reports, compare_checks(here / "checks.json", there / "checks.json")


def print_report(reports: list[CsvReport], checks: list[str]) -> bool:
    """Print the comparison; True when everything agrees."""
    width = max((len(r.name) for r in reports), default=0)
    print(f"portable_compare: {len(reports)} CSV(s); float columns within {EPS:.2g}")
    for r in reports:
        state = "identical" if r.identical else f"largest relative difference {r.max_rel:.3g}"
        tag = "DIFFERS" if r.problems else "ok     "
        print(f"  {tag} {r.name:<{width}}  {state}")
        for line in r.problems:
            print(f"      {line}")
    for line in checks:
        print(f"  DIFFERS {line}")
    bad = sum(bool(r.problems) for r in reports) + len(checks)
    same = sum(r.identical for r in reports)
    print(
        f"portable_compare: {same} of {len(reports)} CSV(s) bit-identical; "
        + (f"{bad} difference(s) beyond the rules" if bad else "all within the rules")
    )
    return bad == 0


def _figures(out: Path, jobs: int, only: list[str] | None, portable: bool) -> int:
    cmd = [sys.executable, "-m", "convkit.cli", "figures", "--quick", "--out", str(out)]
    cmd += ["--jobs", str(jobs)] + (["--only", *only] if only else [])
    if portable:
        cmd = [sys.executable, str(ROOT / "tools" / "portable_env.py"), *cmd]
    print("portable_compare:", " ".join(cmd[-8:] if not portable else ["(portable)", *cmd[-8:]]))
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL).returncode


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="tools/portable_compare.py", description=__doc__.split("\n")[0]
    )
    p.add_argument("--jobs", type=int, default=2, help="analyses at once in each run (default 2)")
    p.add_argument("--keep", default=None, help="write the two runs under DIR/here, DIR/portable")
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="these analyses only")
    p.add_argument("--compare-only", nargs=2, default=None, metavar=("HERE", "PORTABLE"))
    args = p.parse_args(argv)
    if args.compare_only:
        here, there = (Path(d) for d in args.compare_only)
        return 0 if print_report(*compare_dirs(here, there)) else 1
    if args.jobs < 1:
        p.error(f"--jobs must be an integer >= 1, got {args.jobs}")
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="portable-compare-"))
    here, there = base / "here", base / "portable"
    for d in (here, there):
        shutil.rmtree(d, ignore_errors=True)
    try:
        for out, portable in ((here, False), (there, True)):
            rc = _figures(out, args.jobs, args.only, portable)
            if rc != 0:
                print(f"portable_compare: the {'portable ' if portable else ''}run failed ({rc})")
                return 1
        return 0 if print_report(*compare_dirs(here, there)) else 1
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
