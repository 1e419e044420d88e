"""The envelope (§6.1): normalization of what skills return, exceptions, wall clock."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from skillyard import SkillYard
from skillyard.envelope import normalize


@pytest.mark.parametrize(
    ("raw", "ok"),
    [
        ({"success": False, "error": "x"}, False),
        ({"ok": False, "error": "x"}, False),
        ({"ok": None}, True),
        ({}, True),
        ({"success": True}, True),
        ({"ok": "false", "error": "e"}, False),
        ({"ok": 0, "error": "e"}, False),
    ],
)
def test_success_and_ok_false_mean_failure_missing_or_none_do_not(raw, ok):
    env = normalize(raw, "s")
    assert env["ok"] is ok and env["success"] is ok


def test_failure_without_error_gets_a_specific_one():
    env = normalize({"success": False, "count": 3}, "fetch")
    assert "fetch" in env["error"] and "count" in env["error"]
    env = normalize({"ok": False, "user_message": "quota exhausted"}, "fetch")
    assert "quota exhausted" in env["error"]


def test_a_structured_or_numeric_error_is_a_reason():
    """A failure's error given as {code, message} stays as the skill gave it (an agent contract reads error.code,
    §6.2 of the contract spec); a number becomes its text; an empty structure is no reason."""
    error = {"code": "E42", "message": "库存不足"}
    assert normalize({"success": False, "error": error}, "s")["error"] == error
    assert normalize({"ok": False, "error": 404}, "s")["error"] == "404"
    for empty in ({}, [], "  ", None, False):
        assert "reported failure without an error message" in normalize({"ok": False, "error": empty}, "s")["error"]


async def test_credentials_are_redacted_inside_a_structured_error(make_skill, skills_root):
    make_skill(
        "structured",
        frontmatter="name: structured\ndescription: d",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"ok": False, "error": {"code": "E1", "detail": [f"token {ctx['api_token']} refused"]}}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("structured", context={"skill_args": {"api_token": "cfg-secret-789"}})
    assert env["error"] == {"code": "E1", "detail": ["token *** refused"]}, env


def test_failure_fields_are_kept():
    raw = {
        "ok": False,
        "error": "e",
        "user_message": "u",
        "need_param": "p",
        "error_type": "config",
        "non_retriable": True,
        "redirect": "other",
        "action_note": "a → b",
    }
    env = normalize(raw, "s")
    assert {k: env[k] for k in raw if k != "ok"} == {k: v for k, v in raw.items() if k != "ok"}


def test_results_become_plain_json():
    env = normalize({"when": dt.date(2024, 1, 2), "tags": {"a"}, "blob": b"hi", "n": float("nan")}, "s")
    assert json.loads(json.dumps(env)) == env
    assert env["when"] == "2024-01-02" and env["tags"] == ["a"] and env["n"] == "nan"
    assert normalize([1, 2], "s")["result"] == [1, 2]


async def test_exceptions_become_failure_envelopes(make_skill, skills_root, caplog):
    make_skill(
        "boom",
        files={
            "handler.py": """
        async def execute(input, ctx):
            kind = input.get("kind")
            if kind == "os":
                raise OSError("disk on fire")
            if kind == "refused":
                raise ConnectionRefusedError(111, "Connection refused")
            if kind == "timeout":
                raise TimeoutError("upstream slow")
            raise ValueError("bad value")
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        os_env = await yard.run("boom", {"kind": "os"})
        refused = await yard.run("boom", {"kind": "refused"})
        own_timeout = await yard.run("boom", {"kind": "timeout"})
        value = await yard.run("boom", {})
    assert os_env["exception_type"] == "OSError" and "disk on fire" in os_env["error"]
    assert refused["exception_type"] == "ConnectionRefusedError"
    assert own_timeout["exception_type"] == "TimeoutError" and not own_timeout.get("timed_out")
    assert value["exception_type"] == "ValueError" and value["ok"] is False
    assert "Traceback" not in json.dumps(value)
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)


async def test_wall_clock_applies_to_in_process_skills(make_skill, skills_root):
    make_skill(
        "slow",
        frontmatter="name: slow\ndescription: d\nexec:\n  timeout: 0.3",
        files={
            "handler.py": """
        import asyncio
        async def execute(input, ctx):
            await asyncio.sleep(30)
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("slow")
    assert env["ok"] is False and env["timed_out"] is True and "0.3" in env["error"]


async def test_global_wall_clock_setting(make_skill, skills_root, monkeypatch):
    monkeypatch.setenv("SKILLYARD_WALL_CLOCK", "0.2")
    make_skill(
        "slow",
        files={"handler.py": "import asyncio\nasync def execute(i, c):\n    await asyncio.sleep(30)\n"},
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("slow"))["timed_out"] is True


async def test_credentials_are_redacted_from_failure_text(make_skill, skills_root, monkeypatch, caplog):
    monkeypatch.setenv("LEAKY_TOKEN", "env-secret-123")
    make_skill(
        "leaky",
        frontmatter="name: leaky\ndescription: d\nmetadata: {openclaw: {primaryEnv: LEAKY_TOKEN}}",
        files={
            "handler.py": """
        async def execute(input, ctx):
            raise RuntimeError(f"auth failed with {ctx['api_token']} and env-secret-123")
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        env = await yard.run("leaky", context={"skill_args": {"api_token": "cfg-secret-456"}})
    assert "cfg-secret-456" not in json.dumps(env) and "env-secret-123" not in json.dumps(env)
    assert "auth failed with *** and ***" in env["error"]
    assert "RuntimeError" in caplog.text and "cfg-secret-456" not in caplog.text
