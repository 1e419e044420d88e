"""Row-level security (permissions/rls.py, spec §7.2): the own policy and the actor settings."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.permissions import errors as perm_errors
from skillyard.builtin_skills.datatable.permissions import grants as perm_grants
from skillyard.builtin_skills.datatable.permissions import rls as perm_rls
from skillyard.builtin_skills.datatable.rows import write as rows_write
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.names import schema_name
from skillyard.builtin_skills.datatable.store.owners import resolve_schema
from skillyard.builtin_skills.datatable.structure import fields as structure_fields
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from support.datatable import asyncpg_dsn, grant, make_table, plain_role_dropped_afterwards


@pytest.fixture
async def pg_role(conn: asyncpg.Connection, schema: str, table: Any) -> AsyncIterator[str]:
    """A NOLOGIN non-superuser role with DML on the schema's tables."""
    async for role in plain_role_dropped_afterwards(conn, schema, "dt_perm"):
        await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"')
        yield role


async def _seen(conn: asyncpg.Connection, table: Any, role: str, emp_no: str | None, all_rows: bool = False):
    """The 事项 values ``role`` sees with the given actor settings (inside a rolled-back transaction)."""
    tr = conn.transaction()
    await tr.start()
    try:
        await perm_rls.set_actor(conn, emp_no, all_rows=all_rows)
        await conn.execute(f'SET LOCAL ROLE "{role}"')
        return sorted(r["事项"] for r in await conn.fetch(f"SELECT 事项 FROM {table.qualified}"))
    finally:
        await tr.rollback()


async def _rls_flags(conn: asyncpg.Connection, table: Any) -> tuple[bool, bool, int]:
    row = await conn.fetchrow(
        """SELECT c.relrowsecurity, c.relforcerowsecurity,
                  (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) AS policies
           FROM pg_class c WHERE c.oid = $1::regclass""",
        table.qualified,
    )
    return row["relrowsecurity"], row["relforcerowsecurity"], row["policies"]


async def test_rls_filters_rows_for_a_non_superuser(
    conn: asyncpg.Connection, schema: str, table: Any, pg_role: str, database_url: str
) -> None:
    assert await _rls_flags(conn, table) == (False, False, 0)
    assert await _seen(conn, table, pg_role, None) == ["a", "b", "c", "d"]  # no own grant: no policy
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["read"], row_scope="own", owner_field="负责人"
    )
    assert await _rls_flags(conn, table) == (True, True, 1)
    assert await _seen(conn, table, pg_role, "E1") == ["a", "b"]
    assert await _seen(conn, table, pg_role, "E2") == ["c"]
    assert await _seen(conn, table, pg_role, None) == []  # no setting: no rows
    assert await _seen(conn, table, pg_role, "") == []
    assert await _seen(conn, table, pg_role, None, all_rows=True) == ["a", "b", "c", "d"]
    # a session that never set anything
    fresh = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        async with fresh.transaction():
            await fresh.execute(f'SET LOCAL ROLE "{pg_role}"')
            assert await fresh.fetchval("SELECT current_setting('skillyard.emp_no', true)") is None
            assert await fresh.fetchval(f"SELECT count(*) FROM {table.qualified}") == 0
    finally:
        await fresh.close()
    # WITH CHECK: writing a row for someone else is refused
    tr = conn.transaction()
    await tr.start()
    try:
        await perm_rls.set_actor(conn, "E1")
        await conn.execute(f'SET LOCAL ROLE "{pg_role}"')
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute(f"INSERT INTO {table.qualified} (事项, 负责人) VALUES ('x', 'E2')")
    finally:
        await tr.rollback()
    # SET LOCAL: nothing survives the transaction
    assert await _seen(conn, table, pg_role, None) == []
    # revoking the last own grant takes the policy away
    await perm_grants.revoke(conn, schema, table_id_or_name="任务", role="r")
    assert await _rls_flags(conn, table) == (False, False, 0)
    assert await _seen(conn, table, pg_role, None) == ["a", "b", "c", "d"]


async def test_force_covers_the_table_owner(conn: asyncpg.Connection, schema: str, table: Any, pg_role: str) -> None:
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["read"], row_scope="own", owner_field="负责人"
    )
    await conn.execute(f'ALTER TABLE {table.qualified} OWNER TO "{pg_role}"')
    assert not await conn.fetchval("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = $1", pg_role)
    assert await _seen(conn, table, pg_role, "E2") == ["c"]  # the owner is filtered too (FORCE)
    if await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        # documented limit: superusers bypass row-level security even when it is forced
        assert await conn.fetchval(f"SELECT count(*) FROM {table.qualified}") == 4


async def test_set_actor_needs_a_transaction(conn: asyncpg.Connection) -> None:
    with pytest.raises(perm_errors.PermissionDenied, match="transaction"):
        await perm_rls.set_actor(conn, "E1")


async def test_integer_owner_field_matches_the_converted_employee_number(
    conn: asyncpg.Connection, database_url: str
) -> None:
    """The structured actions stamp and filter the employee number as a write converts it ("007" → 7 in an 整数
    owner field); the row-level security policy must match that value, not the text "007". Proved through the
    handler on a session whose connection runs as a non-superuser role (superusers bypass the policy)."""
    from skillyard.builtin_skills.datatable import handler
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    org = "PermInt" + uuid.uuid4().hex[:10]
    schema = await resolve_schema(conn, org)  # recorded by the platform's own role (the limited one cannot)
    role = f"dt_int_{uuid.uuid4().hex[:10]}"
    engine = create_async_engine(database_url)
    try:
        created = await structure_tables.create_table(
            conn, schema, "工单", [{"title": "事项", "uidt": "文本"}, {"title": "工号", "uidt": "整数"}]
        )
        info = await store_schema.resolve_table(conn, schema, created["id"])
        await rows_write.insert_batch(conn, info, [{"事项": "a", "工号": 7}, {"事项": "b", "工号": 8}, {"事项": "c"}])
        await perm_grants.grant(
            conn, schema, table_id_or_name="工单", role="staff", ops=["all"], row_scope="own", owner_field="工号"
        )
        await conn.execute(f'CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOBYPASSRLS')
        await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"')
        # the policy itself, for every form of the number a write accepts
        assert await _seen(conn, info, role, "007") == ["a"]
        assert await _seen(conn, info, role, " 7 ") == ["a"]
        assert await _seen(conn, info, role, "８") == ["b"]  # full-width, as a write converts it
        assert await _seen(conn, info, role, "E7") == []  # not a number: no row, no error
        assert await _seen(conn, info, role, None, all_rows=True) == ["a", "b", "c"]

        async with engine.connect() as connection:
            await connection.exec_driver_sql(f'SET ROLE "{role}"')
            await connection.commit()
            session = AsyncSession(bind=connection)
            ctx = {"org_id": org, "role_id": "staff", "team_role": "member", "actor_emp_no": "007", "db": session}

            async def run(action: str, **payload: Any) -> dict[str, Any]:
                return await handler.execute({"action": action, "payload": payload}, ctx)

            mine = await run("query", table_name="工单")
            assert [r["事项"] for r in mine["list"]] == ["a"] and mine["pageInfo"]["totalRows"] == 1, mine
            added = await run("insert", table_name="工单", data={"事项": "d"})
            assert added["ok"] is True and added["data"]["工号"] == 7, added
            changed = await run(
                "update_by",
                table_name="工单",
                filters=[{"field": "事项", "op": "eq", "value": "d"}],
                data={"事项": "e"},
            )
            assert changed["ok"] is True, changed
            total = await run("aggregate", table_name="工单", metrics=[{"op": "count", "alias": "n"}])
            assert total["rows"] == [{"n": 2}], total
            await session.close()
        assert sorted(r["事项"] for r in await conn.fetch(f"SELECT 事项 FROM {info.qualified} WHERE 工号 = 7")) == [
            "a",
            "e",
        ]
    finally:
        await engine.dispose()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
            await conn.execute(f'DROP OWNED BY "{role}" CASCADE')
            await conn.execute(f'DROP ROLE "{role}"')


async def test_owner_field_type_change_keeps_the_policy(
    conn: asyncpg.Connection, schema: str, table: Any, pg_role: str
) -> None:
    """PostgreSQL refuses to retype a column a policy reads: update_field makes the policy again for the new type
    (text → 整数 compares numbers from then on), and refuses a type an owner field cannot have, changing nothing."""
    tasks = await structure_tables.create_table(
        conn, schema, "工单", [{"title": "事项", "uidt": "文本"}, {"title": "工号", "uidt": "文本"}]
    )
    info = await store_schema.resolve_table(conn, schema, tasks["id"])
    await rows_write.insert_batch(conn, info, [{"事项": "a", "工号": "7"}, {"事项": "b", "工号": "x8"}])
    await conn.execute(f'GRANT SELECT ON {info.qualified} TO "{pg_role}"')
    await perm_grants.grant(
        conn, schema, table_id_or_name="工单", role="r", ops=["read"], row_scope="own", owner_field="工号"
    )
    assert await _seen(conn, info, pg_role, "007") == []  # text: "007" is not "7"
    with pytest.raises(store_schema.StoreError, match=r"1 row.*'x8'"):  # a value an 整数 write refuses
        await structure_fields.update_field(conn, schema, info.id, "工号", {"uidt": "整数"})
    assert await _seen(conn, info, pg_role, "x8") == ["b"]  # nothing changed, the policy is still there
    with pytest.raises(store_schema.StoreError, match="owner field") as refused:
        await structure_fields.update_field(conn, schema, info.id, "工号", {"uidt": "日期"})
    assert refused.value.need_param == "patch"
    await conn.execute(f"DELETE FROM {info.qualified} WHERE 工号 = 'x8'")
    changed = await structure_fields.update_field(conn, schema, info.id, "工号", {"uidt": "整数", "title": "员工号"})
    assert changed["uidt"] == "整数" and changed["title"] == "员工号"
    assert await _rls_flags(conn, info) == (True, True, 1)
    assert await _seen(conn, info, pg_role, "007") == ["a"]
    assert await _seen(conn, info, pg_role, "8") == []


async def test_own_scope_is_backed_by_forced_row_level_security(yard: SkillYard, org: str, conn: Any) -> None:
    await make_table(yard, org, rows=3)
    await grant(yard, org, "客户", "staff", "read", row_scope="own", owner_field="工号")
    row = await conn.fetchrow(
        "SELECT c.relrowsecurity, c.relforcerowsecurity FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = $1 AND c.relname = '客户'",
        schema_name(org),
    )
    assert row["relrowsecurity"] and row["relforcerowsecurity"]
    assert await conn.fetchval("SELECT count(*) FROM pg_policies WHERE schemaname = $1", schema_name(org)) >= 1
