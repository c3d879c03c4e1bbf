r"""Exact expected error of MBA / Local-SGD / OSA on least squares (no Monte Carlo noise).

Derived here (the one-step recursion is the one derived symbolically by
:func:`convkit.bounds.moments.derive_second_moment_recursion`; the test
``tests/test_exact_theory.py`` checks the coefficients used below against it).

Setting
-------
``P`` workers start from ``theta0``; worker ``i`` runs ``eta_i <- eta_i - gamma_k g_i`` with
``eta = theta - theta*`` and ``g_i`` a mini-batch gradient of size ``b``; after every
communication step all workers replace ``eta_i`` by the mean ``eta_bar``.  Work in the
eigenbasis of ``H = Q diag(h) Q^T``: ``z = Q^T eta`` (the Gaussian design is rotation
invariant; the Rademacher design ``x = Q diag(sqrt h) s`` has Rademacher coordinates in that
basis, so the same formulas hold for a rotated ``H``).

One local step (batch ``b``, second moment ``M = E[z z^T]`` of one worker)::

    M' = M - g (HM + MH) + g^2 [(1 + 1/b) HMH + tr(HM) H / b - (2/b) rad diag(h_i^2 M_ii)]
         + g^2 sigma^2 H / b                                   (Gaussian: rad = 0; Rademacher: 1)
    M' = (I - gH) M (I - gH) + g^2 sigma^2 H / b                (additive noise)

The metrics only need the *diagonal* of ``M`` (``hnorm2 = tr(HM)``, ``dist2 = tr(M)``), and
the diagonal of ``M'`` depends on the diagonal of ``M`` only (the off-diagonal entries
evolve by their own factors and never feed back), so with ``s_j = M_jj``::

    s_j' = s_j (1 - 2 g h_j + c_sq g^2 h_j^2) + (g^2 h_j / b) (c_tr sum_l h_l s_l + sigma^2)

with ``(c_sq, c_tr) = (1 + 1/b, 1)`` (Gaussian), ``(1 - 1/b, 1)`` (Rademacher), ``(1, 0)``
(additive).  This is exact for any start (the rank-one ``eta0 eta0^T`` included: its
off-diagonal part is irrelevant) and costs ``O(d)`` per step.

Workers
-------
By exchangeability two moments suffice: same-worker ``S = E[z_i z_i^T]`` and cross-worker
``C = E[z_i z_j^T]`` (``i != j``).  Samples of different workers are independent, so between
averages ``C' = (I - gH) C (I - gH)`` (diagonal: ``c_j' = (1 - g h_j)^2 c_j``) while ``S``
follows the one-step recursion.  The worker mean has second moment
``V = S / P + (1 - 1/P) C``, and an average maps ``S, C -> V, V``.  The cost does not depend on
``P``.

Polyak-Ruppert averages
-----------------------
Given the past ``F_s``, ``E[z_i,t | F_s] = Phi(t, s) z_i,s`` with
``Phi(t, s) = prod_{s<k<=t} (I - g_k H)`` (the noise has mean zero; averaging is linear and
commutes with the diagonal ``Phi``), hence the same for the worker mean and
``E[zbar_s zbar_t^T]_jj = Phi_j(t, s) V_j(s)`` for ``s <= t``.  With
``A_j(t) = sum_{s<=t} Phi_j(t, s) V_j(s)`` we get the ``O(d)`` recursions::

    A_j(t) = (1 - g_t h_j) A_j(t-1) + V_j(t)
    Q_j(t) = E[(sum_{s<=t} zbar_s)_j^2] = Q_j(t-1) + 2 A_j(t) - V_j(t)

and ``E||avg_t - theta*||_H^2 = sum_j h_j Q_j(t) / t^2``.  Tail averaging from
``s0 = floor(tail n) + 1`` uses a second ``A`` started at zero at ``s0``.  The last iterate:
``sum_j h_j V_j(t)``.

Scope
-----
This module is the Local-SGD engine (:func:`local_curves`, :class:`LocalSpec`,
:func:`local_specs`) and the stability analysis of the same recursion
(:func:`second_moment_matrix`, :func:`stability_limit`).  The coefficients ``(c_sq, c_tr)``
and the start in H's eigenbasis live in :mod:`convkit.exact.moments`;
:func:`convkit.exact.expected_error` (:mod:`convkit.exact.dispatch`) turns the raw curves into
a :class:`~convkit.result.Result`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._kernel_switch import kernels_enabled
from ..algorithms.local import LocalSGD
from ..problems.least_squares import LeastSquares
from ..recording import record_steps
from ..schedules import CommSchedule, Constant, PolyDecay, Rounds, StepSize
from ..validation import check_int
from ._kernels import STEP_ARRAY, STEP_CONSTANT, STEP_POLY, local_kernel
from .moments import design_coefficients

__all__ = [
    "LocalSpec",
    "design_coefficients",
    "local_curves",
    "kernel_threads",
    "local_specs",
    "second_moment_matrix",
    "stability_limit",
]


@dataclass
class LocalSpec:
    """One Local-SGD configuration in exact-engine form, without ``n``-long arrays.

    ``n`` local steps; ``step`` the step-size schedule (a :class:`~convkit.schedules.StepSize`,
    or an array of the ``n`` step sizes); ``comm`` the communication schedule (a
    :class:`~convkit.schedules.CommSchedule`, or a boolean array of length ``n``); ``workers``
    P, ``batch`` b, ``tail_start`` s0 (1-based), ``rec`` sorted record steps in [1, n].
    ``gammas`` and ``mask`` materialise the ``n``-long arrays (for the NumPy path only).
    """

    n: int
    step: Any
    comm: Any
    workers: int
    batch: int
    tail_start: int
    rec: np.ndarray

    @property
    def gammas(self) -> np.ndarray:
        if isinstance(self.step, StepSize):
            return np.asarray(self.step.values(self.n), dtype=np.float64)
        return np.asarray(self.step, dtype=np.float64)

    @property
    def mask(self) -> np.ndarray:
        if isinstance(self.comm, CommSchedule):
            return self.comm.mask(self.n)
        return np.asarray(self.comm, dtype=bool)

    def kernel_step(self) -> tuple[int, float, float, float, np.ndarray]:
        """``(kind, C, alpha, k0, array)`` of the kernel's step-size arguments."""
        st = self.step
        if isinstance(st, PolyDecay):
            return STEP_POLY, float(st.C), float(st.alpha), float(st.k0), _EMPTY_F
        if isinstance(st, Constant):
            return STEP_CONSTANT, float(st.gamma), 0.0, 0.0, _EMPTY_F
        return STEP_ARRAY, 0.0, 0.0, 0.0, np.ascontiguousarray(self.gammas)

    def kernel_rounds(self) -> tuple[int, int, np.ndarray]:
        """``(period, N_even, positions)`` of the kernel's round arguments: a period ``H``
        (MBA, ``Every(H)``), ``N`` evenly spaced rounds (``Rounds(N)``), or else the sorted
        round positions (``O(rounds)`` memory)."""
        if isinstance(self.comm, CommSchedule):
            self.comm.validate(self.n)
            period = self.comm.period(self.n)
            if period:
                return period, 0, _EMPTY_I
            if isinstance(self.comm, Rounds):
                return 0, int(self.comm.N), _EMPTY_I
            return 0, 0, np.ascontiguousarray(self.comm.steps(self.n), dtype=np.int64)
        return 0, 0, np.flatnonzero(np.asarray(self.comm, dtype=bool)).astype(np.int64) + 1


_EMPTY_F = np.zeros(0, dtype=np.float64)
_EMPTY_I = np.zeros(0, dtype=np.int64)


def local_curves(
    h: np.ndarray,
    z2: np.ndarray,
    sigma2: float,
    design: str,
    specs: Sequence[LocalSpec],
    *,
    threshold: float = np.inf,
    use_numba: bool | None = None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Raw exact curves of several configurations (the engine's core).

    Returns ``(raw, diverged_at)``: ``raw[c]`` has shape ``(len(rec), 6)`` with columns
    ``E||avg||_H^2, E||avg||^2, E||tail||_H^2, E||tail||^2, E||last||_H^2, E||last||^2``
    (NaN where undefined: tail before its start, after divergence); ``diverged_at[c]`` is the
    first step with ``E||zbar||^2 > threshold`` (0 if none).  ``use_numba=None``: the compiled
    loop when available and the kernels are on (``convkit.kernels``) (one call per configuration, the configurations on up to
    :func:`kernel_threads` parallel threads, numbers independent of the thread count), else
    the NumPy path vectorized across configurations.
    """
    h = np.ascontiguousarray(h, dtype=np.float64)
    z2 = np.ascontiguousarray(z2, dtype=np.float64)
    # None: the compiled loop while the kernels are on (convkit.kernels) and numba is usable
    wanted = use_numba is True or (use_numba is None and kernels_enabled())
    kernel = local_kernel() if wanted else None
    if use_numba and kernel is None:
        raise RuntimeError("use_numba=True but numba is not available (or CONVKIT_NO_NUMBA set)")
    raws = [np.full((s.rec.size, 6), np.nan) for s in specs]
    div = np.zeros(len(specs), dtype=np.int64)
    if kernel is not None:
        calls = []
        for i, s in enumerate(specs):
            c_sq, c_tr = design_coefficients(design, s.batch)
            kind, C, alpha, k0, gam = s.kernel_step()
            period, n_even, rpos = s.kernel_rounds()
            calls.append(
                (
                    h,
                    z2,
                    int(s.n),
                    kind,
                    C,
                    alpha,
                    k0,
                    gam,
                    int(period),
                    int(n_even),
                    rpos,
                    float(s.workers),
                    float(s.batch),
                    c_sq,
                    c_tr,
                    sigma2,
                    int(s.tail_start),
                    np.ascontiguousarray(s.rec, dtype=np.int64),
                    float(threshold),
                    raws[i],
                )
            )
        div[:] = _run_kernels(kernel, calls, [s.n * h.size for s in specs])
    else:
        _numpy_curves(h, z2, sigma2, design, specs, threshold, raws, div)
    for i, s in enumerate(specs):
        if div[i]:
            raws[i][s.rec >= div[i]] = np.nan
    return raws, div


def kernel_threads() -> int:
    """Threads for the configurations of one :func:`local_curves` call: numba's thread
    count (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``)."""
    import numba
    from numba.np.ufunc import parallel

    if not getattr(parallel, "_is_initialized", True):
        # nobody set a count yet: the default, without starting numba's threading layer
        return int(numba.config.NUMBA_NUM_THREADS)
    return int(numba.get_num_threads())


def _run_kernels(kernel: Any, calls: list[tuple], costs: list[int]) -> list[int]:
    """Run the compiled kernel once per configuration, on up to :func:`kernel_threads`
    threads (it releases the GIL).  Each call writes only its own output array and reads
    shared inputs, so the numbers do not depend on the thread count or the order."""
    threads = min(len(calls), kernel_threads()) if len(calls) > 1 else 1
    if threads <= 1:
        return [int(kernel(*c)) for c in calls]
    if not kernel.signatures:  # load (or compile) it here, not in several threads at once
        c = calls[0]
        kernel(*c[:2], 1, *c[3:16], 1, c[17][:0], c[18], np.empty((0, 6)))
    order = sorted(range(len(calls)), key=lambda i: -costs[i])  # longest first
    out = [0] * len(calls)
    with ThreadPoolExecutor(max_workers=threads) as ex:
        for i, r in zip(order, ex.map(lambda i: int(kernel(*calls[i])), order), strict=True):
            out[i] = r
    return out


def _numpy_curves(h, z2, sigma2, design, specs, threshold, raws, div) -> None:
    """The NumPy path: one Python loop over steps, all configurations stacked as (K, d)."""
    K, d = len(specs), h.size
    n_max = max(s.n for s in specs)
    gam = np.zeros((K, n_max))
    comm = np.zeros((K, n_max), dtype=bool)
    is_rec = np.zeros((K, n_max + 1), dtype=bool)
    for i, s in enumerate(specs):
        gam[i, : s.n] = s.gammas
        comm[i, : s.n] = s.mask
        is_rec[i, s.rec] = True
    coef = np.array([design_coefficients(design, s.batch) for s in specs])
    c_sq, c_tr = coef[:, :1], coef[:, 1:]
    bs = np.array([float(s.batch) for s in specs])[:, None]
    ip = 1.0 / np.array([float(s.workers) for s in specs])[:, None]
    tail0 = np.array([s.tail_start for s in specs])
    nn = np.array([s.n for s in specs])
    S = np.tile(z2, (K, 1))
    C = S.copy()
    A = np.zeros((K, d))
    At = np.zeros((K, d))
    q = np.zeros((K, 2))
    qt = np.zeros((K, 2))
    pos = np.zeros(K, dtype=np.int64)
    alive = np.ones(K, dtype=bool)
    with np.errstate(all="ignore"):
        for k in range(1, n_max + 1):
            g = gam[:, k - 1 : k]
            gh = g * h
            r = 1.0 - gh
            add = g * g / bs * (c_tr * (S @ h)[:, None] + sigma2)
            S = S * (1.0 - 2.0 * gh + c_sq * gh * gh) + add * h
            C = C * r * r
            V = ip * S + (1.0 - ip) * C
            avg = comm[:, k - 1]
            S[avg] = V[avg]
            C[avg] = V[avg]
            A = r * A + V
            VV = np.stack([V @ h, V.sum(axis=1)], axis=1)
            AA = np.stack([A @ h, A.sum(axis=1)], axis=1)
            q += 2.0 * AA - VV
            tl = (k >= tail0)[:, None]
            At = np.where(tl, r * At + V, 0.0)
            TT = np.stack([At @ h, At.sum(axis=1)], axis=1)
            qt += np.where(tl, 2.0 * TT - VV, 0.0)
            active = alive & (k <= nn)
            bad = active & ~(VV[:, 1] <= threshold)
            div[bad] = k
            alive &= ~bad
            for i in np.flatnonzero(active & ~bad & is_rec[:, k]):
                row = raws[i][pos[i]]
                row[0:2] = q[i] / k**2
                if k >= tail0[i]:
                    row[2:4] = qt[i] / (k - tail0[i] + 1) ** 2
                row[4:6] = VV[i]
                pos[i] += 1


def local_specs(
    algos: Sequence[LocalSGD],
    ns: Sequence[int],
    record,
    n_record: int,
    tail: float,
    n_max: int | None = None,
    recs: Sequence[np.ndarray] | None = None,
) -> list[LocalSpec]:
    """One :class:`LocalSpec` per algorithm (``n`` local steps each, records as
    :func:`~convkit.recording.record_steps`, or ``recs`` when the caller has them already,
    tail averaging from ``floor(tail n) + 1``)."""
    specs = []
    for i, (a, n) in enumerate(zip(algos, ns, strict=True)):
        a.comm.validate(n)
        specs.append(
            LocalSpec(
                n=int(n),
                step=a.step_size,
                comm=a.comm,
                workers=a.workers,
                batch=a.batch,
                tail_start=int(math.floor(tail * n)) + 1,
                rec=(
                    recs[i]
                    if recs is not None
                    else record_steps(n, n_record, record, n_max=n_max or max(ns))
                ),
            )
        )
    return specs


# ============================================================================ stability
def _spectrum_and_design(problem_or_h: Any, design: str | None) -> tuple[np.ndarray, str]:
    if isinstance(problem_or_h, LeastSquares):
        return problem_or_h.h, design or problem_or_h.design
    h = np.atleast_1d(np.asarray(problem_or_h, dtype=np.float64))
    if h.ndim != 1 or h.size == 0 or not np.all(np.isfinite(h)) or np.any(h <= 0):
        raise ValueError(f"h must be a non-empty 1-D array of positive eigenvalues, got {h}")
    return h, design or "gaussian"


def second_moment_matrix(
    h: np.ndarray, gamma: float, batch: int, design: str, workers: int = 1, every: int | None = None
) -> np.ndarray:
    """The linear part of the diagonal second-moment map (module docstring).

    ``every=None``: one local step of one worker, ``s' = A s`` with
    ``A = diag(1 - 2 g h + c_sq g^2 h^2) + c_tr (g^2/b) h h^T``.  ``every=H``: one period of
    Local-SGD with ``workers`` workers (``H`` local steps then an average) acting on the
    worker-mean moment ``v``: ``v' = (1/P) A^H v + (1 - 1/P) diag((1 - g h)^(2H)) v``.
    """
    c_sq, c_tr = design_coefficients(design, batch)
    gh = gamma * h
    A = np.diag(1.0 - 2.0 * gh + c_sq * gh * gh) + c_tr * gamma**2 / batch * np.outer(h, h)
    if every is None:
        return A
    P = float(workers)
    return np.linalg.matrix_power(A, every) / P + (1.0 - 1.0 / P) * np.diag(
        (1.0 - gh) ** (2 * every)
    )


def _radius(h, gamma, batch, design, workers, every) -> float:
    M = second_moment_matrix(h, gamma, batch, design, workers, every)
    if every is None:
        ev = np.linalg.eigvalsh(M)  # symmetric: diag + rank one
    else:
        ev = np.linalg.eigvals(M)
    rho = float(np.max(np.abs(ev)))
    return rho if every is None else rho ** (1.0 / every)


def stability_limit(
    problem_or_h: Any,
    batch: int = 1,
    *,
    design: str | None = None,
    workers: int = 1,
    every: int | None = None,
    rtol: float = 1e-12,
) -> float:
    """Largest constant step ``gamma*`` with a mean-square stable second-moment map.

    Derived here from the same recursion as :func:`convkit.exact.expected_error`: the spectral radius of
    :func:`second_moment_matrix` is < 1 exactly for ``gamma < gamma*`` (the stable set is an
    interval ``(0, gamma*)``; see :func:`convkit.bounds.sgd_stability.derive_secular_equation`).
    Found by doubling then bisection on ``rho(gamma) - 1``.  Closed forms (tested): 1-D
    Gaussian ``2 b / ((b + 2) h)`` (b = 1: ``2 / (3 h)``); isotropic ``H = h I_d`` Gaussian
    ``2 b / ((b + 1 + d) h)``, Rademacher ``2 b / ((b + d - 1) h)``; additive noise ``2 / h_max``.
    ``every=H`` with ``workers=P`` gives the limit of Local-SGD averaging every ``H`` steps
    (MBA with ``P`` workers, ``H = 1``, equals one worker with batch ``P b``).
    """
    h, design = _spectrum_and_design(problem_or_h, design)
    batch = check_int("batch", batch, low=1)
    workers = check_int("workers", workers, low=1)
    if every is not None:
        every = check_int("every", every, low=1)

    def f(g: float) -> float:
        with np.errstate(all="ignore"):
            return _radius(h, g, batch, design, workers, every) - 1.0

    hi = 1.0 / float(h.max())
    while f(hi) < 0.0:
        hi *= 2.0
        if hi > 1e6 / float(h.min()):
            raise RuntimeError("no stability limit found (the map stays stable)")
    lo = hi / 2.0
    while f(lo) >= 0.0:
        lo /= 2.0
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if f(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
