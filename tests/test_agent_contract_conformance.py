"""Black-box probes of the contract loader and the publish-time preflight (issue 5, contract spec §1.1, §2–§8,
§11, §16, §19, orchestration requirements §2, docs/agents.md and docs/cli.md "skillyard agent check").

Every test states what the spec / issue / docs require. ``skillyard agent check`` runs in a subprocess
(``python -m skillyard agent check DIR --json``); values that only the parsed contract can show are read through
the documented Python API ``load_agent``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent import load_agent

SKILL = "notes.keeper"
OK200 = {"path": "code", "op": "EQ", "value": 200}

SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "spaceId": {"type": "string"},
            "userId": {"type": "string"},
            "info": {"type": "object", "properties": {"code": {"type": "string"}}},
            "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        },
        "required": ["title"],
    },
    "findNotes": {"type": "object", "properties": {"q": {"type": "string"}, "code": {"type": "string"}}},
    "plainTool": {"type": "object", "properties": {"q": {"type": "string"}}},
}
TOOLS = list(SCHEMAS)

BASE: dict[str, Any] = {
    "target": "saveNote",
    "outputs": {"noteId": {"sources": ["EVIDENCE"], "required": False}},
    "tools": {
        "saveNote": {
            "label": "Saving the note",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER"], "label": "Title"},
                "spaceId": {"from": "shared.spaceId", "sources": ["MODEL"]},
                "userId": {"from": "platform.userId"},
            },
            "success": OK200,
            "extracts": [{"key": "note", "path": "data"}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "findNotes": {
            "label": "Looking notes up",
            "args": {"q": {"sources": ["USER", "MODEL"]}},
            "success": OK200,
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "plainTool": {"args": {"q": {"sources": ["MODEL"]}}},
    },
}


def contract_with(mutate: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    contract = copy.deepcopy(BASE)
    if mutate is not None:
        mutate(contract)
    return contract


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def business_tool(root: Path, name: str) -> None:
    write(root / name / "SKILL.md", f"---\nname: {name}\ndescription: business tool {name}\n---\nDoes {name}.\n")
    write(root / name / "handler.py", "async def execute(input, ctx):\n    return {'code': 200, 'data': {}}\n")
    write(root / name / "schema.json", json.dumps(SCHEMAS[name]))


def contract_skill(
    root: Path,
    folder: str = "keeper",
    key: str = SKILL,
    contract: dict[str, Any] | str | None = None,
    tools: str | None = None,
    front: str = "",
) -> Path:
    tools = tools if tools is not None else "[" + ", ".join(TOOLS) + "]"
    write(
        root / folder / "SKILL.md",
        f"---\nname: {folder}\nskill_key: {key}\ndescription: Keeps notes.\ntools: {tools}\n{front}---\n"
        "The manual: save notes the user dictates.\n",
    )
    if contract is not None:
        text = contract if isinstance(contract, str) else json.dumps(contract, ensure_ascii=False)
        write(root / folder / "contract.json", text)
    return root / folder


def make_agent(
    root: Path,
    contract: dict[str, Any] | str | None = None,
    *,
    skills: str = f"[{SKILL}]",
    agent_front: str = "",
    front: str = "",
    tools: str | None = None,
    with_skill: bool = True,
    with_tools: bool = True,
) -> Path:
    agent = root / "notes_agent"
    write(
        agent / "AGENT.md",
        f"---\nagent_code: notes\nagent_name: Note keeper\n{agent_front}skills: {skills}\n---\n"
        "# Identity\nA careful note keeper.\n# Mission\nKeep the user's notes.\n",
    )
    if with_tools:
        for name in TOOLS:
            business_tool(agent / "skills", name)
    if with_skill:
        contract_skill(agent / "skills", contract=BASE if contract is None else contract, tools=tools, front=front)
    else:
        (agent / "skills").mkdir(parents=True, exist_ok=True)
    return agent


def run_cli(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "skillyard", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def check(agent: Path, *extra: str, extra_env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    result = run_cli("agent", "check", str(agent), *extra, "--json", extra_env=extra_env)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    try:
        rows = json.loads(result.stdout)
    except json.JSONDecodeError:  # pragma: no cover - reported by the assertion below
        pytest.fail(f"--json printed no JSON list: {result.stdout!r} {result.stderr!r}")
    return result.returncode, rows


def errors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["severity"] == "error"]


def load_errors(rows: list[dict[str, Any]], skill: str = SKILL) -> set[tuple[str, str]]:
    return {(r["rule"], r["path"]) for r in rows if r["kind"] == "load" and r["skill"] == skill}


async def loaded(agent: Path, *skills_dirs: Path):
    yard = SkillYard(skills_dirs=list(skills_dirs), include_builtin=False)
    return await load_agent(yard, agent)


def test_the_base_agent_checks_clean(tmp_path: Path):
    """Baseline for every probe below: the base contract satisfies §16, §11 and the preflight."""
    code, rows = check(make_agent(tmp_path))
    assert (code, rows) == (0, []), rows


# =====================================================================================================================
# §16: every load rule drops the skill with an error naming the skill, the rule and the JSON path
# =====================================================================================================================

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


@pytest.mark.parametrize(("case", "mutate", "rules", "path"), RULES, ids=[r[0] for r in RULES])
def test_every_load_rule_fails_agent_check_naming_skill_rule_and_json_path(tmp_path: Path, case, mutate, rules, path):
    """Issue: "Loading validates every rule of §16 and the platform-field rules of §11; a skill that fails is
    dropped with an error that names the skill, the rule and the JSON path"; docs/cli.md: exit 1 on an error."""
    contract = mutate if isinstance(mutate, str) else contract_with(mutate)
    code, rows = check(make_agent(tmp_path, contract))
    found = load_errors(errors(rows))
    assert code == 1, rows
    assert any(rule in rules and p == path for rule, p in found), (rules, path, rows)


async def test_a_dropped_skill_does_not_take_the_other_skills_down(tmp_path: Path):
    """§16: "任一规则不满足，该 Skill 被丢弃" — only that skill; docs: "the other skills still load"."""
    agent = make_agent(tmp_path, contract_with(lambda c: c.update(mode="react")), skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    result = await loaded(agent)
    assert list(result.skills) == ["notes.reader"]
    assert ("notes.keeper", "§16.13", "mode") in {(e.skill, e.rule, e.path) for e in result.errors}
    code, rows = check(agent)
    assert code == 1 and {r["skill"] for r in errors(rows)} == {SKILL}, rows


# =====================================================================================================================
# §19 parsing
# =====================================================================================================================


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


def test_a_utf8_bom_before_the_contract_is_not_a_broken_contract(tmp_path: Path):
    """§16.1 asks for legal JSON; a UTF-8 BOM written by a Windows editor is not part of the JSON text."""
    agent = make_agent(tmp_path)
    path = agent / "skills" / "keeper" / "contract.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    code, rows = check(agent)
    assert (code, errors(rows)) == (0, []), rows


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


NULL_ATTRIBUTES: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("mode", lambda c: c.update(mode=None)),
    ("target", lambda c: c.update(target=None)),
    ("label", lambda c: c["tools"]["findNotes"].update(label=None)),
    ("sideEffect of a read", lambda c: c["tools"]["plainTool"].update(sideEffect=None)),
    ("when", lambda c: c["tools"]["saveNote"]["args"]["spaceId"].update(when=None)),
    ("extract key", lambda c: c["tools"]["findNotes"]["extracts"][0].update(key=None)),
]


@pytest.mark.parametrize(("case", "mutate"), NULL_ATTRIBUTES, ids=[c[0] for c in NULL_ATTRIBUTES])
def test_a_null_text_or_enum_attribute_is_not_configured(tmp_path: Path, case, mutate):
    """§19 "空字符串 视为未配置" and docs ("absent, null and \"\" all mean not configured" for entries): a text or
    enum attribute written as JSON null is not configured, not an illegal enum value or a wrong type."""
    _, rows = check(make_agent(tmp_path, contract_with(mutate)))
    assert [r for r in errors(rows) if r["kind"] == "load"] == [], rows


def test_a_closed_platform_field_in_an_input_fails_the_skill(tmp_path: Path):
    """§11: "platform.<字段> 中的字段必须在上表中，否则 Skill 加载失败" — wherever a platform expression is
    written, so also in `inputs.*.from` (§16.10)."""
    contract = contract_with(lambda c: c.update(inputs={"who": {"from": "platform.passportId"}}))
    code, rows = check(make_agent(tmp_path, contract))
    assert code == 1 and any(r["rule"] == "§16.10" and r["path"].startswith("inputs.who") for r in rows), rows


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


@pytest.mark.parametrize(("case", "mutate"), EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_an_empty_string_is_unset_at_every_level(tmp_path: Path, case, mutate):
    """§19: "空字符串 视为未配置" — an attribute written as "" behaves as if it were absent, so none of these
    contracts breaks a load rule (§16) and `agent check` reports no load error."""
    _, rows = check(make_agent(tmp_path, contract_with(mutate)))
    assert [r for r in errors(rows) if r["kind"] == "load"] == [], rows


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


@pytest.mark.parametrize(("case", "mutate", "absent"), NULL_ENTRIES, ids=[c[0] for c in NULL_ENTRIES])
async def test_a_null_or_empty_entry_is_as_if_not_listed(tmp_path: Path, case, mutate, absent):
    """docs/agents.md §19: "A whole entry written as null or "" (a tool under tools, an argument under args, an
    extract, an input, an output) is not configured either: as if it were not listed."""
    result = await loaded(make_agent(tmp_path, contract_with(mutate)))
    assert result.errors == [], result.errors
    assert absent(result.skills[SKILL].contract)


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


# =====================================================================================================================
# Inline `contract:` versus contract.json
# =====================================================================================================================


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


def test_an_empty_inline_contract_without_contract_json_is_rule_16_1(tmp_path: Path):
    """§16.1: "skill_contract 非空" — an empty inline contract and no contract.json drops the skill."""
    agent = make_agent(tmp_path, front='contract: ""\n')
    (agent / "skills" / "keeper" / "contract.json").unlink()
    code, rows = check(agent)
    assert code == 1 and any(r["rule"] == "§16.1" and r["skill"] == SKILL for r in errors(rows)), rows


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


# =====================================================================================================================
# status / enabled (§1.1)
# =====================================================================================================================


async def test_an_empty_skill_status_defaults_to_active(tmp_path: Path):
    """Issue: "`status` defaults to ACTIVE"; §19: an empty string is not configured → the skill loads."""
    result = await loaded(make_agent(tmp_path, front='status: ""\n'))
    assert list(result.skills) == [SKILL], (result.errors, result.warnings)


def test_an_empty_agent_status_defaults_to_active(tmp_path: Path):
    """docs: AGENT.md `status` "default ACTIVE"; an empty value is not configured."""
    code, rows = check(make_agent(tmp_path, agent_front='status: ""\n'))
    assert (code, errors(rows)) == (0, []), rows


@pytest.mark.parametrize("value", ["active", "Active", "INACTIVE", "DISABLED"])
async def test_a_skill_status_other_than_active_does_not_load(tmp_path: Path, value: str):
    """§1.1: "只有 status=ACTIVE 的 Skill … 会被加载"; docs: "other values: not loaded (a warning)" (the
    comparison is the exact value ACTIVE)."""
    agent = make_agent(tmp_path, front=f"status: {value}\n", skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    result = await loaded(agent)
    assert SKILL not in result.skills and "notes.reader" in result.skills
    assert any(w.skill == SKILL and w.rule == "status" for w in result.warnings), result.warnings


async def test_enabled_flag_zero_does_not_load(tmp_path: Path):
    """§1.1: only bindings with enabled_flag=1 load; `enabled: 0` is the flag off."""
    agent = make_agent(tmp_path, front="enabled: 0\n", skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    result = await loaded(agent)
    assert SKILL not in result.skills and "notes.reader" in result.skills


def test_a_skipped_inactive_skill_is_a_warning_and_check_still_passes_with_another_skill(tmp_path: Path):
    """docs: non-ACTIVE → warning `status`; "warnings alone pass" (exit 0)."""
    agent = make_agent(tmp_path, front="status: INACTIVE\n", skills="[notes.keeper, notes.reader]")
    contract_skill(agent / "skills", "reader", "notes.reader", {"tools": {"findNotes": {}}}, tools="[findNotes]")
    code, rows = check(agent)
    assert code == 0, rows
    assert any(r["severity"] == "warning" and r["skill"] == SKILL and r["rule"] == "status" for r in rows), rows


# =====================================================================================================================
# Skill roots: --skills-dir, SKILLYARD_SKILLS_PATH, the agent's skills/ folder; duplicate skill_key
# =====================================================================================================================


def test_contract_skill_and_tools_through_skills_dir(tmp_path: Path):
    """Issue: contract skills and business tools "are found … through the same skill roots as every other skill
    (`--skills-dir`, …)"."""
    agent = make_agent(tmp_path, with_skill=False, with_tools=False)
    shared = tmp_path / "shared"
    for name in TOOLS:
        business_tool(shared, name)
    contract_skill(shared, contract=BASE)
    code, rows = check(agent, "--skills-dir", str(shared))
    assert (code, rows) == (0, []), rows


def test_contract_skill_and_tools_through_skillyard_skills_path_with_two_roots(tmp_path: Path):
    """docs/configuration.md: SKILLYARD_SKILLS_PATH holds roots "separated by `:`"."""
    agent = make_agent(tmp_path, with_skill=False, with_tools=False)
    one, two = tmp_path / "one", tmp_path / "two"
    for name in TOOLS:
        business_tool(one, name)
    contract_skill(two, contract=BASE)
    code, rows = check(agent, extra_env={"SKILLYARD_SKILLS_PATH": f"{one}{os.pathsep}{two}"})
    assert (code, rows) == (0, []), rows


def test_a_contract_skill_outside_the_agent_is_validated_like_any_other(tmp_path: Path):
    """§16 applies wherever the skill was found: a broken contract in --skills-dir fails check with its path."""
    agent = make_agent(tmp_path, with_skill=False)
    shared = tmp_path / "shared"
    contract_skill(shared, contract=contract_with(lambda c: c["tools"]["saveNote"].pop("success")))
    code, rows = check(agent, "--skills-dir", str(shared))
    assert code == 1 and ("§16.6", "tools.saveNote.success") in load_errors(rows), rows


def test_the_agents_own_skill_wins_over_a_duplicate_key_in_skills_dir(tmp_path: Path):
    """docs: the agent's skills/ folder ranks above every root; "a key declared twice is a warning; the
    higher-ranked skill wins" — the broken duplicate in --skills-dir is not what loads."""
    agent = make_agent(tmp_path)
    shared = tmp_path / "shared"
    contract_skill(shared, "keeper_shared", contract=contract_with(lambda c: c.update(mode="react")))
    code, rows = check(agent, "--skills-dir", str(shared))
    assert code == 0, rows
    assert any(r["severity"] == "warning" and r["skill"] == SKILL and "skill_key" in r["rule"] for r in rows), rows


def test_skills_dir_outranks_skillyard_skills_path_for_a_duplicate_key(tmp_path: Path):
    """docs/decisions.md: roots rank `--skills-dir` > `SKILLYARD_SKILLS_PATH`; the higher-ranked key wins."""
    agent = make_agent(tmp_path, with_skill=False)
    good, bad = tmp_path / "good", tmp_path / "bad"
    contract_skill(good, "keeper_good", contract=BASE)
    contract_skill(bad, "keeper_bad", contract=contract_with(lambda c: c.update(mode="react")))
    code, rows = check(agent, "--skills-dir", str(good), extra_env={"SKILLYARD_SKILLS_PATH": str(bad)})
    assert code == 0 and load_errors(errors(rows)) == set(), rows


def test_a_duplicate_key_in_the_agent_folder_is_reported(tmp_path: Path):
    """docs: "a key declared twice is a warning" — two folders of the agent declaring one skill_key."""
    agent = make_agent(tmp_path)
    contract_skill(agent / "skills", "keeper_copy", SKILL, BASE)
    _, rows = check(agent)
    assert any(r["skill"] == SKILL and "skill_key" in r["rule"] for r in rows), rows


# =====================================================================================================================
# Preflight (issue; orchestration requirements §2; §16 "由编写者保证")
# =====================================================================================================================


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
    ("keys", "bad"),
    [(["info.code"], None), (["lines[].sku"], None), (["info.nope"], "info.nope"), (["lines[].nope"], "lines[].nope")],
)
def test_idempotency_key_paths_follow_nested_schemas(tmp_path: Path, keys: list[str], bad: str | None):
    """Issue: "idempotencyKey … paths exist in the tool's input schema"; docs: `a.b` follows properties,
    `lines[].x` follows items.properties."""
    code, rows = check(
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
    code, rows = check(
        make_agent(tmp_path, contract_with(lambda c: c["tools"]["saveNote"]["verify"].update(args=args)))
    )
    if bad is None:
        assert (code, errors(rows)) == (0, []), rows
    else:
        assert code == 1 and preflight_hits(rows, "preflight.verify_args", "saveNote", bad), rows


@pytest.mark.parametrize("sources", [["PLATFORM"], ["CONTRACT"], ["PLATFORM", "CONTRACT"]])
def test_a_required_argument_with_only_platform_or_contract_sources_is_unsatisfiable(tmp_path: Path, sources):
    """§5.3: PLATFORM / CONTRACT "不会匹配（这两类来源只能通过 from/const 产生）" — a required argument without
    from/const whose sources are only these can never be satisfied (issue: "every required argument has a
    satisfiable source"; docs: preflight.arg_source error)."""
    contract = contract_with(lambda c: c["tools"]["findNotes"]["args"].update(code={"sources": sources}))
    code, rows = check(make_agent(tmp_path, contract))
    assert code == 1 and preflight_hits(rows, "preflight.arg_source", "findNotes", "code"), rows


def test_an_optional_argument_without_a_source_is_only_a_warning(tmp_path: Path):
    """docs: preflight.arg_source is "a warning when not required"; warnings alone pass (exit 0)."""
    contract = contract_with(lambda c: c["tools"]["findNotes"]["args"].update(code={"required": False}))
    code, rows = check(make_agent(tmp_path, contract))
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
    code, rows = check(make_agent(tmp_path, contract))
    assert (code, errors(rows)) == (0, []), rows


def test_missing_tool_only_needs_to_be_in_tool_names(tmp_path: Path):
    """§5.5: missing.tool "必须在 toolNames 中，且不能是参数所属的工具本身" — a bound tool without its own
    contract.tools entry is allowed (§1.3: contract.tools is optional)."""
    contract = contract_with(lambda c: c["tools"].pop("plainTool"))
    contract["tools"]["findNotes"]["args"]["code"] = {
        "sources": ["EVIDENCE"],
        "missing": {"action": "CALL_TOOL", "tool": "plainTool"},
    }
    code, rows = check(make_agent(tmp_path, contract))
    assert code == 0 and [r for r in errors(rows) if "missing" in r["rule"]] == [], rows


def test_a_tool_name_that_resolves_to_a_broken_skill_is_not_a_real_skill(tmp_path: Path):
    """Issue: preflight checks "every toolName resolves to a real skill"; docs: "resolves to a skill … without a
    catalog error" — plainTool's schema.json is not JSON."""
    agent = make_agent(tmp_path)
    write(agent / "skills" / "plainTool" / "schema.json", "{not json")
    code, rows = check(agent)
    assert code == 1 and preflight_hits(rows, "preflight.tool_exists", "plainTool", ""), rows


def test_a_verify_tool_that_is_bound_but_is_no_skill(tmp_path: Path):
    """The verify tool is in toolNames (so preflight.verify_tool passes) but no skill of that name exists:
    "every toolName resolves to a real skill" names that tool."""
    agent = make_agent(tmp_path)
    for file in (agent / "skills" / "findNotes").iterdir():
        file.unlink()
    (agent / "skills" / "findNotes").rmdir()
    code, rows = check(agent)
    assert code == 1 and preflight_hits(rows, "preflight.tool_exists", "findNotes", ""), rows


def test_tool_names_as_a_comma_separated_string(tmp_path: Path):
    """docs: `tools` is "a list (or comma-separated string) of names"."""
    code, rows = check(make_agent(tmp_path, tools="saveNote, findNotes, plainTool"))
    assert (code, rows) == (0, []), rows


def test_json_and_text_output_shape_for_load_and_preflight_findings(tmp_path: Path):
    """docs/cli.md: `--json` prints a JSON list of `{kind: "load" | "preflight", severity, skill, tool, rule, path,
    message}`; without it one row per finding and the summary `AGENT_DIR: N error(s), M warning(s)`; exit 1."""
    agent = make_agent(
        tmp_path,
        contract_with(lambda c: c["tools"]["saveNote"].update(idempotencyKey=["titel"])),
        skills="[notes.keeper, notes.broken]",
    )
    contract_skill(agent / "skills", "broken", "notes.broken", {"mode": "plan"}, tools="[findNotes]")
    code, rows = check(agent)
    assert code == 1
    assert all(set(r) == {"kind", "severity", "skill", "tool", "rule", "path", "message"} for r in rows), rows
    assert {r["kind"] for r in rows} == {"load", "preflight"}
    assert all(r["severity"] in {"error", "warning"} and r["message"] for r in rows)
    result = run_cli("agent", "check", str(agent))
    assert result.returncode == 1
    n_err, n_warn = len(errors(rows)), len(rows) - len(errors(rows))
    assert f"{agent}: {n_err} error(s), {n_warn} warning(s)" in result.stdout + result.stderr, result
    for needle in ("notes.broken", "§16.13", "mode", "notes.keeper", "preflight.idempotency_key", "titel"):
        assert needle in result.stdout, (needle, result.stdout)


@pytest.mark.parametrize("key", ["passportId", "adminUser"])
def test_an_output_key_named_like_a_closed_platform_field_fails_the_skill(tmp_path: Path, key: str):
    """§11 lists passportId, clientId, sessionType, adminUser, adminCompany as platform fields that are not opened,
    and "平台字段名是保留名：产出的 key、共享值的 key 不能与之同名"; builtin_output_set refuses them too
    (docs: PLATFORM_FIELD_FORBIDDEN for "the open ones and the hidden ones"), so such an output could never be
    written: the load must refuse it (§11, path outputs.<key>)."""
    contract = contract_with(lambda c: c["outputs"].update({key: {"sources": ["USER"], "share": "TASK"}}))
    code, rows = check(make_agent(tmp_path, contract))
    assert code == 1 and ("§11", f"outputs.{key}") in load_errors(rows), rows
