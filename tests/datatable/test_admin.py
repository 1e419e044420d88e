"""The administrators' Python API (admin.py): grant, list_grants and revoke on a real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from skillyard.builtin_skills.datatable import admin
from skillyard.builtin_skills.datatable.permissions.errors import PermissionDenied
from skillyard.builtin_skills.datatable.permissions.grants import READ_ACTIONS
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.store.names import schema_name
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from support.datatable import grant, make_table
from support.datatable.admin import CUSTOMER_FIELDS, org_dropped_afterwards, policy_exists, schema_exists


@pytest.fixture
def org(database_url: str) -> Iterator[str]:
    """A fresh organisation id in mixed case; its schema is dropped afterwards."""
    yield from org_dropped_afterwards(database_url, "Adm")


async def test_api_grant_list_revoke(db_env, conn, org):
    schema = schema_name(org)
    await structure_tables.create_table(conn, schema, "客户", CUSTOMER_FIELDS)
    async with SkillYard(include_builtin=False) as yard:
        stored = await admin.grant(yard, org=org, table="客户", role="sales", ops=["read", "insert"])
        assert set(stored) == {"table_id", "table", "role", "ops", "row_scope", "owner_field"}
        assert stored["ops"] == sorted({*READ_ACTIONS, "insert"}) and stored["row_scope"] == "all"
        own = await admin.grant(
            yard, org=org, table=stored["table_id"], role="field", ops="query", row_scope="own", owner_field=" 工号 "
        )
        assert (own["table"], own["ops"], own["row_scope"], own["owner_field"]) == ("客户", ["query"], "own", "工号")
        # committed: another connection sees both grants and the row-level security policy
        assert await conn.fetchval(f'SELECT count(*) FROM "{schema}"."_dt_grants"') == 2
        assert await policy_exists(conn, schema, "客户")
        assert await admin.list_grants(yard, org=org) == [own, stored]
        # granting again replaces
        replaced = await admin.grant(yard, org=org, table="客户", role="sales", ops="all")
        assert replaced["ops"] == sorted(set(replaced["ops"])) and "delete_by" in replaced["ops"]
        assert await admin.revoke(yard, org=org, table="客户", role="field") is True
        assert await admin.revoke(yard, org=org, table="客户", role="field") is False
        assert not await policy_exists(conn, schema, "客户")
        assert [g["role"] for g in await admin.list_grants(yard, org=org)] == ["sales"]
        assert await admin.list_grants(yard, org="Other" + uuid.uuid4().hex[:8]) == []


@pytest.mark.parametrize(
    ("kwargs", "need_param", "expected"),
    [
        ({"org": ""}, "org", "org must be an organisation id"),
        ({"org": None}, "org", "org must be an organisation id"),
        ({"table": "订单"}, "table_id", "no table '订单'"),
        ({"ops": "read,fly"}, "ops", "unknown or ungrantable op(s) 'fly'"),
        ({"row_scope": "own"}, "owner_field", "needs owner_field"),
        ({"row_scope": "own", "owner_field": "员工"}, "owner_field", "has no field '员工'"),
        ({"row_scope": "own", "owner_field": "金额"}, "owner_field", "is of type 数字"),
        ({"row_scope": "some"}, "row_scope", "row_scope must be 'all' or 'own'"),
        ({"role": ""}, "role", "role must be a non-empty role name"),
    ],
)
async def test_api_bad_input_raises_and_rolls_back(db_env, conn, org, kwargs, need_param, expected):
    schema = schema_name(org)
    await structure_tables.create_table(conn, schema, "客户", CUSTOMER_FIELDS)
    call = {"org": org, "table": "客户", "role": "sales", "ops": "read", **kwargs}
    async with SkillYard(include_builtin=False) as yard:
        with pytest.raises(store_schema.StoreError, match=expected.replace("(", r"\(").replace(")", r"\)")) as err:
            await admin.grant(yard, **call)
        assert err.value.need_param == need_param
        if need_param not in ("org", "table_id"):
            assert isinstance(err.value, PermissionDenied)
        assert await admin.list_grants(yard, org=org) == []


async def test_api_failed_grant_leaves_no_schema(db_env, conn, org):
    async with SkillYard(include_builtin=False) as yard:
        with pytest.raises(store_schema.StoreError, match="this organisation has no tables yet"):
            await admin.grant(yard, org=org, table="客户", role="sales", ops="read")
        with pytest.raises(store_schema.StoreError, match="this organisation has no tables yet"):
            await admin.revoke(yard, org=org, table="客户", role="sales")
    assert not await schema_exists(conn, schema_name(org))


@pytest.mark.spec("§7.2")
async def test_owner_field_must_exist(yard: SkillYard, org: str) -> None:
    from skillyard.builtin_skills.datatable.store.schema import StoreError

    await make_table(yard, org)
    with pytest.raises(StoreError):
        await grant(yard, org, "客户", "staff", "read", row_scope="own", owner_field="不存在")
    with pytest.raises(StoreError):
        await grant(yard, org, "客户", "staff", "read", row_scope="own")


async def test_python_admin_api(yard: SkillYard, org: str) -> None:
    from skillyard.builtin_skills.datatable import admin

    await make_table(yard, org)
    stored = await admin.grant(yard, org=org, table="客户", role="r", ops="read,insert")
    assert set(stored) >= {"table_id", "table", "role", "ops", "row_scope", "owner_field"}
    assert stored["ops"] == sorted(["list_columns", "query", "aggregate", "insert"])
    assert [g["role"] for g in await admin.list_grants(yard, org=org)] == ["r"]
    assert await admin.revoke(yard, org=org, table="客户", role="r") is True
    assert await admin.list_grants(yard, org=org) == []


@pytest.mark.parametrize(
    ("kw", "param"),
    [
        ({"org": "", "table": "客户", "role": "r", "ops": "read"}, "org"),
        ({"table": "无", "role": "r", "ops": "read"}, "table_id"),
        ({"table": "客户", "role": " ", "ops": "read"}, "role"),
        ({"table": "客户", "role": "r", "ops": "explode"}, "ops"),
        ({"table": "客户", "role": "r", "ops": "read", "row_scope": "mine"}, "row_scope"),
        ({"table": "客户", "role": "r", "ops": "read", "row_scope": "own"}, "owner_field"),
        ({"table": "客户", "role": "r", "ops": "read", "row_scope": "own", "owner_field": "金额"}, "owner_field"),
    ],
)
async def test_python_admin_errors_name_the_parameter(
    yard: SkillYard, org: str, kw: dict[str, Any], param: str
) -> None:
    from skillyard.builtin_skills.datatable import admin
    from skillyard.builtin_skills.datatable.store.schema import StoreError

    await make_table(yard, org)
    try:
        await admin.grant(yard, **{"org": org, **kw})
    except Exception as exc:  # StoreError, or PermissionDenied for grant settings (docs/cli.md)
        assert isinstance(exc, StoreError) or type(exc).__name__ == "PermissionDenied", exc
        assert getattr(exc, "need_param", None) == param, (exc, getattr(exc, "need_param", None))
    else:
        pytest.fail(f"admin.grant accepted {kw}")
    assert await admin.list_grants(yard, org=org) == []


async def test_revoking_the_last_own_grant_removes_row_level_security(yard: SkillYard, org: str, conn: Any) -> None:
    from skillyard.builtin_skills.datatable import admin

    await make_table(yard, org, rows=3)
    await grant(yard, org, "客户", "a", "read", row_scope="own", owner_field="工号")
    await grant(yard, org, "客户", "b", "read", row_scope="own", owner_field="工号")
    flags = "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1::regclass"
    qualified = f'"{schema_name(org)}"."客户"'
    assert await admin.revoke(yard, org=org, table="客户", role="a") is True
    assert tuple(await conn.fetchrow(flags, qualified)) == (True, True)  # b is still own-scoped
    assert await admin.revoke(yard, org=org, table="客户", role="b") is True
    assert tuple(await conn.fetchrow(flags, qualified)) == (False, False)
    assert await conn.fetchval("SELECT count(*) FROM pg_policies WHERE schemaname = $1", schema_name(org)) == 0


@pytest.mark.spec("§7.2")
async def test_python_admin_grant_by_table_id_and_list(yard: SkillYard, org: str) -> None:
    from skillyard.builtin_skills.datatable import admin

    table_id = await make_table(yard, org)
    stored = await admin.grant(yard, org=org, table=table_id, role="r", ops="write")
    assert stored["table_id"] == table_id and stored["table"] == "客户", stored
    listed = await admin.list_grants(yard, org=org)
    assert listed == [stored], listed
