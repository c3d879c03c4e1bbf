r"""A model of the communication trade-off of Local-SGD in online logistic regression with
large steps ``gamma_k = C k^-alpha`` (derived here; a heuristic with stated assumptions).

Setting: ``P`` workers, ``n = T / P`` local steps each, the Polyak-Ruppert average of the worker
mean over steps ``1..n``, error ``E||theta_bar - theta*||^2`` in a fixed norm (the ``H*`` norm
of the analyses: constants change, exponents do not).

Mechanism (assumptions A1-A4)
-----------------------------
A1. Quasi-stationarity: the relaxation time ``1 / (mu gamma_k) ~ k^alpha / (mu C)`` of SGD is
    much shorter than ``k`` (true for ``alpha < 1``), so the iterate's law at step ``k`` is close
    to the stationary law of constant-step SGD with step ``gamma_k``.
A2. The stationary covariance of one worker is ``gamma_k Sigma_1`` (``Sigma_1`` fixed by the
    noise covariance at ``theta*`` and ``H``); averaging every step over ``P`` workers (MBA)
    divides the gradient noise covariance, hence this covariance, by ``P``.
A3. A non-quadratic loss turns the covariance into a bias: ``E[grad f(theta)] = H (E theta -
    theta*) + (1/2) f'''(theta*)[Cov] + ...``, so the stationary bias is
    ``b_k = -(1/2) H^-1 f'''[Cov_k] = gamma_k Delta`` for one worker (``Delta`` a fixed vector),
    ``gamma_k Delta / P`` under MBA.  Averaging the models of independent workers averages
    their *means*: it does not remove the bias (OSA keeps ``gamma_k Delta``).
A4. Leading order of the error: ``err = V / T + ||bias of theta_bar||^2`` with the
    Polyak-Juditsky variance ``V / T`` (the same for OSA and MBA at this order; with additive
    noise they are identical, see ``local_sgd.additive_noise_invariance``).

Ratio OSA / MBA
---------------
The bias of the Polyak-Ruppert average is ``(1/n) sum_k b_k = Delta (1/n) sum_k gamma_k
~ Delta C n^-alpha / (1 - alpha)``.  Hence
``err(OSA)/err(MBA) - 1 ~ (|Delta|^2 C^2 / ((1-alpha)^2 V)) (1 - 1/P^2) T n^(-2 alpha)`` and with
``n = T / P``: ``~ T^(1 - 2 alpha) P^(2 alpha)``, i.e. ``a_T = 1 - 2 alpha``, ``a_P = 2 alpha``.
For ``alpha -> 1`` the sum is ``C log n``: ``a_T -> -1``, ``a_P -> 2`` up to ``log^2 n``;
for ``alpha <= 1/2`` the ratio does not decay with ``T`` (``a_T >= 0``).

Fewest evenly spaced rounds N*(eps)
-----------------------------------
With ``N`` rounds every ``H = n / N`` steps, a round resets each worker's covariance to the MBA
level; within a gap shorter than the relaxation time it grows by about ``gamma_k^2 Sigma`` per
step, so the excess over MBA of a worker's mean covariance at step ``k`` is
``gamma_k Sigma_1 min(1, mu gamma_k H)`` (saturating at the one-worker level when the gap
exceeds the relaxation time), and the excess bias of the average is
``beta(H) = (|Delta| / n) sum_k gamma_k min(1, mu gamma_k H)``.  For ``1/2 < alpha < 1`` and
``mu C H >= 1`` the sum is dominated by the saturated early steps ``k <= k_H =
(mu C H)^(1/alpha)``: ``sum ~ c_alpha C (mu C H)^((1 - alpha)/alpha)``.  Setting
``beta(H)^2 = eps V / T`` and ``H = n / N``, ``n = T / P``, with ``q = 2 (1 - alpha) / alpha``:
``N*^q ~ T^(q - 1) P^(2 - q) / eps``, i.e.
``N* ~ T^((2 - 3 alpha) / (2 (1 - alpha))) P^((2 alpha - 1) / (1 - alpha)) eps^(-alpha / (2 (1 - alpha)))``.
For ``alpha < 1/2`` the late steps dominate (``sum ~ mu H C^2 n^(1 - 2 alpha)``):
``N* ~ T^((3 - 4 alpha) / 2) P^(2 alpha - 1) eps^(-1/2)``; both branches give ``T^(1/2) P^0``
at ``alpha = 1/2``.  Valid while err(OSA)/err(MBA) - 1 > eps (else N* = 1) and ``N* <= n``;
with small steps (``mu C H < 1`` for all gaps) the linear regime gives ``N* ~ T^(1/2)`` instead.
"""

from __future__ import annotations

from convkit.validation import check_real

__all__ = ["model_exponents"]


def model_exponents(alpha: float) -> dict[str, float]:
    """Exponents of the large-step model of this module (derived here, heuristic).

    Parameters
    ----------
    alpha : float
        Exponent of the steps ``gamma_k = C k^-alpha``, ``0 < alpha < 1``.

    Returns
    -------
    dict[str, float]
        ``"ratio_T"``, ``"ratio_P"``: ``err(OSA)/err(MBA) - 1 ~ T^ratio_T P^ratio_P``
        (``1 - 2 alpha``, ``2 alpha``); ``"nstar_T"``, ``"nstar_P"``: ``N*(eps) ~ T^nstar_T
        P^nstar_P`` (``(2 - 3 alpha) / (2 (1 - alpha))``, ``(2 alpha - 1) / (1 - alpha)`` for
        ``alpha >= 1/2``; ``(3 - 4 alpha) / 2``, ``2 alpha - 1`` below).
    """
    a = check_real("alpha", alpha, low=0, high=1, low_inclusive=False, high_inclusive=False)
    if a >= 0.5:
        nT, nP = (2 - 3 * a) / (2 * (1 - a)), (2 * a - 1) / (1 - a)
    else:
        nT, nP = (3 - 4 * a) / 2, 2 * a - 1
    out = {"ratio_T": 1 - 2 * a, "ratio_P": 2 * a, "nstar_T": nT, "nstar_P": nP}
    return {k: round(float(v), 12) for k, v in out.items()}
