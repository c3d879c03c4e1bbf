"""DCD-PSGD and ECD-PSGD with random unbiased compressors against hand-written per-node steps.

Pattern of ``test_vectorized_equals_per_worker_loop`` in ``tests/test_decentralized.py``
(CHOCO-SGD and DeepSqueeze against the per-worker loops of
``benchmarks/naive_decentralized.py``): the vectorized algorithm is stepped on samples drawn
once from one stream, and the reference, one replicate at a time with a Python loop over
nodes, uses the same samples.  A random compressor needs the same random numbers too: the
vectorized run gets a *recording* stream that keeps a copy of every uniform array the
compressor draws (one ``(R, P, d)`` array per step, checked), and the reference compresses
node ``i`` of replicate ``r`` at step ``t`` with the slice ``[r, i]`` of that step's draw,
through compressors written here from their papers' definitions:

* scaled rand-k (Stich et al. 2018; unbiased): keep a uniformly random ``k``-subset of the
  coordinates (here: the ``k`` largest of ``d`` i.i.d. uniform keys, which is a uniform
  ``k``-subset), multiplied by ``d / k``;
* QSGD with ``s`` levels (Alistarh et al. 2017): ``C(v)_j = ||v|| sign(v_j) xi_j / s`` with
  ``l = floor(s |v_j| / ||v||)`` and ``xi_j = l + 1`` with probability
  ``s |v_j| / ||v|| - l`` (here: when the coordinate's uniform is below it), else ``l``.

Update rules, Tang, Gan, Zhang, Zhang, Liu 2018 ("Communication compression for decentralized
training"), written per node:

* DCD-PSGD (Algorithm 1): ``h_i = sum_j W_ij x_j - gamma g_i(x_i)``; ``q_i = C(h_i - x_i)``;
  ``x_i <- x_i + q_i`` (every neighbour applies the same ``q_i`` to its replica);
* ECD-PSGD (Algorithm 2), ``t`` the step number from 1: ``h_i = sum_j W_ij y_j -
  gamma g_i(x_i)``; ``z_i = (1 - t/2) x_i + (t/2) h_i``; ``x_i <- h_i``;
  ``y_i <- (1 - 2/t) y_i + (2/t) C(z_i)``, ``y`` starting at ``x_0``.

Agreement to rounding at every step: ``|a - b| <= 1e-12 max(1, max|b|)`` (the scale matters
because aggressive unbiased compression makes DCD/ECD grow on the ring).
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
from benchmarks.naive_decentralized import least_squares_grad
from convkit.algorithms.decentralized import DCDPSGD, ECDPSGD
from convkit.backend import Backend, RandomStream
from convkit.compression import QSGD, RandK
from convkit.problems.base import GradientOracle
from convkit.topology import ring

P, D, R, STEPS, GAMMA = 8, 12, 3, 12, 0.05
ATOL = 1e-12


class RecordingStream(RandomStream):
    """A NumPy stream that keeps a copy of every uniform array it hands out (and refuses the
    other draws, which these compressors do not use)."""

    def uniform(self, shape):
        u = super().uniform(shape)
        self.draws.append(np.array(u, copy=True))
        return u

    def normal(self, shape):  # pragma: no cover - a change of the compressors' draws
        raise AssertionError("compressor drew normals; the reference expects uniforms only")

    def rademacher(self, shape):  # pragma: no cover
        raise AssertionError("compressor drew signs; the reference expects uniforms only")


def recording_stream(seed):
    base = Backend().stream(seed, "compressor")
    s = RecordingStream(base.generator, np, np.float64)
    s.draws = []
    return s


def ref_randk_scaled(v, keys, k):
    d = v.size
    keep = np.argsort(-keys, kind="stable")[:k]
    out = np.zeros(d)
    for j in keep:
        out[j] = v[j] * d / k
    return out


def ref_qsgd(v, keys, s):
    norm = float(np.sqrt(np.sum(v * v)))
    out = np.zeros(v.size)
    if norm == 0.0:
        return out
    for j in range(v.size):
        u = s * abs(v[j]) / norm
        low = np.floor(u)
        xi = low + (1.0 if keys[j] < u - low else 0.0)
        out[j] = norm * np.sign(v[j]) * xi / s
    return out


def mix_row(W, X, i):
    """sum_j W_ij X_j over the neighbours of node i (a loop, as in the papers)."""
    acc = np.zeros(X.shape[1])
    for j in range(W.shape[0]):
        if W[i, j] != 0.0:
            acc += W[i, j] * X[j]
    return acc


class LoopDCD:
    def __init__(self, W, x0, compress):
        self.W, self.x, self.compress = W, np.array(x0, dtype=float), compress

    def step(self, grad, gamma, t, keys):
        x_old = self.x.copy()
        for i in range(self.x.shape[0]):
            h = mix_row(self.W, x_old, i) - gamma * grad(i, x_old[i])
            self.x[i] = x_old[i] + self.compress(h - x_old[i], keys[i])


class LoopECD:
    def __init__(self, W, x0, compress):
        self.W, self.compress = W, compress
        self.x = np.array(x0, dtype=float)
        self.y = self.x.copy()

    def step(self, grad, gamma, t, keys):
        x_old, y_old = self.x.copy(), self.y.copy()
        for i in range(self.x.shape[0]):
            h = mix_row(self.W, y_old, i) - gamma * grad(i, x_old[i])
            z = (1 - t / 2) * x_old[i] + (t / 2) * h
            self.x[i] = h
            self.y[i] = (1 - 2 / t) * y_old[i] + (2 / t) * self.compress(z, keys[i])


COMPRESSORS = {
    "rand-k-scaled": (RandK(k=6, scaled=True), lambda v, u: ref_randk_scaled(v, u, 6)),
    "rand-k-scaled-k9": (RandK(k=9, scaled=True), lambda v, u: ref_randk_scaled(v, u, 9)),
    "qsgd-s4": (QSGD(s=4), lambda v, u: ref_qsgd(v, u, 4)),
    "qsgd-s1": (QSGD(s=1), lambda v, u: ref_qsgd(v, u, 1)),
}
ALGOS = {"DCD": (DCDPSGD, LoopDCD), "ECD": (ECDPSGD, LoopECD)}


@pytest.mark.parametrize("comp", sorted(COMPRESSORS))
@pytest.mark.parametrize("kind", sorted(ALGOS))
def test_vectorized_equals_hand_written_per_node_step(kind, comp):
    """Ring of 8, least squares d = 12, gamma = 0.05, start at 0.5 (so that the first
    compressed vectors are not zero), 3 replicates, 12 steps: after every step the
    vectorized models (and ECD's public estimates y) equal the per-node reference to rounding
    (module docstring), for scaled rand-k (k = 6, 9 of 12) and QSGD (s = 4, 1)."""
    prob = ck.LeastSquares.gaussian(d=D, noise=0.5, seed=3)
    topo = ring(P)
    W = np.asarray(topo.W, dtype=float)
    cls, Loop = ALGOS[kind]
    compressor, ref_compress = COMPRESSORS[comp]
    vec = cls(topo, ck.Constant(GAMMA), compressor)
    be = Backend()
    samples = be.stream(7, "samples")
    batches = [prob.sample(samples, (R, P, 1)) for _ in range(STEPS)]
    stream = recording_stream(7)
    x0 = np.full((R, P, D), 0.5)
    vec.prepare(STEPS)
    st = vec.init(x0.copy(), stream)
    loops = [Loop(W, x0[r], ref_compress) for r in range(R)]
    moved = 0.0
    for t, b in enumerate(batches, start=1):
        n_draws = len(stream.draws)
        st = vec.step(st, GradientOracle(prob, b), t, stream)
        assert len(stream.draws) == n_draws + 1, "one compressor draw per step expected"
        keys = stream.draws[-1]
        assert keys.shape == (R, P, D)
        for r, loop in enumerate(loops):
            loop.step(least_squares_grad(b, r, prob.theta_star, prob.noise), GAMMA, t, keys[r])
        ref_x = np.stack([lp.x for lp in loops])
        scale = max(1.0, float(np.max(np.abs(ref_x))))
        np.testing.assert_allclose(vec.models(st), ref_x, rtol=0, atol=ATOL * scale)
        if kind == "ECD":
            ref_y = np.stack([lp.y for lp in loops])
            scale_y = max(1.0, float(np.max(np.abs(ref_y))))
            np.testing.assert_allclose(st.y, ref_y, rtol=0, atol=ATOL * scale_y)
        moved = max(moved, float(np.max(np.abs(ref_x - x0))))
    assert moved > 0.05  # the trajectories moved
