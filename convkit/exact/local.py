r"""Exact expected error of MBA / Local-SGD / OSA on least squares (no Monte Carlo noise).

Derived here (the one-step recursion is the one derived symbolically by
:func:`convkit.bounds.derivations.derive_second_moment_recursion`; the test
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

Result conventions
------------------
:func:`expected_error` returns a :class:`~convkit.result.Result` with the frame layout of
:func:`convkit.simulate`: ``se = 0`` and ``count = EXACT_COUNT = 2**53`` (a sentinel: an exact
value stands for infinitely many replicates; ``2**53`` is the largest integer a float64 holds
exactly).  ``Result.values`` holds one pseudo-replicate (the exact value), so
:meth:`Result.compare` gives exact differences and ratios (their ``se`` is NaN).  Divergence
(above the mean-square stability limit): a configuration whose ``E||zbar_k||^2`` exceeds
``divergence_factor * max(||eta0||^2, 1)`` or is not finite is marked diverged at that step,
its later record points are dropped and a :class:`~convkit.simulate.DivergenceWarning` is
issued.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..algorithms.base import Algorithm
from ..algorithms.local import LocalSGD, local_steps_for
from ..problems.least_squares import LeastSquares
from ..result import FRAME_COLUMNS, ConfigValues, Result
from ..simulate import ITERATES, DivergenceWarning, record_steps, starting_point
from ..validation import check_int, check_real
from ._kernels import local_kernel

__all__ = [
    "EXACT_COUNT",
    "LocalSpec",
    "design_coefficients",
    "expected_error",
    "local_curves",
    "stability_limit",
]

#: ``count`` of every row of an exact result (sentinel: "infinitely many replicates").
EXACT_COUNT: int = 2**53

# column order of the raw per-record output
_RAW = ("avg_h", "avg_1", "tail_h", "tail_1", "last_h", "last_1")


def design_coefficients(design: str, b: int) -> tuple[float, float]:
    """``(c_sq, c_tr)`` of the diagonal recursion (module docstring) for a design and batch."""
    if design == "gaussian":
        return 1.0 + 1.0 / b, 1.0
    if design == "rademacher":
        return 1.0 - 1.0 / b, 1.0
    if design == "additive":
        return 1.0, 0.0
    raise ValueError(f"design must be 'gaussian', 'rademacher' or 'additive', got {design!r}")


@dataclass
class LocalSpec:
    """One Local-SGD configuration in exact-engine form.

    ``gammas`` (n,) step sizes, ``comm`` (n,) bool (average after step k), ``workers`` P,
    ``batch`` b, ``tail_start`` s0 (1-based), ``rec`` sorted record steps in [1, n].
    """

    gammas: np.ndarray
    comm: np.ndarray
    workers: int
    batch: int
    tail_start: int
    rec: np.ndarray

    @property
    def n(self) -> int:
        return int(self.gammas.size)


def _problem_arrays(problem: LeastSquares, theta0: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """``h``, ``z0^2`` (start in H's eigenbasis, squared) and ``sigma^2``."""
    if not isinstance(problem, LeastSquares):
        raise TypeError(
            f"the exact engine handles convkit LeastSquares problems only, got {type(problem).__name__}"
        )
    eta0 = starting_point(theta0, problem.d) - problem.theta_star
    z0 = eta0 if problem.Q is None else problem.Q.T @ eta0
    return problem.h.copy(), z0 * z0, float(problem.noise) ** 2


def _signed_start(problem: LeastSquares, theta0: Any) -> tuple[np.ndarray, np.ndarray]:
    """``z0 = Q^T (theta0 - theta*)`` (signed) and ``Q^T theta*``."""
    eta0 = starting_point(theta0, problem.d) - problem.theta_star
    if problem.Q is None:
        return eta0, problem.theta_star.copy()
    return problem.Q.T @ eta0, problem.Q.T @ problem.theta_star


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
    loop when available, else the NumPy path vectorized across configurations.
    """
    h = np.ascontiguousarray(h, dtype=np.float64)
    z2 = np.ascontiguousarray(z2, dtype=np.float64)
    kernel = local_kernel() if use_numba in (None, True) else None
    if use_numba and kernel is None:
        raise RuntimeError("use_numba=True but numba is not available (or CONVKIT_NO_NUMBA set)")
    raws = [np.full((s.rec.size, 6), np.nan) for s in specs]
    div = np.zeros(len(specs), dtype=np.int64)
    if kernel is not None:
        for i, s in enumerate(specs):
            c_sq, c_tr = design_coefficients(design, s.batch)
            div[i] = kernel(
                h,
                z2,
                np.ascontiguousarray(s.gammas, dtype=np.float64),
                np.ascontiguousarray(s.comm, dtype=np.bool_),
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
    else:
        _numpy_curves(h, z2, sigma2, design, specs, threshold, raws, div)
    for i, s in enumerate(specs):
        if div[i]:
            raws[i][s.rec >= div[i]] = np.nan
    return raws, div


def _numpy_curves(h, z2, sigma2, design, specs, threshold, raws, div) -> None:
    """The NumPy path: one Python loop over steps, all configurations stacked as (K, d)."""
    K, d = len(specs), h.size
    n_max = max(s.n for s in specs)
    gam = np.zeros((K, n_max))
    comm = np.zeros((K, n_max), dtype=bool)
    is_rec = np.zeros((K, n_max + 1), dtype=bool)
    for i, s in enumerate(specs):
        gam[i, : s.n] = s.gammas
        comm[i, : s.n] = s.comm
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


def _specs_for(
    algos: Sequence[LocalSGD], ns: Sequence[int], record, n_record: int, tail: float
) -> list[LocalSpec]:
    specs = []
    for a, n in zip(algos, ns, strict=True):
        a.comm.validate(n)
        specs.append(
            LocalSpec(
                gammas=np.asarray(a.step_size.values(n), dtype=np.float64),
                comm=a.comm.mask(n),
                workers=a.workers,
                batch=a.batch,
                tail_start=int(math.floor(tail * n)) + 1,
                rec=record_steps(n, n_record, record),
            )
        )
    return specs


def _result_from_raw(
    labels: list[str],
    algos: Sequence[Algorithm],
    ns: Sequence[int],
    recs: Sequence[np.ndarray],
    raws: Sequence[np.ndarray],
    div: np.ndarray,
    d: int,
    meta: dict[str, Any],
    extras: dict[str, list[str]] | None = None,
) -> Result:
    """Assemble the tidy frame (``se = 0``, ``count = EXACT_COUNT``) and one pseudo-replicate."""
    extras = extras or {}
    per_config: dict[str, ConfigValues] = {}
    for label, a, n, rec, raw, dv in zip(labels, algos, ns, recs, raws, div, strict=True):
        counts = a.comm_counts(n, d)
        axes = {
            "gradients": rec * a.workers * a.batch,
            **{key: counts[key][rec - 1] for key in ("rounds", "messages", "bits")},
        }
        extra = extras.get(label, [])  # decentralized: exact "state" metrics
        iterates = list(ITERATES) + (["state"] if extra else [])
        metrics = ["excess_risk", "hnorm2", "dist2", *extra]
        vals = np.full((rec.size, len(iterates), len(metrics), 1), np.nan)
        for i_it in range(3):
            hn, d2 = raw[:, 2 * i_it], raw[:, 2 * i_it + 1]
            vals[:, i_it, 0, 0] = 0.5 * hn
            vals[:, i_it, 1, 0] = hn
            vals[:, i_it, 2, 0] = d2
        for j in range(len(extra)):
            vals[:, 3, 3 + j, 0] = raw[:, 6 + j]
        per_config[label] = ConfigValues(
            rec, axes, iterates, metrics, vals, np.array([int(dv)], dtype=np.int64)
        )
    frame = _exact_frame(per_config)
    n_div = {lab: int(dv) for lab, dv in zip(labels, div, strict=True) if dv}
    if n_div:
        warnings.warn(
            f"exact second moments diverged (mean-square unstable): first step {n_div}; later "
            "record points are dropped",
            DivergenceWarning,
            stacklevel=3,
        )
    meta = {**meta, "diverged": n_div}
    return Result(frame.reset_index(drop=True), meta, per_config)


def _exact_frame(per_config: dict[str, ConfigValues]) -> pd.DataFrame:
    """The tidy frame of :func:`convkit.result.frame_from_values` for one pseudo-replicate per
    configuration (built directly: rows with a finite value, ``se = 0``,
    ``count = EXACT_COUNT``)."""
    cols: dict[str, list[np.ndarray]] = {c: [] for c in FRAME_COLUMNS}
    for name, cv in per_config.items():
        v = cv.values[..., 0]
        n_rec, n_it, n_me = v.shape
        ok = np.isfinite(v).ravel()
        idx = np.repeat(np.arange(n_rec), n_it * n_me)[ok]
        cols["config"].append(np.full(idx.size, name, dtype=object))
        cols["step"].append(cv.steps[idx])
        for ax in ("gradients", "rounds", "messages", "bits"):
            cols[ax].append(np.asarray(cv.axes[ax])[idx])
        cols["iterate"].append(
            np.tile(np.repeat(np.array(cv.iterates, dtype=object), n_me), n_rec)[ok]
        )
        cols["metric"].append(np.tile(np.array(cv.metrics, dtype=object), n_rec * n_it)[ok])
        cols["mean"].append(v.ravel()[ok])
    data = {c: np.concatenate(a) if a else np.array([]) for c, a in cols.items() if a}
    n_rows = data["mean"].size
    data["se"] = np.zeros(n_rows)
    data["count"] = np.full(n_rows, EXACT_COUNT, dtype=np.int64)
    return pd.DataFrame({c: data[c] for c in FRAME_COLUMNS})


def expected_error(
    problem: LeastSquares,
    algorithms: Algorithm | Sequence[Algorithm],
    *,
    gradients: int | None = None,
    steps: int | None = None,
    theta0: Any = None,
    record: Sequence[int] | None = None,
    n_record: int = 40,
    tail: float = 0.5,
    divergence_factor: float = 1e12,
    use_numba: bool | None = None,
    **ignored: Any,
) -> Result:
    """Exact ``E`` of the errors :func:`convkit.simulate` estimates, same arguments and frame.

    ``algorithms``: :class:`~convkit.algorithms.local.LocalSGD` objects (``MBA``, ``OSA``, any
    communication schedule, any step schedule, any batch), uncompressed
    :class:`~convkit.algorithms.decentralized.DPSGD` on a static topology
    (:mod:`convkit.exact.dpsgd`), and ``CHOCOSGD`` / ``DeepSqueeze`` with identity or
    (scaled) rand-k compressors (:mod:`convkit.exact.compressed`); decentralized results carry
    the exact ``"state"`` metrics (consensus, grad_norm2, replica_gap / memory).  Maths, conventions
    (``se = 0``, ``count = EXACT_COUNT``) and divergence handling: module docstring.
    Monte Carlo-only keywords of ``simulate`` (``replicates``, ``seed``, ``backend``,
    ``dtype``, ``memory_limit``, ``progress``) are accepted and ignored, so that switching
    engines is one word.
    """
    t_start = time.perf_counter()
    unknown = set(ignored) - {"replicates", "seed", "backend", "dtype", "memory_limit", "progress"}
    if unknown:
        raise TypeError(f"expected_error got unexpected keyword arguments {sorted(unknown)}")
    algos = [algorithms] if isinstance(algorithms, Algorithm) else list(algorithms)
    if not algos:
        raise ValueError("algorithms must hold at least one algorithm, got an empty sequence")
    labels = [a.label for a in algos]
    if len(set(labels)) != len(labels):
        raise ValueError(f"algorithm labels must be unique (pass name=...), got {labels}")
    tail = check_real("tail", tail, low=0, high=1, high_inclusive=False)
    check_real("divergence_factor", divergence_factor, low=1)
    if (gradients is None) == (steps is None):
        raise ValueError("give exactly one of gradients (total T) or steps (local steps n)")
    if steps is not None:
        ns = [check_int("steps", steps, low=1)] * len(algos)
    else:
        ns = [local_steps_for(gradients, a.workers, a.batch) for a in algos]
    h, z2, sigma2 = _problem_arrays(problem, theta0)
    threshold = divergence_factor * max(float(z2.sum()), 1.0)

    raws: list[np.ndarray | None] = [None] * len(algos)
    div = np.zeros(len(algos), dtype=np.int64)
    recs = [record_steps(n, n_record, record) for n in ns]
    local_idx = [i for i, a in enumerate(algos) if isinstance(a, LocalSGD)]
    other_idx = [i for i in range(len(algos)) if i not in local_idx]
    if local_idx:
        specs = _specs_for(
            [algos[i] for i in local_idx], [ns[i] for i in local_idx], record, n_record, tail
        )
        r, dv = local_curves(
            h, z2, sigma2, problem.design, specs, threshold=threshold, use_numba=use_numba
        )
        for j, i in enumerate(local_idx):
            raws[i], div[i] = r[j], dv[j]
    extras: dict[str, list[str]] = {}
    if other_idx:
        from .compressed import compressed_curves, is_exact_compressed
        from .dpsgd import dpsgd_curves, is_exact_dpsgd

        for i in other_idx:
            s0 = int(math.floor(tail * ns[i])) + 1
            if is_exact_dpsgd(algos[i]):
                raws[i], div[i] = dpsgd_curves(
                    h,
                    z2,
                    sigma2,
                    problem.design,
                    algos[i],
                    ns[i],
                    recs[i],
                    s0,
                    threshold=threshold,
                )
                extras[labels[i]] = ["consensus", "grad_norm2"]
                continue
            ok, why = is_exact_compressed(algos[i], problem)
            if not ok:
                raise TypeError(
                    "the exact engine handles LocalSGD (MBA, Local-SGD, OSA), uncompressed "
                    "D-PSGD, and CHOCO-SGD / DeepSqueeze with identity or (scaled) rand-k "
                    f"compressors; {labels[i]}: {why}"
                )
            z0, ts = _signed_start(problem, theta0)
            raws[i], div[i], extras[labels[i]] = compressed_curves(
                h,
                z0,
                ts,
                sigma2,
                problem.design,
                algos[i],
                ns[i],
                recs[i],
                s0,
                threshold=threshold,
            )
    meta = {
        "problem": problem.describe(),
        "algorithms": {
            labels[i]: {**a.describe(), "local_steps": ns[i]} for i, a in enumerate(algos)
        },
        "engine": "exact",
        "replicates": None,
        "count": EXACT_COUNT,
        "theta0": starting_point(theta0, problem.d).tolist(),
        "tail": tail,
        "timing": {"seconds": time.perf_counter() - t_start},
    }
    return _result_from_raw(labels, algos, ns, recs, raws, div, problem.d, meta, extras)


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

    Derived here from the same recursion as :func:`expected_error`: the spectral radius of
    :func:`second_moment_matrix` is < 1 exactly for ``gamma < gamma*`` (the stable set is an
    interval ``(0, gamma*)``; see :func:`convkit.bounds.derivations.derive_secular_equation`).
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
