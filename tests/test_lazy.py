"""The public names of ``skillyard`` and ``skillyard.agent`` load on first use and are the objects they name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("package", ["skillyard", "skillyard.agent"])
def test_every_public_name_resolves_to_the_object_of_its_module(package):
    module = importlib.import_module(package)
    exports = module._EXPORTS
    assert sorted(module.__all__) == sorted(exports)
    for name, source in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(source, package), name)
        assert name in dir(module)


def test_an_unknown_name_is_an_attribute_error():
    import skillyard

    with pytest.raises(AttributeError, match="module 'skillyard' has no attribute 'Nope'"):
        _ = skillyard.Nope


def test_importing_skillyard_loads_nothing_behind_the_host():
    code = (
        "import sys, skillyard, skillyard.agent; "
        "print([m for m in ('skillyard.yard', 'sqlalchemy') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
