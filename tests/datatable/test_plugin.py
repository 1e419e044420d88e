"""The skill's default plugin (plugin.py): the ``skillyard datatable grant | grants | revoke`` commands, in-process
and in real subprocesses."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner
from skillyard.builtin_skills.datatable.permissions.grants import READ_ACTIONS
from skillyard.builtin_skills.datatable.store.names import schema_name
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from skillyard.cli import cli
from skillyard.plugins import load_plugins, pm
from support.datatable import FIELDS, asyncpg_dsn, context, grant, make_table, run, run_skillyard
from support.datatable.admin import CUSTOMER_FIELDS, on_connection, org_dropped_afterwards, policy_exists, schema_exists


@pytest.fixture(scope="module")
def dt_cli() -> Any:
    """The root CLI with the plugin commands added, as ``main()`` does before parsing."""
    load_plugins()
    pm.hook.register_commands(cli=cli)
    assert "datatable" in cli.commands
    return cli


@pytest.fixture
def org(database_url: str) -> Iterator[str]:
    """A fresh organisation id in mixed case; its schema is dropped afterwards."""
    yield from org_dropped_afterwards(database_url, "Adm")


@pytest.fixture
def customers(org: str, database_url: str) -> str:
    """The table 客户 (名称 文本, 工号 文本, 金额 数字), created with the store."""

    async def create(conn: asyncpg.Connection) -> None:
        await structure_tables.create_table(conn, schema_name(org), "客户", CUSTOMER_FIELDS)

    on_connection(database_url, create)
    return "客户"


def invoke(dt_cli: Any, *args: str) -> Any:
    return CliRunner().invoke(dt_cli, ["datatable", *args])


GRANT = ("grant", "--table", "客户", "--role", "sales", "--ops", "read")


def _cli() -> Any:
    from skillyard.cli import cli
    from skillyard.plugins import load_plugins, pm

    load_plugins()
    if "datatable" not in cli.commands:
        pm.hook.register_commands(cli=cli)
    assert "datatable" in cli.commands
    return cli


def _invoke(*args: str) -> Any:
    from click.testing import CliRunner

    return CliRunner().invoke(_cli(), ["datatable", *args])


def _sync(coro_fn: Any) -> Any:

    async def go() -> Any:
        async with SkillYard() as y:
            return await coro_fn(y)

    return asyncio.run(go())


def pg_value(database_url: str, sql: str, *args: Any) -> Any:

    import asyncpg

    async def go() -> Any:
        connection = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return await connection.fetchval(sql, *args)
        finally:
            await connection.close()

    return asyncio.run(go())


def sync_setup(org: str, fields: list[dict[str, Any]] | None = None, rows: int = 0, own: bool = False) -> None:

    async def go() -> None:
        async with SkillYard() as y:
            await make_table(y, org, rows=rows, fields=fields)
            if own:
                await grant(y, org, "客户", "field", "read", row_scope="own", owner_field="工号")

    asyncio.run(go())


def test_cli_grant_grants_revoke(dt_cli, db_env, database_url, org, customers):
    schema = schema_name(org)
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
    assert on_connection(database_url, lambda c: policy_exists(c, schema, "客户")), "own scope installs the RLS policy"

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
    assert not on_connection(database_url, lambda c: policy_exists(c, schema, "客户")), (
        "the last own grant takes the policy"
    )
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
    assert not on_connection(database_url, lambda c: schema_exists(c, schema_name(org)))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("grant", "--org", "  ", "--table", "客户", "--role", "r", "--ops", "read"), "--org: org must be an"),
        # "组织" is an organisation id of its own since schemas have owners (hardening issue 1): it has no tables yet
        (("grant", "--org", "组织", "--table", "客户", "--role", "r", "--ops", "read"), "--table: no table '客户'"),
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
    schema = schema_name(org)
    assert not on_connection(database_url, lambda c: schema_exists(c, schema)), "the schema was rolled back"


def test_cli_unreachable_database_is_a_usage_error(dt_cli, monkeypatch):
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    result = invoke(dt_cli, "grants", "--org", "acme")
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "Error: cannot reach PostgreSQL" in result.output and "SKILLYARD_DATABASE_URL" in result.output


def test_cli_help_lists_the_commands(dt_cli):
    result = CliRunner().invoke(dt_cli, ["datatable", "--help"])
    assert result.exit_code == 0 and all(name in result.output for name in ("grant", "grants", "revoke"))


@pytest.mark.usefixtures("db_env")
def test_cli_grant_is_enforced_by_the_skill_and_revoke_reopens(org: str) -> None:
    def setup(y: SkillYard) -> Any:
        return make_table(y, org, rows=6)

    table_id = _sync(setup)
    granted = _invoke(
        *("grant", "--org", org, "--table", "客户", "--role", "sales", "--ops", "query，aggregate"),
        *("--row-scope", "own", "--owner-field", "工号", "--json"),
    )
    assert granted.exit_code == 0, granted.output
    stored = json.loads(granted.output)
    assert stored["ops"] == ["aggregate", "query"] and stored["row_scope"] == "own" and stored["table_id"] == table_id
    listed = _invoke("grants", "--org", org, "--json")
    assert listed.exit_code == 0 and [g["role"] for g in json.loads(listed.output)] == ["sales"], listed.output
    text = _invoke("grants", "--org", org)
    assert text.exit_code == 0 and "sales" in text.output and "工号" in text.output

    async def as_sales(y: SkillYard) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        ctx = context(org, role_id="sales", actor_emp_no="E1")
        return (
            await run(y, ctx, "query", table_id=table_id),
            await run(y, ctx, "insert", table_id=table_id, data={"姓名": "x"}),
            await run(y, ctx, "sql_query", sql="SELECT * FROM 客户"),
        )

    q, ins, sql = _sync(as_sales)
    assert q["ok"] and q["pageInfo"]["totalRows"] == 2, q
    assert ins["ok"] is False and ins["error_type"] == "config", ins
    assert sql["ok"] is False and sql["error_code"] == "forbidden_table", sql

    revoked = _invoke("revoke", "--org", org, "--table", "客户", "--role", "sales", "--json")
    assert revoked.exit_code == 0 and json.loads(revoked.output)["revoked"] is True, revoked.output
    q, ins, sql = _sync(as_sales)
    assert q["pageInfo"]["totalRows"] == 6 and ins["ok"] and sql["ok"], (q, ins, sql)
    again = _invoke("revoke", "--org", org, "--table", "客户", "--role", "sales", "--json")
    assert again.exit_code == 0 and json.loads(again.output)["revoked"] is False


@pytest.mark.usefixtures("db_env")
@pytest.mark.parametrize(
    "args",
    [
        ("--table", "不存在", "--role", "r", "--ops", "query"),
        ("--table", "客户", "--role", "r", "--ops", "query", "--row-scope", "own"),
        ("--table", "客户", "--role", "r", "--ops", "query", "--row-scope", "own", "--owner-field", "无"),
        ("--table", "客户", "--role", "r", "--ops", "create_table"),
        ("--table", "客户", "--role", "r", "--ops", "sql_query"),
        ("--table", "客户", "--role", "r", "--ops", "explode"),
    ],
)
def test_cli_bad_grants_exit_2(org: str, args: tuple[str, ...]) -> None:
    _sync(lambda y: make_table(y, org))
    result = _invoke("grant", "--org", org, *args)
    assert result.exit_code == 2, (args, result.output)
    listed = _invoke("grants", "--org", org, "--json")
    assert json.loads(listed.output) == []


@pytest.mark.usefixtures("db_env")
def test_cli_grant_texts_grants_table_and_revoke(org: str) -> None:
    sync_setup(org, rows=3)
    first = run_skillyard(
        "datatable", "grant", "--org", org, "--table", "客户", "--role", "sales", "--ops", "read,insert"
    )
    assert first.returncode == 0 and first.stdout.strip() == "granted sales on 客户: read, insert; all rows", first
    own = run_skillyard(
        "datatable",
        "grant",
        "--org",
        org,
        "--table",
        "客户",
        "--role",
        "field",
        "--ops",
        "read,update",
        "--row-scope",
        "own",
        "--owner-field",
        "工号",
    )
    assert own.stdout.strip() == "granted field on 客户: read, update; own rows (by 工号)", own
    empty = run_skillyard("datatable", "grant", "--org", org, "--table", "客户", "--role", "nobody", "--ops", "")
    assert empty.returncode == 0, empty
    table = run_skillyard("datatable", "grants", "--org", org).stdout.splitlines()
    assert table[0].split() == ["TABLE", "ROLE", "OPS", "ROW", "SCOPE", "OWNER", "FIELD"], table
    assert [line.split()[1] for line in table[1:]] == ["field", "nobody", "sales"], table
    assert "(none)" in table[2] and table[3].rstrip().endswith("-") and table[1].rstrip().endswith("工号"), table
    listed = json.loads(run_skillyard("datatable", "grants", "--org", org, "--json").stdout)
    assert {g["role"]: g["ops"] for g in listed}["nobody"] == []
    revoked = run_skillyard("datatable", "revoke", "--org", org, "--table", "客户", "--role", "field")
    assert revoked.returncode == 0 and revoked.stdout.strip() == "revoked the grant of field on 客户", revoked
    again = run_skillyard("datatable", "revoke", "--org", org, "--table", "客户", "--role", "field", "--json")
    assert json.loads(again.stdout) == {"revoked": False, "org": org, "table": "客户", "role": "field"}, again.stdout
    text_again = run_skillyard("datatable", "revoke", "--org", org, "--table", "客户", "--role", "field")
    assert text_again.stdout.strip() == "field had no grant on 客户; nothing changed", text_again


@pytest.mark.usefixtures("db_env")
def test_cli_refusals_exit_2_with_one_error_line_and_change_nothing(org: str, database_url: str) -> None:
    sync_setup(org, fields=[*FIELDS, {"title": "日", "uidt": "日期"}, {"title": "号", "uidt": "文本"}], own=True)
    fresh = "q" + uuid.uuid4().hex[:12]
    cases = [
        (
            "grant",
            "--org",
            org,
            "--table",
            "客户",
            "--role",
            "r",
            "--ops",
            "read",
            "--row-scope",
            "own",
            "--owner-field",
            "日",
        ),
        (
            "grant",
            "--org",
            org,
            "--table",
            "客户",
            "--role",
            "r",
            "--ops",
            "read",
            "--row-scope",
            "own",
            "--owner-field",
            "号",
        ),
        ("grant", "--org", org, "--table", "客户", "--role", "  ", "--ops", "read"),
        ("grant", "--org", fresh, "--table", "客户", "--role", "r", "--ops", "read"),
        ("revoke", "--org", org, "--table", "无", "--role", "field"),
    ]
    for args in cases:
        result = run_skillyard("datatable", *args)
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        assert result.returncode == 2 and len(errors) == 1, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
    unreachable = {"SKILLYARD_DATABASE_URL": "postgresql+asyncpg://x:y@127.0.0.1:1/z"}
    down = run_skillyard("datatable", "grants", "--org", org, env=unreachable)
    assert down.returncode == 2 and "Error:" in down.stderr and "Traceback" not in down.stderr, down.stderr
    unknown = run_skillyard("datatable", "grants", "--org", fresh)
    assert unknown.returncode == 0 and "open" in unknown.stdout, unknown
    listed = json.loads(run_skillyard("datatable", "grants", "--org", org, "--json").stdout)
    assert [(g["role"], g["owner_field"]) for g in listed] == [("field", "工号")]
    assert pg_value(database_url, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", f"org_data_{fresh}") == 0
