r"""The exact counterpart of :func:`convkit.simulate`: :func:`expected_error` dispatches each
algorithm to its exact engine and assembles one :class:`~convkit.result.Result`.

Engines (each imports only :mod:`convkit.exact.moments`, :mod:`convkit.exact._kernels` and
:mod:`convkit.recording`, never this module), chosen by the exact model each algorithm's class
declares for least squares (``capabilities``, :mod:`convkit.algorithms.capabilities`; a
subclass that overrides the update declares its own or is refused):

* model ``"local"`` (:class:`~convkit.algorithms.local.LocalSGD`: MBA, Local-SGD, OSA):
  :func:`convkit.exact.local.local_curves`, all configurations in one batched call;
* ``"dpsgd"`` (uncompressed D-PSGD on a static topology):
  :func:`convkit.exact.dpsgd.dpsgd_curves`;
* ``"choco"``, ``"deep_squeeze"`` (CHOCO-SGD / DeepSqueeze with identity or (scaled) rand-k
  compressors): :func:`convkit.exact.compressed.compressed_curves`;
* ``"server_momentum"`` (:class:`~convkit.algorithms.federated.FedAvgM`, Local-SGD with
  server momentum): :func:`convkit.exact.server_momentum.server_momentum_curves`.

Each algorithm's engine (:func:`exact_engine`) and the execution path are decided once, before
any work, in the call's :class:`~convkit.plan.RunPlan` (``Result.meta["path"]``): the
Local-SGD family runs the compiled recursion (:data:`EXACT_COMPILED`, while numba is usable
and the kernels are on: ``convkit.kernels``, or ``use_numba=True``) or its NumPy form
(:data:`EXACT_NUMPY`), vectorized across configurations; D-PSGD and the compressed engines
run on NumPy on either path.

Result conventions
------------------
:func:`expected_error` returns a :class:`~convkit.result.Result` with the frame layout of
:func:`convkit.simulate`: ``se = 0`` and ``count = 0`` (:data:`EXACT_COUNT`, an ``int64``
column as in Monte Carlo frames).  ``count = 0`` marks an exact row: its ``mean`` is the exact
expectation, computed from no replicate, with no sampling error (``se = 0``).  It cannot be
mistaken for a replicate count: a Monte Carlo frame never holds a row with ``count = 0`` (such
rows, with no surviving replicate, are dropped), so ``frame["count"] == 0`` selects the exact
rows of frames of both engines concatenated, and ``result.meta["engine"] == "exact"`` says the
same for a whole result.  Beware filters such as ``frame[frame["count"] > 0]`` written for Monte
Carlo frames: they drop every exact row.  ``Result.values`` holds one pseudo-replicate (the exact value), so
:meth:`Result.compare` gives exact differences and ratios (their ``se`` is NaN).  Divergence
(above the mean-square stability limit): a configuration whose ``E||zbar_k||^2`` exceeds
``divergence_factor * max(||eta0||^2, 1)`` or is not finite is marked diverged at that step,
its later record points are dropped and a :class:`~convkit.recording.DivergenceWarning` is
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

from .._kernel_switch import numba_usable
from ..algorithms.base import Algorithm, algorithm_list
from ..plan import RunPlan, kernels_unavailable, local_steps_of, plan
from ..problems.least_squares import LeastSquares
from ..recording import (
    ITERATES,
    DivergenceWarning,
    algorithms_meta,
    record_steps,
    starting_point,
)
from ..result import FRAME_COLUMNS, ConfigValues, Result
from ..validation import check_real
from .compressed import compressed_curves, is_exact_compressed
from .dpsgd import dpsgd_curves
from .local import local_curves, local_specs
from .moments import problem_arrays, signed_start
from .server_momentum import server_momentum_curves

__all__ = [
    "EXACT_COMPILED",
    "EXACT_COUNT",
    "EXACT_NUMPY",
    "EXACT_PATHS",
    "MODEL_ENGINES",
    "exact_engine",
    "expected_error",
    "result_from_raw",
]

#: ``count`` of every row of an exact result: 0, "no replicate, exact value" (Monte Carlo rows
#: always have ``count >= 1``); see the module docstring.
EXACT_COUNT: int = 0


@dataclass(frozen=True)
class _ExactPath:
    """An execution path of the exact engine: the Local-SGD family's second-moment recursion
    compiled (``compiled=True``, one numba call per configuration on up to
    :func:`convkit.exact.local.kernel_threads` threads) or in NumPy (vectorized across
    configurations); D-PSGD and the compressed engines run on NumPy on both."""

    compiled: bool

    @property
    def name(self) -> str:
        return "exact-compiled" if self.compiled else "exact-numpy"

    def supports(self, plan: RunPlan) -> tuple[bool, str]:
        if plan.engine != "exact":
            return False, "exact engine only"
        if not self.compiled:
            return True, "the Local-SGD family by the NumPy recursion, across configurations"
        why = kernels_unavailable(plan)
        if why is not None:
            return False, why
        return True, "the Local-SGD family by the compiled recursion, one call per configuration"

    def accepts(self, plan: RunPlan, i: int) -> tuple[bool, str]:
        """Every algorithm; the reason names its engine when it is not the Local-SGD family's
        recursion (the other engines run on NumPy on either path)."""
        engine = plan.engines[i] if plan.engines else "local"
        if engine == "local":
            return True, self.supports(plan)[1]
        return True, f"its exact model's engine {engine!r}, on NumPy (on either path)"


#: the compiled Local-SGD recursion (numba usable, kernels on)
EXACT_COMPILED = _ExactPath(compiled=True)
#: the NumPy Local-SGD recursion (always)
EXACT_NUMPY = _ExactPath(compiled=False)
#: the exact engine's execution paths, fastest first
EXACT_PATHS = (EXACT_COMPILED, EXACT_NUMPY)


#: the engine of each exact model (:data:`convkit.algorithms.capabilities.EXACT_MODELS`)
MODEL_ENGINES = {
    "local": "local",
    "dpsgd": "dpsgd",
    "choco": "compressed",
    "deep_squeeze": "compressed",
    "server_momentum": "server_momentum",
}


def exact_engine(algo: Algorithm, problem: LeastSquares) -> tuple[str | None, str]:
    """The exact engine of ``algo`` on ``problem``, from the exact model its class declares
    for least squares (``capabilities``, :mod:`convkit.algorithms.capabilities`; never its
    concrete class): ``("local" | "dpsgd" | "compressed", "")``, or ``(None, why not)``."""
    caps = algo.capabilities
    model = caps.exact_model("least_squares")
    if model is None:
        return None, caps.refusal(type(algo), "least_squares")
    engine = MODEL_ENGINES[model]
    if engine == "compressed":
        ok, why = is_exact_compressed(algo, problem)
        return ("compressed", "") if ok else (None, why)
    return engine, ""


def result_from_raw(
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
    """The :class:`~convkit.result.Result` of an exact engine (:func:`expected_error`,
    :func:`convkit.exact.expected_error_nodes`) from each algorithm's raw curves ``raws[i]``
    (columns: ``E||.||_H^2`` and ``E||.||^2`` of the averaged, tail-averaged and last
    iterates, then the ``extras[label]`` state metrics) and divergence steps ``div``: the
    tidy frame (``se = 0``, ``count = EXACT_COUNT = 0``) and one pseudo-replicate; a
    :class:`~convkit.recording.DivergenceWarning` when a configuration diverged."""
    extras = extras or {}
    per_config: dict[str, ConfigValues] = {}
    for label, a, n, rec, raw, dv in zip(labels, algos, ns, recs, raws, div, strict=True):
        counts = a.comm_counts_at(rec, n, d)  # record points only: no n-long arrays
        axes = {
            "gradients": rec * a.workers * a.batch,
            **{key: counts[key] for key in ("rounds", "messages", "bits")},
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
    return Result(frame, meta, per_config)


#: the dtype pandas gives a column of Python strings (``str`` from pandas 3, ``object`` before):
#: the label columns are built in it directly, which is cheaper than letting the frame infer it
_LABEL_DTYPE = pd.Series(["a"]).dtype


def _labels(names: list[str], codes: np.ndarray) -> Any:
    """The label column ``names[codes]`` in :data:`_LABEL_DTYPE`."""
    return pd.array(np.array(names, dtype=object)[codes], dtype=_LABEL_DTYPE)


def _exact_frame(per_config: dict[str, ConfigValues]) -> pd.DataFrame:
    """The tidy frame of :func:`convkit.result.frame_from_values` for one pseudo-replicate per
    configuration (built directly: rows with a finite value, ``se = 0``,
    ``count = EXACT_COUNT = 0``; labels as codes into the names until the end: a small
    exact call spends most of its time outside the kernel here)."""
    keys = ("config", "step", "gradients", "rounds", "messages", "bits", "iterate", "metric")
    cols: dict[str, list[np.ndarray]] = {c: [] for c in (*keys, "mean")}
    iterates: list[str] = []
    metrics: list[str] = []
    for code, cv in enumerate(per_config.values()):
        v = cv.values[..., 0]
        n_rec, n_it, n_me = v.shape
        flat = v.reshape(-1)
        ok = np.flatnonzero(np.isfinite(flat))  # row-major (record, iterate, metric)
        rec, rest = np.divmod(ok, n_it * n_me)
        it, me = np.divmod(rest, n_me)
        cols["config"].append(np.full(ok.size, code))
        cols["step"].append(cv.steps[rec])
        for ax in ("gradients", "rounds", "messages", "bits"):
            cols[ax].append(np.asarray(cv.axes[ax])[rec])
        cols["iterate"].append(it + len(iterates))
        cols["metric"].append(me + len(metrics))
        cols["mean"].append(flat[ok])
        iterates += list(cv.iterates)
        metrics += list(cv.metrics)
    if not per_config:
        return pd.DataFrame(columns=FRAME_COLUMNS)
    data: dict[str, Any] = {c: np.concatenate(a) for c, a in cols.items()}
    data["config"] = _labels(list(per_config), data["config"])
    data["iterate"] = _labels(iterates, data["iterate"])
    data["metric"] = _labels(metrics, data["metric"])
    n_rows = data["mean"].size
    data["se"] = np.zeros(n_rows)
    data["count"] = np.full(n_rows, EXACT_COUNT, dtype=np.int64)
    return pd.DataFrame({c: data[c] for c in FRAME_COLUMNS}, copy=False)


def expected_error(
    problem: LeastSquares,
    algorithms: Algorithm | Sequence[Algorithm],
    *,
    gradients: int | None = None,
    gradients_remainder: str = "error",
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
    the exact ``"state"`` metrics (consensus, grad_norm2, replica_gap / memory).  Maths: the engines'
    module docstrings; conventions (``se = 0``, ``count = EXACT_COUNT = 0``: exact) and divergence
    handling: this module's docstring.
    ``gradients_remainder`` (``"error"`` or ``"floor"``) as in :func:`convkit.simulate`:
    ``"floor"`` runs ``n = floor(T / (P b))`` local steps and records the gradients used,
    ``n P b``, in ``meta["algorithms"][label]["gradients"]``.
    ``use_numba``: ``None`` (default) the compiled Local-SGD recursion while numba is usable
    and the kernels are on (``convkit.kernels``), ``True`` require it (``RuntimeError``
    without numba), ``False`` the NumPy recursion; ``meta["path"]`` records the choice.
    Monte Carlo-only keywords of ``simulate`` (``replicates``, ``seed``, ``backend``,
    ``dtype``, ``memory_limit``, ``progress``) are accepted and ignored, so that switching
    engines is one word.
    """
    t_start = time.perf_counter()
    if ignored.get("weight_shift") is not None:
        raise ValueError(
            f"weight_shift = {ignored['weight_shift']!r}: the exact engine has no weighted "
            "iterate averages (wavg1, wavg2); allowed: None here, or use convkit.simulate"
        )
    ignored.pop("weight_shift", None)
    unknown = set(ignored) - {"replicates", "seed", "backend", "dtype", "memory_limit", "progress"}
    if unknown:
        raise TypeError(f"expected_error got unexpected keyword arguments {sorted(unknown)}")
    algos = algorithm_list(algorithms)
    labels = [a.label for a in algos]
    tail = check_real("tail", tail, low=0, high=1, high_inclusive=False)
    check_real("divergence_factor", divergence_factor, low=1)
    ns = local_steps_of(algos, gradients, steps, gradients_remainder)
    h, z2, sigma2 = problem_arrays(problem, theta0)  # checks the problem first
    threshold = divergence_factor * max(float(z2.sum()), 1.0)
    recs = [record_steps(n, n_record, record, n_max=max(ns)) for n in ns]
    engines = []
    for a in algos:
        engine, why = exact_engine(a, problem)
        if engine is None:
            raise TypeError(
                "the exact engine handles the algorithms whose class declares an exact model "
                "for least squares (capabilities: LocalSGD, MBA, OSA; FedAvgM; uncompressed "
                "D-PSGD; CHOCO-SGD / DeepSqueeze with identity or (scaled) rand-k "
                "compressors); "
                f"{a.label} ({type(a).__name__}): {why}"
            )
        engines.append(engine)
    if use_numba is True and not numba_usable():
        raise RuntimeError("use_numba=True but numba is not available (or CONVKIT_NO_NUMBA set)")
    run_plan = plan(
        problem,
        algos,
        engine="exact",
        steps=ns,
        record=recs,
        paths=EXACT_PATHS,
        kernels=use_numba,
        engines=engines,
    )
    raws: list[np.ndarray | None] = [None] * len(algos)
    div = np.zeros(len(algos), dtype=np.int64)
    local_idx = [i for i, e in enumerate(engines) if e == "local"]
    other_idx = [i for i in range(len(algos)) if i not in local_idx]
    if local_idx:
        specs = local_specs(
            [algos[i] for i in local_idx],
            [ns[i] for i in local_idx],
            record,
            n_record,
            tail,
            n_max=max(ns),
            recs=[recs[i] for i in local_idx],
        )
        compiled = run_plan.path == EXACT_COMPILED.name
        r, dv = local_curves(
            h, z2, sigma2, problem.design, specs, threshold=threshold, use_numba=compiled
        )
        for j, i in enumerate(local_idx):
            raws[i], div[i] = r[j], dv[j]
    extras: dict[str, list[str]] = {}
    if other_idx:
        for i in other_idx:
            s0 = int(math.floor(tail * ns[i])) + 1
            if engines[i] == "server_momentum":
                raws[i], div[i] = server_momentum_curves(
                    h, z2, sigma2, problem.design, algos[i], ns[i], recs[i], s0,
                    threshold=threshold,
                )  # fmt: skip
                continue
            if engines[i] == "dpsgd":
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
            z0, ts = signed_start(problem, theta0)
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
        "algorithms": algorithms_meta(algos, labels, ns),
        "gradients": {"requested": gradients, "remainder": gradients_remainder},
        "engine": "exact",
        "path": run_plan.describe(),
        "replicates": None,
        "count": EXACT_COUNT,
        "theta0": starting_point(theta0, problem.d).tolist(),
        "tail": tail,
        "timing": {"seconds": time.perf_counter() - t_start},
    }
    return result_from_raw(labels, algos, ns, recs, raws, div, problem.d, meta, extras)
