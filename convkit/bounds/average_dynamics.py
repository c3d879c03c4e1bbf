"""Checks of the average dynamics derived in :mod:`convkit.bounds.decentralized`
(``deepsqueeze.average_dynamics``, ``choco.average_dynamics``): the node average of DeepSqueeze
and of CHOCO-SGD moves like mini-batch SGD whatever the compressor (``1^T (W - I) = 0``),
stepped one step at a time against the registered expression, to 1e-12, for top-k, scaled
sign and QSGD on a ring of 8 nodes. (Their own module so that the decentralized topic module
stays one file's size; the results, derivations and the other checks are there.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from convkit.bounds.checking import check_row, tolerance_verdict
from convkit.bounds.decentralized import D_DEC, N_NODES, _dec_problem
from convkit.bounds.registry import get, register_check

__all__: list[str] = []


def _average_dynamics_rows(name: str, make: Callable[[Any, Any], Any], label: str) -> list:
    from convkit.backend import Backend
    from convkit.compression import QSGD, ScaledSign, TopK
    from convkit.problems.base import GradientOracle
    from convkit.schedules import Constant
    from convkit.topology import ring

    prob = _dec_problem()
    topo = ring(N_NODES)
    gamma = 0.05
    be = Backend()
    claim = get(name)  # mean(X_{t+1}) as the registered function of mean(X_t), gamma, mean(G_t)
    rows = []
    for comp in (TopK(fraction=0.2), ScaledSign(), QSGD(s=2)):
        algo = make(topo, Constant(gamma), comp)
        steps, R = 30, 4
        algo.prepare(steps)
        s_samp, s_comp = be.stream(51, "samples"), be.stream(51, "comp", comp.name)
        state = algo.init(np.ones((R, N_NODES, D_DEC)), s_comp)
        worst = 0.0
        for k in range(1, steps + 1):
            oracle = GradientOracle(prob, prob.sample(s_samp, (R, N_NODES, 1)))
            X = np.array(algo.models(state), copy=True)
            G = oracle.grad(X.copy())
            state = algo.step(state, oracle, k, s_comp)
            lhs = np.asarray(algo.models(state)).mean(axis=1)
            rhs = np.asarray(
                claim.evaluate(mean_x_t=X.mean(axis=1), gamma=gamma, mean_g_t=G.mean(axis=1))
            )
            scale = max(1.0, float(np.max(np.abs(algo.models(state)))))
            worst = max(worst, float(np.max(np.abs(lhs - rhs))) / scale)
        rows.append(
            check_row(
                name,
                f"{label} with {comp.name}, ring of {N_NODES}, least squares d = {D_DEC}, "
                f"gamma = {gamma}, 30 steps, R = 4: max |mean(X_t+1) - the registered "
                "mean(X_t+1)(mean(X_t), gamma, mean(G_t))|",
                worst,
                0.0,
                *tolerance_verdict(
                    worst <= 1e-12,
                    "the largest deviation of the node average from the SGD step",
                    worst,
                    "<= 1e-12 x max(1, max|X|)",
                ),
                "<= 1e-12 x max(1, max|X|)",
            )
        )
    return rows


@register_check("deepsqueeze.average_dynamics", ["deepsqueeze.average_dynamics"])
def check_deepsqueeze_average(quick: bool) -> list[dict[str, Any]]:
    """DeepSqueeze's node average moves like mini-batch SGD whatever the compressor
    (derived: 1^T (W - I) = 0): top-k, scaled sign and QSGD, to 1e-12."""
    from convkit.algorithms.decentralized import DeepSqueeze

    return _average_dynamics_rows(
        "deepsqueeze.average_dynamics",
        lambda t, s, c: DeepSqueeze(t, s, c, 0.4),
        "DeepSqueeze eta = 0.4",
    )


@register_check("choco.average_dynamics", ["choco.average_dynamics"])
def check_choco_average(quick: bool) -> list[dict[str, Any]]:
    """CHOCO-SGD's node average moves like mini-batch SGD whatever the compressor, to 1e-12."""
    from convkit.algorithms.decentralized import CHOCOSGD

    return _average_dynamics_rows(
        "choco.average_dynamics",
        lambda t, s, c: CHOCOSGD(t, s, c, 0.3),
        "CHOCO-SGD gamma_c = 0.3",
    )
