"""Agents stored in the database (contract spec §1.1, agent part 2): ``skillyard agent import`` writes a folder agent
into ``agent_profile`` / ``skill_profile`` / ``agent_skill_binding`` / ``skill_tool_binding`` (upsert by agent_code
and skill_key); ``yard.agent_from_db`` and ``agent run --agent-code`` load only ACTIVE profiles and enabled
bindings, drop a skill whose stored contract is broken, and resume a stored agent's session. Business tools stay
catalog skills: the agent's skills folder is passed as ``--skills-dir``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from skillyard import SkillYard
from skillyard.agent import AgentError
from skillyard.agent.store import AgentStore
from skillyard.agent.stored import STORED_PREFIX, import_agent
from support.agent.crm import CONTRACTS, IDENTITY, ORDER, StoredCrm
from support.agent.probes import call, finish, needs_db, no_traceback, skillyard_cli

pytestmark = needs_db


@pytest.fixture
def crm(tmp_path: Path) -> StoredCrm:
    return StoredCrm(tmp_path)


def yard_for(crm: StoredCrm, with_tools: bool = True) -> SkillYard:
    """A yard whose catalog holds the agent's skills folder (its business tools), as ``--skills-dir`` gives."""
    return SkillYard(skills_dirs=[crm.dir / "skills"] if with_tools else [])


async def stored(crm: StoredCrm) -> Any:
    async with SkillYard() as yard:
        return await import_agent(yard, crm.dir)


async def rows(sql: str, **params: Any) -> list[dict[str, Any]]:
    async with SkillYard() as yard, await yard.database.session() as session:
        return [dict(r) for r in (await session.execute(text(sql), params)).mappings().all()]


async def execute(sql: str, **params: Any) -> None:
    async with SkillYard() as yard, await yard.database.session() as session:
        await session.execute(text(sql), params)
        await session.commit()


async def bindings(crm: StoredCrm) -> list[dict[str, Any]]:
    return await rows(
        "SELECT s.skill_key, b.sort_order, b.enabled_flag FROM skillyard.agent_skill_binding b "
        "JOIN skillyard.agent_profile a ON a.id = b.agent_id JOIN skillyard.skill_profile s ON s.id = b.skill_id "
        "WHERE a.agent_code = :code ORDER BY b.sort_order",
        code=crm.code,
    )


async def tool_rows(key: str) -> list[dict[str, Any]]:
    return await rows(
        "SELECT t.tool_name, t.sort_order, t.enabled_flag FROM skillyard.skill_tool_binding t "
        "JOIN skillyard.skill_profile s ON s.id = t.skill_id WHERE s.skill_key = :key ORDER BY t.sort_order",
        key=key,
    )


async def skill_row(key: str) -> dict[str, Any]:
    (found,) = await rows("SELECT * FROM skillyard.skill_profile WHERE skill_key = :key", key=key)
    return found


async def loaded(crm: StoredCrm, model: Any = None, with_tools: bool = True):
    async with yard_for(crm, with_tools) as yard:
        return await yard.agent_from_db(crm.code, model=model or crm.script(finish()))


async def test_import_writes_the_profile_the_skills_and_both_bindings(crm: StoredCrm):
    report = await stored(crm)
    assert report.agent_code == crm.code and report.skipped == ()
    assert report.skills == tuple(crm.keys.values())
    assert report.as_dict() == {"agent_code": crm.code, "skills": list(crm.keys.values()), "skipped": []}
    (profile,) = await rows("SELECT * FROM skillyard.agent_profile WHERE agent_code = :c", c=crm.code)
    assert profile["agent_name"] == "CRM clerk" and profile["status"] == "ACTIVE"
    assert profile["identity_desc"] == "A CRM clerk." and profile["mission_desc"] == "Take orders."
    assert [(b["skill_key"], b["sort_order"], b["enabled_flag"]) for b in await bindings(crm)] == [
        (crm.key("customer"), 0, 1),
        (crm.key("order"), 1, 1),
        (crm.key("report"), 2, 1),
    ]
    customer = await skill_row(crm.key("customer"))
    assert customer["skill_name"] == "customer" and customer["status"] == "ACTIVE"
    assert customer["semantic_desc"] == "Finds a customer by name; not for orders."
    assert customer["skill_manual"] == "The crm.customer manual."
    assert json.loads(customer["skill_contract"]) == CONTRACTS["customer"]
    order = json.loads((await skill_row(crm.key("order")))["skill_contract"])
    assert order["inputs"]["customer"]["provider"] == crm.key("customer")
    assert [(t["tool_name"], t["enabled_flag"]) for t in await tool_rows(crm.key("order"))] == [("createOrder", 1)]


async def test_importing_twice_updates_and_never_duplicates(crm: StoredCrm):
    await stored(crm)
    (first,) = await rows("SELECT id FROM skillyard.agent_profile WHERE agent_code = :c", c=crm.code)
    skill_ids = {k: (await skill_row(k))["id"] for k in crm.keys.values()}
    manifest = crm.dir / "skills" / "report" / "SKILL.md"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace("The crm.report manual.", "The new report manual.")
        + "More text.\n",
        encoding="utf-8",
    )
    changed = {**CONTRACTS["report"], "tools": {"listOrders": {**CONTRACTS["report"]["tools"]["listOrders"]}}}
    changed["tools"]["listOrders"]["label"] = "Listing every order"
    crm.contract("report", changed)
    crm.agent_md(list(crm.keys.values()), "# Identity\nA CRM clerk.\n# Mission\nTake and report orders.\n")
    await stored(crm)
    again = await rows("SELECT id, mission_desc FROM skillyard.agent_profile WHERE agent_code = :c", c=crm.code)
    assert again == [{"id": first["id"], "mission_desc": "Take and report orders."}]
    for key, skill_id in skill_ids.items():
        assert (await skill_row(key))["id"] == skill_id
    assert len(await bindings(crm)) == 3
    assert [t["tool_name"] for t in await tool_rows(crm.key("report"))] == ["listOrders"]
    report = await skill_row(crm.key("report"))
    assert "The new report manual." in report["skill_manual"] and "More text." in report["skill_manual"]
    assert json.loads(report["skill_contract"])["tools"]["listOrders"]["label"] == "Listing every order"
    agent = await loaded(crm)
    assert agent.loaded.skills[crm.key("report")].contract.tools["listOrders"].label == "Listing every order"
    assert agent.profile.mission == "Take and report orders."


async def test_a_skill_removed_from_agent_md_loses_its_binding(crm: StoredCrm):
    await stored(crm)
    crm.agent_md([crm.key("report"), crm.key("customer")])
    report = await stored(crm)
    assert report.skills == (crm.key("report"), crm.key("customer"))
    assert [b["skill_key"] for b in await bindings(crm)] == [crm.key("report"), crm.key("customer")]
    await skill_row(crm.key("order"))  # the skill profile itself stays (another agent may bind it)
    agent = await loaded(crm)
    assert list(agent.loaded.skills) == [crm.key("report"), crm.key("customer")]
    assert agent.profile.skills == (crm.key("report"), crm.key("customer"))


async def test_a_stored_agent_loads_like_its_folder_and_runs_with_the_catalog_tools(crm: StoredCrm):
    await stored(crm)
    agent = await loaded(crm, crm.script(call("findCustomer", {"q": "Acme"}), finish("Acme is c-7")))
    assert agent.loaded.source == "db" and str(agent.loaded.dir) == STORED_PREFIX + crm.code
    assert list(agent.loaded.skills) == list(crm.keys.values()) and agent.loaded.errors == []
    customer = agent.loaded.skills[crm.key("customer")]
    assert customer.tool_names == ("findCustomer",) and customer.contract.delegatable
    assert customer.skill is not None and customer.skill.dir == (crm.dir / "skills" / "customer").resolve()
    script = crm.script(call("findCustomer", {"q": "Acme"}), finish("Acme is c-7"))
    async with yard_for(crm) as yard:
        agent = await yard.agent_from_db(crm.code, model=script)
        turn = await agent.send(crm.sid("run"), "找 Acme", identity=IDENTITY, skill_key=crm.key("customer"))
        session = await AgentStore(yard.database).load_session(crm.sid("run"))
    assert turn.status == "DONE" and turn.reply == "Acme is c-7", turn.as_dict()
    assert crm.calls() == [{"tool": "findCustomer", "input": {"q": "Acme"}}]
    assert session.agent_source == "db" and session.agent_dir is None and session.agent_code == crm.code
    async with yard_for(crm) as yard:  # the same pin as the folder agent: the same content
        folder = await yard.agent(crm.dir, model=crm.script(call("findCustomer", {"q": "Acme"}), finish("x")))
        again = await folder.send(crm.sid("folder"), "找 Acme", identity=IDENTITY, skill_key=crm.key("customer"))
    assert again.binding["skills"] == turn.binding["skills"]


async def test_a_stored_multi_skill_agent_plans_with_its_stored_skills(crm: StoredCrm):
    await stored(crm)
    from support.agent.crm import node, plan

    script = crm.script(
        plan(node("n2", crm.key("report"), "list orders", ["n1"]), node("n1", crm.key("customer"), "find Acme")),
        call("findCustomer", {"q": "Acme"}),
        finish("Acme is c-7"),
        call("listOrders", {}),
        finish("one order"),
    )
    async with yard_for(crm) as yard:
        agent = await yard.agent_from_db(crm.code, model=script)
        turn = await agent.send(crm.sid("plan"), "Acme 的订单", identity=IDENTITY)
    assert turn.status == "DONE" and turn.reply == "one order", turn.as_dict()
    assert turn.graph["plan_source"] == "MODEL"
    assert [c["input"] for c in crm.calls("listOrders")] == [{"customerId": "c-7"}]


async def test_only_an_active_profile_loads(crm: StoredCrm):
    await stored(crm)
    await execute("UPDATE skillyard.agent_profile SET status = 'INACTIVE' WHERE agent_code = :c", c=crm.code)
    with pytest.raises(AgentError, match="no ACTIVE agent") as caught:
        await loaded(crm)
    assert crm.code in str(caught.value) and "agent import" in str(caught.value)
    await execute("UPDATE skillyard.agent_profile SET status = 'ACTIVE' WHERE agent_code = :c", c=crm.code)
    assert list((await loaded(crm)).loaded.skills) == list(crm.keys.values())


async def test_a_disabled_skill_binding_or_inactive_skill_does_not_load(crm: StoredCrm):
    await stored(crm)
    await execute(
        "UPDATE skillyard.agent_skill_binding SET enabled_flag = 0 WHERE skill_id = "
        "(SELECT id FROM skillyard.skill_profile WHERE skill_key = :k)",
        k=crm.key("order"),
    )
    await execute("UPDATE skillyard.skill_profile SET status = 'INACTIVE' WHERE skill_key = :k", k=crm.key("report"))
    agent = await loaded(crm)
    assert list(agent.loaded.skills) == [crm.key("customer")]
    assert agent.profile.skills == (crm.key("customer"),)
    with pytest.raises(AgentError, match="no contract skill"):
        await agent.send(crm.sid("disabled"), "下单", skill_key=crm.key("order"))


async def test_a_disabled_tool_binding_is_not_a_tool_of_the_skill(crm: StoredCrm):
    await stored(crm)
    await execute(
        "UPDATE skillyard.skill_tool_binding SET enabled_flag = 0 WHERE skill_id = "
        "(SELECT id FROM skillyard.skill_profile WHERE skill_key = :k)",
        k=crm.key("customer"),
    )
    agent = await loaded(crm)
    assert agent.loaded.skills[crm.key("customer")].tool_names == ()
    assert agent.loaded.skills[crm.key("order")].tool_names == ("createOrder",)


async def test_a_skill_with_a_broken_stored_contract_is_dropped_with_its_problems(crm: StoredCrm):
    await stored(crm)
    await execute(
        "UPDATE skillyard.skill_profile SET skill_contract = '{not json' WHERE skill_key = :k", k=crm.key("report")
    )
    bad = json.dumps({"tools": {"createOrder": {"sideEffect": "WRITE", "callOnly": True}}})
    await execute(
        "UPDATE skillyard.skill_profile SET skill_contract = :t WHERE skill_key = :k", t=bad, k=crm.key("order")
    )
    agent = await loaded(crm)
    assert list(agent.loaded.skills) == [crm.key("customer")]
    errors = {(e.skill, e.rule) for e in agent.loaded.errors}
    assert (crm.key("report"), "§16.1") in errors and (crm.key("order"), "P0.call_only_write") in errors
    assert any("not valid JSON" in e.message for e in agent.loaded.errors if e.skill == crm.key("report"))
    await execute("UPDATE skillyard.skill_profile SET skill_contract = '' WHERE skill_key = :k", k=crm.key("customer"))
    with pytest.raises(AgentError, match="no usable skill"):
        await loaded(crm)


async def test_an_unknown_or_empty_agent_code_is_a_clear_error(crm: StoredCrm):
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match=r"no ACTIVE agent 'nobody_.*agent import"):
            await yard.agent_from_db(f"nobody_{crm.uid}", model="script:unused.yaml")
        for code in ("", "  ", None, 3):
            with pytest.raises(AgentError, match="agent code must be non-empty text"):
                await yard.agent_from_db(code, model="script:unused.yaml")  # type: ignore[arg-type]
    result = skillyard_cli(
        "agent", "run", "--agent-code", f"nobody_{crm.uid}", "--session", crm.sid("u"), "--message", "x",
        "--model", crm.script(finish()),
    )  # fmt: skip
    assert result.returncode == 1 and "no ACTIVE agent" in result.stderr and no_traceback(result), result


async def test_a_skill_that_fails_in_the_folder_is_left_out_of_the_import(crm: StoredCrm):
    (crm.dir / "skills" / "report" / "contract.json").write_text("{broken", encoding="utf-8")
    report = await stored(crm)
    assert report.skills == (crm.key("customer"), crm.key("order"))
    assert [i.skill for i in report.skipped] == [crm.key("report")]
    assert [b["skill_key"] for b in await bindings(crm)] == [crm.key("customer"), crm.key("order")]


async def test_an_import_where_no_skill_loads_keeps_the_stored_agent(crm: StoredCrm):
    await stored(crm)
    for name in crm.keys:
        (crm.dir / "skills" / name / "contract.json").write_text("{broken", encoding="utf-8")
    result = skillyard_cli("agent", "import", str(crm.dir), "--json")
    assert result.returncode == 1
    assert len(await bindings(crm)) == 3


def test_cli_import_run_and_resume_a_stored_agent(crm: StoredCrm):
    crm.contract("order", ORDER)
    skills = ["--skills-dir", str(crm.dir / "skills")]
    imported = skillyard_cli("agent", "import", str(crm.dir), *skills, "--json")
    assert imported.returncode == 0, imported
    assert json.loads(imported.stdout) == {"agent_code": crm.code, "skills": list(crm.keys.values()), "skipped": []}
    text_out = skillyard_cli("agent", "import", str(crm.dir))
    assert text_out.returncode == 0 and f"stored agent {crm.code}: 3 skill(s)" in text_out.stdout
    script = crm.script(
        call("createOrder", {"customerId": "c-7", "item": "widget"}),
        call("builtin_node_approval", {"summary": "下单", "toolName": "createOrder"}),
        finish("ordered"),
    )
    sid = crm.sid("cli")
    ran = skillyard_cli(
        "agent", "run", "--agent-code", crm.code, *skills, "--session", sid, "--message", "给 c-7 下单 widget",
        "--skill", crm.key("order"), "--model", script, "--context", json.dumps(IDENTITY), "--json",
    )  # fmt: skip
    assert ran.returncode == 0, ran
    asked = json.loads(ran.stdout)
    assert asked["status"] == "SUSPENDED" and asked["checkpoint"]["type"] == "APPROVAL", asked
    assert crm.calls() == []
    resumed = skillyard_cli("agent", "resume", "--session", sid, "--action", "CONFIRM", *skills, "--json")
    assert resumed.returncode == 0, resumed
    done = json.loads(resumed.stdout)
    assert done["status"] == "DONE" and done["reply"] == "ordered", done
    assert [c["input"] for c in crm.calls("createOrder")] == [{"customerId": "c-7", "item": "widget"}]


def test_cli_run_of_a_stored_agent_without_its_tools_reports_the_missing_tool(crm: StoredCrm):
    assert skillyard_cli("agent", "import", str(crm.dir)).returncode == 0
    ran = skillyard_cli(
        "agent", "run", "--agent-code", crm.code, "--session", crm.sid("notools"), "--message", "找 Acme",
        "--skill", crm.key("customer"), "--model", crm.script(call("findCustomer", {"q": "Acme"}), finish("x")),
        "--json",
    )  # fmt: skip
    turn = json.loads(ran.stdout)
    assert turn["observations"][0]["code"] == "agent_runtime.40017"
    assert [e["tool"] for e in turn["events"] if e["type"] == "tool_missing"] == ["findCustomer"]
    assert crm.calls() == []


def test_cli_import_of_a_folder_that_is_not_an_agent_is_a_clean_error(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    result = skillyard_cli("agent", "import", str(tmp_path / "empty"))
    assert result.returncode == 1 and "AGENT.md" in result.stderr and no_traceback(result), result
    missing = skillyard_cli("agent", "import", str(tmp_path / "nope"))
    assert missing.returncode == 2 and no_traceback(missing)
