"""Every name that ``convkit`` advertises resolves: ``__all__`` and both lazy tables."""

import importlib

import pytest

import convkit

NAMES = sorted(set(convkit.__all__) | set(convkit._LAZY_MODULES) | set(convkit._LAZY_NAMES))


@pytest.mark.parametrize("name", NAMES)
def test_advertised_name_resolves(name):
    assert getattr(convkit, name) is not None


@pytest.mark.parametrize("name", sorted(convkit._LAZY_MODULES))
def test_lazy_module_is_the_submodule(name):
    assert getattr(convkit, name) is importlib.import_module(f"convkit.{name}")


def test_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'plotting_typo'"):
        convkit.plotting_typo  # noqa: B018
