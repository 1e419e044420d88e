"""Grants (permissions/grants.py, spec §7.2): ops, owner fields and the grants table."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.actions import table as action_table
from skillyard.builtin_skills.datatable.permissions import access as perm_access
from skillyard.builtin_skills.datatable.permissions import errors as perm_errors
from skillyard.builtin_skills.datatable.permissions import grants as perm_grants
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.structure import fields as structure_fields
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from support.datatable.permissions import access_for


def test_action_sets_cover_dispatch_actions() -> None:
    every = perm_access.STRUCTURE_ACTIONS | perm_access.SQL_ACTIONS
    every |= perm_grants.READ_ACTIONS | perm_grants.WRITE_ACTIONS
    assert every | {"list_tables"} == set(action_table.ACTIONS)
    assert perm_grants.parse_ops(["read"]) == perm_grants.READ_ACTIONS
    assert perm_grants.parse_ops("read, insert") == perm_grants.READ_ACTIONS | {"insert"}
    assert perm_grants.parse_ops(["ALL"]) == perm_grants.READ_ACTIONS | perm_grants.WRITE_ACTIONS
    assert perm_grants.parse_ops([]) == frozenset()
    for bad in (["sql_query"], ["create_table"], ["fly"], 3):
        with pytest.raises(perm_errors.PermissionDenied) as info:
            perm_grants.parse_ops(bad)
        assert info.value.need_param == "ops"
    assert issubclass(perm_errors.PermissionDenied, store_schema.StoreError)


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
    await structure_fields.update_field(conn, schema, table.id, "负责人", {"title": "经办人"})
    access = await access_for(conn, schema, table, "query", ["r"])
    assert not access.allowed and "no longer exists" in access.reason


async def test_grants_table_is_idempotent_and_cascades(conn: asyncpg.Connection, schema: str, table: Any) -> None:
    await perm_grants.ensure_grants_table(conn, schema)
    await perm_grants.ensure_grants_table(conn, schema)
    await perm_grants.grant(conn, schema, table_id_or_name="任务", role="r", ops=["read"])
    await structure_tables.delete_table(conn, schema, table.id)
    assert await perm_grants.list_grants(conn, schema) == []


async def test_grant_on_an_unknown_table_creates_nothing(conn: asyncpg.Connection) -> None:
    fresh = f"org_data_fresh{uuid.uuid4().hex[:10]}"
    with pytest.raises(store_schema.StoreError, match="no tables yet"):
        await perm_grants.grant(conn, fresh, table_id_or_name="客户", role="sales", ops="read")
    assert not await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", fresh)
