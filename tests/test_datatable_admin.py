"""Administering datatable grants: the Python API (skillyard.builtin_skills.datatable.admin) and the
``skillyard datatable grant | grants | revoke`` commands the skill's default plugin adds, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import asyncpg
import pytest
from click.testing import CliRunner
from skillyard.builtin_skills.datatable import admin, store_schema, store_tables
from skillyard.builtin_skills.datatable.permissions_errors import PermissionDenied
from skillyard.builtin_skills.datatable.permissions_grants import READ_ACTIONS

from support.datatable import asyncpg_dsn
from skillyard import SkillYard
from skillyard.cli import cli
from skillyard.plugins import load_plugins, pm

T = TypeVar("T")
FIELDS = [{"title": "名称", "uidt": "文本"}, {"title": "工号", "uidt": "文本"}, {"title": "金额", "uidt": "数字"}]


def _db(database_url: str, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    """Run ``work`` on a fresh connection of its own (the CLI tests are synchronous: the CLI runs its own loop)."""

    async def go() -> T:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return await work(conn)
        finally:
            await conn.close()

    return asyncio.run(go())


async def _schema_exists(conn: asyncpg.Connection, schema: str) -> bool:
    return bool(await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f'"{schema}"'))


async def _policy_exists(conn: asyncpg.Connection, schema: str, table: str) -> bool:
    return bool(
        await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_policies WHERE schemaname = $1 AND tablename = $2 AND policyname = $3)",
            schema,
            table,
            "_dt_own",
        )
    )


@pytest.fixture(scope="module")
def dt_cli() -> Any:
    """The root CLI with the plugin commands added, as ``main()`` does before parsing."""
    load_plugins()
    pm.hook.register_commands(cli=cli)
    assert "datatable" in cli.commands
    return cli


@pytest.fixture
def org(database_url: str) -> Iterator[str]:
    """A fresh organisation id; its schema is dropped afterwards."""
    name = "Adm" + uuid.uuid4().hex[:12]
    yield name

    async def drop(conn: asyncpg.Connection) -> None:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{store_schema.schema_for(name)}" CASCADE')

    _db(database_url, drop)


@pytest.fixture
def customers(org: str, database_url: str) -> str:
    """The table 客户 (名称 文本, 工号 文本, 金额 数字), created with the store."""

    async def create(conn: asyncpg.Connection) -> None:
        await store_tables.create_table(conn, store_schema.schema_for(org), "客户", FIELDS)

    _db(database_url, create)
    return "客户"


def invoke(dt_cli: Any, *args: str) -> Any:
    return CliRunner().invoke(dt_cli, ["datatable", *args])


# ---------------------------------------------------------------------------------------------------------------
# CLI


def test_cli_grant_grants_revoke(dt_cli, db_env, database_url, org, customers):
    schema = store_schema.schema_for(org)
    first = invoke(dt_cli, "grant", "--org", org, "--table", customers, "--role", "sales", "--ops", "query,insert")
    assert first.exit_code == 0, first.output
    assert first.output.strip() == "granted sales on 客户: insert, query; all rows"

    own = invoke(
        dt_cli,
        *("grant", "--org", org, "--table", customers, "--role", "field", "--ops", "read"),
        *("--row-scope", "own", "--owner-field", "工号", "--json"),
    )
    assert own.exit_code == 0, own.output
    stored = json.loads(own.output)
    assert stored["table"] == "客户" and stored["role"] == "field" and stored["ops"] == sorted(READ_ACTIONS)
    assert stored["row_scope"] == "own" and stored["owner_field"] == "工号" and uuid.UUID(stored["table_id"])
    assert _db(database_url, lambda c: _policy_exists(c, schema, "客户")), "own scope installs the RLS policy"

    table = invoke(dt_cli, "grants", "--org", org)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == ["TABLE", "ROLE", "OPS", "ROW", "SCOPE", "OWNER", "FIELD"]
    assert lines[1].split() == ["客户", "field", "read", "own", "工号"]
    assert lines[2].split() == ["客户", "sales", "insert,", "query", "all", "-"]
    assert lines[1].index("field") + 2 == lines[0].index("ROLE")  # 客户 takes four terminal columns, not two

    listed = invoke(dt_cli, "grants", "--org", org, "--json")
    assert listed.exit_code == 0, listed.output
    assert [(g["role"], g["row_scope"], g["owner_field"]) for g in json.loads(listed.output)] == [
        ("field", "own", "工号"),
        ("sales", "all", None),
    ]

    revoked = invoke(dt_cli, "revoke", "--org", org, "--table", customers, "--role", "field", "--json")
    assert revoked.exit_code == 0, revoked.output
    assert json.loads(revoked.output) == {"revoked": True, "org": org, "table": "客户", "role": "field"}
    assert not _db(database_url, lambda c: _policy_exists(c, schema, "客户")), "the last own grant takes the policy"
    again = invoke(dt_cli, "revoke", "--org", org, "--table", customers, "--role", "field")
    assert again.exit_code == 0 and again.output.strip() == "field had no grant on 客户; nothing changed"
    gone = invoke(dt_cli, "revoke", "--org", org, "--table", customers, "--role", "sales")
    assert gone.exit_code == 0 and gone.output.strip() == "revoked the grant of sales on 客户"
    empty = invoke(dt_cli, "grants", "--org", org)
    assert empty.exit_code == 0 and "has no grants: every table is open to every role" in empty.output
    assert json.loads(invoke(dt_cli, "grants", "--org", org, "--json").output) == []


def test_cli_grants_of_an_unknown_org_creates_nothing(dt_cli, db_env, database_url, org):
    result = invoke(dt_cli, "grants", "--org", org, "--json")
    assert result.exit_code == 0 and json.loads(result.output) == []
    assert not _db(database_url, lambda c: _schema_exists(c, store_schema.schema_for(org)))


GRANT = ("grant", "--table", "客户", "--role", "sales", "--ops", "read")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("grant", "--org", "  ", "--table", "客户", "--role", "r", "--ops", "read"), "--org: org must be an"),
        (("grant", "--org", "组织", "--table", "客户", "--role", "r", "--ops", "read"), "at least one letter or digit"),
        (("grants", "--org", ""), "--org: org must be an organisation id"),
        (("revoke", "--org", " ", "--table", "客户", "--role", "r"), "--org: org must be an organisation id"),
        ((*GRANT[:2], "订单", *GRANT[3:]), "--table: no table '订单'; tables are: 客户"),
        (("revoke", "--table", "订单", "--role", "r"), "--table: no table '订单'; tables are: 客户"),
        ((*GRANT[:-1], "query,fly"), "--ops: unknown or ungrantable op(s) 'fly'; use read, write, all"),
        ((*GRANT[:-1], "create_table"), "--ops: unknown or ungrantable op(s) 'create_table'"),
        ((*GRANT, "--row-scope", "own"), "--owner-field: row_scope 'own' needs owner_field"),
        ((*GRANT, "--row-scope", "own", "--owner-field", "员工"), "--owner-field: table '客户' has no field '员工'"),
        ((*GRANT, "--row-scope", "own", "--owner-field", "金额"), "--owner-field: field '金额' is of type 数字"),
        ((*GRANT, "--row-scope", "mine"), "Invalid value for '--row-scope'"),
        (("grant", "--table", "客户", "--role", " ", "--ops", "read"), "--role: role must be a non-empty role name"),
        (("grant", "--table", "客户", "--role", "sales"), "Missing option '--ops'"),
    ],
)
def test_cli_bad_input_is_one_clear_line(dt_cli, db_env, database_url, org, customers, args, expected):
    if "--org" not in args:
        args = (args[0], "--org", org, *args[1:])
    result = invoke(dt_cli, *args)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and expected in errors[0], result.output
    listed = json.loads(invoke(dt_cli, "grants", "--org", org, "--json").output)
    assert listed == [], "a refused grant leaves nothing behind"


def test_cli_failed_grant_on_a_new_org_rolls_back(dt_cli, db_env, database_url, org):
    result = invoke(dt_cli, "grant", "--org", org, "--table", "客户", "--role", "r", "--ops", "read")
    assert result.exit_code == 2 and "this organisation has no tables yet" in result.output
    schema = store_schema.schema_for(org)
    assert not _db(database_url, lambda c: _schema_exists(c, schema)), "the schema was rolled back"


def test_cli_unreachable_database_is_a_usage_error(dt_cli, monkeypatch):
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    result = invoke(dt_cli, "grants", "--org", "acme")
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "Error: cannot reach PostgreSQL" in result.output and "SKILLYARD_DATABASE_URL" in result.output


def test_cli_help_lists_the_commands(dt_cli):
    result = CliRunner().invoke(dt_cli, ["datatable", "--help"])
    assert result.exit_code == 0 and all(name in result.output for name in ("grant", "grants", "revoke"))


# ---------------------------------------------------------------------------------------------------------------
# Python API


async def test_api_grant_list_revoke(db_env, conn, org):
    schema = store_schema.schema_for(org)
    await store_tables.create_table(conn, schema, "客户", FIELDS)
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
        assert await _policy_exists(conn, schema, "客户")
        assert await admin.list_grants(yard, org=org) == [own, stored]
        # granting again replaces
        replaced = await admin.grant(yard, org=org, table="客户", role="sales", ops="all")
        assert replaced["ops"] == sorted(set(replaced["ops"])) and "delete_by" in replaced["ops"]
        assert await admin.revoke(yard, org=org, table="客户", role="field") is True
        assert await admin.revoke(yard, org=org, table="客户", role="field") is False
        assert not await _policy_exists(conn, schema, "客户")
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
    schema = store_schema.schema_for(org)
    await store_tables.create_table(conn, schema, "客户", FIELDS)
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
    assert not await _schema_exists(conn, store_schema.schema_for(org))
