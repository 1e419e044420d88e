"""A served app with one binding per channel (settings.toml in the test's home), the role's inbound secrets, and
each channel's API on 127.0.0.1 (Telegram, Slack, Feishu, WeCom, DingTalk) for the replies and the inbound files."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.channels.vendors import FakeDingtalk, FakeFeishu, FakeSlack, FakeTelegram, FakeWecom
from support.channels.webhooks import SECRETS
from support.service import Served, serving

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

__all__ = ["SECRETS", "agent_model", "dingtalk", "feishu", "hooked", "slack", "telegram", "wecom"]


@pytest.fixture
def agent_model() -> str:
    """The served agent's model (a test module overrides it for other scripts)."""
    return f"script:{EXAMPLES}/agents/notes/demo.yaml"


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    api = FakeTelegram()
    with api.serving():
        yield api


@pytest.fixture
def feishu() -> Iterator[FakeFeishu]:
    api = FakeFeishu()
    with api.serving():
        yield api


@pytest.fixture
def wecom() -> Iterator[FakeWecom]:
    api = FakeWecom()
    with api.serving():
        yield api


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    api = FakeSlack()
    with api.serving():
        yield api


@pytest.fixture
def dingtalk() -> Iterator[FakeDingtalk]:
    api = FakeDingtalk()
    with api.serving():
        yield api


@pytest.fixture
async def hooked(
    db_env: str,
    home: Path,
    agent_model: str,
    telegram: FakeTelegram,
    feishu: FakeFeishu,
    wecom: FakeWecom,
    dingtalk: FakeDingtalk,
    slack: FakeSlack,
) -> AsyncIterator[Served]:
    role, org = "hooks-" + uuid.uuid4().hex[:8], "org-" + uuid.uuid4().hex[:8]
    lines = [f'[service]\nmodel = "{agent_model}"\n']
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
            {
                **SECRETS,
                "telegram_bot_token": FakeTelegram.TOKEN,
                "telegram_api_base": telegram.base,
                "feishu_app_id": FakeFeishu.APP_ID,
                "feishu_app_secret": FakeFeishu.APP_SECRET,
                "feishu_api_base": feishu.base,
                "wecom_corp_secret": FakeWecom.CORP_SECRET,
                "wecom_agent_id": FakeWecom.AGENT_ID,
                "wecom_api_base": wecom.base,
                "dingtalk_app_key": FakeDingtalk.APP_KEY,
                "dingtalk_robot_code": FakeDingtalk.ROBOT,
                "dingtalk_api_base": dingtalk.base,
                "slack_bot_token": FakeSlack.TOKEN,
                "slack_api_base": slack.base + "/api",
            },
        )
        yield served
