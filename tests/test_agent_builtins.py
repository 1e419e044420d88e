"""The builtin tools of contract spec §12, the outputs of §8 and the completion checks of §10.2."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.builtins import BUILTIN_NAMES, call_builtin, offered_builtins
from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import MemoryEvidenceStore, NodeContext
from skillyard.agent.contract_parse import parse_contract
from skillyard.agent.loader import ContractSkill
from skillyard.agent.settings import AgentSettings
from skillyard.agent.state import (
    CheckpointType,
    Entity,
    Evidence,
    EvidenceStatus,
    GatedWrite,
    NodeState,
    NodeStatus,
    Observation,
    OutputValue,
    SessionState,
    TaskState,
)

OK = {"path": "code", "op": "EQ", "value": 200}
CONTRACT: dict[str, Any] = {
    "target": "createArticle",
    "tools": {
        "queryArticle": {
            "success": OK,
            "args": {"keyword": {"sources": ["USER", "MODEL"]}},
            "extracts": [{"key": "articles", "path": "data.records"}],
        },
        "createArticle": {
            "sideEffect": "WRITE",
            "success": OK,
            "args": {
                "title": {"sources": ["USER"]},
                "note": {},  # required, no from/const, missing ASK_USER by default
                "memo": {"required": False},
                "category": {"enum": ["news", "blog"], "sources": ["MODEL"]},
                "channel": {"const": "web"},
                "author": {"from": "platform.name"},
                "orderInfo.taxNo": {"sources": ["USER"]},
                "tags": {"sources": ["EVIDENCE"], "missing": {"action": "CALL_TOOL", "tool": "queryArticle"}},
                "spaceId": {"from": "evidence.articles.0.spaceId", "missing": {"action": "FAIL"}},
            },
        },
        "notInToolNames": {"args": {"secret": {"sources": ["USER"]}}},
    },
    "outputs": {
        "articleId": {"sources": ["EVIDENCE"], "entity": {"type": "article", "scalar": "id"}},
        "status": {"sources": ["CONTRACT"], "constant": "PUBLISHED", "share": "TASK"},
        "space": {"required": False, "share": "SESSION", "entity": {"type": "space", "name": "label"}},
    },
}
TOOLS = ("queryArticle", "createArticle")


def refused(obs: Observation, code: ErrorCode) -> str:
    """Assert a refusal with the full code and a concrete next step; return message + next step for checks."""
    assert not obs.ok, obs.content
    assert obs.code == code.value and obs.code.startswith("agent_runtime.")
    assert obs.next_step and len(obs.next_step) > 10
    assert obs.for_model()["code"] == code.value
    return f"{obs.content} | {obs.next_step}"


@pytest.fixture
def yard(skills_root: Path, make_skill) -> SkillYard:
    make_skill("article_lifecycle", "name: article_lifecycle\ndescription: Creates articles\nskill_key: cms.article")
    return SkillYard(skills_dirs=[skills_root], include_builtin=False)


@pytest.fixture
def make_ctx(yard: SkillYard):
    def make(contract: dict[str, Any] | None = None, tools: tuple[str, ...] = TOOLS, **node: Any) -> NodeContext:
        parsed, _ = parse_contract(json.dumps(CONTRACT if contract is None else contract), skill_key="cms.article")
        skill = ContractSkill(
            "cms.article",
            "article_lifecycle",
            "Creates articles",
            "Manual.",
            tools,
            parsed,
            yard.skill("article_lifecycle"),
        )
        session = SessionState("s1", "cms", identity={"user_id": 7, "actor_name": "Ann"})
        task = TaskState("t1", "s1", node_ids=["n1"])
        return NodeContext(
            yard=yard,
            skill=skill,
            session=session,
            task=task,
            node=NodeState("n1", "t1", "cms.article", "create an article", **node),
            store=MemoryEvidenceStore(),
            settings=AgentSettings(),
        )

    return make


@pytest.fixture
def ctx(make_ctx) -> NodeContext:
    return make_ctx()


async def add_evidence(ctx: NodeContext, tool: str = "queryArticle", **kw: Any) -> Evidence:
    fields: dict[str, Any] = {
        "node_id": "n1",
        "args": {},
        "write": tool == "createArticle",
        "status": EvidenceStatus.SUCCESS,
        "business_ok": True,
        "response": {"code": 200, "data": {"records": [{"id": "a1", "spaceId": "s9"}], "id": "a42"}},
    }
    fields.update(kw)
    evidence = Evidence(id=ctx.store.new_evidence_id(), task_id="t1", tool=tool, **fields)
    await ctx.record(evidence)
    return evidence


def offered_names(ctx: NodeContext) -> list[str]:
    return [d["function"]["name"] for d in offered_builtins(ctx)]


# catalog and arguments ---------------------------------------------------------------------------------------
def test_builtin_names_cover_section_12(ctx):
    env = {"current_datetime", "generate_uuid", "format_datetime", "add_datetime", "diff_datetime"}
    env |= {"get_weekday", "random_int", "hash"}
    node = {"builtin_node_" + n for n in ("follow_up", "approval", "finish", "fail", "delegate")}
    others = {"builtin_output_set", "builtin_state_set", "builtin_evidence_get", "builtin_session_info"}
    skill_md = {"read_skill_file"}  # the addition for skill_md sub-agents
    assert node | others | skill_md | {"builtin_env_" + n for n in env} == BUILTIN_NAMES
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


# follow-up -----------------------------------------------------------------------------------------------------
async def follow_up(ctx: NodeContext, fields: list[str] | None = None, question: str = "Which title?") -> Observation:
    args: dict[str, Any] = {"question": question, "suggestions": ["A", "B"]}
    if fields is not None:
        args["expectedFields"] = fields
    return await call_builtin(ctx, "builtin_node_follow_up", json.dumps(args))


async def test_follow_up_suspends_with_a_checkpoint(ctx):
    obs = await follow_up(ctx, ["title"])
    assert obs.ok and ctx.node.status is NodeStatus.SUSPENDED
    checkpoint = ctx.node.checkpoint
    assert checkpoint is not None and checkpoint.type is CheckpointType.FOLLOW_UP
    assert (checkpoint.question, checkpoint.expected_fields, checkpoint.suggestions) == (
        "Which title?",
        ["title"],
        ["A", "B"],
    )


@pytest.mark.parametrize("field", ["title", "orderInfo.taxNo", "taxNo", "note", "category", "keyword"])
async def test_follow_up_fields_that_allow_user(ctx, field):
    assert (await follow_up(ctx, [field])).ok, field


@pytest.mark.parametrize("field", ["channel", "author", "memo", "spaceId", "secret", "nonsense"])
async def test_follow_up_fields_that_do_not_allow_user_are_ungrounded(ctx, field):
    text = refused(await follow_up(ctx, ["title", field]), ErrorCode.FOLLOW_UP_UNGROUNDED)
    assert field in text and "askable arguments: " in text and "title" in text
    assert ctx.node.status is NodeStatus.RUNNING and ctx.node.checkpoint is None


async def test_follow_up_evidence_field_needs_a_non_empty_query_of_this_node(ctx):
    assert "after a non-empty query" in refused(await follow_up(ctx, ["tags"]), ErrorCode.FOLLOW_UP_UNGROUNDED)
    await add_evidence(ctx, empty=True)
    await add_evidence(ctx, node_id="other")  # another node's results do not count
    await add_evidence(ctx, business_ok=False)
    refused(await follow_up(ctx, ["tags"]), ErrorCode.FOLLOW_UP_UNGROUNDED)
    await add_evidence(ctx)
    assert (await follow_up(ctx, ["tags"])).ok


@pytest.mark.parametrize(
    ("latest", "grounded"),
    [
        ({"empty": True}, True),
        ({"business_ok": False}, True),
        ({}, False),
        ({"status": EvidenceStatus.FAILED, "business_ok": None}, False),
    ],
)
async def test_follow_up_without_fields_needs_an_empty_or_failed_latest_call(ctx, latest, grounded):
    refused(await follow_up(ctx), ErrorCode.FOLLOW_UP_UNGROUNDED)  # no business call yet
    await add_evidence(ctx, empty=not grounded)  # an earlier call does not matter
    await add_evidence(ctx, **latest)
    obs = await follow_up(ctx, [])
    if grounded:
        assert obs.ok and ctx.node.checkpoint is not None and ctx.node.checkpoint.expected_fields == []
    else:
        assert "not empty or failed" in refused(obs, ErrorCode.FOLLOW_UP_UNGROUNDED)


async def test_follow_up_answered_in_this_turn_is_refused(ctx):
    ctx.node.answered = [{"question": "Which  title?", "expected_fields": ["title"]}]
    text = refused(await follow_up(ctx, ["title"], question=" Which title? "), ErrorCode.FOLLOW_UP_ANSWERED)
    assert "do not ask again" in text
    assert (await follow_up(ctx, ["title", "note"])).ok  # other fields: a new question


async def test_follow_up_needs_a_question(ctx):
    refused(await call_builtin(ctx, "builtin_node_follow_up", {"question": "  "}), ErrorCode.ARG_REJECTED)


# approval ------------------------------------------------------------------------------------------------------
def gate(ctx: NodeContext, tool: str = "createArticle") -> GatedWrite:
    ctx.node.gated = GatedWrite(tool, {"title": "Hello", "channel": "web"}, {"title": "USER"}, "标题：Hello", "k1")
    return ctx.node.gated


async def test_approval_not_gated(ctx):
    obs = await call_builtin(ctx, "builtin_node_approval", {"summary": "Create it", "toolName": "createArticle"})
    refused(obs, ErrorCode.APPROVAL_NOT_GATED)
    assert ctx.node.checkpoint is None


async def test_approval_tool_mismatch_names_the_gated_tool(ctx):
    gate(ctx)
    obs = await call_builtin(ctx, "builtin_node_approval", {"summary": "Create it", "toolName": "queryArticle"})
    assert "'createArticle'" in refused(obs, ErrorCode.APPROVAL_TOOL_MISMATCH)
    assert ctx.node.status is NodeStatus.RUNNING


async def test_approval_suspends_with_the_gated_write(ctx):
    gated = gate(ctx)
    obs = await call_builtin(
        ctx, "builtin_node_approval", {"summary": "Create the article", "toolName": "createArticle"}
    )
    assert obs.ok and ctx.node.status is NodeStatus.SUSPENDED
    checkpoint = ctx.node.checkpoint
    assert checkpoint is not None and checkpoint.type is CheckpointType.APPROVAL
    assert checkpoint.question == "Create the article\n标题：Hello"
    assert (checkpoint.tool, checkpoint.args, checkpoint.summary) == ("createArticle", gated.args, "标题：Hello")
    assert ctx.node.gated is gated  # kept for the resume (idempotency key, sources)


async def test_approval_of_a_tool_that_is_not_a_contract_write(ctx):
    gate(ctx, "queryArticle")
    obs = await call_builtin(ctx, "builtin_node_approval", {"summary": "s", "toolName": "queryArticle"})
    refused(obs, ErrorCode.WRITE_CONTRACT_INCOMPLETE)


# output_set ----------------------------------------------------------------------------------------------------
async def output_set(ctx: NodeContext, key: str, value: Any, source: str, ref: str = "", path: str | None = None):
    args = {"key": key, "value": value, "sourceType": source, "sourceRef": ref}
    if path is not None:
        args["sourcePath"] = path
    return await call_builtin(ctx, "builtin_output_set", args)


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


# finish / fail -------------------------------------------------------------------------------------------------
async def finish(ctx: NodeContext, output: Any = "Created article a42.") -> Observation:
    return await call_builtin(ctx, "builtin_node_finish", {"output": output} if output is not None else {})


async def complete(ctx: NodeContext) -> Evidence:
    """A succeeded target write with both required outputs written."""
    read = await add_evidence(ctx)
    write = await add_evidence(ctx, "createArticle")
    assert (await output_set(ctx, "articleId", "a42", "EVIDENCE", read.id, "data.id")).ok
    assert (await output_set(ctx, "status", "PUBLISHED", "CONTRACT", "c")).ok
    return write


async def test_finish_missing_output(ctx):
    await complete(ctx)
    for output in (None, "", "   "):
        refused(await finish(ctx, output), ErrorCode.FINISH_MISSING_OUTPUT)
    assert ctx.node.status is NodeStatus.RUNNING


@pytest.mark.parametrize("status", [EvidenceStatus.STARTED, EvidenceStatus.UNKNOWN, EvidenceStatus.UNKNOWN_PRE_CALL])
async def test_finish_open_evidence(ctx, status):
    await complete(ctx)
    open_write = await add_evidence(ctx, "createArticle", status=status, business_ok=None)
    assert open_write.id in refused(await finish(ctx), ErrorCode.FINISH_OPEN_EVIDENCE)
    open_write.status = EvidenceStatus.FAILED
    assert (await finish(ctx)).ok


async def test_finish_output_missing(ctx):
    ctx.node.target = "createArticle"
    await add_evidence(ctx, "createArticle")
    assert (await output_set(ctx, "status", "PUBLISHED", "CONTRACT", "c")).ok
    assert "articleId" in refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_MISSING)
    ctx.node.outputs["articleId"] = OutputValue("", "EVIDENCE", "ev_1", "data.id")  # empty counts as missing
    refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_MISSING)


async def test_finish_output_source(ctx):
    await complete(ctx)
    ctx.node.outputs["articleId"] = OutputValue("a42", "MODEL")
    assert "articleId" in refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)
    ctx.node.outputs["articleId"] = OutputValue("a42", "EVIDENCE", "ev_gone", "data.id")
    refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)


async def test_finish_need_target(ctx):
    ctx.node.target = "createArticle"
    write = await complete(ctx)
    write.business_ok = False  # a business failure is not completed
    assert "createArticle" in refused(await finish(ctx), ErrorCode.FINISH_NEED_TARGET)
    await add_evidence(ctx, "createArticle", node_id="n0")  # another node's write does not count
    refused(await finish(ctx), ErrorCode.FINISH_NEED_TARGET)
    await add_evidence(ctx, "createArticle", empty=True)  # an empty result counts
    assert (await finish(ctx)).ok


async def test_finish_need_business(make_ctx):
    ctx = make_ctx({"tools": CONTRACT["tools"]})  # no target, no outputs
    assert "queryArticle, createArticle" in refused(await finish(ctx), ErrorCode.FINISH_NEED_BUSINESS)
    await add_evidence(ctx, business_ok=False)
    refused(await finish(ctx), ErrorCode.FINISH_NEED_BUSINESS)
    await add_evidence(ctx, empty=True)
    assert (await finish(ctx)).ok
    assert (await finish(make_ctx({"tools": {}}, tools=()))).ok  # no business tools: nothing to require


async def test_finish_gate_order(ctx):
    ctx.node.target = "createArticle"
    await add_evidence(ctx, "createArticle", status=EvidenceStatus.STARTED, business_ok=None)
    # fails checks 1–4: the first code wins, then each next one as the earlier is fixed
    refused(await finish(ctx, ""), ErrorCode.FINISH_MISSING_OUTPUT)
    refused(await finish(ctx), ErrorCode.FINISH_OPEN_EVIDENCE)
    ctx.evidence[0].status = EvidenceStatus.FAILED
    refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_MISSING)
    ctx.node.outputs["articleId"] = OutputValue("a42", "MODEL")
    ctx.node.outputs["status"] = OutputValue("PUBLISHED", "CONTRACT")
    refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)
    write = await add_evidence(ctx, "createArticle", business_ok=False)
    ctx.node.outputs["articleId"] = OutputValue("a42", "EVIDENCE", write.id, "data.id")
    refused(await finish(ctx), ErrorCode.FINISH_OUTPUT_SOURCE)  # a business-failed evidence is no source
    ctx.node.outputs["articleId"] = OutputValue("a1", "EVIDENCE", (await add_evidence(ctx)).id, "data.records.0.id")
    refused(await finish(ctx), ErrorCode.FINISH_NEED_TARGET)
    await add_evidence(ctx, "createArticle")
    assert (await finish(ctx)).ok


async def test_finish_done_publishes_shares_and_entities(ctx):
    ctx.session.entities.append(Entity("article", "a42", None, {"old": True}))
    await complete(ctx)
    obs = await output_set(
        ctx, "space", [{"id": "s9", "label": "News", "size": 3, "x": {}}, {"label": "no id"}], "SESSION", "s"
    )
    assert obs.ok
    obs = await finish(ctx, " Created article a42. ")
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


async def test_fail(ctx):
    refused(await call_builtin(ctx, "builtin_node_fail", {"reason": ""}), ErrorCode.ARG_REJECTED)
    obs = await call_builtin(ctx, "builtin_node_fail", {"reason": "The space is archived."})
    assert obs.ok and ctx.node.status is NodeStatus.FAILED and ctx.node.reply == "The space is archived."


# state, evidence, session --------------------------------------------------------------------------------------
async def test_state_set_and_reserved_keys(ctx):
    assert (await call_builtin(ctx, "builtin_state_set", {"key": "draft", "value": {"t": 1}})).ok
    assert ctx.node.scratch == {"draft": {"t": 1}}
    for key in ("_x", "$y", "status", "Target", "platform", "evidence", "userId", "checkpoint"):
        refused(await call_builtin(ctx, "builtin_state_set", {"key": key, "value": 1}), ErrorCode.STATE_KEY_RESERVED)
    refused(await call_builtin(ctx, "builtin_state_set", {"key": "", "value": 1}), ErrorCode.ARG_REJECTED)
    assert ctx.node.scratch == {"draft": {"t": 1}}


async def test_evidence_get(ctx):
    evidence = await add_evidence(ctx)
    obs = await call_builtin(ctx, "builtin_evidence_get", {"evidenceId": evidence.id})
    assert obs.ok and obs.content["response"] == evidence.response and obs.content["tool"] == "queryArticle"
    refused(await call_builtin(ctx, "builtin_evidence_get", {"evidenceId": " "}), ErrorCode.EVIDENCE_PATH_INVALID)
    hidden = await add_evidence(ctx, node_id="n0")
    text = refused(
        await call_builtin(ctx, "builtin_evidence_get", {"evidenceId": hidden.id}), ErrorCode.EVIDENCE_PATH_INVALID
    )
    assert evidence.id in text


async def test_session_info(ctx):
    obs = await call_builtin(ctx, "builtin_session_info", {})
    assert obs.content == {"sessionId": "s1", "taskId": "t1", "nodeId": "n1", "nodeStatus": "RUNNING"}


# env -----------------------------------------------------------------------------------------------------------
async def env(ctx: NodeContext, name: str, **args: Any) -> Any:
    obs = await call_builtin(ctx, f"builtin_env_{name}", args)
    assert obs.ok, obs.content
    return obs.content


async def env_refused(ctx: NodeContext, name: str, **args: Any) -> str:
    return refused(await call_builtin(ctx, f"builtin_env_{name}", args), ErrorCode.ARG_REJECTED)


async def test_env_current_datetime(ctx):
    now = await env(ctx, "current_datetime")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", now["datetime"]) and now["date"] == now["datetime"][:10]
    assert abs(now["timestamp"] / 1000 - datetime.now().timestamp()) < 5


async def test_env_generate_uuid(ctx):
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", (await env(ctx, "generate_uuid"))["uuid"]
    )
    assert re.fullmatch(r"[0-9a-f]{12}", (await env(ctx, "generate_uuid", length=12))["uuid"])
    await env_refused(ctx, "generate_uuid", length=33)


async def test_env_format_datetime(ctx):
    fmt = "format_datetime"
    assert (await env(ctx, fmt, input="2024-05-01T08:30:05"))["result"] == "2024-05-01 08:30:05"
    out = await env(
        ctx, fmt, input="01/05/2024 8:30", inputPattern="dd/MM/yyyy H:mm", outputPattern="yyyy年M月d日 EEEE"
    )
    assert out["result"] == "2024年5月1日 Wednesday"
    out = await env(ctx, fmt, input="20240501", outputPattern="yy-MMM-dd 'at' hh:mm:ss.SSS a")
    assert out["result"] == "24-May-01 at 12:00:00.000 AM"
    assert (await env(ctx, fmt, input="2024/05/01", outputPattern="%d.%m.%Y"))["result"] == "01.05.2024"
    out = await env(ctx, fmt, input="2024-05-01T08:30:00+08:00", outputPattern="yyyy-MM-dd'T'HH:mmXXX")
    assert out["result"] == "2024-05-01T08:30+08:00"
    assert "inputPattern" in await env_refused(ctx, fmt, input="May first")
    assert "does not match" in await env_refused(ctx, fmt, input="2024-05-01", inputPattern="dd/MM/yyyy")
    assert "not supported" in await env_refused(ctx, fmt, input="2024-05-01", outputPattern="yyyy QQ")


async def test_env_add_datetime(ctx):
    add = "add_datetime"
    assert (await env(ctx, add, base="2024-05-01", amount=3))["result"] == "2024-05-04"
    assert (await env(ctx, add, base="2024-01-31", amount=1, unit="MONTHS"))["result"] == "2024-02-29"
    assert (await env(ctx, add, base="2024-02-29", amount=-1, unit="year"))["result"] == "2023-02-28"
    assert (await env(ctx, add, base="2024-05-01", amount=-2, unit="hours"))["result"] == "2024-04-30 22:00:00"
    assert (await env(ctx, add, base="2024-05-01 10:00:00", amount=2, unit="weeks"))["result"] == "2024-05-15 10:00:00"
    assert "unit" in await env_refused(ctx, add, base="2024-05-01", amount=1, unit="fortnights")


async def test_env_diff_datetime(ctx):
    diff = "diff_datetime"
    assert (await env(ctx, diff, **{"from": "2024-05-01", "to": "2024-05-11"}))["result"] == 10
    assert (await env(ctx, diff, **{"from": "2024-05-11", "to": "2024-05-01"}))["result"] == -10
    assert (await env(ctx, diff, **{"from": "2024-01-31", "to": "2024-02-29", "unit": "months"}))["result"] == 0
    assert (await env(ctx, diff, **{"from": "2024-01-31", "to": "2024-03-01", "unit": "months"}))["result"] == 1
    assert (await env(ctx, diff, **{"from": "2020-06-01", "to": "2024-05-31", "unit": "years"}))["result"] == 3
    assert (await env(ctx, diff, **{"from": "2024-06-01", "to": "2020-06-02", "unit": "years"}))["result"] == -3
    assert (await env(ctx, diff, **{"from": "2024-05-01 08:00:00", "to": "2024-05-01 10:59:00", "unit": "h"}))[
        "result"
    ] == 2


async def test_env_get_weekday(ctx):
    day = await env(ctx, "get_weekday", date="2024-05-01")
    assert (day["weekday"], day["number"], day["weekdayZh"]) == ("Wednesday", 3, "星期三")


async def test_env_random_int(ctx):
    seen = {(await env(ctx, "random_int", min=1, max=3))["result"] for _ in range(60)}
    assert seen == {1, 2, 3}
    assert (await env(ctx, "random_int", min=5, max=5))["result"] == 5
    await env_refused(ctx, "random_int", min=5, max=4)


async def test_env_hash(ctx):
    assert (await env(ctx, "hash", input="abc"))["hash"] == hashlib.sha256(b"abc").hexdigest()
    out = await env(ctx, "hash", input="abc", algorithm="MD5", length=8)
    assert out == {"hash": hashlib.md5(b"abc").hexdigest()[:8], "algorithm": "md5"}
    assert (await env(ctx, "hash", input="abc", algorithm="SHA-1"))["hash"] == hashlib.sha1(b"abc").hexdigest()
    assert "sha256" in await env_refused(ctx, "hash", input="abc", algorithm="crc32")
    await env_refused(ctx, "hash", input="abc", algorithm="md5", length=40)
