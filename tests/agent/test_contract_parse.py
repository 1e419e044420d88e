"""Reading a contract (contract_parse.py, contract_values.py): §19 parsing (comments, json5, BOM, null and "" as
not configured, unknown attributes), the load-time rules of §16 and §11, inline contracts and contract.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent import ContractError, Mode, SideEffect, parse_contract
from support.agent.contract import write_tool
from support.agent.contract_probes import BASE, SKILL, check, contract_with, errors, load_errors, loaded, make_agent
from support.agent.keeper import CONTRACT, KeeperAgent, check_rows
from support.agent.kit import Kit, load
from support.agent.probes import needs_db, say


def _empty_strings_contract() -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract.update({"mode": "", "target": "", "delegatable": "", "inputs": ""})
    find = contract["tools"]["findNotes"]
    find.update({"sideEffect": "", "confirm": "", "label": "", "idempotencyKey": "", "verify": "", "error": ""})
    find["args"]["q"] = {
        "from": "",
        "const": "",
        "when": "",
        "sources": ["MODEL", ""],
        "required": "",
        "enum": "",
        "missing": {"action": "", "tool": "", "message": ""},
        "label": "",
    }
    find["extracts"][0].update({"key": "notes", "fields": ["id", "title", ""], "entity": ""})
    contract["outputs"]["noteId"].update({"type": "", "share": "", "entity": "", "constant": "", "hint": ""})
    return contract


ENUM_CASES = [
    ("mode", lambda c: c.update(mode="react"), "mode"),
    ("sideEffect", lambda c: c["tools"]["sendMemo"].update(sideEffect="write"), "tools.sendMemo.sideEffect"),
    ("when", lambda c: c["tools"]["findNotes"]["args"]["q"].update(when="unique"), "tools.findNotes.args.q.when"),
    (
        "sources",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update(sources=["model"]),
        "tools.findNotes.args.q.sources[0]",
    ),
    (
        "missing.action",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update(missing={"action": "Ask_User"}),
        "tools.findNotes.args.q.missing.action",
    ),
    ("success.op", lambda c: c["tools"]["findNotes"]["success"].update(op="eq"), "tools.findNotes.success.op"),
    ("outputs.type", lambda c: c["outputs"]["noteId"].update(type="list", fields=["id"]), "outputs.noteId.type"),
    ("outputs.share", lambda c: c["outputs"]["noteId"].update(share="task"), "outputs.noteId.share"),
    (
        "outputs.sources",
        lambda c: c["outputs"]["noteId"].update(sources=["Evidence"]),
        "outputs.noteId.sources[0]",
    ),
]


RULE_CASES = [
    ("16.1 null", None, "§16.1", ""),
    (
        "16.2 prefix",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update(sources=[], **{"from": "user.q"}),
        "§16.2",
        "tools.findNotes.args.q.from",
    ),
    (
        "16.2 call outside verify",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update(**{"from": "call.q"}),
        "§16.2",
        "tools.findNotes.args.q.from",
    ),
    ("16.3 target read", lambda c: c.update(target="findNotes"), "§16.3", "target"),
    ("16.3 target unknown", lambda c: c.update(target="nothing"), "§16.3", "target"),
    ("16.4 delegatable", lambda c: c.update(delegatable=True), "§16.4", "delegatable"),
    ("16.5 empty key", lambda c: c["tools"].update({"": {}}), "§16.5", "tools"),
    ("16.6 write without success", lambda c: c["tools"]["sendMemo"].pop("success"), "§16.6", "tools.sendMemo.success"),
    (
        "16.7 confirm on read",
        lambda c: c["tools"]["findNotes"].update(confirm=True),
        "§16.7",
        "tools.findNotes.confirm",
    ),
    (
        "16.8 verify tool missing",
        lambda c: c["tools"]["saveNote"]["verify"].update(tool="nothing"),
        "§16.8",
        "tools.saveNote.verify.tool",
    ),
    (
        "16.8 verify tool write",
        lambda c: c["tools"]["saveNote"]["verify"].update(tool="sendMemo"),
        "§16.8",
        "tools.saveNote.verify.tool",
    ),
    (
        "16.8 verify tool empty",
        lambda c: c["tools"]["saveNote"]["verify"].update(tool=""),
        "§16.8",
        "tools.saveNote.verify.tool",
    ),
    (
        "16.9 from and const",
        lambda c: c["tools"]["saveNote"]["args"]["owner"].update(const="x"),
        "§16.9",
        "tools.saveNote.args.owner",
    ),
    (
        "16.10 hidden platform field",
        lambda c: c["tools"]["saveNote"]["args"]["owner"].update(**{"from": "platform.passportId"}),
        "§16.10",
        "tools.saveNote.args.owner.from",
    ),
    (
        "16.10 unknown platform field",
        lambda c: c["tools"]["saveNote"]["args"]["owner"].update(**{"from": "platform.userid"}),
        "§16.10",
        "tools.saveNote.args.owner.from",
    ),
    (
        "16.11 extract path",
        lambda c: c["tools"]["findNotes"]["extracts"].append({"key": "x", "path": ""}),
        "§16.11",
        "tools.findNotes.extracts[1].path",
    ),
    ("16.12 list fields", lambda c: c["outputs"]["noteId"].update(type="LIST"), "§16.12", "outputs.noteId.fields"),
    ("11 output key", lambda c: c["outputs"].update(organId={"sources": ["USER"]}), "§11", "outputs.organId"),
]


def problems(raw: object) -> list[tuple[str, str]]:
    with pytest.raises(ContractError) as info:
        parse_contract(raw, skill_key="cms.test")  # type: ignore[arg-type]
    assert info.value.skill_key == "cms.test"
    return [(p.rule, p.path) for p in info.value.problems]


RULES: list[tuple[str, Callable[[dict[str, Any]], Any] | str, set[str], str]] = [
    ("16.1 only comments", "// nothing here\n/* and nothing here */\n", {"§16.1"}, ""),
    ("16.1 a JSON string", '"{}"', {"§16.1"}, ""),
    (
        "16.2 prefix without a path",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update({"from": "inputs."}),
        {"§16.2"},
        "tools.findNotes.args.q.from",
    ),
    (
        "16.2 prefix in the wrong case",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update({"from": "Shared.q"}),
        {"§16.2", "§16.13"},
        "tools.findNotes.args.q.from",
    ),
    ("16.3 target in the wrong case", lambda c: c.update(target="savenote"), {"§16.3"}, "target"),
    (
        "16.3 target whose sideEffect is empty (NONE)",
        lambda c: c["tools"]["saveNote"].update(sideEffect=""),
        {"§16.3"},
        "target",
    ),
    (
        "16.6 success written as empty string",
        lambda c: c["tools"]["saveNote"].update(success=""),
        {"§16.6"},
        "tools.saveNote.success",
    ),
    (
        "16.6 success written as null",
        lambda c: c["tools"]["saveNote"].update(success=None),
        {"§16.6"},
        "tools.saveNote.success",
    ),
    (
        "16.7 confirm on a tool whose sideEffect is empty",
        lambda c: c["tools"]["plainTool"].update(sideEffect="", confirm=True),
        {"§16.7"},
        "tools.plainTool.confirm",
    ),
    (
        "16.8 verify without a tool",
        lambda c: c["tools"]["saveNote"]["verify"].pop("tool"),
        {"§16.8"},
        "tools.saveNote.verify.tool",
    ),
    (
        "16.8 verify tool is the write itself",
        lambda c: c["tools"]["saveNote"]["verify"].update(tool="saveNote"),
        {"§16.8"},
        "tools.saveNote.verify.tool",
    ),
    (
        "16.8 verify tool in the wrong case",
        lambda c: c["tools"]["saveNote"]["verify"].update(tool="findnotes"),
        {"§16.8"},
        "tools.saveNote.verify.tool",
    ),
    (
        "16.9 from and a null const",
        lambda c: c["tools"]["saveNote"]["args"]["spaceId"].update(const=None),
        {"§16.9"},
        "tools.saveNote.args.spaceId",
    ),
    (
        "16.9 from and a false const",
        lambda c: c["tools"]["saveNote"]["args"]["spaceId"].update(const=False),
        {"§16.9"},
        "tools.saveNote.args.spaceId",
    ),
    (
        "16.10 platform field in the wrong case",
        lambda c: c["tools"]["saveNote"]["args"]["userId"].update({"from": "platform.UserId"}),
        {"§16.10"},
        "tools.saveNote.args.userId.from",
    ),
    (
        "16.10 hidden clientId",
        lambda c: c["tools"]["saveNote"]["args"]["userId"].update({"from": "platform.clientId"}),
        {"§16.10"},
        "tools.saveNote.args.userId.from",
    ),
    (
        "16.11 extract path null",
        lambda c: c["tools"]["findNotes"]["extracts"][0].update(path=None),
        {"§16.11"},
        "tools.findNotes.extracts[0].path",
    ),
    (
        "16.11 extract without path",
        lambda c: c["tools"]["findNotes"]["extracts"][0].pop("path"),
        {"§16.11"},
        "tools.findNotes.extracts[0].path",
    ),
    (
        "16.12 LIST with an empty fields list",
        lambda c: c["outputs"]["noteId"].update(type="LIST", fields=[]),
        {"§16.12"},
        "outputs.noteId.fields",
    ),
    (
        "16.12 LIST with fields as empty string",
        lambda c: c["outputs"]["noteId"].update(type="LIST", fields=""),
        {"§16.12"},
        "outputs.noteId.fields",
    ),
    ("16.13 mode not an enum value", lambda c: c.update(mode="SEQUENTIAL"), {"§16.13"}, "mode"),
    (
        "16.13 sideEffect READ",
        lambda c: c["tools"]["plainTool"].update(sideEffect="READ"),
        {"§16.13"},
        "tools.plainTool.sideEffect",
    ),
    (
        "16.13 op GT",
        lambda c: c["tools"]["findNotes"]["success"].update(op="GT"),
        {"§16.13"},
        "tools.findNotes.success.op",
    ),
    (
        "16.13 op Truthy",
        lambda c: c["tools"]["findNotes"].update(success={"path": "code", "op": "Truthy"}),
        {"§16.13"},
        "tools.findNotes.success.op",
    ),
    (
        "16.13 when Unique",
        lambda c: c["tools"]["saveNote"]["args"]["spaceId"].update(when="Unique"),
        {"§16.13"},
        "tools.saveNote.args.spaceId.when",
    ),
    (
        "16.13 missing.action call_tool",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update(missing={"action": "call_tool", "tool": "plainTool"}),
        {"§16.13"},
        "tools.findNotes.args.q.missing.action",
    ),
    (
        "16.13 args sources Prior_Task",
        lambda c: c["tools"]["findNotes"]["args"]["q"].update(sources=["USER", "Prior_Task"]),
        {"§16.13"},
        "tools.findNotes.args.q.sources[1]",
    ),
    (
        "16.13 share Session",
        lambda c: c["outputs"]["noteId"].update(share="Session"),
        {"§16.13"},
        "outputs.noteId.share",
    ),
    ("16.13 type Value", lambda c: c["outputs"]["noteId"].update(type="Value"), {"§16.13"}, "outputs.noteId.type"),
    (
        "16.13 output sources LLM",
        lambda c: c["outputs"]["noteId"].update(sources=["LLM"]),
        {"§16.13"},
        "outputs.noteId.sources[0]",
    ),
    (
        "11 output key memberId",
        lambda c: c["outputs"].update(memberId={"sources": ["USER"]}),
        {"§11"},
        "outputs.memberId",
    ),
    (
        "11 output key deptPath",
        lambda c: c["outputs"].update(deptPath={"sources": ["USER"]}),
        {"§11"},
        "outputs.deptPath",
    ),
]


NULL_ATTRIBUTES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("mode", lambda c: c.update(mode=None)),
    ("target", lambda c: c.update(target=None)),
    ("label", lambda c: c["tools"]["findNotes"].update(label=None)),
    ("sideEffect of a read", lambda c: c["tools"]["plainTool"].update(sideEffect=None)),
    ("when", lambda c: c["tools"]["saveNote"]["args"]["spaceId"].update(when=None)),
    ("extract key", lambda c: c["tools"]["findNotes"]["extracts"][0].update(key=None)),
]


EMPTY_CASES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("root tools", lambda c: c.update(tools="", target="")),
    ("root outputs", lambda c: c.update(outputs="")),
    ("root inputs", lambda c: c.update(inputs="")),
    ("tool args", lambda c: c["tools"]["findNotes"].update(args="")),
    ("tool extracts", lambda c: c["tools"]["findNotes"].update(extracts="")),
    ("read tool success", lambda c: c["tools"]["plainTool"].update(success="")),
    ("error paths", lambda c: c["tools"]["findNotes"].update(error={"code": "", "message": ""})),
    ("arg missing", lambda c: c["tools"]["findNotes"]["args"]["q"].update(missing="")),
    ("arg sources", lambda c: c["tools"]["plainTool"]["args"]["q"].update(sources="", required=False)),
    ("arg from with a const", lambda c: c["tools"]["plainTool"]["args"]["q"].update({"from": "", "const": "x"})),
    ("arg const with a from", lambda c: c["tools"]["saveNote"]["args"]["spaceId"].update(const="")),
    ("extract key", lambda c: c["tools"]["findNotes"]["extracts"][0].update(key="")),
    ("extract fields", lambda c: c["tools"]["findNotes"]["extracts"][0].update(fields="")),
    ("verify args", lambda c: c["tools"]["saveNote"]["verify"].update(args="")),
    ("output sources", lambda c: c["outputs"]["noteId"].update(sources="")),
    ("output fields", lambda c: c["outputs"]["noteId"].update(fields="")),
    ("output entity ids", lambda c: c["outputs"]["noteId"].update(entity={"type": "note", "id": "", "name": ""})),
    (
        "extract entity scalar",
        lambda c: c["tools"]["saveNote"]["extracts"][0].update(entity={"type": "n", "scalar": ""}),
    ),
    ("input from and provider", lambda c: c.update(inputs={"topic": {"from": "", "provider": ""}})),
]


NULL_ENTRIES: list[tuple[str, Callable[[dict[str, Any]], Any], Callable[[Any], bool]]] = [
    ("a tool", lambda c: c["tools"].update(plainTool=None), lambda k: "plainTool" not in k.tools),
    (
        "an extract",
        lambda c: c["tools"]["findNotes"]["extracts"].insert(0, None),
        lambda k: len(k.tools["findNotes"].extracts) == 1,
    ),
    ("an output", lambda c: c["outputs"].update(other=None), lambda k: "other" not in k.outputs),
    ("an input", lambda c: c.update(inputs={"topic": None}), lambda k: "topic" not in k.inputs),
    (
        "an output written as empty string",
        lambda c: c["outputs"].update(other=""),
        lambda k: "other" not in k.outputs,
    ),
    ("an input written as empty string", lambda c: c.update(inputs={"topic": ""}), lambda k: "topic" not in k.inputs),
]


def test_contract_json_with_line_and_block_comments(keeper_agent: KeeperAgent):
    text = json.dumps(CONTRACT, ensure_ascii=False, indent=2)
    text = text.replace('"tools": {', '"tools": { // the business tools\n /* block\n comment */', 1)
    text = text.replace('"label": "正在查找笔记"', '"label": "see http://example.com/x" /* inline */')
    keeper_agent.contract("// a leading comment\n" + text)
    code, rows = check_rows(keeper_agent.dir)
    assert not [r for r in rows if r["severity"] == "error"], rows
    assert code == 0


async def test_contract_json_comments_keep_urls_in_strings(keeper_agent: KeeperAgent):
    text = json.dumps(CONTRACT, ensure_ascii=False).replace('"正在查找笔记"', '"see http://example.com/x" // c\n')
    keeper_agent.contract("/* head */\n" + text.replace('"tools": {', '"tools": {\n', 1))
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=keeper_agent.script(say("x")))
    assert agent.loaded.skills["notes.keeper"].contract.tools["findNotes"].label == "see http://example.com/x"


async def test_empty_strings_are_unset(keeper_agent: KeeperAgent):
    keeper_agent.contract(_empty_strings_contract())
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=keeper_agent.script(say("x")))
    assert agent.loaded.errors == []
    contract = agent.loaded.skills["notes.keeper"].contract
    find = contract.tools["findNotes"]
    assert str(contract.mode) == "REACT" and contract.target is None and contract.delegatable is False
    assert str(find.side_effect) == "NONE" and find.confirm is False and find.label is None
    assert find.verify is None and find.error is None and find.idempotency_key == ()
    q = find.args["q"]
    assert q.from_expr is None and not q.has_const and str(q.when) == "ALWAYS" and q.required is True
    assert [str(s) for s in q.sources] == ["MODEL"] and str(q.missing.action) == "ASK_USER" and q.label is None
    assert contract.outputs["noteId"].share is None and str(contract.outputs["noteId"].type) == "VALUE"


@pytest.mark.spec("§19")
@pytest.mark.parametrize("unset", ["", None], ids=["empty-string", "null"])
async def test_an_unset_argument_contract_counts_as_not_configured(keeper_agent: KeeperAgent, unset: Any):
    """§19: an empty string is "not configured" (docs: absent, null and "" all mean not configured) — an ``args``
    entry that is "" or null is simply not listed, not a reason to drop the skill."""
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"]["findNotes"]["args"]["count"] = unset
    keeper_agent.contract(contract)
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=keeper_agent.script(say("x")))
    assert agent.loaded.errors == [], agent.loaded.errors
    assert "count" not in agent.loaded.skills["notes.keeper"].contract.tools["findNotes"].args


async def test_unknown_attributes_are_ignored_at_every_level(keeper_agent: KeeperAgent):
    contract = json.loads(json.dumps(CONTRACT))
    contract["futureRoot"] = {"x": [1, 2]}
    save = contract["tools"]["saveNote"]
    save.update({"futureTool": "?", "timeoutMs": "abc"})
    save["args"]["title"].update({"fresh": "maybe", "futureArg": {"a": 1}})
    save["args"]["title"]["missing"] = {"action": "ASK_USER", "futureMissing": 3}
    save["success"]["futureSuccess"] = True
    save["extracts"][0]["futureExtract"] = 1
    save["extracts"][0]["entity"]["futureEntity"] = 1
    save["verify"]["futureVerify"] = 1
    save["error"]["futureError"] = 1
    contract["outputs"]["noteId"].update({"futureOutput": 1, "sensitive": True})
    contract["inputs"] = {"topic": {"from": "session.topic", "futureInput": 1}}
    keeper_agent.contract(contract)
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=keeper_agent.script(say("x")))
    assert agent.loaded.errors == [] and "notes.keeper" in agent.loaded.skills


@pytest.mark.parametrize(("case", "mutate", "path"), ENUM_CASES, ids=[c[0] for c in ENUM_CASES])
async def test_enums_are_case_sensitive_and_the_error_names_skill_rule_and_path(
    keeper_agent: KeeperAgent, case, mutate, path
):
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    keeper_agent.contract(contract)
    async with SkillYard() as yard:
        from skillyard.agent import load_agent

        loaded = await load_agent(yard, keeper_agent.dir)
    assert "notes.keeper" not in loaded.skills  # dropped
    problems = [(e.skill, e.rule, e.path) for e in loaded.errors if e.rule != "§16"]
    assert ("notes.keeper", "§16.13", path) in problems, problems


@pytest.mark.parametrize(("case", "mutate", "rule", "path"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
async def test_every_load_rule_drops_the_skill_naming_rule_and_path(
    keeper_agent: KeeperAgent, case, mutate, rule, path
):
    if mutate is None:
        keeper_agent.contract("null")
    else:
        contract = json.loads(json.dumps(CONTRACT))
        mutate(contract)
        keeper_agent.contract(contract)
    async with SkillYard() as yard:
        from skillyard.agent import load_agent

        loaded = await load_agent(yard, keeper_agent.dir)
    assert "notes.keeper" not in loaded.skills
    problems = [(e.skill, e.rule, e.path) for e in loaded.errors]
    assert ("notes.keeper", rule, path) in problems, problems


@needs_db
@pytest.mark.parametrize("key", ["name", "deptPath", "adminUser"])
async def test_an_output_named_like_a_platform_field_fails_loading(kit: Kit, key: str):
    from skillyard.agent import load_agent

    kit.with_args(outputs={key: {"sources": ["USER"]}})
    async with SkillYard() as yard:
        loaded = await load_agent(yard, kit.dir)
    assert "probe.kit" not in loaded.skills
    assert ("probe.kit", "§11", f"outputs.{key}") in [(e.skill, e.rule, e.path) for e in loaded.errors]


@needs_db
@pytest.mark.parametrize(
    "expression",
    ["state.draft", "input.title", "Session.lang", "env.now", "evidence.", "shared", "call.title"],
)
async def test_an_unknown_or_empty_from_prefix_drops_the_skill(kit: Kit, expression: str):
    kit.with_args(x={"from": expression})
    loaded = await load(kit)
    assert "probe.kit" not in loaded.skills
    assert ("probe.kit", "§16.2", "tools.probe.args.x.from") in [(e.skill, e.rule, e.path) for e in loaded.errors]


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
@pytest.mark.spec("§16.1")
@pytest.mark.parametrize("raw", ["", "   ", "{not json", "[1, 2]", "null"])
def test_rule_1_contract_is_a_json_object(raw):
    assert problems(raw) == [("§16.1", "")]


@pytest.mark.spec("§16.2")
@pytest.mark.parametrize("expr", ["foo.bar", "input.title", "call.title", "platform", "evidence."])
def test_rule_2_from_prefix(expr):
    assert problems({"tools": {"t": {"args": {"a": {"from": expr}}}}}) == [("§16.2", "tools.t.args.a.from")]


@pytest.mark.spec("§16.3")
def test_rule_3_target_is_a_write_tool():
    assert problems({"target": "q", "tools": {"q": {}}}) == [("§16.3", "target")]
    assert problems({"target": "missing", "tools": {}}) == [("§16.3", "target")]
    contract, _ = parse_contract({"target": "w", "tools": {"w": write_tool()}}, skill_key="k")
    assert contract.target == "w"


@pytest.mark.spec("§16.4")
def test_rule_4_delegatable_has_no_write_tools():
    assert problems({"delegatable": True, "tools": {"w": write_tool()}}) == [("§16.4", "delegatable")]
    contract, _ = parse_contract({"delegatable": True, "tools": {"q": {}}}, skill_key="k")
    assert contract.delegatable


@pytest.mark.spec("§16.5")
def test_rule_5_tool_keys_are_not_empty():
    assert problems({"tools": {"": {}, " ": {}}}) == [("§16.5", "tools"), ("§16.5", "tools")]


@pytest.mark.spec("§16.6")
def test_rule_6_write_tools_have_success():
    assert problems({"tools": {"createArticle": {"sideEffect": "WRITE"}}}) == [("§16.6", "tools.createArticle.success")]


@pytest.mark.spec("§16.7")
def test_rule_7_confirm_only_on_write():
    assert problems({"tools": {"q": {"confirm": True}}}) == [("§16.7", "tools.q.confirm")]


@pytest.mark.spec("§16.8")
def test_rule_8_verify_tool():
    assert problems({"tools": {"w": write_tool(verify={"tool": ""})}}) == [("§16.8", "tools.w.verify.tool")]
    assert problems({"tools": {"w": write_tool(verify={"tool": "nope"})}}) == [("§16.8", "tools.w.verify.tool")]
    two_writes = {"w": write_tool(verify={"tool": "w2"}), "w2": write_tool()}
    assert problems({"tools": two_writes}) == [("§16.8", "tools.w.verify.tool")]


def test_verify_args_only_const_or_call():
    raw = {"tools": {"q": {}, "w": write_tool(verify={"tool": "q", "args": {"a": {"from": "inputs.x"}, "b": {}}})}}
    assert problems(raw) == [("§6.4", "tools.w.verify.args.a.from"), ("§6.4", "tools.w.verify.args.b")]


@pytest.mark.spec("§16.9")
def test_rule_9_from_and_const_exclusive():
    raw = {"tools": {"t": {"args": {"a.b": {"from": "inputs.x", "const": 1}}}}}
    assert problems(raw) == [("§16.9", 'tools.t.args["a.b"]')]


@pytest.mark.spec("§16.10")
def test_rule_10_platform_field_is_open():
    assert problems({"tools": {"t": {"args": {"p": {"from": "platform.passportId"}}}}}) == [
        ("§16.10", "tools.t.args.p.from")
    ]
    assert problems({"tools": {"t": {"args": {"p": {"from": "platform.userid"}}}}}) == [
        ("§16.10", "tools.t.args.p.from")
    ]
    contract, _ = parse_contract({"tools": {"t": {"args": {"p": {"from": "platform.organId"}}}}}, skill_key="k")
    assert contract.tools["t"].args["p"].from_expr is not None


@pytest.mark.spec("§16.11")
def test_rule_11_extract_path():
    raw = {"tools": {"t": {"extracts": [{"key": "a", "path": "data"}, {"key": "b"}, {"key": "c", "path": ""}]}}}
    assert problems(raw) == [("§16.11", "tools.t.extracts[1].path"), ("§16.11", "tools.t.extracts[2].path")]


@pytest.mark.spec("§16.12")
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


@pytest.mark.spec("§16", "§11")
@pytest.mark.parametrize(("case", "mutate", "rules", "path"), RULES, ids=[r[0] for r in RULES])
def test_every_load_rule_fails_agent_check_naming_skill_rule_and_json_path(tmp_path: Path, case, mutate, rules, path):
    """Issue: "Loading validates every rule of §16 and the platform-field rules of §11; a skill that fails is
    dropped with an error that names the skill, the rule and the JSON path"; docs/cli.md: exit 1 on an error."""
    contract = mutate if isinstance(mutate, str) else contract_with(mutate)
    code, rows = check(make_agent(tmp_path, contract))
    found = load_errors(errors(rows))
    assert code == 1, rows
    assert any(rule in rules and p == path for rule, p in found), (rules, path, rows)


def test_trailing_commas_are_accepted(tmp_path: Path):
    """docs/agents.md: contract text is read "with json5, which also accepts trailing commas"."""
    text = json.dumps(BASE, indent=1)
    text = text.replace('"label": "Title"', '"label": "Title",')  # trailing comma in an object
    text = text.replace('"MODEL"\n', '"MODEL",\n')  # trailing comma in an array
    text = text.rstrip()[:-1] + ",}\n"  # trailing comma at the root
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # not strict JSON
    code, rows = check(make_agent(tmp_path, text))
    assert (code, errors(rows)) == (0, []), rows


@pytest.mark.spec("§16.1")
def test_a_utf8_bom_before_the_contract_is_not_a_broken_contract(tmp_path: Path):
    """§16.1 asks for legal JSON; a UTF-8 BOM written by a Windows editor is not part of the JSON text."""
    agent = make_agent(tmp_path)
    path = agent / "skills" / "keeper" / "contract.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, rows = check(agent)
    assert (code, errors(rows)) == (0, []), rows


@pytest.mark.spec("§19")
async def test_comment_markers_inside_strings_survive_comment_stripping(tmp_path: Path):
    """§19: `//` and `/* */` comments are allowed — in the JSON text, not inside string values: a URL, a quoted
    '//' after an escaped quote and a '/* … */' inside a string keep their exact text."""
    contract = contract_with()
    contract["tools"]["findNotes"]["label"] = 'say "hi" // still text'
    contract["tools"]["plainTool"]["label"] = "a /* not a comment */ b"
    contract["tools"]["saveNote"]["label"] = "see http://example.com/a//b"
    contract["tools"]["findNotes"]["args"]["q"]["missing"] = {"action": "FAIL", "message": "*/ odd // text /*"}
    text = json.dumps(contract, ensure_ascii=False)
    text = "/* head */ // line\n" + text.replace('"tools": {', '"tools": { // the tools\n', 1)
    result = await loaded(make_agent(tmp_path, text))
    assert result.errors == [], result.errors
    tools = result.skills[SKILL].contract.tools
    assert tools["findNotes"].label == 'say "hi" // still text'
    assert tools["plainTool"].label == "a /* not a comment */ b"
    assert tools["saveNote"].label == "see http://example.com/a//b"
    assert tools["findNotes"].args["q"].missing.message == "*/ odd // text /*"


@pytest.mark.spec("§19")
async def test_a_backslash_before_the_closing_quote_does_not_confuse_comment_stripping(tmp_path: Path):
    """§19 comments: a string ending in an escaped backslash is closed; the `//` comment after it is a comment
    and the quote inside that comment is not the start of a string."""
    text = json.dumps(contract_with(lambda c: c["tools"]["plainTool"].update(label="C:\\temp\\")), indent=1)
    stored = json.dumps("C:\\temp\\")  # the JSON text "C:\\\\temp\\\\"
    text = text.replace(stored + "\n", stored + ' // it\'s a "quoted" note\n', 1)
    assert "// it's" in text
    result = await loaded(make_agent(tmp_path, text))
    assert result.errors == [], result.errors
    assert result.skills[SKILL].contract.tools["plainTool"].label == "C:\\temp\\"


@pytest.mark.spec("§19")
@pytest.mark.parametrize(("case", "mutate"), NULL_ATTRIBUTES, ids=[c[0] for c in NULL_ATTRIBUTES])
def test_a_null_text_or_enum_attribute_is_not_configured(tmp_path: Path, case, mutate):
    """§19 "空字符串 视为未配置" and docs ("absent, null and \"\" all mean not configured" for entries): a text or
    enum attribute written as JSON null is not configured, not an illegal enum value or a wrong type."""
    _, rows = check(make_agent(tmp_path, contract_with(mutate)))
    assert [r for r in errors(rows) if r["kind"] == "load"] == [], rows


@pytest.mark.spec("§11", "§16.10")
def test_a_closed_platform_field_in_an_input_fails_the_skill(tmp_path: Path):
    """§11: "platform.<字段> 中的字段必须在上表中，否则 Skill 加载失败" — wherever a platform expression is
    written, so also in `inputs.*.from` (§16.10)."""
    contract = contract_with(lambda c: c.update(inputs={"who": {"from": "platform.passportId"}}))
    code, rows = check(make_agent(tmp_path, contract))
    assert code == 1 and any(r["rule"] == "§16.10" and r["path"].startswith("inputs.who") for r in rows), rows


@pytest.mark.spec("§19", "§16")
@pytest.mark.parametrize(("case", "mutate"), EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_an_empty_string_is_unset_at_every_level(tmp_path: Path, case, mutate):
    """§19: "空字符串 视为未配置" — an attribute written as "" behaves as if it were absent, so none of these
    contracts breaks a load rule (§16) and `agent check` reports no load error."""
    _, rows = check(make_agent(tmp_path, contract_with(mutate)))
    assert [r for r in errors(rows) if r["kind"] == "load"] == [], rows


@pytest.mark.spec("§19", "§6.3", "§8")
async def test_empty_strings_read_as_the_spec_defaults(tmp_path: Path):
    """§19 + §6.3/§8 defaults: an empty entity `id`/`name` is the default "id"/"name"; an empty `missing` is
    `{action: ASK_USER}`; empty `sources` is []."""
    contract = contract_with()
    contract["outputs"]["noteId"]["entity"] = {"type": "note", "id": "", "name": ""}
    contract["tools"]["findNotes"]["args"]["q"].update(missing="")
    contract["tools"]["plainTool"]["args"]["q"].update(sources="", required=False)
    result = await loaded(make_agent(tmp_path, contract))
    assert result.errors == [], result.errors
    parsed = result.skills[SKILL].contract
    entity = parsed.outputs["noteId"].entity
    assert entity is not None and (entity.id, entity.name) == ("id", "name")
    assert str(parsed.tools["findNotes"].args["q"].missing.action) == "ASK_USER"
    assert tuple(parsed.tools["plainTool"].args["q"].sources) == ()


@pytest.mark.spec("§19")
@pytest.mark.parametrize(("case", "mutate", "absent"), NULL_ENTRIES, ids=[c[0] for c in NULL_ENTRIES])
async def test_a_null_or_empty_entry_is_as_if_not_listed(tmp_path: Path, case, mutate, absent):
    """docs/agents.md §19: "A whole entry written as null or "" (a tool under tools, an argument under args, an
    extract, an input, an output) is not configured either: as if it were not listed."""
    result = await loaded(make_agent(tmp_path, contract_with(mutate)))
    assert result.errors == [], result.errors
    assert absent(result.skills[SKILL].contract)


@pytest.mark.spec("§19")
async def test_unknown_attributes_in_verify_args_entities_and_frontmatter_are_ignored(tmp_path: Path):
    """§19: "未知属性 忽略，不报错" — at every level, including verify.args entries, entities, inputs and the
    SKILL.md / AGENT.md frontmatter."""
    contract = contract_with()
    contract["tools"]["saveNote"]["verify"]["args"]["q"]["futureVerifyArg"] = {"x": 1}
    contract["tools"]["saveNote"]["extracts"][0]["entity"] = {"type": "note", "futureEntity": [1]}
    contract["outputs"]["noteId"]["entity"] = {"type": "note", "weight": 3}
    contract["tools"]["findNotes"]["success"]["caseInsensitive"] = True
    contract["tools"]["findNotes"]["args"]["q"]["fresh"] = True
    agent = make_agent(tmp_path, contract, front="futureKey: 1\n", agent_front="owner_team: x\n")
    code, rows = check(agent)
    assert (code, errors(rows)) == (0, []), rows


@pytest.mark.spec("§19")
async def test_an_empty_inline_contract_is_unset_so_contract_json_is_used(tmp_path: Path):
    """§19 empty string = not configured; docs: the contract is the inline one "or, when there is none,
    contract.json beside SKILL.md" — `contract: ""` is none, so contract.json applies (no "inline wins")."""
    agent = make_agent(tmp_path, front='contract: ""\n')
    result = await loaded(agent)
    assert result.errors == [], result.errors
    assert result.skills[SKILL].contract.target == "saveNote"
    assert [w for w in result.warnings if w.rule == "contract"] == []


async def test_a_null_inline_contract_is_unset_so_contract_json_is_used(tmp_path: Path):
    """A YAML `contract:` without a value (null) is no inline contract: contract.json applies."""
    result = await loaded(make_agent(tmp_path, front="contract:\n"))
    assert result.errors == [], result.errors
    assert result.skills[SKILL].contract.target == "saveNote"


@pytest.mark.spec("§16.1")
def test_an_empty_inline_contract_without_contract_json_is_rule_16_1(tmp_path: Path):
    """§16.1: "skill_contract 非空" — an empty inline contract and no contract.json drops the skill."""
    agent = make_agent(tmp_path, front='contract: ""\n')
    (agent / "skills" / "keeper" / "contract.json").unlink()
    code, rows = check(agent)
    assert code == 1 and any(r["rule"] == "§16.1" and r["skill"] == SKILL for r in errors(rows)), rows


@pytest.mark.spec("§16.13")
def test_an_inline_contract_wins_over_contract_json_even_when_it_is_broken(tmp_path: Path):
    """docs: "When both exist the inline one wins, with a warning" — so an inline contract breaking §16.13 drops
    the skill even though contract.json is fine; the error names the inline JSON path."""
    agent = make_agent(tmp_path, front="contract:\n  mode: react\n  tools: {findNotes: {}}\n")
    code, rows = check(agent)
    assert code == 1 and ("§16.13", "mode") in load_errors(rows), rows
    assert any(r["severity"] == "warning" and r["skill"] == SKILL for r in rows), rows


async def test_inline_json_text_with_comments_urls_and_trailing_commas(tmp_path: Path):
    """docs: inline `contract:` may be "a string holding JSON" read like contract.json (comments, json5)."""
    inline = (
        "contract: |\n"
        "  // inline JSON text\n"
        '  {"tools": {"findNotes": {"label": "see http://x.example/a", /* c */ },}}\n'
    )
    agent = make_agent(tmp_path, front=inline, tools="[findNotes]")
    (agent / "skills" / "keeper" / "contract.json").unlink()
    result = await loaded(agent)
    assert result.errors == [], result.errors
    assert result.skills[SKILL].contract.tools["findNotes"].label == "see http://x.example/a"


@pytest.mark.spec("§11")
@pytest.mark.parametrize("key", ["passportId", "adminUser"])
def test_an_output_key_named_like_a_closed_platform_field_fails_the_skill(tmp_path: Path, key: str):
    """§11 lists passportId, clientId, sessionType, adminUser, adminCompany as platform fields that are not opened,
    and "平台字段名是保留名：产出的 key、共享值的 key 不能与之同名"; builtin_output_set refuses them too
    (docs: PLATFORM_FIELD_FORBIDDEN for "the open ones and the hidden ones"), so such an output could never be
    written: the load must refuse it (§11, path outputs.<key>)."""
    contract = contract_with(lambda c: c["outputs"].update({key: {"sources": ["USER"], "share": "TASK"}}))
    code, rows = check(make_agent(tmp_path, contract))
    assert code == 1 and ("§11", f"outputs.{key}") in load_errors(rows), rows
