"""Changing a field's type or options with the data in it (spec §7.3, §7.5): update_field's conversion of a column.

* Every distinct stored value (its text form) goes through the converter a write of the new type uses
  (:class:`~..fields.validator.RowValidator`): a value a write would refuse ('tomorrow' for 日期, NaN for 数字, an
  e-mail without @) refuses the change with the number of rows in the way, example values and the reasons, and
  changes nothing. Accepted values are stored as the converter returns them ('1,200' → 1200, ' a@b.cn ' →
  'a@b.cn'): by PostgreSQL's cast when it gives the same values, else through a mapping of old text → new value.
  Options of 单选 / 多选 are checked the same way; fewer decimal places round half away from zero, as writes do.
* A change to 文本 / 长文本 keeps every value as its text form (多选 joined with commas): a text write takes any text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..fields.types import SELECT_TYPES, FieldDef
from ..fields.validator import RowValidator
from ..permissions.rls import ALL_ROWS_SETTING
from ..store.names import temporary_name
from ..store.schema import StoreError, TableInfo, quote_ident

__all__ = ["convert_column"]


_FREE_TEXT = frozenset({"文本", "长文本"})


_BATCH = 10_000  # distinct values read, converted and copied at a time


_MULTI_SPLIT = r"\s*[,，、;；]\s*"


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
    """Let a row-level security policy (permissions/rls.py) show every row while a type change reads the values.

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
    name = temporary_name("convert")
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
    if new.uidt in SELECT_TYPES:
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
    lookup = f"pg_temp.{quote_ident(temporary_name('convert'))}"
    await conn.execute(
        f"CREATE FUNCTION {lookup}(text) RETURNS {new.pg_type()} LANGUAGE sql STABLE STRICT "
        f"AS $$ SELECT dst FROM {mapping} WHERE src = $1 $$"
    )
    await _apply(conn, old, new, f"{alter} {lookup}({text})")
    await conn.execute(f"DROP FUNCTION {lookup}(text)")


async def convert_column(conn: asyncpg.Connection, table: TableInfo, old: FieldDef, new: FieldDef) -> None:
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
