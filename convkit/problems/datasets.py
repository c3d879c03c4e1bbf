"""Data that needs no download, and splits of data across workers.

* :func:`breast_cancer`: scikit-learn's bundled Wisconsin breast-cancer set (569 x 30),
  standardised features, labels in {-1, +1} (needs the ``data`` extra: scikit-learn);
* :func:`load_svmlight`: an svmlight/LIBSVM file as a sparse CSR matrix (through
  :func:`sklearn.datasets.load_svmlight_file` when available, else a small pure-Python parser;
  both refuse the same files, with errors naming the file and line);
* synthetic generators: :func:`synthetic_least_squares`, :func:`synthetic_logistic`,
  :func:`synthetic_sparse`;
* worker splits (lists of row-index arrays, the ``partition`` of
  :class:`~convkit.problems.finite_sum.FiniteSum`): :func:`split_iid`, :func:`split_by_label`
  (each worker gets mostly one class: rows sorted by label and cut into equal blocks, the
  "pathological non-iid" split of McMahan et al. 2017) and :func:`split_dirichlet` (class
  proportions per worker drawn from Dirichlet(alpha), Hsu, Qi & Brown 2019).

A :class:`Dataset` holds ``X`` (dense array or CSR), ``y`` and a name, validated on creation,
and builds finite-sum problems with :meth:`Dataset.least_squares` / :meth:`Dataset.logistic`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..validation import check_finite_array, check_int, check_real
from .least_squares import _random_orthogonal, spectrum

__all__ = [
    "MAX_FEATURES",
    "Dataset",
    "binary_labels",
    "breast_cancer",
    "load_svmlight",
    "split_by_label",
    "split_dirichlet",
    "split_iid",
    "synthetic_least_squares",
    "synthetic_logistic",
    "synthetic_sparse",
]


def _validate(X: Any, y: Any) -> tuple[Any, np.ndarray]:
    if hasattr(X, "tocsr"):
        X = X.tocsr().astype(np.float64)
    else:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D (n, d) array, got shape {X.shape}")
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(
            f"y must have shape (n,) = ({X.shape[0]},) to match the rows of X, got shape {y.shape}"
        )
    check_finite_array("X", X)
    check_finite_array("y", y)
    return X, y


def binary_labels(y: Any) -> np.ndarray:
    """Map labels with exactly two distinct values to {-1, +1} (the larger value to +1).

    Labels already in {-1, +1} are returned unchanged; anything else raises."""
    y = np.asarray(y, dtype=np.float64)
    vals = np.unique(y)
    if vals.size != 2:
        raise ValueError(
            f"labels must take exactly two distinct values for a binary task, got {vals.size} "
            f"({vals[:5].tolist()}{'...' if vals.size > 5 else ''})"
        )
    return np.where(y == vals[1], 1.0, -1.0)


@dataclass
class Dataset:
    """A data matrix ``X`` (n, d) (dense or CSR), targets ``y`` (n,) and a name."""

    X: Any
    y: np.ndarray
    name: str = "data"

    def __post_init__(self) -> None:
        self.X, self.y = _validate(self.X, self.y)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def sparse(self) -> bool:
        return hasattr(self.X, "tocsr")

    def least_squares(self, **kwargs: Any) -> Any:
        """:class:`~convkit.problems.finite_sum.FiniteLeastSquares` on this data."""
        from .finite_sum import FiniteLeastSquares

        return FiniteLeastSquares(self.X, self.y, name=self.name, **kwargs)

    def logistic(self, **kwargs: Any) -> Any:
        """:class:`~convkit.problems.finite_sum.FiniteLogistic` on this data (labels must be +-1)."""
        from .finite_sum import FiniteLogistic

        return FiniteLogistic(self.X, self.y, name=self.name, **kwargs)


def _standardize(X: np.ndarray) -> np.ndarray:
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - mu) / sd


def breast_cancer(standardize: bool = True) -> Dataset:
    """scikit-learn's bundled breast-cancer data (569 x 30), labels +1 = benign, -1 = malignant.

    Features are standardised (zero mean, unit variance) unless ``standardize=False``."""
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError as exc:
        raise ImportError(
            "breast_cancer() needs scikit-learn: install it with `pip install convkit[data]`"
        ) from exc
    X, y = load_breast_cancer(return_X_y=True)
    X = X.astype(np.float64)
    if standardize:
        X = _standardize(X)
    return Dataset(X, np.where(y == 1, 1.0, -1.0), "breast_cancer")


#: Default largest number of features (columns) :func:`load_svmlight` accepts: a feature
#: index beyond it is refused at the line that holds it, before any array of that many
#: entries exists (1e8 covers the LIBSVM collection's largest sets, kdd2012 has 54.7e6).
MAX_FEATURES = 10**8
#: The largest ``max_features``: LIBSVM (and scikit-learn's reader) hold indices as C ints.
_INDEX_CEILING = 2**31 - 1


def load_svmlight(
    path: str | Path,
    n_features: int | None = None,
    binary: bool = False,
    zero_based: bool | str = "auto",
    use_sklearn: bool | None = None,
    max_features: int = MAX_FEATURES,
) -> Dataset:
    """Read an svmlight/LIBSVM file (``label idx:value ...`` per line) into a CSR matrix.

    ``binary=True`` maps the two label values to {-1, +1}.  Column indices are 1-based in
    LIBSVM files; ``zero_based="auto"`` treats them as 0-based only if a 0 index occurs (the
    rule of scikit-learn).  ``use_sklearn=None`` uses scikit-learn when installed (its
    compiled parser), else a pure-Python parser; both accept and refuse the same files:

    * an empty file (or one of comments and blank lines only) is refused;
    * a line's indices must be strictly increasing, as the LIBSVM format states: a
      duplicate index (``2:1 2:5``) or a decreasing one is refused, never summed or sorted;
    * labels and values must be finite numbers; ``qid:`` entries and ``#`` comments are
      ignored;
    * the number of features ``d`` (largest index + 1 for 0-based, the largest index for
      1-based files, or ``n_features``) must be at most ``max_features`` (default
      :data:`MAX_FEATURES` = 1e8, at most ``2^31 - 1``): a larger index is refused at its
      line, before any array of ``d`` entries is allocated.

    ``path`` is a path (``str`` or ``os.PathLike``); an open file is refused with a
    ``TypeError`` saying to pass its path.

    Every error about the content is a ``ValueError`` that names the file and the line
    (``path:line: ...``); scikit-learn's own messages are replaced by those of the
    pure-Python parser, which re-reads the file only on that error path.
    """
    import scipy.sparse as sp

    if not isinstance(path, (str, os.PathLike)):
        what = f"an open file ({type(path).__name__})" if hasattr(path, "read") else repr(path)
        raise TypeError(
            f"path must be the path of an svmlight file (str or os.PathLike), got {what}; "
            "unlike scikit-learn's reader this one takes no open file: pass its path "
            "(load_svmlight(f.name) for a file opened from disk)"
        )
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path must be an existing svmlight file, got {str(path)!r}")
    max_features = check_int("max_features", max_features, low=1, high=_INDEX_CEILING)
    if n_features is not None:
        n_features = check_int("n_features", n_features, low=1)
        if n_features > max_features:
            raise ValueError(
                f"n_features must be <= max_features = {max_features}, got {n_features} "
                "(raise max_features, at most 2^31 - 1, for wider data)"
            )
    if zero_based not in (True, False, "auto"):
        raise ValueError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    if use_sklearn is None:
        try:
            import sklearn  # noqa: F401

            use_sklearn = True
        except ImportError:
            use_sklearn = False
    if use_sklearn:
        X, y = _read_with_sklearn(path, n_features, zero_based, max_features)
        X = sp.csr_matrix(X)
    else:
        X, y = _parse_svmlight(path, n_features, zero_based, max_features)
    if binary:
        y = binary_labels(y)
    return Dataset(X, y, path.stem)


def _read_with_sklearn(
    path: Path, n_features: int | None, zero_based: bool | str, max_features: int
) -> tuple[Any, Any]:
    """scikit-learn's reader with the checks of :func:`_parse_svmlight`: on any refusal (its
    own, or a result that breaks a rule: no rows, too many features, non-finite entries)
    the pure-Python parser re-reads the file and raises its message with the line."""
    from sklearn.datasets import load_svmlight_file

    try:
        X, y = load_svmlight_file(
            str(path), n_features=n_features, zero_based=zero_based, dtype=np.float64
        )
    except (ValueError, OverflowError) as exc:
        _parse_svmlight(path, n_features, zero_based, max_features)  # raises with the line
        raise ValueError(f"{path}: {exc}") from exc
    data = X.data if hasattr(X, "data") else np.asarray(X)
    if (
        X.shape[0] == 0
        or X.shape[1] > max_features
        or not np.all(np.isfinite(data))
        or not np.all(np.isfinite(y))
    ):
        _parse_svmlight(path, n_features, zero_based, max_features)  # raises with the line
        raise ValueError(f"{path}: refused (no data rows, d > {max_features} or non-finite)")
    return X, y


def _parse_svmlight(
    path: Path,
    n_features: int | None,
    zero_based: bool | str,
    max_features: int = MAX_FEATURES,
) -> tuple[Any, Any]:
    """Pure-Python svmlight parser (comments after '#', ``qid:`` ignored) with the rules of
    :func:`load_svmlight`; errors name ``path:line``."""
    import scipy.sparse as sp

    labels: list[float] = []
    indptr, cols, vals, row_line = [0], [], [], []
    with open(path, "rb") as fh:
        for lineno, raw_bytes in enumerate(fh, 1):
            where = f"{path}:{lineno}"
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}: not UTF-8 text ({exc.reason})") from exc
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            labels.append(_number(parts[0], where, "label", raw))
            prev = -1
            for tok in parts[1:]:
                key, sep, val = tok.partition(":")
                if key == "qid":
                    continue
                try:
                    if not sep:
                        raise ValueError(tok)
                    idx = int(key)
                except ValueError as exc:
                    raise ValueError(
                        f"{where}: malformed svmlight pair {tok!r} (expected index:value) in "
                        f"the line {raw.strip()!r}"
                    ) from exc
                if idx < 0:
                    raise ValueError(f"{where}: feature index {idx} < 0 in {tok!r}")
                if idx > max_features:
                    raise ValueError(
                        f"{where}: feature index {idx} beyond the limit max_features = "
                        f"{max_features} (refused before allocating; pass a larger "
                        "max_features, at most 2^31 - 1, for wider data)"
                    )
                if idx <= prev:
                    raise ValueError(
                        f"{where}: feature index {idx} after {prev}: a line's indices must be "
                        "strictly increasing (LIBSVM format; a duplicate index is refused, "
                        "not summed)"
                    )
                prev = idx
                cols.append(idx)
                vals.append(_number(val, where, f"value of index {idx}", raw))
            indptr.append(len(cols))
            row_line.append(lineno)
    if not labels:
        raise ValueError(
            f"{path}: no data rows (the file is empty or holds only comments and blank "
            "lines); an svmlight file has one 'label index:value ...' line per row"
        )
    c = np.asarray(cols, dtype=np.int64)
    ptr = np.asarray(indptr, dtype=np.int64)

    def line_of(entry: int) -> str:
        return f"{path}:{row_line[int(np.searchsorted(ptr, entry, side='right')) - 1]}"

    shift = 0 if (zero_based is True or (zero_based == "auto" and c.size and c.min() == 0)) else 1
    c = c - shift
    if c.size and c.min() < 0:
        raise ValueError(
            f"{line_of(int(np.argmin(c)))}: feature index 0 in a 1-based file "
            f"(zero_based={zero_based!r}); pass zero_based=True or 'auto' for 0-based indices"
        )
    d = int(c.max()) + 1 if c.size else 0
    if d > max_features:
        raise ValueError(
            f"{line_of(int(np.argmax(c)))}: feature index {d - 1} (0-based) gives "
            f"{d} features, beyond the limit max_features = {max_features}"
        )
    if n_features is not None:
        if n_features < d:
            raise ValueError(
                f"{line_of(int(np.argmax(c)))}: feature index {d - 1 + shift} needs "
                f"n_features >= {d}, got n_features = {n_features}"
            )
        d = n_features
    X = sp.csr_matrix((np.asarray(vals, dtype=np.float64), c, ptr), shape=(len(labels), d))
    return X, np.asarray(labels)


def _number(token: str, where: str, what: str, raw: str) -> float:
    """``token`` as a finite float, or a ``ValueError`` naming ``where`` (``path:line``)."""
    try:
        v = float(token)
    except ValueError as exc:
        raise ValueError(
            f"{where}: malformed svmlight {what} {token!r} in the line {raw.strip()!r}"
        ) from exc
    if not np.isfinite(v):
        raise ValueError(f"{where}: the {what} must be a finite number, got {token!r}")
    return v


# ---------------------------------------------------------------------- synthetic data
def _design(
    n: int, d: int, spec: Any, rotate: bool, rng: np.random.Generator, seed: int
) -> np.ndarray:
    h = spectrum(spec, d)
    X = rng.standard_normal((n, d)) * np.sqrt(h)
    if rotate:
        X = X @ _random_orthogonal(d, seed).T
    return X


def synthetic_least_squares(
    n: int,
    d: int,
    spectrum: str | Callable | Any = "flat",
    noise: float = 1.0,
    rotate: bool = False,
    seed: int = 0,
) -> tuple[Dataset, np.ndarray]:
    """Gaussian rows ``x ~ N(0, H)``, ``y = <x, theta0> + noise eps``; returns (data, theta0)
    with ``theta0 ~ N(0, I/d)`` seeded."""
    n, d = check_int("n", n, low=1), check_int("d", d, low=1)
    noise = check_real("noise", noise, low=0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    theta0 = rng.standard_normal(d) / np.sqrt(d)
    X = _design(n, d, spectrum, rotate, rng, seed)
    y = X @ theta0 + noise * rng.standard_normal(n)
    return Dataset(X, y, "synthetic_least_squares"), theta0


def synthetic_logistic(
    n: int,
    d: int,
    spectrum: str | Callable | Any = "flat",
    theta0: Any = None,
    rotate: bool = False,
    seed: int = 0,
) -> tuple[Dataset, np.ndarray]:
    """Gaussian rows ``x ~ N(0, H)``, ``P(y = 1 | x) = sigmoid(<x, theta0>)``; returns
    (data, theta0)."""
    n, d = check_int("n", n, low=1), check_int("d", d, low=1)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 12]))
    if theta0 is None:
        theta0 = rng.standard_normal(d) / np.sqrt(d)
    theta0 = np.asarray(theta0, dtype=np.float64)
    if theta0.shape != (d,):
        raise ValueError(f"theta0 must have shape (d,) = ({d},), got {theta0.shape}")
    X = _design(n, d, spectrum, rotate, rng, seed)
    t = X @ theta0
    p = 0.5 * (1.0 + np.tanh(0.5 * t))  # sigmoid without overflow
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    return Dataset(X, y, "synthetic_logistic"), theta0


def synthetic_sparse(
    n: int,
    d: int,
    density: float = 0.01,
    task: str = "logistic",
    noise: float = 0.5,
    seed: int = 0,
) -> tuple[Dataset, np.ndarray]:
    """Sparse CSR rows (each entry nonzero with probability ``density``, values N(0, 1/(d
    density)) so that ``E||x||^2 = 1``), with least-squares (``noise`` level) or logistic
    labels from a seeded ``theta0 ~ N(0, I)``; returns (data, theta0)."""
    import scipy.sparse as sp

    n, d = check_int("n", n, low=1), check_int("d", d, low=1)
    density = check_real("density", density, low=0, high=1, low_inclusive=False)
    if task not in ("logistic", "least_squares"):
        raise ValueError(f"task must be 'logistic' or 'least_squares', got {task!r}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 13]))
    theta0 = rng.standard_normal(d)
    X = sp.random(
        n,
        d,
        density=density,
        format="csr",
        random_state=rng,
        data_rvs=lambda k: rng.standard_normal(k) / np.sqrt(d * density),
    )
    t = np.asarray(X @ theta0).ravel()
    if task == "least_squares":
        y = t + check_real("noise", noise, low=0) * rng.standard_normal(n)
    else:
        y = np.where(rng.random(n) < 0.5 * (1.0 + np.tanh(0.5 * t)), 1.0, -1.0)
    return Dataset(X, y, f"synthetic_sparse_{task}"), theta0


# ---------------------------------------------------------------------- splits
def split_iid(n: int, workers: int, seed: int = 0) -> list[np.ndarray]:
    """A seeded random permutation of ``range(n)`` cut into ``workers`` near-equal blocks."""
    n, workers = check_int("n", n, low=1), check_int("workers", workers, low=1)
    if workers > n:
        raise ValueError(f"workers must be <= n = {n} (each worker needs a row), got {workers}")
    perm = np.random.default_rng(np.random.SeedSequence([seed, 21])).permutation(n)
    return [np.sort(b) for b in np.array_split(perm, workers)]


def split_by_label(y: Any, workers: int, seed: int = 0) -> list[np.ndarray]:
    """Rows sorted by label (random order within a label), cut into ``workers`` near-equal
    contiguous blocks: each worker gets mostly one class."""
    y = np.asarray(y)
    workers = check_int("workers", workers, low=1)
    if y.ndim != 1 or workers > y.size:
        raise ValueError(
            f"y must be 1-D with at least workers = {workers} entries, got shape {y.shape}"
        )
    rng = np.random.default_rng(np.random.SeedSequence([seed, 22]))
    order = np.lexsort((rng.random(y.size), y))
    return [np.sort(b) for b in np.array_split(order, workers)]


def split_dirichlet(
    y: Any, workers: int, alpha: float, seed: int = 0, max_tries: int = 100
) -> list[np.ndarray]:
    """Each class's rows spread across workers with proportions ``q_c ~ Dirichlet(alpha 1_P)``
    (seeded; redrawn, at most ``max_tries`` times, until every worker has a row).  Small
    ``alpha`` gives workers dominated by few classes; large ``alpha`` approaches an iid split."""
    y = np.asarray(y)
    workers = check_int("workers", workers, low=1)
    alpha = check_real("alpha", alpha, low=0, low_inclusive=False)
    if y.ndim != 1 or workers > y.size:
        raise ValueError(
            f"y must be 1-D with at least workers = {workers} entries, got shape {y.shape}"
        )
    rng = np.random.default_rng(np.random.SeedSequence([seed, 23]))
    classes = np.unique(y)
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(workers)]
        for c in classes:  # loop over classes (few), not rows
            rows = rng.permutation(np.flatnonzero(y == c))
            q = rng.dirichlet(np.full(workers, alpha))
            cuts = np.round(np.cumsum(q)[:-1] * rows.size).astype(int)
            for p, blk in enumerate(np.split(rows, cuts)):
                parts[p].append(blk)
        blocks = [np.sort(np.concatenate(p)) for p in parts]
        if all(b.size for b in blocks):
            return blocks
    raise ValueError(
        f"split_dirichlet left a worker without rows in {max_tries} draws: use a larger alpha "
        f"(got {alpha:g}) or fewer workers (got {workers}) for {y.size} rows"
    )
