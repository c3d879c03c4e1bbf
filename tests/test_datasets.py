"""Data sets, the svmlight reader, synthetic generators and worker splits."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from convkit.problems import datasets as ds

SVM_TEXT = """# a comment line
+1 1:0.5 3:-1.25 # trailing comment
-1 2:2.0
+1 1:1e-3 2:0.25 3:4 4:1
-1 qid:3 4:-7.5
"""
DENSE = np.array(
    [[0.5, 0.0, -1.25, 0.0], [0.0, 2.0, 0.0, 0.0], [1e-3, 0.25, 4.0, 1.0], [0.0, 0.0, 0.0, -7.5]]
)


def test_breast_cancer():
    pytest.importorskip("sklearn")
    data = ds.breast_cancer()
    assert (data.n, data.d) == (569, 30) and not data.sparse
    np.testing.assert_allclose(data.X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(data.X.std(axis=0), 1.0, rtol=1e-12)
    assert set(np.unique(data.y)) == {-1.0, 1.0}
    assert int(np.sum(data.y == 1)) == 357  # benign
    p = data.logistic(lam=1e-3)
    assert np.linalg.norm(p.grad(p.theta_star)) <= 1e-10


def test_breast_cancer_without_sklearn(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"scikit-learn.*convkit\[data\]"):
        ds.breast_cancer()


@pytest.mark.parametrize("use_sklearn", [False, True])
def test_svmlight_reader(tmp_path, use_sklearn):
    if use_sklearn:
        pytest.importorskip("sklearn")
    path = tmp_path / "tiny.svm"
    path.write_text(SVM_TEXT)
    data = ds.load_svmlight(path, use_sklearn=use_sklearn)
    assert data.sparse and data.X.format == "csr"
    np.testing.assert_array_equal(data.X.toarray(), DENSE)
    np.testing.assert_array_equal(data.y, [1, -1, 1, -1])
    wide = ds.load_svmlight(path, n_features=6, use_sklearn=use_sklearn)
    assert wide.X.shape == (4, 6)
    p = data.least_squares(lam=0.1)
    assert p.sparse and np.linalg.norm(p.grad(p.theta_star)) <= 1e-10


def test_svmlight_binary_labels_and_errors(tmp_path):
    path = tmp_path / "labels.svm"
    path.write_text("2 1:1\n7 2:1\n2 1:3\n")
    data = ds.load_svmlight(path, binary=True, use_sklearn=False)
    np.testing.assert_array_equal(data.y, [-1, 1, -1])
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5\n1 x:y\n")
    with pytest.raises(ValueError, match=r"bad.svm:2: malformed"):
        ds.load_svmlight(bad, use_sklearn=False)
    with pytest.raises(FileNotFoundError, match="path must be an existing svmlight file"):
        ds.load_svmlight(tmp_path / "missing.svm")
    with pytest.raises(ValueError, match=r"labels.svm:2: .*n_features >= 2"):
        ds.load_svmlight(path, n_features=1, use_sklearn=False)
    nan = tmp_path / "nan.svm"
    nan.write_text("1 1:nan\n-1 2:1\n")
    with pytest.raises(ValueError, match=r"nan.svm:1: .*must be a finite number"):
        ds.load_svmlight(nan, use_sklearn=False)


def test_synthetic_generators():
    a, t_a = ds.synthetic_least_squares(300, 4, spectrum="1/i", noise=0.1, seed=1)
    b, t_b = ds.synthetic_least_squares(300, 4, spectrum="1/i", noise=0.1, seed=1)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(t_a, t_b)
    # residual standard deviation is the noise level (300 samples: within 20%)
    assert np.std(a.y - a.X @ t_a) == pytest.approx(0.1, rel=0.2)
    lg, _ = ds.synthetic_logistic(200, 3, rotate=True, seed=2)
    assert set(np.unique(lg.y)) == {-1.0, 1.0}
    sparse, _ = ds.synthetic_sparse(500, 200, density=0.02, seed=3)
    assert sparse.sparse and set(np.unique(sparse.y)) <= {-1.0, 1.0}
    # nnz is Binomial(n d, density): within 5 standard deviations
    m = 500 * 200
    assert abs(sparse.X.nnz - 0.02 * m) <= 5 * np.sqrt(m * 0.02 * 0.98)
    ls, _ = ds.synthetic_sparse(50, 20, density=0.2, task="least_squares", seed=3)
    assert ls.sparse


def _covers(blocks, n):
    allrows = np.concatenate(blocks)
    np.testing.assert_array_equal(np.sort(allrows), np.arange(n))


def test_split_iid():
    blocks = ds.split_iid(103, 4, seed=0)
    _covers(blocks, 103)
    assert {b.size for b in blocks} <= {25, 26}
    again = ds.split_iid(103, 4, seed=0)
    assert all(np.array_equal(x, y) for x, y in zip(blocks, again))


def test_split_by_label_gives_mostly_one_class():
    y = np.repeat([-1.0, 1.0], [60, 40])
    blocks = ds.split_by_label(y, 5, seed=0)
    _covers(blocks, 100)
    purity = [np.max(np.unique(y[b], return_counts=True)[1]) / b.size for b in blocks]
    assert sum(p == 1.0 for p in purity) == 5  # 60 and 40 rows: blocks of 20 fall on classes
    blocks = ds.split_by_label(y, 3, seed=0)
    purity = [np.max(np.unique(y[b], return_counts=True)[1]) / b.size for b in blocks]
    assert sorted(purity)[1:] == [1.0, 1.0] and min(purity) >= 0.5


def test_split_dirichlet():
    y = np.repeat([0.0, 1.0, 2.0], 200)
    skew = ds.split_dirichlet(y, 6, alpha=0.1, seed=1)
    flat = ds.split_dirichlet(y, 6, alpha=100.0, seed=1)
    for blocks in (skew, flat):
        _covers(blocks, 600)
        assert all(b.size > 0 for b in blocks)

    def top_share(blocks):
        return np.mean(
            [np.max(np.bincount(y[b].astype(int), minlength=3)) / b.size for b in blocks]
        )

    # mean share of each worker's largest class: over seeds 0..19 it ranged 0.77-0.99 for
    # alpha = 0.1 and 0.35-0.38 for alpha = 100 (1/3 is perfectly balanced)
    assert top_share(skew) > 0.6 and top_share(flat) < 0.45
    again = ds.split_dirichlet(y, 6, alpha=0.1, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(skew, again))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: ds.Dataset(np.array([[1.0, np.inf]]), np.array([1.0])),
            "X must contain only finite",
        ),
        (lambda: ds.Dataset(np.ones((3, 2)), np.ones(2)), r"y must have shape \(n,\) = \(3,\)"),
        (lambda: ds.Dataset(np.ones(3), np.ones(3)), "2-D"),
        (lambda: ds.binary_labels([0, 1, 2]), "exactly two distinct values"),
        (lambda: ds.split_iid(3, 4), "workers must be <= n"),
        (lambda: ds.split_dirichlet([0, 1, 1], 2, alpha=0.0), "alpha must be in"),
        (lambda: ds.split_dirichlet([0, 1], 5, alpha=1.0), "at least workers"),
        (lambda: ds.synthetic_sparse(10, 5, density=1.5), "density must be in"),
        (lambda: ds.synthetic_sparse(10, 5, task="poisson"), "task must be"),
        (lambda: ds.Dataset(np.ones((2, 2)), np.array([0.0, 1.0])).logistic(), "binary labels"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
