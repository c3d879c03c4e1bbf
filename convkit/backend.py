"""Array namespaces and random streams.

Every simulation routine takes its array namespace from its inputs
(:func:`namespace_of`, built on ``array-api-compat``) and its random numbers from a
:class:`Backend` object passed in explicitly.  There is no global, import-time switch:
``Backend("numpy")`` and ``Backend("cupy")`` can live side by side.

Randomness follows NumPy's recommended practice: a :class:`numpy.random.SeedSequence`
roots every stream, independent child streams are spawned from it
(:func:`derive_seed`), and the same seed gives the same numbers.  A :class:`BlockedStream`
joins the streams of consecutive blocks of replicates: every draw's leading (replicate) axis
is filled block by block from each block's own stream, so a block's numbers do not depend on
which other blocks are drawn with it (:func:`convkit.simulate` keys one stream per block).

Library-specific calls that the array API standard does not cover (random numbers,
``argpartition``, sparse products) live here, behind :class:`Backend`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Backend",
    "BlockedStream",
    "RandomStream",
    "array_library",
    "derive_seed",
    "get_backend",
    "kth_largest",
    "namespace_of",
    "sparse_block_operator",
    "sparse_matmul",
    "to_numpy",
    "topk_mask",
]

_DTYPES = {"float64": np.float64, "float32": np.float32}
BACKENDS = ("numpy", "cupy", "array_api_strict")


_NUMPY_NAMESPACE: Any = None


def namespace_of(*arrays: Any) -> Any:
    """Return the array-API namespace of ``arrays`` (NumPy, CuPy, array-api-strict...).

    NumPy arrays, the common case, get ``array_api_compat``'s NumPy namespace without a new
    lookup (the same object ``array_namespace`` returns; its checks cost ~2 us a call, and the
    decentralized step loop asks tens of thousands of times per analysis)."""
    global _NUMPY_NAMESPACE
    if arrays and all(type(a) is np.ndarray for a in arrays):
        if _NUMPY_NAMESPACE is None:
            from array_api_compat import array_namespace

            _NUMPY_NAMESPACE = array_namespace(np.empty(0))
        return _NUMPY_NAMESPACE
    from array_api_compat import array_namespace

    return array_namespace(*arrays)


def to_numpy(x: Any) -> np.ndarray:
    """Copy any supported array to a NumPy array on the host."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "get"):  # CuPy
        return x.get()
    return np.asarray(x)


def derive_seed(seed: int | np.random.SeedSequence | None, *key: Any) -> np.random.SeedSequence:
    """A child :class:`~numpy.random.SeedSequence` determined by ``seed`` and ``key``.

    ``key`` is any JSON-serialisable description (e.g. a configuration); it is hashed to
    integer words appended to the seed's spawn key, so that different configurations of a
    sweep get independent streams, and the same (seed, key) always gives the same stream,
    whatever process computes it.
    """
    if isinstance(seed, np.random.SeedSequence):
        root = seed
    else:
        root = np.random.SeedSequence(seed)
    if not key:
        return root
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).digest()
    words = tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + words)


@dataclass
class RandomStream:
    """Random numbers for one backend, drawn from a seeded generator.

    Wraps :class:`numpy.random.Generator` (or CuPy's) with the few draws convkit needs,
    always returning arrays of the backend's namespace and requested dtype.  For namespaces
    without a random module of their own (array-api-strict) the numbers are drawn on the host
    with NumPy and converted (``host=True``).
    """

    generator: Any
    xp: Any
    dtype: Any
    host: bool = False

    def _out(self, arr: Any) -> Any:
        return self.xp.asarray(arr) if self.host else arr

    def normal(self, shape: tuple[int, ...]) -> Any:
        """Standard normal draws."""
        dt = np.dtype(str(self.dtype).split(".")[-1]) if self.host else self.dtype
        return self._out(self.generator.standard_normal(size=shape, dtype=dt))

    def uniform(self, shape: tuple[int, ...]) -> Any:
        """Uniform draws on [0, 1)."""
        dt = np.dtype(str(self.dtype).split(".")[-1]) if self.host else self.dtype
        return self._out(self.generator.random(size=shape, dtype=dt))

    def rademacher(self, shape: tuple[int, ...]) -> Any:
        """Independent random signs +-1 (in the stream's dtype)."""
        bits = self._out(self.generator.integers(0, 2, size=shape, dtype=np.int8))
        return 2 * self.xp.astype(bits, self.dtype) - 1

    def integers(self, high: int, shape: tuple[int, ...]) -> Any:
        """Uniform integers in [0, high)."""
        return self._out(self.generator.integers(0, high, size=shape))

    def permutations(self, n: int, shape: tuple[int, ...]) -> Any:
        """Independent random permutations of range(n), one per leading index: shape + (n,)."""
        keys = self._out(self.generator.random(size=(*shape, n)))
        return self.xp.argsort(keys, axis=-1)

    def spawn(self, count: int) -> list[RandomStream]:
        """Independent child streams."""
        return [
            RandomStream(g, self.xp, self.dtype, self.host) for g in self.generator.spawn(count)
        ]


class BlockedStream(RandomStream):
    """One stream per block of consecutive replicates, drawn together.

    ``streams[j]`` serves rows ``bounds[j]:bounds[j+1]`` of the leading (replicate) axis of
    every draw: a draw of shape ``(R, ...)`` (``R = bounds[-1]``) is the concatenation of the
    blocks' draws of shape ``(n_j, ...)``, each from its own stream.  The numbers of a block
    therefore depend only on its own stream and on the sequence of draw shapes, not on the
    other blocks drawn with it: the foundation of chunk-independent Monte Carlo results in
    :func:`convkit.simulate`.  NumPy normal and uniform draws are written in place into one
    output array (``out=``); other draws are concatenated.
    """

    def __init__(self, streams: list[RandomStream], sizes: list[int]) -> None:
        if not streams or len(streams) != len(sizes):
            raise ValueError(
                f"BlockedStream needs one stream per block, got {len(streams)} streams for "
                f"{len(sizes)} block sizes"
            )
        first = streams[0]
        super().__init__(None, first.xp, first.dtype, first.host)
        self.streams = list(streams)
        self.bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        # in-place filling: a NumPy generator writing NumPy arrays
        self._fill = (
            first.xp is np and not first.host and isinstance(first.generator, np.random.Generator)
        )

    def _check(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        shape = tuple(int(s) for s in shape)
        if not shape or shape[0] != self.bounds[-1]:
            raise ValueError(
                f"a BlockedStream draw must have leading (replicate) axis {self.bounds[-1]}, "
                f"got shape {shape}"
            )
        return shape

    def _parts(self, shape: tuple[int, ...]) -> list[tuple[RandomStream, tuple[int, ...]]]:
        b = self.bounds
        return [(s, (b[j + 1] - b[j], *shape[1:])) for j, s in enumerate(self.streams)]

    def _concat(self, parts: list[Any]) -> Any:
        if len(parts) == 1:
            return parts[0]
        if isinstance(parts[0], np.ndarray):
            return np.concatenate(parts, axis=0)
        return self.xp.concat(parts, axis=0)

    def _filled(self, shape: tuple[int, ...], method: str) -> Any:
        out = np.empty(shape, dtype=self.dtype)
        b = self.bounds
        for j, s in enumerate(self.streams):
            getattr(s.generator, method)(out=out[b[j] : b[j + 1]], dtype=self.dtype)
        return out

    def normal(self, shape: tuple[int, ...]) -> Any:
        """Standard normal draws, block by block."""
        shape = self._check(shape)
        if len(self.streams) == 1:
            return self.streams[0].normal(shape)
        if self._fill:
            return self._filled(shape, "standard_normal")
        return self._concat([s.normal(sh) for s, sh in self._parts(shape)])

    def uniform(self, shape: tuple[int, ...]) -> Any:
        """Uniform draws on [0, 1), block by block."""
        shape = self._check(shape)
        if len(self.streams) == 1:
            return self.streams[0].uniform(shape)
        if self._fill:
            return self._filled(shape, "random")
        return self._concat([s.uniform(sh) for s, sh in self._parts(shape)])

    def rademacher(self, shape: tuple[int, ...]) -> Any:
        """Random signs, block by block."""
        shape = self._check(shape)
        return self._concat([s.rademacher(sh) for s, sh in self._parts(shape)])

    def integers(self, high: Any, shape: tuple[int, ...]) -> Any:
        """Uniform integers in [0, high), block by block (``high`` must broadcast against
        one block's shape: no replicate axis)."""
        shape = self._check(shape)
        return self._concat([s.integers(high, sh) for s, sh in self._parts(shape)])

    def permutations(self, n: int, shape: tuple[int, ...]) -> Any:
        """Random permutations of range(n), block by block: shape + (n,)."""
        shape = self._check(shape)
        return self._concat([s.permutations(n, sh) for s, sh in self._parts(shape)])

    def spawn(self, count: int) -> list[RandomStream]:
        """Independent child blocked streams (each block spawns its own children)."""
        children = [s.spawn(count) for s in self.streams]
        sizes = np.diff(self.bounds).tolist()
        return [BlockedStream([c[i] for c in children], sizes) for i in range(count)]


@dataclass
class Backend:
    """Array library, floating dtype and random numbers for one simulation.

    Parameters
    ----------
    name:
        ``"numpy"`` (default), ``"cupy"`` (GPU: namespace ``array_api_compat.cupy``, random
        numbers from ``cupy.random.Generator(XORWOW)``, so a CuPy run equals a NumPy run in
        distribution, not sample by sample; without CuPy or a CUDA device a
        :class:`RuntimeError` here, before any work), or ``"array_api_strict"`` (the
        standard's reference namespace, on the CPU: for proving that code uses only the
        standard API; random numbers are drawn with NumPy and converted, so the same seed
        gives the NumPy run's numbers).
    dtype:
        ``"float64"`` (default) or ``"float32"``.
    """

    name: str = "numpy"
    dtype: str = "float64"
    xp: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise ValueError(f"backend must be one of {list(BACKENDS)}, got {self.name!r}")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, got {self.dtype!r}")
        if self.name == "numpy":
            self.xp = np
        elif self.name == "cupy":
            self.xp = _import_cupy()
        else:
            try:
                import array_api_strict
            except ImportError as exc:
                raise RuntimeError(
                    "backend='array_api_strict' needs `pip install array-api-strict`"
                ) from exc
            self.xp = array_api_strict

    def __reduce__(self) -> tuple:
        """Pickled as ``(name, dtype)`` (the namespace module is looked up again on load), so
        that a backend travels to Dask workers."""
        return (Backend, (self.name, self.dtype))

    @property
    def float_dtype(self) -> Any:
        return getattr(self.xp, self.dtype)

    def stream(self, seed: int | np.random.SeedSequence | None, *key: Any) -> RandomStream:
        """A random stream seeded by ``derive_seed(seed, *key)``."""
        ss = derive_seed(seed, *key)
        if self.name == "cupy":
            import cupy  # pragma: no cover - needs a GPU

            seed32 = int(ss.generate_state(1)[0])  # pragma: no cover
            gen = cupy.random.Generator(cupy.random.XORWOW(seed32))  # pragma: no cover
            return RandomStream(gen, self.xp, self.float_dtype)  # pragma: no cover
        gen = np.random.Generator(np.random.SFC64(ss))
        return RandomStream(gen, self.xp, self.float_dtype, host=self.name != "numpy")

    def asarray(self, x: Any) -> Any:
        """Move ``x`` to this backend with this backend's float dtype."""
        return self.xp.asarray(x, dtype=self.float_dtype)

    def argpartition(self, x: Any, kth: int, axis: int = -1) -> Any:
        """``argpartition`` (not in the array API standard; a full sort where it is missing)."""
        if hasattr(self.xp, "argpartition"):
            return self.xp.argpartition(x, kth, axis=axis)
        return self.xp.argsort(x, axis=axis)


# --------------------------------------------------------------------------- library-specific
# The few operations the array API standard lacks.  Each has a NumPy / CuPy implementation
# (the libraries' own calls) and a fallback that uses only the standard API; both give the
# same values (tests/test_backends_decentralized.py).


def array_library(x: Any) -> str:
    """``"numpy"``, ``"cupy"`` or ``"other"`` (any other array-API library) for array ``x``."""
    if isinstance(x, np.ndarray):
        return "numpy"
    from array_api_compat import is_cupy_array

    return "cupy" if is_cupy_array(x) else "other"


def kth_largest(xp: Any, score: Any, k: int, inplace: bool = False) -> Any:
    """The ``k``-th largest entry of each row (last axis) of ``score``, shape ``(..., 1)``.

    NumPy / CuPy: ``partition`` (with ``inplace`` a NumPy ``score`` is partitioned in place,
    saving a full-size copy; its contents are then scrambled).  Other libraries: a full
    ``sort`` (standard API).  Same values either way.
    """
    d = int(score.shape[-1])
    if not 1 <= k <= d:
        raise ValueError(f"k must lie in [1, d] = [1, {d}], got {k}")
    lib = array_library(score)
    if lib == "numpy" and inplace:
        score.partition(d - k, axis=-1)
        return score[..., d - k : d - k + 1].copy()
    if lib == "numpy":
        return np.partition(score, d - k, axis=-1)[..., d - k : d - k + 1]
    if lib == "cupy":  # pragma: no cover - needs a GPU
        import cupy

        return cupy.partition(score, d - k, axis=-1)[..., d - k : d - k + 1]
    return xp.sort(score, axis=-1)[..., d - k : d - k + 1]


def topk_mask(xp: Any, score: Any, k: int) -> Any:
    """Boolean mask selecting exactly ``k`` largest entries of each row of ``score``.

    Ties at the threshold keep the lowest indices (as the compiled top-k of
    :mod:`convkit._kernels`), so that every path selects the same entries: NumPy / CuPy sort
    each row stably in descending order and scatter the first ``k`` positions with
    ``put_along_axis``; other libraries compare the rank of each entry in a stable descending
    ``argsort`` with ``k`` (the standard-API replacement for ``put_along_axis``).  A full
    sort: meant for the few rows where a ``partition`` threshold is tied.
    """
    d = int(score.shape[-1])
    if not 1 <= k <= d:
        raise ValueError(f"k must lie in [1, d] = [1, {d}], got {k}")
    lib = array_library(score)
    if lib == "numpy":
        idx = np.argsort(-score, axis=-1, kind="stable")[..., :k]
        mask = np.zeros(score.shape, dtype=bool)
        np.put_along_axis(mask, idx, True, axis=-1)
        return mask
    if lib == "cupy":  # pragma: no cover - needs a GPU
        import cupy

        idx = cupy.argsort(-score, axis=-1)[..., :k]  # CuPy's sort is stable
        mask = cupy.zeros(score.shape, dtype=bool)
        cupy.put_along_axis(mask, idx, True, axis=-1)
        return mask
    order = xp.argsort(score, axis=-1, descending=True, stable=True)
    rank = xp.argsort(order, axis=-1)  # rank[j] = position of entry j in the descending order
    return rank < k


def sparse_block_operator(W: np.ndarray, replicates: int, like: Any) -> Any:
    """``kron(I_R, W)`` as a CSR matrix of ``like``'s library, for :func:`sparse_matmul`.

    NumPy: a SciPy ``csr_array``; CuPy: a ``cupyx.scipy.sparse.csr_matrix`` built from the
    same CSR arrays; other libraries (no sparse matrices in the standard): ``W`` itself as a
    dense array of ``like``'s namespace and dtype (the product is then a dense ``matmul``).
    """
    import scipy.sparse as sp

    lib = array_library(like)
    if lib == "other":
        xp = namespace_of(like)
        return xp.asarray(np.asarray(W), dtype=like.dtype)
    K = sp.csr_array(sp.kron(sp.identity(replicates), sp.csr_array(np.asarray(W)), format="csr"))
    K = K.astype(np.dtype(str(like.dtype)))
    if lib == "numpy":
        return K
    import cupy  # pragma: no cover - needs a GPU
    import cupyx.scipy.sparse as csp  # pragma: no cover

    return csp.csr_matrix(  # pragma: no cover
        (cupy.asarray(K.data), cupy.asarray(K.indices), cupy.asarray(K.indptr)), shape=K.shape
    )


def sparse_matmul(K: Any, X: Any) -> Any:
    """``(W X)[r] = W @ X[r]`` for ``X`` of shape ``(R, P, d)`` and ``K`` from
    :func:`sparse_block_operator` (``W``, R): one sparse product on ``X`` viewed as
    ``(R P, d)`` (no transpose), or the dense ``matmul`` fallback."""
    R, P, d = X.shape
    if array_library(X) == "other":
        return namespace_of(X).matmul(K, X)
    return (K @ X.reshape(R * P, d)).reshape(R, P, d)


def _import_cupy() -> Any:
    """The array-API namespace of CuPy (``array_api_compat.cupy``: standard names such as
    ``vecdot`` and ``astype`` on every CuPy version), after checking that CuPy is installed
    and sees a CUDA device; a clear :class:`RuntimeError` otherwise."""
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "backend='cupy' needs CuPy: install the extra with `pip install convkit[gpu]`"
        ) from exc
    try:  # pragma: no cover - depends on the machine
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(f"backend='cupy' needs a usable CUDA GPU: {exc}") from exc
    import array_api_compat.cupy as xp  # pragma: no cover

    return xp  # pragma: no cover


def get_backend(backend: str | Backend | None = None, dtype: str = "float64") -> Backend:
    """Normalise a ``backend`` argument (name, :class:`Backend` or ``None``)."""
    if isinstance(backend, Backend):
        return backend
    return Backend(backend or "numpy", dtype)


_ALLOCATOR_TUNED = False


def tune_allocator() -> bool:
    """Keep freed memory in the heap instead of returning it to the OS (glibc only).

    The engine allocates short-lived temporaries of the size of the state at every step.
    With glibc's defaults, arrays above the mmap threshold are mapped and unmapped each time,
    and every first touch of a fresh page is a page fault: measured here, this made a
    least-squares gradient of an (R, P, d) = (200, 16, 50) block 8 times slower than the
    arithmetic itself.  Raising the trim threshold and the top pad (``mallopt``) lets glibc
    reuse freed memory.  Called once by :func:`convkit.simulate`; set the environment
    variable ``CONVKIT_NO_MALLOPT=1`` to leave the allocator alone.  Returns whether it acted.
    """
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED:
        return True
    import ctypes
    import ctypes.util
    import os
    import sys

    if os.environ.get("CONVKIT_NO_MALLOPT") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
    ok = mallopt(M_MMAP_THRESHOLD, 256 * 2**20)
    ok &= mallopt(M_TRIM_THRESHOLD, 1024 * 2**20)
    ok &= mallopt(M_TOP_PAD, 64 * 2**20)
    _ALLOCATOR_TUNED = bool(ok)
    return _ALLOCATOR_TUNED
