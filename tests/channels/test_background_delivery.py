"""Async skills (§8) push their result through the channel adapters to ``reply_to``: from the process that accepted
the run, and from a ``skillyard worker`` that recovered it after that process died (real processes, SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from skillyard import SkillYard

LATER = """
import asyncio
from pathlib import Path

async def execute(input, context):
    await asyncio.sleep(input.get("seconds", 0))
    out = Path(context["workspace_dir"]) / "result.txt"
    out.write_text("the result")
    return {"ok": True, "user_message": "ready", "files": [{"local_path": str(out)}]}
"""

ACCEPT_AND_HANG = """
import asyncio, sys
from skillyard import SkillYard

async def main():
    yard = SkillYard([sys.argv[1]])
    context = {"channel": "telegram", "reply_to": "telegram:4242", "role_id": "bg-push", "session_id": "bgp-1"}
    ack = await yard.run("later", {"seconds": 3}, context)
    print("accepted" if ack.get("async") else f"not async: {ack}", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


@pytest.fixture
def skills(make_skill):
    return make_skill("later", frontmatter="description: d\nasync: true", files={"handler.py": LATER}).parent


async def _configure(yard, telegram):
    await yard.configs.set(
        "bg-push", "send_message", {"telegram_bot_token": telegram.TOKEN, "telegram_api_base": telegram.base}
    )


async def test_the_result_and_its_files_are_pushed_to_reply_to(empty_database, skills, telegram):
    async with SkillYard([skills]) as yard:
        await _configure(yard, telegram)
        context = {"channel": "telegram", "reply_to": "telegram:4242", "role_id": "bg-push", "session_id": "bgp-0"}
        ack = await yard.run("later", {}, context)
        assert ack["async"] is True
    [text] = telegram.sent("/sendMessage")  # yard.close() waited for the run
    assert text.json == {"chat_id": "4242", "text": "later finished. ready"}
    assert telegram.sent("/sendDocument")[0].files["document"] == ("result.txt", b"the result")


async def test_a_run_recovered_by_a_worker_after_a_restart_is_pushed(empty_database, skills, telegram, tmp_path):
    async with SkillYard([skills]) as yard:
        await _configure(yard, telegram)
    script = tmp_path / "accept.py"
    script.write_text(ACCEPT_AND_HANG)
    env = {**os.environ, "SKILLYARD_WORKER_HEARTBEAT_S": "0.5", "SKILLYARD_WORKER_STALL_S": "2"}
    accepting = subprocess.Popen(
        [sys.executable, str(script), str(skills)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    try:
        assert accepting.stdout is not None
        line = accepting.stdout.readline().decode()
        assert line.strip() == "accepted", line + accepting.stdout.read().decode()
        await asyncio.sleep(0.5)
        accepting.send_signal(signal.SIGKILL)
        accepting.wait(10)
    finally:
        if accepting.poll() is None:
            accepting.kill()
    assert telegram.sent("/sendMessage") == []
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "skillyard", "worker", "--skills-dir", str(skills)], stdout=log, stderr=log, env=env
    )
    try:
        deadline = time.monotonic() + 40
        while not telegram.sent("/sendMessage") and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert telegram.sent("/sendMessage"), (tmp_path / "worker.log").read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
    [text] = telegram.sent("/sendMessage")
    assert text.json["chat_id"] == "4242" and text.json["text"] == "later finished. ready"
    assert telegram.sent("/sendDocument")[0].files["document"][0] == "result.txt"
