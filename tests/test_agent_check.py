"""``skillyard agent check`` and the preflight behind it: exit codes, messages, --json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import json5
import pytest
from click.testing import CliRunner

from skillyard import SkillYard
from skillyard.agent import load_agent, preflight_agent
from skillyard.agent.preflight import schema_has_path
from skillyard.cli import cli
from skillyard.plugins import load_plugins

FIXTURE = Path(__file__).parent / "fixtures" / "agents" / "cms"


@pytest.fixture(scope="module", autouse=True)
def agent_commands():
    """Plugin commands are added by main(); do the same for the test CLI (the hook is idempotent)."""
    load_plugins().hook.register_commands(cli=cli)
    load_plugins().hook.register_commands(cli=cli)


@pytest.fixture
def cms(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "cms"))


def set_contract(cms: Path, contract: dict[str, object], tools: str = "[createArticle, queryArticle]") -> None:
    folder = cms / "skills" / "article_lifecycle"
    (folder / "contract.json").write_text(json.dumps(contract), encoding="utf-8")
    md = folder / "SKILL.md"
    text = md.read_text(encoding="utf-8").replace("tools: [createArticle, queryArticle]", f"tools: {tools}")
    md.write_text(text, encoding="utf-8")


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["agent", "check", *args])
    return result.exit_code, result.output


WRITE = {"sideEffect": "WRITE", "success": {"path": "code", "op": "EQ", "value": 200}}


def test_a_good_agent_passes(cms):
    code, output = check(str(cms))
    assert code == 0, output
    assert "0 error(s), 0 warning(s)" in output
    code, output = check(str(cms), "--json")
    assert code == 0 and json.loads(output) == []


def test_load_errors_fail_with_skill_rule_and_path(cms):
    set_contract(cms, {"tools": {"createArticle": {"sideEffect": "WRITE"}, "queryArticle": {}}})
    code, output = check(str(cms))
    assert code == 1
    assert "cms.article.lifecycle" in output and "§16.6" in output and "tools.createArticle.success" in output
    assert "2 error(s), 0 warning(s)" in output
    code, output = check(str(cms), "--json")
    rows = json.loads(output)
    assert code == 1
    first = rows[0]
    assert set(first) == {"kind", "severity", "skill", "tool", "rule", "path", "message"}
    assert (first["kind"], first["severity"], first["skill"], first["rule"], first["path"]) == (
        "load",
        "error",
        "cms.article.lifecycle",
        "§16.6",
        "tools.createArticle.success",
    )
    assert first["tool"] == "createArticle" and {r["rule"] for r in rows} == {"§16.6", "§16"}


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
        ("error", "publishArticle", "", "preflight.tool_exists"),
        ("warning", "publishArticle", "", "§1.3"),
        ("error", "deleteArticle", "", "§4"),
        ("error", "createArticle", "titel", "preflight.idempotency_key"),
        ("error", "createArticle", "name", "preflight.verify_args"),
        ("error", "createArticle", "title", "preflight.arg_source"),
        ("error", "createArticle", "tags[].color", "preflight.arg_path"),
        ("error", "createArticle", "spaceId", "preflight.missing_tool"),
        ("warning", "createArticle", "userId", "preflight.arg_source"),
        ("error", "queryArticle", "", "preflight.success_op"),
        ("error", "", "inputs.space", "preflight.provider"),
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
    assert {("createArticle", "preflight.target"), ("createArticle", "preflight.verify_tool")} <= rules
    assert ("createArticle", "§6.4") in rules  # the verify tool has no success condition


def test_skills_dir_option_and_agent_md_errors(tmp_path, cms):
    shared = tmp_path / "shared"
    shutil.move(str(cms / "skills" / "queryArticle"), shared / "queryArticle")
    code, output = check(str(cms))
    assert code == 1 and "'queryArticle'" in output and "preflight.tool_exists" in output
    code, output = check(str(cms), "--skills-dir", str(shared))
    assert code == 0, output
    (cms / "AGENT.md").unlink()
    code, output = check(str(cms))
    assert code == 1 and "Error: no AGENT.md" in output


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
