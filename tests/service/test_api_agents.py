"""The agents API on a real server with the example agent (scripted model): a message, an approval confirmed by the
token's identity (recorded), the stored session, the progress stream (SSE), the advisory lock (409)."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx

MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"


async def test_message_approval_and_session_view(served):
    token = await served.token(identity={"actor_name": "Ada", "user_id": "u1"})
    client = served.client(token)
    session = "a-" + uuid.uuid4().hex[:8]
    first = await client.post(f"/api/agents/notes/sessions/{session}/messages", json={"message": MESSAGE})
    turn = first.json()
    assert first.status_code == 200 and turn["status"] == "SUSPENDED", turn
    assert turn["checkpoint"]["type"] == "APPROVAL" and turn["checkpoint"]["tool"] == "save_note"
    view = (await client.get(f"/api/agents/notes/sessions/{session}")).json()
    assert view["checkpoint"]["type"] == "APPROVAL" and view["graph"]["nodes"][0]["skill_key"] == "notes.keeper"
    assert any(h["role"] == "user" for h in view["history"])
    other = served.client(await served.token())
    assert (
        await other.post(f"/api/agents/notes/sessions/{session}/resume", json={"action": "CONFIRM"})
    ).status_code == 403
    done = (await client.post(f"/api/agents/notes/sessions/{session}/resume", json={"action": "confirm"})).json()
    assert done["status"] == "DONE" and "季度总结" in done["reply"]
    [approval] = (await client.get(f"/api/agents/notes/sessions/{session}")).json()["approvals"]
    assert approval["action"] == "CONFIRM" and approval["checkpoint"] == "APPROVAL"
    assert approval["approver"]["user_id"] == "u1" and approval["approver"]["org_id"] == served.org


async def test_agent_refusals(served):
    client = served.client(await served.token())
    assert (await client.post("/api/agents/nobody/sessions/s1/messages", json={"message": "x"})).status_code == 404
    empty = await client.post("/api/agents/notes/sessions/s1/messages", json={"message": ""})
    assert empty.status_code == 422 and empty.json()["detail"].startswith("message:")
    session = "r-" + uuid.uuid4().hex[:8]
    nothing_open = await client.post(f"/api/agents/notes/sessions/{session}/resume", json={"action": "CONFIRM"})
    assert nothing_open.status_code == 404
    bad = await client.post(f"/api/agents/notes/sessions/{session}/resume", json={"action": "DANCE"})
    assert bad.status_code in (400, 404)


async def test_a_second_message_while_a_turn_runs_is_409(served):
    client = served.client(await served.token())
    session = "busy-" + uuid.uuid4().hex[:8]
    locks = served.app.state.service.locks
    async with locks.hold(session):
        answer = await client.post(f"/api/agents/notes/sessions/{session}/messages", json={"message": MESSAGE})
    assert answer.status_code == 409 and answer.headers["retry-after"] == "2"
    assert answer.json()["error"] == "busy"
    after = await client.post(f"/api/agents/notes/sessions/{session}/messages", json={"message": MESSAGE})
    assert after.status_code == 200


async def test_the_stream_follows_a_turn_as_server_sent_events(served):
    token = await served.token()
    client = served.client(token)
    session = "sse-" + uuid.uuid4().hex[:8]
    events: list[tuple[str, dict]] = []

    async def listen() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        url = f"/api/agents/notes/sessions/{session}/stream"
        async with (
            httpx.AsyncClient(base_url=served.base, headers=headers) as c,
            c.stream("GET", url, timeout=30) as response,
        ):
            assert response.headers["content-type"].startswith("text/event-stream")
            kind = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    kind = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    events.append((kind, json.loads(line.split(":", 1)[1])))

    listener = asyncio.create_task(listen())
    await asyncio.sleep(0.5)
    turn = (await client.post(f"/api/agents/notes/sessions/{session}/messages", json={"message": MESSAGE})).json()
    await asyncio.wait_for(listener, 20)
    kinds = [k for k, _ in events]
    assert kinds[0] == "started" and kinds[-1] == "finished", events
    tools = [e for k, e in events if k == "tool"]
    assert [t["tool"] for t in tools] == ["find_note"] and tools[0]["label"]
    assert events[-1][1]["status"] == turn["status"] == "SUSPENDED"
    other = served.client(await served.token())
    assert (await other.get(f"/api/agents/notes/sessions/{session}/stream")).status_code == 403


async def test_agent_events_are_an_admins_and_stay_in_its_organisation(served):
    key = "SO-" + uuid.uuid4().hex[:8]
    member = served.client(await served.token())
    refused = await member.post("/api/agent-events", json={"event": "order.paid", "key": key, "payload": {}})
    assert refused.status_code == 403 and set(refused.json()) == {"error", "detail", "fix"}
    admin = served.client(await served.token(admin=True))
    kept = await admin.post("/api/agent-events", json={"event": "order.paid", "key": key, "payload": {"paid": 1}})
    assert kept.status_code == 200, kept.text
    assert kept.json()["stored"] is True and kept.json()["org_id"] == served.org
    bad = await admin.post("/api/agent-events", json={"event": "no spaces", "key": key, "payload": {}})
    assert bad.status_code == 400 and "event name" in bad.json()["detail"]
