"""Mixing matrices: the spectrum of ``W_eta = (1 - eta) I + eta W`` and its spectral gap.

Results (derived here): ``w_eta.eigenvalues`` (``1 - eta (1 - lambda_i(W))``) and
``w_eta.gap_condition`` (the largest eta with gap ``eta (1 - lambda_2)``:
``2 / (2 - lambda_2 - lambda_n)``).

Derivations: :func:`derive_w_eta_spectrum` (characteristic polynomials of a generic symmetric
doubly stochastic W), :func:`derive_w_eta_gap_condition`.

Checks: numerical eigenvalues of the topologies' W_eta, and a bisection for the largest eta
with the stated gap.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from convkit.bounds.checking import check_row, tolerance_verdict
from convkit.bounds.core import TheoryResult, symbol
from convkit.bounds.moments import generic_doubly_stochastic
from convkit.bounds.provenance import derived
from convkit.bounds.registry import get, register_check, result
from convkit.verdicts import verdict_of

__all__ = ["derive_w_eta_gap_condition", "derive_w_eta_spectrum"]


# ============================================================================ derivations
def derive_w_eta_spectrum(n: int = 3) -> dict[str, Any]:
    """Eigenvalues of ``W_eta = (1 - eta) I + eta W`` are ``1 - eta (1 - lambda_i(W))``.

    Shown via characteristic polynomials for a generic symmetric doubly stochastic W:
    ``det(mu I - W_eta) = eta^n det(((mu - 1 + eta)/eta) I - W)`` identically in mu. Returns
    ``{"eigenvalue_map": 1 - eta (1 - lambda_i), "verified": bool, "lambda": <lambda_i>,
    "eta": <eta>}``.
    """
    W, _ = generic_doubly_stochastic(n)
    eta, mu, lam = symbol("eta"), sp.Symbol("mu"), sp.Symbol("lambda_i", real=True)
    W_eta = (1 - eta) * sp.eye(n) + eta * W
    lhs = (mu * sp.eye(n) - W_eta).det()
    rhs = eta**n * (((mu - 1 + eta) / eta) * sp.eye(n) - W).det()
    verified = sp.expand(lhs - rhs) == 0
    # Solve mu from the substitution mu = 1 - eta + eta * lambda (root of the char. poly map)
    mapping = sp.solve(sp.Eq((mu - 1 + eta) / eta, lam), mu)[0]
    return {"eigenvalue_map": sp.expand(mapping), "verified": verified, "lambda": lam, "eta": eta}


def derive_w_eta_gap_condition() -> dict[str, sp.Expr]:
    """Spectral gap of ``W_eta``: ``rho(eta) = max(|1 - eta(1 - l_2)|, |1 - eta(1 - l_n)|)``;
    the largest eta for which the second eigenvalue dominates solves
    ``eta (1 - l_n) - 1 = 1 - eta (1 - l_2)``: ``eta = 2 / (2 - l_2 - l_n)``; below it the
    gap is ``eta (1 - l_2)``. Returns ``{"eta_max": ..., "gap": ...}``."""
    eta = symbol("eta")
    l2, ln = sp.Symbol("lambda_2", real=True), sp.Symbol("lambda_n", real=True)
    sol = sp.solve(sp.Eq(eta * (1 - ln) - 1, 1 - eta * (1 - l2)), eta)
    if len(sol) != 1:
        raise RuntimeError(f"unexpected solutions {sol}")
    return {
        "eta_max": sp.simplify(sol[0]),
        "gap": eta * (1 - l2),
        "lambda_2": l2,
        "lambda_n": ln,
        "eta": eta,
    }


# ============================================================================ results
@result("w_eta.eigenvalues")
def _w_eta() -> TheoryResult:
    res = derive_w_eta_spectrum()
    if not res["verified"]:
        raise RuntimeError("W_eta spectrum derivation failed")
    return TheoryResult(
        name="w_eta.eigenvalues",
        expression=res["eigenvalue_map"],
        kind="identity",
        quantity="eigenvalue of W_eta = (1 - eta) I + eta W for the eigenvalue lambda of W",
        provenance=derived(derive_w_eta_spectrum),
    )


@result("w_eta.gap_condition")
def _w_eta_gap() -> TheoryResult:
    res = derive_w_eta_gap_condition()
    return TheoryResult(
        name="w_eta.gap_condition",
        expression=res["eta_max"],
        kind="threshold",
        quantity="largest eta with spectral gap of W_eta equal to eta (1 - lambda_2)",
        provenance=derived(derive_w_eta_gap_condition),
    )


# ============================================================================ checks
@register_check("w_eta.eigenvalues", ["w_eta.eigenvalues"])
def check_w_eta_eigenvalues(quick: bool) -> list[dict[str, Any]]:
    """Eigenvalues of ``W_eta = (1 - eta) I + eta W`` computed numerically (eigvalsh of the
    topology's W_eta) equal ``1 - eta (1 - lambda_i(W))`` (derived), rings of 8 and 9 nodes and
    a 3 x 4 torus, eta in {0.1, 0.5, 1}; max absolute difference <= 1e-12."""
    from convkit.topology import ring, torus

    res = get("w_eta.eigenvalues")
    rows = []
    for topo in (ring(8), ring(9), torus(3, 4)):
        lam = np.sort(np.linalg.eigvalsh(topo.W_at(0)))
        worst = 0.0
        for eta in (0.1, 0.5, 1.0):
            num = np.sort(np.linalg.eigvalsh(topo.W_eta(eta).W_at(0)))
            th = np.sort(np.asarray(res.evaluate(eta=eta, lambda_i=lam), dtype=float))
            worst = max(worst, float(np.max(np.abs(num - th))))
        rows.append(
            check_row(
                "w_eta.eigenvalues",
                f"{topo.name}, eta in {{0.1, 0.5, 1}}: max |eig(W_eta) - (1 - eta(1 - lambda))|",
                worst,
                0.0,
                *tolerance_verdict(
                    worst <= 1e-12,
                    "the largest difference of the numerical eigenvalues to the derived ones",
                    worst,
                    "<= 1e-12",
                ),
                "<= 1e-12",
            )
        )
    return rows


@register_check("w_eta.gap_condition", ["w_eta.gap_condition"])
def check_w_eta_gap(quick: bool) -> list[dict[str, Any]]:
    """Largest eta for which the spectral gap of W_eta is eta (1 - lambda_2): located
    numerically by bisection on the predicate ``1 - max_{i>=2} |eig_i(W_eta)| == eta (1 -
    lambda_2)`` (eigenvalues by eigvalsh) for a ring of 8 with weights 1/2 on the neighbours
    (lambda_n = -1), against ``2 / (2 - lambda_2 - lambda_n)``; relative difference <= 1e-8.
    Also the uniform ring of 8 (W_ij = 1/3), where the derived eta_max > 1, so the gap is
    eta (1 - lambda_2) on all of (0, 1]."""
    from convkit.topology import from_matrix, ring

    res = get("w_eta.gap_condition")
    n = 8
    W = 0.5 * (np.roll(np.eye(n), 1, axis=1) + np.roll(np.eye(n), -1, axis=1))
    rows = []
    for topo in (from_matrix(W, name="ring(8, W_ij = 1/2)"), ring(n)):
        lam = np.sort(np.linalg.eigvalsh(topo.W_at(0)))[::-1]
        l2, ln = float(lam[1]), float(lam[-1])
        W0 = topo.W_at(0)

        def pred(eta: float, Wm: np.ndarray = W0, l2: float = l2) -> bool:
            ev = np.sort(np.linalg.eigvalsh((1 - eta) * np.eye(n) + eta * Wm))[::-1]
            gap = 1.0 - float(np.max(np.abs(ev[1:])))
            return abs(gap - eta * (1 - l2)) <= 1e-12

        theory = float(res.evaluate(lambda_2=l2, lambda_n=ln))
        if pred(1.0):
            meas: Any = "> 1 (gap = eta(1 - lambda_2) on all of (0, 1])"
            ok = theory >= 1.0 and all(pred(e) for e in np.linspace(0.01, 1.0, 100))
            verdict, reason = verdict_of(
                ok,
                f"the derived eta_max = {theory:.6g} >= 1 and the gap is eta (1 - lambda_2) on "
                "a grid of (0, 1]",
                f"the derived eta_max = {theory:.6g}, but the gap is eta (1 - lambda_2) on all "
                "of (0, 1] only if eta_max >= 1 and the predicate holds on the grid",
            )
            margin = "derived eta_max >= 1 and the predicate holds on a grid of (0, 1]"
        else:
            lo, hi = 1e-3, 1.0
            if not pred(lo):
                raise RuntimeError("gap predicate fails at eta = 1e-3")
            while hi - lo > 1e-13:
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if pred(mid) else (lo, mid)
            meas = lo
            verdict, reason = tolerance_verdict(
                abs(lo / theory - 1) <= 1e-8,
                "the relative difference of the located eta to the derived eta_max",
                abs(lo / theory - 1),
                "<= 1e-8",
            )
            margin = "relative difference <= 1e-8"
        rows.append(
            check_row(
                "w_eta.gap_condition",
                f"{topo.name}: lambda_2 = {l2:.4f}, lambda_n = {ln:.4f}; largest eta with "
                "gap(W_eta) = eta (1 - lambda_2)",
                meas,
                theory,
                verdict,
                reason,
                margin,
            )
        )
    return rows
