"""A served app with one binding per channel (settings.toml in the test's home) and the role's inbound secrets."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.channels.vendors import FakeTelegram
from support.service import Served, serving

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SECRETS = {
    "telegram_secret_token": "tg-secret-1",
    "slack_signing_secret": "slack-signing-1",
    "feishu_verification_token": "fs-verify-1",
    "feishu_encrypt_key": "fs-encrypt-key-1",
    "wecom_token": "wecomtoken1",
    "wecom_aes_key": "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
    "wecom_corp_id": "ww1234567890",
    "dingtalk_app_secret": "ding-secret-1",
}


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    api = FakeTelegram()
    with api.serving():
        yield api


@pytest.fixture
async def hooked(db_env: str, home: Path, telegram: FakeTelegram) -> AsyncIterator[Served]:
    role, org = "hooks-" + uuid.uuid4().hex[:8], "org-" + uuid.uuid4().hex[:8]
    lines = [f'[service]\nmodel = "script:{EXAMPLES}/agents/notes/demo.yaml"\n']
    for channel in ("telegram", "slack", "feishu", "wecom", "dingtalk", "web"):
        lines.append(
            f'[service.bindings.{channel}1]\nchannel = "{channel}"\nrole_id = "{role}"\norg_id = "{org}"\n'
            f'agent = "{EXAMPLES}/agents/notes"\n'
        )
    (home / "settings.toml").write_text("\n".join(lines))
    yard = SkillYard()
    async with serving(yard) as served:
        served.org = org
        await yard.configs.set(
            role,
            "send_message",
            {**SECRETS, "telegram_bot_token": FakeTelegram.TOKEN, "telegram_api_base": telegram.base},
        )
        yield served
