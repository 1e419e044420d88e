"""MCP servers' tools as skills: a local SDK server (stdio and streamable HTTP on 127.0.0.1) configured in
settings.toml, its tools in the catalog as ``crm__<tool>``, called through ``yard.run`` with both result views,
every failure case as an envelope, the allow list, aliases, the cache and first use."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from skillyard import SkillYard
from skillyard.mcp.cache import read_state
from skillyard.mcp.settings import load_servers
from support.agent.probes import skillyard_cli

SERVER = Path(__file__).parents[1] / "support" / "mcp_crm_server.py"


def settings(home: Path, body: str) -> None:
    (home / "settings.toml").write_text(body, encoding="utf-8")


def stdio_server(home: Path, extra: str = "", env: str = "", timeout: float = 3) -> None:
    log = home / "orders.jsonl"
    settings(
        home,
        f"""[mcp.servers.crm]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}, "stdio"]
env = {{ CRM_LOG = {json.dumps(str(log))}{env} }}
timeout = {timeout}
{extra}""",
    )


@pytest.fixture
def crm(home: Path) -> Path:
    stdio_server(home)
    return home


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(100):  # bounded: 10 s
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=0.2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


async def test_tools_are_skills_after_first_use_with_both_views(crm: Path):
    async with SkillYard() as yard:
        found = await yard.run("crm__search", {"q": "Acme"})
        assert found["ok"] is True, found
        assert found["structured"] == {"code": 200, "customers": [{"id": "c-7", "name": "Acme"}]}
        assert found["data"] == found["structured"] and json.loads(found["text"]) == found["data"]
        skill = yard.skill("crm__search")
        assert skill.exec.type == "MCP" and skill.source == "mcp:crm" and skill.exec.tool == "search"
        assert skill.schema.exposed["required"] == ["q"]
        plain = await yard.run("crm__plain", {"q": "Ada"})
        assert plain["text"] == "hello Ada" and "data" not in plain and "structured" not in plain
    state = read_state(crm, "crm")
    assert state is not None and "search" in [t["name"] for t in state["tools"]]


async def test_the_pool_reuses_one_stdio_server_and_restarts_it_when_it_dies(crm: Path):
    async with SkillYard() as yard:
        await yard.run("crm__search", {"q": "a"})
        connection = yard.mcp.pool.connection("crm")
        first = connection._task
        await yard.run("crm__search", {"q": "b"})
        assert connection._task is first  # one server process for both calls
        await connection.close()  # the server goes away (as if it died)
        again = await yard.run("crm__search", {"q": "c"})
        assert again["ok"] is True and connection._task is not first


async def test_a_server_that_dies_mid_call_is_an_io_failure_and_the_next_call_restarts_it(crm: Path):
    async with SkillYard() as yard:
        assert (await yard.run("crm__search", {"q": "before"}))["ok"] is True
        died = await yard.run("crm__die", {})
        assert died["ok"] is False and died["mcp_error"] == "io" and died["error_type"] == "transient", died
        for q in ("after", "again"):  # a dead server is started again, not answered "Connection closed" for ever
            after = await yard.run("crm__search", {"q": q})
            assert after["ok"] is True, after


async def test_odd_tool_names_never_reach_a_path_or_a_listing_raw(home: Path, db_env: str, tmp_path: Path):
    stdio_server(home, env=', CRM_ODD_NAMES = "1"', timeout=30)
    workspace = tmp_path / "a" / "b" / "c" / "ws"
    workspace.mkdir(parents=True)
    async with SkillYard() as yard:
        report = await yard.mcp.refresh("crm")
        assert {"a/b", "../../../../escape"} <= set(report.tools)
        assert {"line\\nbreak", "nul\\x00name", "n" * 128} <= set(report.left_out), report.left_out
        for name in ("crm__a/b", "crm__../../../../escape"):
            envelope = await yard.run(
                name, {}, {"session_id": "odd-" + uuid.uuid4().hex[:6], "workspace_dir": str(workspace)}
            )
            assert envelope["ok"] is True, envelope
            for item in envelope["content"]:
                written = (workspace / item["local_path"]).resolve()
                assert written.is_relative_to((workspace / "mcp").resolve()) and written.is_file(), item
    written = [p for p in (tmp_path / "a").rglob("*") if p.is_file()]  # ../../../../ of ws/mcp is a/
    assert written and all(p.resolve().is_relative_to((workspace / "mcp").resolve()) for p in written), written
    listed = skillyard_cli("list")
    shown = listed.stdout + listed.stderr
    assert listed.returncode == 0 and "crm__a/b" in shown, shown
    assert "\x00" not in shown and "line\nbreak" not in shown


async def test_a_server_printing_garbage_costs_one_line_not_a_traceback_each(
    home: Path, caplog: pytest.LogCaptureFixture
):
    stdio_server(home, env=', CRM_GARBAGE = "1"')
    with caplog.at_level(logging.WARNING, logger="mcp.client.stdio"):
        async with SkillYard() as yard:
            assert (await yard.run("crm__search", {"q": "x"}))["ok"] is True
    reports = [r for r in caplog.records if r.name == "mcp.client.stdio"]
    assert 1 <= len(reports) <= 2 and all(r.exc_info is None for r in reports), [r.getMessage() for r in reports]
    assert "more dropped" in reports[0].getMessage()


async def test_a_tool_text_of_json_nested_past_what_is_read_stays_text(crm: Path):
    """Python's json raises RecursionError past its depth: the text is kept, without ``data``, never a crash."""
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    async with SkillYard() as yard:
        answer = await yard.run("crm__echo", {"text": deep})
    assert answer["ok"] is True, str(answer)[:500]
    fields = answer["fields"] if answer.get("offloaded") else list(answer)  # a big result is offloaded to a file
    assert "text" in fields and "data" not in fields, fields


async def test_every_failure_is_an_envelope_with_its_case(crm: Path):
    async with SkillYard() as yard:
        tool_error = await yard.run("crm__fail", {"reason": "no stock"})
        assert (
            tool_error["ok"] is False and tool_error["mcp_error"] == "tool_error" and "no stock" in tool_error["error"]
        )
        assert tool_error["error_type"] == "recoverable"
        invalid = await yard.run("crm__rpc", {"code": -32602})
        assert invalid["mcp_error"] == "invalid_params" and invalid["invalid_input"] is True
        rpc = await yard.run("crm__rpc", {"code": -32603})
        assert rpc["mcp_error"] == "rpc_error" and "-32603" in rpc["error"]
        slow = await yard.run("crm__slow", {"seconds": 30})
        assert slow["ok"] is False and slow.get("timed_out") is True and slow["error_type"] == "transient"
        assert slow["mcp_error"] == "timeout", slow  # the call's own timeout answers before the run's wall clock
        recovered = await yard.run("crm__search", {"q": "after the timeout"})
        assert recovered["ok"] is True


async def test_images_become_artifacts_and_a_10_mb_result_is_offloaded(home: Path, db_env: str):
    stdio_server(home, timeout=60)
    async with SkillYard() as yard:
        picture = await yard.run("crm__picture", {}, {"session_id": "mcp-pic"})
        assert picture["ok"] is True and picture["text"] == "a pixel", picture
        assert picture["images"][0]["ref"].startswith("img_")
        big = await yard.run("crm__big", {}, {"session_id": "mcp-big"})
        assert big["ok"] is True and len(json.dumps(big)) < 1024 * 1024, list(big)


async def test_only_listed_env_vars_reach_a_stdio_server(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CRM_SECRET_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("CRM_UNLISTED", "must-not-leak")
    stdio_server(home, env=', CRM_TOKEN = "${CRM_SECRET_TOKEN}"')
    async with SkillYard() as yard:
        seen = await yard.run("crm__whoami", {})
    assert json.loads(seen["text"]) == {"token": "s3cr3t-value", "home": None}


async def test_the_allow_list_is_always_applied_and_missing_tools_are_reported(home: Path):
    stdio_server(home, extra='allow = ["search", "ghost"]\n')
    async with SkillYard() as yard:
        assert (await yard.run("crm__search", {"q": "x"}))["ok"] is True
        assert yard.resolve("crm__create_order") is None  # listed by the server, not allowed
        status = yard.mcp.status()[0]
    assert status["tools"] == ["search"] and status["missing"] == ["ghost"]
    assert status["left_out"]["create_order"] == "not in the server's allow list"
    folder = home / "hand"
    (folder / "order").mkdir(parents=True)
    (folder / "order" / "SKILL.md").write_text(
        "---\nname: order\ndescription: d\nexec: {type: MCP, server: crm, tool: create_order}\n---\n"
    )
    async with SkillYard(skills_dirs=[folder]) as yard:
        refused = await yard.run("order", {"customer_id": "c", "item": "i"})
    assert refused["ok"] is False and "allow list" in refused["error"] and refused["error_type"] == "config"
    assert not (home / "orders.jsonl").exists()


async def test_an_alias_keeps_a_renamed_tool(home: Path):
    stdio_server(home, extra='[mcp.servers.crm.aliases]\nfind = "search"\n')
    async with SkillYard() as yard:
        await yard.mcp.refresh("crm")
        old = await yard.run("crm__find", {"q": "old name"})
    assert old["ok"] is True and old["structured"]["customers"][0]["name"] == "old name"


async def test_streamable_http_with_headers(home: Path, http_server: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DOCS_TOKEN", "t0ken")
    settings(
        home,
        f'[mcp.servers.docs]\nurl = "{http_server}"\nheaders = {{ Authorization = "Bearer ${{DOCS_TOKEN}}" }}\n',
    )
    async with SkillYard() as yard:
        found = await yard.run("docs__search", {"q": "over http"})
    assert found["ok"] is True and found["structured"]["customers"][0]["name"] == "over http"


async def test_unreachable_and_crashing_servers_are_clear_envelopes(home: Path):
    settings(home, '[mcp.servers.docs]\nurl = "http://127.0.0.1:9/mcp"\n')
    async with SkillYard() as yard:
        never = await yard.run("docs__search", {})  # never fetched and unreachable: unreachable, not unknown
    assert never["ok"] is False and never["mcp_error"] == "unreachable" and never["error_type"] == "transient"
    assert "'docs'" in never["error"] and "never fetched" in never["error"], never
    stdio_server(home, env=', CRM_CRASH = "1"')
    async with SkillYard() as yard:
        crashed = await yard.run("crm__search", {"q": "x"})
    assert crashed["mcp_error"] == "unreachable" and "could not be started" in crashed["error"], crashed
    # a cached tool whose server is gone now: an envelope, TOOL_UNREACHABLE for the agent
    stdio_server(home)
    async with SkillYard() as yard:
        await yard.mcp.refresh("crm")
    stdio_server(home, env=', CRM_CRASH = "1"')
    async with SkillYard() as yard:
        gone = await yard.run("crm__search", {"q": "x"})
    assert gone["ok"] is False and gone["mcp_error"] == "unreachable" and gone["error_type"] == "transient"


async def test_a_tool_with_an_invalid_schema_is_left_out_with_the_reason(home: Path):
    stdio_server(home, env=', CRM_BROKEN_SCHEMA = "1"')
    async with SkillYard() as yard:
        report = await yard.mcp.refresh("crm")
        assert yard.resolve("crm__broken") is None and yard.resolve("crm__search") is not None
    assert "not a valid JSON Schema" in report.left_out["broken"]
    assert "'#/nowhere' at #/properties/q names nothing" in report.left_out["dangling"], report.left_out
    assert "nested more than 64 levels" in report.left_out["deep"], report.left_out


def test_settings_problems_are_named(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    settings(
        home,
        """[mcp.servers.neither]
allow = ["x"]
[mcp.servers.both]
command = "python"
url = "http://127.0.0.1:1/mcp"
[mcp.servers.unknownvar]
url = "http://127.0.0.1:1/mcp"
headers = { Authorization = "Bearer ${NOPE_TOKEN}" }
[mcp.servers.odd]
command = "python"
colour = "blue"
[mcp.servers.two__parts]
command = "python"
[mcp.servers.fine]
command = "python"
""",
    )
    servers, problems = load_servers(home)
    assert list(servers) == ["fine"]
    text = "\n".join(problems)
    assert "[mcp.servers.neither] needs exactly one of command" in text
    assert "[mcp.servers.both] needs exactly one of command" in text
    assert "${NOPE_TOKEN}, which is not set" in text and "colour" in text
    assert "[mcp.servers.two__parts]: a server name" in text and "no '__'" in text


def test_doctor_and_refresh_report_servers(crm: Path):
    before = skillyard_cli("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(before.stdout)["checks"]}
    assert checks["mcp server crm"]["status"] == "warn" and "mcp refresh crm" in checks["mcp server crm"]["fix"]
    refreshed = skillyard_cli("mcp", "refresh", "--json")
    assert refreshed.returncode == 0, refreshed
    assert "search" in json.loads(refreshed.stdout)[0]["tools"]
    listed = skillyard_cli("list", "--json")
    names = {item["name"]: item for item in json.loads(listed.stdout)}
    assert names["crm__search"]["source"] == "mcp:crm" and names["crm__search"]["exec_type"] == "MCP"
    text = skillyard_cli("list")
    assert "mcp server crm:" in text.stderr and "fetched" in text.stderr
