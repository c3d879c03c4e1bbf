"""A mixed call: Local-SGD schedules beside one SCAFFOLD, against its parts run separately.

Setting (issue 32, item 2): the large-step study's problem, ``LogisticRegression.gaussian(2,
spectrum="flat", theta_star=(1, 1)/sqrt(2))``, six Local-SGD schedules
``LocalSGD(8, PolyDecay(1.0, 0.75), comm=Rounds(N))`` for ``N`` in 1, 4, 16, 64, 256, 1024
and ``SCAFFOLD(8, PolyDecay(1.0, 0.75), comm="every:16")`` (all P = 8, batch 1: every call
draws the same samples, so the values of an algorithm are the same in every call), n = 12500
local steps, R = 600 replicates (quick mode: n = 1250, R = 128), ``n_record=1``,
``threads=1`` (one core: the machine's other cores are shared).

* ``mixed_seconds``: one ``simulate`` call of the seven algorithms.  The run plan puts the
  Local-SGD schedules on the fused segments (:mod:`convkit._fused_local`) and SCAFFOLD on
  the step-by-step engine (a path per algorithm, ``meta["path"]["algorithms"]``).
* ``mixed_parts_seconds``: the Local-SGD call plus the SCAFFOLD call, run one after the other.
* ``mixed_one_path_seconds``: the mixed call with every algorithm on one path, step by step
  (the fused paths left out of the engine's paths, as the plan chose before item 2: one
  non-Local-SGD algorithm took every schedule off the segments).
* ``mixed_vs_parts`` = parts / mixed (goal >= 1: a mixed call costs no more than its parts);
  ``mixed_vs_one_path`` = one path / mixed (what item 2 saves, informational).

The three runs are interleaved and each keeps the best of several repeats (3, quick 2).
"""

from __future__ import annotations

import sys

import numpy as np

import convkit as ck
from benchmarks.timing import best_of

ROUNDS = (1, 4, 16, 64, 256, 1024)
P = 8
C = 1.0


def setting(quick: bool) -> tuple[ck.LogisticRegression, list, list, int, int]:
    """``(problem, Local-SGD schedules, [SCAFFOLD], n, R)`` of the benchmark."""
    prob = ck.LogisticRegression.gaussian(2, spectrum="flat", theta_star=np.ones(2) / np.sqrt(2))
    step = ck.PolyDecay(C, 0.75)
    local = [ck.LocalSGD(P, step, comm=ck.Rounds(N), name=f"N={N}") for N in ROUNDS]
    other = [ck.SCAFFOLD(P, step, comm="every:16")]
    n, R = (1250, 128) if quick else (12500, 600)
    return prob, local, other, n, R


def timings(quick: bool = False) -> dict[str, float]:
    """Best seconds of the mixed call, its two parts, and the mixed call on one path."""
    sim = sys.modules["convkit.simulate"]
    from convkit._fused_local import FusedLocalSegments

    prob, local, other, n, R = setting(quick)
    kw = dict(steps=n, replicates=R, seed=1, n_record=1, progress=False, threads=1)

    def call(algos: list) -> ck.Result:
        res = ck.simulate(prob, algos, **kw)
        res.frame  # noqa: B018 - the summary is part of the cost
        return res

    def mixed() -> None:
        call([*local, *other])

    def parts() -> None:
        call(local)
        call(other)

    def one_path() -> None:
        paths = sim.SIMULATE_PATHS
        sim.SIMULATE_PATHS = tuple(p for p in paths if not isinstance(p, FusedLocalSegments))
        try:
            res = call([*local, *other])
        finally:
            sim.SIMULATE_PATHS = paths
        assert res.meta["path"]["name"] == "compiled-steps"

    # compile, and check the paths the plan takes
    small = dict(kw, steps=ROUNDS[-1], replicates=8)
    path = ck.simulate(prob, [*local, *other], **small).meta["path"]
    assert path["name"] == "fused-local-logistic + compiled-steps", path["name"]
    t_mixed, t_parts, t_one = best_of([mixed, parts, one_path], 2 if quick else 3)
    return {"mixed": t_mixed, "parts": t_parts, "one_path": t_one}


def measure(quick: bool = False) -> dict[str, dict]:
    t = timings(quick)
    info = {"goal": None, "higher_is_better": False}
    return {
        "mixed_vs_parts": {"value": t["parts"] / t["mixed"], "goal": 1.0, "higher_is_better": True},
        "mixed_vs_one_path": {
            "value": t["one_path"] / t["mixed"],
            "goal": None,
            "higher_is_better": True,
        },
        "mixed_seconds": {"value": t["mixed"], **info},
        "mixed_parts_seconds": {"value": t["parts"], **info},
        "mixed_one_path_seconds": {"value": t["one_path"], **info},
    }


if __name__ == "__main__":
    t = timings(quick="--quick" in sys.argv)
    print(
        f"mixed {t['mixed']:.3f} s, parts {t['parts']:.3f} s, one path {t['one_path']:.3f} s; "
        f"parts / mixed = {t['parts'] / t['mixed']:.3f}, "
        f"one path / mixed = {t['one_path'] / t['mixed']:.2f}"
    )
