"""The contract model and its load-time checks: §16 rules 1–13, §19 parsing rules, §11 platform fields, §17 codes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skillyard.agent import (
    UNSET,
    ContractError,
    ErrorCode,
    ExpressionError,
    MissingAction,
    Mode,
    OutputType,
    Prefix,
    SideEffect,
    SourceType,
    SuccessOp,
    When,
    parse_contract,
    parse_expression,
)
from skillyard.agent.expressions import HIDDEN_PLATFORM_FIELDS, PLATFORM_FIELDS

SPEC = Path("/work/shared/spec/skill-contract-spec.md")
OK_SUCCESS = {"path": "code", "op": "EQ", "value": 200}


def problems(raw: object) -> list[tuple[str, str]]:
    with pytest.raises(ContractError) as info:
        parse_contract(raw, skill_key="cms.test")  # type: ignore[arg-type]
    assert info.value.skill_key == "cms.test"
    return [(p.rule, p.path) for p in info.value.problems]


def write_tool(**extra: object) -> dict[str, object]:
    return {"sideEffect": "WRITE", "success": OK_SUCCESS, **extra}


# §17 ----------------------------------------------------------------------------------------------------------
SPEC_CODES = {  # §17, copied row by row (name → number)
    "MCP_TOOL_ERROR": "40003",
    "TOOL_BUSINESS_FAILED": "40004",
    "MCP_INVALID_PARAMS": "40014",
    "MCP_RPC_ERROR": "40015",
    "TOOL_TIMEOUT": "40016",
    "TOOL_UNREACHABLE": "40017",
    "TOOL_IO_ERROR": "40018",
    "TOOL_ERROR": "40029",
    "ARG_JSON_INVALID": "40020",
    "ARG_REJECTED": "40032",
    "PARAM_PROVENANCE_FAIL": "40022",
    "PARAM_PROVENANCE_CALL_TOOL": "40023",
    "PARAM_PROVENANCE_ASK_USER": "40024",
    "PARAM_PROVENANCE_REJECTED": "40025",
    "FINGERPRINT_TRIP": "40026",
    "CATALOG_DENIED": "40027",
    "STATE_KEY_RESERVED": "40028",
    "WRITE_PENDING_VERIFY": "40030",
    "WRITE_IN_FLIGHT": "40031",
    "APPROVAL_REQUIRED": "42221",
    "WRITE_CONTRACT_INCOMPLETE": "42206",
    "SOURCE_REJECT": "42223",
    "PLATFORM_FIELD_FORBIDDEN": "42236",
    "OUTPUT_PATH_INVALID": "42243",
    "OUTPUT_WRITE_FORBIDDEN": "42244",
    "APPROVAL_NOT_GATED": "42245",
    "APPROVAL_TOOL_MISMATCH": "42246",
    "FOLLOW_UP_ANSWERED": "42247",
    "FOLLOW_UP_UNGROUNDED": "42248",
    "EVIDENCE_PATH_INVALID": "42235",
    "SKILL_NOT_FOUND": "40411",
    "DELEGATE_FORBIDDEN": "42237",
    "DELEGATE_REPEATED": "42239",
    "PROVIDER_UNAVAILABLE": "42212",
}
FINISH_CODES = {
    "FINISH_MISSING_OUTPUT": "42250",
    "FINISH_OPEN_EVIDENCE": "42251",
    "FINISH_OUTPUT_MISSING": "42252",
    "FINISH_OUTPUT_SOURCE": "42253",
    "FINISH_NEED_TARGET": "42254",
    "FINISH_NEED_BUSINESS": "42255",
}


def test_every_spec_error_code_is_defined():
    assert len(SPEC_CODES) == 34
    for name, number in {**SPEC_CODES, **FINISH_CODES}.items():
        assert ErrorCode[name] == f"agent_runtime.{number}", name
    assert {c.name for c in ErrorCode} == set(SPEC_CODES) | set(FINISH_CODES)
    assert ErrorCode.TOOL_BUSINESS_FAILED == "agent_runtime.40004"


def test_codes_match_the_shared_spec_when_it_is_mounted():
    if not SPEC.is_file():
        pytest.skip("the shared spec is not mounted here")
    rows = re.findall(r"`agent_runtime\.(\d{5})`\s+`([A-Z_]+)`", SPEC.read_text(encoding="utf-8"))
    assert {name: number for number, name in rows} == SPEC_CODES


# defaults -----------------------------------------------------------------------------------------------------
def test_defaults_of_an_empty_contract_and_a_bare_tool():
    contract, warnings = parse_contract({"tools": {"query": {}, "save": write_tool()}}, skill_key="k")
    assert warnings == []
    assert contract.mode is Mode.REACT and contract.delegatable is False and contract.target is None
    query, save = contract.tools["query"], contract.tools["save"]
    assert query.side_effect is SideEffect.NONE and query.confirm is False and query.success is None
    assert save.side_effect is SideEffect.WRITE and save.confirm is True and contract.write_tools == ("save",)
    assert save.success is not None and save.success.op is SuccessOp.EQ and save.success.value == 200
    empty, _ = parse_contract("{}", skill_key="k")
    assert empty.tools == {} and empty.inputs == {} and empty.outputs == {}


def test_arg_input_output_defaults_and_values():
    raw = {
        "inputs": {"space": {"from": "shared.spaceId", "provider": "cms.space.pick"}},
        "outputs": {
            "articles": {"type": "LIST", "fields": ["id", "title"], "share": "SESSION"},
            "flag": {"constant": None, "sources": ["CONTRACT"]},
            "note": {},
        },
        "tools": {
            "save": write_tool(
                confirm=False,
                idempotencyKey=["spaceId", "title"],
                args={
                    "title": {"sources": ["USER", "MODEL"], "enum": ["a", "b"], "label": "Title"},
                    "lines[].code": {"from": "evidence.goods.0.code", "when": "UNIQUE", "sensitive": True},
                    "kind": {"const": None},
                    "owner": {"missing": {"action": "CALL_TOOL", "tool": "query"}, "sources": ["EVIDENCE"]},
                },
                extracts=[{"key": "saved", "path": "data", "entity": {"type": "article", "scalar": "id"}}],
                verify={"tool": "query", "args": {"t": {"from": "call.title"}, "n": {"const": 1}}},
            ),
            "query": {},
        },
    }
    contract, _ = parse_contract(raw, skill_key="k")
    assert contract.inputs["space"].from_expr == "shared.spaceId" and contract.inputs["space"].required is True
    assert contract.inputs["space"].provider == "cms.space.pick"
    articles, flag, note = (contract.outputs[k] for k in ("articles", "flag", "note"))
    assert articles.type is OutputType.LIST and articles.fields == ("id", "title") and articles.min_items == 1
    assert flag.constant is None and flag.sources == (SourceType.CONTRACT,)
    assert note.constant is UNSET and note.required is True and note.share is None and note.sources == ()
    save = contract.tools["save"]
    assert save.confirm is False and save.idempotency_key == ("spaceId", "title")
    title, lines, kind, owner = (save.args[k] for k in ("title", "lines[].code", "kind", "owner"))
    assert title.required is True and title.when is When.ALWAYS and title.missing.action is MissingAction.ASK_USER
    assert title.const is UNSET and not title.has_const and title.enum == ("a", "b") and title.label == "Title"
    assert lines.from_expr is not None and lines.from_expr.prefix is Prefix.EVIDENCE and lines.when is When.UNIQUE
    assert lines.from_expr.parts == ("goods", "0", "code") and lines.sensitive and lines.leaf == "code"
    assert kind.has_const and kind.const is None
    assert owner.missing.action is MissingAction.CALL_TOOL and owner.missing.tool == "query"
    entity = save.extracts[0].entity
    assert entity is not None and (entity.type, entity.id, entity.name, entity.scalar) == (
        "article",
        "id",
        "name",
        "id",
    )
    assert save.verify is not None and save.verify.tool == "query"
    assert save.verify.args["t"].from_expr is not None and save.verify.args["t"].from_expr.path == "title"
    assert save.verify.args["n"].const == 1 and save.verify.args["n"].from_expr is None


# §19 ----------------------------------------------------------------------------------------------------------
def test_comments_unknown_attributes_and_empty_strings():
    text = """
    {
      // the mode
      "mode": "PLAN", /* a block
      comment */
      "futureThing": {"x": 1},
      "target": "",
      "tools": {"q": {"label": "", "sideEffect": "", "fresh": true, "args": {"a": {"from": "", "sources": []}}}}
    }
    """
    contract, warnings = parse_contract(text, skill_key="k")
    assert contract.mode is Mode.PLAN and contract.target is None and warnings == []
    tool = contract.tools["q"]
    assert tool.label is None and tool.side_effect is SideEffect.NONE and tool.args["a"].from_expr is None


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"mode": "react"}, "mode"),
        ({"tools": {"t": {"sideEffect": "write"}}}, "tools.t.sideEffect"),
        ({"tools": {"t": {"args": {"a": {"when": "Always"}}}}}, "tools.t.args.a.when"),
        ({"tools": {"t": {"args": {"a": {"sources": ["user"]}}}}}, "tools.t.args.a.sources[0]"),
        ({"tools": {"t": {"args": {"a": {"missing": {"action": "ask_user"}}}}}}, "tools.t.args.a.missing.action"),
        ({"tools": {"t": {"success": {"path": "c", "op": "eq"}}}}, "tools.t.success.op"),
        ({"outputs": {"o": {"type": "list", "fields": ["a"]}}}, "outputs.o.type"),
        ({"outputs": {"o": {"share": "task"}}}, "outputs.o.share"),
        ({"outputs": {"o": {"sources": ["MODEL", "Evidence"]}}}, "outputs.o.sources[1]"),
    ],
)
def test_enums_are_case_sensitive_rule_13(raw, path):
    assert problems(raw) == [("§16.13", path)]


def test_case_hint_in_the_message():
    with pytest.raises(ContractError, match="case-sensitive: write 'WRITE'"):
        parse_contract({"tools": {"t": {"sideEffect": "write"}}}, skill_key="k")


# §16 ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["", "   ", "{not json", "[1, 2]", "null"])
def test_rule_1_contract_is_a_json_object(raw):
    assert problems(raw) == [("§16.1", "")]


@pytest.mark.parametrize("expr", ["foo.bar", "input.title", "call.title", "platform", "evidence."])
def test_rule_2_from_prefix(expr):
    assert problems({"tools": {"t": {"args": {"a": {"from": expr}}}}}) == [("§16.2", "tools.t.args.a.from")]


def test_rule_3_target_is_a_write_tool():
    assert problems({"target": "q", "tools": {"q": {}}}) == [("§16.3", "target")]
    assert problems({"target": "missing", "tools": {}}) == [("§16.3", "target")]
    contract, _ = parse_contract({"target": "w", "tools": {"w": write_tool()}}, skill_key="k")
    assert contract.target == "w"


def test_rule_4_delegatable_has_no_write_tools():
    assert problems({"delegatable": True, "tools": {"w": write_tool()}}) == [("§16.4", "delegatable")]
    contract, _ = parse_contract({"delegatable": True, "tools": {"q": {}}}, skill_key="k")
    assert contract.delegatable


def test_rule_5_tool_keys_are_not_empty():
    assert problems({"tools": {"": {}, " ": {}}}) == [("§16.5", "tools"), ("§16.5", "tools")]


def test_rule_6_write_tools_have_success():
    assert problems({"tools": {"createArticle": {"sideEffect": "WRITE"}}}) == [("§16.6", "tools.createArticle.success")]


def test_rule_7_confirm_only_on_write():
    assert problems({"tools": {"q": {"confirm": True}}}) == [("§16.7", "tools.q.confirm")]


def test_rule_8_verify_tool():
    assert problems({"tools": {"w": write_tool(verify={"tool": ""})}}) == [("§16.8", "tools.w.verify.tool")]
    assert problems({"tools": {"w": write_tool(verify={"tool": "nope"})}}) == [("§16.8", "tools.w.verify.tool")]
    two_writes = {"w": write_tool(verify={"tool": "w2"}), "w2": write_tool()}
    assert problems({"tools": two_writes}) == [("§16.8", "tools.w.verify.tool")]


def test_verify_args_only_const_or_call():
    raw = {"tools": {"q": {}, "w": write_tool(verify={"tool": "q", "args": {"a": {"from": "inputs.x"}, "b": {}}})}}
    assert problems(raw) == [("§6.4", "tools.w.verify.args.a.from"), ("§6.4", "tools.w.verify.args.b")]


def test_rule_9_from_and_const_exclusive():
    raw = {"tools": {"t": {"args": {"a.b": {"from": "inputs.x", "const": 1}}}}}
    assert problems(raw) == [("§16.9", 'tools.t.args["a.b"]')]


def test_rule_10_platform_field_is_open():
    assert problems({"tools": {"t": {"args": {"p": {"from": "platform.passportId"}}}}}) == [
        ("§16.10", "tools.t.args.p.from")
    ]
    assert problems({"tools": {"t": {"args": {"p": {"from": "platform.userid"}}}}}) == [
        ("§16.10", "tools.t.args.p.from")
    ]
    contract, _ = parse_contract({"tools": {"t": {"args": {"p": {"from": "platform.organId"}}}}}, skill_key="k")
    assert contract.tools["t"].args["p"].from_expr is not None


def test_rule_11_extract_path():
    raw = {"tools": {"t": {"extracts": [{"key": "a", "path": "data"}, {"key": "b"}, {"key": "c", "path": ""}]}}}
    assert problems(raw) == [("§16.11", "tools.t.extracts[1].path"), ("§16.11", "tools.t.extracts[2].path")]


def test_rule_12_list_outputs_have_fields():
    assert problems({"outputs": {"rows": {"type": "LIST"}}}) == [("§16.12", "outputs.rows.fields")]


def test_every_problem_is_collected_with_a_fix():
    raw = {
        "mode": "plan",
        "target": "q",
        "tools": {"q": {"confirm": True}, "w": {"sideEffect": "WRITE", "args": {"a": {"from": "x.y", "const": 2}}}},
        "outputs": {"userId": {}},
    }
    with pytest.raises(ContractError) as info:
        parse_contract(raw, skill_key="cms.article.lifecycle")
    found = {(p.rule, p.path) for p in info.value.problems}
    assert found == {
        ("§16.13", "mode"),
        ("§16.3", "target"),
        ("§16.7", "tools.q.confirm"),
        ("§16.6", "tools.w.success"),
        ("§16.2", "tools.w.args.a.from"),
        ("§16.9", "tools.w.args.a"),
        ("§11", "outputs.userId"),
    }
    text = str(info.value)
    assert "cms.article.lifecycle" in text and "tools.w.success" in text and '"op": "EQ"' in text


def test_wrong_types_are_reported():
    raw = {"delegatable": "yes", "tools": {"t": {"idempotencyKey": "title", "args": {"a": {"required": "no"}}}}}
    assert sorted(problems(raw)) == [
        ("§19", "delegatable"),
        ("§19", "tools.t.args.a.required"),
        ("§19", "tools.t.idempotencyKey"),
    ]


# §11 ----------------------------------------------------------------------------------------------------------
def test_platform_fields():
    assert PLATFORM_FIELDS == ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath")
    assert set(HIDDEN_PLATFORM_FIELDS) == {"passportId", "clientId", "sessionType", "adminUser", "adminCompany"}


def test_output_key_may_not_be_a_platform_field():
    assert problems({"outputs": {"organId": {}, "name": {}}}) == [("§11", "outputs.organId"), ("§11", "outputs.name")]


def test_arg_named_like_a_platform_field_warns():
    raw = {
        "tools": {
            "t": {
                "args": {
                    "userId": {"sources": ["USER"]},
                    "owner.organId": {"from": "shared.org"},
                    "memberId": {"from": "platform.memberId"},
                }
            }
        }
    }
    _, warnings = parse_contract(raw, skill_key="k")
    assert [(w.rule, w.path) for w in warnings] == [
        ("§11", "tools.t.args.userId"),
        ("§11", 'tools.t.args["owner.organId"]'),
    ]
    assert "platform.userId" in warnings[0].message


# §9 -----------------------------------------------------------------------------------------------------------
def test_expressions():
    expr = parse_expression("prior.article:42.title")
    assert expr.prefix is Prefix.PRIOR and expr.parts == ("article:42", "title") and expr.text == str(expr)
    assert parse_expression("inputs.lines[].code").parts == ("lines[]", "code")
    assert parse_expression("call.title", allow_call=True).prefix is Prefix.CALL
    with pytest.raises(ExpressionError, match=r"unknown prefix 'foo\.'.*inputs\., outputs\."):
        parse_expression("foo.bar")
    with pytest.raises(ExpressionError, match=r"only allowed in verify\.args"):
        parse_expression("call.title")
    with pytest.raises(ExpressionError, match="exactly one field"):
        parse_expression("platform.userId.x")
