"""What a token carries: the platform segment a caller presenting it runs as (§4.3, §4.8), checked when it is made."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from ..invoke.context import ACTOR_KEYS

#: The fields ``--identity`` may set; org, role and admin come from their own options.
TEXT_FIELDS = ("team_role", "user_id", "team_id", "actor_id", *(k for k in ACTOR_KEYS if k != "actor_tags"))
FLAG_FIELDS = ("chat_mode", "allow_sql")
LIST_FIELDS = ("actor_tags",)
IDENTITY_FIELDS = (*TEXT_FIELDS, *FLAG_FIELDS, *LIST_FIELDS)
#: A caller over MCP is a conversation (a large delete asks for confirmation, §7.7); the SQL channel is opt-in.
DEFAULTS: dict[str, Any] = {"chat_mode": True, "allow_sql": False}


def parse_identity(value: Mapping[str, Any]) -> dict[str, Any]:
    """The ``--identity`` fields, checked: only known names, text as text, flags as booleans, tags as a list of
    text. Anything else is refused naming the field and the fix."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in ("org_id", "role_id", "is_admin"):
            raise InvalidInput(f"--identity may not set {key!r}; use --org, --role and --admin")
        if key not in IDENTITY_FIELDS:
            raise InvalidInput(f"--identity has an unknown field {key!r}; known: {', '.join(IDENTITY_FIELDS)}")
        if key in FLAG_FIELDS and not isinstance(item, bool):
            raise InvalidInput(f"--identity field {key!r} must be true or false, not {item!r}")
        if key in TEXT_FIELDS and not isinstance(item, str):
            raise InvalidInput(f"--identity field {key!r} must be a text, not {type(item).__name__}")
        if key in LIST_FIELDS and not (isinstance(item, list) and all(isinstance(t, str) for t in item)):
            raise InvalidInput(f'--identity field {key!r} must be a list of texts, e.g. ["sales"]')
        out[key] = item
    return out


@dataclass(frozen=True)
class TokenIdentity:
    """A token's name and the runtime_context fields it fixes: a caller can change none of them."""

    name: str
    org_id: str
    role_id: str
    is_admin: bool = False
    fields: Mapping[str, Any] = field(default_factory=dict)

    def context(self) -> dict[str, Any]:
        """The platform segment a run of this caller gets. ``is_admin`` is admin of its own organisation only:
        ``org_id`` is fixed with it; ``actor_is_admin`` (§4.4, an admin filling in for someone) is never set."""
        return {
            **DEFAULTS,
            **self.fields,
            "org_id": self.org_id,
            "role_id": self.role_id,
            "is_admin": self.is_admin,
            "actor_is_admin": False,
        }

    def describe(self) -> dict[str, Any]:
        """The ``token list --json`` shape (never the token or its hash)."""
        return {
            "name": self.name,
            "org_id": self.org_id,
            "role_id": self.role_id,
            "is_admin": self.is_admin,
            "identity": dict(self.fields),
        }
