"""The Slack adapter (slack_sdk's async client) against a local Slack Web API: messages to channels and users
(a DM opened first), the three-step file upload, and Slack's ``{ok: false, error}`` answers."""

from __future__ import annotations

import pytest

from support.channels.vendors import FakeSlack


@pytest.fixture
def slack():
    api = FakeSlack()
    with api.serving():
        yield api


async def test_a_message_to_a_channel_and_a_file_to_a_user(host, slack):
    await host.configure(slack_bot_token=slack.TOKEN, slack_api_base=slack.base + "/api")
    (host.workspace / "notes.txt").write_text("minutes")
    assert (await host.send(to="slack:C0123ABCD", message="*shipped*", format="markdown"))["ok"] is True
    [post] = slack.sent("/chat.postMessage")
    assert post.json["channel"] == "C0123ABCD" and post.json["text"] == "*shipped*"
    result = await host.send(to="slack:U0ALICE", message="your notes", attach=str(host.workspace / "notes.txt"))
    assert result["ok"] is True
    assert slack.sent("/conversations.open") and slack.sent("/upload/F1")[0].raw == b"minutes"
    assert slack.sent("/files.completeUploadExternal")


async def test_errors_map_onto_the_envelope(host, slack):
    await host.configure(slack_bot_token=slack.TOKEN, slack_api_base=slack.base + "/api")
    unknown = await host.send(to=f"slack:{FakeSlack.UNKNOWN}", message="hi")
    assert unknown["error_type"] == "recoverable" and "channel_not_found" in unknown["error"]
    slack.fail_next["/api/chat.postMessage"] = [(429, {"ok": False, "error": "ratelimited"})]
    limited = await host.send(to="slack:C0123ABCD", message="hi")
    assert limited["error_type"] == "transient"
    await host.configure(slack_bot_token="xoxb-not-the-token")
    bad = await host.send(to="slack:C0123ABCD", message="hi")
    assert bad["error_type"] == "config" and bad["non_retriable"] is True and "invalid_auth" in bad["error"]
