"""Least squares with node Hessians and node optima (first- and second-order heterogeneity set
exactly): the default problem unchanged bit for bit, the optimum, f*, the excess risk, zeta^2,
delta and sigma_*^2 against independent computations (exact identities to ~machine
precision; Monte Carlo moments with fixed seeds and tolerances of 4 standard errors)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import convkit as ck
from convkit.backend import Backend
from convkit.problems.heterogeneous import HeterogeneousLeastSquares


def _digest(*arrays) -> str:
    m = hashlib.sha256()
    for a in arrays:
        m.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return m.hexdigest()[:16]


# Recorded from the problem before node Hessians existed (commit d08cb64): samples, gradients,
# errors of the node average, the optima, and the constants, for three settings.
_REFERENCE = {
    (5, 2, 0.3, "flat", 0.3, 3, 1): (
        "6f761a7c294df3ae", "951b929c745d2384", "4f70f3f81a4ffb4e", "131607c793f0f0f6",
        "(0.19499999999999995, 2.25, 1.0, 1.0, 0.3)",
    ),
    (20, 16, 10.0, "1/i", 1.0, 0, 3): (
        "f547b73924606692", "932f4492bd4daf72", "84afbc28cdd3df35", "cf949d1ecd1d981d",
        "(10.701090478686222, 86.99947517970416, 1.0, 0.05, 10.0)",
    ),
    (8, 4, 0.0, "1/i", 0.4, 0, 1): (
        "23cf125b2ec8929d", "74f11d599422ef53", "4c3721d605878d39", "05addd69eb6923e4",
        "(0.08000000000000002, 0.4348571428571429, 1.0, 0.125, 0.0)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("key", list(_REFERENCE))
def test_default_problem_unchanged_bit_for_bit(key):
    d, P, z2, spec, noise, seed, b = key
    p = HeterogeneousLeastSquares(d, P, z2, spectrum=spec, noise=noise, seed=seed)
    assert p.equal_hessians and p.delta == 0.0
    batch = p.sample(Backend().stream(1, "x"), (5, P, b))
    th = np.random.default_rng(1).standard_normal((5, P, d))
    g = p.stochastic_grad(th, batch)
    e = p.errors(th.mean(axis=1))
    if b > 1:
        # the b samples' sum runs through the BLAS (r @ x), in an order (and with fused
        # multiply-adds) of the CPU's, so not bit for bit across machines: the definition
        # instead, each sum within gamma_b sum_j |r_j x_j| of the exact one and the division
        # rounded once more (Higham, Accuracy and Stability of Numerical Algorithms, 2002,
        # eq. 3.5: gamma_k = k u / (1 - k u))
        x = batch.z * p.sqrt_h
        r = np.sum(x * (th - p.node_optima)[..., None, :], axis=-1) - p.noise * batch.eps
        terms = r[..., None] * x  # (R, P, b, d)
        u = np.finfo(np.float64).eps / 2
        gamma = (b + 1) * u / (1 - (b + 1) * u)
        bound = 2 * gamma * np.abs(terms).sum(axis=-2) / b
        assert np.all(np.abs(g - terms.sum(axis=-2) / b) <= bound)
    got = (
        _digest(batch.z, batch.eps),
        _digest(g) if b == 1 else _REFERENCE[key][1],  # b > 1: checked above
        _digest(e["excess_risk"], e["hnorm2"], e["dist2"]),
        _digest(p.theta_star, p.node_optima, p.offsets),
        repr((p.f_star, p.sigma2, p.L, p.mu, p.zeta2)),
    )
    assert got == _REFERENCE[key]


def test_default_problem_simulation_unchanged_bit_for_bit():
    p = HeterogeneousLeastSquares(10, 4, 2.0, spectrum="1/i", noise=0.5, seed=0)
    algos = [ck.LocalSGD(4, ck.Constant(0.05), comm="every:5"), ck.MBA(4, ck.Constant(0.05))]
    res = ck.simulate(p, algos, steps=50, replicates=300, seed=2, progress=False)
    # the error metrics of the node average (iterates avg, tail, last), as recorded before
    vals = [res.values[k].values[:, :3, :3, :] for k in sorted(res.values)]
    assert _digest(*vals) == "459e21c73e5de2f0"


SETTINGS = [(5, 2, 0.3, 0.4, "flat"), (20, 16, 10.0, 0.5, "1/i"), (12, 7, 1e-3, 0.02, "kappa:100")]


@pytest.mark.parametrize(("d", "P", "zeta2", "delta", "spec"), SETTINGS)
def test_node_hessians_exact_constants(d, P, zeta2, delta, spec):
    p = HeterogeneousLeastSquares(
        d, P, zeta2, spectrum=spec, noise=0.3, seed=4, hessian_dissimilarity=delta
    )
    assert not p.equal_hessians
    hn = p.node_h
    assert np.all(hn > 0)
    # H is the nodes' mean Hessian; delta = max_i ||H_i - H||_op as requested
    np.testing.assert_allclose(hn.mean(axis=0), p.h, rtol=1e-15)
    assert np.max(np.abs(hn - p.h)) == pytest.approx(delta, rel=1e-13)
    dev = np.abs(hn - p.h).max(axis=1)
    assert p.delta_ms == pytest.approx(np.mean(dev**2), rel=1e-14)
    assert p.delta_ms <= p.delta**2 * (1 + 1e-15)
    # theta* = (sum H_i)^{-1} sum H_i theta*_i
    np.testing.assert_allclose(
        (hn * p.node_optima).sum(axis=0) / hn.sum(axis=0), p.theta_star, rtol=1e-12, atol=1e-14
    )
    # zeta^2 = mean_i ||grad f_i(theta*)||^2, and the network gradient vanishes at theta*
    g = p.worker_grads(p.theta_star)
    assert np.mean(np.sum(g * g, axis=1)) == pytest.approx(zeta2, rel=1e-12)
    np.testing.assert_allclose(g.mean(axis=0), 0.0, atol=1e-14 * max(1.0, np.sqrt(zeta2)))
    # f* = mean_i f_i(theta*) and f(theta) - f* = 1/2 ||theta - theta*||_H^2 exactly
    assert p.f_star == pytest.approx(float(p.node_losses(p.theta_star).mean()), rel=1e-13)
    th = p.theta_star + np.random.default_rng(0).standard_normal((6, d))
    f = p.node_losses(th).mean(axis=-1)
    np.testing.assert_allclose(p.errors(th)["excess_risk"], f - p.f_star, rtol=1e-11)
    np.testing.assert_allclose(p.loss(th), f, rtol=1e-13)


def test_gradients_against_finite_differences():
    """grad f and each grad f_i against central differences of the losses (quadratics: the
    central difference is exact up to rounding, ~1e-10 relative at step 1e-4)."""
    p = HeterogeneousLeastSquares(6, 5, 2.0, spectrum="1/i", noise=0.5, seed=1,
                                  hessian_dissimilarity=0.3)  # fmt: skip
    th = np.random.default_rng(3).standard_normal(6)
    e = 1e-4 * np.eye(6)
    fd_nodes = (p.node_losses(th + e) - p.node_losses(th - e)).T / 2e-4  # (P, d)
    np.testing.assert_allclose(fd_nodes, p.worker_grads(th), rtol=1e-8, atol=1e-9)
    fd = (p.loss(th + e) - p.loss(th - e)) / 2e-4
    np.testing.assert_allclose(fd, p.grad(th), rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(p.worker_grads(th).mean(axis=0), p.grad(th), atol=1e-13)


def test_node_gradients_unbiased_and_inner_variance():
    """Node i's stochastic gradient has mean H_i (theta - theta*_i) and, at theta*, the
    mean-square deviation sigma_*^2 of the module docstring (4 SE; the deviation squared
    averaged over nodes is one i.i.d. draw per replicate)."""
    p = HeterogeneousLeastSquares(4, 3, 1.5, spectrum="1/i", noise=0.5, seed=5,
                                  hessian_dissimilarity=0.4)  # fmt: skip
    R = 40000
    for b in (1, 3):
        batch = p.sample(Backend().stream(11, "unbiased", b), (R, 3, b))
        th = np.broadcast_to(p.theta_star + 0.3, (R, 3, 4)).copy()
        g = p.stochastic_grad(th, batch)
        want = (th[0] - p.node_optima) * p.node_h
        se = g.std(axis=0) / np.sqrt(R)
        assert np.all(np.abs(g.mean(axis=0) - want) <= 4 * se)
        ts = np.broadcast_to(p.theta_star, (R, 3, 4)).copy()
        dev = p.stochastic_grad(ts, batch) - p.worker_grads(p.theta_star)
        sq = np.sum(dev * dev, axis=-1).mean(axis=1)
        assert abs(sq.mean() - p.sigma2 / b) <= 4 * sq.std() / np.sqrt(R)


def test_node_errors_parallel_axis_identity():
    p = HeterogeneousLeastSquares(7, 4, 1.0, spectrum="1/i", seed=2, hessian_dissimilarity=0.2)
    X = np.random.default_rng(5).standard_normal((9, 4, 7))
    ne = p.node_errors(X)
    bar = X.mean(axis=1)
    spread = np.mean(np.sum((X - bar[:, None]) ** 2 * p.h, axis=-1), axis=1)
    np.testing.assert_allclose(ne["node_hnorm2"], p.errors(bar)["hnorm2"] + spread, rtol=1e-13)
    f_nodes = p.loss(X).mean(axis=1)  # (1/P) sum_i f(theta_i)
    np.testing.assert_allclose(ne["node_excess_risk"], f_nodes - p.f_star, rtol=1e-11)
    with pytest.raises(ValueError, match="models must have shape"):
        p.node_errors(X[:, :3])


def test_invalid_heterogeneity_raises():
    with pytest.raises(ValueError, match="hessian_dissimilarity < "):
        HeterogeneousLeastSquares(5, 4, 0.0, hessian_dissimilarity=5.0)
    with pytest.raises(ValueError, match="hessian_dissimilarity = 0.1 > 0 needs workers >= 2"):
        HeterogeneousLeastSquares(5, 1, 0.0, hessian_dissimilarity=0.1)
    with pytest.raises(ValueError, match="hessian_dissimilarity"):
        HeterogeneousLeastSquares(5, 4, 0.0, hessian_dissimilarity=-1.0)
    with pytest.raises(ValueError, match="node_spectra must be finite and > 0"):
        HeterogeneousLeastSquares(5, 4, 0.0, node_spectra=np.ones((3, 5)))
    with pytest.raises(ValueError, match="not both"):
        HeterogeneousLeastSquares(5, 4, 0.0, node_spectra=np.ones((4, 5)),
                                  hessian_dissimilarity=0.1)  # fmt: skip


def test_explicit_node_spectra():
    hn = np.array([[1.0, 0.5], [3.0, 0.1]])
    p = HeterogeneousLeastSquares(2, 2, 0.7, node_spectra=hn, seed=0)
    np.testing.assert_array_equal(p.h, [2.0, 0.3])
    assert p.delta == pytest.approx(1.0) and p.L == 3.0 and p.mu == pytest.approx(0.3)
    g = p.worker_grads(p.theta_star)
    assert np.mean(np.sum(g * g, axis=1)) == pytest.approx(0.7, rel=1e-12)
    other = HeterogeneousLeastSquares(2, 2, 0.7, node_spectra=hn[::-1], seed=0)
    assert p.describe() != other.describe()  # explicit spectra are named by their digest


def test_simulate_reports_average_and_node_errors():
    """simulate records, next to the error of the nodes' average, the mean error of the nodes'
    own models (iterate "state"): equal right after a round (every node holds the average),
    larger in between by the nodes' spread (parallel-axis identity, to rounding)."""
    p = HeterogeneousLeastSquares(6, 4, 5.0, spectrum="1/i", noise=0.5, seed=3,
                                  hessian_dissimilarity=0.3)  # fmt: skip
    algos = [ck.LocalSGD(4, ck.Constant(0.1), comm="every:4", name="local"),
             ck.algorithms.SCAFFOLD(4, ck.Constant(0.1), comm="every:4", name="scaffold")]
    res = ck.simulate(p, algos, steps=40, replicates=50, seed=1, record=[6, 8], n_record=2,
                      progress=False)  # fmt: skip
    for lab in ("local", "scaffold"):
        cv = res.values[lab]
        steps = np.asarray(cv.steps).tolist()
        last, st = cv.iterates.index("last"), cv.iterates.index("state")
        avg_err = cv.values[:, last, cv.metrics.index("excess_risk")]
        node_err = cv.values[:, st, cv.metrics.index("node_excess_risk")]
        at8, at6 = steps.index(8), steps.index(6)
        np.testing.assert_allclose(node_err[at8], avg_err[at8], rtol=1e-12)  # after a round
        assert np.all(node_err[at6] > avg_err[at6])  # between rounds the nodes disagree
        f = res.frame
        rows = f[(f.config == lab) & (f.iterate == "state") & (f.metric == "node_excess_risk")]
        assert len(rows) == len(steps)


@pytest.mark.parametrize("b", [1, 3])
def test_compiled_node_step_matches_generic(b):
    """The compiled one-pass step equals theta -= gamma * stochastic_grad (to rounding: the
    kernel reassociates sums) and fills the nodes' mean."""
    from convkit.problems import _heterogeneous_kernel as hk

    p = HeterogeneousLeastSquares(13, 5, 2.0, spectrum="1/i", noise=0.4, seed=6,
                                  hessian_dissimilarity=0.3)  # fmt: skip
    batch = p.sample(Backend().stream(2, "k"), (7, 5, b))
    th = np.random.default_rng(4).standard_normal((7, 5, 13))
    want = th - 0.05 * p.stochastic_grad(th, batch)
    got, mean = th.copy(), np.empty((7, 13))
    if not hk.node_ls_sgd_update(got, batch.z, batch.eps, *(
            np.ascontiguousarray(a) for a in (p.sqrt_node_h, p.node_optima)),
            p.noise, 0.05, mean):  # fmt: skip
        pytest.skip("numba not available")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mean, want.mean(axis=1), rtol=1e-12, atol=1e-14)
    via_problem = th.copy()
    p.sgd_update(via_problem, batch, 0.05)
    np.testing.assert_array_equal(via_problem, got)  # the problem's step is the kernel
    generic = th.copy()
    with ck.kernels(enabled=False):  # kernel off: the generic step
        p.sgd_update(generic, batch, 0.05)
    np.testing.assert_array_equal(generic, want)


def test_additive_design_gradient_moments():
    """Additive design: mean H_i (theta - theta*_i), and at theta* the mean-square deviation
    sigma_*^2 / b = sigma^2 mean_i tr(H_i) / b whatever zeta^2 (4 SE)."""
    p = HeterogeneousLeastSquares(4, 3, 5.0, spectrum="1/i", noise=0.5, seed=5,
                                  hessian_dissimilarity=0.4, design="additive")  # fmt: skip
    assert p.sigma2 == pytest.approx(0.25 * np.mean(p.node_h.sum(axis=1)), rel=1e-15)
    R = 40000
    for b in (1, 3):
        batch = p.sample(Backend().stream(12, "additive", b), (R, 3, b))
        th = np.broadcast_to(p.theta_star + 0.3, (R, 3, 4)).copy()
        g = p.stochastic_grad(th, batch)
        want = (th[0] - p.node_optima) * p.node_h
        se = g.std(axis=0) / np.sqrt(R)
        assert np.all(np.abs(g.mean(axis=0) - want) <= 4 * se)
        ts = np.broadcast_to(p.theta_star, (R, 3, 4)).copy()
        dev = p.stochastic_grad(ts, batch) - p.worker_grads(p.theta_star)
        sq = np.sum(dev * dev, axis=-1).mean(axis=1)
        assert abs(sq.mean() - p.sigma2 / b) <= 4 * sq.std() / np.sqrt(R)
    with pytest.raises(ValueError, match="design"):
        HeterogeneousLeastSquares(4, 3, 1.0, design="rademacher")


def test_node_errors_compiled_and_numpy_agree():
    from convkit.problems import _heterogeneous_kernel as hk

    p = HeterogeneousLeastSquares(11, 4, 1.0, spectrum="1/i", seed=2, hessian_dissimilarity=0.2)
    X = np.random.default_rng(6).standard_normal((3, 5, 4, 11))
    if hk.node_error_sums(X, p.theta_star, p.h) is None:
        pytest.skip("numba not available")
    compiled = p.node_errors(X)
    with ck.kernels(enabled=False):
        generic = p.node_errors(X)
    for k in compiled:
        assert compiled[k].shape == (3, 5)
        np.testing.assert_allclose(compiled[k], generic[k], rtol=1e-13)


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        (-1.0, r"node_spectra\[1, 2\] = -1"),
        (np.nan, r"node_spectra\[1, 2\] = nan"),
        (0.0, r"node_spectra\[1, 2\] = 0"),
    ],
)
def test_a_bad_node_spectrum_entry_is_named_with_its_index(bad, where):
    h = np.ones((4, 5))
    h[1, 2] = bad
    with pytest.raises(ValueError, match=where + r".*allowed: finite and > 0"):
        HeterogeneousLeastSquares(5, 4, 0.0, node_spectra=h)


def test_a_node_spectrum_that_makes_the_constants_overflow_is_refused():
    # h = 1e-300 on node 0 with zeta2 = 1: the node's optimum offset u = w / h is ~1e300 and
    # sigma2, f_star overflowed to inf, accepted silently
    h = [[1e-300] * 3, [1.0] * 3]
    with pytest.raises(
        ValueError, match=r"node_spectra.*smallest entry 1e-300 \(node_spectra\[0, \d\]\).*sigma2"
    ):
        HeterogeneousLeastSquares(3, 2, 1.0, node_spectra=h)
    # without node optima apart (zeta2 = 0) the same spectra give finite constants: accepted
    p = HeterogeneousLeastSquares(3, 2, 0.0, node_spectra=h)
    assert np.isfinite(p.sigma2) and np.isfinite(p.f_star)


def test_simulate_refuses_algorithms_whose_workers_are_not_the_nodes_up_front():
    # the mismatch surfaced in the problem's sample, after the plan and the memory check;
    # now simulate names the algorithm, its workers and the problem's nodes before anything
    p = HeterogeneousLeastSquares(3, 4, 0.1)
    algos = [
        ck.LocalSGD(4, ck.Constant(0.1), "every:2", name="ok"),
        ck.LocalSGD(8, ck.Constant(0.1), "every:2", name="wide"),
    ]
    with pytest.raises(
        ValueError,
        match=r"HeterogeneousLeastSquares has 4 nodes.*'wide' has "
        r"workers = 8.*allowed: workers = 4",
    ):
        ck.simulate(p, algos, steps=10, replicates=2)
