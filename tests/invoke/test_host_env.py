"""Skills never receive skillyard's own SKILLYARD_* variables, even when they declare them (requires.env)."""

from __future__ import annotations

import json

from skillyard import SkillYard

DECLARES = (
    "name: {name}\ndescription: d\nmetadata:\n  openclaw:\n    requires:\n      env: [SKILLYARD_SECRET_KEY, "
    "SKILLYARD_MODEL_API_KEY, MY_TOKEN]\n    primaryEnv: SKILLYARD_SECRET_KEY\n{exec}"
)


async def test_a_subprocess_skill_declaring_skillyard_variables_gets_none(make_skill, skills_root, monkeypatch):
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", "master-key-value-123")
    monkeypatch.setenv("SKILLYARD_MODEL_API_KEY", "model-key-u:pw")
    monkeypatch.setenv("MY_TOKEN", "token-value-456")
    exec_ = "exec:\n  primary:\n    type: INLINE_SHELL\n    command: env"
    make_skill("envdump", frontmatter=DECLARES.format(name="envdump", exec=exec_))
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("envdump", {})
    text = json.dumps(envelope)
    assert "master-key-value-123" not in text and "u:pw" not in text
    assert envelope["ok"] is False and "SKILLYARD_SECRET_KEY" in envelope["needs_config"]


async def test_an_http_skill_cannot_put_a_skillyard_variable_in_a_header(make_skill, skills_root, monkeypatch):
    monkeypatch.setenv("SKILLYARD_SECRET_KEY", "master-key-value-123")
    from skillyard.executors.http import build_request

    spec = {"request": {"url": "http://127.0.0.1:9/x", "headers": {"X-Key": "${SKILLYARD_SECRET_KEY}"}, "body": "json"}}
    kwargs = build_request(spec, {}, {}, frozenset({"SKILLYARD_SECRET_KEY"}))
    assert kwargs["headers"]["X-Key"] == ""
