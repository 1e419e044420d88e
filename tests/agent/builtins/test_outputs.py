"""Node outputs (builtins/outputs.py, §8): builtin_output_set, the §10.2 completion checks of finish, targets, and
the shares and entities a DONE node publishes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.builtins import call_builtin
from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import NodeContext
from skillyard.agent.state import Entity, Evidence, EvidenceStatus, NodeStatus, Observation, OutputValue
from skillyard.agent.store import AgentStore
from support.agent import context as context_kit
from support.agent import keeper as keeper_kit
from support.agent import kit as kit_kit
from support.agent import memo as memo_kit
from support.agent.context import add_evidence, refused
from support.agent.keeper import KeeperAgent
from support.agent.kit import (
    EVIDENCE_PATH_INVALID,
    FINISH_OUTPUT_MISSING,
    SHARE,
    Kit,
    finish,
    lookup,
    put,
    two_sessions,
)
from support.agent.memo import EvModel, MemoAgent, changed, last, run_builtin
from support.agent.notes import CONTRACT, IDENTITY, NotesAgent, send_once
from support.agent.probes import call, codes, needs_db, say


def modified(**changes: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract.update(changes)
    return contract


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


FINISH_BUSINESS_CASES = [
    ("no call", [], "agent_runtime.42255"),
    ("business failure", [call("findNotes", {"q": "a", "mode": "business"})], "agent_runtime.42255"),
    ("technical failure", [call("findNotes", {"q": "a", "mode": "io"})], "agent_runtime.42255"),
    ("refused call", [call("sendMemo", {"text": "编造"})], None),  # a write claims the target: 42254 instead
    ("empty result", [call("findNotes", {"q": "a", "mode": "empty"})], None),
    ("unconfigured tool", [call("plainTool", {"q": "a"})], None),
]


SOURCE_REJECT = "agent_runtime.42223"


PLATFORM_FORBIDDEN = "agent_runtime.42236"


# output_set ----------------------------------------------------------------------------------------------------
async def output_set(ctx: NodeContext, key: str, value: Any, source: str, ref: str = "", path: str | None = None):
    args = {"key": key, "value": value, "sourceType": source, "sourceRef": ref}
    if path is not None:
        args["sourcePath"] = path
    return await call_builtin(ctx, "builtin_output_set", args)


# finish / fail -------------------------------------------------------------------------------------------------
async def finish_context(ctx: NodeContext, output: Any = "Created article a42.") -> Observation:
    return await call_builtin(ctx, "builtin_node_finish", {"output": output} if output is not None else {})


async def complete(ctx: NodeContext) -> Evidence:
    """A succeeded target write with both required outputs written."""
    read = await add_evidence(ctx)
    write = await add_evidence(ctx, "createArticle")
    assert (await output_set(ctx, "articleId", "a42", "EVIDENCE", read.id, "data.id")).ok
    assert (await output_set(ctx, "status", "PUBLISHED", "CONTRACT", "c")).ok
    return write


@needs_db
async def test_finish_output_missing_and_a_republished_source_rule_waits_for_the_next_task(notes_agent: NotesAgent):
    required = modified(outputs={"noteId": {"sources": ["EVIDENCE"], "required": True}})
    notes_agent.contract(required)
    script = notes_agent.script(
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
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        first = await agent.send(notes_agent.sid("out"), "找总结", identity=IDENTITY)
    assert codes(first) == ["agent_runtime.42252", None]
    evidence_id = first.observations[1].evidence_id
    assert evidence_id
    # write the evidence id into the next script item (the model read it from the observation)
    text = Path(script.removeprefix("script:")).read_text(encoding="utf-8").replace("@@evidence@@", evidence_id)
    Path(script.removeprefix("script:")).write_text(text, encoding="utf-8")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        written = await agent.send(notes_agent.sid("out"), "写下来", identity=IDENTITY)
    assert codes(written) == [None] and written.status == "RUNNING"
    # republished: noteId now only accepts USER; the open task keeps its pinned contract, so EVIDENCE still counts
    # (the FINISH_OUTPUT_SOURCE refusal itself is tested on a node context below)
    notes_agent.contract(modified(outputs={"noteId": {"sources": ["USER"], "required": True}}))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        done = await agent.send(notes_agent.sid("out"), "完成吧", identity=IDENTITY)
    assert codes(done) == [None] and done.status == "DONE" and done.reply == "好了"


@needs_db
async def test_finish_need_business_without_target_and_outputs(notes_agent: NotesAgent):
    notes_agent.contract(modified(outputs={}))
    result = await send_once(
        notes_agent,
        "找总结",
        call("builtin_node_finish", {"output": "好了"}),
        call("findNotes", {"q": "总结"}),
        call("builtin_node_finish", {"output": "找到了"}),
    )
    assert codes(result) == ["agent_runtime.42255", None, None]
    assert result.status == "DONE" and result.reply == "找到了"


@needs_db
async def test_contract_target_needs_its_write_and_a_business_failure_does_not_complete_it(keeper_agent: KeeperAgent):
    keeper_agent.contract(keeper_kit.modified(target="sendMemo", outputs={}))
    script = keeper_agent.script(
        call("findNotes", {"q": "x"}),
        call("builtin_node_finish", {"output": "done"}),
        call("sendMemo", {"text": "开会", "mode": "business"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "done"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        first = await agent.send(keeper_agent.sid("tg"), "发一条备忘：开会", identity=keeper_kit.IDENTITY)
        assert codes(first) == [None, "agent_runtime.42254", "agent_runtime.42221", None]
        after = await agent.resume(keeper_agent.sid("tg"), "CONFIRM")
    assert codes(after) == ["agent_runtime.40004", "agent_runtime.42254"] and after.status == "RUNNING"


@needs_db
async def test_a_target_outside_tool_names_counts_as_unset(keeper_agent: KeeperAgent):
    keeper_agent.contract(keeper_kit.modified(target="sendMemo", outputs={}))
    md = keeper_agent.dir / "skills" / "keeper" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8").replace("sendMemo, ", ""), encoding="utf-8")
    result = await keeper_kit.send_once(
        keeper_agent,
        "找",
        call("findNotes", {"q": "x", "mode": "none_found"}),
        call("builtin_node_finish", {"output": "没有"}),
    )
    assert codes(result) == [None, None] and result.status == "DONE"  # an empty result counts as completed


@needs_db
async def test_finish_open_evidence_comes_before_output_checks(keeper_agent: KeeperAgent):
    keeper_agent.contract(keeper_kit.modified(outputs={"noteId": {"sources": ["EVIDENCE"], "required": True}}))
    result = await keeper_kit.send_once(
        keeper_agent,
        "写",
        call("riskyWrite", {"mode": "timeout"}),
        call("builtin_node_finish", {"output": "x"}),
        call("builtin_node_finish", {"output": ""}),
        say("stop"),
    )
    assert codes(result) == ["agent_runtime.40016", "agent_runtime.42251", "agent_runtime.42250"]


@pytest.mark.parametrize("output", [None, "", "   "], ids=["absent", "empty", "blank"])
@needs_db
async def test_finish_without_output_is_finish_missing_output(memo_agent: MemoAgent, output: str | None):
    arguments = {} if output is None else {"output": output}
    turn = await run_builtin(memo_agent, "builtin_node_finish", arguments, call("findNotes", {"q": "a"}))
    assert last(turn).code == "agent_runtime.42250" and turn.status == "RUNNING"


@pytest.mark.parametrize(("case", "arguments", "code"), OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES])
@needs_db
async def test_output_set_codes(memo_agent: MemoAgent, case: str, arguments: dict[str, Any], code: str | None):
    memo_agent.contract(changed(_output_contract))
    turn = await run_builtin(memo_agent, "builtin_output_set", arguments)
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
async def test_output_set_evidence_value_must_equal_the_response_value(
    memo_agent: MemoAgent, path: str, value: Any, ok: bool
):
    memo_agent.contract(changed(_output_contract))
    arguments = {"key": "noteId", "value": value, "sourceType": "EVIDENCE", "sourceRef": "$EV", "sourcePath": path}
    model = EvModel(
        memo_agent.script(call("findNotes", {"q": "a"}), call("builtin_output_set", arguments), say("stop"))
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        turn = await agent.send(memo_agent.sid("evout"), "找", identity=memo_kit.IDENTITY)
    obs = turn.observations[1]
    assert obs.ok is ok and (ok or obs.code == "agent_runtime.42223"), obs


@needs_db
async def test_output_set_refuses_a_business_failed_evidence(memo_agent: MemoAgent):
    memo_agent.contract(changed(_output_contract))
    arguments = {"key": "noteId", "value": "E42", "sourceType": "EVIDENCE", "sourceRef": "$EV", "sourcePath": "code"}
    model = EvModel(
        memo_agent.script(
            call("findNotes", {"q": "a", "mode": "business"}), call("builtin_output_set", arguments), say("s")
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        turn = await agent.send(memo_agent.sid("evbad"), "找", identity=memo_kit.IDENTITY)
    assert turn.observations[0].evidence_id and turn.observations[1].code == "agent_runtime.42223"


@needs_db
async def test_output_gate_comes_before_the_target_gate(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["target"] = "sendMemo"
        c["outputs"]["noteId"]["required"] = True

    memo_agent.contract(changed(mutate))
    turn = await run_builtin(memo_agent, "builtin_node_finish", {"output": "完成"}, call("findNotes", {"q": "a"}))
    assert last(turn).code == "agent_runtime.42252"


@needs_db
async def test_a_required_output_written_empty_is_finish_output_missing(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["outputs"]["category"]["required"] = True

    memo_agent.contract(changed(mutate))
    turn = await memo_kit.send_once(
        memo_agent,
        "分类留空",
        call("builtin_output_set", {"key": "category", "value": "", "sourceType": "USER", "sourceRef": "m"}),
        call("builtin_node_finish", {"output": "完成"}),
        say("stop"),
    )
    assert codes(turn)[1] == "agent_runtime.42252"


@pytest.mark.spec("§10.1")
@needs_db
async def test_the_first_write_call_claims_the_target_even_when_it_is_stopped(memo_agent: MemoAgent):
    """§10.1 row 3: without a contract target the first write call becomes the target (targetClaimed), even when
    the write gate stops it; finishing then needs it (FINISH_NEED_TARGET), although outputs are declared."""
    script = memo_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": "完成"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        first = await agent.send(memo_agent.sid("claim"), "保存季度总结", identity=memo_kit.IDENTITY)
        assert codes(first) == ["agent_runtime.42221", "agent_runtime.42254", None]
        done = await agent.resume(memo_agent.sid("claim"), "CONFIRM")
        node = await AgentStore(yard.database).load_node(str(done.node_id))
    assert done.status == "DONE" and node is not None and node.target == "saveNote" and node.target_claimed


@pytest.mark.spec("§10.1")
@needs_db
async def test_a_claimed_target_stays_the_first_write(memo_agent: MemoAgent):
    """§10.1: a node has at most one target; a later write does not replace the claimed one."""
    turn = await memo_kit.send_once(
        memo_agent,
        "发一条备忘：开会",
        call("sendMemo", {"text": "开会"}),
        call("quickWrite", {"q": "x"}),  # runs (confirm: false + bypass) but is not the target
        call("builtin_node_finish", {"output": "完成"}),
        say("stop"),
    )
    assert codes(turn) == ["agent_runtime.42221", None, "agent_runtime.42254"]


@pytest.mark.parametrize(("case", "before", "code"), FINISH_BUSINESS_CASES, ids=[c[0] for c in FINISH_BUSINESS_CASES])
@needs_db
async def test_finish_need_business_through_the_runner(
    memo_agent: MemoAgent, case: str, before: list[dict[str, Any]], code: str | None
):
    memo_agent.contract(changed(lambda c: c.update(outputs={})))
    turn = await run_builtin(memo_agent, "builtin_node_finish", {"output": "完成"}, *before)
    if case == "refused call":
        assert last(turn).code == "agent_runtime.42254"
    else:
        assert last(turn).code == code, last(turn)
        assert turn.status == ("DONE" if code is None else "RUNNING")


@pytest.mark.spec("§10.2")
@needs_db
async def test_declared_outputs_lift_the_business_gate(memo_agent: MemoAgent):
    """§10.2 row 5 applies only without declared outputs: with optional outputs a node may finish at once."""
    turn = await run_builtin(memo_agent, "builtin_node_finish", {"output": "没什么要做的"})
    assert last(turn).ok and turn.status == "DONE"


@needs_db
async def test_a_skill_without_business_tools_may_finish_at_once(memo_agent: MemoAgent):
    memo_agent.tools([])
    memo_agent.contract({"outputs": {}})
    turn = await run_builtin(memo_agent, "builtin_node_finish", {"output": "你好"})
    assert last(turn).ok and turn.status == "DONE"


@needs_db
async def test_output_entities_are_published_at_finish_and_read_by_prior_in_a_new_process(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["outputs"] = {"memo": {"sources": ["USER"], "entity": {"type": "memo", "scalar": "id", "name": "id"}}}
        c["tools"]["pickTool"]["args"]["a"] = {"from": "prior.memo.id", "required": False}

    memo_agent.contract(changed(mutate))
    script = memo_agent.script(
        call("builtin_output_set", {"key": "memo", "value": "M-7", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_node_finish", {"output": "记住了"}),
        call("pickTool", {}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        done = await agent.send(memo_agent.sid("oent"), "备忘编号 M-7", identity=memo_kit.IDENTITY)
        assert done.status == "DONE", done.as_dict()
    async with SkillYard() as yard:
        session = await AgentStore(yard.database).load_session(memo_agent.sid("oent"))
        assert session is not None and [(e.type, e.id) for e in session.entities] == [("memo", "M-7")]
        agent = await yard.agent(memo_agent.dir, model=script)
        later = await agent.send(memo_agent.sid("oent"), "用刚才的备忘", identity=memo_kit.IDENTITY)
    assert later.observations[0].ok and later.observations[0].sources["a"] == "PRIOR_TASK"
    assert memo_agent.calls("pickTool")[0]["input"]["a"] == "M-7"


@needs_db
async def test_a_session_share_survives_a_restart_and_binds_in_the_next_task(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["b"] = {"from": "session.category", "required": False}

    memo_agent.contract(changed(mutate))
    script = memo_agent.script(
        call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "m"}),
        call("builtin_node_finish", {"output": "好"}),
        call("pickTool", {"b": "模型猜的"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        assert (await agent.send(memo_agent.sid("share"), "分类用工作", identity=memo_kit.IDENTITY)).status == "DONE"
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        later = await agent.send(memo_agent.sid("share"), "挑一个", identity=memo_kit.IDENTITY)
    assert later.observations[0].sources["b"] == "SESSION"
    assert memo_agent.calls("pickTool")[0]["input"]["b"] == "工作"  # from overrides the model's value


@pytest.mark.spec("§8")
@needs_db
async def test_a_task_share_does_not_leak_into_the_next_task(memo_agent: MemoAgent):
    """§8 share TASK → shared.<key> of that task only; the session's next task starts with no shared values."""

    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["b"] = {"from": "shared.noteId", "sources": ["MODEL"], "required": False}

    memo_agent.contract(changed(mutate))
    model = EvModel(
        memo_agent.script(
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
        agent = await yard.agent(memo_agent.dir, model=model)
        done = await agent.send(memo_agent.sid("tshare"), "找", identity=memo_kit.IDENTITY)
        assert done.status == "DONE" and "shared.noteId" in done.observations[-1].content["shared"]
        later = await agent.send(memo_agent.sid("tshare"), "挑", identity=memo_kit.IDENTITY)
    assert later.observations[0].sources["b"] == "MODEL"


@needs_db
async def test_a_later_session_share_replaces_the_earlier_value(kit: Kit):
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category"})
    turns = await kit.talk(
        ["分类A", "分类B", "用"],
        put("category", "甲"),
        finish(),
        put("category", "乙"),
        finish(),
        call("probe", {"c": "m"}),
        say("stop"),
    )
    assert [t.status for t in turns[:2]] == ["DONE", "DONE"]
    assert kit.probed()["c"] == "乙"


@needs_db
@pytest.mark.parametrize("key", ["name", "memberId", "deptPath", "adminCompany"])
async def test_output_set_refuses_every_platform_field_name(kit: Kit, key: str):
    kit.with_args(outputs={"category": SHARE})
    turn = await kit.send("x", put(key, "v"), say("stop"))
    assert codes(turn) == [PLATFORM_FORBIDDEN] and turn.observations[0].next_step


@needs_db
async def test_a_second_output_set_replaces_the_first_value(kit: Kit):
    kit.with_args(outputs={"category": SHARE})
    turn = await kit.send("x", put("category", "甲"), put("category", "乙"), finish(), session="twice")
    assert turn.status == "DONE"
    assert (await kit.session("twice")).values.get("category") == "乙"


@needs_db
async def test_outputs_of_a_failed_node_are_neither_shared_nor_entities(kit: Kit):
    outputs = {"category": SHARE, "memo": {"required": False, "entity": {"type": "memo", "scalar": "id"}}}
    kit.with_args(outputs=outputs)
    turn = await kit.send(
        "x", put("category", "工作"), put("memo", "M-1"), call("builtin_node_fail", {"reason": "不做了"}), session="f"
    )
    assert turn.status == "FAILED"
    session = await kit.session("f")
    assert "category" not in session.values and session.entities == []


@needs_db
async def test_outputs_of_a_cancelled_task_are_not_shared(kit: Kit):
    kit.with_args(outputs={"category": SHARE})
    model = kit.model(
        put("category", "工作"), lookup(mode="empty"), call("builtin_node_follow_up", {"question": "换个词？"})
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("c"), "找", identity=kit_kit.IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        assert (await agent.resume(kit.sid("c"), "CANCEL")).status == "CANCELLED"
    assert "category" not in (await kit.session("c")).values


@needs_db
async def test_a_task_share_is_published_to_the_task_at_finish(kit: Kit):
    kit.with_args(outputs={"spaceId": {"required": False, "share": "TASK"}})
    turn = await kit.send("x", put("spaceId", "sp-1"), finish())
    async with SkillYard() as yard:
        task = await AgentStore(yard.database).load_task(str(turn.task_id))
    assert task is not None and task.shared == {"spaceId": "sp-1"}
    assert "spaceId" not in (await kit.session()).values


@needs_db
async def test_list_output_entities_one_per_item_with_an_id(kit: Kit):
    goods = {"type": "LIST", "fields": ["code", "label"], "required": False}
    goods["entity"] = {"type": "goods", "id": "code", "name": "label"}
    kit.with_args(outputs={"goods": goods})
    value = [{"code": "G1", "label": "苹果"}, {"code": "G2", "label": "梨"}, {"label": "无码"}]
    turn = await kit.send("x", put("goods", value), finish(), session="lst")
    assert turn.status == "DONE", turn.as_dict()
    found = {(e.type, e.id, e.name) for e in (await kit.session("lst")).entities}
    assert found == {("goods", "G1", "苹果"), ("goods", "G2", "梨")}


@needs_db
async def test_an_object_output_entity_takes_default_id_and_name_and_simple_attributes(kit: Kit):
    kit.with_args(outputs={"article": {"required": False, "entity": {"type": "article"}}})
    value = {"id": "a-1", "name": "春", "words": 120, "tags": ["x"]}
    turn = await kit.send("x", put("article", value), finish(), session="objout")
    assert turn.status == "DONE", turn.as_dict()
    entities = (await kit.session("objout")).entities
    assert [(e.type, e.id, e.name) for e in entities] == [("article", "a-1", "春")]
    assert entities[0].attrs.get("words") == 120 and "tags" not in entities[0].attrs


@needs_db
async def test_output_evidence_of_a_finished_task_is_refused(kit: Kit):
    kit.with_args(outputs={"noteId": {"sources": ["EVIDENCE"], **SHARE}})
    first, later = await kit.talk(
        ["找", "记下"], lookup(), finish(), put("noteId", "n-1", "EVIDENCE", "$EV1", "data.records.0.id"), say("s")
    )
    assert first.status == "DONE"
    assert codes(later) == [SOURCE_REJECT]


@needs_db
@pytest.mark.parametrize(("value", "ok"), [("n-1", True), ("n-9", False)])
async def test_an_output_with_empty_sources_still_checks_the_evidence_value(kit: Kit, value: str, ok: bool):
    kit.with_args(outputs={"free": SHARE})
    turn = await kit.send(
        "x", lookup(), put("free", value, "EVIDENCE", "$EV", "data.records.0.id"), say("stop"), session="esrc"
    )
    obs = turn.observations[1]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, SOURCE_REJECT)), obs


@needs_db
async def test_an_output_contract_constant_compares_as_json(kit: Kit):
    kit.with_args(outputs={"kind": {"sources": ["CONTRACT"], "constant": {"a": 1, "b": [1]}, **SHARE}})
    turn = await kit.send(
        "x",
        put("kind", {"b": [1], "a": 1}, "CONTRACT", "c"),
        put("kind", {"a": 1, "b": [2]}, "CONTRACT", "c"),
        say("stop"),
    )
    assert codes(turn) == [None, SOURCE_REJECT]


@needs_db
@pytest.mark.parametrize("empty", [[], {}], ids=["list", "object"])
async def test_a_required_output_written_as_an_empty_container_is_missing(kit: Kit, empty: Any):
    kit.with_args(outputs={"result": {"required": True}})
    turn = await kit.send("x", put("result", empty), finish(), say("stop"))
    assert codes(turn) == [None, FINISH_OUTPUT_MISSING] and turn.status == "RUNNING"


@needs_db
async def test_model_is_never_an_output_source_even_when_listed(kit: Kit):
    kit.with_args(outputs={"free": {"sources": ["MODEL", "USER"], **SHARE}})
    turn = await kit.send("x", put("free", "v", "MODEL"), put("free", "v", "USER"), say("stop"))
    assert codes(turn) == [SOURCE_REJECT, None]


@needs_db
async def test_an_output_object_without_id_makes_no_entity(kit: Kit):
    kit.with_args(outputs={"article": {"required": False, "entity": {"type": "article"}}})
    turn = await kit.send("x", put("article", {"name": "无号"}), finish(), session="noid")
    assert turn.status == "DONE", turn.as_dict()
    assert (await kit.session("noid")).entities == []


@needs_db
async def test_output_set_does_not_accept_another_sessions_evidence(kit: Kit):
    kit.with_args(outputs={"noteId": {"sources": ["EVIDENCE"], **SHARE}})
    _, b = await two_sessions(
        kit, [lookup(), say("找到了")], [put("noteId", "n-1", "EVIDENCE", "$EV", "data.records.0.id"), say("s")]
    )
    assert codes(b) == [SOURCE_REJECT]


@needs_db
async def test_a_list_output_of_scalars_named_by_scalar_gives_one_entity_per_item(kit: Kit):
    tags = {"type": "LIST", "fields": ["id"], "required": False, "entity": {"type": "tag", "scalar": "id"}}
    kit.with_args(outputs={"tags": tags})
    turn = await kit.send("x", put("tags", ["t-1", "t-2"]), finish(), session="ltags")
    assert turn.status == "DONE", turn.as_dict()
    assert {(e.type, e.id) for e in (await kit.session("ltags")).entities} == {("tag", "t-1"), ("tag", "t-2")}


@needs_db
async def test_output_set_does_not_accept_a_failed_calls_evidence(kit: Kit):
    kit.with_args(outputs={"free": SHARE})
    turn = await kit.send(
        "x",
        lookup(mode="io"),
        call("builtin_evidence_get", {"evidenceId": "ev-nope"}),
        put("free", "disk gone", "EVIDENCE", "$EV", "error"),
        say("stop"),
    )
    assert codes(turn) == ["agent_runtime.40018", EVIDENCE_PATH_INVALID, SOURCE_REJECT]


async def test_output_set_key_checks(ctx):
    refused(await output_set(ctx, " ", 1, "USER"), ErrorCode.OUTPUT_PATH_INVALID)
    for key in ("userId", "organId", "name", "passportId"):
        refused(await output_set(ctx, key, 1, "USER"), ErrorCode.PLATFORM_FIELD_FORBIDDEN)
    text = refused(await output_set(ctx, "other", 1, "USER"), ErrorCode.OUTPUT_WRITE_FORBIDDEN)
    assert "articleId, status, space" in text
    assert ctx.node.outputs == {}


async def test_output_set_never_accepts_model(ctx):
    refused(await output_set(ctx, "space", {"id": 1}, "MODEL"), ErrorCode.SOURCE_REJECT)
    refused(await output_set(ctx, "space", {"id": 1}, "GUESS"), ErrorCode.ARG_REJECTED)


async def test_output_set_sources_of_the_output(ctx):
    assert "allowed: EVIDENCE" in refused(
        await output_set(ctx, "articleId", "a42", "USER", "u"), ErrorCode.SOURCE_REJECT
    )
    # empty sources: everything but MODEL
    obs = await output_set(ctx, "space", {"id": "s9", "label": "News"}, "SESSION", "session.space")
    assert obs.ok and ctx.node.outputs["space"] == OutputValue(
        {"id": "s9", "label": "News"}, "SESSION", "session.space"
    )


async def test_output_set_from_evidence(ctx):
    evidence = await add_evidence(ctx, "createArticle")
    refused(await output_set(ctx, "articleId", "a42", "EVIDENCE", "", "data.id"), ErrorCode.EVIDENCE_PATH_INVALID)
    assert evidence.id in refused(
        await output_set(ctx, "articleId", "a42", "EVIDENCE", "ev_99", "data.id"), ErrorCode.SOURCE_REJECT
    )
    text = refused(
        await output_set(ctx, "articleId", "a43", "EVIDENCE", evidence.id, "data.id"), ErrorCode.SOURCE_REJECT
    )
    assert "'a42'" in text and "builtin_evidence_get" in text
    refused(await output_set(ctx, "articleId", "a42", "EVIDENCE", evidence.id, "data.nope"), ErrorCode.SOURCE_REJECT)
    obs = await output_set(ctx, "articleId", "a42", "EVIDENCE", evidence.id, "data.id")
    assert obs.ok and ctx.node.outputs["articleId"] == OutputValue("a42", "EVIDENCE", evidence.id, "data.id")


async def test_output_set_evidence_must_be_visible_and_succeeded(ctx):
    elsewhere = await add_evidence(ctx, node_id="n0")
    assert "not visible" in refused(
        await output_set(ctx, "articleId", "a42", "EVIDENCE", elsewhere.id, "data.id"), ErrorCode.SOURCE_REJECT
    )
    ctx.upstream_node_ids = ["n0"]  # an upstream node's evidence is visible
    assert (await output_set(ctx, "articleId", "a42", "EVIDENCE", elsewhere.id, "data.id")).ok
    failed = await add_evidence(ctx, business_ok=False)
    assert "not a succeeded call" in refused(
        await output_set(ctx, "articleId", "a42", "EVIDENCE", failed.id, "data.id"), ErrorCode.SOURCE_REJECT
    )


async def test_output_set_contract_constant(ctx):
    assert "'PUBLISHED'" in refused(await output_set(ctx, "status", "DRAFT", "CONTRACT", "c"), ErrorCode.SOURCE_REJECT)
    assert (await output_set(ctx, "status", "PUBLISHED", "CONTRACT", "c")).ok
    # CONTRACT without a constant
    refused(await output_set(ctx, "space", {"id": 1}, "CONTRACT", "c"), ErrorCode.SOURCE_REJECT)


async def test_finish_missing_output(ctx):
    await complete(ctx)
    for output in (None, "", "   "):
        refused(await finish_context(ctx, output), ErrorCode.FINISH_MISSING_OUTPUT)
    assert ctx.node.status is NodeStatus.RUNNING


@pytest.mark.parametrize("status", [EvidenceStatus.STARTED, EvidenceStatus.UNKNOWN, EvidenceStatus.UNKNOWN_PRE_CALL])
async def test_finish_open_evidence(ctx, status):
    await complete(ctx)
    open_write = await add_evidence(ctx, "createArticle", status=status, business_ok=None)
    assert open_write.id in refused(await finish_context(ctx), ErrorCode.FINISH_OPEN_EVIDENCE)
    open_write.status = EvidenceStatus.FAILED
    assert (await finish_context(ctx)).ok


async def test_finish_output_missing(ctx):
    ctx.node.target = "createArticle"
    await add_evidence(ctx, "createArticle")
    assert (await output_set(ctx, "status", "PUBLISHED", "CONTRACT", "c")).ok
    assert "articleId" in refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_MISSING)
    ctx.node.outputs["articleId"] = OutputValue("", "EVIDENCE", "ev_1", "data.id")  # empty counts as missing
    refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_MISSING)


async def test_finish_output_source(ctx):
    await complete(ctx)
    ctx.node.outputs["articleId"] = OutputValue("a42", "MODEL")
    assert "articleId" in refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)
    ctx.node.outputs["articleId"] = OutputValue("a42", "EVIDENCE", "ev_gone", "data.id")
    refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)


async def test_finish_need_target(ctx):
    ctx.node.target = "createArticle"
    write = await complete(ctx)
    write.business_ok = False  # a business failure is not completed
    assert "createArticle" in refused(await finish_context(ctx), ErrorCode.FINISH_NEED_TARGET)
    await add_evidence(ctx, "createArticle", node_id="n0")  # another node's write does not count
    refused(await finish_context(ctx), ErrorCode.FINISH_NEED_TARGET)
    await add_evidence(ctx, "createArticle", empty=True)  # an empty result counts
    assert (await finish_context(ctx)).ok


async def test_finish_need_business(make_ctx):
    ctx = make_ctx({"tools": context_kit.CONTRACT["tools"]})  # no target, no outputs
    assert "queryArticle, createArticle" in refused(await finish_context(ctx), ErrorCode.FINISH_NEED_BUSINESS)
    await add_evidence(ctx, business_ok=False)
    refused(await finish_context(ctx), ErrorCode.FINISH_NEED_BUSINESS)
    await add_evidence(ctx, empty=True)
    assert (await finish_context(ctx)).ok
    assert (await finish_context(make_ctx({"tools": {}}, tools=()))).ok  # no business tools: nothing to require


async def test_finish_gate_order(ctx):
    ctx.node.target = "createArticle"
    await add_evidence(ctx, "createArticle", status=EvidenceStatus.STARTED, business_ok=None)
    # fails checks 1–4: the first code wins, then each next one as the earlier is fixed
    refused(await finish_context(ctx, ""), ErrorCode.FINISH_MISSING_OUTPUT)
    refused(await finish_context(ctx), ErrorCode.FINISH_OPEN_EVIDENCE)
    ctx.evidence[0].status = EvidenceStatus.FAILED
    refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_MISSING)
    ctx.node.outputs["articleId"] = OutputValue("a42", "MODEL")
    ctx.node.outputs["status"] = OutputValue("PUBLISHED", "CONTRACT")
    refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)
    write = await add_evidence(ctx, "createArticle", business_ok=False)
    ctx.node.outputs["articleId"] = OutputValue("a42", "EVIDENCE", write.id, "data.id")
    refused(await finish_context(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)  # a business-failed evidence is no source
    ctx.node.outputs["articleId"] = OutputValue("a1", "EVIDENCE", (await add_evidence(ctx)).id, "data.records.0.id")
    refused(await finish_context(ctx), ErrorCode.FINISH_NEED_TARGET)
    await add_evidence(ctx, "createArticle")
    assert (await finish_context(ctx)).ok


async def test_finish_done_publishes_shares_and_entities(ctx):
    ctx.session.entities.append(Entity("article", "a42", None, {"old": True}))
    await complete(ctx)
    obs = await output_set(
        ctx, "space", [{"id": "s9", "label": "News", "size": 3, "x": {}}, {"label": "no id"}], "SESSION", "s"
    )
    assert obs.ok
    obs = await finish_context(ctx, " Created article a42. ")
    assert obs.ok and ctx.node.status is NodeStatus.DONE and ctx.node.reply == "Created article a42."
    assert obs.content["shared"] == ["shared.status", "session.space"]
    assert ctx.task.shared == {"status": "PUBLISHED"}
    assert ctx.session.values == {"space": [{"id": "s9", "label": "News", "size": 3, "x": {}}, {"label": "no id"}]}
    entities = {(e.type, e.id): e for e in ctx.session.entities}
    assert len(ctx.session.entities) == 2  # the old article a42 was replaced, the item without an id skipped
    article, space = entities["article", "a42"], entities["space", "s9"]
    assert (article.name, article.attrs, article.task_id) == (None, {}, "t1")
    assert (space.name, space.attrs) == ("News", {"label": "News", "size": 3})
    assert obs.content["entities"] == ["article:a42", "space:s9"]


@needs_db
async def test_an_evidence_output_must_equal_the_response_value_as_json(make_ctx: Any):
    # builtin_output_set EVIDENCE compared with Python's ==, so true matched 1 (and [true] matched [1])
    ctx = make_ctx()
    evidence = await add_evidence(ctx, response={"code": 200, "data": {"id": True, "ids": [True]}})
    for path, value in (("data.id", 1), ("data.ids", [1])):
        written = {"key": "articleId", "value": value, "sourceType": "EVIDENCE", "sourceRef": evidence.id}
        refusal = await call_builtin(ctx, "builtin_output_set", {**written, "sourcePath": path})
        assert refusal.code == ErrorCode.SOURCE_REJECT.value, refusal.content
    accepted = {"key": "articleId", "value": True, "sourceType": "EVIDENCE", "sourceRef": evidence.id}
    assert (await call_builtin(ctx, "builtin_output_set", {**accepted, "sourcePath": "data.id"})).ok
