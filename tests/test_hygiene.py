"""One definition per helper shared across packages (issue 32, item 7)."""

from __future__ import annotations


def test_one_json_default_for_results_and_sweeps():
    """The metadata of results and sweeps is written by one ``json_default`` (there were two,
    one of which wrote NumPy booleans as the string 'True')."""
    import json

    import numpy as np

    import convkit.sweep.cache as cache
    import convkit.sweep.executors as executors
    import convkit.sweep.runner as runner
    from convkit.result import json_default

    meta = {"b": np.bool_(True), "i": np.int64(3), "f": np.float32(0.5), "a": np.arange(2)}
    assert json.loads(json.dumps(meta, default=json_default)) == {
        "b": True, "i": 3, "f": 0.5, "a": [0, 1]
    }  # fmt: skip
    for module in (cache, executors, runner):
        assert module.json_default is json_default
        assert not hasattr(module, "_json_default")
