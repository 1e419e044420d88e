"""skill_md skills run as isolated sub-agents (sub_agent.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from support.agent import runtime as runtime_kit
from support.agent.memo import ARG_REJECTED, IDENTITY, TOOLS, MemoAgent, Recorder, send_once
from support.agent.probes import call, needs_db, say
from support.agent.runtime import make_agent, script, tool

pytestmark = needs_db


def _digest(env: MemoAgent, front: str = "allowed-tools: findNotes plainTool ghostTool", body: str = "") -> None:
    folder = env.dir / "skills" / "digest"
    folder.mkdir(exist_ok=True)
    manual = body or "# Digest\nLook notes up with findNotes, then finish with a one-line digest.\n"
    (folder / "SKILL.md").write_text(f"---\nname: digest\ndescription: Digest notes.\n{front}\n---\n{manual}", "utf-8")
    env.tools([*TOOLS, "digest"])


async def test_a_skill_md_tool_runs_as_a_sub_agent_with_its_allowed_tools_only(memo_agent: MemoAgent):
    _digest(memo_agent)
    model = Recorder(
        memo_agent.script(
            call("digest", {"query": "总结周报"}),  # the parent calls the skill_md tool
            call("saveNote", {"title": "周报"}),  # sub-agent: not one of its tools
            call("findNotes", {"q": "周报"}),  # sub-agent: its allowed tool
            call("builtin_node_finish", {"output": "周报一篇"}),  # sub-agent finishes
            say("摘要好了"),  # the parent
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        turn = await agent.send(memo_agent.sid("sub"), "总结周报", identity=IDENTITY)
        stored = await AgentStore(yard.database).load_session(memo_agent.sid("sub"))
    first = turn.observations[0]
    assert first.tool == "digest" and first.ok and first.content["result"] == "周报一篇", first
    sub_prompt = model.system(1)
    assert "Look notes up with findNotes" in sub_prompt and "总结周报" in sub_prompt
    sub_tools = [n for n in model.offered(1) if not n.startswith("builtin_")]
    assert sub_tools == ["findNotes", "plainTool"], sub_tools
    assert "read_skill_file" not in model.offered(1)  # a short manual
    assert [c["tool"] for c in memo_agent.calls()] == ["findNotes"]  # saveNote was refused inside
    assert memo_agent.calls("findNotes")[0]["ctx"]["user_id"] == "42"  # the caller's identity
    assert [(e["tool"], e["status"]) for e in turn.evidence] == [("digest", "SUCCESS")]  # isolation
    assert stored is not None and stored.entities == [] and turn.status == "RUNNING"


@pytest.mark.parametrize(
    ("sub_turns", "needle"),
    [
        ([call("builtin_node_fail", {"reason": "没有周报"})], "没有周报"),
        (
            [
                call("findNotes", {"q": "a", "mode": "business"}),
                call("builtin_node_follow_up", {"question": "哪一周？"}),
            ],
            "哪一周？",
        ),
        ([say("我不知道")], "我不知道"),
    ],
    ids=["fails", "needs-the-user", "stops-with-text"],
)
async def test_a_sub_agent_that_does_not_finish_is_a_failed_call_for_its_caller(
    memo_agent: MemoAgent, sub_turns: list[dict[str, Any]], needle: str
):
    _digest(memo_agent)
    turn = await send_once(memo_agent, "总结周报", call("digest", {"task": "总结周报"}), *sub_turns, say("没办成"))
    first = turn.observations[0]
    assert not first.ok and first.code == "agent_runtime.40004" and first.next_step, first
    assert needle in json.dumps(first.content, ensure_ascii=False)
    assert turn.status == "RUNNING" and turn.reply == "没办成" and turn.checkpoint is None


async def test_a_sub_agent_reads_its_tools_from_a_tools_list_and_its_long_manual_with_read_skill_file(
    memo_agent: MemoAgent,
):
    body = "# Digest\n" + "步骤" * 4100 + "最后一步：用 plainTool。"
    _digest(memo_agent, front="tools: [plainTool]", body=body)
    model = Recorder(
        memo_agent.script(
            call("digest", {"goal": "做摘要"}),
            call("read_skill_file", {"path": "../keeper/SKILL.md"}),  # outside its folder
            call("read_skill_file", {"offset": 8000}),
            call("plainTool", {"q": "x"}),
            call("builtin_node_finish", {"output": "好了"}),
            say("完成"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        turn = await agent.send(memo_agent.sid("sublong"), "做摘要", identity=IDENTITY)
    assert turn.observations[0].ok, turn.observations[0]
    system = model.system(1)
    assert "最后一步" not in system and "8000" in system.replace(",", "")
    assert "read_skill_file" in model.offered(1)
    assert [n for n in model.offered(1) if not n.startswith(("builtin_", "read_"))] == ["plainTool"]
    tool_messages = [m for m in model.seen[4][0] if m.get("role") == "tool"]
    outside, rest, _plain = (json.loads(m["content"]) for m in tool_messages)
    assert outside["ok"] is False and outside["code"] == ARG_REJECTED
    assert rest["ok"] is True and "最后一步" in rest["result"]["content"]


async def test_skill_md_tool_runs_as_an_isolated_sub_agent(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    keeper = agent_dir / "skills" / "keeper" / "SKILL.md"
    keeper.write_text(
        keeper.read_text(encoding="utf-8").replace("[saveNote, findNote]", "[saveNote, findNote, digest]")
    )
    manual = "# Digest\nLook the note up with findNote, then finish with a one-line digest.\n" + "细节。" * 3000
    digest = agent_dir / "skills" / "digest" / "SKILL.md"
    digest.parent.mkdir(parents=True)
    digest.write_text(f"---\nname: digest\ndescription: Digest a note.\nallowed-tools: findNote\n---\n{manual}")
    model = script(
        tmp_path / "turns.yaml",
        tool("digest", task="总结周报"),  # the parent calls the skill_md tool …
        tool("read_skill_file", offset=8000),  # … the sub-agent reads the rest of its long manual,
        tool("findNote", title="周报"),  # uses its allowed tool,
        tool("builtin_node_finish", output="周报：没有记录"),  # and finishes;
        tool("builtin_node_fail", reason="nothing to save"),  # then the parent goes on.
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        turn = await agent.send("s-sub", "总结周报", identity=runtime_kit.IDENTITY)
        stored = await AgentStore(yard.database).load_session("s-sub")
    first = turn.observations[0]
    assert first.tool == "digest" and first.ok, first
    assert first.content["result"] == "周报：没有记录" and first.content["sub_agent"] == "digest"
    assert turn.status == "FAILED" and turn.reply == "nothing to save"
    assert stored is not None and stored.model_state["script"]["position"] == 5  # one script across both
