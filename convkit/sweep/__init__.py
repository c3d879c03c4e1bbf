"""Parameter sweeps: declarative grids, a content-addressed cache, resume, parallel and
cluster execution.

A sweep is a **base setting** plus **grids**.  The setting describes one call of
:func:`convkit.simulate`::

    seed = 1                         # sweep seed: every configuration's seed derives from it
    gradients = 4096                 # or steps = n (local steps)
    replicates = 50

    [problem]
    kind = "least_squares"
    design = "gaussian"
    d = 20
    spectrum = "1/i"
    noise = 1.0

    [algorithm]                      # or algorithms = [{...}, {...}] (common random numbers)
    kind = "local_sgd"
    workers = 8
    comm = "rounds:10"
    step = {kind = "poly", C = 0.5, alpha = 0.75}

    [record]                         # optional
    n_record = 20
    iterates = ["avg", "last"]       # keep only these rows (default: all)

    [grid]                           # cross product of every key
    "algorithm.workers" = [2, 4, 8]
    "algorithm.step.C" = [0.25, 0.5]

    [[zip]]                          # a zipped group: its lists vary together
    "algorithm.comm" = ["mba", "rounds:10", "osa"]
    "record.n_record" = [10, 20, 30]

Grid keys address nested fields with dots (``"algorithms.0.workers"`` for a list).  The
configurations are the cross product of the grid keys (in the order written) and the zipped
groups; the last axis varies fastest.  The same structure as a Python dict gives the same sweep
(:meth:`Sweep.from_dict`).

Objects are built through a small **registry of kinds** (:func:`register`): categories
``problem``, ``algorithm``, ``step``, ``comm`` (built in), ``topology`` and ``compressor`` (from
:mod:`convkit.topology` / :mod:`convkit.compression`), and, when those modules exist,
logistic / finite-sum problems and decentralized algorithms (registered lazily on first use,
from the :class:`~convkit.problems.base.Problem` and
:class:`~convkit.algorithms.base.Algorithm` subclasses they export, under their snake-case
class names; a problem's public classmethod constructors also as ``<kind>_<method>``, e.g.
``logistic_regression_gaussian``, alias ``logistic``).  A kind's parameters, their types and
defaults come from an explicit schema or from the builder's signature.  Kinds registered by
user code must be importable in worker processes: list their modules under ``imports``.
String specs are read by the model modules' own parsers, the ones the constructors and the
command line use (:func:`convkit.schedule_spec.parse_comm_spec`,
:func:`convkit.compression.parse_compressor_spec`,
:func:`convkit.topology_spec.parse_topology_spec`), and kind names resolve through their
tables: one name per class, and an alias that fixes a parameter is stored as its class' kind
(``comm = "quadratic:4"`` and ``{kind = "quadratic_rounds", N = 4}`` are both
``{kind = "power_rounds", N = 4, p = 2.0}``; ``{kind = "rand_k_scaled"}`` is ``rand_k`` with
``scaled = true``).  Every configuration is normalised (defaults filled in, numbers coerced,
``comm = "rounds:10"`` written as ``{kind = "rounds", N = 10}``) before it is hashed, so
equivalent spellings share one cache entry.

**Errors.**  Unknown keys, unknown kinds, empty or duplicated grids, zipped groups of unequal
length and wrong types raise :class:`SpecError`, which names the key and, for a TOML file, the
line.  Then every configuration's objects are built once (:mod:`convkit.sweep.preflight`):
range errors of the constructors (``alpha = 2``), ``gradients`` not a multiple of ``P b``, bad
record options, and ``[record]`` names (``metrics``, ``iterates``) that the configuration's
problem and algorithms do not report are collected over the whole sweep and raised as one
:class:`SpecError` listing each distinct message with the number of configurations it affects
and the first of them (``Sweep(..., check=False)`` skips this; such a configuration then fails
at run time while the others continue).  An output directory holding a different sweep, in
use by another sweep (lock file ``<out>/.lock``) or with a damaged ``sweep.json`` raises
:class:`SweepOutputError`.

**Seeds.**  Configuration ``c`` runs with seed
``derive_seed(sweep_seed, setting_c without "record").generate_state(1)[0]``
(:func:`convkit.backend.derive_seed`), so it does not depend on the executor, on the order of
execution or on the record options.

**Cache** (:class:`Cache`).  Each configuration's result is stored under
``sha256(sorted JSON of {setting, sweep seed, convkit version, cache format})``, as two files in
``<cache>/<key[:2]>/``: ``<key>.parquet`` (the result frame; CSV when pyarrow is missing) and
``<key>.json`` (one line of canonical JSON: configuration, seed, ``Result.meta``, the payload's
size and sha256; then a line ``sha256:<digest of that line>``).  Both are written atomically
(temporary file in the same directory, ``os.replace``), payload first, and the record is
fsynced before its rename: the record is the commit marker.  On read every checksum is
verified; a missing, truncated or altered file makes the entry invalid and it is recomputed,
never used.  Nothing is unpickled.

**Who writes the cache.**  Workers (joblib processes, Dask workers, possibly on machines
without the output disk) return the serialised payload to the parent, and the parent writes
each entry as soon as its result arrives (``return_as="generator_unordered"`` with joblib,
``as_completed`` with Dask).  A sweep killed with SIGKILL loses only the configurations that
were running (with joblib, which batches short tasks automatically, those of the batches in
flight); a restart reuses every committed entry.  If the executor itself fails (a worker killed
by the OS, a lost cluster), what arrived is committed and the rest is reported as failed.

**Executors.**  ``jobs=1``: serial in-process; otherwise joblib (loky processes; ``jobs=None``
or ``-1``, the default, uses all cores); ``dask=True``: an embedded :class:`distributed.LocalCluster` (processes);
``scheduler="tcp://host:port"``: a running Dask cluster.  Results are bit-for-bit identical.
joblib workers exit when the sweep's process dies, even by SIGKILL (a thread in each worker
watches its parent process).

**Output.**  ``<out>/frame.parquet`` (CSV without pyarrow): the result frames of all
configurations, in configuration order, with the columns ``config_id``, ``config_key``, one
column per grid key (named by the key; ``grid.<key>`` if it collides with a result column;
tables and lists as JSON text) and the :data:`convkit.result.FRAME_COLUMNS`.  Files are
created with the user's umask (``0o666 & ~umask``).  ``<out>/sweep.json``:
the spec, every configuration with its status, the summary and versions.  :func:`load` reads
both back.  The command line is :func:`convkit.cli.sweep.main` (``convkit sweep`` / ``python -m
convkit.sweep``): the front ends import the sweep package, never the reverse.
"""

from __future__ import annotations

from typing import Any

# names outside __all__ are re-exported (``as`` form) for tests and tools; to monkeypatch a
# private function, patch the submodule that looks it up (``convkit.sweep.runner._serial``)
from convkit.sweep.cache import CACHE_FORMAT as CACHE_FORMAT
from convkit.sweep.cache import Cache
from convkit.sweep.cache import CacheEntry as CacheEntry
from convkit.sweep.cache import atomic_write as atomic_write
from convkit.sweep.cache import frame_from_bytes as frame_from_bytes
from convkit.sweep.cache import frame_to_bytes as frame_to_bytes
from convkit.sweep.errors import SpecError, SweepOutputError
from convkit.sweep.errors import _Context as _Context
from convkit.sweep.errors import toml_positions as toml_positions
from convkit.sweep.executors import _execute as _execute
from convkit.sweep.registry import Kind, Param, aliases, kinds, register, resolve
from convkit.sweep.registry import params_from_signature as params_from_signature
from convkit.sweep.runner import SweepResult, SweepSummary, load, run
from convkit.sweep.setting import _normalize_kind as _normalize_kind
from convkit.sweep.setting import build
from convkit.sweep.setting import normalize_setting as normalize_setting
from convkit.sweep.spec import MAX_CONFIGURATIONS, Configuration, Sweep, load_spec
from convkit.sweep.spec import config_key as config_key
from convkit.sweep.spec import config_seed as config_seed

__all__ = [
    "MAX_CONFIGURATIONS",
    "Cache",
    "Configuration",
    "Kind",
    "Param",
    "SpecError",
    "Sweep",
    "SweepOutputError",
    "SweepResult",
    "SweepSummary",
    "aliases",
    "build",
    "kinds",
    "load",
    "load_spec",
    "register",
    "resolve",
    "run",
]


def __getattr__(name: str) -> Any:
    from convkit._migration import missing_attribute

    raise missing_attribute(__name__, name)
