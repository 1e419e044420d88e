"""``skillyard doctor``: home, database (real PostgreSQL), skills, plugin checks and the datatable role check."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.admin import CREATEROLE_WARNING, sql_role_check
from sqlalchemy.engine import make_url

from skillyard import hookimpl
from support.cli import invoke
from support.datatable import asyncpg_dsn

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/nothing"


def doctor(*args: str) -> Any:
    return invoke("doctor", *args)


def by_name(result: Any) -> dict[str, dict[str, Any]]:
    report = json.loads(result.stdout)
    return {c["name"]: c for c in report["checks"]}


def test_doctor_all_ok_text(db_env, home):
    result = doctor()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"ok    home: SKILLYARD_HOME {home} is writable"
    assert lines[1].startswith("ok    database: PostgreSQL ") and "migrations applied (revision " in lines[1]
    assert lines[2].startswith("ok    skills: ") and "none with errors" in lines[2]
    assert any(line.startswith("ok    datatable.sql_roles: database user ") for line in lines)
    assert lines[-1].endswith(" ok, 0 warn, 0 fail")
    assert "Traceback" not in result.output and "fix:" not in result.output


def test_doctor_json(db_env):
    result = doctor("--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "ok"
    assert [c["name"] for c in report["checks"]][:3] == ["home", "database", "skills"]
    for c in report["checks"]:
        assert set(c) == {"name", "status", "detail", "fix", "plugin"} and c["status"] == "ok" and c["fix"] is None
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["home"]["plugin"] == "core"
    assert checks["datatable.sql_roles"]["plugin"] == "skillyard.builtin_skills.datatable.plugin"


def test_doctor_fails_on_unreachable_database(monkeypatch):
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", UNREACHABLE)
    result = doctor()
    assert result.exit_code == 1, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("fail  database: "))
    assert "cannot open SKILLYARD_DATABASE_URL" in line and "— fix: check SKILLYARD_DATABASE_URL" in line
    checks = by_name(doctor("--json"))
    assert checks["database"]["status"] == "fail" and checks["home"]["status"] == "ok"
    role_check = checks["datatable.sql_roles"]
    assert role_check["status"] == "warn" and role_check["detail"].startswith("not checked: the database cannot")
    assert json.loads(doctor("--json").stdout)["status"] == "fail"


def test_doctor_fails_on_unwritable_home(db_env, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SKILLYARD_HOME", str(blocker / "home"))
    result = doctor("--json")
    assert result.exit_code == 1, result.output
    checks = by_name(result)
    assert checks["home"]["status"] == "fail" and "is not writable" in checks["home"]["detail"]
    assert "set SKILLYARD_HOME to a folder this user can write" in checks["home"]["fix"]
    assert checks["database"]["status"] == "ok"


def test_doctor_warns_on_skills_with_errors(db_env, make_skill, skills_root):
    make_skill("good")
    make_skill("broken", frontmatter="name: broken\ndescription: [unclosed")
    result = doctor("--skills-dir", str(skills_root))
    assert result.exit_code == 0, result.output  # warnings alone do not fail
    line = next(x for x in result.output.splitlines() if x.startswith("warn  skills: "))
    assert "1 with errors: broken" in line and "— fix: run `skillyard list`" in line
    assert result.output.splitlines()[-1].endswith("1 warn, 0 fail")


def test_doctor_unknown_skills_dir_is_a_usage_error(tmp_path):
    result = doctor("--skills-dir", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_doctor_plugin_checks_that_raise_or_are_malformed_fail_by_name(db_env, plugin_reg):
    class Raises:
        @hookimpl
        def doctor_checks(self, yard):
            raise RuntimeError("boom")

    class Malformed:
        @hookimpl
        def doctor_checks(self, yard):
            return [{"name": "acme.x", "status": "great"}, "nope"]

    class NotAList:
        @hookimpl
        def doctor_checks(self, yard):
            return {"name": "acme.y", "status": "ok"}

    class Fine:
        @hookimpl
        def doctor_checks(self, yard):
            async def later():
                await asyncio.sleep(0)
                return [{"name": "acme.ok", "status": "ok", "detail": "all\nfine", "fix": None}]

            return later

    for plugin, name in (
        (Raises(), "raises"),
        (Malformed(), "malformed"),
        (NotAList(), "not-a-list"),
        (Fine(), "fine"),
    ):
        plugin_reg(plugin, name)
    result = doctor("--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    mine = [c for c in report["checks"] if c["plugin"] in ("raises", "malformed", "not-a-list", "fine")]
    assert [(c["plugin"], c["name"], c["status"]) for c in mine] == [
        ("raises", "raises.doctor_checks", "fail"),
        ("malformed", "malformed.doctor_checks", "fail"),
        ("malformed", "malformed.doctor_checks", "fail"),
        ("not-a-list", "not-a-list.doctor_checks", "fail"),
        ("fine", "acme.ok", "ok"),
    ]
    assert "raised RuntimeError: boom" in mine[0]["detail"]
    assert "malformed check" in mine[1]["detail"] and '"status": "ok" | "warn" | "fail"' in mine[1]["fix"]
    assert mine[-1]["detail"] == "all fine"  # one line
    assert any(c["name"] == "datatable.sql_roles" and c["status"] == "ok" for c in report["checks"])


# ---------------------------------------------------------------------------------------------------------------
# The datatable plugin's check: may the database user create the per-organisation SQL roles?


async def test_sql_role_check_ok_and_warn_under_set_role(conn):
    assert (await sql_role_check(conn))["status"] == "ok"  # the test server's user is a superuser
    role = f"doctor_plain_{uuid.uuid4().hex[:8]}"
    await conn.execute(f'CREATE ROLE "{role}" NOLOGIN NOSUPERUSER NOCREATEROLE')
    try:
        async with conn.transaction():
            await conn.execute(f'SET LOCAL ROLE "{role}"')
            warned = await sql_role_check(conn)
    finally:
        await conn.execute(f'DROP ROLE "{role}"')
    assert warned["name"] == "datatable.sql_roles" and warned["status"] == "warn"
    assert CREATEROLE_WARNING in warned["detail"] and role in warned["detail"]
    assert warned["fix"] == f"as a superuser: ALTER ROLE {role} CREATEROLE; or connect as a user that has it"


@pytest.fixture
def plain_user_url(database_url: str) -> Iterator[str]:
    """A LOGIN user without CREATEROLE or superuser, owning a database of its own (so migrations can run)."""
    name = f"doctor_{uuid.uuid4().hex[:10]}"
    password = uuid.uuid4().hex
    admin_dsn = asyncpg_dsn(database_url)
    url = make_url(database_url).set(username=name, password=password, database=name)

    async def setup() -> bool:
        admin = await asyncpg.connect(admin_dsn)
        try:
            await admin.execute(f"CREATE ROLE {name} LOGIN NOSUPERUSER NOCREATEROLE PASSWORD '{password}'")
            await admin.execute(f"CREATE DATABASE {name} OWNER {name}")
        finally:
            await admin.close()
        try:
            probe = await asyncpg.connect(asyncpg_dsn(url.render_as_string(hide_password=False)))
        except (OSError, asyncpg.PostgresError):
            return False
        await probe.close()
        return True

    async def teardown() -> None:
        admin = await asyncpg.connect(admin_dsn)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            await admin.execute(f"DROP ROLE IF EXISTS {name}")
        finally:
            await admin.close()

    reachable = asyncio.run(setup())
    try:
        if not reachable:
            pytest.skip("the server does not let a freshly created role log in (pg_hba.conf)")
        yield url.render_as_string(hide_password=False)
    finally:
        asyncio.run(teardown())


def test_doctor_warns_when_the_database_user_lacks_createrole(plain_user_url, monkeypatch):
    monkeypatch.setenv("SKILLYARD_DATABASE_URL", plain_user_url)
    result = doctor()
    assert result.exit_code == 0, result.output  # a warning is not a failure
    line = next(x for x in result.output.splitlines() if x.startswith("warn  datatable.sql_roles: "))
    assert CREATEROLE_WARNING in line and "— fix: as a superuser: ALTER ROLE doctor_" in line
    assert "ok    database: " in result.output and ":***@" in result.output  # the password is never shown
    checks = by_name(doctor("--json"))
    assert checks["datatable.sql_roles"]["status"] == "warn" and checks["database"]["status"] == "ok"


def test_doctor_plugin_raising_is_fail_check(plugin_reg, db_env, skills_root):
    """hooks.md: 'a hook that raises, hangs or returns another shape becomes a `fail` check named
    `<plugin>.doctor_checks`, and the other plugins' checks still run.'"""

    class Bad:
        @hookimpl
        def doctor_checks(self, yard):
            raise RuntimeError("doctor broke")

    class Shape:
        @hookimpl
        def doctor_checks(self, yard):
            return {"not": "a list"}

    class Good:
        @hookimpl
        def doctor_checks(self, yard):
            async def go():
                return [{"name": "probe2.good", "status": "ok", "detail": "fine", "fix": None}]

            return go

    plugin_reg(Bad(), "probe2-bad")
    plugin_reg(Shape(), "probe2-shape")
    plugin_reg(Good(), "probe2-good")
    res = invoke("doctor", "--json", "--skills-dir", str(skills_root))
    data = json.loads(res.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["probe2-bad.doctor_checks"]["status"] == "fail"
    assert checks["probe2-shape.doctor_checks"]["status"] == "fail"
    assert checks["probe2.good"]["status"] == "ok" and checks["probe2.good"]["plugin"] == "probe2-good"
    assert res.exit_code == 1


def test_doctor_plugin_returning_none(plugin_reg, db_env, skills_root):
    """hooks.md: 'Return a list of checks, or a callable or awaitable giving one, or `None`.'"""

    class P:
        @hookimpl
        def doctor_checks(self, yard):
            return None

    plugin_reg(P(), "probe2-dnone")
    res = invoke("doctor", "--json", "--skills-dir", str(skills_root))
    data = json.loads(res.stdout)
    assert not any(c["name"].startswith("probe2-dnone") for c in data["checks"])
