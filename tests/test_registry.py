"""The registries (registry.py): an exec type or a processor order registered twice fails at startup, naming both
plugins."""

from __future__ import annotations

import pytest

from skillyard import SkillYard, hookimpl
from skillyard.errors import DuplicateRegistration


def test_duplicate_exec_type_fails_at_startup(plugin_reg, skills_root):
    """hooks.md: 'Two plugins registering the same exec type ... make `SkillYard(...)` raise
    `skillyard.errors.DuplicateRegistration` with a message naming both plugins.'"""
    from skillyard import hookimpl
    from skillyard.errors import DuplicateRegistration

    class P:
        @hookimpl
        def register_exec_types(self, register):
            register("shell", object())

    plugin_reg(P(), "probe-dup")
    with pytest.raises(DuplicateRegistration) as info:
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "probe-dup" in str(info.value)


def test_duplicate_result_processor_order_fails(skills_root, plugin_reg):
    """hooks.md: 'Two plugins ... with the same order number, make `SkillYard(...)` raise
    `skillyard.errors.DuplicateRegistration` with a message naming both plugins.'"""

    class A:
        @hookimpl
        def register_result_processors(self, register):
            register(777, "a-proc", lambda e, r: e)

    class B:
        @hookimpl
        def register_result_processors(self, register):
            register(777, "b-proc", lambda e, r: e)

    plugin_reg(A(), "probe2-pa")
    plugin_reg(B(), "probe2-pb")
    with pytest.raises(DuplicateRegistration) as info:
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "probe2-pa" in str(info.value) and "probe2-pb" in str(info.value)


def test_duplicate_exec_type_case_insensitive(skills_root, plugin_reg):
    """hooks.md: '`name` is stored upper-cased'; 'Registering a name that is already registered fails at startup.'"""

    class Ex:
        async def run(self, skill, input, ctx, *, yard):
            return {}

    class A:
        @hookimpl
        def register_exec_types(self, register):
            register("probe_dup", Ex())

    class B:
        @hookimpl
        def register_exec_types(self, register):
            register("PROBE_DUP", Ex())

    plugin_reg(A(), "probe2-da")
    plugin_reg(B(), "probe2-db")
    with pytest.raises(DuplicateRegistration):
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
