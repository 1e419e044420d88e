"""The names the datatable skill claims in PostgreSQL, each rule written once: the organisation's schema, the
``_dt_`` prefix of the skill's own tables and objects, and the classes of its advisory locks.

Every module that builds or checks one of these names imports it from here, so a change of rule (such as an
ownership table instead of the bare schema-name rule) is a change of this module only.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

__all__ = [
    "FIELDS_TABLE",
    "GRANTS_TABLE",
    "KEY_LOCK_CLASS",
    "MAX_NAME_BYTES",
    "META_PREFIX",
    "META_TABLES",
    "OWN_POLICY",
    "ROLE_LOCK_CLASS",
    "SCHEMA_LOCK_CLASS",
    "SCHEMA_PREFIX",
    "TABLES_TABLE",
    "TOKENS_TABLE",
    "is_org_schema",
    "org_key",
    "temporary_name",
    "unique_name",
]

#: PostgreSQL keeps at most NAMEDATALEN - 1 bytes of a name and silently cuts the rest.
MAX_NAME_BYTES = 63

#: Each organisation's tables live in the schema ``org_data_<org key>`` (:func:`org_key`).
SCHEMA_PREFIX = "org_data_"
_SCHEMA_RE = re.compile(re.escape(SCHEMA_PREFIX) + "[a-z0-9]+")
_NOT_KEY = re.compile(r"[^a-z0-9]")

#: Names starting with this are the skill's own (metadata, grants, tokens, policies, constraints, temp tables):
#: never a user's table, never reachable on the SQL channel.
META_PREFIX = "_dt_"
TABLES_TABLE = META_PREFIX + "tables"
FIELDS_TABLE = META_PREFIX + "fields"
GRANTS_TABLE = META_PREFIX + "grants"
TOKENS_TABLE = META_PREFIX + "confirm_tokens"
#: The metadata tables describing the logical tables and their fields.
META_TABLES: frozenset[str] = frozenset({TABLES_TABLE, FIELDS_TABLE})
#: The row-level security policy of a table with an ``own`` grant.
OWN_POLICY = META_PREFIX + "own"

#: First key of the two-key advisory lock that serialises DDL in one org schema (the second is hashtext(schema)).
SCHEMA_LOCK_CLASS = 0x6474  # "dt"
#: First key of the advisory lock that serialises the SQL channel's role setup (the second is hashtext(role)).
ROLE_LOCK_CLASS = 0x5D7C
#: First key of the advisory locks that serialise upserts of the same key values (the second is a key's hash).
KEY_LOCK_CLASS = 0x6B79  # "ky"


def org_key(org_id: Any) -> str:
    """The organisation id lower-cased with everything but a-z and 0-9 removed ("" when nothing is left)."""
    text = org_id if isinstance(org_id, str) else ("" if org_id is None else str(org_id))
    return _NOT_KEY.sub("", text.lower())


def is_org_schema(schema: Any) -> bool:
    """Whether ``schema`` is an organisation's schema name (``org_data_`` and lower-case letters and digits)."""
    return isinstance(schema, str) and _SCHEMA_RE.fullmatch(schema) is not None


def unique_name(field_id: uuid.UUID) -> str:
    """The UNIQUE constraint of a field, named by the field's id so that renaming the field does not matter."""
    return f"{META_PREFIX}uq_{field_id.hex}"


def temporary_name(purpose: str) -> str:
    """A fresh name for a temporary object of the skill (a staging table, a lookup function)."""
    return f"{META_PREFIX}{purpose}_{uuid.uuid4().hex}"
