"""The upsert row action: insert or update 1–100 rows matched on key fields with one ``MERGE … USING unnest(…)``
(spec §7.3, §7.8.6).

Decisions:

* upsert matches on ``key_fields`` (equal values; a key field may not be empty, so this is ``IS NOT DISTINCT FROM``)
  and needs no unique constraint (§7.8.6). Rows of one batch with the same key — compared on the converted values,
  as PostgreSQL compares them (``"1,001"`` = ``1001``; one instant in two offsets) — are collapsed: the last one is
  written, the earlier ones are reported as failed.
* As in insert_batch (write.py), the batch is one set-based statement in a savepoint, and only a row-level
  error (SQLSTATE class 22 or 23) makes it fall back to one savepoint per row.
* ``verified_total`` counts the rows the MERGE wrote, found again after the write through the primary key (the
  ids ``MERGE … RETURNING`` gives, PostgreSQL 17+), or before PostgreSQL 17 the rows holding the batch's keys;
  never the whole table.
* Required fields are checked only where a record inserts (§7.5: on insert only): the MERGE inserts a record only
  when every required field has a value; a record without one that matched no row is reported as failed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import asyncpg

from ..fields.errors import FieldError
from ..store.names import KEY_LOCK_CLASS
from ..store.schema import StoreError, TableInfo, quote_ident
from .batch import batch_columns, batch_records, stamp_values, unnest_source, validate_rows
from .context import RowContext, count_ids, load_context, scope_conditions, status_count, where_clause
from .errors import RedoAction, RowErrors, RowsError, classify, is_row_level
from .filters import Condition

__all__ = ["upsert"]


def _key_fields(ctx: RowContext, raw: Any) -> list[str]:
    items = raw.replace("，", ",").split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not items:
        raise RowsError(
            'upsert needs key_fields, e.g. ["工号"]: the fields that identify a row', need_param="key_fields"
        )
    keys: list[str] = []
    for item in items:
        name = item.strip() if isinstance(item, str) else item
        if name not in ctx.fields:
            raise RowsError(
                f"key_fields: unknown field {item!r}; the table's fields are {', '.join(ctx.names)}",
                need_param="key_fields",
            )
        if name not in keys:
            keys.append(name)
    return keys


def _key_part(value: Any) -> Hashable:
    """One converted key value as a hashable part of a batch row's key, equal for two values exactly when PostgreSQL
    finds them equal: two records of one batch that match the same row would make the MERGE fail (SQLSTATE 21000),
    so they are collapsed here. The converted values compare as the database does — ints, Decimals rounded to the
    field's scale (``1.0`` = ``1.00``), aware datetimes by instant (``10:00+08:00`` = ``02:00Z``), texts exactly — and
    a 多选 list, in the options' order already, becomes a tuple."""
    return tuple(value) if isinstance(value, list) else value


def _key_match(keys: Sequence[str], exprs: Sequence[str]) -> str:
    """``t.key = s.cN AND …``: a row of the table matches a batch row holding the same key values.

    upsert refuses batch rows with an empty key field, so every ``s.cN`` here is non-NULL, and then ``=`` means
    exactly what ``IS NOT DISTINCT FROM`` means (a NULL in the table matches neither); unlike it, ``=`` lets
    PostgreSQL hash-join the batch with the table (or use an index on the key) instead of comparing every row of
    the table with every row of the batch.
    """
    return " AND ".join(f"t.{quote_ident(k)} = {e}" for k, e in zip(keys, exprs, strict=True))


def _missing_required(ctx: RowContext, values: Mapping[str, Any]) -> list[str]:
    """The required fields a record leaves empty: it may update a row, but it must not insert one."""
    return [name for name in ctx.required if values.get(name) is None]


async def _unmatched(
    conn: asyncpg.Connection,
    ctx: RowContext,
    keys: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    extra: Sequence[Condition],
) -> set[int]:
    """Positions (0-based) of ``rows`` whose key matches no row of the table (within the actor's scope)."""
    source, params, exprs, _ = unnest_source(ctx, keys, rows, numbered=True)
    on = _key_match(keys, exprs)
    scope, scope_params = where_clause(ctx, extra, start=len(params) + 1, column_prefix="t.")
    if scope:
        on += " AND " + scope.removeprefix(" WHERE ")
    found = await conn.fetch(
        f"SELECT s.n FROM {source} WHERE NOT EXISTS (SELECT 1 FROM {ctx.table.qualified} AS t WHERE {on})",
        *params,
        *scope_params,
    )
    return {int(row["n"]) - 1 for row in found}


def _has_merge_returning(conn: asyncpg.Connection) -> bool:
    return bool(conn.get_server_version().major >= 17)  # MERGE … RETURNING merge_action() is PostgreSQL 17+


async def _merge(
    conn: asyncpg.Connection,
    ctx: RowContext,
    keys: Sequence[str],
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    extra: Sequence[Condition],
) -> tuple[int, int, list[int] | None]:
    """One MERGE of ``rows``; (inserted, updated, the ids of the rows written or None before PostgreSQL 17)."""
    non_keys = [c for c in columns if c not in keys]
    # a presence flag only for the columns some rows leave out: a column every row gives is simply assigned
    partial = [c for c in non_keys if not all(c in r for r in rows)]
    source, params, exprs, flags = unnest_source(ctx, columns, rows, flagged=partial)
    src = dict(zip(columns, exprs, strict=True))
    on = _key_match(keys, [src[k] for k in keys])
    scope, scope_params = where_clause(ctx, extra, start=len(params) + 1, column_prefix="t.")
    if scope:
        on += " AND " + scope.removeprefix(" WHERE ")
    params.extend(scope_params)
    # a column some rows of the batch do not give keeps its value in those rows (CASE on its presence flag)
    matched = (
        "WHEN MATCHED THEN UPDATE SET "
        + ", ".join(
            f"{quote_ident(c)} = CASE WHEN {flags[c]} THEN {src[c]} ELSE t.{quote_ident(c)} END"
            if c in flags
            else f"{quote_ident(c)} = {src[c]}"
            for c in non_keys
        )
        if non_keys
        else "WHEN MATCHED THEN DO NOTHING"
    )
    required = [f"{src[name]} IS NOT NULL" if name in src else "false" for name in ctx.required]
    sql = (
        f"MERGE INTO {ctx.table.qualified} AS t USING (SELECT * FROM {source}) AS s ON {on} {matched} "
        f"WHEN NOT MATCHED{' AND ' + ' AND '.join(required) if required else ''} "
        f"THEN INSERT ({', '.join(map(quote_ident, columns))}) VALUES ({', '.join(exprs)})"
    )
    if _has_merge_returning(conn):
        result = await conn.fetch(sql + " RETURNING merge_action() AS action, t.id", *params)
        inserted = sum(1 for r in result if r["action"] == "INSERT")
        return inserted, len(result) - inserted, [r["id"] for r in result]
    existing = await conn.fetchval(
        f"SELECT count(*) FROM {ctx.table.qualified} AS t WHERE EXISTS (SELECT 1 FROM {source} WHERE {on})", *params
    )
    status = await conn.execute(sql, *params)
    total = status_count(status)
    updated = int(existing) if non_keys else 0
    return total - updated, updated, None


async def upsert(
    conn: asyncpg.Connection,
    table: TableInfo,
    key_fields: Any,
    records: Any,
    *,
    stamp: Mapping[str, Any] | None = None,
    extra_conditions: Sequence[Condition] = (),
    optimistic: bool = False,
) -> dict[str, Any]:
    """Insert or update 1–100 rows matched on ``key_fields`` (no unique constraint needed): ``{inserted, updated,
    failed, errors, verified_total}`` (+ ``dropped``). Rows outside ``extra_conditions`` never match (a new row is
    inserted instead); ``stamp`` is written on inserted and updated rows. Required fields are checked only for the
    records that insert. ``optimistic``: as in :func:`~.write.insert_batch`."""
    rows_in = batch_records(records, "records")
    errors = RowErrors()
    inserted = updated = 0
    ids: list[int] | None = []
    try:
        ctx = await load_context(conn, table)
        keys = _key_fields(ctx, key_fields)
        extra = scope_conditions(ctx, extra_conditions)
        forced = stamp_values(ctx, stamp or {})
        valid, dropped, skipped = validate_rows(ctx, rows_in, insert=False, errors=errors)
        by_key: dict[tuple[Hashable, ...], tuple[int, dict[str, Any]]] = {}
        for number, values in valid:
            missing = [k for k in keys if values.get(k) is None]
            if missing:
                errors.add(number, f"key field(s) {', '.join(missing)} empty; every record needs its key_fields")
                continue
            values.update(forced)  # the key the MERGE compares includes a forced value (the owner field)
            key = tuple(_key_part(values[k]) for k in keys)
            if key in by_key:
                errors.add(by_key[key][0], f"same key as row {number}; only the last row with this key was written")
            by_key[key] = (number, values)
        batch = sorted(by_key.values(), key=lambda item: item[0])
        if batch:
            await _lock_keys(conn, ctx.table.qualified, by_key)
            columns = batch_columns([v for _, v in batch], ctx)
            if optimistic:  # as in insert_batch: no savepoint; a row-level error redoes the action carefully
                try:
                    inserted, updated, ids = await _merge(conn, ctx, keys, columns, [v for _, v in batch], extra)
                except asyncpg.PostgresError as exc:
                    if is_row_level(exc):
                        raise RedoAction("a row of the batch failed; redo with one savepoint per row") from None
                    raise
            else:
                try:  # as in insert_batch: the per-row fallback gets its own savepoint only when it is needed
                    async with conn.transaction():
                        inserted, updated, ids = await _merge(conn, ctx, keys, columns, [v for _, v in batch], extra)
                except asyncpg.PostgresError as exc:
                    if not is_row_level(exc):
                        raise
                    inserted = updated = 0
                    ids = []
                    async with conn.transaction():
                        for number, values in batch:
                            try:
                                async with conn.transaction():
                                    added, changed, written = await _merge(conn, ctx, keys, columns, [values], extra)
                            except asyncpg.PostgresError as row_exc:
                                if not is_row_level(row_exc):
                                    raise
                                errors.add(number, str(classify(row_exc)))
                                by_key.pop(next(k for k, v in by_key.items() if v[0] == number))
                                continue
                            inserted += added
                            updated += changed
                            if ids is not None and written is not None:
                                ids.extend(written)
                            else:  # before PostgreSQL 17: no ids, the keys are counted instead
                                ids = None
            incomplete = [(number, values) for number, values in batch if _missing_required(ctx, values)]
            if incomplete:  # the MERGE inserted none of these: the ones that matched no row were not written
                for position in sorted(await _unmatched(conn, ctx, keys, [v for _, v in incomplete], extra)):
                    number, values = incomplete[position]
                    names = ", ".join(_missing_required(ctx, values))
                    errors.add(number, f"{names}: required; give a value (no row has this key, so it would insert)")
            verified = (
                await count_ids(conn, table, ids)
                if ids is not None
                else await _count_keys(conn, ctx, keys, [v for _, v in by_key.values()], extra)
            )
        else:
            verified = 0
    except (asyncpg.PostgresError, asyncpg.InterfaceError, StoreError, FieldError) as exc:
        raise classify(exc) from None
    result: dict[str, Any] = {
        "inserted": inserted,
        "updated": updated,
        "failed": errors.failed,
        "errors": sorted(errors.items, key=lambda e: e["row"]),
        "verified_total": verified,
    }
    if skipped:
        result["skipped"] = skipped
    if dropped:
        result["dropped"] = dropped
    return result


def _key_hash(table: str, key: tuple[Hashable, ...]) -> int:
    """A key's lock number: 32 bits of a stable hash of the table and the key values (a collision only makes two
    keys wait for each other)."""
    digest = hashlib.blake2b(f"{table}\x00{key!r}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


async def _lock_keys(conn: asyncpg.Connection, table: str, keys: Iterable[tuple[Hashable, ...]]) -> None:
    """Serialise the writers of the same key values until the transaction ends: without a unique constraint two
    concurrent MERGEs of one new key would both insert it. Locks are taken in one order, so writers never deadlock."""
    hashes = sorted({_key_hash(table, key) for key in keys})
    await conn.execute(
        "SELECT pg_advisory_xact_lock($1, k) FROM unnest($2::int4[]) WITH ORDINALITY AS u(k, n) ORDER BY n",
        KEY_LOCK_CLASS,
        hashes,
    )


async def _count_keys(
    conn: asyncpg.Connection,
    ctx: RowContext,
    keys: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    extra: Sequence[Condition],
) -> int:
    if not rows:
        return 0
    source, params, exprs, _ = unnest_source(ctx, keys, rows)
    on = _key_match(keys, exprs)
    scope, scope_params = where_clause(ctx, extra, start=len(params) + 1, column_prefix="t.")
    if scope:
        on += " AND " + scope.removeprefix(" WHERE ")
    return int(
        await conn.fetchval(
            f"SELECT count(*) FROM {ctx.table.qualified} AS t WHERE EXISTS (SELECT 1 FROM {source} WHERE {on})",
            *params,
            *scope_params,
        )
    )
