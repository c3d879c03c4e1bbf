"""Memory of a Monte Carlo run: what is available (host or GPU) and the refusal, before any
allocation, of a run whose state and recorded values cannot fit (:func:`check_memory`, called
by :func:`convkit.simulate`)."""

from __future__ import annotations

import os
from typing import Any

from ._layout import REPLICATE_BLOCK
from .backend import Backend

__all__ = ["SUMMARY_COPIES", "available_memory", "check_memory"]

#: the summary of one configuration's values (Result.frame) makes about this many copies
SUMMARY_COPIES = 3

_GIB = 2.0**30


def _gib(nbytes: float) -> str:
    """``nbytes`` in GiB, for messages."""
    return f"{nbytes / _GIB:,.2f} GiB"


def available_memory(backend: Backend | None = None) -> int:
    """Bytes available for new arrays: free device memory for the CuPy backend, else the
    host's available memory (``psutil.virtual_memory().available``, or the free pages of
    ``os.sysconf`` without psutil; a huge number when neither is known)."""
    if backend is not None and backend.name == "cupy":  # pragma: no cover - needs a GPU
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dependency of the dev environment
        psutil = None
    if psutil is not None:
        return int(psutil.virtual_memory().available)
    try:  # pragma: no cover
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 2**62


def check_memory(
    R: int,
    chunk_reps: int,
    per_rep: int,
    layouts: list[Any],
    be: Backend,
    dtype: str,
    memory_limit: float,
) -> None:
    """Raise a :class:`MemoryError` (with the estimate and the ways out) when the run cannot
    fit in the available memory; nothing has been allocated yet."""
    state = chunk_reps * per_rep
    rec_per_rep = (
        sum(lay.bytes_per_replicate for lay in layouts)
        + 8 * len(layouts)  # divergence steps
        + SUMMARY_COPIES * max(lay.bytes_per_replicate for lay in layouts)
    )
    recorded = R * rec_per_rep
    host = available_memory()
    if be.name == "cupy":  # pragma: no cover - needs a GPU
        device = available_memory(be)
        need_host, need_device = recorded, state
    else:
        device, need_host, need_device = host, recorded + state, 0
    if need_host <= host and need_device <= device:
        return
    where = "on the GPU " if need_device > device else ""
    need, avail = (need_device, device) if where else (need_host, host)
    # replicates that fit at this memory_limit: R' (rec_per_rep + per_rep) while R' is within
    # one chunk, then (avail - state of a full chunk) / rec_per_rep
    fit = int(avail // (rec_per_rep + (0 if where else per_rep)))
    if fit >= chunk_reps and not where:
        fit = int(max(0, avail - state) // rec_per_rep)
    fit = min(fit, R - 1)
    n_rec = max(lay.steps.size for lay in layouts)
    msg = (
        f"simulate(replicates={R}) needs about {_gib(need)} {where}but only "
        f"{_gib(avail)} are available: the state of a chunk of {chunk_reps} "
        f"replicates takes {_gib(state)} ({per_rep:,} bytes per replicate, "
        f"dtype={dtype!r}), the recorded values (record points x iterates x metrics x "
        f"replicates, not chunked) and their summary {_gib(recorded)}. Ways out: "
        f"fewer replicates (about {fit:,} fit)"
    )
    if recorded > host:
        msg += (
            f" or fewer record points (n_record, now up to {n_rec} points per algorithm); "
            "chunking does not help: the recorded values alone exceed the available memory"
        )
    else:
        block_bytes = min(R, REPLICATE_BLOCK) * per_rep
        if dtype == "float64":
            msg += '; dtype="float32" (halves the state)'
        if block_bytes + (0 if where else recorded) <= avail:
            msg += (
                f"; a smaller memory_limit (now {memory_limit:g} bytes; e.g. "
                f"memory_limit={0.8 * (avail - (0 if where else recorded)):.3g}) so that the "
                f"state is split into more chunks (one block of {min(R, REPLICATE_BLOCK)} "
                f"replicates takes {_gib(block_bytes)})"
            )
        else:
            msg += (
                f"; a smaller memory_limit does not help: one block of "
                f"{min(R, REPLICATE_BLOCK)} replicates already takes {block_bytes / _GIB:.3g} "
                "GiB (fewer workers, a smaller batch or a smaller d)"
            )
    raise MemoryError(msg)
