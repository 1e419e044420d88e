"""MCP tasks (protocol 2025-11-25, mcp/tasks.py): a task-augmented ``tools/call`` of an async skill answers with a
task, ``tasks/get`` and ``tasks/result`` follow its run from any server on the database, for its owner only. The
SDK's client has no tasks, so these speak the wire: JSON-RPC over streamable HTTP, as a 2025-11-25 client does."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx2
import pytest

from support.mcp_server import LegacyClient, Running, serving

WAIT_S = 60


@pytest.fixture
async def legacy(served: Running):
    async with httpx2.AsyncClient(timeout=60.0) as http:

        async def connect(name: str) -> LegacyClient:  # token names are unique in the shared database
            return await LegacyClient(http, served.url, await served.token(f"{name}-{uuid.uuid4().hex[:8]}")).open()

        yield connect


async def test_the_server_offers_tasks_for_async_tools_only(legacy) -> None:
    client = await legacy("lister")
    assert client.capabilities["tasks"] == {"requests": {"tools": {"call": {}}}}
    tools = {tool["name"]: tool for tool in (await client.result("tools/list", {}))["tools"]}
    assert tools["later"]["execution"] == {"taskSupport": "optional"}
    assert "execution" not in tools["echo"]


async def test_a_task_augmented_call_answers_with_a_task_that_completes(legacy) -> None:
    client = await legacy("tasker")
    created = await client.result("tools/call", {"name": "later", "arguments": {}, "task": {"ttl": 60000}})
    task = created["task"]
    assert task["status"] == "working" and task["taskId"] and task["ttl"] > 0 and task["pollInterval"] > 0
    assert "content" not in created  # a task, not a tool result
    async with asyncio.timeout(WAIT_S):
        while (state := await client.result("tasks/get", {"taskId": task["taskId"]}))["status"] == "working":
            await asyncio.sleep(0.05)
    assert state["status"] == "completed" and state["taskId"] == task["taskId"], state
    result = await client.result("tasks/result", {"taskId": task["taskId"]})
    assert result["isError"] is False and result["structuredContent"]["value"] == 42, result
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}


async def test_tasks_result_waits_for_the_end_of_the_run(legacy) -> None:
    client = await legacy("waiter")
    task = (await client.result("tools/call", {"name": "later", "arguments": {}, "task": {}}))["task"]
    result = await client.result("tasks/result", {"taskId": task["taskId"]})  # blocks until the job ended
    assert result["structuredContent"]["ok"] is True and result["structuredContent"]["value"] == 42


async def test_a_failed_run_is_a_failed_task_with_the_error_result(legacy) -> None:
    client = await legacy("failer")
    task = (await client.result("tools/call", {"name": "later", "arguments": {"fail": True}, "task": {}}))["task"]
    result = await client.result("tasks/result", {"taskId": task["taskId"]})
    assert result["isError"] is True and result["structuredContent"]["error"] == "asked to fail", result
    state = await client.result("tasks/get", {"taskId": task["taskId"]})
    assert state["status"] == "failed" and state["statusMessage"] == "asked to fail", state


async def test_a_tool_without_task_support_refuses_a_task(legacy) -> None:
    client = await legacy("pusher")
    for name in ("echo", "skillyard_run_status", "no-such-tool"):
        answer = await client.post("tools/call", {"name": name, "arguments": {}, "task": {}})
        assert answer["error"]["code"] == -32601 and "does not run as a task" in answer["error"]["message"], answer


async def test_another_identity_cannot_see_the_task(legacy) -> None:
    owner = await legacy("task-owner")
    task = (await owner.result("tools/call", {"name": "later", "arguments": {}, "task": {}}))["task"]
    nosy = await legacy("task-nosy")
    for method in ("tasks/get", "tasks/result"):
        answer = await nosy.post(method, {"taskId": task["taskId"]})
        assert answer["error"]["code"] == -32602 and "of yours" in answer["error"]["message"], answer
    for bad in ("", "x" * 65, "no-such-task"):
        answer = await owner.post("tasks/get", {"taskId": bad})
        assert answer["error"]["code"] == -32602, answer
    assert (await owner.post("tasks/get", {}))["error"]["code"] == -32602  # taskId is required


async def test_another_server_on_the_database_answers_for_the_task(served: Running, legacy, mcp_skills: Path) -> None:
    client = await legacy("roaming-tasker")
    task = (await client.result("tools/call", {"name": "later", "arguments": {}, "task": {}}))["task"]
    token = await served.token(f"roaming-tasker-{uuid.uuid4().hex[:8]}")
    async with serving(mcp_skills, None) as other, httpx2.AsyncClient(timeout=60.0) as http:
        elsewhere = LegacyClient(http, other.url, token)
        await elsewhere.open()
        refused = await elsewhere.post("tasks/get", {"taskId": task["taskId"]})
        assert refused["error"]["code"] == -32602  # another identity, on another server too
        mine = LegacyClient(http, other.url, client.headers["Authorization"].removeprefix("Bearer "))
        await mine.open()
        result = await mine.result("tasks/result", {"taskId": task["taskId"]})
        assert result["structuredContent"]["value"] == 42


async def test_a_client_that_asks_no_task_still_gets_the_acknowledgement(legacy) -> None:
    client = await legacy("plain")
    answer = await client.result("tools/call", {"name": "later", "arguments": {}})
    assert answer["structuredContent"]["async"] is True and answer["structuredContent"]["run_id"], answer
