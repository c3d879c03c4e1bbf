"""Cells of the Local-SGD large-step studies: one setting ``(problem, d, spectrum, ||theta*||,
C L, alpha, T, P, start)`` with every communication schedule on common random numbers.

Shared by ``local_sgd_large_steps``, ``local_sgd_schedules`` and ``local_sgd_variations`` (not
an analysis itself).  A cell is one :func:`convkit.simulate` call (logistic regression) or one
:func:`convkit.exact.expected_error` call (least squares, exact) with

* ``mba`` (``N = n``) and ``osa`` (``N = 1``);
* ``even``: ``N`` rounds at ``ceil(j n / N)`` (:class:`convkit.Rounds`) for ``N`` in powers of
  4 below ``n``, ``N = ceil(sqrt(P T))``, ``ceil(n / 2)`` and ``ceil(n / 8)`` (below ``n``);
* at ``N`` in :data:`FAMILY_N` (below ``n``): ``quadratic`` ``ceil(n (j/N)^2)``,
  ``geometric`` ``ceil(n^(j/N))``, ``drift_clock`` (the positions of
  :class:`convkit.schedules.DriftClockRounds`) and the power family ``ceil(n (j/N)^p)`` for
  ``p`` in :data:`BEST_POWERS`, from which ``best`` is chosen (see :func:`logistic_cell`).
  Every family has exactly ``N`` distinct rounds (:func:`distinct_positions`: where the curve
  rises by less than one step per round, as ``n^(j/N)`` does for small ``j``, the rounds move
  to consecutive steps instead of collapsing), so that families and even spacing are compared
  at equal numbers of rounds; ``rounds`` is the number of distinct rounds.

Error: ``||theta_bar - theta*||^2_{H*}`` of the Polyak-Ruppert average over steps ``1..n``
(``H* = H`` for least squares).  ``ratio_to_mba = mean(e) / mean(e_MBA)`` on the same
replicates with the paired delta-method standard error
``se = sqrt(Var(e_r - ratio e_MBA,r) / R) / mean(e_MBA)``.

Replicates by precision (logistic cells): a pilot of ``Cell.replicates`` replicates with every
schedule gives each ratio's relative standard error ``se / ratio``; then at most
:data:`TOP_UP_STAGES` top-ups, each one :func:`convkit.simulate` call on its own seed with only
the schedule groups (:func:`top_up_groups`: a schedule with MBA and the partners its ratios
are paired with) that hold a ratio less precise than :data:`PRECISION`, to ``R = ceil(1.2 R_now
(max rel. se / PRECISION)^2)`` over those ratios, capped at ``Cell.max_replicates`` (the
gradient budget :data:`REPLICATE_BUDGET` per schedule).  A ratio whose SE would stay above
``sqrt(FUTILITY) PRECISION`` even at the cap (:func:`futile`) asks for no top-up: it would end
imprecise anyway.  Per-replicate errors of an algorithm do not depend on the other algorithms of
a call, so a schedule's numbers are those a call with every schedule would give it at the same
stages.  A ratio whose final ``se / ratio`` is still above :data:`PRECISION` is *imprecise*
(:func:`precise`) and the analyses give it no verdict.  The reported standard errors are those
of the final sample; with at most three looks the optional-stopping effect on their coverage is
small, and it is on the side of a few more replicates, never of fewer.  Rows are built by
:mod:`analyses._local_sgd_rows` (one builder for exact and Monte Carlo cells).

Cells run on the sweep runner (:func:`cells_frame`: one function sweep of :func:`cell_point`,
:func:`convkit.sweep.points.run_points`), cached in ``.convkit-cache/local_sgd_cells/`` of the
repository (or ``$CONVKIT_CELL_CACHE``) under the digest of their settings and
:func:`cell_version` (:data:`CACHE_VERSION` and the top-up rule), each entry verified when read
(a damaged or stale entry is recomputed, never read), so that the analyses that read the same
cells simulate them once, resume after a kill, and run in parallel processes or on Dask; the
numbers do not depend on the cache or the executor (fixed seeds, from the settings and
:data:`SEED_VERSION` only).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import convkit as ck
from analyses._local_sgd_rows import ExactErrors, StagedErrors, cell_rows

#: Columns of ``figures/local_sgd_large_steps.csv`` (exactly these, in this order).
COLUMNS = [
    "problem",
    "d",
    "theta_norm",
    "CL",
    "alpha",
    "T",
    "P",
    "n",
    "schedule",
    "N",
    "rounds",
    "replicates",
    "err",
    "err_se",
    "ratio_to_mba",
    "ratio_se",
]
#: Nominal budgets at which the growing-gap families are compared with even spacing.
FAMILY_N = (16, 64)
#: Powers ``p`` of the family ``ceil(n (j/N)^p)`` searched for ``best`` (``p = 1``: even).
BEST_POWERS = (1.0, 2.0, 3.0, 4.0)
#: Exact engine: powers searched for the least-squares ``best``.
LS_POWERS = tuple(float(p) for p in np.arange(0.5, 6.01, 0.5))
#: part of every cell's seed (:meth:`Cell.seed`): changing it changes every Monte Carlo number
SEED_VERSION = 2
#: part of the cells' cache keys only (:func:`cell_version`): raised when an engine changes the numbers at rounding
#: level (3: the logistic kernels' vectorized ``exp`` and workers' sum; 4: exactly ``N``
#: distinct rounds per family, replicates by precision; 5: top-ups per schedule group with the
#: futility rule, verified entries; 6: the sweep runner's cache), so that no cached cell of
#: an older engine is read
CACHE_VERSION = 6
SCHEDULES = ("mba", "osa", "even", "quadratic", "geometric", "drift_clock", "best")
#: Target precision of every ratio that carries a verdict: paired SE <= 3 % of the ratio.
PRECISION = 0.03
#: Gradient budget of one logistic cell per schedule: ``max_replicates = floor(budget / T)``
#: (128 replicates at ``T = 1e6``), at most :data:`MAX_REPLICATES`.
REPLICATE_BUDGET = 128_000_000
MAX_REPLICATES = 8192
#: Safety factor of the top-up (the pilot's SE is itself estimated).
TOP_UP_SAFETY = 1.2
#: Most top-up stages of a cell.
TOP_UP_STAGES = 3
#: A ratio is not topped up when the cap would leave its SE above ``sqrt(FUTILITY)
#: PRECISION`` (:func:`futile`).
FUTILITY = 2.0


@dataclass(frozen=True)
class Cell:
    """One setting.  ``problem``: ``"logistic"`` or ``"least_squares"``; ``spectrum``:
    ``"flat"`` or ``"1/i"`` (eigenvalues of ``H``); ``theta_norm = ||theta*||`` with
    ``theta*`` along ``(1, ..., 1)``; ``CL = C L`` (logistic ``L = max h / 4``, least squares
    ``L = max h``); ``start``: ``"zero"`` (``theta0 = 0``) or ``"star"`` (``theta0 =
    theta*``); ``replicates``: the pilot's Monte Carlo replicates (ignored by the exact
    engine); ``max_replicates``: the most replicates the precision top-up may reach (``0``:
    no top-up)."""

    problem: str
    d: int
    spectrum: str
    theta_norm: float
    CL: float
    alpha: float
    T: int
    P: int
    start: str = "zero"
    replicates: int = 256
    max_replicates: int = 0

    def __post_init__(self) -> None:
        if self.problem not in ("logistic", "least_squares"):
            raise ValueError(f"problem must be 'logistic' or 'least_squares', got {self.problem!r}")
        if self.spectrum not in ("flat", "1/i"):
            raise ValueError(f"spectrum must be 'flat' or '1/i', got {self.spectrum!r}")
        if self.start not in ("zero", "star"):
            raise ValueError(f"start must be 'zero' or 'star', got {self.start!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {self.alpha}")
        if self.T // self.P < 1:
            raise ValueError(f"T = {self.T} must be >= P = {self.P} (n = floor(T/P) >= 1)")
        if self.max_replicates and self.max_replicates < self.replicates:
            raise ValueError(
                f"max_replicates = {self.max_replicates} must be 0 (no top-up) or >= "
                f"replicates = {self.replicates}"
            )

    @property
    def n(self) -> int:
        """Local steps ``floor(T / P)``."""
        return self.T // self.P

    def key(self) -> str:
        """Digest of the settings and :data:`SEED_VERSION` (the seed's source; the top-up cap
        is not part of it, so the pilot does not change with the budget)."""
        d = asdict(self)
        d.pop("max_replicates")
        blob = json.dumps({**d, "v": SEED_VERSION}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    def seed(self) -> int:
        """Seed of the pilot."""
        return zlib.crc32(self.key().encode())

    def top_up_seed(self, stage: int = 1) -> int:
        """Seed of top-up ``stage`` (1, 2, ...; independent of the pilot's and of the other
        stages' streams)."""
        tag = ":top-up" if stage == 1 else f":top-up{stage}"
        return zlib.crc32((self.key() + tag).encode())


# ------------------------------------------------------------------------------ problems
def problem_of(cell: Cell) -> tuple[Any, float, np.ndarray]:
    """``(problem, C, theta0)`` of a cell."""
    d = cell.d
    theta_star = cell.theta_norm * np.ones(d) / math.sqrt(d)
    if cell.problem == "logistic":
        prob = ck.LogisticRegression.gaussian(d, cell.spectrum, theta_star=theta_star)
    else:
        prob = ck.LeastSquares.gaussian(d, cell.spectrum, noise=1.0, theta_star=theta_star)
    C = cell.CL / float(prob.L)
    theta0 = theta_star.copy() if cell.start == "star" else np.zeros(d)
    return prob, C, theta0


def ls_stability_CL(d: int = 2, spectrum: str = "flat") -> float:
    """``gamma* L`` for least squares: the exact mean-square stability limit of constant-step
    SGD (Gaussian design, batch 1, :func:`convkit.bounds.sgd_stability.sgd_stability_limit`)
    times ``L = max h``."""
    if spectrum == "flat":
        # H = I: the second moment of one coordinate obeys m' = (1 - 2 g + (d + 2) g^2) m
        # (Gaussian fourth moments), stable iff g < 2 / (d + 2); the closed form of the
        # secular equation, without its symbolic derivation
        return 2.0 / (d + 2.0)
    from convkit.bounds.sgd_stability import sgd_stability_limit
    from convkit.problems.least_squares import spectrum as spectrum_of

    h = np.asarray(spectrum_of(spectrum, d), dtype=float)
    return float(sgd_stability_limit(h, 1, "gaussian") * h.max())


# ------------------------------------------------------------------------------ schedules
def distinct_positions(raw: np.ndarray, n: int) -> tuple[int, ...]:
    """Exactly ``N = raw.size`` distinct rounds (``N <= n``) from the non-decreasing targets
    ``raw`` (integers in ``[1, n]``, the last one ``n``): ``p_j = j + max_{i <= j}(raw_i - i)``,
    capped at ``n - N + j``.  Where the targets rise by at least one step per round the
    positions are the targets; where they rise more slowly (or repeat) the rounds move to the
    next free steps, so that a budget of ``N`` rounds is always ``N`` rounds."""
    raw = np.asarray(raw, dtype=np.int64)
    N = raw.size
    if not 1 <= N <= n:
        raise ValueError(f"N = {N} rounds must lie in [1, n = {n}]")
    j = np.arange(1, N + 1, dtype=np.int64)
    q = np.minimum(np.maximum.accumulate(np.clip(raw, 1, n) - j), n - N)
    pos = q + j
    pos[-1] = n
    return tuple(int(v) for v in pos)


def _ceil_targets(x: np.ndarray) -> np.ndarray:
    """``ceil(x)``, with values within ``1e-9`` (relative) of an integer taken as that integer
    (so that ``n^(N/N)`` computed as ``exp(log n)`` stays ``n``)."""
    r = np.rint(x)
    return np.where(np.abs(x - r) <= 1e-9 * np.maximum(1, x), r, np.ceil(x)).astype(np.int64)


def power_positions(n: int, N: int, p: float) -> tuple[int, ...]:
    """``ceil(n (j/N)^p)``, j = 1..N, made ``N`` distinct rounds by :func:`distinct_positions`
    (exact integers for integer ``p``)."""
    j = np.arange(1, N + 1, dtype=np.int64)
    if float(p).is_integer() and n * N ** int(p) < 2**62:
        q = int(p)
        pos = -((-n * j**q) // N**q)
    else:
        pos = _ceil_targets(n * (j / N) ** p)
    pos[-1] = n
    return distinct_positions(pos, n)


def geometric_positions(n: int, N: int) -> tuple[int, ...]:
    """``ceil(n^(j/N))``, j = 1..N, made ``N`` distinct rounds by :func:`distinct_positions`."""
    pos = _ceil_targets(np.exp(np.arange(1, N + 1) / N * math.log(n)))
    pos[-1] = n
    return distinct_positions(pos, n)


def drift_clock_positions(
    cell: Cell, N: int, prob: Any, step: Any, theta0: np.ndarray
) -> tuple[int, ...] | None:
    """The rounds of :class:`convkit.schedules.DriftClockRounds` for the cell (``mu``, ``L`` of
    the problem, ``dist0 = ||theta0 - theta*||``, noise ``sigma^2`` = trace of the gradient
    covariance at ``theta*``: ``tr H*`` for well-specified logistic regression, ``sigma^2 tr
    H`` for least squares): its targets
    (:meth:`convkit.schedules.DriftClockRounds.targets`) made ``N`` distinct rounds by
    :func:`distinct_positions`; ``None`` where the
    rule has no meaningful positions: a step with ``gamma_k L > 2`` (the ``C L = 4``
    variation), whose mean recursion diverges
    (:meth:`convkit.schedules.DriftClockRounds.unstable_step`; such cells have no
    ``drift_clock`` rows)."""
    if cell.problem == "logistic":
        noise = float(np.trace(prob.H_star))
        mu, L = float(prob.mu), float(prob.L)
    else:
        noise = float(prob.noise) ** 2 * float(np.sum(prob.h))
        mu, L = float(np.min(prob.h)), float(np.max(prob.h))
    if ck.DriftClockRounds.unstable_step(step, L, cell.n) is not None:
        return None
    dist0 = float(np.linalg.norm(theta0 - prob.theta_star))
    rule = ck.DriftClockRounds(N, step, mu=mu, L=L, dist0=dist0, noise=noise)
    return distinct_positions(rule.targets(cell.n), cell.n)


def even_grid(cell: Cell) -> list[int]:
    """Evenly spaced budgets: powers of 4 in ``[4, n)``, ``ceil(sqrt(P T))``, ``ceil(n / 2)``
    and ``ceil(n / 8)`` when below ``n`` (sorted, unique)."""
    n = cell.n
    out = set()
    N = 4
    while N < n:
        out.add(N)
        N *= 4
    s = math.ceil(math.sqrt(cell.P * cell.T))
    if s < n:
        out.add(s)
    for H in (2, 8):  # rounds every ~H steps: resolves N* close to n
        if 4 < math.ceil(n / H) < n:
            out.add(math.ceil(n / H))
    return sorted(out)


def configurations(cell: Cell, prob: Any, step: Any, theta0: np.ndarray) -> list[dict[str, Any]]:
    """The schedules of a cell: dicts with ``label``, ``schedule``, ``N``, ``p`` and
    ``comm`` (a :class:`convkit.schedules.CommSchedule`)."""
    n = cell.n
    cfg = [
        dict(label="mba", schedule="mba", N=n, p=np.nan, comm=ck.EveryStep()),
        dict(label="osa", schedule="osa", N=1, p=np.nan, comm=ck.Final()),
    ]
    for N in even_grid(cell):
        cfg.append(dict(label=f"even:{N}", schedule="even", N=N, p=1.0, comm=ck.Rounds(N)))
    powers = BEST_POWERS if cell.problem == "logistic" else LS_POWERS
    for N in FAMILY_N:
        if N >= n:
            continue
        if N not in even_grid(cell):
            cfg.append(dict(label=f"even:{N}", schedule="even", N=N, p=1.0, comm=ck.Rounds(N)))
        cfg.append(
            dict(
                label=f"geometric:{N}",
                schedule="geometric",
                N=N,
                p=np.nan,
                comm=ck.At(geometric_positions(n, N)),
            )
        )
        dc = drift_clock_positions(cell, N, prob, step, theta0)
        if dc is not None:
            cfg.append(
                dict(
                    label=f"drift_clock:{N}",
                    schedule="drift_clock",
                    N=N,
                    p=np.nan,
                    comm=ck.At(dc),
                )
            )
        for p in powers:
            if p == 1.0:
                continue
            cfg.append(
                dict(
                    label=f"power:{N}:{p:g}",
                    schedule="quadratic" if p == 2.0 else "power",
                    N=N,
                    p=p,
                    comm=ck.At(power_positions(n, N, p)),
                )
            )
    return cfg


# ------------------------------------------------------------------------------ engines
def _algorithms(cell: Cell, step: Any, cfg: list[dict[str, Any]]) -> list[Any]:
    """The algorithms of a cell's configurations (MBA, or Local-SGD with the configured
    communication schedule), labelled as the configurations."""
    return [
        ck.MBA(cell.P, step, name=c["label"])
        if c["schedule"] == "mba"
        else ck.LocalSGD(cell.P, step, comm=c["comm"], name=c["label"])
        for c in cfg
    ]


def _final_errors(
    cell: Cell, prob: Any, algs: list[Any], theta0: np.ndarray, R: int, seed: int, threads: Any
) -> np.ndarray:
    """Final errors ``(configuration, replicate)`` of one :func:`convkit.simulate` call."""
    res = ck.simulate(
        prob,
        algs,
        steps=cell.n,
        replicates=R,
        seed=seed,
        theta0=theta0,
        n_record=1,
        progress=False,
        threads=threads,
        metrics=("hnorm2",),  # the cells' only metric: no excess-risk quadrature
    )
    E = []
    for a in algs:
        cv = res.values[a.name]
        E.append(cv.values[-1, cv.iterates.index("avg"), cv.metrics.index("hnorm2"), :])
    return np.asarray(E, dtype=float)


def relative_se(rows: pd.DataFrame) -> pd.Series:
    """Per row: the largest ``se / ratio`` of the ratios it carries (``ratio_to_mba`` and,
    for families and ``best``, ``ratio_to_even``); NaN when none is defined (MBA)."""
    parts = []
    for r, s in (("ratio_to_mba", "ratio_se"), ("ratio_to_even", "ratio_to_even_se")):
        v = rows[s] / rows[r]
        parts.append(v.where(rows.schedule != "mba"))
    return pd.concat(parts, axis=1).max(axis=1, skipna=True)


def precise(ratio: Any, se: Any) -> Any:
    """Whether a ratio meets the precision a verdict needs: ``se <= PRECISION ratio`` (exact
    rows, ``se = 0``, always do; a NaN SE never does)."""
    ratio, se = np.asarray(ratio, dtype=float), np.asarray(se, dtype=float)
    return np.isfinite(se) & (se <= PRECISION * ratio)


def top_up_groups(cfg: list[dict[str, Any]]) -> tuple[list[tuple[int, ...]], dict[int, int]]:
    """The configurations topped up together, and each configuration's own group.

    Groups (MBA, index 0, first in each: every ratio is paired with it): at each family
    budget ``N`` of :data:`FAMILY_N` the powers with ``even:N`` (``best`` is chosen among
    them and reported against ``even:N`` on their common replicates: a ``best`` row's group
    is ``even:N``'s), and each other family with ``even:N`` (its ``ratio_to_even``); every
    other configuration (OSA, the even budgets of :func:`even_grid`) with MBA alone.
    Returns ``(groups, home)``, ``home[k]`` the index of configuration ``k``'s own group."""
    labels = [c["label"] for c in cfg]
    keyed: dict[Any, tuple[int, ...]] = {}
    key_of: dict[int, Any] = {}
    for k, c in enumerate(cfg):
        if c["schedule"] == "mba":
            continue
        family = c["N"] in FAMILY_N and c["schedule"] != "osa"
        if family and np.isfinite(c["p"]):  # even:N and the powers
            key_of[k] = ("powers", c["N"])
            keyed[key_of[k]] = keyed.get(key_of[k], ()) + (k,)
        elif family:
            key_of[k] = ("family", k)
            keyed[key_of[k]] = (labels.index(f"even:{c['N']}"), k)
        else:
            key_of[k] = ("alone", k)
            keyed[key_of[k]] = (k,)
    order = list(keyed)
    return [(0, *keyed[key]) for key in order], {k: order.index(v) for k, v in key_of.items()}


def futile(relative: float, R: int, cap: int) -> bool:
    """Whether a ratio cannot be made precise within the cap: its relative standard error
    ``relative`` on ``R`` replicates, scaled by ``R^(-1/2)`` to the cap, would stay above
    ``sqrt(FUTILITY) PRECISION`` (with :data:`FUTILITY` = 2, above 4.2 %).  The factor
    keeps the ratios whose estimated SE is high by chance: heavy tails make the estimate an
    underestimate more often than not, so what the rule declares futile mostly is."""
    return R * (relative / PRECISION) ** 2 > FUTILITY * cap


def logistic_cell(cell: Cell, threads: int | None = None) -> pd.DataFrame:
    """Simulate one logistic cell (all schedules on common random numbers).

    Rows: one per configuration (``schedule`` ``power`` rows carry their ``p``), plus ``best``
    at each family budget ``N``: the power ``p`` in :data:`BEST_POWERS` with the smallest mean
    error on the even-numbered replicates, reported (``err``, ratios) on the odd-numbered
    replicates only, so that the selection does not bias the reported error; its ``replicates``
    is the held-out count and ``p`` the chosen power.

    Replicates by precision, per schedule (module docstring): a pilot of ``cell.replicates``
    with every configuration; then at most :data:`TOP_UP_STAGES` top-ups, each one
    :func:`convkit.simulate` call on its own seed with only the groups
    (:func:`top_up_groups`) that hold a ratio still less precise than :data:`PRECISION` and
    not :func:`futile`, to ``R = ceil(TOP_UP_SAFETY R_now (max rel. se / PRECISION)^2)``
    over those ratios, at most ``cell.max_replicates``.  Every configuration's
    ``replicates`` counts its own sample.  Replicates with a non-finite error are dropped
    (per stage, for its members).  ``threads``: :func:`convkit.simulate`'s (all cores by
    default; the values do not depend on it)."""
    prob, C, theta0 = problem_of(cell)
    step = ck.PolyDecay(C=C, alpha=cell.alpha)
    cfg = configurations(cell, prob, step, theta0)
    algs = _algorithms(cell, step, cfg)
    everyone = tuple(range(len(cfg)))
    errors = StagedErrors(len(cfg))
    pilot = _final_errors(cell, prob, algs, theta0, cell.replicates, cell.seed(), threads)
    errors.add(everyone, pilot)
    rows = cell_rows(cell, cfg, errors, FAMILY_N)
    groups, home = top_up_groups(cfg)
    labels = [c["label"] for c in cfg]
    cap = cell.max_replicates
    for stage in range(1, TOP_UP_STAGES + 1):
        rel = relative_se(rows).to_numpy(float)
        need: dict[int, int] = {}
        for i, r in enumerate(rel):
            # a ``best`` row belongs to the powers' group of its N; its held-out half scales
            # with the powers' common sample
            if not r > PRECISION:
                continue
            g = home[i if i < len(cfg) else labels.index(f"even:{int(rows.N.iloc[i])}")]
            n_k = errors.count(*(groups[g][1:] if i >= len(cfg) else (i,)))
            if not r > PRECISION or futile(r, n_k, cap) or n_k >= cap:
                continue
            target = int(math.ceil(TOP_UP_SAFETY * n_k * (r / PRECISION) ** 2))
            need[g] = max(need.get(g, 0), min(target, cap) - n_k)
        if not need:
            break
        extra = max(need.values())
        members = tuple(sorted({m for g in need for m in groups[g]}))
        top = _final_errors(
            cell, prob, [algs[m] for m in members], theta0, extra, cell.top_up_seed(stage), threads
        )
        errors.add(members, top)
        rows = cell_rows(cell, cfg, errors, FAMILY_N)
    return rows


def least_squares_cell(cell: Cell) -> pd.DataFrame:
    """Exact errors of one least-squares cell (:func:`convkit.exact.expected_error`), through
    the row builder of the Monte Carlo cells (:func:`cell_rows` on :class:`ExactErrors`):
    ``best`` is the power ``p`` of :data:`LS_POWERS` with the smallest exact error (no
    selection bias: the errors are exact); ``replicates = 0`` and every SE 0."""
    prob, C, theta0 = problem_of(cell)
    step = ck.PolyDecay(C=C, alpha=cell.alpha)
    cfg = configurations(cell, prob, step, theta0)
    algs = _algorithms(cell, step, cfg)
    from convkit.exact import expected_error

    res = expected_error(prob, algs, steps=cell.n, theta0=theta0, n_record=1)
    fin = res.final("hnorm2", "avg").set_index("config")
    err = np.array([float(fin.loc[c["label"], "mean"]) for c in cfg])
    return cell_rows(cell, cfg, ExactErrors(err), FAMILY_N)


# ------------------------------------------------------------------------------ design
T_GRID = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
P_GRID = (2, 4, 8, 16, 32)
ALPHAS = (0.6, 0.7, 0.75, 0.8, 0.9)
#: Largest local-step count ``n = T / P`` simulated in the logistic grid (every cell of
#: :data:`T_GRID` x :data:`P_GRID`; larger ``n`` would be left out and listed by :func:`skipped`).
N_MAX = 500_000
#: Largest ``n`` of the least-squares contrast (its best-schedule search costs O(n) per
#: evaluation of the exact engine, a few thousand evaluations per cell).
LS_N_MAX = 40_000
#: Largest ``T`` simulated for alpha != 0.75 (the machine's budget).
ALPHA_T_MAX = 1_000_000
#: Pilot replicates per ``T`` (full run); the precision top-up adds more (module docstring).
REPLICATES = {
    1_000: 512,
    3_000: 512,
    10_000: 256,
    30_000: 256,
    100_000: 128,
    300_000: 64,
    1_000_000: 64,
}
#: Variations of the base setting at ``alpha = 0.75`` (on the reduced grid below).
VARIATIONS = (
    dict(CL=0.5),
    dict(CL=1.0),
    dict(CL=4.0),
    dict(theta_norm=3.0),
    dict(d=5, spectrum="flat"),
    dict(d=5, spectrum="1/i"),
    dict(start="star"),
)
VAR_T = (1_000, 10_000, 100_000)
VAR_P = (4, 16)
BASE = dict(problem="logistic", d=2, spectrum="flat", theta_norm=1.0, CL=2.0)


#: Quick mode: 64 pilot replicates, topped up to at most this many.
QUICK_MAX_REPLICATES = 256


def max_replicates(T: int, quick: bool = False) -> int:
    """Cap of the precision top-up: ``floor(REPLICATE_BUDGET / T)`` within
    ``[REPLICATES[T], MAX_REPLICATES]`` (quick: :data:`QUICK_MAX_REPLICATES`)."""
    if quick:
        return QUICK_MAX_REPLICATES
    return int(min(MAX_REPLICATES, max(REPLICATES[T], REPLICATE_BUDGET // T)))


def _grid(alpha: float, ts: tuple[int, ...], ps: tuple[int, ...], quick: bool, **kw: Any):
    out = []
    for T in ts:
        for P in ps:
            if T // P > N_MAX:
                continue
            R = 64 if quick else REPLICATES[T]
            out.append(
                Cell(
                    **{**BASE, **kw},
                    alpha=alpha,
                    T=T,
                    P=P,
                    replicates=R,
                    max_replicates=max_replicates(T, quick),
                )
            )
    return out


def base_cells(quick: bool) -> list[Cell]:
    """Base logistic grid.  Full: alpha = 0.75 on every ``(T, P)`` of :data:`T_GRID` x
    :data:`P_GRID` with ``n <= N_MAX``, the other alphas of :data:`ALPHAS` up to
    ``T = ALPHA_T_MAX``; pilot replicates :data:`REPLICATES`, topped up to
    :func:`max_replicates`.  Quick: alpha = 0.75, ``T`` in {1e3, 3e3, 1e4}, ``P`` in {4, 16},
    64 pilot replicates topped up to at most 256."""
    if quick:
        return _grid(0.75, (1_000, 3_000, 10_000), (4, 16), True)
    out = _grid(0.75, T_GRID, P_GRID, False)
    for a in ALPHAS:
        if a != 0.75:
            out += _grid(a, tuple(t for t in T_GRID if t <= ALPHA_T_MAX), P_GRID, False)
    return out


def variation_cells(quick: bool) -> list[Cell]:
    """Variations at alpha = 0.75 on ``T`` in :data:`VAR_T`, ``P`` in :data:`VAR_P`
    (quick: ``T`` in {1e3, 1e4}, ``P = 4``, 64 pilot replicates); replicates by precision as
    :func:`base_cells`."""
    ts, ps = ((1_000, 10_000), (4,)) if quick else (VAR_T, VAR_P)
    out = []
    for v in VARIATIONS:
        out += _grid(0.75, ts, ps, quick, **v)
    return out


#: Least-squares contrast: step fractions of the stability limit and ``||theta*||`` (theta0 = 0).
LS_FRACS = (0.5, 0.9)
LS_NORMS = (1.0, 10.0)


def ls_cells(quick: bool) -> list[Cell]:
    """Least-squares contrast (exact): d = 2, h = (1, 1), sigma = 1, theta0 = 0,
    ``C = frac gamma*`` (frac in :data:`LS_FRACS`), ``||theta*||`` in :data:`LS_NORMS`,
    alpha = 0.75 on the base ``(T, P)`` grid (quick: ``T`` in {1e3, 1e4}, ``P`` in {4, 16})."""
    cl = ls_stability_CL()
    ts, ps = ((1_000, 10_000), (4, 16)) if quick else (T_GRID, P_GRID)
    out = []
    for f in LS_FRACS:
        for tn in LS_NORMS:
            for T in ts:
                for P in ps:
                    if T // P > LS_N_MAX:
                        continue
                    out.append(
                        Cell(
                            "least_squares",
                            2,
                            "flat",
                            tn,
                            round(f * cl, 12),
                            0.75,
                            T,
                            P,
                            replicates=0,
                        )
                    )
    return out


def skipped(quick: bool) -> list[tuple[float, int, int, str]]:
    """``(alpha, T, P, why)`` of the base grid not simulated: ``"n > N_MAX"`` or
    ``"T > ALPHA_T_MAX"`` (alpha != 0.75)."""
    if quick:
        return []
    have = {(c.alpha, c.T, c.P) for c in base_cells(quick)}
    out = []
    for a in ALPHAS:
        for T in T_GRID:
            for P in P_GRID:
                if (a, T, P) in have:
                    continue
                why = "n > N_MAX" if T // P > N_MAX else "T > ALPHA_T_MAX"
                out.append((a, T, P, why))
    return out


# ------------------------------------------------------------------------------ runner
def cache_dir() -> Path:
    """Directory of the cells' sweep cache (``$CONVKIT_CELL_CACHE`` or the repository's
    ``.convkit-cache/local_sgd_cells``)."""
    env = os.environ.get("CONVKIT_CELL_CACHE")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1] / ".convkit-cache" / "local_sgd_cells"


def cell_version() -> str:
    """The cells' function version, part of every cell's sweep cache key:
    :data:`CACHE_VERSION` and the top-up rule (:data:`PRECISION`, :data:`TOP_UP_SAFETY`,
    :data:`TOP_UP_STAGES`, :data:`FUTILITY`); the cell's settings, cap included, are its
    arguments."""
    return f"c{CACHE_VERSION}:{PRECISION}:{TOP_UP_SAFETY}:{TOP_UP_STAGES}:{FUTILITY}"


def cell_point(**settings: Any) -> pd.DataFrame:
    """The sweep function of one cell: the rows of ``Cell(**settings)`` (:func:`logistic_cell`
    with its top-ups, or :func:`least_squares_cell`)."""
    cell = Cell(**settings)
    if cell.problem == "logistic":
        return logistic_cell(cell)
    return least_squares_cell(cell)


def cell_frame(cell: Cell) -> pd.DataFrame:
    """All rows of one cell, through the sweep cache (:func:`cells_frame`)."""
    return cells_frame([cell], jobs=1)


def cells_frame(cells: list[Cell], jobs: int | None = None, dask: bool = False) -> pd.DataFrame:
    """Rows of several cells, in order, each cell one call of :func:`cell_point` in a function
    sweep (:func:`convkit.sweep.points.run_points`): a verified cache in :func:`cache_dir`
    shared by the analyses that read the same cells (a damaged or stale entry is recomputed,
    never read, with a warning), resume after Ctrl-C or ``kill -9`` (a cell is committed as
    it finishes), a progress bar of the cells on a terminal.

    The cells run ``jobs`` at a time in worker processes (default: convkit's thread count,
    ``CONVKIT_THREADS`` or every core; ``dask=True``: an embedded Dask cluster of ``jobs``
    workers), each :func:`convkit.simulate` call of a cell on one thread; ``jobs = 1`` runs
    them here, on every core.  The rows do not depend on ``jobs`` or the executor (every
    cell's numbers come from its own seeds, :meth:`Cell.seed`)."""
    import tempfile

    from convkit._parallel import default_threads
    from convkit.progress import progress_enabled
    from convkit.sweep.points import run_points

    if not cells:
        return pd.DataFrame()
    jobs = default_threads() if jobs is None else int(jobs)
    with tempfile.TemporaryDirectory(prefix="convkit-cells-") as out:
        res = run_points(
            __name__,
            "cell_point",
            [asdict(c) for c in cells],
            out,  # the sweep's own output is not kept: the analyses write their CSVs
            version=cell_version(),
            cache=cache_dir(),
            jobs=min(jobs, len(cells)),
            dask=dask,
            progress=progress_enabled(),
            label="Local-SGD cells",
        )
    return res.frame()
