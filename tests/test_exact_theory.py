"""The exact engine against convkit.bounds' SymPy derivations and closed forms.

The recursion coefficients of :mod:`convkit.exact.local` are checked symbolically against
:func:`convkit.bounds.moments.derive_second_moment_recursion` (Isserlis / exact Rademacher
moments, generic d = 3); the stability limit against the derived closed forms.
"""

from __future__ import annotations

import numpy as np
import pytest

sp = pytest.importorskip("sympy")

from convkit.bounds import moments, sgd_stability  # noqa: E402
from convkit.exact import second_moment_matrix, stability_limit  # noqa: E402
from convkit.exact.local import design_coefficients  # noqa: E402


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
@pytest.mark.parametrize("b", [1, 2, 3, 5])
def test_diagonal_recursion_matches_sympy_derivation(design, b):
    """For diagonal H = diag(h1, h2, h3) and a *generic symmetric* M (off-diagonal entries
    included), the diagonal of the derived M' equals the engine's formula
    s_j (1 - 2 g h_j + c_sq g^2 h_j^2) + (g^2 h_j / b)(c_tr sum_l h_l s_l + sigma^2), exactly;
    in particular it does not depend on the off-diagonal entries of M."""
    rec = moments.derive_second_moment_recursion(design)
    d = 3
    hs = [sp.Symbol(f"h{i}", positive=True) for i in range(d)]
    M = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"m{min(i, j)}{max(i, j)}", real=True))
    H = sp.diag(*hs)
    sub = {rec.b: b}
    Mp = rec.apply(H, M).subs(sub)
    c_sq, c_tr = (sp.nsimplify(c) for c in design_coefficients(design, b))
    g, s = rec.gamma, rec.sigma
    tr = sum(hs[i] * M[i, i] for i in range(d))
    for j in range(d):
        # the noise enters through the "H" basis term (coefficient g^2 sigma^2 / b)
        ours = M[j, j] * (1 - 2 * g * hs[j] + c_sq * g**2 * hs[j] ** 2) + g**2 * hs[j] / b * (
            c_tr * tr
        )
        noise = rec.coefficients.get("H", 0)
        ours_full = ours + sp.sympify(noise).subs(sub) * hs[j]
        assert sp.simplify(sp.expand(Mp[j, j] - ours_full)) == 0
        assert sp.simplify(sp.expand(noise.subs(sub) - g**2 * s**2 / b)) == 0


def test_additive_design_coefficients():
    """Additive noise: M' = (I - gH) M (I - gH) + g^2 sigma^2 H / b, diagonal (1, 0)."""
    assert design_coefficients("additive", 4) == (1.0, 0.0)


@pytest.mark.parametrize("b", [1, 2, 4])
def test_one_dimensional_limit(b):
    """1-D Gaussian: gamma* = 2 b / ((b + 2) h) (b = 1: 2 / (3 h)); matches the derivation."""
    h = 1.7
    closed = sgd_stability.derive_stability_limit_1d("gaussian")
    sym = {s.name: s for s in closed.free_symbols}
    expect = float(closed.subs({sym["b"]: b, sym["h"]: h}))
    assert expect == pytest.approx(2 * b / ((b + 2) * h), rel=1e-14)
    assert stability_limit([h], batch=b) == pytest.approx(expect, rel=1e-10)


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
@pytest.mark.parametrize(("d", "b"), [(2, 1), (5, 1), (5, 4), (20, 2)])
def test_isotropic_limit(design, d, b):
    """H = h I_d: Gaussian 2 b / ((b + 1 + d) h), Rademacher 2 b / ((b + d - 1) h) (derived
    here from A = diag(1 - 2gh + c_sq g^2 h^2) + (g^2/b) h^2 1 1^T, whose top eigenvalue is
    1 - 2gh + (c_sq + d/b) g^2 h^2), equal to convkit.bounds' SymPy result."""
    h = 0.8
    c_sq, _ = design_coefficients(design, b)
    mine = 2.0 / ((c_sq + d / b) * h)
    closed = sgd_stability.derive_stability_limit_isotropic(design)
    sym = {s.name: s for s in closed.free_symbols}
    theirs = float(closed.subs({sym["b"]: b, sym["h"]: h, sym["d"]: d}))
    assert mine == pytest.approx(theirs, rel=1e-14)
    assert stability_limit(np.full(d, h), batch=b, design=design) == pytest.approx(mine, rel=1e-10)


@pytest.mark.parametrize("design", ["gaussian", "rademacher"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_general_spectrum_limit_matches_bounds(design, seed):
    """Random spectra: bisection on the spectral radius equals the derived secular equation
    (convkit.bounds.sgd_stability.sgd_stability_limit) to 1e-9."""
    rng = np.random.default_rng(seed)
    h = rng.uniform(0.05, 2.0, size=int(rng.integers(2, 12)))
    b = int(rng.integers(1, 5))
    ours = stability_limit(h, batch=b, design=design)
    assert ours == pytest.approx(sgd_stability.sgd_stability_limit(h, b=b, design=design), rel=1e-9)
    # and the map is the derivation's stability matrix
    A_bounds = sgd_stability.stability_matrix(h, b, 0.7 * ours, design=design)
    np.testing.assert_allclose(
        second_moment_matrix(h, 0.7 * ours, b, design), A_bounds, rtol=1e-12, atol=1e-15
    )


def test_mba_limit_is_batch_pb_and_additive_is_two_over_L():
    """MBA (average every step) with P workers and batch b has the limit of batch P b; the
    additive model is stable iff gamma < 2 / h_max; Local-SGD every H lies in between."""
    h = np.array([1.0, 0.5, 0.1])
    mba = stability_limit(h, batch=2, workers=4, every=1)
    assert mba == pytest.approx(stability_limit(h, batch=8), rel=1e-10)
    assert stability_limit(h, design="additive") == pytest.approx(2.0, rel=1e-10)
    one = stability_limit(h, batch=2)
    local = stability_limit(h, batch=2, workers=4, every=10)
    assert one < local < mba
