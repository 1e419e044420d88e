"""Field structure actions of the datatable skill: add_field, delete_field, update_field and changes_type (spec
§7.1, §7.3). Every function that writes runs inside ``conn.transaction()`` under the schema's DDL lock.

Decisions:

* A type change runs every distinct stored value (its text form) through the converter a write of the new type
  uses (§7.5, :class:`~.row_validator.RowValidator`): a value a write would refuse ('tomorrow' for 日期, NaN for 数字,
  an e-mail without @) refuses the change with the number of rows in the way, example values and the reasons, and
  changes nothing. Accepted values are stored as the converter returns them ('1,200' → 1200, ' a@b.cn ' →
  'a@b.cn'): by PostgreSQL's cast when it gives the same values, else through a mapping of old text → new value.
  Options of 单选 / 多选 are checked the same way; fewer decimal places round half away from zero, as writes do.
* A change to 文本 / 长文本 keeps every value as its text form (多选 joined with commas): a text write takes any text.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from .field_errors import FieldError
from .field_types import TYPES, FieldDef, parse_field
from .permissions_grants import OWNER_FIELD_TYPES
from .permissions_rls import ALL_ROWS_SETTING, policy_column, sync_policy
from .row_validator import RowValidator
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


_FREE_TEXT = frozenset({"文本", "长文本"})


_BATCH = 10_000  # distinct values read, converted and copied at a time


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


def _cast_of(text: str, new: FieldDef) -> str:
    """SQL for PostgreSQL's own conversion of a text form to the new type (多选 splits on , ， 、 ; ；)."""
    if new.pg_type() == "text[]":
        return f"CASE WHEN btrim({text}) = '' THEN NULL ELSE regexp_split_to_array(btrim({text}), '{_MULTI_SPLIT}') END"
    return f"CAST(NULLIF(btrim({text}), '') AS {new.pg_type()})"


@asynccontextmanager
async def _every_row_visible(conn: asyncpg.Connection) -> AsyncIterator[None]:
    """Let a row-level security policy (permissions_rls.py) show every row while a type change reads the values.

    The ALTER rewrites every row, so the check must see every row: a row it missed would find no converted value.
    The previous setting comes back afterwards; after an error, the rollback of the caller's transaction restores it.
    """
    previous = await conn.fetchval("SELECT current_setting($1, true)", ALL_ROWS_SETTING)
    await conn.execute("SELECT set_config($1, 'on', true)", ALL_ROWS_SETTING)
    yield
    await conn.execute("SELECT set_config($1, $2, true)", ALL_ROWS_SETTING, previous or "")


async def _map_values(conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef) -> str:
    """A TEMP table mapping each distinct text form of the column to what a write of the new type stores.

    Each value goes through the write path's own converter (:meth:`RowValidator.convert`), so a type change accepts,
    refuses and normalizes exactly as inserts and updates do (§7.5). Columns: ``src`` (the text form), ``dst`` (the
    converted value, NULL for an empty one) and ``refusal`` (the converter's reason, NULL when accepted). Distinct
    values are read with a cursor and copied in batches, so a big table costs one pass and little memory; the values
    are distinct, so ``src`` is a key.
    """
    name = f"_dt_convert_{uuid.uuid4().hex}"
    mapping = f"pg_temp.{quote_ident(name)}"
    await conn.execute(
        f"CREATE TEMP TABLE {mapping} (src text NOT NULL, dst {new.pg_type()}, refusal text) ON COMMIT DROP"
    )
    convert = RowValidator([new]).convert
    column = quote_ident(old.title)
    cursor = quote_ident(name)  # an SQL cursor: unlike asyncpg's, it can be closed, and the ALTER needs that
    await conn.execute(
        f"DECLARE {cursor} NO SCROLL CURSOR FOR "
        f"SELECT DISTINCT {_text_of(column, old.uidt)} FROM {table.qualified} WHERE {column} IS NOT NULL"
    )
    while batch := await conn.fetch(f"FETCH {_BATCH} FROM {cursor}"):
        records: list[tuple[str, Any, str | None]] = []
        for (src,) in batch:
            try:
                records.append((src, convert(new.title, src), None))
            except FieldError as exc:
                records.append((src, None, str(exc).removeprefix(f"{new.title}: ")))
        await conn.copy_records_to_table(name, schema_name="pg_temp", records=records)
    # a hash index: a B-tree refuses keys over ~2.7 kB, and a 长文本 value may be longer
    await conn.execute(f"CLOSE {cursor}; CREATE INDEX ON {mapping} USING hash (src); ANALYZE {mapping}")
    return mapping


def _short(text: str, limit: int = 120) -> str:
    """At most ``limit`` characters of a value shown in a message (a 长文本 value may be pages long)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _example(value: str, reason: str) -> str:
    """One refused value with the converter's reason, the value named once (most reasons already quote it)."""
    shown = repr(value)
    return _short(reason) if shown in reason[:200] else f"{_short(shown)}: {_short(reason)}"


async def _refuse_unconvertible(
    conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef, mapping: str
) -> None:
    """Refuse the change when a write of the new type would refuse some stored value: how many rows, which, why."""
    if not await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {mapping} WHERE refusal IS NOT NULL)"):
        return  # the usual case, decided on the distinct values without another pass over the table
    text = _text_of(f"t.{quote_ident(old.title)}", old.uidt)
    rows = await conn.fetch(
        f"""SELECT t.id, m.src, m.refusal, count(*) OVER () AS bad
            FROM {table.qualified} t JOIN {mapping} m ON m.src = {text}
            WHERE m.refusal IS NOT NULL ORDER BY t.id LIMIT 5"""
    )
    bad = rows[0]["bad"]
    ids = ", ".join(str(r["id"]) for r in rows) + (", …" if bad > 5 else "")
    examples = {r["src"]: r["refusal"] for r in rows}  # the values of the first rows, each once
    shown = " | ".join(_example(src, reason) for src, reason in list(examples.items())[:3])
    allowed = options_fix = ""
    if new.uidt in _SELECT_TYPES:
        allowed, options_fix = f" (allowed options: {', '.join(new.options)})", ", add the missing options"
    raise StoreError(
        f"cannot change field {old.title!r} to {new.uidt}{allowed}: {bad} row(s) hold values a {new.uidt} write "
        f"refuses (row ids {ids}), e.g. {shown}. Clean those values first (update or clear them){options_fix} or "
        "choose another type; nothing was changed",
        need_param="patch",
    )


async def _cast_agrees(conn: asyncpg.Connection, mapping: str, new: FieldDef) -> bool:
    """Whether PostgreSQL's cast turns every mapped text into exactly the converter's value.

    Then the ALTER may use the cast, about four times faster than a lookup per row (measured on 1M rows);
    otherwise ('1,200', full-width digits, 是/否, a naive time read in the session's zone instead of UTC) it must not.
    A cast that fails on some value does not agree.
    """
    try:
        async with conn.transaction():
            differs = await conn.fetchval(
                f"SELECT EXISTS (SELECT 1 FROM {mapping} WHERE dst IS DISTINCT FROM {_cast_of('src', new)})"
            )
    except asyncpg.DataError:
        return False
    return not differs


async def _apply(conn: asyncpg.Connection, old: FieldDef, new: FieldDef, statement: str) -> None:
    """Run the statement that converts the column; a value the new column still cannot hold (e.g. two rows that now
    collide in a unique field) becomes a refusal that names the field."""
    try:
        async with conn.transaction():
            await conn.execute(statement)
    except asyncpg.PostgresError as exc:
        state = exc.sqlstate or ""
        if not (state.startswith(("22", "23")) or state == "42804"):
            raise
        raise StoreError(
            f"cannot change field {old.title!r} to {new.uidt}: existing values do not convert ({exc}); "
            "fix or clear those values first",
            need_param="patch",
        ) from None


async def _store_mapped(conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef, mapping: str) -> None:
    """Store the converter's values: in place when the column type stays (only rows whose value changes are written),
    else by ALTER with the cast when it agrees with the converter, or with a lookup in the mapping when it does not
    (ALTER … USING allows no subquery, hence a TEMP function)."""
    column = quote_ident(old.title)
    text = _text_of(column, old.uidt)
    if old.pg_type() == new.pg_type():
        changed = f"m.src IS DISTINCT FROM {_text_of('m.dst', new.uidt)}"
        if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {mapping} m WHERE {changed})"):
            await _apply(
                conn,
                old,
                new,
                f"""UPDATE {table.qualified} t SET {column} = m.dst FROM {mapping} m
                    WHERE m.src = {_text_of(f"t.{column}", old.uidt)} AND {changed}""",
            )
        return
    alter = f"ALTER TABLE {table.qualified} ALTER COLUMN {column} TYPE {new.pg_type()} USING"
    if await _cast_agrees(conn, mapping, new):
        await _apply(conn, old, new, f"{alter} {_cast_of(text, new)}")
        return
    lookup = f"pg_temp.{quote_ident(f'_dt_convert_{uuid.uuid4().hex}')}"
    await conn.execute(
        f"CREATE FUNCTION {lookup}(text) RETURNS {new.pg_type()} LANGUAGE sql STABLE STRICT "
        f"AS $$ SELECT dst FROM {mapping} WHERE src = $1 $$"
    )
    await _apply(conn, old, new, f"{alter} {lookup}({text})")
    await conn.execute(f"DROP FUNCTION {lookup}(text)")


async def _convert_column(conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef) -> None:
    """Check and apply a type / option change of one column (under the old name)."""
    if new.uidt in _FREE_TEXT:  # a 文本 write takes any text as it is: nothing to check, nothing to normalize
        if old.pg_type() != "text":
            column = quote_ident(old.title)
            await _apply(
                conn,
                old,
                new,
                f"ALTER TABLE {table.qualified} ALTER COLUMN {column} TYPE text USING {_text_of(column, old.uidt)}",
            )
        return
    if (new.uidt, new.pg_type()) == (old.uidt, old.pg_type()) and set(old.options) <= set(new.options):
        return  # options added or reordered: every stored value is still one of them
    async with _every_row_visible(conn):
        # no write may slip in between reading the values and converting them (it would have no mapped value)
        await conn.execute(f"LOCK TABLE {table.qualified} IN EXCLUSIVE MODE")
        mapping = await _map_values(conn, table, old, new)
        await _refuse_unconvertible(conn, table, old, new, mapping)
        await _store_mapped(conn, table, old, new, mapping)
        await conn.execute(f"DROP TABLE {mapping}")


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
