"""Field structure actions of the datatable skill: add_field, delete_field, update_field and changes_type (spec
§7.1, §7.3). Every function that writes runs inside ``conn.transaction()`` under the schema's DDL lock; how a type
change converts the values already stored is type_change.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..fields.types import SELECT_TYPES, TYPES, FieldDef, parse_field
from ..permissions.grants import OWNER_FIELD_TYPES
from ..permissions.rls import policy_column, sync_policy
from ..store.names import FIELDS_TABLE, unique_name
from ..store.schema import (
    MAX_FIELDS,
    StoreError,
    column_sql,
    drop_object,
    field_def,
    field_rows,
    insert_field_meta,
    lock_schema,
    qualified_name,
    quote_ident,
    resolve_table,
)
from .type_change import convert_column

__all__ = ["add_field", "changes_type", "delete_field", "update_field"]


def _one_field(spec: Any, param: str = "field") -> FieldDef:
    try:
        return parse_field(spec)
    except FieldError as exc:
        raise StoreError(str(exc), need_param=param) from None


def _find(rows: Sequence[asyncpg.Record], title: Any) -> asyncpg.Record:
    wanted = title.strip() if isinstance(title, str) else title
    for row in rows:
        if row["title"] == wanted:
            return row
    names = ", ".join(r["title"] for r in rows) or "(none)"
    raise StoreError(f"no field {title!r} in this table; fields are: {names}", need_param="field_title")


async def add_field(conn: asyncpg.Connection, schema: str, table_id: Any, field: Any) -> dict[str, Any]:
    """Add a business field at the end; returns its definition."""
    table = await resolve_table(conn, schema, table_id)
    new = _one_field(field)
    async with conn.transaction():
        await lock_schema(conn, schema)
        rows = await field_rows(conn, schema, table.id)
        if any(r["title"] == new.title for r in rows):
            raise StoreError(f"table {table.title!r} already has a field {new.title!r}; choose another name")
        if len(rows) >= MAX_FIELDS:
            raise StoreError(f"table {table.title!r} already has {len(rows)} fields; at most {MAX_FIELDS} are allowed")
        field_id = uuid.uuid4()
        await conn.execute(f"ALTER TABLE {table.qualified} ADD COLUMN {column_sql(new)}")
        if new.unique:
            await conn.execute(
                f"ALTER TABLE {table.qualified} ADD CONSTRAINT {quote_ident(unique_name(field_id))} "
                f"UNIQUE ({quote_ident(new.title)})"
            )
        position = max((r["position"] for r in rows), default=0) + 1
        await insert_field_meta(conn, schema, table.id, field_id, new, position)
    return new.as_dict()


async def delete_field(conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any) -> dict[str, Any]:
    """Drop a business field (its data too); ``{deleted: True, field}``."""
    table = await resolve_table(conn, schema, table_id)
    async with conn.transaction():
        await lock_schema(conn, schema)
        row = _find(await field_rows(conn, schema, table.id), field_title)
        await drop_object(
            conn,
            f"ALTER TABLE {table.qualified} DROP COLUMN IF EXISTS {quote_ident(row['title'])}",
            f"field {row['title']!r}",
            "field_title",
        )
        await conn.execute(f"DELETE FROM {qualified_name(schema, FIELDS_TABLE)} WHERE id = $1", row["id"])
    return {"deleted": True, "field": row["title"]}


_PATCH_KEYS = frozenset({"title", "name", "uidt", "type", "required", "unique", "options", "precision", "scale"})


def _canonical(type_name: Any) -> str | None:
    if not isinstance(type_name, str):
        return None
    key = type_name.strip()
    return TYPES.get(key) or TYPES.get(key.lower().replace("-", "_").replace(" ", "_"))


def _patched(old: FieldDef, patch: Mapping[str, Any]) -> FieldDef:
    spec = old.as_dict()
    if "uidt" in patch or "type" in patch:
        new_type = patch.get("uidt", patch.get("type"))
        spec.pop("precision")
        spec.pop("scale")
        if _canonical(new_type) not in SELECT_TYPES or old.uidt not in SELECT_TYPES:
            spec.pop("options")
        spec.pop("uidt")
    for key, value in patch.items():
        spec[{"name": "title", "type": "uidt"}.get(key, key)] = value
    return _one_field(spec, "patch")


async def update_field(
    conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any, patch: Any
) -> dict[str, Any]:
    """Change a field: rename (title), uidt, required, unique, options, precision, scale; returns the new definition.

    A change the existing data cannot take (type, options, unique with duplicates) is refused with the number of rows
    in the way and leaves the table unchanged.
    """
    if not isinstance(patch, Mapping) or not patch:
        raise StoreError(
            'patch must be an object with the changes, e.g. {"title": "新名"} or {"uidt": "整数"}', need_param="patch"
        )
    unknown = sorted(str(k) for k in patch if k not in _PATCH_KEYS)
    if unknown:
        raise StoreError(
            f"unknown key(s) {', '.join(unknown)} in patch; use title, uidt, required, unique, options, precision, "
            "scale",
            need_param="patch",
        )
    table = await resolve_table(conn, schema, table_id)
    async with conn.transaction():
        await lock_schema(conn, schema)
        rows = await field_rows(conn, schema, table.id)
        row = _find(rows, field_title)
        old = field_def(row)
        new = _patched(old, patch)
        if new.title != old.title and any(r["title"] == new.title for r in rows):
            raise StoreError(f"table {table.title!r} already has a field {new.title!r}; choose another name")
        column = quote_ident(old.title)
        retyped = (new.uidt, new.pg_type()) != (old.uidt, old.pg_type())
        owner = retyped and await policy_column(conn, table) == old.title
        if owner:  # PostgreSQL cannot retype a column its policy reads: the policy is made again for the new type
            if new.uidt not in OWNER_FIELD_TYPES:
                raise StoreError(
                    f"field {old.title!r} is the owner field of row scope own on table {table.title!r}, and an owner "
                    f"field must be one of {', '.join(sorted(OWNER_FIELD_TYPES))}; choose one of those types, or "
                    "revoke the own grants of the table first (skillyard datatable revoke)",
                    need_param="patch",
                )
            await sync_policy(conn, table, None)
        if (new.uidt, new.pg_type(), new.options) != (old.uidt, old.pg_type(), old.options):
            await convert_column(conn, table, old, new)
        if new.unique != old.unique:
            if new.unique:
                dupes = await conn.fetchval(
                    f"""SELECT count(*) FROM (SELECT 1 FROM {table.qualified} WHERE {column} IS NOT NULL
                        GROUP BY {column} HAVING count(*) > 1) d"""
                )
                if dupes:
                    raise StoreError(
                        f"cannot make field {old.title!r} unique: {dupes} value(s) appear in more than one row; "
                        "remove the duplicates first",
                        need_param="patch",
                    )
                await conn.execute(
                    f"ALTER TABLE {table.qualified} ADD CONSTRAINT {quote_ident(unique_name(row['id']))} "
                    f"UNIQUE ({column})"
                )
            else:
                names = await conn.fetch(
                    """SELECT c.conname FROM pg_constraint c
                       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attname = $2
                       WHERE c.conrelid = $1::regclass AND c.contype = 'u' AND c.conkey = ARRAY[a.attnum]""",
                    table.qualified,
                    old.title,
                )
                for name in names:
                    await conn.execute(f"ALTER TABLE {table.qualified} DROP CONSTRAINT {quote_ident(name['conname'])}")
        if new.title != old.title:
            await conn.execute(f"ALTER TABLE {table.qualified} RENAME COLUMN {column} TO {quote_ident(new.title)}")
        await conn.execute(
            f"""UPDATE {qualified_name(schema, FIELDS_TABLE)} SET title = $2, uidt = $3, required = $4, "unique" = $5,
                options = $6, "precision" = $7, scale = $8 WHERE id = $1""",
            row["id"],
            new.title,
            new.uidt,
            new.required,
            new.unique,
            list(new.options),
            new.precision,
            new.scale,
        )
        if owner:
            await sync_policy(conn, table, new.title, new.uidt)
    return new.as_dict()


async def changes_type(conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any, patch: Any) -> bool:
    """Whether an update_field ``patch`` changes the field's type (a destructive change that needs 确认=true).

    A patch that cannot be read is left to :func:`update_field`, which explains what is wrong with it.
    """
    if not isinstance(patch, Mapping) or not {"uidt", "type", "precision", "scale"} & set(patch):
        return False  # only these can change the column's type (a new precision or scale may round values)
    table = await resolve_table(conn, schema, table_id)
    old = field_def(_find(await field_rows(conn, schema, table.id), field_title))
    try:
        new = _patched(old, patch)
    except StoreError:
        return False
    return (new.uidt, new.pg_type()) != (old.uidt, old.pg_type())
