"""The library of results: the papers' claims (with provenance) and the results derived here.

Every result has a stable name. Build one with :func:`get` (``get("sgd.ms_stability.1d")``)
or all of them with :func:`all_results`; :data:`LIBRARY` maps names to zero-argument factories
(derived results run their SymPy derivation on first use and are cached).

Unknown constants stay symbolic (``c``, ``C_2``): they are listed in ``result.constants`` and
can be measured with :func:`convkit.bounds.core.fit_constants`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import sympy as sp

from convkit.bounds import derivations as dv
from convkit.bounds.core import TheoryResult, symbol

__all__ = ["LIBRARY", "all_results", "get", "names"]

_HALF = sp.Rational(1, 2)

PATEL = (
    "Patel & Dieuleveut 2019, 'Communication trade-offs for synchronized distributed SGD with "
    "large step size' (arXiv 1904.11325)"
)
TANG = (
    "Tang, Lian, Qiu, Yuan, Zhang, Zhang, Liu 2019, 'DeepSqueeze: Decentralization meets "
    "error-compensated compression' (arXiv 1907.07346)"
)
LIAN = (
    "Lian, Zhang, Zhang, Hsieh, Zhang, Liu 2017, 'Can decentralized algorithms outperform "
    "centralized algorithms?' (NeurIPS 2017)"
)
KOLOSKOVA = (
    "Koloskova, Stich, Jaggi 2019, 'Decentralized stochastic optimization and gossip "
    "algorithms with compressed communication' (ICML 2019)"
)


def _derived(func: Callable[..., object]) -> str:
    return f"derived here: convkit.bounds.derivations.{func.__name__}"


# ---------------------------------------------------------------------------- Local-SGD
def _local_comm_reduction() -> TheoryResult:
    T, P, alpha, c = symbol("T"), symbol("P"), symbol("alpha"), symbol("c")
    return TheoryResult(
        name="local_sgd.communication_reduction",
        expression=c * sp.sqrt(T) / P ** sp.Rational(3, 2),
        kind="scaling_law",
        quantity="(rounds of MBA) / (rounds of Local-SGD matching MBA's error)",
        provenance=f"{PATEL}: abstract, 'reduces communication by a factor of "
        "O(sqrt(T)/P^(3/2))' for step sizes C k^(-alpha), 1/2 < alpha < 1",
        conditions=(_HALF < alpha, alpha < 1),
        constants=(c,),
        notes="T = total stochastic gradients over all P workers, b = 1 (MBA uses T/P rounds).",
    )


def _local_rounds_needed() -> TheoryResult:
    T, P, alpha, c = symbol("T"), symbol("P"), symbol("alpha"), symbol("c")
    return TheoryResult(
        name="local_sgd.rounds_needed",
        expression=c * sp.sqrt(P * T),
        kind="scaling_law",
        quantity="N*: rounds for Local-SGD to match MBA's error",
        provenance=f"{PATEL}: implied by the reduction factor sqrt(T)/P^(3/2) against MBA's "
        "T/P rounds (our reading of the abstract): N* = (T/P) / (sqrt(T)/P^(3/2))",
        conditions=(_HALF < alpha, alpha < 1),
        constants=(c,),
        notes="Exponents to test: +1/2 in T and +1/2 in P.",
    )


def _local_steps_between() -> TheoryResult:
    T, P, alpha, c = symbol("T"), symbol("P"), symbol("alpha"), symbol("c")
    return TheoryResult(
        name="local_sgd.local_steps_between_rounds",
        expression=c * sp.sqrt(T) / P ** sp.Rational(3, 2),
        kind="scaling_law",
        quantity="H*: local steps between averages at N* rounds",
        provenance=f"{PATEL}: implied, H* = (T/P)/N* with N* ~ sqrt(P T) (our reading)",
        conditions=(_HALF < alpha, alpha < 1),
        constants=(c,),
    )


def _osa_mba_ratio() -> TheoryResult:
    T = symbol("T")
    return TheoryResult(
        name="local_sgd.osa_mba_ratio",
        expression=sp.Integer(1),
        kind="asymptotic",
        quantity="err(OSA) / err(MBA)",
        provenance=f"{PATEL}: public NeurIPS review, 'OSA and MBA are asymptotically "
        "equivalent'; consistent with both reaching sigma^2 d / T (Polyak-Juditsky)",
        variable=T,
        notes="P fixed, T -> oo. Pre-asymptotically communicating more often is better.",
    )


# ---------------------------------------------------------------------------- DeepSqueeze
def _deepsqueeze_rate() -> TheoryResult:
    T, n, c, C2 = symbol("T"), symbol("n"), symbol("c"), symbol("C_2")
    gamma, L = symbol("gamma"), symbol("L")
    return TheoryResult(
        name="deepsqueeze.rate",
        expression=c / sp.sqrt(n * T) + C2 / T,
        kind="upper_bound",
        quantity="(1/T) sum_t E||grad f(x_bar_t)||^2",
        provenance=f"{TANG}: Theorem 1 as summarized, rate 1/sqrt(nT) + C_2/T; C_2 grows "
        "with the compression error and shrinks with the spectral gap (constants not "
        "available: kept symbolic)",
        conditions=(gamma <= 1 / (3 * L * sp.sqrt(C2)),),
        constants=(c, C2),
        notes="Measure C_2 with fit_constants; the leading exponent in T is -1/2.",
    )


def _deepsqueeze_step_limit() -> TheoryResult:
    L, C2 = symbol("L"), symbol("C_2")
    return TheoryResult(
        name="deepsqueeze.step_limit",
        expression=1 / (3 * L * sp.sqrt(C2)),
        kind="stability_limit",
        quantity="gamma (sufficient condition for the rate)",
        provenance=f"{TANG}: Theorem 1 as summarized, gamma <= 1/(3 L sqrt(C_2))",
        constants=(C2,),
        notes="A sufficient condition, not a divergence threshold.",
    )


# ---------------------------------------------------------------------------- baselines
def _dpsgd_rate() -> TheoryResult:
    T, n, c, sig, zeta = symbol("T"), symbol("n"), symbol("c"), symbol("sigma"), symbol("zeta")
    return TheoryResult(
        name="dpsgd.rate",
        expression=c
        * (sig / sp.sqrt(n * T) + (n * zeta**2) ** sp.Rational(1, 3) / T ** sp.Rational(2, 3)),
        kind="upper_bound",
        quantity="(1/T) sum_t E||grad f(x_bar_t)||^2",
        provenance=f"{LIAN}: D-PSGD rate O(sigma/sqrt(nT) + (n zeta^2)^(1/3)/T^(2/3)) for "
        "gamma tuned to T (non-convex, smooth)",
        constants=(c,),
    )


def _choco_rate() -> TheoryResult:
    T, n, c, delta, omega = (
        symbol("T"),
        symbol("n"),
        symbol("c"),
        symbol("delta"),
        symbol("omega"),
    )
    return TheoryResult(
        name="choco.rate_strongly_convex",
        expression=c * (1 / (n * T) + 1 / (T * delta**2 * omega) ** 2),
        kind="upper_bound",
        quantity="E f(x_bar_T) - f*",
        provenance=f"{KOLOSKOVA}: CHOCO-SGD, strongly convex, O(1/(nT) + 1/(T delta^2 omega)^2) "
        "with delta the eigengap of W and omega the compression quality",
        conditions=(omega <= 1,),
        constants=(c,),
    )


def _topk() -> TheoryResult:
    k, d = symbol("k"), symbol("d")
    return TheoryResult(
        name="compression.top_k",
        expression=1 - k / d,
        kind="upper_bound",
        quantity="||top_k(x) - x||^2 / ||x||^2",
        provenance="Stich, Cordonnier, Jaggi 2018 (Sparsified SGD with memory): top-k is a "
        "contraction with delta = k/d",
        conditions=(k <= d,),
    )


def _randk() -> TheoryResult:
    k, d = symbol("k"), symbol("d")
    return TheoryResult(
        name="compression.rand_k",
        expression=1 - k / d,
        kind="identity",
        quantity="E||rand_k(x) - x||^2 / ||x||^2",
        provenance="Stich, Cordonnier, Jaggi 2018: rand-k keeps each coordinate with "
        "probability k/d, so the expected squared error is exactly (1 - k/d)||x||^2",
        conditions=(k <= d,),
    )


def _randk_scaled() -> TheoryResult:
    k, d = symbol("k"), symbol("d")
    return TheoryResult(
        name="compression.rand_k_scaled",
        expression=d / k - 1,
        kind="identity",
        quantity="E||(d/k) rand_k(x) - x||^2 / ||x||^2",
        provenance="classic: (d/k) rand_k is unbiased with variance factor d/k - 1",
        conditions=(k <= d,),
    )


def _qsgd() -> TheoryResult:
    d, s = symbol("d"), symbol("s")
    return TheoryResult(
        name="compression.qsgd",
        expression=sp.Min(d / s**2, sp.sqrt(d) / s),
        kind="upper_bound",
        quantity="E||Q_s(x) - x||^2 / ||x||^2",
        provenance="Alistarh, Grubic, Li, Tomioka, Vojnovic 2017 (QSGD), Lemma 3.1: unbiased, "
        "variance factor min(d/s^2, sqrt(d)/s)",
    )


def _scaled_sign() -> TheoryResult:
    d, n1, n2 = symbol("d"), symbol("x_norm1"), symbol("x_norm2")
    return TheoryResult(
        name="compression.scaled_sign",
        expression=n2**2 - n1**2 / d,
        kind="identity",
        quantity="||(||x||_1/d) sign(x) - x||^2",
        provenance="Karimireddy, Rebjock, Stich, Jaggi 2019 (Error feedback fixes SignSGD): "
        "exact, ||C(x) - x||^2 = ||x||_2^2 - ||x||_1^2/d",
    )


def _ef_memory() -> TheoryResult:
    gamma, G, delta, c = symbol("gamma"), symbol("G"), symbol("delta"), symbol("c")
    return TheoryResult(
        name="ef_sgd.memory",
        expression=c * (1 - delta) / delta**2 * gamma**2 * G**2,
        kind="upper_bound",
        quantity="E||e_t||^2 (error-feedback memory)",
        provenance="Karimireddy et al. 2019 (Error feedback fixes SignSGD), memory lemma; "
        "Stich et al. 2018: memory is O(gamma^2 G^2 (1 - delta)/delta^2) for a "
        "delta-contraction and E||g||^2 <= G^2 (numerical constant kept symbolic)",
        conditions=(delta <= 1,),
        constants=(c,),
        notes="Exponent 2 in gamma; DeepSqueeze's model memory does not shrink with gamma.",
    )


# ---------------------------------------------------------------------------- derived
def _ms_1d() -> TheoryResult:
    expr = dv.derive_stability_limit_1d("gaussian")
    return TheoryResult(
        name="sgd.ms_stability.1d",
        expression=expr,
        kind="stability_limit",
        quantity="gamma (constant-step SGD, least squares, Gaussian design, 1-D, batch b)",
        provenance=_derived(dv.derive_stability_limit_1d),
        notes="b = 1 gives 2/(3h). Mean-square stability: E eta_t^2 bounded iff gamma < limit.",
    )


def _ms_iso() -> TheoryResult:
    expr = dv.derive_stability_limit_isotropic("gaussian")
    return TheoryResult(
        name="sgd.ms_stability.isotropic",
        expression=expr,
        kind="stability_limit",
        quantity="gamma (constant-step SGD, least squares, Gaussian design, H = h I_d, batch b)",
        provenance=_derived(dv.derive_stability_limit_isotropic),
    )


def _ms_iso_rad() -> TheoryResult:
    expr = dv.derive_stability_limit_isotropic("rademacher")
    return TheoryResult(
        name="sgd.ms_stability.isotropic_rademacher",
        expression=expr,
        kind="stability_limit",
        quantity="gamma (constant-step SGD, least squares, x_i = +-sqrt(h), H = h I_d, batch b)",
        provenance=_derived(dv.derive_stability_limit_isotropic),
    )


def _ms_general(design: str) -> TheoryResult:
    phi, h = dv.derive_secular_equation(design)
    i, d = sp.Symbol("i", integer=True, positive=True), symbol("d")
    hi = sp.IndexedBase("h")[i]
    expr = sp.Sum(phi.subs(h, hi), (i, 1, d))

    def numeric(h: np.ndarray, b: float) -> float:
        return dv.sgd_stability_limit(h, int(b), design)

    suffix = "" if design == "gaussian" else "_rademacher"
    return TheoryResult(
        name=f"sgd.ms_stability.general{suffix}",
        expression=expr,
        kind="stability_limit",
        quantity="1",
        relation=">",
        provenance=_derived(dv.derive_secular_equation),
        numeric=numeric,
        numeric_params=("h", "b"),
        notes="Mean-square stable iff this holds (with every denominator of the right sign), "
        "i.e. gamma < gamma*, the root in gamma of sum = 1 for the spectrum h_1..h_d and batch b; "
        "evaluate(h=array, b=int) returns gamma* (Brent on the secular equation)."
        + ("" if design == "gaussian" else " Diagonal H only."),
    )


def _stationary(design: str) -> TheoryResult:
    closed, Phi = dv.derive_stationary_risk(design)
    phi, h = dv.derive_secular_equation(design)
    i, d = sp.Symbol("i", integer=True, positive=True), symbol("d")
    expr = closed.subs(Phi, sp.Sum(phi.subs(h, sp.IndexedBase("h")[i]), (i, 1, d)))

    def numeric(h: np.ndarray, b: float, gamma: np.ndarray, sigma: float) -> np.ndarray:
        return dv.stationary_risk(h, int(b), gamma, float(sigma), design)

    suffix = "" if design == "gaussian" else "_rademacher"
    return TheoryResult(
        name=f"sgd.stationary_risk{suffix}",
        expression=expr,
        kind="identity",
        quantity="lim_t E||theta_t - theta*||_H^2 (constant-step SGD, last iterate)",
        provenance=_derived(dv.derive_stationary_risk),
        numeric=numeric,
        numeric_params=("h", "b", "gamma", "sigma"),
        notes="Finite iff gamma is below the mean-square stability limit (the sum < 1); "
        "evaluate(h=array, b=int, gamma=array, sigma=float); 1-D, b = 1: "
        "sigma^2 gamma h / (2 - 3 gamma h). Equals 2 x the excess risk."
        + ("" if design == "gaussian" else " Diagonal H only."),
    )


def _pj() -> TheoryResult:
    sig, d, T = symbol("sigma"), symbol("d"), symbol("T")
    res = dv.derive_polyak_juditsky()
    per_dir = res["limit_T_times_error"]
    return TheoryResult(
        name="averaged_sgd.polyak_juditsky",
        expression=d * per_dir.subs(res["symbols"]["sigma"], sig) / T,
        kind="asymptotic",
        quantity="E||theta_bar_T - theta*||_H^2",
        provenance="Polyak & Juditsky 1992 (classic); "
        + _derived(dv.derive_polyak_juditsky)
        + " (additive noise, constant step: limit of T x exact error)",
        variable=T,
        notes="Also the target of MBA, Local-SGD and OSA as T -> oo with P fixed.",
    )


def _pj_exact() -> TheoryResult:
    res = dv.derive_polyak_juditsky()
    return TheoryResult(
        name="averaged_sgd.exact_additive_1d",
        expression=res["exact"],
        kind="identity",
        quantity="h E[theta_bar_T^2] for one eigen-direction, q = 1 - gamma h in (0, 1)",
        provenance=_derived(dv.derive_polyak_juditsky),
        notes="Additive noise with variance sigma^2 h; sum over directions for the total.",
    )


def _w_eta() -> TheoryResult:
    res = dv.derive_w_eta_spectrum()
    if not res["verified"]:
        raise RuntimeError("W_eta spectrum derivation failed")
    return TheoryResult(
        name="w_eta.eigenvalues",
        expression=res["eigenvalue_map"],
        kind="identity",
        quantity="eigenvalue of W_eta = (1 - eta) I + eta W for the eigenvalue lambda of W",
        provenance=_derived(dv.derive_w_eta_spectrum),
    )


def _w_eta_gap() -> TheoryResult:
    res = dv.derive_w_eta_gap_condition()
    return TheoryResult(
        name="w_eta.gap_condition",
        expression=res["eta_max"],
        kind="threshold",
        quantity="largest eta with spectral gap of W_eta equal to eta (1 - lambda_2)",
        provenance=_derived(dv.derive_w_eta_gap_condition),
    )


def _invariance() -> TheoryResult:
    res = dv.derive_additive_noise_invariance(multiplicative=False)
    if not res["additive_identical"]:
        raise RuntimeError("additive-noise invariance derivation failed")
    ref = res["additive"]["MBA"]
    diff = sp.Integer(0)
    for last, avg in res["additive"].values():
        diff += sp.Abs(sp.expand(last - ref[0])) + sp.Abs(sp.expand(avg - ref[1]))
    return TheoryResult(
        name="local_sgd.additive_noise_invariance",
        expression=sp.simplify(diff),
        kind="identity",
        quantity="E[err(schedule)] - E[err(MBA)] for Local-SGD and OSA, additive noise "
        "(last iterate and Polyak average)",
        provenance=_derived(dv.derive_additive_noise_invariance)
        + " (P = 2, 4 steps with arbitrary step sizes, scalar h)",
        notes="Pathwise identical iterates for every schedule; with random curvature "
        "(multiplicative noise) the schedules differ.",
    )


def _ds_average() -> TheoryResult:
    res = dv.derive_deepsqueeze_identities()
    if not all(res.values()):
        raise RuntimeError(f"DeepSqueeze identities failed: {res}")
    x, g, gamma = (
        sp.Symbol("mean_x_t", real=True),
        sp.Symbol("mean_g_t", real=True),
        symbol("gamma"),
    )
    return TheoryResult(
        name="deepsqueeze.average_dynamics",
        expression=x - gamma * g,
        kind="identity",
        quantity="mean(X_{t+1}) for any compressor",
        provenance=_derived(dv.derive_deepsqueeze_identities)
        + " (also X_{t+1} = W_eta V_t + Delta_t - Delta_{t-1})",
    )


def _choco_average() -> TheoryResult:
    res = dv.derive_choco_average_identity()
    if not res["average"] or res["dcd_average"]:
        raise RuntimeError(f"CHOCO identity failed: {res}")
    x, g, gamma = (
        sp.Symbol("mean_x_t", real=True),
        sp.Symbol("mean_g_t", real=True),
        symbol("gamma"),
    )
    return TheoryResult(
        name="choco.average_dynamics",
        expression=x - gamma * g,
        kind="identity",
        quantity="mean(X_{t+1}) for any compressor",
        provenance=_derived(dv.derive_choco_average_identity),
        notes="Not true for DCD-PSGD.",
    )


LIBRARY: dict[str, Callable[[], TheoryResult]] = {
    "local_sgd.communication_reduction": _local_comm_reduction,
    "local_sgd.rounds_needed": _local_rounds_needed,
    "local_sgd.local_steps_between_rounds": _local_steps_between,
    "local_sgd.osa_mba_ratio": _osa_mba_ratio,
    "local_sgd.additive_noise_invariance": _invariance,
    "deepsqueeze.rate": _deepsqueeze_rate,
    "deepsqueeze.step_limit": _deepsqueeze_step_limit,
    "deepsqueeze.average_dynamics": _ds_average,
    "dpsgd.rate": _dpsgd_rate,
    "choco.rate_strongly_convex": _choco_rate,
    "choco.average_dynamics": _choco_average,
    "compression.top_k": _topk,
    "compression.rand_k": _randk,
    "compression.rand_k_scaled": _randk_scaled,
    "compression.qsgd": _qsgd,
    "compression.scaled_sign": _scaled_sign,
    "ef_sgd.memory": _ef_memory,
    "sgd.ms_stability.1d": _ms_1d,
    "sgd.ms_stability.isotropic": _ms_iso,
    "sgd.ms_stability.isotropic_rademacher": _ms_iso_rad,
    "sgd.ms_stability.general": lambda: _ms_general("gaussian"),
    "sgd.ms_stability.general_rademacher": lambda: _ms_general("rademacher"),
    "sgd.stationary_risk": lambda: _stationary("gaussian"),
    "sgd.stationary_risk_rademacher": lambda: _stationary("rademacher"),
    "averaged_sgd.polyak_juditsky": _pj,
    "averaged_sgd.exact_additive_1d": _pj_exact,
    "w_eta.eigenvalues": _w_eta,
    "w_eta.gap_condition": _w_eta_gap,
}


def names() -> list[str]:
    """The stable names of all results, in library order."""
    return list(LIBRARY)


@functools.cache
def get(name: str) -> TheoryResult:
    """The result called ``name`` (built on first use, then cached)."""
    try:
        factory = LIBRARY[name]
    except KeyError:
        raise ValueError(f"unknown result {name!r}; known: {names()}") from None
    res = factory()
    if res.name != name:
        raise RuntimeError(f"library entry {name!r} built a result named {res.name!r}")
    return res


def all_results() -> list[TheoryResult]:
    """Every result of the library (derived ones trigger their SymPy derivation once)."""
    return [get(n) for n in LIBRARY]
