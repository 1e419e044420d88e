"""``[service]`` of settings.toml: rate limits, body size, the agents the API serves and the inbound bindings.

```toml
[service]
rate_limit = 1200          # requests per token per window (0: no limit)
rate_window_s = 60         # the fixed window, in seconds
max_body_mb = 16           # the largest request body
agents_dir = "agents"      # a folder of agent folders (each with an AGENT.md); --agents-dir wins
model = "openai:gpt-4o"    # the agents' model; default [agent.model] spec
mcp_stateless = false      # true: /mcp holds no Mcp-Session-Id sessions in memory (no sticky routing needed)

[service.bindings.support]
channel = "telegram"       # feishu | wecom | dingtalk | telegram | slack | web
role_id = "support"        # whose send_message configs hold the inbound secrets and send the replies
org_id = "acme"            # the organisation the senders belong to
agent = "agents/notes"     # the agent that answers: a folder, or the code of an agent stored in the database
```

Every number, and ``mcp_stateless``, may be overridden by ``SKILLYARD_SERVICE_<KEY>``
(``SKILLYARD_SERVICE_RATE_LIMIT=100``, ``SKILLYARD_SERVICE_MCP_STATELESS=1``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import SkillyardError
from ..settings import SETTINGS_FILE, flag_env, read_settings_file

#: The channels whose webhooks ``/hooks/{channel}/{binding}`` understands.
HOOK_CHANNELS = ("feishu", "wecom", "dingtalk", "telegram", "slack", "web")
BINDING_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_BINDING_KEYS = {"channel", "role_id", "org_id", "agent"}
_SERVICE_KEYS = {"rate_limit", "rate_window_s", "max_body_mb", "agents_dir", "model", "mcp_stateless", "bindings"}


@dataclass(frozen=True)
class Binding:
    """One inbound endpoint: which channel posts to it, whose configs verify and answer it, which agent replies."""

    name: str
    channel: str
    role_id: str
    org_id: str
    agent: str


@dataclass(frozen=True)
class ServiceSettings:
    rate_limit: int = 1200
    rate_window_s: int = 60
    max_body_bytes: int = 16 * 1024 * 1024
    agents_dir: Path | None = None
    model: str | None = None
    mcp_stateless: bool = False
    bindings: Mapping[str, Binding] = field(default_factory=dict)

    @classmethod
    def load(cls, home: Path) -> ServiceSettings:
        path = home / SETTINGS_FILE
        table = read_settings_file(path).get("service", {})
        if not isinstance(table, dict):
            raise SkillyardError(f"{path}: 'service' must be a table; write these settings under [service]")
        unknown = sorted(set(table) - _SERVICE_KEYS)
        if unknown:
            raise SkillyardError(f"{path}: [service] has unknown keys {unknown}; known: {sorted(_SERVICE_KEYS)}")

        def whole(key: str, default: int, least: int) -> int:
            env = os.environ.get(f"SKILLYARD_SERVICE_{key.upper()}", "").strip()
            value: Any = env if env else table.get(key, default)
            try:
                number = int(value)
            except (TypeError, ValueError):
                number = least - 1
            if isinstance(value, bool) or number < least:
                where = f"SKILLYARD_SERVICE_{key.upper()}" if env else f"{path}: [service] {key}"
                raise SkillyardError(f"{where} = {value!r} is invalid; write a whole number >= {least}")
            return number

        agents_dir = table.get("agents_dir")
        model = table.get("model")
        for key, value in (("agents_dir", agents_dir), ("model", model)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise SkillyardError(f"{path}: [service] {key} must be a non-empty text")
        stateless: Any = table.get("mcp_stateless", False)
        if os.environ.get("SKILLYARD_SERVICE_MCP_STATELESS", "").strip():
            stateless = flag_env("SKILLYARD_SERVICE_MCP_STATELESS")
        if not isinstance(stateless, bool):
            raise SkillyardError(f"{path}: [service] mcp_stateless = {stateless!r} is invalid; write true or false")
        return cls(
            mcp_stateless=stateless,
            rate_limit=whole("rate_limit", cls.rate_limit, 0),
            rate_window_s=whole("rate_window_s", cls.rate_window_s, 1),
            max_body_bytes=whole("max_body_mb", 16, 1) * 1024 * 1024,
            agents_dir=Path(agents_dir).expanduser() if agents_dir else None,
            model=model,
            bindings=_bindings(table.get("bindings", {}), path),
        )


def _bindings(raw: Any, path: Path) -> dict[str, Binding]:
    if not isinstance(raw, dict):
        raise SkillyardError(f"{path}: [service.bindings.NAME] tables hold channel, role_id, org_id and agent")
    found = {}
    for name, spec in raw.items():
        where = f"{path}: [service.bindings.{name}]"
        if not BINDING_NAME.match(name):
            raise SkillyardError(f"{where}: the name must be 1-64 letters, digits, '_', '.', '-'")
        if not isinstance(spec, dict):
            raise SkillyardError(f"{where} must be a table with channel, role_id, org_id and agent")
        unknown = sorted(set(spec) - _BINDING_KEYS)
        if unknown:
            raise SkillyardError(f"{where} has unknown keys {unknown}; known: channel, role_id, org_id, agent")
        for key in sorted(_BINDING_KEYS):
            value = spec.get(key)
            if not isinstance(value, str) or (key != "role_id" and not value.strip()):
                raise SkillyardError(f'{where} needs {key} = "…" (text)')
        if spec["channel"] not in HOOK_CHANNELS:
            raise SkillyardError(
                f"{where}: channel {spec['channel']!r} has no inbound hook; use one of {HOOK_CHANNELS}"
            )
        found[name] = Binding(name, spec["channel"], spec["role_id"], spec["org_id"], spec["agent"])
    return found
