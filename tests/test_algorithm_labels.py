"""Default labels name their settings by the constructor's argument names (``consensus_step=``,
not ``gamma_c=``), for every algorithm and every optional setting a label shows; the one
exception is the notation ``P`` (``workers``) and ``b`` (``batch``) that every label shares."""

from __future__ import annotations

import inspect
import re

import pytest

import convkit as ck
from convkit import algorithms as algs
from convkit.compression import TopK
from convkit.sweep.registry import _lookup
from convkit.topology import ring

#: The shorthands every label uses (documented in ``Algorithm.label``).
SHORTHANDS = {"P": "workers", "b": "batch"}


def _top_level_keys(label: str) -> list[str]:
    """``key`` of every ``key=value`` part at depth 1 of ``Name(part, part, ...)`` (parts of
    nested names, such as a compressor's ``top-k(k=2)``, are theirs, not the algorithm's)."""
    inner = label[label.index("(") + 1 : label.rindex(")")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return [m.group(1) for p in parts if (m := re.match(r"^(\w+)=", p))]


def _every_algorithm() -> list[tuple[str, object]]:
    """One instance per exported algorithm: its class's example (``example()``, whose settings
    are away from their defaults where a label shows them: :class:`convkit.validation.Declared`),
    and for the functions MBA and OSA their registered kind's example."""
    out = []
    for name in algs.__all__:
        obj = getattr(algs, name)
        if inspect.isclass(obj):
            if issubclass(obj, algs.Algorithm) and not inspect.isabstract(obj):
                out.append((name, obj.example()))
        elif name in ("MBA", "OSA"):
            out.append((name, obj(**_lookup("algorithm", name.lower()).example())))
    return out


@pytest.mark.parametrize(
    "name,algo", _every_algorithm(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_label_keys_are_constructor_arguments(name, algo):
    cls = getattr(algs, name)
    params = set(inspect.signature(cls).parameters)
    keys = _top_level_keys(algo.label)
    assert keys, algo.label
    for key in keys:
        allowed = key in params or (key in SHORTHANDS and SHORTHANDS[key] in params)
        assert allowed, f"{name}: label {algo.label!r} shows {key}=, not an argument {params}"


def test_every_exported_algorithm_is_covered():
    covered = {name for name, _ in _every_algorithm()}
    exported = {
        n
        for n in algs.__all__
        if inspect.isclass(getattr(algs, n)) and issubclass(getattr(algs, n), algs.Algorithm)
    } - {"Algorithm"}
    assert exported <= covered, exported - covered


def test_the_renamed_settings_read_as_their_arguments():
    choco = algs.CHOCOSGD(ring(4), ck.Constant(0.1), TopK(k=2), 0.4)
    assert "consensus_step=0.4" in choco.label and "gamma_c" not in choco.label
    scaffold = algs.SCAFFOLD(4, ck.Constant(0.1), "every:5", server_step=0.5)
    assert "server_step=0.5" in scaffold.label and "eta_g" not in scaffold.label


@pytest.mark.parametrize(
    "comp",
    [
        ck.compression.TopK(fraction=0.25),
        ck.compression.TopK(k=3),
        ck.compression.RandK(fraction=0.5, scaled=True),
        ck.compression.RandK(k=2),
        ck.compression.QSGD(s=4),
        ck.compression.StochasticRounding(bits=8),
    ],
    ids=lambda c: type(c).__name__,
)
def test_compressor_names_use_the_constructor_arguments(comp):
    """A compressor's name (shown inside algorithm labels) names its settings by the
    constructor's arguments: ``top-k(fraction=0.25)``, not ``top-k(0.25d)``;
    ``stochastic-rounding(bits=8)``, not ``(b=8)``."""
    name = comp.name
    params = set(inspect.signature(type(comp)).parameters)
    inner = name[name.index("(") + 1 : name.rindex(")")]
    for part in inner.split(","):
        key, sep, _ = part.strip().partition("=")
        assert sep, f"{name}: setting {part!r} is not key=value"
        assert key in params, f"{name}: {key!r} is not an argument of {type(comp).__name__}"


def test_decentralized_and_error_feedback_labels_from_their_declarations():
    """D-PSGD's ``form`` is declared shown always: ``form=`` at its default too; the family's
    label is ``Name(topology, compressor, shown settings, b=...)`` (ECD-PSGD's shown settings
    after ``b``), error feedback's ``ErrorFeedbackSGD(P=..., compressor, b=...)``."""
    g = ck.Constant(0.1)
    assert algs.DPSGD(ring(4), g).label == "DPSGD(ring(4), uniform, form=gossip_then_step, b=1)"
    stg = algs.DPSGD(ring(4), g, form="step_then_gossip", batch=2)
    assert stg.label == "DPSGD(ring(4), uniform, form=step_then_gossip, b=2)"
    choco = algs.CHOCOSGD(ring(4), g, TopK(k=2), 0.4, order="reference_code")
    assert choco.label == (
        "CHOCOSGD(ring(4), uniform, top-k(k=2), consensus_step=0.4, order=reference_code, b=1)"
    )
    ecd = algs.ECDPSGD(ring(4), g, "qsgd:2", copies_start="zero", batch=3)
    assert ecd.label == "ECDPSGD(ring(4), uniform, qsgd(s=2), b=3, copies_start=zero)"
    ef = algs.ErrorFeedbackSGD(4, g, TopK(k=2), batch=5)
    assert ef.label == "ErrorFeedbackSGD(P=4, top-k(k=2), b=5)"
