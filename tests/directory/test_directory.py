"""yard.directory on the session's PostgreSQL: imports, lookups, and the context fields a run gets (§4.2–§4.8)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.directory.directory import Directory
from skillyard.directory.importer import ImportProblems
from support.cli import invoke
from support.datatable import context as dt_context
from support.datatable import grant, make_table
from support.datatable import run as dt_run

HEADER = (
    "kind,id,name,parent,disabled,emp_no,department,title,position,phone,email,tags,actor_key,active,channel,account"
)
DIRECTORY = (
    HEADER
    + """
department,hq,总部,,,,,,,,,,,,,
department,sales,销售中心,hq,,,,,,,,,,,,
department,s1,销售一部,sales,,,,,,,,,,,,
department,old,旧部,hq,true,,,,,,,,,,,
person,,Ada,,,E2,s1,P7,经理,555,ada@x.org,vip;cn,k-ada,,,
person,,Bo,,,E3,old,P5,,,,,,,,
person,,Gone,,,E9,s1,P9,,,,,k-gone,false,,
account,,,,,E2,,,,,,,,,telegram,42
"""
)
ECHO = """
async def execute(input, ctx):
    keys = ("actor_name", "actor_emp_no", "actor_department", "actor_department_path", "actor_title",
            "actor_position", "actor_phone", "actor_email", "actor_tags", "actor_key", "actor_id")
    return {"ctx": {k: ctx[k] for k in keys}}
"""


@pytest.fixture
def org() -> str:
    return "o" + uuid.uuid4().hex[:12]


@pytest.fixture
def directory_file(tmp_path: Path) -> Path:
    path = tmp_path / "directory.csv"
    path.write_text(DIRECTORY, encoding="utf-8")
    return path


@pytest.fixture
async def yard(db_env: str, skills_root: Path, make_skill) -> AsyncIterator[SkillYard]:
    make_skill("echo_ctx", files={"handler.py": ECHO})
    async with SkillYard(skills_dirs=[skills_root]) as y:
        yield y


async def _import(yard: SkillYard, org: str, path: Path) -> None:
    await yard.directory.apply(org, await yard.directory.plan_import(org, path))


async def seen(yard: SkillYard, **ctx) -> dict:
    result = await yard.run("echo_ctx", {}, context=ctx)
    assert result["ok"], result
    return result["ctx"]


async def test_a_run_naming_a_person_gets_the_directorys_fields(yard, org, directory_file):
    await _import(yard, org, directory_file)
    ctx = await seen(yard, org_id=org, actor_emp_no="E2", actor_title="P99", actor_department="forged")
    assert ctx["actor_title"] == "P7" and ctx["actor_department"] == "销售一部"  # the directory wins (§4.8)
    assert ctx["actor_department_path"] == "/总部/销售中心/销售一部/"
    assert ctx["actor_tags"] == ["vip", "cn"] and ctx["actor_name"] == "Ada" and ctx["actor_key"] == "k-ada"
    by_key = await seen(yard, org_id=org, actor_key="k-ada")
    assert by_key["actor_emp_no"] == "E2"
    disabled = await seen(yard, org_id=org, actor_emp_no="E3")
    assert disabled["actor_department_path"] == "/总部/旧部/"  # a disabled department stays in the path


async def test_a_person_not_found_keeps_the_callers_values(yard, org, directory_file):
    await _import(yard, org, directory_file)
    ctx = await seen(yard, org_id=org, actor_emp_no="E404", actor_name="nick from the channel", actor_title="P1")
    assert ctx["actor_name"] == "nick from the channel" and ctx["actor_title"] == "P1"
    inactive = await seen(yard, org_id=org, actor_key="k-gone", actor_name="nick")
    assert inactive["actor_name"] == "nick" and inactive["actor_emp_no"] == ""  # a person who left is not found


async def test_admin_fill_in_is_cleared_after_filling(yard, org, directory_file):
    await _import(yard, org, directory_file)
    ctx = await seen(yard, org_id=org, actor_emp_no="E2", actor_is_admin=True)
    for key in (
        "actor_title",
        "actor_department",
        "actor_department_path",
        "actor_position",
        "actor_key",
        "actor_id",
        "actor_emp_no",
    ):
        assert ctx[key] == "", key
    assert ctx["actor_tags"] == []
    assert (ctx["actor_name"], ctx["actor_phone"], ctx["actor_email"]) == ("Ada", "555", "ada@x.org")


async def test_a_channel_account_maps_to_its_person(yard, org, directory_file):
    await _import(yard, org, directory_file)
    ctx = await seen(yard, org_id=org, channel="telegram", channel_account="42", actor_name="ada_tg")
    assert ctx["actor_emp_no"] == "E2" and ctx["actor_name"] == "Ada"
    other = await seen(yard, org_id=org, channel="feishu", channel_account="42", actor_name="someone")
    assert other["actor_emp_no"] == "" and other["actor_name"] == "someone"
    await yard.directory.link(org, "feishu", "ou_7", "E3")
    assert (await seen(yard, org_id=org, channel="feishu", channel_account="ou_7"))["actor_name"] == "Bo"


async def test_an_empty_org_uses_the_pseudo_org_of_the_role(yard, directory_file):
    role = "r" + uuid.uuid4().hex[:8]
    await _import(yard, f"r_{role}", directory_file)
    ctx = await seen(yard, org_id="", role_id=role, actor_emp_no="E2")
    assert ctx["actor_title"] == "P7"


async def test_an_import_in_another_process_is_seen_at_the_next_lookup(yard, org, directory_file, tmp_path):
    await _import(yard, org, directory_file)
    assert (await seen(yard, org_id=org, actor_emp_no="E2"))["actor_title"] == "P7"
    elsewhere = Directory(yard.database)  # another process's directory: its own cache
    promotion = tmp_path / "promotion.jsonl"
    promotion.write_text(
        json.dumps({"kind": "person", "emp_no": "E2", "name": "Ada", "department": "s1", "title": "P8"})
    )
    await elsewhere.apply(org, await elsewhere.plan_import(org, promotion))
    assert (await seen(yard, org_id=org, actor_emp_no="E2"))["actor_title"] == "P8"


async def test_a_bad_file_writes_nothing(yard, org, directory_file, tmp_path):
    await _import(yard, org, directory_file)
    bad = tmp_path / "bad.csv"
    bad.write_text("kind,emp_no,name,title\nperson,E2,Ada,P1\nperson,E2,Ada,P2\n", encoding="utf-8")
    with pytest.raises(ImportProblems):
        await yard.directory.plan_import(org, bad)
    assert (await seen(yard, org_id=org, actor_emp_no="E2"))["actor_title"] == "P7"


async def test_datatable_own_scope_reads_the_filled_emp_no(db_env, org, directory_file):
    async with SkillYard() as yard:
        table = await make_table(yard, org, rows=9)  # rows of 工号 E0, E1, E2
        await grant(yard, org, "客户", "staff", "all", row_scope="own", owner_field="工号")
        await _import(yard, org, directory_file)
        me = dt_context(org, actor_key="k-ada", actor_emp_no="E1")  # a forged emp_no: the directory says E2
        rows = await dt_run(yard, me, "query", table_id=table)
        assert {r["工号"] for r in rows["list"]} == {"E2"}


def test_cli_import_is_a_dry_run_until_apply(db_env, org, directory_file):
    dry = invoke("directory", "import", "--org", org, directory_file)
    assert dry.exit_code == 0 and "8 to add" in dry.stdout and "dry run" in dry.stdout
    assert json.loads(invoke("directory", "show", "--org", org, "--json").stdout)["people"] == []
    applied = json.loads(invoke("directory", "import", "--org", org, directory_file, "--apply", "--json").stdout)
    assert applied["applied"] is True and applied["counts"] == {"add": 8, "update": 0, "same": 0}
    shown = json.loads(invoke("directory", "show", "--org", org, "--json").stdout)
    paths = {d["id"]: d["path"] for d in shown["departments"]}
    assert paths["s1"] == "/总部/销售中心/销售一部/" and len(shown["people"]) == 3
    person = json.loads(invoke("directory", "show", "--org", org, "--person", "E2", "--json").stdout)
    assert person["actor_department_path"] == "/总部/销售中心/销售一部/"
    again = json.loads(invoke("directory", "import", "--org", org, directory_file, "--json").stdout)
    assert again["counts"] == {"add": 0, "update": 0, "same": 8}


def test_cli_reports_every_problem_by_line_and_exits_1(db_env, org, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("kind,id,name,parent\ndepartment,a,A,b\ndepartment,b,B,a\ndepartment,c,C,zz\n", encoding="utf-8")
    result = invoke("directory", "import", "--org", org, bad, "--apply")
    assert result.exit_code == 1 and "form a cycle" in result.stderr and "'zz'" in result.stderr
    assert "nothing was written" in result.stderr
    assert json.loads(invoke("directory", "show", "--org", org, "--json").stdout)["departments"] == []


def test_cli_link_needs_a_known_person_and_a_real_org(db_env, org):
    result = invoke("directory", "link", "--org", org, "--channel", "telegram", "--account", "1", "--person", "X")
    assert result.exit_code == 2 and "import them first" in result.output
    assert invoke("directory", "show", "--org", "   ").exit_code == 2


async def test_a_large_import_is_written_in_batches(yard, org, tmp_path):
    big = tmp_path / "big.csv"
    big.write_text("kind,emp_no,name\n" + "".join(f"person,e{i},N{i}\n" for i in range(3000)), encoding="utf-8")
    await _import(yard, org, big)
    assert len((await yard.directory.snapshot(org)).people) == 3000


@pytest.mark.parametrize("bad", ["-x", "a\nb", "  ", "x" * 201])
def test_cli_refuses_org_ids_that_are_no_names(db_env, bad):
    result = invoke("directory", "show", "--org", bad)
    assert result.exit_code == 2 and "not an organisation id" in result.output
