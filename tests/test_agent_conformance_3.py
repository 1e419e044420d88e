"""Review probes, round 3, for issue 5 (the contract-driven agent runtime, part 1): the §14 write gate across turns
and restarts, unknown outcomes and their verification (§14.3, §14.4, §6.4), idempotency (§14.2), the fingerprint
fuse with writes and with CONFIRM (§13, §14.1 step 3), and the §17 code + next step of every observation.

Written black-box from the issue text ("Decisions where the spec is ambiguous"), skill-contract-spec.md and
docs/agents.md. Real parts only: in-process business skills that log every real execution and keep a small
"database" file (so a write can commit and then time out, and the verify tool really looks for it), real
PostgreSQL (``db_env``), scripted models; a restart is a new ``SkillYard`` on the same database.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.agent_probes import call, calls, finish, needs_db, say, write_files
from skillyard import SkillYard
from skillyard.agent import ErrorCode
from skillyard.agent.runner import AgentError
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}

APPROVAL_REQUIRED = "agent_runtime.42221"
PENDING_VERIFY = "agent_runtime.40030"
TIMEOUT = "agent_runtime.40016"
UNREACHABLE = "agent_runtime.40017"
IO_ERROR = "agent_runtime.40018"
FINGERPRINT_TRIP = "agent_runtime.40026"
OPEN_EVIDENCE = "agent_runtime.42251"
NEED_TARGET = "agent_runtime.42254"
NOT_GATED = "agent_runtime.42245"
MISMATCH = "agent_runtime.42246"
ALL_CODES = {str(code) for code in ErrorCode}

HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
DB = pathlib.Path({db!r})
FAULT = pathlib.Path({fault!r})
NAME = {name!r}


def rows():
    if not DB.exists():
        return []
    return [json.loads(x) for x in DB.read_text(encoding="utf-8").splitlines()]


def commit(row):
    with DB.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\\n")


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key"),
                            "user": ctx.get("user_id")}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if NAME == "checkDoc":
        if FAULT.exists():
            raise OSError("the lookup service is down")
        hits = [r for r in rows() if r.get("title") == input.get("title")]
        return {{"found": bool(hits), "hits": hits}}
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "io":
        raise OSError("disk gone before the commit")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate"}}
    if mode == "lost":  # the request never reaches the business system, the call hangs
        await asyncio.sleep(5)
    commit({{"tool": NAME, **{{k: v for k, v in input.items() if k != "mode"}}}})
    if mode == "timeout":  # commit, then the answer never comes back
        await asyncio.sleep(5)
    return {result}
"""

RESULTS = {
    "saveDoc": '{"code": 200, "data": {"id": "d-" + str(input.get("title")), "title": input.get("title")}}',
    "delDoc": '{"code": 200, "data": {"deleted": input.get("title")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "bumpDoc": '{"code": 200, "data": {"bumped": input.get("q")}}',
    "findDocs": '{"code": 200, "data": {"records": [r for r in rows()]}}',
    "checkDoc": "None",
}
SCHEMAS: dict[str, dict[str, Any]] = {
    "saveDoc": {
        "type": "object",
        "properties": {"title": {}, "owner": {}, "folder": {}, "kind": {}, "mode": {}},
        "required": ["title"],
    },
    "delDoc": {"type": "object", "properties": {"title": {}, "mode": {}}, "required": ["title"]},
    "sendMemo": {"type": "object", "properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "bumpDoc": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "findDocs": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "checkDoc": {"type": "object", "properties": {"title": {}, "mode": {}}},
}
TOOLS = list(RESULTS)

FREE = {"sources": ["MODEL"], "required": False}
OK200 = {"path": "code", "op": "EQ", "value": 200}
CONTRACT: dict[str, Any] = {
    "tools": {
        "saveDoc": {
            "label": "正在保存文档",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "所有者"},
                "folder": {"from": "session.folder", "required": False, "label": "目录"},
                "mode": FREE,
            },
            "success": OK200,
            "extracts": [{"key": "doc", "path": "data"}],
            "verify": {"tool": "checkDoc", "args": {"title": {"from": "call.title"}}},
        },
        "delDoc": {
            "label": "正在删除文档",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {"title": {"sources": ["USER"], "label": "标题"}, "mode": FREE},
            "success": OK200,
        },
        "sendMemo": {
            "label": "正在发送备忘",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": OK200,
        },
        "bumpDoc": {
            "label": "正在刷新",
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
        },
        "findDocs": {
            "label": "正在查找文档",
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
            "extracts": [{"key": "docs", "path": "data.records"}],
        },
        "checkDoc": {
            "label": "正在核实文档",
            "args": {"title": FREE, "mode": FREE},
            "success": {"path": "found", "op": "TRUTHY"},
        },
    },
}


class Env:
    """An agent folder in tmp_path; its business skills log every real execution and share a small database."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.db = root / "docs.jsonl"
        self.fault = root / "checkDoc.down"
        self.dir = root / "docs_agent"
        self.scripts = 0
        self.uid = uuid.uuid4().hex[:10]
        skills = self.dir / "skills"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: docs\nagent_name: Doc keeper\nskills: [docs.keeper]\n---\n"
            "# Identity\nA careful document keeper.\n# Mission\nKeep the user's documents.\n",
            skills / "keeper" / "SKILL.md": "---\nname: keeper\nskill_key: docs.keeper\ndescription: Keeps docs.\n"
            f"tools: [{', '.join(TOOLS)}]\n---\nThe keeper manual: save what the user dictates.\n",
        }
        for name, result in RESULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\nexec: {{timeout: 0.5}}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(
                log=str(self.log), db=str(self.db), fault=str(self.fault), name=name, result=result
            )
            files[folder / "schema.json"] = json.dumps(SCHEMAS[name])
        write_files(files)
        self.contract(CONTRACT)

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def contract(self, contract: dict[str, Any]) -> None:
        text = json.dumps(contract, ensure_ascii=False)
        (self.dir / "skills" / "keeper" / "contract.json").write_text(text, encoding="utf-8")

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

    def committed(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.db.exists():
            return []
        rows = [json.loads(x) for x in self.db.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def changed(mutate: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    return contract


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "bumpDoc")
    return Env(tmp_path)


pytestmark = needs_db


def approve(tool: str, summary: str = "请确认") -> dict[str, Any]:
    return call("builtin_node_approval", {"summary": summary, "toolName": tool})


def codes(turn: TurnResult) -> list[str | None]:
    """The codes of the turn's calls except the automatic verify calls (the model never calls checkDoc itself)."""
    return [o.code for o in turn.observations if o.tool != "checkDoc"]


def of(turn: TurnResult, tool: str) -> list[Any]:
    """The observations of one tool (an automatic verify call is an observation of its own)."""
    return [o for o in turn.observations if o.tool == tool]


def statuses(turn: TurnResult, tool: str) -> list[str]:
    return [e["status"] for e in turn.evidence if e["tool"] == tool]


def assert_coded(*turns: TurnResult) -> None:
    """Issue: "Every observation the model sees carries the spec's error code (§17) and a next step"."""
    for turn in turns:
        for o in turn.observations:
            if o.ok:
                continue
            assert o.code in ALL_CODES or o.code == "E42", (o.tool, o.code, o.content)
            assert o.next_step and str(o.next_step).strip(), (o.tool, o.code, o.content)


async def store_of(yard: SkillYard) -> AgentStore:
    return AgentStore(yard.database)


async def set_session_value(session_id: str, key: str, value: Any) -> None:
    async with SkillYard() as yard:
        store = await store_of(yard)
        session = await store.load_session(session_id)
        assert session is not None
        session.values[key] = value
        await store.save_session(session)


async def age_checkpoint(session_id: str, seconds: float) -> None:
    async with SkillYard() as yard:
        store = await store_of(yard)
        session = await store.load_session(session_id)
        assert session is not None and session.node_id and session.task_id
        node = await store.load_node(session.node_id)
        task = await store.load_task(session.task_id)
        assert node is not None and task is not None and node.checkpoint is not None
        node.checkpoint.created_at -= seconds
        if node.gated is not None:
            node.gated.gated_at -= seconds
        await store.save_turn(node, task, session)


SAVE = {"title": "季度总结"}
ASK_SAVE = "请保存文档《季度总结》"


# =====================================================================================================================
# (a) §14.1 the write gate across turns and restarts
# =====================================================================================================================


async def test_confirm_runs_the_approved_write_once_with_bound_arguments_and_its_idempotency_key(env: Env):
    """§14.1 steps 1–3: APPROVAL_REQUIRED → approval → CONFIRM executes the write once with the arguments the gate
    bound (owner from platform.userId, not the model's value). Issue: the idempotency key reaches the skill as
    runtime_context["idempotency_key"]; docs: the hex SHA-256 of the key paths' values (here only `title`)."""
    script = env.script(call("saveDoc", {"title": "季度总结", "owner": "999"}), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("ok"), ASK_SAVE, identity=IDENTITY)
    assert first.status == "SUSPENDED" and first.checkpoint and first.checkpoint["type"] == "APPROVAL"
    assert codes(first)[0] == APPROVAL_REQUIRED and env.calls() == []
    async with SkillYard() as yard:  # a new process confirms
        agent = await yard.agent(env.dir, model=script)
        done = await agent.resume(env.sid("ok"), "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    rows = env.calls("saveDoc")
    assert len(rows) == 1 and rows[0]["input"]["owner"] == "42" and rows[0]["input"]["title"] == "季度总结"
    assert rows[0]["key"] == hashlib.sha256("季度总结".encode()).hexdigest()
    assert_coded(first, done)


async def test_confirm_after_a_session_value_changed_runs_nothing_and_asks_again(env: Env):
    """Issue: "CONFIRM after the bound arguments or their summary changed: the write is not executed and a new
    APPROVAL checkpoint is raised (fail closed)"; docs name exactly this example (a `from: session.x` value
    changed). The new checkpoint shows the new value, and its CONFIRM runs the write with it."""
    sid = env.sid("sess")
    script = env.script(say("好的"), call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "你好", identity=IDENTITY)
    await set_session_value(sid, "folder", "工作")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        gated = await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    assert gated.checkpoint and "目录：工作" in gated.checkpoint["question"], gated.checkpoint
    await set_session_value(sid, "folder", "私人")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
        assert env.calls() == [], "the write ran although its arguments changed after the approval"
        assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"
        assert "目录：私人" in again.checkpoint["question"], again.checkpoint
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert [r["input"].get("folder") for r in env.calls("saveDoc")] == ["私人"]


async def test_confirm_after_a_const_argument_changed_in_a_new_process_asks_again(env: Env):
    """§14.1 step 3 "校验参数摘要未变": a new process loads a contract whose `const` for an argument changed between
    the approval and the CONFIRM; the bound arguments differ → nothing runs, a new APPROVAL shows the new value."""
    sid = env.sid("const")
    env.contract(changed(lambda c: c["tools"]["saveDoc"]["args"].update(kind={"const": "草稿", "label": "类型"})))
    script = env.script(call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    assert first.checkpoint and "类型：草稿" in first.checkpoint["question"]
    env.contract(changed(lambda c: c["tools"]["saveDoc"]["args"].update(kind={"const": "正式", "label": "类型"})))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    assert env.calls() == [], "an approval of 类型：草稿 executed a write with 类型：正式"
    assert again.status == "SUSPENDED" and again.checkpoint and "类型：正式" in again.checkpoint["question"]


async def test_confirm_after_a_masked_sensitive_value_changed_asks_again(env: Env):
    """Issue: CONFIRM after "the bound arguments *or* their summary changed" → nothing runs, a new APPROVAL. A
    sensitive argument is masked (`***`, §5.2), so its summary line stays the same while the bound value changes:
    the bound arguments decide, the user never approved the new secret."""
    sid = env.sid("secret")
    env.contract(
        changed(
            lambda c: c["tools"]["saveDoc"]["args"].update(
                kind={"from": "session.secret", "required": False, "sensitive": True, "label": "口令"}
            )
        )
    )
    script = env.script(say("好的"), call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "你好", identity=IDENTITY)
    await set_session_value(sid, "secret", "old-secret")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        gated = await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    assert gated.checkpoint and "口令：***" in gated.checkpoint["question"], gated.checkpoint
    assert "old-secret" not in gated.checkpoint["question"]
    await set_session_value(sid, "secret", "new-secret")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    assert env.calls() == [], f"executed {env.calls()} although the bound secret changed after the approval"
    assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"


async def test_confirm_after_a_platform_injected_value_changed_asks_again(env: Env):
    """§11: platform-injected arguments are not shown in the approval text, but they are bound arguments: when the
    caller identity behind `owner` (from platform.userId) changed between approval and CONFIRM, the bound arguments
    changed → fail closed (a new APPROVAL, nothing runs)."""
    sid = env.sid("plat")
    script = env.script(call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        gated = await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    assert gated.checkpoint and "42" not in gated.checkpoint["question"]
    async with SkillYard() as yard:
        store = await store_of(yard)
        session = await store.load_session(sid)
        assert session is not None and session.identity.get("user_id") == "42"
        session.identity["user_id"] = "77"
        await store.save_session(session)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    ran = [r["input"].get("owner") for r in env.calls("saveDoc")]
    assert ran == [], f"executed with owner {ran} after the identity changed"
    assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"


async def test_an_expired_approval_asks_again_and_the_fresh_approval_runs_once(env: Env):
    """§14.1 step 4 / issue: approvals older than `reconfirm_after` (default 24 h) need a fresh confirmation. The
    fresh APPROVAL is a new approval: its CONFIRM (right away, in yet another process) runs the write once."""
    sid = env.sid("expire")
    script = env.script(call("saveDoc", SAVE), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    await age_checkpoint(sid, 25 * 3600)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.resume(sid, "CONFIRM")
    assert again.status == "SUSPENDED" and again.checkpoint and again.checkpoint["type"] == "APPROVAL"
    assert "标题：季度总结" in again.checkpoint["question"] and env.calls() == []
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE" and len(env.calls("saveDoc")) == 1, done.as_dict()


async def test_reject_at_approval_after_a_restart_cancels_the_task_and_names_the_write(env: Env):
    """§14.1 step 3': REJECT → the write is not executed, node and task are cancelled, and the reply says which
    operation was not done. The next message starts a new task, where the identical write needs a new approval."""
    sid = env.sid("reject")
    script = env.script(call("saveDoc", SAVE), approve("saveDoc", "保存文档"), call("saveDoc", SAVE), say("要确认"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        rejected = await agent.resume(sid, "REJECT")
        assert rejected.status == "CANCELLED" and env.calls() == []
        reply = str(rejected.reply)
        assert any(word in reply for word in ("saveDoc", "正在保存文档", "季度总结")), reply
        with pytest.raises(AgentError):
            await agent.resume(sid, "CONFIRM")  # nothing is waiting for a confirmation any more
        later = await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    assert later.task_id != first.task_id and codes(later) == [APPROVAL_REQUIRED]
    assert env.calls() == []


async def test_a_second_confirm_after_the_write_ran_is_refused_and_runs_nothing(env: Env):
    """§14.1: one approval executes the write once. Once the node has moved on (the model answered with text) there
    is no checkpoint: a second CONFIRM — in a new process — raises AgentError and executes nothing."""
    sid = env.sid("twice")
    script = env.script(call("saveDoc", SAVE), approve("saveDoc"), say("已保存，还需要什么？"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert after.status == "RUNNING" and len(env.calls("saveDoc")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        with pytest.raises(AgentError):
            await agent.resume(sid, "CONFIRM")
    assert len(env.calls("saveDoc")) == 1


async def test_an_approved_write_does_not_approve_a_different_write(env: Env):
    """§14.1/§14.2: an approval is for "that" write call. After it ran, another write tool (delDoc) and the same tool
    with another idempotency key (saveDoc with another title) each need their own approval; nothing else runs."""
    script = env.script(
        call("saveDoc", SAVE),
        approve("saveDoc"),
        call("delDoc", {"title": "季度总结"}),
        call("saveDoc", {"title": "周报"}),
        say("都要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("other"), "保存《季度总结》和《周报》，再删掉季度总结", identity=IDENTITY)
        after = await agent.resume(env.sid("other"), "CONFIRM")
    assert codes(after) == [None, APPROVAL_REQUIRED, APPROVAL_REQUIRED], after.as_dict()
    assert [r["tool"] for r in env.calls()] == ["saveDoc"]
    assert_coded(after)


async def test_two_different_writes_in_one_reply_are_both_stopped_at_the_gate(env: Env):
    """§14.1 step 1: every write call meets the write gate. Two writes in one model reply: both answer
    APPROVAL_REQUIRED with a next step, nothing is executed, no evidence is registered (§13 before-phase)."""
    turn = await _send(
        env,
        "保存《季度总结》并发备忘：开会",
        calls(("saveDoc", SAVE), ("sendMemo", {"text": "开会"})),
        say("需要确认"),
        session="two",
    )
    assert codes(turn) == [APPROVAL_REQUIRED, APPROVAL_REQUIRED], turn.as_dict()
    assert env.calls() == [] and turn.evidence == []
    assert_coded(turn)


async def test_two_gated_writes_in_one_reply_confirm_runs_only_the_approved_one(env: Env):
    """Fail closed (issue): with two writes stopped in one reply, an approval names one tool; its CONFIRM executes
    exactly that write. The other write still needs its own approval — it must never ride along."""
    script = env.script(
        calls(("saveDoc", SAVE), ("sendMemo", {"text": "开会"})),
        approve("sendMemo", "发备忘"),
        call("saveDoc", SAVE),
        say("保存还要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("two2"), "保存《季度总结》并发备忘：开会", identity=IDENTITY)
        assert first.status == "SUSPENDED" and first.checkpoint, first.as_dict()
        assert first.checkpoint["tool"] == "sendMemo" and "内容：开会" in first.checkpoint["question"]
        after = await agent.resume(env.sid("two2"), "CONFIRM")
    assert [r["tool"] for r in env.calls()] == ["sendMemo"], env.calls()
    assert codes(after) == [None, APPROVAL_REQUIRED], after.as_dict()


async def test_the_approval_names_the_write_the_gate_holds_when_an_earlier_one_was_gated(env: Env):
    """§12 builtin_node_approval: approval is for "the write stopped by the write gate"; a mismatch names the actual
    gated tool (APPROVAL_TOOL_MISMATCH). After saveDoc then sendMemo were stopped in separate replies, the model
    approves one of them: the checkpoint's tool and summary must describe the very write that CONFIRM then runs."""
    script = env.script(
        call("saveDoc", SAVE),
        call("sendMemo", {"text": "开会"}),
        approve("saveDoc", "保存"),
        approve("sendMemo", "发备忘"),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        turn = await agent.send(env.sid("held"), "保存《季度总结》并发备忘：开会", identity=IDENTITY)
        assert turn.status == "SUSPENDED" and turn.checkpoint, turn.as_dict()
        held = turn.checkpoint["tool"]
        line = {"saveDoc": "标题：季度总结", "sendMemo": "内容：开会"}[held]
        assert line in turn.checkpoint["question"], turn.checkpoint
        await agent.resume(env.sid("held"), "CONFIRM")
    assert [r["tool"] for r in env.calls()] == [held], (held, env.calls())
    assert_coded(turn)


async def test_a_reply_at_approval_drops_the_write_and_a_later_identical_call_needs_a_new_approval(env: Env):
    """Docs (APPROVAL + REPLY): the gated write is dropped, the text joins the conversation. A later identical call
    of the write is gated again; a stale approval never executes it. After a restart, too."""
    sid = env.sid("reply")
    script = env.script(call("saveDoc", SAVE), approve("saveDoc"), call("saveDoc", SAVE), say("要确认"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        turn = await agent.send(sid, "等一下，先别保存", identity=IDENTITY)
    assert turn.status == "RUNNING" and codes(turn) == [APPROVAL_REQUIRED], turn.as_dict()
    assert env.calls() == []


# =====================================================================================================================
# (b) §14.3 / §14.4 unknown outcomes and their verification
# =====================================================================================================================


async def test_a_timed_out_write_is_unknown_and_the_identical_retry_is_pending_verify_without_approval(env: Env):
    """§14.4: a write that times out is UNKNOWN (TOOL_TIMEOUT). §14.2: the identical write while uncertain is
    refused (WRITE_PENDING_VERIFY) — not sent to approval, not executed. §10.2 step 2: finish is refused
    (FINISH_OPEN_EVIDENCE). Issue: writes are never retried automatically."""
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        call("saveDoc", SAVE),
        finish("已保存"),
        say("还不确定"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("unk"), ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(env.sid("unk"), "CONFIRM")
    assert codes(after) == [TIMEOUT, PENDING_VERIFY, OPEN_EVIDENCE], after.as_dict()
    assert statuses(after, "saveDoc") == ["UNKNOWN"] and after.status == "RUNNING"
    assert len(env.calls("saveDoc")) == 1 and env.calls("checkDoc") == []
    assert after.checkpoint is None
    assert_coded(after)


async def test_verify_says_done_after_a_restart_so_the_write_succeeded_and_its_result_is_reused(env: Env):
    """§14.3: when the node reopens (a new process), the configured verify tool runs with `call.title`; §6.4: the
    verify tool's success → the write counts as SUCCESS. §14.2: the identical write then returns the earlier
    result without approval and without a call; the target is complete, so finish passes."""
    sid = env.sid("vdone")
    env.contract(changed(lambda c: c.update(target="saveDoc")))
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        say("保存超时了，稍后核实"),
        call("saveDoc", SAVE),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert statuses(after, "saveDoc") == ["UNKNOWN"] and len(env.committed("saveDoc")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.send(sid, "保存好了吗？", identity=IDENTITY)
    assert [r["input"].get("title") for r in env.calls("checkDoc")] == ["季度总结"]
    assert statuses(done, "saveDoc") == ["SUCCESS"], done.as_dict()
    [reused] = of(done, "saveDoc")
    assert reused.ok and reused.code is None, reused
    assert len(env.calls("saveDoc")) == 1 and len(env.committed("saveDoc")) == 1
    assert done.status == "DONE", done.as_dict()


async def test_verify_says_not_done_after_a_restart_so_the_write_may_run_again_with_a_new_approval(env: Env):
    """§6.4: the verify tool's business failure → the write counts as FAILED. §14.2: a failed write may be called
    again normally, i.e. through the write gate (a new approval); CONFIRM executes it a second time."""
    sid = env.sid("vnot")
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "lost"}),
        approve("saveDoc"),
        say("保存超时了"),
        call("saveDoc", SAVE),
        approve("saveDoc", "重新保存"),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert codes(after)[0] == TIMEOUT and env.committed() == []
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.send(sid, "没保存上吗？", identity=IDENTITY)
        assert len(env.calls("checkDoc")) == 1
        assert statuses(again, "saveDoc") == ["FAILED"], again.as_dict()
        assert codes(again) == [APPROVAL_REQUIRED, None] and again.status == "SUSPENDED"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert len(env.calls("saveDoc")) == 2 and len(env.committed("saveDoc")) == 1
    assert_coded(after, again, done)


async def test_a_write_verified_as_not_done_does_not_complete_the_target(env: Env):
    """§10.2 step 4 + §6.4: a write the verify tool found not done is FAILED, so the target is not complete and
    finish answers FINISH_NEED_TARGET (after the open-evidence gate is cleared)."""
    sid = env.sid("vtarget")
    env.contract(changed(lambda c: c.update(target="saveDoc")))
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "lost"}),
        approve("saveDoc"),
        say("超时了"),
        finish("已保存"),
        say("还没保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
        turn = await agent.send(sid, "好了吗", identity=IDENTITY)
    assert statuses(turn, "saveDoc") == ["FAILED"] and codes(turn) == [NEED_TARGET], turn.as_dict()
    assert_coded(turn)


async def test_a_failed_verify_call_leaves_the_write_unknown_and_the_next_reopening_verifies_again(env: Env):
    """Docs (chain.verify_write): "a failed verify call leaves it UNKNOWN"; §14.3: until there is a conclusion the
    same write cannot be called again and the node cannot finish. The next reopening verifies again."""
    sid = env.sid("vfail")
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        say("超时了"),
        call("saveDoc", SAVE),
        finish("已保存"),
        say("还在核实"),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
    env.fault.write_text("down", encoding="utf-8")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        stuck = await agent.send(sid, "好了吗", identity=IDENTITY)
    assert len(env.calls("checkDoc")) == 1 and statuses(stuck, "saveDoc") == ["UNKNOWN"], stuck.as_dict()
    assert codes(stuck) == [PENDING_VERIFY, OPEN_EVIDENCE] and len(env.calls("saveDoc")) == 1
    env.fault.unlink()
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.send(sid, "现在呢", identity=IDENTITY)
    assert len(env.calls("checkDoc")) == 2 and statuses(done, "saveDoc") == ["SUCCESS"], done.as_dict()
    assert done.status == "DONE"
    assert_coded(stuck, done)


async def test_without_a_verify_tool_the_user_is_asked_at_a_verify_checkpoint_across_a_restart(env: Env):
    """§14.3: no verify configured → the node suspends at a VERIFY checkpoint when it reopens, before the model runs
    again. The checkpoint survives a restart; CONFIRM (it took effect) → evidence SUCCESS, the node continues and
    the identical write returns the earlier result without a new approval or execution."""
    sid = env.sid("vq")
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo", "发备忘"),
        say("发送超时了"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        finish("已发送"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=IDENTITY)
        after = await agent.resume(sid, "CONFIRM")
    assert statuses(after, "sendMemo") == ["UNKNOWN"]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        asked = await agent.send(sid, "发出去了吗", identity=IDENTITY)
    assert asked.status == "SUSPENDED" and asked.checkpoint and asked.checkpoint["type"] == "VERIFY", asked.as_dict()
    assert asked.checkpoint["tool"] == "sendMemo" and asked.observations == []
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert statuses(done, "sendMemo") == ["SUCCESS"], done.as_dict()
    assert done.observations and done.observations[0].ok and done.observations[0].code is None
    assert done.status == "DONE" and len(env.calls("sendMemo")) == 1


async def test_the_verify_question_tells_the_user_which_write_it_is_about(env: Env):
    """§14.3: without verify the user confirms whether the write took effect (docs: a VERIFY answer "then asks about
    the next uncertain write"). With two uncertain memos (开会, 放假) the two questions must say which memo each is
    about, or the user's CONFIRM / REJECT could settle the wrong write."""
    sid = env.sid("vwhich")
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo"),
        call("sendMemo", {"text": "放假", "mode": "timeout"}),
        approve("sendMemo"),
        say("都超时了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "发两条备忘：开会；放假", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
        first = await agent.resume(sid, "CONFIRM")  # runs 放假, then asks about the older 开会
        assert first.checkpoint and first.checkpoint["type"] == "VERIFY", first.as_dict()
        second = await agent.resume(sid, "CONFIRM")
        assert second.checkpoint and second.checkpoint["type"] == "VERIFY", second.as_dict()
    questions = (first.checkpoint["question"], second.checkpoint["question"])
    assert "开会" in questions[0] and "放假" in questions[1], questions


async def test_reject_at_a_verify_checkpoint_marks_the_write_failed_and_the_node_continues(env: Env):
    """Issue: "VERIFY checkpoint resume: … REJECT = it did not (FAILED); either way the node continues" (unlike REJECT
    at APPROVAL, the task is not cancelled). The identical write may then be called again, through a new approval."""
    sid = env.sid("vrej")
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "lost"}),
        approve("sendMemo", "发备忘"),
        say("超时了"),
        call("sendMemo", {"text": "开会"}),
        approve("sendMemo", "重发"),
        finish("已发送"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
        asked = await agent.send(sid, "发出去了吗", identity=IDENTITY)
        assert asked.checkpoint and asked.checkpoint["type"] == "VERIFY"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        rejected = await agent.resume(sid, "REJECT")
        assert rejected.status == "SUSPENDED" and rejected.checkpoint, rejected.as_dict()
        assert rejected.checkpoint["type"] == "APPROVAL" and statuses(rejected, "sendMemo") == ["FAILED"]
        assert codes(rejected) == [APPROVAL_REQUIRED, None]
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE" and len(env.calls("sendMemo")) == 2, done.as_dict()


async def test_a_reply_at_a_verify_checkpoint_keeps_it_and_cancel_cancels_the_task(env: Env):
    """Docs (VERIFY row): REPLY / send → "nothing changes: the node stays suspended at the same checkpoint" (the model
    is not asked); CANCEL → the task is cancelled, nothing runs."""
    sid = env.sid("vreply")
    script = env.script(call("sendMemo", {"text": "开会", "mode": "timeout"}), approve("sendMemo"), say("超时了"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
        asked = await agent.send(sid, "发出去了吗", identity=IDENTITY)
        still = await agent.send(sid, "我不知道", identity=IDENTITY)
        assert still.status == "SUSPENDED" and still.checkpoint == asked.checkpoint, still.as_dict()
        assert statuses(still, "sendMemo") == ["UNKNOWN"]
        cancelled = await agent.resume(sid, "CANCEL")
    assert cancelled.status == "CANCELLED" and len(env.calls("sendMemo")) == 1


async def test_two_uncertain_writes_without_verify_are_asked_about_one_after_the_other(env: Env):
    """Docs (Restarts): "a CONFIRM runs the approved write first, then settles the older uncertain writes, and leaves
    the write that has just run … for the next reopening"; a VERIFY answer "then asks about the next uncertain
    write"; only when none is left does the model run again (§14.3)."""
    sid = env.sid("vtwo")
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo"),
        call("delDoc", {"title": "周报", "mode": "timeout"}),
        approve("delDoc"),
        finish("都处理了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "发备忘：开会，删掉《周报》", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
        second = await agent.resume(sid, "CONFIRM")
    assert {e["tool"]: e["status"] for e in second.evidence} == {"sendMemo": "UNKNOWN", "delDoc": "UNKNOWN"}
    assert second.checkpoint and second.checkpoint["type"] == "VERIFY", second.as_dict()
    assert second.checkpoint["tool"] == "sendMemo"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        next_q = await agent.resume(sid, "CONFIRM")
        assert next_q.checkpoint and next_q.checkpoint["type"] == "VERIFY", next_q.as_dict()
        assert next_q.checkpoint["tool"] == "delDoc" and statuses(next_q, "sendMemo") == ["SUCCESS"]
        done = await agent.resume(sid, "REJECT")
    assert done.status == "DONE", done.as_dict()
    assert {e["tool"]: e["status"] for e in done.evidence} == {"sendMemo": "SUCCESS", "delDoc": "FAILED"}
    assert len(env.calls()) == 2


async def test_an_uncertain_write_does_not_block_a_different_write(env: Env):
    """§14.2 is per "tool + idempotency key": an uncertain saveDoc《季度总结》 refuses only its identical write; the
    same tool with another title is a different write and goes to approval as usual."""
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        call("saveDoc", {"title": "季度总结"}),
        call("saveDoc", {"title": "周报"}),
        say("周报要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("diff"), "保存《季度总结》和《周报》", identity=IDENTITY)
        after = await agent.resume(env.sid("diff"), "CONFIRM")
    assert codes(after) == [TIMEOUT, PENDING_VERIFY, APPROVAL_REQUIRED], after.as_dict()


async def test_an_unreachable_write_is_failed_and_may_be_approved_again(env: Env):
    """§14.4: an unreachable service is a failure for writes too (not UNKNOWN): no verify, no WRITE_PENDING_VERIFY;
    the identical write goes through a new approval (§14.2 "失败 → 正常调用")."""
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "refused"}),
        approve("saveDoc"),
        call("saveDoc", SAVE),
        say("要再确认"),
        say("好"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("unr"), ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(env.sid("unr"), "CONFIRM")
        assert codes(after) == [UNREACHABLE, APPROVAL_REQUIRED] and statuses(after, "saveDoc") == ["FAILED"]
        later = await agent.send(env.sid("unr"), "再试试", identity=IDENTITY)
    assert env.calls("checkDoc") == [] and later.status == "RUNNING"
    assert_coded(after)


async def test_an_io_error_write_is_unknown_and_verified_when_a_follow_up_answer_reopens_the_node(env: Env):
    """§14.4: an IO error on a write is UNKNOWN. Docs/§14.3: a FOLLOW_UP answer reopens the node, so the uncertain
    write is verified before the model runs again (here: not committed → FAILED)."""
    sid = env.sid("fu")
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "io"}),
        approve("saveDoc"),
        call("builtin_node_follow_up", {"question": "备忘内容是什么？", "expectedFields": ["text"]}),
        say("知道了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        asked = await agent.resume(sid, "CONFIRM")
    assert codes(asked)[0] == IO_ERROR and statuses(asked, "saveDoc") == ["UNKNOWN"]
    assert asked.checkpoint and asked.checkpoint["type"] == "FOLLOW_UP"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        answered = await agent.resume(sid, "REPLY", text="开会")
    assert len(env.calls("checkDoc")) == 1 and statuses(answered, "saveDoc") == ["FAILED"], answered.as_dict()


async def test_a_reply_at_an_approval_reopens_the_node_and_verifies_the_older_uncertain_write(env: Env):
    """Docs (Restarts) / §14.3: on a resume — "a FOLLOW_UP answer, an APPROVAL reply, a VERIFY answer" — every
    UNKNOWN write is checked with its verify tool before the model runs again; here in a new process."""
    sid = env.sid("areply")
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),
        approve("saveDoc"),
        call("sendMemo", {"text": "开会"}),
        approve("sendMemo"),
        say("好的，不发了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "保存《季度总结》，再发备忘：开会", identity=IDENTITY)
        gated = await agent.resume(sid, "CONFIRM")
    assert statuses(gated, "saveDoc") == ["UNKNOWN"] and gated.checkpoint and gated.checkpoint["tool"] == "sendMemo"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        turn = await agent.send(sid, "备忘先不发", identity=IDENTITY)
    assert len(env.calls("checkDoc")) == 1 and statuses(turn, "saveDoc") == ["SUCCESS"], turn.as_dict()
    assert env.calls("sendMemo") == [] and turn.status == "RUNNING"


async def test_an_uncertain_write_of_a_cancelled_task_does_not_block_the_next_task(env: Env):
    """§14.2 is "同一任务内": the uncertain write belongs to a task that was cancelled; in the session's next task the
    identical write is a new write (approval), not WRITE_PENDING_VERIFY of another task's evidence."""
    sid = env.sid("newtask")
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        approve("sendMemo"),
        say("超时了"),
        call("sendMemo", {"text": "开会", "mode": "timeout"}),
        say("要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(sid, "发备忘：开会", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
        asked = await agent.send(sid, "发了吗", identity=IDENTITY)
        assert asked.checkpoint and asked.checkpoint["type"] == "VERIFY"
        assert (await agent.resume(sid, "CANCEL")).status == "CANCELLED"
        later = await agent.send(sid, "重新发备忘：开会", identity=IDENTITY)
    assert later.task_id != first.task_id and codes(later) == [APPROVAL_REQUIRED], later.as_dict()


# =====================================================================================================================
# (c) §14.2 idempotency
# =====================================================================================================================


async def test_identical_write_after_success_is_reused_across_a_restart_without_approval_or_execution(env: Env):
    """Issue (write gate order): an identical write (same tool + idempotency key) whose evidence is a business success
    returns the earlier result without a new approval and without calling the tool — also in a new process."""
    sid = env.sid("reuse")
    script = env.script(call("saveDoc", SAVE), approve("saveDoc"), say("已保存"), call("saveDoc", SAVE), say("同上"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        first = await agent.resume(sid, "CONFIRM")
    assert codes(first) == [None] and len(env.calls("saveDoc")) == 1
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.send(sid, "再保存一次《季度总结》", identity=IDENTITY)
    reused = again.observations[0]
    assert reused.ok and reused.code is None and again.status == "RUNNING", again.as_dict()
    assert reused.evidence_id == first.observations[0].evidence_id
    assert reused.content == first.observations[0].content
    assert len(env.calls("saveDoc")) == 1 and len(env.committed("saveDoc")) == 1


async def test_a_different_idempotency_key_after_success_needs_a_new_approval_across_a_restart(env: Env):
    sid = env.sid("newkey")
    script = env.script(
        call("saveDoc", SAVE), approve("saveDoc"), say("已保存"), call("saveDoc", {"title": "周报"}), say("要确认")
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "保存《季度总结》，然后保存《周报》", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        turn = await agent.send(sid, "还有周报", identity=IDENTITY)
    assert codes(turn)[0] == APPROVAL_REQUIRED and len(env.calls("saveDoc")) == 1, turn.as_dict()


@pytest.mark.parametrize(
    ("key_paths", "arguments", "hashed"),
    [
        (["title"], {"title": "季度总结"}, "季度总结"),
        (["title", "mode"], {"title": "季度总结", "mode": "fast"}, "fast季度总结"),  # lexicographic path order
        (["title", "folder"], {"title": "季度总结"}, "季度总结"),  # a missing path is skipped
    ],
    ids=["one-path", "sorted-paths", "missing-skipped"],
)
async def test_the_idempotency_key_is_the_sha256_of_the_key_values_in_path_order(
    env: Env, key_paths: list[str], arguments: dict[str, Any], hashed: str
):
    """§14.2: "按路径字典序取参数值拼接后取 SHA-256；值缺失的路径跳过"; issue: passed as
    runtime_context["idempotency_key"] (docs: the hex digest)."""
    env.contract(changed(lambda c: c["tools"]["saveDoc"].update(idempotencyKey=key_paths)))
    script = env.script(call("saveDoc", arguments), approve("saveDoc"), finish("已保存"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("hash"), ASK_SAVE, identity=IDENTITY)
        done = await agent.resume(env.sid("hash"), "CONFIRM")
    assert done.status == "DONE"
    assert env.calls("saveDoc")[0]["key"] == hashlib.sha256(hashed.encode()).hexdigest()


async def test_a_write_with_a_business_failure_under_the_same_key_is_not_reused_after_a_restart(env: Env):
    """§14.2 "失败 / 业务失败 → 正常调用": after a business failure the identical write goes through the gate again
    (a new approval) and a new real execution — in a new process too."""
    sid = env.sid("bizfail")
    script = env.script(
        call("saveDoc", {"title": "季度总结", "mode": "business"}),
        approve("saveDoc"),
        say("失败了"),
        call("saveDoc", SAVE),
        approve("saveDoc", "再试"),
        finish("已保存"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, ASK_SAVE, identity=IDENTITY)
        failed = await agent.resume(sid, "CONFIRM")
    assert [(e["status"], e["business_ok"]) for e in failed.evidence] == [("SUCCESS", False)]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        again = await agent.send(sid, "再试一次", identity=IDENTITY)
        assert codes(again) == [APPROVAL_REQUIRED, None] and again.status == "SUSPENDED"
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE" and len(env.calls("saveDoc")) == 2


# =====================================================================================================================
# (d) the fingerprint fuse with writes and with CONFIRM
# =====================================================================================================================


async def test_a_gated_write_called_again_and_again_never_runs_and_never_trips_the_fuse(env: Env):
    """Issue: the fingerprint counts consecutive *successful* calls; APPROVAL_REQUIRED is a before-phase refusal,
    not a successful call. So five identical gated calls are five APPROVAL_REQUIREDs, nothing runs, no trip."""
    same = call("saveDoc", SAVE)
    turn = await _send(env, ASK_SAVE, same, same, same, same, same, say("要确认"), session="fuse")
    assert codes(turn) == [APPROVAL_REQUIRED] * 5 and turn.status == "RUNNING", turn.as_dict()
    assert env.calls() == []


async def test_identical_bypass_writes_run_once_and_the_fourth_identical_call_trips(env: Env):
    """Issue: "with the default limit 3, calls 1–3 run and the 4th identical call trips FINGERPRINT_TRIP and fails
    the node"; §13: the fingerprint check (4) comes before the write gate (5). A write without approval (confirm
    false + bypass) runs once; calls 2–3 return the earlier result (§14.2); call 4 trips."""
    same = call("bumpDoc", {"q": "x"})
    turn = await _send(env, "刷新", *[same] * 8, say("never"), session="bump")
    assert codes(turn) == [None, None, None, FINGERPRINT_TRIP], (codes(turn), turn.status)
    assert turn.status == "FAILED" and len(env.calls("bumpDoc")) == 1
    assert_coded(turn)


async def test_a_confirmed_write_then_identical_calls_trip_the_fuse_on_the_fourth(env: Env):
    """Docs: CONFIRM "skips approval and the fingerprint check, nothing else" — the confirmed run is a successful call
    that is counted (§13 stage 8). Identical calls after it return the earlier result; the 4th identical call in a
    row trips FINGERPRINT_TRIP and the write never runs twice."""
    same = call("saveDoc", SAVE)
    script = env.script(same, approve("saveDoc"), same, same, same, say("never"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("cfuse"), ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(env.sid("cfuse"), "CONFIRM")
    assert codes(after) == [None, None, None, FINGERPRINT_TRIP], after.as_dict()
    assert after.status == "FAILED" and len(env.calls("saveDoc")) == 1


async def test_a_reused_write_result_is_a_different_call_that_resets_the_fuse(env: Env):
    """Issue: "the count is of consecutive successful calls with the same tool and the same arguments; a different
    call resets it". findDocs《a》 three times, then a different call (the identical bumpDoc, answered with its
    earlier result), then findDocs《a》 again: the run of identical reads was interrupted, so it must not trip."""
    bump, find = call("bumpDoc", {"q": "x"}), call("findDocs", {"q": "a"})
    turn = await _send(env, "刷新并查找", bump, find, find, find, bump, find, say("done"), session="reset")
    assert codes(turn) == [None] * 6 and turn.status == "RUNNING", turn.as_dict()
    assert len(env.calls("findDocs")) == 4 and len(env.calls("bumpDoc")) == 1


async def test_confirm_skips_the_fingerprint_check(env: Env, monkeypatch: pytest.MonkeyPatch):
    """§14.1 step 3: CONFIRM executes the write "仍经过完整处理链，跳过审批和熔断" (docs: approved=True skips
    approval and the fingerprint check). Session 1 records the fingerprint a successful sendMemo《开会》 leaves
    (fingerprint_limit 1); session 2 gates the identical call and, while it waits for approval, its node is put
    at the fuse's limit for exactly that call. The CONFIRM must still execute the write, not trip."""
    monkeypatch.setenv("SKILLYARD_AGENT_FINGERPRINT_LIMIT", "1")
    sid = env.sid("skipfuse")
    memo = {"text": "开会"}
    script = env.script(call("sendMemo", memo), approve("sendMemo"), say("发好了"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(sid, "发备忘：开会", identity=IDENTITY)
        await agent.resume(sid, "CONFIRM")
    async with SkillYard() as yard:  # read the fingerprint the successful call left
        store = await store_of(yard)
        session = await store.load_session(sid)
        assert session is not None and session.node_id
        node = await store.load_node(session.node_id)
        assert node is not None and node.fingerprint and node.fingerprint_count == 1
        fingerprint = node.fingerprint
    other = env.sid("skipfuse2")
    script2 = env.script(call("sendMemo", memo), approve("sendMemo"), say("又发了"))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script2)
        gated = await agent.send(other, "发备忘：开会", identity=IDENTITY)
        assert gated.checkpoint and gated.checkpoint["type"] == "APPROVAL"
        store = await store_of(yard)
        session = await store.load_session(other)
        assert session is not None and session.node_id and session.task_id
        node = await store.load_node(session.node_id)
        task = await store.load_task(session.task_id)
        assert node is not None and task is not None
        node.fingerprint, node.fingerprint_count = fingerprint, 5  # the fuse is at its limit for this very call
        await store.save_turn(node, task, session)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script2)
        confirmed = await agent.resume(other, "CONFIRM")
    assert codes(confirmed)[0] is None and confirmed.status == "RUNNING", confirmed.as_dict()
    assert len(env.calls("sendMemo")) == 2


# =====================================================================================================================
# (e) §17 codes and next steps of every observation in a long write flow
# =====================================================================================================================


async def test_every_refusal_in_a_write_flow_carries_a_spec_code_and_a_next_step(env: Env):
    """Issue: "Every observation the model sees carries the spec's error code (§17) and a next step" — the write
    gate, the approval builtins, uncertain writes and the finish gate alike."""
    script = env.script(
        approve("saveDoc"),  # nothing gated yet → APPROVAL_NOT_GATED
        call("saveDoc", SAVE),  # APPROVAL_REQUIRED
        approve("sendMemo"),  # APPROVAL_TOOL_MISMATCH
        approve("saveDoc"),
        call("saveDoc", {"title": "季度总结", "mode": "timeout"}),  # not reached: CONFIRM runs the gated write
        say("x"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("codes"), ASK_SAVE, identity=IDENTITY)
    assert codes(first) == [NOT_GATED, APPROVAL_REQUIRED, MISMATCH, None], first.as_dict()
    mismatch = first.observations[2]
    assert "saveDoc" in str(mismatch.content) + str(mismatch.next_step)
    assert_coded(first)
    uncertain = await _send(
        env,
        "刷新一下，再删掉《季度总结》",
        call("bumpDoc", {"q": "a", "mode": "timeout"}),
        call("bumpDoc", {"q": "a", "mode": "timeout"}),
        finish("好了"),
        call("delDoc", {"title": "季度总结"}),
        say("x"),
        session="codes2",
    )
    assert codes(uncertain) == [TIMEOUT, PENDING_VERIFY, OPEN_EVIDENCE, APPROVAL_REQUIRED], uncertain.as_dict()
    assert_coded(uncertain)


async def _send(env: Env, message: str, *turns: dict[str, Any], session: str) -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)
