"""Compression operators on whole ``(R, P, d)`` blocks.

Every compressor maps an array ``x`` of any shape ``(..., d)`` to a *dense* array of the same
shape and dtype, compressing each row (last axis) independently and vectorized over all
leading axes: ``compress(x, stream=None) -> same shape``. The input is never modified.
Random compressors need a :class:`convkit.backend.RandomStream`.

Constants (``d`` is the row length; both depend on it, hence methods):

* ``delta(d)``: contraction, ``E||C(x) - x||^2 <= (1 - delta) ||x||^2`` for all ``x``;
  ``None`` if no such ``delta > 0`` holds;
* ``omega(d)``: unbiased variance factor, ``E C(x) = x`` and
  ``E||C(x) - x||^2 <= omega ||x||^2``; ``None`` for biased compressors. An unbiased
  compressor with ``omega < 1`` is also a contraction with ``delta = 1 - omega``
  (reported by ``delta``);
* ``unbiased``: whether ``E C(x) = x``;
* ``bits_per_message(d, float_bits=32)``: bits to send one compressed row, with the encoding
  stated in each class (values at ``float_bits``, indices at ``ceil(log2 d)`` bits, norms
  and scales at ``float_bits``; no entropy coding).

Sources: top-k / rand-k (Stich, Cordonnier, Jaggi 2018, "Sparsified SGD with memory"),
QSGD (Alistarh et al. 2017, Lemma 3.1), rescaled unbiased compressors (Koloskova, Stich,
Jaggi 2019, CHOCO-SGD, Remark on ``Q / tau``), scaled sign (Karimireddy et al. 2019,
"Error feedback fixes SignSGD"), stochastic rounding (derived here).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from convkit._kernels import topk_compress
from convkit.backend import RandomStream, kth_largest, namespace_of, topk_mask
from convkit.validation import check_int, check_real

__all__ = [
    "COMPRESSORS",
    "Compressor",
    "Identity",
    "QSGD",
    "RandK",
    "ScaledSign",
    "StochasticRounding",
    "TopK",
    "COMPRESSOR_ALIASES",
    "get_compressor",
    "parse_compressor_spec",
    "resolve_compressor_kind",
]


def _check_x(x: Any) -> tuple[Any, int]:
    xp = namespace_of(x)
    if getattr(x, "ndim", 0) < 1:
        raise ValueError(f"x must have at least one axis (..., d), got shape {x.shape}")
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"x must be a real floating-point array, got dtype {x.dtype}")
    return xp, int(x.shape[-1])


def _need_stream(name: str, stream: RandomStream | None) -> RandomStream:
    if stream is None:
        raise ValueError(
            f"{name} is random: pass stream=RandomStream (e.g. convkit.backend.Backend()"
            ".stream(seed))"
        )
    return stream


def _index_bits(d: int) -> int:
    return math.ceil(math.log2(d)) if d > 1 else 0


def _check_d(d: Any) -> int:
    return check_int("d", d, low=1)


def _safe_div(xp: Any, a: Any, b: Any) -> Any:
    """``a / b`` where ``b > 0``, 0 where ``b == 0`` (no division-by-zero warning)."""
    pos = b > 0
    if type(a) is np.ndarray and type(b) is np.ndarray:  # the same, without the wrappers
        return np.where(pos, a / np.where(pos, b, np.ones_like(b)), np.zeros_like(a))
    return xp.where(pos, a / xp.where(pos, b, xp.ones_like(b)), xp.zeros_like(a))


def _clip(xp: Any, u: Any, low: float, high: float) -> Any:
    """``min(max(u, low), high)`` (NaN stays NaN); NumPy's own ``clip`` for NumPy arrays, whose
    values are the standard one's (array_api_compat's wrapper cost ~70 us a call)."""
    if type(u) is np.ndarray:
        return np.clip(u, low, high)
    return xp.clip(u, low, high)


class Compressor(ABC):
    """Base class: see the module docstring for the contract."""

    name: str = "compressor"
    unbiased: bool = False
    random: bool = False
    #: the selection the compiled kernels of :mod:`convkit._kernels` may fuse with the update
    #: that follows it (``"top-k"``: keep the ``k_for(d)`` largest magnitudes of each row), or
    #: None.  Declared by the class; a subclass that overrides ``compress`` without declaring
    #: it again has none (its compression is no longer the one the kernels compute).
    fused_selection: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "compress" in cls.__dict__ and "fused_selection" not in cls.__dict__:
            cls.fused_selection = None

    @abstractmethod
    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        """Compressed copy of ``x`` (same shape and dtype), row-wise along the last axis."""

    def __call__(self, x: Any, stream: RandomStream | None = None) -> Any:
        return self.compress(x, stream)

    def delta(self, d: int) -> float | None:
        """Contraction constant for rows of length ``d`` (``None`` if not a contraction)."""
        w = self.omega(d)
        return None if w is None or w >= 1.0 else 1.0 - w

    def omega(self, d: int) -> float | None:
        """Unbiased variance factor for rows of length ``d`` (``None`` if biased)."""
        return None

    @abstractmethod
    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        """Bits to send one compressed row of length ``d``."""

    def __repr__(self) -> str:
        return self.name


# --------------------------------------------------------------------------- identity


@dataclass(frozen=True, repr=False)
class Identity(Compressor):
    """No compression: ``C(x) = x`` (a copy). ``delta = 1``, ``omega = 0``.

    Bits: ``d * float_bits``.
    """

    name = "identity"
    unbiased = True

    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        xp, _ = _check_x(x)
        return xp.asarray(x, copy=True)

    def delta(self, d: int) -> float:
        _check_d(d)
        return 1.0

    def omega(self, d: int) -> float:
        _check_d(d)
        return 0.0

    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        return _check_d(d) * check_int("float_bits", float_bits, low=1)


# --------------------------------------------------------------------------- sparsifiers


def _keep_largest(xp: Any, vals: Any, score: Any, k: int, skip_zeros: bool, thr: Any = None) -> Any:
    """``vals`` where ``score`` is among the ``k`` largest of its row, 0 elsewhere.

    Fast path: the ``k``-th largest score of each row (``thr``, by
    :func:`convkit.backend.kth_largest`) as a threshold, then one mask and one ``where`` (the
    product is memory-bound: few full-size temporaries). Rows where ties at the threshold
    would keep more than ``k`` entries are redone exactly with
    :func:`convkit.backend.topk_mask` (the lowest indices among the tied entries; NumPy: only
    those rows).
    With ``skip_zeros`` (top-k, score ``|x|``) zero scores are never kept: when fewer than
    ``k`` entries are non-zero the result is the same, and no tie fallback is needed.
    """
    if thr is None:
        thr = kth_largest(xp, score, k)
    mask = score >= thr
    if skip_zeros and bool(xp.any(thr <= 0)):
        mask = mask & (score > 0)
    zero = xp.zeros((), dtype=vals.dtype)
    ties = xp.count_nonzero(mask, axis=-1) > k
    if bool(xp.any(ties)):
        if isinstance(vals, np.ndarray):  # redo the tied rows only
            out = np.where(mask, vals, zero)
            out[ties] = np.where(topk_mask(xp, score[ties], k), vals[ties], zero)
            return out
        mask = xp.where(ties[..., None], topk_mask(xp, score, k), mask)
    return xp.where(mask, vals, zero)


class _KSparse(Compressor):
    """Shared ``k`` handling: an absolute ``k`` or a ``fraction`` of ``d``."""

    k: int | None
    fraction: float | None

    def _init_k(self, k: int | None, fraction: float | None) -> None:
        if (k is None) == (fraction is None):
            raise ValueError("give exactly one of k (an integer >= 1) or fraction (in (0, 1])")
        if k is not None:
            object.__setattr__(self, "k", check_int("k", k, low=1))
        else:
            f = check_real("fraction", fraction, low=0.0, high=1.0, low_inclusive=False)
            object.__setattr__(self, "fraction", f)

    def k_for(self, d: int) -> int:
        """Number of kept coordinates for rows of length ``d``: ``k``, or
        ``max(1, round(fraction * d))``; raises if ``k > d``."""
        d = _check_d(d)
        if self.k is not None:
            if self.k > d:
                raise ValueError(f"k = {self.k} exceeds the dimension d = {d} (need 1 <= k <= d)")
            return self.k
        return min(d, max(1, round(self.fraction * d)))

    def _label(self, base: str) -> str:
        return f"{base}(k={self.k})" if self.k is not None else f"{base}(fraction={self.fraction:g})"


@dataclass(frozen=True, repr=False)
class TopK(_KSparse):
    """Keep the ``k`` largest ``|x_j|`` of each row, zero the rest (ties: lowest indices).

    Deterministic contraction: ``||C(x) - x||^2 <= (1 - k/d) ||x||^2``, ``delta = k/d``
    (Stich et al. 2018). Bits: ``k (float_bits + ceil(log2 d))`` (values and indices).
    """

    k: int | None = None
    fraction: float | None = None
    fused_selection: ClassVar[str | None] = "top-k"

    def __post_init__(self) -> None:
        self._init_k(self.k, self.fraction)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._label("top-k")

    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        xp, d = _check_x(x)
        k = self.k_for(d)
        if k == d:
            return xp.asarray(x, copy=True)
        fused = topk_compress(x, k)  # compiled pass (NumPy float arrays, numba installed)
        if fused is not None:
            return fused
        score = xp.abs(x)
        thr = kth_largest(xp, score, k, inplace=True)
        if isinstance(score, np.ndarray):
            np.abs(x, out=score)  # restore the scores in the partitioned buffer
        return _keep_largest(xp, x, score, k, skip_zeros=True, thr=thr)

    def delta(self, d: int) -> float:
        return self.k_for(d) / d

    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        fb = check_int("float_bits", float_bits, low=1)
        return self.k_for(d) * (fb + _index_bits(d))


@dataclass(frozen=True, repr=False)
class RandK(_KSparse):
    """Keep ``k`` coordinates of each row chosen uniformly without replacement.

    One uniform key per coordinate; the ``k`` largest keys of each row (a ``partition``
    threshold, ties redone exactly) give a uniform ``k``-subset per row, independent across
    rows.

    * ``scaled=False``: ``E||C(x) - x||^2 = (1 - k/d) ||x||^2`` exactly; ``delta = k/d``.
    * ``scaled=True``: kept values multiplied by ``d/k``; unbiased with
      ``E||C(x) - x||^2 = (d/k - 1) ||x||^2``, ``omega = d/k - 1``.

    Bits: ``k (float_bits + ceil(log2 d))`` (values and indices; with a random seed shared by
    sender and receivers the indices could be regenerated and cost nothing; not assumed).
    """

    k: int | None = None
    fraction: float | None = None
    scaled: bool = False

    def __post_init__(self) -> None:
        self._init_k(self.k, self.fraction)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._label("rand-k-scaled" if self.scaled else "rand-k")

    @property
    def unbiased(self) -> bool:  # type: ignore[override]
        return self.scaled

    random = True

    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        xp, d = _check_x(x)
        k = self.k_for(d)
        stream = _need_stream(self.name, stream)
        if k == d:
            return xp.asarray(x, copy=True)
        keys = stream.uniform(tuple(x.shape))
        vals = x * xp.asarray(d / k, dtype=x.dtype) if self.scaled else x
        return _keep_largest(xp, vals, keys, k, skip_zeros=False)

    def delta(self, d: int) -> float | None:
        if not self.scaled:
            return self.k_for(d) / d
        return super().delta(d)

    def omega(self, d: int) -> float | None:
        return d / self.k_for(d) - 1.0 if self.scaled else None

    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        fb = check_int("float_bits", float_bits, low=1)
        return self.k_for(d) * (fb + _index_bits(d))


# --------------------------------------------------------------------------- quantizers


@dataclass(frozen=True, repr=False)
class QSGD(Compressor):
    """QSGD with ``s`` levels (Alistarh et al. 2017).

    ``C(x)_j = ||x||_2 sign(x_j) xi_j / s`` with ``xi_j`` the stochastic rounding of
    ``u_j = s |x_j| / ||x||_2`` to ``floor(u_j)`` or ``floor(u_j) + 1`` (probability
    ``u_j - floor(u_j)``). Unbiased, ``E||C(x) - x||^2 = (||x||^2 / s^2) sum_j p_j (1 - p_j)
    <= omega ||x||^2`` with ``omega = min(d / s^2, sqrt(d) / s)`` (Lemma 3.1); exact
    variance: :meth:`exact_variance`.

    ``rescaled=True`` returns ``C(x) / (1 + omega)``: biased, a contraction with
    ``delta = 1 / (1 + omega)`` (Koloskova et al. 2019): with ``tau = 1 + omega``,
    ``E||C/tau - x||^2 = E||C||^2/tau^2 - ||x||^2 (2/tau - 1) <= (1 - 1/tau) ||x||^2``.

    Bits: ``float_bits`` (the norm) ``+ d ceil(log2(2 s + 1))`` (sign and level of each
    coordinate as one symbol of ``2s + 1``; no Elias coding).
    """

    s: int = 1
    rescaled: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "s", check_int("s", self.s, low=1))

    random = True

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"qsgd{'-rescaled' if self.rescaled else ''}(s={self.s})"

    @property
    def unbiased(self) -> bool:  # type: ignore[override]
        return not self.rescaled

    def unbiased_omega(self, d: int) -> float:
        """``min(d / s^2, sqrt(d) / s)`` of the unbiased operator."""
        d = _check_d(d)
        return min(d / self.s**2, math.sqrt(d) / self.s)

    def _levels(self, x: Any, xp: Any) -> tuple[Any, Any, Any]:
        norm = xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))
        u = _safe_div(xp, self.s * xp.abs(x), norm)
        u = _clip(xp, u, 0.0, float(self.s))
        low = xp.floor(u)
        return norm, low, u - low

    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        xp, d = _check_x(x)
        stream = _need_stream(self.name, stream)
        norm, low, p = self._levels(x, xp)
        up = stream.uniform(tuple(x.shape)) < p
        xi = low + xp.astype(up, x.dtype)
        scale = norm / self.s
        if self.rescaled:
            scale = scale / (1.0 + self.unbiased_omega(d))
        out = xp.sign(x) * xi * scale
        return xp.astype(out, x.dtype)

    def exact_variance(self, x: Any) -> Any:
        """``E||C(x) - x||^2`` of the *unbiased* operator, per row (shape ``x.shape[:-1]``)."""
        xp, _ = _check_x(x)
        norm, _, p = self._levels(x, xp)
        return norm[..., 0] ** 2 / self.s**2 * xp.sum(p * (1.0 - p), axis=-1)

    def omega(self, d: int) -> float | None:
        return None if self.rescaled else self.unbiased_omega(d)

    def delta(self, d: int) -> float | None:
        if self.rescaled:
            return 1.0 / (1.0 + self.unbiased_omega(d))
        return super().delta(d)

    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        fb = check_int("float_bits", float_bits, low=1)
        return fb + _check_d(d) * math.ceil(math.log2(2 * self.s + 1))


@dataclass(frozen=True, repr=False)
class ScaledSign(Compressor):
    """Scaled sign: ``C(x) = (||x||_1 / d) sign(x)`` with ``sign(0) := +1`` (one bit per
    coordinate) (Karimireddy et al. 2019).

    Exactly ``||C(x) - x||^2 = ||x||^2 - ||x||_1^2 / d`` **[derived]** (the cross term is
    ``-2 (||x||_1/d) ||x||_1`` and ``||C(x)||^2 = ||x||_1^2 / d`` since every coordinate of
    ``sign`` is +-1); deterministic contraction with ``delta = 1/d`` (as
    ``||x||_1^2 >= ||x||^2``). Bits: ``d + float_bits`` (signs and the scale).
    """

    name = "scaled-sign"

    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        xp, d = _check_x(x)
        scale = xp.sum(xp.abs(x), axis=-1, keepdims=True) / d
        signs = xp.where(x >= 0, xp.ones_like(x), -xp.ones_like(x))
        return xp.astype(scale * signs, x.dtype)

    def delta(self, d: int) -> float:
        return 1.0 / _check_d(d)

    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        return _check_d(d) + check_int("float_bits", float_bits, low=1)


@dataclass(frozen=True, repr=False)
class StochasticRounding(Compressor):
    """``b``-bit stochastic rounding of each row on the grid ``lo + m Delta``,
    ``m = 0..2^b - 1``, ``lo = min_j x_j``, ``Delta = (max_j x_j - lo) / (2^b - 1)``.

    Each coordinate rounds to one of its two neighbouring grid points with probabilities
    making it unbiased. **[derived]** ``E||C(x) - x||^2 = Delta^2 sum_j p_j (1 - p_j)
    <= (d - 2) Delta^2 / 4`` (the row's min and max lie on the grid; the table's
    ``d Delta^2 / 4`` is looser), and since ``(max - min)^2 <= 2 ||x||^2``,
    ``omega = max(d - 2, 0) / (2 (2^b - 1)^2)``. The row's min and max are sent exactly (a
    constant row too).

    Bits: ``2 float_bits + b d`` (min and max, then ``b`` bits per coordinate).
    """

    bits: int = 8

    def __post_init__(self) -> None:
        object.__setattr__(self, "bits", check_int("bits", self.bits, low=1, high=52))

    random = True
    unbiased = True

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"stochastic-rounding(bits={self.bits})"

    def _grid(self, x: Any, xp: Any) -> tuple[Any, Any, Any, Any]:
        levels = float(2**self.bits - 1)
        lo = xp.min(x, axis=-1, keepdims=True)
        hi = xp.max(x, axis=-1, keepdims=True)
        step = (hi - lo) / levels
        u = _clip(xp, _safe_div(xp, x - lo, step), 0.0, levels)
        u = xp.where(x == hi, levels, u)  # the row's max lies on the grid exactly
        m = xp.floor(u)
        return lo, hi, step, m, u - m

    def compress(self, x: Any, stream: RandomStream | None = None) -> Any:
        xp, _ = _check_x(x)
        stream = _need_stream(self.name, stream)
        lo, hi, step, m, p = self._grid(x, xp)
        up = stream.uniform(tuple(x.shape)) < p
        q = m + xp.astype(up, x.dtype)
        out = xp.where(q >= float(2**self.bits - 1), hi, lo + q * step)  # top point is max
        return xp.astype(out, x.dtype)

    def step(self, x: Any) -> Any:
        """Grid step ``Delta`` of each row (shape ``x.shape[:-1]``)."""
        xp, _ = _check_x(x)
        return (xp.max(x, axis=-1) - xp.min(x, axis=-1)) / float(2**self.bits - 1)

    def exact_variance(self, x: Any) -> Any:
        """``E||C(x) - x||^2`` per row (shape ``x.shape[:-1]``)."""
        xp, _ = _check_x(x)
        _, _, step, _, p = self._grid(x, xp)
        return step[..., 0] ** 2 * xp.sum(p * (1.0 - p), axis=-1)

    def omega(self, d: int) -> float:
        d = _check_d(d)
        return max(d - 2, 0) / (2.0 * (2**self.bits - 1) ** 2)

    def bits_per_message(self, d: int, float_bits: int = 32) -> int:
        fb = check_int("float_bits", float_bits, low=1)
        return 2 * fb + self.bits * _check_d(d)


# --------------------------------------------------------------------------- factory

#: The one table of compressor names: one name per class (the name its ``name`` property
#: starts with).  The sweep's ``{kind = ...}`` tables write these names with ``_`` for ``-``
#: (``top_k``); both spellings are read everywhere.
COMPRESSORS: dict[str, type[Compressor]] = {
    "identity": Identity,
    "top-k": TopK,
    "rand-k": RandK,
    "qsgd": QSGD,
    "scaled-sign": ScaledSign,
    "stochastic-rounding": StochasticRounding,
}

#: The other names users may write, resolved through this table only: alias -> (name in
#: :data:`COMPRESSORS`, the parameters the alias fixes).  ``rand-k-scaled`` is ``rand-k`` with
#: ``scaled = True`` (the unbiased d/k scaling), ``qsgd-rescaled`` is ``qsgd`` with
#: ``rescaled = True`` (the contractive form).
COMPRESSOR_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "none": ("identity", {}),
    "topk": ("top-k", {}),
    "randk": ("rand-k", {}),
    "rand-k-scaled": ("rand-k", {"scaled": True}),
    "randk-scaled": ("rand-k", {"scaled": True}),
    "scaled-rand-k": ("rand-k", {"scaled": True}),
    "qsgd-rescaled": ("qsgd", {"rescaled": True}),
    "qsgd-contractive": ("qsgd", {"rescaled": True}),
    "sign": ("scaled-sign", {}),
    "scaledsign": ("scaled-sign", {}),
    "sr": ("stochastic-rounding", {}),
    "bbit": ("stochastic-rounding", {}),
    "b-bit": ("stochastic-rounding", {}),
}

#: the parameter the number of a short spec ``name:x`` sets, per compressor
_SPEC_ARGUMENT = {"top-k": "k", "rand-k": "k", "qsgd": "s", "stochastic-rounding": "bits"}


def resolve_compressor_kind(name: Any) -> tuple[str, dict[str, Any]] | None:
    """``(name in COMPRESSORS, parameters the name fixes)`` of a compressor name or alias
    (case, spaces and ``_`` for ``-`` ignored), or None for an unknown name."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().replace("_", "-")
    if key in COMPRESSORS:
        return key, {}
    if key in COMPRESSOR_ALIASES:
        kind, fixed = COMPRESSOR_ALIASES[key]
        return kind, dict(fixed)
    return None


def _k_arg(text: str) -> dict[str, Any]:
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(
                f"k must be an integer or a fraction in (0, 1], got {text!r}"
            ) from None
        return {"fraction": value}
    return {"k": value}


def _compressor_spec_error(spec: Any, detail: str) -> ValueError:
    """The one message of a malformed compressor spec, whichever front end met it."""
    return ValueError(
        f"compressor {spec!r} is invalid ({detail}); known: {sorted(COMPRESSORS)} (aliases "
        f"{sorted(COMPRESSOR_ALIASES)}), with an argument 'top-k:K', 'top-k:F', 'rand-k:K', "
        "'rand-k-scaled:K', 'qsgd:S', 'qsgd-rescaled:S', 'stochastic-rounding:B' (K, S, B "
        "integers, F a fraction in (0, 1])"
    )


def parse_compressor_spec(spec: str) -> dict[str, Any]:
    """The table ``{"kind": name, parameter: value, ...}`` of a short string spec
    (``"rand-k-scaled:5"`` -> ``{"kind": "rand-k", "scaled": True, "k": 5}``): the one parser
    of compressor specs, used by :func:`get_compressor` and by the sweep settings.

    The name resolves through :data:`COMPRESSORS` and :data:`COMPRESSOR_ALIASES`; the number
    after ``:`` is ``k`` (an integer) or ``fraction`` (a float) for top-k and rand-k, ``s``
    for QSGD and ``bits`` for stochastic rounding.  A malformed spec raises ``ValueError``
    naming the value and the known names; values out of range are left to the compressor's
    own checks.
    """
    if not isinstance(spec, str):
        raise TypeError(f"compressor spec must be a string or a Compressor, got {spec!r}")
    name, sep, arg = spec.strip().partition(":")
    resolved = resolve_compressor_kind(name)
    if resolved is None:
        raise _compressor_spec_error(spec, f"unknown compressor {name.strip().lower()!r}")
    kind, fixed = resolved
    table: dict[str, Any] = {"kind": kind, **fixed}
    arg = arg.strip()
    if not sep:
        return table
    if kind not in _SPEC_ARGUMENT:
        raise _compressor_spec_error(spec, f"compressor {kind!r} takes no argument")
    if kind in ("top-k", "rand-k"):
        table.update(_k_arg(arg))
    else:
        value = _k_arg(arg)
        table[_SPEC_ARGUMENT[kind]] = value.get("k", arg)
    return table


def get_compressor(spec: str | Compressor, **kwargs: Any) -> Compressor:
    """Build a compressor from a name and keywords, or from a short string spec
    (:func:`parse_compressor_spec`).

    ``get_compressor("top-k", k=10)``, ``get_compressor("top-k:0.1")`` (fraction of d),
    ``"top-k:10"`` (absolute k), ``"rand-k:0.1"``, ``"rand-k-scaled:5"``, ``"qsgd:4"``
    (s = 4), ``"qsgd-rescaled:4"``, ``"scaled-sign"``, ``"stochastic-rounding:8"`` (bits),
    ``"identity"``; the aliases of :data:`COMPRESSOR_ALIASES` (``topk, randk, sign, sr,
    bbit, none``, ...). A :class:`Compressor` is returned unchanged.
    """
    if isinstance(spec, Compressor):
        return spec
    table = parse_compressor_spec(spec)
    kind = table.pop("kind")
    for key, value in kwargs.items():
        if key in table and table[key] != value:
            raise ValueError(
                f"compressor {spec!r} sets {key} = {table[key]!r}; got {key} = {value!r}"
            )
    return COMPRESSORS[kind](**{**table, **kwargs})
