"""An inbound message accepted by a ``skillyard serve`` process that dies before answering it is answered by a
``skillyard worker``: the job (binding, event id, the agent and model the process answered with; no secret) is
recovered from the dead process's queue, and the reply reaches the platform (real processes, SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from skillyard.service.hooks.inbound import Inbound
from skillyard.service.hooks.job import session_of
from skillyard.service.plugin import INBOUND_JOB
from skillyard.service.settings import Binding
from support.channels.vendors import FakeTelegram
from support.datatable import asyncpg_dsn
from support.service import serve_process

from .conftest import SECRETS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"
FAST = {"SKILLYARD_WORKER_HEARTBEAT_S": "0.5", "SKILLYARD_WORKER_STALL_S": "2"}


async def _inbound_jobs(database_url: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        query = "SELECT status, args::text AS args FROM procrastinate.procrastinate_jobs WHERE task_name = $1"
        return await conn.fetch(query, INBOUND_JOB)
    finally:
        await conn.close()


async def test_a_message_accepted_by_a_process_that_died_is_answered_by_a_worker(
    empty_database, home, telegram, tmp_path
):
    role = "hooks-" + uuid.uuid4().hex[:8]
    agent = str(EXAMPLES / "agents" / "notes")
    # settings.toml names no model: the serving process got it on its command line, so only the job can tell it
    (home / "settings.toml").write_text(
        f'[service.bindings.tg]\nchannel = "telegram"\nrole_id = "{role}"\norg_id = "o1"\nagent = "{agent}"\n'
    )
    chat = 800000 + uuid.uuid4().int % 10**5
    binding = Binding("tg", "telegram", role, "o1", agent)
    session = session_of(binding, Inbound("x", str(chat), str(chat), ""))
    update = {"update_id": uuid.uuid4().int % 10**9,
              "message": {"message_id": 1, "from": {"id": chat, "is_bot": False, "first_name": "Ada"},
                          "chat": {"id": chat, "type": "private"}, "date": 1767225600, "text": MESSAGE}}  # fmt: skip
    model = f"script:{EXAMPLES}/agents/notes/demo.yaml"
    worker = None
    async with SkillYard() as yard:
        configs = {**SECRETS, "telegram_bot_token": FakeTelegram.TOKEN, "telegram_api_base": telegram.base}
        await yard.configs.set(role, "send_message", configs)
        serving, base = await serve_process(tmp_path / "serve.log", "--model", model, env=FAST)
        try:
            # a turn of the session runs elsewhere: the serving process's job waits for it and is killed waiting
            async with AgentStore(yard.database).lock(session, wait=False):
                async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRETS["telegram_secret_token"]}
                    answer = await client.post("/hooks/telegram/tg", json=update, headers=headers)
                assert answer.status_code == 200
                for _ in range(100):
                    jobs = await _inbound_jobs(empty_database)
                    if jobs and jobs[0]["status"] == "doing":
                        break
                    await asyncio.sleep(0.1)
                else:
                    pytest.fail(f"the serving process never started the job: {(tmp_path / 'serve.log').read_text()}")
                await asyncio.sleep(1.0)  # well inside its wait for the session
                serving.send_signal(signal.SIGKILL)
                serving.wait(10)
        finally:
            if serving.poll() is None:
                serving.kill()
                serving.wait()
    assert telegram.sent("/sendMessage") == []
    [job] = await _inbound_jobs(empty_database)
    secrets = [*SECRETS.values(), FakeTelegram.TOKEN]
    assert not [s for s in secrets if s in job["args"]], job["args"]
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "skillyard", "worker"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **FAST},
    )
    try:
        deadline = time.monotonic() + 60
        while not telegram.sent("/sendMessage") and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert telegram.sent("/sendMessage"), f"no reply; the worker's log:\n{log.read_text()}"
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    [reply] = telegram.sent("/sendMessage")
    assert reply.json["chat_id"] == str(chat) and "保存这条笔记" in reply.json["text"]  # the approval's question
