"""The datatable skill's permission model (skills/datatable/permissions_*.py, spec §7.2), on real PostgreSQL.

Row-level security is proved under a NOLOGIN, non-superuser role reached with ``SET LOCAL ROLE`` (superusers always
bypass row-level security, FORCE or not).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from support.datatable import asyncpg_dsn, load_datatable_module

perm_access = load_datatable_module("permissions_access")
perm_errors = load_datatable_module("permissions_errors")
perm_grants = load_datatable_module("permissions_grants")
perm_rls = load_datatable_module("permissions_rls")
store_fields = load_datatable_module("store_fields")
store_schema = load_datatable_module("store_schema")
store_tables = load_datatable_module("store_tables")
rows_errors = load_datatable_module("rows_errors")
rows_read = load_datatable_module("rows_read")
rows_write = load_datatable_module("rows_write")
action_aliases = load_datatable_module("action_aliases")
Condition = load_datatable_module("filters").Condition

FIELDS = [{"title": "事项", "uidt": "文本"}, {"title": "负责人", "uidt": "文本"}, {"title": "金额", "uidt": "数字"}]
DATA = [
    {"事项": "a", "负责人": "E1", "金额": 1},
    {"事项": "b", "负责人": "E1", "金额": 2},
    {"事项": "c", "负责人": "E2", "金额": 3},
    {"事项": "d", "负责人": None, "金额": 4},
]


@pytest.fixture
async def schema(conn: asyncpg.Connection) -> AsyncIterator[str]:
    name = store_schema.schema_for("Perm" + uuid.uuid4().hex[:12])
    try:
        yield name
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str) -> Any:
    created = await store_tables.create_table(conn, schema, "任务", FIELDS)
    info = await store_schema.resolve_table(conn, schema, created["id"])
    result = await rows_write.insert_batch(conn, info, DATA)
    assert result["inserted"] == 4, result
    return info


@pytest.fixture
async def pg_role(conn: asyncpg.Connection, schema: str, table: Any) -> AsyncIterator[str]:
    """A NOLOGIN non-superuser role with DML on the schema's tables."""
    role = f"dt_perm_{uuid.uuid4().hex[:10]}"
    await conn.execute(f'CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOBYPASSRLS')
    await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
    await conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    await conn.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"')
    try:
        yield role
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.execute(f'DROP OWNED BY "{role}" CASCADE')
        await conn.execute(f'DROP ROLE "{role}"')


async def _access(conn: asyncpg.Connection, schema: str, table: Any, action: str, roles: list[str], **kw: Any):
    kw.setdefault("team_role", "member")
    kw.setdefault("allow_sql", True)
    return await perm_access.check_access(conn, schema, table=table, action=action, roles=roles, **kw)


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


# --------------------------------------------------------------------------------------------------------------------
# vocabulary


def test_action_sets_cover_dispatch_actions() -> None:
    every = perm_access.STRUCTURE_ACTIONS | perm_access.SQL_ACTIONS
    every |= perm_grants.READ_ACTIONS | perm_grants.WRITE_ACTIONS
    assert every | {"list_tables"} == set(action_aliases.ACTIONS)
    assert perm_grants.parse_ops(["read"]) == perm_grants.READ_ACTIONS
    assert perm_grants.parse_ops("read, insert") == perm_grants.READ_ACTIONS | {"insert"}
    assert perm_grants.parse_ops(["ALL"]) == perm_grants.READ_ACTIONS | perm_grants.WRITE_ACTIONS
    assert perm_grants.parse_ops([]) == frozenset()
    for bad in (["sql_query"], ["create_table"], ["fly"], 3):
        with pytest.raises(perm_errors.PermissionDenied) as info:
            perm_grants.parse_ops(bad)
        assert info.value.need_param == "ops"
    assert issubclass(perm_errors.PermissionDenied, store_schema.StoreError)


# --------------------------------------------------------------------------------------------------------------------
# table level


async def test_open_by_default(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    for action in ("query", "insert", "delete_by", "list_columns"):
        access = await _access(conn, schema, table, action, ["sales"])
        assert access == perm_access.Access(True, "all", None, None)
    assert await perm_grants.list_grants(conn, schema) == []
    assert await perm_access.own_scoped_tables(conn, schema, ["sales"]) == frozenset()


async def test_grants_are_exceptions(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    g = await perm_grants.grant(conn, schema, table_id_or_name="任务", role="sales", ops=["read"])
    assert g == perm_grants.Grant(table.id, "任务", "sales", perm_grants.READ_ACTIONS, "all", None)
    assert (await _access(conn, schema, table, "query", ["sales"])).allowed
    denied = await _access(conn, schema, table, "insert", ["sales"])
    assert not denied.allowed
    assert "skillyard datatable grant" in denied.reason and "任务" in denied.reason
    # another table without grants stays open
    other = await store_tables.create_table(conn, schema, "其他", FIELDS)
    other_info = await store_schema.resolve_table(conn, schema, other["id"])
    assert (await _access(conn, schema, other_info, "insert", ["sales"])).allowed
    # upsert per (table, role)
    await perm_grants.grant(conn, schema, table_id_or_name=table.id, role="sales", ops=["write"])
    assert [x.ops for x in await perm_grants.list_grants(conn, schema)] == [perm_grants.WRITE_ACTIONS]
    assert not (await _access(conn, schema, table, "query", ["sales"])).allowed
    assert await perm_grants.revoke(conn, schema, table_id_or_name="任务", role="sales") is True
    assert await perm_grants.revoke(conn, schema, table_id_or_name="任务", role="sales") is False
    assert (await _access(conn, schema, table, "query", ["sales"])).allowed


async def test_unconfigured_role_opens_the_table(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="sales", ops=[])
    assert not (await _access(conn, schema, table, "query", ["sales"])).allowed
    assert (await _access(conn, schema, table, "query", ["hr"])).allowed  # hr has no row: open
    assert (await _access(conn, schema, table, "delete_by", ["sales", "hr"])).allowed  # one unconfigured role
    assert (await _access(conn, schema, table, "delete_by", [])).allowed  # no roles: unconfigured


async def test_union_of_ops_and_widest_scope(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="a", ops=["query"], row_scope="own", owner_field="负责人"
    )
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="b", ops=["insert", "query"])
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="c", ops=["read", "update"], row_scope="own",
                      owner_field="负责人")  # fmt: skip
    own = perm_access.Access(True, "own", "负责人", None)
    assert await _access(conn, schema, table, "query", ["a"]) == own
    assert await _access(conn, schema, table, "query", ["a", "b"]) == perm_access.Access(True)  # all beats own
    assert await _access(conn, schema, table, "insert", ["a", "b"]) == perm_access.Access(True)
    assert await _access(conn, schema, table, "update", ["a", "c"]) == own  # union: c brings update
    assert not (await _access(conn, schema, table, "delete", ["a", "b", "c"])).allowed
    # the role with scope all only widens the actions it was granted
    assert await _access(conn, schema, table, "update", ["b", "c"]) == own
    grants = await perm_grants.list_grants(conn, schema)
    assert [(x.role, x.row_scope, x.owner_field) for x in grants] == [
        ("a", "own", "负责人"),
        ("b", "all", None),
        ("c", "own", "负责人"),
    ]


async def test_structure_needs_owner_or_admin(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    for action in perm_access.STRUCTURE_ACTIONS:
        for team_role in ("owner", "admin", "Admin"):
            assert (await _access(conn, schema, table, action, [], team_role=team_role)).allowed
        for team_role in ("member", "", None):
            access = await _access(conn, schema, table, action, [], team_role=team_role)
            assert not access.allowed and "owner or admin" in access.reason
    assert (await _access(conn, schema, None, "create_table", ["x"], team_role="admin")).allowed


async def test_sql_needs_allow_sql(conn: asyncpg.Connection, schema: str) -> None:
    for action in perm_access.SQL_ACTIONS:
        assert (await _access(conn, schema, None, action, ["x"])).allowed
        access = await _access(conn, schema, None, action, ["x"], allow_sql=False)
        assert not access.allowed and "allow_sql" in access.reason
    assert (await _access(conn, schema, None, "list_tables", ["x"])).allowed
    assert not (await _access(conn, schema, None, "fly", ["x"])).allowed


async def test_owner_field_must_exist(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    async def bad(**kw: Any) -> str:
        with pytest.raises(perm_errors.PermissionDenied) as info:
            await perm_grants.grant(conn, schema, table_id_or_name="任务", role="r", ops=["read"], **kw)
        return str(info.value)

    assert "owner_field" in await bad(row_scope="own")
    assert "no field '工号'" in await bad(row_scope="own", owner_field="工号")
    assert "type 数字" in await bad(row_scope="own", owner_field="金额")
    assert "'all' or 'own'" in await bad(row_scope="mine")
    with pytest.raises(store_schema.StoreError):
        await perm_grants.grant(conn, schema, table_id_or_name="不存在", role="r", ops=["read"])
    assert await perm_grants.list_grants(conn, schema) == []
    # one owner field per table
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["read"], row_scope="own", owner_field="负责人"
    )
    with pytest.raises(perm_errors.PermissionDenied, match="another owner field"):
        await perm_grants.grant(conn, schema, table_id_or_name="任务", role="r2", ops=["read"], row_scope="own",
                          owner_field="事项")  # fmt: skip
    # the owner field renamed later: refused (fail closed) until granted again
    await store_fields.update_field(conn, schema, table.id, "负责人", {"title": "经办人"})
    access = await _access(conn, schema, table, "query", ["r"])
    assert not access.allowed and "no longer exists" in access.reason


# --------------------------------------------------------------------------------------------------------------------
# row scope own


def test_own_scope_conditions_and_stamp() -> None:
    own = perm_access.Access(True, "own", "负责人", None)
    assert perm_access.own_scope(own, {"actor_emp_no": "E1", "emp_no": "E9"}) == (
        [Condition("负责人", "eq", "E1")],
        {"负责人": "E1"},
    )
    assert perm_access.own_scope(own, {"emp_no": " E9 "}) == ([Condition("负责人", "eq", "E9")], {"负责人": "E9"})
    assert perm_access.own_scope(own, {"actor_emp_no": "", "emp_no": 42}) == (
        [Condition("负责人", "eq", "42")],
        {"负责人": "42"},
    )
    for ctx in ({}, None, {"actor_emp_no": "  "}, {"emp_no": True}, {"user_id": "E1"}):
        with pytest.raises(perm_errors.PermissionDenied) as info:
            perm_access.own_scope(own, ctx)
        assert info.value.error_type == "config" and "employee number" in str(info.value)
    assert perm_access.own_scope(perm_access.Access(True), {}) == ([], {})
    with pytest.raises(perm_errors.PermissionDenied):
        perm_access.own_scope(perm_access.Access(False, reason="no"), {"emp_no": "E1"})
    assert perm_access.protected_fields(own) == {"负责人"}
    assert perm_access.protected_fields(perm_access.Access(True)) == frozenset()


async def test_own_scope_drives_the_row_functions(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["all"], row_scope="own", owner_field="负责人"
    )
    access = await _access(conn, schema, table, "query", ["r"])
    extra, stamp = perm_access.own_scope(access, {"actor_emp_no": "E1"})
    result = await rows_read.query(conn, table, extra_conditions=extra, sort="事项")
    assert [r["事项"] for r in result["list"]] == ["a", "b"]
    record = await rows_write.insert(conn, table, {"事项": "e", "负责人": "E2"}, stamp=stamp)
    assert record["负责人"] == "E1"
    assert await rows_read.count_matching(conn, table, None, extra) == 3
    with pytest.raises(rows_errors.RowsError):
        await rows_write.update(conn, table, record["id"], {"负责人": "E2"}, extra_conditions=extra,
                          protected=perm_access.protected_fields(access))  # fmt: skip


async def test_own_scoped_tables(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    other = await store_tables.create_table(conn, schema, "其他", FIELDS)
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="r", ops=["read"], row_scope="own", owner_field="负责人"
    )
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="boss", ops=["all"])
    await perm_grants.grant(conn, schema, table_id_or_name=other["id"], role="r", ops=["query"])
    assert await perm_access.own_scoped_tables(conn, schema, ["r"]) == {"任务"}
    assert await perm_access.own_scoped_tables(conn, schema, ["r", "boss"]) == frozenset()  # all beats own
    assert await perm_access.own_scoped_tables(conn, schema, ["r", "hr"]) == frozenset()  # hr unconfigured: open
    assert await perm_access.own_scoped_tables(conn, schema, []) == frozenset()
    forbidden = await perm_access.sql_forbidden_tables(conn, schema, ["r"])
    assert {"任务", "其他", "_dt_grants", "_dt_tables", "_dt_fields"} <= forbidden  # 其他: r may only query
    assert "任务" not in await perm_access.sql_forbidden_tables(conn, schema, ["boss"])


# --------------------------------------------------------------------------------------------------------------------
# row-level security


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


async def test_grants_table_is_idempotent_and_cascades(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.ensure_grants_table(conn, schema)
    await perm_grants.ensure_grants_table(conn, schema)
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="r", ops=["read"])
    await store_tables.delete_table(conn, schema, table.id)
    assert await perm_grants.list_grants(conn, schema) == []


# --------------------------------------------------------------------------------------------------------------------
# table_access: the one-query path of the handler agrees with resolve_table + check_access + set_actor


async def _settings(conn: asyncpg.Connection) -> tuple[str, str, str]:
    row = await conn.fetchrow(
        "SELECT current_setting($1, true) AS emp, current_setting($2, true) AS emp_int, "
        "current_setting($3, true) AS all_rows",
        perm_rls.EMP_NO_SETTING,
        perm_rls.EMP_NO_INT_SETTING,
        perm_rls.ALL_ROWS_SETTING,
    )
    return row["emp"] or "", row["emp_int"] or "", row["all_rows"] or ""


async def test_table_access_agrees_with_check_access(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    async def compare(by: str, action: str, roles: list[str], emp_no: str | None) -> None:
        has_grants = await perm_grants.has_grants_table(conn, schema)
        expected = await _access(conn, schema, table, action, roles)
        async with conn.transaction():
            found = await perm_access.table_access(
                conn,
                schema,
                table_id=by,
                table_name=None,
                action=action,
                roles=roles,
                emp_no=emp_no,
                has_grants=has_grants,
            )
            assert found is not None
            info, access, preset = found
            assert (info, access) == (table, expected), (action, roles)
            assert [f.as_dict() for f in info.fields] == await store_schema.list_columns(conn, schema, table.id)
            own = access.row_scope == "own"
            wanted = perm_rls.actor_settings(emp_no if own else None, all_rows=not own)
            assert preset == wanted == await _settings(conn), (action, roles, preset, wanted)
        outside = await perm_access.table_access(
            conn,
            schema,
            table_id=by,
            table_name=None,
            action=action,
            roles=roles,
            emp_no=emp_no,
            has_grants=has_grants,
        )
        assert outside is not None and outside[2] is None  # outside a transaction nothing is set

    cases = [
        ("query", ["a"]),
        ("query", ["a", "b"]),
        ("insert", ["a"]),
        ("update", ["b"]),
        ("query", []),
        ("delete_by", ["c"]),
        ("query", ["c", "zz"]),
        ("aggregate", ["b", "c"]),
    ]
    for action, roles in cases:  # no grants table yet
        await compare(table.id, action, roles, "E1")
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="a", ops=["query"], row_scope="own", owner_field="负责人"
    )
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="b", ops=["read", "update"], row_scope="all")
    await perm_grants.grant(
        conn, schema, table_id_or_name="任务", role="c", ops=["all"], row_scope="own", owner_field="负责人"
    )
    for action, roles in cases:
        for emp_no in ("E1", None, " 007 "):
            await compare(table.id, action, roles, emp_no)
            await compare(" 任务 ", action, roles, emp_no)
    assert (
        await perm_access.table_access(
            conn, schema, table_id="没有", table_name=None, action="query", roles=["a"], emp_no="E1", has_grants=True
        )
        is None
    )
    assert (
        await perm_access.table_access(
            conn,
            schema,
            table_id=table.id,
            table_name=None,
            action="create_table",
            roles=[],
            emp_no=None,
            has_grants=True,
        )
        is None
    )
    await store_fields.update_field(
        conn, schema, table.id, "负责人", {"title": "经办人"}
    )  # the owner field is gone: refused
    await compare(table.id, "query", ["a"], "E1")


async def test_grant_on_an_unknown_table_creates_nothing(conn: asyncpg.Connection) -> None:
    fresh = f"org_data_fresh{uuid.uuid4().hex[:10]}"
    with pytest.raises(store_schema.StoreError, match="no tables yet"):
        await perm_grants.grant(conn, fresh, table_id_or_name="客户", role="sales", ops="read")
    assert not await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", fresh)


# --------------------------------------------------------------------------------------------------------------------
# an 整数 owner field under row-level security


async def test_integer_owner_field_matches_the_converted_employee_number(
    conn: asyncpg.Connection, database_url: str
) -> None:
    """The structured actions stamp and filter the employee number as a write converts it ("007" → 7 in an 整数
    owner field); the row-level security policy must match that value, not the text "007". Proved through the
    handler on a session whose connection runs as a non-superuser role (superusers bypass the policy)."""
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    handler = load_datatable_module("handler")
    org = "PermInt" + uuid.uuid4().hex[:10]
    schema = store_schema.schema_for(org)
    role = f"dt_int_{uuid.uuid4().hex[:10]}"
    engine = create_async_engine(database_url)
    try:
        created = await store_tables.create_table(
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
    tasks = await store_tables.create_table(
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
        await store_fields.update_field(conn, schema, info.id, "工号", {"uidt": "整数"})
    assert await _seen(conn, info, pg_role, "x8") == ["b"]  # nothing changed, the policy is still there
    with pytest.raises(store_schema.StoreError, match="owner field") as refused:
        await store_fields.update_field(conn, schema, info.id, "工号", {"uidt": "日期"})
    assert refused.value.need_param == "patch"
    await conn.execute(f"DELETE FROM {info.qualified} WHERE 工号 = 'x8'")
    changed = await store_fields.update_field(conn, schema, info.id, "工号", {"uidt": "整数", "title": "员工号"})
    assert changed["uidt"] == "整数" and changed["title"] == "员工号"
    assert await _rls_flags(conn, info) == (True, True, 1)
    assert await _seen(conn, info, pg_role, "007") == ["a"]
    assert await _seen(conn, info, pg_role, "8") == []
