"""The agent runtime end to end: scripted model, real business skills, real PostgreSQL, restarts between turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from support.agent_probes import write_files
from skillyard import SkillYard
from skillyard.agent.models import ScriptExhausted
from skillyard.agent.runner import AgentError, resume_session
from skillyard.agent.store import AgentStore
from skillyard.cli import cli as cli_main
from skillyard.plugins import load_plugins

pytestmark = pytest.mark.usefixtures("home", "db_env")

CONTRACT = {
    "target": "saveNote",
    "outputs": {"noteId": {"sources": ["EVIDENCE"], "required": False}},
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "Owner"},
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNote", "args": {"title": {"from": "call.title"}}},
        },
        "findNote": {
            "label": "Looking up notes",
            "args": {"title": {"sources": ["USER", "MODEL"]}},
            "success": {"path": "found", "op": "TRUTHY"},
            "extracts": [{"key": "notes", "path": "notes", "fields": ["id", "title"]}],
        },
    },
}

SAVE = """import asyncio, json, pathlib
LOG = pathlib.Path({log!r})

async def execute(input, ctx):
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": "saveNote", "title": input["title"], "key": ctx.get("idempotency_key")}}) + "\\n")
    if input["title"].startswith("slow"):
        await asyncio.sleep(5)  # committed, then the wall clock stops the skill
    return {{"code": 200, "data": {{"id": "n-" + input["title"], "title": input["title"]}}}}
"""

FIND = """import json, pathlib
LOG = pathlib.Path({log!r})

async def execute(input, ctx):
    saved = [json.loads(line) for line in LOG.read_text(encoding="utf-8").splitlines()] if LOG.exists() else []
    notes = [{{"id": "n-" + s["title"], "title": s["title"]}} for s in saved if s["title"] == input.get("title")]
    return {{"found": bool(notes), "notes": notes}}
"""


def make_agent(root: Path, log: Path, *, verify: bool = True) -> Path:
    agent = root / "notes_agent"
    skills = agent / "skills"
    contract = json.loads(json.dumps(CONTRACT))
    if not verify:
        del contract["tools"]["saveNote"]["verify"]
    files = {
        agent / "AGENT.md": "---\nagent_code: notes\nagent_name: Note keeper\nskills: [notes.keeper]\n---\n"
        "# Identity\nKeeps notes.\n\n# Mission\nSave the notes the user dictates.\n",
        skills / "keeper" / "SKILL.md": "---\nname: keeper\nskill_key: notes.keeper\n"
        "description: Saves notes.\ntools: [saveNote, findNote]\n---\n# Manual\nSave what the user says.\n",
        skills / "keeper" / "contract.json": json.dumps(contract),
        skills / "saveNote" / "SKILL.md": "---\nname: saveNote\ndescription: Save a note.\nexec:\n  timeout: 1\n---\n",
        skills / "saveNote" / "handler.py": SAVE.format(log=str(log)),
        skills / "saveNote" / "schema.json": json.dumps(
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "owner": {"type": "string"}},
                "required": ["title"],
            }
        ),
        skills / "findNote" / "SKILL.md": "---\nname: findNote\ndescription: Find notes by title.\n---\n",
        skills / "findNote" / "handler.py": FIND.format(log=str(log)),
        skills / "findNote" / "schema.json": json.dumps(
            {"type": "object", "properties": {"title": {"type": "string"}}}
        ),
    }
    write_files(files)
    return agent


def script(path: Path, *turns: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
    return f"script:{path}"


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


async def test_approval_survives_a_restart_and_the_write_runs_once(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存笔记", toolName="saveNote"),
        tool("builtin_node_finish", output="已保存《季度总结》"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        turn = await agent.send("s-approve", "请保存一条标题为季度总结的笔记", identity=IDENTITY)
    assert turn.status == "SUSPENDED" and turn.checkpoint is not None
    assert turn.checkpoint["type"] == "APPROVAL" and "标题：季度总结" in turn.checkpoint["question"]
    assert "42" not in turn.checkpoint["question"]  # the platform-injected owner is not shown
    assert turn.observations[0].code == "agent_runtime.42221"
    assert calls(log) == []

    async with SkillYard() as yard:  # a new process on the same database
        resumed = await resume_session(yard, "s-approve", "CONFIRM")
    assert resumed.status == "DONE", resumed.as_dict()
    assert resumed.reply == "已保存《季度总结》"
    assert [c["title"] for c in calls(log)] == ["季度总结"]
    assert calls(log)[0]["key"]  # the idempotency key reached the skill
    assert resumed.events[0]["label"] == "Saving the note"


async def test_reject_cancels_and_names_the_write(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存笔记", toolName="saveNote"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        await agent.send("s-reject", "保存季度总结", identity=IDENTITY)
        rejected = await agent.resume("s-reject", "REJECT")
    assert rejected.status == "CANCELLED" and "saveNote" in (rejected.reply or "")
    assert calls(log) == []
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match="no open node"):
            await resume_session(yard, "s-reject", "CONFIRM")


async def test_model_text_keeps_the_node_open_and_the_script_continues(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        {"text": "要保存什么标题？"},
        tool("findNote", title="周报"),
        tool("builtin_node_fail", reason="没有找到"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        first = await agent.send("s-text", "帮我找笔记", identity=IDENTITY)
        assert first.status == "RUNNING" and first.reply == "要保存什么标题？"
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        second = await agent.send("s-text", "周报", identity=IDENTITY)
    assert second.status == "FAILED" and second.reply == "没有找到"
    assert second.observations[0].code == "agent_runtime.40004"  # TRUTHY on found=false: a business failure


async def test_timed_out_write_is_verified_when_the_node_reopens(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="slow note"),
        tool("builtin_node_approval", summary="保存", toolName="saveNote"),
        tool("builtin_node_finish", output="done?"),
        {"text": "稍后再看"},
        tool("builtin_node_finish", output="已确认保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        await agent.send("s-slow", "保存 slow note", identity=IDENTITY)
        after = await agent.resume("s-slow", "CONFIRM")
    assert after.observations[0].code == "agent_runtime.40016"
    assert after.observations[1].code == "agent_runtime.42251"  # finish refused: the write is UNKNOWN
    assert after.status == "RUNNING" and len(calls(log)) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        reopened = await agent.send("s-slow", "好了吗？", identity=IDENTITY)
    assert reopened.observations[0].tool == "findNote" and reopened.observations[0].ok
    assert reopened.status == "DONE" and len(calls(log)) == 1  # verified, never retried


async def test_uncertain_write_without_verify_asks_the_user(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log, verify=False)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="slow two"),
        tool("builtin_node_approval", summary="保存", toolName="saveNote"),
        {"text": "等一下"},
        tool("builtin_node_finish", output="已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        await agent.send("s-verify", "保存 slow two", identity=IDENTITY)
        await agent.resume("s-verify", "CONFIRM")
        asked = await agent.send("s-verify", "怎么样了", identity=IDENTITY)
        assert asked.status == "SUSPENDED" and asked.checkpoint is not None
        assert asked.checkpoint["type"] == "VERIFY"
        done = await agent.resume("s-verify", "CONFIRM")
    assert done.status == "DONE" and len(calls(log)) == 1


async def test_a_write_started_by_a_dead_process_is_unknown_pre_call(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(tmp_path / "turns.yaml", {"text": "好的"}, tool("builtin_node_fail", reason="stop"))
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        first = await agent.send("s-dead", "保存 x", identity=IDENTITY)
        store = AgentStore(yard.database)
        from skillyard.agent.state import Evidence, EvidenceStatus

        await store.save_evidence(
            Evidence(
                id="ev_dead",
                task_id=str(first.task_id),
                node_id=str(first.node_id),
                tool="saveNote",
                args={"title": "x"},
                write=True,
                status=EvidenceStatus.STARTED,
                seq=1,
            )
        )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        again = await agent.send("s-dead", "继续", identity=IDENTITY)
    assert again.observations[0].tool == "findNote"  # verified first
    statuses = {e["id"]: e["status"] for e in again.evidence}
    assert statuses["ev_dead"] == "FAILED"  # the verify tool found nothing: the write did not happen


async def test_script_exhaustion_is_loud(tmp_path: Path) -> None:
    agent_dir = make_agent(tmp_path, tmp_path / "calls.jsonl")
    model = script(tmp_path / "turns.yaml", tool("findNote", title="a"))
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        with pytest.raises(ScriptExhausted, match="asked for turn 2 but the script has only 1"):
            await agent.send("s-short", "找 a", identity=IDENTITY)


def test_cli_run_and_resume(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存笔记", toolName="saveNote"),
        tool("builtin_node_finish", output="完成"),
    )
    load_plugins().hook.register_commands(cli=cli_main)
    runner = CliRunner()
    first = runner.invoke(
        cli_main,
        [
            "agent",
            "run",
            str(agent_dir),
            "--session",
            "cli-1",
            "--message",
            "保存季度总结",
            "--model",
            model,
            "--context",
            json.dumps(IDENTITY),
            "--json",
        ],
    )
    assert first.exit_code == 0, first.output
    turn = json.loads(first.output)
    assert turn["status"] == "SUSPENDED" and turn["checkpoint"]["type"] == "APPROVAL"
    assert turn["observations"][0]["code"] == "agent_runtime.42221"
    assert turn["observations"][0]["sources"]["title"] == "USER"
    second = runner.invoke(cli_main, ["agent", "resume", "--session", "cli-1", "--action", "CONFIRM", "--json"])
    assert second.exit_code == 0, second.output
    assert json.loads(second.output)["status"] == "DONE"
    bad = runner.invoke(
        cli_main, ["agent", "run", str(agent_dir), "--session", "cli-2", "--message", "x", "--model", "nonsense"]
    )
    assert bad.exit_code != 0 and "script:" in bad.output and "Traceback" not in bad.output


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
        turn = await agent.send("s-sub", "总结周报", identity=IDENTITY)
        stored = await AgentStore(yard.database).load_session("s-sub")
    first = turn.observations[0]
    assert first.tool == "digest" and first.ok, first
    assert first.content["result"] == "周报：没有记录" and first.content["sub_agent"] == "digest"
    assert turn.status == "FAILED" and turn.reply == "nothing to save"
    assert stored is not None and stored.model_state["script"]["position"] == 5  # one script across both


async def test_default_model_comes_from_the_settings(tmp_path: Path, home: Path) -> None:
    agent_dir = make_agent(tmp_path, tmp_path / "calls.jsonl")
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match="no model"):
            await yard.agent(agent_dir)
    spec = script(tmp_path / "turns.yaml", {"text": "你好"})
    (home / "settings.toml").write_text(f'[agent.model]\nspec = "{spec}"\n', encoding="utf-8")
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir)
        turn = await agent.send("s-default-model", "hi", identity=IDENTITY)
    assert turn.reply == "你好"


async def test_platform_hidden_closes_and_opens_fields(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "calls.jsonl"
    agent_dir = make_agent(tmp_path, log)
    contract_file = agent_dir / "skills" / "keeper" / "contract.json"
    contract = json.loads(contract_file.read_text(encoding="utf-8"))
    contract["tools"]["saveNote"]["args"]["owner"] = {"from": "platform.passportId", "label": "Owner"}
    contract_file.write_text(json.dumps(contract), encoding="utf-8")
    async with SkillYard() as yard:
        with pytest.raises(AgentError) as closed:
            await yard.agent(agent_dir, model="script:x.yaml")
    assert "passportId" in str(closed.value) and "§16.10" in str(closed.value)

    monkeypatch.setenv("SKILLYARD_AGENT_PLATFORM_HIDDEN", "clientId")  # passportId no longer hidden
    model = script(
        tmp_path / "turns.yaml",
        tool("saveNote", title="季度总结"),
        tool("builtin_node_approval", summary="保存", toolName="saveNote"),
        tool("builtin_node_finish", output="ok"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        asked = await agent.send("s-hidden", "保存季度总结", identity={**IDENTITY, "passport_id": "P-9"})
        assert asked.observations[0].sources["owner"] == "PLATFORM"
        await agent.resume("s-hidden", "CONFIRM")
    assert calls(log)[0]["title"] == "季度总结"


async def test_a_nul_in_the_model_arguments_does_not_break_saving(tmp_path: Path) -> None:
    agent_dir = make_agent(tmp_path, tmp_path / "calls.jsonl")
    model = script(tmp_path / "turns.yaml", tool("findNote", title="周\x00报"), {"text": "没有找到"})
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        turn = await agent.send("s-nul", "找周报", identity=IDENTITY)
        assert turn.status == "RUNNING" and turn.reply == "没有找到"
        stored = await AgentStore(yard.database).load_session("s-nul")
    assert stored is not None and stored.node_id == turn.node_id
