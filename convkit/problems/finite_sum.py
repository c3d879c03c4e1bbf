"""Finite-sum least squares and logistic regression on a data matrix.

Objective (rows ``a_i`` of ``A``, targets ``y_i``; derived here):

    f(theta) = sum_i w_i l_i(<a_i, theta>) + lam/2 ||theta||^2,

with ``l_i(z) = (z - y_i)^2 / 2`` (``loss="squared"``) or ``log(1 + exp(-y_i z))``
(``loss="logistic"``, ``y_i in {-1, +1}``).  Without a partition ``w_i = 1/n``: the usual
empirical risk.  With a ``partition`` (one array of row indices per worker, worker ``p``
sampling only from its block ``S_p``), the engine's average over workers minimises
``(1/P) sum_p f_p`` with ``f_p = (1/|S_p|) sum_{i in S_p} l_i + lam/2 ||theta||^2``; hence
``w_i = (1/P) sum_p [i in S_p] / |S_p|`` (equal to ``1/n`` for equal blocks covering every
row once).  The outer variance at the optimum is
``zeta^2 = (1/P) sum_p ||grad f_p(theta*)||^2`` and the inner (sampling) variance is
``sigma^2 = (1/P) sum_p mean_{i in S_p} ||grad l_i(theta*) + lam theta* - grad f_p(theta*)||^2``
(``noise = sigma``).

Sampling (a batch is the array of row indices ``idx`` of shape (R, P, b)):

* ``"replacement"``: i.i.d. uniform rows of the worker's block;
* ``"reshuffle"``: random reshuffling; every (replicate, worker) pair walks through its own
  random permutation of its block, ``b`` rows per local step, drawing a fresh permutation
  when the block is exhausted (a batch may straddle two epochs), so each row is visited
  exactly once per epoch per worker.  The position state lives in the problem, keyed by the
  random stream that drives the sampling: the engine creates one stream per simulation
  chunk, so each chunk (and each call of :func:`convkit.simulate`) starts fresh epochs, and the
  ``sample(stream, shape)`` protocol is unchanged.  Its memory is one int32 permutation
  table of shape (R, P, max block size).  Caveat: the engine slices the batch to
  ``[:, :P, :b]`` for algorithms with fewer workers or a smaller batch; those algorithms see a
  subset of each epoch.

Constants: ``theta*`` is solved by (damped) Newton steps to ``||grad f(theta*)|| <= tol``
(default 1e-10; L-BFGS first when there is no l2 term for logistic); ``L = lambda_max(A^T W A)``
(times 1/4 for logistic) ``+ lam``; ``L_max = max_i ||a_i||^2`` (times 1/4) ``+ lam`` (the
per-sample smoothness that limits SGD); ``mu = lambda_min`` of the Hessian at ``theta*``.
Metrics: exact ``excess_risk = f(theta) - f*`` (as a sum of per-row Bregman divergences,
``>= 0`` and free of cancellation), ``hnorm2 = ||theta - theta*||^2_{H*}`` and ``dist2``.

Same numbers on any CPU (issue 36).  With a seed, ``theta*``, the constants, the metrics and
the gradients of dense data have the same bits on every x86-64 CPU: every sum is taken in an
order fixed by the code (:mod:`convkit.problems._fixed_order`: products with ``A`` and
``A^T`` summed in increasing index, dot products as NumPy's pairwise sums, Newton's system
by a fixed-order Cholesky factor, the eigenvalues of ``H*`` by the Jacobi method of
:mod:`convkit._symmetric_eigen`) and the logistic loss's ``exp`` / ``log1p`` come from the C
library (:mod:`convkit.problems._libm_loss`), not from the BLAS's kernels and NumPy's SIMD
loops, which the CPU selects at run time.  Not covered: the L-BFGS warm start of logistic
regression without an l2 term (SciPy's), the eigenvalues of ``d > 300`` (``mu`` and ``L``
by LAPACK and ARPACK: the Jacobi method's ``O(d^3)`` sweeps would take minutes) and the
least-squares fallback of a singular Newton system (LAPACK).

Data stay as given: a dense NumPy array or a SciPy sparse matrix (converted to CSR).  Sparse
gradients gather the batch's nonzeros directly from the CSR arrays (no dense ``(R, P, b, d)``
block); with numba installed, a fused kernel makes the SGD update in one pass for dense and
sparse data alike (``convkit.kernels(enabled=False)`` or ``CONVKIT_NO_NUMBA=1`` disables it).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._symmetric_eigen import symmetric_eigenvalues
from ..backend import RandomStream, namespace_of, to_numpy
from ..validation import (
    Parameter,
    check_finite_array,
    instance,
    options,
    real,
    text,
)
from ._finite_sum_kernels import get_kernels as _get_kernels
from ._fixed_order import cholesky_solve, row_dot, vec_mat
from ._libm_loss import bernoulli_kl, sigmoid, softplus
from .base import Problem

__all__ = ["FiniteLeastSquares", "FiniteLogistic", "FiniteSum", "IndexBatch"]

LOSSES = ("squared", "logistic")
SAMPLINGS = ("replacement", "reshuffle")


@dataclass
class IndexBatch:
    """Row indices into the data matrix, shape (R, P, b)."""

    idx: Any


def _is_sparse(A: Any) -> bool:
    return hasattr(A, "tocsr") and hasattr(A, "nnz")


class FiniteSum(Problem):
    """Finite-sum least squares or logistic regression (see the module docstring).

    Parameters
    ----------
    A:
        Data matrix (n, d): dense array or SciPy sparse matrix (kept sparse, as CSR).
    y:
        Targets (n,); in {-1, +1} for ``loss="logistic"``.
    loss:
        ``"squared"`` or ``"logistic"``.
    lam:
        l2 regularisation ``lam >= 0``.
    sampling:
        ``"replacement"`` or ``"reshuffle"``.
    partition:
        Optional list of row-index arrays, one per worker (non-iid data).
    tol:
        Gradient-norm tolerance of the solve for ``theta*``.
    name:
        Optional data-set name (for :meth:`describe`).
    """

    parameters: ClassVar[dict[str, Parameter]] = {
        "A": instance("the (n, d) data matrix, dense or sparse, finite",
                      wrong=(np.full((3, 2), np.nan), np.ones(3))),
        "y": instance("targets of shape (n,), finite (labels in {-1, +1} for the logistic loss)",
                      wrong=(np.ones(2), np.full(24, np.nan))),
        "loss": options(*LOSSES, default="squared", doc="the loss"),
        "lam": real(low=0, default=0.0, doc="ridge penalty lambda"),
        "sampling": options(*SAMPLINGS, default="replacement", doc="how rows are drawn"),
        "partition": instance("one array of row indices per worker", default=None,
                              optional=True, wrong=([np.array([99])], [])),
        "tol": real(low=0, low_inclusive=False, default=1e-10,
                    doc="gradient-norm tolerance of the solve for theta*"),
        "name": text(default=None, optional=True, doc="data-set name"),
    }  # fmt: skip

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """24 rows of four Gaussian features, targets of a linear model with noise 0.1, rows
        drawn by reshuffling."""
        rng = np.random.default_rng(0)
        A = rng.standard_normal((24, 4))
        y = A @ np.ones(4) + 0.1 * rng.standard_normal(24)
        return {"A": A, "y": y, "sampling": "reshuffle"}

    def __init__(
        self,
        A: Any,
        y: Any,
        loss: str = "squared",
        lam: float = 0.0,
        sampling: str = "replacement",
        partition: list | None = None,
        tol: float = 1e-10,
        name: str | None = None,
    ) -> None:
        self.loss_kind = self.checked("loss", loss)
        self.lam = self.checked("lam", lam)
        self.sampling = self.checked("sampling", sampling)
        self.tol = self.checked("tol", tol)
        self.name = self.checked("name", name)
        if _is_sparse(A):
            A = A.tocsr().astype(np.float64)
            A.sum_duplicates()
            A.sort_indices()
            self.sparse = True
        else:
            A = np.ascontiguousarray(np.asarray(A, dtype=np.float64))
            if A.ndim != 2:
                raise ValueError(f"A must be a 2-D (n, d) data matrix, got shape {A.shape}")
            self.sparse = False
        check_finite_array("A", A)
        n, d = A.shape
        if n < 1 or d < 1:
            raise ValueError(f"A must have at least one row and one column, got shape {A.shape}")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (n,):
            raise ValueError(
                f"y must have shape (n,) = ({n},) to match the rows of A, got shape {y.shape}"
            )
        check_finite_array("y", y)
        if self.loss_kind == "logistic" and not np.all(np.abs(y) == 1):
            bad = np.unique(y[np.abs(y) != 1])[:5]
            raise ValueError(
                f"y must hold binary labels in {{-1, +1}} for loss='logistic', found {bad.tolist()}"
            )
        self.A, self.y, self.n, self.d = A, y, n, d
        #: ``A^T`` C-contiguous (dense data): the operand of the fixed-order ``A theta``
        self._A_T = None if self.sparse else np.ascontiguousarray(A.T)
        self._set_partition(partition)
        self.noise = None
        self._reshuffle_state: dict[int, Any] = {}
        self._cache: dict[Any, Any] = {}
        self.theta_star, self.grad_norm_star = self._solve()
        self._finish_constants()

    # ------------------------------------------------------------------ set-up
    def _set_partition(self, partition: list | None) -> None:
        n = self.n
        if partition is None:
            self.partition = None
            self.block_sizes = np.array([n])
            self.block_table = None
            self.weights = np.full(n, 1.0 / n)
            self.heterogeneous = False
            return
        if isinstance(partition, np.ndarray) and partition.ndim == 1:
            partition = [partition]
        blocks = []
        for p, blk in enumerate(partition):
            b = np.asarray(blk)
            if b.ndim != 1 or b.size == 0 or not np.issubdtype(b.dtype, np.integer):
                raise ValueError(
                    f"partition[{p}] must be a non-empty 1-D array of integer row indices, "
                    f"got shape {b.shape} and dtype {b.dtype}"
                )
            if b.min() < 0 or b.max() >= n:
                raise ValueError(
                    f"partition[{p}] must hold row indices in [0, {n - 1}], "
                    f"got values in [{b.min()}, {b.max()}]"
                )
            if np.unique(b).size != b.size:
                raise ValueError(f"partition[{p}] must not repeat a row index")
            blocks.append(b.astype(np.int64))
        if not blocks:
            raise ValueError("partition must hold at least one block of row indices")
        P = len(blocks)
        self.partition = blocks
        self.block_sizes = np.array([b.size for b in blocks])
        table = np.zeros((P, self.block_sizes.max()), dtype=np.int64)
        w = np.zeros(n)
        for p, b in enumerate(blocks):  # set-up only (not a hot path)
            table[p, : b.size] = b
            w[b] += 1.0 / (P * b.size)
        self.block_table = table
        self.weights = w
        self.heterogeneous = True

    @property
    def workers(self) -> int | None:
        """Number of partition blocks (None without partition)."""
        return None if self.partition is None else len(self.partition)

    # ------------------------------------------------------------------ linear algebra
    def _matvec(self, th: np.ndarray) -> np.ndarray:
        """``Z[m, i] = <a_i, th_m>`` for th (m, d) -> (m, n), summed over the coordinates in
        increasing order (:func:`~convkit.problems._fixed_order.vec_mat`; SciPy's CSR product
        for sparse data, a loop over each row's nonzeros in order): the same bits on every
        x86-64 CPU, where the BLAS's product sums in its kernel's order."""
        if self.sparse:
            return np.asarray(self.A @ th.T).T
        return vec_mat(np, th, self._A_T)

    def _rmatvec(self, G: np.ndarray) -> np.ndarray:
        """``sum_i G[m, i] a_i`` for G (m, n) -> (m, d), summed over the rows ``i`` in
        increasing order (as :meth:`_matvec`)."""
        if self.sparse:
            return np.asarray(self.A.T @ G.T).T
        return vec_mat(np, G, self.A)

    # the logistic loss's exp / log through the C library (:mod:`._libm_loss`): NumPy's SIMD
    # loops differ in the last bit between CPUs
    def _dloss(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.loss_kind == "squared":
            return z - y
        return -y * sigmoid(-y * z)

    def _curv(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.loss_kind == "squared":
            return np.ones_like(z)
        s = sigmoid(y * z)
        return s * (1.0 - s)

    def _values(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.loss_kind == "squared":
            r = z - y
            return 0.5 * (r * r)
        return softplus(-y * z)

    def _full_grad(self, th: np.ndarray) -> np.ndarray:
        z = self._matvec(th)
        return self._rmatvec(self.weights * self._dloss(z, self.y)) + self.lam * th

    def _weighted_gram(self, c: np.ndarray) -> np.ndarray:
        """``A^T diag(c) A`` as a dense (d, d) array (dense data: summed over the rows in
        increasing order, :func:`~convkit.problems._fixed_order.vec_mat`)."""
        if self.sparse:
            import scipy.sparse as sp

            return np.asarray((self.A.T @ sp.diags(c) @ self.A).toarray())
        return vec_mat(np, self._A_T * c, self.A)

    def _hessian(self, th: np.ndarray) -> np.ndarray:
        if self.loss_kind == "squared":  # constant Hessian: build it once
            if getattr(self, "_hess_const", None) is None:
                Hm = self._weighted_gram(self.weights)
                Hm[np.diag_indices_from(Hm)] += self.lam
                self._hess_const = Hm
            return self._hess_const.copy()
        z = self._matvec(th[None])[0]
        Hm = self._weighted_gram(self.weights * self._curv(z, self.y))
        Hm[np.diag_indices_from(Hm)] += self.lam
        return Hm

    def _solve(self) -> tuple[np.ndarray, float]:
        """``theta*`` to ``||grad f|| <= tol``: Newton (least-squares solves of the Hessian
        system, so rank-deficient least squares gives the minimum-norm-increment solution),
        with backtracking on ``f`` for logistic; L-BFGS warm start for logistic without l2."""
        d = self.d
        th = np.zeros(d)
        if self.loss_kind == "logistic" and self.lam == 0:
            from scipy.optimize import minimize

            res = minimize(
                lambda t: float(self._objective(t[None])[0]),
                th,
                jac=lambda t: self._full_grad(t[None])[0],
                method="L-BFGS-B",
                options={"maxiter": 2000, "gtol": 1e-9},
            )
            th = res.x
        for _ in range(100):
            g = self._full_grad(th[None])[0]
            gn = _norm(g)
            if gn <= self.tol:
                return th, gn
            step = _solve_psd(self._hessian(th), g)
            if self.loss_kind == "squared":
                th = th - step
                continue
            f0 = float(self._objective(th[None])[0])
            t = 1.0
            while t > 1e-10:
                cand = th - t * step
                if float(self._objective(cand[None])[0]) <= f0 - 1e-4 * t * row_dot(np, g, step):
                    break
                t *= 0.5
            th = cand
            if not np.all(np.isfinite(th)) or _norm(th) > 1e12:
                break
        g = self._full_grad(th[None])[0]
        gn = _norm(g)
        if gn <= self.tol:
            return th, gn
        hint = (
            " (logistic data may be linearly separable: add an l2 term, lam > 0)"
            if self.loss_kind == "logistic" and self.lam == 0
            else ""
        )
        raise RuntimeError(
            f"could not solve for theta* to ||grad f|| <= tol = {self.tol:g}: reached {gn:.3g}{hint}"
        )

    def _finish_constants(self) -> None:
        ts = self.theta_star
        z = self._matvec(ts[None])[0]
        used = self.weights > 0
        if self.loss_kind == "logistic" and self.lam == 0 and np.all(self.y[used] * z[used] > 0):
            # theta separates the data: f(c theta) -> 0 as c -> infinity, no minimiser exists
            raise RuntimeError(
                "the logistic data are linearly separable, so f has no minimiser "
                "(the solver stopped at a small gradient far out): add an l2 term, lam > 0"
            )
        self._z_star = z
        self.f_star = float(self._objective(ts[None])[0])
        self._grad_star = self._full_grad(ts[None])[0]
        self._c_star = self._curv(z, self.y)
        scale = 1.0 if self.loss_kind == "squared" else 0.25
        self.H_star = self._hessian(ts)
        eig_star = _eigenvalues(self.H_star)
        self.mu = max(float(eig_star[0]), 0.0)
        if self.loss_kind == "squared":  # H* = A^T W A + lam I
            self.L = float(eig_star[-1])
        else:
            self.L = _largest_eigenvalue(self._weighted_gram(self.weights)) * scale + self.lam
        if self.sparse:
            row_norm2 = np.asarray(self.A.multiply(self.A).sum(axis=1)).ravel()
        else:
            row_norm2 = row_dot(np, self.A, self.A)
        self.row_norm2 = row_norm2
        self.L_max = float(row_norm2[self.weights > 0].max()) * scale + self.lam
        # per-sample gradients at theta*: grad l_i + lam theta* = dl_i a_i + lam theta*
        dl = self._dloss(z, self.y)
        P = 1 if self.partition is None else len(self.partition)
        blocks = [np.arange(self.n)] if self.partition is None else self.partition
        zeta2, sigma2 = 0.0, 0.0
        for b in blocks:  # set-up only
            Ab = self.A[b]
            gp = self._block_rmatvec(Ab, dl[b]) / b.size + self.lam * ts
            zeta2 += row_dot(np, gp, gp) / P
            # mean ||dl_i a_i + lam ts - gp||^2 = mean dl_i^2 |a_i|^2 + 2 mean dl_i a_i.(lam ts - gp)
            #                                    + |lam ts - gp|^2
            c = self.lam * ts - gp
            Ac = self._block_matvec(Ab, c)
            dlb = dl[b]
            sigma2 += (
                float(np.mean(dlb * dlb * row_norm2[b]) + 2 * np.mean(dlb * Ac) + row_dot(np, c, c))
                / P
            )
        self.zeta2 = zeta2 if self.partition is not None else 0.0
        self.sigma2 = max(sigma2, 0.0)
        self.noise = float(np.sqrt(self.sigma2))

    def _block_matvec(self, Ab: Any, c: np.ndarray) -> np.ndarray:
        """``Ab c`` for a block of rows ``Ab`` (each row's sum in a fixed order)."""
        if self.sparse:
            return np.asarray(Ab @ c).ravel()
        return row_dot(np, Ab, c)

    def _block_rmatvec(self, Ab: Any, v: np.ndarray) -> np.ndarray:
        """``Ab^T v`` for a block of rows ``Ab`` (summed over its rows in increasing order)."""
        if self.sparse:
            return np.asarray(Ab.T @ v).ravel()
        return vec_mat(np, v, Ab)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": f"finite_{self.loss_kind}",
            "name": self.name,
            "n": self.n,
            "d": self.d,
            "sparse": self.sparse,
            "lam": self.lam,
            "sampling": self.sampling,
            "workers": self.workers,
            "zeta2": self.zeta2,
            "sigma2": self.sigma2,
        }

    # ------------------------------------------------------------------ sampling
    @property
    def required_workers(self) -> int | None:
        """With a ``partition``, one worker per block; otherwise any number."""
        return None if self.partition is None else len(self.partition)

    def sample(self, stream: RandomStream, shape: tuple[int, int, int]) -> IndexBatch:
        """Row indices of shape ``(R, P, b)`` (see the module docstring)."""
        R, P, b = shape
        if self.partition is not None and P != len(self.partition):
            raise ValueError(
                f"workers must equal the number of partition blocks ({len(self.partition)}) "
                f"for this non-iid problem, got {P}"
            )
        if self.sampling == "replacement":
            if self.partition is None:
                return IndexBatch(to_numpy(stream.integers(self.n, (R, P, b))))
            local = to_numpy(stream.integers(self.block_sizes[None, :, None], (R, P, b)))
            return IndexBatch(self.block_table[np.arange(P)[None, :, None], local])
        return IndexBatch(self._reshuffle(stream, R, P, b))

    def _new_perms(self, stream: RandomStream, R: int, workers: np.ndarray) -> np.ndarray:
        """Fresh permutations (R, len(workers), max block) of each worker's local positions."""
        m = self.block_sizes.max()
        keys = np.asarray(to_numpy(stream.uniform((R, workers.size, m))), dtype=np.float64)
        if self.partition is not None:
            pad = np.arange(m)[None, :] >= self.block_sizes[workers][:, None]  # (w, m)
            keys[:, pad] = 2.0  # padded slots sort last
        return np.argsort(keys, axis=-1).astype(np.int32)

    def _reshuffle(self, stream: RandomStream, R: int, P: int, b: int) -> np.ndarray:
        key = id(stream)
        st = self._reshuffle_state.get(key)
        if st is None or st["ref"]() is not stream or st["perm"].shape[:2] != (R, P):
            sizes = (
                np.full(P, self.n) if self.partition is None else self.block_sizes.astype(np.int64)
            )
            st = {
                "ref": weakref.ref(stream, lambda _r, k=key: self._reshuffle_state.pop(k, None)),
                "perm": np.zeros((R, P, sizes.max()), dtype=np.int32),
                "pos": sizes.copy(),  # exhausted: the first call draws epoch 1
                "sizes": sizes,
            }
            self._reshuffle_state[key] = st
        perm, pos, sizes = st["perm"], st["pos"], st["sizes"]
        t = pos[:, None] + np.arange(b)[None, :]  # (P, b) positions in the current epoch
        e = t // sizes[:, None]  # epochs ahead (0 = current)
        w = t - e * sizes[:, None]
        out = np.empty((R, P, b), dtype=np.int64)
        for ep in range(int(e.max()) + 1):  # loop over epochs (usually 1 or 2), not workers
            if ep > 0:
                need = np.flatnonzero(e[:, -1] >= ep)
                perm[:, need] = self._new_perms(stream, R, need)
            pp, jj = np.nonzero(e == ep)
            if pp.size:
                out[:, pp, jj] = perm[:, pp, w[pp, jj]]
        st["pos"] = pos + b - e[:, -1] * sizes
        if self.partition is None:
            return out
        return self.block_table[np.arange(P)[None, :, None], out]

    # ------------------------------------------------------------------ gradients
    def _batch_np(self, theta: Any, batch: IndexBatch) -> tuple[np.ndarray, np.ndarray]:
        th = np.asarray(to_numpy(theta))
        idx = np.asarray(to_numpy(batch.idx))
        if th.shape[:2] != idx.shape[:2]:
            raise ValueError(
                f"theta of shape {th.shape} does not match the batch's (R, P) = {idx.shape[:2]}"
            )
        return th, idx

    def stochastic_grad(self, theta: Any, batch: IndexBatch) -> Any:
        """``(1/b) sum_j l'_{i_j}(<a_{i_j}, theta>) a_{i_j} + lam theta`` (shape (R, P, d))."""
        xp = namespace_of(theta)
        th, idx = self._batch_np(theta, batch)
        R, P, b = idx.shape
        y = self.y[idx]
        if not self.sparse:
            # sums in an order fixed by the code (not the BLAS's): over the coordinates
            # NumPy's pairwise sum, over the batch in increasing order
            X = self.A[idx]  # (R, P, b, d)
            z = row_dot(np, X, th[..., None, :])
            c = self._dloss(z, y) / b
            g = np.sum(c[..., :, None] * X, axis=-2)
        else:
            rows, cols, vals = self._gather(idx.ravel())
            owner = rows // b  # (r, p) flat index of each nonzero
            thf = th.reshape(R * P, self.d)
            z = np.bincount(rows, weights=vals * thf[owner, cols], minlength=R * P * b)
            c = (self._dloss(z.reshape(R, P, b), y) / b).ravel()
            g = np.bincount(
                owner * self.d + cols, weights=vals * c[rows], minlength=R * P * self.d
            ).reshape(R, P, self.d)
        if self.lam:
            g = g + self.lam * th
        return xp.asarray(g.astype(th.dtype, copy=False))

    def _gather(self, rows_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nonzeros of the CSR rows ``rows_idx``: (row position, column, value) arrays."""
        A = self.A
        starts = A.indptr[rows_idx]
        lens = A.indptr[rows_idx + 1] - starts
        total = int(lens.sum())
        rows = np.repeat(np.arange(rows_idx.size), lens)
        first = np.cumsum(lens) - lens
        pos = np.arange(total) - np.repeat(first - starts, lens)
        return rows, A.indices[pos], A.data[pos]

    def sgd_update(self, theta: Any, batch: IndexBatch, gamma: float, mean: Any = None) -> Any:
        """In place SGD step; one fused pass through numba when available.  If ``mean``
        (R, d) is given it receives the workers' mean of the updated ``theta``."""
        kernels = _get_kernels()
        if (
            kernels is not None
            and type(theta) is np.ndarray
            and theta.flags.c_contiguous
            and theta.dtype in (np.float64, np.float32)
            and (mean is None or (type(mean) is np.ndarray and mean.dtype == theta.dtype))
        ):
            idx = np.asarray(batch.idx)
            lossc = 0 if self.loss_kind == "squared" else 1
            g = theta.dtype.type(gamma)
            lam = theta.dtype.type(self.lam)
            want = mean is not None
            m = mean if want else np.empty((1, 1), dtype=theta.dtype)
            if self.sparse:
                A = self.A
                kernels[1](theta, idx, A.indptr, A.indices, A.data, self.y, lossc, lam, g, m, want)
            else:
                kernels[0](theta, idx, self.A, self.y, lossc, lam, g, m, want)
            return theta
        theta -= gamma * self.stochastic_grad(theta, batch)
        if mean is not None:
            mean[...] = namespace_of(theta).mean(theta, axis=1)
        return theta

    # ------------------------------------------------------------------ objective
    def _flat(self, theta: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        th = np.asarray(to_numpy(theta), dtype=np.float64)
        self.check_theta(th)
        return th.reshape(-1, self.d), th.shape[:-1]

    def _slices(self, m: int) -> list[slice]:
        """Chunks of the parameter axis so that (chunk, n) temporaries stay below 32 MB."""
        step = max(1, 2**22 // self.n)
        return [slice(i, i + step) for i in range(0, m, step)]

    def _objective(self, th: np.ndarray) -> np.ndarray:
        out = np.empty(th.shape[0])
        for sl in self._slices(th.shape[0]):
            out[sl] = row_dot(np, self._values(self._matvec(th[sl]), self.y), self.weights)
        return out + 0.5 * self.lam * row_dot(np, th, th)

    def errors(self, theta: Any) -> dict[str, Any]:
        """Exact metrics on the full data for ``theta`` of shape (..., d).

        ``excess_risk = <grad f(theta*), eta> + sum_i w_i D_i + lam/2 ||eta||^2`` where
        ``D_i = l_i(z_i) - l_i(z*_i) - l_i'(z*_i) (z_i - z*_i) >= 0`` is the per-row Bregman
        divergence (``(z_i - z*_i)^2 / 2`` for squares; a Bernoulli KL divergence for
        logistic); this equals ``f(theta) - f*`` exactly and has no cancellation.
        ``hnorm2 = eta^T H* eta``, ``dist2 = ||eta||^2``.  For least squares with ``d^2`` below
        the data size (``n d``, or ``nnz`` for sparse data) the quadratic form with the stored
        ``H*`` is used instead (same quantity, O(d^2) per point)."""
        xp = namespace_of(theta)
        th, lead = self._flat(theta)
        eta = th - self.theta_star
        m = th.shape[0]
        dist2 = row_dot(np, eta, eta)
        data_cost = self.A.nnz if self.sparse else self.n * self.d
        if self.loss_kind == "squared" and self.d * self.d <= data_cost:
            # f is quadratic: f(theta) - f* = <grad f(theta*), eta> + eta^T H* eta / 2 exactly,
            # O(d^2) per point instead of O(n d)
            hn = row_dot(np, vec_mat(np, eta, self.H_star), eta)
            er = np.maximum(0.5 * hn + row_dot(np, eta, self._grad_star), 0.0)
            return {
                "excess_risk": xp.asarray(er.reshape(lead)),
                "hnorm2": xp.asarray(hn.reshape(lead)),
                "dist2": xp.asarray(dist2.reshape(lead)),
            }
        er, hn = np.empty(m), np.empty(m)
        for sl in self._slices(m):
            dz = self._matvec(eta[sl])  # (k, n)
            if self.loss_kind == "squared":
                D = 0.5 * dz * dz
            else:
                ms = -self.y * self._z_star  # t = -y z*, a = -y z
                D = bernoulli_kl(ms, ms - self.y * dz)
            er[sl] = row_dot(np, D, self.weights)
            hn[sl] = row_dot(np, dz * dz * self._c_star, self.weights)
        lam_term = self.lam * dist2
        er = np.maximum(er + 0.5 * lam_term + row_dot(np, eta, self._grad_star), 0.0)
        hn = hn + lam_term
        return {
            "excess_risk": xp.asarray(er.reshape(lead)),
            "hnorm2": xp.asarray(hn.reshape(lead)),
            "dist2": xp.asarray(dist2.reshape(lead)),
        }

    def loss(self, theta: Any) -> Any:
        """``f(theta)`` computed directly (shape ``theta.shape[:-1]``)."""
        th, lead = self._flat(theta)
        return self._objective(th).reshape(lead)

    def grad(self, theta: Any) -> Any:
        """Full gradient ``sum_i w_i l_i'(<a_i, theta>) a_i + lam theta``."""
        xp = namespace_of(theta)
        th, lead = self._flat(theta)
        out = np.concatenate([self._full_grad(th[sl]) for sl in self._slices(th.shape[0])])
        return xp.asarray(out.reshape(*lead, self.d))

    def worker_grads(self, theta: Any) -> np.ndarray:
        """Gradients ``grad f_p(theta)`` of each worker's objective, shape (P, d)."""
        th = np.asarray(to_numpy(theta), dtype=np.float64).reshape(self.d)
        blocks = [np.arange(self.n)] if self.partition is None else self.partition
        z = self._matvec(th[None])[0]
        dl = self._dloss(z, self.y)
        return np.stack(
            [self._block_rmatvec(self.A[b], dl[b]) / b.size + self.lam * th for b in blocks]
        )


class FiniteLeastSquares(FiniteSum):
    """Finite-sum least squares ``(1/n) sum_i (<a_i, theta> - y_i)^2 / 2 + lam/2 ||theta||^2``."""

    fixed_parameters = ("loss",)

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """The finite sum's example, rows drawn with replacement."""
        return {**super().example_settings(), "sampling": "replacement"}

    def __init__(self, A: Any, y: Any, lam: float = 0.0, **kwargs: Any) -> None:
        super().__init__(A, y, loss="squared", lam=lam, **kwargs)


class FiniteLogistic(FiniteSum):
    """Finite-sum logistic regression ``(1/n) sum_i log(1 + exp(-y_i <a_i, theta>)) + lam/2 ||theta||^2``."""

    fixed_parameters = ("loss",)

    @classmethod
    def example_settings(cls) -> dict[str, Any]:
        """The finite sum's example with the targets' signs and ridge 0.1."""
        out = super().example_settings()
        return {**out, "y": np.sign(out["y"]), "lam": 0.1}

    def __init__(self, A: Any, y: Any, lam: float = 0.0, **kwargs: Any) -> None:
        super().__init__(A, y, loss="logistic", lam=lam, **kwargs)


def _norm(v: np.ndarray) -> float:
    """``||v||`` summed in a fixed order (:func:`~convkit.problems._fixed_order.row_dot`)."""
    return float(np.sqrt(row_dot(np, v, v)))


def _solve_psd(Hm: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``Hm^{-1} g`` by a Cholesky factor summed in a fixed order
    (:func:`~convkit.problems._fixed_order.cholesky_solve`: the same bits on every x86-64
    CPU); least squares (minimum norm, LAPACK) when ``Hm`` is not numerically positive
    definite."""
    x = cholesky_solve(Hm, g)
    if x is not None and np.all(np.isfinite(x)):
        return x
    return np.linalg.lstsq(Hm, g, rcond=None)[0]


#: the largest ``d`` whose eigenvalues come from the portable Jacobi method (a few ms at
#: ``d = 30``, about 2 s at 300: ``benchmarks/bench_symmetric_eigen.py``); LAPACK / ARPACK above
PORTABLE_EIGEN_MAX = 300


def _eigenvalues(M: np.ndarray) -> np.ndarray:
    """Eigenvalues (ascending) of a symmetric matrix: the Jacobi method for
    ``d <= PORTABLE_EIGEN_MAX`` (:func:`convkit._symmetric_eigen.symmetric_eigenvalues`, the
    same bits on every x86-64 CPU), LAPACK's ``eigvalsh`` for larger ones."""
    if M.shape[0] <= PORTABLE_EIGEN_MAX:
        return symmetric_eigenvalues(M)
    return np.linalg.eigvalsh(M)


def _largest_eigenvalue(M: np.ndarray) -> float:
    """Largest eigenvalue of a symmetric PSD matrix: :func:`_eigenvalues` for
    ``d <= PORTABLE_EIGEN_MAX``, Lanczos (ARPACK) to relative 1e-12 otherwise."""
    if M.shape[0] <= PORTABLE_EIGEN_MAX:
        return float(_eigenvalues(M)[-1])
    from scipy.sparse.linalg import eigsh

    v0 = np.ones(M.shape[0])
    return float(eigsh(M, k=1, which="LA", tol=1e-12, v0=v0, return_eigenvectors=False)[0])
