"""The settings of :mod:`analyses.decentralized_heterogeneous` (its problems, graphs, step grids,
step tuning and final runs; the study is described there) and their sweep: each setting is one
call of :func:`setting_point`, identified by JSON arguments (quick, problem, split, topology;
:func:`setting_points`), in one function sweep (:func:`setting_frames`,
:func:`convkit.sweep.points.run_points`) with a verified cache in
``.convkit-cache/decentralized_heterogeneous/`` of the repository (:func:`cache_dir`), keyed by
those arguments and :func:`point_version`.  A setting's numbers come from its own seeds
(:data:`SEED`, :data:`TUNE_SEED`) and arguments only, so they do not depend on the process,
the executor, the order, the other settings or the cache.

Not an analysis itself (no ``run``): the analysis module runs :func:`setting_frames` and takes
the constants its checks and figures name from here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analyses import _decentralized_common as C
from convkit.compression import QSGD, TopK
from convkit.problems.datasets import (
    breast_cancer,
    load_svmlight,
    split_by_label,
    split_dirichlet,
    synthetic_logistic,
)
from convkit.problems.heterogeneous import HeterogeneousLeastSquares

if TYPE_CHECKING:
    from convkit.sweep.points import PointsResult

D = 32
DELTA = 0.5  # Hessian dissimilarity max_i ||H_i - H||_op of the least-squares problems
ZETA2 = {"0": 0.0, "small": 1.0, "large": 10.0}
GRID = 0.005 * 2.0 ** np.arange(4)  # 0.005 ... 0.04 (least squares)
LOGISTIC_GRID = 2.0 ** np.arange(-1, 3)  # times 1 / L_max
COMMON_LS, COMMON_LOGISTIC = 0.01, 1.0
LS_TARGET, LOGISTIC_TARGET = 0.02, 0.05
LAM, ALPHA = 0.01, 0.5
SEED, TUNE_SEED = 1307, 7031
#: cap on the extensions of each setting's step grid at each end (one doubling of a method's
#: top step, or one halving of its bottom step, per extension,
#: :func:`analyses._decentralized_common.tune_steps`)
MAX_EXTENSIONS = 8
#: iterations, replicates and tuning replicates of a setting, by quick mode
RUN_SIZES = {False: (1000, 16, 4), True: (200, 4, 3)}
#: part of every setting's cache key (:func:`point_version`, beside a digest of this module's
#: constants): raise it when a change outside these constants changes the numbers of a
#: setting (tuning, methods, problems, engine), so that no entry of the older numbers is read
#: (1: the first sweep-cached settings; 2: D-PSGD mixes in a fixed order and the
#: topologies' spectral constants come from the Jacobi method, issue 36)
POINT_VERSION = 2
#: the repository (its ``.convkit-cache`` holds the settings' cache, :func:`cache_dir`)
REPO = Path(__file__).resolve().parents[1]


def compressor(method: str):
    """The compressor of ``method`` in this study (None for D-PSGD)."""
    if method == "D-PSGD":
        return None
    if method in C.UNBIASED_METHODS:
        return QSGD(s=4)
    return TopK(fraction=0.25)


def _logistic_problems(quick: bool) -> list[tuple[str, str, object]]:
    """(dataset, split, problem) triples; the synthetic set goes through a LIBSVM file."""
    out = []
    bc = breast_cancer()
    with tempfile.TemporaryDirectory() as tmp:
        syn, _ = synthetic_logistic(2000, 20, seed=3)
        path = C.write_svmlight(Path(tmp) / "synthetic.svm", syn.X, syn.y)
        back = load_svmlight(path, n_features=20, binary=True)
    sets = [("breast-cancer", bc), ("synthetic-libsvm", back)]
    for name, ds in sets:
        for split in ("label", f"dirichlet({ALPHA:g})"):
            if quick and (name, split) != ("breast-cancer", f"dirichlet({ALPHA:g})"):
                continue
            part = (
                split_by_label(ds.y, C.P, seed=0)
                if split == "label"
                else split_dirichlet(ds.y, C.P, ALPHA, seed=0)
            )
            out.append((name, split, ds.logistic(lam=LAM, partition=part)))
    return out


@functools.cache
def consensus_params(topo_kind: str, d: int, fraction: float = 0.25, seed: int = SEED):
    """``(gamma_c, eta)`` of CHOCO-SGD and DeepSqueeze on the graph ``topo_kind`` with top-k
    (``fraction``) in dimension ``d`` (:func:`analyses._decentralized_common.consensus_params`,
    pure gossip: a function of these arguments only), computed once per key in a process:
    the settings of one graph and dimension share them (the three zeta^2 of least squares)."""
    return C.consensus_params(C.topology(topo_kind), TopK(fraction=fraction), d, seed)


def tune_setting(prob, topo_kind: str, grid, n: int, Rt: int, target: float, **kw: Any):
    """The step tuning of one setting (:func:`analyses._decentralized_common.tune_steps` on
    ``TUNE_SEED`` with ``Rt`` replicates, the no-gain stop and the methods without random
    compression declared ``stream_free``; ``kw`` overrides its keywords)
    and the builder of its methods: ``(tuned, builder, (gamma_c, eta))``."""
    topo = C.topology(topo_kind)
    gc, eta = consensus_params(topo_kind, int(prob.d))

    def builder(method):
        return lambda g, name: C.make_method(
            method, topo, g, compressor(method), gamma_c=gc, eta=eta, name=name
        )

    # methods with no compressor or a deterministic one (its ``random`` declaration) draw no
    # random numbers of their own: their pairs share calls, with the numbers they have alone
    free = [m for m in C.METHODS if not getattr(compressor(m), "random", False)]
    opts = {"max_extensions": MAX_EXTENSIONS, "no_gain_stop": True, "stream_free": free, **kw}
    tuned = C.tune_steps(
        prob,
        {m: builder(m) for m in C.METHODS},
        grid,
        steps=n,
        replicates=Rt,
        seed=TUNE_SEED,
        target=float(target),
        **opts,
    )
    return tuned, builder, (gc, eta)


def _setting_runs(prob, topo_kind: str, grid, common: float, n: int, R: int, Rt: int, meta):
    topo = C.topology(topo_kind)
    tuned, builder, (gc, eta) = tune_setting(prob, topo_kind, grid, n, Rt, meta["target"])
    # The algorithms' random streams follow their position in the call: the tail-tuned and
    # common runs come first (their draws do not depend on the bits rule), and a bits-tuned
    # step equal to the tail-tuned one reuses that run instead of a second, differently
    # drawn copy of the same algorithm.
    algos, info, source = [], {}, {}
    for m in C.METHODS:
        for kind, g in (("tuned_tail", tuned["tail"][m][0]), ("common", common)):
            algos.append(builder(m)(g, f"{m} [{kind}]"))
    for m in C.METHODS:
        g_tail, g_bits = tuned["tail"][m][0], tuned["bits"][m][0]
        if g_bits != g_tail:
            algos.append(builder(m)(g_bits, f"{m} [tuned_bits]"))
        source[m] = f"{m} [tuned_tail]" if g_bits == g_tail else f"{m} [tuned_bits]"
        ends = (float(tuned["grid"][m][0]), float(tuned["grid"][m][-1]))
        for kind, rule in (("tuned_tail", "tail"), ("tuned_bits", "bits")):
            info[f"{m} [{kind}]"] = (
                m,
                kind,
                *tuned[rule][m],
                {"above": tuned["above"][rule][m], "below": tuned["below"][rule][m]},
                ends,
            )
        nan = float("nan")
        info[f"{m} [common]"] = (m, "common", common, nan, {"above": "", "below": ""}, (nan, nan))
    res = C.simulate_quiet(prob, algos, steps=n, replicates=R, seed=SEED, n_record=30)
    init = float(prob.errors(np.zeros(prob.d))["excess_risk"])
    rows = []
    for name, (m, kind, g, score, why, (bottom, top)) in info.items():
        comp = compressor(m)
        rows.append(
            C.frame_rows(
                res,
                source[m] if kind == "tuned_bits" else name,
                method=m,
                steps_kind=kind,
                gamma=g,
                tuning_score=score,
                step_above=why["above"],
                step_below=why["below"],
                grid_top=top,
                grid_bottom=bottom,
                grid_extensions=int(tuned["extensions"]),
                gamma_c=gc,
                eta=eta,
                compressor="none" if comp is None else comp.name,
                topology=topo_kind,
                gap=float(topo.spectral_gap),
                initial_error=init,
                replicates=R,
                steps=n,
                **meta,
            ).assign(config=name)
        )
    return rows


def settings(quick: bool = False) -> list[tuple[Any, str, np.ndarray, float, dict]]:
    """The study's settings in order: ``(problem, topology kind, step grid, common step,
    meta columns)``."""
    grid, lgrid = (GRID[1::2], LOGISTIC_GRID[1::2]) if quick else (GRID, LOGISTIC_GRID)
    out = []
    topos = ("ring",) if quick else C.TOPOLOGIES
    zetas = {"0": 0.0, "large": 10.0} if quick else ZETA2
    for zl, z2 in zetas.items():
        prob = HeterogeneousLeastSquares(D, C.P, z2, noise=0.5, seed=0, hessian_dissimilarity=DELTA)
        g = np.stack([prob.worker_grads(prob.theta_star)])[0]
        meta = {
            "problem": "least-squares",
            "split": f"zeta2={zl}",
            "zeta2": z2,
            "zeta2_measured": float(np.mean(np.sum(g * g, axis=1))),
            "L_max": float(prob.L),
            "target": LS_TARGET,
        }
        out += [(prob, tk, grid, COMMON_LS, meta) for tk in topos]
    for name, split, prob in _logistic_problems(quick):
        lmax = float(prob.L_max)
        init = float(prob.errors(np.zeros(prob.d))["excess_risk"])
        meta = {
            "problem": f"logistic {name}",
            "split": split,
            "zeta2": float(prob.zeta2),
            "zeta2_measured": float(prob.zeta2),
            "L_max": lmax,
            "target": LOGISTIC_TARGET * init,
        }
        kinds = C.TOPOLOGIES if (split.startswith("dirichlet") and name == "breast-cancer") else ()
        for tk in ("ring",) if quick or not kinds else kinds:
            out.append((prob, tk, lgrid / lmax, COMMON_LOGISTIC / lmax, meta))
    return out


# ---------------------------------------------------------------------- the sweep of settings
def setting_points(quick: bool = False) -> list[dict[str, Any]]:
    """The settings of :func:`settings` as the points of :func:`setting_frames`, in order:
    ``{"quick", "problem", "split", "topology"}`` (JSON values; unique per setting)."""
    return [
        {"quick": bool(quick), "problem": meta["problem"], "split": meta["split"], "topology": tk}
        for _, tk, _, _, meta in settings(quick)
    ]


def setting_point(quick: bool, problem: str, split: str, topology: str) -> pd.DataFrame:
    """The sweep function of one setting: its step tuning (:func:`tune_setting`) and final
    runs (:func:`_setting_runs`), the excess-risk rows, unrounded.  The setting is rebuilt
    from its arguments (:func:`settings`); its numbers depend on them only (its own seeds
    :data:`SEED` and :data:`TUNE_SEED`), not on the process, the order or the other settings."""
    n, R, Rt = RUN_SIZES[bool(quick)]
    for prob, tk, grid, common, meta in settings(bool(quick)):
        if (meta["problem"], meta["split"], tk) == (problem, split, topology):
            out = pd.concat(
                _setting_runs(prob, tk, grid, common, n, R, Rt, meta), ignore_index=True
            )
            # the consensus distance is not used here (decentralized_bits plots it)
            return out[out.metric == "excess_risk"].reset_index(drop=True)
    known = "; ".join(
        f"{p['problem']!r}, {p['split']!r}, {p['topology']!r}" for p in setting_points(quick)
    )
    raise ValueError(
        f"no setting of decentralized_heterogeneous has problem={problem!r}, split={split!r}, "
        f"topology={topology!r} (quick={quick!r}); the settings are (problem, split, "
        f"topology): {known}"
    )


def point_version() -> str:
    """The settings' function version, part of every setting's cache key:
    :data:`POINT_VERSION` and a digest of the study's constants (problems, grids, steps,
    targets, seeds, :data:`MAX_EXTENSIONS`, :data:`RUN_SIZES`)."""
    consts = {
        "D": D, "DELTA": DELTA, "ZETA2": ZETA2, "GRID": GRID.tolist(),
        "LOGISTIC_GRID": LOGISTIC_GRID.tolist(), "COMMON": [COMMON_LS, COMMON_LOGISTIC],
        "TARGET": [LS_TARGET, LOGISTIC_TARGET], "LAM": LAM, "ALPHA": ALPHA,
        "SEED": [SEED, TUNE_SEED], "MAX_EXTENSIONS": MAX_EXTENSIONS,
        "RUN_SIZES": {str(k): v for k, v in RUN_SIZES.items()},
    }  # fmt: skip
    tag = hashlib.sha256(json.dumps(consts, sort_keys=True).encode()).hexdigest()[:12]
    return f"h{POINT_VERSION}:{tag}"


def cache_dir() -> Path:
    """The settings' sweep cache: ``.convkit-cache/decentralized_heterogeneous`` of the
    repository (:func:`convkit.figures_progress.cache_dirs`)."""
    from convkit.figures_progress import cache_dirs

    return cache_dirs(REPO)[0] / "decentralized_heterogeneous"


def setting_frames(
    quick: bool = False,
    *,
    points: list[dict[str, Any]] | None = None,
    cache: str | os.PathLike | None = None,
    jobs: int | None = None,
    dask: bool = False,
) -> PointsResult:
    """Every setting (or those of ``points``, :func:`setting_points`) as one point of a
    function sweep of :func:`setting_point` (:func:`convkit.sweep.points.run_points`): a
    verified cache in ``cache`` (default :func:`cache_dir`; a damaged or stale entry is
    recomputed, never read, with a warning), resume after Ctrl-C or ``kill -9`` (a setting is
    committed as it finishes), a progress bar of the settings on a terminal.  The settings run
    ``jobs`` at a time in worker processes (default convkit's thread count, at most one per
    setting; ``dask=True``: an embedded Dask cluster); ``jobs = 1`` runs them here.  The frames
    do not depend on ``jobs``, the executor or the cache."""
    from convkit._parallel import default_threads
    from convkit.progress import progress_enabled
    from convkit.sweep.points import run_points

    points = setting_points(quick) if points is None else [dict(p) for p in points]
    jobs = default_threads() if jobs is None else int(jobs)
    with tempfile.TemporaryDirectory(prefix="convkit-heterogeneous-") as out:
        return run_points(
            __name__,
            "setting_point",
            points,
            out,  # the sweep's own output is not kept: the analysis writes its CSV
            version=point_version(),
            cache=cache_dir() if cache is None else cache,
            jobs=max(1, min(jobs, len(points))),
            dask=dask,
            progress=progress_enabled(),
            label="decentralized_heterogeneous settings",
        )
