"""Settings from the environment (settings.py): a bad value stops skillyard with a message naming the variable."""

from __future__ import annotations

import pytest

from skillyard import SkillYard
from skillyard.errors import SkillyardError


@pytest.mark.parametrize("value", ["abc", "-1", "0", "inf", "nan"])
def test_bad_wall_clock_names_the_variable(monkeypatch, skills_root, value):
    """configuration.md: 'The timeouts ... must be numbers above 0 ...; anything else (text, a negative number, `inf`,
    `nan`) stops skillyard with a message naming the variable.'"""
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", value)
    with pytest.raises(SkillyardError, match="SKILLYARD_WALL_CLOCK"):
        SkillYard(skills_dirs=[skills_root], include_builtin=False)


def test_rescan_interval_negative_names_variable(monkeypatch, skills_root):
    """configuration.md: '(`SKILLYARD_RESCAN_INTERVAL` 0 or more); anything else ... stops skillyard with a message
    naming the variable'."""
    monkeypatch.setenv("SKILLYARD_RESCAN_INTERVAL", "-5")
    with pytest.raises(SkillyardError, match="SKILLYARD_RESCAN_INTERVAL"):
        SkillYard(skills_dirs=[skills_root], include_builtin=False)


def test_secret_keys_are_read_and_never_shown(monkeypatch):
    """configuration.md: 'SKILLYARD_SECRET_KEYS ... Wins over SKILLYARD_SECRET_KEY when both are set' (the choice is
    configs/crypto.py's; settings carry both, out of repr)."""
    from skillyard.settings import Settings

    monkeypatch.setenv("SKILLYARD_SECRET_KEYS", "newest-key-aaa,older-key-bbb")
    settings = Settings.from_env()
    assert settings.secret_keys == "newest-key-aaa,older-key-bbb" and settings.secret_key
    assert "newest-key-aaa" not in repr(settings) and settings.secret_key not in repr(settings)
