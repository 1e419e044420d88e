"""Storage model of the datatable skill (spec §7.1, §7.3): schemas, the metadata tables, the connection and the
lookups of tables and fields; the structure actions are in structure/, the names the store claims in
store/names.py.

Plain async functions over an asyncpg connection. The handler takes the connection from the platform's session with
:func:`raw_connection`; every function that writes runs inside ``conn.transaction()``, which is a SAVEPOINT when the
session already has a transaction open, so a failed action leaves nothing behind and the caller still commits.

Storage model:

* one PostgreSQL schema per organisation, named by store/names.py and recorded with its owner by store/owners.py;
* each logical table is a real table named by its (Chinese) title, with the system columns ``id bigserial primary
  key`` and ``created_at timestamptz default now()``;
* the business meaning of fields (type, required, unique, options, precision, scale, order) lives in the metadata
  tables of the schema (:data:`~.names.META_TABLES`), never inferred from information_schema.

Decisions:

* ``required`` is metadata only (checked by the row validator on insert, §7.5), not ``NOT NULL``: a required field
  can be added to a table that already has rows, and updates do not re-check it.
* ``unique`` is a real UNIQUE constraint (named by the field's id, :func:`~.names.unique_name`, so renames do not
  matter): on_conflict=skip and duplicate refusal rely on it.
* Identifiers are always double-quoted by :func:`quote_ident`; values always travel as ``$n`` parameters.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import asyncpg

from ..fields.types import FieldDef
from .names import (
    FIELDS_TABLE,
    SCHEMA_LOCK_CLASS,
    SCHEMA_PREFIX,
    TABLES_TABLE,
    is_org_schema,
)

__all__ = [
    "MAX_FIELDS",
    "StoreError",
    "TableInfo",
    "as_uuid",
    "check_schema",
    "column_sql",
    "connection_probing",
    "drop_object",
    "ensure_schema",
    "field_def",
    "field_rows",
    "has_metadata",
    "has_unique_index",
    "insert_field_meta",
    "list_columns",
    "list_tables",
    "load_fields",
    "lock_schema",
    "qualified_name",
    "quote_ident",
    "raw_connection",
    "raw_connection_probing",
    "resolve_table",
]


#: Business fields per table. PostgreSQL allows 1600 columns; a table with more than 200 fields is a design error.
MAX_FIELDS = 200


class StoreError(ValueError):
    """An action was refused or failed; the message says what was wrong and how to fix it.

    ``error_type`` is ``recoverable`` (change the parameters and it works), ``config`` (deployment / setup problem) or
    ``transient``; ``non_retriable`` is True only when retrying with the same input cannot work for deployment
    reasons; ``need_param`` names the parameter to fix.
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "recoverable",
        non_retriable: bool = False,
        need_param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.non_retriable = non_retriable
        self.need_param = need_param


@dataclass(frozen=True)
class TableInfo:
    """A resolved table. ``fields`` holds its business fields when they were read together with the table (in the
    same transaction, by permissions/access.py's ``table_access``), so the row functions need not read them again."""

    id: str
    title: str
    schema: str
    fields: tuple[FieldDef, ...] | None = dataclass_field(default=None, compare=False, repr=False)

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.title)}"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "schema": self.schema, "qualified": self.qualified}


def quote_ident(name: str) -> str:
    """A PostgreSQL quoted identifier: ``"name"`` with embedded double quotes doubled."""
    if "\x00" in name:
        raise StoreError("an identifier cannot contain a NUL character")
    return '"' + name.replace('"', '""') + '"'


async def raw_connection(session: Any) -> asyncpg.Connection:
    """The asyncpg connection under a SQLAlchemy AsyncSession, inside the session's transaction.

    SQLAlchemy's asyncpg adapter sends BEGIN only with the first statement, so one trivial statement is run first:
    without it the actions here would run outside the session's transaction (and commit on their own). The
    session's commit / rollback then decides, and each action is a SAVEPOINT inside it.
    """
    conn, _ = await raw_connection_probing(session, ())
    return conn


async def raw_connection_probing(session: Any, relations: Sequence[str]) -> tuple[asyncpg.Connection, tuple[bool, ...]]:
    """:func:`raw_connection` whose first statement (the one that starts the session's transaction) also tells
    which of ``relations`` (qualified, quoted names) exist, as ``to_regclass`` would: one round trip for both."""
    return await connection_probing(await session.connection(), relations)


async def connection_probing(connection: Any, relations: Sequence[str]) -> tuple[asyncpg.Connection, tuple[bool, ...]]:
    """:func:`raw_connection_probing` on the session's (SQLAlchemy) connection."""
    if relations:
        checks = ", ".join(f"to_regclass(${i}) IS NOT NULL" for i in range(1, len(relations) + 1))
        row = (await connection.exec_driver_sql(f"SELECT {checks}", tuple(relations))).one()
        found = tuple(bool(value) for value in row)
    else:
        await connection.exec_driver_sql("SELECT 1")
        found = ()
    raw = await connection.get_raw_connection()
    return raw.driver_connection, found


def check_schema(schema: str) -> str:
    """``schema`` when it is an organisation's schema name, else a config error (a caller's bug)."""
    if not is_org_schema(schema):
        raise StoreError(
            f"schema must be an organisation schema ({SCHEMA_PREFIX}…), got {schema!r}; resolve it with "
            "store.owners.resolve_schema(conn, org_id)",
            error_type="config",
            non_retriable=True,
        )
    return schema


def qualified_name(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


async def lock_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Serialise DDL in ``schema`` until the end of the transaction (concurrent creates would collide)."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", SCHEMA_LOCK_CLASS, schema)


async def has_metadata(conn: asyncpg.Connection, schema: str) -> bool:
    """Whether the schema's metadata tables exist (nothing was ever created there otherwise)."""
    return bool(await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", qualified_name(schema, FIELDS_TABLE)))


async def has_unique_index(conn: asyncpg.Connection, table: TableInfo) -> bool:
    """Whether the table has a unique constraint or index besides its primary key (on_conflict=skip needs one)."""
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = $1::regclass AND indisunique AND NOT indisprimary)",
            table.qualified,
        )
    )


async def ensure_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Create the org schema and its metadata tables when missing; idempotent and safe under concurrency."""
    check_schema(schema)
    if await has_metadata(conn, schema):
        return
    tables, fields = qualified_name(schema, TABLES_TABLE), qualified_name(schema, FIELDS_TABLE)
    async with conn.transaction():
        await lock_schema(conn, schema)  # concurrent CREATE SCHEMA IF NOT EXISTS can still collide; serialise
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {tables} (
                id uuid PRIMARY KEY,
                title text NOT NULL UNIQUE,
                created_at timestamptz NOT NULL DEFAULT now()
            )"""
        )
        await conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {fields} (
                id uuid PRIMARY KEY,
                table_id uuid NOT NULL REFERENCES {tables} (id) ON DELETE CASCADE,
                title text NOT NULL,
                uidt text NOT NULL,
                required boolean NOT NULL DEFAULT false,
                "unique" boolean NOT NULL DEFAULT false,
                options text[] NOT NULL DEFAULT '{{}}',
                "precision" integer,
                scale integer,
                position integer NOT NULL,
                UNIQUE (table_id, title)
            )"""
        )


def column_sql(field: FieldDef) -> str:
    return f"{quote_ident(field.title)} {field.pg_type()}"


async def insert_field_meta(
    conn: asyncpg.Connection, schema: str, table_id: str, field_id: uuid.UUID, field: FieldDef, position: int
) -> None:
    await conn.execute(
        f"""INSERT INTO {qualified_name(schema, FIELDS_TABLE)}
            (id, table_id, title, uidt, required, "unique", options, "precision", scale, position)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)""",
        field_id,
        uuid.UUID(table_id),
        field.title,
        field.uidt,
        field.required,
        field.unique,
        list(field.options),
        field.precision,
        field.scale,
        position,
    )


async def list_tables(conn: asyncpg.Connection, schema: str) -> list[dict[str, Any]]:
    """``[{id, title, schema, qualified}]`` in creation order (empty when the org has no tables yet)."""
    check_schema(schema)
    if not await has_metadata(conn, schema):
        return []
    rows = await conn.fetch(f"SELECT id, title FROM {qualified_name(schema, TABLES_TABLE)} ORDER BY created_at, title")
    return [TableInfo(str(r["id"]), r["title"], schema).as_dict() for r in rows]


async def drop_object(conn: asyncpg.Connection, statement: str, what: str, need_param: str) -> None:
    """Run a DROP in a savepoint; objects that depend on it (views) make it a recoverable refusal naming them."""
    try:
        async with conn.transaction():
            await conn.execute(statement)
    except asyncpg.DependentObjectsStillExistError as exc:
        raise StoreError(
            f"{what} is used by other objects ({exc.detail or exc}); drop those views first with sql_execute "
            "(DROP VIEW <name>; owner/admin), then try again",
            need_param=need_param,
        ) from None


def as_uuid(value: Any) -> uuid.UUID | None:
    """``value`` as a UUID (a table id), or None when it is not one (then it may be a title)."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


async def resolve_table(
    conn: asyncpg.Connection, schema: str, table_id: Any = None, table_name: Any = None
) -> TableInfo:
    """The table by UUID (``table_id``) or exact title (``table_name``, or a ``table_id`` that is not a UUID)."""
    check_schema(schema)
    has_meta = await has_metadata(conn, schema)
    wanted = table_id if table_id not in (None, "") else table_name
    if wanted not in (None, "") and has_meta:
        key = as_uuid(wanted)
        if key is not None:
            row = await conn.fetchrow(
                f"SELECT id, title FROM {qualified_name(schema, TABLES_TABLE)} WHERE id = $1", key
            )
        elif isinstance(wanted, str):
            row = await conn.fetchrow(
                f"SELECT id, title FROM {qualified_name(schema, TABLES_TABLE)} WHERE title = $1", wanted.strip()
            )
        else:
            row = None
        if row is not None:
            return TableInfo(str(row["id"]), row["title"], schema)
    titles = (
        [
            r["title"]
            for r in await conn.fetch(f"SELECT title FROM {qualified_name(schema, TABLES_TABLE)} ORDER BY created_at")
        ]
        if has_meta
        else []
    )
    available = "; tables are: " + ", ".join(titles) if titles else "; this organisation has no tables yet"
    if wanted in (None, ""):
        raise StoreError(
            "table_id is required (the table's UUID from list_tables, or its exact title)" + available,
            need_param="table_id",
        )
    raise StoreError(
        f"no table {wanted!r}{available}; pass table_id from list_tables or the exact title", need_param="table_id"
    )


async def field_rows(conn: asyncpg.Connection, schema: str, table_id: str) -> list[asyncpg.Record]:
    """The metadata rows of a table's fields, in position order (with their ids, unlike :func:`load_fields`)."""
    rows: list[asyncpg.Record] = await conn.fetch(
        f"""SELECT id, title, uidt, required, "unique", options, "precision", scale, position
            FROM {qualified_name(schema, FIELDS_TABLE)} WHERE table_id = $1 ORDER BY position, title""",
        uuid.UUID(table_id),
    )
    return rows


def field_def(row: Mapping[str, Any]) -> FieldDef:
    return FieldDef(
        title=row["title"],
        uidt=row["uidt"],
        required=row["required"],
        unique=row["unique"],
        options=tuple(row["options"] or ()),
        precision=row["precision"],
        scale=row["scale"],
    )


async def load_fields(conn: asyncpg.Connection, schema: str, table_id: str) -> list[FieldDef]:
    """The table's business fields in position order, from the metadata tables."""
    check_schema(schema)
    return [field_def(r) for r in await field_rows(conn, schema, table_id)]


async def list_columns(conn: asyncpg.Connection, schema: str, table_id: str) -> list[dict[str, Any]]:
    """``[{title, uidt, required, unique, options, precision, scale}]`` in position order (metadata, not catalog)."""
    return [f.as_dict() for f in await load_fields(conn, schema, table_id)]
