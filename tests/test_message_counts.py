"""What the algorithms must send to stay correct (issue: counts of time-varying graphs and of
the server's broadcast).

On the one-peer exponential graph with 8 nodes node ``i`` mixes at step ``t`` with node
``i + 2^(t mod 3)``: over a period every node has 3 eventual neighbours. DCD-PSGD, ECD-PSGD
and CHOCO-SGD keep copies of their neighbours' models, so every eventual neighbour must apply
each update: 24 messages a step (the old count, 8, was the current out-edges only).
DeepSqueeze and D-PSGD keep nothing between steps: 8. EF-SGD with P workers: P uploads and
P downloads of the averaged update (the old count was P).
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from convkit.algorithms.decentralized import (
    CHOCOSGD,
    DCDPSGD,
    DPSGD,
    ECDPSGD,
    DeepSqueeze,
    copy_holder_messages,
    directed_messages,
)
from convkit.algorithms.feedback import ErrorFeedbackSGD
from convkit.compression import QSGD, Identity, TopK
from convkit.topology import one_peer_exponential, ring, torus

GAMMA = ck.Constant(0.05)
OPE = one_peer_exponential(8)


def _per_step(algo, n: int = 9, d: int = 10) -> np.ndarray:
    return np.diff(algo.comm_counts(n, d)["messages"], prepend=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda t: CHOCOSGD(t, GAMMA, TopK(k=2), 0.5),
        lambda t: CHOCOSGD(t, GAMMA, TopK(k=2), 0.5, order="reference_code"),
        lambda t: DCDPSGD(t, GAMMA, QSGD(s=2)),
        lambda t: ECDPSGD(t, GAMMA, QSGD(s=2)),
    ],
    ids=["choco-paper", "choco-refcode", "dcd", "ecd"],
)
def test_copy_keeping_algorithms_send_to_every_eventual_neighbour(make):
    np.testing.assert_array_equal(_per_step(make(OPE)), np.full(9, 24))
    # static graphs: the union is the graph itself, 2 |E|
    np.testing.assert_array_equal(_per_step(make(torus(2, 4))), np.full(9, 24))
    np.testing.assert_array_equal(_per_step(make(ring(8))), np.full(9, 16))


def test_memoryless_algorithms_send_on_current_edges():
    for algo in (DeepSqueeze(OPE, GAMMA, TopK(k=2), 0.5), DPSGD(OPE, GAMMA)):
        np.testing.assert_array_equal(_per_step(algo), np.full(9, 8))


def test_union_of_neighbours_by_hand():
    """copy_holder_messages: the union over the period of the off-diagonal supports; for the
    one-peer graph, receivers i - 1, i - 2, i - 4 of node i (mod 8)."""
    assert copy_holder_messages(OPE) == 24
    assert directed_messages(OPE).tolist() == [8, 8, 8]
    ever = np.zeros((8, 8), dtype=bool)
    for k in range(3):
        for i in range(8):
            ever[i, (i + 2**k) % 8] = True
    assert int(ever.sum()) == copy_holder_messages(OPE)
    assert copy_holder_messages(one_peer_exponential(16)) == 16 * 4


def test_simulate_frame_reports_the_union_and_bits():
    """The counts reach the result frame (messages and bits axes at the last step)."""
    prob = ck.LeastSquares.gaussian(d=10, noise=0.5, seed=0)
    comp = TopK(k=2)
    res = ck.simulate(
        prob, CHOCOSGD(OPE, GAMMA, comp, 0.5, name="c"), steps=12, replicates=2, n_record=2
    )
    last = res.frame[(res.frame.config == "c") & (res.frame.step == 12)].iloc[0]
    assert int(last["messages"]) == 24 * 12
    assert int(last["bits"]) == 24 * 12 * comp.bits_per_message(10)


def test_error_feedback_counts_the_broadcast():
    d = 100
    comp = TopK(k=5)
    up = comp.bits_per_message(d)
    ef = ErrorFeedbackSGD(8, GAMMA, comp)
    c = ef.comm_counts(4, d)
    np.testing.assert_array_equal(c["messages"], 16 * np.arange(1, 5))
    assert ef.broadcast_bits(d) == min(d * 32, 8 * up)
    np.testing.assert_array_equal(c["bits"], (8 * up + 8 * ef.broadcast_bits(d)) * np.arange(1, 5))
    # a dense compressor: the broadcast is the dense vector
    dense = ErrorFeedbackSGD(4, GAMMA, Identity())
    assert dense.broadcast_bits(d) == d * 32
    # one worker: no server, one message of the compressed update a step
    one = ErrorFeedbackSGD(1, GAMMA, comp).comm_counts(3, d)
    np.testing.assert_array_equal(one["messages"], [1, 2, 3])
    np.testing.assert_array_equal(one["bits"], up * np.arange(1, 4))
