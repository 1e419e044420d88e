"""MCP tools as an agent's business tools: the §14.4 / §17 mapping of every failure case for reads and writes, and
the result views (TEXT reads the JSON of the text, ``resultView: STRUCTURED`` the structuredContent), end to end
against a local SDK server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.chain.invoke import Failure, failure_kind
from skillyard.agent.state import EvidenceStatus
from skillyard.agent.store import AgentStore
from skillyard.mcp import results
from support.agent.probes import call, finish, needs_db, write_files

SERVER = Path(__file__).parents[2] / "support" / "mcp_crm_server.py"


@pytest.mark.parametrize(
    ("envelope", "code", "read", "write"),
    [
        ({"ok": False, "mcp_error": "tool_error"}, "agent_runtime.40003", "FAILED", "FAILED"),
        (results.rpc_failure("t", -32602, "bad"), "agent_runtime.40014", "FAILED", "FAILED"),
        (results.rpc_failure("t", -32603, "oops"), "agent_runtime.40015", "FAILED", "UNKNOWN"),
        (results.timed_out("t", 3), "agent_runtime.40016", "FAILED", "UNKNOWN"),
        (results.broken("t", "EndOfStream"), "agent_runtime.40018", "FAILED", "UNKNOWN"),
        (results.unreachable("t", "no server"), "agent_runtime.40017", "FAILED", "FAILED"),
        (results.unknown_failure("t", "ValueError"), "agent_runtime.40029", "FAILED", "UNKNOWN"),
    ],
)
def test_every_mcp_failure_maps_to_its_code_and_status(envelope, code, read, write):
    kind = failure_kind(envelope)
    assert isinstance(kind, Failure) and kind.code.value == code
    assert kind.status(write=False) is EvidenceStatus(read)
    assert kind.status(write=True) is EvidenceStatus(write)


def contract(view: str | None, expected: str) -> dict:
    tool = {
        "args": {},
        "success": {"path": "view", "op": "EQ", "value": expected},
        "extracts": [{"key": "items", "path": "items", "fields": ["id"]}],
    }
    if view:
        tool["resultView"] = view
    return {
        "tools": {
            "crm__views": tool,
            "crm__fail": {"args": {"reason": {"sources": ["MODEL"]}}},
            "crm__create_order": {
                "sideEffect": "WRITE",
                "confirm": False,
                "args": {"customer_id": {"sources": ["MODEL"]}, "item": {"sources": ["MODEL"]}},
                "success": {"path": "code", "op": "EQ", "value": 200},
            },
        }
    }


@pytest.fixture
def mcp_agent(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "crm__create_order")
    (home / "settings.toml").write_text(
        f'[mcp.servers.crm]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}, "stdio"]\n'
        "timeout = 5\n",
        encoding="utf-8",
    )
    agent = tmp_path / "desk"
    tools = "tools: [crm__views, crm__fail, crm__create_order]"
    files = {agent / "AGENT.md": "---\nagent_code: desk\nskills: [desk.text, desk.structured]\n---\n# Mission\nx\n"}
    for key, view, expected in (("text", None, "text"), ("structured", "STRUCTURED", "structured")):
        folder = agent / "skills" / key
        files[folder / "SKILL.md"] = f"---\nname: {key}\nskill_key: desk.{key}\ndescription: d\n{tools}\n---\nm\n"
        files[folder / "contract.json"] = json.dumps(contract(view, expected))
    write_files(files)
    return agent


def script(tmp_path: Path, *turns: dict) -> str:
    import yaml

    path = tmp_path / f"turns-{len(list(tmp_path.glob('turns-*')))}.yaml"
    path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
    return f"script:{path}"


@needs_db
@pytest.mark.parametrize(("key", "items"), [("desk.text", ["t-1"]), ("desk.structured", ["s-1", "s-2"])])
async def test_the_text_view_is_the_default_and_structured_is_chosen_per_tool(mcp_agent, tmp_path, key, items):
    turns = script(tmp_path, call("crm__views", {}), finish("seen"))
    async with SkillYard() as yard:
        agent = await yard.agent(mcp_agent, model=turns)  # first use fetches the server's tools
        turn = await agent.send(f"views-{key}-{tmp_path.name}", "看看", skill_key=key)
        assert turn.status == "DONE", turn.as_dict()
        evidence = await AgentStore(yard.database).load_evidence(str(turn.task_id))
    assert evidence[0].extracts["items"] == [{"id": i} for i in items]
    assert {"text", "data", "structured"} <= set(evidence[0].response)  # the evidence keeps both views


@needs_db
async def test_a_tool_error_of_a_read_and_of_a_write_fail_with_mcp_tool_error(mcp_agent, tmp_path):
    turns = script(
        tmp_path,
        call("crm__fail", {"reason": "no stock"}),
        call("crm__create_order", {"customer_id": "c", "item": "i"}),
        call("builtin_node_fail", {"reason": "stop"}),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(mcp_agent, model=turns)
        turn = await agent.send(f"err-{tmp_path.name}", "试试", skill_key="desk.text")
    fail, order = turn.observations[:2]
    assert fail.code == "agent_runtime.40003" and "no stock" in str(fail.content)
    assert order.ok is True  # a real write against the server
    assert [e["status"] for e in turn.evidence] == ["FAILED", "SUCCESS"]
