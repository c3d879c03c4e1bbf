"""One parser per kind of string spec, one name per class.

A communication spec, a compressor spec or a topology spec accepted by one front end (the
constructors, the sweep settings, the ``convkit simulate`` command line) is accepted by all of
them and builds the same object; a malformed one is refused everywhere with the same message
(the parser's own).  Every schedule and compressor class is known by one name; the aliases
resolve through the model modules' tables (``COMM_ALIASES``, ``COMPRESSOR_ALIASES``).
"""

from __future__ import annotations

import numpy as np
import pytest

import convkit as ck
import convkit.sweep as sw
from convkit.algorithms.decentralized import CHOCOSGD, DPSGD
from convkit.cli import main as cli_main
from convkit.cli.simulate import _build, build_parser
from convkit.compression import COMPRESSORS, RandK, get_compressor
from convkit.schedule_spec import COMM_KINDS, comm_from_spec
from convkit.schedules import PowerRounds, QuadraticRounds
from convkit.sweep.setting import build
from convkit.topology import ring, torus

STEP = ck.Constant(0.05)
BASE = {"seed": 1, "steps": 24, "replicates": 2, "problem": {"kind": "least_squares", "d": 3}}


def _sweep_algorithm(algorithm: dict) -> object:
    """The (only) algorithm of a one-configuration sweep, built as the sweep builds it."""
    spec = sw.Sweep.from_dict({**BASE, "algorithm": algorithm})
    return build(spec.configurations[0].setting)[1][0]


def _cli_exit(argv: list[str]) -> int:
    """Exit code of ``convkit ARGV`` (argparse errors leave through SystemExit)."""
    try:
        return cli_main(argv)
    except SystemExit as exc:
        return int(exc.code)


def _cli_comm(text: str) -> object:
    args = build_parser().parse_args(["--comm", text, "--d", "3", "--workers", "2"])
    return _build(args)[1].comm


GOOD_COMM = [
    "mba",
    "OSA",
    "every:3",
    "rounds:5",
    "quadratic:4",
    "quadratic_rounds:4",
    "power:4:1.5",
    "power_rounds:4:1.5",
    "geometric_rounds:3",
    "geometric:2:3",
    "polynomial:2:1.5",
    "final",
]


@pytest.mark.parametrize("text", GOOD_COMM)
def test_comm_spec_builds_the_same_schedule_in_every_front_end(text):
    """`comm = "quadratic:4"` (refused by sweeps before: they had a parser of their own that
    knew only mba/osa/every/rounds) gives one and the same schedule object in LocalSGD, in a
    sweep setting and on the command line."""
    direct = ck.LocalSGD(2, STEP, comm=text).comm
    swept = _sweep_algorithm({"kind": "local_sgd", "workers": 2, "step": 0.05, "comm": text}).comm
    assert swept == direct
    assert _cli_comm(text) == direct
    assert comm_from_spec(text) == direct


def test_quadratic_is_power_rounds_with_p_2_in_tables_too():
    """The alias `quadratic_rounds` fixes p = 2 and is stored under its class' one name; a
    table that contradicts the alias is refused with the way out."""
    table = {"kind": "local_sgd", "workers": 2, "step": 0.05}
    a = _sweep_algorithm({**table, "comm": {"kind": "quadratic_rounds", "N": 4}})
    assert a.comm == QuadraticRounds(4) == PowerRounds(4, 2.0)
    spec = sw.Sweep.from_dict({**BASE, "algorithm": {**table, "comm": "quadratic:4"}})
    assert spec.configurations[0].setting["algorithm"]["comm"] == {
        "kind": "power_rounds",
        "N": 4,
        "p": 2.0,
    }
    with pytest.raises(sw.SpecError, match=r"'quadratic_rounds' is 'power_rounds' with p = 2.0"):
        sw.Sweep.from_dict(
            {**BASE, "algorithm": {**table, "comm": {"kind": "quadratic_rounds", "N": 4, "p": 3}}}
        )


BAD_COMM = {
    "unknown name": ("sometimes", "unknown schedule 'sometimes'"),
    "missing number": ("quadratic", "write 'quadratic:N'"),
    "not an integer": ("every:1.5", "H must be an integer, got '1.5'"),
    "no string form": ("at:3", "'at' has no string form"),
    "extra number": ("mba:3", "write 'mba'"),
}


@pytest.mark.parametrize("case", sorted(BAD_COMM))
def test_bad_comm_spec_same_message_everywhere(case, capsys):
    """A malformed spec: the parser's one message (`comm must be ... got 'x' (why)`) from the
    constructor, the sweep (under the key's path) and the command line (one line, exit 2)."""
    text, why = BAD_COMM[case]
    with pytest.raises(ValueError) as direct:
        ck.LocalSGD(2, STEP, comm=text)
    message = str(direct.value)
    assert message.startswith("comm must be") and why in message and repr(text) in message
    with pytest.raises(sw.SpecError) as swept:
        _sweep_algorithm({"kind": "local_sgd", "workers": 2, "step": 0.05, "comm": text})
    assert message in str(swept.value) and "algorithm.comm" in str(swept.value)
    assert _cli_exit(["simulate", "--comm", text]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "--comm" in err[0]


def test_comm_number_out_of_range_same_message_everywhere(capsys):
    """A well-formed spec with a bad number: the schedule's own message in all three."""
    core = "H must be in [1, inf), got 0"
    with pytest.raises(ValueError, match=r"comm 'every:0': H must be in \[1, inf\), got 0"):
        ck.LocalSGD(2, STEP, comm="every:0")
    with pytest.raises(sw.SpecError) as swept:
        _sweep_algorithm({"kind": "local_sgd", "workers": 2, "step": 0.05, "comm": "every:0"})
    assert core in str(swept.value)
    assert _cli_exit(["simulate", "--comm", "every:0"]) == 2
    assert core in capsys.readouterr().err


def test_one_name_per_schedule_class():
    """Every schedule kind of the one table is the `kind` its objects describe themselves
    with, and the sweep registers exactly these kinds (aliases resolve, not re-register)."""
    samples = {
        "mba": (),
        "osa": (),
        "every": (2,),
        "rounds": (2,),
        "at": ((1, 2),),
        "geometric": (),
        "polynomial": (),
        "power_rounds": (2, 1.5),
        "geometric_rounds": (2,),
        "drift_clock_rounds": (2, STEP, 1.0, 1.0, 1.0, 1.0),
    }
    assert set(samples) == set(COMM_KINDS)
    for name, (cls, _) in COMM_KINDS.items():
        assert cls(*samples[name]).describe()["kind"] == name
    assert sw.kinds("comm") == sorted(COMM_KINDS)
    builders = [sw.registry._REGISTRY["comm"][k].builder for k in sw.kinds("comm")]
    assert len(set(builders)) == len(builders)


def test_compressor_alias_table_is_the_same_in_sweeps():
    """`{kind = "rand_k_scaled"}` in a sweep built an *unscaled* rand-k (the sweep registered
    the name with the bare class); it now resolves through COMPRESSOR_ALIASES like the string
    form and the constructor, to RandK(scaled=True)."""
    expected = RandK(k=2, scaled=True)
    assert get_compressor("rand-k-scaled:2") == expected
    topology = {"kind": "ring", "n": 4}
    base = {"kind": "chocosgd", "step": 0.05, "topology": topology, "consensus_step": 0.5}
    for comp in (
        {"kind": "rand_k_scaled", "k": 2},
        "rand-k-scaled:2",
        {"kind": "rand-k-scaled", "k": 2},
    ):
        assert _sweep_algorithm({**base, "compressor": comp}).compressor == expected, comp
    direct = CHOCOSGD(ring(4), STEP, "rand-k-scaled:2", consensus_step=0.5)
    assert direct.compressor == expected
    assert sw.kinds("compressor") == sorted(n.replace("-", "_") for n in COMPRESSORS)
    assert len(set(COMPRESSORS.values())) == len(COMPRESSORS)


def test_bad_compressor_spec_same_message_everywhere():
    with pytest.raises(ValueError) as direct:
        get_compressor("top-q:2")
    message = str(direct.value)
    assert "unknown compressor 'top-q'" in message
    topology = {"kind": "ring", "n": 4}
    base = {"kind": "chocosgd", "step": 0.05, "topology": topology, "consensus_step": 0.5}
    with pytest.raises(sw.SpecError) as swept:
        _sweep_algorithm({**base, "compressor": "top-q:2"})
    assert message in str(swept.value)


def test_topology_spec_in_constructors_and_sweeps():
    """`topology = "ring:4"` reached DPSGD as a string and failed in sweeps (TypeError); one
    parser now reads it for the constructors and the sweep settings alike."""
    direct = DPSGD("ring:4", STEP)
    assert np.array_equal(direct.topology.W, ring(4).W)
    for topo in ("ring:4", {"kind": "ring", "n": 4}):
        a = _sweep_algorithm({"kind": "dpsgd", "step": 0.05, "topology": topo})
        assert np.array_equal(a.topology.W, direct.topology.W)
    assert np.array_equal(DPSGD("torus:2:3", STEP).topology.W, torus(2, 3).W)
    with pytest.raises(ValueError) as bad:
        DPSGD("ring", STEP)
    message = str(bad.value)
    assert "write 'ring:n'" in message
    with pytest.raises(sw.SpecError) as swept:
        _sweep_algorithm({"kind": "dpsgd", "step": 0.05, "topology": "ring"})
    assert message in str(swept.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [("sharp", "got 'sharp'"), ("kappa:x", "got 'kappa:x' (K must be a number)")],
)
def test_bad_spectrum_same_message_everywhere(text, why, capsys):
    """A malformed spectrum preset: the parser's one message from the constructor, the sweep
    and the command line ('kappa:x' was a bare float() error in the first two, and the command
    line wrapped the message in a second list of the forms)."""
    with pytest.raises(ValueError) as direct:
        ck.LeastSquares.gaussian(3, text, 1.0)
    message = str(direct.value)
    assert message.startswith("spectrum must be 'flat'") and why in message
    with pytest.raises(sw.SpecError) as swept:
        sw.Sweep.from_dict(
            {
                **BASE,
                "problem": {"kind": "least_squares", "d": 3, "spectrum": text},
                "algorithm": {"kind": "mba", "workers": 2, "step": 0.05},
            }
        )
    assert message in str(swept.value)
    assert _cli_exit(["simulate", "--spectrum", text]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "--spectrum" in err[0]
    assert err[0].count("'flat'") == 1
