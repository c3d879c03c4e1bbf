"""Theory versus simulation: one registry of checks, one or more per result of the library.

Every check simulates the setting of a result of :mod:`convkit.bounds` and returns rows in the
PEPit idiom of a (measured, theoretical) pair::

    {"result": "sgd.ms_stability.1d",            # the library name
     "setting": "1-D Gaussian design, h = 2, b = 1, exact engine",
     "measured": 0.3333333, "theoretical": 0.3333333,
     "verdict": "holds",                         # | "does not hold" | "inconclusive" | phrase
     "margin": "relative difference <= 1e-6",    # optional: the stated tolerance
     "details": {...}}                           # optional: numbers the tests assert on

``CHECKS`` maps a check name to its function ``check_xxx(quick: bool) -> list[dict]``;
``COVERS`` maps a check name to the library results it covers (every name of
:func:`convkit.bounds.names` is covered: ``tests/test_check_cli.py``). :func:`run_checks` runs a
selection and turns a crash into a row with verdict ``"crashed: ..."``. The command line is
``convkit check`` (:mod:`convkit.check_cli`); the tests are
``tests/test_theory_vs_simulation.py``.

A claim that does not hold in the simulated setting gets the verdict ``"does not hold"``: that
is a measured result, not a failure of the check. Settings are fixed a priori (stated in the
``setting`` text and in each function's docstring), never tuned until a verdict changes.
Statistical verdicts use standard errors from independent replicates (fixed seeds) and say how
many SE (or which confidence) they allow.

Quick mode runs every check in about 1.5 minutes on two shared cores (one-time SymPy
derivations of the library included); full mode uses larger horizons and more replicates.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CHECKS",
    "COVERS",
    "covered_results",
    "register",
    "run_checks",
    "select",
]

CheckFn = Callable[[bool], list[dict[str, Any]]]

#: check name -> function(quick) -> rows
CHECKS: dict[str, CheckFn] = {}
#: check name -> library results it covers
COVERS: dict[str, tuple[str, ...]] = {}

HOLDS = "holds"
NOT_HOLD = "does not hold"
INCONCLUSIVE = "inconclusive"


def register(name: str, covers: Sequence[str]) -> Callable[[CheckFn], CheckFn]:
    """Decorator: add ``func`` to :data:`CHECKS` under ``name``, covering ``covers``."""

    def deco(func: CheckFn) -> CheckFn:
        if name in CHECKS:
            raise ValueError(f"check {name!r} registered twice")
        CHECKS[name] = func
        COVERS[name] = tuple(covers)
        return func

    return deco


def covered_results() -> set[str]:
    """Library names covered by at least one registered check."""
    return {r for c in COVERS.values() for r in c}


def select(only: Iterable[str] | None = None) -> list[str]:
    """Check names selected by ``only``: each pattern matches a check name or a covered result
    name, exactly, as a dotted prefix (``"compression"``) or as a shell glob (``"sgd.*"``).
    ``None`` selects everything. An unknown pattern raises ``ValueError`` listing the names."""
    if only is None:
        return list(CHECKS)
    out: list[str] = []
    for pat in only:
        hits = [
            c for c in CHECKS if any(_matches(pat, n) for n in (c, *COVERS[c])) and c not in out
        ]
        if not hits and not any(c in out for c in CHECKS if _matches(pat, c)):
            raise ValueError(
                f"--only {pat!r} matches no check; checks: {list(CHECKS)}; "
                f"results: {sorted(covered_results())}"
            )
        out += hits
    return out


def _matches(pat: str, name: str) -> bool:
    return name == pat or name.startswith(pat + ".") or fnmatch.fnmatchcase(name, pat)


def run_checks(
    quick: bool = True,
    only: Iterable[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the selected checks; every row gets the key ``check`` (its check name) and
    ``seconds`` (the check's run time). A check that raises gives one row per covered result
    with verdict ``"crashed: <error>"`` and the traceback in ``details``."""
    rows: list[dict[str, Any]] = []
    for name in select(only):
        t0 = time.perf_counter()
        if progress:
            progress(f"running {name} ...")
        try:
            out = CHECKS[name](quick)
            for r in out:
                _validate_row(name, r)
        except Exception as exc:  # noqa: BLE001 - report the crash as a row, keep going
            tb = traceback.format_exc()
            out = [
                {
                    "result": res,
                    "setting": f"check {name}",
                    "measured": "-",
                    "theoretical": "-",
                    "verdict": f"crashed: {type(exc).__name__}: {exc}"[:200],
                    "details": {"traceback": tb},
                }
                for res in COVERS[name]
            ]
        dt = time.perf_counter() - t0
        for r in out:
            r["check"] = name
            r["seconds"] = round(dt, 3)
        if progress:
            progress(f"  {name}: {dt:.1f} s")
        rows += out
    return rows


def _validate_row(check: str, row: dict[str, Any]) -> None:
    missing = [
        k for k in ("result", "setting", "measured", "theoretical", "verdict") if k not in row
    ]
    if missing:
        raise KeyError(f"check {check}: row lacks keys {missing}")
    if row["result"] not in COVERS[check]:
        raise ValueError(f"check {check}: row result {row['result']!r} not in its covers")


def _row(
    result: str,
    setting: str,
    measured: Any,
    theoretical: Any,
    verdict: str,
    margin: str | None = None,
    **details: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "result": result,
        "setting": setting,
        "measured": _num(measured),
        "theoretical": _num(theoretical),
        "verdict": verdict,
    }
    if margin is not None:
        out["margin"] = margin
    if details:
        out["details"] = {k: _num(v) for k, v in details.items()}
    return out


def _num(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [_num(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_num(x) for x in v]
    if isinstance(v, dict):
        return {k: _num(x) for k, x in v.items()}
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        return v.item()
    return v


def _lib(name: str) -> Any:
    from convkit.bounds import get

    return get(name)


def _stream(seed: int, *key: Any) -> Any:
    from convkit.backend import Backend

    return Backend().stream(seed, "theory_checks", *key)


def _final(res: Any, label: str, metric: str, iterate: str) -> np.ndarray:
    """Per-replicate values (R,) of ``metric``/``iterate`` at the last record point."""
    cv = res.values[label]
    i, m = cv.iterates.index(iterate), cv.metrics.index(metric)
    return np.asarray(cv.values[-1, i, m, :], dtype=float)


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    v = np.asarray(v, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


def _within(measured: float, theory: float, se: float, k: float = 3.0) -> bool:
    """``|measured - theory| <= k se`` (plus round-off, 1e-12 relative: some Monte Carlo
    values are deterministic, e.g. scaled rand-k with k = d/2)."""
    return abs(measured - theory) <= k * se + 1e-12 * max(1.0, abs(theory))


def _fmt_interval(iv: Sequence[float]) -> str:
    return f"[{iv[0]:.3g}, {iv[1]:.3g}]"


# ============================================================================ stability
def _sgd_noise_free_step(h: np.ndarray, gamma: float, b: int, design: str, rng: Any) -> CheckFn:
    """``eta -> eta - (gamma/b) sum_j x_j x_j^T eta`` (noise-free SGD error recursion on least
    squares; the label noise is additive and does not change mean-square stability)."""
    sqrt_h = np.sqrt(h)

    def step(eta: np.ndarray) -> np.ndarray:
        n, d = eta.shape
        if design == "gaussian":
            z = rng.standard_normal((n, b, d))
        else:
            z = 2.0 * rng.integers(0, 2, size=(n, b, d)).astype(float) - 1.0
        x = z * sqrt_h
        r = np.einsum("nbd,nd->nb", x, eta)
        return eta - (gamma / b) * np.einsum("nb,nbd->nd", r, x)

    return step  # type: ignore[return-value]


def _mc_ms_limit(
    h: np.ndarray, b: int, design: str, guess: float, quick: bool, seed: int
) -> dict[str, Any]:
    """Monte Carlo mean-square stability limit: bisection in log(gamma)
    (:func:`convkit.checks.stability_limit`) on the sign of the importance-resampling growth
    rate of ``E||eta_t||^2`` (:func:`convkit.checks.mean_square_growth_rate`), started from
    ``[guess / 2, 2 guess]``."""
    from convkit.checks import mean_square_growth_rate, stability_limit

    rng = np.random.default_rng(seed)
    n_steps = 200 if quick else 400
    R = 256 if quick else 512

    def is_stable(g: float) -> bool:
        gr = mean_square_growth_rate(
            _sgd_noise_free_step(h, g, b, design, rng),
            np.ones((R, h.size)) / math.sqrt(h.size),
            n_steps,
            rng=rng,
            n_systems=8,
        )
        return gr.rate < 0

    br = stability_limit(is_stable, guess / 2, 2 * guess, rtol=0.02 if quick else 0.01)
    return {"lo": br.lo, "hi": br.hi, "estimate": br.estimate, "evaluations": br.n_evaluations}


def _stability_rows(
    name: str, settings: list[tuple[str, np.ndarray, int, dict[str, Any]]], design: str, quick: bool
) -> list[dict[str, Any]]:
    from convkit.exact import stability_limit as exact_limit

    res = _lib(name)
    rows = []
    for i, (text, h, b, params) in enumerate(settings):
        theory = float(res.evaluate(**params))
        exact = exact_limit(h, batch=b, design=design)
        rel = abs(exact / theory - 1.0)
        rows.append(
            _row(
                name,
                f"{text}, b = {b}: exact engine (spectral radius of the moment map)",
                exact,
                theory,
                HOLDS if rel <= 1e-6 else NOT_HOLD,
                "relative difference <= 1e-6",
                rel_diff=rel,
            )
        )
        if i == 0 or not quick:
            mc = _mc_ms_limit(h, b, design, theory, quick, seed=1000 + i)
            margin = 0.05 if quick else 0.03
            rel_mc = abs(mc["estimate"] / theory - 1.0)
            rows.append(
                _row(
                    name,
                    f"{text}, b = {b}: Monte Carlo bisection on the resampled mean-square "
                    "growth rate",
                    mc["estimate"],
                    theory,
                    HOLDS if rel_mc <= margin else NOT_HOLD,
                    f"relative difference <= {margin:g}",
                    rel_diff=rel_mc,
                    bracket=[mc["lo"], mc["hi"]],
                    evaluations=mc["evaluations"],
                )
            )
    return rows


@register("stability.1d", ["sgd.ms_stability.1d"])
def check_stability_1d(quick: bool) -> list[dict[str, Any]]:
    """Mean-square stability limit of constant-step SGD in 1-D (Gaussian design, batch b):
    ``2 b / ((b + 2) h)`` (derived by SymPy) against the exact engine's spectral radius and a
    Monte Carlo bisection (resampled growth rate of ``E eta_t^2``), settings h = 2 (b = 1) and
    h = 1 (b = 4); margins 1e-6 (exact) and 5 % (MC, quick)."""
    s = [
        ("1-D Gaussian, h = 2", np.array([2.0]), 1, {"h": 2.0, "b": 1}),
        ("1-D Gaussian, h = 1", np.array([1.0]), 4, {"h": 1.0, "b": 4}),
    ]
    return _stability_rows("sgd.ms_stability.1d", s, "gaussian", quick)


@register("stability.isotropic", ["sgd.ms_stability.isotropic"])
def check_stability_isotropic(quick: bool) -> list[dict[str, Any]]:
    """Isotropic Gaussian design ``H = h I_d``: ``2 b / ((b + d + 1) h)``; d = 5, h = 0.5,
    b in {1, 3}."""
    s = [("Gaussian, H = 0.5 I_5", np.full(5, 0.5), b, {"h": 0.5, "b": b, "d": 5}) for b in (1, 3)]
    return _stability_rows("sgd.ms_stability.isotropic", s, "gaussian", quick)


@register("stability.isotropic_rademacher", ["sgd.ms_stability.isotropic_rademacher"])
def check_stability_isotropic_rademacher(quick: bool) -> list[dict[str, Any]]:
    """Isotropic Rademacher design ``x_i = +-sqrt(h)``: ``2 b / ((b + d - 1) h)``; d = 5,
    h = 0.5, b in {2, 1}."""
    s = [
        ("Rademacher, H = 0.5 I_5", np.full(5, 0.5), b, {"h": 0.5, "b": b, "d": 5}) for b in (2, 1)
    ]
    return _stability_rows("sgd.ms_stability.isotropic_rademacher", s, "rademacher", quick)


@register("stability.general", ["sgd.ms_stability.general"])
def check_stability_general(quick: bool) -> list[dict[str, Any]]:
    """General spectrum (secular equation, Gaussian design): spectrum h_i = 1/i, d = 8,
    b in {1, 4}."""
    h = 1.0 / np.arange(1, 9)
    s = [("Gaussian, h_i = 1/i, d = 8", h, b, {"h": h, "b": b}) for b in (1, 4)]
    return _stability_rows("sgd.ms_stability.general", s, "gaussian", quick)


@register("stability.general_rademacher", ["sgd.ms_stability.general_rademacher"])
def check_stability_general_rademacher(quick: bool) -> list[dict[str, Any]]:
    """General spectrum, Rademacher design: h_i = 1/i, d = 8, b in {1, 4}."""
    h = 1.0 / np.arange(1, 9)
    s = [("Rademacher, h_i = 1/i, d = 8", h, b, {"h": h, "b": b}) for b in (1, 4)]
    return _stability_rows("sgd.ms_stability.general_rademacher", s, "rademacher", quick)


# ============================================================================ stationary risk
def _stationary_rows(name: str, design: str, quick: bool) -> list[dict[str, Any]]:
    from convkit import simulate
    from convkit.algorithms.local import MBA
    from convkit.exact import expected_error
    from convkit.exact import stability_limit as exact_limit
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    d, sigma, frac = 4, 1.0, 0.5
    prob = LeastSquares(1.0 / np.arange(1, d + 1), noise=sigma, design=design)
    gamma = frac * exact_limit(prob, batch=1)
    theory = float(_lib(name).evaluate(h=prob.h, b=1, gamma=gamma, sigma=sigma))
    n = 400
    R = 4000 if quick else 20000
    algo = MBA(1, Constant(gamma), name="SGD")
    res = simulate(prob, algo, steps=n, replicates=R, seed=7, theta0=prob.theta_star, n_record=5)
    m, se = _mean_se(_final(res, "SGD", "hnorm2", "last"))
    ex = expected_error(prob, algo, steps=n, theta0=prob.theta_star, n_record=5)
    exact_n = float(ex.curve("SGD", "hnorm2", "last")["mean"].iloc[-1])
    setting = (
        f"{design} design, h_i = 1/i, d = {d}, sigma = 1, gamma = {frac} x limit "
        f"= {gamma:.4g}, start at theta*, last iterate after {n} steps"
    )
    return [
        _row(
            name,
            setting + f", Monte Carlo R = {R}",
            m,
            theory,
            HOLDS if _within(m, theory, se) else NOT_HOLD,
            "|measured - theoretical| <= 3 SE",
            se=se,
            z=(m - theory) / se,
        ),
        _row(
            name,
            setting + ", exact engine",
            exact_n,
            theory,
            HOLDS if abs(exact_n / theory - 1) <= 1e-6 else NOT_HOLD,
            "relative difference <= 1e-6 (the transient after 400 steps is < 1e-9)",
            rel_diff=abs(exact_n / theory - 1),
        ),
    ]


@register("stationary_risk", ["sgd.stationary_risk"])
def check_stationary_risk(quick: bool) -> list[dict[str, Any]]:
    """Stationary ``E||theta_t - theta*||_H^2`` of constant-step SGD (Gaussian design, derived
    closed form through the secular function) against Monte Carlo (last iterate after 400
    steps from theta*, within 3 SE) and the exact engine (1e-6)."""
    return _stationary_rows("sgd.stationary_risk", "gaussian", quick)


@register("stationary_risk_rademacher", ["sgd.stationary_risk_rademacher"])
def check_stationary_risk_rademacher(quick: bool) -> list[dict[str, Any]]:
    """Same as :func:`check_stationary_risk` with the Rademacher design."""
    return _stationary_rows("sgd.stationary_risk_rademacher", "rademacher", quick)


# ============================================================================ Polyak-Juditsky
@register("polyak_juditsky", ["averaged_sgd.polyak_juditsky"])
def check_polyak_juditsky(quick: bool) -> list[dict[str, Any]]:
    """Averaged constant-step SGD, additive noise: ``T E||theta_bar_T - theta*||_H^2 ->
    sigma^2 d``. Exact engine up to T = 1e6 (ratio within 1 % of 1 and local log-log slope
    within 0.01 of -1 over the last decade) and Monte Carlo (fit_exponent of the averaged
    error over the last decade: -1 inside the 95 % interval)."""
    from convkit import simulate
    from convkit.algorithms.local import MBA
    from convkit.checks import fit_exponent
    from convkit.exact import expected_error
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    name = "averaged_sgd.polyak_juditsky"
    d, sigma, gamma = 5, 1.0, 0.5
    prob = LeastSquares.additive(d, spectrum="1/i", noise=sigma)
    theta0 = prob.theta_star + 1.0 / math.sqrt(d)
    algo = MBA(1, Constant(gamma), name="SGD")
    Tmax = 10**6
    ex = expected_error(prob, algo, steps=Tmax, theta0=theta0, n_record=30)
    cur = ex.curve("SGD", "hnorm2", "avg")
    T, err = cur["step"].to_numpy(float), cur["mean"].to_numpy(float)
    theory = float(_lib(name).evaluate(T=Tmax, d=d, sigma=sigma))
    ratio = float(err[-1] / theory)
    fe = fit_exponent(T, err, None, window=(Tmax / 10, Tmax), predicted=-1.0)
    setting = (
        f"least squares, additive noise, d = {d}, h_i = 1/i, sigma = 1, gamma = {gamma}, "
        "start at distance 1"
    )
    ok = abs(ratio - 1) <= 0.01 and abs(fe.slope + 1) <= 0.01
    rows = [
        _row(
            name,
            setting + f", exact engine, T = {Tmax:.0e}: T err / (sigma^2 d)",
            ratio,
            1.0,
            HOLDS if ok else NOT_HOLD,
            "|ratio - 1| <= 0.01 and |slope + 1| <= 0.01 over [1e5, 1e6]",
            slope=fe.slope,
            ratio_curve=(err * T / (sigma**2 * d)).tolist(),
            T=T.tolist(),
        )
    ]
    Tmc = 10**4 if quick else 10**5
    R = 300 if quick else 1000
    res = simulate(prob, algo, steps=Tmc, replicates=R, seed=11, theta0=theta0, n_record=20)
    c = res.curve("SGD", "hnorm2", "avg")
    fm = fit_exponent(
        c["step"], c["mean"], c["se"], window=(Tmc / 10, Tmc), predicted=-1.0, level=0.95
    )
    rows.append(
        _row(
            name,
            setting + f", Monte Carlo R = {R}: log-log slope of the averaged error over "
            f"[{Tmc // 10}, {Tmc}]",
            fm.slope,
            -1.0,
            HOLDS if fm.consistent else NOT_HOLD,
            "-1 inside the 95 % interval of the slope",
            interval=list(fm.interval),
            chi2_dof=fm.chi2_dof,
        )
    )
    return rows


@register("polyak_juditsky.exact_1d", ["averaged_sgd.exact_additive_1d"])
def check_exact_additive_1d(quick: bool) -> list[dict[str, Any]]:
    """Exact finite-T error of averaged SGD in one direction (additive noise, derived by
    SymPy geometric sums) against the exact engine (relative 1e-9) and Monte Carlo
    (h = 0.5, gamma = 0.4, eta_0 = 1, sigma = 1, T in {1, 10, 100}; within 3 SE each)."""
    from convkit import simulate
    from convkit.algorithms.local import MBA
    from convkit.exact import expected_error
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    name = "averaged_sgd.exact_additive_1d"
    h, gamma, sigma, eta0 = 0.5, 0.4, 1.0, 1.0
    prob = LeastSquares(np.array([h]), noise=sigma, design="additive", theta_star=np.zeros(1))
    Ts = [1, 10, 100]
    algo = MBA(1, Constant(gamma), name="SGD")
    theta0 = np.array([eta0])
    theory = np.array(
        [float(_lib(name).evaluate(T=T, q=1 - gamma * h, h=h, sigma=sigma, eta_0=eta0)) for T in Ts]
    )
    ex = expected_error(prob, algo, steps=Ts[-1], theta0=theta0, record=Ts)
    ce = ex.curve("SGD", "hnorm2", "avg").set_index("step")["mean"].reindex(Ts).to_numpy()
    rel = float(np.max(np.abs(ce / theory - 1)))
    R = 20000 if quick else 100000
    res = simulate(prob, algo, steps=Ts[-1], replicates=R, seed=3, theta0=theta0, record=Ts)
    cm = res.curve("SGD", "hnorm2", "avg").set_index("step").reindex(Ts)
    z = (cm["mean"].to_numpy() - theory) / cm["se"].to_numpy()
    setting = f"1-D additive noise, h = {h}, gamma = {gamma}, eta_0 = {eta0}, sigma = 1"
    return [
        _row(
            name,
            setting + f", T in {Ts}: exact engine (max relative difference)",
            rel,
            0.0,
            HOLDS if rel <= 1e-9 else NOT_HOLD,
            "max relative difference <= 1e-9",
            engine=ce.tolist(),
            theory=theory.tolist(),
        ),
        _row(
            name,
            setting + f", T in {Ts}: Monte Carlo R = {R} (max |z|)",
            float(np.max(np.abs(z))),
            0.0,
            HOLDS if np.all(np.abs(z) <= 3) else NOT_HOLD,
            "|measured - theoretical| <= 3 SE at every T",
            z=z.tolist(),
            mc=cm["mean"].to_numpy().tolist(),
            theory=theory.tolist(),
        ),
    ]


# ============================================================================ Local-SGD
@register("local_sgd.additive_invariance", ["local_sgd.additive_noise_invariance"])
def check_additive_invariance(quick: bool) -> list[dict[str, Any]]:
    """Additive noise: MBA, Local-SGD (every 8 steps) and OSA give *pathwise identical* worker
    means under common random numbers (so identical expected errors): max relative
    per-replicate difference of the final errors (Polyak average and last iterate) <= 1e-10.
    The exact engine gives the same expected errors (relative 1e-12). Contrast (same setting,
    Gaussian design = multiplicative noise, exact engine): OSA's error differs from MBA's."""
    from convkit import simulate
    from convkit.algorithms.local import MBA, OSA, LocalSGD
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import PolyDecay

    name = "local_sgd.additive_noise_invariance"
    d, P, n = 5, 4, 64
    R = 100 if quick else 1000
    step = PolyDecay(0.5, 0.75)
    algos = [
        MBA(P, step, name="MBA"),
        LocalSGD(P, step, comm="every:8", name="Local8"),
        OSA(P, step, name="OSA"),
    ]
    rows = []
    from convkit.exact import expected_error

    setting = (
        f"least squares {{design}} design, d = {d}, h_i = 1/i, P = {P}, {n} local steps, "
        "gamma_k = 0.5 k^-0.75, start at distance 1, MBA / Local-SGD every 8 / OSA"
    )
    for design in ("additive", "gaussian"):
        prob = LeastSquares(1.0 / np.arange(1, d + 1), noise=1.0, design=design)
        theta0 = prob.theta_star + 1.0 / math.sqrt(d)
        text = setting.format(design=design)
        ex = expected_error(prob, algos, steps=n, theta0=theta0, n_record=4)
        e = {
            (a.label, it): float(ex.curve(a.label, "hnorm2", it)["mean"].iloc[-1])
            for a in algos
            for it in ("avg", "last")
        }
        if design == "additive":
            res = simulate(prob, algos, steps=n, replicates=R, seed=5, theta0=theta0, n_record=4)
            worst = 0.0
            for it in ("avg", "last"):
                ref = _final(res, "MBA", "hnorm2", it)
                for lab in ("Local8", "OSA"):
                    v = _final(res, lab, "hnorm2", it)
                    worst = max(worst, float(np.max(np.abs(v - ref) / np.abs(ref))))
            rows.append(
                _row(
                    name,
                    text + f", Monte Carlo with common random numbers, R = {R}: max relative "
                    "per-replicate difference of the final errors to MBA (avg and last)",
                    worst,
                    0.0,
                    HOLDS if worst <= 1e-10 else NOT_HOLD,
                    "<= 1e-10 (round-off)",
                )
            )
            rel = max(
                abs(e[(lab, it)] / e[("MBA", it)] - 1)
                for lab in ("Local8", "OSA")
                for it in ("avg", "last")
            )
            rows.append(
                _row(
                    name,
                    text + ", exact engine: max |err(schedule)/err(MBA) - 1| (avg and last)",
                    rel,
                    0.0,
                    HOLDS if rel <= 1e-12 else NOT_HOLD,
                    "<= 1e-12",
                )
            )
        else:
            r = e[("OSA", "avg")] / e[("MBA", "avg")]
            rows.append(
                _row(
                    name,
                    text + ", exact engine: err(OSA)/err(MBA) (contrast: multiplicative noise)",
                    r,
                    "!= 1",
                    "schedules differ, as derived" if abs(r - 1) > 1e-6 else NOT_HOLD,
                    "|ratio - 1| > 1e-6",
                )
            )
    return rows


@register("local_sgd.osa_mba_ratio", ["local_sgd.osa_mba_ratio"])
def check_osa_mba_ratio(quick: bool) -> list[dict[str, Any]]:
    """err(OSA)/err(MBA) -> 1 as T grows (P = 8 fixed): exact engine, least squares Gaussian
    design d = 10, h_i = 1/i, sigma = 1, gamma_k = C k^-0.75 with C half the single-worker
    stability limit, start at distance 1, Polyak average; T = 1e3 ... 1e6 (quick 1e5). Holds if
    the excess ratio - 1 decreases along T with a significantly negative log-log slope. Also a
    Monte Carlo cross-check of the engine at T = 1e4 (paired ratio, within 3 SE)."""
    from convkit import simulate
    from convkit.algorithms.local import MBA, OSA
    from convkit.checks import fit_exponent, paired_ratio
    from convkit.exact import expected_error
    from convkit.exact import stability_limit as exact_limit
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import PolyDecay

    name = "local_sgd.osa_mba_ratio"
    d, P, alpha = 10, 8, 0.75
    prob = LeastSquares.gaussian(d, spectrum="1/i", noise=1.0)
    C = 0.5 * exact_limit(prob, batch=1)
    theta0 = prob.theta_star + 1.0 / math.sqrt(d)
    step = PolyDecay(C, alpha)
    algos = [MBA(P, step, name="MBA"), OSA(P, step, name="OSA")]
    Ts = [10**3, 10**4, 10**5] + ([] if quick else [10**6])
    ratios = []
    for T in Ts:
        ex = expected_error(prob, algos, gradients=T, theta0=theta0, n_record=2)
        e = {a: float(ex.curve(a, "hnorm2", "avg")["mean"].iloc[-1]) for a in ("MBA", "OSA")}
        ratios.append(e["OSA"] / e["MBA"])
    ratios_a = np.array(ratios)
    excess = ratios_a - 1
    setting = (
        f"least squares Gaussian d = {d}, h_i = 1/i, P = {P}, gamma_k = {C:.3g} k^-{alpha}, "
        "Polyak average, exact engine"
    )
    if np.all(excess > 0):
        fe = fit_exponent(np.array(Ts, float), excess, None)
        dec = bool(np.all(np.diff(excess) < 0)) and fe.interval[1] < 0
        verdict = HOLDS if dec else NOT_HOLD
        slope, iv = fe.slope, list(fe.interval)
    else:
        verdict = HOLDS if abs(excess[-1]) <= 0.01 else INCONCLUSIVE
        slope, iv = float("nan"), None
    rows = [
        _row(
            name,
            setting + f", T = {Ts[0]:.0e} ... {Ts[-1]:.0e}: ratio at the largest T",
            float(ratios_a[-1]),
            1.0,
            verdict,
            "ratio - 1 decreasing in T with log-log slope interval < 0",
            ratios=ratios_a.tolist(),
            T=Ts,
            slope_excess=slope,
            interval=iv,
        )
    ]
    # Monte Carlo cross-check of the exact ratio at T = 1e4
    T = 10**4
    R = 300 if quick else 2000
    res = simulate(prob, algos, gradients=T, replicates=R, seed=13, theta0=theta0, n_record=2)
    r, se = paired_ratio(_final(res, "OSA", "hnorm2", "avg"), _final(res, "MBA", "hnorm2", "avg"))
    r, se = float(r), float(se)
    rows.append(
        _row(
            name,
            setting.replace("exact engine", f"Monte Carlo R = {R}") + f", T = {T:.0e}: paired "
            "ratio vs the exact engine's",
            r,
            float(ratios_a[1]),
            HOLDS if _within(r, float(ratios_a[1]), se) else NOT_HOLD,
            "within 3 paired SE",
            se=se,
        )
    )
    return rows


@functools.lru_cache(maxsize=4)
def _threshold_study(quick: bool, r0: float) -> dict[str, Any]:
    """N*(T, P) on a small exact grid (see :func:`check_local_sgd_threshold`)."""
    from convkit.exact.threshold import communication_threshold
    from convkit.problems.least_squares import LeastSquares

    d = 10
    prob = LeastSquares.gaussian(d, spectrum="1/i", noise=1.0, theta_star=np.zeros(d))
    theta0 = np.full(d, r0 / math.sqrt(d))
    P0, T0 = 8, 10**5
    Ts = [10**4, 3 * 10**4, 10**5] + ([] if quick else [3 * 10**5, 10**6])
    Ps = [2, 4, 8, 16, 32]
    kw = {"problem": prob, "theta0": theta0}
    out_T = [communication_threshold(T, P0, THR_ALPHA, THR_EPS, **kw) for T in Ts]
    out_P = [communication_threshold(T0, P, THR_ALPHA, THR_EPS, **kw) for P in Ps]
    return {"T": out_T, "P": out_P, "P0": P0, "T0": T0}


THR_ALPHA = 0.75
THR_EPS = 0.01


def _fit_on(xs: list, ys: list, keep: list, predicted: float) -> Any:
    from convkit.checks import fit_exponent

    if len(keep) < 3:
        return None
    x = np.array([xs[i] for i in keep], float)
    y = np.array([ys[i] for i in keep], float)
    return fit_exponent(x, y, None, predicted=predicted, level=0.95)


def _exp_row(
    name: str, setting: str, fe: Any, predicted: float, Ns: list, ns: list
) -> dict[str, Any]:
    if fe is None:
        if all(N == 1 for N in Ns):
            phrase = "boundary: N* = 1 everywhere (one-shot averaging already matches MBA)"
        elif all(N == n for N, n in zip(Ns, ns)):
            phrase = "boundary: N* = n everywhere (only MBA matches MBA)"
        else:
            phrase = INCONCLUSIVE + " (fewer than 3 points with 1 < N* < n)"
        return _row(name, setting, f"N* = {Ns}", predicted, phrase, "needs >= 3 interior points")
    return _row(
        name,
        setting,
        fe.slope,
        predicted,
        HOLDS if fe.consistent else NOT_HOLD,
        f"holds if the predicted exponent is in the 95 % interval {_fmt_interval(fe.interval)}",
        interval=list(fe.interval),
        n_points=fe.n_points,
        N_star=Ns,
        n=ns,
    )


@register(
    "local_sgd.threshold",
    [
        "local_sgd.rounds_needed",
        "local_sgd.communication_reduction",
        "local_sgd.local_steps_between_rounds",
    ],
)
def check_local_sgd_threshold(quick: bool) -> list[dict[str, Any]]:
    """Small exact version of the Local-SGD communication claim (Patel & Dieuleveut 2019, our
    reading): N* = min{N : err(N) <= 1.01 err(MBA)} (exact engine, bisection in N over evenly
    spaced rounds), least squares Gaussian d = 10, h_i = 1/i, sigma = 1, alpha = 0.75,
    C = half the single-worker stability limit, Polyak average, two starts: at theta* (r0 = 0:
    the noise regime) and at distance r0 = 1. Exponents of N* in T (P = 8, T = 1e4 ... 1e5 in
    quick mode) and in P (T = 1e5, P = 2 ... 32), fit by OLS with a t interval on interior
    points (1 < N* < n; at the boundary N* carries no slope), compared with +1/2 and +1/2. The
    reduction factor (T/P)/N* = n/N* and H* = n/N* follow from N* (claimed exponents +1/2 in T
    and -3/2 in P; both rows use the same N*). The large Monte Carlo study (least squares and
    logistic regression) is ``analyses/local_sgd_threshold_mc.py``."""
    rows = []
    for r0 in (0.0, 1.0):
        s = _threshold_study(quick, r0)
        T_list = [r["T"] for r in s["T"]]
        P_list = [r["P"] for r in s["P"]]
        NT = [r["N_star"] for r in s["T"]]
        NP = [r["N_star"] for r in s["P"]]
        nT = [r["n"] for r in s["T"]]
        nP = [r["n"] for r in s["P"]]
        keep = [i for i, (N, n) in enumerate(zip(NT, nT)) if 1 < N < n]
        keepP = [i for i, (N, n) in enumerate(zip(NP, nP)) if 1 < N < n]
        base = (
            f"exact least squares d = 10, h_i = 1/i, alpha = {THR_ALPHA}, eps = {THR_EPS}, "
            f"start at distance {r0:g}"
        )
        rows.append(
            _exp_row(
                "local_sgd.rounds_needed",
                f"{base}: exponent of N* in T (P = {s['P0']}, T = {T_list})",
                _fit_on(T_list, NT, keep, 0.5),
                0.5,
                NT,
                nT,
            )
        )
        rows.append(
            _exp_row(
                "local_sgd.rounds_needed",
                f"{base}: exponent of N* in P (T = {s['T0']:.0e}, P = {P_list})",
                _fit_on(P_list, NP, keepP, 0.5),
                0.5,
                NP,
                nP,
            )
        )
        if r0 != 0.0:
            continue
        red_T = [n / N for n, N in zip(nT, NT)]
        red_P = [n / N for n, N in zip(nP, NP)]
        for res_name, label in (
            ("local_sgd.communication_reduction", "reduction factor (T/P)/N*"),
            ("local_sgd.local_steps_between_rounds", "local steps H* = n/N*"),
        ):
            rows.append(
                _exp_row(
                    res_name,
                    f"{base}: exponent of the {label} in T (P = {s['P0']})",
                    _fit_on(T_list, red_T, keep, 0.5),
                    0.5,
                    NT,
                    nT,
                )
            )
            rows.append(
                _exp_row(
                    res_name,
                    f"{base}: exponent of the {label} in P (T = {s['T0']:.0e})",
                    _fit_on(P_list, red_P, keepP, -1.5),
                    -1.5,
                    NP,
                    nP,
                )
            )
    return rows


# ============================================================================ decentralized
N_NODES = 8
D_DEC = 10


def _dec_problem(noise: float = 1.0) -> Any:
    """Least squares, Gaussian design, d = 10, h_i = 1/i, theta* = 0 (iid nodes)."""
    from convkit.problems.least_squares import LeastSquares

    return LeastSquares.gaussian(D_DEC, spectrum="1/i", noise=noise, theta_star=np.zeros(D_DEC))


def _drive_grad_average(
    problem: Any, algo: Any, steps: int, R: int, seed: int, theta0: np.ndarray
) -> np.ndarray:
    """Per replicate ``(1/T) sum_{t=0}^{T-1} ||grad f(x_bar_t)||^2`` (the quantity of the
    D-PSGD / DeepSqueeze rates), stepping ``algo`` with one oracle per step (loop over time
    only). A replicate that overflows gives ``inf``."""
    from convkit.backend import Backend
    from convkit.problems.base import GradientOracle

    be = Backend()
    s_samp = be.stream(seed, "theory_checks", "samples")
    s_comp = be.stream(seed, "theory_checks", "compressor")
    algo.prepare(steps)
    P, d = algo.workers, problem.d
    state = algo.init(np.zeros((R, P, d)) + theta0, s_comp)
    acc = np.zeros(R)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, steps + 1):
            xbar = np.asarray(algo.models(state)).mean(axis=1)
            g = problem.grad(xbar)
            acc += np.sum(g * g, axis=-1)
            batch = problem.sample(s_samp, (R, P, algo.batch))
            state = algo.step(state, GradientOracle(problem, batch), k, s_comp)
    return np.where(np.isfinite(acc), acc / steps, np.inf)


def _rate_study(make: Callable[[Any], Any], quick: bool, seed: int) -> dict[str, Any]:
    """Run ``make(step)`` at ``T`` in a log grid with ``gamma_T = sqrt(n / T) / 2``."""
    from convkit.schedules import Constant

    prob = _dec_problem()
    Ts = [250, 500, 1000, 2000] + ([] if quick else [4000, 8000])
    R = 100 if quick else 300
    theta0 = np.full(D_DEC, 1.0 / math.sqrt(D_DEC))
    means, ses, gammas = [], [], []
    for T in Ts:
        g = 0.5 * math.sqrt(N_NODES / T)
        v = _drive_grad_average(prob, make(Constant(g)), T, R, seed, theta0)
        if not np.all(np.isfinite(v)):
            means.append(math.inf)
            ses.append(math.inf)
        else:
            m, se = _mean_se(v)
            means.append(m)
            ses.append(se)
        gammas.append(g)
    return {
        "T": np.array(Ts, float),
        "mean": np.array(means),
        "se": np.array(ses),
        "gamma": gammas,
        "R": R,
        "L": float(prob.L),
    }


def _rate_verdict(fe: Any) -> str:
    """An O(T^-1/2) upper bound holds in its exponent if the measured decay is not
    significantly slower than T^-1/2."""
    if fe.consistent:
        return HOLDS
    if fe.interval[1] < -0.5:
        return "holds (decays faster than T^-1/2)"
    return NOT_HOLD


def _dec_setting(algo: str) -> str:
    return (
        f"{algo}, ring of {N_NODES} nodes (W_ij = 1/3), least squares Gaussian d = {D_DEC}, "
        "h_i = 1/i, sigma = 1, iid nodes, start at distance 1, constant gamma_T = "
        "sqrt(n/T)/2"
    )


@register("dpsgd.rate", ["dpsgd.rate"])
def check_dpsgd_rate(quick: bool) -> list[dict[str, Any]]:
    """D-PSGD rate (Lian et al. 2017), iid nodes (zeta = 0): ``(1/T) sum_t E||grad
    f(x_bar_t)||^2 <= c sigma / sqrt(n T)`` with gamma ~ sqrt(n/T). Monte Carlo (R = 100
    replicates per T, T = 250 ... 2000 in quick mode); fit_exponent over all T against -1/2
    (95 % interval); the constant c fitted by fit_constants."""
    from convkit.algorithms.decentralized import DPSGD
    from convkit.bounds import fit_constants
    from convkit.checks import fit_exponent
    from convkit.topology import ring

    name = "dpsgd.rate"
    topo = ring(N_NODES)
    st = _rate_study(lambda s: DPSGD(topo, s), quick, seed=21)
    if not np.all(np.isfinite(st["mean"])):
        return [_row(name, _dec_setting("D-PSGD"), "diverged", -0.5, INCONCLUSIVE)]
    fe = fit_exponent(st["T"], st["mean"], st["se"], predicted=-0.5)
    fit = fit_constants(
        _lib(name),
        {"T": st["T"]},
        st["mean"],
        se=st["se"],
        fixed={"n": N_NODES, "sigma": 1.0, "zeta": 0.0},
    )
    return [
        _row(
            name,
            _dec_setting("D-PSGD") + f", R = {st['R']}: log-log slope in T",
            fe.slope,
            -0.5,
            _rate_verdict(fe),
            f"-1/2 inside the 95 % interval {_fmt_interval(fe.interval)} (or faster decay)",
            interval=list(fe.interval),
            chi2_dof=fe.chi2_dof,
            c=fit.values["c"],
            T=st["T"],
            mean=st["mean"],
            se=st["se"],
        )
    ]


def _deepsqueeze(topo: Any, step: Any) -> Any:
    from convkit.algorithms.decentralized import DeepSqueeze
    from convkit.compression import TopK

    return DeepSqueeze(topo, step, TopK(fraction=0.5), DS_ETA)


DS_ETA = 0.2


def _ds_ms_limit(quick: bool, guess: float) -> dict[str, Any]:
    """Largest mean-square stable constant gamma of noise-free DeepSqueeze (theta* = 0, so the
    recursion of the state (X, Delta) is positively homogeneous with top-k): bisection on the
    sign of :func:`convkit.checks.mean_square_growth_rate`."""
    from convkit.algorithms.decentralized import DeepSqueezeState
    from convkit.checks import mean_square_growth_rate, stability_limit
    from convkit.problems.base import GradientOracle
    from convkit.schedules import Constant
    from convkit.topology import ring

    prob0 = _dec_problem(noise=0.0)
    topo = ring(N_NODES)
    P, d = N_NODES, D_DEC
    rng = np.random.default_rng(31)
    stream = _stream(31, "deepsqueeze_ms")
    n_steps = 150 if quick else 400
    R = 64 if quick else 128

    def is_stable(g: float) -> bool:
        algo = _deepsqueeze(topo, Constant(g))
        algo.prepare(1)

        def step(rows: np.ndarray) -> np.ndarray:
            n = rows.shape[0]
            X = rows[:, : P * d].reshape(n, P, d).copy()
            Dl = rows[:, P * d :].reshape(n, P, d).copy()
            stt = DeepSqueezeState(X, Dl, np.zeros_like(X))
            batch = prob0.sample(stream, (n, P, 1))
            stt = algo.step(stt, GradientOracle(prob0, batch), 1, stream)
            return np.concatenate([stt.x.reshape(n, -1), stt.delta.reshape(n, -1)], axis=1)

        e0 = np.concatenate([np.ones((R, P * d)), np.zeros((R, P * d))], axis=1)
        e0 += 0.1 * rng.standard_normal(e0.shape)
        gr = mean_square_growth_rate(step, e0, n_steps, rng=rng, n_systems=8)
        return gr.rate < 0

    br = stability_limit(is_stable, guess / 4, 4 * guess, rtol=0.05 if quick else 0.01)
    return {"lo": br.lo, "hi": br.hi, "estimate": br.estimate, "evaluations": br.n_evaluations}


@functools.lru_cache(maxsize=2)
def _deepsqueeze_study(quick: bool) -> dict[str, Any]:
    from convkit.bounds import fit_constants
    from convkit.checks import fit_exponent
    from convkit.topology import ring

    topo = ring(N_NODES)
    st = _rate_study(lambda s: _deepsqueeze(topo, s), quick, seed=23)
    out: dict[str, Any] = {"study": st}
    if np.all(np.isfinite(st["mean"])):
        out["fe"] = fit_exponent(st["T"], st["mean"], st["se"], predicted=-0.5)
        out["fit"] = fit_constants(
            _lib("deepsqueeze.rate"), {"T": st["T"]}, st["mean"], se=st["se"], fixed={"n": N_NODES}
        )
    return out


@register("deepsqueeze.rate", ["deepsqueeze.rate", "deepsqueeze.step_limit"])
def check_deepsqueeze_rate(quick: bool) -> list[dict[str, Any]]:
    """DeepSqueeze (top-k with k = d/2, eta = 0.2) on the setting of :func:`check_dpsgd_rate`.

    Rate ``c / sqrt(n T) + C_2 / T`` (Tang et al. 2019, constants unknown): C_2 and c fitted
    with fit_constants (weighted by the SE; the model fits if the rms weighted log residual
    is <= 2, i.e. about 2 SE), and the log-log slope in T against -1/2 (95 % interval; a
    faster decay also satisfies the upper bound).

    Step limit ``gamma <= 1 / (3 L sqrt(C_2))`` with the fitted C_2 (in the units of the
    measured ``E||grad f||^2``) and L = h_max = 1, compared with the measured largest
    mean-square stable constant gamma (noise-free, Monte Carlo bisection). The limit is a
    sufficient condition: it holds if the measured stable bracket lies above the bound, also
    with C_2 moved by 2 standard errors of log C_2 (from the fit); it does not hold if the
    bracket lies below the bound's whole range; otherwise the verdict is inconclusive."""
    s = _deepsqueeze_study(quick)
    st = s["study"]
    setting = _dec_setting(f"DeepSqueeze top-k (k = d/2), eta = {DS_ETA}") + f", R = {st['R']}"
    if "fit" not in s:
        bad = [int(T) for T, m in zip(st["T"], st["mean"]) if not np.isfinite(m)]
        return [
            _row(
                "deepsqueeze.rate",
                setting,
                f"diverged at T = {bad}",
                "c/sqrt(nT) + C_2/T",
                NOT_HOLD,
            ),
            _row("deepsqueeze.step_limit", setting, "no C_2 (rate diverged)", "-", INCONCLUSIVE),
        ]
    fe, fit = s["fe"], s["fit"]
    C2, c = fit.values["C_2"], fit.values["c"]
    fits = fit.rms_log_residual <= 2.0
    rows = [
        _row(
            "deepsqueeze.rate",
            setting + ": fitted c/sqrt(nT) + C_2/T",
            f"C_2 = {C2:.3g}, c = {c:.3g}, rms resid = {fit.rms_log_residual:.2f} SE",
            "c/sqrt(nT) + C_2/T",
            "model fits" if fits else "model does not fit",
            "rms weighted log residual <= 2",
            C_2=C2,
            c=c,
            log_se=fit.log_se,
            rms_log_residual=fit.rms_log_residual,
            T=st["T"],
            mean=st["mean"],
            se=st["se"],
        ),
        _row(
            "deepsqueeze.rate",
            setting + ": log-log slope in T",
            fe.slope,
            -0.5,
            _rate_verdict(fe),
            f"-1/2 inside the 95 % interval {_fmt_interval(fe.interval)} (or faster decay)",
            interval=list(fe.interval),
            chi2_dof=fe.chi2_dof,
        ),
    ]
    lim = _lib("deepsqueeze.step_limit")
    bound = float(lim.evaluate(L=st["L"], C_2=C2))
    # the bound with C_2 moved by 2 standard errors of log C_2 either way
    k = 2.0 * fit.log_se["C_2"]
    b_lo = float(lim.evaluate(L=st["L"], C_2=C2 * math.exp(k)))
    b_hi = float(lim.evaluate(L=st["L"], C_2=C2 * math.exp(-k)))
    try:
        ms = _ds_ms_limit(quick, guess=0.3)
        meas = ms["estimate"]
        if ms["lo"] >= b_hi:
            verdict = HOLDS
        elif ms["hi"] < b_lo:
            verdict = NOT_HOLD + " (the bound allows mean-square unstable steps)"
        else:
            verdict = INCONCLUSIVE
        det = {
            "bracket": [ms["lo"], ms["hi"]],
            "evaluations": ms["evaluations"],
            "bound_range": [b_lo, b_hi],
        }
    except ValueError as exc:  # the bracket [guess/4, 4 guess] did not bracket the limit
        meas, verdict, det = str(exc)[:60], INCONCLUSIVE, {}
    rows.append(
        _row(
            "deepsqueeze.step_limit",
            setting.split(", R =")[0] + ": measured largest mean-square stable gamma (noise-free, "
            "Monte Carlo bisection) vs 1/(3 L sqrt(C_2)) with the fitted C_2",
            meas,
            bound,
            verdict,
            "sufficient condition: holds if the measured MC bracket lies above the bound "
            "(with C_2 +- 2 SE of log C_2), does not hold if below",
            C_2=C2,
            **det,
        )
    )
    return rows


@register("choco.rate", ["choco.rate_strongly_convex"])
def check_choco_rate(quick: bool) -> list[dict[str, Any]]:
    """CHOCO-SGD (top-k, k = d/2, gamma_c tuned by gossip simulation) on the least-squares
    setting of :func:`check_dpsgd_rate` with decreasing steps gamma_t = 4 / (mu (t + a)),
    a = 200 (Koloskova et al. 2019, strongly convex): ``E f(x_bar_T) - f* <= c (1/(nT) +
    1/(T delta^2 omega)^2)``, leading exponent -1 in T. Monte Carlo excess risk of the node
    average (last iterate; the theorem bounds a weighted time average, which the engine does
    not record) at T = 500 ... 4000 (one run, R = 200 in quick mode); log-log slope against -1
    (95 % interval; a faster decay also satisfies the bound), in T and in T + a (the steps
    count time from -a, and c/(T + a) <= c/T is the same O(1/T) bound)."""
    from convkit import simulate
    from convkit.algorithms.decentralized import CHOCOSGD, tune_consensus_step
    from convkit.checks import fit_exponent
    from convkit.compression import TopK
    from convkit.schedules import PolyDecay
    from convkit.topology import ring

    name = "choco.rate_strongly_convex"
    prob = _dec_problem()
    topo = ring(N_NODES)
    comp = TopK(fraction=0.5)
    gc = tune_consensus_step(topo, comp, d=D_DEC, iterations=200).gamma_c
    mu = float(prob.mu)
    a = 200.0
    algo = CHOCOSGD(topo, PolyDecay(4.0 / mu, 1.0, a), comp, gc, name="CHOCO")
    Ts = [500, 1000, 2000, 4000] + ([] if quick else [8000, 16000])
    R = 200 if quick else 600
    theta0 = np.full(D_DEC, 1.0 / math.sqrt(D_DEC))
    res = simulate(
        prob, algo, steps=Ts[-1], replicates=R, seed=41, theta0=theta0, record=Ts, n_record=1
    )
    c = res.curve("CHOCO", "excess_risk", "last").set_index("step").reindex(Ts)
    mean, se = c["mean"].to_numpy(), c["se"].to_numpy()
    lead = float(_lib(name).leading_exponent("T"))
    setting = (
        f"CHOCO-SGD top-k (k = d/2), gamma_c = {gc:.3g} (tuned), ring of {N_NODES}, least "
        f"squares Gaussian d = {D_DEC}, h_i = 1/i, sigma = 1, gamma_t = 4/(mu (t + {a:g})), "
        f"start at distance 1, R = {R}, T = {Ts[0]} ... {Ts[-1]}: log-log slope of the excess "
        "risk of the node average x_bar_T"
    )
    rows = []
    for x, label in ((np.array(Ts, float), "in T"), (np.array(Ts, float) + a, f"in T + {a:g}")):
        fe = fit_exponent(x, mean, se, predicted=lead)
        if fe.consistent:
            verdict = HOLDS
        elif fe.interval[1] < lead:
            verdict = "holds (decays faster)"
        else:
            verdict = NOT_HOLD + f" for T <= {Ts[-1]} (slower decay)"
        rows.append(
            _row(
                name,
                f"{setting} {label}",
                fe.slope,
                lead,
                verdict,
                f"holds if {lead:g} is in the 95 % interval {_fmt_interval(fe.interval)} "
                "(or the decay is faster)",
                interval=list(fe.interval),
                chi2_dof=fe.chi2_dof,
                T=Ts,
                mean=mean,
                se=se,
            )
        )
    return rows


def _average_dynamics_rows(name: str, make: Callable[[Any, Any], Any], label: str) -> list:
    from convkit.backend import Backend
    from convkit.compression import QSGD, ScaledSign, TopK
    from convkit.problems.base import GradientOracle
    from convkit.schedules import Constant
    from convkit.topology import ring

    prob = _dec_problem()
    topo = ring(N_NODES)
    gamma = 0.05
    be = Backend()
    rows = []
    for comp in (TopK(fraction=0.2), ScaledSign(), QSGD(s=2)):
        algo = make(topo, Constant(gamma), comp)
        steps, R = 30, 4
        algo.prepare(steps)
        s_samp, s_comp = be.stream(51, "samples"), be.stream(51, "comp", comp.name)
        state = algo.init(np.ones((R, N_NODES, D_DEC)), s_comp)
        worst = 0.0
        for k in range(1, steps + 1):
            oracle = GradientOracle(prob, prob.sample(s_samp, (R, N_NODES, 1)))
            X = np.array(algo.models(state), copy=True)
            G = oracle.grad(X.copy())
            state = algo.step(state, oracle, k, s_comp)
            lhs = np.asarray(algo.models(state)).mean(axis=1)
            rhs = X.mean(axis=1) - gamma * G.mean(axis=1)
            scale = max(1.0, float(np.max(np.abs(algo.models(state)))))
            worst = max(worst, float(np.max(np.abs(lhs - rhs))) / scale)
        rows.append(
            _row(
                name,
                f"{label} with {comp.name}, ring of {N_NODES}, least squares d = {D_DEC}, "
                f"gamma = {gamma}, 30 steps, R = 4: max |mean(X_t+1) - (mean(X_t) - gamma "
                "mean(G_t))|",
                worst,
                0.0,
                HOLDS if worst <= 1e-12 else NOT_HOLD,
                "<= 1e-12 x max(1, max|X|)",
            )
        )
    return rows


@register("deepsqueeze.average_dynamics", ["deepsqueeze.average_dynamics"])
def check_deepsqueeze_average(quick: bool) -> list[dict[str, Any]]:
    """DeepSqueeze's node average moves like mini-batch SGD whatever the compressor
    (derived: 1^T (W - I) = 0): top-k, scaled sign and QSGD, to 1e-12."""
    from convkit.algorithms.decentralized import DeepSqueeze

    return _average_dynamics_rows(
        "deepsqueeze.average_dynamics",
        lambda t, s, c: DeepSqueeze(t, s, c, 0.4),
        "DeepSqueeze eta = 0.4",
    )


@register("choco.average_dynamics", ["choco.average_dynamics"])
def check_choco_average(quick: bool) -> list[dict[str, Any]]:
    """CHOCO-SGD's node average moves like mini-batch SGD whatever the compressor, to 1e-12."""
    from convkit.algorithms.decentralized import CHOCOSGD

    return _average_dynamics_rows(
        "choco.average_dynamics",
        lambda t, s, c: CHOCOSGD(t, s, c, 0.3),
        "CHOCO-SGD gamma_c = 0.3",
    )


# ============================================================================ W_eta
@register("w_eta.eigenvalues", ["w_eta.eigenvalues"])
def check_w_eta_eigenvalues(quick: bool) -> list[dict[str, Any]]:
    """Eigenvalues of ``W_eta = (1 - eta) I + eta W`` computed numerically (eigvalsh of the
    topology's W_eta) equal ``1 - eta (1 - lambda_i(W))`` (derived), rings of 8 and 9 nodes and
    a 3 x 4 torus, eta in {0.1, 0.5, 1}; max absolute difference <= 1e-12."""
    from convkit.topology import ring, torus

    res = _lib("w_eta.eigenvalues")
    rows = []
    for topo in (ring(8), ring(9), torus(3, 4)):
        lam = np.sort(np.linalg.eigvalsh(topo.W_at(0)))
        worst = 0.0
        for eta in (0.1, 0.5, 1.0):
            num = np.sort(np.linalg.eigvalsh(topo.W_eta(eta).W_at(0)))
            th = np.sort(np.asarray(res.evaluate(eta=eta, lambda_i=lam), dtype=float))
            worst = max(worst, float(np.max(np.abs(num - th))))
        rows.append(
            _row(
                "w_eta.eigenvalues",
                f"{topo.name}, eta in {{0.1, 0.5, 1}}: max |eig(W_eta) - (1 - eta(1 - lambda))|",
                worst,
                0.0,
                HOLDS if worst <= 1e-12 else NOT_HOLD,
                "<= 1e-12",
            )
        )
    return rows


@register("w_eta.gap_condition", ["w_eta.gap_condition"])
def check_w_eta_gap(quick: bool) -> list[dict[str, Any]]:
    """Largest eta for which the spectral gap of W_eta is eta (1 - lambda_2): located
    numerically by bisection on the predicate ``1 - max_{i>=2} |eig_i(W_eta)| == eta (1 -
    lambda_2)`` (eigenvalues by eigvalsh) for a ring of 8 with weights 1/2 on the neighbours
    (lambda_n = -1), against ``2 / (2 - lambda_2 - lambda_n)``; relative difference <= 1e-8.
    Also the uniform ring of 8 (W_ij = 1/3), where the derived eta_max > 1, so the gap is
    eta (1 - lambda_2) on all of (0, 1]."""
    from convkit.topology import from_matrix, ring

    res = _lib("w_eta.gap_condition")
    n = 8
    W = 0.5 * (np.roll(np.eye(n), 1, axis=1) + np.roll(np.eye(n), -1, axis=1))
    rows = []
    for topo in (from_matrix(W, name="ring(8, W_ij = 1/2)"), ring(n)):
        lam = np.sort(np.linalg.eigvalsh(topo.W_at(0)))[::-1]
        l2, ln = float(lam[1]), float(lam[-1])
        W0 = topo.W_at(0)

        def pred(eta: float, Wm: np.ndarray = W0, l2: float = l2) -> bool:
            ev = np.sort(np.linalg.eigvalsh((1 - eta) * np.eye(n) + eta * Wm))[::-1]
            gap = 1.0 - float(np.max(np.abs(ev[1:])))
            return abs(gap - eta * (1 - l2)) <= 1e-12

        theory = float(res.evaluate(lambda_2=l2, lambda_n=ln))
        if pred(1.0):
            meas: Any = "> 1 (gap = eta(1 - lambda_2) on all of (0, 1])"
            ok = theory >= 1.0 and all(pred(e) for e in np.linspace(0.01, 1.0, 100))
            verdict = HOLDS if ok else NOT_HOLD
            margin = "derived eta_max >= 1 and the predicate holds on a grid of (0, 1]"
        else:
            lo, hi = 1e-3, 1.0
            if not pred(lo):
                raise RuntimeError("gap predicate fails at eta = 1e-3")
            while hi - lo > 1e-13:
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if pred(mid) else (lo, mid)
            meas = lo
            verdict = HOLDS if abs(lo / theory - 1) <= 1e-8 else NOT_HOLD
            margin = "relative difference <= 1e-8"
        rows.append(
            _row(
                "w_eta.gap_condition",
                f"{topo.name}: lambda_2 = {l2:.4f}, lambda_n = {ln:.4f}; largest eta with "
                "gap(W_eta) = eta (1 - lambda_2)",
                meas,
                theory,
                verdict,
                margin,
            )
        )
    return rows


# ============================================================================ compression
def _test_vectors(seed: int, R: int, d: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sparse = rng.standard_normal((R, d)) * (rng.random((R, d)) < 0.2)
    sparse[:, 0] += 1.0
    return {
        "gaussian": rng.standard_normal((R, d)),
        "cauchy": rng.standard_cauchy((R, d)),
        "sparse": sparse,
        "equal magnitudes (worst case)": rng.choice([-1.0, 1.0], size=(R, d)),
    }


@register("compression.top_k", ["compression.top_k"])
def check_top_k(quick: bool) -> list[dict[str, Any]]:
    """top-k is a contraction: ``||top_k(x) - x||^2 <= (1 - k/d) ||x||^2`` for every x
    (deterministic bound, check_bound with se = 0); d = 50, k in {1, 5, 25}, 2000 vectors of
    four kinds; equal magnitudes attain the bound (tightness 1)."""
    from convkit.checks import check_bound
    from convkit.compression import TopK

    d, R = 50, 2000
    res = _lib("compression.top_k")
    rows = []
    X = np.concatenate(list(_test_vectors(61, R, d).values()))
    for k in (1, 5, 25):
        C = TopK(k=k).compress(X)
        ratio = np.sum((C - X) ** 2, axis=1) / np.sum(X * X, axis=1)
        bound = float(res.evaluate(k=k, d=d))
        bc = check_bound(np.arange(ratio.size), ratio, 0.0, bound)
        rows.append(
            _row(
                "compression.top_k",
                f"d = {d}, k = {k}, {X.shape[0]} vectors (Gaussian, Cauchy, sparse, equal "
                "magnitudes): max ||C(x) - x||^2 / ||x||^2",
                float(ratio.max()),
                bound,
                HOLDS if bc.holds else NOT_HOLD,
                "every vector below the bound (exact, rtol 1e-12)",
                tightness=bc.max_ratio,
            )
        )
    return rows


def _mc_compressor_ratio(comp: Any, x: np.ndarray, R: int, seed: int) -> tuple[float, float]:
    """Mean and SE of ``||C(x) - x||^2 / ||x||^2`` over R independent compressions of x."""
    X = np.broadcast_to(x, (R, x.size)).copy()
    C = comp.compress(X, _stream(seed, comp.name))
    v = np.sum((C - X) ** 2, axis=1) / float(x @ x)
    return _mean_se(v)


@register("compression.rand_k", ["compression.rand_k", "compression.rand_k_scaled"])
def check_rand_k(quick: bool) -> list[dict[str, Any]]:
    """rand-k: ``E||C(x) - x||^2 = (1 - k/d) ||x||^2`` and, scaled by d/k, ``(d/k - 1)
    ||x||^2`` (identities): Monte Carlo over R compressions of one Gaussian x (d = 50,
    k in {5, 25}); within 3 SE (two-sided)."""
    from convkit.compression import RandK

    d = 50
    R = 20000 if quick else 200000
    x = np.random.default_rng(71).standard_normal(d)
    rows = []
    for scaled, name in ((False, "compression.rand_k"), (True, "compression.rand_k_scaled")):
        res = _lib(name)
        for k in (5, 25):
            m, se = _mc_compressor_ratio(RandK(k=k, scaled=scaled), x, R, 72 + k)
            th = float(res.evaluate(k=k, d=d))
            rows.append(
                _row(
                    name,
                    f"{'scaled ' if scaled else ''}rand-k, d = {d}, k = {k}, one Gaussian x, "
                    f"R = {R} compressions: E||C(x) - x||^2 / ||x||^2",
                    m,
                    th,
                    HOLDS if _within(m, th, se) else NOT_HOLD,
                    "within 3 SE",
                    se=se,
                    z=(m - th) / se if se > 0 else 0.0,
                )
            )
    return rows


@register("compression.qsgd", ["compression.qsgd"])
def check_qsgd(quick: bool) -> list[dict[str, Any]]:
    """QSGD variance bound ``E||Q_s(x) - x||^2 <= min(d/s^2, sqrt(d)/s) ||x||^2`` (Alistarh
    et al. 2017, Lemma 3.1): Monte Carlo over R compressions of x (Gaussian and equal
    magnitudes, d = 50, s in {1, 4}), one-sided check_bound at 99.9 %; tightness reported."""
    from convkit.checks import check_bound
    from convkit.compression import QSGD

    d = 50
    R = 20000 if quick else 200000
    res = _lib("compression.qsgd")
    vecs = {
        "Gaussian x": np.random.default_rng(81).standard_normal(d),
        "equal-magnitude x": np.random.default_rng(82).choice([-1.0, 1.0], size=d),
    }
    rows = []
    for s in (1, 4):
        th = float(res.evaluate(d=d, s=s))
        for label, x in vecs.items():
            comp = QSGD(s=s)
            m, se = _mc_compressor_ratio(comp, x, R, 83 + s)
            bc = check_bound([0.0], [m], [se], th, confidence=0.999)
            exact_var = float(np.asarray(comp.exact_variance(x[None, :])).ravel()[0] / (x @ x))
            rows.append(
                _row(
                    "compression.qsgd",
                    f"QSGD s = {s}, d = {d}, {label}, R = {R}: E||Q(x) - x||^2 / ||x||^2",
                    m,
                    th,
                    HOLDS if bc.holds else NOT_HOLD,
                    "one-sided, 99.9 %",
                    se=se,
                    tightness=m / th,
                    exact_variance=exact_var,
                )
            )
    return rows


@register("compression.scaled_sign", ["compression.scaled_sign"])
def check_scaled_sign(quick: bool) -> list[dict[str, Any]]:
    """Scaled sign: ``||(||x||_1/d) sign(x) - x||^2 = ||x||_2^2 - ||x||_1^2 / d`` exactly, for
    2000 vectors of four kinds, d = 50; max relative difference <= 1e-12."""
    from convkit.compression import ScaledSign

    d, R = 50, 500
    res = _lib("compression.scaled_sign")
    X = np.concatenate(list(_test_vectors(91, R, d).values()))
    C = ScaledSign().compress(X)
    meas = np.sum((C - X) ** 2, axis=1)
    th = np.asarray(
        res.evaluate(d=d, x_norm1=np.abs(X).sum(axis=1), x_norm2=np.linalg.norm(X, axis=1)),
        dtype=float,
    )
    rel = float(np.max(np.abs(meas - th) / np.sum(X * X, axis=1)))
    return [
        _row(
            "compression.scaled_sign",
            f"d = {d}, {X.shape[0]} vectors (Gaussian, Cauchy, sparse, equal magnitudes): max "
            "| ||C(x) - x||^2 - formula | / ||x||^2",
            rel,
            0.0,
            HOLDS if rel <= 1e-12 else NOT_HOLD,
            "<= 1e-12",
        )
    ]


# ============================================================================ error feedback
@register("ef_sgd.memory", ["ef_sgd.memory"])
def check_ef_memory(quick: bool) -> list[dict[str, Any]]:
    """Error-feedback SGD memory ``E||e||^2 = O(gamma^2)`` (Stich et al. 2018, Karimireddy et
    al. 2019): 4 workers, top-k (k = d/4), least squares Gaussian d = 20, h_i = 1/i, sigma = 1,
    start at theta*, constant gamma in {0.005, ..., 0.04}, memory at step 500 (Monte Carlo);
    log-log slope in gamma against 2 (95 % interval). Also reports the bound's constant
    ``c`` implied by each point with ``G^2 = sigma^2 tr(H)`` (E||g||^2 at theta*)."""
    from convkit import simulate
    from convkit.algorithms.feedback import ErrorFeedbackSGD
    from convkit.checks import fit_exponent
    from convkit.compression import TopK
    from convkit.problems.least_squares import LeastSquares
    from convkit.schedules import Constant

    d, P, n = 20, 4, 500
    R = 200 if quick else 1000
    prob = LeastSquares.gaussian(d, spectrum="1/i", noise=1.0)
    gammas = [0.005, 0.01, 0.02, 0.04]
    comp = TopK(fraction=0.25)
    algos = [ErrorFeedbackSGD(P, Constant(g), comp, name=f"EF{g:g}") for g in gammas]
    res = simulate(prob, algos, steps=n, replicates=R, seed=101, theta0=prob.theta_star, n_record=2)
    ms = [_mean_se(_final(res, a.label, "memory", "state")) for a in algos]
    m = np.array([x[0] for x in ms])
    se = np.array([x[1] for x in ms])
    fe = fit_exponent(np.array(gammas), m, se, predicted=2.0)
    G2 = float(prob.noise**2 * prob.h.sum())
    delta = comp.delta(d)
    c_implied = m / ((1 - delta) / delta**2 * np.array(gammas) ** 2 * G2)
    return [
        _row(
            "ef_sgd.memory",
            f"EF-SGD, P = {P}, top-k (k = d/4), least squares Gaussian d = {d}, h_i = 1/i, "
            f"sigma = 1, gamma in {gammas}, memory after {n} steps, R = {R}: log-log slope in "
            "gamma",
            fe.slope,
            2.0,
            HOLDS if fe.consistent else NOT_HOLD,
            f"2 inside the 95 % interval {_fmt_interval(fe.interval)}",
            interval=list(fe.interval),
            chi2_dof=fe.chi2_dof,
            memory=m,
            se=se,
            c_implied=c_implied,
        )
    ]
