"""The web channel: messages stored in PostgreSQL per session, only for a session of the sender's own organisation,
read back with ``skillyard messages``."""

from __future__ import annotations

import asyncio
import json
import uuid

from support.cli import invoke, usage_error


async def _open_web_session(host, session: str, org: str) -> None:
    """A web run of the session: the delivery processor records which organisation the session belongs to."""
    await host.yard.run(
        "send_message", {"to": "x", "message": "m"}, {"channel": "web", "session_id": session, "org_id": org}
    )


async def test_a_message_to_a_web_session_of_the_same_org_is_stored_and_listed(host):
    session = "web-" + uuid.uuid4().hex[:8]
    await _open_web_session(host, session, "org-a")
    (host.workspace / "r.pdf").write_bytes(b"%PDF")
    result = await host.yard.run(
        "send_message",
        {"to": f"web:{session}", "message": "您的工单已处理", "attach": str(host.workspace / "r.pdf")},
        {"role_id": host.role, "session_id": host.session, "org_id": "org-a", "channel": "schedule"},
    )
    assert result["ok"] is True and result["delivered"] == [f"web:{session}"]
    out = await asyncio.to_thread(invoke, "messages", "--session", session, "--json")  # the CLI has its own loop
    assert out.exit_code == 0, out.output
    [message] = json.loads(out.output)
    assert message["text"] == "您的工单已处理" and message["files"][0]["filename"] == "r.pdf"
    text = await asyncio.to_thread(invoke, "messages", "--session", session)
    assert "您的工单已处理" in text.output and "(r.pdf)" in text.output


async def test_a_session_of_another_org_or_never_seen_is_refused(host):
    session = "web-" + uuid.uuid4().hex[:8]
    await _open_web_session(host, session, "org-a")
    other = await host.yard.run(
        "send_message", {"to": f"web:{session}", "message": "x"}, {"role_id": host.role, "org_id": "org-b"}
    )
    assert other["error_type"] == "recoverable" and "not a web session of your organisation" in other["error"]
    never = await host.yard.run("send_message", {"to": "web:nobody-here", "message": "x"}, {"org_id": "org-a"})
    assert never["ok"] is False


def test_messages_needs_a_safe_session_id():
    usage_error(invoke("messages", "--session", "../etc"), "--session", "not a safe name")
