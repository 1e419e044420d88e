"""Hostile requests on a real server: text PostgreSQL cannot hold, oversized names, a body streamed past the limit,
made-up event ids and a stream opened on a session before its owner used it. Each is a JSON 4xx, never a 500."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from skillyard import SkillYard
from skillyard.service.settings import ServiceSettings
from skillyard.storage.session_owners import derived_session
from support.service import refused_cleanly, serving, write_echo


async def test_config_text_the_database_cannot_hold_is_refused_naming_it(served):
    admin = served.client(await served.token(admin=True))
    json_body = {"content-type": "application/json"}
    for raw in (
        b'{"values": {"colour": "a\\u0000b"}}',
        b'{"values": {"colour": "\\ud800"}}',
        b'{"values": {"co\\u0000lour": "v"}}',
        json.dumps({"values": {"k" * 5000: "v"}}).encode(),
    ):
        answer = await admin.put("/api/configs/echo", content=raw, headers=json_body)
        refused_cleanly(answer)
        assert "NUL" in answer.json()["detail"] or "at most 200" in answer.json()["detail"]
    refused_cleanly(await admin.put("/api/configs/" + "s" * 5000, json={"values": {"a": "b"}}))
    refused_cleanly(await admin.put("/api/configs/a%00b", json={"values": {"a": "b"}}))
    refused_cleanly(await admin.get("/api/configs/a%00b"))
    refused_cleanly(await admin.delete("/api/configs/echo", params={"keys": "a\x00"}))
    secret = "sk-" + uuid.uuid4().hex
    answer = await admin.put("/api/configs/echo", json={"values": {"colour": secret + "\x00"}})
    refused_cleanly(answer)
    assert secret not in answer.text  # the value may be a secret: the refusal never quotes it


async def test_other_text_the_database_cannot_hold_is_a_422(served):
    admin = served.client(await served.token(admin=True))
    made = await admin.post("/api/tokens", json={"name": "n-" + uuid.uuid4().hex[:8], "identity": {"user_id": "a\x00"}})
    refused_cleanly(made)
    refused_cleanly(await admin.post("/api/agents/a%00b/sessions/s1/messages", json={"message": "x"}), 400, 404, 422)


async def test_bodies_nested_past_what_is_read_are_4xx(served):
    """Deep JSON (Python's json raises RecursionError past its depth) on the endpoints that read a body: a JSON 4xx."""
    member = served.client(await served.token())
    admin = served.client(await served.token(admin=True))
    deep = b'{"input": ' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"
    json_body = {"content-type": "application/json"}
    refused_cleanly(await member.post("/api/skills/echo/run", content=deep, headers=json_body))
    refused_cleanly(await admin.put("/api/configs/echo", content=deep, headers=json_body))
    within = b'{"input": ' + b'{"a":' * 100 + b"1" + b"}" * 100 + b"}"  # readable, but past the input's limit
    answer = await member.post("/api/skills/echo/run", content=within, headers=json_body)
    assert answer.status_code in (200, 422) and "nested" in answer.text, answer.text


async def test_a_body_streamed_past_the_limit_is_413(db_env, skills_root):
    write_echo(skills_root)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"input": {"text": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'"}}'

    settings = ServiceSettings(max_body_bytes=1024 * 1024)
    async with serving(SkillYard([skills_root]), settings=settings) as served:
        client = served.client(await served.token(admin=True))
        for method, path in (("POST", "/api/skills/echo/run"), ("PUT", "/api/configs/echo")):
            answer = await client.request(method, path, content=chunks(), headers={"content-type": "application/json"})
            assert answer.status_code == 413 and answer.json()["error"] == "body_too_large", answer.text


@pytest.mark.parametrize("after", ["9" * 40, "\u00b2", "-1", "1e3", " 1"])
async def test_a_stream_resumed_after_no_event_id_is_a_400(served, after):
    client = served.client(await served.token())
    session = "sse-" + uuid.uuid4().hex[:8]
    refused_cleanly(await client.get(f"/api/agents/notes/sessions/{session}/stream", params={"after": after}), 400)


async def test_a_stream_opened_first_makes_the_session_the_listeners(served):
    """Nobody can listen in on a session by opening its stream before its owner's first message."""
    eavesdropper_token = await served.token(org="elsewhere-" + served.org)
    session = "early-" + uuid.uuid4().hex[:8]
    got: list[str] = []

    async def listen() -> None:
        headers = {"Authorization": f"Bearer {eavesdropper_token}"}
        async with (
            httpx.AsyncClient(base_url=served.base, headers=headers) as c,
            c.stream("GET", f"/api/agents/notes/sessions/{session}/stream", params={"after": "0"}, timeout=5) as r,
        ):
            assert r.status_code == 200
            async for line in r.aiter_lines():
                got.append(line)

    listener = asyncio.create_task(listen())
    await asyncio.sleep(0.5)
    owner = served.client(await served.token())
    answer = await owner.post(f"/api/agents/notes/sessions/{session}/messages", json={"message": "你好"})
    refused_cleanly(answer, 403)
    listener.cancel()
    with pytest.raises((asyncio.CancelledError, httpx.ReadTimeout)):
        await listener
    assert not [line for line in got if line.startswith("data:")]


async def test_nobody_names_the_session_derived_for_another_identity(served):
    victim_name = "victim-" + uuid.uuid4().hex[:8]
    victim = served.client(await served.token(victim_name))
    squatter = served.client(await served.token())
    for prefix in ("http", "mcp"):
        derived = derived_session(prefix, f"token:{victim_name}")
        answer = await squatter.post("/api/skills/echo/run", json={"input": {"text": "x"}, "session": derived})
        refused_cleanly(answer, 403)
        assert "derives for another identity" in answer.json()["detail"]
    assert (await victim.post("/api/skills/echo/run", json={"input": {"text": "x"}})).status_code == 200
    admin = served.client(await served.token(admin=True))  # once used, the organisation's admin may act in it
    own = derived_session("http", f"token:{victim_name}")
    assert (await admin.post("/api/skills/echo/run", json={"input": {"text": "y"}, "session": own})).status_code == 200
