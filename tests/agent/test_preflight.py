"""Publish-time checks (preflight.py): satisfiable sources, schema paths of idempotency keys and verify args, bound
target and verify tools, tool names that resolve to real skills."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import json5
import pytest

from skillyard import SkillYard
from skillyard.agent import load_agent, preflight_agent
from skillyard.agent.preflight import schema_has_path
from support.agent import contract_probes as probes_kit
from support.agent import memo as memo_kit
from support.agent.check import check, set_contract
from support.agent.contract_probes import SKILL, contract_with, errors, make_agent, write
from support.agent.keeper import CONTRACT, TOOLS, KeeperAgent, check_rows
from support.agent.loader import FIXTURE
from support.agent.memo import FREE, MemoAgent, changed
from support.agent.probes import skillyard_cli

PREFLIGHT_CASES = [
    (
        "target not bound",
        lambda c, t: (c.update(target="sendMemo"), t.remove("sendMemo")),
        "P0.target_not_bound",
        "sendMemo",
        "",
    ),
    ("verify tool not bound", lambda c, t: t.remove("findNotes"), "P0.verify_tool_not_bound", "saveNote", ""),
    (
        "missing.tool not bound",
        lambda c, t: c["tools"]["tagNote"]["args"]["noteId"].update(missing={"action": "CALL_TOOL", "tool": "ghost"}),
        "P0.missing_tool_not_bound",
        "tagNote",
        "noteId",
    ),
    (
        "idempotencyKey path",
        lambda c, t: c["tools"]["saveNote"].update(idempotencyKey=["titel"]),
        "preflight.idempotency_key",
        "saveNote",
        "titel",
    ),
    (
        "verify.args key",
        lambda c, t: c["tools"]["saveNote"]["verify"].update(args={"qq": {"from": "call.title"}}),
        "preflight.verify_args",
        "saveNote",
        "qq",
    ),
    (
        "verify.args call path",
        lambda c, t: c["tools"]["saveNote"]["verify"].update(args={"q": {"from": "call.titel"}}),
        "preflight.verify_args",
        "saveNote",
        "titel",
    ),
    (
        "required arg without source",
        lambda c, t: c["tools"]["findNotes"]["args"].update(q={}),
        "preflight.arg_source",
        "findNotes",
        "q",
    ),
    ("tool does not resolve", lambda c, t: t.append("ghostTool"), "P0.tool_missing", "ghostTool", ""),
]


PREFLIGHT_2 = [
    (
        "missing.tool is the tool itself",
        lambda c: c["tools"]["pickTool"]["args"].update(
            a={"sources": ["EVIDENCE"], "missing": {"action": "CALL_TOOL", "tool": "pickTool"}}
        ),
        "§5.5",
        "pickTool",
        "a",
    ),
    (
        "success without op",
        lambda c: c["tools"]["findNotes"].update(success={"path": "code"}),
        "preflight.success_op",
        "findNotes",
        "",
    ),
    (
        "IN without a list",
        lambda c: c["tools"]["findNotes"].update(success={"path": "code", "op": "IN", "value": 200}),
        "§6.1",
        "findNotes",
        "",
    ),
    ("contract tool not in tools:", lambda c: c["tools"].update(ghostTool={"args": {}}), "§4", "ghostTool", ""),
    (
        "argument path not in the schema",
        lambda c: c["tools"]["findNotes"]["args"].update(qq=FREE),
        "P0.arg_path_missing",
        "findNotes",
        "qq",
    ),
    (
        "from an input that is not declared",
        lambda c: c["tools"]["pickTool"]["args"].update(a={"from": "inputs.ghost"}),
        None,
        "pickTool",
        "a",
    ),
    (
        "from an output that is not declared",
        lambda c: c["tools"]["pickTool"]["args"].update(a={"from": "outputs.ghost"}),
        None,
        "pickTool",
        "a",
    ),
]


WRITE = {"sideEffect": "WRITE", "success": {"path": "code", "op": "EQ", "value": 200}}


def preflight_hits(rows: list[dict[str, Any]], rule: str, tool: str, path: str) -> list[dict[str, Any]]:
    return [
        r
        for r in rows
        if r["kind"] == "preflight"
        and r["skill"] == SKILL
        and r["rule"] == rule
        and r["tool"] == tool
        and r["path"] == path
        and r["severity"] == "error"
    ]


@pytest.mark.parametrize(
    ("case", "mutate", "rule", "tool", "arg"), PREFLIGHT_CASES, ids=[c[0] for c in PREFLIGHT_CASES]
)
def test_preflight_names_skill_tool_and_argument(keeper_agent: KeeperAgent, case, mutate, rule, tool, arg):
    contract = json.loads(json.dumps(CONTRACT))
    tools = list(TOOLS)
    mutate(contract, tools)
    keeper_agent.contract(contract)
    md = keeper_agent.dir / "skills" / "keeper" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8").replace(", ".join(TOOLS), ", ".join(tools)), encoding="utf-8")
    code, rows = check_rows(keeper_agent.dir)
    assert code == 1
    hits = [r for r in rows if r["rule"] == rule and r["severity"] == "error"]
    assert hits, rows
    assert any(r["skill"] == "notes.keeper" and r["tool"] == tool and r["path"] == arg for r in hits), hits


@pytest.mark.spec("§16")
@pytest.mark.parametrize(("case", "mutate", "rule", "tool", "arg"), PREFLIGHT_2, ids=[c[0] for c in PREFLIGHT_2])
def test_preflight_more_checks_name_skill_tool_and_argument(memo_agent: MemoAgent, case, mutate, rule, tool, arg):
    """Issue: preflight checks that "every required argument has a satisfiable source" and the §16 leftovers,
    "precise messages with skill, tool and argument path". A required argument bound only ``from`` a name the
    skill can never have (an input or an output the contract does not declare) has no satisfiable source."""
    memo_agent.contract(changed(mutate))
    result = skillyard_cli("agent", "check", str(memo_agent.dir), "--json")
    rows = json.loads(result.stdout)
    errors = [r for r in rows if r["severity"] == "error"]
    hits = [r for r in errors if r["skill"] == "memo.keeper" and r["tool"] == tool and r["path"] == arg]
    assert result.returncode == 1 and hits, rows
    if rule is not None:
        assert any(r["rule"] == rule for r in hits), hits


def test_preflight_flags_a_builtin_in_tool_names(memo_agent: MemoAgent):
    memo_agent.tools([*memo_kit.TOOLS, "builtin_node_finish"])
    result = skillyard_cli("agent", "check", str(memo_agent.dir), "--json")
    rows = json.loads(result.stdout)
    assert result.returncode == 1
    assert any(r["rule"] == "§1.2" and r["tool"] == "builtin_node_finish" and r["severity"] == "error" for r in rows)


def test_preflight_warns_about_a_verify_tool_without_success(memo_agent: MemoAgent):
    memo_agent.contract(changed(lambda c: c["tools"]["findNotes"].pop("success")))
    result = skillyard_cli("agent", "check", str(memo_agent.dir), "--json")
    rows = json.loads(result.stdout)
    assert any(r["rule"] == "§6.4" and r["tool"] == "saveNote" and r["severity"] == "warning" for r in rows), rows


def test_preflight_problems(cms):
    contract = {
        "target": "createArticle",
        "tools": {
            "createArticle": {
                **WRITE,
                "idempotencyKey": ["spaceId", "titel"],
                "args": {
                    "title": {},
                    "tags[].name": {"sources": ["USER"]},
                    "tags[].color": {"sources": ["MODEL"]},
                    "spaceId": {"missing": {"action": "CALL_TOOL", "tool": "listSpaces"}, "sources": ["EVIDENCE"]},
                    "userId": {"from": "platform.userId", "sources": ["USER"]},
                },
                "verify": {"tool": "queryArticle", "args": {"name": {"from": "call.title"}}},
            },
            "queryArticle": {"success": {"path": "code"}},
            "deleteArticle": {},
        },
        "inputs": {"space": {"provider": "cms.space.pick"}},
    }
    set_contract(cms, contract, tools="[createArticle, queryArticle, publishArticle]")
    code, output = check(str(cms), "--json")
    assert code == 1, output
    rows = [r for r in json.loads(output) if r["kind"] == "preflight"]
    found = {(r["severity"], r["tool"], r["path"], r["rule"]) for r in rows}
    assert found == {
        ("error", "publishArticle", "", "P0.tool_missing"),
        ("warning", "publishArticle", "", "P0.uncontracted_read"),
        ("error", "deleteArticle", "", "§4"),
        ("error", "createArticle", "titel", "preflight.idempotency_key"),
        ("error", "createArticle", "name", "preflight.verify_args"),
        ("error", "createArticle", "title", "preflight.arg_source"),
        ("error", "createArticle", "tags[].color", "P0.arg_path_missing"),
        ("error", "createArticle", "spaceId", "P0.missing_tool_not_bound"),
        ("warning", "createArticle", "userId", "preflight.arg_source"),
        ("error", "queryArticle", "", "preflight.success_op"),
        ("error", "", "inputs.space", "P0.provider_missing"),
    }
    by_path = {r["path"]: r["message"] for r in rows}
    assert "its input schema has: spaceId, tags, title, userId" in by_path["titel"]
    assert "PARAM_PROVENANCE_REJECTED" in by_path["title"]
    assert "ask the user again and again" in by_path["userId"]
    code, table = check(str(cms))
    assert code == 1 and "preflight.idempotency_key" in table and "titel" in table and "error(s)" in table


def test_warnings_alone_pass(cms):
    contract = {
        "inputs": {"title": {"required": False}},  # declared: an undeclared input would be preflight.arg_from
        "tools": {"queryArticle": {"args": {"title": {"from": "inputs.title", "sources": ["USER"]}}}},
    }
    set_contract(cms, contract, tools="[queryArticle]")
    code, output = check(str(cms))
    assert code == 0, output
    assert "warning" in output and "0 error(s), 1 warning(s)" in output


def test_target_and_verify_tool_must_be_bound(cms):
    contract = {
        "target": "createArticle",
        "tools": {"createArticle": {**WRITE, "verify": {"tool": "queryArticle"}}, "queryArticle": {}},
    }
    set_contract(cms, contract, tools="[]")
    code, output = check(str(cms), "--json")
    rules = {(r["tool"], r["rule"]) for r in json.loads(output)}
    assert code == 1
    assert {("createArticle", "P0.target_not_bound"), ("createArticle", "P0.verify_tool_not_bound")} <= rules
    assert ("createArticle", "§6.4") in rules  # the verify tool has no success condition


def test_schema_paths():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
            "free": {"type": "object"},
        },
    }
    assert schema_has_path(schema, "a.b") is True and schema_has_path(schema, "a.c") is False
    assert schema_has_path(schema, "lines[].x") is True and schema_has_path(schema, "lines[].y") is False
    assert schema_has_path(schema, "free.anything") is None and schema_has_path(schema, "nope") is False
    assert schema_has_path({"type": "object", "properties": {}}, "x") is None


async def test_preflight_api(cms):
    yard = SkillYard(include_builtin=False)
    agent = await load_agent(yard, cms)
    assert preflight_agent(yard, agent) == []


def test_an_argument_the_platform_treats_as_a_credential_is_flagged(cms):
    schema = cms / "skills" / "createArticle" / "schema.json"
    data = json.loads(schema.read_text(encoding="utf-8"))
    data["properties"]["author"] = {"type": "string"}
    schema.write_text(json.dumps(data), encoding="utf-8")
    contract = json5.loads((FIXTURE / "skills" / "article_lifecycle" / "contract.json").read_text(encoding="utf-8"))
    contract["tools"]["createArticle"]["args"]["author"] = {"from": "platform.name"}
    set_contract(cms, contract)
    code, output = check(str(cms), "--json")
    rows = json.loads(output)
    assert code == 1
    assert [(r["tool"], r["path"], r["rule"]) for r in rows] == [
        ("createArticle", "author", "preflight.credential_arg")
    ]
    assert "rename" in rows[0]["message"]


@pytest.mark.parametrize(
    ("keys", "bad"),
    [(["info.code"], None), (["lines[].sku"], None), (["info.nope"], "info.nope"), (["lines[].nope"], "lines[].nope")],
)
def test_idempotency_key_paths_follow_nested_schemas(tmp_path: Path, keys: list[str], bad: str | None):
    """Issue: "idempotencyKey … paths exist in the tool's input schema"; docs: `a.b` follows properties,
    `lines[].x` follows items.properties."""
    code, rows = probes_kit.check(
        make_agent(tmp_path, contract_with(lambda c: c["tools"]["saveNote"].update(idempotencyKey=keys)))
    )
    if bad is None:
        assert (code, errors(rows)) == (0, []), rows
    else:
        assert code == 1 and preflight_hits(rows, "preflight.idempotency_key", "saveNote", bad), rows


@pytest.mark.parametrize(
    ("args", "bad"),
    [
        ({"code": {"from": "call.info.code"}}, None),
        ({"code": {"const": "x"}, "q": {"from": "call.title"}}, None),
        ({"code": {"from": "call.info.zzz"}}, "info.zzz"),
        ({"nope": {"const": 1}}, "nope"),
    ],
)
def test_verify_args_paths_exist_in_both_schemas(tmp_path: Path, args: dict[str, Any], bad: str | None):
    """Issue: "verify.args paths exist in the tool's input schema" — keys in the verify tool's schema, `call.<path>`
    in the write tool's (docs)."""
    code, rows = probes_kit.check(
        make_agent(tmp_path, contract_with(lambda c: c["tools"]["saveNote"]["verify"].update(args=args)))
    )
    if bad is None:
        assert (code, errors(rows)) == (0, []), rows
    else:
        assert code == 1 and preflight_hits(rows, "preflight.verify_args", "saveNote", bad), rows


@pytest.mark.spec("§5.3")
@pytest.mark.parametrize("sources", [["PLATFORM"], ["CONTRACT"], ["PLATFORM", "CONTRACT"]])
def test_a_required_argument_with_only_platform_or_contract_sources_is_unsatisfiable(tmp_path: Path, sources):
    """§5.3: PLATFORM / CONTRACT "不会匹配（这两类来源只能通过 from/const 产生）" — a required argument without
    from/const whose sources are only these can never be satisfied (issue: "every required argument has a
    satisfiable source"; docs: preflight.arg_source error)."""
    contract = contract_with(lambda c: c["tools"]["findNotes"]["args"].update(code={"sources": sources}))
    code, rows = probes_kit.check(make_agent(tmp_path, contract))
    assert code == 1 and preflight_hits(rows, "preflight.arg_source", "findNotes", "code"), rows


def test_an_optional_argument_without_a_source_is_only_a_warning(tmp_path: Path):
    """docs: preflight.arg_source is "a warning when not required"; warnings alone pass (exit 0)."""
    contract = contract_with(lambda c: c["tools"]["findNotes"]["args"].update(code={"required": False}))
    code, rows = probes_kit.check(make_agent(tmp_path, contract))
    assert code == 0, rows
    assert any(r["rule"] == "preflight.arg_source" and r["path"] == "code" and r["severity"] == "warning" for r in rows)


@pytest.mark.parametrize(
    "arg",
    [
        {"sources": ["EVIDENCE"], "missing": {"action": "CALL_TOOL", "tool": "findNotes"}},
        {"sources": ["SESSION", "USER"]},
        {"from": "platform.organId"},
        {"const": "fixed"},
    ],
    ids=["evidence+call_tool", "session+user", "platform", "const"],
)
def test_a_required_argument_with_a_satisfiable_source_passes(tmp_path: Path, arg: dict[str, Any]):
    """Counterpart of the arg_source check: these required arguments do have a satisfiable source."""
    contract = contract_with(lambda c: c["tools"]["saveNote"]["args"].update({"info.code": arg}))
    code, rows = probes_kit.check(make_agent(tmp_path, contract))
    assert (code, errors(rows)) == (0, []), rows


@pytest.mark.spec("§5.5", "§1.3")
def test_missing_tool_only_needs_to_be_in_tool_names(tmp_path: Path):
    """§5.5: missing.tool "必须在 toolNames 中，且不能是参数所属的工具本身" — a bound tool without its own
    contract.tools entry is allowed (§1.3: contract.tools is optional)."""
    contract = contract_with(lambda c: c["tools"].pop("plainTool"))
    contract["tools"]["findNotes"]["args"]["code"] = {
        "sources": ["EVIDENCE"],
        "missing": {"action": "CALL_TOOL", "tool": "plainTool"},
    }
    code, rows = probes_kit.check(make_agent(tmp_path, contract))
    assert code == 0 and [r for r in errors(rows) if "missing" in r["rule"]] == [], rows


def test_a_tool_name_that_resolves_to_a_broken_skill_is_not_a_real_skill(tmp_path: Path):
    """Issue: preflight checks "every toolName resolves to a real skill"; docs: "resolves to a skill … without a
    catalog error" — plainTool's schema.json is not JSON."""
    agent = make_agent(tmp_path)
    write(agent / "skills" / "plainTool" / "schema.json", "{not json")
    code, rows = probes_kit.check(agent)
    assert code == 1 and preflight_hits(rows, "P0.tool_missing", "plainTool", ""), rows


def test_a_verify_tool_that_is_bound_but_is_no_skill(tmp_path: Path):
    """The verify tool is in toolNames (so preflight.verify_tool passes) but no skill of that name exists:
    "every toolName resolves to a real skill" names that tool."""
    agent = make_agent(tmp_path)
    for file in (agent / "skills" / "findNotes").iterdir():
        file.unlink()
    (agent / "skills" / "findNotes").rmdir()
    code, rows = probes_kit.check(agent)
    assert code == 1 and preflight_hits(rows, "P0.tool_missing", "findNotes", ""), rows
