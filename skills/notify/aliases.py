"""Notify aliases: named Apprise targets an admin sets per role (URLs, or an Apprise config file with tags).

An alias is stored as the config ``alias_<name>`` of the skill ``notify`` (JSON), which the skill declares secret
(``alias_*``), so it is encrypted like every credential and reaches the skill's runs as its own config. Used by the
skill (reading) and by ``skillyard notify alias`` (writing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SKILL = "notify"
PREFIX = "alias_"
NAME = re.compile(r"\A[a-z0-9][a-z0-9_]{0,63}\Z")
#: The alias used when a call names no target.
DEFAULT_ALIAS = "default"


class AliasError(ValueError):
    """An alias that cannot be stored or used; the message names the problem and the fix."""


@dataclass(frozen=True)
class Alias:
    name: str
    urls: tuple[str, ...] = ()
    config: str | None = None  # the text of an Apprise config file (YAML or TEXT: Apprise tells them apart)
    tags: tuple[str, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(
            {"urls": list(self.urls), "config": self.config, "tags": list(self.tags)},
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, name: str, text: str) -> Alias:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise AliasError(f"the stored alias {name!r} is not readable; set it again with skillyard notify alias set")
        return cls(
            name,
            tuple(str(u) for u in data.get("urls") or []),
            data.get("config"),
            tuple(str(t) for t in data.get("tags") or []),
        )

    def masked(self) -> dict[str, Any]:
        """What ``alias list`` shows: each URL's scheme and host only, never its tokens."""
        return {
            "name": self.name,
            "urls": [mask_url(u) for u in self.urls],
            "config": f"Apprise config ({len(self.config)} characters)" if self.config else None,
            "tags": list(self.tags),
        }


def check_name(name: str) -> str:
    """An alias name as stored: lower-case letters, digits and ``_``, starting with a letter or digit."""
    text = name.strip().lower()
    if not NAME.match(text):
        raise AliasError(
            f"alias name {name!r} is not usable: use 1-64 lower-case letters, digits or '_' (e.g. ops, sales_team)"
        )
    return text


def mask_url(url: str) -> str:
    """``scheme://host/…`` without credentials, path or query: enough to tell targets apart."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}/…" if parts.scheme else "(not a URL)"


def aliases_of(configs: Mapping[str, Any]) -> dict[str, str]:
    """The stored aliases among a run's configs, by name (their JSON text)."""
    return {k[len(PREFIX) :]: str(v) for k, v in configs.items() if k.startswith(PREFIX) and isinstance(v, str) and v}
