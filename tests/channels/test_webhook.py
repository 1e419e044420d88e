"""Named webhooks: one JSON POST with the text and the files (base64) to the URL in ``webhook_url_<name>``."""

from __future__ import annotations

import base64

import pytest

from support.channels.vendors import WebhookReceiver


@pytest.fixture
def receiver():
    api = WebhookReceiver()
    with api.serving():
        yield api


async def test_a_configured_webhook_gets_the_message_and_its_file(host, receiver):
    await host.configure(webhook_url_ops=f"{receiver.base}/hook/T0KEN-abcdef")
    (host.workspace / "a.txt").write_text("attached")
    result = await host.send(to="webhook:ops", message="deployed", attach=str(host.workspace / "a.txt"))
    assert result["ok"] is True and result["delivered"] == ["webhook:ops"] and result["failed"] == []
    [posted] = receiver.sent("/hook/T0KEN-abcdef")
    assert posted.json["text"] == "deployed" and posted.json["format"] == "text"
    [file] = posted.json["files"]
    assert file["filename"] == "a.txt" and base64.b64decode(file["content_base64"]) == b"attached"


async def test_an_unknown_webhook_names_the_configured_ones_and_a_5xx_is_transient(host, receiver):
    await host.configure(webhook_url_ops=f"{receiver.base}/hook", webhook_url_down=f"{receiver.base}/broken")
    unknown = await host.send(to="webhook:sales", message="x")
    assert unknown["error_type"] == "recoverable" and "configured: down, ops" in unknown["error"]
    down = await host.send(to="webhook:down", message="x")
    assert down["error_type"] == "transient" and "503" in down["error"]
    assert receiver.base not in str(down) and receiver.base not in str(unknown)  # the URL is a secret: never shown
