"""Targets by name (``targetArg``, chain/targets.py): a write whose target came from a lookup that found zero or
several candidates, or whose listing was incomplete, is refused before it runs (``TARGET_UNRESOLVED``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.contract_parse import ContractError, parse_contract
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.receipts import BYPASS, IDENTITY, DocOpsAgent, page, stored_evidence

UNRESOLVED = "agent_runtime.42263"
APPROVAL = "agent_runtime.42221"
ASK = "把《季度总结》改名为《Q3 总结》"
TWO = [{"id": "d-1", "title": "季度总结"}, {"id": "d-2", "title": "季度总结（副本）"}]
ONE = [{"id": "d-1", "title": "季度总结"}]
RENAME = {"docId": "d-1", "newTitle": "Q3 总结"}


@pytest.fixture
def ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DocOpsAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", BYPASS)
    return DocOpsAgent(tmp_path)


@needs_db
async def test_several_candidates_refuse_the_write_until_the_user_chooses_across_restarts(ops: DocOpsAgent):
    ops.answers(findDocs=[page(TWO)], renameDoc=[{"ok": True, "data": {"renamed": "d-2"}}])
    script = ops.script(
        call("findDocs", {"q": "季度总结"}),
        call("renameDoc", RENAME),  # the model picks one itself
        call("builtin_node_follow_up", {"question": "是哪一篇？d-1 还是 d-2？", "expectedFields": ["docId"]}),
        call("renameDoc", {"docId": "d-2", "newTitle": "Q3 总结"}),
        call("builtin_node_approval", {"summary": "重命名", "toolName": "renameDoc"}),
        finish("已改名"),
    )
    sid = ops.sid("two")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        asked = await agent.send(sid, ASK, identity=IDENTITY)
    refused = asked.observations[1]
    assert refused.code == UNRESOLVED and "2 candidates" in refused.content and "d-2" in refused.content
    assert "builtin_node_follow_up" in refused.next_step
    assert asked.checkpoint is not None and asked.checkpoint["type"] == "FOLLOW_UP"
    assert ops.calls("renameDoc") == []  # refused before it ran, and before any approval
    async with SkillYard() as yard:  # the answer arrives in a new process
        agent = await yard.agent(ops.dir, model=script)
        gated = await agent.resume(sid, "REPLY", "d-2")
    assert codes(gated) == [APPROVAL, None], gated.as_dict()
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.resume(sid, "CONFIRM")
    assert [r["input"]["docId"] for r in ops.calls("renameDoc")] == ["d-2"]
    assert done.status == "DONE", done.as_dict()


@needs_db
async def test_a_target_from_an_incomplete_listing_is_refused(ops: DocOpsAgent):
    ops.answers(findDocs=[page(ONE, more="c2")])
    script = ops.script(call("findDocs", {"q": "季度总结"}), call("renameDoc", RENAME), say("还要翻页"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("incomplete"), ASK, identity=IDENTITY)
    refused = turn.observations[1]
    assert refused.code == UNRESOLVED and "not complete" in refused.content and "'c2'" in refused.content
    assert ops.calls("renameDoc") == []


@needs_db
async def test_one_candidate_of_a_complete_lookup_goes_on_to_approval(ops: DocOpsAgent):
    ops.answers(findDocs=[page(ONE, complete=True)])
    script = ops.script(call("findDocs", {"q": "季度总结"}), call("renameDoc", RENAME), say("请确认"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("one"), ASK, identity=IDENTITY)
    assert codes(turn) == [None, APPROVAL], turn.as_dict()


@needs_db
async def test_a_lookup_that_found_nothing_leaves_only_a_made_up_target(ops: DocOpsAgent):
    ops.changed(
        "renameDoc", args={"docId": {"sources": ["USER", "EVIDENCE", "MODEL"]}, "newTitle": {"sources": ["MODEL"]}}
    )
    ops.answers(findDocs=[page([], complete=True)])
    script = ops.script(call("findDocs", {"q": "季度总结"}), call("renameDoc", RENAME), say("没找到"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("zero"), ASK, identity=IDENTITY)
        records = await stored_evidence(yard, turn)
    refused = turn.observations[1]
    assert refused.code == UNRESOLVED and "not found by a lookup" in refused.content
    assert [r.tool for r in records] == ["findDocs"]  # no evidence for the refused write


def test_target_arg_must_name_a_listed_argument_of_a_write():
    base = {"sideEffect": "WRITE", "success": {"path": "ok", "op": "TRUTHY"}, "args": {"id": {"sources": ["USER"]}}}
    with pytest.raises(ContractError) as listed:
        parse_contract({"tools": {"w": {**base, "targetArg": "docId"}}}, skill_key="k")
    assert listed.value.rule == "doc.targetArg" and "not an entry of args" in listed.value.message
    only_model = {**base, "args": {"id": {"sources": ["MODEL"]}}, "targetArg": "id"}
    with pytest.raises(ContractError, match="only accepts MODEL"):
        parse_contract({"tools": {"w": only_model}}, skill_key="k")
    with pytest.raises(ContractError, match="only for WRITE tools"):
        parse_contract({"tools": {"r": {"args": {"id": {"sources": ["USER"]}}, "targetArg": "id"}}}, skill_key="k")
    parsed, _ = parse_contract({"tools": {"w": {**base, "targetArg": "id"}}}, skill_key="k")
    assert parsed.tools["w"].target_arg == "id"
