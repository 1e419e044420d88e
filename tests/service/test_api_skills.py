"""The skills API on a real server: listing, runs with the token's identity, refusals as JSON, sessions owned by
their first identity, artifacts, rescans."""

from __future__ import annotations

import uuid

from support.service import write_echo


async def test_list_show_and_run_with_the_tokens_identity(served):
    token = await served.token(identity={"actor_name": "Ada", "team_role": "owner"})
    client = served.client(token)
    listing = (await client.get("/api/skills")).json()
    assert "echo" in {s["name"] for s in listing}
    shown = (await client.get("/api/skills/echo")).json()
    assert shown["input_schema"]["required"] == ["text"]
    answer = await client.post("/api/skills/echo/run", json={"input": {"text": "hi"}, "session": "s-" + served.org})
    envelope = answer.json()
    assert answer.status_code == 200 and envelope["ok"] is True and envelope["echo"] == "hi"
    assert envelope["org"] == served.org and envelope["role"] == "role-" + served.org
    assert envelope["channel"] == "api" and envelope["session"] == "s-" + served.org


async def test_identity_and_configs_in_the_body_are_refused(served):
    client = served.client(await served.token())
    for field in ("org_id", "skill_configs", "skill_args", "context"):
        answer = await client.post("/api/skills/echo/run", json={"input": {"text": "x"}, field: {"a": 1}})
        body = answer.json()
        assert answer.status_code == 422 and set(body) == {"error", "detail", "fix"}
        assert body["detail"].startswith(f"{field}:"), body


async def test_every_refusal_is_json_naming_the_field_and_the_fix(served):
    client = served.client(await served.token())
    missing = await client.post("/api/skills/echo/run", json={"session": "x"})
    assert missing.status_code == 200 or missing.status_code == 422
    wrong_type = await client.post("/api/skills/echo/run", json={"input": "text"})
    assert wrong_type.status_code == 422 and wrong_type.json()["detail"].startswith("input:")
    not_json = await client.post("/api/skills/echo/run", content=b"{nope", headers={"content-type": "application/json"})
    assert not_json.status_code == 422 and "fix" in not_json.json()
    unknown = await client.post("/api/skills/nope/run", json={"input": {}})
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    assert (await client.get("/api/nothing-here")).json()["error"] == "not_found"
    bad_session = await client.post("/api/skills/echo/run", json={"input": {"text": "x"}, "session": "../etc"})
    assert bad_session.status_code == 400 and "session" in bad_session.json()["detail"]
    assert "Traceback" not in (await client.post("/api/skills/echo/run", json=[1])).text


async def test_body_size_is_bounded(served):
    client = served.client(await served.token())
    big = b'{"input": {"text": "' + b"x" * (17 * 1024 * 1024) + b'"}}'
    answer = await client.post("/api/skills/echo/run", content=big, headers={"content-type": "application/json"})
    assert answer.status_code == 413 and answer.json()["error"] == "body_too_large"


async def test_no_token_or_a_made_up_one_is_401(served):
    assert (await served.client().get("/api/skills")).status_code == 401
    answer = await served.client("sy_madeup").get("/api/skills")
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")


async def test_a_session_belongs_to_its_first_identity(served):
    alice = served.client(await served.token())
    bob = served.client(await served.token())
    admin = served.client(await served.token(admin=True))
    other_admin = served.client(await served.token(admin=True, org="other-" + served.org))
    session = "own-" + uuid.uuid4().hex[:8]
    assert (
        await alice.post("/api/skills/echo/run", json={"input": {"text": "a"}, "session": session})
    ).status_code == 200
    refused = await bob.post("/api/skills/echo/run", json={"input": {"text": "b"}, "session": session})
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert (await bob.get(f"/api/sessions/{session}/artifacts")).status_code == 403
    assert (await admin.get(f"/api/sessions/{session}/artifacts")).status_code == 200
    assert (await other_admin.get(f"/api/sessions/{session}/artifacts")).status_code == 403
    assert (await alice.get("/api/sessions/never-used/artifacts")).status_code == 404


async def test_artifacts_are_listed_and_downloaded_by_their_owner_only(served, tmp_path):
    alice = served.client(await served.token())
    session = "files-" + uuid.uuid4().hex[:8]
    assert (
        await alice.post("/api/skills/echo/run", json={"input": {"text": "a"}, "session": session})
    ).status_code == 200
    path = tmp_path / "report.csv"
    path.write_text("a,b\n1,2\n")
    [item] = await served.yard.attach(session, [path])
    listing = (await alice.get(f"/api/sessions/{session}/artifacts")).json()
    assert [i["ref"] for i in listing] == [item["ref"]]
    download = await alice.get(listing[0]["download"])
    assert download.status_code == 200 and download.content == b"a,b\n1,2\n"
    assert (await alice.get(f"/api/sessions/{session}/files/nope")).status_code == 404
    bob = served.client(await served.token())
    assert (await bob.get(listing[0]["download"])).status_code == 403


async def test_rescan_picks_up_a_new_skill_and_runs_list_the_callers_runs(served, skills_root):
    client = served.client(await served.token())
    write_echo(skills_root, "echo_two")
    answer = await client.post("/api/rescan")
    assert answer.status_code == 200 and answer.json()["reread"] >= 1
    assert (await client.post("/api/skills/echo_two/run", json={"input": {"text": "x"}})).json()["ok"] is True
    runs = (await client.get("/api/runs")).json()
    assert runs[0]["skill"] == "echo_two" and runs[0]["status"] == "ok" and runs[0]["duration_ms"] >= 0
    assert (await served.client(await served.token()).get("/api/runs")).json() == []


async def test_openapi_is_published(served):
    spec = (await served.client().get("/openapi.json")).json()
    assert (
        "/api/skills/{name}/run" in spec["paths"] and "/api/agents/{code}/sessions/{session_id}/stream" in spec["paths"]
    )
