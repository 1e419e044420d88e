"""The channel registry (channels/registry.py): channels registered by plugins, found by name, never twice."""

from __future__ import annotations

import pytest

from skillyard import SkillYard, hookimpl
from skillyard.errors import DuplicateRegistration
from support.skills import yard_of


def test_duplicate_channel_fails(skills_root, plugin_reg):
    """hooks.md: 'A channel name registered twice fails at startup, naming both plugins.'"""

    class Ch:
        async def send(self, recipient, text, attachments):
            return None

    class A:
        @hookimpl
        def register_channels(self, register):
            register("probe-ch", Ch())

    class B:
        @hookimpl
        def register_channels(self, register):
            register("probe-ch", Ch())

    plugin_reg(A(), "probe2-ca")
    plugin_reg(B(), "probe2-cb")
    with pytest.raises(DuplicateRegistration) as info:
        SkillYard(skills_dirs=[skills_root], include_builtin=False)
    assert "probe2-ca" in str(info.value) and "probe2-cb" in str(info.value)


async def test_channel_registered_is_in_yard_channels(skills_root, plugin_reg):
    """hooks.md: 'The host uses the registry (`yard.channels`, ...)'."""
    box = object()

    class Ch:
        async def send(self, recipient, text, attachments):
            return None

    ch = Ch()

    class P:
        @hookimpl
        def register_channels(self, register):
            register("probe-outbox", ch)

    plugin_reg(P(), "probe2-outbox")
    async with yard_of(skills_root) as yard:
        reg = yard.channels
        found = reg.get("probe-outbox") if hasattr(reg, "get") else reg["probe-outbox"]
    assert found is ch and found is not box
