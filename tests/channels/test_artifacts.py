"""§6.3 step 3: a top-level run's artifacts go to ``reply_to`` (by media, once each) and the envelope's ``delivery``
says so; an agent turn's tool calls defer theirs to the end of the turn; web runs send nothing."""

from __future__ import annotations

import pytest

from skillyard import SkillYard
from skillyard.channels.artifacts import DEFER_KEY
from support.channels.vendors import FakeTelegram

RENDER = """
from pathlib import Path

async def execute(input, ctx):
    ws = Path(ctx["workspace_dir"])
    (ws / "chart.png").write_bytes(b"\\x89PNG chart")
    (ws / "table.csv").write_text("a,b\\n")
    images, files = [{"local_path": str(ws / "chart.png")}], [{"local_path": str(ws / "table.csv")}]
    return {"ok": True, "images": images, "files": files}
"""


@pytest.fixture
def render(make_skill):
    return make_skill("render", files={"handler.py": RENDER}).parent


async def _yard(render, telegram, role):
    yard = SkillYard([render])
    await yard.open()
    await yard.configs.set(
        role, "send_message", {"telegram_bot_token": telegram.TOKEN, "telegram_api_base": telegram.base}
    )
    return yard


async def test_a_runs_artifacts_are_sent_to_reply_to_by_media(db_env, render, telegram):
    yard = await _yard(render, telegram, "art-1")
    try:
        context = {"channel": "telegram", "reply_to": "telegram:4242", "role_id": "art-1", "session_id": "art-s1"}
        envelope = await yard.run("render", {}, context)
    finally:
        await yard.close()
    refs = [envelope["images"][0]["ref"], envelope["files"][0]["ref"]]
    assert envelope["delivery"] == {"sent": refs, "failed": []}
    assert telegram.sent("/sendPhoto")[0].files["photo"] == ("chart.png", b"\x89PNG chart")
    assert telegram.sent("/sendDocument")[0].files["document"][0] == "table.csv"
    assert telegram.sent("/sendMessage") == []  # artifacts only: the reply text is the caller's


async def test_a_failed_artifact_is_named_with_its_error(db_env, render, telegram):
    yard = await _yard(render, telegram, "art-2")
    try:
        context = {
            "channel": "telegram",
            "reply_to": f"telegram:{FakeTelegram.UNKNOWN}",
            "role_id": "art-2",
            "session_id": "art-s2",
        }
        envelope = await yard.run("render", {}, context)
    finally:
        await yard.close()
    assert envelope["delivery"]["sent"] == [] and len(envelope["delivery"]["failed"]) == 2
    assert "chat not found" in envelope["delivery"]["failed"][0]["error"]


async def test_web_runs_and_runs_without_reply_to_send_nothing(db_env, render, telegram):
    yard = await _yard(render, telegram, "art-3")
    try:
        web = await yard.run("render", {}, {"channel": "web", "reply_to": "telegram:4242", "session_id": "art-s3"})
        none = await yard.run("render", {}, {"channel": "telegram", "session_id": "art-s4"})
    finally:
        await yard.close()
    assert "delivery" not in web and "delivery" not in none and telegram.requests == []


async def test_deferred_artifacts_are_sent_once_when_the_turn_ends(db_env, render, telegram):
    yard = await _yard(render, telegram, "art-4")
    try:
        context = {
            "channel": "telegram",
            "reply_to": "telegram:4242",
            "role_id": "art-4",
            "session_id": "art-s5",
            DEFER_KEY: "node-1",
        }
        first = await yard.run("render", {}, context)
        second = await yard.run("render", {}, context)
        assert "delivery" not in first and "delivery" not in second and telegram.requests == []
        report = await yard.channels.artifacts.flush("node-1")
        assert await yard.channels.artifacts.flush("node-1") is None  # once
    finally:
        await yard.close()
    # the second run rewrote the same two files: the same refs, each sent once
    assert report == {"sent": ["img_1", "file_1"], "failed": []}
    assert len(telegram.sent("/sendPhoto")) == 1 and len(telegram.sent("/sendDocument")) == 1
