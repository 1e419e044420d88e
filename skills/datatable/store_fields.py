"""Field structure actions of the datatable skill: add_field, delete_field, update_field and changes_type (spec
§7.1, §7.3). Every function that writes runs inside ``conn.transaction()`` under the schema's DDL lock.

Decisions:

* A type change converts every value through its text form (``CAST(btrim(text) AS new_type)``; 多选 splits on
  , ， 、 ; ；) and is checked first with ``pg_input_is_valid`` (PostgreSQL 16+), so a change that would fail reports
  how many rows are in the way and changes nothing. Options of 单选 / 多选 are checked the same way. Fewer decimal
  places round half away from zero, as writes do (§7.5); too many digits before the point are refused.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from .field_errors import FieldError
from .field_types import TYPES, FieldDef, parse_field
from .store_schema import (
    MAX_FIELDS,
    StoreError,
    TableInfo,
    column_sql,
    drop_object,
    field_def,
    field_rows,
    insert_field_meta,
    lock_schema,
    qualified_name,
    quote_ident,
    resolve_table,
    unique_name,
)

__all__ = ["add_field", "changes_type", "delete_field", "update_field"]


_SELECT_TYPES = frozenset({"单选", "多选"})


_MULTI_SPLIT = r"\s*[,，、;；]\s*"


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
        await conn.execute(f"DELETE FROM {qualified_name(schema, '_dt_fields')} WHERE id = $1", row["id"])
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
        if _canonical(new_type) not in _SELECT_TYPES or old.uidt not in _SELECT_TYPES:
            spec.pop("options")
        spec.pop("uidt")
    for key, value in patch.items():
        spec[{"name": "title", "type": "uidt"}.get(key, key)] = value
    return _one_field(spec, "patch")


def _text_of(column: str, uidt: str) -> str:
    """SQL for the text form of a column's value (the start of every conversion)."""
    if uidt == "多选":
        return f"array_to_string({column}, ',')"
    if uidt == "数字":
        return f"trim_scale({column})::text"
    return f"{column}::text"


async def _convert_column(conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef) -> None:
    """Check and apply a type / option change of one column (under the old name)."""
    column = quote_ident(old.title)
    old_type, new_type = old.pg_type(), new.pg_type()
    text = _text_of(column, old.uidt)
    if new_type == "text[]":
        converted = (
            column
            if old_type == "text[]"
            else f"CASE WHEN btrim({text}) = '' THEN NULL "
            f"ELSE regexp_split_to_array(btrim({text}), '{_MULTI_SPLIT}') END"
        )
    elif new_type == "text":
        converted = text
    else:
        converted = f"CAST(NULLIF(btrim({text}), '') AS {new_type})"

    checks: list[str] = []
    params: list[Any] = []
    modern = conn.get_server_version().major >= 16
    if modern and old_type != new_type and new_type not in ("text", "text[]"):
        params.append(new_type)
        checks.append(f"(btrim({text}) = '' OR pg_input_is_valid(btrim({text}), ${len(params)}))")
    if modern and new.uidt == "JSON" and old.uidt != "JSON":
        checks.append(f"(btrim({text}) = '' OR pg_input_is_valid({text}, 'json'))")
    if new.uidt == "单选" and (old.uidt != "单选" or not set(old.options) <= set(new.options)):
        params.append(list(new.options))
        checks.append(f"({text} = '' OR {text} = ANY(${len(params)}::text[]))")
    if new.uidt == "多选" and (old.uidt != "多选" or not set(old.options) <= set(new.options)):
        params.append(list(new.options))
        checks.append(f"COALESCE({converted} <@ ${len(params)}::text[], true)")
    if checks:
        row = await conn.fetchrow(
            f"""SELECT count(*) AS bad, (array_agg(id ORDER BY id))[1:5] AS sample
                FROM {table.qualified} WHERE {column} IS NOT NULL AND NOT ({" AND ".join(checks)})""",
            *params,
        )
        if row["bad"]:
            allowed = f" (allowed options: {', '.join(new.options)})" if new.uidt in _SELECT_TYPES else ""
            raise StoreError(
                f"cannot change field {old.title!r} to {new.uidt}{allowed}: {row['bad']} row(s) hold values that "
                f"do not fit (row ids {', '.join(map(str, row['sample']))}{', …' if row['bad'] > 5 else ''}); "
                "fix or clear those values first, or add the missing options",
                need_param="patch",
            )
    if old_type != new_type:
        try:
            async with conn.transaction():
                await conn.execute(
                    f"ALTER TABLE {table.qualified} ALTER COLUMN {column} TYPE {new_type} USING {converted}"
                )
        except asyncpg.PostgresError as exc:
            state = exc.sqlstate or ""
            if not (state.startswith(("22", "23")) or state == "42804"):
                raise
            raise StoreError(
                f"cannot change field {old.title!r} to {new.uidt}: existing values do not convert ({exc}); "
                "fix or clear those values first",
                need_param="patch",
            ) from None


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
        if (new.uidt, new.pg_type(), new.options) != (old.uidt, old.pg_type(), old.options):
            await _convert_column(conn, table, old, new)
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
            f"""UPDATE {qualified_name(schema, "_dt_fields")} SET title = $2, uidt = $3, required = $4, "unique" = $5,
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
    return new.as_dict()


async def changes_type(conn: asyncpg.Connection, schema: str, table_id: Any, field_title: Any, patch: Any) -> bool:
    """Whether an update_field ``patch`` changes the field's type (a destructive change that needs 确认=true).

    A patch that cannot be read is left to :func:`update_field`, which explains what is wrong with it.
    """
    if not isinstance(patch, Mapping) or not ("uidt" in patch or "type" in patch):
        return False
    table = await resolve_table(conn, schema, table_id)
    old = field_def(_find(await field_rows(conn, schema, table.id), field_title))
    try:
        new = _patched(old, patch)
    except StoreError:
        return False
    return (new.uidt, new.pg_type()) != (old.uidt, old.pg_type())
