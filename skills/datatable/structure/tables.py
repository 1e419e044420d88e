"""Table structure actions of the datatable skill: create_table, delete_table and register_sql_table (a table created
on the SQL channel, registered from the column types PostgreSQL recorded) (spec §7.1, §7.3, §7.6). Every function that
writes runs inside ``conn.transaction()`` under the schema's DDL lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..fields.types import FieldDef, check_identifier, parse_field
from ..store.names import META_PREFIX, TABLES_TABLE, unique_name
from ..store.schema import (
    MAX_FIELDS,
    StoreError,
    check_schema,
    column_sql,
    drop_object,
    ensure_schema,
    insert_field_meta,
    lock_schema,
    qualified_name,
    quote_ident,
    resolve_table,
)

__all__ = ["UNCONSTRAINED_NUMERIC", "create_table", "delete_table", "register_sql_table"]


def _table_title(name: Any) -> str:
    try:
        title = check_identifier(name, "table")
    except FieldError as exc:
        raise StoreError(str(exc), need_param="table_name") from None
    if title.lower().startswith(META_PREFIX):
        raise StoreError(
            f"table names starting with {META_PREFIX} are reserved for the skill's metadata; choose another name",
            need_param="table_name",
        )
    return title


def _parse_fields(fields: Any) -> list[FieldDef]:
    if not isinstance(fields, Sequence) or isinstance(fields, str | bytes):
        raise StoreError(
            'fields must be a list of field definitions like [{"title": "姓名", "uidt": "文本"}]', need_param="fields"
        )
    if not fields:
        raise StoreError('fields is empty; give at least one field, e.g. {"title": "姓名", "uidt": "文本"}')
    if len(fields) > MAX_FIELDS:
        raise StoreError(f"{len(fields)} fields given; a table has at most {MAX_FIELDS}", need_param="fields")
    parsed: list[FieldDef] = []
    errors: list[str] = []
    for index, spec in enumerate(fields):
        try:
            parsed.append(parse_field(spec))
        except FieldError as exc:
            errors.append(f"fields[{index}]: {exc}")
    seen: set[str] = set()
    for field in parsed:
        if field.title in seen:
            errors.append(f"field {field.title!r} is defined twice; give each field once")
        seen.add(field.title)
    if errors:
        raise StoreError("; ".join(errors), need_param="fields")
    return parsed


async def create_table(conn: asyncpg.Connection, schema: str, title: Any, fields: Any) -> dict[str, Any]:
    """Create a table; ``{id, title}``, or the existing table with ``already_exists: True`` when the title is taken."""
    check_schema(schema)
    title = _table_title(title)
    parsed = _parse_fields(fields)
    await ensure_schema(conn, schema)
    async with conn.transaction():
        await lock_schema(conn, schema)
        existing = await conn.fetchval(f"SELECT id FROM {qualified_name(schema, TABLES_TABLE)} WHERE title = $1", title)
        if existing is not None:
            return {"id": str(existing), "title": title, "already_exists": True}
        if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", qualified_name(schema, title)):
            raise StoreError(
                f"a table {title!r} exists in the database but is not registered with the datatable skill (made "
                "outside it); choose another table name",
                need_param="table_name",
            )
        table_id = str(uuid.uuid4())
        field_ids = [uuid.uuid4() for _ in parsed]
        columns = [
            "id bigserial PRIMARY KEY",
            "created_at timestamptz NOT NULL DEFAULT now()",
            *(column_sql(f) for f in parsed),
            *(
                f"CONSTRAINT {quote_ident(unique_name(fid))} UNIQUE ({quote_ident(f.title)})"
                for fid, f in zip(field_ids, parsed, strict=True)
                if f.unique
            ),
        ]
        await conn.execute(f"CREATE TABLE {qualified_name(schema, title)} ({', '.join(columns)})")
        await conn.execute(
            f"INSERT INTO {qualified_name(schema, TABLES_TABLE)} (id, title) VALUES ($1, $2)",
            uuid.UUID(table_id),
            title,
        )
        for position, (fid, field) in enumerate(zip(field_ids, parsed, strict=True), start=1):
            await insert_field_meta(conn, schema, table_id, fid, field, position)
    return {"id": table_id, "title": title}


async def delete_table(conn: asyncpg.Connection, schema: str, table_id: Any) -> bool:
    """Drop the table and its metadata. Refused while views or other objects depend on it."""
    table = await resolve_table(conn, schema, table_id)
    async with conn.transaction():
        await lock_schema(conn, schema)
        await drop_object(conn, f"DROP TABLE IF EXISTS {table.qualified}", f"table {table.title!r}", "table_id")
        await conn.execute(f"DELETE FROM {qualified_name(schema, TABLES_TABLE)} WHERE id = $1", uuid.UUID(table.id))
    return True


#: PostgreSQL column types (format_type without modifiers) → logical types, for tables made on the SQL channel.
_SQL_TYPES = {
    "text": "文本",
    "character varying": "文本",
    "character": "文本",
    "smallint": "整数",
    "integer": "整数",
    "bigint": "整数",
    "numeric": "数字",
    "real": "数字",
    "double precision": "数字",
    "date": "日期",
    "timestamp with time zone": "日期时间",
    "timestamp without time zone": "日期时间",
    "time without time zone": "时间",
    "boolean": "勾选",
    "text[]": "多选",
}


#: precision/scale registered for numeric columns declared without them (and real / double precision).
UNCONSTRAINED_NUMERIC: tuple[int, int] = (38, 10)


async def register_sql_table(conn: asyncpg.Connection, schema: str, title: str) -> dict[str, Any]:
    """Register a table just made by CREATE TABLE on the SQL channel in the metadata; ``{id, title, fields}``.

    The SQL is the only description of such a table, so its columns' declared types are read once here (from
    pg_attribute, right after the statement) and mapped onto logical types: text types → 文本, integer types → 整数,
    numeric(p,s) → 数字 with that precision (numeric without one, real and double precision → 数字
    :data:`UNCONSTRAINED_NUMERIC`), date/timestamp/time, boolean → 勾选, text[] → 多选; anything else → 文本 (its
    values are then checked by PostgreSQL on write). UNIQUE constraints on one column are recorded as ``unique``.
    Afterwards the metadata is the table's description like for any other table.
    """
    check_schema(schema)
    qualified = qualified_name(schema, title)
    columns = await conn.fetch(
        """SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type, a.atttypmod AS typmod,
                  EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conrelid = a.attrelid AND c.contype = 'u'
                          AND c.conkey = ARRAY[a.attnum]) AS is_unique
           FROM pg_attribute a
           WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
             AND a.attname NOT IN ('id', 'created_at')
           ORDER BY a.attnum""",
        qualified,
    )
    fields: list[FieldDef] = []
    for column in columns:
        uidt = _SQL_TYPES.get(column["type"], "文本")
        precision = scale = None
        if uidt == "数字":
            typmod = column["typmod"]
            if column["type"] == "numeric" and typmod >= 4:  # numeric's typmod: ((precision << 16) | scale) + 4
                precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
            else:
                precision, scale = UNCONSTRAINED_NUMERIC
        fields.append(FieldDef(column["name"], uidt, unique=column["is_unique"], precision=precision, scale=scale))
    await ensure_schema(conn, schema)
    async with conn.transaction():
        await lock_schema(conn, schema)
        table_id = str(uuid.uuid4())
        await conn.execute(
            f"INSERT INTO {qualified_name(schema, TABLES_TABLE)} (id, title) VALUES ($1, $2)",
            uuid.UUID(table_id),
            title,
        )
        for position, field in enumerate(fields, start=1):
            await insert_field_meta(conn, schema, table_id, uuid.uuid4(), field, position)
    return {"id": table_id, "title": title, "fields": [f.as_dict() for f in fields]}
