"""Admin endpoints (configs, notify aliases, tokens, chains and schedules), the rate limit, the MCP mount."""

from __future__ import annotations

import uuid
from pathlib import Path

from skillyard import SkillYard
from skillyard.service.settings import ServiceSettings
from support.service import serving, write_echo

CHAIN = """
name: {name}
steps:
  - id: first
    skill: echo
    input: {{text: "{{{{ trigger.text }}}}"}}
"""


async def test_configs_are_admin_only_masked_and_of_the_tokens_role(served):
    admin = served.client(await served.token(admin=True))
    user = served.client(await served.token())
    assert (await user.get("/api/configs/echo")).status_code == 403
    stored = await admin.put("/api/configs/echo", json={"values": {"api_token": "s3cret", "colour": "blue"}})
    assert stored.json() == {"set": {"api_token": {"secret": True}, "colour": {"secret": False}}}
    listing = (await admin.get("/api/configs/echo")).json()
    assert listing == {"api_token": {"value": "********", "secret": True}, "colour": {"value": "blue", "secret": False}}
    assert (await admin.get("/api/configs/echo", params={"role": "someone-else"})).status_code == 403
    assert (await admin.delete("/api/configs/echo", params={"keys": "colour"})).json() == {"removed": 1}
    assert "colour" not in (await admin.get("/api/configs/echo")).json()
    assert (await admin.put("/api/configs/echo", json={"values": {}})).status_code == 422


async def test_notify_aliases_and_tokens(served):
    admin = served.client(await served.token(admin=True))
    alias = await admin.put("/api/notify/aliases/ops", json={"urls": ["json://127.0.0.1:9/hook?token=abc"]})
    assert alias.status_code == 200 and alias.json()["urls"] == ["json://127.0.0.1/…"]
    assert (await admin.put("/api/notify/aliases/ops", json={"urls": ["nope://x"]})).status_code == 400
    assert [a["name"] for a in (await admin.get("/api/notify/aliases")).json()] == ["ops"]
    assert (await admin.delete("/api/notify/aliases/ops")).status_code == 200
    assert (await admin.delete("/api/notify/aliases/ops")).status_code == 404
    made = (
        await admin.post("/api/tokens", json={"name": "bot-" + served.org, "identity": {"actor_name": "Bot"}})
    ).json()
    assert made["token"].startswith("sy_") and made["org_id"] == served.org
    bot = served.client(made["token"])
    assert (await bot.get("/api/skills")).status_code == 200
    names = [t["name"] for t in (await admin.get("/api/tokens")).json()]
    assert "bot-" + served.org in names and all("token" not in t for t in (await admin.get("/api/tokens")).json())
    stranger = served.client(await served.token(admin=True, org="x-" + served.org))
    assert (await stranger.delete(f"/api/tokens/bot-{served.org}")).status_code == 404
    assert (await admin.delete(f"/api/tokens/bot-{served.org}")).json() == {"revoked": "bot-" + served.org}


async def test_chains_and_schedules_run_with_the_tokens_identity(served):
    admin = served.client(await served.token(admin=True, identity={"actor_name": "Ops"}))
    name = "c_" + uuid.uuid4().hex[:8]
    user = served.client(await served.token())
    assert (await user.get("/api/chains")).status_code == 403
    added = await admin.post("/api/chains", json={"definition": CHAIN.format(name=name)})
    assert added.status_code == 200 and added.json()["version"] == 1
    chain = (await admin.get(f"/api/chains/{name}")).json()
    assert chain["identity"]["org_id"] == served.org and chain["identity"]["actor_name"] == "Ops"
    assert chain["role_id"] == "role-" + served.org
    bad = await admin.post("/api/chains", json={"definition": "name: x\nsteps: []\n"})
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_chain"
    foreign = await admin.post(
        "/api/chains", json={"definition": CHAIN.format(name=name + "b") + "identity: {org_id: elsewhere}\n"}
    )
    assert foreign.status_code == 403
    run = (await admin.post(f"/api/chains/{name}/runs", json={"input": {"text": "hey"}, "wait": True})).json()
    assert run["status"] == "succeeded" and run["steps"][0]["envelope"]["echo"] == "hey"
    assert run["steps"][0]["envelope"]["org"] == served.org
    assert (await admin.get(f"/api/chains/{name}/runs")).json()[0]["id"] == run["id"]
    assert (await admin.get(f"/api/chain-runs/{run['id']}")).json()["status"] == "succeeded"
    schedule = (await admin.post("/api/schedules", json={"chain": name, "cron": "0 3 * * *"})).json()
    assert (await admin.post(f"/api/schedules/{schedule['id']}/pause")).json()["paused"] is True
    assert [s["id"] for s in (await admin.get("/api/schedules")).json()] == [schedule["id"]]
    assert (await admin.post("/api/schedules", json={"chain": name, "cron": "nope"})).status_code == 400
    assert (await admin.delete(f"/api/chains/{name}")).status_code == 409
    assert (await admin.delete(f"/api/schedules/{schedule['id']}")).json()["removed"] is True
    other = served.client(await served.token(admin=True, org="o-" + served.org))
    assert (await other.get(f"/api/chains/{name}")).status_code == 404
    assert (await admin.delete(f"/api/chains/{name}")).status_code == 200


async def test_the_rate_limit_answers_429_with_retry_after(db_env, skills_root: Path):
    write_echo(skills_root)
    settings = ServiceSettings(rate_limit=3, rate_window_s=3600)
    async with serving(SkillYard([skills_root]), settings=settings) as served:
        client = served.client(await served.token())
        codes = [(await client.get("/api/skills")).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = await client.get("/api/skills")
        assert limited.json()["error"] == "rate_limited" and 0 < int(limited.headers["retry-after"]) <= 3600
        assert (await served.client(await served.token()).get("/api/skills")).status_code == 200


async def test_no_auth_runs_as_the_server_context(db_env, skills_root: Path):
    write_echo(skills_root)
    async with serving(SkillYard([skills_root]), server_context={"org_id": "solo", "role_id": "me"}) as served:
        envelope = (await served.client().post("/api/skills/echo/run", json={"input": {"text": "x"}})).json()
        assert envelope["org"] == "solo" and envelope["role"] == "me"


async def test_mcp_is_mounted_with_the_same_tokens(served):
    token = await served.token()
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    client_info = {"name": "t", "version": "1"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client_info}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    assert (await served.client().post("/mcp", json=init, headers=headers)).status_code == 401
    answer = await served.client(token).post("/mcp", json=init, headers=headers)
    assert answer.status_code == 200 and "skillyard" in answer.text


async def test_mcp_stateless_keeps_no_session_in_the_process(db_env, skills_root: Path):
    """[service] mcp_stateless: an MCP handshake gets no Mcp-Session-Id, so no process holds one for a client."""
    write_echo(skills_root)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    for stateless in (False, True):
        async with serving(SkillYard([skills_root]), settings=ServiceSettings(mcp_stateless=stateless)) as served:
            answer = await served.client(await served.token()).post("/mcp", json=init, headers=headers)
            assert answer.status_code == 200, answer.text
            assert ("mcp-session-id" in answer.headers) is not stateless
