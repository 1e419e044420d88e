"""Agent runtime settings: defaults, settings.toml [agent] / [agent.model], environment overrides, bad values."""

from __future__ import annotations

import logging
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from skillyard.agent.settings import (
    DEFAULT_PLATFORM_HIDDEN,
    AgentSettings,
    AgentSettingsError,
    ModelSettings,
    parse_duration,
)


def write_settings(home: Path, text: str) -> Path:
    path = home / "settings.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_defaults_without_a_settings_file(home: Path) -> None:
    settings = AgentSettings.load(home, environ={})
    assert settings.write_confirm_bypass_tools == frozenset()
    assert settings.reconfirm_after == timedelta(hours=24)
    assert settings.delegate_max_depth == 2
    assert settings.fingerprint_limit == 3
    assert settings.platform_hidden == {"passportId", "clientId", "sessionType", "adminUser", "adminCompany"}
    assert settings.model == ModelSettings(base_url="https://api.openai.com/v1", api_key=None, timeout=60.0, retries=2)
    assert AgentSettings() == settings


def test_home_defaults_to_skillyard_home_from_the_environment(home: Path) -> None:
    write_settings(home, "[agent]\nfingerprint_limit = 7\n")
    assert AgentSettings.load(environ={"SKILLYARD_HOME": str(home)}).fingerprint_limit == 7
    assert AgentSettings.load().fingerprint_limit == 7  # conftest sets SKILLYARD_HOME in os.environ


def test_values_from_settings_toml(home: Path) -> None:
    write_settings(
        home,
        """
        [agent]
        write_confirm_bypass_tools = ["notes_write", "todo_add"]
        reconfirm_after = "90m"
        delegate_max_depth = 0
        fingerprint_limit = 5
        platform_hidden = ["tenantId"]

        [agent.model]
        base_url = "http://127.0.0.1:8000/v1/"
        api_key = "file-key"
        timeout = 12.5
        retries = 0
        """,
    )
    settings = AgentSettings.load(home, environ={})
    assert settings.write_confirm_bypass_tools == {"notes_write", "todo_add"}
    assert settings.reconfirm_after == timedelta(minutes=90)
    assert settings.delegate_max_depth == 0
    assert settings.fingerprint_limit == 5
    assert settings.platform_hidden == {"tenantId"}
    assert settings.model == ModelSettings("http://127.0.0.1:8000/v1", "file-key", 12.5, 0)


def test_environment_overrides_win(home: Path) -> None:
    write_settings(
        home,
        """
        [agent]
        write_confirm_bypass_tools = ["notes_write"]
        reconfirm_after = 60
        delegate_max_depth = 1
        fingerprint_limit = 5
        platform_hidden = ["tenantId"]
        [agent.model]
        base_url = "http://127.0.0.1:8000/v1"
        api_key = "file-key"
        timeout = 12
        retries = 1
        """,
    )
    env = {
        "SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS": " a_write, b_write ,,",
        "SKILLYARD_AGENT_RECONFIRM_AFTER": "1d",
        "SKILLYARD_AGENT_DELEGATE_MAX_DEPTH": "4",
        "SKILLYARD_AGENT_FINGERPRINT_LIMIT": "9",
        "SKILLYARD_AGENT_PLATFORM_HIDDEN": "userId,orgId",
        "SKILLYARD_MODEL_BASE_URL": "http://127.0.0.1:9000/v1",
        "SKILLYARD_MODEL_API_KEY": "env-key",
        "SKILLYARD_MODEL_TIMEOUT": "3",
        "SKILLYARD_MODEL_RETRIES": "5",
        "OPENAI_API_KEY": "openai-key",
    }
    settings = AgentSettings.load(home, environ=env)
    assert settings.write_confirm_bypass_tools == {"a_write", "b_write"}
    assert settings.reconfirm_after == timedelta(days=1)
    assert settings.delegate_max_depth == 4
    assert settings.fingerprint_limit == 9
    assert settings.platform_hidden == {"userId", "orgId"}
    assert settings.model == ModelSettings("http://127.0.0.1:9000/v1", "env-key", 3.0, 5)


def test_empty_environment_variables_count_as_unset(home: Path) -> None:
    env = {"SKILLYARD_AGENT_FINGERPRINT_LIMIT": "", "SKILLYARD_AGENT_PLATFORM_HIDDEN": "  "}
    settings = AgentSettings.load(home, environ=env)
    assert settings.fingerprint_limit == 3
    assert settings.platform_hidden == DEFAULT_PLATFORM_HIDDEN


def test_api_key_precedence_and_openai_fallbacks(home: Path) -> None:
    assert AgentSettings.load(home, environ={"OPENAI_API_KEY": "o"}).model.api_key == "o"
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:7/v1"}
    assert AgentSettings.load(home, environ=env).model.base_url == "http://127.0.0.1:7/v1"
    write_settings(home, '[agent.model]\napi_key = "f"\nbase_url = "http://127.0.0.1:8/v1"\n')
    # the file beats the generic OPENAI_* variables, SKILLYARD_MODEL_* beats the file
    both = {"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": "http://127.0.0.1:7/v1"}
    assert AgentSettings.load(home, environ=both).model.api_key == "f"
    assert AgentSettings.load(home, environ=both).model.base_url == "http://127.0.0.1:8/v1"
    assert AgentSettings.load(home, environ={**both, "SKILLYARD_MODEL_API_KEY": "s"}).model.api_key == "s"


def test_api_key_is_not_in_repr(home: Path) -> None:
    write_settings(home, '[agent.model]\napi_key = "sk-very-secret"\n')
    settings = AgentSettings.load(home, environ={})
    assert settings.model.api_key == "sk-very-secret"
    assert "sk-very-secret" not in repr(settings)
    assert "sk-very-secret" not in repr(settings.model)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("90m", timedelta(minutes=90)),
        ("30s", timedelta(seconds=30)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        (" 2H ", timedelta(hours=2)),
        ("45", timedelta(seconds=45)),
        ("1.5", timedelta(seconds=1.5)),
        (3600, timedelta(hours=1)),
        (0, timedelta(0)),
    ],
)
def test_parse_duration(value: str | int, expected: timedelta) -> None:
    assert parse_duration(value) == expected


@pytest.mark.parametrize("value", ["", "soon", "24x", "h", "-5", "1h-3m", "24h junk", "nan", "inf"])
def test_parse_duration_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[agent]\nreconfirm_after = "tomorrow"\n', "reconfirm_after"),
        ("[agent]\nreconfirm_after = true\n", "reconfirm_after"),
        ('[agent]\nfingerprint_limit = "3"\n', "fingerprint_limit"),
        ("[agent]\nfingerprint_limit = 0\n", "fingerprint_limit"),
        ("[agent]\ndelegate_max_depth = -1\n", "delegate_max_depth"),
        ("[agent]\ndelegate_max_depth = true\n", "delegate_max_depth"),
        ("[agent]\ndelegate_max_depth = 1.5\n", "delegate_max_depth"),
        ('[agent]\nwrite_confirm_bypass_tools = "notes_write"\n', "write_confirm_bypass_tools"),
        ("[agent]\nplatform_hidden = [1, 2]\n", "platform_hidden"),
        ('[agent.model]\nbase_url = "127.0.0.1:8000"\n', "base_url"),
        ("[agent.model]\ntimeout = 0\n", "timeout"),
        ('[agent.model]\ntimeout = "slow"\n', "timeout"),
        ("[agent.model]\nretries = -1\n", "retries"),
    ],
)
def test_bad_toml_values_name_file_key_and_fix(home: Path, toml: str, key: str) -> None:
    path = write_settings(home, toml)
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={})
    message = str(info.value)
    assert str(path) in message
    assert f"] {key} = " in message
    assert "e.g." in message


def test_bad_api_key_type_does_not_echo_the_value(home: Path) -> None:
    write_settings(home, "[agent.model]\napi_key = 12345678\n")
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={})
    assert "12345678" not in str(info.value)
    assert "api_key" in str(info.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[agent\nfingerprint_limit = 3\n", "invalid TOML"),
        ('agent = "yes"\n', "[agent] header"),
        ('[agent]\nmodel = "gpt"\n', "[agent.model] header"),
    ],
)
def test_malformed_settings_file(home: Path, text: str, fragment: str) -> None:
    path = write_settings(home, text)
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={})
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_non_utf8_settings_file(home: Path) -> None:
    (home / "settings.toml").write_bytes(b"[agent]\nx = '\xff'\n")
    with pytest.raises(AgentSettingsError, match="UTF-8"):
        AgentSettings.load(home, environ={})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "three"),
        ("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "0"),
        ("SKILLYARD_AGENT_DELEGATE_MAX_DEPTH", "-1"),
        ("SKILLYARD_AGENT_RECONFIRM_AFTER", "a while"),
        ("SKILLYARD_MODEL_TIMEOUT", "0"),
        ("SKILLYARD_MODEL_TIMEOUT", "fast"),
        ("SKILLYARD_MODEL_RETRIES", "x"),
        ("SKILLYARD_MODEL_BASE_URL", "localhost:8000"),
    ],
)
def test_bad_environment_values_name_the_variable_and_fix(home: Path, name: str, value: str) -> None:
    with pytest.raises(AgentSettingsError) as info:
        AgentSettings.load(home, environ={name: value})
    message = str(info.value)
    assert f"{name}={value!r}" in message
    assert "e.g." in message


def test_unknown_keys_are_ignored_with_a_warning(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_settings(
        home,
        """
        [agent]
        fingerprint_limt = 9
        fingerprint_limit = 4
        [agent.model]
        temperature = 0.2
        [server]
        port = 1
        """,
    )
    with caplog.at_level(logging.WARNING, logger="skillyard.agent.settings"):
        settings = AgentSettings.load(home, environ={})
    assert settings.fingerprint_limit == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in w and "[agent] fingerprint_limt" in w for w in warnings)
    assert any("[agent.model] temperature" in w for w in warnings)
    assert not any("server" in w for w in warnings)  # other sections belong to other parts of skillyard
