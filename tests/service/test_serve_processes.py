"""Two ``skillyard serve`` processes on one PostgreSQL: each sees the other's runs, sessions and their owners, agent
sessions, config changes (LISTEN/NOTIFY), rate-limit windows and turn locks."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from support.service import serve_process, write_echo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"


async def _cli(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "skillyard", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode().strip()


async def _serve(skills: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    agent, model = str(EXAMPLES / "agents" / "notes"), f"script:{EXAMPLES}/agents/notes/demo.yaml"
    options = ("--skills-dir", str(skills), "--agent", agent, "--model", model)
    return await serve_process(log, *options, env={"SKILLYARD_SERVICE_RATE_LIMIT": "20"})


async def _eventually(check, timeout: float = 10.0):
    for _ in range(int(timeout * 10)):
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.1)
    pytest.fail("the other process never saw it")


async def test_two_serve_processes_share_one_database(db_env, tmp_path):
    skills = tmp_path / "skills"
    write_echo(skills)
    org = "org-" + uuid.uuid4().hex[:8]
    admin = await _cli("token", "add", "--name", "a-" + org, "--role", "r-" + org, "--org", org, "--admin")
    alice = await _cli("token", "add", "--name", "alice-" + org, "--role", "r-" + org, "--org", org)
    bob = await _cli("token", "add", "--name", "bob-" + org, "--role", "r-" + org, "--org", org)
    burst = await _cli("token", "add", "--name", "burst-" + org, "--role", "r-" + org, "--org", org)
    (first, a), (second, b) = await asyncio.gather(
        _serve(skills, tmp_path / "a.log"), _serve(skills, tmp_path / "b.log")
    )
    try:
        auth = lambda token: {"Authorization": f"Bearer {token}"}  # noqa: E731
        async with httpx.AsyncClient(timeout=30) as http:
            session = "shared-" + org
            run = await http.post(f"{a}/api/skills/echo/run", headers=auth(alice),
                                  json={"input": {"text": "from a"}, "session": session})  # fmt: skip
            assert run.json()["ok"] is True

            async def runs_on_b():
                found = (await http.get(f"{b}/api/runs", headers=auth(alice))).json()
                return [r for r in found if r["session_id"] == session]

            assert (await _eventually(runs_on_b))[0]["skill"] == "echo"
            taken = await http.post(f"{b}/api/skills/echo/run", headers=auth(bob),
                                    json={"input": {"text": "x"}, "session": session})  # fmt: skip
            assert taken.status_code == 403

            agent_session = "agent-" + org
            turn = (await http.post(f"{a}/api/agents/notes/sessions/{agent_session}/messages", headers=auth(alice),
                                    json={"message": MESSAGE})).json()  # fmt: skip
            assert turn["status"] == "SUSPENDED"
            view = (await http.get(f"{b}/api/agents/notes/sessions/{agent_session}", headers=auth(alice))).json()
            assert view["checkpoint"]["type"] == "APPROVAL"
            done = (await http.post(f"{b}/api/agents/notes/sessions/{agent_session}/resume", headers=auth(alice),
                                    json={"action": "CONFIRM"})).json()  # fmt: skip
            assert done["status"] == "DONE"

            assert (await http.get(f"{b}/api/configs/echo", headers=auth(admin))).json() == {}
            await http.put(f"{a}/api/configs/echo", headers=auth(admin), json={"values": {"colour": "red"}})

            async def config_on_b():
                return (await http.get(f"{b}/api/configs/echo", headers=auth(admin))).json()

            assert (await _eventually(config_on_b)) == {"colour": {"value": "red", "secret": False}}

            codes = []
            for base in [a, b] * 11:
                codes.append((await http.get(f"{base}/api/skills", headers=auth(burst))).status_code)
            assert codes.count(200) == 20 and codes.count(429) == 2

            import asyncpg

            from skillyard.agent.store import lock_key
            from support.datatable import asyncpg_dsn

            conn = await asyncpg.connect(asyncpg_dsn(db_env))
            try:
                locked = "locked-" + org
                held = "SELECT pg_try_advisory_lock(hashtextextended($1, 0))"
                assert await conn.fetchval(held, lock_key(locked))  # the runtime's lock, held by another client
                for base in (a, b):
                    busy = await http.post(f"{base}/api/agents/notes/sessions/{locked}/messages", headers=auth(alice),
                                           json={"message": MESSAGE})  # fmt: skip
                    assert busy.status_code == 409 and "retry-after" in busy.headers
            finally:
                await conn.close()
    finally:
        for process in (first, second):
            process.terminate()
        for process in (first, second):
            process.wait(30)


def _mcp_client(url: str, token: str):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0))
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=30.0)


async def test_mcp_sessions_are_owned_across_processes_and_with_the_http_api(db_env, tmp_path):
    skills = tmp_path / "skills"
    write_echo(skills)
    org = "org-" + uuid.uuid4().hex[:8]
    alice = await _cli("token", "add", "--name", "alice-" + org, "--role", "r-" + org, "--org", org)
    bob = await _cli("token", "add", "--name", "bob-" + org, "--role", "r-" + org, "--org", org)
    (first, a), (second, b) = await asyncio.gather(
        _serve(skills, tmp_path / "a.log"), _serve(skills, tmp_path / "b.log")
    )
    mcp_first, http_first = "mcp-first-" + org, "http-first-" + org

    async def over_mcp(base: str, token: str, session: str):
        async with _mcp_client(base, token) as client:
            return await client.call_tool("echo", {"text": "hi"}, meta={"io.skillyard/session": session})

    async def over_http(base: str, token: str, session: str, path: str = "skills/echo/run") -> int:
        async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
            if path == "artifacts":
                return (await http.get(f"{base}/api/sessions/{session}/artifacts")).status_code
            body = {"input": {"text": "hi"}, "session": session}
            return (await http.post(f"{base}/api/{path}", json=body)).status_code

    try:
        done = await over_mcp(a, alice, mcp_first)
        assert not done.is_error and done.structured_content["session"] == mcp_first
        assert not (await over_mcp(b, alice, mcp_first)).is_error  # the owner, on the other process
        refused = await over_mcp(b, bob, mcp_first)  # another identity, on either process
        assert refused.is_error and "belongs to another identity" in refused.content[0].text
        assert await over_http(b, bob, mcp_first) == 403  # one record of owners for MCP and the HTTP API
        assert await over_http(b, alice, mcp_first, "artifacts") == 200
        assert await over_http(b, bob, http_first) == 200
        assert not (await over_mcp(a, bob, http_first)).is_error
        assert (await over_mcp(a, alice, http_first)).is_error
    finally:
        for process in (first, second):
            process.terminate()
        for process in (first, second):
            process.wait(30)
