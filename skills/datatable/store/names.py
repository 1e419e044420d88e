"""The names the datatable skill claims in PostgreSQL, each rule written once: the organisation's schema, the
``_dt_`` prefix of the skill's own tables and objects, and the classes of its advisory locks.

Every module that builds or checks one of these names imports it from here, so a change of rule (such as an
ownership table instead of the bare schema-name rule) is a change of this module only.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Any

__all__ = [
    "DIGEST_LENGTHS",
    "FIELDS_TABLE",
    "GRANTS_TABLE",
    "KEY_LOCK_CLASS",
    "MAX_NAME_BYTES",
    "META_PREFIX",
    "META_TABLES",
    "OWNERS_TABLE",
    "OWN_POLICY",
    "REGISTRY_SCHEMA",
    "ROLE_LOCK_CLASS",
    "SCHEMA_LOCK_CLASS",
    "SCHEMA_PREFIX",
    "TABLES_TABLE",
    "TOKENS_TABLE",
    "is_org_schema",
    "legacy_schema_name",
    "org_key",
    "schema_name",
    "temporary_name",
    "unique_name",
]

#: PostgreSQL keeps at most NAMEDATALEN - 1 bytes of a name and silently cuts the rest.
MAX_NAME_BYTES = 63

#: Each organisation's tables live in a schema named by :func:`schema_name` (``org_data_<org key>[_<hash>]``),
#: recorded with its owner in the registry (store/owners.py).
SCHEMA_PREFIX = "org_data_"
_SCHEMA_RE = re.compile(re.escape(SCHEMA_PREFIX) + "[a-z0-9]+(?:_[0-9a-f]{8,64})?")
_NOT_KEY = re.compile(r"[^a-z0-9]")
#: Hex digits of the organisation id's SHA-256 in a schema name, tried in turn (a longer one after a collision).
DIGEST_LENGTHS = (8, 16, 64)

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
#: The schema and table of the registry: which raw organisation id owns which schema.
REGISTRY_SCHEMA = META_PREFIX + "registry"
OWNERS_TABLE = "schema_owners"

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
    """Whether ``schema`` has the shape of an organisation's schema name (:func:`schema_name`)."""
    return isinstance(schema, str) and _SCHEMA_RE.fullmatch(schema) is not None


def schema_name(org_id: str, digest: int = DIGEST_LENGTHS[0]) -> str:
    """The schema an organisation id gets: ``org_data_<key>`` when the id is its own key (``acme``); any other id
    (``ACME``, ``a-c-m-e``, ``华为1``, one that leaves nothing) gets ``org_data_<key or h>_<hex of SHA-256(id)>``, so
    two different ids never share a schema. Names stay within PostgreSQL's 63 bytes: the key is shortened before
    the hash, never the hash cut off."""
    key = org_key(org_id)
    if key and org_id == key and len(SCHEMA_PREFIX) + len(key) <= MAX_NAME_BYTES:
        return SCHEMA_PREFIX + key
    hexdigest = hashlib.sha256(org_id.encode("utf-8", "surrogatepass")).hexdigest()[:digest]
    room = MAX_NAME_BYTES - len(SCHEMA_PREFIX) - 1 - len(hexdigest)
    return f"{SCHEMA_PREFIX}{(key or 'h')[:room]}_{hexdigest}"


def legacy_schema_name(org_id: str) -> str | None:
    """The schema the rule before the registry gave ``org_id`` (``org_data_`` and its key), if that was a name."""
    key = org_key(org_id)
    name = SCHEMA_PREFIX + key
    return name if key and len(name) <= MAX_NAME_BYTES else None


def unique_name(field_id: uuid.UUID) -> str:
    """The UNIQUE constraint of a field, named by the field's id so that renaming the field does not matter."""
    return f"{META_PREFIX}uq_{field_id.hex}"


def temporary_name(purpose: str) -> str:
    """A fresh name for a temporary object of the skill (a staging table, a lookup function)."""
    return f"{META_PREFIX}{purpose}_{uuid.uuid4().hex}"
