"""runtime_context (§4): fixed fields with typed empty values, the platform segment, configs in four places."""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
import time
from collections.abc import Mapping
from typing import Any

from ..catalog.requires import as_bool
from ..configs.keys import normalize_key
from ..errors import InvalidInput
from .identity import department_path

ACTOR_KEYS = (
    "actor_name",
    "actor_emp_no",
    "actor_department",
    "actor_department_path",
    "actor_position",
    "actor_title",
    "actor_phone",
    "actor_email",
    "actor_tags",
    "actor_key",
)
#: §4.2: always present; the value is the empty value of the field's type when nothing is known.
FIXED_FIELDS: dict[str, Any] = {
    "raw_input": "",
    "attachments": [],
    **{k: "" for k in ACTOR_KEYS},
    "actor_tags": [],
    "channel": "",
    "triggered_at": 0.0,
    "triggered_at_str": "",
    "actor_id": "",
    "actor_is_admin": False,
}
#: §4.3: the platform segment, with the defaults the platform uses.
PLATFORM_FIELDS: dict[str, Any] = {
    "org_id": "",
    "role_id": "",
    "session_id": "",
    "user_id": "",
    "team_id": "",
    "team_role": "",
    "is_admin": False,
    "chat_mode": False,
    "allow_sql": True,
    "workspace_dir": "",
    "db": None,
    "db_factory": None,
    "abort_signal": None,
    "progress": None,  # when the caller listens (an MCP client): await ctx["progress"](done, total, message)
    "channel_registry": None,
    "request": None,
}
#: §4.4: cleared when an administrator fills a form on someone's behalf.
ADMIN_CLEARED = (
    "actor_title",
    "actor_department",
    "actor_department_path",
    "actor_position",
    "actor_tags",
    "actor_key",
    "actor_id",
    "actor_emp_no",
)
#: §9.1: exactly what call_skill passes from caller to callee.
CALL_PASS_KEYS = (
    "role_id",
    "session_id",
    "user_id",
    "team_id",
    "org_id",
    "team_role",
    "is_admin",
    "channel",
    "chat_mode",
    "workspace_dir",
    "channel_registry",
    "db_factory",
    "abort_signal",
    "allow_sql",
    *ACTOR_KEYS,
    "actor_id",
    "actor_is_admin",
)
#: Keys a subprocess never sees, whatever their name.
IN_PROCESS_ONLY = ("db", "db_factory", "call_skill", "abort_signal", "progress", "channel_registry", "request")
CONFIG_KEYS = ("skill_configs", "skill_args")
#: The context fields the platform itself names (§4, and the agent runtime's ``idempotency_key``, §14.2): never taken
#: for credentials, although ``actor_key`` and ``idempotency_key`` contain "key".
NAMED_FIELDS = frozenset({*FIXED_FIELDS, *PLATFORM_FIELDS, *CONFIG_KEYS, "idempotency_key"})


_DEFAULTS: dict[str, Any] = {**FIXED_FIELDS, **PLATFORM_FIELDS}
_EXTRA = object()


#: The times a calendar date can show (years 1 to 9999), in seconds since the epoch.
EARLIEST, LATEST = -62135596800.0, 253402300799.0


def _typed(key: str, value: Any, empty: Any) -> Any:
    """Coerce a caller-provided value to the type of the field's empty value."""
    if value is None:
        return empty.copy() if isinstance(empty, list) else empty
    if isinstance(empty, bool):
        return as_bool(value)
    if isinstance(empty, float):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not EARLIEST <= number <= LATEST:  # NaN fails both; a time a calendar cannot show is no time
            raise InvalidInput(
                f"context field {key!r} must be a number of seconds since the epoch between years 1 and 9999, got "
                f"{value!r}; pass e.g. 1767225600.0 or leave it out (the platform fills in now)"
            ) from None
        return number
    if isinstance(empty, list):
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return list(value) if isinstance(value, (list, tuple)) else [value]
    if isinstance(empty, str):
        return value if isinstance(value, str) else str(value)
    return value


@functools.lru_cache(maxsize=64)
def _minute_string(minute: int) -> str:
    return dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")


def minute_string(timestamp: float) -> str:
    """``YYYY-MM-DD HH:MM`` in UTC (cached per minute: every run formats the current time)."""
    return _minute_string(int(timestamp // 60))


def base_context(given: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """Fixed and platform fields from what the caller gave, typed, admin-fill cleared, paths normalized."""
    ctx: dict[str, Any] = {**_DEFAULTS, "attachments": [], "actor_tags": []}
    for key, value in given.items():
        empty = _DEFAULTS.get(key, _EXTRA)
        if empty is not _EXTRA:
            ctx[key] = _typed(key, value, empty)
        elif key not in CONFIG_KEYS:  # extra keys the caller chose to pass (e.g. org_name) stay
            ctx[key] = value
    if not ctx["triggered_at"]:
        ctx["triggered_at"] = time.time() if now is None else now
    if not ctx["triggered_at_str"]:
        ctx["triggered_at_str"] = minute_string(ctx["triggered_at"])
    ctx["actor_department_path"] = department_path(ctx["actor_department_path"])
    if ctx["actor_is_admin"]:
        for key in ADMIN_CLEARED:
            ctx[key] = [] if isinstance(FIXED_FIELDS[key], list) else ""
    return ctx


def effective_configs(skill_name: str, stored: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """Stored configs, overridden by what the caller passed in ``skill_configs``/``skill_args``.

    Callers pass configs for background runs (pre-fetched before dispatch, §8) and for tests; keys are
    normalized (``--api-token`` → ``api_token``).
    """
    merged = {normalize_key(k): v for k, v in stored.items()} if stored else {}
    for source in (given.get("skill_configs"), given.get("skill_args")):
        if isinstance(source, Mapping):
            merged.update({normalize_key(str(k)): v for k, v in source.items() if not isinstance(v, Mapping)})
            nested = source.get(skill_name)
            if isinstance(nested, Mapping):
                merged.update({normalize_key(str(k)): v for k, v in nested.items()})
    return merged


def inject_configs(ctx: dict[str, Any], skill_name: str, configs: Mapping[str, Any]) -> None:
    """Put configs in the four places of §5.1: nested by skill, flat in skill_configs, skill_args, top level.

    Top-level copies never replace a platform or fixed field.
    """
    ctx["skill_configs"] = {**configs, skill_name: dict(configs)}
    ctx["skill_args"] = dict(configs)
    for key, value in configs.items():
        if key not in FIXED_FIELDS and key not in PLATFORM_FIELDS and key not in ctx:
            ctx[key] = value


def callee_context(caller: Mapping[str, Any]) -> dict[str, Any]:
    """The context call_skill hands on: exactly the §9.1 whitelist, nothing else."""
    return {k: caller[k] for k in CALL_PASS_KEYS if k in caller}


def subprocess_context(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-serializable part of a context for SKILL_CONTEXT: no ``_`` keys, no live objects."""
    out: dict[str, Any] = {}
    for key, value in ctx.items():
        if key.startswith("_") or key in IN_PROCESS_ONLY:
            continue
        if value is None or isinstance(value, (str, int, float, bool, list, dict)):
            out[key] = value
    return out


def config_value(name: str, configs: Mapping[str, Any]) -> str | None:
    """A declared variable's value from configs: the exact name, then its lower-case form (``API_KEY`` is
    usually saved as ``api_key``). Empty values count as unset."""
    for key in (name, name.lower()):
        value = configs.get(key)
        if value is not None and str(value).strip():
            return str(value)
    return None


def host_env(name: str) -> str | None:
    """A variable of the host's environment a skill declared, or None: never one of skillyard's own ``SKILLYARD_*``
    (the master key, the database URL), whatever the skill declares."""
    if name.upper().startswith("SKILLYARD_"):
        return None
    value = os.environ.get(name, "")
    return value if value.strip() else None


def credential_value(name: str, configs: Mapping[str, Any]) -> str | None:
    """A declared credential: configs first, then the host environment (§5.2; never ``SKILLYARD_*``)."""
    found = config_value(name, configs)
    if found is not None:
        return found
    return host_env(name)
