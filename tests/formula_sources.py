"""Every registered formula of :mod:`convkit.bounds`, typed again from its source statement.

One table, :data:`SOURCES`: result name -> :class:`Source` (where the statement is, a plain
NumPy function written from that statement -- never built from the registered SymPy
expression --, the domain of its parameters, and the unit scalings of its symbols). The pin
test (``tests/test_formula_pins.py``) compares each function with the registered expression
at random points in every variable and constant; the mutation test
(``tests/test_formula_mutations.py``) perturbs every numeric atom of every registered
expression and asserts that this same comparison sees the change.

Units (for the homogeneity tests): ``theta -> a theta`` and ``f -> b f`` scale a symbol by
``a^p b^q``; ``units`` lists ``(p, q)`` per symbol and for the quantity (``"="``). A step has
units theta^2 / f, a curvature f / theta^2, a gradient f / theta, a least-squares label noise
sigma sqrt(f) (``sigma^2`` is an excess risk); counts, exponents, ratios and spectra of W are
dimensionless.

The evaluation helpers (:func:`expression_value`, :func:`points`) are shared by both tests.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp
from scipy.optimize import brentq

Point = dict[str, Any]
Sampler = Callable[[np.random.Generator, Point], Any]


#: sample points per result for the pins and for the mutation test (the same number, so that a
#: mutant the mutation test calls killed is one the pin test would catch)
N_POINTS = 8
#: points per condition: both sides of every boundary, and between a boundary and its mutant
N_CONDITION_POINTS = 64


@dataclasses.dataclass(frozen=True)
class Source:
    """One statement: ``where`` (paper and location, or the derivation), ``value`` (a plain
    function of the parameters written from the statement), ``domain`` (parameter name ->
    sampler, in order; a sampler sees the values drawn before it), ``units`` (symbol -> (p, q),
    ``"="`` the quantity's) and ``rtol`` of the comparison."""

    where: str
    value: Callable[..., float]
    domain: dict[str, Sampler]
    units: dict[str, tuple[int, int]] | None = None
    rtol: float = 1e-10


def _u(lo: float, hi: float) -> Sampler:
    return lambda rng, p: float(rng.uniform(lo, hi))


def _lu(lo: float, hi: float) -> Sampler:
    """Log-uniform on [lo, hi]."""
    return lambda rng, p: float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _int(lo: int, hi: int) -> Sampler:
    return lambda rng, p: int(rng.integers(lo, hi + 1))


# ============================================================================ statements
# --- mean-square stability of SGD (derived here; the moment recursions typed from Isserlis)
def _diag_moment_map(h: np.ndarray, b: float, gamma: float, design: str) -> np.ndarray:
    """The linear map of the diagonal second moments m_i = E eta_i^2 of one SGD step on least
    squares with H = diag(h), batch b: eta' = (I - gamma A) eta, A = (1/b) sum_j x_j x_j^T.
    Gaussian x: E[x x^T M x x^T] = 2 H M H + tr(H M) H (Isserlis); Rademacher x_i = +-sqrt(h_i):
    the same minus 2 H^2 diag(M). With batch b: E[A M A] = H M H + (E[x x^T M x x^T] - H M H)/b.
    Written directly, not from the library's derivation."""
    h = np.asarray(h, float)
    extra = 1.0 if design == "gaussian" else -1.0  # (2 H M H or 0 H M H) - H M H
    diag = 1 - 2 * gamma * h + gamma**2 * h**2 * (1 + extra / b)
    return np.diag(diag) + (gamma**2 / b) * np.outer(h, h)


def _ms_limit_numeric(h: np.ndarray, b: float, design: str) -> float:
    """Largest gamma with spectral radius of :func:`_diag_moment_map` below 1 (bisection on
    a fine scan)."""

    def rho(g: float) -> float:
        return float(np.max(np.abs(np.linalg.eigvals(_diag_moment_map(h, b, g, design))))) - 1

    gs = np.linspace(1e-6, 4.0 / float(np.max(h)), 401)
    vals = np.array([rho(g) for g in gs])
    i = int(np.argmax(vals[1:] > 0)) + 1
    return float(brentq(rho, gs[i - 1], gs[i], xtol=1e-15, rtol=1e-14))


def _secular(h: np.ndarray, b: float, gamma: float, design: str) -> float:
    """sum_i gamma h_i / (2 b - (b + 1) gamma h_i) (Gaussian) or (b - 1) (Rademacher): the
    critical condition of the map above, obtained by eliminating m_i from its fixed point
    m_i (1 - D_i) = (gamma^2 / b) h_i sum_j h_j m_j."""
    h = np.asarray(h, float)
    k = b + 1 if design == "gaussian" else b - 1
    return float(np.sum(gamma * h / (2 * b - k * gamma * h)))


def _stationary_numeric(h: np.ndarray, b: float, gamma: float, sigma: float, design: str) -> float:
    """Stationary E||theta - theta*||_H^2: the fixed point of m' = A m + (gamma^2 sigma^2 / b) h
    (label noise sigma: gradient noise covariance sigma^2 H / b), then sum_i h_i m_i."""
    h = np.asarray(h, float)
    A = _diag_moment_map(h, b, gamma, design)
    m = np.linalg.solve(np.eye(h.size) - A, gamma**2 * sigma**2 * h / b)
    return float(h @ m)


def _spectrum(rng: np.random.Generator, p: Point) -> np.ndarray:
    return rng.uniform(0.2, 2.0, size=int(rng.integers(2, 6)))


def _gamma_below(frac_lo: float, frac_hi: float, design: str) -> Sampler:
    def s(rng: np.random.Generator, p: Point) -> float:
        return float(rng.uniform(frac_lo, frac_hi) * _ms_limit_numeric(p["h"], p["b"], design))

    return s


# --- Polyak-Ruppert averaging, one direction, additive noise (derived here)
def _exact_additive_1d(T: int, q: float, h: float, sigma: float, eta_0: float) -> float:
    """h E[theta_bar_T^2] with eta_t = q eta_{t-1} + gamma xi_t, gamma = (1 - q)/h,
    E xi^2 = sigma^2 h, theta_bar_T = (1/T) sum_{t=1}^T eta_t: written as explicit sums."""
    T = int(round(T))
    gamma = (1 - q) / h
    bias = eta_0 * sum(q**t for t in range(1, T + 1)) / T
    w = [gamma * sum(q ** (t - s) for t in range(s, T + 1)) for s in range(1, T + 1)]
    var = sigma**2 * h * sum(x * x for x in w) / T**2
    return h * (bias**2 + var)


# --- the remaining statements, one function each
def _w_eta_gap(lambda_2: float, lambda_n: float) -> float:
    """The eta where |1 - eta (1 - lambda_n)| overtakes 1 - eta (1 - lambda_2), by root finding
    (the statement: the gap of W_eta is eta (1 - lambda_2) while the second eigenvalue
    dominates)."""
    return float(
        brentq(
            lambda e: (e * (1 - lambda_n) - 1) - (1 - e * (1 - lambda_2)),
            1e-9,
            1e3,
            xtol=1e-15,
            rtol=1e-14,
        )
    )


def _qsgd(d: float, s: float) -> float:
    return min(d / s**2, math.sqrt(d) / s)


def _scaled_sign_norm1(rng: np.random.Generator, p: Point) -> float:
    # ||x||_2 <= ||x||_1 <= sqrt(d) ||x||_2
    return float(rng.uniform(1.0, math.sqrt(p["d"])) * p["x_norm2"])


def _k_le_d(rng: np.random.Generator, p: Point) -> float:
    return float(rng.uniform(1.0, p["d"]))


def _ln_below(rng: np.random.Generator, p: Point) -> float:
    return float(rng.uniform(-1.0, p["lambda_2"]))


_GRAD = (-1, 1)  # f / theta
_STEP = (2, -1)  # theta^2 / f
_CURV = (-2, 1)  # f / theta^2
_F = (0, 1)
_NONE = (0, 0)
_NOISE = (0, 0.5)  # least-squares label noise: sigma^2 is an excess risk

SOURCES: dict[str, Source] = {
    "sgd.ms_stability.1d": Source(
        "derived here (sgd_stability.derive_stability_limit_1d); theory note local_sgd.md: "
        "'In one dimension this is 1 - 2 gamma h + 3 gamma^2 h^2 < 1, i.e. gamma < 2/(3h)' "
        "(b = 1); batch b: E m^2 = h^2 (1 + 2/b) for m the mean of b draws of x^2",
        lambda h, b: 2 / (h * (1 + 2 / b)),
        {"h": _lu(0.1, 10), "b": _lu(1, 50)},
        {"h": _CURV, "b": _NONE, "=": _STEP},
    ),
    "sgd.ms_stability.isotropic": Source(
        "derived here (sgd_stability.derive_stability_limit_isotropic): H = h I_d, Gaussian: "
        "m' = m (1 - 2 gamma h + gamma^2 h^2 (1 + (d + 1)/b))",
        lambda h, b, d: 2 / (h * (1 + (d + 1) / b)),
        {"h": _lu(0.1, 10), "b": _lu(1, 50), "d": _lu(1, 200)},
        {"h": _CURV, "b": _NONE, "d": _NONE, "=": _STEP},
    ),
    "sgd.ms_stability.isotropic_rademacher": Source(
        "derived here (sgd_stability.derive_stability_limit_isotropic): H = h I_d, "
        "x_i = +-sqrt(h): x x^T x x^T = d h x x^T, m' = m (1 - 2 gamma h + gamma^2 h^2 "
        "(1 + (d - 1)/b))",
        lambda h, b, d: 2 / (h * (1 + (d - 1) / b)),
        {"h": _lu(0.1, 10), "b": _lu(1, 50), "d": _lu(1, 200)},
        {"h": _CURV, "b": _NONE, "d": _NONE, "=": _STEP},
    ),
    "sgd.ms_stability.general": Source(
        "derived here (sgd_stability.derive_secular_equation): the critical condition of the "
        "diagonal moment map, sum_i gamma h_i / (2 b - (b + 1) gamma h_i) = 1",
        lambda h, b, gamma: _secular(h, b, gamma, "gaussian"),
        {"h": _spectrum, "b": _lu(1, 20), "gamma": _gamma_below(0.1, 0.95, "gaussian")},
        {"h": _CURV, "b": _NONE, "gamma": _STEP, "=": _NONE},
    ),
    "sgd.ms_stability.general_rademacher": Source(
        "derived here (sgd_stability.derive_secular_equation, Rademacher design): "
        "sum_i gamma h_i / (2 b - (b - 1) gamma h_i) = 1",
        lambda h, b, gamma: _secular(h, b, gamma, "rademacher"),
        {"h": _spectrum, "b": _lu(1, 20), "gamma": _gamma_below(0.1, 0.95, "rademacher")},
        {"h": _CURV, "b": _NONE, "gamma": _STEP, "=": _NONE},
    ),
    "sgd.stationary_risk": Source(
        "derived here (sgd_stability.derive_stationary_risk): the fixed point of the moment "
        "recursion with noise (gamma^2 sigma^2 / b) h; 1-D, b = 1: sigma^2 gamma h / "
        "(2 - 3 gamma h)",
        lambda h, b, gamma, sigma: _stationary_numeric(h, b, gamma, sigma, "gaussian"),
        {
            "h": _spectrum,
            "b": _lu(1, 20),
            "gamma": _gamma_below(0.1, 0.95, "gaussian"),
            "sigma": _lu(0.1, 10),
        },
        {"h": _CURV, "b": _NONE, "gamma": _STEP, "sigma": _NOISE, "=": _F},
        rtol=1e-9,
    ),
    "sgd.stationary_risk_rademacher": Source(
        "derived here (sgd_stability.derive_stationary_risk, Rademacher design)",
        lambda h, b, gamma, sigma: _stationary_numeric(h, b, gamma, sigma, "rademacher"),
        {
            "h": _spectrum,
            "b": _lu(1, 20),
            "gamma": _gamma_below(0.1, 0.95, "rademacher"),
            "sigma": _lu(0.1, 10),
        },
        {"h": _CURV, "b": _NONE, "gamma": _STEP, "sigma": _NOISE, "=": _F},
        rtol=1e-9,
    ),
    "averaged_sgd.polyak_juditsky": Source(
        "Polyak & Juditsky 1992; theory note local_sgd.md, claim 4: 'E||theta_bar - "
        "theta*||_H^2 ~ sigma^2 d / T (Polyak-Juditsky)'",
        lambda d, sigma, T: sigma**2 * d / T,
        {"d": _lu(1, 100), "sigma": _lu(0.1, 10), "T": _lu(10, 1e6)},
        {"d": _NONE, "sigma": _NOISE, "T": _NONE, "=": _F},
    ),
    "averaged_sgd.exact_additive_1d": Source(
        "derived here (averaged_sgd.derive_polyak_juditsky): eta_t = q eta_{t-1} + gamma "
        "xi_t, gamma = (1 - q)/h, E xi^2 = sigma^2 h, h E[(mean of eta_1..eta_T)^2]",
        _exact_additive_1d,
        {
            "T": _int(1, 40),
            "q": _u(0.05, 0.95),
            "h": _lu(0.1, 10),
            "sigma": _lu(0.1, 10),
            "eta_0": _u(-3, 3),
        },
        {"T": _NONE, "q": _NONE, "h": _CURV, "sigma": _NOISE, "eta_0": (1, 0), "=": _F},
        rtol=1e-9,
    ),
    "local_sgd.communication_reduction": Source(
        "Patel & Dieuleveut 2019, abstract: 'reduces communication by a factor of "
        "O(sqrt(T)/P^(3/2))' (T: all gradients, T_all here)",
        lambda T_all, P, c, alpha: c * T_all**0.5 * P**-1.5,
        {"T_all": _lu(10, 1e7), "P": _lu(1, 100), "c": _lu(0.1, 10), "alpha": _u(0.51, 0.99)},
    ),
    "local_sgd.rounds_needed": Source(
        "Patel & Dieuleveut 2019, abstract, read against MBA's T/P rounds: "
        "N* = (T/P) / (sqrt(T)/P^(3/2))",
        lambda T_all, P, c, alpha: c * (T_all / P) / (math.sqrt(T_all) / P**1.5),
        {"T_all": _lu(10, 1e7), "P": _lu(1, 100), "c": _lu(0.1, 10), "alpha": _u(0.51, 0.99)},
    ),
    "local_sgd.local_steps_between_rounds": Source(
        "Patel & Dieuleveut 2019 (our reading): H* = (T/P)/N* with N* ~ sqrt(P T)",
        lambda T_all, P, c, alpha: c * (T_all / P) / math.sqrt(P * T_all),
        {"T_all": _lu(10, 1e7), "P": _lu(1, 100), "c": _lu(0.1, 10), "alpha": _u(0.51, 0.99)},
    ),
    "local_sgd.osa_mba_ratio": Source(
        "Patel & Dieuleveut 2019, NeurIPS review: 'OSA and MBA are asymptotically equivalent'",
        lambda: 1.0,
        {},
    ),
    "local_sgd.additive_noise_invariance": Source(
        "derived here (local_sgd.derive_additive_noise_invariance); theory note local_sgd.md: "
        "with additive noise 'MBA, OSA and Local-SGD give identical expected error'",
        lambda: 0.0,
        {},
    ),
    "local_sgd_large_steps.osa_mba_excess": Source(
        "derived here (local_sgd_large_steps module docstring): 'err(OSA)/err(MBA) - 1 ~ ... "
        "T n^(-2 alpha)' with n = T/P",
        lambda K, T_all, P, alpha: K * T_all * (T_all / P) ** (-2 * alpha),
        {"K": _lu(0.1, 10), "T_all": _lu(10, 1e6), "P": _lu(1, 64), "alpha": _u(0.05, 0.95)},
    ),
    "local_sgd_large_steps.rounds_needed": Source(
        "derived here (local_sgd_large_steps module docstring): 'N*^q ~ T^(q - 1) P^(2 - q) "
        "/ eps' with q = 2 (1 - alpha)/alpha",
        lambda K, T_all, P, epsilon, alpha: (
            K
            * (
                T_all ** (2 * (1 - alpha) / alpha - 1)
                * P ** (2 - 2 * (1 - alpha) / alpha)
                / epsilon
            )
            ** (alpha / (2 * (1 - alpha)))
        ),
        {
            "K": _lu(0.1, 10),
            "T_all": _lu(10, 1e6),
            "P": _lu(1, 64),
            "epsilon": _lu(1e-3, 1),
            "alpha": _u(0.52, 0.95),
        },
        rtol=1e-9,
    ),
    "deepsqueeze.rate": Source(
        "Tang et al. 2019 (DeepSqueeze), seed summary: 'E||grad f(x_bar_t)||^2 <~ "
        "1/sqrt(n T) + C_2/T' (one factor c hidden by <~)",
        lambda c, n, T, C_2, L, gamma: c * ((n * T) ** -0.5 + C_2 / T),
        {
            "c": _lu(0.1, 10),
            "n": _lu(1, 64),
            "T": _lu(10, 1e6),
            "C_2": _lu(0.01, 100),
            "L": _lu(0.1, 10),
            "gamma": lambda rng, p: float(rng.uniform(0.1, 1) / (3 * p["L"] * math.sqrt(p["C_2"]))),
        },
        {
            "c": (-2, 2),
            "n": _NONE,
            "T": _NONE,
            "C_2": _NONE,
            "L": _CURV,
            "gamma": _STEP,
            "=": (-2, 2),
        },
    ),
    "deepsqueeze.step_limit": Source(
        "Tang et al. 2019 (DeepSqueeze), seed summary: 'convergence needs gamma <= 1 / (3 L "
        "sqrt(C_2))'",
        lambda L, C_2: 1.0 / (3.0 * L * math.sqrt(C_2)),
        {"L": _lu(0.1, 10), "C_2": _lu(0.01, 100)},
        {"L": _CURV, "C_2": _NONE, "=": _STEP},
    ),
    "deepsqueeze.average_dynamics": Source(
        "derived here (decentralized.derive_deepsqueeze_identities); theory note "
        "decentralized.md: 'mean(X_{t+1}) = mean(X_t) - gamma mean(G_t)'",
        lambda mean_x_t, gamma, mean_g_t: mean_x_t - gamma * mean_g_t,
        {"mean_x_t": _u(-3, 3), "gamma": _lu(0.01, 1), "mean_g_t": _u(-3, 3)},
        {"mean_x_t": (1, 0), "gamma": _STEP, "mean_g_t": _GRAD, "=": (1, 0)},
    ),
    "dpsgd.rate": Source(
        "Tang et al. 2018 (D^2), abstract: D-PSGD converges at O(sigma/sqrt(nT) + "
        "(n zeta^2)^(1/3)/T^(2/3)) on decentralized data",
        lambda c_1, c_2, sigma_g, zeta, n, T: (
            c_1 * sigma_g / math.sqrt(n * T) + c_2 * (n * zeta**2) ** (1 / 3) / T ** (2 / 3)
        ),
        {
            "c_1": _lu(0.1, 10),
            "c_2": _lu(0.1, 10),
            "sigma_g": _lu(0.1, 10),
            "zeta": _lu(0.1, 10),
            "n": _lu(1, 64),
            "T": _lu(10, 1e6),
        },
        {
            "c_1": _GRAD,
            "c_2": (-4 / 3, 4 / 3),  # type: ignore[dict-item]
            "sigma_g": _GRAD,
            "zeta": _GRAD,
            "n": _NONE,
            "T": _NONE,
            "=": (-2, 2),
        },
    ),
    "choco.rate_strongly_convex": Source(
        "Koloskova, Stich, Jaggi 2019, abstract: 'O(1/(nT) + 1/(T delta^2 omega)^2)', delta "
        "the eigengap of W (gap), omega the compression quality",
        lambda c, n, T, gap, omega: c * (1 / (n * T) + 1 / (T * gap**2 * omega) ** 2),
        {
            "c": _lu(0.1, 10),
            "n": _lu(1, 64),
            "T": _lu(10, 1e5),
            "gap": _u(0.01, 1),
            "omega": _u(0.01, 1),
        },
        {"c": _F, "n": _NONE, "T": _NONE, "gap": _NONE, "omega": _NONE, "=": _F},
    ),
    "choco.average_dynamics": Source(
        "derived here (decentralized.derive_choco_average_identity): mean(x') = mean(x) - "
        "gamma mean(g)",
        lambda mean_x_t, gamma, mean_g_t: mean_x_t - gamma * mean_g_t,
        {"mean_x_t": _u(-3, 3), "gamma": _lu(0.01, 1), "mean_g_t": _u(-3, 3)},
        {"mean_x_t": (1, 0), "gamma": _STEP, "mean_g_t": _GRAD, "=": (1, 0)},
    ),
    "w_eta.eigenvalues": Source(
        "derived here (mixing.derive_w_eta_spectrum); theory note decentralized.md: "
        "'Eigenvalues of W_eta are 1 - eta (1 - lambda_i(W))'",
        lambda eta, lambda_i: (1 - eta) + eta * lambda_i,
        {"eta": _u(0.01, 1), "lambda_i": _u(-1, 1)},
    ),
    "w_eta.gap_condition": Source(
        "derived here (mixing.derive_w_eta_gap_condition); theory note decentralized.md: "
        "the gap of W_eta is eta (1 - lambda_2) 'when eta <= 2 / (2 - lambda_2 - lambda_n)'",
        _w_eta_gap,
        {"lambda_2": _u(0.0, 0.99), "lambda_n": _ln_below},
    ),
    "compression.top_k": Source(
        "theory note decentralized.md, compressor table: 'E||C(x)-x||^2 <= (1 - k/d) ||x||^2'",
        lambda k, d: 1 - k / d,
        {"d": _lu(2, 1000), "k": _k_le_d},
    ),
    "compression.rand_k": Source(
        "theory note decentralized.md, compressor table: 'contraction with 1 - k/d' (exact "
        "for rand-k: each coordinate dropped with probability 1 - k/d)",
        lambda k, d: (d - k) / d,
        {"d": _lu(2, 1000), "k": _k_le_d},
    ),
    "compression.rand_k_scaled": Source(
        "theory note decentralized.md, compressor table: 'scaled by d/k it is unbiased with "
        "variance factor d/k - 1'",
        lambda k, d: (d - k) / k,
        {"d": _lu(2, 1000), "k": _k_le_d},
    ),
    "compression.qsgd": Source(
        "Alistarh et al. 2017 (QSGD), Lemma 3.1: variance factor min(d/s^2, sqrt(d)/s)",
        _qsgd,
        {"d": _lu(1, 1000), "s": _lu(1, 64)},
    ),
    "compression.scaled_sign": Source(
        "Karimireddy et al. 2019; theory note decentralized.md: '||C(x)-x||^2 = ||x||^2 - "
        "||x||_1^2 / d exactly'",
        lambda d, x_norm1, x_norm2: x_norm2**2 - x_norm1**2 / d,
        {"d": _lu(1, 1000), "x_norm2": _lu(0.1, 10), "x_norm1": _scaled_sign_norm1},
        {"d": _NONE, "x_norm1": (1, 0), "x_norm2": (1, 0), "=": (2, 0)},
    ),
    "ef_sgd.memory": Source(
        "Karimireddy et al. 2019, memory lemma, c = 4 as quoted in issue 30: E||e_t||^2 <= "
        "4 (1 - delta) gamma^2 G^2 / delta^2 (delta = omega here)",
        lambda gamma, G, omega: 4 * (1 - omega) * gamma**2 * G**2 / omega**2,
        {"gamma": _lu(1e-3, 1), "G": _lu(0.1, 10), "omega": _u(0.01, 0.99)},
        {"gamma": _STEP, "G": _GRAD, "omega": _NONE, "=": (2, 0)},
    ),
    "woodworth.local_beats_minibatch_quadratic": Source(
        "Woodworth et al. 2020 (ICML), abstract: 'For quadratic objectives ... local SGD "
        "strictly dominates minibatch SGD' (ratio at most 1)",
        lambda: 1.0,
        {},
    ),
    "woodworth.minibatch_wins_heterogeneous": Source(
        "Woodworth, Patel, Srebro 2020, abstract: 'Minibatch SGD ... dominates all existing "
        "analysis of Local SGD in this setting' (the ratio can exceed 1)",
        lambda: 1.0,
        {},
    ),
    "spiridonoff.rounds_independent_of_T": Source(
        "Spiridonoff et al. 2021, abstract: 'Omega(N) communications are sufficient' (N "
        "workers = P), independent of T",
        lambda P: float(P),
        {"P": _lu(1, 1000)},
    ),
    "koloskova.topology_free_leading_term": Source(
        "Koloskova et al. 2020 (unified theory), the form read from it: a leading term "
        "sigma^2/(mu n T) without the graph, the graph in O(1/T^2): (A/T + B_g/T^2) / "
        "(A/T + B_complete/T^2) = 1 + C_g/T to first order in 1/T",
        lambda C_g, T: 1.0 + C_g / T,
        {"C_g": _lu(0.01, 100), "T": _lu(10, 1e6)},
    ),
    "pu.transient_time": Source(
        "Pu, Olshevsky, Paschalidis 2022, abstract: 'K_T = O(n/(1 - rho_w)^2)', gap = 1 - rho_w",
        lambda n, gap: n / (1 - (1 - gap)) ** 2,
        {"n": _lu(2, 1000), "gap": _u(0.001, 1)},
    ),
}


# ============================================================================ evaluation
def points(name: str, n: int, seed: int = 0) -> list[Point]:
    """``n`` random points of the domain of ``name`` (reproducible)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()) + seed)
    out = []
    for _ in range(n):
        p: Point = {}
        for key, sampler in SOURCES[name].domain.items():
            p[key] = sampler(rng, p)
        out.append(p)
    return out


def _symbols_by_name(expr: sp.Basic) -> dict[str, sp.Basic]:
    return {s.name: s for s in expr.free_symbols if isinstance(s, sp.Symbol)}


def compiled(expr: sp.Expr) -> Callable[[Point], float]:
    """``expr`` as a function of a point (values by symbol name; see
    :func:`expression_value`), lambdified once."""
    e = sp.sympify(expr)
    bases = sorted(e.atoms(sp.IndexedBase), key=lambda b: b.label.name)
    labels = {b.label.name for b in bases}
    syms = {k: v for k, v in _symbols_by_name(e).items() if k not in labels}
    names = sorted(syms)
    f = sp.lambdify([*bases, *(syms[k] for k in names)], e, modules="numpy")

    def value(point: Point) -> float:
        scalars = {k: v for k, v in point.items() if np.ndim(v) == 0}
        if bases:  # a sum over h[i], i = 1..d: d is the spectrum's length, h[i] 1-based
            scalars["d"] = int(np.size(point[bases[0].label.name]))
        missing = sorted(set(names) - set(scalars))
        if missing:
            raise ValueError(f"no value for {missing}")
        arrays = [np.concatenate([[np.nan], np.asarray(point[b.label.name], float)]) for b in bases]
        values = [scalars[k] if k == "d" else float(scalars[k]) for k in names]
        with np.errstate(all="ignore"):
            v = f(*arrays, *values)
        return float(np.real_if_close(complex(v)).real) if np.iscomplexobj(v) else float(v)

    return value


def expression_value(expr: sp.Expr, point: Point) -> float:
    """Value of a (registered or mutated) expression at ``point``, by name.

    Sums over an indexed spectrum ``h[i], i = 1..d`` run over ``d = len(h)`` entries (SymPy
    prints them as Python sums); every other symbol takes its value; a symbol the
    expression does not have is ignored (a mutant may have dropped one). Raises if a symbol of
    the expression has no value."""
    return compiled(expr)(point)


def source_value(name: str, point: Point) -> float:
    """Value of the source statement of ``name`` at ``point``."""
    return float(SOURCES[name].value(**point))


def agrees(registered: float, source: float, rtol: float) -> bool:
    """``registered`` equals ``source`` to ``rtol`` (relative; absolute ``rtol`` near 0)."""
    if not (math.isfinite(registered) and math.isfinite(source)):
        return False
    return abs(registered - source) <= rtol * max(abs(source), 1.0)


def mismatches(
    name: str, expr: sp.Expr, pts: list[Point], src: list[float] | None = None
) -> list[tuple[Point, float, float]]:
    """The points where ``expr`` disagrees with the source statement of ``name`` (an error
    while evaluating counts as a disagreement, with NaN as the value); ``src``: the source
    values at ``pts`` if already computed."""
    out = []
    rtol = SOURCES[name].rtol
    if src is None:
        src = [source_value(name, p) for p in pts]
    try:
        f = compiled(expr)
    except Exception:  # noqa: BLE001 - a mutant SymPy cannot even print is detected
        return [(p, float("nan"), s) for p, s in zip(pts, src, strict=True)]
    for p, s in zip(pts, src, strict=True):
        try:
            reg = f(p)
        except Exception:  # noqa: BLE001 - a mutant that cannot be evaluated is detected
            reg = float("nan")
        if not agrees(reg, s, rtol):
            out.append((p, reg, s))
    return out


# ============================================================================ conditions
def _wide(lo: float, hi: float) -> Sampler:
    return _u(lo, hi)


def _k_around_d(rng: np.random.Generator, p: Point) -> float:
    return float(rng.uniform(0.2, 3.0) * p["d"])


def _gamma_around_limit(rng: np.random.Generator, p: Point) -> float:
    return float(rng.uniform(0.1, 3.0) / (3 * p["L"] * math.sqrt(p["C_2"])))


_ALPHA_RANGE = "for step sizes C k^(-alpha), 1/2 < alpha < 1"

#: result name -> (where the conditions are stated, the conditions as a plain predicate, a
#: domain that straddles their boundaries)
CONDITIONS: dict[str, tuple[str, Callable[..., bool], dict[str, Sampler]]] = {
    **{
        name: (
            f"Patel & Dieuleveut 2019, abstract: {_ALPHA_RANGE}",
            lambda alpha: 0.5 < alpha < 1,
            {"alpha": _wide(0.01, 2.0)},
        )
        for name in (
            "local_sgd.communication_reduction",
            "local_sgd.rounds_needed",
            "local_sgd.local_steps_between_rounds",
        )
    },
    "local_sgd_large_steps.osa_mba_excess": (
        "module docstring: steps C k^-alpha with 0 < alpha < 1 (A1: relaxation time shorter "
        "than k)",
        lambda alpha: alpha < 1,
        {"alpha": _wide(0.01, 2.0)},
    ),
    "local_sgd_large_steps.rounds_needed": (
        "module docstring: the branch 1/2 < alpha < 1 of N*",
        lambda alpha: 0.5 < alpha < 1,
        {"alpha": _wide(0.01, 2.0)},
    ),
    "deepsqueeze.rate": (
        "seed summary: the rate holds for gamma <= 1/(3 L sqrt(C_2))",
        lambda gamma, L, C_2: gamma <= 1 / (3 * L * math.sqrt(C_2)),
        {"L": _lu(0.1, 10), "C_2": _lu(0.01, 100), "gamma": _gamma_around_limit},
    ),
    "choco.rate_strongly_convex": (
        "Koloskova et al. 2019: compression quality omega in (0, 1], eigengap in (0, 1]",
        lambda omega, gap: omega <= 1 and gap <= 1,
        {"omega": _wide(0.01, 2.0), "gap": _wide(0.01, 2.0)},
    ),
    **{
        name: (
            "k of d coordinates: k <= d",
            lambda k, d: k <= d,
            {"d": _lu(2, 100), "k": _k_around_d},
        )
        for name in ("compression.top_k", "compression.rand_k", "compression.rand_k_scaled")
    },
    "ef_sgd.memory": (
        "a contraction: omega in (0, 1]",
        lambda omega: omega <= 1,
        {"omega": _wide(0.01, 2.0)},
    ),
}


def condition_points(name: str, n: int, seed: int = 0) -> list[Point]:
    """``n`` random points of the domain of the conditions of ``name`` (both sides of every
    boundary)."""
    rng = np.random.default_rng(zlib.crc32(("conditions " + name).encode()) + seed)
    out = []
    for _ in range(n):
        p: Point = {}
        for key, sampler in CONDITIONS[name][2].items():
            p[key] = sampler(rng, p)
        out.append(p)
    return out


def conditions_value(conditions: tuple[sp.Basic, ...], point: Point) -> bool:
    """Whether every condition (registered or mutated) holds at ``point`` (by name)."""
    for c in conditions:
        c = sp.sympify(c)
        if c is sp.true or c is sp.false:
            if c is sp.false:
                return False
            continue
        syms = sorted((s for s in c.free_symbols if isinstance(s, sp.Symbol)), key=lambda s: s.name)
        f = sp.lambdify(syms, c, modules="numpy")
        if not bool(f(*[float(point[s.name]) for s in syms])):
            return False
    return True
