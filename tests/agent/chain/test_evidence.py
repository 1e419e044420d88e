"""Evidence (chain/evidence.py, §6.3): extracts and counts, the empty flag, entities for the session index."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import STEP_BUDGET
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from support.agent import exec as exec_kit
from support.agent import keeper as keeper_kit
from support.agent import memo as memo_kit
from support.agent.exec import ExecAgent, add, executions, follow_up, kind_params, obs, statuses
from support.agent.keeper import KeeperAgent, send_once
from support.agent.kit import BUSINESS, Kit, base_contract, entity_contract, finish, lookup
from support.agent.memo import MemoAgent, changed
from support.agent.notes import IDENTITY, NotesAgent
from support.agent.probes import call, codes, needs_db, say

pytestmark = needs_db


async def evidence_of(turn: TurnResult) -> list[Any]:
    async with SkillYard() as yard:
        return await AgentStore(yard.database).load_evidence(str(turn.task_id))


GOODS = [{"code": "G1", "label": "苹果", "price": 3, "meta": {"x": 1}}, {"label": "无码"}]


async def test_step_budget_counts_per_turn(notes_agent: NotesAgent):
    per_turn = STEP_BUDGET // 2 + 1  # two turns together exceed the budget, each alone does not
    turns: list[dict[str, Any]] = []
    for turn in range(3):
        turns += [call("findNotes", {"q": f"t{turn}-{n}"}) for n in range(per_turn - 1)]
        turns.append(say(f"第{turn}轮完毕"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script(*turns))
        for turn in range(3):
            result = await agent.send(notes_agent.sid("steps"), f"继续{turn}", identity=IDENTITY)
            assert result.status == "RUNNING" and result.reply == f"第{turn}轮完毕", result.reply
    assert len(notes_agent.calls("findNotes")) == 3 * (per_turn - 1)


async def test_evidence_extracts_counts_and_empty(keeper_agent: KeeperAgent):
    result = await send_once(
        keeper_agent,
        "找",
        call("findNotes", {"q": "a"}),
        call("findNotes", {"q": "b", "mode": "none_found"}),
        call("findNotes", {"q": "c", "mode": "blank"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        records = await AgentStore(yard.database).load_evidence(str(result.task_id))
    by_q = {r.args["q"]: r for r in records}
    assert by_q["a"].counts == {"notes": 2} and by_q["a"].empty is False
    assert by_q["a"].extracts["notes"][0] == {"id": "n-1", "title": "季度总结"}
    assert by_q["b"].counts == {"notes": 0} and by_q["b"].empty is True and by_q["b"].status == "SUCCESS"
    assert by_q["c"].counts == {"notes": 0} and by_q["c"].empty is True  # an object whose fields are all empty


async def test_write_entities_merge_arguments_under_the_result_and_scalars_are_named(keeper_agent: KeeperAgent):
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("stampNote", {"title": "周报"}),
        call("builtin_node_finish", {"output": "ok"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("ent"), "保存季度总结", identity=keeper_kit.IDENTITY)
        done = await agent.resume(keeper_agent.sid("ent"), "CONFIRM")
        assert done.status == "DONE", done.as_dict()
        session = await AgentStore(yard.database).load_session(keeper_agent.sid("ent"))
    assert session is not None
    entities = {(e.type, e.id): e for e in session.entities}
    note = entities[("note", "n-季度总结")]
    assert note.name == "季度总结" and note.attrs.get("owner") == "42"  # the argument is the base
    stamp = entities[("stamp", "s-周报")]
    assert stamp.name == "周报" and stamp.attrs.get("owner") == "42"


async def test_an_entity_seen_again_becomes_the_newest(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["outputs"] = {"memo": {"sources": ["USER"], "entity": {"type": "memo", "scalar": "id"}}}
        c["tools"]["pickTool"]["args"]["a"] = {"from": "prior.memo.id", "required": False}

    memo_agent.contract(changed(mutate))

    def remember(value: str) -> list[dict[str, Any]]:
        return [
            call("builtin_output_set", {"key": "memo", "value": value, "sourceType": "USER", "sourceRef": "m"}),
            call("builtin_node_finish", {"output": "记住了"}),
        ]

    script = memo_agent.script(*remember("M-1"), *remember("M-2"), *remember("M-1"), call("pickTool", {}), say("ok"))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=script)
        for text in ("备忘 M-1", "备忘 M-2", "还是 M-1"):
            assert (await agent.send(memo_agent.sid("newest"), text, identity=memo_kit.IDENTITY)).status == "DONE"
        await agent.send(memo_agent.sid("newest"), "用最近的", identity=memo_kit.IDENTITY)
    assert memo_agent.calls("pickTool")[0]["input"]["a"] == "M-1"


async def test_read_extract_entities_enter_the_session_index(memo_agent: MemoAgent):
    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["findNotes"]["extracts"] = [
            {"key": "notes", "path": "data.records", "entity": {"type": "note", "name": "title"}}
        ]

    memo_agent.contract(changed(mutate))
    turn = await memo_kit.send_once(memo_agent, "找", call("findNotes", {"q": "a"}), say("stop"), session="rent")
    assert turn.observations[0].ok
    async with SkillYard() as yard:
        session = await AgentStore(yard.database).load_session(memo_agent.sid("rent"))
    assert session is not None
    assert {(e.type, e.id, e.name) for e in session.entities} == {("note", "n-1", "季度总结"), ("note", "n-2", "周报")}


async def test_empty_only_when_every_extract_counts_zero(kit: Kit):
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [
        {"key": "notes", "path": "data.records"},
        {"key": "more", "path": "data.more"},
    ]
    kit.contract(contract)
    turn = await kit.send(
        "x",
        lookup({"records": [], "more": [{"id": "m"}]}),
        lookup({"records": [], "more": []}),
        say("stop"),
    )
    records = sorted(await evidence_of(turn), key=lambda r: r.seq)
    assert [r.empty for r in records] == [False, True]
    assert records[0].counts.get("notes") == 0 and records[0].counts.get("more") == 1


async def test_an_extract_path_to_an_object_counts_one_or_zero(kit: Kit):
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [{"key": "one", "path": "data.item"}]
    kit.contract(contract)
    turn = await kit.send("x", lookup({"item": {"id": "a"}}), lookup({"item": None}), say("stop"))
    records = sorted(await evidence_of(turn), key=lambda r: r.seq)
    assert [r.counts.get("one") for r in records] == [1, 0]
    assert [r.empty for r in records] == [False, True]


async def test_read_entities_use_the_configured_id_and_name_fields_and_skip_items_without_id(kit: Kit):
    entity_contract(kit, {"type": "goods", "id": "code", "name": "label"})
    turn = await kit.send("x", lookup({"records": GOODS}), say("stop"), session="goods")
    assert turn.observations[0].ok
    session = await kit.session("goods")
    assert [(e.type, e.id, e.name) for e in session.entities] == [("goods", "G1", "苹果")]
    attrs = session.entities[0].attrs
    assert attrs.get("price") == 3 and "meta" not in attrs


async def test_a_scalar_result_without_scalar_is_no_entity(kit: Kit):
    entity_contract(kit, {"type": "memo"}, path="data")
    await kit.send("x", lookup("M-5"), say("stop"), session="scalar0")
    assert (await kit.session("scalar0")).entities == []


async def test_a_scalar_read_result_named_by_scalar_is_an_entity(kit: Kit):
    entity_contract(kit, {"type": "memo", "scalar": "id"}, path="data")
    await kit.send("x", lookup("M-5"), say("stop"), session="scalar1")
    assert [(e.type, e.id) for e in (await kit.session("scalar1")).entities] == [("memo", "M-5")]


async def test_an_object_at_the_extract_path_is_one_entity(kit: Kit):
    entity_contract(kit, {"type": "article"}, path="data.item")
    await kit.send("x", lookup({"item": {"id": "a-1", "name": "春", "words": 120}}), say("stop"), session="obj")
    entities = (await kit.session("obj")).entities
    assert [(e.type, e.id, e.name) for e in entities] == [("article", "a-1", "春")]
    assert entities[0].attrs.get("words") == 120


async def test_a_business_failed_read_produces_no_entity(kit: Kit):
    entity_contract(kit, {"type": "note"})
    turn = await kit.send("x", lookup(mode="business"), say("stop"), session="bizent")
    assert codes(turn) == [BUSINESS]
    assert (await kit.session("bizent")).entities == []


async def test_entities_belong_to_their_session(kit: Kit):
    entity_contract(kit, {"type": "note", "name": "title"}, n={"from": "prior.note.id", "sources": ["MODEL"]})
    assert (await kit.send("找", lookup(), finish(), session="ea")).status == "DONE"
    other = await kit.send("用", call("probe", {"n": "m"}), say("stop"), session="eb")
    assert other.observations[0].sources["n"] == "MODEL" and kit.probed()["n"] == "m"


async def test_an_array_of_scalars_named_by_scalar_gives_one_entity_per_item(kit: Kit):
    entity_contract(kit, {"type": "tag", "scalar": "id"}, path="data.ids")
    await kit.send("x", lookup({"ids": ["t-1", "t-2"]}), say("stop"), session="scal")
    assert {(e.type, e.id) for e in (await kit.session("scal")).entities} == {("tag", "t-1"), ("tag", "t-2")}


@pytest.mark.spec("§6.3")
async def test_a_list_path_counts_its_items_whatever_their_fields(kit: Kit):
    """§6.3: a path to an array counts the array's length (``fields`` counts only an object at the path)."""
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [{"key": "notes", "path": "data.records", "fields": ["id"]}]
    kit.contract(contract)
    turn = await kit.send("x", lookup({"records": [{"id": None, "title": "无号"}]}), say("stop"))
    (record,) = await evidence_of(turn)
    assert record.counts.get("notes") == 1 and record.empty is False


async def test_an_extract_without_key_still_decides_empty(kit: Kit):
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [{"path": "data.records"}]
    kit.contract(contract)
    turn = await kit.send("x", lookup({"records": []}), lookup({"records": [{"id": "a"}]}), say("stop"))
    records = sorted(await evidence_of(turn), key=lambda r: r.seq)
    assert [r.empty for r in records] == [True, False]


@pytest.mark.spec("§6.3")
@pytest.mark.parametrize("kind", kind_params(["py", "rb", "http"]))
async def test_empty_read_without_success_spec_is_a_success_that_grounds_a_question(
    exec_agent: ExecAgent, server, kind: str
):
    """§6.3: all extracts count 0 → empty; without success it is a success (SUCCESS, businessOk true). docs: a
    question without expectedFields is grounded when the node's latest business call returned empty."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": "empty"}), follow_up(), exec_kit.say())
    [o] = obs(turn, tool)
    assert o.ok and o.code is None, o
    assert statuses(turn, tool) == [("SUCCESS", True)]
    assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn.as_dict()
    assert executions(exec_agent, srv, kind, tool) == 1
