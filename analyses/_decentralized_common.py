"""Shared pieces of the heterogeneous-data decentralized studies.

Used by ``decentralized_heterogeneous``, ``decentralized_compression`` and
``decentralized_rate``: the network (P = 16 nodes on a ring, a 4x4 torus or the static
exponential graph, uniform weights), the six methods under their display names, the tuning
rules, the error-level crossing and a LIBSVM writer.

Tuning rules (stated once, used everywhere):

* consensus parameters by pure gossip (no gradients) on random vectors, d as the problem:
  CHOCO-SGD's ``gamma_c`` by :func:`convkit.algorithms.decentralized.tune_consensus_step`,
  DeepSqueeze's ``eta`` by :func:`tune_deepsqueeze_eta` (the same rule on DeepSqueeze's
  gossip ``V = C(X + Delta)``, ``Delta <- X + Delta - V``, ``X <- X + eta (W - I) V``), each
  the grid value with the fastest contraction of the consensus distance;
* the step ``gamma`` of each method, by one of two rules over a geometric grid (factor 2),
  both on a tuning seed different from the evaluation seed and both read off the same runs,
  one per (method, gamma) pair, all on the common random numbers of the tuning seed
  (:func:`tune_steps`, :func:`_run_pairs`):

  - ``"tail"``: the grid value with the smallest mean excess risk of the node average over
    the last quarter of the record points (a diverged run counts as infinite);
  - ``"bits"``: the grid value with the fewest bits to a target excess risk, the first
    crossing of the mean curve by :func:`level_crossing` (the rule the studies report); a run
    with a diverged replicate or whose mean curve never reaches the target counts as infinite
    bits. Ties (equal bits, e.g. two steps already below the target at the first record
    point) go to the smaller tail error, then the smaller ``gamma``. When no grid value
    reaches the target the rule has no answer: it returns the tail rule's ``gamma`` with
    infinite bits, which the caller reports as not reached.

  Pair runs: every (method, gamma) pair runs with the numbers it has alone in a call on the
  tuning seed (its sample and algorithm streams), so its numbers depend on (problem, method,
  gamma, seed) only, bit for bit, never on which other pairs are tuned or in what order
  (pairs of methods that draw no random numbers of their own share a call and its samples,
  which leaves their numbers as they are alone); each pair runs once, and an extension of
  the grid runs only its new pairs.

  Grid extension (``max_extensions > 0``): while some method's choice under either rule
  sits at the top of its grid, that method's grid gets the next value (twice its top), up to
  ``max_extensions`` times; then, while some choice sits at the bottom, the grid gets half
  its bottom, again up to ``max_extensions`` times. A bits-rule choice with no step reaching
  the target is the tail rule's step and moves only with that rule. When neither loop stops
  at the cap, every choice lies strictly inside its method's grid; the step above it is
  recorded as ``"diverges"`` (a replicate diverged), ``"not reached"`` (finite, but its mean
  never falls to the target; bits rule only) or ``"worse"``, and so is the step below it;
  ``"cap"`` marks a choice still at an end after ``max_extensions`` extensions there
  (censored).

  No-gain stop (``no_gain_stop=True``): a tail-rule choice at the bottom of its grid drives
  no halving when its tail error, the smallest over the method's grid, is finite and no
  lower than the initial excess risk (``theta0 = 0``): no step tried lowers the error at
  all, the rule's infimum is then not moving (gamma -> 0) and the bottom step is no
  optimum to be refined; the step below such a choice (and below a bits-rule choice that
  is the tail rule's step, no step reaching the target) is recorded as ``"no gain"``. A
  bits-rule choice that reaches the target still drives the halving. The stop only drops
  pairs below a method's bottom step: where the halving without it ends at a step that
  lowers the error, the stop leaves every choice as it is (each pair's numbers do not
  depend on the others).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

import convkit as ck
from convkit import verdicts as V
from convkit.algorithms.decentralized import (
    CHOCOSGD,
    DCDPSGD,
    DPSGD,
    ECDPSGD,
    DeepSqueeze,
    consensus_distance,
    contraction_rates,
    log_grid,
    tune_consensus_step,
)
from convkit.algorithms.feedback import ErrorFeedbackSGD
from convkit.backend import Backend
from convkit.compression import Compressor, get_compressor
from convkit.simulate import DivergenceWarning
from convkit.topology import Topology, exponential, ring, torus

P = 16
METHODS = ("D-PSGD", "DCD-PSGD", "ECD-PSGD", "CHOCO-SGD", "DeepSqueeze", "EF-SGD")
COMPRESSED = METHODS[1:]
#: methods whose analysis needs an unbiased compressor
UNBIASED_METHODS = ("DCD-PSGD", "ECD-PSGD")
TOPOLOGIES = ("ring", "torus", "exponential")


def topology(kind: str) -> Topology:
    """The P = 16 graph ``kind`` (``"ring"``, ``"torus"`` 4x4 or ``"exponential"``)."""
    if kind == "ring":
        return ring(P)
    if kind == "torus":
        return torus(4)
    if kind == "exponential":
        return exponential(P)
    raise ValueError(f"topology must be one of {TOPOLOGIES}, got {kind!r}")


def tune_deepsqueeze_eta(
    topo: Topology,
    compressor: Compressor | str,
    *,
    grid: Any = None,
    d: int = 32,
    iterations: int = 200,
    replicates: int = 4,
    seed: int = 0,
) -> float:
    """DeepSqueeze's consensus step ``eta`` by pure gossip (see the module docstring).

    Every ``eta`` of ``grid`` (default 25 log-spaced values in ``[0.01, 1]``) runs at once on
    the same centred Gaussian start; the rate is ``(e_T / e_{T/2})^(2/T)`` of the consensus
    distance ``e`` (geometric mean over replicates; non-finite: ``inf``). Returns the grid
    value with the smallest rate (ties: the larger ``eta``).
    """
    comp = get_compressor(compressor)
    grid = log_grid(0.01, 1.0, 25) if grid is None else np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or np.any(grid <= 0) or np.any(grid > 1):
        raise ValueError(f"grid must be a non-empty 1-D array of eta values in (0, 1], got {grid}")
    be = Backend()
    stream = be.stream(seed, "tune_deepsqueeze_eta", topo.name, comp.name, d)
    G, R, n = grid.size, int(replicates), topo.n
    x0 = np.asarray(stream.normal((R, n, d)))
    x0 = x0 - x0.mean(axis=1, keepdims=True)
    X = np.broadcast_to(x0[None], (G, R, n, d)).reshape(G * R, n, d).copy()
    Delta = np.zeros_like(X)
    eta = np.repeat(grid, R).reshape(G * R, 1, 1)
    half = iterations // 2
    e_half = None
    with np.errstate(all="ignore"):
        for t in range(iterations):  # iterations of one vectorised gossip (not a hot path)
            U = X + Delta
            V = np.asarray(comp.compress(U, stream))
            Delta = U - V
            X = X + eta * (np.asarray(topo.mix(V, t=t, method="ordered")) - V)
            if t + 1 == half:
                e_half = np.asarray(consensus_distance(X))
        e_end = np.asarray(consensus_distance(X))
    rates = contraction_rates(e_half, e_end, iterations - half, G)  # the same on every CPU
    best = int(np.lexsort((-grid, rates))[0])
    return float(grid[best])


def consensus_params(
    topo: Topology, comp: Compressor | str, d: int, seed: int
) -> tuple[float, float]:
    """``(gamma_c, eta)``: CHOCO-SGD's and DeepSqueeze's consensus steps by pure gossip."""
    gc = tune_consensus_step(topo, comp, d=d, seed=seed).gamma_c
    return float(gc), tune_deepsqueeze_eta(topo, comp, d=d, seed=seed)


def make_method(
    method: str,
    topo: Topology,
    gamma: float,
    comp: Compressor | str | None,
    *,
    gamma_c: float = 1.0,
    eta: float = 1.0,
    name: str | None = None,
) -> Any:
    """The algorithm ``method`` (one of :data:`METHODS`) at constant step ``gamma``.

    DCD-/ECD-PSGD accept a biased compressor here (``allow_biased=True``): the compression
    study runs them with top-k too, outside their analysis, and says so."""
    g = ck.Constant(float(gamma))
    name = name or method
    if method == "D-PSGD":
        return DPSGD(topo, g, name=name)
    if method == "DCD-PSGD":
        return DCDPSGD(topo, g, comp, allow_biased=True, name=name)
    if method == "ECD-PSGD":
        return ECDPSGD(topo, g, comp, allow_biased=True, name=name)
    if method == "CHOCO-SGD":
        return CHOCOSGD(topo, g, comp, gamma_c, name=name)
    if method == "DeepSqueeze":
        return DeepSqueeze(topo, g, comp, eta, name=name)
    if method == "EF-SGD":
        return ErrorFeedbackSGD(topo.n, g, comp, name=name)
    raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def simulate_quiet(prob: Any, algos: list, **kw: Any) -> ck.Result:
    """:func:`convkit.simulate` on one thread with divergence warnings silenced (diverged
    replicates are reported in the data instead)."""
    kw.setdefault("threads", 1)
    kw.setdefault("progress", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DivergenceWarning)
        with np.errstate(all="ignore"):
            return ck.simulate(prob, algos, **kw)


def _mean_excess_risk(res: ck.Result, config: str) -> np.ndarray | None:
    """Replicate-mean excess risk of the node average at each record point of ``config``;
    ``None`` if any replicate diverged."""
    cv = res.values[config]
    if np.any(cv.diverged_at > 0):
        return None
    return cv.values[:, cv.iterates.index("last"), cv.metrics.index("excess_risk"), :].mean(axis=1)


def tail_error(res: ck.Result, config: str, frac: float = 0.25) -> float:
    """Mean excess risk of the node average over the last ``frac`` of the record points;
    ``inf`` if any replicate diverged."""
    vals = _mean_excess_risk(res, config)
    if vals is None:
        return float("inf")
    k = max(1, int(round(frac * vals.size)))
    v = float(np.mean(vals[-k:]))
    return v if np.isfinite(v) else float("inf")


TUNING_RULES = ("tail", "bits")


def _mean_bits_to_target(res: ck.Result, config: str, target: float) -> float:
    """Bits at which the replicate-mean excess risk of the node average first falls to
    ``target`` (:func:`level_crossing` on the bits axis, floored at 1 bit as the studies
    report it); ``inf`` if a replicate diverged or the mean never reaches ``target``."""
    mean = _mean_excess_risk(res, config)
    if mean is None:
        return float("inf")
    bits = np.maximum(np.asarray(res.values[config].axes["bits"], dtype=float), 1.0)
    b = level_crossing(bits, mean, target)
    return b if np.isfinite(b) else float("inf")


class PairScore(NamedTuple):
    """What both tuning rules read off the run of one (method, gamma) pair
    (:func:`_run_pairs`): ``tail``, the mean excess risk over the last quarter of the record
    points (:func:`tail_error`; ``inf`` if a replicate diverged); ``bits``, the bits to the
    target (:func:`_mean_bits_to_target`; ``inf``: diverged or never reached; ``nan`` when no
    target is given); ``diverged``, whether a replicate diverged."""

    tail: float
    bits: float
    diverged: bool


def tune_steps(
    prob: Any,
    builders: dict[str, Any],
    grid: np.ndarray,
    *,
    steps: int,
    replicates: int,
    seed: int,
    target: float | None = None,
    n_record: int = 20,
    max_extensions: int = 0,
    no_gain_stop: bool = False,
    stream_free: Collection[str] = (),
) -> dict[str, Any]:
    """Best step of each method by the rules of the module docstring.

    ``builders[label](gamma, name)`` builds the algorithm; every (method, gamma) pair runs
    once (:func:`_run_pairs`: ``steps`` iterations, ``replicates`` replicates, ``n_record``
    log-spaced record points, on the streams of ``seed`` alone), and both rules are read off
    its :class:`PairScore` (the bits rule costs no extra simulation); an extension of the
    grid runs only its new pairs. Returns ``{"tail": {label: (gamma, tail error)}}`` and,
    when ``target`` is given, ``"bits": {label: (gamma, bits to target)}`` (``inf`` bits: no
    grid value reached ``target``, and ``gamma`` is then the tail rule's); ``"grid": {label:
    steps}`` (each method's grid, ascending, after the extensions of the module docstring),
    ``"above"`` and ``"below"``: ``{rule: {label: why the next larger / smaller step was not
    chosen}}`` (``"diverges"``, ``"not reached"``, ``"worse"``, ``"cap"`` or ``"no gain"``),
    ``"extensions"`` (how many times the grid was extended; ``"extensions_up"`` +
    ``"extensions_down"``, each at most ``max_extensions``) and ``"pairs"``: ``{(label,
    gamma): PairScore}``, every pair run, each once.

    ``no_gain_stop``: the no-gain stop of the module docstring (the initial excess risk is
    the problem's at ``theta0 = 0``, the start of every run). ``stream_free``: the labels
    whose algorithms draw no random numbers of their own; their pairs share calls
    (:func:`_run_pairs`: the same numbers as alone, the samples drawn once)."""
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise ValueError(f"grid must be a non-empty 1-D array of positive steps, got {grid}")
    if target is not None and not (np.isfinite(target) and target > 0):
        raise ValueError(f"target must be a positive finite excess risk or None, got {target!r}")
    if (
        isinstance(max_extensions, bool)
        or not isinstance(max_extensions, (int, np.integer))
        or (max_extensions < 0)
    ):
        raise ValueError(f"max_extensions must be a non-negative integer, got {max_extensions!r}")
    if not isinstance(no_gain_stop, (bool, np.bool_)):
        raise ValueError(f"no_gain_stop must be True or False, got {no_gain_stop!r}")
    unknown = set(stream_free) - set(builders)
    if isinstance(stream_free, str) or unknown:
        raise ValueError(
            f"stream_free must be a collection of labels of builders {list(builders)}, "
            f"got {stream_free!r}"
        )
    stream_free = frozenset(stream_free)
    floor = float(prob.errors(np.zeros(prob.d))["excess_risk"]) if no_gain_stop else None
    pairs = [(label, float(g)) for label in builders for g in grid]
    scores: dict[tuple[str, float], PairScore] = {}
    extensions = {"up": 0, "down": 0}
    while True:
        new = [p for p in pairs if p not in scores]  # a pair's score is final: run it once
        scores.update(
            _run_pairs(prob, builders, new, steps, replicates, seed, target, n_record, stream_free)
        )
        out = _read_rules(scores, pairs, builders, target)
        ends = _grid_ends(pairs, builders)
        at = {side: _at_edge(out, ends, side, floor) for side in ("up", "down")}
        # upward first, then downward (a smaller step can only take a choice away from the
        # top, never bring one there)
        side = next((s for s in ("up", "down") if at[s] and extensions[s] < max_extensions), None)
        if side is None:
            break
        extensions[side] += 1
        factor = 2.0 if side == "up" else 0.5
        pairs += [(label, factor * ends[side][label]) for label in at[side]]
    out["grid"] = {
        label: np.array(sorted(g for lab, g in pairs if lab == label)) for label in builders
    }
    out["above"] = _next_step_reasons(out, scores, pairs, builders, "up", floor)
    out["below"] = _next_step_reasons(out, scores, pairs, builders, "down", floor)
    out["extensions"] = extensions["up"] + extensions["down"]
    out["extensions_up"], out["extensions_down"] = extensions["up"], extensions["down"]
    out["pairs"] = dict(scores)
    return out


def _run_pairs(
    prob: Any,
    builders: dict[str, Any],
    new: list[tuple[str, float]],
    steps: int,
    replicates: int,
    seed: int,
    target: float | None,
    n_record: int,
    stream_free: frozenset[str] = frozenset(),
) -> dict[tuple[str, float], PairScore]:
    """The runs of the (label, gamma) pairs ``new``, each with the numbers it has alone in a
    :func:`convkit.simulate` call on ``seed``.

    Streams: a call's sample stream ``(seed, "samples", j)`` and its first algorithm's own
    stream ``(seed, "algorithm", 0, j)`` depend on ``seed`` (and the replicate block ``j``)
    only, so a pair run alone has a score that is a function of (problem, label, gamma,
    seed) and the run lengths, bit for bit: not of the other pairs of the tuning, their
    number or their order, and it is computed once however often the grid is extended. The
    pairs of ``stream_free`` labels (algorithms that draw no random numbers of their own, the
    caller's statement, e.g. from the compressors' ``random`` declaration) run together in
    one call behind at most one other pair of equal workers and batch, placed first: every
    pair then reads the same samples as alone (one draw of shape ``(R, P, b)`` per step,
    shared) and the first one its stream of position 0, so each score is the one it has
    alone while the samples are drawn once per call instead of once per pair.

    Every pair of a tuning shares both streams (common random numbers): the rules compare
    the steps of one method (the argmin over gamma), a difference that common samples make
    far more precise than independent draws per (method, gamma) would; the compressors'
    draws are shared as well (with independent draws per pair, the comparison of two steps
    of a compressed method would carry the compression noise of both)."""
    algos = {p: builders[p[0]](p[1], _config_name(*p)) for p in new}
    shapes: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for p, a in algos.items():
        shapes.setdefault((int(a.workers), int(a.batch)), []).append(p)
    calls: list[list[tuple[str, float]]] = []
    for group in shapes.values():
        drawing = [[p] for p in group if p[0] not in stream_free]
        free = [p for p in group if p[0] in stream_free]
        calls += drawing[:-1] + [(drawing[-1] if drawing else []) + free]
    out: dict[tuple[str, float], PairScore] = {}
    for call in calls:
        if not call:
            continue
        res = simulate_quiet(
            prob,
            [algos[p] for p in call],
            steps=steps,
            replicates=replicates,
            seed=seed,
            n_record=n_record,
        )
        for p in call:
            name = _config_name(*p)
            bits = float("nan") if target is None else _mean_bits_to_target(res, name, target)
            diverged = bool(np.any(res.values[name].diverged_at > 0))
            out[p] = PairScore(tail_error(res, name), bits, diverged)
    return out


def _grid_ends(pairs: list[tuple[str, float]], builders: dict[str, Any]) -> dict:
    """``{"up": {label: top of its grid}, "down": {label: bottom of its grid}}``."""
    return {
        "up": {label: max(g for lab, g in pairs if lab == label) for label in builders},
        "down": {label: min(g for lab, g in pairs if lab == label) for label in builders},
    }


def _no_gain(out: dict[str, Any], label: str, floor: float | None) -> bool:
    """Whether the no-gain stop applies to ``label``: ``floor`` (the initial excess risk) is
    given and the smallest tail error over the method's grid is finite and no lower."""
    e = out["tail"][label][1]
    return floor is not None and bool(np.isfinite(e)) and e >= floor


def _at_edge(out: dict[str, Any], ends: dict, side: str, floor: float | None = None) -> list[str]:
    """The methods whose choice under some rule sits at the ``side`` end of their grid and
    would move if it were extended there. A bits-rule choice counts only when some step
    reached the target (finite bits): otherwise it is the tail rule's step, extended by that
    rule. At the top a tail-rule choice counts only with a finite tail error; at the bottom
    always (an infinite tail error at the smallest step means every step diverged), except
    under the no-gain stop (:func:`_no_gain`)."""

    def moves(label: str, rule: str) -> bool:
        g, score = out[rule][label]
        if g != ends[side][label]:
            return False
        if np.isfinite(score):
            return not (rule == "tail" and side == "down" and _no_gain(out, label, floor))
        return rule == "tail" and side == "down"

    return [label for label in ends[side] if any(moves(label, r) for r in TUNING_RULES if r in out)]


def _next_step_reasons(
    out: dict[str, Any],
    scores: dict[tuple[str, float], PairScore],
    pairs: list[tuple[str, float]],
    builders: dict[str, Any],
    side: str,
    floor: float | None = None,
) -> dict[str, dict[str, str]]:
    """``{rule: {label: why the neighbouring grid step on ``side`` ("up": the next larger,
    "down": the next smaller) was not chosen}}``: ``"diverges"`` (a replicate diverged),
    ``"not reached"`` (finite, but its mean never falls to the target; bits rule only),
    ``"worse"`` (larger tail error, or more bits, or a tie lost); with no step on that side:
    ``"no gain"`` (below a choice that is the tail rule's step, where the no-gain stop ended
    the halving, :func:`_no_gain`), ``"cap"`` (the choice is the end of its grid after the
    last allowed extension) or, above a choice with infinite score, ``"diverges"``."""
    reasons: dict[str, dict[str, str]] = {rule: {} for rule in TUNING_RULES if rule in out}
    for rule in reasons:
        for label in builders:
            g, score = out[rule][label]
            beyond = [h for lab, h in pairs if lab == label and (h > g if side == "up" else h < g)]
            if not beyond:
                tail_step = rule == "tail" or not np.isfinite(score)
                reasons[rule][label] = (
                    "no gain"
                    if side == "down" and tail_step and _no_gain(out, label, floor)
                    else "cap"
                    if side == "down" or np.isfinite(score)
                    else "diverges"
                )
                continue
            s = scores[(label, min(beyond) if side == "up" else max(beyond))]
            reasons[rule][label] = (
                "diverges"
                if s.diverged
                else "not reached"
                if rule == "bits" and not np.isfinite(s.bits)
                else "worse"
            )
    return reasons


def _config_name(label: str, gamma: float) -> str:
    return f"{label}@{gamma:.6g}"


def _read_rules(
    scores: dict[tuple[str, float], PairScore],
    pairs: list[tuple[str, float]],
    builders: dict[str, Any],
    target: float | None,
) -> dict[str, Any]:
    """Both rules (:func:`tune_steps`) over the scores of the (label, gamma) ``pairs``."""
    tail: dict[str, tuple[float, float]] = {}
    scored: dict[str, list[tuple[float, float, float]]] = {}
    for label, g in sorted(pairs, key=lambda p: (list(builders).index(p[0]), p[1])):
        s = scores[(label, g)]
        if label not in tail or s.tail < tail[label][1]:
            tail[label] = (g, s.tail)
        if target is not None:
            scored.setdefault(label, []).append((s.bits, s.tail, g))
    out: dict[str, Any] = {"tail": tail}
    if target is not None:
        bits: dict[str, tuple[float, float]] = {}
        for label, rows in scored.items():
            b, _, g = min(rows)  # fewest bits, then smaller tail error, then smaller gamma
            bits[label] = (g, b) if np.isfinite(b) else (tail[label][0], float("inf"))
        out["bits"] = bits
    return out


def level_crossing(x: np.ndarray, err: np.ndarray, level: float) -> float:
    """First ``x`` at which the error curve falls to ``level`` (log-log interpolation between
    the two record points around the crossing); ``nan`` if it never does.  The logarithms and
    the exponential are the C library's scalar ones (:mod:`math`), not NumPy's SIMD loops,
    whose AVX2 and AVX512 versions differ in the last bit: the tuners' ``bits`` rule ranks
    steps by this value, and the studies report it, the same bits on any x86-64 CPU."""
    x = np.asarray(x, dtype=float)
    err = np.maximum(np.asarray(err, dtype=float), np.finfo(float).tiny)  # NaN stays NaN
    below = np.flatnonzero(err <= level)
    if below.size == 0:
        return float("nan")
    j = int(below[0])
    if j == 0:
        return float(x[0])

    def log(v: float) -> float:  # as np.log: -inf at 0
        return math.log(v) if v > 0 else -math.inf

    e0, e1, x0, x1 = float(err[j - 1]), float(err[j]), float(x[j - 1]), float(x[j])
    with np.errstate(all="ignore"):  # IEEE division (a zero denominator: inf or nan)
        t = float(np.float64(log(e0) - log(level)) / np.float64(log(e0) - log(e1)))
        z = log(x0) + t * (log(x1) - log(x0))
    if not math.isfinite(z) or z > 709.0:  # 0, inf or nan, as np.exp gives them
        return float(np.exp(z))
    return math.exp(z)


def write_svmlight(path: str | Path, X: np.ndarray, y: np.ndarray) -> Path:
    """Write ``X`` (dense) and ``y`` as a LIBSVM file (``label idx:value``, 1-based indices,
    zeros omitted, 17 significant digits so that the values read back exactly)."""
    path = Path(path)
    X = np.asarray(X, dtype=float)
    lines = []
    for yi, row in zip(np.asarray(y), X):  # writing a file, not a hot path
        nz = np.flatnonzero(row)
        feats = " ".join(f"{j + 1}:{row[j]:.17g}" for j in nz)
        lines.append(f"{yi:g} {feats}".rstrip())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def frame_rows(res: ck.Result, config: str, **extra: Any) -> pd.DataFrame:
    """Excess risk of the node average ("last" iterate) and the consensus distance of one
    configuration, with ``extra`` columns."""
    f = res.frame
    keep = (f.config == config) & (
        ((f.iterate == "last") & (f.metric == "excess_risk"))
        | ((f.iterate == "state") & (f.metric == "consensus"))
    )
    out = f[keep][["config", "step", "bits", "metric", "mean", "se", "count"]].copy()
    cv = res.values[config]
    out["n_diverged"] = int(np.count_nonzero(cv.diverged_at))
    for k, v in extra.items():
        out[k] = v
    return out


def compact(frame: pd.DataFrame, digits: int = 6) -> pd.DataFrame:
    """Float columns rounded to ``digits`` significant digits (a smaller committed CSV)."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype.kind == "f":
            out[col] = [float(f"{v:.{digits}g}") for v in out[col].to_numpy()]
    return out


# ---------------------------------------------------------------------- negative controls
def heterogeneous_controls(data: pd.DataFrame) -> list[V.Control]:
    """Negative controls of ``decentralized_heterogeneous.checks``
    (:func:`convkit.verdicts.controlled`), false variants of its data on which the same checks
    must say ``violated``:

    * *zeta^2 measured 1 % off*: ``zeta2_measured`` of the least-squares rows with zeta^2 > 0
      times 1.01 falsifies "zeta^2 exact by construction";
    * *a tuned step censored at the top of its grid*: the first tuned (setting, method, rule)
      given ``grid_top = gamma`` and ``step_above = "cap"`` (still at the top after the last
      extension) falsifies "tuned steps at an edge of the step grid".
    """
    out = []
    bad = data.copy()
    sel = (bad.problem == "least-squares") & (bad.zeta2 > 0)
    bad.loc[sel, "zeta2_measured"] = bad.loc[sel, "zeta2_measured"] * 1.01
    out.append(
        V.Control(
            "zeta^2 measured 1% off",
            bad,
            ("decentralized_heterogeneous.zeta2_exact",),
        )
    )
    keys = ["problem", "split", "topology", "method", "steps_kind"]
    tuned = data[data.steps_kind.isin(("tuned_tail", "tuned_bits"))]
    if not tuned.empty:
        first = tuned.iloc[0][keys]
        bad = data.copy()
        sel = np.logical_and.reduce([bad[k] == first[k] for k in keys])
        bad.loc[sel, "grid_top"] = bad.loc[sel, "gamma"]
        bad.loc[sel, "step_above"] = "cap"
        out.append(
            V.Control(
                "a tuned step censored at the top of its grid",
                bad,
                ("decentralized_heterogeneous.steps_inside_grid",),
            )
        )
    return out
