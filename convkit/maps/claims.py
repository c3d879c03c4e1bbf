"""The built-in map claims (:data:`convkit.maps.BUILTIN_MAPS`): their point functions.

``woodworth``
    Local-SGD against mini-batch SGD at their best constant steps (Woodworth, Patel, Srebro
    2020, "Minibatch vs Local SGD for Heterogeneous Distributed Learning"), exact node engine
    (:func:`convkit.exact.heterogeneous.expected_error_nodes`) on
    :class:`~convkit.problems.heterogeneous.HeterogeneousLeastSquares` with node optima at
    ``zeta2`` and node Hessians at ``delta`` (additive noise), as
    ``analyses/local_vs_minibatch.py`` compares them in four settings. Quantity:
    ``min_gamma err(Local-SGD) / min_gamma err(mini-batch SGD)``; claim: below 1 (Local-SGD
    wins). Each algorithm's constant step is tuned by
    :func:`convkit.bounds.heterogeneity.best_ratio` (the tuning of ``local_vs_minibatch``) on
    a grid of steps a factor 2 apart, then by golden section between the grid neighbours of
    the best (:func:`tuned`), so that the ratio is that of the best steps to a bracket of
    0.01 in ``log gamma`` rather than to the grid's factor.
``osa_gap``
    One-shot averaging against mini-batch averaging (Patel & Dieuleveut 2019, arXiv
    1904.11325: OSA and MBA are asymptotically equivalent), exact least squares
    (:func:`convkit.exact.threshold.communication_threshold`) at fixed ``T`` and ``P`` over
    the step constant ``CL = C L`` and the decay ``alpha`` of ``gamma_k = C k^-alpha``.
    Quantity: ``err(OSA)/err(MBA) - 1`` (Polyak-Ruppert average); claim: at most ``eps``;
    extra: ``N_star``, the fewest evenly spaced rounds within ``1 + eps`` of MBA.
``osa_gap_logistic``
    The same quantity on online logistic regression by Monte Carlo
    (:func:`convkit.simulate`, common random numbers), with the precision rule: a ratio whose
    SE exceeds 3 % of it is ``inconclusive`` ("imprecise").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from convkit import verdicts as V
from convkit.maps.claim import map_claim
from convkit.maps.point import Axis, MapPoint

__all__ = [
    "golden_minimum",
    "local_error",
    "minibatch_error",
    "osa_gap",
    "osa_gap_logistic",
    "tuned",
    "woodworth",
    "woodworth_problem",
]


def golden_minimum(
    f: Callable[[float], float], a: float, b: float, xtol: float
) -> tuple[float, float, tuple[float, float, float]]:
    """Golden-section search for the minimum of a unimodal ``f`` on ``[a, b]`` to a bracket
    of width at most ``xtol`` (Kiefer 1953): each step keeps the part of the bracket that
    holds the smaller of its two interior values, shrinking it by ``(sqrt 5 - 1) / 2``.
    A non-finite value counts as larger than every finite one. Returns ``(x, f(x),
    (u, v, w))``: the best point found, its value and the final bracket with its interior
    point."""
    invphi = (math.sqrt(5.0) - 1.0) / 2.0

    def val(u: float) -> float:
        v = float(f(u))
        return v if math.isfinite(v) else math.inf

    c, d = b - invphi * (b - a), a + invphi * (b - a)
    fc, fd = val(c), val(d)
    while b - a > xtol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - invphi * (b - a)
            fc = val(c)
        else:
            a, c, fc = c, d, fd
            d = a + invphi * (b - a)
            fd = val(d)
    x, fx = (c, fc) if fc <= fd else (d, fd)
    return x, fx, (a, x, b)


def _final_error(problem: Any, algo: Any, steps: int) -> float:
    """Exact final excess risk of the node average (last iterate) of ``algo`` on the node
    engine; ``inf`` when it diverges."""
    from convkit.exact.heterogeneous import expected_error_nodes
    from convkit.recording import DivergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        f = expected_error_nodes(problem, algo, steps=steps, n_record=2).frame
    s = f[(f.metric == "excess_risk") & (f.iterate == "last")].sort_values("step")
    v = float(s["mean"].iloc[-1])
    return v if math.isfinite(v) else math.inf


def local_error(problem: Any, gamma: float, K: int, R: int) -> float:
    """Local-SGD's exact final error: ``K`` local steps per round, ``R`` rounds, step
    ``gamma`` (the Local-SGD of :func:`convkit.bounds.heterogeneity.best_ratio`)."""
    import convkit as ck

    algo = ck.LocalSGD(problem.P, ck.Constant(float(gamma)), comm=f"every:{K}", name="local")
    return _final_error(problem, algo, K * R)


def minibatch_error(problem: Any, gamma: float, K: int, R: int) -> float:
    """Mini-batch SGD's exact final error: batch ``K`` per worker, ``R`` steps, step
    ``gamma`` (the mini-batch SGD of :func:`convkit.bounds.heterogeneity.best_ratio`)."""
    import convkit as ck

    algo = ck.MBA(problem.P, ck.Constant(float(gamma)), batch=K, name="minibatch")
    return _final_error(problem, algo, R)


#: the coarse step grid of the Woodworth map's first stage: every other step of
#: :data:`convkit.bounds.heterogeneity.WOODWORTH_GRID` (0.003125 * 2^j, j = 0..9)
COARSE_STEPS = 0.003125 * 2.0 ** np.arange(10)
#: bracket width (in log gamma) of the golden-section stage
LOG_STEP_TOL = 0.01


def tuned(
    errors: np.ndarray, gammas: np.ndarray, error: Callable[[float], float]
) -> dict[str, Any]:
    """The best step of one algorithm: the grid's best (``errors`` on ``gammas``), then a
    golden-section search (:func:`golden_minimum`) in ``log gamma`` between the grid
    neighbours of the best to :data:`LOG_STEP_TOL`. ``censored`` when the grid's best is at
    its edge (no bracket). ``grid`` is the grid's best error, ``best`` the refined one (at
    most ``grid``)."""
    e = np.nan_to_num(np.asarray(errors, dtype=float), nan=np.inf)
    i = int(np.argmin(e))
    out = {"grid": float(e[i]), "best": float(e[i]), "gamma": float(gammas[i])}
    if i in (0, len(e) - 1) or not math.isfinite(out["grid"]):
        return {**out, "censored": True}
    lo, hi = math.log(gammas[i - 1]), math.log(gammas[i + 1])
    u, fu, _ = golden_minimum(lambda v: error(math.exp(v)), lo, hi, LOG_STEP_TOL)
    if fu < out["best"]:
        out.update(best=fu, gamma=math.exp(u))
    return {**out, "censored": False}


def woodworth_problem(zeta2: float, delta: float, d: int = 8, P: int = 8, seed: int = 0) -> Any:
    """The node-Hessian least squares of the Woodworth map: mean spectrum ``linspace(1,
    0.25, d)``, ``P`` nodes, node optima at ``zeta2``, node Hessians at ``delta``, additive
    noise ``sigma = 1`` (``analyses/local_vs_minibatch.py``'s problem at ``d = P = 8``)."""
    from convkit.problems.heterogeneous import HeterogeneousLeastSquares

    return HeterogeneousLeastSquares(
        d, P, float(zeta2), spectrum=np.linspace(1.0, 0.25, d), noise=1.0, seed=seed,
        hessian_dissimilarity=float(delta), design="additive",
    )  # fmt: skip


@map_claim(
    "woodworth",
    threshold=1.0,
    side="below",
    quantity="best err(Local-SGD) / best err(mini-batch SGD)",
    statement="Local-SGD (K local steps, R rounds) beats mini-batch SGD (batch K, R steps) at "
    "their best constant steps",
    source="Woodworth, Patel, Srebro 2020 (NeurIPS, arXiv 2006.04735): mini-batch SGD "
    "dominates when the heterogeneity is high; Local-SGD wins on iid quadratics (Woodworth, "
    "Patel, Stich et al. 2020)",
    version="1",
    x=Axis("zeta2", 0.25, 400.0, 6, log=True),
    y=Axis("delta", 0.0, 0.6, 4),
    units={"zeta2": "spread of the node optima", "delta": "dissimilarity of the node Hessians"},
)
def woodworth(
    zeta2: float, delta: float, d: int = 8, P: int = 8, K: int = 32, R: int = 10, seed: int = 0
) -> MapPoint:
    """The Woodworth map's point (module docstring): the ratio of the best errors, each
    algorithm's step tuned by :func:`convkit.bounds.heterogeneity.best_ratio` on
    :data:`COARSE_STEPS` and then by golden section (:func:`tuned`); exact, so ``lo = hi =
    measured``; ``inconclusive`` when a best step lies at the grid's edge."""
    import convkit.bounds.heterogeneity as H
    from convkit.recording import DivergenceWarning

    prob = woodworth_problem(zeta2, delta, d, P, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        r = H.best_ratio(prob, K, R, COARSE_STEPS)
    loc = tuned(r["local"], COARSE_STEPS, lambda g: local_error(prob, g, K, R))
    mb = tuned(r["minibatch"], COARSE_STEPS, lambda g: minibatch_error(prob, g, K, R))
    ratio = loc["best"] / mb["best"]
    extra = {
        "ratio_grid": r["ratio"],
        "err_local": loc["best"],
        "err_minibatch": mb["best"],
        "gamma_local": loc["gamma"],
        "gamma_minibatch": mb["gamma"],
    }
    if loc["censored"] or mb["censored"]:
        return MapPoint(ratio, ratio, ratio, V.INCONCLUSIVE,
                        "a best step at the edge of the step grid", extra)  # fmt: skip
    return MapPoint.decide(ratio, threshold=1.0, side="below", **extra)


#: tolerance of the OSA map: OSA is within 1 + eps of MBA
OSA_EPS = 0.05


@map_claim(
    "osa_gap",
    threshold=OSA_EPS,
    side="below",
    quantity="err(OSA)/err(MBA) - 1",
    statement=f"one-shot averaging is within {OSA_EPS:g} of mini-batch averaging at this T",
    source="Patel & Dieuleveut 2019 (arXiv 1904.11325): OSA and MBA are asymptotically "
    "equivalent (local_sgd.osa_mba_ratio)",
    version="1",
    x=Axis("CL", 0.05, 2.0, 7, log=True),
    y=Axis("alpha", 0.5, 1.0, 6),
    units={"CL": "step constant C L", "alpha": "step decay gamma_k = C k^-alpha"},
)
def osa_gap(
    CL: float, alpha: float, T: int = 100_000, P: int = 8, d: int = 10, r0: float = 1.0,
    eps: float = OSA_EPS,
) -> MapPoint:  # fmt: skip
    """The OSA map's point (module docstring): exact, so ``lo = hi = measured``; extras:
    ``N_star`` (rounds within ``1 + eps`` of MBA), ``n`` local steps, the errors."""
    from convkit.exact.threshold import communication_threshold
    from convkit.problems.least_squares import LeastSquares

    prob = LeastSquares.gaussian(d, spectrum="1/i", noise=1.0, theta_star=np.zeros(d))
    theta0 = np.full(d, r0 / math.sqrt(d))
    r = communication_threshold(
        int(T), int(P), float(alpha), float(eps), problem=prob, C=float(CL) / prob.L,
        theta0=theta0, monotone_grid=0,
    )  # fmt: skip
    gap = float(r["ratio_osa_mba"]) - 1.0
    extra = {"N_star": int(r["N_star"]), "n": int(r["n"]), "err_osa": float(r["err_osa"]),
             "err_mba": float(r["err_mba"])}  # fmt: skip
    return MapPoint.decide(gap, threshold=float(eps), side="below", **extra)


#: the precision rule of the Monte Carlo OSA map: a ratio whose SE exceeds this fraction of
#: it is imprecise
MC_PRECISION = 0.03


@map_claim(
    "osa_gap_logistic",
    threshold=OSA_EPS,
    side="below",
    quantity="err(OSA)/err(MBA) - 1 (Monte Carlo)",
    statement=f"one-shot averaging is within {OSA_EPS:g} of mini-batch averaging at this T",
    source="Patel & Dieuleveut 2019 (arXiv 1904.11325): OSA and MBA are asymptotically equivalent",
    version="1",
    units={"CL": "step constant C L", "alpha": "step decay gamma_k = C k^-alpha"},
)
def osa_gap_logistic(
    CL: float, alpha: float, T: int = 8192, P: int = 8, d: int = 2, replicates: int = 512,
    seed: int = 0, eps: float = OSA_EPS,
) -> MapPoint:  # fmt: skip
    """The OSA gap on online logistic regression by Monte Carlo (:func:`convkit.simulate`):
    Gaussian design, ``h = 1``, ``theta* = (1, ..., 1) / sqrt(d)``, ``theta0 = 0``, steps
    ``C k^-alpha`` with ``C = CL / L``; MBA and OSA on common random numbers, the
    Polyak-Ruppert average's ``||theta - theta*||^2_H`` after ``T / P`` local steps. The
    ratio's SE is the paired delta-method SE (:meth:`convkit.Result.compare`); the interval is
    ``gap -+ 1.96 SE`` and a point whose SE exceeds :data:`MC_PRECISION` of the ratio is
    ``inconclusive`` (imprecise)."""
    import convkit as ck
    from convkit.recording import DivergenceWarning

    theta_star = np.ones(d) / math.sqrt(d)
    prob = ck.LogisticRegression.gaussian(d, "flat", theta_star=theta_star)
    step = ck.PolyDecay(float(CL) / float(prob.L), float(alpha))
    algos = [ck.MBA(P, step, name="MBA"), ck.OSA(P, step, name="OSA")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        res = ck.simulate(prob, algos, gradients=int(T), replicates=int(replicates),
                          seed=int(seed), theta0=np.zeros(d), n_record=2)  # fmt: skip
    c = res.compare("OSA", "MBA", metric="hnorm2", iterate="avg").iloc[-1]
    ratio, se = float(c["ratio"]), float(c["ratio_se"])
    gap = ratio - 1.0
    extra = {"ratio_se": se, "replicates": int(replicates)}
    return MapPoint.decide(
        gap, gap - 1.96 * se, gap + 1.96 * se, threshold=float(eps), side="below",
        max_rel_half_width=None, **extra,
    ) if se <= MC_PRECISION * abs(ratio) else MapPoint(
        gap, gap - 1.96 * se, gap + 1.96 * se, V.INCONCLUSIVE,
        f"imprecise: ratio SE {se:.3g} > {MC_PRECISION:g} x ratio {ratio:.4g}", extra,
    )  # fmt: skip
