"""The schema registry (store/owners.py): different raw organisation ids never share a schema; schemas made before
the registry are claimed only by the id equal to their key, and an administrator assigns the rest."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.store import owners
from skillyard.builtin_skills.datatable.store.schema import StoreError

from skillyard import SkillYard
from support.cli import invoke
from support.datatable import FIELDS, context, run


@pytest.fixture
def tag() -> str:
    return uuid.uuid4().hex[:8]


async def test_ids_that_normalized_to_one_name_get_a_schema_each(yard: SkillYard, tag: str) -> None:
    """Hardening issue 1: 华为1 and 腾讯1 both became org_data_1, and one read the other's tables."""
    first, second = f"华为{tag}", f"腾讯{tag}"
    one, two = context(first, session_id=f"s1-{tag}"), context(second, session_id=f"s2-{tag}")
    made = await run(yard, one, "create_table", table_name="机密", fields=FIELDS)
    assert made["ok"], made
    listed = await run(yard, two, "list_tables")
    assert listed["ok"] and listed["data"] == [], listed
    sql = await run(yard, two, "sql_query", sql="SELECT count(*) AS n FROM 机密")
    assert sql["ok"] is False, sql
    assert [t["title"] for t in (await run(yard, one, "list_tables"))["data"]] == ["机密"]


async def test_the_same_id_resolves_to_one_schema_under_concurrency(conn: asyncpg.Connection, database_url: str, tag):
    from support.datatable import asyncpg_dsn

    others = [await asyncpg.connect(asyncpg_dsn(database_url)) for _ in range(4)]
    try:
        owners._resolved.clear()
        found = await asyncio.gather(*(owners.resolve_schema(c, f"Same-{tag}") for c in others))
    finally:
        for c in others:
            await c.close()
    assert len(set(found)) == 1 and found[0].startswith("org_data_same")


async def test_a_legacy_schema_is_claimed_only_by_its_own_key(yard: SkillYard, conn: asyncpg.Connection, tag: str):
    key = f"legacy{tag}"
    await conn.execute(f'CREATE SCHEMA "org_data_{key}"')  # made by the rule before the registry, with no owner
    owners._resolved.clear()
    refused = await run(yard, context(key.upper()), "list_tables")
    assert refused["ok"] is False and refused["error_type"] == "config", refused
    assert f"skillyard datatable assign-schema --org ORG --schema org_data_{key}" in refused["error"]
    claimed = await run(yard, context(key), "list_tables")
    assert claimed["ok"], claimed
    assert (
        await conn.fetchval('SELECT org_id FROM "_dt_registry".schema_owners WHERE schema_name = $1', f"org_data_{key}")
        == key
    )
    other = await run(yard, context(key.upper()), "list_tables")
    assert other["ok"] and other["data"] == [], other  # now its own schema, not the legacy one
    await conn.execute(f'DROP SCHEMA "org_data_{key}" CASCADE')


def test_doctor_reports_an_ownerless_schema_and_assign_schema_resolves_it(db_env, database_url: str, tag: str):
    from support.datatable import asyncpg_dsn

    async def setup() -> None:
        c = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            await owners.ensure_registry(c)
            await c.execute(f'CREATE SCHEMA "org_data_orphan{tag}"')
        finally:
            await c.close()

    asyncio.run(setup())
    found = invoke("doctor", "--json")
    check = next(c for c in json.loads(found.stdout)["checks"] if c["name"] == "datatable.schema_owners")
    assert check["status"] == "warn" and f"org_data_orphan{tag}" in check["detail"] and "assign-schema" in check["fix"]
    done = invoke("datatable", "assign-schema", "--org", f"Orphan-{tag}", "--schema", f"org_data_orphan{tag}")
    assert done.exit_code == 0 and "now belongs to the organisation" in done.stdout, done.output
    again = invoke("datatable", "assign-schema", "--org", f"Else-{tag}", "--schema", f"org_data_orphan{tag}")
    assert again.exit_code == 2 and "already belongs to the organisation" in again.output
    missing = invoke("datatable", "assign-schema", "--org", "x", "--schema", "org_data_nosuch" + tag)
    assert missing.exit_code == 2 and "--schema: there is no schema" in missing.output
    after = next(
        c for c in json.loads(invoke("doctor", "--json").stdout)["checks"] if c["name"] == "datatable.schema_owners"
    )
    assert f"org_data_orphan{tag}" not in after["detail"]


@pytest.mark.parametrize("org", [None, "", "   "])
async def test_no_organisation_id_is_refused(conn: Any, org: Any) -> None:
    with pytest.raises(StoreError, match="org_id"):
        await owners.resolve_schema(conn, org)
