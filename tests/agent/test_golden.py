"""Golden traces of the part-1 runner: single-skill scenarios replayed against tests/agent/golden/<name>.json.

Each scenario drives one of the support agents (tests/support/agent) with a scripted model and records, turn by
turn, what the public surfaces show: the TurnResult (status, reply, checkpoint, observations with their codes and
bound argument sources, evidence), the stored node / task / session, and the business skills' real executions
(support/agent/golden.py selects the fields and replaces generated ids by placeholders). The traces were recorded
before the runner learned task graphs; a single-skill agent must replay them identically afterwards.

Re-record (only when a behaviour change is intended, and say why in the commit message):

    SKILLYARD_GOLDEN_RECORD=1 python -m pytest tests/agent/test_golden.py
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import resume_session
from support import EXAMPLES
from support.agent import docs as docs_kit
from support.agent import memo as memo_kit
from support.agent.docs import ASK_SAVE, SAVE, DocsAgent, approve
from support.agent.folder import AgentFolder
from support.agent.golden import Trace, check_golden
from support.agent.memo import EvModel
from support.agent.notes import IDENTITY
from support.agent.probes import call, finish, needs_db, say, skillyard_cli

pytestmark = needs_db

Scenario = Callable[[Trace, Any], Awaitable[None]]

#: scenario name → (the fixture of its agent, the scenario)
SCENARIOS: dict[str, tuple[str, Scenario]] = {}


def scenario(fixture: str) -> Callable[[Scenario], Scenario]:
    """Register a scenario under its function name; ``fixture`` names the conftest fixture of its agent folder."""

    def register(fn: Scenario) -> Scenario:
        SCENARIOS[fn.__name__] = (fixture, fn)
        return fn

    return register


async def _agent(yard: SkillYard, env: AgentFolder, model: Any) -> Any:
    return await yard.agent(env.dir, model=model)


# -- queries ---------------------------------------------------------------------------------------------------


@scenario("desk_agent")
async def query_finish(trace: Trace, env: AgentFolder) -> None:
    """A read-only query: a finish before any business call is refused (FINISH_NEED_BUSINESS), the query runs, the
    finish passes; the next message of the session starts a new task (explicit skill_key on the first)."""
    sid = trace.session(env.sid("query"))
    model = env.script(
        finish("还没查"), call("findNotes", {"q": "周报"}), finish("找到一篇《季度总结》"), say("还要什么？")
    )
    async with SkillYard() as yard:
        agent = await _agent(yard, env, model)
        await trace.send(agent, sid, "找周报", identity=IDENTITY, skill_key="desk.keeper")
        await trace.send(agent, sid, "再来", identity=IDENTITY)


@scenario("memo_agent")
async def empty_result_follow_up(trace: Trace, env: AgentFolder) -> None:
    """An empty query result grounds a clarifying follow-up (no expectedFields); the REPLY lets the model query
    again and finish."""
    sid = trace.session(env.sid("empty"))
    model = env.script(
        call("findNotes", {"q": "上周", "mode": "empty"}),
        call("builtin_node_follow_up", {"question": "没有找到，换个关键词？"}),
        call("findNotes", {"q": "周报"}),
        finish("找到两篇"),
    )
    async with SkillYard() as yard:
        agent = await _agent(yard, env, model)
        await trace.send(agent, sid, "找一下上周的笔记", identity=memo_kit.IDENTITY)
        await trace.resume(agent, sid, "REPLY", "周报")


# -- follow-ups and approvals ----------------------------------------------------------------------------------


@scenario("desk_agent")
async def follow_up_reply_after_restart(trace: Trace, env: AgentFolder) -> None:
    """A FOLLOW_UP with expectedFields; a new process answers it (REPLY): the answered field binds as USER and the
    write is stopped by the write gate (APPROVAL_REQUIRED)."""
    sid = trace.session(env.sid("fu"))
    model = env.script(
        call("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
        call("saveNote", {"title": "月报"}),
        say("要保存《月报》吗？"),
    )
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "存笔记", identity=IDENTITY)
    async with SkillYard() as yard:
        await trace.resume(await _agent(yard, env, model), sid, "REPLY", "月报")


@scenario("notes_agent")
async def approval_confirm_after_restart(trace: Trace, env: AgentFolder) -> None:
    """APPROVAL, then CONFIRM by resume_session in a new process: the write runs once with the bound arguments
    (owner from platform.userId, not the model's value), claims the target and registers its entity."""
    sid = trace.session(env.sid("confirm"))
    model = env.script(
        call("saveNote", {"title": "季度总结", "owner": "999"}),
        call("builtin_node_approval", {"summary": "保存笔记", "toolName": "saveNote"}),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "保存季度总结", identity=IDENTITY)
    async with SkillYard() as yard:
        await trace.record({"resume_session": "CONFIRM"}, await resume_session(yard, sid, "CONFIRM"), yard)


@scenario("docs_agent")
async def approval_reject_after_restart(trace: Trace, env: DocsAgent) -> None:
    """REJECT at an APPROVAL (in a new process) cancels node and task; the next message starts a new task where the
    identical write needs a new approval."""
    sid = trace.session(env.sid("reject"))
    model = env.script(call("saveDoc", SAVE), approve("saveDoc", "保存文档"), call("saveDoc", SAVE), say("要确认"))
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, ASK_SAVE, identity=docs_kit.IDENTITY)
    async with SkillYard() as yard:
        agent = await _agent(yard, env, model)
        await trace.resume(agent, sid, "REJECT")
        await trace.send(agent, sid, ASK_SAVE, identity=docs_kit.IDENTITY)


@scenario("memo_agent")
async def approval_cancel(trace: Trace, env: AgentFolder) -> None:
    """CANCEL at an APPROVAL: nothing runs, the reply names the write that was not done."""
    sid = trace.session(env.sid("cancel"))
    model = env.script(
        call("sendMemo", {"text": "开会"}), call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"})
    )
    async with SkillYard() as yard:
        agent = await _agent(yard, env, model)
        await trace.send(agent, sid, "发一条备忘：开会", identity=memo_kit.IDENTITY)
        await trace.resume(agent, sid, "cancel")


# -- writes ----------------------------------------------------------------------------------------------------


@scenario("docs_agent")
async def idempotent_write_repeat(trace: Trace, env: DocsAgent) -> None:
    """A write without approval (confirm false + bypass): the identical second call returns the earlier result
    without a second execution (§14.2)."""
    sid = trace.session(env.sid("bump"))
    same = call("bumpDoc", {"q": "x"})
    async with SkillYard() as yard:
        agent = await _agent(yard, env, env.script(same, same, finish("已刷新")))
        await trace.send(agent, sid, "刷新", identity=docs_kit.IDENTITY)


@scenario("docs_agent")
async def uncertain_write_verify_checkpoint(trace: Trace, env: DocsAgent) -> None:
    """A timed-out write without a verify tool is UNKNOWN; the reopened node (new process) suspends at VERIFY;
    CONFIRM settles it SUCCESS and the identical write returns the earlier result; the node finishes (§14.3)."""
    sid = trace.session(env.sid("vq"))
    model = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo", "发备忘"),
        say("发送超时了"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        finish("已发送"),
    )
    async with SkillYard() as yard:
        agent = await _agent(yard, env, model)
        await trace.send(agent, sid, "发备忘：开会", identity=docs_kit.IDENTITY)
        await trace.resume(agent, sid, "CONFIRM")
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "发出去了吗", identity=docs_kit.IDENTITY)
    async with SkillYard() as yard:
        await trace.resume(await _agent(yard, env, model), sid, "CONFIRM")


@scenario("docs_agent")
async def uncertain_write_verify_tool(trace: Trace, env: DocsAgent) -> None:
    """A write that committed and timed out is UNKNOWN; when a new process reopens the node its verify tool
    (checkDoc, with call.title) runs automatically and settles it SUCCESS; the target is then complete."""
    env.contract(docs_kit.changed(lambda c: c.update(target="saveDoc")))
    sid = trace.session(env.sid("vdone"))
    model = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        say("保存超时了，稍后核实"),
        call("saveDoc", SAVE),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await _agent(yard, env, model)
        await trace.send(agent, sid, ASK_SAVE, identity=docs_kit.IDENTITY)
        await trace.resume(agent, sid, "CONFIRM")
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "保存好了吗？", identity=docs_kit.IDENTITY)


@scenario("notes_agent")
async def missing_param_call_tool(trace: Trace, env: AgentFolder) -> None:
    """A missing EVIDENCE argument with ``missing: CALL_TOOL`` (PARAM_PROVENANCE_CALL_TOOL): the model runs the
    named query and calls again with an id from its result (EVIDENCE)."""
    sid = trace.session(env.sid("calltool"))
    model = env.script(
        call("tagNote", {"tag": "紧急", "budget": 1}),
        call("findNotes", {"q": "季度总结"}),
        call("tagNote", {"noteId": "n-1", "tag": "紧急", "budget": 1}),
        finish("已打标签"),
    )
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "给季度总结打个紧急标签", identity=IDENTITY)


# -- outputs, failures, completion -----------------------------------------------------------------------------


def _outputs_contract(c: dict[str, Any]) -> None:
    c["inputs"] = {"topic": {"from": "session.category"}}
    c["outputs"]["memo"] = {"sources": ["USER"], "required": False, "entity": {"type": "memo", "scalar": "id"}}
    c["tools"]["pickTool"]["args"]["a"] = {"from": "prior.memo.id", "required": False}
    c["tools"]["pickTool"]["args"]["b"] = {"from": "inputs.topic", "required": False}


@scenario("memo_agent")
async def outputs_shares_entities(trace: Trace, env: AgentFolder) -> None:
    """builtin_output_set with EVIDENCE and USER sources; finish publishes share TASK (shared.noteId), share
    SESSION (session.category) and an output entity; the next task (new process) binds its input from the session
    and an argument from the entity (prior.*)."""
    env.contract(memo_kit.changed(_outputs_contract))
    sid = trace.session(env.sid("outputs"))
    spec = env.script(
        call("findNotes", {"q": "总结"}),
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
        call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_output_set", {"key": "memo", "value": "M-7", "sourceType": "USER", "sourceRef": "msg"}),
        finish("记住了"),
        call("pickTool", {}),
        finish("挑好了"),
    )
    async with SkillYard() as yard:
        agent = await _agent(yard, env, EvModel(spec))
        await trace.send(agent, sid, "找总结；分类用工作，备忘编号 M-7", identity=memo_kit.IDENTITY)
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, EvModel(spec)), sid, "挑一个", identity=memo_kit.IDENTITY)


@scenario("keeper_agent")
async def business_failure(trace: Trace, env: AgentFolder) -> None:
    """A business failure (the error spec's code E42): evidence SUCCESS with business_ok false; the model fails the
    node."""
    sid = trace.session(env.sid("business"))
    model = env.script(
        call("findNotes", {"q": "周报", "mode": "business"}), call("builtin_node_fail", {"reason": "查询失败"})
    )
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "找周报", identity=IDENTITY)


@scenario("notes_agent")
async def finish_refused_need_target(trace: Trace, env: AgentFolder) -> None:
    """The first write claims the target; an approval naming another tool is refused (APPROVAL_TOOL_MISMATCH) and
    the finish is refused while the target has no completed evidence (FINISH_NEED_TARGET)."""
    sid = trace.session(env.sid("needtarget"))
    model = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        finish("好了"),
        say("等确认"),
    )
    async with SkillYard() as yard:
        await trace.send(await _agent(yard, env, model), sid, "保存季度总结", identity=IDENTITY)


# -- the CLI ---------------------------------------------------------------------------------------------------

NOTES_EXAMPLE = EXAMPLES / "agents" / "notes"


@scenario("home")
async def cli_run_resume_json(trace: Trace, home: Path) -> None:
    """The README demo through ``skillyard agent run --json`` (suspends at APPROVAL) and ``agent resume --json``
    (CONFIRM saves the note once)."""
    sid = trace.session(f"golden-cli-{uuid.uuid4().hex[:10]}")  # the database outlives the test
    run = skillyard_cli(
        *("agent", "run", str(NOTES_EXAMPLE), "--session", sid, "--json"),
        *("--message", "把标题为季度总结的笔记保存下来：收入增长 12%"),
        *("--model", f"script:{NOTES_EXAMPLE / 'demo.yaml'}", "--context", json.dumps(IDENTITY)),
    )
    await trace.record({"cli": "agent run --json", "exit_code": run.returncode}, json.loads(run.stdout))
    done = skillyard_cli("agent", "resume", "--session", sid, "--action", "CONFIRM", "--json")
    await trace.record(
        {"cli": "agent resume --action CONFIRM --json", "exit_code": done.returncode}, json.loads(done.stdout)
    )


def _example_notes(home: Path) -> Callable[[], list[dict[str, Any]]]:
    """The example's tools keep no log: save_note appends exactly its input (title, text, owner) to the session's
    notes.json, so each saved note is one save_note execution with those arguments."""

    def executions() -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in sorted(home.glob("workspaces/*/notes/notes.json")):
            rows += [{"tool": "save_note", "input": n} for n in json.loads(path.read_text(encoding="utf-8"))]
        return rows

    return executions


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_golden(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Run the scenario on a fresh agent folder (its conftest fixture) and compare its trace with the golden file."""
    fixture, run = SCENARIOS[name]
    env = request.getfixturevalue(fixture)
    trace = Trace(_example_notes(env) if fixture == "home" else env.calls, tmp_path)
    await run(trace, env)
    check_golden(name, trace)
