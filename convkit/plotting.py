"""One look for every convkit figure: a colour per algorithm and schedule, theory styling,
legends outside the data, confidence bands.

Every analysis draws through these helpers so that an algorithm has the same colour in every
figure of the set (the figure standard of the project: one colour per algorithm everywhere,
theory drawn distinctly, no legend over data).

>>> color("CHOCO-SGD") == color("choco")
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Colour of each algorithm (decentralized family), keyed by a canonical lower-case name.
ALGORITHM_COLORS: dict[str, str] = {
    "sgd": "#444444",
    "dpsgd": "#1f77b4",
    "dcd": "#ff7f0e",
    "ecd": "#2ca02c",
    "choco": "#d62728",
    "deepsqueeze": "#9467bd",
    "efsgd": "#8c564b",
    # Local-SGD schedules (communication patterns), distinct from the algorithms above
    "mba": "#17becf",
    "osa": "#e377c2",
    "even": "#bcbd22",
    "local": "#bcbd22",
    "quadratic": "#fb9a29",
    "geometric": "#6a3d9a",
    "power": "#b2df8a",
    "drift_clock": "#b15928",
    "best": "#006d2c",
    "sqrt_pt": "#7f7f7f",
}

_ALIASES: dict[str, str] = {
    "d-psgd": "dpsgd",
    "dpsgd": "dpsgd",
    "dcd-psgd": "dcd",
    "dcdpsgd": "dcd",
    "ecd-psgd": "ecd",
    "ecdpsgd": "ecd",
    "choco-sgd": "choco",
    "chocosgd": "choco",
    "deep-squeeze": "deepsqueeze",
    "ef-sgd": "efsgd",
    "ef": "efsgd",
    "error-feedback": "efsgd",
    "minibatch": "mba",
    "mini-batch": "mba",
    "every": "mba",
    "one-shot": "osa",
    "oneshot": "osa",
    "final": "osa",
    "rounds": "even",
    "sqrt-pt": "sqrt_pt",
    "drift-clock": "drift_clock",
}

#: Style of a theoretical curve or bound: black, dashed, drawn above the data.
THEORY_STYLE: dict[str, Any] = {"color": "black", "linestyle": "--", "linewidth": 1.3, "zorder": 5}

#: Style of a reference line (an asymptote, a threshold): grey, dotted.
REFERENCE_STYLE: dict[str, Any] = {"color": "0.45", "linestyle": ":", "linewidth": 1.2}

#: Smallest CIELAB distance (CIE76 Delta E) between two line colours of one figure: about 2.3
#: is the just-noticeable difference of two patches side by side; thin curves apart from each
#: other need several times more (four shades of one colour 10 apart read as one colour).
MIN_LINE_DELTA_E = 15.0

_FALLBACK = ["#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#dbdb8d"]


def canonical(name: str) -> str:
    """The palette key of an algorithm or schedule label (``"CHOCO-SGD"`` -> ``"choco"``)."""
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    key = key.split("(")[0].strip("-")
    if key in ALGORITHM_COLORS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    compact = key.replace("-", "")
    if compact in ALGORITHM_COLORS:
        return compact
    return _ALIASES.get(compact, key)


def color(name: str) -> str:
    """The colour of algorithm or schedule ``name`` (the same in every figure).

    Unknown names get a stable grey-family colour from their text, never a colour already
    used by a known algorithm.
    """
    key = canonical(name)
    if key in ALGORITHM_COLORS:
        return ALGORITHM_COLORS[key]
    return _FALLBACK[sum(map(ord, key)) % len(_FALLBACK)]


def cielab(c: Any) -> np.ndarray:
    """CIELAB coordinates ``(L*, a*, b*)`` of a Matplotlib colour (sRGB, D65 white point).

    The sRGB transfer function is inverted, the linear RGB mapped to XYZ by the sRGB matrix
    and XYZ to Lab by the CIE 1976 formulas (IEC 61966-2-1; CIE 15:2004, section 8.2.1).
    """
    import matplotlib.colors as mcolors

    rgb = np.asarray(mcolors.to_rgb(c), dtype=float)
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    to_xyz = np.array(
        [
            [0.4124564, 0.3575761, 0.1804375],
            [0.2126729, 0.7151522, 0.0721750],
            [0.0193339, 0.1191920, 0.9503041],
        ]
    )
    xyz = to_xyz @ linear / np.array([0.95047, 1.0, 1.08883])
    eps = (6 / 29) ** 3
    f = np.where(xyz > eps, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def color_distance(c1: Any, c2: Any) -> float:
    """Perceptual distance of two colours: the CIE76 ``Delta E``, Euclidean in CIELAB
    (:func:`cielab`); compare with :data:`MIN_LINE_DELTA_E`."""
    return float(np.linalg.norm(cielab(c1) - cielab(c2)))


def shades(name: str, m: int) -> list[tuple[float, float, float]]:
    """``m`` shades of the colour of algorithm or schedule ``name``, light to dark: settings
    of one algorithm (its number of rounds ``N``, say) keep the algorithm's hue and differ in
    lightness.

    The shades interpolate linearly in RGB from the colour mixed 35 % with white to the colour
    mixed 70 % with black; for every colour of the palette, any two of four shades lie at
    least :data:`MIN_LINE_DELTA_E` apart in CIELAB (the olive of ``"even"``: 20 apart).
    """
    import matplotlib.colors as mcolors

    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m (number of shades) must be an integer >= 1, got {m!r}")
    base = np.asarray(mcolors.to_rgb(color(name)))
    light, dark = base + 0.35 * (1.0 - base), 0.3 * base
    ts = np.linspace(0.0, 1.0, int(m)) if m > 1 else np.array([0.5])
    return [tuple(float(v) for v in light + (dark - light) * t) for t in ts]


def band(
    ax: Any,
    x: Sequence[float],
    mean: Sequence[float],
    se: Sequence[float],
    *,
    z: float = 1.96,
    label: str | None = None,
    **line: Any,
) -> Any:
    """Draw ``mean`` with a ``z``-standard-error band (95 % by default) on ``ax``.

    Returns the line.  The band uses the line's colour at alpha 0.2; values are clipped at
    a tiny positive number so that log axes stay valid.
    """
    x, m, s = (np.asarray(v, dtype=float) for v in (x, mean, se))
    (ln,) = ax.plot(x, m, label=label, **line)
    lo = np.maximum(m - z * s, np.finfo(float).tiny)
    ax.fill_between(x, lo, m + z * s, color=ln.get_color(), alpha=0.2, linewidth=0)
    return ln


def legend_outside(ax: Any, *, where: str = "right", **kw: Any) -> Any:
    """A legend placed outside the axes (``where`` = ``"right"`` or ``"below"``), so that it
    never covers data."""
    if where == "right":
        kw.setdefault("loc", "upper left")
        kw.setdefault("bbox_to_anchor", (1.02, 1.0))
    elif where == "below":
        kw.setdefault("loc", "upper center")
        kw.setdefault("bbox_to_anchor", (0.5, -0.15))
        kw.setdefault("ncol", 3)
    else:
        raise ValueError(f"where must be 'right' or 'below', got {where!r}")
    kw.setdefault("fontsize", "small")
    kw.setdefault("frameon", False)
    return ax.legend(**kw)


def plain(value: Any, digits: int = 4) -> Any:
    """A table value as a plain Python number rounded to ``digits`` significant digits
    (``np.float64(0.123456)`` -> ``0.1235``); non-numbers unchanged, ``None`` -> ``"-"``."""
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not np.isfinite(v) or v == 0.0:
            return v
        return float(f"{v:.{digits}g}")
    return value
