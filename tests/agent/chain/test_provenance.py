"""Which trusted source a model-given value matches (chain/provenance.py, §5.3 step 3): USER text, answered
expected fields, EVIDENCE, SESSION, PRIOR_TASK, NODE_OUTPUT."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.codes import ErrorCode
from support.agent import keeper as keeper_kit
from support.agent import kit as kit_kit
from support.agent import memo as memo_kit
from support.agent.chain import BASE_CONTRACT, with_tool
from support.agent.keeper import CONTRACT, FREE, KeeperAgent, send_once
from support.agent.kit import ASK_USER, BUSINESS, RECORDS, REJECTED, SHARE, Kit, finish, lookup, put, two_sessions
from support.agent.memo import MemoAgent, _priority, changed
from support.agent.notes import IDENTITY, NotesAgent
from support.agent.probes import call, codes, needs_db, say

USER_TEXT = [
    ("10", "整理2010年的笔记", False),
    ("10", "发10份", True),
    ("10", "give me a10", False),
    ("10", "give me 10%", True),
    ("ab", "the _ab_ memo", True),
    ("季度总结", "请把季度总结发出去", True),
    ("Report", "send the REPORT", True),
    ("  季度总结 ", "请把季度总结发出去", True),
    ("x", "x", False),
]


@needs_db
async def test_user_text_matches_whole_numbers_only(notes_agent: NotesAgent):
    script = notes_agent.script(
        call("saveNote", {"title": "10"}),
        say("标题是什么？"),
        call("saveNote", {"title": "10"}),
        say("等确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        first = await agent.send(notes_agent.sid("10"), "整理2010年的笔记", identity=IDENTITY)
        assert codes(first) == ["agent_runtime.40024"]  # 10 is not in 2010
        assert first.status == "RUNNING" and first.reply == "标题是什么？"
        second = await agent.send(notes_agent.sid("10"), "标题就是 10", identity=IDENTITY)
    assert codes(second) == ["agent_runtime.42221"]
    assert second.observations[0].sources["title"] == "USER"
    assert second.node_id == first.node_id and notes_agent.calls() == []


@pytest.mark.parametrize(("value", "message", "matched"), USER_TEXT)
@needs_db
async def test_user_provenance_text_match_through_the_runner(
    keeper_agent: KeeperAgent, value: str, message: str, matched: bool
):
    result = await send_once(keeper_agent, message, call("sendMemo", {"text": value}), say("stop"))
    assert codes(result) == ["agent_runtime.42221" if matched else "agent_runtime.40024"]
    if matched:
        assert result.observations[0].sources["text"] == "USER"


@needs_db
async def test_a_number_value_said_by_the_user_is_user(keeper_agent: KeeperAgent):
    result = await send_once(keeper_agent, "发2024", call("sendMemo", {"text": 2024}), say("stop"))
    assert codes(result) == ["agent_runtime.42221"]


@needs_db
async def test_session_source_matches_a_session_value_by_argument_path(keeper_agent: KeeperAgent):
    contract = json.loads(json.dumps(CONTRACT))
    contract["outputs"]["tag"] = {"sources": ["USER"], "share": "SESSION"}
    contract["tools"]["tagNote"]["args"]["noteId"] = FREE
    keeper_agent.contract(contract)
    script = keeper_agent.script(
        call("builtin_output_set", {"key": "tag", "value": "紧急", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_node_finish", {"output": "记住了"}),
        call("tagNote", {"tag": "紧急"}),
        call("tagNote", {"tag": "普通"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        assert (
            await agent.send(keeper_agent.sid("sess"), "以后标签用紧急", identity=keeper_kit.IDENTITY)
        ).status == "DONE"
        later = await agent.send(keeper_agent.sid("sess"), "打标签", identity=keeper_kit.IDENTITY)
    ok, bad = later.observations
    assert ok.ok and ok.sources["tag"] == "SESSION"
    assert bad.code == "agent_runtime.40025"


@needs_db
async def test_an_evidence_value_passes_after_the_query(memo_agent: MemoAgent):
    memo_agent.contract(changed(_priority))
    turn = await memo_kit.send_once(
        memo_agent, "x", call("findNotes", {"q": "a"}), call("pickTool", {"a": "n-2", "b": 1, "c": 2, "d": 3}), say("s")
    )
    assert codes(turn) == [None, None] and turn.observations[1].sources["a"] == "EVIDENCE"


@pytest.mark.spec("§5.3")
@needs_db
async def test_from_with_user_source_asks_again_even_when_the_user_said_the_value(kit: Kit):
    """§5.3 note: from + sources [USER] asks again and again when the binding fails — the value counts as MODEL
    (step 3 does not consult sources when from/const are configured)."""
    kit.with_args(org={"from": "platform.organName", "sources": ["USER"]})
    turn = await kit.send("我们机构是 ACME 公司", call("probe", {"org": "ACME"}), say("stop"))
    assert codes(turn)[0] == ASK_USER and kit.calls("probe") == []


@needs_db
@pytest.mark.parametrize(
    ("value", "ok"),
    [("n-2", True), ("周报", True), ("N-2", False), ("zed", False), (200, False)],
    ids=["id", "nested-field", "case", "outside-the-extract", "response-code"],
)
async def test_evidence_source_needs_a_value_of_the_extracted_content(kit: Kit, value: Any, ok: bool):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    respond = {"records": RECORDS, "meta": {"owner": "zed"}}
    turn = await kit.send("x", lookup(respond), call("probe", {"n": value}), say("stop"))
    obs = turn.observations[1]
    if ok:
        assert obs.ok and obs.sources["n"] == "EVIDENCE", obs
    else:
        assert obs.code == REJECTED and len(kit.calls("probe")) == 0, obs


@needs_db
async def test_evidence_source_matches_a_number_value(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    turn = await kit.send("x", lookup({"records": [{"id": 7, "title": "七"}]}), call("probe", {"n": 7}), say("s"))
    assert turn.observations[1].ok and turn.observations[1].sources["n"] == "EVIDENCE"


@needs_db
async def test_evidence_source_does_not_accept_a_business_failure(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    turn = await kit.send("x", lookup(mode="business"), call("probe", {"n": "bad-1"}), say("stop"))
    assert codes(turn) == [BUSINESS, REJECTED]


@needs_db
async def test_evidence_source_does_not_accept_a_value_of_a_finished_task(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    _, later = await kit.talk(["找", "用"], lookup(), finish(), call("probe", {"n": "n-1"}), say("stop"))
    assert codes(later)[0] == REJECTED


@needs_db
@pytest.mark.parametrize(("sources", "expected"), [(["EVIDENCE", "USER"], "EVIDENCE"), (["USER", "EVIDENCE"], "USER")])
async def test_sources_are_matched_in_their_order(kit: Kit, sources: list[str], expected: str):
    kit.with_args(t={"sources": sources})
    turn = await kit.send("用周报那篇", lookup(), call("probe", {"t": "周报"}), say("stop"))
    assert turn.observations[1].ok and turn.observations[1].sources["t"] == expected


@needs_db
@pytest.mark.parametrize("source", ["PLATFORM", "CONTRACT"])
async def test_platform_and_contract_sources_never_match_a_model_value(kit: Kit, source: str):
    kit.with_args(u={"sources": [source]})
    turn = await kit.send("我是 42", call("probe", {"u": "42"}), say("stop"))
    assert codes(turn)[0] == REJECTED and kit.calls("probe") == []


@needs_db
@pytest.mark.parametrize(("value", "ok"), [("周报", True), ("别的", False)])
async def test_node_output_source_matches_the_output_of_the_same_path(kit: Kit, value: str, ok: bool):
    kit.with_args(outputs={"title": SHARE}, title={"sources": ["NODE_OUTPUT"]})
    turn = await kit.send("x", put("title", "周报"), call("probe", {"title": value}), say("stop"))
    obs = turn.observations[1]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, REJECTED)), obs
    if ok:
        assert obs.sources["title"] == "NODE_OUTPUT"


@needs_db
@pytest.mark.parametrize(("value", "ok"), [("n-2", True), ("周报", False), ("n-9", False)])
async def test_prior_task_source_matches_an_entity_id_only(kit: Kit, value: str, ok: bool):
    contract = kit.with_args(noteId={"sources": ["PRIOR_TASK"]})
    contract["tools"]["lookup"]["extracts"][0]["entity"] = {"type": "note", "name": "title"}
    kit.contract(contract)
    first, later = await kit.talk(["找", "打开"], lookup(), finish(), call("probe", {"noteId": value}), say("s"))
    assert first.status == "DONE", first.as_dict()
    obs = later.observations[0]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, REJECTED)), obs
    if ok:
        assert obs.sources["noteId"] == "PRIOR_TASK"


@needs_db
async def test_user_source_needs_at_least_two_characters(kit: Kit):
    kit.with_args(n={"sources": ["USER"]})
    turn = await kit.send("要 5 个", call("probe", {"n": "5"}), say("stop"))
    assert codes(turn)[0] == ASK_USER and kit.calls("probe") == []


@needs_db
async def test_user_source_ignores_case(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    turn = await kit.send("标题是 Weekly Report 吧", call("probe", {"t": "weekly REPORT"}), say("stop"))
    assert turn.observations[0].ok and turn.observations[0].sources["t"] == "USER", turn.observations[0]


@needs_db
async def test_user_source_is_not_matched_by_the_assistants_own_text(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    _, later = await kit.talk(
        ["起个标题", "好的"], say("建议标题：项目复盘"), call("probe", {"t": "项目复盘"}), say("stop")
    )
    assert codes(later)[0] == ASK_USER and kit.calls("probe") == []


@needs_db
async def test_user_source_matches_an_earlier_message_of_the_same_node(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    _, later = await kit.talk(
        ["标题用项目复盘", "就这样"], say("还要别的吗？"), call("probe", {"t": "项目复盘"}), say("stop")
    )
    assert later.observations[0].ok and later.observations[0].sources["t"] == "USER"


@pytest.mark.spec("§5.3")
@needs_db
async def test_a_bound_value_passes_whatever_the_sources_list(kit: Kit):
    """§5.3 step 3: a successful from binding gives the bound source; step 4 only refuses MODEL values."""
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category", "sources": ["USER"]})
    _, later = await kit.talk(["分类工作", "挑"], put("category", "工作"), finish(), call("probe", {}), say("s"))
    obs = later.observations[0]
    assert obs.ok and obs.sources["c"] == "SESSION", obs
    assert kit.probed()["c"] == "工作"


@needs_db
@pytest.mark.parametrize(
    ("lines", "ok"),
    [([{"goodsCode": "n-1"}, {"goodsCode": "n-2"}], True), ([{"goodsCode": "n-1"}, {"goodsCode": "zzz"}], False)],
    ids=["all-from-evidence", "one-made-up"],
)
async def test_each_item_of_an_array_path_needs_its_source(kit: Kit, lines: list, ok: bool):
    kit.with_args(**{"lines[].goodsCode": {"sources": ["EVIDENCE"]}})
    turn = await kit.send("x", lookup(), call("probe", {"lines": lines}), say("stop"))
    obs = turn.observations[1]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, REJECTED)), obs


@pytest.mark.spec("§5.3")
@needs_db
async def test_an_answered_expected_field_is_user_only_inside_its_node(kit: Kit):
    """§5.3 USER: the *current* follow-up's expectedFields; a later task does not inherit the answer."""
    kit.with_args(tag={"sources": ["USER"]})
    model = kit.model(
        call("builtin_node_follow_up", {"question": "打什么标签？", "expectedFields": ["tag"]}),
        call("probe", {"tag": "urgent-ish"}),
        finish(),
        call("probe", {"tag": "urgent-ish"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("ef"), "打个标签", identity=kit_kit.IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        done = await agent.resume(kit.sid("ef"), "REPLY", "紧急的那种")
        later = await agent.send(kit.sid("ef"), "再打一个", identity=kit_kit.IDENTITY)
    assert codes(done) == [None, None] and done.observations[0].sources["tag"] == "USER"
    assert codes(later)[0] == ASK_USER


@needs_db
@pytest.mark.parametrize(
    ("value", "message", "ok"),
    [("C++", "用 C++写一个", True), ("a.b", "用 axb 吧", False), ("(1)", "选第(1)项", True)],
    ids=["plus", "dot-is-no-wildcard", "parens"],
)
async def test_user_text_match_treats_the_value_literally(kit: Kit, value: str, message: str, ok: bool):
    kit.with_args(t={"sources": ["USER"]})
    turn = await kit.send(message, call("probe", {"t": value}), say("stop"))
    assert codes(turn)[0] == (None if ok else ASK_USER), turn.observations[0]


@needs_db
async def test_evidence_source_does_not_accept_another_sessions_evidence(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    _, b = await two_sessions(kit, [lookup(), say("找到了")], [call("probe", {"n": "n-1"}), say("s")])
    assert codes(b) == [REJECTED] and kit.calls("probe") == []


@needs_db
async def test_a_value_in_a_follow_up_answer_is_user(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    model = kit.model(
        lookup(mode="empty"),
        call("builtin_node_follow_up", {"question": "没找到，换个标题？"}),
        call("probe", {"t": "项目复盘"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("fa"), "找笔记", identity=kit_kit.IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        after = await agent.resume(kit.sid("fa"), "REPLY", "那就用项目复盘")
    assert after.observations[0].ok and after.observations[0].sources["t"] == "USER"


@needs_db
@pytest.mark.parametrize(
    ("value", "message", "ok"),
    [
        ("季度", "看看季度Q1的", False),
        ("报告", "写A报告", False),
        ("10", "2010年的10月", True),
        ("ab", "abab ab", True),
    ],
    ids=["cjk-then-letter", "letter-then-cjk", "second-occurrence", "later-standalone"],
)
async def test_user_text_match_boundaries_per_the_issue_decision(kit: Kit, value: str, message: str, ok: bool):
    """Issue decision: the normalized value must occur with no ASCII letter or digit directly before or after it —
    for any value, and at any of its occurrences."""
    kit.with_args(t={"sources": ["USER"]})
    turn = await kit.send(message, call("probe", {"t": value}), say("stop"))
    assert codes(turn)[0] == (None if ok else ASK_USER), turn.observations[0]


@pytest.mark.spec("§9", "§5.3")
@needs_db
async def test_node_output_source_matches_a_bound_input(kit: Kit):
    """§9: inputs are recorded as NODE_OUTPUT; §5.3 NODE_OUTPUT matches the node's data at the argument path."""
    contract = kit.with_args(outputs={"topic": SHARE}, topic={"sources": ["NODE_OUTPUT"]})
    contract["inputs"] = {"topic": {"from": "session.topic"}}
    kit.contract(contract)
    _, later = await kit.talk(
        ["主题工作", "找"], put("topic", "工作"), finish(), call("probe", {"topic": "工作"}), say("stop")
    )
    assert later.observations[0].ok and later.observations[0].sources["topic"] == "NODE_OUTPUT", later.observations


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
