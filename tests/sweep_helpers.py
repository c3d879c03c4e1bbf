"""Shared by the sweep executor tests: a tiny spec and the digests of its cache payloads."""

from __future__ import annotations

from pathlib import Path

from convkit import sweep as sw


def tiny_spec(n_c: int = 3) -> dict:
    """Six small Local-SGD configurations (2 worker counts x ``n_c`` step constants)."""
    return {
        "seed": 11,
        "steps": 24,
        "replicates": 8,
        "problem": {"kind": "least_squares", "d": 5, "spectrum": "1/i", "noise": 1.0},
        "algorithm": {
            "kind": "local_sgd",
            "workers": 2,
            "comm": "rounds:6",
            "step": {"kind": "poly", "C": 0.5, "alpha": 0.75},
        },
        "record": {"n_record": 5},
        "grid": {
            "algorithm.workers": [1, 3],
            "algorithm.step.C": [0.1 * (i + 1) for i in range(n_c)],
        },
    }


def payload_digests(out: Path, sweep: sw.Sweep) -> list[str]:
    """sha256 of every configuration's cache payload (each must be present and valid)."""
    store = sw.Cache(out / "cache")
    digests = []
    for c in sweep.configurations:
        entry = store.get(c.key, c.setting)
        assert entry is not None, store.last_problem
        digests.append(entry.record["payload"]["sha256"])
    return digests
