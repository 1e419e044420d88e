"""The builtin tools of §12 as a whole (builtins/__init__.py, builtins/common.py): names, what is offered when,
unknown / not-offered builtins, argument errors."""

from __future__ import annotations

import pytest

from skillyard import SkillYard
from skillyard.agent.builtins import BUILTIN_NAMES, call_builtin, offered_builtins
from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import NodeContext
from skillyard.agent.state import GatedWrite
from support.agent import memo as memo_kit
from support.agent.context import refused
from support.agent.keeper import IDENTITY, TOOLS, KeeperAgent, Recorder, modified
from support.agent.memo import ARG_REJECTED, MemoAgent, last, run_builtin
from support.agent.probes import call, codes, needs_db, say

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


def offered_names(ctx: NodeContext) -> list[str]:
    return [d["function"]["name"] for d in offered_builtins(ctx)]


@needs_db
async def test_offered_tools_follow_the_spec_conditions(keeper_agent: KeeperAgent):
    model = Recorder(
        keeper_agent.script(
            call("findNotes", {"q": "x"}),
            call("saveNote", {"title": "季度总结"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=model)
        await agent.send(keeper_agent.sid("offer"), "保存季度总结", identity=IDENTITY)
    (prompt0, offered0), _, (_, offered2) = model.seen
    assert [n for n in offered0 if not n.startswith("builtin_") and n != "read_skill_file"] == TOOLS
    assert "builtin_node_approval" not in offered0 and "builtin_node_approval" in offered2
    assert "builtin_node_delegate" not in offered0
    assert "builtin_output_set" in offered0  # outputs are shared: used
    for name in (
        "builtin_node_follow_up",
        "builtin_node_finish",
        "builtin_node_fail",
        "builtin_state_set",
        "builtin_evidence_get",
        "builtin_session_info",
        "builtin_env_current_datetime",
        "builtin_env_generate_uuid",
        "builtin_env_format_datetime",
        "builtin_env_add_datetime",
        "builtin_env_diff_datetime",
        "builtin_env_get_weekday",
        "builtin_env_random_int",
        "builtin_env_hash",
    ):
        assert name in offered0, name
    system = prompt0[0]["content"]
    assert "A careful note keeper." in system and "Keep the user's notes." in system
    assert "The keeper manual" in system and "保存季度总结" in system
    catalog = system.split("## Tools", 1)[1]
    assert "saveNote" in catalog and "plainTool" not in catalog.split("## Goal")[0]


@needs_db
async def test_output_set_not_offered_when_outputs_are_unused_answers_catalog_denied(keeper_agent: KeeperAgent):
    keeper_agent.contract(modified(outputs={"noteId": {"sources": ["EVIDENCE"], "required": False}}))
    model = Recorder(
        keeper_agent.script(
            call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "USER", "sourceRef": "u"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=model)
        result = await agent.send(keeper_agent.sid("unused"), "x", identity=IDENTITY)
    assert "builtin_output_set" not in model.seen[0][1]
    assert codes(result) == ["agent_runtime.40027"]


@pytest.mark.parametrize(("case", "name", "arguments"), BAD_BUILTIN_ARGS, ids=[c[0] for c in BAD_BUILTIN_ARGS])
@needs_db
async def test_builtin_argument_errors_answer_arg_rejected_with_a_next_step(
    memo_agent: MemoAgent, case, name, arguments
):
    turn = await run_builtin(memo_agent, name, arguments)
    obs = last(turn)
    assert not obs.ok and obs.code == ARG_REJECTED, obs
    assert obs.next_step, obs
    assert turn.status == "RUNNING" and memo_agent.calls() == []


@pytest.mark.parametrize("name", ["builtin_node_finish", "builtin_env_hash", "builtin_node_approval"])
@needs_db
async def test_builtin_arguments_that_are_not_json(memo_agent: MemoAgent, name: str):
    before = [call("saveNote", {"title": "季度总结"})] if name == "builtin_node_approval" else []
    turn = await run_builtin(memo_agent, name, '{"output": ', *before)
    assert last(turn).code == ARG_JSON_INVALID and last(turn).next_step


@pytest.mark.spec("§12")
@needs_db
async def test_builtins_that_are_not_offered_now_answer_with_their_own_code(memo_agent: MemoAgent):
    """Issue: a builtin that exists but is not offered answers with its own code (APPROVAL_NOT_GATED,
    DELEGATE_FORBIDDEN), otherwise CATALOG_DENIED (read_skill_file with a short manual)."""
    model = memo_kit.Recorder(
        memo_agent.script(
            call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
            call("builtin_node_delegate", {"skillKey": "memo.keeper", "objective": "x"}),
            call("read_skill_file", {"path": "SKILL.md"}),
            call("builtin_state_get", {"key": "draft"}),  # no such builtin in §12
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        turn = await agent.send(memo_agent.sid("notoffered"), "x", identity=memo_kit.IDENTITY)
    assert codes(turn) == ["agent_runtime.42245", "agent_runtime.42237", CATALOG_DENIED, CATALOG_DENIED]
    assert all(o.next_step for o in turn.observations)
    offered = model.offered(0)
    assert "builtin_node_approval" not in offered and "builtin_node_delegate" not in offered
    assert "read_skill_file" not in offered


# catalog and arguments ---------------------------------------------------------------------------------------
@pytest.mark.spec("§12")
def test_builtin_names_cover_section_12(ctx):
    env = {"current_datetime", "generate_uuid", "format_datetime", "add_datetime", "diff_datetime"}
    env |= {"get_weekday", "random_int", "hash"}
    node = {"builtin_node_" + n for n in ("follow_up", "approval", "finish", "fail", "delegate")}
    others = {"builtin_output_set", "builtin_state_set", "builtin_evidence_get", "builtin_session_info"}
    skill_md = {"read_skill_file"}  # the addition for skill_md sub-agents
    events = {"builtin_node_wait_event"}  # agent part 3: external events
    assert node | others | skill_md | events | {"builtin_env_" + n for n in env} == BUILTIN_NAMES
    assert "read_skill_file" not in offered_names(ctx)  # offered to skill_md sub-agents only


def test_offered_definitions_are_openai_functions(ctx):
    for definition in offered_builtins(ctx):
        assert definition["type"] == "function"
        function = definition["function"]
        assert function["name"] in BUILTIN_NAMES and function["description"]
        assert function["parameters"]["type"] == "object"
    names = offered_names(ctx)
    assert "builtin_node_finish" in names and "builtin_env_hash" in names
    assert "builtin_node_delegate" not in names  # never in part 1


def test_approval_offered_only_when_gated(ctx):
    assert "builtin_node_approval" not in offered_names(ctx)
    ctx.node.gated = GatedWrite("createArticle", {"title": "x"}, {}, "标题：x", "k1")
    assert "builtin_node_approval" in offered_names(ctx)


def test_output_set_offered_only_when_outputs_are_used(make_ctx):
    assert "builtin_output_set" in offered_names(make_ctx())
    assert "builtin_output_set" not in offered_names(make_ctx({"tools": {}}))
    plain = {"tools": {}, "outputs": {"x": {"required": False}}}  # optional, not shared, no entity
    assert "builtin_output_set" not in offered_names(make_ctx(plain))
    for used in (
        {"required": True},
        {"required": False, "share": "TASK"},
        {"required": False, "entity": {"type": "a"}},
    ):
        assert "builtin_output_set" in offered_names(make_ctx({"tools": {}, "outputs": {"x": used}}))


async def test_not_offered_builtins_answer_with_their_own_code(make_ctx):
    ctx = make_ctx({"tools": {}})
    text = refused(
        await call_builtin(ctx, "builtin_node_approval", {"summary": "s", "toolName": "t"}),
        ErrorCode.APPROVAL_NOT_GATED,
    )
    assert "write tool first" in text
    refused(await call_builtin(ctx, "builtin_node_delegate", {"skillKey": "x"}), ErrorCode.DELEGATE_FORBIDDEN)
    args = {"key": "x", "value": 1, "sourceType": "USER", "sourceRef": "u"}
    text = refused(await call_builtin(ctx, "builtin_output_set", args, call_id="c1"), ErrorCode.CATALOG_DENIED)
    assert "builtin_node_finish" in text  # the next step lists what is offered
    obs = await call_builtin(ctx, "builtin_nope", {})
    assert "queryArticle" in refused(obs, ErrorCode.CATALOG_DENIED)


async def test_bad_argument_json_and_shapes(ctx):
    obs = await call_builtin(ctx, "builtin_state_set", '{"key": ', call_id="c9")
    refused(obs, ErrorCode.ARG_JSON_INVALID)
    assert obs.arguments == '{"key": ' and obs.call_id == "c9" and obs.tool == "builtin_state_set"
    refused(await call_builtin(ctx, "builtin_state_set", "[1, 2]"), ErrorCode.ARG_REJECTED)
    assert "'value' is required" in refused(
        await call_builtin(ctx, "builtin_state_set", {"key": "a"}), ErrorCode.ARG_REJECTED
    )
    text = refused(await call_builtin(ctx, "builtin_env_random_int", {"min": "1", "max": 3}), ErrorCode.ARG_REJECTED)
    assert "'min' must be a JSON integer" in text
    bad_items = {"question": "q", "expectedFields": [1]}
    refused(await call_builtin(ctx, "builtin_node_follow_up", bad_items), ErrorCode.ARG_REJECTED)
    assert (await call_builtin(ctx, "builtin_session_info", "")).ok  # empty text = no arguments
