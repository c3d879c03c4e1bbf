"""One meaning per symbol name: the table of every symbol the library's results use.

:data:`MEANINGS` maps each symbol name of the registered expressions, conditions and
variables to its one meaning; ``tests/test_symbol_meanings.py`` fails when a result uses a name
that is not in the table, or one name with two sets of assumptions. A name's meaning is the
same in every result (``T`` counts iterations everywhere; the Local-SGD results' total gradients
over all workers are ``T_all``; the eigengap of ``W`` is ``gap``, the contraction parameter of
a compressor ``omega``; the label noise of least squares is ``sigma``, the gradient noise of
the decentralized rates ``sigma_g``). Generic unknown constants (``c``, ``c_1``, ``c_2``,
``K``, ``C_2``, ``C_g``) are each a constant of the result they appear in.
"""

from __future__ import annotations

__all__ = ["MEANINGS"]

MEANINGS: dict[str, str] = {
    # horizons and counts
    "T": "iterations (steps) of the algorithm; each worker or node computes one stochastic "
    "gradient (batch b) per iteration",
    "T_all": "stochastic gradients over all P workers (P times the local steps; the T of "
    "Patel & Dieuleveut 2019)",
    "P": "workers (Local-SGD, mini-batch averaging)",
    "n": "nodes of a decentralized network",
    "d": "dimension of the parameter (or of a compressed vector)",
    "b": "mini-batch size per step",
    "k": "coordinates kept by a sparsifying compressor",
    "s": "quantization levels of QSGD",
    # steps and problem constants
    "gamma": "step size",
    "alpha": "exponent of the steps gamma_k = C k^-alpha",
    "h": "eigenvalue(s) of the covariance H of least squares (h[i] the spectrum)",
    "L": "smoothness constant (largest curvature)",
    "G": "bound on the root mean square stochastic gradient, E||g||^2 <= G^2",
    "sigma": "standard deviation of the label noise of least squares",
    "sigma_g": "standard deviation of a node's stochastic gradient",
    "zeta": "dissimilarity of the nodes' gradients (zeta^2 the outer variance)",
    "q": "contraction 1 - gamma h of one SGD step in one eigen-direction",
    "eta_0": "initial error in one eigen-direction",
    "epsilon": "relative tolerance of err(N) / err(MBA) - 1",
    # networks and compression
    "eta": "consensus step size (W_eta = (1 - eta) I + eta W)",
    "gap": "spectral gap 1 - rho(W) of the mixing matrix, rho the second-largest eigenvalue "
    "modulus (the eigengap delta of Koloskova et al. 2019, 1 - rho_w of Pu et al.)",
    "lambda_i": "an eigenvalue of the mixing matrix W",
    "lambda_2": "second-largest eigenvalue of W",
    "lambda_n": "smallest eigenvalue of W",
    "omega": "contraction parameter of a compressor, E||C(x) - x||^2 <= (1 - omega) ||x||^2 "
    "(delta in Stich et al. 2018 and Karimireddy et al. 2019)",
    "x_norm1": "||x||_1 of the compressed vector",
    "x_norm2": "||x||_2 of the compressed vector",
    "mean_x_t": "node average of the models at iteration t",
    "mean_g_t": "node average of the stochastic gradients at iteration t",
    # unknown constants (each one a constant of the result it appears in)
    "c": "unknown constant factor of the result",
    "c_1": "unknown constant of the first term of the result",
    "c_2": "unknown constant of the second term of the result",
    "C_2": "dimensionless constant of DeepSqueeze's rate and step limit (grows with the "
    "compression error, shrinks with the spectral gap)",
    "K": "unknown constant factor of the large-step model",
    "C_g": "unknown constant of a graph in the 1/T correction of D-PSGD's error ratio",
    # summation index
    "i": "summation index over the spectrum",
}
