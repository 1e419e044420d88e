"""A run's own credentials are masked in every envelope field, in offload files and in log lines at any verbosity,
with their base64, hex and URL-encoded forms (credentials.py); the name rules for parameters and configs."""

from __future__ import annotations

import base64
import json
import logging
from urllib.parse import quote

import pytest

from skillyard import SkillYard
from skillyard.credentials import Masker, looks_secret, secret_config

TOKEN = "tok-3f9a7c2b1e"
FRONT = "name: {name}\ndescription: d\n{extra}metadata:\n  openclaw:\n    requires:\n      env: [SERVICE_TOKEN]\n"
LEAKY = f"""
import base64, json, sys
from urllib.parse import quote
token = {TOKEN!r}
print("debug: token is " + token, file=sys.stderr)
seen = [token, base64.b64encode(token.encode()).decode()]
debug = quote(token, safe="") + " " + token.encode().hex()
print(json.dumps({{"ok": False, "error": "failed", "details": {{"seen": seen}}, "debug": debug}}))
"""


def _assert_masked(text: str) -> None:
    forms = [TOKEN, base64.b64encode(TOKEN.encode()).decode(), TOKEN.encode().hex(), quote(TOKEN, safe="")]
    for form in forms:
        assert form not in text, form


@pytest.fixture
def leaky(make_skill, monkeypatch):
    monkeypatch.setenv("SERVICE_TOKEN", TOKEN)
    extra = "exec:\n  config: leak.sh\n  primary:\n    type: SHELL\n"
    files = {"leak.py": LEAKY, "leak.sh": 'exec python3 "$(dirname "$0")/leak.py"\n'}
    make_skill("leaky", frontmatter=FRONT.format(name="leaky", extra=extra), files=files)


async def test_a_failures_nested_fields_and_encoded_forms_are_masked(leaky, skills_root, caplog):
    caplog.set_level(logging.DEBUG, logger="skillyard")
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("leaky", {})
    assert envelope["ok"] is False, envelope
    _assert_masked(json.dumps(envelope))
    assert "***" in json.dumps(envelope["details"])
    log_text = "\n".join(r.getMessage() for r in caplog.records)
    assert "debug: token is ***" in log_text  # the stderr line, logged at -v/-vv, masked
    _assert_masked(log_text)


async def test_a_success_and_its_offload_file_are_masked(make_skill, skills_root, monkeypatch, home):
    monkeypatch.setenv("SERVICE_TOKEN", TOKEN)
    handler = f"async def execute(i, c):\n    return {{'echo': {TOKEN!r}, 'rows': ['{TOKEN} ' + 'x' * 200] * 3000}}\n"
    make_skill("big", frontmatter=FRONT.format(name="big", extra=""), files={"handler.py": handler})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("big", {})
    assert envelope["ok"] is True and envelope.get("offloaded") is True, envelope
    with open(envelope["offload_file"], encoding="utf-8") as file:
        offloaded = file.read()
    assert "***" in offloaded
    _assert_masked(offloaded + json.dumps(envelope))


def test_the_masker_needs_six_characters_and_knows_the_encodings():
    assert Masker.of(["12345"]) is None and Masker.of([]) is None
    masker = Masker.of(["s3cr3t!", "other-secret"])
    assert masker is not None
    text = f"a s3cr3t! b {base64.b64encode(b's3cr3t!').decode()} c {b'other-secret'.hex()} d {quote('s3cr3t!')}"
    assert masker.text(text) == "a *** b *** c *** d ***"
    assert masker.value({"s3cr3t!": ["x other-secret"], "n": 1}) == {"***": ["x ***"], "n": 1}


@pytest.mark.parametrize(
    "name",
    [
        "db_passwd",
        "pwd",
        "ssh_passphrase",
        "session_cookie",
        "bearer",
        "tls_pem",
        "private_key",
        "session_key",
        "slack_webhook",
        "api_token",
    ],
)
def test_config_keys_the_wider_rule_encrypts(name):
    assert secret_config(name)


@pytest.mark.parametrize("name", ["signature", "private", "region", "count"])
def test_parameters_models_keep(name):
    """The spec's list strips parameters; the wider config words do not, so an email signature stays."""
    assert not looks_secret(name) and not secret_config(name)
    assert secret_config(name, declared=[name.upper()])  # a skill may declare any of its config keys secret
