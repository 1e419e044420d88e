"""The §13 tool-call chain of business tools, against real in-process skills that count their real executions."""

from __future__ import annotations

import copy
import hashlib
import json
import socket
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from skillyard import SkillYard
from skillyard.agent.chain import build_summary, call_tool, idempotency_key, preview_binding, verify_write
from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import MemoryEvidenceStore, NodeContext
from skillyard.agent.evaluate import resolve
from skillyard.agent.loader import load_contract_skill
from skillyard.agent.settings import AgentSettings
from skillyard.agent.state import (
    Entity,
    Evidence,
    EvidenceStatus,
    NodeState,
    NodeStatus,
    OutputValue,
    SessionState,
    TaskState,
)
from skillyard.storage.tables import runs

HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}
RESULT = {result}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key"),
                            "user": ctx.get("user_id"), "session": ctx.get("session_id")}}) + "\\n")
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
    if mode == "structured":
        return {{"ok": False, "error": {{"code": "E77", "message": "库存不足"}}}}
    if mode == "empty":
        return None
    if mode == "none_found":
        return {{"code": 200, "data": {{"records": []}}}}
    if mode == "code_text":
        return {{"code": "200", "data": {{"id": "n-9", "title": input.get("title")}}}}
    return RESULT(input)
"""

SAVE = 'lambda i: {"code": 200, "data": {"id": "n-1", "title": i.get("title")}}'
FIND = (
    'lambda i: {"code": 200, "data": {"records": [{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}'
)
ONE = 'lambda i: {"code": 200, "data": {"records": [{"id": "n-1", "title": "季度总结"}]}}'

SCHEMA_SAVE = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "owner": {"type": "string"},
        "secret": {"type": "string"},
        "mode": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["title", "owner"],
}
SCHEMA_ANY = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "mode": {"type": "string"}, "count": {"type": "integer"}},
}

FREE = {"sources": ["MODEL"], "required": False}
BASE_CONTRACT: dict[str, Any] = {
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId"},
                "secret": {"sources": ["MODEL"], "required": False, "sensitive": True, "label": "口令"},
                "mode": FREE,
            },
            "success": {"path": "code", "op": "EQ", "value": 200},
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "findNotes": {
            "label": "Looking up notes",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": {"path": "code", "op": "EQ", "value": 200},
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
    }
}


class Harness:
    """A yard with the business tools, a contract skill, and a NodeContext over MemoryEvidenceStore."""

    def __init__(self, root: Path, log: Path, yard: SkillYard, ctx: NodeContext) -> None:
        self.root, self.log, self.yard, self.ctx = root, log, yard, ctx

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """Every real execution the business skills recorded (optionally of one tool)."""
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    async def call(self, name: str, arguments: Any, **kw: Any) -> Any:
        return await call_tool(self.ctx, name, arguments, **kw)


class RecordingStore(MemoryEvidenceStore):
    """The in-memory store, also remembering every status an evidence record was saved with (in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[tuple[str, str]] = []

    async def save_evidence(self, evidence: Evidence) -> None:
        self.history.append((evidence.id, evidence.status.value))
        await super().save_evidence(evidence)


def tool_skill(root: Path, log: Path, name: str, result: str, schema: dict[str, Any], extra: str = "") -> None:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: tool {name}\n{extra}---\nBody.\n", "utf-8")
    (folder / "schema.json").write_text(json.dumps(schema), "utf-8")
    (folder / "handler.py").write_text(textwrap.dedent(HANDLER).format(log=str(log), name=name, result=result), "utf-8")


def contract_skill(root: Path, contract: dict[str, Any], tools: list[str]) -> None:
    folder = root / "notes_skill"
    folder.mkdir(parents=True, exist_ok=True)
    front = f"name: notes_skill\nskill_key: test.notes\ndescription: Notes.\ntools: [{', '.join(tools)}]\n"
    (folder / "SKILL.md").write_text(f"---\n{front}---\nManual.\n", "utf-8")
    (folder / "contract.json").write_text(json.dumps(contract), "utf-8")


Build = Callable[..., Any]


@pytest.fixture
async def build(tmp_path: Path) -> AsyncIterator[Build]:
    yards: list[SkillYard] = []

    async def make(
        contract: dict[str, Any] | None = None,
        *,
        tools: list[str] | None = None,
        settings: AgentSettings | None = None,
        user_messages: list[str] | None = None,
        find_result: str = FIND,
        extra_skills: Callable[[Path, Path], None] | None = None,
    ) -> Harness:
        root = tmp_path / f"skills{len(yards)}"
        root.mkdir()
        log = tmp_path / f"calls{len(yards)}.log"
        tool_skill(root, log, "saveNote", SAVE, SCHEMA_SAVE, "exec: {timeout: 0.5}\n")
        tool_skill(root, log, "findNotes", find_result, SCHEMA_ANY, "exec: {timeout: 0.5}\n")
        tool_skill(root, log, "otherTool", SAVE, SCHEMA_ANY)
        if extra_skills is not None:
            extra_skills(root, log)
        contract_skill(root, contract or BASE_CONTRACT, tools or ["saveNote", "findNotes"])
        yard = SkillYard(skills_dirs=[root], include_builtin=False)
        yards.append(yard)
        loaded, issues = load_contract_skill("test.notes", yard.skill("notes_skill"))
        assert loaded is not None, issues
        session = SessionState(
            id="sess-1", agent_code="test", identity={"user_id": "u-7"}, user_messages=list(user_messages or [])
        )
        task = TaskState(id="task-1", session_id="sess-1")
        node = NodeState(id="node-1", task_id="task-1", skill_key="test.notes", goal="save a note")
        ctx = NodeContext(
            yard=yard,
            skill=loaded,
            session=session,
            task=task,
            node=node,
            store=RecordingStore(),
            settings=settings or AgentSettings(),
        )
        return Harness(root, log, yard, ctx)

    yield make
    for yard in yards:
        await yard.close()


def with_tool(contract: dict[str, Any], tool: str, **changes: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(contract))
    copy["tools"][tool].update(changes)
    return copy


# --- catalog and arg policy -----------------------------------------------------------------------------------


async def test_tool_outside_tool_names_is_catalog_denied(build):
    h = await build()
    obs = await h.call("otherTool", {"q": "x"})
    assert not obs.ok and obs.code == ErrorCode.CATALOG_DENIED.value == "agent_runtime.40027"
    assert "saveNote" in obs.next_step and "findNotes" in obs.next_step
    builtin = await h.call("builtin_node_finish", {"output": "x"})
    assert builtin.code == ErrorCode.CATALOG_DENIED.value
    assert h.calls() == [] and h.ctx.evidence == []


async def test_arguments_that_are_not_json(build):
    h = await build()
    obs = await h.call("findNotes", '{"q": ')
    assert obs.code == "agent_runtime.40020" and obs.arguments == '{"q": '
    assert "JSON object" in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_arguments_that_are_not_an_object(build):
    h = await build()
    obs = await h.call("findNotes", "[1, 2]")
    assert obs.code == ErrorCode.ARG_REJECTED.value
    assert h.calls() == [] and h.ctx.evidence == []


async def test_schema_required_missing_is_rejected_but_from_args_are_exempt(build):
    h = await build()
    obs = await h.call("saveNote", json.dumps({"secret": "x"}))
    assert obs.code == ErrorCode.ARG_REJECTED.value
    assert "title" in obs.content and "owner" not in obs.content  # owner comes from platform.userId
    assert "saveNote" in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_json_text_arguments_are_accepted(build):
    h = await build()
    obs = await h.call("findNotes", '{"q": "周报"}', call_id="c-1")
    assert obs.ok and obs.call_id == "c-1" and obs.evidence_id
    assert h.calls("findNotes")[0]["input"] == {"q": "周报"}


# --- binding ------------------------------------------------------------------------------------------------


async def test_from_and_const_override_the_model_and_record_sources(build):
    contract = with_tool(
        BASE_CONTRACT,
        "findNotes",
        args={"q": {"from": "shared.topic"}, "mode": {"const": "ok"}, "count": FREE},
    )
    h = await build(contract)
    h.ctx.task.shared["topic"] = "budget"
    obs = await h.call("findNotes", {"q": "model text", "mode": "boom"})
    assert obs.ok
    assert h.calls("findNotes")[0]["input"] == {"q": "budget", "mode": "ok"}
    assert obs.sources["q"] == "SHARED" and obs.sources["mode"] == "CONTRACT"


async def test_from_without_a_value_keeps_the_model_value_as_model(build):
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": {"from": "shared.topic", "sources": ["MODEL"]}})
    h = await build(contract)
    obs = await h.call("findNotes", {"q": "model text"})
    assert obs.ok and obs.sources["q"] == "MODEL"
    assert h.calls()[0]["input"]["q"] == "model text"


async def test_when_unique_binds_only_a_unique_evidence_candidate(build):
    contract = with_tool(
        BASE_CONTRACT,
        "saveNote",
        args={
            "title": {"from": "evidence.notes", "when": "UNIQUE", "sources": ["MODEL"]},
            "owner": {"from": "platform.userId"},
        },
        confirm=False,
    )
    h = await build(contract, settings=AgentSettings(write_confirm_bypass_tools=frozenset({"saveNote"})))
    assert (await h.call("findNotes", {})).ok  # two candidates
    preview, _ = preview_binding(h.ctx, "saveNote", {"title": "mine"})
    assert preview["title"] == "mine"
    h2 = await build(contract, find_result=ONE)
    assert (await h2.call("findNotes", {})).ok  # exactly one candidate: the array itself is bound
    preview, _ = preview_binding(h2.ctx, "saveNote", {"title": "mine"})
    assert preview["title"] == [{"id": "n-1", "title": "季度总结"}]


async def test_array_template_fills_only_indexes_the_model_left_empty(build):
    contract = with_tool(
        BASE_CONTRACT,
        "saveNote",
        args={"owner": {"from": "platform.userId"}, "lines[].code": {"from": "inputs.items[].code"}},
    )
    h = await build(contract)
    h.ctx.node.inputs["items"] = [{"code": "A"}, {"code": "B"}, {"code": "C"}]
    args, _ = preview_binding(h.ctx, "saveNote", {"title": "t", "lines": [{"code": "mine"}, {"qty": 2}]})
    assert args["lines"] == [{"code": "mine"}, {"qty": 2, "code": "B"}, {"code": "C"}]


async def test_evidence_is_never_an_array_template(build):
    contract = with_tool(
        BASE_CONTRACT,
        "saveNote",
        args={"owner": {"from": "platform.userId"}, "lines[].code": {"from": "evidence.notes[].id"}},
    )
    h = await build(contract)
    assert (await h.call("findNotes", {})).ok
    args, _ = preview_binding(h.ctx, "saveNote", {"title": "t", "lines": [{"qty": 1}]})
    assert args["lines"] == [{"qty": 1}]


# --- param contract -----------------------------------------------------------------------------------------


def _save_args(**args: Any) -> dict[str, Any]:
    return {"owner": {"from": "platform.userId"}, **args}


@pytest.mark.parametrize(
    ("missing", "code", "step"),
    [
        ({"action": "FAIL", "message": "no title, no note"}, "agent_runtime.40022", "builtin_node_fail"),
        ({"action": "CALL_TOOL", "tool": "findNotes"}, "agent_runtime.40023", "call findNotes first"),
        ({"action": "ASK_USER"}, "agent_runtime.40024", "builtin_node_follow_up"),
    ],
)
async def test_missing_actions(build, missing, code, step):
    contract = with_tool(
        BASE_CONTRACT, "findNotes", args={"q": {"sources": ["MODEL"], "missing": missing}, "mode": FREE}
    )
    h = await build(contract)
    obs = await h.call("findNotes", {})
    assert obs.code == code and step in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_call_tool_without_a_tool_lets_the_missing_value_pass(build):
    arg = {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL"}}
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": arg})
    h = await build(contract)
    assert (await h.call("findNotes", {})).ok
    assert len(h.calls()) == 1


async def test_optional_missing_passes(build):
    h = await build()
    assert (await h.call("findNotes", {})).ok


async def test_made_up_value_is_rejected_with_next_steps(build):
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["EVIDENCE"]}})
    h = await build(contract)
    obs = await h.call("findNotes", {"q": "invented"})
    assert obs.code == "agent_runtime.40025"
    assert "builtin_node_follow_up" in obs.next_step and "builtin_node_fail" in obs.next_step
    assert h.calls() == []


async def test_listed_arg_without_sources_always_rejects_the_model(build):
    contract = with_tool(BASE_CONTRACT, "findNotes", args={"q": {}})
    h = await build(contract)
    assert (await h.call("findNotes", {"q": "x"})).code == ErrorCode.PARAM_PROVENANCE_REJECTED.value


async def test_user_source_not_said_asks_the_user(build):
    h = await build(user_messages=["please save something"])
    obs = await h.call("saveNote", {"title": "季度总结"})
    assert obs.code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value and '["title"]' in obs.next_step
    assert h.calls() == [] and h.ctx.evidence == []


async def test_priority_rejected_over_fail_over_call_tool_over_ask(build):
    args = {
        "a": {"sources": ["USER"]},  # missing → ASK_USER
        "b": {"sources": ["MODEL"], "missing": {"action": "CALL_TOOL", "tool": "saveNote"}},
        "c": {"sources": ["MODEL"], "missing": {"action": "FAIL"}},
        "q": {"sources": ["EVIDENCE"]},  # invented → immediate rejection
    }
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args=args))
    assert (await h.call("findNotes", {"q": "made up"})).code == ErrorCode.PARAM_PROVENANCE_REJECTED.value
    assert (await h.call("findNotes", {})).code == ErrorCode.PARAM_PROVENANCE_FAIL.value
    assert (await h.call("findNotes", {"c": "x"})).code == ErrorCode.PARAM_PROVENANCE_CALL_TOOL.value
    assert (await h.call("findNotes", {"c": "x", "b": "y"})).code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value
    assert h.calls() == []


async def test_enum_mismatch_asks_the_user(build):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["MODEL"], "enum": ["a", "b"]}}))
    obs = await h.call("findNotes", {"q": "c"})
    assert obs.code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value and '"a"' in obs.content
    assert (await h.call("findNotes", {"q": "b"})).ok


@pytest.mark.parametrize(
    ("value", "message", "matched"),
    [
        ("10", "the report of 2010", False),
        ("10", "give me 10 items", True),
        ("季度总结", "请帮我保存季度总结这篇笔记", True),
        ("Report", "save the REPORT now", True),
        ("rep", "save the report", False),
        ("x", "x", False),  # shorter than 2 characters
    ],
)
async def test_user_provenance_by_text_match(build, value, message, matched):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["USER"]}}), user_messages=[message])
    obs = await h.call("findNotes", {"q": value})
    assert obs.ok is matched
    if matched:
        assert obs.sources["q"] == "USER"
    else:
        assert obs.code == ErrorCode.PARAM_PROVENANCE_ASK_USER.value


async def test_user_provenance_by_answered_expected_field(build):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["USER"]}}))
    h.ctx.node.user_fields["q"] = "whatever"
    obs = await h.call("findNotes", {"q": "anything"})
    assert obs.ok and obs.sources["q"] == "USER"


async def test_evidence_provenance_accepts_a_value_from_a_succeeded_read(build):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", args={"q": {"sources": ["EVIDENCE"], "required": False}}))
    assert (await h.call("findNotes", {})).ok
    obs = await h.call("findNotes", {"q": "n-2"})
    assert obs.ok and obs.sources["q"] == "EVIDENCE"


# --- fingerprint ----------------------------------------------------------------------------------------------


async def test_fourth_identical_successful_call_trips_and_fails_the_node(build):
    h = await build()
    for _ in range(3):
        assert (await h.call("findNotes", {"q": "a"})).ok
    obs = await h.call("findNotes", {"q": "a"})
    assert obs.code == ErrorCode.FINGERPRINT_TRIP.value == "agent_runtime.40026"
    assert h.ctx.node.status is NodeStatus.FAILED and "same arguments" in (h.ctx.node.reply or "")
    assert len(h.calls()) == 3 and len(h.ctx.evidence) == 3


async def test_a_different_call_resets_the_fingerprint(build):
    h = await build(settings=AgentSettings(fingerprint_limit=2))
    for args in ({"q": "a"}, {"q": "a"}, {"q": "b"}, {"q": "a"}, {"q": "a"}):
        assert (await h.call("findNotes", args)).ok
    assert (await h.call("findNotes", {"q": "a"})).code == ErrorCode.FINGERPRINT_TRIP.value
    assert len(h.calls()) == 5


# --- write gate -----------------------------------------------------------------------------------------------


async def test_write_needs_approval_and_is_gated_with_a_summary(build):
    h = await build(user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "secret": "hunter2"})
    assert obs.code == ErrorCode.APPROVAL_REQUIRED.value == "agent_runtime.42221"
    assert "builtin_node_approval" in obs.next_step and "saveNote" in obs.next_step
    gated = h.ctx.node.gated
    assert gated is not None and gated.tool == "saveNote"
    assert gated.args == {"title": "季度总结", "secret": "hunter2", "owner": "u-7"}
    assert gated.sources["owner"] == "PLATFORM" and gated.sources["title"] == "USER"
    assert gated.summary == "标题：季度总结\n口令：***"
    assert gated.idempotency_key == idempotency_key("saveNote", h.ctx.tool_contract("saveNote"), gated.args)
    assert h.ctx.node.target == "saveNote" and h.ctx.node.target_claimed
    assert h.calls() == [] and h.ctx.evidence == []


async def test_first_write_claims_the_target_even_when_refused(build):
    h = await build()
    obs = await h.call("saveNote", {})
    assert obs.code == ErrorCode.ARG_REJECTED.value
    assert h.ctx.node.target == "saveNote" and h.ctx.node.target_claimed


async def test_confirmed_write_runs_once_started_first_with_key_and_identity(build):
    h = await build(user_messages=["保存 季度总结"])
    gate = await h.call("saveNote", {"title": "季度总结"})
    assert gate.code == ErrorCode.APPROVAL_REQUIRED.value
    obs = await h.call("saveNote", {"title": "季度总结"}, approved=True)
    assert obs.ok and obs.content["data"]["id"] == "n-1"
    [run] = h.calls("saveNote")
    assert run["key"] == h.ctx.node.gated.idempotency_key and run["user"] == "u-7" and run["session"] == "sess-1"
    assert run["input"]["owner"] == "u-7"
    record = h.ctx.evidence[0]
    assert h.ctx.store.history == [(record.id, "STARTED"), (record.id, "SUCCESS")]
    assert record.write and record.business_ok and record.idempotency_key == run["key"]
    # §6.3: a write's entity merges its arguments under the result
    [entity] = h.ctx.session.entities
    assert (entity.type, entity.id, entity.name) == ("note", "n-1", "季度总结")
    assert entity.attrs["owner"] == "u-7" and entity.task_id == "task-1"
    # the identical write again: the earlier result, no approval, no call
    again = await h.call("saveNote", {"title": "季度总结"})
    assert again.ok and again.evidence_id == record.id and again.content == record.response
    assert len(h.calls("saveNote")) == 1 and len(h.ctx.evidence) == 1


async def test_bypass_needs_confirm_false_and_the_setting(build):
    bypass = AgentSettings(write_confirm_bypass_tools=frozenset({"saveNote"}))
    messages = ["保存 季度总结"]
    h = await build(with_tool(BASE_CONTRACT, "saveNote", confirm=False), settings=bypass, user_messages=messages)
    assert (await h.call("saveNote", {"title": "季度总结"})).ok
    h2 = await build(with_tool(BASE_CONTRACT, "saveNote", confirm=False), user_messages=messages)
    assert (await h2.call("saveNote", {"title": "季度总结"})).code == ErrorCode.APPROVAL_REQUIRED.value
    h3 = await build(settings=bypass, user_messages=messages)  # confirm defaults to true for WRITE
    assert (await h3.call("saveNote", {"title": "季度总结"})).code == ErrorCode.APPROVAL_REQUIRED.value
    assert len(h.calls()) == 1 and h2.calls() == [] and h3.calls() == []


async def test_write_in_flight_is_refused(build):
    h = await build(user_messages=["保存 季度总结"])
    args = {"title": "季度总结", "owner": "u-7"}
    key = idempotency_key("saveNote", h.ctx.tool_contract("saveNote"), args)
    started = Evidence("ev-x", "task-1", "node-0", "saveNote", args, True, EvidenceStatus.STARTED, key)
    await h.ctx.record(started)
    obs = await h.call("saveNote", {"title": "季度总结"}, approved=True)
    assert obs.code == ErrorCode.WRITE_IN_FLIGHT.value == "agent_runtime.40031"
    assert h.calls() == [] and len(h.ctx.evidence) == 1


async def test_commit_then_timeout_is_unknown_then_pending_verify(build):
    h = await build(user_messages=["保存 季度总结"])
    args = {"title": "季度总结", "mode": "timeout"}
    obs = await h.call("saveNote", args, approved=True)
    assert obs.code == ErrorCode.TOOL_TIMEOUT.value == "agent_runtime.40016"
    assert "do not call saveNote again" in obs.next_step
    [record] = h.ctx.evidence
    assert record.status is EvidenceStatus.UNKNOWN and record.error_code == obs.code
    assert len(h.calls("saveNote")) == 1  # it ran (and committed) before the wall clock stopped it
    again = await h.call("saveNote", args, approved=True)
    assert again.code == ErrorCode.WRITE_PENDING_VERIFY.value == "agent_runtime.40030"
    assert "findNotes" in again.next_step
    assert len(h.calls("saveNote")) == 1 and len(h.ctx.evidence) == 1


async def test_verify_write_settles_an_unknown_write(build):
    h = await build(user_messages=["保存 季度总结"])
    await h.call("saveNote", {"title": "季度总结", "mode": "timeout"}, approved=True)
    [record] = h.ctx.evidence
    obs = await verify_write(h.ctx, record)
    assert obs.ok and obs.content["took_effect"] is True
    assert record.status is EvidenceStatus.SUCCESS and record.business_ok
    assert h.calls("findNotes")[0]["input"] == {"q": "季度总结"}


# --- response contract ------------------------------------------------------------------------------------------


async def test_write_business_failure_uses_error_code_and_can_be_called_again(build):
    h = await build(user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "mode": "business"}, approved=True)
    assert not obs.ok and obs.code == "E42" and "duplicate title" in obs.content
    [record] = h.ctx.evidence
    assert record.status is EvidenceStatus.SUCCESS and record.business_ok is False
    assert (record.error_code, record.error_message) == ("E42", "duplicate title")
    again = await h.call("saveNote", {"title": "季度总结", "mode": "business"}, approved=True)
    assert again.code == "E42" and len(h.calls("saveNote")) == 2


async def test_business_failure_code_inside_a_structured_error(build):
    """§6.2: error.code is a path into the response; a skill's failure envelope with a structured error
    ({code, message}) keeps it through the platform's normalization, so the contract finds the code."""
    contract = copy.deepcopy(BASE_CONTRACT)
    contract["tools"]["saveNote"]["error"] = {"code": "error.code", "message": "error.message"}
    h = await build(contract=contract, user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "mode": "structured"}, approved=True)
    assert not obs.ok and obs.code == "E77" and "库存不足" in obs.content, obs
    [record] = h.ctx.evidence
    assert (record.error_code, record.error_message, record.business_ok) == ("E77", "库存不足", False)


async def test_read_business_failure_without_error_spec(build):
    h = await build()
    obs = await h.call("findNotes", {"mode": "business"})
    assert obs.code == ErrorCode.TOOL_BUSINESS_FAILED.value == "agent_runtime.40004"
    [record] = h.ctx.evidence
    assert record.status is EvidenceStatus.SUCCESS and record.business_ok is False and not record.succeeded


async def test_eq_compares_numbers_numerically(build):
    h = await build(user_messages=["保存 季度总结"])
    obs = await h.call("saveNote", {"title": "季度总结", "mode": "code_text"}, approved=True)
    assert obs.ok and h.ctx.evidence[0].business_ok


async def test_configured_success_with_an_empty_response_is_a_business_failure(build):
    h = await build()
    obs = await h.call("findNotes", {"mode": "empty"})
    assert obs.code == ErrorCode.TOOL_BUSINESS_FAILED.value
    assert h.ctx.evidence[0].business_ok is False


async def test_empty_result_is_a_success_with_counts(build):
    h = await build()
    obs = await h.call("findNotes", {"mode": "none_found"})
    assert obs.ok
    record = h.ctx.evidence[0]
    assert record.empty and record.succeeded and record.counts == {"notes": 0}
    full = await h.call("findNotes", {})
    assert full.ok and h.ctx.evidence[1].counts == {"notes": 2} and not h.ctx.evidence[1].empty


@pytest.mark.parametrize(
    ("success", "matched"),
    [
        ({"path": "code", "op": "NE", "value": 500}, True),
        ({"path": "code", "op": "IN", "value": ["200", 201]}, True),
        ({"path": "code", "op": "NOT_IN", "value": [200]}, False),
        ({"path": "data.records", "op": "TRUTHY"}, True),
        ({"path": "data.nothing", "op": "EXISTS"}, False),
        ({"path": "data", "op": "EXISTS"}, True),
    ],
)
async def test_success_ops(build, success, matched):
    h = await build(with_tool(BASE_CONTRACT, "findNotes", success=success))
    obs = await h.call("findNotes", {})
    assert obs.ok is matched


# --- §14.4 failure classes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "code", "read_status", "write_status"),
    [
        ("io", ErrorCode.TOOL_IO_ERROR, "FAILED", "UNKNOWN"),
        ("refused", ErrorCode.TOOL_UNREACHABLE, "FAILED", "FAILED"),
        ("boom", ErrorCode.TOOL_ERROR, "FAILED", "UNKNOWN"),
        ("timeout", ErrorCode.TOOL_TIMEOUT, "FAILED", "UNKNOWN"),
    ],
)
async def test_failure_classes(build, mode, code, read_status, write_status):
    h = await build(user_messages=["保存 季度总结"])
    read = await h.call("findNotes", {"mode": mode})
    assert read.code == code.value and read.evidence_id
    assert h.ctx.evidence[-1].status.value == read_status
    write = await h.call("saveNote", {"title": "季度总结", "mode": mode}, approved=True)
    assert write.code == code.value
    assert h.ctx.evidence[-1].status.value == write_status
    assert len(h.calls()) == 2  # each ran exactly once: no automatic retry


async def test_http_skill_with_a_refused_connection_is_unreachable(build):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def http_tool(root: Path, log: Path) -> None:
        folder = root / "remoteNote"
        folder.mkdir()
        (folder / "SKILL.md").write_text(
            "---\nname: remoteNote\ndescription: d\nexec: {config: api.toml}\n---\nBody.\n", "utf-8"
        )
        (folder / "api.toml").write_text(f'[request]\nurl = "http://127.0.0.1:{port}/x"\n', "utf-8")

    contract = json.loads(json.dumps(BASE_CONTRACT))
    contract["tools"]["remoteNote"] = {"sideEffect": "WRITE", "success": {"path": "code", "op": "EQ", "value": 200}}
    h = await build(contract, tools=["saveNote", "findNotes", "remoteNote"], extra_skills=http_tool)
    obs = await h.call("remoteNote", {}, approved=True)
    assert obs.code == ErrorCode.TOOL_UNREACHABLE.value == "agent_runtime.40017"
    assert h.ctx.evidence[0].status is EvidenceStatus.FAILED


async def test_platform_schema_rejection_is_a_params_error_and_runs_nothing(build):
    h = await build(user_messages=["保存 季度总结"])
    read = await h.call("findNotes", {"count": "many"})
    assert read.code == ErrorCode.MCP_INVALID_PARAMS.value and "count" in read.content
    assert h.ctx.evidence[0].status is EvidenceStatus.FAILED
    write = await h.call("saveNote", {"title": "季度总结", "lines": "oops"}, approved=True)
    assert write.code == ErrorCode.MCP_INVALID_PARAMS.value
    assert h.ctx.evidence[1].status is EvidenceStatus.FAILED
    assert h.calls() == []


async def test_only_real_executions_are_skill_runs(build, db_env):
    h = await build()
    assert (await h.call("findNotes", "not json")).code == ErrorCode.ARG_JSON_INVALID.value
    assert (await h.call("otherTool", {})).code == ErrorCode.CATALOG_DENIED.value
    assert (await h.call("saveNote", {})).code == ErrorCode.ARG_REJECTED.value
    assert (await h.call("findNotes", {})).ok
    await h.yard.runlog.flush()
    sessions = await h.yard.database.session_factory()
    async with sessions() as session:
        rows = (await session.execute(select(runs.c.skill, func.count()).group_by(runs.c.skill))).all()
    assert dict(rows) == {"findNotes": 1}


# --- evaluate and summary -----------------------------------------------------------------------------------------


async def test_evaluate_every_prefix(build):
    h = await build()
    ctx = h.ctx
    ctx.node.inputs["title"] = "T"
    ctx.node.outputs["articleId"] = OutputValue({"id": "a-9"}, "EVIDENCE")
    ctx.task.shared["spaceId"] = "sp-1"
    ctx.session.values["lang"] = "zh"
    ctx.session.entities += [Entity("note", "n-1", "old", {"tag": "x"}), Entity("note", "n-2", "new")]
    assert resolve(ctx, "inputs.title") == (True, "T", "NODE_OUTPUT")
    assert resolve(ctx, "outputs.articleId.id") == (True, "a-9", "NODE_OUTPUT")
    assert resolve(ctx, "shared.spaceId") == (True, "sp-1", "SHARED")
    assert resolve(ctx, "session.lang") == (True, "zh", "SESSION")
    assert resolve(ctx, "prior.note.id") == (True, "n-2", "PRIOR_TASK")
    assert resolve(ctx, "prior.note:n-1.tag") == (True, "x", "PRIOR_TASK")
    assert resolve(ctx, "prior.note:n-1.displayName") == (True, "old", "PRIOR_TASK")
    assert resolve(ctx, "platform.userId") == (True, "u-7", "PLATFORM")
    assert resolve(ctx, "platform.organId") == (False, None, None)
    assert resolve(ctx, "shared.nothing") == (False, None, None)
    assert (await h.call("findNotes", {})).ok
    assert resolve(ctx, "evidence.notes.1.id") == (True, "n-2", "EVIDENCE")
    assert resolve(ctx, "evidence.notes[].id") == (True, ["n-1", "n-2"], "EVIDENCE")
    assert (await h.call("findNotes", {"mode": "none_found"})).ok  # the newest (empty) result decides
    assert resolve(ctx, "evidence.notes") == (True, [], "EVIDENCE")
    assert (await h.call("findNotes", {"mode": "business"})).code  # business failures are not read
    assert resolve(ctx, "evidence.notes") == (True, [], "EVIDENCE")


async def test_evaluate_reads_upstream_evidence_after_this_nodes(build):
    h = await build()
    assert (await h.call("findNotes", {})).ok
    h.ctx.evidence[0].node_id = "upstream"
    h.ctx.upstream_node_ids = ["upstream"]
    assert resolve(h.ctx, "evidence.notes.0.id") == (True, "n-1", "EVIDENCE")
    h.ctx.upstream_node_ids = []
    assert resolve(h.ctx, "evidence.notes.0.id") == (False, None, None)


def test_summary_labels_masks_and_hides_platform_args():
    from skillyard.agent.contract_parse import parse_contract

    contract, _ = parse_contract(BASE_CONTRACT, skill_key="k")
    tool = contract.tools["saveNote"]
    args = {"title": "T", "owner": "u-7", "secret": "s3", "extra": {"n": 1}, "lines": [{"a": 1}]}
    summary = build_summary(tool, args, {"owner": "PLATFORM"})
    assert summary.splitlines() == ["标题：T", "口令：***", "extra.n：1", "lines.0.a：1"]


def test_idempotency_key_follows_the_spec_formula():
    """§14.2: SHA-256 of the key paths' values concatenated in lexicographic path order, missing ones skipped; a
    non-text value as canonical JSON; nothing listed (or all missing): tool name + a digest of all arguments."""
    from skillyard.agent.contract import ToolContract

    contract = ToolContract(name="createArticle", idempotency_key=("title", "spaceId", "meta.tag"))
    args = {"title": "周报", "spaceId": 7, "meta": {"tag": None}, "body": "…"}
    expected = hashlib.sha256("7周报".encode()).hexdigest()  # spaceId < title; meta.tag has no value
    assert idempotency_key("createArticle", contract, args) == expected
    flags = {"title": "周报", "spaceId": {"b": True, "a": 1}}
    assert (
        idempotency_key("createArticle", contract, flags) == hashlib.sha256('{"a":1,"b":true}周报'.encode()).hexdigest()
    )
    fallback = idempotency_key("createArticle", contract, {"body": "x"})
    assert fallback == "createArticle:" + hashlib.sha256(b'{"body":"x"}').hexdigest()
