"""Review probes for issue 5 (the contract-driven agent runtime, part 1), written black-box from the issue text,
the contract spec and docs/agents.md: ``yard.agent`` + ``send`` / ``resume`` with scripted models, the
``skillyard agent check`` CLI, real in-process business skills that log every real execution, real PostgreSQL.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from support.agent_probes import call, calls, codes, needs_db, say, write_files
from skillyard import SkillYard
from skillyard.agent.models import ScriptedModel
from skillyard.agent.runner import AgentError
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from skillyard.cli import cli
from skillyard.plugins import load_plugins

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}

HANDLER = """
import asyncio, json, pathlib, urllib.error, http.client

LOG = pathlib.Path({log!r})
NAME = {name!r}


class DiskFull(OSError):
    pass


class NobodyHome(ConnectionRefusedError):
    pass


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key"),
                            "user": ctx.get("user_id")}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "io":
        raise OSError("disk gone")
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "boom":
        raise ValueError("boom")
    if mode == "urlerror":
        raise urllib.error.URLError("name resolution failed")
    if mode == "custom_oserror":
        raise DiskFull("the disk is full")
    if mode == "custom_refused":
        raise NobodyHome("nobody home")
    if mode == "remote_disconnected":
        raise http.client.RemoteDisconnected("peer closed the connection")
    if mode == "business":
        return {{"ok": False, "code": "E42", "msg": "duplicate title"}}
    if mode == "successfalse":
        return {{"success": False, "msg": "nope"}}
    if mode == "none_found":
        return {{"code": 200, "data": {{"records": []}}}}
    if mode == "blank":
        return {{"code": 200, "data": {{"records": {{"id": None, "title": ""}}}}}}
    return {result}
"""

RESULTS = {
    "saveNote": '{"code": 200, "data": {"id": "n-" + str(input.get("title")), "title": input.get("title")}}',
    "sendMemo": '{"code": 200, "data": {"memo": input.get("text")}}',
    "findNotes": '{"code": 200, "data": {"records": '
    '[{"id": "n-1", "title": "季度总结"}, {"id": "n-2", "title": "周报"}]}}',
    "lookupOwner": '{"found": True, "owner": "ada"}',
    "tagNote": '{"code": 200, "tagged": input.get("noteId"), "tag": input.get("tag")}',
    "openNote": '{"code": 200, "opened": input.get("noteId")}',
    "riskyWrite": '{"code": 200, "data": {"id": "r-1"}}',
    "stampNote": '{"code": 200, "data": "s-" + str(input.get("title"))}',
    "whoAmI": "dict(input)",
    "plainTool": '{"code": 200, "plain": True}',
}

ANY = {"type": "object", "properties": {"q": {}, "mode": {}}}
SCHEMAS: dict[str, dict[str, Any]] = {
    "saveNote": {
        "type": "object",
        "properties": {"title": {}, "owner": {}, "category": {}, "pin": {}, "mode": {}},
        "required": ["title"],
    },
    "sendMemo": {"type": "object", "properties": {"text": {}, "mode": {}}, "required": ["text"]},
    "findNotes": {"type": "object", "properties": {"q": {}, "mode": {}, "count": {"type": "integer"}}},
    "lookupOwner": ANY,
    "tagNote": {"type": "object", "properties": {"noteId": {}, "tag": {}, "mode": {}}},
    "openNote": {"type": "object", "properties": {"noteId": {}, "mode": {}}},
    "riskyWrite": {"type": "object", "properties": {"q": {}, "mode": {}}},
    "stampNote": {"type": "object", "properties": {"title": {}, "owner": {}, "mode": {}}},
    "whoAmI": {
        "type": "object",
        "properties": {
            k: {} for k in ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath", "mode")
        },
    },
    "plainTool": ANY,
}

FREE = {"sources": ["MODEL"], "required": False}
OK200 = {"path": "code", "op": "EQ", "value": 200}
CONTRACT: dict[str, Any] = {
    "outputs": {
        "noteId": {"sources": ["EVIDENCE"], "required": False, "share": "TASK"},
        "category": {"sources": ["USER"], "required": False, "share": "SESSION"},
    },
    "tools": {
        "saveNote": {
            "label": "正在保存笔记",
            "sideEffect": "WRITE",
            "idempotencyKey": ["title"],
            "args": {
                "title": {"sources": ["USER", "EVIDENCE"], "label": "标题"},
                "owner": {"from": "platform.userId", "label": "所有者"},
                "category": {"from": "session.category", "required": False, "label": "分类"},
                "pin": {"sources": ["MODEL"], "required": False, "sensitive": True, "label": "口令"},
                "mode": FREE,
            },
            "success": OK200,
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "note", "path": "data", "entity": {"type": "note", "name": "title"}}],
            "verify": {"tool": "findNotes", "args": {"q": {"from": "call.title"}}},
        },
        "sendMemo": {
            "label": "正在发送备忘",
            "sideEffect": "WRITE",
            "args": {"text": {"sources": ["USER"], "label": "内容"}, "mode": FREE},
            "success": OK200,
        },
        "findNotes": {
            "label": "正在查找笔记",
            "args": {"q": FREE, "mode": FREE, "count": FREE},
            "success": OK200,
            "error": {"code": "code", "message": "msg"},
            "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
        },
        "lookupOwner": {"args": {"q": FREE, "mode": FREE}, "success": {"path": "found", "op": "TRUTHY"}},
        "tagNote": {
            "args": {"noteId": {"sources": ["PRIOR_TASK"]}, "tag": {"sources": ["SESSION"]}, "mode": FREE},
            "success": OK200,
        },
        "openNote": {"args": {"noteId": {"from": "prior.note.id"}, "mode": FREE}, "success": OK200},
        "riskyWrite": {
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE, "mode": FREE},
            "success": OK200,
        },
        "stampNote": {
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"title": FREE, "owner": {"from": "platform.userId"}, "mode": FREE},
            "success": OK200,
            "extracts": [
                {"key": "stamp", "path": "data", "entity": {"type": "stamp", "scalar": "id", "name": "title"}}
            ],
        },
        "whoAmI": {
            "args": {
                field: {"from": f"platform.{field}", "required": False}
                for field in ("userId", "memberId", "name", "organId", "organName", "organType", "deptPath")
            }
        },
    },
}
TOOLS = list(RESULTS)


class Env:
    """An agent folder in tmp_path: a contract skill and business skills that log every real execution."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / "notes_agent"
        self.scripts = 0
        self.uid = uuid.uuid4().hex[:10]
        skills = self.dir / "skills"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: notes\nagent_name: Note keeper\nskills: [notes.keeper]\n---\n"
            "# Identity\nA careful note keeper.\n# Mission\nKeep the user's notes.\n",
            skills / "keeper" / "SKILL.md": "---\nname: keeper\nskill_key: notes.keeper\ndescription: Keeps notes.\n"
            f"tools: [{', '.join(TOOLS)}]\n---\nThe keeper manual: save notes the user dictates.\n",
        }
        for name, result in RESULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\nexec: {{timeout: 0.5}}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(log=str(self.log), name=name, result=result)
            files[folder / "schema.json"] = json.dumps(SCHEMAS[name])
        write_files(files)
        self.contract(CONTRACT)

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def contract(self, contract: dict[str, Any] | str) -> None:
        text = contract if isinstance(contract, str) else json.dumps(contract, ensure_ascii=False)
        (self.dir / "skills" / "keeper" / "contract.json").write_text(text, encoding="utf-8")

    def agent_md(self, text: str) -> None:
        (self.dir / "AGENT.md").write_text(text, encoding="utf-8")

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def modified(**changes: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract.update(changes)
    return contract


def with_tool(name: str, **changes: Any) -> dict[str, Any]:
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"][name].update(changes)
    return contract


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "riskyWrite,stampNote")
    return Env(tmp_path)


@pytest.fixture(scope="module", autouse=True)
def agent_commands():
    load_plugins().hook.register_commands(cli=cli)


async def send_once(env: Env, message: str, *turns: dict[str, Any], session: str = "once") -> TurnResult:
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*turns))
        return await agent.send(env.sid(session), message, identity=IDENTITY)


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["agent", "check", *args])
    return result.exit_code, result.output


def check_rows(agent_dir: Path) -> tuple[int, list[dict[str, Any]]]:
    code, output = check(str(agent_dir), "--json")
    return code, json.loads(output)


class Recorder:
    """A ChatModel wrapping the scripted model that records what each model call was offered."""

    def __init__(self, spec: str) -> None:
        self.inner = ScriptedModel(spec.removeprefix("script:"))
        self.seen: list[tuple[list[dict[str, Any]], list[str]]] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        self.seen.append((messages, [t["function"]["name"] for t in tools]))
        return await self.inner.complete(messages, tools, state)


# =====================================================================================================================
# Loading (§1.1, §16, §11, §19)
# =====================================================================================================================


async def test_inactive_agent_does_not_load_through_yard_agent(env: Env):
    """§1.1 / docs: `status` other than ACTIVE → the agent does not load (an error)."""
    env.agent_md("---\nagent_code: notes\nstatus: INACTIVE\nskills: [notes.keeper]\n---\n# Mission\nx\n")
    async with SkillYard() as yard:
        with pytest.raises(AgentError):
            await yard.agent(env.dir, model=env.script(say("hi")))


def test_inactive_agent_fails_agent_check(env: Env):
    env.agent_md("---\nagent_code: notes\nstatus: DISABLED\nskills: [notes.keeper]\n---\n# Mission\nx\n")
    code, rows = check_rows(env.dir)
    assert code == 1 and any(r["severity"] == "error" and "status" in r["rule"] for r in rows), rows


def test_contract_json_with_line_and_block_comments(env: Env):
    text = json.dumps(CONTRACT, ensure_ascii=False, indent=2)
    text = text.replace('"tools": {', '"tools": { // the business tools\n /* block\n comment */', 1)
    text = text.replace('"label": "正在查找笔记"', '"label": "see http://example.com/x" /* inline */')
    env.contract("// a leading comment\n" + text)
    code, rows = check_rows(env.dir)
    assert not [r for r in rows if r["severity"] == "error"], rows
    assert code == 0


async def test_contract_json_comments_keep_urls_in_strings(env: Env):
    text = json.dumps(CONTRACT, ensure_ascii=False).replace('"正在查找笔记"', '"see http://example.com/x" // c\n')
    env.contract("/* head */\n" + text.replace('"tools": {', '"tools": {\n', 1))
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
    assert agent.loaded.skills["notes.keeper"].contract.tools["findNotes"].label == "see http://example.com/x"


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


async def test_empty_strings_are_unset(env: Env):
    env.contract(_empty_strings_contract())
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
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


@pytest.mark.parametrize("unset", ["", None], ids=["empty-string", "null"])
async def test_an_unset_argument_contract_counts_as_not_configured(env: Env, unset: Any):
    """§19: an empty string is "not configured" (docs: absent, null and "" all mean not configured) — an ``args``
    entry that is "" or null is simply not listed, not a reason to drop the skill."""
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"]["findNotes"]["args"]["count"] = unset
    env.contract(contract)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
    assert agent.loaded.errors == [], agent.loaded.errors
    assert "count" not in agent.loaded.skills["notes.keeper"].contract.tools["findNotes"].args


async def test_unknown_attributes_are_ignored_at_every_level(env: Env):
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
    env.contract(contract)
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
    assert agent.loaded.errors == [] and "notes.keeper" in agent.loaded.skills


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


@pytest.mark.parametrize(("case", "mutate", "path"), ENUM_CASES, ids=[c[0] for c in ENUM_CASES])
async def test_enums_are_case_sensitive_and_the_error_names_skill_rule_and_path(env: Env, case, mutate, path):
    contract = json.loads(json.dumps(CONTRACT))
    mutate(contract)
    env.contract(contract)
    async with SkillYard() as yard:
        from skillyard.agent import load_agent

        loaded = await load_agent(yard, env.dir)
    assert "notes.keeper" not in loaded.skills  # dropped
    problems = [(e.skill, e.rule, e.path) for e in loaded.errors if e.rule != "§16"]
    assert ("notes.keeper", "§16.13", path) in problems, problems


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


@pytest.mark.parametrize(("case", "mutate", "rule", "path"), RULE_CASES, ids=[c[0] for c in RULE_CASES])
async def test_every_load_rule_drops_the_skill_naming_rule_and_path(env: Env, case, mutate, rule, path):
    if mutate is None:
        env.contract("null")
    else:
        contract = json.loads(json.dumps(CONTRACT))
        mutate(contract)
        env.contract(contract)
    async with SkillYard() as yard:
        from skillyard.agent import load_agent

        loaded = await load_agent(yard, env.dir)
    assert "notes.keeper" not in loaded.skills
    problems = [(e.skill, e.rule, e.path) for e in loaded.errors]
    assert ("notes.keeper", rule, path) in problems, problems


def test_agent_check_reports_a_dropped_skill_with_skill_rule_and_path_and_exits_1(env: Env):
    env.contract(with_tool("sendMemo", sideEffect="write"))
    code, output = check(str(env.dir))
    assert code == 1
    assert "notes.keeper" in output and "§16.13" in output and "tools.sendMemo.sideEffect" in output


def test_a_good_agent_checks_clean(env: Env):
    code, rows = check_rows(env.dir)
    assert code == 0, rows
    assert [r for r in rows if r["severity"] == "error"] == []


PREFLIGHT_CASES = [
    (
        "target not bound",
        lambda c, t: (c.update(target="sendMemo"), t.remove("sendMemo")),
        "preflight.target",
        "sendMemo",
        "",
    ),
    ("verify tool not bound", lambda c, t: t.remove("findNotes"), "preflight.verify_tool", "saveNote", ""),
    (
        "missing.tool not bound",
        lambda c, t: c["tools"]["tagNote"]["args"]["noteId"].update(missing={"action": "CALL_TOOL", "tool": "ghost"}),
        "preflight.missing_tool",
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
    ("tool does not resolve", lambda c, t: t.append("ghostTool"), "preflight.tool_exists", "ghostTool", ""),
]


@pytest.mark.parametrize(
    ("case", "mutate", "rule", "tool", "arg"), PREFLIGHT_CASES, ids=[c[0] for c in PREFLIGHT_CASES]
)
def test_preflight_names_skill_tool_and_argument(env: Env, case, mutate, rule, tool, arg):
    contract = json.loads(json.dumps(CONTRACT))
    tools = list(TOOLS)
    mutate(contract, tools)
    env.contract(contract)
    md = env.dir / "skills" / "keeper" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8").replace(", ".join(TOOLS), ", ".join(tools)), encoding="utf-8")
    code, rows = check_rows(env.dir)
    assert code == 1
    hits = [r for r in rows if r["rule"] == rule and r["severity"] == "error"]
    assert hits, rows
    assert any(r["skill"] == "notes.keeper" and r["tool"] == tool and r["path"] == arg for r in hits), hits


async def test_contract_skill_from_skillyard_skills_path_and_tools_from_the_agent_folder(
    tmp_path: Path, env: Env, monkeypatch: pytest.MonkeyPatch
):
    """Contract skills are found by skill_key through the usual roots plus the agent's skills/ folder."""
    outside = tmp_path / "elsewhere"
    (outside / "keeper2").mkdir(parents=True)
    (outside / "keeper2" / "SKILL.md").write_text(
        "---\nname: keeper2\nskill_key: notes.reader\ndescription: Reads notes.\ntools: [findNotes]\n---\nRead.\n",
        encoding="utf-8",
    )
    (outside / "keeper2" / "contract.json").write_text(
        json.dumps({"tools": {"findNotes": CONTRACT["tools"]["findNotes"]}}), encoding="utf-8"
    )
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(outside))
    env.agent_md("---\nagent_code: notes\nskills: [notes.reader, notes.keeper]\n---\n# Mission\nx\n")
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(say("x")))
    assert list(agent.loaded.skills) == ["notes.reader", "notes.keeper"], agent.loaded.errors


# =====================================================================================================================
# The chain through the runner
# =====================================================================================================================


@needs_db
async def test_calls_after_a_checkpoint_in_the_same_reply_carry_a_code_and_next_step(env: Env):
    """Every observation the model sees carries a §17 code and a next step (the refused, not-run call too)."""
    result = await send_once(
        env,
        "帮我存个笔记",
        calls(
            ("builtin_node_follow_up", {"question": "标题是什么？", "expectedFields": ["title"]}),
            ("findNotes", {"q": "x"}),
        ),
    )
    assert result.status == "SUSPENDED"
    skipped = result.observations[1]
    assert not skipped.ok and env.calls() == []
    assert (skipped.code or "").startswith("agent_runtime."), skipped
    assert skipped.next_step, skipped


@needs_db
async def test_calls_after_a_fingerprint_trip_in_the_same_reply_carry_a_code(env: Env):
    same = ("findNotes", {"q": "周报"})
    result = await send_once(env, "找周报", call(*same), call(*same), call(*same), calls(same, ("lookupOwner", {})))
    assert codes(result)[3] == "agent_runtime.40026" and result.status == "FAILED"
    after = result.observations[4]
    assert not after.ok and (after.code or "").startswith("agent_runtime.") and after.next_step, after


@pytest.mark.parametrize("mode", ["urlerror", "custom_oserror", "remote_disconnected"])
@needs_db
async def test_any_oserror_subclass_is_an_io_error(env: Env, mode: str):
    """Issue: ``any other OSError → IO`` (urllib's URLError, http.client's RemoteDisconnected and a skill's own
    OSError subclasses are all OSErrors)."""
    result = await send_once(env, "找笔记", call("findNotes", {"mode": mode}), say("出错了"))
    assert len(env.calls("findNotes")) == 1
    assert codes(result) == ["agent_runtime.40018"], result.observations[0]
    assert [e["status"] for e in result.evidence] == ["FAILED"]


@needs_db
async def test_a_connection_refused_subclass_is_unreachable(env: Env):
    result = await send_once(env, "找笔记", call("findNotes", {"mode": "custom_refused"}), say("出错了"))
    assert codes(result) == ["agent_runtime.40017"], result.observations[0]


@pytest.mark.parametrize(
    ("mode", "code", "status", "again"),
    [
        ("io", "agent_runtime.40018", "UNKNOWN", "agent_runtime.40030"),
        ("boom", "agent_runtime.40029", "UNKNOWN", "agent_runtime.40030"),
        ("timeout", "agent_runtime.40016", "UNKNOWN", "agent_runtime.40030"),
        ("refused", "agent_runtime.40017", "FAILED", None),  # FAILED: the identical write simply runs again
        ("custom_oserror", "agent_runtime.40018", "UNKNOWN", "agent_runtime.40030"),
    ],
)
@needs_db
async def test_write_failure_classes_and_what_an_identical_write_meets(env: Env, mode, code, status, again):
    """§14.4 for writes (confirm:false + bypass, so no approval is involved): uncertain → WRITE_PENDING_VERIFY."""
    result = await send_once(
        env, "写", call("riskyWrite", {"mode": mode}), call("riskyWrite", {"mode": mode}), say("stop")
    )
    assert codes(result)[0] == code
    assert result.evidence[0]["status"] == status
    if again is None:
        assert codes(result)[1] == code and len(env.calls("riskyWrite")) == 2
    else:
        assert codes(result)[1] == again and len(env.calls("riskyWrite")) == 1


@needs_db
async def test_write_failure_envelope_is_a_business_failure_and_may_be_approved_again(env: Env):
    script = env.script(
        call("sendMemo", {"text": "开会", "mode": "successfalse"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        call("sendMemo", {"text": "开会", "mode": "successfalse"}),
        say("失败了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("bf"), "发一条备忘：开会", identity=IDENTITY)
        after = await agent.resume(env.sid("bf"), "CONFIRM")
    assert codes(after) == ["agent_runtime.40004", "agent_runtime.42221"]  # no WRITE_PENDING_VERIFY, no reuse
    assert [(e["status"], e["business_ok"]) for e in after.evidence] == [("SUCCESS", False)]
    assert len(env.calls("sendMemo")) == 1


@needs_db
async def test_identical_idempotency_key_returns_the_earlier_result_even_with_other_arguments(env: Env):
    """§14.2: "the same write" is tool + idempotency key (title), not the whole argument object."""
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "季度总结", "pin": "other", "mode": "business"}),
        say("好了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("ik"), "保存季度总结", identity=IDENTITY)
        done = await agent.resume(env.sid("ik"), "CONFIRM")
    first, again = done.observations
    assert first.ok and again.ok and again.code is None and again.evidence_id == first.evidence_id
    assert len(env.calls("saveNote")) == 1 and done.checkpoint is None


@needs_db
async def test_idempotency_key_without_configured_paths_uses_all_arguments(env: Env):
    env.contract(
        json.loads(json.dumps(CONTRACT).replace('"idempotencyKey": ["title"]', '"idempotencyKey": ["nothere"]'))
    )
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("saveNote", {"title": "季度总结", "pin": "other"}),
        say("再确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("ik2"), "保存季度总结", identity=IDENTITY)
        done = await agent.resume(env.sid("ik2"), "CONFIRM")
    assert codes(done) == [None, "agent_runtime.42221"]  # a different write: approval again
    assert len(env.calls("saveNote")) == 1


@needs_db
async def test_the_idempotency_key_reaches_the_skill_and_is_stable_across_tasks(env: Env):
    script = env.script(
        call("stampNote", {"title": "季度总结"}),
        call("builtin_node_finish", {"output": "ok"}),
        call("stampNote", {"title": "季度总结", "mode": "ok"}),
        call("builtin_node_finish", {"output": "ok"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("key"), "盖章", identity=IDENTITY)
        second = await agent.send(env.sid("key"), "再盖章", identity=IDENTITY)
    assert first.status == "DONE" and second.status == "DONE"
    rows = env.calls("stampNote")
    assert len(rows) == 2  # a new task: the identical write runs again (§14.2 is per task)
    assert rows[0]["key"] and rows[0]["key"] != rows[1]["key"]  # all arguments differ (no idempotencyKey)


@needs_db
async def test_identical_write_in_a_new_task_needs_a_new_approval(env: Env):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
        call("saveNote", {"title": "季度总结"}),
        say("需要确认"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("nt"), "保存季度总结", identity=IDENTITY)
        done = await agent.resume(env.sid("nt"), "CONFIRM")
        assert done.status == "DONE"
        again = await agent.send(env.sid("nt"), "再保存季度总结", identity=IDENTITY)
    assert again.task_id != done.task_id and codes(again) == ["agent_runtime.42221"]


async def _age_checkpoint(yard: SkillYard, session_id: str, seconds: float) -> None:
    store = AgentStore(yard.database)
    session = await store.load_session(session_id)
    assert session is not None and session.node_id and session.task_id
    node = await store.load_node(session.node_id)
    task = await store.load_task(session.task_id)
    assert node is not None and task is not None and node.checkpoint is not None
    node.checkpoint.created_at -= seconds
    await store.save_turn(node, task, session)


@pytest.mark.parametrize(("hours", "runs"), [(25, False), (23, True)])
@needs_db
async def test_the_default_reconfirm_after_is_24_hours(env: Env, hours: int, runs: bool):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid(f"re{hours}"), "保存季度总结", identity=IDENTITY)
    async with SkillYard() as yard:
        await _age_checkpoint(yard, env.sid(f"re{hours}"), hours * 3600)
    async with SkillYard() as yard:  # a new process confirms
        agent = await yard.agent(env.dir, model=script)
        turn = await agent.resume(env.sid(f"re{hours}"), "CONFIRM")
    if runs:
        assert turn.status == "DONE" and len(env.calls("saveNote")) == 1
    else:
        assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "APPROVAL"
        assert env.calls() == []


@needs_db
async def test_fingerprint_limit_from_settings_and_reset_by_a_different_call(env: Env, home: Path):
    (home / "settings.toml").write_text("[agent]\nfingerprint_limit = 2\n", encoding="utf-8")
    a, b = call("findNotes", {"q": "a"}), call("findNotes", {"q": "b"})
    result = await send_once(env, "找", a, a, b, a, a, a, say("never"))
    assert codes(result) == [None, None, None, None, None, "agent_runtime.40026"]
    assert len(env.calls("findNotes")) == 5 and result.status == "FAILED"
    assert len(result.evidence) == 5  # the tripped call registered no evidence


@needs_db
async def test_identical_business_failures_do_not_count_toward_the_fingerprint(env: Env):
    same = call("lookupOwner", {"mode": "business"})
    result = await send_once(env, "找", same, same, same, same, same, say("都失败了"))
    assert codes(result) == ["agent_runtime.40004"] * 5 and len(env.calls("lookupOwner")) == 5
    assert result.status == "RUNNING"


@needs_db
async def test_the_core_failure_budget_does_not_apply_in_the_contract_runtime(env: Env):
    turns = [call("findNotes", {"q": f"q{n}", "mode": "io"}) for n in range(5)]
    turns += [call("findNotes", {"q": "same", "mode": "boom"})] * 3
    result = await send_once(env, "找", *turns, say("都失败了"))
    assert codes(result) == ["agent_runtime.40018"] * 5 + ["agent_runtime.40029"] * 3
    assert len(env.calls("findNotes")) == 8


@needs_db
async def test_platform_fields_map_from_runtime_context_and_ids_stay_strings(env: Env):
    identity = {
        "user_id": 42,
        "actor_id": 7001,
        "actor_name": "Ada",
        "org_id": 9,
        "org_name": "Acme",
        "org_type": "COMPANY",
        "actor_department_path": "/acme/rd",
        "passport_id": "pp-1",
    }
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(call("whoAmI", {}), say("ok")))
        result = await agent.send(env.sid("pf"), "我是谁", identity=identity)
    assert result.observations[0].ok
    assert env.calls("whoAmI")[0]["input"] == {
        "userId": "42",
        "memberId": "7001",
        "name": "Ada",
        "organId": "9",
        "organName": "Acme",
        "organType": "COMPANY",
        "deptPath": "/acme/rd",
    }
    assert set(result.observations[0].sources.values()) == {"PLATFORM"}


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


@pytest.mark.parametrize(("value", "message", "matched"), USER_TEXT)
@needs_db
async def test_user_provenance_text_match_through_the_runner(env: Env, value: str, message: str, matched: bool):
    result = await send_once(env, message, call("sendMemo", {"text": value}), say("stop"))
    assert codes(result) == ["agent_runtime.42221" if matched else "agent_runtime.40024"]
    if matched:
        assert result.observations[0].sources["text"] == "USER"


@needs_db
async def test_a_number_value_said_by_the_user_is_user(env: Env):
    result = await send_once(env, "发2024", call("sendMemo", {"text": 2024}), say("stop"))
    assert codes(result) == ["agent_runtime.42221"]


@needs_db
async def test_before_phase_rejections_register_no_evidence(env: Env):
    result = await send_once(
        env,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),  # APPROVAL_REQUIRED
        call("saveNote", {"title": "编造的"}),  # PARAM_PROVENANCE_ASK_USER
        call("saveNote", {"mode": "x"}),  # ARG_REJECTED (schema required)
        call("ghost", {}),  # CATALOG_DENIED
        say("stop"),
    )
    assert codes(result) == [
        "agent_runtime.42221",
        "agent_runtime.40024",
        "agent_runtime.40032",
        "agent_runtime.40027",
    ]
    assert result.evidence == [] and env.calls() == [] and result.events == []
    async with SkillYard() as yard:
        assert await AgentStore(yard.database).load_evidence(str(result.task_id)) == []


@needs_db
async def test_every_refusal_has_a_full_code_and_a_next_step(env: Env):
    result = await send_once(
        env,
        "保存季度总结",
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "x", "toolName": "sendMemo"}),
        call("builtin_output_set", {"key": "userId", "value": 1, "sourceType": "USER", "sourceRef": "u"}),
        call("builtin_node_finish", {"output": "x"}),
        call("findNotes", '{"q":'),
        say("stop"),
    )
    assert all(not o.ok for o in result.observations)
    for o in result.observations:
        assert o.code and o.code.startswith("agent_runtime.") and len(o.code) == len("agent_runtime.40000"), o
        assert o.next_step, o


# --- the approval text ------------------------------------------------------------------------------------------


@needs_db
async def test_approval_question_is_summary_plus_masked_label_value_lines(env: Env):
    result = await send_once(
        env,
        "保存季度总结",
        call("saveNote", {"title": "季度总结", "pin": "hunter2"}),
        call("builtin_node_approval", {"summary": "保存一篇笔记", "toolName": "saveNote"}),
    )
    assert result.checkpoint is not None and result.checkpoint["type"] == "APPROVAL"
    question = result.checkpoint["question"]
    assert question.startswith("保存一篇笔记")
    assert "标题：季度总结" in question and "口令：***" in question
    assert "hunter2" not in question and "42" not in question and "所有者" not in question


# --- evidence -------------------------------------------------------------------------------------------------


@needs_db
async def test_evidence_extracts_counts_and_empty(env: Env):
    result = await send_once(
        env,
        "找",
        call("findNotes", {"q": "a"}),
        call("findNotes", {"q": "b", "mode": "none_found"}),
        call("findNotes", {"q": "c", "mode": "blank"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        records = await AgentStore(yard.database).load_evidence(str(result.task_id))
    by_q = {r.args["q"]: r for r in records}
    assert by_q["a"].counts == {"notes": 2} and by_q["a"].empty is False
    assert by_q["a"].extracts["notes"][0] == {"id": "n-1", "title": "季度总结"}
    assert by_q["b"].counts == {"notes": 0} and by_q["b"].empty is True and by_q["b"].status == "SUCCESS"
    assert by_q["c"].counts == {"notes": 0} and by_q["c"].empty is True  # an object whose fields are all empty


@needs_db
async def test_write_entities_merge_arguments_under_the_result_and_scalars_are_named(env: Env):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("stampNote", {"title": "周报"}),
        call("builtin_node_finish", {"output": "ok"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("ent"), "保存季度总结", identity=IDENTITY)
        done = await agent.resume(env.sid("ent"), "CONFIRM")
        assert done.status == "DONE", done.as_dict()
        session = await AgentStore(yard.database).load_session(env.sid("ent"))
    assert session is not None
    entities = {(e.type, e.id): e for e in session.entities}
    note = entities[("note", "n-季度总结")]
    assert note.name == "季度总结" and note.attrs.get("owner") == "42"  # the argument is the base
    stamp = entities[("stamp", "s-周报")]
    assert stamp.name == "周报" and stamp.attrs.get("owner") == "42"


@needs_db
async def test_prior_entity_binds_in_a_later_task_after_a_restart(env: Env):
    script = env.script(
        call("saveNote", {"title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        call("builtin_node_finish", {"output": "已保存"}),
        call("openNote", {"noteId": "made-up"}),
        call("tagNote", {"noteId": "n-季度总结", "tag": "x"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("prior"), "保存季度总结", identity=IDENTITY)
        assert (await agent.resume(env.sid("prior"), "CONFIRM")).status == "DONE"
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        later = await agent.send(env.sid("prior"), "打开刚才那篇", identity=IDENTITY)
    opened, tagged = later.observations
    assert opened.ok and opened.sources["noteId"] == "PRIOR_TASK"
    assert env.calls("openNote")[0]["input"]["noteId"] == "n-季度总结"
    # tag has sources [SESSION] and no session value "x": rejected; noteId itself matched PRIOR_TASK
    assert tagged.code == "agent_runtime.40025" and tagged.sources.get("noteId") == "PRIOR_TASK"


@needs_db
async def test_session_source_matches_a_session_value_by_argument_path(env: Env):
    contract = json.loads(json.dumps(CONTRACT))
    contract["outputs"]["tag"] = {"sources": ["USER"], "share": "SESSION"}
    contract["tools"]["tagNote"]["args"]["noteId"] = FREE
    env.contract(contract)
    script = env.script(
        call("builtin_output_set", {"key": "tag", "value": "紧急", "sourceType": "USER", "sourceRef": "msg"}),
        call("builtin_node_finish", {"output": "记住了"}),
        call("tagNote", {"tag": "紧急"}),
        call("tagNote", {"tag": "普通"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        assert (await agent.send(env.sid("sess"), "以后标签用紧急", identity=IDENTITY)).status == "DONE"
        later = await agent.send(env.sid("sess"), "打标签", identity=IDENTITY)
    ok, bad = later.observations
    assert ok.ok and ok.sources["tag"] == "SESSION"
    assert bad.code == "agent_runtime.40025"


# --- completion -----------------------------------------------------------------------------------------------


@needs_db
async def test_contract_target_needs_its_write_and_a_business_failure_does_not_complete_it(env: Env):
    env.contract(modified(target="sendMemo", outputs={}))
    script = env.script(
        call("findNotes", {"q": "x"}),
        call("builtin_node_finish", {"output": "done"}),
        call("sendMemo", {"text": "开会", "mode": "business"}),
        call("builtin_node_approval", {"summary": "发", "toolName": "sendMemo"}),
        call("builtin_node_finish", {"output": "done"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        first = await agent.send(env.sid("tg"), "发一条备忘：开会", identity=IDENTITY)
        assert codes(first) == [None, "agent_runtime.42254", "agent_runtime.42221", None]
        after = await agent.resume(env.sid("tg"), "CONFIRM")
    assert codes(after) == ["agent_runtime.40004", "agent_runtime.42254"] and after.status == "RUNNING"


@needs_db
async def test_a_target_outside_tool_names_counts_as_unset(env: Env):
    env.contract(modified(target="sendMemo", outputs={}))
    md = env.dir / "skills" / "keeper" / "SKILL.md"
    md.write_text(md.read_text(encoding="utf-8").replace("sendMemo, ", ""), encoding="utf-8")
    result = await send_once(
        env, "找", call("findNotes", {"q": "x", "mode": "none_found"}), call("builtin_node_finish", {"output": "没有"})
    )
    assert codes(result) == [None, None] and result.status == "DONE"  # an empty result counts as completed


@needs_db
async def test_finish_open_evidence_comes_before_output_checks(env: Env):
    env.contract(modified(outputs={"noteId": {"sources": ["EVIDENCE"], "required": True}}))
    result = await send_once(
        env,
        "写",
        call("riskyWrite", {"mode": "timeout"}),
        call("builtin_node_finish", {"output": "x"}),
        call("builtin_node_finish", {"output": ""}),
        say("stop"),
    )
    assert codes(result) == ["agent_runtime.40016", "agent_runtime.42251", "agent_runtime.42250"]


# --- offered tools and the prompt (§1.3, §12) ------------------------------------------------------------------


@needs_db
async def test_offered_tools_follow_the_spec_conditions(env: Env):
    model = Recorder(
        env.script(
            call("findNotes", {"q": "x"}),
            call("saveNote", {"title": "季度总结"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        await agent.send(env.sid("offer"), "保存季度总结", identity=IDENTITY)
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
async def test_output_set_not_offered_when_outputs_are_unused_answers_catalog_denied(env: Env):
    env.contract(modified(outputs={"noteId": {"sources": ["EVIDENCE"], "required": False}}))
    model = Recorder(
        env.script(
            call("builtin_output_set", {"key": "noteId", "value": "n-1", "sourceType": "USER", "sourceRef": "u"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        result = await agent.send(env.sid("unused"), "x", identity=IDENTITY)
    assert "builtin_output_set" not in model.seen[0][1]
    assert codes(result) == ["agent_runtime.40027"]


# --- progress events ------------------------------------------------------------------------------------------


@needs_db
async def test_the_verify_call_on_reopen_emits_its_label(env: Env):
    script = env.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        say("稍等"),
        say("好了"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("ev"), "保存季度总结", identity=IDENTITY)
        after = await agent.resume(env.sid("ev"), "CONFIRM")
        assert after.events == [{"type": "tool", "tool": "saveNote", "label": "正在保存笔记"}]
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        reopened = await agent.send(env.sid("ev"), "好了吗", identity=IDENTITY)
    assert [e["status"] for e in reopened.evidence if e["tool"] == "saveNote"] == ["SUCCESS"]
    assert {"type": "tool", "tool": "findNotes", "label": "正在查找笔记"} in reopened.events, reopened.events


# --- §14.3 on every reopening ---------------------------------------------------------------------------------


@needs_db
async def test_an_older_uncertain_write_is_verified_when_a_confirm_reopens_the_node(env: Env):
    """§14.3: an uncertain write is settled when its node reopens; a CONFIRM of another write after a restart is a
    reopening too (docs: only a write that has *just* become uncertain is left for the next reopening)."""
    script = env.script(
        call("saveNote", {"title": "季度总结", "mode": "timeout"}),
        call("builtin_node_approval", {"summary": "保存", "toolName": "saveNote"}),
        # after CONFIRM: saveNote times out (UNKNOWN); the model goes on with the memo
        call("sendMemo", {"text": "开会"}),
        call("builtin_node_approval", {"summary": "发备忘", "toolName": "sendMemo"}),
        # after the second CONFIRM (new process): the memo ran; the old write should have been checked first
        call("builtin_node_finish", {"output": "都好了"}),
        say("还有没确认的写操作"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=script)
        await agent.send(env.sid("older"), "保存季度总结，再发备忘：开会", identity=IDENTITY)
        second = await agent.resume(env.sid("older"), "CONFIRM")
        assert second.checkpoint is not None and second.checkpoint["tool"] == "sendMemo"
        assert [e["status"] for e in second.evidence] == ["UNKNOWN"]
    async with SkillYard() as yard:  # a new process confirms the memo
        agent = await yard.agent(env.dir, model=script)
        done = await agent.resume(env.sid("older"), "CONFIRM")
    assert len(env.calls("findNotes")) == 1, done.as_dict()  # the verify call of the older uncertain write
    assert {e["tool"]: e["status"] for e in done.evidence if e["tool"] != "findNotes"} == {
        "saveNote": "SUCCESS",
        "sendMemo": "SUCCESS",
    }
    assert done.status == "DONE"


# --- inputs (§7) ------------------------------------------------------------------------------------------------


@needs_db
async def test_inputs_bind_at_node_start_and_feed_from_inputs(env: Env):
    contract = json.loads(json.dumps(CONTRACT))
    contract["inputs"] = {
        "topic": {"from": "session.category"},
        "lastNote": {"from": "prior.note"},
        "absent": {"from": "session.nothing"},
    }
    contract["tools"]["findNotes"]["args"]["q"] = {"from": "inputs.topic", "sources": ["MODEL"]}
    env.contract(contract)
    model = Recorder(
        env.script(
            call("builtin_output_set", {"key": "category", "value": "工作", "sourceType": "USER", "sourceRef": "m"}),
            call("stampNote", {"title": "x"}),
            call("builtin_node_finish", {"output": "记住了"}),
            call("findNotes", {"q": "模型的"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=model)
        assert (await agent.send(env.sid("inp"), "分类用工作", identity=IDENTITY)).status == "DONE"
        later = await agent.send(env.sid("inp"), "找笔记", identity=IDENTITY)
    assert later.observations[0].ok and later.observations[0].sources["q"] == "NODE_OUTPUT"
    assert env.calls("findNotes")[0]["input"]["q"] == "工作"
    system = model.seen[-2][0][0]["content"]
    assert "topic" in system and "工作" in system and "absent" in system and "MISSING" in system


# --- an HTTP business tool (127.0.0.1 only) ------------------------------------------------------------------------


@needs_db
async def test_an_http_write_that_times_out_after_the_request_is_unknown(env: Env, monkeypatch: pytest.MonkeyPatch):
    from http.server import BaseHTTPRequestHandler

    from support.local_http import serve

    hits: list[str] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.path)
            import time

            time.sleep(1.5)  # the write is committed, the answer comes too late
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"code": 200}')

        def log_message(self, *args: Any) -> None:
            pass

    with serve(Slow) as base:
        folder = env.dir / "skills" / "remoteSave"
        folder.mkdir()
        (folder / "SKILL.md").write_text(
            "---\nname: remoteSave\ndescription: d\nexec: {config: api.toml}\n---\nBody.\n", "utf-8"
        )
        (folder / "api.toml").write_text(f'[request]\nmethod = "POST"\nurl = "{base}/save"\ntimeout = 0.4\n', "utf-8")
        (folder / "schema.json").write_text(json.dumps({"type": "object", "properties": {"q": {}}}), "utf-8")
        contract = json.loads(json.dumps(CONTRACT))
        contract["tools"]["remoteSave"] = {
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE},
            "success": OK200,
        }
        env.contract(contract)
        md = env.dir / "skills" / "keeper" / "SKILL.md"
        md.write_text(md.read_text(encoding="utf-8").replace("plainTool]", "plainTool, remoteSave]"), "utf-8")
        monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "riskyWrite,stampNote,remoteSave")
        result = await send_once(
            env, "远程保存", call("remoteSave", {"q": "a"}), call("remoteSave", {"q": "a"}), say("stop")
        )
    assert codes(result) == ["agent_runtime.40016", "agent_runtime.40030"]
    assert [e["status"] for e in result.evidence] == ["UNKNOWN"] and hits == ["/save"]


# --- CLI --------------------------------------------------------------------------------------------------------


@needs_db
def test_cli_json_turn_at_a_follow_up_and_reply(env: Env):
    model = env.script(
        call("findNotes", {"q": "总结"}),
        call("builtin_node_follow_up", {"question": "存哪一篇？", "expectedFields": ["title"]}),
        call("builtin_node_fail", {"reason": "不存了"}),
    )
    runner = CliRunner()
    session = env.sid("cli")
    first = runner.invoke(
        cli,
        [
            "agent",
            "run",
            str(env.dir),
            "--session",
            session,
            "--message",
            "存总结",
            "--model",
            model,
            "--context",
            json.dumps(IDENTITY),
            "--json",
        ],
    )
    assert first.exit_code == 0, first.output
    turn = json.loads(first.output)
    assert turn["status"] == "SUSPENDED"
    assert turn["checkpoint"]["type"] == "FOLLOW_UP" and turn["checkpoint"]["expected_fields"] == ["title"]
    assert turn["checkpoint"]["question"] == "存哪一篇？"
    assert turn["evidence"][0]["status"] == "SUCCESS" and turn["evidence"][0]["id"]
    assert turn["observations"][0]["evidence_id"] == turn["evidence"][0]["id"]
    second = runner.invoke(
        cli, ["agent", "resume", "--session", session, "--action", "REPLY", "--text", "周报", "--json"]
    )
    assert second.exit_code == 1  # the node failed
    assert json.loads(second.output)["status"] == "FAILED"


# --- the catalog (§1.3) ---------------------------------------------------------------------------------------


@needs_db
async def test_a_configured_tool_outside_tool_names_is_catalog_denied(env: Env):
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"]["unboundTool"] = {"args": {"q": FREE}}
    env.contract(contract)
    result = await send_once(env, "x", call("unboundTool", {"q": "a"}), say("stop"))
    assert codes(result) == ["agent_runtime.40027"] and result.evidence == []


@needs_db
async def test_an_unconfigured_business_tool_runs_with_the_default_rules(env: Env):
    result = await send_once(env, "x", call("plainTool", {"q": "anything", "extra": 1}), say("stop"))
    assert codes(result) == [None] and result.observations[0].ok
    assert [(e["status"], e["business_ok"]) for e in result.evidence] == [("SUCCESS", True)]
    assert env.calls("plainTool")[0]["key"] is None  # read-only: no idempotency key, no approval


@needs_db
async def test_business_tools_resolve_through_the_usual_roots_and_the_agent_folder_wins(
    tmp_path: Path, env: Env, monkeypatch: pytest.MonkeyPatch
):
    outside = tmp_path / "outside"
    other_log = tmp_path / "outside.jsonl"
    for name, result in (("findNotes", RESULTS["findNotes"]), ("lookupOwner", RESULTS["lookupOwner"])):
        folder = outside / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: outside {name}\n---\n", "utf-8")
        handler = textwrap.dedent(HANDLER).format(log=str(other_log), name=name, result=result)
        (folder / "handler.py").write_text(handler, "utf-8")
    # lookupOwner exists only outside the agent folder
    import shutil

    shutil.rmtree(env.dir / "skills" / "lookupOwner")
    monkeypatch.setenv("SKILLYARD_SKILLS_PATH", str(outside))
    result = await send_once(env, "找", call("findNotes", {"q": "a"}), call("lookupOwner", {"q": "b"}), say("ok"))
    assert codes(result) == [None, None]
    assert [r["tool"] for r in env.calls()] == ["findNotes"]  # the agent's bundled findNotes
    assert [json.loads(x)["tool"] for x in other_log.read_text("utf-8").splitlines()] == ["lookupOwner"]
