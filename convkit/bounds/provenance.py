"""Provenance of the results: the papers the claims come from, and :func:`derived` for the
results derived here.

A result's ``provenance`` is one of

* ``"<paper>: <statement>"`` (one of the references below, or another citation in full): the
  statement as the paper's text gives it (tag ``[paper]`` of the theory notes);
* ``"<paper> [from a summary of the paper, not its text; <where>]: <statement>"``
  (:func:`from_summary`): the statement as a summary of the paper gives it, when the paper's
  text was not available (the theory notes tag it **[paper]** "abstract or seed summary";
  here the weaker source is named);
* ``"derived here: <module>.<function>"``, naming the SymPy derivation that produces its
  expression (:func:`derived` builds that string from the function itself, so it always
  names the module the derivation lives in).

:func:`source_of` tells the three apart (``"paper"``, ``"summary"``, ``"derived"``).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = [
    "ALISTARH",
    "ISSUE_30",
    "KARIMIREDDY",
    "KOLOSKOVA",
    "LIAN",
    "STICH",
    "TANG_D2",
    "THEORY_NOTE_DECENTRALIZED",
    "PATEL",
    "SUMMARY_TAG",
    "TANG",
    "TANG_SUMMARY",
    "derived",
    "from_summary",
    "source_of",
]

PATEL = (
    "Patel & Dieuleveut 2019, 'Communication trade-offs for synchronized distributed SGD with "
    "large step size' (arXiv 1904.11325)"
)
TANG = (
    "Tang, Lian, Qiu, Yuan, Zhang, Zhang, Liu 2019, 'DeepSqueeze: Decentralization meets "
    "error-compensated compression' (arXiv 1907.07346)"
)
LIAN = (
    "Lian, Zhang, Zhang, Hsieh, Zhang, Liu 2017, 'Can decentralized algorithms outperform "
    "centralized algorithms?' (NeurIPS 2017)"
)
KOLOSKOVA = (
    "Koloskova, Stich, Jaggi 2019, 'Decentralized stochastic optimization and gossip "
    "algorithms with compressed communication' (ICML 2019)"
)
TANG_D2 = (
    "Tang, Lian, Yan, Zhang, Liu 2018, 'D^2: Decentralized training over decentralized data' "
    "(ICML 2018, arXiv 1803.07068)"
)
KARIMIREDDY = (
    "Karimireddy, Rebjock, Stich, Jaggi 2019, 'Error feedback fixes SignSGD and other gradient "
    "compression schemes' (ICML 2019)"
)
STICH = "Stich, Cordonnier, Jaggi 2018, 'Sparsified SGD with memory' (NeurIPS 2018)"
ALISTARH = (
    "Alistarh, Grubic, Li, Tomioka, Vojnovic 2017, 'QSGD: Communication-efficient SGD via "
    "gradient quantization and encoding' (NeurIPS 2017)"
)

#: the theory note of the decentralized and compression results (its compressor table and its
#: [classic] statements are summaries, not the papers' text)
THEORY_NOTE_DECENTRALIZED = "theory note shared/theory/decentralized.md"
#: the issue that quotes constants of papers whose text was not read here
ISSUE_30 = "issue 30 of this repository, item 8"


def derived(func: Callable[..., object]) -> str:
    """``"derived here: <module>.<function>"`` for the derivation ``func`` (cached functions
    keep their module and name through :func:`functools.wraps`)."""
    return f"derived here: {func.__module__}.{func.__qualname__}"


#: the marker :func:`from_summary` puts after the citation
SUMMARY_TAG = "[from a summary of the paper, not its text"

#: where DeepSqueeze's statements come from: the seed summary of the theory note
#: ``shared/theory/decentralized.md`` (the body of the paper, Theorem 1's constants included,
#: was not available)
TANG_SUMMARY = "seed summary shared/seeds/000_1b3b5ac633509b42.txt"


def from_summary(paper: str, where: str, statement: str) -> str:
    """Provenance of a statement taken from a summary of ``paper`` (not from its text).

    Parameters
    ----------
    paper:
        The citation (e.g. :data:`TANG`).
    where:
        The summary the statement was read in (e.g. :data:`TANG_SUMMARY`).
    statement:
        The statement as the summary gives it.

    Returns
    -------
    str
        ``"<paper> [from a summary of the paper, not its text; <where>]: <statement>"``.
    """
    for name, value in (("paper", paper), ("where", where), ("statement", statement)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return f"{paper} {SUMMARY_TAG}; {where}]: {statement}"


def source_of(provenance: str) -> str:
    """``"derived"``, ``"summary"`` or ``"paper"``: the kind of source a provenance string
    names (see the module docstring)."""
    if provenance.startswith("derived here"):
        return "derived"
    if SUMMARY_TAG in provenance:
        return "summary"
    return "paper"
