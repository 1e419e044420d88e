"""Review probes, round 2, for issue 5 (the contract-driven agent runtime, part 1): the bullets the first round
(tests/test_agent_conformance.py) left out, written black-box from the issue text, the contract spec and
docs/agents.md / docs/cli.md / docs/agent-models.md: every builtin with its codes and argument errors, the §10.2
gates through the runner, §10.1 targets, §7 inputs, §8 outputs, the prompt and the offered tools, the CLI in real
subprocesses, restarts on the same database, skill_md sub-agents and the ``[agent]`` settings.

Real parts only: in-process business skills that log every real execution, real PostgreSQL (``db_env``), scripted
models, ``python -m skillyard`` subprocesses for the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.agent_probes import call, codes, needs_db, say, write_files
from skillyard import SkillYard
from skillyard.agent.models import ScriptedModel
from skillyard.agent.runner import AgentError
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}

HANDLER = """
import asyncio, json, os, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        seen = {{k: ctx.get(k) for k in ("user_id", "passport_id", "idempotency_key")}}
        f.write(json.dumps({{"tool": NAME, "input": input, "ctx": seen}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "crash":
        os._exit(17)  # the process dies in the middle of the call
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "io":
        raise OSError("disk gone")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    if mode == "empty":
        return {{"code": 200, "data": {{"records": []}}}}
    return {result}
"""

RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "findNotes": '{"code": 200, "data": {"records": '
    '[{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}',
    "quickWrite": '{"code": 200, "data": {"id": "q-1"}}',
    "pickTool": '{"code": 200, "picked": dict(input)}',
    "plainTool": '{"code": 200, "plain": True}',
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {"title": {"type": "string"}, "owner": {}, "mode": {}},
        "required": ["title", "owner"],
    },
    "sendMemo": {"type": "object", "properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "findNotes": {"type": "object", "properties": {"q": {}, "mode": {}, "count": {"type": "integer"}}},
    "quickWrite": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "pickTool": {
        "type": "object",
        "properties": {k: {} for k in ("a", "b", "c", "d", "color", "noteIds", "kind", "mode", "userId")},
        "required": ["kind"],
    },
    "plainTool": {"type": "object", "properties": {"q": {"type": "string", "description": "free text"}}},
}
TOOLS = list(RESULTS)

FREE = {"sources": ["MODEL"], "required": False}
OK200 = {"path": "code", "op": "EQ", "value": 200}
CONTRACT: dict[str, Any] = {
    "outputs": {
        "noteId": {"sources": ["EVIDENCE"], "required": False, "share": "TASK"},
        "category": {"sources": ["USER"], "required": False, "share": "SESSION"},
    },
    "tools": {
        "saveNote": {
            "label": "正在保存笔记",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "所有者"},
                "mode": FREE,
            },
            "success": OK200,
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "sendMemo": {
            "label": "正在发送备忘",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": OK200,
        },
        "findNotes": {
            "label": "正在查找笔记",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": OK200,
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "quickWrite": {
            "label": "正在快速写入",
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
        },
        "pickTool": {
            "label": "正在挑选",
            "args": {
                "kind": {"const": "fixed", "label": "类型"},
                "color": {"sources": ["MODEL"], "required": False, "enum": ["red", "blue"], "label": "颜色"},
                "mode": FREE,
            },
            "success": OK200,
        },
    },
}


class Env:
    """An agent folder in tmp_path: one contract skill and business skills that log every real execution."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / "memo_agent"
        self.scripts = 0
        self.uid = uuid.uuid4().hex[:10]
        skills = self.dir / "skills"
        self.keeper = skills / "keeper"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: memo\nagent_name: Memo keeper\nskills: [memo.keeper]\n---\n"
            "# Identity\nA careful memo keeper.\n# Mission\nKeep the user's notes.\n",
            self.keeper / "SKILL.md": self.skill_md(TOOLS, "The keeper manual: save notes the user dictates."),
        }
        for name, result in RESULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\nexec: {{timeout: 0.5}}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(log=str(self.log), name=name, result=result)
            files[folder / "schema.json"] = json.dumps(SCHEMAS[name])
        write_files(files)
        self.contract(CONTRACT)

    @staticmethod
    def skill_md(tools: list[str], manual: str) -> str:
        return (
            "---\nname: keeper\nskill_key: memo.keeper\ndescription: Keeps memos.\n"
            f"tools: [{', '.join(tools)}]\n---\n{manual}\n"
        )

    def tools(self, tools: list[str], manual: str = "The keeper manual.") -> None:
        (self.keeper / "SKILL.md").write_text(self.skill_md(tools, manual), encoding="utf-8")

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def contract(self, contract: dict[str, Any]) -> None:
        text = json.dumps(contract, ensure_ascii=False)
        (self.keeper / "contract.json").write_text(text, encoding="utf-8")

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def changed(mutate: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    return contract


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "quickWrite")
    return Env(tmp_path)


class Recorder:
    """A ChatModel around the scripted model that records every model call's messages and offered tools."""

    def __init__(self, spec: str) -> None:
        self.inner = ScriptedModel(spec.removeprefix("script:"))
        self.seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        self.seen.append((json.loads(json.dumps(messages, default=str)), tools))
        return await self.inner.complete(messages, tools, state)

    def offered(self, index: int) -> list[str]:
        return [t["function"]["name"] for t in self.seen[index][1]]

    def system(self, index: int) -> str:
        return self.seen[index][0][0]["content"]


class EvModel(Recorder):
    """The scripted model, where ``$EV`` in a call's arguments is replaced by the newest evidence id the model has
    seen in a tool message (the model copies it from an observation, as a real model would)."""

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        from skillyard.agent.models import ModelReply, ToolCall

        reply = await super().complete(messages, tools, state)
        seen = [
            json.loads(m["content"]).get("evidence_id")
            for m in messages
            if m.get("role") == "tool" and m.get("content", "").startswith("{")
        ]
        ids = [e for e in seen if e]
        if not ids:
            return reply
        fixed = tuple(ToolCall(c.id, c.name, c.arguments.replace("$EV", ids[-1])) for c in reply.tool_calls)
        return ModelReply(reply.text, fixed)


async def send_once(env: Env, message: str, *turns: dict[str, Any], session: str = "once") -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)


async def run_builtin(env: Env, name: str, arguments: Any, *before: dict[str, Any]) -> TurnResult:
    """One builtin call after the turns ``before``; the model then stops with text."""
    return await send_once(env, "保存季度总结", *before, call(name, arguments), say("stop"))


def last(turn: TurnResult) -> Any:
    return turn.observations[-1]


# =====================================================================================================================
# §12 builtins through the runner: every code, argument error and "not offered now" answer
# =====================================================================================================================

ARG_REJECTED = "agent_runtime.40032"
ARG_JSON_INVALID = "agent_runtime.40020"
CATALOG_DENIED = "agent_runtime.40027"

BAD_BUILTIN_ARGS = [
    ("follow_up no question", "builtin_node_follow_up", {}),
    ("follow_up blank question", "builtin_node_follow_up", {"question": "  "}),
    ("follow_up fields not a list", "builtin_node_follow_up", {"question": "q?", "expectedFields": "title"}),
    ("fail no reason", "builtin_node_fail", {}),
    ("fail blank reason", "builtin_node_fail", {"reason": " "}),
    ("finish output not text", "builtin_node_finish", {"output": 42}),
    ("output_set no sourceType", "builtin_output_set", {"key": "category", "value": "x", "sourceRef": "m"}),
    (
        "output_set lower-case source",
        "builtin_output_set",
        {"key": "category", "value": "x", "sourceType": "user", "sourceRef": "m"},
    ),
    ("state_set no key", "builtin_state_set", {"value": 1}),
    ("state_set empty key", "builtin_state_set", {"key": "", "value": 1}),
    ("evidence_get id not text", "builtin_evidence_get", {"evidenceId": 7}),
    ("uuid length 0", "builtin_env_generate_uuid", {"length": 0}),
    ("uuid length 33", "builtin_env_generate_uuid", {"length": 33}),
    ("uuid length text", "builtin_env_generate_uuid", {"length": "8"}),
    ("format bad input", "builtin_env_format_datetime", {"input": "yesterday-ish"}),
    ("format bad pattern letter", "builtin_env_format_datetime", {"input": "2024-05-01", "outputPattern": "yyyy-QQ"}),
    ("format input vs pattern", "builtin_env_format_datetime", {"input": "2024-05-01", "inputPattern": "dd/MM/yyyy"}),
    ("add unknown unit", "builtin_env_add_datetime", {"base": "2024-05-01", "amount": 1, "unit": "fortnights"}),
    ("add amount text", "builtin_env_add_datetime", {"base": "2024-05-01", "amount": "1"}),
    ("add no amount", "builtin_env_add_datetime", {"base": "2024-05-01"}),
    ("diff no to", "builtin_env_diff_datetime", {"from": "2024-05-01"}),
    ("diff bad unit", "builtin_env_diff_datetime", {"from": "2024-05-01", "to": "2024-06-01", "unit": "eons"}),
    ("weekday bad date", "builtin_env_get_weekday", {"date": "2024-13-45"}),
    ("random min > max", "builtin_env_random_int", {"min": 5, "max": 1}),
    ("random float", "builtin_env_random_int", {"min": 1.5, "max": 3}),
    ("hash unknown algorithm", "builtin_env_hash", {"input": "abc", "algorithm": "crc32"}),
    ("hash length too long", "builtin_env_hash", {"input": "abc", "algorithm": "md5", "length": 33}),
    ("hash no input", "builtin_env_hash", {}),
    ("arguments are a list", "builtin_session_info", "[1, 2]"),
]


@pytest.mark.parametrize(("case", "name", "arguments"), BAD_BUILTIN_ARGS, ids=[c[0] for c in BAD_BUILTIN_ARGS])
@needs_db
async def test_builtin_argument_errors_answer_arg_rejected_with_a_next_step(env: Env, case, name, arguments):
    turn = await run_builtin(env, name, arguments)
    obs = last(turn)
    assert not obs.ok and obs.code == ARG_REJECTED, obs
    assert obs.next_step, obs
    assert turn.status == "RUNNING" and env.calls() == []


@pytest.mark.parametrize("name", ["builtin_node_finish", "builtin_env_hash", "builtin_node_approval"])
@needs_db
async def test_builtin_arguments_that_are_not_json(env: Env, name: str):
    before = [call("saveNote", {"title": "季度总结"})] if name == "builtin_node_approval" else []
    turn = await run_builtin(env, name, '{"output": ', *before)
    assert last(turn).code == ARG_JSON_INVALID and last(turn).next_step


@needs_db
async def test_builtins_that_are_not_offered_now_answer_with_their_own_code(env: Env):
    """Issue: a builtin that exists but is not offered answers with its own code (APPROVAL_NOT_GATED,
    DELEGATE_FORBIDDEN), otherwise CATALOG_DENIED (read_skill_file with a short manual)."""
    model = Recorder(
        env.script(
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            call("builtin_node_delegate", {"skillKey": "memo.keeper", "objective": "x"}),
            call("read_skill_file", {"path": "SKILL.md"}),
            call("builtin_state_get", {"key": "draft"}),  # no such builtin in §12
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("notoffered"), "x", identity=IDENTITY)
    assert codes(turn) == ["agent_runtime.42245", "agent_runtime.42237", CATALOG_DENIED, CATALOG_DENIED]
    assert all(o.next_step for o in turn.observations)
    offered = model.offered(0)
    assert "builtin_node_approval" not in offered and "builtin_node_delegate" not in offered
    assert "read_skill_file" not in offered


@needs_db
async def test_a_reply_at_approval_drops_the_gated_write_so_approval_is_not_offered_again(env: Env):
    model = Recorder(
        env.script(
            call("saveNote", {"title": "季度总结"}),
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            say("好的，不保存"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("drop"), "保存季度总结", identity=IDENTITY)
        turn = await agent.resume(env.sid("drop"), "REPLY", "先别保存")
    assert codes(turn) == ["agent_runtime.42245"] and env.calls() == []
    assert "builtin_node_approval" not in model.offered(2)


@needs_db
async def test_approval_mismatch_names_the_gated_tool(env: Env):
    turn = await run_builtin(
        env, "builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}, call("saveNote", {"title": "季度总结"})
    )
    obs = last(turn)
    assert obs.code == "agent_runtime.42246" and "saveNote" in f"{obs.content} {obs.next_step}"


@pytest.mark.parametrize("output", [None, "", "   "], ids=["absent", "empty", "blank"])
@needs_db
async def test_finish_without_output_is_finish_missing_output(env: Env, output: str | None):
    arguments = {} if output is None else {"output": output}
    turn = await run_builtin(env, "builtin_node_finish", arguments, call("findNotes", {"q": "a"}))
    assert last(turn).code == "agent_runtime.42250" and turn.status == "RUNNING"


@needs_db
async def test_fail_ends_the_node_and_the_next_message_starts_a_new_task(env: Env):
    script = env.script(call("builtin_node_fail", {"reason": "做不到"}), say("新任务"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        failed = await agent.send(env.sid("fail"), "x", identity=IDENTITY)
        later = await agent.send(env.sid("fail"), "再来", identity=IDENTITY)
    assert failed.status == "FAILED" and failed.reply == "做不到"
    assert later.task_id != failed.task_id and later.status == "RUNNING"


# --- follow-up grounding through the runner -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "before", "grounded"),
    [
        (["title"], [], True),  # sources contain USER
        (["text"], [], True),
        (["owner"], [], False),  # from platform: nothing to ask
        (["kind"], [], False),  # const
        (["nothing"], [], False),  # no such argument
        (["color"], [], True),  # has an enum
        ([], [], False),  # a clarifying question needs an empty or failed query first
        ([], [call("findNotes", {"q": "a"})], False),  # a non-empty result does not ground it
        ([], [call("findNotes", {"q": "a", "mode": "empty"})], True),
        ([], [call("findNotes", {"q": "a", "mode": "io"})], False),  # a technical failure does not
    ],
    ids=["user", "user2", "platform", "const", "unknown", "enum", "none", "nonempty", "empty", "io"],
)
@needs_db
async def test_follow_up_grounding(env: Env, fields: list[str], before: list[dict[str, Any]], grounded: bool):
    arguments: dict[str, Any] = {"question": "哪一篇？"}
    if fields:
        arguments["expectedFields"] = fields
    turn = await run_builtin(env, "builtin_node_follow_up", arguments, *before)
    if grounded:
        assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn
        assert turn.checkpoint["expected_fields"] == fields
    else:
        assert last(turn).code == "agent_runtime.42248" and turn.status == "RUNNING" and last(turn).next_step


@needs_db
async def test_follow_up_answered_again_is_refused_but_another_field_set_is_not(env: Env):
    ask = {"question": "标题是什么？", "expectedFields": ["title"]}
    script = env.script(
        call("builtin_node_follow_up", ask),
        call("builtin_node_follow_up", {"question": "  标题是什么？ ", "expectedFields": ["title"]}),
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title", "text"]}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("again"), "存个笔记", identity=IDENTITY)
        assert first.checkpoint is not None and first.checkpoint["suggestions"] == []
        second = await agent.resume(env.sid("again"), "REPLY", "季度总结")
    assert codes(second) == ["agent_runtime.42247", None]
    assert second.status == "SUSPENDED" and second.checkpoint["expected_fields"] == ["title", "text"]


@needs_db
async def test_follow_up_suggestions_reach_the_checkpoint(env: Env):
    turn = await run_builtin(
        env,
        "builtin_node_follow_up",
        {"question": "哪一篇？", "expectedFields": ["title"], "suggestions": ["季度总结", "周报"]},
        call("findNotes", {"q": "a"}),
    )
    assert turn.checkpoint is not None and turn.checkpoint["suggestions"] == ["季度总结", "周报"]


# --- outputs (§8) -----------------------------------------------------------------------------------------------


def _output_contract(c: dict[str, Any]) -> None:
    c["outputs"] = {
        "noteId": {"sources": ["EVIDENCE"], "required": False, "share": "TASK"},
        "category": {"sources": ["USER"], "required": False, "share": "SESSION"},
        "kind": {"sources": ["CONTRACT"], "constant": "memo", "required": False, "share": "SESSION"},
        "free": {"required": False, "share": "SESSION"},
    }


OUTPUT_CASES = [
    ("empty key", {"key": "", "value": 1, "sourceType": "USER", "sourceRef": "m"}, "agent_runtime.42243"),
    ("platform key", {"key": "organId", "value": 1, "sourceType": "USER", "sourceRef": "m"}, "agent_runtime.42236"),
    (
        "hidden platform key",
        {"key": "passportId", "value": 1, "sourceType": "USER", "sourceRef": "m"},
        "agent_runtime.42236",
    ),
    ("undeclared key", {"key": "other", "value": 1, "sourceType": "USER", "sourceRef": "m"}, "agent_runtime.42244"),
    ("model source", {"key": "free", "value": 1, "sourceType": "MODEL", "sourceRef": "m"}, "agent_runtime.42223"),
    (
        "source not allowed",
        {"key": "category", "value": "工作", "sourceType": "SESSION", "sourceRef": "m"},
        "agent_runtime.42223",
    ),
    (
        "evidence without ref",
        {"key": "noteId", "value": "n-1", "sourceType": "EVIDENCE", "sourceRef": ""},
        "agent_runtime.42235",
    ),
    (
        "evidence unknown ref",
        {
            "key": "noteId",
            "value": "n-1",
            "sourceType": "EVIDENCE",
            "sourceRef": "ev-nope",
            "sourcePath": "data.records.0.id",
        },
        "agent_runtime.42223",
    ),
    (
        "contract other value",
        {"key": "kind", "value": "note", "sourceType": "CONTRACT", "sourceRef": "c"},
        "agent_runtime.42223",
    ),
    (
        "contract without constant",
        {"key": "free", "value": "x", "sourceType": "CONTRACT", "sourceRef": "c"},
        "agent_runtime.42223",
    ),
    ("user ok", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "m"}, None),
    ("contract ok", {"key": "kind", "value": "memo", "sourceType": "CONTRACT", "sourceRef": "c"}, None),
    ("empty sources allow all but model", {"key": "free", "value": 3, "sourceType": "SESSION", "sourceRef": "s"}, None),
]


@pytest.mark.parametrize(("case", "arguments", "code"), OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
@needs_db
async def test_output_set_codes(env: Env, case: str, arguments: dict[str, Any], code: str | None):
    env.contract(changed(_output_contract))
    turn = await run_builtin(env, "builtin_output_set", arguments)
    obs = last(turn)
    assert obs.code == code, obs
    assert obs.ok is (code is None) and (code is None or obs.next_step)


@pytest.mark.parametrize(
    ("path", "value", "ok"),
    [
        ("data.records.0.id", "n-1", True),
        ("data.records.1.id", "n-1", False),
        ("data.records.0.id", "n-2", False),
        ("data.records.9.id", "n-1", False),
        ("code", 200, True),
        ("code", "200", False),
    ],
)
@needs_db
async def test_output_set_evidence_value_must_equal_the_response_value(env: Env, path: str, value: Any, ok: bool):
    env.contract(changed(_output_contract))
    arguments = {"key": "noteId", "value": value, "sourceType": "EVIDENCE", "sourceRef": "$EV", "sourcePath": path}
    model = EvModel(env.script(call("findNotes", {"q": "a"}), call("builtin_output_set", arguments), say("stop")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("evout"), "找", identity=IDENTITY)
    obs = turn.observations[1]
    assert obs.ok is ok and (ok or obs.code == "agent_runtime.42223"), obs


@needs_db
async def test_output_set_refuses_a_business_failed_evidence(env: Env):
    env.contract(changed(_output_contract))
    arguments = {"key": "noteId", "value": "E42", "sourceType": "EVIDENCE", "sourceRef": "$EV", "sourcePath": "code"}
    model = EvModel(
        env.script(call("findNotes", {"q": "a", "mode": "business"}), call("builtin_output_set", arguments), say("s"))
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("evbad"), "找", identity=IDENTITY)
    assert turn.observations[0].evidence_id and turn.observations[1].code == "agent_runtime.42223"


# --- notes, evidence, session info ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["_x", "$x", "status", "STATUS", "Target", "userId", "passportId", "session", "evidence", "call", "gated"]
)
@needs_db
async def test_state_set_reserved_keys(env: Env, key: str):
    turn = await run_builtin(env, "builtin_state_set", {"key": key, "value": 1})
    assert last(turn).code == "agent_runtime.40028" and last(turn).next_step


@needs_db
async def test_state_set_a_free_key_is_kept_with_the_node_across_a_restart(env: Env):
    turn = await send_once(
        env, "x", call("builtin_state_set", {"key": "draft", "value": {"a": [1, 2]}}), say("记下了"), session="note"
    )
    assert turn.observations[0].ok
    async with SkillYard() as yard:
        node = await AgentStore(yard.database).load_node(str(turn.node_id))
    assert node is not None and node.scratch == {"draft": {"a": [1, 2]}}


@needs_db
async def test_evidence_get_and_session_info(env: Env):
    model = EvModel(
        env.script(
            call("findNotes", {"q": "a"}),
            call("builtin_evidence_get", {"evidenceId": ""}),
            call("builtin_evidence_get", {"evidenceId": "ev-unknown"}),
            call("builtin_session_info"),
            call("builtin_evidence_get", {"evidenceId": "$EV"}),
            call("builtin_node_finish", {"output": "找到了"}),
            call("builtin_evidence_get", {"evidenceId": "$EV"}),  # in the next task
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        first = await agent.send(env.sid("evget"), "找", identity=IDENTITY)
        later = await agent.send(env.sid("evget"), "再看看", identity=IDENTITY)
    found, empty, unknown, info, raw, _done = first.observations
    assert empty.code == "agent_runtime.42235" and unknown.code == "agent_runtime.42235"
    assert found.evidence_id and found.evidence_id in str(unknown.next_step)  # lists the visible ids
    assert info.ok and info.content == {
        "sessionId": env.sid("evget"),
        "taskId": first.task_id,
        "nodeId": first.node_id,
        "nodeStatus": "RUNNING",
    }
    content = raw.content
    assert content["evidenceId"] == found.evidence_id and content["tool"] == "findNotes"
    assert content["status"] == "SUCCESS" and content["businessOk"] is True and content["empty"] is False
    assert content["response"]["data"]["records"][1] == {"id": "n-2", "title": "周报"}
    assert later.observations[0].code == "agent_runtime.42235"  # a new task cannot read the finished one's


# --- environment helpers ---------------------------------------------------------------------------------------

ENV_CASES = [
    ("uuid", "builtin_env_generate_uuid", {}, lambda r: len(r["uuid"]) == 36 and r["uuid"].count("-") == 4),
    ("uuid 8", "builtin_env_generate_uuid", {"length": 8}, lambda r: len(r["uuid"]) == 8 and "-" not in r["uuid"]),
    (
        "format default",
        "builtin_env_format_datetime",
        {"input": "2024-05-01T08:30:05"},
        lambda r: r["result"] == "2024-05-01 08:30:05",
    ),
    (
        "format java",
        "builtin_env_format_datetime",
        {"input": "2024-05-01T20:30:05.123+08:00", "outputPattern": "yyyy/MM/dd hh:mm a SSS EEE MMM XXX Z"},
        lambda r: r["result"] == "2024/05/01 08:30 PM 123 Wed May +08:00 +0800",
    ),
    (
        "format quoted",
        "builtin_env_format_datetime",
        {"input": "2024-05-01", "outputPattern": "yyyy'年'MM'月'dd'日' 'at' HH''mm"},
        lambda r: r["result"] == "2024年05月01日 at 00'00",
    ),
    (
        "format input pattern",
        "builtin_env_format_datetime",
        {"input": "01/05/24 7:05", "inputPattern": "dd/MM/yy H:mm", "outputPattern": "yyyy-MM-dd HH:mm"},
        lambda r: r["result"] == "2024-05-01 07:05",
    ),
    (
        "format compact",
        "builtin_env_format_datetime",
        {"input": "20240501", "outputPattern": "EEEE d MMMM yyyy"},
        lambda r: r["result"] == "Wednesday 1 May 2024",
    ),
    (
        "add month end",
        "builtin_env_add_datetime",
        {"base": "2024-01-31", "amount": 1, "unit": "Months"},
        lambda r: r["result"] == "2024-02-29",
    ),
    (
        "add hours to a date",
        "builtin_env_add_datetime",
        {"base": "2024-05-01", "amount": 36, "unit": "hour"},
        lambda r: r["result"] == "2024-05-02 12:00:00",
    ),
    (
        "add negative days",
        "builtin_env_add_datetime",
        {"base": "2024-03-01 10:00:00", "amount": -1},
        lambda r: r["result"] == "2024-02-29 10:00:00",
    ),
    (
        "add years leap",
        "builtin_env_add_datetime",
        {"base": "2024-02-29", "amount": 1, "unit": "years"},
        lambda r: r["result"] == "2025-02-28",
    ),
    (
        "diff days",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01", "to": "2024-04-01"},
        lambda r: r["result"] == -30,
    ),
    (
        "diff months unfinished",
        "builtin_env_diff_datetime",
        {"from": "2024-01-31", "to": "2024-02-29", "unit": "month"},
        lambda r: r["result"] == 0,
    ),
    (
        "diff years",
        "builtin_env_diff_datetime",
        {"from": "2020-02-29", "to": "2024-02-28", "unit": "years"},
        lambda r: r["result"] == 3,
    ),
    (
        "diff hours",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01T00:00:00", "to": "2024-05-02T01:59:59", "unit": "HOURS"},
        lambda r: r["result"] == 25,
    ),
    (
        "weekday",
        "builtin_env_get_weekday",
        {"date": "2024-05-05"},
        lambda r: (r["weekday"], r["number"], r["weekdayZh"]) == ("Sunday", 7, "星期日"),
    ),
    ("random fixed", "builtin_env_random_int", {"min": 4, "max": 4}, lambda r: r["result"] == 4),
    ("random range", "builtin_env_random_int", {"min": -2, "max": 2}, lambda r: -2 <= r["result"] <= 2),
    (
        "hash default",
        "builtin_env_hash",
        {"input": "abc"},
        lambda r: r["hash"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ),
    (
        "hash md5 cut",
        "builtin_env_hash",
        {"input": "abc", "algorithm": "MD5", "length": 8},
        lambda r: r["hash"] == "90015098",
    ),
    (
        "hash sha1",
        "builtin_env_hash",
        {"input": "季度", "algorithm": "sha1"},
        lambda r: r["hash"] == __import__("hashlib").sha1("季度".encode()).hexdigest(),
    ),
    (
        "now",
        "builtin_env_current_datetime",
        {},
        lambda r: (
            {"datetime", "date", "iso", "weekday", "timezone", "timestamp"} <= set(r)
            and isinstance(r["timestamp"], int)
            and r["timestamp"] > 1_700_000_000_000
        ),
    ),
]


@pytest.mark.parametrize(("case", "name", "arguments", "check"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
@needs_db
async def test_env_helpers(env: Env, case: str, name: str, arguments: dict[str, Any], check: Any):
    turn = await run_builtin(env, name, arguments)
    obs = last(turn)
    assert obs.ok and obs.code is None, obs
    assert check(obs.content), obs.content


# =====================================================================================================================
# §10.2 completion gates through the runner, §10.1 targets
# =====================================================================================================================


@needs_db
async def test_output_gate_comes_before_the_target_gate(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["target"] = "sendMemo"
        c["outputs"]["noteId"]["required"] = True

    env.contract(changed(mutate))
    turn = await run_builtin(env, "builtin_node_finish", {"output": "完成"}, call("findNotes", {"q": "a"}))
    assert last(turn).code == "agent_runtime.42252"


@needs_db
async def test_a_required_output_written_empty_is_finish_output_missing(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["outputs"]["category"]["required"] = True

    env.contract(changed(mutate))
    turn = await send_once(
        env,
        "分类留空",
        call("builtin_output_set", {"key": "category", "value": "", "sourceType": "USER", "sourceRef": "m"}),
        call("builtin_node_finish", {"output": "完成"}),
        say("stop"),
    )
    assert codes(turn)[1] == "agent_runtime.42252"


@needs_db
async def test_the_first_write_call_claims_the_target_even_when_it_is_stopped(env: Env):
    """§10.1 row 3: without a contract target the first write call becomes the target (targetClaimed), even when
    the write gate stops it; finishing then needs it (FINISH_NEED_TARGET), although outputs are declared."""
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": "完成"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("claim"), "保存季度总结", identity=IDENTITY)
        assert codes(first) == ["agent_runtime.42221", "agent_runtime.42254", None]
        done = await agent.resume(env.sid("claim"), "CONFIRM")
        node = await AgentStore(yard.database).load_node(str(done.node_id))
    assert done.status == "DONE" and node is not None and node.target == "saveNote" and node.target_claimed


@needs_db
async def test_a_claimed_target_stays_the_first_write(env: Env):
    """§10.1: a node has at most one target; a later write does not replace the claimed one."""
    turn = await send_once(
        env,
        "发一条备忘：开会",
        call("sendMemo", {"text": "开会"}),
        call("quickWrite", {"q": "x"}),  # runs (confirm: false + bypass) but is not the target
        call("builtin_node_finish", {"output": "完成"}),
        say("stop"),
    )
    assert codes(turn) == ["agent_runtime.42221", None, "agent_runtime.42254"]


FINISH_BUSINESS_CASES = [
    ("no call", [], "agent_runtime.42255"),
    ("business failure", [call("findNotes", {"q": "a", "mode": "business"})], "agent_runtime.42255"),
    ("technical failure", [call("findNotes", {"q": "a", "mode": "io"})], "agent_runtime.42255"),
    ("refused call", [call("sendMemo", {"text": "编造"})], None),  # a write claims the target: 42254 instead
    ("empty result", [call("findNotes", {"q": "a", "mode": "empty"})], None),
    ("unconfigured tool", [call("plainTool", {"q": "a"})], None),
]


@pytest.mark.parametrize(("case", "before", "code"), FINISH_BUSINESS_CASES, ids=[c[0] for c in FINISH_BUSINESS_CASES])
@needs_db
async def test_finish_need_business(env: Env, case: str, before: list[dict[str, Any]], code: str | None):
    env.contract(changed(lambda c: c.update(outputs={})))
    turn = await run_builtin(env, "builtin_node_finish", {"output": "完成"}, *before)
    if case == "refused call":
        assert last(turn).code == "agent_runtime.42254"
    else:
        assert last(turn).code == code, last(turn)
        assert turn.status == ("DONE" if code is None else "RUNNING")


@needs_db
async def test_declared_outputs_lift_the_business_gate(env: Env):
    """§10.2 row 5 applies only without declared outputs: with optional outputs a node may finish at once."""
    turn = await run_builtin(env, "builtin_node_finish", {"output": "没什么要做的"})
    assert last(turn).ok and turn.status == "DONE"


@needs_db
async def test_a_skill_without_business_tools_may_finish_at_once(env: Env):
    env.tools([])
    env.contract({"outputs": {}})
    turn = await run_builtin(env, "builtin_node_finish", {"output": "你好"})
    assert last(turn).ok and turn.status == "DONE"


# =====================================================================================================================
# §8 outputs: shares and entities, §7 inputs
# =====================================================================================================================


@needs_db
async def test_output_entities_are_published_at_finish_and_read_by_prior_in_a_new_process(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["outputs"] = {"memo": {"sources": ["USER"], "entity": {"type": "memo", "scalar": "id", "name": "id"}}}
        c["tools"]["pickTool"]["args"]["a"] = {"from": "prior.memo.id", "required": False}

    env.contract(changed(mutate))
    script = env.script(
        call("builtin_output_set", {"key": "memo", "value": "M-7", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_node_finish", {"output": "记住了"}),
        call("pickTool", {}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.send(env.sid("oent"), "备忘编号 M-7", identity=IDENTITY)
        assert done.status == "DONE", done.as_dict()
    async with SkillYard() as yard:
        session = await AgentStore(yard.database).load_session(env.sid("oent"))
        assert session is not None and [(e.type, e.id) for e in session.entities] == [("memo", "M-7")]
        agent = await yard.agent(env.dir, model=script)
        later = await agent.send(env.sid("oent"), "用刚才的备忘", identity=IDENTITY)
    assert later.observations[0].ok and later.observations[0].sources["a"] == "PRIOR_TASK"
    assert env.calls("pickTool")[0]["input"]["a"] == "M-7"


@needs_db
async def test_a_session_share_survives_a_restart_and_binds_in_the_next_task(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["b"] = {"from": "session.category", "required": False}

    env.contract(changed(mutate))
    script = env.script(
        call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "m"}),
        call("builtin_node_finish", {"output": "好"}),
        call("pickTool", {"b": "模型猜的"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        assert (await agent.send(env.sid("share"), "分类用工作", identity=IDENTITY)).status == "DONE"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        later = await agent.send(env.sid("share"), "挑一个", identity=IDENTITY)
    assert later.observations[0].sources["b"] == "SESSION"
    assert env.calls("pickTool")[0]["input"]["b"] == "工作"  # from overrides the model's value


@needs_db
async def test_a_task_share_does_not_leak_into_the_next_task(env: Env):
    """§8 share TASK → shared.<key> of that task only; the session's next task starts with no shared values."""

    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["b"] = {"from": "shared.noteId", "sources": ["MODEL"], "required": False}

    env.contract(changed(mutate))
    model = EvModel(
        env.script(
            call("findNotes", {"q": "a"}),
            call(
                "builtin_output_set",
                {
                    "key": "noteId",
                    "value": "n-1",
                    "sourceType": "EVIDENCE",
                    "sourceRef": "$EV",
                    "sourcePath": "data.records.0.id",
                },
            ),
            call("builtin_node_finish", {"output": "好"}),
            call("pickTool", {"b": "模型给的"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        done = await agent.send(env.sid("tshare"), "找", identity=IDENTITY)
        assert done.status == "DONE" and "shared.noteId" in done.observations[-1].content["shared"]
        later = await agent.send(env.sid("tshare"), "挑", identity=IDENTITY)
    assert later.observations[0].sources["b"] == "MODEL"


@needs_db
async def test_inputs_bind_prior_entity_id_and_keep_a_missing_optional_input_unmarked(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["inputs"] = {
            "lastId": {"from": "prior.note.id"},
            "lastTitle": {"from": "prior.note"},
            "maybe": {"from": "session.nothing", "required": False},
            "needed": {"from": "session.nothing2"},
        }
        c["tools"]["pickTool"]["args"]["c"] = {"from": "inputs.lastId", "required": False}

    env.contract(changed(mutate))
    model = Recorder(
        env.script(
            call("saveNote", {"title": "季度总结"}),
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            call("builtin_node_finish", {"output": "已保存"}),
            call("pickTool", {}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("inprior"), "保存季度总结", identity=IDENTITY)
        assert (await agent.resume(env.sid("inprior"), "CONFIRM")).status == "DONE"
        later = await agent.send(env.sid("inprior"), "接着来", identity=IDENTITY)
    assert later.observations[0].sources["c"] == "NODE_OUTPUT"
    assert env.calls("pickTool")[0]["input"]["c"] == "n-季度总结"
    inputs = model.system(-2).split("## Inputs", 1)[1].split("##", 1)[0]
    assert "lastId" in inputs and "n-季度总结" in inputs and "lastTitle" in inputs and "季度总结" in inputs
    assert "needed" in inputs and "MISSING" in inputs.split("needed", 1)[1].splitlines()[0]
    assert "maybe" not in inputs or "MISSING" not in inputs.split("maybe", 1)[1].splitlines()[0]


# =====================================================================================================================
# The prompt and the offered tools (§1.2, §1.3, §4, §5.2, §8, §19)
# =====================================================================================================================


@needs_db
async def test_the_catalog_shows_labels_sources_write_marking_and_platform_filled_arguments(env: Env):
    model = Recorder(env.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("cat"), "你好", identity=IDENTITY)
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


@needs_db
async def test_outputs_project_type_fields_min_items_and_hint_into_the_prompt(env: Env):
    """§8 / §19: an output's type, fields, minItems and hint are projected into the prompt (minItems 3 here)."""

    def mutate(c: dict[str, Any]) -> None:
        c["outputs"]["picks"] = {
            "type": "LIST",
            "fields": ["id", "title"],
            "minItems": 3,
            "hint": "三篇最相关的笔记",
            "required": False,
        }

    env.contract(changed(mutate))
    model = Recorder(env.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("outp"), "你好", identity=IDENTITY)
    line = next(x for x in model.system(0).splitlines() if x.startswith("- picks"))
    assert "LIST" in line and "id" in line and "title" in line and "三篇最相关的笔记" in line
    assert "3" in line, line


@needs_db
async def test_a_long_contract_manual_is_cut_with_a_notice_and_read_skill_file_reads_the_rest(env: Env):
    manual = "开头。" + "规则" * 4100 + "结尾的秘密规则"
    env.tools(TOOLS, manual)
    (env.keeper / "extra").mkdir()
    (env.keeper / "extra" / "notes.md").write_text("附加说明", encoding="utf-8")
    outside = env.root / "outside.txt"
    outside.write_text("不该读到", encoding="utf-8")
    (env.keeper / "link.txt").symlink_to(outside)
    model = Recorder(
        env.script(
            call("read_skill_file", {"offset": 8000}),
            call("read_skill_file", {"path": "extra/notes.md"}),
            call("read_skill_file", {"path": "../../../outside.txt"}),
            call("read_skill_file", {"path": str(outside)}),
            call("read_skill_file", {"path": "link.txt"}),
            call("read_skill_file", {"path": "SKILL.md", "offset": -1}),
            call("read_skill_file", {"path": "nothing.md"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("long"), "你好", identity=IDENTITY)
    system = model.system(0)
    assert "开头。" in system and "结尾的秘密规则" not in system and "read_skill_file" in system
    assert "read_skill_file" in model.offered(0)
    rest, extra, *refused = turn.observations
    assert rest.ok and "结尾的秘密规则" in rest.content["content"]
    assert extra.ok and extra.content["content"] == "附加说明"
    assert [o.code for o in refused] == [ARG_REJECTED] * 5, refused
    assert all("不该读到" not in json.dumps(o.content, ensure_ascii=False) for o in refused)


# =====================================================================================================================
# The chain stages the first round did not reach (§13, §5.3–§5.5)
# =====================================================================================================================


@needs_db
async def test_from_and_const_arguments_are_exempt_from_the_schema_required_check(env: Env):
    """§13 stage 1: saveNote's schema requires title and owner; owner is bound from platform.userId, pickTool's
    required kind is a const: neither call is ARG_REJECTED for the argument the model left out."""
    turn = await send_once(
        env,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),
        call("pickTool", {"kind": "model-made"}),
        call("saveNote", {"owner": "42"}),  # title is required by the schema and not bound: ARG_REJECTED
        say("stop"),
    )
    assert codes(turn) == ["agent_runtime.42221", None, ARG_REJECTED]
    assert turn.observations[0].sources["owner"] == "PLATFORM"
    assert turn.observations[1].sources["kind"] == "CONTRACT"
    assert env.calls("pickTool")[0]["input"]["kind"] == "fixed"  # const overrides the model


@needs_db
async def test_business_tool_arguments_that_are_not_an_object(env: Env):
    turn = await send_once(env, "x", call("findNotes", "[1, 2]"), call("findNotes", '"text"'), say("stop"))
    assert codes(turn) == [ARG_REJECTED, ARG_REJECTED] and env.calls() == []


def _priority(c: dict[str, Any]) -> None:
    c["tools"]["pickTool"]["args"].update(
        {
            "a": {"sources": ["EVIDENCE"], "label": "甲"},  # a made-up value: rejected at once
            "b": {"sources": ["MODEL"], "missing": {"action": "FAIL", "message": "没有乙就做不了"}},
            "c": {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL", "tool": "findNotes"}},
            "d": {"sources": ["MODEL"]},  # missing: ASK_USER (default)
        }
    )


@pytest.mark.parametrize(
    ("given", "code"),
    [
        ({"a": "made-up"}, "agent_runtime.40025"),  # REJECTED > FAIL > CALL_TOOL > ASK_USER
        ({"a": "n-1"}, "agent_runtime.40025"),  # no query yet: n-1 is no evidence
        ({}, "agent_runtime.40022"),  # a missing too (ASK_USER): FAIL wins
        ({"b": "x"}, "agent_runtime.40023"),
        ({"b": "x", "c": "y"}, "agent_runtime.40024"),
        ({"b": "x", "c": "y", "d": "z"}, "agent_runtime.40024"),  # a is missing: ASK_USER
    ],
    ids=["rejected", "rejected2", "fail", "call_tool", "ask_user", "ask_user_a"],
)
@needs_db
async def test_param_contract_priority(env: Env, given: dict[str, Any], code: str):
    env.contract(changed(_priority))
    turn = await run_builtin(env, "pickTool", given)
    assert last(turn).code == code, last(turn)
    assert env.calls() == [] and last(turn).next_step


@needs_db
async def test_param_contract_fail_carries_the_contract_message_and_call_tool_names_the_tool(env: Env):
    env.contract(changed(_priority))
    turn = await send_once(env, "x", call("pickTool", {"a": "n-1"}), call("pickTool", {"b": "x"}), say("stop"))
    assert turn.observations[0].code in ("agent_runtime.40025",)
    fail_turn = await send_once(env, "x", call("pickTool", {}), say("stop"), session="prio2")
    assert "没有乙就做不了" in f"{fail_turn.observations[0].content} {fail_turn.observations[0].next_step}"
    assert "findNotes" in str(turn.observations[1].next_step)


@needs_db
async def test_an_evidence_value_passes_after_the_query(env: Env):
    env.contract(changed(_priority))
    turn = await send_once(
        env, "x", call("findNotes", {"q": "a"}), call("pickTool", {"a": "n-2", "b": 1, "c": 2, "d": 3}), say("s")
    )
    assert codes(turn) == [None, None] and turn.observations[1].sources["a"] == "EVIDENCE"


@needs_db
async def test_call_tool_without_a_tool_lets_the_missing_value_pass(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["c"] = {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL"}}

    env.contract(changed(mutate))
    turn = await run_builtin(env, "pickTool", {})
    assert last(turn).ok and len(env.calls("pickTool")) == 1


@needs_db
async def test_an_enum_value_outside_the_list_asks_the_user(env: Env):
    turn = await send_once(
        env, "红色", call("pickTool", {"color": "green"}), call("pickTool", {"color": "red"}), say("s")
    )
    assert codes(turn) == ["agent_runtime.40024", None]


@needs_db
async def test_when_unique_binds_evidence_only_for_a_single_candidate(env: Env):
    """§5.4: with when UNIQUE an ``evidence.*`` value binds only when it is a one-item list (the list itself)."""

    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["noteIds"] = {
            "from": "evidence.notes[].id",
            "when": "UNIQUE",
            "sources": ["MODEL"],
            "required": False,
        }
        c["tools"]["findNotes"]["extracts"] = [{"key": "notes", "path": "data.records"}]

    env.contract(changed(mutate))
    turn = await send_once(
        env, "x", call("findNotes", {"q": "a"}), call("pickTool", {"noteIds": ["mine"]}), say("stop")
    )
    assert turn.observations[1].sources["noteIds"] == "MODEL"
    assert env.calls("pickTool")[0]["input"]["noteIds"] == ["mine"]


@pytest.mark.parametrize(
    ("bypass", "confirm", "asks"),
    [("quickWrite", False, False), ("", False, True), ("quickWrite", True, True)],
    ids=["both", "not-listed", "confirm-true"],
)
@needs_db
async def test_approval_bypass_needs_confirm_false_and_the_setting(
    env: Env, monkeypatch: pytest.MonkeyPatch, bypass: str, confirm: bool, asks: bool
):
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", bypass or "otherTool")
    env.contract(changed(lambda c: c["tools"]["quickWrite"].update(confirm=confirm)))
    turn = await run_builtin(env, "quickWrite", {"q": "x"})
    assert last(turn).code == ("agent_runtime.42221" if asks else None)
    assert len(env.calls("quickWrite")) == (0 if asks else 1)


# =====================================================================================================================
# The CLI in real subprocesses: skillyard agent check / run / resume (docs/cli.md)
# =====================================================================================================================


def cli(*args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "skillyard", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environ,
        timeout=120,
    )


def no_traceback(result: subprocess.CompletedProcess) -> bool:
    return "Traceback" not in result.stdout + result.stderr


def test_cli_check_prints_rows_with_skill_tool_rule_path_and_a_summary(env: Env):
    env.contract(changed(lambda c: c["tools"]["sendMemo"].update(sideEffect="write")))
    result = cli("agent", "check", str(env.dir))
    assert result.returncode == 1 and no_traceback(result), result.stderr
    out = result.stdout + result.stderr
    row = next(line for line in out.splitlines() if "§16.13" in line)
    assert "memo.keeper" in row and "sendMemo" in row and "tools.sendMemo.sideEffect" in row and "error" in row
    import re

    assert re.search(rf"^{re.escape(str(env.dir))}: \d+ error\(s\), \d+ warning\(s\)$", out, re.M), out


def test_cli_check_warnings_alone_pass(env: Env):
    env.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(userId={"sources": ["USER"]})))
    result = cli("agent", "check", str(env.dir), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(result.stdout)
    assert all(set(r) == {"kind", "severity", "skill", "tool", "rule", "path", "message"} for r in rows)
    assert {r["severity"] for r in rows} == {"warning"}
    assert any(r["rule"] == "§11" and r["tool"] == "pickTool" and "userId" in r["path"] for r in rows), rows
    assert any(r["rule"] == "§1.3" and r["tool"] == "plainTool" and r["kind"] == "preflight" for r in rows), rows


@pytest.mark.parametrize("what", ["no AGENT.md", "missing folder"])
def test_cli_check_unusable_folder(env: Env, what: str):
    folder = env.root / "empty" if what == "no AGENT.md" else env.root / "ghost"
    if what == "no AGENT.md":
        folder.mkdir()
    result = cli("agent", "check", str(folder))
    assert result.returncode == (1 if what == "no AGENT.md" else 2) and no_traceback(result), result.stderr
    assert ("AGENT.md" if what == "no AGENT.md" else "ghost") in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["--message", "x"], "--session"),
        (["--session", "s"], "--message"),
        (["--session", "s", "--message", "x", "--context", "{bad"], "--context"),
        (["--session", "s", "--message", "x", "--context", "[1]"], "--context"),
    ],
    ids=["no-session", "no-message", "context-not-json", "context-not-object"],
)
def test_cli_run_usage_errors_exit_2(env: Env, args: list[str], word: str):
    result = cli("agent", "run", str(env.dir), *args, "--model", env.script(say("x")))
    assert result.returncode == 2 and no_traceback(result) and word in result.stderr, result.stderr


def test_cli_run_on_a_missing_folder_is_a_clean_usage_error(env: Env):
    result = cli("agent", "run", str(env.root / "nope"), "--session", "s", "--message", "x")
    assert result.returncode == 2 and no_traceback(result) and "nope" in result.stderr


@needs_db
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "no model"),
        (["--model", "gpt-4o"], "script:"),
        (["--model", "script:/nonexistent/turns.yaml"], "no such file"),
        (["--skill", "memo.ghost", "--model", "SCRIPT"], "memo.ghost"),
        (["--model", "EMPTY"], "turn 1"),
    ],
    ids=["no-model", "bad-spec", "missing-script", "unknown-skill", "script-exhausted"],
)
def test_cli_run_errors_exit_1_with_a_message_and_no_traceback(env: Env, extra: list[str], needle: str):
    extra = [env.script(say("x")) if x == "SCRIPT" else x for x in extra]
    if "EMPTY" in extra:
        empty = env.root / "empty.yaml"
        empty.write_text("turns: []\n", encoding="utf-8")
        extra = ["--model", f"script:{empty}"]
    result = cli("agent", "run", str(env.dir), "--session", env.sid("err"), "--message", "x", *extra)
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert needle in result.stderr + result.stdout, result.stderr


@needs_db
def test_cli_resume_errors(env: Env):
    unknown = cli("agent", "resume", "--session", env.sid("never"), "--action", "CONFIRM")
    assert unknown.returncode == 1 and no_traceback(unknown) and env.sid("never") in unknown.stderr
    bad_action = cli("agent", "resume", "--session", env.sid("never"), "--action", "APPROVE")
    assert bad_action.returncode == 2 and no_traceback(bad_action)
    no_action = cli("agent", "resume", "--session", env.sid("never"))
    assert no_action.returncode == 2 and "--action" in no_action.stderr
    model = env.script(call("builtin_node_follow_up", {"question": "标题？", "expectedFields": ["title"]}))
    first = cli("agent", "run", str(env.dir), "--session", env.sid("fu"), "--message", "存", "--model", model)
    assert first.returncode == 0, first.stderr
    no_text = cli("agent", "resume", "--session", env.sid("fu"), "--action", "reply")
    assert no_text.returncode == 1 and no_traceback(no_text) and "text" in no_text.stderr


@needs_db
def test_cli_run_text_output_and_cancel(env: Env):
    model = env.script(
        call("findNotes", {"q": "a"}),
        call("sendMemo", {"text": "编造的"}),
        call("builtin_node_follow_up", {"question": "发什么？", "expectedFields": ["text"]}),
    )
    first = cli(
        "agent",
        "run",
        str(env.dir),
        "--session",
        env.sid("txt"),
        "--message",
        "发备忘",
        "--model",
        model,
        "--context",
        json.dumps(IDENTITY),
    )
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "status: SUSPENDED"
    assert "  … 正在查找笔记" in lines
    assert "  findNotes: ok" in lines and "  sendMemo: agent_runtime.40024" in lines
    assert "  builtin_node_follow_up: ok" in lines
    assert "checkpoint: FOLLOW_UP (expects text)" in lines and "发什么？" in lines
    cancelled = cli("agent", "resume", "--session", env.sid("txt"), "--action", "cancel", "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    turn = json.loads(cancelled.stdout)
    assert turn["status"] == "CANCELLED" and turn["checkpoint"] is None and turn["reply"]
    again = cli("agent", "resume", "--session", env.sid("txt"), "--action", "CONFIRM")
    assert again.returncode == 1 and no_traceback(again)  # nothing open any more


@needs_db
def test_cli_json_fields_of_an_approval_turn(env: Env):
    model = env.script(
        call("saveNote", {"title": "季度总结", "mode": "ok"}),
        call("builtin_node_approval", {"summary": "保存笔记", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    first = cli(
        "agent",
        "run",
        str(env.dir),
        "--session",
        env.sid("js"),
        "--message",
        "保存季度总结",
        "--model",
        model,
        "--context",
        json.dumps(IDENTITY),
        "--json",
    )
    assert first.returncode == 0, first.stderr
    turn = json.loads(first.stdout)
    assert set(turn) >= {
        "session_id",
        "status",
        "reply",
        "checkpoint",
        "observations",
        "evidence",
        "events",
        "task_id",
        "node_id",
    }
    assert turn["checkpoint"] == {
        "type": "APPROVAL",
        "question": "保存笔记\n标题：季度总结\nmode：ok",
        "expected_fields": [],
        "suggestions": [],
        "tool": "saveNote",
    }
    gated = turn["observations"][0]
    assert gated["code"] == "agent_runtime.42221" and gated["sources"] == {
        "title": "USER",
        "owner": "PLATFORM",
        "mode": "MODEL",
    }
    assert set(gated) == {"tool", "arguments", "ok", "code", "next_step", "sources", "evidence_id", "content"}
    done = cli("agent", "resume", "--session", env.sid("js"), "--action", "CONFIRM", "--json")
    assert done.returncode == 0, done.stderr
    after = json.loads(done.stdout)
    assert after["status"] == "DONE" and after["reply"] == "已保存"
    assert [(e["tool"], e["status"], e["business_ok"]) for e in after["evidence"]] == [("saveNote", "SUCCESS", True)]
    assert after["events"] == [{"type": "tool", "tool": "saveNote", "label": "正在保存笔记"}]
    assert env.calls("saveNote")[0]["ctx"]["user_id"] == "42"


@needs_db
def test_cli_a_later_run_without_model_continues_with_the_sessions_model(env: Env):
    model = env.script(say("第一句"), say("第二句"))
    first = cli("agent", "run", str(env.dir), "--session", env.sid("cont"), "--message", "一", "--model", model)
    second = cli("agent", "run", str(env.dir), "--session", env.sid("cont"), "--message", "二", "--json")
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["reply"] == "第二句"


@needs_db
def test_cli_run_takes_the_model_from_skillyard_model(env: Env):
    model = env.script(say("来自环境变量"))
    result = cli(
        "agent",
        "run",
        str(env.dir),
        "--session",
        env.sid("envmodel"),
        "--message",
        "x",
        "--json",
        extra_env={"SKILLYARD_MODEL": model},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reply"] == "来自环境变量"


@needs_db
def test_cli_run_and_resume_find_the_contract_skill_through_skills_dir(env: Env, tmp_path: Path):
    """Contract skills and tools are found through --skills-dir like every other skill (issue, docs/cli.md)."""
    import shutil

    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(env.dir / "skills"), str(elsewhere))
    model = env.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    first = cli(
        "agent",
        "run",
        str(env.dir),
        "--session",
        env.sid("sd"),
        "--message",
        "发备忘：开会",
        "--model",
        model,
        "--skills-dir",
        str(elsewhere),
        "--json",
    )
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["checkpoint"]["type"] == "APPROVAL"
    done = cli("agent", "resume", "--session", env.sid("sd"), "--action", "CONFIRM", "--skills-dir", str(elsewhere))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("status: DONE") and len(env.calls("sendMemo")) == 1


@needs_db
def test_cli_resume_works_from_another_working_directory(env: Env, tmp_path: Path):
    """docs/cli.md: resume reads the agent folder and the model spec from the session. A session started with
    relative paths (as in the docs' own example) must still resume from another directory."""
    model = env.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    relative_model = "script:" + os.path.relpath(model.removeprefix("script:"), env.root)
    first = cli(
        "agent",
        "run",
        env.dir.name,
        "--session",
        env.sid("cwd"),
        "--message",
        "发备忘：开会",
        "--model",
        relative_model,
        cwd=env.root,
    )
    assert first.returncode == 0, first.stderr
    other = tmp_path / "somewhere_else"
    other.mkdir()
    done = cli("agent", "resume", "--session", env.sid("cwd"), "--action", "CONFIRM", cwd=other)
    assert done.returncode == 0 and no_traceback(done), done.stderr
    assert done.stdout.startswith("status: DONE") and len(env.calls("sendMemo")) == 1


@needs_db
def test_cli_a_session_of_another_agent_is_refused(env: Env, tmp_path: Path):
    import shutil

    other = tmp_path / "other_agent"
    shutil.copytree(env.dir, other)
    (other / "AGENT.md").write_text(
        "---\nagent_code: other\nskills: [memo.keeper]\n---\n# Mission\nx\n", encoding="utf-8"
    )
    first = cli(
        "agent", "run", str(env.dir), "--session", env.sid("own"), "--message", "x", "--model", env.script(say("a"))
    )
    assert first.returncode == 0, first.stderr
    second = cli(
        "agent", "run", str(other), "--session", env.sid("own"), "--message", "x", "--model", env.script(say("b"))
    )
    assert second.returncode == 1 and no_traceback(second) and "memo" in second.stderr


@needs_db
def test_cli_a_process_that_dies_mid_write_is_settled_on_the_next_run(env: Env):
    """A real crash (the process exits inside the confirmed write): the write is not run twice, the next command
    finds it uncertain (UNKNOWN_PRE_CALL) and asks at VERIFY (sendMemo has no verify tool); CONFIRM settles it."""
    model = env.script(
        call("sendMemo", {"text": "开会", "mode": "crash"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    first = cli(
        "agent",
        "run",
        str(env.dir),
        "--session",
        env.sid("crash"),
        "--message",
        "发备忘：开会",
        "--model",
        model,
        "--context",
        json.dumps(IDENTITY),
    )
    assert first.returncode == 0, first.stderr
    crashed = cli("agent", "resume", "--session", env.sid("crash"), "--action", "CONFIRM")
    assert crashed.returncode == 17 and len(env.calls("sendMemo")) == 1
    again = cli("agent", "run", str(env.dir), "--session", env.sid("crash"), "--message", "发了吗？", "--json")
    assert again.returncode == 0, again.stderr
    turn = json.loads(again.stdout)
    assert turn["status"] == "SUSPENDED" and turn["checkpoint"]["type"] == "VERIFY", turn
    assert [e["status"] for e in turn["evidence"]] == ["UNKNOWN_PRE_CALL"]
    settled = cli("agent", "resume", "--session", env.sid("crash"), "--action", "CONFIRM", "--json")
    assert settled.returncode == 0, settled.stderr
    after = json.loads(settled.stdout)
    assert after["status"] == "DONE" and [e["status"] for e in after["evidence"]] == ["SUCCESS"]
    assert len(env.calls("sendMemo")) == 1


# =====================================================================================================================
# [agent] settings (docs/agent-models.md): file, environment, precedence
# =====================================================================================================================


async def _age_checkpoint(session_id: str, seconds: float) -> None:
    async with SkillYard() as yard:
        store = AgentStore(yard.database)
        session = await store.load_session(session_id)
        assert session is not None and session.node_id and session.task_id
        node = await store.load_node(session.node_id)
        task = await store.load_task(session.task_id)
        assert node is not None and task is not None and node.checkpoint is not None
        node.checkpoint.created_at -= seconds
        await store.save_turn(node, task, session)


@pytest.mark.parametrize(
    ("file", "environ", "age_minutes", "runs"),
    [
        ('reconfirm_after = "1h"', None, 70, False),
        ('reconfirm_after = "1h"', None, 50, True),
        ('reconfirm_after = "1h"', "90m", 70, True),  # the environment wins over the file
        ("reconfirm_after = 600", None, 11, False),  # seconds
    ],
    ids=["file-expired", "file-fresh", "env-wins", "seconds"],
)
@needs_db
async def test_reconfirm_after_from_the_settings(
    env: Env, home: Path, monkeypatch: pytest.MonkeyPatch, file: str, environ: str | None, age_minutes: int, runs: bool
):
    (home / "settings.toml").write_text(f"[agent]\n{file}\n", encoding="utf-8")
    if environ:
        monkeypatch.setenv("SKILLYARD_AGENT_RECONFIRM_AFTER", environ)
    script = env.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    session = env.sid("re")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(session, "发备忘：开会", identity=IDENTITY)
    await _age_checkpoint(session, age_minutes * 60)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        turn = await agent.resume(session, "CONFIRM")
    if runs:
        assert turn.status == "DONE" and len(env.calls("sendMemo")) == 1
    else:
        assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL"
        assert env.calls() == []


@needs_db
async def test_write_confirm_bypass_tools_from_the_settings_file(env: Env, home: Path, monkeypatch):
    monkeypatch.delenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS")
    (home / "settings.toml").write_text('[agent]\nwrite_confirm_bypass_tools = ["quickWrite"]\n', encoding="utf-8")
    turn = await run_builtin(env, "quickWrite", {"q": "x"})
    assert last(turn).ok and len(env.calls("quickWrite")) == 1


@needs_db
async def test_fingerprint_limit_from_the_environment(env: Env, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "1")
    same = call("findNotes", {"q": "a"})
    turn = await send_once(env, "找", same, same, say("never"))
    assert codes(turn) == [None, "agent_runtime.40026"] and turn.status == "FAILED"


def _passport_contract(c: dict[str, Any]) -> None:
    c["tools"]["pickTool"]["args"]["d"] = {"from": "platform.passportId", "required": False}


@needs_db
async def test_an_empty_platform_hidden_opens_every_field(env: Env, home: Path):
    (home / "settings.toml").write_text("[agent]\nplatform_hidden = []\n", encoding="utf-8")
    env.contract(changed(_passport_contract))
    script = env.script(call("pickTool", {}), say("ok"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        assert agent.loaded.errors == []
        turn = await agent.send(env.sid("open"), "x", identity={**IDENTITY, "passport_id": "P-1"})
    assert turn.observations[0].sources["d"] == "PLATFORM"
    assert env.calls("pickTool")[0]["input"]["d"] == "P-1"
    check = cli("agent", "check", str(env.dir), "--json")
    assert check.returncode == 0, check.stdout
    assert not [r for r in json.loads(check.stdout) if r["rule"] == "§16.10"]


@pytest.mark.parametrize(
    ("command", "needle"),
    [(["check"], "fingerprint_limit"), (["run", "--session", "s-bad", "--message", "x"], "fingerprint_limit")],
    ids=["check", "run"],
)
@needs_db
def test_a_bad_setting_is_a_clean_error_naming_the_key(env: Env, home: Path, command: list[str], needle: str):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 0\n", encoding="utf-8")
    args = ["agent", command[0], str(env.dir), *command[1:]]
    if command[0] == "run":
        args += ["--model", env.script(say("x"))]
    result = cli(*args)
    assert result.returncode == 1 and no_traceback(result), result.stderr
    assert needle in result.stderr + result.stdout


@needs_db
async def test_skillyard_model_environment_variable_is_the_default_model(env: Env, monkeypatch):
    monkeypatch.setenv("SKILLYARD_MODEL", env.script(say("环境里的模型")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir)
        turn = await agent.send(env.sid("envm"), "hi", identity=IDENTITY)
    assert turn.reply == "环境里的模型"


@needs_db
async def test_an_unknown_agent_setting_is_only_a_warning(env: Env, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limt = 2\n", encoding="utf-8")
    turn = await send_once(env, "x", say("ok"))
    assert turn.reply == "ok"


# =====================================================================================================================
# Preflight (`skillyard agent check`): what §16 leaves to authors, with skill, tool and argument path
# =====================================================================================================================

PREFLIGHT_2 = [
    (
        "missing.tool is the tool itself",
        lambda c: c["tools"]["pickTool"]["args"].update(
            a={"sources": ["EVIDENCE"], "missing": {"action": "CALL_TOOL", "tool": "pickTool"}}
        ),
        "§5.5",
        "pickTool",
        "a",
    ),
    (
        "success without op",
        lambda c: c["tools"]["findNotes"].update(success={"path": "code"}),
        "preflight.success_op",
        "findNotes",
        "",
    ),
    (
        "IN without a list",
        lambda c: c["tools"]["findNotes"].update(success={"path": "code", "op": "IN", "value": 200}),
        "§6.1",
        "findNotes",
        "",
    ),
    ("contract tool not in tools:", lambda c: c["tools"].update(ghostTool={"args": {}}), "§4", "ghostTool", ""),
    (
        "argument path not in the schema",
        lambda c: c["tools"]["findNotes"]["args"].update(qq=FREE),
        "preflight.arg_path",
        "findNotes",
        "qq",
    ),
    (
        "from an input that is not declared",
        lambda c: c["tools"]["pickTool"]["args"].update(a={"from": "inputs.ghost"}),
        None,
        "pickTool",
        "a",
    ),
    (
        "from an output that is not declared",
        lambda c: c["tools"]["pickTool"]["args"].update(a={"from": "outputs.ghost"}),
        None,
        "pickTool",
        "a",
    ),
]


@pytest.mark.parametrize(("case", "mutate", "rule", "tool", "arg"), PREFLIGHT_2, ids=[c[0] for c in PREFLIGHT_2])
def test_preflight_more_checks_name_skill_tool_and_argument(env: Env, case, mutate, rule, tool, arg):
    """Issue: preflight checks that "every required argument has a satisfiable source" and the §16 leftovers,
    "precise messages with skill, tool and argument path". A required argument bound only ``from`` a name the
    skill can never have (an input or an output the contract does not declare) has no satisfiable source."""
    env.contract(changed(mutate))
    result = cli("agent", "check", str(env.dir), "--json")
    rows = json.loads(result.stdout)
    errors = [r for r in rows if r["severity"] == "error"]
    hits = [r for r in errors if r["skill"] == "memo.keeper" and r["tool"] == tool and r["path"] == arg]
    assert result.returncode == 1 and hits, rows
    if rule is not None:
        assert any(r["rule"] == rule for r in hits), hits


def test_preflight_flags_a_builtin_in_tool_names(env: Env):
    env.tools([*TOOLS, "builtin_node_finish"])
    result = cli("agent", "check", str(env.dir), "--json")
    rows = json.loads(result.stdout)
    assert result.returncode == 1
    assert any(r["rule"] == "§1.2" and r["tool"] == "builtin_node_finish" and r["severity"] == "error" for r in rows)


def test_preflight_warns_about_a_verify_tool_without_success(env: Env):
    env.contract(changed(lambda c: c["tools"]["findNotes"].pop("success")))
    result = cli("agent", "check", str(env.dir), "--json")
    rows = json.loads(result.stdout)
    assert any(r["rule"] == "§6.4" and r["tool"] == "saveNote" and r["severity"] == "warning" for r in rows), rows


# =====================================================================================================================
# skill_md business tools as isolated sub-agents (docs/agents.md "skill_md skills as sub-agents")
# =====================================================================================================================


def _digest(env: Env, front: str = "allowed-tools: findNotes plainTool ghostTool", body: str = "") -> None:
    folder = env.dir / "skills" / "digest"
    folder.mkdir(exist_ok=True)
    manual = body or "# Digest\nLook notes up with findNotes, then finish with a one-line digest.\n"
    (folder / "SKILL.md").write_text(f"---\nname: digest\ndescription: Digest notes.\n{front}\n---\n{manual}", "utf-8")
    env.tools([*TOOLS, "digest"])


@needs_db
async def test_a_skill_md_tool_runs_as_a_sub_agent_with_its_allowed_tools_only(env: Env):
    _digest(env)
    model = Recorder(
        env.script(
            call("digest", {"query": "总结周报"}),  # the parent calls the skill_md tool
            call("saveNote", {"title": "周报"}),  # sub-agent: not one of its tools
            call("findNotes", {"q": "周报"}),  # sub-agent: its allowed tool
            call("builtin_node_finish", {"output": "周报一篇"}),  # sub-agent finishes
            say("摘要好了"),  # the parent
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("sub"), "总结周报", identity=IDENTITY)
        stored = await AgentStore(yard.database).load_session(env.sid("sub"))
    first = turn.observations[0]
    assert first.tool == "digest" and first.ok and first.content["result"] == "周报一篇", first
    sub_prompt = model.system(1)
    assert "Look notes up with findNotes" in sub_prompt and "总结周报" in sub_prompt
    sub_tools = [n for n in model.offered(1) if not n.startswith("builtin_")]
    assert sub_tools == ["findNotes", "plainTool"], sub_tools
    assert "read_skill_file" not in model.offered(1)  # a short manual
    assert [c["tool"] for c in env.calls()] == ["findNotes"]  # saveNote was refused inside
    assert env.calls("findNotes")[0]["ctx"]["user_id"] == "42"  # the caller's identity
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
@needs_db
async def test_a_sub_agent_that_does_not_finish_is_a_failed_call_for_its_caller(
    env: Env, sub_turns: list[dict[str, Any]], needle: str
):
    _digest(env)
    turn = await send_once(env, "总结周报", call("digest", {"task": "总结周报"}), *sub_turns, say("没办成"))
    first = turn.observations[0]
    assert not first.ok and first.code == "agent_runtime.40004" and first.next_step, first
    assert needle in json.dumps(first.content, ensure_ascii=False)
    assert turn.status == "RUNNING" and turn.reply == "没办成" and turn.checkpoint is None


@needs_db
async def test_a_sub_agent_reads_its_tools_from_a_tools_list_and_its_long_manual_with_read_skill_file(env: Env):
    body = "# Digest\n" + "步骤" * 4100 + "最后一步：用 plainTool。"
    _digest(env, front="tools: [plainTool]", body=body)
    model = Recorder(
        env.script(
            call("digest", {"goal": "做摘要"}),
            call("read_skill_file", {"path": "../keeper/SKILL.md"}),  # outside its folder
            call("read_skill_file", {"offset": 8000}),
            call("plainTool", {"q": "x"}),
            call("builtin_node_finish", {"output": "好了"}),
            say("完成"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        turn = await agent.send(env.sid("sublong"), "做摘要", identity=IDENTITY)
    assert turn.observations[0].ok, turn.observations[0]
    system = model.system(1)
    assert "最后一步" not in system and "8000" in system.replace(",", "")
    assert "read_skill_file" in model.offered(1)
    assert [n for n in model.offered(1) if not n.startswith(("builtin_", "read_"))] == ["plainTool"]
    tool_messages = [m for m in model.seen[4][0] if m.get("role") == "tool"]
    outside, rest, _plain = (json.loads(m["content"]) for m in tool_messages)
    assert outside["ok"] is False and outside["code"] == ARG_REJECTED
    assert rest["ok"] is True and "最后一步" in rest["result"]["content"]


# =====================================================================================================================
# Restarts: a new SkillYard on the same database continues where the old one stopped
# =====================================================================================================================


@needs_db
async def test_a_gated_write_and_the_users_words_survive_a_restart(env: Env):
    """The write gate's pending write (node.gated) and the user's earlier message (USER provenance) are kept: a
    new process can ask for approval and run the write the user asked for two turns earlier."""
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        say("要保存《季度总结》吗？"),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("gate"), "保存季度总结", identity=IDENTITY)
        assert first.status == "RUNNING" and codes(first) == ["agent_runtime.42221"]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        second = await agent.send(env.sid("gate"), "好的", identity=IDENTITY)
        assert second.status == "SUSPENDED" and second.checkpoint and second.checkpoint["tool"] == "saveNote"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.resume(env.sid("gate"), "CONFIRM")
    assert done.status == "DONE" and env.calls("saveNote")[0]["input"]["title"] == "季度总结"
    assert env.calls("saveNote")[0]["input"]["owner"] == "42"


@needs_db
async def test_evidence_of_the_open_node_is_visible_after_a_restart(env: Env):
    model = EvModel(
        env.script(
            call("findNotes", {"q": "a"}),
            say("找到了两篇"),
            call("builtin_evidence_get", {"evidenceId": "$EV"}),
            call("pickTool", {"a": "n-2"}),
            say("stop"),
        )
    )
    env.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(a={"sources": ["EVIDENCE"]})))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("evr"), "找", identity=IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        later = await agent.send(env.sid("evr"), "用第二篇", identity=IDENTITY)
    got, picked = later.observations
    assert got.ok and got.content["tool"] == "findNotes"
    assert picked.ok and picked.sources["a"] == "EVIDENCE"


# =====================================================================================================================
# More of the runner, the prompt and the catalog
# =====================================================================================================================


@needs_db
async def test_a_tool_name_that_is_no_skill_is_not_offered_to_the_model(env: Env):
    """orchestration-requirements §2: the runtime exposes only the intersection of the allowed names (toolNames)
    and the tools that really exist (docs/agents.md does so for skill_md sub-agents: "names that are no skill are
    left out"). ``ghostTool`` is listed in ``tools:`` but no skill of that name is installed."""
    env.tools([*TOOLS, "ghostTool"])
    model = Recorder(env.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("ghost"), "你好", identity=IDENTITY)
    offered = model.offered(0)
    assert "findNotes" in offered and "ghostTool" not in offered, offered


@needs_db
async def test_the_prompt_holds_all_five_profile_sections(env: Env):
    (env.dir / "AGENT.md").write_text(
        "---\nagent_code: memo\nagent_name: 备忘员\nskills: memo.keeper\n---\n"
        "## 身份\n一名备忘员。\n## 职责\n记录备忘。\n## 边界\n从不删除备忘。\n"
        "## 风格\n简短。\n## 原则：\n写之前先确认。\n",
        encoding="utf-8",
    )
    model = Recorder(env.script(say("hi")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("five"), "你好", identity=IDENTITY)
    system = model.system(0)
    for text in ("备忘员", "一名备忘员。", "记录备忘。", "从不删除备忘。", "简短。", "写之前先确认。", "Keeps memos."):
        assert text in system, text


@needs_db
async def test_identity_is_merged_across_sends(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["a"] = {"from": "platform.userId", "required": False}
        c["tools"]["pickTool"]["args"]["b"] = {"from": "platform.organId", "required": False}

    env.contract(changed(mutate))
    script = env.script(say("一"), call("pickTool", {}), say("二"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("merge"), "一", identity=IDENTITY)
        await agent.send(env.sid("merge"), "二", identity={"org_id": "8"})
    assert env.calls("pickTool")[0]["input"]["a"] == "42" and env.calls("pickTool")[0]["input"]["b"] == "8"


@needs_db
async def test_resume_without_a_checkpoint_raises(env: Env):
    script = env.script(say("还在想"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("norun"), "x", identity=IDENTITY)
        with pytest.raises(AgentError):
            await agent.resume(env.sid("norun"), "CONFIRM")
        with pytest.raises(AgentError):
            await agent.resume(env.sid("nothing-here"), "CONFIRM")
        with pytest.raises(AgentError):
            await agent.resume(env.sid("norun"), "APPROVE")


@needs_db
async def test_an_entity_seen_again_becomes_the_newest(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["outputs"] = {"memo": {"sources": ["USER"], "entity": {"type": "memo", "scalar": "id"}}}
        c["tools"]["pickTool"]["args"]["a"] = {"from": "prior.memo.id", "required": False}

    env.contract(changed(mutate))

    def remember(value: str) -> list[dict[str, Any]]:
        return [
            call("builtin_output_set", {"key": "memo", "value": value, "sourceType": "USER", "sourceRef": "m"}),
            call("builtin_node_finish", {"output": "记住了"}),
        ]

    script = env.script(*remember("M-1"), *remember("M-2"), *remember("M-1"), call("pickTool", {}), say("ok"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        for text in ("备忘 M-1", "备忘 M-2", "还是 M-1"):
            assert (await agent.send(env.sid("newest"), text, identity=IDENTITY)).status == "DONE"
        await agent.send(env.sid("newest"), "用最近的", identity=IDENTITY)
    assert env.calls("pickTool")[0]["input"]["a"] == "M-1"


@needs_db
def test_an_openai_compatible_model_drives_the_runner_through_the_cli(env: Env):
    """Models bullet, end to end: `agent run --model openai:MODEL` against a local chat-completions server; the
    tool call runs once through the chain, the next request carries the assistant tool_calls and the matching
    tool message, and the API key goes into the Authorization header only."""
    from http.server import BaseHTTPRequestHandler

    from support.local_http import serve

    seen: list[dict[str, Any]] = []
    key = "sk-probe-" + uuid.uuid4().hex

    class Chat(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            if len(seen) == 1:
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c-1",
                            "type": "function",
                            "function": {"name": "findNotes", "arguments": '{"q": "周报"}'},
                        }
                    ],
                }
            else:
                message = {"role": "assistant", "content": "找到两篇。"}
            data = json.dumps({"choices": [{"message": message}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serve(Chat) as base:
        result = cli(
            "agent",
            "run",
            str(env.dir),
            "--session",
            env.sid("oa"),
            "--message",
            "找周报",
            "--model",
            "openai:probe-model",
            "--json",
            extra_env={"SKILLYARD_MODEL_BASE_URL": f"{base}/v1", "SKILLYARD_MODEL_API_KEY": key},
        )
    assert result.returncode == 0, result.stderr
    turn = json.loads(result.stdout)
    assert turn["reply"] == "找到两篇。" and turn["status"] == "RUNNING"
    assert len(env.calls("findNotes")) == 1
    assert [s["path"] for s in seen] == ["/v1/chat/completions"] * 2
    assert all(s["auth"] == f"Bearer {key}" and s["body"]["model"] == "probe-model" for s in seen)
    first_tools = {t["function"]["name"] for t in seen[0]["body"]["tools"]}
    assert {"findNotes", "builtin_node_finish"} <= first_tools and seen[0]["body"]["tool_choice"] == "auto"
    messages = seen[1]["body"]["messages"]
    assert messages[0]["role"] == "system" and messages[1] == {"role": "user", "content": "找周报"}
    assert messages[2]["tool_calls"][0]["id"] == "c-1"
    assert messages[3]["role"] == "tool" and messages[3]["tool_call_id"] == "c-1"
    assert key not in result.stdout + result.stderr


@needs_db
async def test_the_next_step_of_write_pending_verify_can_be_followed(env: Env):
    """Issue: every observation carries a next step. The advice must be one the runtime accepts: when
    WRITE_PENDING_VERIFY tells the model to ask the user with builtin_node_follow_up whether the write took effect,
    that follow-up must not be refused as FOLLOW_UP_UNGROUNDED."""
    env.contract(changed(lambda c: c["tools"]["quickWrite"].pop("label")))
    turn = await send_once(
        env,
        "写一下",
        call("quickWrite", {"q": "x", "mode": "timeout"}),
        call("quickWrite", {"q": "x", "mode": "timeout"}),
        call("builtin_node_follow_up", {"question": "刚才的写入生效了吗？"}),
        say("stop"),
    )
    timed_out, pending, asked = turn.observations
    assert timed_out.code == "agent_runtime.40016" and pending.code == "agent_runtime.40030"
    advised = "builtin_node_follow_up" in str(pending.next_step)
    assert not (advised and asked.code == "agent_runtime.42248"), (pending.next_step, asked.content)


@needs_db
async def test_confirm_after_the_contract_changed_the_summary_asks_again(env: Env):
    """§14.1 step 3 / issue: CONFIRM after the bound arguments or their summary changed runs nothing and raises a
    new APPROVAL (here a new process loads a contract whose label of the argument changed)."""
    script = env.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "发了"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("relabel"), "发备忘：开会", identity=IDENTITY)
        assert first.checkpoint and "内容：开会" in first.checkpoint["question"]
    env.contract(changed(lambda c: c["tools"]["sendMemo"]["args"]["text"].update(label="正文")))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.resume(env.sid("relabel"), "CONFIRM")
        assert again.status == "SUSPENDED" and again.checkpoint and "正文：开会" in again.checkpoint["question"]
        assert env.calls() == []
        done = await agent.resume(env.sid("relabel"), "CONFIRM")
    assert done.status == "DONE" and len(env.calls("sendMemo")) == 1


@pytest.mark.parametrize(
    ("arg", "expected"),
    [({"const": None, "label": "丁"}, None), ({"const": "x", "enum": ["a", "b"]}, "x")],
    ids=["const-null", "const-outside-enum"],
)
@needs_db
async def test_a_const_argument_ends_the_param_contract_at_binding(env: Env, arg: dict[str, Any], expected: Any):
    """§5.3 step 1: "有 const → 写入常量，来源记为 CONTRACT，结束。" — a const argument is settled by binding, so
    the missing-value and enum steps do not apply to it (docs: ``args.*.const`` may be JSON null)."""
    env.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(d=arg)))
    turn = await run_builtin(env, "pickTool", {"d": "model"})
    assert last(turn).ok, last(turn)
    assert last(turn).sources["d"] == "CONTRACT"
    assert env.calls("pickTool")[0]["input"]["d"] == expected


@pytest.mark.parametrize("session", ["a/b", "x y", "s" * 300], ids=["slash", "space", "300-chars"])
@needs_db
def test_cli_run_refuses_a_session_id_it_cannot_use_before_anything_runs(env: Env, session: str):
    """Bad input is a clean error, without a traceback (docs/cli.md). The core refuses unsafe session ids (1-128
    letters, digits, '_', '-', '.'); the agent runtime passes the session id to every business skill, so a session
    id it accepts must work there too: here every tool call fails with TOOL_ERROR (and a write would be left
    UNKNOWN), or the database refuses the id after the model step ran."""
    model = env.script(call("findNotes", {"q": "a"}), say("b"))
    result = cli("agent", "run", str(env.dir), "--session", session, "--message", "x", "--model", model, "--json")
    assert no_traceback(result), result.stderr[:600]
    if result.returncode == 0:
        turn = json.loads(result.stdout)
        assert turn["observations"][0]["ok"], turn["observations"][0]
    else:
        assert "session" in result.stderr and env.calls() == [], result.stderr


@needs_db
async def test_cancel_at_approval_says_which_write_was_not_done(env: Env):
    script = env.script(
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("cancel"), "发一条备忘：开会", identity=IDENTITY)
        turn = await agent.resume(env.sid("cancel"), "cancel")
    assert turn.status == "CANCELLED" and env.calls() == []
    assert "sendMemo" in str(turn.reply) or "正在发送备忘" in str(turn.reply) or "发备忘" in str(turn.reply)


@needs_db
async def test_read_extract_entities_enter_the_session_index(env: Env):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["findNotes"]["extracts"] = [
            {"key": "notes", "path": "data.records", "entity": {"type": "note", "name": "title"}}
        ]

    env.contract(changed(mutate))
    turn = await send_once(env, "找", call("findNotes", {"q": "a"}), say("stop"), session="rent")
    assert turn.observations[0].ok
    async with SkillYard() as yard:
        session = await AgentStore(yard.database).load_session(env.sid("rent"))
    assert session is not None
    assert {(e.type, e.id, e.name) for e in session.entities} == {("note", "n-1", "季度总结"), ("note", "n-2", "周报")}
