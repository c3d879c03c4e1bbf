"""Rounds N* that Local-SGD needs to match mini-batch averaging, by Monte Carlo with common
random numbers, for least squares and online logistic regression.

Claim under test (Patel & Dieuleveut 2019, arXiv 1904.11325; our reading in
``shared/theory/local_sgd.md``): for ``1/2 < alpha < 1`` Local-SGD reduces communication by
a factor ``O(sqrt(T) / P^(3/2))``, i.e. the number of evenly spaced rounds needed to match
MBA grows like ``N* ~ sqrt(P T)``: exponent +1/2 in ``T`` (at fixed ``P``) and +1/2 in ``P``
(at fixed ``T``).

Method (all choices are ours where the paper is silent):

* Problems, ``d = 10``, flat spectrum ``H = I``, Gaussian design, batch 1:
  least squares (``sigma = 1``, ``theta* = 0``) and well-specified logistic regression
  (``theta* = 1/sqrt(d) (1, ..., 1)``, ``||theta*|| = ||theta*||_H = 1``).  Both start at
  ``theta0 = theta*``: the initial-condition term is common to every schedule (and for least
  squares would hide the gap), so the runs isolate the stochastic part, where communication
  matters.
* Steps ``gamma_k = C k^-alpha``, ``alpha in {0.6, 0.75, 0.9}``, ``C = 0.5 gamma*`` with
  ``gamma*`` the exact mean-square stability limit of constant-step SGD at ``k = 1``
  (:func:`convkit.bounds.sgd_stability.sgd_stability_limit`) for the least-squares curvature
  ``H`` and, for logistic regression, for ``H / 4`` (the per-sample Hessian
  ``sigmoid'(t) x x^T <= x x^T / 4``, so ``H / 4`` is the largest local curvature).
* For each ``(problem, alpha, P, T)``: one :func:`convkit.simulate` call with MBA and Local-SGD
  with ``N`` evenly spaced rounds (:class:`convkit.Rounds`) for ``N`` on a grid of powers of 4
  below ``n = T / P`` (``N = 1`` is one-shot averaging), all on common random numbers; the
  error is ``||theta_bar - theta*||^2_{H*}`` of the final Polyak-Ruppert average (``H* = H``
  for least squares, the Hessian at the optimum for logistic regression).  ``err(N)/err(MBA)``
  and its paired standard error come from :meth:`convkit.Result.compare`.
* ``N* = min{N : err(N) <= (1 + eps) err(MBA)}`` located with
  :func:`convkit.checks.find_threshold` (log-interpolated between grid points, one-sided 95 %
  bracket), for ``eps in {0.02, 0.05, 0.1}`` (all from the same simulations).  Status: ``interior`` (the comparison fails with
  confidence at some grid ``N`` and holds from a crossing ``1 < N* <= n`` on), ``osa_suffices``
  (it holds with confidence already at ``N = 1``: no slope information) or
  ``not_identifiable`` (the curve stays within noise of the level: it never fails with
  confidence).  Standard error of ``log N*`` by the paired bootstrap over replicates
  (:func:`bootstrap_log_se`; the delta method at the crossing, ``se(margin) / |d margin /
  d log N|``, is kept as ``N_star_se_delta``: it is too small where the curve crosses
  ``1 + eps`` at a shallow angle).  Neither includes the interpolation error of the grid.
* Exponents: :func:`convkit.checks.fit_exponent` (weighted log-log slope) of ``N*`` in ``T``
  at ``P = 16`` and in ``P`` at ``T = 2^14``, on the interior points only (at least 3); the
  interval is widened by ``sqrt(chi2/dof)`` when the power law fits worse than the standard
  errors allow.  Verdict by :func:`convkit.verdicts.exponent_verdict` against 1/2 with the
  alternatives 0 and 1 ("violated" if 1/2 is outside, "holds" only if the half-width is at
  most 0.25 and 0 and 1 are outside, "consistent_unresolved" otherwise); "not_identifiable"
  with fewer than 3 interior points.
* Cross-check (least squares): the exact engine (:mod:`convkit.exact`) gives the exact
  ``err(N)/err(MBA)`` on the same grid and the exact ``N*`` (bisection over all integers).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V
from convkit.checks import find_threshold, fit_exponent
from convkit.plotting import plain

TITLE = (
    "Local-SGD vs MBA by Monte Carlo (common random numbers): rounds N* to match MBA against "
    "T and P, least squares and logistic regression"
)

D = 10
ALPHAS = (0.6, 0.75, 0.9)
EPS = (0.02, 0.05, 0.1)
C_FRAC = 0.5
CONFIDENCE = 0.95
PROBLEMS = ("least_squares", "logistic")
MIN_POINTS = 3


@dataclass(frozen=True)
class Design:
    """The grid of one run: a T sweep at ``p_fixed`` and a P sweep at ``t_fixed``."""

    alphas: tuple[float, ...]
    t_sweep: tuple[int, ...]
    p_fixed: int
    p_sweep: tuple[int, ...]
    t_fixed: int
    replicates: dict[str, int]
    grid_ratio: int = 4

    def settings(self) -> list[tuple[int, int, str]]:
        """``(P, T, sweep)`` with sweep ``"T"``, ``"P"`` or ``"T,P"`` (shared point)."""
        pts: dict[tuple[int, int], set[str]] = {}
        for T in self.t_sweep:
            pts.setdefault((self.p_fixed, T), set()).add("T")
        for P in self.p_sweep:
            pts.setdefault((P, self.t_fixed), set()).add("P")
        return [(P, T, ",".join(sorted(s))) for (P, T), s in sorted(pts.items())]


def design(quick: bool) -> Design:
    """Quick: alpha in {0.6, 0.9}, T in {2^10, 2^11, 2^12} at P = 16, P in {8, 16, 32} at
    T = 2^12, 32 replicates.  Full: alpha in {0.6, 0.75, 0.9}, T in {2^11, ..., 2^15, 10^5} at
    P = 16, P in {2, ..., 32} at T = 2^14; 64 replicates for logistic regression (paired SE
    of err(OSA)/err(MBA) 0.01-0.04, measured) and 256 for least squares (its gradients have a
    fused kernel, about 4x cheaper per replicate, and its OSA/MBA gap is only 2-8 %: the
    paired SE at 64 replicates, 0.01-0.02, hides most thresholds).  The paired SE hardly
    shrinks with T: it scales like 1/sqrt(R)."""
    if quick:
        return Design(
            (0.6, 0.9),
            (2**10, 2**11, 2**12),
            16,
            (8, 16, 32),
            2**12,
            {"least_squares": 32, "logistic": 32},
        )
    return Design(
        ALPHAS,
        (2**11, 2**12, 2**13, 2**14, 2**15, 10**5),
        16,
        (2, 4, 8, 16, 32),
        2**14,
        {"least_squares": 256, "logistic": 64},
    )


# ------------------------------------------------------------------------------ problems
def make_problem(name: str) -> tuple[Any, float, np.ndarray]:
    """``(problem, C, theta0)`` for ``"least_squares"`` or ``"logistic"`` (see the module
    docstring); ``C = C_FRAC`` times the mean-square stability limit of constant-step SGD for
    the largest curvature (``H``, resp. ``H / 4``)."""
    from convkit.bounds.sgd_stability import sgd_stability_limit

    if name == "least_squares":
        prob = ck.LeastSquares.gaussian(D, spectrum="flat", noise=1.0, theta_star=np.zeros(D))
        curv = prob.h
    elif name == "logistic":
        prob = ck.LogisticRegression.gaussian(
            D, spectrum="flat", theta_star=np.ones(D) / math.sqrt(D)
        )
        curv = prob.h / 4.0
    else:
        raise ValueError(f"problem must be one of {PROBLEMS}, got {name!r}")
    C = C_FRAC * sgd_stability_limit(curv, 1, "gaussian")
    return prob, float(C), np.asarray(prob.theta_star, dtype=float).copy()


def n_grid(n: int, ratio: int = 4) -> list[int]:
    """Rounds ``N``: powers of ``ratio`` below ``n``, then ``n`` itself (MBA)."""
    out, N = [], 1
    while N < n:
        out.append(N)
        N *= ratio
    return [*out, n]


def _seed(problem: str, alpha: float, P: int, T: int) -> int:
    return zlib.crc32(f"{problem}|{alpha}|{P}|{T}".encode())


def simulate_setting(
    problem: str,
    alpha: float,
    P: int,
    T: int,
    replicates: int,
    *,
    grid_ratio: int = 4,
    seed: int | None = None,
) -> tuple[ck.Result, list[int]]:
    """One :func:`convkit.simulate` call: MBA (label ``"MBA"``) and Local-SGD with ``N`` rounds
    (label ``"N=<N>"``) for every ``N`` of :func:`n_grid` below ``n``, on common random numbers.
    Returns the result and the grid (last entry ``n``)."""
    prob, C, theta0 = make_problem(problem)
    n = T // P
    grid = n_grid(n, grid_ratio)
    step = ck.PolyDecay(C=C, alpha=alpha)
    algs = [ck.LocalSGD(P, step, comm=ck.Rounds(N), name=f"N={N}") for N in grid[:-1]]
    algs.append(ck.MBA(P, step, name="MBA"))
    res = ck.simulate(
        prob,
        algs,
        gradients=T,
        replicates=replicates,
        seed=_seed(problem, alpha, P, T) if seed is None else seed,
        theta0=theta0,
        n_record=1,
        progress=False,
    )
    return res, grid


def curve_rows(
    problem: str, alpha: float, P: int, T: int, sweep: str, res: ck.Result, grid: list[int]
) -> list[dict[str, Any]]:
    """Rows ``kind="curve"``: paired ``err(N)/err(MBA)`` with SE at the final step."""
    n = grid[-1]
    fin = res.final("hnorm2", "avg").set_index("config")
    rows = []
    for N in grid:
        label = "MBA" if N == n else f"N={N}"
        if N == n:
            ratio, se = 1.0, 0.0
        else:
            c = res.compare(label, "MBA", "hnorm2", "avg").iloc[-1]
            ratio, se = float(c["ratio"]), float(c["ratio_se"])
        rows.append(
            dict(
                kind="curve",
                problem=problem,
                alpha=alpha,
                P=P,
                T=T,
                n=n,
                sweep=sweep,
                N=N,
                ratio=ratio,
                ratio_se=se,
                err=float(fin.loc[label, "mean"]),
                err_se=float(fin.loc[label, "se"]),
                err_mba=float(fin.loc["MBA", "mean"]),
                replicates=int(fin.loc["MBA", "count"]),
            )
        )
    return rows


def replicate_errors(res: ck.Result, grid: list[int]) -> np.ndarray:
    """Per-replicate final errors (Polyak-Ruppert average, ``hnorm2``), shape ``(K, R)`` in
    grid order (last row MBA); replicates diverged in any configuration are dropped."""
    n = grid[-1]
    out = []
    for N in grid:
        cv = res.values["MBA" if N == n else f"N={N}"]
        out.append(cv.values[-1, cv.iterates.index("avg"), cv.metrics.index("hnorm2"), :])
    e = np.asarray(out, dtype=float)
    return e[:, np.all(np.isfinite(e), axis=0)]


def bootstrap_log_se(
    errs: np.ndarray, grid: list[int], eps: float, n_boot: int = 400, seed: int = 0
) -> float:
    """See :func:`paired_bootstrap_nstar` (its first value)."""
    return paired_bootstrap_nstar(errs, grid, eps, n_boot, seed)[0]


def paired_bootstrap_nstar(
    errs: np.ndarray, grid: list[int], eps: float, n_boot: int = 400, seed: int = 0
) -> tuple[float, float, float]:
    """Standard error of ``log N*`` by the paired bootstrap over replicates: resample the
    replicates (the same ones for every N, keeping the pairing), recompute the ratio curve and
    its log-interpolated crossing (point estimate; 1 if it holds already at N = 1), and take
    half the 16-84 % quantile range of ``log N*``.  Unlike the delta method this stays honest
    where the curve crosses ``1 + eps`` at a shallow angle.  Returns ``(se_log, q025, q975)``
    with the 2.5 % and 97.5 % bootstrap quantiles of ``N*`` (a percentile interval: the law of
    ``log N*`` is far from normal when the crossing can jump between grid segments). (The
    parametric bootstrap from a curve's means and standard errors is
    :func:`analyses._local_sgd_stats.parametric_bootstrap_nstar`.)"""
    rng = np.random.default_rng(seed)
    R = errs.shape[1]
    idx = rng.integers(0, R, size=(n_boot, R))
    means = errs[:, idx].mean(axis=2)  # (K, n_boot)
    ratios = means / means[-1]
    logs = np.empty(n_boot)
    zero = np.zeros(len(grid))
    for b in range(n_boot):
        th = find_threshold(grid, ratios[:, b], zero, eps=eps, mode="ratio")
        logs[b] = math.log(th.estimate if th.estimate is not None else grid[-1])
    q025, q16, q84, q975 = np.quantile(logs, [0.025, 0.16, 0.84, 0.975])
    return float((q84 - q16) / 2), float(math.exp(q025)), float(math.exp(q975))


def locate(
    N: Any, ratio: Any, ratio_se: Any, eps: float, confidence: float = CONFIDENCE
) -> dict[str, Any]:
    """``N*`` from a paired ratio curve (``N`` increasing, last point MBA with ratio 1).

    Returns ``status`` (``interior`` / ``osa_suffices`` / ``not_identifiable``), ``N_star``
    (log-interpolated crossing, NaN unless located), ``N_star_se`` (delta method, see the module
    docstring), the confidence bracket ``N_lo`` / ``N_hi`` and ``first_holding``."""
    N = np.asarray(N, dtype=float)
    r = np.asarray(ratio, dtype=float)
    s = np.asarray(ratio_se, dtype=float)
    th = find_threshold(N, r, s, eps=eps, mode="ratio", confidence=confidence)
    lo, hi = th.bracket
    out = dict(
        status="not_identifiable",
        N_star=np.nan,
        N_star_se=np.nan,
        N_lo=np.nan if lo is None else lo,
        N_hi=np.nan if hi is None else hi,
        first_holding=np.nan if th.first_holding is None else th.first_holding,
    )
    if hi is not None and hi == N[0]:
        out.update(status="osa_suffices", N_star=1.0, N_star_se=0.0)
        return out
    if th.estimate is None or lo is None or th.estimate <= N[0]:
        return out
    i = int(np.searchsorted(N, th.first_holding))
    m0, m1 = th.margin[i - 1], th.margin[i]
    t = m0 / (m0 - m1) if m0 != m1 else 1.0
    se_c = (1 - t) * s[i - 1] + t * s[i]
    slope = (m1 - m0) / (math.log(N[i]) - math.log(N[i - 1]))
    se_log = se_c / abs(slope) if slope != 0 else math.inf
    out.update(status="interior", N_star=float(th.estimate), N_star_se=float(th.estimate * se_log))
    return out


def _exact_ls(alpha: float, P: int, T: int, grid: list[int], eps_list) -> dict[str, Any]:
    """Exact err(N)/err(MBA) on the grid and exact N* (least squares)."""
    from convkit.exact.threshold import communication_threshold, rounds_error

    prob, C, theta0 = make_problem("least_squares")
    n = T // P
    gammas = ck.PolyDecay(C=C, alpha=alpha).values(n)
    e = rounds_error(prob, n, P, gammas, grid, theta0=theta0)
    out: dict[str, Any] = {"ratio": e / e[-1]}
    for eps in eps_list:
        out[eps] = communication_threshold(T, P, alpha, eps, problem=prob, C=C, theta0=theta0)[
            "N_star"
        ]
    return out


def setting_rows(
    problem: str, alpha: float, P: int, T: int, sweep: str, R: int, grid_ratio: int = 4
) -> list[dict[str, Any]]:
    """Curve rows and threshold rows (one per eps) of one setting (see :func:`run`)."""
    rows: list[dict[str, Any]] = []
    res, grid = simulate_setting(problem, alpha, P, T, R, grid_ratio=grid_ratio)
    cr = curve_rows(problem, alpha, P, T, sweep, res, grid)
    exact = _exact_ls(alpha, P, T, grid, EPS) if problem == "least_squares" else None
    for j, row in enumerate(cr):
        row["exact_ratio"] = float(exact["ratio"][j]) if exact else np.nan
    rows += cr
    rat = [c["ratio"] for c in cr]
    se = [c["ratio_se"] for c in cr]
    errs = replicate_errors(res, grid)
    for eps in EPS:
        loc = locate(grid, rat, se, eps)
        loc["N_star_se_delta"] = loc["N_star_se"]
        if loc["status"] == "interior":
            seed = _seed(problem, alpha, P, T) + int(round(1000 * eps))
            se_log, q025, q975 = paired_bootstrap_nstar(errs, grid, eps, seed=seed)
            loc.update(N_star_se=loc["N_star"] * se_log, N_star_q025=q025, N_star_q975=q975)
        extra = {}
        if exact:
            ex = locate(grid, exact["ratio"], np.zeros(len(grid)), eps)
            extra = dict(
                exact_N_star=float(exact[eps]),
                exact_N_star_grid=ex["N_star"],
                exact_status=ex["status"],
            )
        rows.append(
            dict(
                kind="threshold",
                problem=problem,
                alpha=alpha,
                P=P,
                T=T,
                n=grid[-1],
                sweep=sweep,
                eps=eps,
                ratio_osa=rat[0],
                ratio_osa_se=se[0],
                replicates=cr[0]["replicates"],
                sqrt_PT=math.sqrt(P * T),
                **loc,
                **extra,
            )
        )
    return rows


def run(quick: bool = False, problems: tuple[str, ...] = PROBLEMS) -> pd.DataFrame:
    """Curves and thresholds for every (problem, alpha, P, T) of :func:`design`.

    Rows ``kind="curve"``: one per ``(problem, alpha, P, T, N)`` with ``ratio`` /
    ``ratio_se`` (paired) and, for least squares, ``exact_ratio``.  Rows ``kind="threshold"``:
    one per ``(problem, alpha, P, T, eps)`` with ``status``, ``N_star``, ``N_star_se``,
    ``N_lo``, ``N_hi``, ``ratio_osa`` / ``ratio_osa_se`` and, for least squares, the exact
    ``N*`` (bisection, ``exact_N_star``) and the exact curve's grid-interpolated threshold
    (``exact_N_star_grid``)."""
    des = design(quick)
    rows: list[dict[str, Any]] = []
    for problem in problems:
        for alpha in des.alphas:
            for P, T, sweep in des.settings():
                rows += setting_rows(
                    problem, alpha, P, T, sweep, des.replicates[problem], des.grid_ratio
                )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ checks
def fit(df: pd.DataFrame, problem: str, alpha: float, eps: float, var: str) -> dict[str, Any]:
    """Exponent of N* in ``var`` ("T" or "P") on the interior thresholds of that sweep."""
    th = df[
        (df.kind == "threshold")
        & (df.problem == problem)
        & (df.alpha == alpha)
        & (df.eps == eps)
        & df.sweep.str.contains(var)
    ].sort_values(var)
    inner = th[th.status == "interior"]
    out: dict[str, Any] = dict(
        n_settings=len(th),
        n_points=len(inner),
        statuses=", ".join(f"{var}={int(v)}: {s}" for v, s in zip(th[var], th.status, strict=True)),
        slope=np.nan,
        interval=(np.nan, np.nan),
        chi2_dof=np.nan,
        fixed=None,
        adequate=None,
        adequacy="too few interior thresholds to fit",
    )
    if len(th):
        other = "P" if var == "T" else "T"
        out["fixed"] = f"{other}={int(th[other].iloc[0])}"
    if len(inner) < MIN_POINTS:
        return out
    f = fit_exponent(
        inner[var].to_numpy(float),
        inner.N_star.to_numpy(float),
        inner.N_star_se.to_numpy(float),
        predicted=0.5,
    )
    out.update(
        slope=f.slope,
        interval=f.interval,  # widened by sqrt(chi2/dof) in fit_exponent (the verdict rule)
        chi2_dof=f.chi2_dof,
        intercept=f.intercept,
        adequate=f.adequate,
        adequacy=f.adequacy,
    )
    return out


N_STAR_COLUMNS = ("N_star", "N_star_se", "N_lo", "N_hi", "N_star_q025", "N_star_q975")


_PATEL = "Patel & Dieuleveut 2019 (arXiv 1904.11325)"

#: the claims of the check rows (:func:`convkit.verdicts.declare_claims`)
CLAIMS = V.declare_claims(
    "local_sgd_threshold_mc",
    {
        "nstar_exponent_T": V.Claim(
            "the exponent of N* (rounds for Local-SGD to match MBA within 1 + eps, Monte "
            "Carlo; the problem in the setting) in T is 1/2",
            f"{_PATEL}: N* ~ sqrt(P T) (local_sgd.rounds_needed)",
        ),
        "nstar_exponent_P": V.Claim(
            "the exponent of N* (rounds for Local-SGD to match MBA within 1 + eps, Monte "
            "Carlo; the problem in the setting) in P is 1/2",
            f"{_PATEL}: N* ~ sqrt(P T) (local_sgd.rounds_needed)",
        ),
        "osa_worse_than_mba": V.Claim(
            "one-shot averaging is worse than MBA at the smallest T: err(OSA)/err(MBA) > 1 by "
            "more than 3 paired SE at every P",
            f"{_PATEL} (the one-shot gap before its T -> infinity limit)",
        ),
        "mc_ratio_agrees_exact": V.Claim(
            "the Monte Carlo err(N)/err(MBA) of Local-SGD agrees with the exact engine "
            "(least squares)",
            "convkit.exact.expected_error: the same expectation without sampling error",
        ),
        "mc_nstar_agrees_exact": V.Claim(
            "the Monte Carlo N* agrees with the exact N* (least squares)",
            "convkit.exact.threshold.communication_threshold on the same grid",
        ),
    },
)


def controls(df: pd.DataFrame) -> list[V.Control]:
    """Negative controls (:func:`convkit.verdicts.controlled`), the same checks on data made
    false on purpose: ``N*`` (and its interval) times ``T`` or times ``P`` (its exponent moved
    from 1/2 to 3/2); the one-shot gap mirrored (``err(OSA)/err(MBA) - 1`` negated: OSA better
    than MBA); the exact engine's ratios 3 % off and its thresholds doubled (the Monte Carlo
    must then disagree with them)."""
    out = []
    for var in ("T", "P"):
        bad = df.copy()
        for c in N_STAR_COLUMNS:
            if c in bad:
                bad[c] = df[c] * df[var]
        out.append(V.Control(f"N* x {var}: exponent in {var} shifted by +1", bad))
    bad = df.copy()
    if "ratio_osa" in bad:
        bad["ratio_osa"] = 2.0 - df["ratio_osa"]
    out.append(V.Control("one-shot gap mirrored below 1", bad))
    bad = df.copy()
    for c, f in (("exact_ratio", 1.03), ("exact_N_star_grid", 2.0), ("exact_N_star", 2.0)):
        if c in bad:
            bad[c] = df[c] * f
    out.append(V.Control("exact engine 3 % off, its N* doubled", bad))
    return out


@V.controlled(controls)
def checks(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Exponents of N* in T and in P per problem, alpha and eps (claim +1/2 each); the
    one-shot gap err(OSA)/err(MBA) at the smallest T; for least squares the Monte Carlo curves
    and thresholds against the exact engine."""
    from scipy.stats import norm

    out: list[dict[str, Any]] = []
    for problem in PROBLEMS:
        sub = df[df.problem == problem]
        if sub.empty:
            continue
        for alpha in sorted(sub.alpha.unique()):
            for eps in sorted(sub[sub.kind == "threshold"].eps.unique()):
                for var in ("T", "P"):
                    f = fit(df, problem, alpha, eps, var)
                    if np.isfinite(f["slope"]):
                        lo, hi = f["interval"]
                        measured = (
                            f"{f['slope']:.2f} [{lo:.2f}, {hi:.2f}] "
                            f"(chi2/dof {f['chi2_dof']:.1f}, {f['n_points']} points)"
                        )
                        verdict, reason = V.exponent_verdict(
                            (lo, hi), 0.5, alternatives=(0.0, 1.0), fit=f
                        )
                    else:
                        measured = (
                            f"N* interior at {f['n_points']}/{f['n_settings']} "
                            f"settings ({f['statuses']})"
                        )
                        verdict = V.NOT_IDENTIFIABLE
                        reason = (
                            f"fewer than {MIN_POINTS} settings with an interior N* "
                            "(1 < N* < n) to fit"
                        )
                    row = V.check_row(
                        result=f"local_sgd_threshold_mc.nstar_exponent_{var}",
                        setting=(
                            f"{problem}, d={D}, flat H, alpha={alpha}, eps={eps}, "
                            f"{f['fixed']}, C={C_FRAC} gamma*, theta0=theta*"
                        ),
                        measured=measured,
                        theoretical=0.5,
                        verdict=verdict,
                        reason=reason,
                    )
                    # the fit itself, next to the six keys (the README reads it from here)
                    fitted = bool(np.isfinite(f["slope"]))
                    row["slope"] = plain(f["slope"]) if fitted else "-"
                    row["interval"] = [plain(v) for v in f["interval"]] if fitted else "-"
                    row["n_points"] = int(f["n_points"])
                    out.append(row)
            th = sub[(sub.kind == "threshold") & (sub.alpha == alpha)]
            if not th.empty and "ratio_osa" in th:
                T0 = th["T"].min()
                g = th[th["T"] == T0].drop_duplicates("P").sort_values("P")
                z = (g.ratio_osa - 1) / g.ratio_osa_se
                meas = ", ".join(
                    f"P={int(p)}: {r:.3f}±{s:.3f}"
                    for p, r, s in zip(g.P, g.ratio_osa, g.ratio_osa_se, strict=True)
                )
                out.append(
                    V.check_row(
                        result="local_sgd_threshold_mc.osa_worse_than_mba",
                        setting=f"{problem}, alpha={alpha}, T={int(T0)}",
                        measured=meas,
                        theoretical="> 1",
                        verdict=V.HOLDS if bool((z > 3).all()) else V.VIOLATED,
                        reason=(f"gap above 3 paired SE for {int((z > 3).sum())} of {len(z)} P"),
                    )
                )
    ls = df[(df.problem == "least_squares") & (df.kind == "curve")]
    if "ratio_se" in ls:
        ls = ls[ls.ratio_se > 0]
    if not ls.empty and "exact_ratio" in ls and ls.exact_ratio.notna().all():
        zs = ((ls.ratio - ls.exact_ratio) / ls.ratio_se).to_numpy()
        m = zs.size
        zc = float(norm.ppf(1 - 0.01 / (2 * m)))
        out.append(
            V.check_row(
                result="local_sgd_threshold_mc.mc_ratio_agrees_exact",
                setting=f"all {m} Local-SGD grid points; Bonferroni two-sided 1 % (|z| <= {zc:.2f})",
                measured=(
                    f"max |z| {np.abs(zs).max():.2f}, within 3 SE: "
                    f"{np.mean(np.abs(zs) <= 3):.0%}, mean z {zs.mean():+.2f}"
                ),
                theoretical=0.0,
                verdict=V.HOLDS if np.abs(zs).max() <= zc else V.VIOLATED,
                reason=f"max |z| {np.abs(zs).max():.2f} against the Bonferroni bound {zc:.2f}",
            )
        )
    lt = df[(df.problem == "least_squares") & (df.kind == "threshold")]
    if not lt.empty and "exact_N_star" in lt and "N_star_q025" in lt:
        from scipy.stats import binom

        both = lt[(lt.status == "interior") & (lt.exact_status == "interior")]
        inside = (both.N_star_q025 <= both.exact_N_star_grid) & (
            both.exact_N_star_grid <= both.N_star_q975
        )
        misses = int((~inside).sum())
        m = len(both)
        allowed = int(binom.ppf(0.99, m, 0.05)) if m else 0
        osa = lt[lt.status == "osa_suffices"]
        contra = int((osa.exact_N_star > 1).sum())
        allowed_osa = int(binom.ppf(0.99, len(osa), 0.05)) if len(osa) else 0
        pairs = {
            f"{a}/{b}": int(v)
            for (a, b), v in pd.crosstab(lt.status, lt.exact_status).stack().items()
            if v
        }
        out.append(
            V.check_row(
                result="local_sgd_threshold_mc.mc_nstar_agrees_exact",
                setting=(
                    f"{len(lt)} (alpha, P, T, eps) settings; MC status/exact status (same grid): "
                    f"{pairs}; exact N* (grid-interpolated) inside the MC 95 % bootstrap "
                    "interval where both are interior; misses allowed up to the 99 % binomial "
                    "quantile at rate 5 %"
                ),
                measured=(
                    f"exact outside the MC interval: {misses}/{m} (allowed {allowed}); MC 'OSA "
                    f"suffices' with exact N* > 1: {contra}/{len(osa)} (allowed {allowed_osa})"
                ),
                theoretical="agreement",
                verdict=V.HOLDS if misses <= allowed and contra <= allowed_osa else V.VIOLATED,
                reason=(
                    f"{misses} misses (allowed {allowed}), {contra} contradicted 'OSA suffices' "
                    f"(allowed {allowed_osa})"
                ),
            )
        )
    return out


# ------------------------------------------------------------------------------ README facts
def _range(values, fmt: str = "{:.2f}") -> str:
    v = sorted(float(x) for x in values)
    if not v:
        return "-"
    lo, hi = fmt.format(v[0]), fmt.format(v[-1])
    return lo if lo == hi else f"{lo} to {hi}"


def facts(df: pd.DataFrame) -> dict[str, str]:
    """The README's numbers, computed from this analysis' data (the committed CSV read back).

    Parameters
    ----------
    df : pandas.DataFrame
        The data of :func:`run`.

    Returns
    -------
    dict of str to str
        ``setting`` (the design in words); per sweep ``v`` in ``t``, ``p``:
        ``<v>_exponent_range`` (fitted exponents over the identifiable (problem, alpha, eps)
        settings), ``<v>_identifiable`` (their number), ``<v>_violated``,
        ``<v>_unresolved``, ``<v>_holds``, ``<v>_unresolved_halfwidth`` (range of the
        half-widths of the unresolved intervals) and ``p_max``; ``exact_curve_points``,
        ``exact_curve_max_z`` (Monte Carlo ratio against the exact engine), ``exact_nstar``
        ("k of m": exact N* inside the Monte Carlo interval where both are interior);
        ``osa_ratio_<problem>_T`` / ``_P`` (range of err(OSA)/err(MBA) at alpha = 0.6 over the
        T sweep and the P sweep).
    """
    rows = checks(df)
    th = df[df.kind == "threshold"]
    cur = df[df.kind == "curve"]
    reps = cur.groupby("problem").replicates.max()
    ts, ps = sorted(th[th.sweep.str.contains("T")]["T"].unique()), sorted(th.P.unique())
    out: dict[str, str] = {
        "setting": (
            f"d = {D}, flat H, theta0 = theta*, alpha in "
            f"{{{', '.join(str(a) for a in sorted(th.alpha.unique()))}}}, C = {C_FRAC} x the "
            f"stability limit, T from {int(ts[0])} to {int(ts[-1])} at P = "
            f"{int(th[th.sweep.str.contains('T')].P.iloc[0])}, P from {int(ps[0])} to "
            f"{int(ps[-1])} at T = {int(th[th.sweep.str.contains('P')]['T'].iloc[0])}, eps in "
            f"{{{', '.join(str(e) for e in sorted(th.eps.unique()))}}}, "
            + ", ".join(f"R = {int(r)} ({p})" for p, r in reps.items())
        )
    }
    for var in ("T", "P"):
        ex = [r for r in rows if r["result"] == f"local_sgd_threshold_mc.nstar_exponent_{var}"]
        ok = [r for r in ex if r["verdict"] != V.NOT_IDENTIFIABLE]
        unres = [r for r in ok if r["verdict"] == V.CONSISTENT_UNRESOLVED]
        v = var.lower()
        out[f"{v}_exponent_range"] = _range(r["slope"] for r in ok)
        out[f"{v}_identifiable"] = str(len(ok))
        out[f"{v}_settings"] = str(len(ex))
        out[f"{v}_violated"] = str(sum(r["verdict"] == V.VIOLATED for r in ok))
        out[f"{v}_unresolved"] = str(len(unres))
        out[f"{v}_holds"] = str(sum(r["verdict"] == V.HOLDS for r in ok))
        out[f"{v}_unresolved_halfwidth"] = _range(
            (r["interval"][1] - r["interval"][0]) / 2 for r in unres
        )
        if var == "P":
            out["p_max"] = f"{max(r['slope'] for r in ok):.2f}" if ok else "-"
    ls = cur[(cur.problem == "least_squares") & (cur.ratio_se > 0)]
    if not ls.empty and ls.exact_ratio.notna().all():
        z = ((ls.ratio - ls.exact_ratio) / ls.ratio_se).abs()
        out["exact_curve_points"] = str(len(z))
        out["exact_curve_max_z"] = f"{z.max():.2f}"
    lt = th[(th.problem == "least_squares") & (th.status == "interior")]
    if "exact_status" in lt:
        both = lt[lt.exact_status == "interior"]
        inside = (both.N_star_q025 <= both.exact_N_star_grid) & (
            both.exact_N_star_grid <= both.N_star_q975
        )
        out["exact_nstar"] = f"{int(inside.sum())} of {len(both)}"
    one = cur[(cur.N == 1) & (cur.alpha == min(cur.alpha))]
    for problem in sorted(one.problem.unique()):
        for var in ("T", "P"):
            g = one[(one.problem == problem) & one.sweep.str.contains(var)].sort_values(var)
            out[f"osa_ratio_{problem}_{var}"] = (
                f"{g.ratio.iloc[0]:.2f} at {var} = {int(g[var].iloc[0])} to "
                f"{g.ratio.iloc[-1]:.2f} at {var} = {int(g[var].iloc[-1])}"
                if len(g)
                else "-"
            )
    return out


# ------------------------------------------------------------------------------ plots
def plot(df: pd.DataFrame, outdir: Path) -> list[Path]:
    """Four figures: N* against T and against P (log-log; interior Monte Carlo thresholds with
    their 95 % bootstrap intervals, exact N* for least squares, fitted power laws, the claimed
    slope 1/2 dashed black, ``n = T/P`` dotted grey), and the paired ``err(N)/err(MBA)``
    curves against N for the T and the P sweep (95 % bands; exact engine dashed); drawn by
    ``analyses/_local_sgd_threshold_mc_plots.py``.

    Parameters
    ----------
    df : pandas.DataFrame
        The data of :func:`run` (or the committed CSV read back).
    outdir : Path
        Directory for the PNG files.

    Returns
    -------
    list of Path
        ``local_sgd_threshold_mc_T.png``, ``_P.png``, ``_curves_T.png``, ``_curves_P.png``.
    """
    import sys

    if __package__:
        from ._local_sgd_threshold_mc_plots import plot as draw
    else:  # run as a script from analyses/
        from _local_sgd_threshold_mc_plots import plot as draw
    return draw(sys.modules[__name__], df, outdir)


if __name__ == "__main__":  # pragma: no cover
    # python analyses/local_sgd_threshold_mc.py [--full] [problem ...] [--out DIR]: writes the
    # data after every setting (an interrupted run keeps what it computed) and logs timings
    import sys
    import time

    only = tuple(a for a in PROBLEMS if a in sys.argv) or PROBLEMS
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path(".")
    csv = out / f"local_sgd_threshold_mc{'_' + only[0] if len(only) == 1 else ''}.csv"
    des = design("--full" not in sys.argv)
    t0, c0 = time.perf_counter(), time.process_time()
    acc: list[dict[str, Any]] = []
    for problem in only:
        for alpha in des.alphas:
            for P, T, sweep in des.settings():
                t1, c1 = time.perf_counter(), time.process_time()
                acc += setting_rows(
                    problem, alpha, P, T, sweep, des.replicates[problem], des.grid_ratio
                )
                pd.DataFrame(acc).to_csv(csv, index=False)
                print(
                    f"{problem} alpha={alpha} P={P} T={T}: wall "
                    f"{time.perf_counter() - t1:.1f} s, cpu {time.process_time() - c1:.1f} s",
                    flush=True,
                )
    print(f"total wall {time.perf_counter() - t0:.0f} s, cpu {time.process_time() - c0:.0f} s")
    data = pd.DataFrame(acc)
    plot(data, out)
    for c in checks(data):
        print(f"{c['verdict']:<16} {c['result']} | {c['setting']} | {c['measured']}")
