"""Communication graphs, mixing matrices, spectral constants and fast mixing.

A :class:`Topology` holds a graph on ``n`` nodes (workers) and a mixing matrix ``W``
(dense NumPy, ``n x n``), the spectral constants the theory uses, and :meth:`Topology.mix`,
which applies ``W`` to a state block ``X`` of shape ``(R, P, d)`` along the worker axis:
``(W X)[r] = W @ X[r]``.

Conventions (stated once, used everywhere)
------------------------------------------
For a static, symmetric, doubly stochastic ``W`` with eigenvalues
``1 = lambda_1 >= lambda_2 >= ... >= lambda_n >= -1``:

* ``lambda_2``: second largest eigenvalue; ``lambda_n``: smallest eigenvalue;
* ``rho = max(|lambda_2|, |lambda_n|) = ||W - J||_2`` with ``J = 11^T / n`` (*not* squared;
  some papers call ``rho^2`` the mixing rate, e.g. Koloskova et al. 2019 use
  ``delta = 1 - |lambda_2|`` as "spectral gap" of ``W``);
* ``spectral_gap = 1 - rho``;
* ``beta = ||I - W||_2 = 1 - lambda_n`` (the constant in CHOCO-SGD's analysis,
  Koloskova, Stich, Jaggi 2019).

For a time-varying topology (one matrix ``W_t`` per iteration, periodic with period ``p``)
``rho`` is the per-step geometric mean contraction over one period,
``rho = ||W_{p-1} ... W_1 W_0 - J||_2^(1/p)`` (which equals ``max(|lambda_2|, |lambda_n|)``
for a static symmetric ``W``), and ``lambda_2``, ``lambda_n``, ``beta`` are not defined.

Mixing weights (for a graph with degrees ``deg_i``; ``d_max`` the largest degree):

* ``"metropolis"`` (Metropolis-Hastings, Xiao & Boyd 2004):
  ``W_ij = 1 / (1 + max(deg_i, deg_j))`` on edges, ``W_ii = 1 - sum_{j != i} W_ij``;
* ``"uniform"`` (alias ``"max-degree"``): ``W_ij = 1 / (1 + d_max)`` on edges,
  ``W_ii = 1 - deg_i / (1 + d_max)`` (ring: 1/3 on self and both neighbours; complete graph:
  ``W = J``);
* ``lazy=True`` replaces either rule's ``W`` by ``(W + I) / 2`` (all eigenvalues in [0, 1]);
* :func:`from_matrix` takes a user matrix and validates it.

Mixing strategies (:meth:`Topology.mix`)
----------------------------------------
* ``"dense"``: one matrix product ``W @ X`` (broadcast over replicates);
* ``"sparse"``: the CSR matrix ``kron(I_R, W)`` (SciPy for NumPy, ``cupyx.scipy.sparse`` for
  CuPy: :func:`convkit.backend.sparse_block_operator`) applied to ``X`` viewed as ``(R*P, d)``
  (no transpose, one output array);
* ``"shift"``: for circulant ``W`` (``W_ij`` depends only on ``(j - i) mod n``: ring, static
  exponential graph, complete graph, one-peer exponential graph), ``W X = sum_s c_s S^s X``
  with ``c_s = W_0s`` and ``S^s X`` the block shifted by ``s`` workers (ring:
  ``w_0 X + w_1 roll(X, 1) + w_1 roll(X, -1)``); cost ``O(#offsets R P d)``.
* ``"ordered"``: the same numbers on every x86-64 CPU (for the engines whose results feed a
  decision: top-k selection, stochastic rounding, divergence tests). For NumPy inputs the CSR
  product of ``"sparse"`` whatever ``W``'s density (a dense ``W`` stores all its entries):
  each output entry is ``acc = 0``, then ``acc += W_ij x_j`` over the row's stored ``j`` in
  increasing order, a multiply then an add (SciPy's ``csr_matvecs``, compiled for the
  x86-64 baseline: no fused multiply-add, no SIMD-width-dependent order), whereas the
  BLAS's ``gemm`` of ``"dense"`` sums in an order set by the kernel the CPU selects
  (Haswell and SkylakeX kernels differ in the last bits). Other array libraries: ``"dense"``
  (no guarantee).
* ``"auto"`` (default), chosen from measurements (``benchmarks/bench_mixing.py``; CPU, one
  BLAS thread, ``R = 16``, ``d`` from 1 to 1000, ``P`` from 16 to 256): for NumPy inputs
  ``"sparse"`` if at most a fraction :data:`SPARSE_MAX_DENSITY` of ``W``'s entries is
  non-zero, else ``"dense"``. The CSR product beat the shift product in every measured case
  (a ring row's three neighbour rows stay in cache, so it streams ``X`` once, while the shift
  product makes three passes), and beat the dense product from about 8 non-zeros per row
  below ``P`` on. For other array libraries (CuPy: no SciPy sparse here) ``"shift"`` if ``W``
  is circulant with at most :data:`SHIFT_MAX_OFFSETS` non-zero offsets, else ``"dense"``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from convkit._symmetric_eigen import symmetric_eigenvalues, two_norm
from convkit.backend import (
    array_library,
    derive_seed,
    namespace_of,
    sparse_block_operator,
    sparse_matmul,
)
from convkit.problems._fixed_order import vec_mat
from convkit.validation import check_in, check_int, check_real

__all__ = [
    "MIX_METHODS",
    "SHIFT_MAX_OFFSETS",
    "SPARSE_MAX_DENSITY",
    "WEIGHT_RULES",
    "Topology",
    "complete",
    "edgeless",
    "erdos_renyi",
    "exponential",
    "from_graph",
    "from_matrix",
    "hypercube",
    "mixing_matrix",
    "one_peer_exponential",
    "path",
    "random_regular",
    "ring",
    "star",
    "torus",
    "validate_mixing_matrix",
]

WEIGHT_RULES = ("metropolis", "uniform", "max-degree")
MIX_METHODS = ("auto", "dense", "sparse", "shift", "ordered")
SHIFT_MAX_OFFSETS = 8
"""``auto`` uses the shift product for circulant ``W`` with at most this many offsets != 0."""
SPARSE_MAX_DENSITY = 0.125
"""``auto`` uses the sparse product when at most this fraction of ``W``'s entries is non-zero."""

_ATOL = 1e-10  # tolerance of the mixing-matrix checks (entries are O(1))


# --------------------------------------------------------------------------- validation


def _check_nodes(name: str, n: Any, low: int = 2) -> int:
    """Number of nodes: an integer >= 2 (a graph needs at least two nodes)."""
    return check_int(name, n, low=low)


def _check_eta(eta: Any) -> float:
    return check_real("eta", eta, low=0.0, high=1.0, low_inclusive=False, high_inclusive=True)


def _n_components(adj: np.ndarray) -> int:
    graph = sp.csr_array((np.abs(adj) > 0).astype(np.int8))
    count, _ = connected_components(graph, directed=False)
    return int(count)


def validate_mixing_matrix(
    W: Any,
    graph: nx.Graph | None = None,
    *,
    symmetric: bool = True,
    connected: bool = True,
    name: str = "W",
) -> np.ndarray:
    """Check a mixing matrix and return it as a float64 NumPy array.

    Checks, in order, with an error naming what is wrong and by how much: a square 2-D
    matrix with at least two rows, finite, non-negative, symmetric (unless
    ``symmetric=False``, for directed time-varying gossip), rows and columns summing to one
    (doubly stochastic), supported on ``graph``'s edges plus the diagonal (if ``graph`` is
    given), and connected (the graph of its non-zero off-diagonal entries, if
    ``connected``). Tolerance ``1e-10`` on the entries.
    """
    A = np.asarray(W, dtype=np.float64) if not sp.issparse(W) else W.toarray().astype(np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square 2-D matrix, got shape {A.shape}")
    n = A.shape[0]
    if n < 2:
        raise ValueError(f"{name} must have at least 2 rows (P >= 2 nodes), got P = {n}")
    if not np.all(np.isfinite(A)):
        bad = int(A.size - np.count_nonzero(np.isfinite(A)))
        raise ValueError(f"{name} must contain only finite values, found {bad} NaN or inf")
    if A.min() < -_ATOL:
        i, j = np.unravel_index(int(np.argmin(A)), A.shape)
        raise ValueError(
            f"{name} has negative weights: min {name}_ij = {A[i, j]:.3g} at (i, j) = ({i}, {j});"
            " mixing weights must be >= 0"
        )
    if symmetric:
        asym = float(np.max(np.abs(A - A.T)))
        if asym > _ATOL:
            raise ValueError(f"{name} is not symmetric: max |{name} - {name}^T| = {asym:.3g}")
    row_err = float(np.max(np.abs(A.sum(axis=1) - 1.0)))
    if row_err > _ATOL:
        raise ValueError(
            f"{name} is not doubly stochastic: max |{name} 1 - 1| = {row_err:.3g} (row sums)"
        )
    col_err = float(np.max(np.abs(A.sum(axis=0) - 1.0)))
    if col_err > _ATOL:
        raise ValueError(
            f"{name} is not doubly stochastic: max |{name}^T 1 - 1| = {col_err:.3g} (column sums)"
        )
    off = A.copy()
    np.fill_diagonal(off, 0.0)
    if graph is not None:
        if graph.number_of_nodes() != n:
            raise ValueError(
                f"{name} has {n} rows but the graph has {graph.number_of_nodes()} nodes"
            )
        allowed = nx.to_numpy_array(graph, nodelist=range(n), weight=None) != 0
        outside = (np.abs(off) > _ATOL) & ~(allowed | allowed.T)
        if outside.any():
            i, j = np.argwhere(outside)[0]
            raise ValueError(
                f"{name} is not supported on the graph's edges: {name}[{i}, {j}] = "
                f"{A[i, j]:.3g} but ({i}, {j}) is not an edge ({int(outside.sum())} such entries)"
            )
    if connected:
        comps = _n_components(np.where(np.abs(off) > _ATOL, 1.0, 0.0))
        if comps > 1:
            raise ValueError(
                f"the graph of {name} is disconnected ({comps} connected components); "
                "a connected graph is needed"
            )
    return A


# --------------------------------------------------------------------------- weights


def mixing_matrix(graph: nx.Graph, weights: str = "metropolis", lazy: bool = False) -> np.ndarray:
    """Mixing matrix of ``graph`` (nodes ``0..n-1``) under a weight rule (see module doc).

    ``weights``: ``"metropolis"`` (Metropolis-Hastings) or ``"uniform"`` / ``"max-degree"``.
    ``lazy=True`` returns ``(W + I) / 2``. Self-loops of ``graph`` are ignored.
    """
    check_in("weights", weights, WEIGHT_RULES)
    n = graph.number_of_nodes()
    adj = nx.to_numpy_array(graph, nodelist=range(n), weight=None)
    np.fill_diagonal(adj, 0.0)
    adj = np.where((adj + adj.T) > 0, 1.0, 0.0)
    deg = adj.sum(axis=1)
    if weights == "metropolis":
        W = adj / (1.0 + np.maximum(deg[:, None], deg[None, :]))
    else:
        W = adj / (1.0 + deg.max(initial=0.0))
    W[np.diag_indices(n)] = 1.0 - W.sum(axis=1)
    if lazy:
        W = 0.5 * (W + np.eye(n))
    return W


# --------------------------------------------------------------------------- circulant


def _circulant_offsets(W: np.ndarray) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """Offsets ``s`` and weights ``c_s = W[0, s]`` if ``W`` is circulant, else ``None``."""
    n = W.shape[0]
    idx = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n  # (j - i) mod n
    first = W[0]
    if not np.array_equal(W, first[idx]):
        if np.max(np.abs(W - first[idx])) > 1e-14:
            return None
    offsets = tuple(int(s) for s in np.flatnonzero(first))
    return offsets, tuple(float(first[s]) for s in offsets)


def _add_shifts(out: np.ndarray, X: np.ndarray, shifts: Sequence[int], first: bool) -> None:
    """``out[:, i] (+)= sum_{s in shifts} X[:, (i + s) mod n]`` with contiguous slices only.

    The worker axis is cut where some ``(i + s) mod n`` wraps around (``i = n - s``); inside a
    segment every shifted view is a plain slice. With ``first`` the first two views are added
    straight into ``out`` (no prior write, no temporary).
    """
    n = X.shape[1]
    cuts = sorted({0, n} | {(n - s) % n for s in shifts})
    for i0, i1 in zip(cuts[:-1], cuts[1:], strict=True):
        views = [X[:, (i0 + s) % n : (i0 + s) % n + (i1 - i0)] for s in shifts]
        o = out[:, i0:i1]
        if first and len(views) >= 2:
            np.add(views[0], views[1], out=o)
            rest = views[2:]
        elif first:
            np.copyto(o, views[0])
            rest = []
        else:
            rest = views
        for v in rest:
            o += v


def _shift_mix(X: Any, offsets: Sequence[int], coefs: Sequence[float]) -> Any:
    """``sum_s c_s X[:, (i + s) mod n]`` along axis 1 (circulant product).

    NumPy path: offsets are grouped by coefficient and accumulated Horner-style into a
    single output array with slice additions (one allocation, no temporaries:
    ``out = c_1 (A_1 + (c_2 / c_1) (A_2 + ...))`` with ``A_g`` the sum of the shifts of
    group ``g``); the product is memory-bound, so fewer passes and allocations is the game
    (uniform ring: two additions and one scaling).
    """
    if isinstance(X, np.ndarray):
        groups: dict[float, list[int]] = {}
        for s, c in zip(offsets, coefs, strict=True):
            groups.setdefault(c, []).append(s)
        order = list(groups.items())
        out = np.empty_like(X)
        for g, (c, shifts) in enumerate(reversed(order)):
            _add_shifts(out, X, shifts, first=(g == 0))
            prev = order[len(order) - 2 - g][0] if g < len(order) - 1 else 1.0
            ratio = c / prev
            if ratio != 1.0:
                out *= X.dtype.type(ratio)
        return out
    xp = namespace_of(X)
    out = xp.zeros_like(X)
    for s, c in zip(offsets, coefs, strict=True):
        out = out + c * (X if s == 0 else xp.roll(X, -s, axis=1))
    return out


# --------------------------------------------------------------------------- Topology


@dataclass(frozen=True, eq=False)
class Topology:
    """A graph with a mixing matrix, its spectral constants and fast mixing.

    Build one with the constructors of this module (:func:`ring`, :func:`torus`, ...,
    :func:`from_graph`, :func:`from_matrix`). Time-varying topologies hold one matrix per
    iteration of a period: :meth:`W_at` ``(t) = Ws[t mod period]``; static ones ignore ``t``.

    Attributes
    ----------
    name: short description (e.g. ``"ring(16, uniform)"``).
    W: the (first) mixing matrix, dense float64 ``(n, n)``.
    graph: the undirected communication graph (union over a period), nodes ``0..n-1``.
    Ws: the period of matrices (length 1 for a static topology).
    """

    name: str
    W: np.ndarray
    graph: nx.Graph
    Ws: tuple[np.ndarray, ...] = ()
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        # private read-only float64 copies (the caller's arrays are left alone)
        Ws = tuple(np.array(A, dtype=np.float64) for A in (self.Ws or (self.W,)))
        shape = Ws[0].shape
        if len(shape) != 2 or shape[0] != shape[1] or any(A.shape != shape for A in Ws):
            raise ValueError(f"W must be square matrices of one shape, got {[A.shape for A in Ws]}")
        if self.graph.number_of_nodes() != shape[0]:
            raise ValueError(
                f"W is {shape[0]} x {shape[0]} but the graph has {self.graph.number_of_nodes()} nodes"
            )
        for A in Ws:
            A.setflags(write=False)
        object.__setattr__(self, "Ws", Ws)
        object.__setattr__(self, "W", Ws[0])

    # ------------------------------------------------------------------ basics
    @property
    def n(self) -> int:
        """Number of nodes ``P``."""
        return int(self.W.shape[0])

    @property
    def period(self) -> int:
        """Number of distinct matrices in one period (1 for a static topology)."""
        return len(self.Ws)

    @property
    def time_varying(self) -> bool:
        return self.period > 1

    def W_at(self, t: int = 0) -> np.ndarray:
        """Mixing matrix used at iteration ``t`` (``Ws[t mod period]``; static: ``W``)."""
        return self.Ws[int(t) % self.period]

    def __repr__(self) -> str:
        return f"Topology({self.name}, n={self.n}, period={self.period})"

    # ------------------------------------------------------------------ spectra
    def _static(self, what: str) -> np.ndarray:
        if self.time_varying:
            raise ValueError(
                f"{what} is defined for a static topology only; {self.name} is time-varying "
                "(use rho / spectral_gap, or W_at(t))"
            )
        return self.W

    @functools.cached_property
    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues of the (static, symmetric) ``W`` in decreasing order, by the cyclic
        Jacobi method of :func:`convkit._symmetric_eigen.symmetric_eigenvalues`: the same bits
        on every x86-64 CPU (LAPACK's ``eigvalsh`` depends on the BLAS kernel), within a small
        multiple of the unit roundoff of ``eigvalsh``'s."""
        W = self._static("eigenvalues")
        return symmetric_eigenvalues(W, name="W")[::-1]

    @property
    def lambda_2(self) -> float:
        """Second largest eigenvalue of ``W``."""
        return float(self.eigenvalues[1])

    @property
    def lambda_n(self) -> float:
        """Smallest eigenvalue of ``W``."""
        return float(self.eigenvalues[-1])

    @functools.cached_property
    def rho(self) -> float:
        """``max(|lambda_2|, |lambda_n|) = ||W - J||_2``; per-step mean over a period if
        time-varying: ``||W_{p-1} ... W_0 - J||_2^(1/p)``, the products summed in increasing
        index (:func:`convkit.problems._fixed_order.vec_mat`) and the 2-norm by
        :func:`convkit._symmetric_eigen.two_norm`: the same bits on every x86-64 CPU."""
        if not self.time_varying:
            return float(max(abs(self.lambda_2), abs(self.lambda_n)))
        n = self.n
        prod = np.eye(n)
        for A in self.Ws:
            prod = vec_mat(np, A, prod)
        norm = two_norm(prod - np.full((n, n), 1.0 / n), name="W_{p-1} ... W_0 - J")
        norm = 0.0 if norm < 1e-12 else norm
        return norm ** (1.0 / self.period)

    @property
    def spectral_gap(self) -> float:
        """``1 - rho``."""
        return 1.0 - self.rho

    @property
    def beta(self) -> float:
        """``||I - W||_2 = 1 - lambda_n`` (static topologies)."""
        return float(1.0 - self.lambda_n)

    # ------------------------------------------------------------------ W_eta
    def W_eta(self, eta: float) -> Topology:
        """Topology with ``W_eta = (1 - eta) I + eta W`` (DeepSqueeze's ``W_eff``), eta in (0, 1].

        Its eigenvalues are ``1 - eta (1 - lambda_i(W))`` **[derived]**.
        """
        eta = _check_eta(eta)
        eye = np.eye(self.n)
        Ws = tuple((1.0 - eta) * eye + eta * A for A in self.Ws)
        return Topology(f"{self.name}, eta={eta:g}", Ws[0], self.graph, Ws)

    # ------------------------------------------------------------------ mixing
    def _plan(self, t: int) -> dict:
        key = ("plan", int(t) % self.period)
        plan = self._cache.get(key)
        if plan is None:
            A = self.W_at(t)
            plan = {"W": A, "circulant": _circulant_offsets(A)}
            plan["density"] = float(np.count_nonzero(A)) / A.size
            self._cache[key] = plan
        return plan

    def mix_method(self, t: int = 0, numpy: bool = True) -> str:
        """The strategy ``method="auto"`` uses at iteration ``t`` for NumPy inputs (or, with
        ``numpy=False``, for other array libraries); the rule is in the module docstring."""
        plan = self._plan(t)
        if numpy:
            return "sparse" if plan["density"] <= SPARSE_MAX_DENSITY else "dense"
        circ = plan["circulant"]
        if circ is not None and sum(1 for s in circ[0] if s != 0) <= SHIFT_MAX_OFFSETS:
            return "shift"
        return "dense"

    def mix(self, X: Any, t: int = 0, method: str = "auto") -> Any:
        """``W_t X`` for ``X`` of shape ``(R, P, d)``: ``(W X)[r] = W @ X[r]``.

        ``method`` in ``"auto"``, ``"dense"``, ``"sparse"``, ``"shift"`` (module docstring).
        The result has ``X``'s dtype and array library; ``X`` is not modified.
        """
        numpy_auto = method == "auto" and type(X) is np.ndarray and X.ndim == 3
        numpy_auto = numpy_auto and X.shape[1] == self.n and X.dtype.kind == "f"
        if numpy_auto:  # valid as it stands: no checks or namespace lookup (~40 us a call)
            xp = np
        else:
            check_in("method", method, MIX_METHODS)
            if getattr(X, "ndim", None) != 3 or X.shape[1] != self.n:
                raise ValueError(
                    f"X must have shape (R, P, d) with P = {self.n}, "
                    f"got {getattr(X, 'shape', None)}"
                )
            xp = namespace_of(X)
            if not xp.isdtype(X.dtype, "real floating"):
                raise TypeError(f"X must be a real floating-point array, got dtype {X.dtype}")
        plan = self._plan(t)
        if method == "auto":
            method = self.mix_method(t, numpy=isinstance(X, np.ndarray))
        elif method == "ordered":
            method = "sparse" if array_library(X) == "numpy" else "dense"
        if method == "shift":
            if plan["circulant"] is None:
                raise ValueError(f"method='shift' needs a circulant W; {self.name} is not")
            return _shift_mix(X, *plan["circulant"])
        if method == "sparse":
            if array_library(X) == "other":
                raise ValueError(
                    "method='sparse' supports NumPy arrays only, and CuPy arrays "
                    "(cupyx.scipy.sparse); the array API standard has no sparse matrices: use "
                    "method='dense' or 'shift'"
                )
            return sparse_matmul(self._block_operator(X, t), X)
        Wd = self._cached(
            ("dense", int(t) % self.period, X.dtype, type(X).__module__),
            lambda: xp.asarray(plan["W"], dtype=X.dtype),
        )
        return xp.matmul(Wd, X)

    def _block_operator(self, X: Any, t: int) -> Any:
        """The block-diagonal CSR ``kron(I_R, W_t)`` acting on ``X`` viewed as ``(R P, d)``
        (no transpose, one output), built once per period slot, dtype, library and ``R``."""
        R = X.shape[0]
        return self._cached(
            ("csr", int(t) % self.period, X.dtype, type(X).__module__, R),
            lambda: sparse_block_operator(self._plan(t)["W"], R, X),
        )

    def sparse_block_csr(
        self, X: Any, t: int = 0, method: str = "auto"
    ) -> tuple[Any, Any, Any] | None:
        """``(indptr, indices, data)`` of the CSR operator ``kron(I_R, W_t)`` (dtype of ``X``)
        that :meth:`mix` applies to the NumPy block ``X`` of shape ``(R, P, d)`` at iteration
        ``t`` with this ``method`` (``"auto"``: where ``W_t`` is sparse enough; ``"sparse"``
        and ``"ordered"``: always), or None where ``mix`` would use another product (dense
        ``W`` with ``"auto"``, another array library, another shape or dtype).

        Row ``r P + i`` of the operator holds row ``i`` of ``W_t`` shifted to the columns of
        replicate ``r``.  Compiled kernels that mix with these arrays in their stored order
        (``acc = 0``, then ``acc += W_ij x_j`` entry by entry, as SciPy's CSR product) round
        exactly as :meth:`mix` (:mod:`convkit._kernels`, the fused top-k updates); None as
        well where that compiled product does not round as SciPy's on this machine (a SciPy
        built with fused multiply-adds; checked once, :func:`_compiled_csr_matches_scipy`)."""
        if (
            type(X) is not np.ndarray
            or X.ndim != 3
            or X.shape[1] != self.n
            or X.dtype not in (np.float64, np.float32)
            or (method == "auto" and self.mix_method(t, numpy=True) != "sparse")
            or method not in ("auto", "sparse", "ordered")
            or not _compiled_csr_matches_scipy()
        ):
            return None
        K = self._block_operator(X, t)
        return K.indptr, K.indices, K.data

    def _cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = make()
        return value


_CSR_MATCHES: bool | None = None


def _compiled_csr_matches_scipy() -> bool:
    """Whether :func:`convkit._kernels.csr_product` equals SciPy's CSR product bit for bit
    (float64 and float32, a random sparse block operator; checked once when the compiled
    kernels are available, False without them)."""
    global _CSR_MATCHES
    if _CSR_MATCHES is not None:
        return _CSR_MATCHES
    from convkit import _kernels

    rng = np.random.default_rng(0)
    A = rng.standard_normal((24, 24)) * (rng.random((24, 24)) < 0.25)
    ok = True
    for dtype in (np.float64, np.float32):
        Y = rng.standard_normal((3, 24, 37)).astype(dtype)
        K = sparse_block_operator(A, 3, Y)
        got = _kernels.csr_product(K.indptr, K.indices, K.data, Y.reshape(72, 37))
        if got is None:
            return False  # no compiled kernels now: not cached
        ok &= bool(np.array_equal(got, sparse_matmul(K, Y).reshape(72, 37)))
    _CSR_MATCHES = ok
    return ok


# --------------------------------------------------------------------------- constructors


def _relabel(graph: nx.Graph) -> nx.Graph:
    try:
        ordering = sorted(graph.nodes())
    except TypeError:
        ordering = list(graph.nodes())
    mapping = {node: i for i, node in enumerate(ordering)}
    out = nx.relabel_nodes(graph, mapping, copy=True)
    H = nx.Graph()
    H.add_nodes_from(range(len(ordering)))
    H.add_edges_from((u, v) for u, v in out.edges() if u != v)
    return H


def from_graph(
    graph: nx.Graph,
    weights: str = "metropolis",
    lazy: bool = False,
    name: str | None = None,
    *,
    require_connected: bool = True,
) -> Topology:
    """Topology of any networkx graph (nodes relabelled ``0..n-1`` in sorted order).

    Needs ``n >= 2`` nodes and, unless ``require_connected=False``, a connected graph.
    """
    if not isinstance(graph, nx.Graph):
        raise TypeError(f"graph must be a networkx Graph, got {type(graph).__name__}")
    if graph.is_directed():
        raise ValueError("graph must be undirected (mixing matrices here are symmetric)")
    n = graph.number_of_nodes()
    if n < 2:
        raise ValueError(f"a graph needs P >= 2 nodes, got P = {n}")
    check_in("weights", weights, WEIGHT_RULES)
    G = _relabel(graph)
    if require_connected and not nx.is_connected(G):
        comps = nx.number_connected_components(G)
        raise ValueError(
            f"graph is disconnected ({comps} connected components); a connected graph is needed"
        )
    W = mixing_matrix(G, weights, lazy)
    label = name or f"graph({n})"
    rule = weights + (", lazy" if lazy else "")
    return Topology(f"{label}, {rule}" if name is None else label, W, G)


def _named(graph: nx.Graph, label: str, weights: str, lazy: bool, **kw: Any) -> Topology:
    rule = weights + (", lazy" if lazy else "")
    return from_graph(graph, weights, lazy, name=f"{label}, {rule}", **kw)


def from_matrix(
    W: Any, graph: nx.Graph | None = None, name: str = "custom", *, require_connected: bool = True
) -> Topology:
    """Topology of a user matrix, validated by :func:`validate_mixing_matrix`.

    Without ``graph`` the graph is the support of ``W``'s off-diagonal entries; with it,
    ``W`` must be supported on its edges plus the diagonal.
    """
    if graph is not None:
        if graph.number_of_nodes() < 2:
            raise ValueError(f"a graph needs P >= 2 nodes, got P = {graph.number_of_nodes()}")
        graph = _relabel(graph)
    A = validate_mixing_matrix(W, graph, connected=require_connected)
    if graph is None:
        off = np.abs(A) > _ATOL
        np.fill_diagonal(off, False)
        graph = nx.Graph()
        graph.add_nodes_from(range(A.shape[0]))
        graph.add_edges_from(map(tuple, np.argwhere(np.triu(off))))
    return Topology(name, A.copy(), graph)


def ring(n: int, weights: str = "uniform", lazy: bool = False) -> Topology:
    """Cycle on ``n >= 2`` nodes (``n = 2``: one edge). Uniform weights: 1/3 everywhere."""
    n = _check_nodes("n", n)
    return _named(nx.cycle_graph(n), f"ring({n})", weights, lazy)


def torus(rows: int, cols: int | None = None, weights: str = "uniform", lazy: bool = False):
    """2-D torus (periodic grid) ``rows x cols`` (``cols`` defaults to ``rows``), row-major."""
    rows = check_int("rows", rows, low=1)
    cols = rows if cols is None else check_int("cols", cols, low=1)
    if rows * cols < 2:
        raise ValueError(f"a graph needs P >= 2 nodes, got rows * cols = {rows * cols}")
    G = nx.grid_2d_graph(rows, cols, periodic=True)
    G = nx.relabel_nodes(G, {(i, j): i * cols + j for i, j in G.nodes()})
    return _named(G, f"torus({rows}x{cols})", weights, lazy)


def complete(n: int, weights: str = "uniform", lazy: bool = False) -> Topology:
    """Complete graph; uniform weights give ``W = J = 11^T / n`` (exact averaging)."""
    n = _check_nodes("n", n)
    return _named(nx.complete_graph(n), f"complete({n})", weights, lazy)


def star(n: int, weights: str = "metropolis", lazy: bool = False) -> Topology:
    """Star: node 0 linked to nodes ``1..n-1``."""
    n = _check_nodes("n", n)
    return _named(nx.star_graph(n - 1), f"star({n})", weights, lazy)


def path(n: int, weights: str = "metropolis", lazy: bool = False) -> Topology:
    """Path ``0 - 1 - ... - (n-1)``."""
    n = _check_nodes("n", n)
    return _named(nx.path_graph(n), f"path({n})", weights, lazy)


def _check_power_of_two(name: str, n: Any) -> int:
    n = _check_nodes(name, n)
    if n & (n - 1):
        raise ValueError(f"{name} must be a power of two, got {n}")
    return n


def hypercube(n: int, weights: str = "uniform", lazy: bool = False) -> Topology:
    """Hypercube on ``n = 2^k`` nodes: ``i ~ i xor 2^j``."""
    n = _check_power_of_two("n", n)
    k = n.bit_length() - 1
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from((i, i ^ (1 << j)) for i in range(n) for j in range(k))
    return _named(G, f"hypercube({n})", weights, lazy)


def exponential(n: int, weights: str = "uniform", lazy: bool = False) -> Topology:
    """Static exponential graph: node ``i`` linked to ``i +- 2^j mod n`` for ``2^j < n``."""
    n = _check_nodes("n", n)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    j = 1
    while j < n:
        G.add_edges_from((i, (i + j) % n) for i in range(n) if (i + j) % n != i)
        j *= 2
    return _named(G, f"exponential({n})", weights, lazy)


def _nx_seed(seed: Any, *key: Any) -> int:
    return int(derive_seed(seed, *key).generate_state(1)[0])


def erdos_renyi(
    n: int,
    p: float,
    seed: int | None = 0,
    weights: str = "metropolis",
    lazy: bool = False,
    max_tries: int = 100,
) -> Topology:
    """Connected Erdos-Renyi graph G(n, p).

    Draw ``k = 0, 1, ...`` uses the seed ``derive_seed(seed, "erdos_renyi", n, p, k)``;
    the first connected draw is returned, a :class:`ValueError` after ``max_tries``.
    """
    n = _check_nodes("n", n)
    p = check_real("p", p, low=0.0, high=1.0, low_inclusive=False)
    max_tries = check_int("max_tries", max_tries, low=1)
    for k in range(max_tries):
        G = nx.gnp_random_graph(n, p, seed=_nx_seed(seed, "erdos_renyi", n, p, k))
        if nx.is_connected(G):
            return _named(G, f"erdos_renyi({n}, p={p:g}, seed={seed}, draw={k})", weights, lazy)
    raise ValueError(
        f"no connected Erdos-Renyi graph G(n={n}, p={p:g}) in {max_tries} draws; increase p "
        f"(connectivity needs p > log(n)/n = {math.log(n) / n:.3g}) or max_tries"
    )


def random_regular(
    n: int,
    degree: int,
    seed: int | None = 0,
    weights: str = "uniform",
    lazy: bool = False,
    max_tries: int = 100,
) -> Topology:
    """Connected random ``degree``-regular graph (seeded like :func:`erdos_renyi`)."""
    n = _check_nodes("n", n)
    degree = check_int("degree", degree, low=1, high=n - 1)
    if (n * degree) % 2:
        raise ValueError(f"n * degree must be even for a regular graph, got n={n}, degree={degree}")
    max_tries = check_int("max_tries", max_tries, low=1)
    for k in range(max_tries):
        G = nx.random_regular_graph(degree, n, seed=_nx_seed(seed, "random_regular", n, degree, k))
        if nx.is_connected(G):
            label = f"random_regular({n}, degree={degree}, seed={seed}, draw={k})"
            return _named(G, label, weights, lazy)
    raise ValueError(
        f"no connected {degree}-regular graph on {n} nodes in {max_tries} draws; "
        "increase degree or max_tries"
    )


def edgeless(n: int) -> Topology:
    """``n`` isolated nodes, ``W = I`` (no communication; with a final average this is OSA).

    The only constructor that allows a disconnected graph: ``lambda_2 = 1``, gap 0.
    """
    n = _check_nodes("n", n)
    G = nx.empty_graph(n)
    return Topology(f"edgeless({n})", np.eye(n), G)


def one_peer_exponential(n: int) -> Topology:
    """Time-varying one-peer exponential graph (Ying et al. 2021, "Exponential graph is
    provably efficient for decentralized deep training").

    At iteration ``t`` node ``i`` averages with node ``i + 2^(t mod log2 n) mod n``, weights
    1/2: ``W_t = (I + S^(2^k)) / 2`` with ``S`` the cyclic shift, ``(S X)_i = X_{i+1}``.
    ``W_t`` is doubly stochastic but not symmetric (directed gossip). Needs ``n = 2^tau``;
    the product of ``tau`` consecutive matrices is ``J = 11^T / n`` (exact averaging),
    so ``rho = 0`` **[derived]**: ``prod_k (I + S^(2^k)) / 2 = (1/n) sum_{m<n} S^m``.
    """
    n = _check_power_of_two("n", n)
    tau = n.bit_length() - 1
    idx = np.arange(n)
    Ws = []
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for k in range(tau):
        A = np.zeros((n, n))
        A[idx, idx] += 0.5
        A[idx, (idx + (1 << k)) % n] += 0.5
        validate_mixing_matrix(A, symmetric=False, connected=False, name=f"W_{k}")
        G.add_edges_from((i, (i + (1 << k)) % n) for i in range(n) if (i + (1 << k)) % n != i)
        Ws.append(A)
    return Topology(f"one_peer_exponential({n})", Ws[0], G, tuple(Ws))
