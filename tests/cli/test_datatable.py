"""``skillyard datatable grant | grants | revoke`` (docs/cli.md), the datatable plugin's commands, on a real
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import pytest
from click.testing import Result

from support.cli import invoke, usage_error


def create_table(org: str, title: str = "客户") -> str:
    fields = [{"title": "名称", "uidt": "文本"}, {"title": "工号", "uidt": "文本"}, {"title": "金额", "uidt": "数字"}]
    payload = {"action": "create_table", "payload": {"table_name": title, "fields": fields}}
    out = invoke(
        "run",
        "datatable",
        "--context",
        json.dumps({"org_id": org, "team_role": "owner"}),
        "--input",
        json.dumps(payload),
    )
    assert out.exit_code == 0, out.output
    return str(json.loads(out.stdout)["id"])


@pytest.fixture
def dt_org(db_env) -> str:
    org = "cli" + uuid.uuid4().hex[:10]
    create_table(org)
    return org


def dt(*args: str) -> Result:
    return invoke("datatable", *args)


def _schema_exists(database_url: str, org: str) -> bool:
    import asyncpg

    from support.datatable import asyncpg_dsn

    schema = "org_data_" + re.sub(r"[^a-z0-9]", "", org.lower())

    async def check() -> bool:
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            return bool(await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f'"{schema}"'))
        finally:
            await conn.close()

    return asyncio.run(check())


DT_BAD = {
    "blank org": (["--org", "  ", "--table", "客户", "--role", "r", "--ops", "read"], "--org"),
    # an id without letters or digits has a schema of its own since schemas have owners: it has no tables
    "org without letters": (["--org", "!!-", "--table", "客户", "--role", "r", "--ops", "read"], "--table"),
    "unknown table": (["--table", "无此表", "--role", "r", "--ops", "read"], "--table"),
    "unknown op": (["--table", "客户", "--role", "r", "--ops", "read,fly"], "--ops"),
    "ungrantable op": (["--table", "客户", "--role", "r", "--ops", "create_table"], "--ops"),
    "sql op": (["--table", "客户", "--role", "r", "--ops", "sql_query"], "--ops"),
    "own without field": (["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own"], "--owner-field"),
    "owner field missing": (
        ["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own", "--owner-field", "无"],
        "--owner-field",
    ),
    "owner field wrong type": (
        ["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own", "--owner-field", "金额"],
        "--owner-field",
    ),
    "blank role": (["--table", "客户", "--role", " ", "--ops", "read"], "--role"),
    "bad row scope": (["--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "some"], "--row-scope"),
}


def test_datatable_grant_text(dt_org):
    """$ skillyard datatable grant --org acme --table 客户 --role sales --ops read,insert
    granted sales on 客户: read, insert; all rows"""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read,insert")
    assert out.exit_code == 0 and out.stdout.strip() == "granted sales on 客户: read, insert; all rows", out.output


def test_datatable_grant_own_text(dt_org):
    """granted field on 客户: read, update; own rows (by 工号)"""
    args = ["--org", dt_org, "--table", "客户", "--role", "field", "--ops", "read,update", "--row-scope", "own"]
    out = dt("grant", *args, "--owner-field", "工号")
    assert out.exit_code == 0 and out.stdout.strip() == "granted field on 客户: read, update; own rows (by 工号)", (
        out.output
    )


def test_datatable_grant_json(dt_org):
    """`--json` prints the stored grant `{table_id, table, role, ops, row_scope, owner_field}` with `ops` expanded and
    sorted."""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read,insert", "--json")
    grant = json.loads(out.stdout)
    assert out.exit_code == 0 and set(grant) == {"table_id", "table", "role", "ops", "row_scope", "owner_field"}
    assert grant["ops"] == ["aggregate", "insert", "list_columns", "query"]
    assert grant["table"] == "客户" and grant["role"] == "sales" and grant["row_scope"] == "all"
    assert grant["owner_field"] is None


def test_datatable_grant_all_expanded(dt_org):
    """Stored expanded, so an action added to the skill later is not granted by an old `all`."""
    grant = json.loads(dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "all", "--json").stdout)
    assert len(grant["ops"]) == 12 and "all" not in grant["ops"]


def test_datatable_grant_write_expanded(dt_org):
    """`write` (the nine write actions)"""
    grant = json.loads(
        dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "write", "--json").stdout
    )
    assert len(grant["ops"]) == 9 and "query" not in grant["ops"]


def test_datatable_grant_fullwidth_comma(dt_org):
    """comma-separated (`,` or `，`) row actions"""
    grant = json.loads(
        dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "query，insert", "--json").stdout
    )
    assert grant["ops"] == ["insert", "query"]


def test_datatable_grant_empty_ops(dt_org):
    """An empty value (`--ops ""`) is a grant of nothing"""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "", "--json")
    assert out.exit_code == 0 and json.loads(out.stdout)["ops"] == []


def test_datatable_grant_by_table_id(db_env):
    """`--table TABLE` | the table's title (exact) or id"""
    org = "cli" + uuid.uuid4().hex[:10]
    table_id = create_table(org)
    out = dt("grant", "--org", org, "--table", table_id, "--role", "r", "--ops", "read", "--json")
    assert (
        out.exit_code == 0
        and json.loads(out.stdout)["table"] == "客户"
        and json.loads(out.stdout)["table_id"] == table_id
    )


def test_datatable_grant_replaces(dt_org):
    """`grant` sets (or replaces) the grant"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "read")
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "insert")
    grants = json.loads(dt("grants", "--org", dt_org, "--json").stdout)
    assert [g["ops"] for g in grants] == [["insert"]]


def test_datatable_grants_table(dt_org):
    """$ skillyard datatable grants --org acme (TABLE ROLE OPS ROW SCOPE OWNER FIELD; ordered by table and role)"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read,insert")
    args = ["--table", "客户", "--role", "field", "--ops", "read,update", "--row-scope", "own", "--owner-field", "工号"]
    dt("grant", "--org", dt_org, *args)
    out = dt("grants", "--org", dt_org)
    lines = [re.split(r"\s{2,}", line.strip()) for line in out.stdout.strip().splitlines()]
    assert out.exit_code == 0
    assert lines == [
        ["TABLE", "ROLE", "OPS", "ROW SCOPE", "OWNER FIELD"],
        ["客户", "field", "read, update", "own", "工号"],
        ["客户", "sales", "read, insert", "all", "-"],
    ], out.stdout


@pytest.mark.parametrize(("ops", "shown"), [("all", "all"), ("write", "write"), ("", "(none)"), ("read", "read")])
def test_datatable_grants_shortens_groups(dt_org, ops, shown):
    """`OPS` (shortened back to `all`, `read`, `write` where a whole group is granted; `(none)` for an empty grant)"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", ops)
    out = dt("grants", "--org", dt_org)
    row = re.split(r"\s{2,}", out.stdout.strip().splitlines()[1].strip())
    assert row[2] == shown, out.stdout


def test_datatable_grants_empty_org_text(dt_org):
    """an organisation without grants prints a line saying every table is open."""
    out = dt("grants", "--org", dt_org)
    assert out.exit_code == 0 and "open" in out.stdout and len(out.stdout.strip().splitlines()) == 1


def test_datatable_grants_empty_json(dt_org):
    """`--json` prints a list of the grant objects (`[]` when none)."""
    out = dt("grants", "--org", dt_org, "--json")
    assert out.exit_code == 0 and json.loads(out.stdout) == []


def test_datatable_grants_json_objects(dt_org):
    """`--json` prints a list of the grant objects"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "b", "--ops", "read")
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "a", "--ops", "insert")
    grants = json.loads(dt("grants", "--org", dt_org, "--json").stdout)
    assert [g["role"] for g in grants] == ["a", "b"]
    assert all(set(g) == {"table_id", "table", "role", "ops", "row_scope", "owner_field"} for g in grants)


def test_datatable_grants_creates_nothing(db_env, database_url):
    """It creates nothing."""
    org = "cli" + uuid.uuid4().hex[:10]
    out = dt("grants", "--org", org)
    assert out.exit_code == 0 and not _schema_exists(database_url, org)


def test_datatable_refused_grant_changes_nothing(db_env, database_url):
    """A refused command changes nothing (not even the organisation's schema)."""
    org = "cli" + uuid.uuid4().hex[:10]
    out = dt("grant", "--org", org, "--table", "客户", "--role", "r", "--ops", "read")
    assert out.exit_code == 2 and not _schema_exists(database_url, org)


def test_datatable_revoke_text(dt_org):
    """`revoke` removes the grant and prints `revoked the grant of ROLE on TABLE`, or `ROLE had no grant on TABLE;
    nothing changed` (exit 0 either way)"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    first = dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales")
    again = dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales")
    assert first.exit_code == 0 and first.stdout.strip() == "revoked the grant of sales on 客户"
    assert again.exit_code == 0 and again.stdout.strip() == "sales had no grant on 客户; nothing changed"


def test_datatable_revoke_json(dt_org):
    """`--json` prints `{"revoked": true|false, "org", "table", "role"}`"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    first = json.loads(dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales", "--json").stdout)
    again = json.loads(dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales", "--json").stdout)
    assert first == {"revoked": True, "org": dt_org, "table": "客户", "role": "sales"}
    assert again["revoked"] is False


def test_datatable_revoke_removes_grant(dt_org):
    """`revoke` removes the grant"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    dt("revoke", "--org", dt_org, "--table", "客户", "--role", "sales")
    assert json.loads(dt("grants", "--org", dt_org, "--json").stdout) == []


@pytest.mark.parametrize("case", sorted(DT_BAD))
def test_datatable_grant_bad_input(dt_org, case):
    """Bad input exits 2 with one `Error:` line naming the option to change and how"""
    args, option = DT_BAD[case]
    if "--org" not in args:
        args = ["--org", dt_org, *args]
    out = dt("grant", *args)
    usage_error(out, option)
    error_lines = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1 and option in error_lines[0], out.stderr


def test_datatable_unknown_table_lists_tables(dt_org):
    """an unknown table (the message lists the organisation's tables)"""
    out = dt("grant", "--org", dt_org, "--table", "无此表", "--role", "r", "--ops", "read")
    usage_error(out, "客户")


def test_datatable_owner_field_message_lists_fields(dt_org):
    """e.g. `Error: --owner-field: row_scope 'own' needs owner_field: the field of table '客户' holding the owner's
    employee number (fields: 名称, 工号, 金额)`"""
    out = dt("grant", "--org", dt_org, "--table", "客户", "--role", "r", "--ops", "read", "--row-scope", "own")
    usage_error(out, "Error: --owner-field: row_scope 'own' needs owner_field", "(fields: 名称, 工号, 金额)")


@pytest.mark.parametrize("missing", ["--org", "--table", "--role", "--ops"])
def test_datatable_grant_missing_required_option(dt_org, missing):
    """skillyard datatable grant  --org ORG --table TABLE --role ROLE --ops OPS (required options)"""
    values = {"--org": dt_org, "--table": "客户", "--role": "r", "--ops": "read"}
    args = [x for key, value in values.items() if key != missing for x in (key, value)]
    usage_error(dt("grant", *args), missing)


def test_datatable_revoke_unknown_table_exit_2(dt_org):
    """Bad input exits 2 … an unknown table (the message lists the organisation's tables)"""
    usage_error(dt("revoke", "--org", dt_org, "--table", "无此表", "--role", "r"), "--table")


def test_datatable_grants_blank_org_exit_2(db_env):
    """Bad input exits 2 … a blank `--org` (or one without letters or digits)"""
    usage_error(dt("grants", "--org", " "), "--org")


def test_datatable_unreachable_database_exit_2(monkeypatch):
    """Bad input exits 2 with one `Error:` line …: … an unreachable database."""
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", "postgresql://u:dt-pass-5@127.0.0.1:1/db")
    out = dt("grants", "--org", "acme")
    usage_error(out)
    assert "dt-pass-5" not in out.output
    assert len([line for line in out.stderr.splitlines() if line.startswith("Error:")]) == 1


def test_datatable_grant_enforced_on_run(dt_org):
    """a role with grants on a table may run only the granted actions"""
    dt("grant", "--org", dt_org, "--table", "客户", "--role", "sales", "--ops", "read")
    ctx = json.dumps({"org_id": dt_org, "role_id": "sales"})
    payload = json.dumps({"action": "insert", "table_name": "客户", "data": {"名称": "Ada"}})
    out = invoke("run", "datatable", "--context", ctx, "--input", payload)
    assert out.exit_code == 1 and json.loads(out.stdout)["ok"] is False


def test_datatable_run_blank_org_is_a_failure_envelope(db_env):
    """`org_id` | … blank → `error_type: config`, `non_retriable`, nothing created"""
    out = invoke("run", "datatable", "--context", '{"org_id": ""}', "--input", '{"action": "list_tables"}')
    env = json.loads(out.stdout)
    assert out.exit_code == 1 and env["error_type"] == "config" and env["non_retriable"] is True
