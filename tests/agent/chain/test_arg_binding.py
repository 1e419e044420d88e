"""Stage 2 (chain/arg_binding.py, §5.2–§5.4): const and from override the model, when UNIQUE / ALWAYS, array
templates, nested paths."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.chain import preview_binding
from skillyard.agent.settings import AgentSettings
from support.agent.chain import BASE_CONTRACT, FREE, with_tool
from support.agent.keeper import IDENTITY, KeeperAgent
from support.agent.kit import SHARE, Kit, finish, lookup, put
from support.agent.memo import MemoAgent, changed, last, run_builtin, send_once
from support.agent.probes import call, needs_db, say

ITEMS = {"type": "LIST", "fields": ["code"], "required": False, "share": "SESSION"}


ONE = 'lambda i: {"code": 200, "data": {"records": [{"id": "n-1", "title": "季度总结"}]}}'


@needs_db
async def test_prior_entity_binds_in_a_later_task_after_a_restart(keeper_agent: KeeperAgent):
    script = keeper_agent.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
        call("openNote", {"noteId": "made-up"}),
        call("tagNote", {"noteId": "n-季度总结", "tag": "x"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        await agent.send(keeper_agent.sid("prior"), "保存季度总结", identity=IDENTITY)
        assert (await agent.resume(keeper_agent.sid("prior"), "CONFIRM")).status == "DONE"
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=script)
        later = await agent.send(keeper_agent.sid("prior"), "打开刚才那篇", identity=IDENTITY)
    opened, tagged = later.observations
    assert opened.ok and opened.sources["noteId"] == "PRIOR_TASK"
    assert keeper_agent.calls("openNote")[0]["input"]["noteId"] == "n-季度总结"
    # tag has sources [SESSION] and no session value "x": rejected; noteId itself matched PRIOR_TASK
    assert tagged.code == "agent_runtime.40025" and tagged.sources.get("noteId") == "PRIOR_TASK"


@pytest.mark.spec("§5.4")
@needs_db
async def test_when_unique_binds_evidence_only_for_a_single_candidate(memo_agent: MemoAgent):
    """§5.4: with when UNIQUE an ``evidence.*`` value binds only when it is a one-item list (the list itself)."""

    def mutate(c: dict[str, Any]) -> None:
        c["tools"]["pickTool"]["args"]["noteIds"] = {
            "from": "evidence.notes[].id",
            "when": "UNIQUE",
            "sources": ["MODEL"],
            "required": False,
        }
        c["tools"]["findNotes"]["extracts"] = [{"key": "notes", "path": "data.records"}]

    memo_agent.contract(changed(mutate))
    turn = await send_once(
        memo_agent, "x", call("findNotes", {"q": "a"}), call("pickTool", {"noteIds": ["mine"]}), say("stop")
    )
    assert turn.observations[1].sources["noteIds"] == "MODEL"
    assert memo_agent.calls("pickTool")[0]["input"]["noteIds"] == ["mine"]


@pytest.mark.spec("§5.3")
@pytest.mark.parametrize(
    ("arg", "expected"),
    [({"const": None, "label": "丁"}, None), ({"const": "x", "enum": ["a", "b"]}, "x")],
    ids=["const-null", "const-outside-enum"],
)
@needs_db
async def test_a_const_argument_ends_the_param_contract_at_binding(
    memo_agent: MemoAgent, arg: dict[str, Any], expected: Any
):
    """§5.3 step 1: "有 const → 写入常量，来源记为 CONTRACT，结束。" — a const argument is settled by binding, so
    the missing-value and enum steps do not apply to it (docs: ``args.*.const`` may be JSON null)."""
    memo_agent.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(d=arg)))
    turn = await run_builtin(memo_agent, "pickTool", {"d": "model"})
    assert last(turn).ok, last(turn)
    assert last(turn).sources["d"] == "CONTRACT"
    assert memo_agent.calls("pickTool")[0]["input"]["d"] == expected


@needs_db
async def test_from_platform_overrides_the_model_value_and_records_platform(kit: Kit):
    kit.with_args(org={"from": "platform.organId"})
    turn = await kit.send("x", call("probe", {"org": "999"}), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.sources["org"] == "PLATFORM", obs
    assert kit.probed()["org"] == "7"


@needs_db
async def test_from_into_a_nested_path_creates_the_object(kit: Kit):
    kit.with_args(**{"orderInfo.taxNo": {"from": "platform.userId"}})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert turn.observations[0].ok, turn.observations[0]
    assert kit.probed()["orderInfo"] == {"taxNo": "42"}


@needs_db
async def test_from_into_a_nested_path_keeps_the_sibling_fields(kit: Kit):
    kit.with_args(**{"orderInfo.taxNo": {"from": "platform.userId"}})
    await kit.send("x", call("probe", {"orderInfo": {"taxNo": "T-1", "amount": 3}}), say("stop"))
    assert kit.probed()["orderInfo"] == {"taxNo": "42", "amount": 3}


@needs_db
async def test_from_that_finds_nothing_keeps_the_model_value_as_model_when_model_is_allowed(kit: Kit):
    kit.with_args(org={"from": "platform.organName", "sources": ["MODEL"]})
    turn = await kit.send("x", call("probe", {"org": "ACME"}), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.sources["org"] == "MODEL", obs
    assert kit.probed()["org"] == "ACME"


@needs_db
async def test_const_object_overrides_the_model_value(kit: Kit):
    kit.with_args(opts={"const": {"a": [1, 2], "b": None}})
    turn = await kit.send("x", call("probe", {"opts": {"a": 9}}), say("stop"))
    assert turn.observations[0].ok and turn.observations[0].sources["opts"] == "CONTRACT"
    assert kit.probed()["opts"] == {"a": [1, 2], "b": None}


@needs_db
@pytest.mark.parametrize("constant", [False, 0, []], ids=["false", "zero", "empty-list"])
async def test_a_falsy_const_is_still_bound(kit: Kit, constant: Any):
    kit.with_args(flag={"const": constant})
    turn = await kit.send("x", call("probe", {"flag": "model"}), say("stop"))
    assert turn.observations[0].ok and turn.observations[0].sources["flag"] == "CONTRACT", turn.observations[0]
    assert kit.probed()["flag"] == constant


@needs_db
async def test_from_outputs_binds_the_value_written_in_this_node(kit: Kit):
    kit.with_args(outputs={"pick": SHARE}, x={"from": "outputs.pick"}, y={"from": "outputs.pick.id"})
    value = {"id": "a-9", "name": "A"}
    turn = await kit.send("x", put("pick", value), call("probe", {"x": "m", "y": "m"}), say("stop"))
    obs = turn.observations[1]
    assert obs.ok and obs.sources["x"] == "NODE_OUTPUT" and obs.sources["y"] == "NODE_OUTPUT", obs
    assert kit.probed()["x"] == value and kit.probed()["y"] == "a-9"


@needs_db
async def test_from_outputs_before_the_output_is_written_does_not_bind(kit: Kit):
    kit.with_args(outputs={"pick": SHARE}, x={"from": "outputs.pick", "sources": ["MODEL"]})
    turn = await kit.send("x", call("probe", {"x": "m"}), say("stop"))
    assert turn.observations[0].sources["x"] == "MODEL" and kit.probed()["x"] == "m"


@needs_db
async def test_a_falsy_session_value_is_bound_over_the_model_value(kit: Kit):
    kit.with_args(outputs={"count": SHARE}, n={"from": "session.count", "sources": ["MODEL"]})
    first, later = await kit.talk(
        ["数量记为 0", "用它"], put("count", 0), finish(), call("probe", {"n": 5}), say("stop")
    )
    assert first.status == "DONE", first.as_dict()
    assert later.observations[0].sources["n"] == "SESSION" and kit.probed()["n"] == 0


@needs_db
async def test_a_session_value_of_one_session_is_not_bound_in_another(kit: Kit):
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category", "sources": ["MODEL"]})
    first = await kit.send("分类工作", put("category", "工作"), finish(), session="one")
    assert first.status == "DONE"
    other = await kit.send("挑", call("probe", {"c": "m"}), say("stop"), session="two")
    assert other.observations[0].sources["c"] == "MODEL" and kit.probed()["c"] == "m"


@needs_db
async def test_from_evidence_path_binds_the_newest_success_and_records_evidence(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id"}, whole={"from": "evidence.notes"})
    newer = {"records": [{"id": "n-7", "title": "月报"}]}
    turn = await kit.send("x", lookup(), lookup(newer), call("probe", {}), say("stop"))
    obs = turn.observations[2]
    assert obs.ok and obs.sources["first"] == "EVIDENCE" and obs.sources["whole"] == "EVIDENCE", obs
    assert kit.probed()["first"] == "n-7" and kit.probed()["whole"] == newer["records"]


@needs_db
async def test_when_unique_evidence_binds_the_one_item_list_itself(kit: Kit):
    kit.with_args(ids={"from": "evidence.notes[].id", "when": "UNIQUE", "sources": ["MODEL"], "required": False})
    turn = await kit.send("x", lookup({"records": [{"id": "n-1"}]}), call("probe", {"ids": ["m"]}), say("stop"))
    obs = turn.observations[1]
    assert obs.ok and obs.sources["ids"] == "EVIDENCE", obs
    assert kit.probed()["ids"] == ["n-1"]


@needs_db
async def test_when_unique_evidence_with_no_candidate_does_not_bind(kit: Kit):
    kit.with_args(ids={"from": "evidence.notes[].id", "when": "UNIQUE", "sources": ["MODEL"], "required": False})
    turn = await kit.send("x", lookup(mode="empty"), call("probe", {"ids": ["m"]}), say("stop"))
    assert turn.observations[1].sources["ids"] == "MODEL" and kit.probed()["ids"] == ["m"]


@needs_db
async def test_when_always_evidence_binds_every_candidate(kit: Kit):
    kit.with_args(ids={"from": "evidence.notes[].id", "sources": ["MODEL"], "required": False})
    await kit.send("x", lookup(), call("probe", {"ids": ["m"]}), say("stop"))
    assert kit.probed()["ids"] == ["n-1", "n-2"]


@pytest.mark.spec("§5.4")
@needs_db
@pytest.mark.parametrize(("items", "bound"), [([{"code": "A"}], True), ([{"code": "A"}, {"code": "B"}], False)])
async def test_when_unique_on_a_session_list_binds_only_for_one_item(kit: Kit, items: list, bound: bool):
    """§5.4: for non-evidence expressions UNIQUE needs the array before the first ``[`` to have one item."""
    kit.with_args(
        outputs={"items": ITEMS},
        code={"from": "session.items[].code", "when": "UNIQUE", "sources": ["MODEL"], "required": False},
    )
    first, later = await kit.talk(["记下", "挑"], put("items", items), finish(), call("probe", {"code": "m"}), say("s"))
    assert first.status == "DONE", first.as_dict()
    obs = later.observations[0]
    if bound:
        assert obs.sources["code"] == "SESSION" and kit.probed()["code"] in ("A", ["A"]), (obs, kit.probed())
    else:
        assert obs.sources["code"] == "MODEL" and kit.probed()["code"] == "m"


@needs_db
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, [{"goodsCode": "A"}, {"goodsCode": "B"}]),
        ([{"goodsCode": "mine"}, {"qty": 2}], [{"goodsCode": "mine"}, {"qty": 2, "goodsCode": "B"}]),
        ([{"qty": 1}], [{"qty": 1, "goodsCode": "A"}, {"goodsCode": "B"}]),
    ],
    ids=["no-list", "fill-the-gap", "longer-source"],
)
async def test_array_template_from_a_session_list(kit: Kit, given: Any, expected: list):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"lines[].goodsCode": {"from": "session.items[].code", "sources": ["MODEL"], "required": False}},
    )
    arguments = {} if given is None else {"lines": given}
    first, later = await kit.talk(
        ["记下", "下单"], put("items", [{"code": "A"}, {"code": "B"}]), finish(), call("probe", arguments), say("s")
    )
    assert first.status == "DONE" and later.observations[0].ok, later.observations
    assert kit.probed()["lines"] == expected


@needs_db
async def test_array_template_from_an_output_of_this_node(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"lines[].goodsCode": {"from": "outputs.items[].code", "sources": ["MODEL"], "required": False}},
    )
    arguments = {"lines": [{"qty": 1}, {"qty": 2, "goodsCode": "mine"}]}
    await kit.send("x", put("items", [{"code": "A"}, {"code": "B"}]), call("probe", arguments), say("s"))
    assert kit.probed()["lines"] == [{"qty": 1, "goodsCode": "A"}, {"qty": 2, "goodsCode": "mine"}]


@pytest.mark.spec("§5.4")
@needs_db
async def test_an_evidence_expression_is_never_an_array_template(kit: Kit):
    """§5.4: ``evidence.*`` does not support array templates (the issue's example lines[].goodsCode from
    evidence.items[].code): the model's lines are left as they are."""
    kit.with_args(**{"lines[].goodsCode": {"from": "evidence.notes[].id", "sources": ["MODEL"], "required": False}})
    await kit.send("x", lookup(), call("probe", {"lines": [{"qty": 1}]}), say("stop"))
    assert kit.probed()["lines"] == [{"qty": 1}]


@pytest.mark.spec("§5.4")
@needs_db
async def test_when_unique_on_an_expression_without_a_list_binds(kit: Kit):
    """§5.4: UNIQUE looks at the array before the first ``[``; an expression without one binds as ALWAYS does."""
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category", "when": "UNIQUE", "sources": ["MODEL"]})
    _, later = await kit.talk(
        ["分类工作", "挑"], put("category", "工作"), finish(), call("probe", {"c": "m"}), say("s")
    )
    assert later.observations[0].sources["c"] == "SESSION" and kit.probed()["c"] == "工作"


@pytest.mark.spec("§5.4")
@needs_db
async def test_when_unique_evidence_needs_a_list_value(kit: Kit):
    """§5.4: for ``evidence.*`` UNIQUE needs the value to be a one-item array; a scalar is not bound."""
    kit.with_args(n={"from": "evidence.notes.0.id", "when": "UNIQUE", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup({"records": [{"id": "n-1"}]}), call("probe", {"n": "m"}), say("stop"))
    assert turn.observations[1].sources["n"] == "MODEL" and kit.probed()["n"] == "m"


@needs_db
async def test_when_unique_evidence_binds_a_one_record_list(kit: Kit):
    kit.with_args(rows={"from": "evidence.notes", "when": "UNIQUE", "sources": ["MODEL"]})
    await kit.send("x", lookup({"records": [{"id": "n-1", "title": "甲"}]}), call("probe", {"rows": "m"}), say("s"))
    assert kit.probed()["rows"] == [{"id": "n-1", "title": "甲"}]


@needs_db
async def test_when_unique_on_an_output_list_of_this_node(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        code={"from": "outputs.items[].code", "when": "UNIQUE", "sources": ["MODEL"]},
    )
    turn = await kit.send(
        "x",
        put("items", [{"code": "A"}, {"code": "B"}]),
        call("probe", {"code": "m"}),
        put("items", [{"code": "C"}]),
        call("probe", {"code": "m"}),
        say("stop"),
    )
    assert [turn.observations[i].sources["code"] for i in (1, 3)] == ["MODEL", "NODE_OUTPUT"]
    assert kit.probed(0)["code"] == "m" and kit.probed(1)["code"] in ("C", ["C"])


@needs_db
async def test_a_list_expression_into_a_plain_argument_binds_the_whole_list(kit: Kit):
    kit.with_args(outputs={"items": ITEMS}, codes={"from": "session.items[].code", "sources": ["MODEL"]})
    await kit.talk(
        ["记", "用"], put("items", [{"code": "A"}, {"code": "B"}]), finish(), call("probe", {"codes": "m"}), say("s")
    )
    assert kit.probed()["codes"] == ["A", "B"]


@needs_db
async def test_a_nested_array_template(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"order.lines[].code": {"from": "session.items[].code", "sources": ["MODEL"], "required": False}},
    )
    await kit.talk(
        ["记", "下单"],
        put("items", [{"code": "A"}, {"code": "B"}]),
        finish(),
        call("probe", {"order": {"id": 1, "lines": [{"qty": 1}]}}),
        say("s"),
    )
    assert kit.probed()["order"] == {"id": 1, "lines": [{"qty": 1, "code": "A"}, {"code": "B"}]}


@needs_db
async def test_an_array_template_skips_source_items_without_the_field(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"lines[].code": {"from": "session.items[].code", "sources": ["MODEL"], "required": False}},
    )
    await kit.talk(
        ["记", "下单"],
        put("items", [{"x": 1}, {"code": "B"}]),
        finish(),
        call("probe", {"lines": [{"qty": 1}, {"qty": 2}]}),
        say("s"),
    )
    assert kit.probed()["lines"] == [{"qty": 1}, {"qty": 2, "code": "B"}]


@pytest.mark.spec("§9", "§5.4")
@needs_db
async def test_an_outputs_list_expression_into_a_plain_argument_binds_the_list(kit: Kit):
    """§9 ``outputs.<路径>`` with §5.4's ``[]`` (every item), as ``session.items[].code`` and ``inputs.items[].code``
    do: the plain argument gets the list of codes."""
    kit.with_args(outputs={"items": ITEMS}, codes={"from": "outputs.items[].code", "sources": ["MODEL"]})
    turn = await kit.send("x", put("items", [{"code": "A"}, {"code": "B"}]), call("probe", {"codes": "m"}), say("s"))
    assert turn.observations[1].sources["codes"] == "NODE_OUTPUT", turn.observations[1]
    assert kit.probed()["codes"] == ["A", "B"]


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


@needs_db
def test_an_array_template_that_fills_nothing_leaves_the_arguments_alone(make_ctx: Any):
    # lines[].code from shared.items[].code: items without a code filled nothing, yet "lines": [] was added to
    # the arguments the skill receives
    from skillyard.agent.chain import arg_binding
    from skillyard.agent.chain.base import ChainCall

    contract = {"tools": {"queryArticle": {"args": {"lines[].code": {"from": "shared.items[].code"}}}}}
    ctx = make_ctx(contract)
    ctx.task.shared["items"] = [{"name": "no code"}]
    call = ChainCall(ctx, "queryArticle", {"q": "x"}, contract=ctx.tool_contract("queryArticle"))
    call.args = {"q": "x"}
    arg_binding.bind(call)
    assert call.args == {"q": "x"} and not call.bound
    ctx.task.shared["items"] = [{"code": "A"}, {"name": "no code"}, {"code": "C"}]
    arg_binding.bind(call)
    assert call.args == {"q": "x", "lines": [{"code": "A"}, {}, {"code": "C"}]}
    assert call.sources["lines.0.code"] == "SHARED" and "lines.1.code" not in call.sources
