"""Finite-sum least squares and logistic regression: solve, constants, sampling, metrics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import convkit as ck
from convkit.backend import Backend
from convkit.problems.datasets import split_by_label, split_iid, synthetic_logistic
from convkit.problems.finite_sum import FiniteLeastSquares, FiniteLogistic, FiniteSum, IndexBatch

N, D = 120, 6


def _data(sparse: bool, loss: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((N, D)) * np.linspace(1.5, 0.5, D)
    if sparse:
        A = np.where(rng.random((N, D)) < 0.4, A, 0.0)
    w = rng.standard_normal(D)
    if loss == "squared":
        y = A @ w + 0.5 * rng.standard_normal(N)
    else:
        y = np.where(rng.random(N) < 1 / (1 + np.exp(-A @ w)), 1.0, -1.0)
    return (sp.csr_matrix(A) if sparse else A), y


CASES = [
    (sparse, loss, lam)
    for sparse in (False, True)
    for loss in ("squared", "logistic")
    for lam in (0.0, 0.05)
]


@pytest.fixture(
    scope="module", params=CASES, ids=lambda c: f"{'csr' if c[0] else 'dense'}-{c[1]}-lam{c[2]}"
)
def prob(request):
    sparse, loss, lam = request.param
    A, y = _data(sparse, loss)
    return FiniteSum(A, y, loss=loss, lam=lam)


def test_gradient_at_optimum(prob):
    assert np.linalg.norm(prob.grad(prob.theta_star)) <= 1e-10
    assert prob.grad_norm_star <= 1e-10


def test_finite_difference_gradient(prob):
    rng = np.random.default_rng(1)
    for theta in rng.standard_normal((3, D)):
        h = 1e-6
        fd = np.array(
            [(prob.loss(theta + h * e) - prob.loss(theta - h * e)) / (2 * h) for e in np.eye(D)]
        )
        np.testing.assert_allclose(prob.grad(theta), fd, rtol=0, atol=1e-7)


def test_stochastic_gradient_expectation_is_exact(prob):
    """With replacement every row has probability 1/n: the expectation of the one-sample
    gradient is the mean over all rows, which a batch holding every row computes exactly."""
    rng = np.random.default_rng(2)
    theta = rng.standard_normal((2, 1, D))
    all_rows = IndexBatch(np.broadcast_to(np.arange(N), (2, 1, N)))
    np.testing.assert_allclose(
        prob.stochastic_grad(theta, all_rows), prob.grad(theta), rtol=1e-12, atol=1e-13
    )
    # mean of the one-sample gradients (b = 1) over the rows is the same number
    singles = [prob.stochastic_grad(theta, IndexBatch(np.full((2, 1, 1), i))) for i in range(N)]
    np.testing.assert_allclose(np.mean(singles, axis=0), prob.grad(theta), rtol=1e-12, atol=1e-13)


def test_fused_update_matches_generic(prob):
    rng = np.random.default_rng(3)
    theta = rng.standard_normal((3, 4, D))
    batch = prob.sample(Backend().stream(4), (3, 4, 5))
    expected = theta - 0.1 * prob.stochastic_grad(theta, batch)
    got = theta.copy()
    prob.sgd_update(got, batch, 0.1)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    got, mean = theta.copy(), np.full((3, D), np.nan)
    prob.sgd_update(got, batch, 0.1, mean)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(mean, expected.mean(axis=1), rtol=1e-12, atol=1e-14)


def _power_iteration(M, iters=2000, seed=0):
    v = np.random.default_rng(seed).standard_normal(M.shape[0])
    for _ in range(iters):
        v = M @ v
        v /= np.linalg.norm(v)
    return float(v @ M @ v)


def test_constants_match_the_data(prob):
    A = prob.A.toarray() if prob.sparse else prob.A
    scale = 1.0 if prob.loss_kind == "squared" else 0.25
    G = A.T @ A / N
    assert prob.L == pytest.approx(_power_iteration(G) * scale + prob.lam, rel=1e-10)
    assert prob.L == pytest.approx(np.linalg.eigvalsh(G)[-1] * scale + prob.lam, rel=1e-12)
    assert prob.L_max == pytest.approx(np.max(np.sum(A * A, axis=1)) * scale + prob.lam)
    z = A @ prob.theta_star
    c = np.ones(N) if prob.loss_kind == "squared" else 1 / (2 + 2 * np.cosh(prob.y * z))
    Hs = (A.T * c) @ A / N + prob.lam * np.eye(D)
    np.testing.assert_allclose(prob.H_star, Hs, rtol=1e-12, atol=1e-14)
    assert prob.mu == pytest.approx(np.linalg.eigvalsh(Hs)[0], rel=1e-10)
    assert 0 < prob.mu <= prob.L


def test_errors_exact_and_nonnegative(prob):
    rng = np.random.default_rng(5)
    thetas = (
        prob.theta_star + rng.standard_normal((2, 3, D)) * np.array([1e-5, 0.1, 2.0])[None, :, None]
    )
    e = prob.errors(thetas)
    assert e["excess_risk"].shape == (2, 3)
    assert np.all(e["excess_risk"] >= 0)
    direct = prob.loss(thetas) - prob.f_star
    np.testing.assert_allclose(e["excess_risk"], direct, rtol=1e-6, atol=1e-13)
    eta = thetas - prob.theta_star
    np.testing.assert_allclose(
        e["hnorm2"], np.einsum("...i,ij,...j->...", eta, prob.H_star, eta), rtol=1e-12
    )
    np.testing.assert_allclose(e["dist2"], np.sum(eta**2, -1), rtol=1e-14)
    # second order: excess risk ~ hnorm2 / 2 near theta*
    assert e["excess_risk"][0, 0] == pytest.approx(0.5 * e["hnorm2"][0, 0], rel=1e-4)


def test_sparse_and_dense_agree():
    for loss in ("squared", "logistic"):
        A, y = _data(True, loss, seed=9)
        ps = FiniteSum(A, y, loss=loss, lam=0.01)
        pd_ = FiniteSum(A.toarray(), y, loss=loss, lam=0.01)
        np.testing.assert_allclose(ps.theta_star, pd_.theta_star, rtol=1e-9, atol=1e-11)
        batch = pd_.sample(Backend().stream(0), (2, 3, 4))
        theta = np.random.default_rng(0).standard_normal((2, 3, D))
        np.testing.assert_allclose(
            ps.stochastic_grad(theta, batch), pd_.stochastic_grad(theta, batch), rtol=1e-12
        )
        assert ps.sparse and not pd_.sparse


def _walk(prob, R, P, b, steps, seed=1):
    stream = Backend().stream(seed)
    return np.concatenate([prob.sample(stream, (R, P, b)).idx for _ in range(steps)], axis=2)


@pytest.mark.parametrize("b", [1, 4, 7, 25])
def test_reshuffling_visits_each_row_once_per_epoch(b):
    A, y = _data(False, "squared")
    blocks = [np.arange(0, 50), np.arange(50, 73), np.arange(73, 120)]
    for partition in (None, blocks):
        p = FiniteLeastSquares(A, y, sampling="reshuffle", partition=partition)
        R, P = 3, 3
        idx = _walk(p, R, P, b, steps=int(np.ceil(4 * 120 / b)))
        for w in range(P):
            rows = np.arange(N) if partition is None else blocks[w]
            m = rows.size
            epochs = idx.shape[2] // m
            assert epochs >= 2
            seq = idx[:, w, : epochs * m].reshape(R, epochs, m)
            np.testing.assert_array_equal(np.sort(seq, axis=-1), np.broadcast_to(rows, seq.shape))
            # different epochs and replicates use different orders
            assert not np.array_equal(seq[0, 0], seq[0, 1])
            assert not np.array_equal(seq[0, 0], seq[1, 0])


def test_reshuffling_state_restarts_with_a_new_stream():
    A, y = _data(False, "squared")
    p = FiniteLeastSquares(A, y, sampling="reshuffle")
    first = _walk(p, 2, 2, 10, 3, seed=5)
    again = _walk(p, 2, 2, 10, 3, seed=5)
    np.testing.assert_array_equal(first, again)


def test_partition_is_respected_with_replacement():
    A, y = _data(False, "squared")
    blocks = [np.arange(0, 10), np.arange(10, 60), np.arange(60, 120)]
    p = FiniteLeastSquares(A, y, partition=blocks)
    idx = p.sample(Backend().stream(0), (4, 3, 500)).idx
    for w, rows in enumerate(blocks):
        np.testing.assert_array_equal(np.unique(idx[:, w]), rows)
    with pytest.raises(ValueError, match="workers must equal the number of partition blocks"):
        p.sample(Backend().stream(0), (4, 2, 5))
    # objective = mean of the workers' objectives (unequal blocks)
    theta = np.random.default_rng(0).standard_normal(D)
    fp = [0.5 * np.mean((A[r] @ theta - y[r]) ** 2) for r in blocks]
    assert p.loss(theta) == pytest.approx(np.mean(fp), rel=1e-13)


def test_outer_variance_label_split_vs_iid_split():
    """zeta^2 = (1/P) sum_p ||grad f_p(theta*)||^2: large when each worker holds one class,
    small for an iid split (its expectation there is about (P/n) sigma^2).

    The data have an intercept column: for centred Gaussian features without one, the
    class-conditional gradients at theta* vanish in expectation (E[s(1-s) x] = 0 by symmetry,
    derived here), so a label split changes the Hessians but barely the gradients."""
    data, _ = synthetic_logistic(2000, 5, seed=3)
    X = np.hstack([np.ones((data.n, 1)), data.X])
    P = 4
    label = FiniteLogistic(X, data.y, lam=1e-3, partition=split_by_label(data.y, P))
    iid = FiniteLogistic(X, data.y, lam=1e-3, partition=split_iid(data.n, P, seed=1))
    for p in (label, iid):
        g = p.worker_grads(p.theta_star)
        np.testing.assert_allclose(g.sum(axis=0), 0.0, atol=1e-9)
        assert p.zeta2 == pytest.approx(np.mean(np.sum(g**2, axis=1)), rel=1e-9)
    assert iid.zeta2 < 5 * P / data.n * iid.sigma2
    assert label.zeta2 > 50 * iid.zeta2
    assert label.zeta2 > 0.05
    none = FiniteLogistic(X, data.y, lam=1e-3)
    assert none.zeta2 == 0.0 and not none.heterogeneous and label.heterogeneous


def test_rank_deficient_least_squares():
    rng = np.random.default_rng(0)
    A, y = rng.standard_normal((5, 8)), rng.standard_normal(5)
    p = FiniteLeastSquares(A, y)
    assert np.linalg.norm(p.grad(p.theta_star)) <= 1e-10
    assert p.mu == 0.0 and p.errors(p.theta_star)["excess_risk"] == 0.0


def test_separable_logistic_without_l2_fails_clearly():
    A = np.array([[1.0, 0.0], [2.0, 1.0], [-1.0, 0.5], [-2.0, -1.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    with pytest.raises(RuntimeError, match="separable"):
        FiniteLogistic(A, y)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"A": np.array([[1.0, np.nan], [0.0, 1.0]])}, "A must contain only finite"),
        ({"y": np.array([1.0, np.inf])}, "y must contain only finite"),
        ({"y": np.array([1.0, 0.0]), "loss": "logistic"}, "binary labels"),
        ({"y": np.array([1.0, 2.0, 3.0])}, r"y must have shape \(n,\)"),
        ({"A": np.ones(3)}, "2-D"),
        ({"loss": "hinge"}, "loss"),
        ({"sampling": "cyclic"}, "sampling"),
        ({"lam": -1.0}, "lam"),
        ({"partition": [np.array([0]), np.array([], dtype=int)]}, "non-empty"),
        ({"partition": [np.array([0, 5])]}, r"row indices in \[0, 1\]"),
        ({"partition": [np.array([0, 0])]}, "repeat"),
        ({"partition": [np.array([0.0, 1.0])]}, "integer"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"A": np.array([[1.0, 0.0], [0.0, 1.0]]), "y": np.array([1.0, -1.0])} | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        FiniteSum(**args)


@pytest.mark.parametrize("sampling", ["replacement", "reshuffle"])
def test_simulate_end_to_end(sampling):
    data, _ = synthetic_logistic(400, 4, seed=0)
    parts = split_iid(data.n, 4)
    problems = [
        FiniteLeastSquares(data.X, data.y, sampling=sampling),
        FiniteLogistic(sp.csr_matrix(data.X), data.y, lam=0.01, sampling=sampling, partition=parts),
    ]
    for p in problems:
        gamma = 0.5 / p.L_max
        algo = ck.LocalSGD(4, ck.Constant(gamma), comm=ck.Every(4), batch=2)
        res = ck.simulate(p, algo, steps=300, replicates=8, seed=1)
        curve = res.curve(algo.label, "excess_risk", "avg")
        assert np.all(np.isfinite(curve["mean"])) and res.diverged.empty
        assert curve["mean"].iloc[-1] < 0.1 * curve["mean"].iloc[0]


def test_largest_eigenvalue_lanczos_path():
    """Above d = 300 L comes from Lanczos (eigsh): it matches the dense solver."""
    from convkit.problems.finite_sum import _largest_eigenvalue

    B = np.random.default_rng(0).standard_normal((500, 400))
    M = B.T @ B / 500
    assert _largest_eigenvalue(M) == pytest.approx(np.linalg.eigvalsh(M)[-1], rel=1e-11)
