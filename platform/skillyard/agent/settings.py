"""Agent runtime settings: ``[agent]`` and ``[agent.model]`` of ``SKILLYARD_HOME/settings.toml``, env overrides win.

Precedence, highest first: a ``SKILLYARD_AGENT_*`` / ``SKILLYARD_MODEL_*`` environment variable, the value in
``settings.toml``, then (for the model key and base URL only) ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, then the
built-in default. An empty environment variable counts as unset. See docs/agent-models.md.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import SkillyardError
from ..settings import SETTINGS_FILE, read_settings_file

log = logging.getLogger("skillyard.agent.settings")

DEFAULT_PLATFORM_HIDDEN = frozenset({"passportId", "clientId", "sessionType", "adminUser", "adminCompany"})
DEFAULT_RECONFIRM_AFTER = timedelta(hours=24)
DEFAULT_DELEGATE_MAX_DEPTH = 2
DEFAULT_FINGERPRINT_LIMIT = 3
DEFAULT_MODEL_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL_TIMEOUT = 60.0
DEFAULT_MODEL_RETRIES = 2

_AGENT_KEYS = frozenset(
    {"write_confirm_bypass_tools", "reconfirm_after", "delegate_max_depth", "fingerprint_limit", "platform_hidden"}
)
_MODEL_KEYS = frozenset({"spec", "base_url", "api_key", "timeout", "retries"})
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class AgentSettingsError(SkillyardError):
    """A malformed settings.toml or setting value; the message names the file or variable, the key and the fix."""


@dataclass(frozen=True)
class ModelSettings:
    """How ``openai:MODEL`` reaches the chat-completions API. The key is never part of repr."""

    base_url: str = DEFAULT_MODEL_BASE_URL
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_MODEL_TIMEOUT
    retries: int = DEFAULT_MODEL_RETRIES
    spec: str | None = None  # the default model when none is given: "openai:MODEL" or "script:FILE.yaml"


@dataclass(frozen=True)
class AgentSettings:
    """Resolved agent runtime settings (defaults, then settings.toml, then the environment)."""

    write_confirm_bypass_tools: frozenset[str] = frozenset()
    reconfirm_after: timedelta = DEFAULT_RECONFIRM_AFTER
    delegate_max_depth: int = DEFAULT_DELEGATE_MAX_DEPTH
    fingerprint_limit: int = DEFAULT_FINGERPRINT_LIMIT
    platform_hidden: frozenset[str] = DEFAULT_PLATFORM_HIDDEN
    model: ModelSettings = field(default_factory=ModelSettings)

    @classmethod
    def load(cls, home: Path | None = None, environ: Mapping[str, str] | None = None) -> AgentSettings:
        """Read ``home/settings.toml`` (a missing file means defaults) and apply environment overrides.

        ``home`` defaults to ``SKILLYARD_HOME`` (else ``~/.skillyard``); ``environ`` defaults to ``os.environ``.
        Raises :class:`AgentSettingsError` for an unreadable file or a bad value; unknown keys are logged and ignored.
        """
        env = os.environ if environ is None else environ
        if home is None:
            home = Path(env.get("SKILLYARD_HOME") or Path.home() / ".skillyard").expanduser()
        path = home / SETTINGS_FILE
        agent, model = _read_file(path)
        f = _FileValues(path)
        e = _EnvValues(env)
        m = ModelSettings(
            spec=e.text("SKILLYARD_MODEL") or f.spec(model, "spec", "agent.model"),
            base_url=e.url("SKILLYARD_MODEL_BASE_URL")
            or f.url(model, "base_url", "agent.model")
            or e.url("OPENAI_BASE_URL")
            or DEFAULT_MODEL_BASE_URL,
            api_key=e.text("SKILLYARD_MODEL_API_KEY")
            or f.secret(model, "api_key", "agent.model")
            or e.text("OPENAI_API_KEY"),
            timeout=_first(
                e.seconds("SKILLYARD_MODEL_TIMEOUT"), f.seconds(model, "timeout", "agent.model"), DEFAULT_MODEL_TIMEOUT
            ),
            retries=_first(
                e.integer("SKILLYARD_MODEL_RETRIES", minimum=0),
                f.integer(model, "retries", "agent.model", minimum=0),
                DEFAULT_MODEL_RETRIES,
            ),
        )
        return cls(
            write_confirm_bypass_tools=_first(
                e.names("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS"),
                f.names(agent, "write_confirm_bypass_tools"),
                frozenset(),
            ),
            reconfirm_after=_first(
                e.duration("SKILLYARD_AGENT_RECONFIRM_AFTER"),
                f.duration(agent, "reconfirm_after"),
                DEFAULT_RECONFIRM_AFTER,
            ),
            delegate_max_depth=_first(
                e.integer("SKILLYARD_AGENT_DELEGATE_MAX_DEPTH", minimum=0),
                f.integer(agent, "delegate_max_depth", minimum=0),
                DEFAULT_DELEGATE_MAX_DEPTH,
            ),
            fingerprint_limit=_first(
                e.integer("SKILLYARD_AGENT_FINGERPRINT_LIMIT", minimum=1),
                f.integer(agent, "fingerprint_limit", minimum=1),
                DEFAULT_FINGERPRINT_LIMIT,
            ),
            platform_hidden=_first(
                e.names("SKILLYARD_AGENT_PLATFORM_HIDDEN"),
                f.names(agent, "platform_hidden"),
                DEFAULT_PLATFORM_HIDDEN,
            ),
            model=m,
        )


#: timedelta's own limit in whole days (about 2.7 million years): a longer duration cannot be represented.
_LONGEST_DURATION = timedelta.max.days * 86400.0


def parse_duration(value: str | int | float) -> timedelta:
    """``"24h"``, ``"90m"``, ``"30s"``, ``"1d"``, ``"1h30m"`` or plain seconds (number or numeric string).

    Raises ValueError with a short reason for anything else (negative, empty, unknown unit).
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration, got a boolean")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            raise ValueError(f"{value!r} is too long a duration") from None
    else:
        text = value.strip().lower()
        if not text:
            raise ValueError("empty duration")
        try:
            seconds = float(text)
        except ValueError:
            compact = text.replace(" ", "")
            parts = _DURATION_PART.findall(compact)
            if not parts or "".join(n + u for n, u in parts) != compact:
                raise ValueError(f"{value!r} is not a duration") from None
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} is not a non-negative duration")
    if seconds > _LONGEST_DURATION:
        raise ValueError(f"{value!r} is too long a duration (at most {timedelta.max.days:,} days)")
    return timedelta(seconds=seconds)


def _first(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _read_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``[agent]`` table (without ``model``) and the ``[agent.model]`` table; empty when absent."""
    try:
        data = read_settings_file(path)
    except SkillyardError as exc:  # the same messages, as the agent's own error type
        raise AgentSettingsError(str(exc)) from None
    agent = data.get("agent", {})
    if not isinstance(agent, dict):
        raise AgentSettingsError(f"{path}: 'agent' must be a table; write the agent settings under an [agent] header")
    agent = dict(agent)
    model = agent.pop("model", {})
    if not isinstance(model, dict):
        raise AgentSettingsError(
            f"{path}: [agent] model must be a table; write the model settings under an [agent.model] header"
        )
    for key in sorted(set(agent) - _AGENT_KEYS):
        log.warning("%s: unknown key [agent] %s ignored (known: %s)", path, key, ", ".join(sorted(_AGENT_KEYS)))
    for key in sorted(set(model) - _MODEL_KEYS):
        log.warning("%s: unknown key [agent.model] %s ignored (known: %s)", path, key, ", ".join(sorted(_MODEL_KEYS)))
    return agent, model


class _FileValues:
    """Typed reads from a settings.toml table; errors name the file, the table, the key and the fix."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _fail(self, table: str, key: str, value: Any, fix: str) -> AgentSettingsError:
        shown = "<hidden>" if key == "api_key" else repr(value)
        return AgentSettingsError(f"{self.path}: [{table}] {key} = {shown} is invalid; {fix}")

    def names(self, data: dict[str, Any], key: str, table: str = "agent") -> frozenset[str] | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise self._fail(table, key, value, f'write a list of names, e.g. {key} = ["name_a", "name_b"]')
        return frozenset(v.strip() for v in value)

    def duration(self, data: dict[str, Any], key: str, table: str = "agent") -> timedelta | None:
        if key not in data:
            return None
        value = data[key]
        try:
            if not isinstance(value, str | int | float):
                raise ValueError("not a duration")
            return parse_duration(value)
        except ValueError:
            raise self._fail(
                table, key, value, f'write a duration such as "24h", "90m", "30s", "1d" or seconds, e.g. {key} = "24h"'
            ) from None

    def seconds(self, data: dict[str, Any], key: str, table: str = "agent") -> float | None:
        if key not in data:
            return None
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise self._fail(table, key, value, f"write a positive number of seconds, e.g. {key} = 60")
        return float(value)

    def integer(self, data: dict[str, Any], key: str, table: str = "agent", *, minimum: int) -> int | None:
        if key not in data:
            return None
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._fail(table, key, value, f"write a whole number >= {minimum}, e.g. {key} = {max(minimum, 2)}")
        return value

    def url(self, data: dict[str, Any], key: str, table: str) -> str | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, str) or not value.strip().lower().startswith(("http://", "https://")):
            raise self._fail(table, key, value, f'write an http(s) URL, e.g. {key} = "{DEFAULT_MODEL_BASE_URL}"')
        return value.strip().rstrip("/")

    def spec(self, data: dict[str, Any], key: str, table: str) -> str | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, str) or not value.strip():
            raise self._fail(table, key, value, f'write a model spec, e.g. {key} = "openai:gpt-4o-mini"')
        return value.strip()

    def secret(self, data: dict[str, Any], key: str, table: str) -> str | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, str):
            raise self._fail(table, key, value, f'write the key as a string, e.g. {key} = "sk-...", or unset it')
        return value.strip() or None


class _EnvValues:
    """Typed reads from environment variables; empty means unset; errors name the variable and the fix."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def text(self, name: str) -> str | None:
        return self.env.get(name, "").strip() or None

    def _fail(self, name: str, value: str, fix: str) -> AgentSettingsError:
        shown = "<hidden>" if "KEY" in name else repr(value)
        return AgentSettingsError(f"environment variable {name}={shown} is invalid; {fix}")

    def names(self, name: str) -> frozenset[str] | None:
        value = self.text(name)
        if value is None:
            return None
        return frozenset(v.strip() for v in value.split(",") if v.strip())

    def duration(self, name: str) -> timedelta | None:
        value = self.text(name)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError:
            raise self._fail(
                name, value, f"set a duration such as 24h, 90m, 30s, 1d or seconds, e.g. {name}=24h"
            ) from None

    def seconds(self, name: str) -> float | None:
        value = self.text(name)
        if value is None:
            return None
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds <= 0:
            raise self._fail(name, value, f"set a positive number of seconds, e.g. {name}=60")
        return seconds

    def integer(self, name: str, *, minimum: int) -> int | None:
        value = self.text(name)
        if value is None:
            return None
        try:
            number = int(value)
        except ValueError:
            number = minimum - 1
        if number < minimum:
            raise self._fail(name, value, f"set a whole number >= {minimum}, e.g. {name}={max(minimum, 2)}")
        return number

    def url(self, name: str) -> str | None:
        value = self.text(name)
        if value is None:
            return None
        if not value.lower().startswith(("http://", "https://")):
            raise self._fail(name, value, f"set an http(s) URL, e.g. {name}={DEFAULT_MODEL_BASE_URL}")
        return value.rstrip("/")
