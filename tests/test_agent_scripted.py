"""Every §17 code and the §10/§12/§14 rules through the whole runner: ``agent.send`` / ``agent.resume`` with a
scripted model, real business skills that count their real executions, and real PostgreSQL (restarts included).

Codes of part 1 that the runner cannot produce (MCP tools and delegation are part 2):

* ``MCP_TOOL_ERROR`` (40003) and ``MCP_RPC_ERROR`` (40015): only an MCP tool returns them; part 1 calls skills.
* ``SKILL_NOT_FOUND`` (40411), ``DELEGATE_REPEATED`` (42239): delegation; part 1 refuses every delegation with
  ``DELEGATE_FORBIDDEN`` first (tested below).
* ``PROVIDER_UNAVAILABLE`` (42212): planning across several nodes (``inputs.provider``); part 1 runs one node.
* ``WRITE_IN_FLIGHT`` (40031): a write is ``STARTED`` only while its own call runs. The runner executes the tool
  calls of one model reply one after another, a task has one node, and a node reopened by another process turns a
  ``STARTED`` write into ``UNKNOWN_PRE_CALL`` (§14.3), so an identical write can never meet a ``STARTED`` one through
  the runner; the stage is tested directly in tests/test_agent_chain.py.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.agent_probes import call, codes, say, write_files
from skillyard import SkillYard
from skillyard.agent.codes import ErrorCode
from skillyard.agent.runner import STEP_BUDGET, AgentError, resume_session
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult

pytestmark = pytest.mark.usefixtures("home", "db_env")

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}

HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key")}}, ensure_ascii=False))
        f.write("\\n")
    mode = input.get("mode", "ok")
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "io":
        raise OSError("disk gone")
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "boom":
        raise ValueError("boom")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    return {result}
"""

RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title"), '
    '"category": input.get("category")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "findNotes": '{"code": 200, "data": {"records": '
    '[{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}',
    "lookupOwner": '{"found": True, "owner": "ada"}',
    "tagNote": '{"code": 200, "tagged": input.get("noteId")}',
    "otherTool": '{"code": 200}',
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "properties": {"title": {}, "owner": {}, "category": {}, "mode": {}},
        "required": ["title"],
    },
    "sendMemo": {"properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "findNotes": {"properties": {"q": {}, "mode": {}, "count": {"type": "integer"}}},
    "lookupOwner": {"properties": {"q": {}, "mode": {}}},
    "tagNote": {"properties": {"noteId": {}, "tag": {}, "budget": {"type": "integer"}, "mode": {}}},
    "otherTool": {"properties": {"q": {}}},
}

FREE = {"sources": ["MODEL"], "required": False}
CONTRACT: dict[str, Any] = {
    "outputs": {
        "noteId": {"sources": ["EVIDENCE"], "required": False, "share": "TASK"},
        "category": {"sources": ["USER"], "required": False, "share": "SESSION"},
    },
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId"},
                "category": {"from": "session.category", "required": False, "label": "分类"},
                "mode": FREE,
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "sendMemo": {
            "label": "Sending a memo",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": {"path": "code", "op": "EQ", "value": 200},
        },
        "findNotes": {
            "label": "Looking up notes",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": {"path": "code", "op": "EQ", "value": 200},
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "lookupOwner": {"args": {"q": FREE, "mode": FREE}, "success": {"path": "found", "op": "TRUTHY"}},
        "tagNote": {
            "args": {
                "noteId": {
                    "sources": ["EVIDENCE"],
                    "label": "笔记",
                    "missing": {"action": "CALL_TOOL", "tool": "findNotes"},
                },
                "tag": {"sources": ["USER"], "label": "标签"},
                "budget": {"sources": ["MODEL"], "missing": {"action": "FAIL", "message": "没有预算，无法打标签"}},
                "mode": FREE,
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
        },
    },
}
TOOLS = ["saveNote", "sendMemo", "findNotes", "lookupOwner", "tagNote"]


class Env:
    """An agent folder in tmp_path whose business skills append every real execution to a log."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / "notes_agent"
        self.scripts = 0
        self.uid = uuid.uuid4().hex[:12]
        skills = self.dir / "skills"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: notes\nskills: [notes.keeper]\n---\n# Mission\nKeep notes.\n",
            skills / "keeper" / "SKILL.md": "---\nname: keeper\nskill_key: notes.keeper\ndescription: Notes.\n"
            f"tools: [{', '.join(TOOLS)}]\n---\nManual.\n",
        }
        for name, result in RESULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\nexec: {{timeout: 0.5}}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(log=str(self.log), name=name, result=result)
            files[folder / "schema.json"] = json.dumps({"type": "object", **SCHEMAS[name]})
        write_files(files)
        self.contract(CONTRACT)

    def sid(self, name: str) -> str:
        """A session id unique to this test (the database outlives the test)."""
        return f"{name}-{self.uid}"

    def contract(self, contract: dict[str, Any]) -> None:
        (self.dir / "skills" / "keeper" / "contract.json").write_text(json.dumps(contract), encoding="utf-8")

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()] if self.log.exists() else []
        return [r for r in rows if tool is None or r["tool"] == tool]


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def modified(**changes: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract.update(changes)
    return contract


async def send_once(env: Env, message: str, *turns: dict[str, Any]) -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid("once"), message, identity=IDENTITY)


async def open_node(yard: SkillYard, session: str) -> str | None:
    stored = await AgentStore(yard.database).load_session(session)
    assert stored is not None
    return stored.node_id


def test_the_codes_are_the_spec_codes() -> None:
    expected = {
        "ARG_JSON_INVALID": "40020",
        "ARG_REJECTED": "40032",
        "PARAM_PROVENANCE_FAIL": "40022",
        "PARAM_PROVENANCE_CALL_TOOL": "40023",
        "PARAM_PROVENANCE_ASK_USER": "40024",
        "PARAM_PROVENANCE_REJECTED": "40025",
        "FINGERPRINT_TRIP": "40026",
        "CATALOG_DENIED": "40027",
        "STATE_KEY_RESERVED": "40028",
        "WRITE_PENDING_VERIFY": "40030",
        "WRITE_IN_FLIGHT": "40031",
        "APPROVAL_REQUIRED": "42221",
        "WRITE_CONTRACT_INCOMPLETE": "42206",
        "SOURCE_REJECT": "42223",
        "PLATFORM_FIELD_FORBIDDEN": "42236",
        "OUTPUT_PATH_INVALID": "42243",
        "OUTPUT_WRITE_FORBIDDEN": "42244",
        "APPROVAL_NOT_GATED": "42245",
        "APPROVAL_TOOL_MISMATCH": "42246",
        "FOLLOW_UP_ANSWERED": "42247",
        "FOLLOW_UP_UNGROUNDED": "42248",
        "EVIDENCE_PATH_INVALID": "42235",
        "DELEGATE_FORBIDDEN": "42237",
        "TOOL_BUSINESS_FAILED": "40004",
        "TOOL_TIMEOUT": "40016",
        "TOOL_UNREACHABLE": "40017",
        "TOOL_IO_ERROR": "40018",
        "TOOL_ERROR": "40029",
        "MCP_INVALID_PARAMS": "40014",
    }
    assert {name: ErrorCode[name].value for name in expected} == {k: f"agent_runtime.{v}" for k, v in expected.items()}


# --- refusals before any call: nothing runs, no evidence, the node stays open ------------------------------------

OUTPUT = {"value": "x", "sourceType": "USER", "sourceRef": "user"}
REFUSALS = [
    ("ARG_JSON_INVALID", call("findNotes", '{"q": '), "agent_runtime.40020"),
    ("ARG_REJECTED (schema required)", call("saveNote", {"mode": "ok"}), "agent_runtime.40032"),
    ("ARG_REJECTED (not an object)", call("findNotes", "[1, 2]"), "agent_runtime.40032"),
    ("ARG_REJECTED (builtin shape)", call("builtin_node_fail", {"reason": 3}), "agent_runtime.40032"),
    ("ARG_JSON_INVALID (builtin)", call("builtin_node_fail", "{nope"), "agent_runtime.40020"),
    ("CATALOG_DENIED", call("otherTool", {"q": "x"}), "agent_runtime.40027"),
    ("CATALOG_DENIED (unknown builtin)", call("builtin_nothing", {}), "agent_runtime.40027"),
    # noteId missing (CALL_TOOL findNotes); tag said by the user; budget given
    ("PARAM_PROVENANCE_CALL_TOOL", call("tagNote", {"tag": "紧急", "budget": 1}), "agent_runtime.40023"),
    # noteId missing (CALL_TOOL) and budget missing (FAIL): FAIL is the more urgent one
    ("PARAM_PROVENANCE_FAIL", call("tagNote", {"tag": "紧急"}), "agent_runtime.40022"),
    ("PARAM_PROVENANCE_ASK_USER", call("sendMemo", {"text": "made up"}), "agent_runtime.40024"),
    # a made-up note id (EVIDENCE only) beats everything
    ("PARAM_PROVENANCE_REJECTED", call("tagNote", {"noteId": "n-999", "tag": "x"}), "agent_runtime.40025"),
    ("DELEGATE_FORBIDDEN", call("builtin_node_delegate", {"skillKey": "notes.keeper"}), "agent_runtime.42237"),
    (
        "APPROVAL_NOT_GATED",
        call("builtin_node_approval", {"summary": "s", "toolName": "saveNote"}),
        "agent_runtime.42245",
    ),
    ("STATE_KEY_RESERVED", call("builtin_state_set", {"key": "status", "value": 1}), "agent_runtime.40028"),
    ("OUTPUT_PATH_INVALID", call("builtin_output_set", {"key": " ", **OUTPUT}), "agent_runtime.42243"),
    ("PLATFORM_FIELD_FORBIDDEN", call("builtin_output_set", {"key": "userId", **OUTPUT}), "agent_runtime.42236"),
    ("OUTPUT_WRITE_FORBIDDEN", call("builtin_output_set", {"key": "undeclared", **OUTPUT}), "agent_runtime.42244"),
    (
        "SOURCE_REJECT (MODEL)",
        call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "MODEL", "sourceRef": "m"}),
        "agent_runtime.42223",
    ),
    (
        "SOURCE_REJECT (not allowed)",
        call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "USER", "sourceRef": "u"}),
        "agent_runtime.42223",
    ),
    (
        "EVIDENCE_PATH_INVALID",
        call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "EVIDENCE", "sourceRef": ""}),
        "agent_runtime.42235",
    ),
    (
        "EVIDENCE_PATH_INVALID (evidence_get)",
        call("builtin_evidence_get", {"evidenceId": "ev_x"}),
        "agent_runtime.42235",
    ),
    ("FOLLOW_UP_UNGROUNDED (no query)", call("builtin_node_follow_up", {"question": "哪个？"}), "agent_runtime.42248"),
    (
        "FOLLOW_UP_UNGROUNDED (platform arg)",
        call("builtin_node_follow_up", {"question": "你是谁？", "expectedFields": ["owner"]}),
        "agent_runtime.42248",
    ),
    ("FINISH_MISSING_OUTPUT", call("builtin_node_finish", {"output": "  "}), "agent_runtime.42250"),
]


@pytest.mark.parametrize(("case", "turn", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_refusals_run_nothing_and_keep_the_node_open(env: Env, case: str, turn: dict[str, Any], code: str):
    result = await send_once(env, "请给笔记打上紧急标签", turn, say("我需要更多信息"))
    assert [o.code for o in result.observations] == [code], result.as_dict()
    observation = result.observations[0]
    assert not observation.ok and observation.next_step
    assert env.calls() == [] and result.evidence == []  # nothing ran, nothing registered
    assert result.status == "RUNNING" and result.reply == "我需要更多信息"  # text without a tool call: open
    assert result.as_dict()["observations"][0]["code"] == code


# --- the call itself: §14.4 classes, business failures, params errors -----------------------------------------


@pytest.mark.parametrize(
    ("arguments", "code", "ran"),
    [
        ({"mode": "timeout"}, "agent_runtime.40016", 1),
        ({"mode": "refused"}, "agent_runtime.40017", 1),
        ({"mode": "io"}, "agent_runtime.40018", 1),
        ({"mode": "boom"}, "agent_runtime.40029", 1),
        ({"count": "many"}, "agent_runtime.40014", 0),  # the platform's schema rejects it: the handler never runs
    ],
    ids=["TOOL_TIMEOUT", "TOOL_UNREACHABLE", "TOOL_IO_ERROR", "TOOL_ERROR", "MCP_INVALID_PARAMS"],
)
async def test_failed_reads(env: Env, arguments: dict[str, Any], code: str, ran: int):
    result = await send_once(env, "找笔记", call("findNotes", arguments), say("出错了"))
    assert codes(result) == [code]
    assert len(env.calls("findNotes")) == ran  # never retried
    assert [e["status"] for e in result.evidence] == ["FAILED"]
    assert result.status == "RUNNING"


async def test_business_failures_carry_the_contract_code_or_tool_business_failed(env: Env):
    result = await send_once(
        env,
        "找笔记",
        call("findNotes", {"mode": "business"}),
        call("lookupOwner", {"mode": "business"}),
        say("都失败了"),
    )
    assert codes(result) == ["E42", "agent_runtime.40004"]  # findNotes has error.code; lookupOwner has none
    assert "duplicate title" in str(result.observations[0].content)
    assert len(env.calls()) == 2
    assert [(e["status"], e["business_ok"]) for e in result.evidence] == [("SUCCESS", False), ("SUCCESS", False)]
    assert result.status == "RUNNING"


async def test_business_failure_grounds_a_clarifying_question(env: Env):
    result = await send_once(
        env,
        "找笔记",
        call("lookupOwner", {"mode": "business"}),
        call("builtin_node_follow_up", {"question": "要找哪位的笔记？"}),
    )
    assert codes(result) == ["agent_runtime.40004", None]
    assert result.status == "SUSPENDED" and result.checkpoint is not None
    assert result.checkpoint["type"] == "FOLLOW_UP"


async def test_fourth_identical_successful_call_trips_the_fingerprint(env: Env):
    same = call("findNotes", {"q": "周报"})
    result = await send_once(env, "找周报", same, same, same, same, say("never asked"))
    assert codes(result) == [None, None, None, "agent_runtime.40026"]
    assert len(env.calls("findNotes")) == 3
    assert result.status == "FAILED" and "3 times" in (result.reply or "")


# --- the write gate --------------------------------------------------------------------------------------------


async def test_approval_required_mismatch_and_finish_need_target(env: Env):
    result = await send_once(
        env,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "好了"}),
        say("等确认"),
    )
    assert codes(result) == ["agent_runtime.42221", "agent_runtime.42246", "agent_runtime.42254"]
    assert "saveNote" in str(result.observations[1].content)  # the mismatch names the gated tool
    assert result.observations[0].sources["title"] == "USER"
    assert result.observations[0].sources["owner"] == "PLATFORM"
    assert env.calls() == [] and result.status == "RUNNING"


async def test_identical_successful_write_returns_the_earlier_result_without_approval(env: Env):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("dup"), "保存季度总结", identity=IDENTITY)
        assert first.checkpoint is not None and first.checkpoint["type"] == "APPROVAL"
        done = await agent.resume(env.sid("dup"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    confirmed, again, finished = done.observations
    assert confirmed.ok and again.ok and finished.ok
    assert again.evidence_id == confirmed.evidence_id and again.code is None
    assert again.content == confirmed.content
    assert len(env.calls("saveNote")) == 1


async def test_timed_out_write_is_pending_and_blocks_finish_then_verify_confirm(env: Env):
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_finish", {"output": "已发"}),
        say("稍后再看"),
        call("builtin_node_finish", {"output": "已发出"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("v"), "发一条备忘：开会", identity=IDENTITY)
        after = await agent.resume(env.sid("v"), "CONFIRM")
        assert codes(after) == ["agent_runtime.40016", "agent_runtime.40030", "agent_runtime.42251"]
        assert after.status == "RUNNING" and [e["status"] for e in after.evidence] == ["UNKNOWN"]
        assert len(env.calls("sendMemo")) == 1
    async with SkillYard() as yard:  # reopened by a new process: no verify tool, so the user is asked
        agent = await yard.agent(env.dir, model=script)
        asked = await agent.send(env.sid("v"), "好了吗？", identity=IDENTITY)
        assert asked.status == "SUSPENDED" and asked.checkpoint is not None
        assert asked.checkpoint["type"] == "VERIFY" and asked.checkpoint["tool"] == "sendMemo"
        done = await agent.resume(env.sid("v"), "CONFIRM")
    assert done.status == "DONE" and done.reply == "已发出"
    assert [(e["status"], e["business_ok"]) for e in done.evidence] == [("SUCCESS", True)]
    assert len(env.calls("sendMemo")) == 1


async def test_verify_reject_fails_the_write_and_the_node_continues(env: Env):
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        say("稍后再看"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),  # FAILED: an identical write may be called again
        say("需要重新确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("vr"), "发一条备忘：开会", identity=IDENTITY)
        await agent.resume(env.sid("vr"), "CONFIRM")
        asked = await agent.send(env.sid("vr"), "好了吗？", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "VERIFY"
        rejected = await agent.resume(env.sid("vr"), "REJECT")
    assert rejected.status == "RUNNING" and rejected.reply == "需要重新确认"
    assert codes(rejected) == ["agent_runtime.42221"]
    assert [(e["status"], e["business_ok"]) for e in rejected.evidence] == [("FAILED", False)]
    assert len(env.calls("sendMemo")) == 1


async def test_a_message_at_verify_does_not_settle_the_write(env: Env):
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        say("稍后再看"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("vm"), "发一条备忘：开会", identity=IDENTITY)
        await agent.resume(env.sid("vm"), "CONFIRM")
        asked = await agent.send(env.sid("vm"), "好了吗？", identity=IDENTITY)
        assert asked.checkpoint is not None and asked.checkpoint["type"] == "VERIFY"
        chat = await agent.send(env.sid("vm"), "我也不知道", identity=IDENTITY)
    assert chat.status == "SUSPENDED" and chat.checkpoint is not None and chat.checkpoint["type"] == "VERIFY"
    assert [e["status"] for e in chat.evidence] == ["UNKNOWN"]  # neither confirmed nor rejected
    assert len(env.calls("sendMemo")) == 1


async def test_confirm_after_a_bound_value_changed_asks_again_and_runs_nothing(env: Env):
    script = env.script(
        # task 1: publish session.category (share SESSION)
        call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_node_finish", {"output": "分类已记住"}),
        # task 2: the write binds category from session.category
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("ch"), "以后分类用工作", identity=IDENTITY)
        assert first.status == "DONE"
        gated = await agent.send(env.sid("ch"), "保存季度总结", identity=IDENTITY)
        assert gated.checkpoint is not None and "分类：工作" in gated.checkpoint["question"]
        assert gated.observations[0].sources["category"] == "SESSION"
        # the session value changes while the approval waits (another process of the same session)
        store = AgentStore(yard.database)
        session = await store.load_session(env.sid("ch"))
        assert session is not None and session.values == {"category": "工作"}
        session.values["category"] = "生活"
        await store.save_session(session)
    async with SkillYard() as yard:
        again = await resume_session(yard, env.sid("ch"), "CONFIRM")
        assert again.status == "SUSPENDED" and again.checkpoint is not None
        assert again.checkpoint["type"] == "APPROVAL" and "变化" in again.checkpoint["question"]
        assert "分类：生活" in again.checkpoint["question"]
        assert env.calls() == []  # the changed write did not run
        done = await resume_session(yard, env.sid("ch"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert [c["input"]["category"] for c in env.calls("saveNote")] == ["生活"]


async def test_an_expired_approval_needs_a_fresh_confirmation(env: Env, monkeypatch: pytest.MonkeyPatch):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    monkeypatch.setenv("SKILLYARD_AGENT_RECONFIRM_AFTER", "0s")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("exp"), "保存季度总结", identity=IDENTITY)
        expired = await agent.resume(env.sid("exp"), "CONFIRM")
    assert expired.status == "SUSPENDED" and expired.checkpoint is not None
    assert expired.checkpoint["type"] == "APPROVAL" and "有效期" in expired.checkpoint["question"]
    assert "标题：季度总结" in expired.checkpoint["question"]
    assert env.calls() == []
    monkeypatch.delenv("SKILLYARD_AGENT_RECONFIRM_AFTER")
    async with SkillYard() as yard:  # the fresh approval is within the default 24h
        done = await resume_session(yard, env.sid("exp"), "CONFIRM")
    assert done.status == "DONE" and len(env.calls("saveNote")) == 1


async def test_write_contract_incomplete_when_the_gated_tool_is_no_longer_a_write(env: Env):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        say("稍等"),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        say("契约变了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        gated = await agent.send(env.sid("wci"), "保存季度总结", identity=IDENTITY)
    assert codes(gated) == ["agent_runtime.42221"] and gated.status == "RUNNING"
    read_only = json.loads(json.dumps(CONTRACT))
    save = read_only["tools"]["saveNote"]
    del save["sideEffect"], save["verify"]
    env.contract(read_only)  # the agent was republished: saveNote is no longer a WRITE tool
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        refused = await agent.send(env.sid("wci"), "继续", identity=IDENTITY)
    assert codes(refused) == ["agent_runtime.42206"] and refused.status == "RUNNING"
    assert env.calls() == []


# --- follow-up -------------------------------------------------------------------------------------------------


async def test_reply_makes_expected_fields_user_and_the_same_question_is_answered(env: Env):
    script = env.script(
        call("saveNote", {"title": "第三季度总结"}),
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        call("builtin_node_follow_up", {"question": " 标题是什么？\n", "expectedFields": ["title"]}),
        call("saveNote", {"title": "第三季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        asked = await agent.send(env.sid("fu"), "帮我存个笔记", identity=IDENTITY)
    assert codes(asked) == ["agent_runtime.40024", None]
    assert asked.status == "SUSPENDED" and asked.checkpoint is not None
    assert asked.checkpoint["type"] == "FOLLOW_UP" and asked.checkpoint["expected_fields"] == ["title"]
    async with SkillYard() as yard:  # a new process answers the follow-up
        answered = await resume_session(yard, env.sid("fu"), "REPLY", "就用第三季度那个")
    assert codes(answered) == ["agent_runtime.42247", "agent_runtime.42221", None]
    assert answered.observations[1].sources["title"] == "USER"  # not in the text: the answered expectedField
    assert answered.checkpoint is not None and answered.checkpoint["type"] == "APPROVAL"
    async with SkillYard() as yard:
        done = await resume_session(yard, env.sid("fu"), "CONFIRM")
    assert done.status == "DONE"
    assert [c["input"]["title"] for c in env.calls("saveNote")] == ["第三季度总结"]


async def test_follow_up_survives_a_restart_and_a_message_answers_it(env: Env):
    script = env.script(
        call("findNotes", {"q": "总结"}),
        call("builtin_node_follow_up", {"question": "存哪一篇？", "expectedFields": ["title"]}),
        call("builtin_session_info"),
        call("builtin_node_fail", {"reason": "用户改主意了"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        asked = await agent.send(env.sid("fr"), "存一篇总结", identity=IDENTITY)
        node_id = asked.node_id
    assert asked.status == "SUSPENDED" and asked.checkpoint is not None
    async with SkillYard() as yard:  # new SkillYard, same database: the message is the REPLY
        agent = await yard.agent(env.dir, model=script)
        answered = await agent.send(env.sid("fr"), "算了", identity=IDENTITY)
    assert answered.node_id == node_id
    info = answered.observations[0]
    assert info.ok and info.content["nodeId"] == node_id and info.content["nodeStatus"] == "RUNNING"
    assert answered.status == "FAILED" and answered.reply == "用户改主意了"
    assert len(env.calls("findNotes")) == 1


@pytest.mark.parametrize("action", ["REJECT", "CANCEL"])
async def test_reject_or_cancel_at_follow_up_cancels_the_task(env: Env, action: str):
    script = env.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("fc"), "存个笔记", identity=IDENTITY)
        cancelled = await agent.resume(env.sid("fc"), action)
        assert cancelled.status == "CANCELLED" and cancelled.reply == "已取消。"
        assert await open_node(yard, env.sid("fc")) is None
        with pytest.raises(AgentError, match="no open node"):
            await agent.resume(env.sid("fc"), "REPLY", "x")


SUSPEND_AT = {
    "FOLLOW_UP": [call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]})],
    "APPROVAL": [
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
    ],
    "VERIFY": [
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        say("稍等"),
    ],
}


@pytest.mark.parametrize("checkpoint", list(SUSPEND_AT))
async def test_cancel_at_every_checkpoint(env: Env, checkpoint: str):
    if checkpoint == "VERIFY":  # without a verify tool the reopened node asks the user
        contract = json.loads(json.dumps(CONTRACT))
        del contract["tools"]["saveNote"]["verify"]
        env.contract(contract)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*SUSPEND_AT[checkpoint]))
        turn = await agent.send(env.sid("cx"), "保存季度总结", identity=IDENTITY)
        if checkpoint == "VERIFY":
            await agent.resume(env.sid("cx"), "CONFIRM")
            turn = await agent.send(env.sid("cx"), "好了吗", identity=IDENTITY)
        ran = len(env.calls())
        assert turn.checkpoint is not None and turn.checkpoint["type"] == checkpoint
        cancelled = await agent.resume(env.sid("cx"), "CANCEL")
        assert cancelled.status == "CANCELLED" and cancelled.checkpoint is None
        assert len(env.calls()) == ran  # cancelling runs nothing
        assert await open_node(yard, env.sid("cx")) is None


# --- USER provenance, step budget, open nodes ------------------------------------------------------------------


async def test_user_text_matches_whole_numbers_only(env: Env):
    script = env.script(
        call("saveNote", {"title": "10"}),
        say("标题是什么？"),
        call("saveNote", {"title": "10"}),
        say("等确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("10"), "整理2010年的笔记", identity=IDENTITY)
        assert codes(first) == ["agent_runtime.40024"]  # 10 is not in 2010
        assert first.status == "RUNNING" and first.reply == "标题是什么？"
        second = await agent.send(env.sid("10"), "标题就是 10", identity=IDENTITY)
    assert codes(second) == ["agent_runtime.42221"]
    assert second.observations[0].sources["title"] == "USER"
    assert second.node_id == first.node_id and env.calls() == []


async def test_step_budget_fails_a_runaway_node(env: Env):
    turns = [call("findNotes", {"q": f"q{n}"}) for n in range(STEP_BUDGET + 1)]
    result = await send_once(env, "找笔记", *turns)
    assert result.status == "FAILED" and str(STEP_BUDGET) in (result.reply or "")
    assert len(result.observations) == STEP_BUDGET and len(env.calls("findNotes")) == STEP_BUDGET


async def test_step_budget_counts_per_turn(env: Env):
    per_turn = STEP_BUDGET // 2 + 1  # two turns together exceed the budget, each alone does not
    turns: list[dict[str, Any]] = []
    for turn in range(3):
        turns += [call("findNotes", {"q": f"t{turn}-{n}"}) for n in range(per_turn - 1)]
        turns.append(say(f"第{turn}轮完毕"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        for turn in range(3):
            result = await agent.send(env.sid("steps"), f"继续{turn}", identity=IDENTITY)
            assert result.status == "RUNNING" and result.reply == f"第{turn}轮完毕", result.reply
    assert len(env.calls("findNotes")) == 3 * (per_turn - 1)


async def test_text_keeps_the_node_open_across_messages(env: Env):
    script = env.script(say("要找什么？"), call("findNotes", {"q": "周报"}), say("找到了两篇"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("open"), "找笔记", identity=IDENTITY)
        assert first.status == "RUNNING" and first.reply == "要找什么？" and first.observations == []
        assert await open_node(yard, env.sid("open")) == first.node_id
        second = await agent.send(env.sid("open"), "周报", identity=IDENTITY)
    assert second.status == "RUNNING" and second.node_id == first.node_id and second.reply == "找到了两篇"
    assert second.observations[0].ok and len(env.calls("findNotes")) == 1


# --- finish gates ----------------------------------------------------------------------------------------------


async def test_finish_output_missing_and_output_source(env: Env):
    required = modified(outputs={"noteId": {"sources": ["EVIDENCE"], "required": True}})
    env.contract(required)
    script = env.script(
        call("builtin_node_finish", {"output": "好了"}),
        call("findNotes", {"q": "总结"}),
        say("稍后"),
        call(
            "builtin_output_set",
            {
                "key": "noteId",
                "value": "n-1",
                "sourceType": "EVIDENCE",
                "sourceRef": "@@evidence@@",
                "sourcePath": "data.records.0.id",
            },
        ),
        say("稍后"),
        call("builtin_node_finish", {"output": "好了"}),
        say("来源不对了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("out"), "找总结", identity=IDENTITY)
    assert codes(first) == ["agent_runtime.42252", None]
    evidence_id = first.observations[1].evidence_id
    assert evidence_id
    # write the evidence id into the next script item (the model read it from the observation)
    text = Path(script.removeprefix("script:")).read_text(encoding="utf-8").replace("@@evidence@@", evidence_id)
    Path(script.removeprefix("script:")).write_text(text, encoding="utf-8")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        written = await agent.send(env.sid("out"), "写下来", identity=IDENTITY)
    assert codes(written) == [None] and written.status == "RUNNING"
    # republished: noteId now only accepts USER, so the written EVIDENCE value has no legal source at finish
    env.contract(modified(outputs={"noteId": {"sources": ["USER"], "required": True}}))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        refused = await agent.send(env.sid("out"), "完成吧", identity=IDENTITY)
    assert codes(refused) == ["agent_runtime.42253"] and refused.status == "RUNNING"


async def test_finish_need_business_without_target_and_outputs(env: Env):
    env.contract(modified(outputs={}))
    result = await send_once(
        env,
        "找总结",
        call("builtin_node_finish", {"output": "好了"}),
        call("findNotes", {"q": "总结"}),
        call("builtin_node_finish", {"output": "找到了"}),
    )
    assert codes(result) == ["agent_runtime.42255", None, None]
    assert result.status == "DONE" and result.reply == "找到了"
