"""The node prompt and the model's tool list (prompt.py): profile sections, the tool catalog with labels and
sources, inputs, declared outputs."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard import SkillYard
from support.agent import desk as desk_kit
from support.agent.desk import DeskAgent, completion, openai_env
from support.agent.memo import IDENTITY, SCHEMAS, TOOLS, MemoAgent, Recorder, changed
from support.agent.probes import call, needs_db, say

pytestmark = needs_db


async def test_inputs_bind_prior_entity_id_and_keep_a_missing_optional_input_unmarked(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["inputs"] = {
            "lastId": {"from": "prior.note.id"},
            "lastTitle": {"from": "prior.note"},
            "maybe": {"from": "session.nothing", "required": False},
            "needed": {"from": "session.nothing2"},
        }
        c["tools"]["pickTool"]["args"]["c"] = {"from": "inputs.lastId", "required": False}

    memo_agent.contract(changed(mutate))
    model = Recorder(
        memo_agent.script(
            call("saveNote", {"title": "季度总结"}),
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            call("builtin_node_finish", {"output": "已保存"}),
            call("pickTool", {}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("inprior"), "保存季度总结", identity=IDENTITY)
        assert (await agent.resume(memo_agent.sid("inprior"), "CONFIRM")).status == "DONE"
        later = await agent.send(memo_agent.sid("inprior"), "接着来", identity=IDENTITY)
    assert later.observations[0].sources["c"] == "NODE_OUTPUT"
    assert memo_agent.calls("pickTool")[0]["input"]["c"] == "n-季度总结"
    inputs = model.system(-2).split("## Inputs", 1)[1].split("##", 1)[0]
    assert "lastId" in inputs and "n-季度总结" in inputs and "lastTitle" in inputs and "季度总结" in inputs
    assert "needed" in inputs and "MISSING" in inputs.split("needed", 1)[1].splitlines()[0]
    assert "maybe" not in inputs or "MISSING" not in inputs.split("maybe", 1)[1].splitlines()[0]


@pytest.mark.spec("§1.3")
async def test_the_catalog_shows_labels_sources_write_marking_and_platform_filled_arguments(memo_agent: MemoAgent):
    model = Recorder(memo_agent.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("cat"), "你好", identity=IDENTITY)
    catalog = model.system(0).split("## Tools", 1)[1].split("## Goal", 1)[0]
    lines = catalog.splitlines()
    save = next(line for line in lines if line.lstrip("- ").startswith("saveNote"))
    find = next(line for line in lines if line.lstrip("- ").startswith("findNotes"))
    assert "正在保存笔记" in save and "WRITE" in save
    assert "正在查找笔记" in find and "WRITE" not in find
    title = next(line for line in lines if "title" in line and "标题" in line)
    assert "USER" in title and "EVIDENCE" in title
    owner = next(line for line in lines if "owner" in line)
    assert "所有者" in owner and "platform" in owner.lower()
    color = next(line for line in lines if "color" in line)
    assert "red" in color and "blue" in color and "颜色" in color
    assert "plainTool" not in catalog  # unconfigured: no catalog entry (§1.3) …
    functions = {t["function"]["name"]: t["function"] for t in model.seen[0][1]}
    assert functions["plainTool"]["parameters"] == SCHEMAS["plainTool"]  # … but still offered as a function
    assert functions["saveNote"]["parameters"]["properties"].keys() >= {"title", "owner"}


@pytest.mark.spec("§8", "§19")
async def test_outputs_project_type_fields_min_items_and_hint_into_the_prompt(memo_agent: MemoAgent):
    """§8 / §19: an output's type, fields, minItems and hint are projected into the prompt (minItems 3 here)."""

    def mutate(c: dict[str, Any]) -> None:
        c["outputs"]["picks"] = {
            "type": "LIST",
            "fields": ["id", "title"],
            "minItems": 3,
            "hint": "三篇最相关的笔记",
            "required": False,
        }

    memo_agent.contract(changed(mutate))
    model = Recorder(memo_agent.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("outp"), "你好", identity=IDENTITY)
    line = next(x for x in model.system(0).splitlines() if x.startswith("- picks"))
    assert "LIST" in line and "id" in line and "title" in line and "三篇最相关的笔记" in line
    assert "3" in line, line


@pytest.mark.spec("§2")
async def test_a_tool_name_that_is_no_skill_is_not_offered_to_the_model(memo_agent: MemoAgent):
    """orchestration-requirements §2: the runtime exposes only the intersection of the allowed names (toolNames)
    and the tools that really exist (docs/agents.md does so for skill_md sub-agents: "names that are no skill are
    left out"). ``ghostTool`` is listed in ``tools:`` but no skill of that name is installed."""
    memo_agent.tools([*TOOLS, "ghostTool"])
    model = Recorder(memo_agent.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("ghost"), "你好", identity=IDENTITY)
    offered = model.offered(0)
    assert "findNotes" in offered and "ghostTool" not in offered, offered


async def test_the_prompt_holds_all_five_profile_sections(memo_agent: MemoAgent):
    (memo_agent.dir / "AGENT.md").write_text(
        "---\nagent_code: memo\nagent_name: 备忘员\nskills: memo.keeper\n---\n"
        "## 身份\n一名备忘员。\n## 职责\n记录备忘。\n## 边界\n从不删除备忘。\n"
        "## 风格\n简短。\n## 原则：\n写之前先确认。\n",
        encoding="utf-8",
    )
    model = Recorder(memo_agent.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("five"), "你好", identity=IDENTITY)
    system = model.system(0)
    for text in ("备忘员", "一名备忘员。", "记录备忘。", "从不删除备忘。", "简短。", "写之前先确认。", "Keeps memos."):
        assert text in system, text


async def test_runner_offers_business_tools_with_their_json_schemas(desk_agent: DeskAgent, chat, monkeypatch):
    plan, url = chat
    for k, v in openai_env(url).items():
        monkeypatch.setenv(k, v)
    plan.actions = [(200, completion({"content": "好的"}))]
    async with SkillYard() as yard:
        agent = await yard.agent(desk_agent.dir, model="openai:probe")
        turn = await agent.send(desk_agent.sid("schema"), "hi", identity=desk_kit.IDENTITY)
    assert turn.status == "RUNNING" and turn.reply == "好的"
    tools = plan.seen[0]["body"]["tools"]
    assert all(t["type"] == "function" and set(t["function"]) >= {"name", "parameters"} for t in tools), tools
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    params = by_name["findNotes"]["parameters"]
    assert params["type"] == "object"
    assert params["properties"]["count"]["type"] == "integer"
    assert by_name["builtin_node_finish"]["parameters"]["type"] == "object"
