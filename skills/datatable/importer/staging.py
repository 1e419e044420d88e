"""insert_from_file of the datatable skill (spec §7.3, §7.4 批量路径): more than 100 rows from a JSON file in the
workspace.

Flow, all in one transaction (a SAVEPOINT when the caller has one open):

1. the file is resolved (symlinks followed) inside the workspace and opened here, then streamed by reader.py
   (a chunk at a time, never read whole): a JSON array of objects or JSON Lines; each row renamed by ``mapping``,
   filled from ``defaults``, validated with insert rules and ``stamp``ed;
2. the valid rows are streamed with COPY (asyncpg ``copy_records_to_table``) into a TEMP staging table shaped like
   the target's business columns plus the row number, while validation goes on (the server ingests one chunk while
   Python validates the next);
3. one ``INSERT INTO target SELECT … FROM staging [ON CONFLICT DO NOTHING] RETURNING id`` moves them (in file order:
   the heap order of the freshly filled staging table; an ORDER BY would spill a sort to disk at 100k rows);
4. the returned ids go into a second TEMP table (not to the client) and ``verified_total`` counts them found again
   in the target.

Decisions:

* Without on_conflict, values of unique fields that already exist in the table or repeat within the file are found
  in the staging table with one set-based statement per unique field and reported as failed (the first occurrence
  in the file is kept). With ``on_conflict="skip"`` (which needs a unique constraint or unique index on the table)
  those rows are skipped by ``ON CONFLICT DO NOTHING`` and counted in ``skipped``.
* Should the set-based move still fail on a row-level error (SQLSTATE 22 / 23), the rows are written one by one,
  each in its own savepoint, so one bad row cannot sink the import (§7.8.2); this path is slow but exceptional.
* Speed (bench/bench_datatable_import.py): Python validation dominates (see prepare.py for what keeps it lean).
  The cyclic garbage collector is paused while the import runs (parsing and validating create millions of objects;
  GC passes over them cost ~25 %).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..fields.validator import RowValidator
from ..rows.errors import RowErrors, RowsError, classify, is_row_level
from ..store.names import temporary_name
from ..store.schema import StoreError, TableInfo, has_unique_index, load_fields, quote_ident
from . import prepare, reader

__all__ = ["MAX_FILE_BYTES", "insert_from_file"]

#: Largest import file accepted.
MAX_FILE_BYTES = 512 * 1024 * 1024


async def _reject_duplicates(
    conn: asyncpg.Connection, table: TableInfo, staging: str, unique: list[str], errors: RowErrors
) -> None:
    """Remove staged rows whose unique values exist in the table or repeat an earlier staged row; report them."""
    for field in unique:
        col = quote_ident(field)
        bad = await conn.fetch(
            f"""DELETE FROM {staging} s USING (
                    SELECT rn, dup FROM (
                        SELECT x.rn, x.{col} AS v,
                               row_number() OVER (PARTITION BY x.{col} ORDER BY x.rn) > 1 AS dup
                        FROM {staging} x WHERE x.{col} IS NOT NULL
                    ) d
                    WHERE dup OR EXISTS (SELECT 1 FROM {table.qualified} t WHERE t.{col} = d.v)
                ) b
                WHERE s.rn = b.rn RETURNING s.rn, b.dup, s.{col}::text AS v"""
        )
        for row in sorted(bad, key=lambda r: r["rn"]):
            where = "an earlier row of the file" if row["dup"] else "another row of the table"
            errors.add(
                row["rn"],
                f"{field}: must be unique and {row['v']!r} is already used by {where}; use another value or "
                "on_conflict=skip",
            )


async def _move_one_by_one(
    conn: asyncpg.Connection,
    table: TableInfo,
    columns: list[str],
    staging: str,
    new_ids: str,
    conflict: str,
    errors: RowErrors,
) -> tuple[int, int]:
    """(inserted, skipped as conflicts) writing the staged rows one by one, each in its own savepoint."""
    cols = ", ".join(map(quote_ident, columns))
    statement = await conn.prepare(
        f"WITH ins AS (INSERT INTO {table.qualified} ({cols}) SELECT {cols} FROM {staging} WHERE rn = $1{conflict} "
        f"RETURNING id) INSERT INTO {new_ids} SELECT id FROM ins RETURNING id"
    )
    inserted = skipped = 0
    for record in await conn.fetch(f"SELECT rn FROM {staging} ORDER BY rn"):
        try:
            async with conn.transaction():
                new_id = await statement.fetchval(record["rn"])
        except asyncpg.PostgresError as exc:
            if not is_row_level(exc):
                raise
            errors.add(record["rn"], str(classify(exc)))
            continue
        if new_id is None:
            skipped += 1
        else:
            inserted += 1
    return inserted, skipped


async def insert_from_file(
    conn: asyncpg.Connection,
    table: TableInfo,
    path: Path | str,
    *,
    workspace: Path,
    mapping: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    on_conflict: str | None = None,
    stamp: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Import a JSON file (array of objects or JSON Lines) from the workspace into ``table``:
    ``{inserted, skipped, failed, errors, verified_total}`` (+ ``dropped`` when unknown keys were ignored)."""
    skip = prepare.on_conflict(on_conflict)
    real = reader.resolve(path, workspace)
    size = real.stat().st_size
    if size > MAX_FILE_BYTES:
        raise RowsError(
            f"file {real.name} is {size // (1024 * 1024)} MB; at most {MAX_FILE_BYTES // (1024 * 1024)} MB can be "
            "imported at once",
            need_param="file",
        )
    try:
        source = real.open("rb")  # read a chunk at a time by reader.records while the rows go to COPY
    except OSError as exc:
        raise RowsError(f"file {real.name} cannot be read ({exc})", need_param="file") from None
    collecting = gc.isenabled()
    gc.disable()  # parsing and validating make millions of objects; cyclic GC passes over them cost ~25 %
    try:
        try:
            field_list = await load_fields(conn, table.schema, table.id)
            fields = {f.title: f for f in field_list}
            validator = RowValidator(field_list)
            columns = list(fields)
            if not columns:
                raise RowsError(f"table {table.title!r} has no fields; add fields before importing rows")
            prepared = prepare.Prepared(
                validator,
                columns,
                prepare.mapping(mapping, fields),
                prepare.defaults(defaults, fields, validator),
                prepare.stamp(stamp or {}, validator),
            )
            prepare.memoize(validator)
            items = reader.records(source, real.name)
            first = next(items, None)
            if first is None:
                raise RowsError(f"{real.name} holds no rows; write at least one object", need_param="file")

            def chained() -> Iterator[tuple[int, Any]]:
                yield first
                yield from items

            staging_name = temporary_name("import")
            staging = f"pg_temp.{quote_ident(staging_name)}"
            new_ids = f"pg_temp.{quote_ident(temporary_name('import_ids'))}"
            col_defs = ", ".join(f"{quote_ident(f.title)} {f.pg_type()}" for f in field_list)
            inserted = conflicts = verified = 0
            async with conn.transaction():
                if skip and not await has_unique_index(conn, table):
                    raise RowsError(
                        f"on_conflict=skip needs a unique field in table {table.title!r} and it has none; make a field "
                        "unique (update_field with unique=true) or import without on_conflict",
                        need_param="on_conflict",
                    )
                await conn.execute(
                    f"CREATE TEMP TABLE {staging} (rn bigint NOT NULL, {col_defs}) ON COMMIT DROP; "
                    f"CREATE TEMP TABLE {new_ids} (id bigint NOT NULL) ON COMMIT DROP"
                )
                await conn.copy_records_to_table(
                    staging_name,
                    schema_name="pg_temp",
                    columns=["rn", *columns],
                    records=prepare.stream(prepared, chained()),
                )
                if prepared.valid:
                    if not skip:
                        unique = [f.title for f in field_list if f.unique]
                        if unique:
                            await _reject_duplicates(conn, table, staging, unique, prepared.errors)
                    cols = ", ".join(map(quote_ident, columns))
                    conflict = " ON CONFLICT DO NOTHING" if skip else ""
                    try:
                        async with conn.transaction():
                            status = await conn.execute(
                                f"WITH ins AS (INSERT INTO {table.qualified} ({cols}) SELECT {cols} FROM {staging} "
                                f"{conflict} RETURNING id) INSERT INTO {new_ids} SELECT id FROM ins"
                            )
                        inserted = int(status.rsplit(" ", 1)[-1])
                        conflicts = prepared.valid - inserted if skip else 0
                    except asyncpg.PostgresError as exc:
                        if not is_row_level(exc):
                            raise
                        inserted, conflicts = await _move_one_by_one(
                            conn, table, columns, staging, new_ids, conflict, prepared.errors
                        )
                    # a real count of the new ids found in the table; the id range keeps the scan to the new rows
                    # and ANALYZE gives the planner the size of the id list (measured: 0.25 s → 0.06 s, 100k rows)
                    await conn.execute(f"ANALYZE {new_ids}")
                    verified = int(
                        await conn.fetchval(
                            f"SELECT count(*) FROM {table.qualified} WHERE id BETWEEN (SELECT min(id) FROM {new_ids}) "
                            f"AND (SELECT max(id) FROM {new_ids}) AND id IN (SELECT id FROM {new_ids})"
                        )
                    )
                await conn.execute(f"DROP TABLE IF EXISTS {staging}, {new_ids}")
        except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
            raise classify(exc) from None
    finally:
        source.close()
        if collecting:
            gc.enable()
    result: dict[str, Any] = {
        "inserted": inserted,
        "skipped": prepared.empty + conflicts,
        "failed": prepared.errors.failed,
        "errors": sorted(prepared.errors.items, key=lambda e: e["row"]),
        "verified_total": verified,
    }
    if skip:
        result["skipped_conflicts"] = conflicts
    if prepared.dropped:
        result["dropped"] = list(prepared.dropped)
    return result
