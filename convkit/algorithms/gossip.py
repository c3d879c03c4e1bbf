"""Gossip on a graph, shared by the decentralized algorithms: message counts, the consensus
distance, argument checks, and the tuner of CHOCO-SGD's consensus step (CHOCO-gossip without
gradients, Koloskova, Stich, Jaggi 2019).

:mod:`convkit.algorithms.decentralized` re-exports the public names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import Backend, namespace_of, to_numpy
from ..compression import Compressor, get_compressor
from ..topology import Topology
from ..topology_spec import topology_from_spec
from ..validation import check_int, check_real

__all__ = [
    "ConsensusTuning",
    "consensus_distance",
    "contraction_rates",
    "copy_holder_messages",
    "directed_messages",
    "eta_spectral_gap",
    "log_grid",
    "tune_consensus_step",
]


# --------------------------------------------------------------------------- counts, checks


def directed_messages(topology: Topology) -> np.ndarray:
    """Messages per iteration over one period: ``#{(i, j): i != j, (W_t)_ij != 0}``."""
    out = []
    for A in topology.Ws:
        nz = np.abs(np.asarray(A)) > 0
        np.fill_diagonal(nz, False)
        out.append(int(np.count_nonzero(nz)))
    return np.asarray(out, dtype=np.int64)


def copy_holder_messages(topology: Topology) -> int:
    """Messages per iteration of an algorithm whose nodes keep copies of their neighbours'
    models (DCD-PSGD, ECD-PSGD, CHOCO-SGD): ``#{(i, j): i != j, (W_t)_ij != 0 for some t}``.

    Every node that will ever mix with node ``j``'s copy must apply each of ``j``'s updates,
    so ``j`` sends to the union of its neighbours over the topology's period (a time-varying
    graph repeats its period, so every neighbour of the period is a future neighbour); for a
    static graph this is :func:`directed_messages`. On the one-peer exponential graph with
    ``P = 2^m`` nodes every node has ``m`` eventual neighbours: ``P log2(P)`` messages (24 for
    ``P = 8``) instead of the ``P`` current out-edges.
    """
    ever = np.zeros((topology.n, topology.n), dtype=bool)
    for A in topology.Ws:
        ever |= np.abs(np.asarray(A)) > 0
    np.fill_diagonal(ever, False)
    return int(np.count_nonzero(ever))


def consensus_distance(X: Any) -> Any:
    """``(1/P) sum_i ||x_i - x_bar||^2`` per replicate for ``X`` of shape ``(R, P, d)``."""
    xp = namespace_of(X)
    dev = X - xp.mean(X, axis=1, keepdims=True)
    return xp.mean(xp.sum(dev * dev, axis=-1), axis=1)


def _check_topology(topology: Any, workers: int | None) -> Topology:
    if isinstance(topology, str):
        try:
            topology = topology_from_spec(topology)  # "ring:16": the one topology-spec parser
        except (TypeError, ValueError) as exc:  # the parser's message, naming the parameter
            if str(exc).startswith("topology"):
                raise
            raise type(exc)(f"topology {topology!r}: {exc}") from exc
    if not isinstance(topology, Topology):
        raise TypeError(
            "topology must be a convkit.topology.Topology (e.g. convkit.topology.ring(16)) or "
            f"a spec such as 'ring:16', got {type(topology).__name__}"
        )
    if topology.n < 2:
        raise ValueError(
            f"a decentralized algorithm needs a graph with P >= 2 nodes, got P = {topology.n}"
        )
    if workers is not None:
        workers = check_int("workers", workers, low=2)
        if workers != topology.n:
            raise ValueError(
                f"workers = {workers} does not match the topology's size P = {topology.n} "
                f"({topology.name}); give a topology on {workers} nodes"
            )
    return topology


def _check_compressor(compressor: Any) -> Compressor:
    if compressor is None:
        raise ValueError("compressor is required (e.g. TopK(fraction=0.1) or 'top-k:0.1')")
    if not isinstance(compressor, (Compressor, str)):
        raise TypeError(
            f"compressor must be a convkit Compressor or a spec string, got {compressor!r}"
        )
    return get_compressor(compressor)


# --------------------------------------------------------------------------- gamma_c tuner


@dataclass(frozen=True)
class ConsensusTuning:
    """Result of :func:`tune_consensus_step`.

    ``gamma_c``: the grid value with the smallest measured rate; ``rate``: that rate;
    ``grid`` and ``rates``: every grid value and its per-iteration contraction rate of the
    consensus distance (``>= 1``: no convergence; ``inf``: blew up).
    """

    gamma_c: float
    rate: float
    grid: np.ndarray
    rates: np.ndarray
    iterations: int
    d: int


def _libm(fn: Any, a: np.ndarray) -> np.ndarray:
    """``fn`` (``math.log``, ``math.exp``) of every entry of the float64 array ``a``, through
    the C library's scalar function: NumPy's SIMD loops of ``log`` / ``exp`` differ between
    AVX2 and AVX512 CPUs in the last bit, and the tuner's choice is a minimum over these
    rates (a few hundred values: the loop costs microseconds)."""
    return np.fromiter((fn(v) for v in a.ravel().tolist()), np.float64, a.size).reshape(a.shape)


def _exp(v: float) -> float:
    """``math.exp`` with ``inf`` for an overflow (as NumPy's) instead of an exception."""
    return math.inf if v > 709.0 else math.exp(v)


def log_grid(low: float, high: float, n: int) -> np.ndarray:
    """``n >= 2`` log-spaced values from ``low`` to ``high`` (both > 0), the same bits on every
    CPU: ``10 ** (log10 low + (log10 high - log10 low) i / (n - 1))`` by the C library's
    scalar ``log10`` and ``pow``.  ``np.geomspace`` takes them from NumPy's SIMD loops, whose
    AVX2 and AVX512 versions differ in the last bit at some points (the tuners' default grids:
    one gamma_c and one eta value each), and a consensus step one ulp off leads a top-k run
    to another trajectory."""
    n = check_int("n", n, low=2)
    low = check_real("low", low, low=0.0, low_inclusive=False)
    high = check_real("high", high, low=0.0, low_inclusive=False)
    a, b = math.log10(low), math.log10(high)
    return np.array([10.0 ** (a + (b - a) * i / (n - 1)) for i in range(n)])


def contraction_rates(e_half: Any, e_end: Any, steps: int, groups: int) -> np.ndarray:
    """Per-step contraction rates of gossip runs, the same bits on every CPU: for ``groups``
    groups of equally many runs (``e_half``, ``e_end``: the consensus distances of every run
    ``steps`` steps apart, group-major), ``exp(mean_runs (log e_end - log e_half) / steps)``
    with ``e`` floored at ``1e-300`` and ``inf`` for a run whose distances are not finite.
    The logarithms and exponentials are the C library's scalar ones (NumPy's SIMD loops of
    ``log`` / ``exp`` differ between AVX2 and AVX512 CPUs in the last bit, and the tuners
    pick the minimum of these rates); the mean is NumPy's, the same on every CPU."""
    tiny = 1e-300
    a = np.asarray(e_half, dtype=np.float64)
    b = np.asarray(e_end, dtype=np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(all="ignore"):
        logs = (_libm(math.log, np.maximum(b, tiny)) - _libm(math.log, np.maximum(a, tiny))) / steps
        logs = np.where(finite, logs, np.inf).reshape(groups, -1)
        return _libm(_exp, np.mean(logs, axis=1))


def tune_consensus_step(
    topology: Topology,
    compressor: Compressor | str,
    *,
    grid: Any = None,
    d: int = 100,
    iterations: int = 200,
    replicates: int = 4,
    seed: int = 0,
    backend: Backend | None = None,
) -> ConsensusTuning:
    """Pick CHOCO-SGD's consensus step ``gamma_c`` by simulating CHOCO-gossip (no gradients).

    For every ``gamma_c`` of ``grid`` (default: 41 log-spaced values in ``[1e-3, 1]``, :func:`log_grid`), all at
    once in one ``(len(grid) * replicates, P, d)`` block with the same random start ``X_0``
    (i.i.d. ``N(0, 1)`` entries, centred over the nodes so that the consensus value is 0 and
    the consensus distance is free of cancellation down to tiny values) and ``X_hat_0 = 0``
    (Koloskova et al. 2019, Algorithm 1):

        X <- X + gamma_c (W_t - I) X_hat,   X_hat <- X_hat + C(X - X_hat).

    The rate of a grid value is the geometric-mean per-iteration contraction of the
    consensus distance ``e_t = (1/P) sum_i ||x_i - x_bar||^2`` over the second half of the
    run, ``(e_T / e_{T/2})^(2/T)`` (with ``e`` floored at ``1e-300``; geometric mean over
    replicates); a non-finite ``e_T`` gives ``inf``. Returns the grid value with the smallest
    rate (ties: the larger ``gamma_c``).
    """
    topology = _check_topology(topology, None)
    comp = _check_compressor(compressor)
    d = check_int("d", d, low=1)
    iterations = check_int("iterations", iterations, low=2)
    R = check_int("replicates", replicates, low=1)
    if grid is None:
        grid = log_grid(1e-3, 1.0, 41)
    grid = np.atleast_1d(np.asarray(grid, dtype=np.float64))
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"grid must be a non-empty 1-D sequence of gamma_c values, got {grid!r}")
    for g in grid:
        check_real("grid value (gamma_c)", float(g), low=0.0, high=1.0, low_inclusive=False)
    be = backend if backend is not None else Backend()
    xp = be.xp
    Gn, P = grid.size, topology.n
    stream = be.stream(seed, "tune_consensus_step", topology.name, comp.name, d)
    x0 = stream.normal((R, P, d))
    x0 = x0 - xp.mean(x0, axis=1, keepdims=True)  # consensus value 0: no cancellation in e_t
    X = xp.reshape(xp.broadcast_to(xp.expand_dims(x0, axis=0), (Gn, R, P, d)), (Gn * R, P, d)) + 0.0
    Xh = xp.zeros_like(X)
    gc = xp.reshape(xp.repeat(be.asarray(grid), R), (Gn * R, 1, 1))
    half = iterations // 2
    e_half = None
    with np.errstate(all="ignore"):
        for t in range(iterations):
            M = topology.mix(Xh, t=t, method="ordered")  # the same on every CPU
            M -= Xh
            M *= gc
            X += M
            Xh += comp.compress(X - Xh, stream)
            if t + 1 == half:
                e_half = consensus_distance(X)
        e_end = consensus_distance(X)
    rates = contraction_rates(to_numpy(e_half), to_numpy(e_end), iterations - half, Gn)
    order = np.lexsort((-grid, rates))
    best = int(order[0])
    return ConsensusTuning(float(grid[best]), float(rates[best]), grid, rates, iterations, d)


def eta_spectral_gap(topology: Topology, eta: float) -> float:
    """Spectral gap ``1 - rho(W_eta)`` of DeepSqueeze's ``W_eta = (1 - eta) I + eta W``."""
    eta = check_real("eta", eta, low=0.0, high=1.0, low_inclusive=False)
    return float(topology.W_eta(eta).spectral_gap)
