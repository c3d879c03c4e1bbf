"""Numerical tests of the SymPy derivations of convkit.bounds (the topic modules and
:mod:`convkit.bounds.moments`).

Monte Carlo comparisons use fixed seeds and a tolerance of 4 standard errors per entry
(two-sided false-alarm probability ~6e-5 per entry).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from convkit.bounds import averaged_sgd, decentralized, local_sgd, mixing, moments, sgd_stability
from convkit.bounds.core import symbol

Z_TOL = 4.0


def _one_step_mc(H, M, gamma, b, sigma, design, R, rng):
    """Vectorized Monte Carlo of one SGD step: returns per-replicate eta' eta'^T entries."""
    d = H.shape[0]
    eta = rng.multivariate_normal(np.zeros(d), M, size=R)  # (R, d)
    if design == "gaussian":
        L = np.linalg.cholesky(H)
        x = rng.standard_normal((R, b, d)) @ L.T  # (R, b, d)
    else:
        x = rng.choice([-1.0, 1.0], size=(R, b, d)) * np.sqrt(np.diag(H))
    eps = rng.standard_normal((R, b))
    resid = np.einsum("rbd,rd->rb", x, eta) - sigma * eps
    eta_new = eta - gamma * np.einsum("rbd,rb->rd", x, resid) / b
    return eta_new[:, :, None] * eta_new[:, None, :]  # (R, d, d)


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_recursion_matrix_form_is_the_expected_one(design):
    """The identified coefficients are the textbook ones (Gaussian) plus the Rademacher
    correction -(2/b) g^2 diag(h_i^2 M_ii); nothing else."""
    rec = moments.derive_second_moment_recursion(design)
    g, b, s = rec.gamma, rec.b, rec.sigma
    expected = {
        "M": sp.Integer(1),
        "HM": -g,
        "MH": -g,
        "HMH": g**2 * (1 + 1 / b),
        "tr(HM)H": g**2 / b,
        "H": g**2 * s**2 / b,
    }
    if design == "rademacher":
        expected["diag(HMH)"] = -2 * g**2 / b
    assert set(rec.coefficients) == set(expected)
    for k, v in expected.items():
        assert sp.simplify(rec.coefficients[k] - v) == 0, k


def test_isserlis_fourth_moment_identity():
    """E[x x^T M x x^T] = 2 HMH + tr(HM) H for x ~ N(0, H), generic symmetric 3x3."""
    H, M = moments._sym_matrix("h", 3), moments._sym_matrix("m", 3)
    f = moments._fourth_moment_matrix(H, M, "gaussian", same_sample=True)
    assert (f - 2 * H * M * H - (H * M).trace() * H).applyfunc(sp.expand) == sp.zeros(3, 3)
    g = moments._fourth_moment_matrix(H, M, "gaussian", same_sample=False)
    assert (g - H * M * H).applyfunc(sp.expand) == sp.zeros(3, 3)


def test_explicit_batch_of_two_matches_symbolic_b():
    """Summing all 4 ordered sample pairs of a batch of 2 explicitly (joint Wick pairings on
    the stacked 6-vector) equals the symbolic-b count b F_same + b(b-1) F_indep at b = 2."""
    H, M = moments._sym_matrix("h", 2), moments._sym_matrix("m", 2)
    d = 2

    def cov(a, c):
        return H[a[1], c[1]] if a[0] == c[0] else 0

    total = sp.zeros(d, d)
    for j in range(2):
        for k in range(2):
            for i in range(d):
                for col in range(d):
                    total[i, col] += sum(
                        M[p, q] * moments.isserlis_moment(cov, [(j, i), (j, p), (k, q), (k, col)])
                        for p in range(d)
                        for q in range(d)
                    )
    fs = moments._fourth_moment_matrix(H, M, "gaussian", True)
    fi = moments._fourth_moment_matrix(H, M, "gaussian", False)
    assert (total - 2 * fs - 2 * fi).applyfunc(sp.expand) == sp.zeros(d, d)


@pytest.mark.parametrize("design,b", [("gaussian", 1), ("gaussian", 3), ("rademacher", 2)])
def test_recursion_against_monte_carlo(design, b):
    """Derived recursion vs a vectorized Monte Carlo of one step (R = 400k), each entry
    within 4 SE."""
    rng = np.random.default_rng(2024 + b)
    d = 3
    if design == "gaussian":
        A = rng.standard_normal((d, d))
        H = A @ A.T / d + 0.3 * np.eye(d)
    else:
        H = np.diag([1.5, 0.7, 0.2])
    B = rng.standard_normal((d, d))
    M = B @ B.T / d + 0.1 * np.eye(d)
    gamma, sigma = 0.3, 0.8
    prod = _one_step_mc(H, M, gamma, b, sigma, design, 400_000, rng)
    mean, se = prod.mean(axis=0), prod.std(axis=0, ddof=1) / np.sqrt(prod.shape[0])
    pred = moments.second_moment_step_numeric(H, M, gamma=gamma, b=b, sigma=sigma, design=design)
    z = np.abs(mean - pred) / se
    assert z.max() < Z_TOL, (z, mean, pred)


def test_rademacher_differs_from_gaussian_measurably():
    """Sanity of the MC test's power: the Gaussian formula is rejected on Rademacher data."""
    rng = np.random.default_rng(7)
    H, M = np.diag([1.5, 0.7, 0.2]), np.diag([1.0, 0.5, 2.0])
    prod = _one_step_mc(H, M, 0.3, 1, 0.0, "rademacher", 200_000, rng)
    mean, se = prod.mean(axis=0), prod.std(axis=0, ddof=1) / np.sqrt(prod.shape[0])
    wrong = moments.second_moment_step_numeric(H, M, gamma=0.3, b=1, sigma=0.0, design="gaussian")
    assert (np.abs(mean - wrong) / np.maximum(se, 1e-300)).max() > 10


def test_stability_limit_1d():
    """1-D: gamma < 2b/((b+2)h), b = 1: 2/(3h); the one-step factor is 1 at the limit."""
    g1 = sgd_stability.derive_stability_limit_1d()
    b, h = symbol("b"), symbol("h")
    assert sp.simplify(g1 - 2 * b / ((b + 2) * h)) == 0
    assert sp.simplify(g1.subs(b, 1) - sp.Rational(2, 3) / h) == 0
    for hv in (0.5, 2.0):
        lim = 2 / (3 * hv)
        a = sgd_stability.stability_matrix([hv], 1, lim)[0, 0]
        assert a == pytest.approx(1.0, abs=1e-12)
        gm = lim * (1 - 1e-6)
        assert 1 - 2 * gm * hv + 3 * gm**2 * hv**2 < 1  # E[(1 - gamma x^2)^2], x ~ N(0, h)
        assert sgd_stability.stability_matrix([hv], 1, lim * (1 + 1e-6))[0, 0] > 1
    assert sgd_stability.sgd_stability_limit([2.0], b=4) == pytest.approx(
        2 * 4 / (6 * 2.0), rel=1e-12
    )


def test_stability_structure_is_diag_plus_rank_one():
    D, u2, h = sgd_stability.stability_structure("gaussian")
    g, b = symbol("gamma"), symbol("b")
    assert sp.simplify(D - (1 - 2 * g * h + g**2 * (1 + 1 / b) * h**2)) == 0
    assert sp.simplify(u2 - g**2 * h**2 / b) == 0


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_isotropic_closed_form_vs_spectral_radius(design):
    expr = sgd_stability.derive_stability_limit_isotropic(design)
    b, d, h = symbol("b"), symbol("d"), symbol("h")
    want = 2 * b / ((b + 1 + d) * h) if design == "gaussian" else 2 * b / ((b + d - 1) * h)
    assert sp.simplify(expr - want) == 0
    f = sp.lambdify((b, d, h), expr)
    for dd in (1, 2, 5, 12):
        for bb in (1, 2, 7):
            hv = 0.8
            g = f(bb, dd, hv)
            rho_lo = max(
                abs(
                    np.linalg.eigvals(
                        sgd_stability.stability_matrix([hv] * dd, bb, g * (1 - 1e-7), design)
                    )
                )
            )
            rho_hi = max(
                abs(
                    np.linalg.eigvals(
                        sgd_stability.stability_matrix([hv] * dd, bb, g * (1 + 1e-7), design)
                    )
                )
            )
            assert rho_lo < 1 < rho_hi, (dd, bb)
            assert sgd_stability.sgd_stability_limit([hv] * dd, bb, design) == pytest.approx(
                g, rel=1e-10
            )


def test_isotropic_explicit_3x3_eigenvalues():
    """Cross-check of the isotropic closed form with the eigenvalues of the explicit 3x3 A."""
    D, u2, h = sgd_stability.stability_structure("gaussian")
    g = symbol("gamma")
    A = sp.Matrix(3, 3, lambda i, j: (D if i == j else 0) + u2)
    top = D + 3 * u2  # eigenvalue along (1,1,1)
    assert (A * sp.ones(3, 1) - top * sp.ones(3, 1)).applyfunc(sp.simplify) == sp.zeros(3, 1)
    sol = [s for s in sp.solve(sp.Eq(top, 1), g) if s != 0]
    assert len(sol) == 1
    assert (
        sp.simplify(
            sol[0]
            - sgd_stability.derive_stability_limit_isotropic()
            .subs(symbol("d"), 3)
            .subs(symbol("h"), h)
        )
        == 0
    )


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_general_spectrum_secular_root_is_where_spectral_radius_hits_one(design, seed):
    from scipy.optimize import brentq

    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 9))
    h = np.sort(rng.uniform(0.05, 3.0, d))[::-1]
    b = int(rng.integers(1, 5))
    g_star = sgd_stability.sgd_stability_limit(h, b, design)

    def rho(gam):
        return max(abs(np.linalg.eigvals(sgd_stability.stability_matrix(h, b, gam, design)))) - 1

    g_num = brentq(
        rho, g_star * 0.5, g_star * 1.5 if rho(g_star * 1.5) > 0 else g_star * 3, xtol=1e-14
    )
    assert g_star == pytest.approx(g_num, rel=1e-8)
    # bounds: between the isotropic limit at tr(H) scale and the per-direction 1-D limit
    assert g_star < 2 * b / ((b + 2) * h.max()) + 1e-12 or design == "rademacher"


def test_secular_function_form():
    phi, h = sgd_stability.derive_secular_equation("gaussian")
    g, b = symbol("gamma"), symbol("b")
    assert sp.simplify(phi - g * h / (b * (2 - g * h * (1 + 1 / b)))) == 0


def test_additive_noise_invariance():
    res = local_sgd.derive_additive_noise_invariance()
    assert res["additive_identical"] is True
    assert res["multiplicative_identical"] is False
    ref = res["additive"]["MBA"]
    for name, (last, avg) in res["additive"].items():
        assert sp.expand(last - ref[0]) == 0, name
        assert sp.expand(avg - ref[1]) == 0, name


def _local_sgd_scalar(a, xi, gammas, comm, eta0):
    """Vectorized (over replicates and workers) scalar Local-SGD: a, xi of shape (R, P, K)."""
    R, P, K = a.shape
    eta = np.full((R, P), eta0)
    for k in range(K):  # loop over time only
        eta = eta - gammas[k] * (a[:, :, k] * eta - xi[:, :, k])
        if (k + 1) in comm:
            eta = np.repeat(eta.mean(axis=1, keepdims=True), P, axis=1)
    return eta.mean(axis=1)


def test_invariance_numerically_and_multiplicative_moments():
    """Additive noise: final means identical pathwise (1e-12). Multiplicative (Gaussian
    curvature a ~ N(h, v)): the symbolic E[mean^2] per schedule matches Monte Carlo within
    4 SE, and MBA vs OSA differ by many SE."""
    res = local_sgd.derive_additive_noise_invariance()
    syms = res["symbols"]
    gam = [0.5, 0.4, 0.3, 0.25]
    hv, vv, e0 = 1.0, 0.5, 1.0
    rng = np.random.default_rng(11)
    R, P, K = 200_000, 2, 4
    xi = rng.standard_normal((R, P, K))
    ones = np.full((R, P, K), hv)
    schedules = {"MBA": [1, 2, 3, 4], "Local-SGD": [2, 4], "OSA": [4]}
    outs = {n: _local_sgd_scalar(ones, xi, gam, c, e0) for n, c in schedules.items()}
    for n in outs:
        np.testing.assert_allclose(outs[n], outs["MBA"], rtol=0, atol=1e-12)
    a = hv + np.sqrt(vv) * rng.standard_normal((R, P, K))
    sub = {
        syms["h"]: hv,
        syms["v"]: vv,
        syms["eta_0"]: e0,
        sp.Symbol("alpha3"): hv**3 + 3 * hv * vv,
        sp.Symbol("alpha4"): hv**4 + 6 * hv**2 * vv + 3 * vv**2,
    }
    sub.update(dict(zip(syms["gammas"], gam, strict=True)))
    mc = {}
    for n, c in schedules.items():
        m2 = _local_sgd_scalar(a, np.zeros_like(a), gam, c, e0) ** 2
        mc[n] = m2
        pred = float(res["multiplicative"][n].subs(sub))
        se = m2.std(ddof=1) / np.sqrt(R)
        assert abs(m2.mean() - pred) < Z_TOL * se, (n, m2.mean(), pred, se)
    diff = mc["OSA"] - mc["MBA"]  # common random numbers
    assert abs(diff.mean()) > 10 * diff.std(ddof=1) / np.sqrt(R)


def test_polyak_juditsky_exact_vs_bruteforce_and_asymptote():
    res = averaged_sgd.derive_polyak_juditsky()
    s = res["symbols"]
    assert sp.simplify(res["limit_T_times_error"] - s["sigma"] ** 2) == 0
    f = sp.lambdify((s["T"], s["q"], s["sigma"], s["h"], s["eta_0"]), res["exact"])
    hv, gamma, sig, e0 = 0.7, 0.4, 1.3, 0.9
    q = r = 1 - gamma * hv
    for T in (1, 2, 7, 40):
        t = np.arange(1, T + 1)
        w = np.array([gamma * np.sum(q ** (t[t >= s_] - s_)) for s_ in t])  # weight of xi_s
        var = hv / T**2 * np.sum(w**2) * sig**2 * hv
        bias = hv * e0**2 * np.sum(q**t) ** 2 / T**2
        assert f(T, r, sig, hv, e0) == pytest.approx(var + bias, rel=1e-12)
    # T * error / sigma^2 -> 1, with a gap shrinking like 1/T
    gaps = [abs(T * f(T, r, sig, hv, e0) / sig**2 - 1) for T in (1e3, 1e4, 1e5)]
    assert gaps[2] < 1e-3
    assert gaps[0] / gaps[1] == pytest.approx(10, rel=0.05)
    assert gaps[1] / gaps[2] == pytest.approx(10, rel=0.05)


def test_polyak_juditsky_exact_vs_monte_carlo():
    """Averaged constant-step SGD with additive noise (2 directions), R = 20000 replicates,
    E||theta_bar||_H^2 within 4 SE of the exact derived formula."""
    res = averaged_sgd.derive_polyak_juditsky()
    s = res["symbols"]
    f = sp.lambdify((s["T"], s["q"], s["sigma"], s["h"], s["eta_0"]), res["exact"])
    rng = np.random.default_rng(3)
    h = np.array([1.0, 0.2])
    gamma, sig, T, R = 0.5, 1.0, 200, 20_000
    eta = np.ones((R, 2))
    acc = np.zeros((R, 2))
    for _ in range(T):
        xi = sig * np.sqrt(h) * rng.standard_normal((R, 2))
        eta = eta - gamma * (h * eta - xi)
        acc += eta
    err = np.sum(h * (acc / T) ** 2, axis=1)
    pred = sum(f(T, 1 - gamma * hh, sig, hh, 1.0) for hh in h)
    se = err.std(ddof=1) / np.sqrt(R)
    assert abs(err.mean() - pred) < Z_TOL * se


def _random_doubly_stochastic(n, rng, p=0.5):
    """Metropolis-Hastings weights on a random connected graph (ring + random chords)."""
    A = np.zeros((n, n), bool)
    for i in range(n):
        A[i, (i + 1) % n] = A[(i + 1) % n, i] = True
    extra = rng.random((n, n)) < p
    A |= np.triu(extra, 1) | np.triu(extra, 1).T
    np.fill_diagonal(A, False)
    deg = A.sum(1)
    W = np.where(A, 1.0 / (1 + np.maximum(deg[:, None], deg[None, :])), 0.0)
    np.fill_diagonal(W, 1 - W.sum(1))
    return W


def test_w_eta_spectrum_and_gap():
    res = mixing.derive_w_eta_spectrum()
    assert res["verified"] is True
    fmap = sp.lambdify((res["lambda"], res["eta"]), res["eigenvalue_map"])
    rng = np.random.default_rng(5)
    W = _random_doubly_stochastic(9, rng)
    np.testing.assert_allclose(W.sum(0), 1, atol=1e-14)
    lam = np.linalg.eigvalsh(W)
    for eta in (0.1, 0.5, 1.0, 1.3):
        W_eta = (1 - eta) * np.eye(9) + eta * W
        np.testing.assert_allclose(np.linalg.eigvalsh(W_eta), np.sort(fmap(lam, eta)), atol=1e-12)
    gap = mixing.derive_w_eta_gap_condition()
    lam_sorted = np.sort(lam)[::-1]
    l2, ln = lam_sorted[1], lam_sorted[-1]
    eta_max = float(gap["eta_max"].subs({gap["lambda_2"]: l2, gap["lambda_n"]: ln}))

    def spectral_gap(eta):
        mus = np.sort(fmap(lam_sorted, eta))[::-1]
        return 1 - max(abs(mus[1]), abs(mus[-1]))

    for eta in (0.5 * eta_max, 0.999 * eta_max):
        assert spectral_gap(eta) == pytest.approx(eta * (1 - l2), abs=1e-12)
    assert spectral_gap(1.01 * eta_max) < 1.01 * eta_max * (1 - l2) - 1e-6


def _top_k(X, k):
    idx = np.argpartition(-np.abs(X), k - 1, axis=-1)[..., :k]
    out = np.zeros_like(X)
    np.put_along_axis(out, idx, np.take_along_axis(X, idx, -1), -1)
    return out


def test_deepsqueeze_and_choco_identities():
    sym = decentralized.derive_deepsqueeze_identities()
    assert sym == {"average": True, "w_eta_form": True, "identity_compressor": True}
    ch = decentralized.derive_choco_average_identity()
    assert ch == {"average": True, "dcd_average": False}
    # numerically with top-k on (n, d) blocks, a few steps
    rng = np.random.default_rng(9)
    n, d, gamma, eta, gc = 6, 5, 0.1, 0.4, 0.3
    W = _random_doubly_stochastic(n, rng)
    W_eta = (1 - eta) * np.eye(n) + eta * W
    X, Delta = rng.standard_normal((n, d)), np.zeros((n, d))
    Xc, Xhat = X.copy(), np.zeros((n, d))
    for _ in range(5):
        G = rng.standard_normal((n, d))
        Hs = X - gamma * G
        V = _top_k(Hs + Delta, 2)
        Delta_new = Hs + Delta - V
        X_new = Hs + eta * (W - np.eye(n)) @ V
        np.testing.assert_allclose(X_new, W_eta @ V + Delta_new - Delta, atol=1e-12)
        np.testing.assert_allclose(X_new.mean(0), X.mean(0) - gamma * G.mean(0), atol=1e-12)
        X, Delta = X_new, Delta_new
        # CHOCO
        Xc_new = Xc - gamma * G + gc * (W - np.eye(n)) @ Xhat
        np.testing.assert_allclose(Xc_new.mean(0), Xc.mean(0) - gamma * G.mean(0), atol=1e-12)
        Xhat = Xhat + _top_k(Xc_new - Xhat, 2)
        Xc = Xc_new


def test_expect_polynomial_simple():
    z, c = sp.Symbol("z", real=True), sp.Symbol("c")
    mom = {z: lambda m: {1: 0, 2: 1, 3: 0, 4: 3}[m]}
    assert sp.expand(moments.expect_polynomial((c + z) ** 4, mom) - (c**4 + 6 * c**2 + 3)) == 0


def test_errors():
    with pytest.raises(ValueError, match="h must"):
        sgd_stability.sgd_stability_limit([1.0, -1.0])
    with pytest.raises(ValueError, match="b must"):
        sgd_stability.sgd_stability_limit([1.0], b=0)
    with pytest.raises(ValueError, match="design"):
        moments.derive_second_moment_recursion("uniform")


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
def test_stationary_risk_is_the_fixed_point_of_the_recursion(design):
    """Iterating the derived recursion to convergence gives tr(H M_inf) = the closed form
    sigma^2 Phi/(1 - Phi) (Gaussian: with a rotated, non-diagonal H of the same spectrum)."""
    rng = np.random.default_rng(21)
    h = np.array([2.0, 0.9, 0.4, 0.1])
    b, sigma = 2, 0.7
    g_star = sgd_stability.sgd_stability_limit(h, b, design)
    Q = np.linalg.qr(rng.standard_normal((4, 4)))[0] if design == "gaussian" else np.eye(4)
    H = Q @ np.diag(h) @ Q.T
    for f in (0.3, 0.8):
        g = f * g_star
        M = np.zeros((4, 4))
        for _ in range(4000):
            M = moments.second_moment_step_numeric(H, M, gamma=g, b=b, sigma=sigma, design=design)
        want = sgd_stability.stationary_risk(h, b, g, sigma, design)
        assert np.trace(H @ M) == pytest.approx(want, rel=1e-9)
    assert sgd_stability.stationary_risk(h, b, 1.001 * g_star, sigma, design) == np.inf
    # 1-D, b = 1 closed form
    assert sgd_stability.stationary_risk([1.5], 1, 0.2, 2.0) == pytest.approx(4 * 0.3 / (2 - 0.9))
    closed, Phi = sgd_stability.derive_stationary_risk(design)
    assert sp.simplify(closed - symbol("sigma") ** 2 * Phi / (1 - Phi)) == 0
