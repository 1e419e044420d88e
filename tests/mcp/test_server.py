"""skillyard's MCP server driven by the SDK's own client over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from skillyard.mcp.session import Caller
from skillyard.storage.session_owners import derived_session
from support.mcp_server import SECRET, LegacyClient, Running, serving
from support.skills import write_skill

WAIT_S = 20.0


async def test_a_call_without_a_token_or_with_a_wrong_one_is_refused(served: Running) -> None:
    async with httpx2.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer sy_made-up"}):
            response = await http.post(
                served.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={**headers, "Accept": "application/json, text/event-stream"},
            )
            assert response.status_code == 401
    with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport's error for a 401
        async with served.client("sy_made-up") as client:
            await client.list_tools()


async def test_tools_are_the_exposed_skills_with_schemas_and_annotations(served: Running) -> None:
    token = await served.token("lister")
    async with served.client(token) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"echo", "report", "slow", "later", "vault", "skillyard_run_status"} <= set(tools)
    echo = tools["echo"]
    assert echo.description == "Echo the input back"
    assert echo.annotations is not None and echo.annotations.read_only_hint is True
    assert echo.annotations.title == "echo"
    assert echo.output_schema is not None and echo.output_schema["required"] == ["ok"]
    assert tools["report"].annotations is not None and tools["report"].annotations.read_only_hint is False
    assert "api_token" not in tools["vault"].input_schema["properties"]  # the credential is stripped
    assert "q" in tools["vault"].input_schema["properties"]


async def test_a_call_answers_with_the_envelope_display_and_progress_as_the_token_identity(served: Running) -> None:
    token = await served.token("caller", role="sales", org="acme", actor_emp_no="E7")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with served.client(token) as client:
        result = await client.call_tool(
            "echo", {"text": "hi", "org_id": "evil", "role_id": "root"}, progress_callback=on_progress
        )
    assert not result.is_error
    envelope = result.structured_content
    assert envelope["ok"] is True and envelope["got"]["text"] == "hi"
    assert (envelope["who"], envelope["role"], envelope["emp"]) == ("acme", "sales", "E7")  # never the arguments'
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    assert json.loads(texts[0]) == envelope
    assert "**echoed**" in texts
    assert progress == [(1, 2, "half way")]


async def test_artifacts_are_resource_links_read_only_by_their_session(served: Running) -> None:
    token = await served.token("files")
    other = await served.token("other-files")
    async with served.client(token) as client:
        result = await client.call_tool("report", {})
        links = [b for b in result.content if isinstance(b, types.ResourceLink)]
        assert len(links) == 1 and links[0].uri.startswith("skillyard://sessions/mcp-")
        read = await client.read_resource(links[0].uri)
        assert read.contents[0].text == "report body"  # type: ignore[union-attr]
        listed = {r.uri for r in (await client.list_resources()).resources}
        assert links[0].uri in listed
        assert "skillyard://skills/echo/SKILL.md" in listed
        assert "skillyard://skills/echo/references/guide.md" in listed
        manual = await client.read_resource("skillyard://skills/echo/SKILL.md")
        assert "Echo manual." in manual.contents[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError, match=r"SKILL\.md and its references"):
            await client.read_resource("skillyard://skills/echo/handler.py")
    async with served.client(other) as client:
        with pytest.raises(MCPError, match="only the files of your own session"):
            await client.read_resource(links[0].uri)


async def test_a_cancelled_call_sets_the_runs_abort_signal(served: Running, home: Path) -> None:
    token = await served.token("canceller")
    async with served.client(token) as client:
        with pytest.raises((TimeoutError, MCPError)):
            await client.call_tool("slow", {}, read_timeout_seconds=1.0)
        async with asyncio.timeout(WAIT_S):
            while not list((home / "workspaces").glob("*/aborted")):
                await asyncio.sleep(0.05)


async def test_a_changed_catalog_sends_tools_list_changed(served: Running, mcp_skills: Path) -> None:
    token = await served.token("watcher")
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    # handshake-era connections get list_changed on their notification stream (docs/mcp.md: 2026-07-28 ones do not)
    async with served.client(token, message_handler=on_message, mode="legacy") as client:
        await client.list_tools()
        write_skill(mcp_skills, "fresh", files={"handler.py": "async def execute(input, ctx):\n    return {}\n"})
        async with asyncio.timeout(WAIT_S):
            await changed.wait()
        assert "fresh" in {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}


async def test_a_listener_of_the_2026_protocol_hears_of_a_changed_catalog(served: Running, mcp_skills: Path) -> None:
    token = await served.token("listener")
    async with served.client(token) as client, client.listen(tools_list_changed=True) as subscription:
        write_skill(mcp_skills, "newer", files={"handler.py": "async def execute(input, ctx):\n    return {}\n"})
        async with asyncio.timeout(WAIT_S):
            async for _event in subscription:
                break
        assert "newer" in {t.name for t in (await client.list_tools()).tools}


async def test_an_async_skill_answers_at_once_and_its_status_tool_gives_the_envelope(served: Running) -> None:
    token = await served.token("waiter")
    other = await served.token("nosy")
    async with served.client(token) as client:
        ack = (await client.call_tool("later", {})).structured_content
        assert ack["async"] is True
        run_id = ack["run_id"]
        async with asyncio.timeout(WAIT_S):
            while True:
                status = (await client.call_tool("skillyard_run_status", {"run_id": run_id})).structured_content
                if status.get("status") != "running":
                    break
                await asyncio.sleep(0.05)
        assert status["ok"] is True and status["value"] == 42
    async with served.client(other) as client:
        refused = await client.call_tool("skillyard_run_status", {"run_id": run_id})
        assert refused.is_error


async def test_an_async_runs_status_is_answered_by_another_server_on_the_database(
    served: Running, mcp_skills: Path
) -> None:
    token = await served.token("roamer")
    async with served.client(token) as client:
        run_id = (await client.call_tool("later", {})).structured_content["run_id"]
    async with serving(mcp_skills, None) as other, other.client(token) as client:
        async with asyncio.timeout(WAIT_S):
            while True:
                status = (await client.call_tool("skillyard_run_status", {"run_id": run_id})).structured_content
                if status.get("status") != "running":
                    break
                await asyncio.sleep(0.05)
        assert status["ok"] is True and status["value"] == 42
        for bad in ("", "x" * 65, 7, "no-such-run"):
            assert (await client.call_tool("skillyard_run_status", {"run_id": bad})).is_error


async def test_a_job_recovered_by_another_process_completes_the_run_record(served: Running) -> None:
    """The job's side as a worker runs it after the accepting process died: no overlay, the configs read there."""
    from skillyard.chains import background_runs
    from skillyard.chains.detached import run_background_job

    token = await served.token("recovered")
    async with served.client(token) as client:
        await client.call_tool("echo", {"n": 1}, meta={"io.skillyard/session": "recovered-1"})
        yard = served.server.yard
        await background_runs.started(yard, "r" * 32, "later", "recovered-1")
        await background_runs.started(yard, "f" * 32, "no-such-skill", "recovered-1")
        context = {"session_id": "recovered-1", "channel": "mcp", "org_id": "acme", "role_id": "sales"}
        await run_background_job(yard, "later", {}, context, token="from-a-dead-process", run_id="r" * 32)
        await run_background_job(yard, "no-such-skill", {}, context, token="from-a-dead-process", run_id="f" * 32)
        done = (await client.call_tool("skillyard_run_status", {"run_id": "r" * 32})).structured_content
        assert done["ok"] is True and done["value"] == 42
        failed = await client.call_tool("skillyard_run_status", {"run_id": "f" * 32})
        assert failed.is_error and failed.structured_content["ok"] is False
    assert (await background_runs.read(yard, "f" * 32)).status == "failed"


async def test_nobody_names_the_session_derived_for_another_identity(served: Running) -> None:
    """Anyone can compute a token's default session: claiming it first must not lock the token out."""
    victim_name = "victim-" + uuid.uuid4().hex[:8]
    victim = await served.token(victim_name)
    squatter = await served.token("squatter-" + uuid.uuid4().hex[:8], org="elsewhere")
    for derived in (derived_session("mcp", f"token:{victim_name}"), derived_session("http", f"token:{victim_name}")):
        async with served.client(squatter) as client:
            refused = await client.call_tool("echo", {"n": 1}, meta={"io.skillyard/session": derived})
            assert refused.is_error and "derives for another identity" in refused.content[0].text  # type: ignore[union-attr]
    async with served.client(victim) as client:
        mine = derived_session("mcp", f"token:{victim_name}")
        assert not (await client.call_tool("echo", {"n": 2})).is_error  # its sessionless session is still its own
        assert not (await client.call_tool("echo", {"n": 3}, meta={"io.skillyard/session": mine})).is_error


async def test_a_session_of_another_identity_is_refused(served: Running) -> None:
    owner = await served.token("owner")
    intruder = await served.token("intruder")
    async with served.client(owner) as client:
        await client.call_tool("echo", {"n": 1}, meta={"io.skillyard/session": "shared-1"})
    async with served.client(intruder) as client:
        refused = await client.call_tool("echo", {"n": 2}, meta={"io.skillyard/session": "shared-1"})
        assert refused.is_error and "belongs to another identity" in refused.content[0].text  # type: ignore[union-attr]
    # the MCP session itself: a request naming the owner's Mcp-Session-Id with another token is answered 404
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    async with httpx2.AsyncClient(timeout=30.0) as http:
        opened = await http.post(served.url, json=init, headers={**headers, "Authorization": f"Bearer {owner}"})
        session = opened.headers["mcp-session-id"]
        stolen = await http.post(
            served.url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={
                **headers,
                "Authorization": f"Bearer {intruder}",
                "mcp-session-id": session,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert stolen.status_code == 404


async def test_a_request_nested_past_what_is_read_is_a_json_rpc_error(served: Running) -> None:
    """Deep JSON on the wire (Python's json would raise RecursionError) and deep tool arguments: answered, and the
    server serves on."""
    token = await served.token("deep")
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    deep = b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": ' + b"[" * 5000 + b"]" * 5000 + b"}}"
    async with httpx2.AsyncClient(timeout=30.0) as http:
        answer = await http.post(served.url, content=deep, headers={**headers, "Authorization": f"Bearer {token}"})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700, answer.text  # parse error
    async with served.client(token) as client:
        value: object = 1
        for _ in range(100):
            value = {"a": value}
        refused = await client.call_tool("echo", {"n": value})
        assert refused.is_error and "nested" in refused.content[0].text  # type: ignore[union-attr]
        assert not (await client.call_tool("echo", {"n": 1})).is_error


async def test_secrets_never_show_in_any_output(served: Running, caplog: pytest.LogCaptureFixture) -> None:
    await served.server.yard.configs.set("vault-role", "vault", {"api_token": SECRET})
    token = await served.token("vaulted", role="vault-role")
    async with served.client(token) as client:
        result = await client.call_tool("vault", {"q": "x"})
        listed = await client.list_tools()
    assert result.structured_content["q"] == "x"
    assert result.structured_content["echo"] == "***"  # the token's role's config filled it, masked in the result
    seen = result.model_dump_json() + listed.model_dump_json() + caplog.text
    assert SECRET not in seen
    assert token not in caplog.text


async def test_an_unknown_tool_is_an_error_naming_it(served: Running) -> None:
    token = await served.token("typo")
    async with served.client(token) as client:
        with pytest.raises(MCPError, match="unknown tool 'ecko'"):
            await client.call_tool("ecko", {})


async def test_no_auth_on_loopback_runs_every_call_as_the_servers_context(mcp_skills: Path, db_env: str) -> None:
    caller = Caller.from_server_context({"org_id": "local-org", "role_id": "dev", "session_id": "ignored"})
    async with serving(mcp_skills, caller) as running, running.client() as client:
        envelope = (await client.call_tool("echo", {"x": 1})).structured_content
    assert (envelope["who"], envelope["role"]) == ("local-org", "dev")


async def test_a_stateless_server_answers_a_handshake_client_on_any_process(mcp_skills: Path, db_env: str) -> None:
    """No Mcp-Session-Id held in memory: a 2025-11-25 client initialized on one process calls on another."""
    async with serving(mcp_skills, None, stateless=True) as first, serving(mcp_skills, None, stateless=True) as second:
        token = await first.token(f"stateless-{uuid.uuid4().hex[:8]}")
        async with httpx2.AsyncClient(timeout=30.0) as http:
            client = await LegacyClient(http, first.url, token).open()
            assert client.session_id is None
            client.url = second.url  # the load balancer sends the next request elsewhere
            called = await client.result("tools/call", {"name": "echo", "arguments": {"n": 7}})
            assert called["structuredContent"]["got"] == {"n": 7}, called
            assert called["structuredContent"]["who"] == "acme"  # the token's identity, on the other process too
