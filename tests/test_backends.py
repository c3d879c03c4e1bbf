"""Array backends: the engine runs on array-api-strict arrays (proof that it uses only the
standard API), the library-specific calls sit behind Backend, and CuPy fails early and clearly
where no GPU is usable."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import convkit as ck
from convkit.backend import Backend, to_numpy

STEP = ck.PolyDecay(0.3, 0.75)


@pytest.mark.parametrize("design", ["gaussian", "rademacher", "additive"])
@pytest.mark.parametrize("rotate", [False, True])
def test_local_sgd_family_on_array_api_strict_matches_numpy(design, rotate):
    """Same seed, same numbers (drawn on the host): the strict run equals the NumPy run of the
    generic code path to rounding error, for MBA, Local-SGD (b = 2) and OSA together."""
    prob = getattr(ck.LeastSquares, design)(d=5, spectrum="1/i", rotate=rotate, seed=0)
    algos = [
        ck.MBA(3, STEP, name="mba"),
        ck.LocalSGD(4, STEP, comm="every:3", batch=2, name="local"),
        ck.OSA(4, STEP, name="osa"),
    ]
    strict = ck.simulate(prob, algos, steps=40, replicates=6, seed=1, backend="array_api_strict")
    with ck.kernels(enabled=False):  # the generic path, as on strict arrays
        ref = ck.simulate(prob, algos, steps=40, replicates=6, seed=1)
    np.testing.assert_allclose(strict.frame["mean"], ref.frame["mean"], rtol=1e-12)


def test_strict_float32():
    prob = ck.LeastSquares.gaussian(d=4, seed=0)
    res = ck.simulate(
        prob, ck.MBA(2, STEP), steps=20, replicates=4, backend="array_api_strict", dtype="float32"
    )
    assert res.meta["dtype"] == "float32" and res.frame["mean"].notna().all()


@pytest.mark.parametrize("name", ["numpy", "array_api_strict"])
def test_random_stream_draws(name):
    """Each library-specific draw returns the backend's arrays with the stated law."""
    be = Backend(name)
    s = be.stream(3)
    xp = be.xp
    z = s.normal((20000,))
    assert type(z) is type(xp.asarray([1.0]))
    zn = to_numpy(z)
    assert abs(zn.mean()) < 4 / np.sqrt(20000) and abs(zn.var() - 1) < 0.05
    u = to_numpy(s.uniform((20000,)))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 4 * np.sqrt(1 / 12 / 20000)
    r = to_numpy(s.rademacher((1000,)))
    assert set(np.unique(r)) == {-1.0, 1.0}
    i = to_numpy(s.integers(7, (1000,)))
    assert i.min() >= 0 and i.max() <= 6
    p = to_numpy(s.permutations(5, (3,)))
    assert (np.sort(p, axis=-1) == np.arange(5)).all()
    a = be.argpartition(xp.asarray([3.0, 1.0, 2.0]), 1)
    assert to_numpy(a)[0] == 1


def test_same_seed_same_numbers_on_host_backends():
    a = to_numpy(Backend("numpy").stream(5, "x").normal((10,)))
    b = to_numpy(Backend("array_api_strict").stream(5, "x").normal((10,)))
    np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_cupy_without_cupy_fails_at_the_start():
    with pytest.raises(RuntimeError, match=r"backend='cupy' needs CuPy"):
        ck.simulate(ck.LeastSquares.gaussian(2), ck.MBA(2, STEP), steps=3, backend="cupy")


def test_namespace_of_numpy_fast_path_is_array_api_compat_namespace():
    """NumPy arrays get the very namespace ``array_api_compat`` returns for them, mixed or
    non-NumPy inputs still go through ``array_namespace``."""
    import array_api_strict
    from array_api_compat import array_namespace

    from convkit.backend import namespace_of

    a, b = np.zeros(3), np.ones((2, 2), dtype=np.float32)
    assert namespace_of(a) is array_namespace(a)
    assert namespace_of(a, b) is array_namespace(a, b)
    s = array_api_strict.asarray([1.0, 2.0])
    assert namespace_of(s) is array_namespace(s)
    with pytest.raises(TypeError):
        namespace_of(a, s)  # two libraries at once: array_api_compat's error
