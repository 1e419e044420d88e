"""The result envelope (§6.1, invoke/envelope.py): normalization of what skills return, exceptions, redaction."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.envelope import MAX_RESULT_NESTING, normalize
from support.skills import run_skill


@pytest.fixture
def ret_skill(make_skill, skills_root):
    make_skill("ret", files={"handler.py": "async def execute(i, c):\n    return i['ret']\n"})
    return skills_root


async def ret(root: Path, value: Any) -> dict[str, Any]:
    return await run_skill(root, "ret", {"ret": value})


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


@pytest.mark.spec("§6.2")
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


def _nested(levels: int, kind: type = dict) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value} if kind is dict else kind([value])
    return value


@pytest.mark.parametrize("kind", [dict, list, tuple])
def test_a_result_nested_past_the_limit_is_a_failure_naming_it(kind):
    """The envelope is the first level: MAX_RESULT_NESTING levels are kept, one more is refused, never a
    RecursionError of the host (a dropped-in skill's output is untrusted)."""
    kept = normalize({"r": _nested(MAX_RESULT_NESTING - 1, kind)}, "s")
    assert kept["ok"] is True and json.loads(json.dumps(kept)) == kept
    refused = normalize({"r": _nested(MAX_RESULT_NESTING, kind)}, "s")
    assert refused["ok"] is False and f"nested more than {MAX_RESULT_NESTING} levels" in refused["error"]
    assert normalize(_nested(5000, kind), "s")["ok"] is False


DEEP = """
async def execute(input, context):
    value = 1
    for _ in range(input["levels"]):
        value = {"a": value}
    return {"r": value}
"""


async def test_a_skill_returning_a_deep_result_fails_cleanly(make_skill, skills_root):
    make_skill("deep", files={"handler.py": DEEP})
    async with SkillYard([skills_root]) as yard:
        assert (await yard.run("deep", {"levels": MAX_RESULT_NESTING - 1}))["ok"] is True
        for levels in (MAX_RESULT_NESTING, 5000):
            refused = await yard.run("deep", {"levels": levels})
            assert refused["ok"] is False and "return flatter data" in refused["error"], refused


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


@pytest.mark.spec("§6.1")
@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"ok": False, "error": "x"}, False),
        ({"success": False, "error": "x"}, False),
        ({"success": None, "data": 1}, True),
        ({"ok": None}, True),
        ({}, True),
        ({"data": {"a": 1}}, True),
        ({"success": True, "ok": False, "error": "x"}, False),
        ({"ok": True, "success": False, "error": "x"}, False),
        ({"ok": "false", "error": "x"}, False),
    ],
)
async def test_ok_success_normalization(ret_skill, value, ok):
    """Issue: 'Normalize every result per §6.1: `success`/`ok` False means failure (missing or None does not)'; docs:
    'Both `ok` and `success` are always set.'"""
    env = await ret(ret_skill, value)
    assert env["ok"] is ok and env["success"] is ok


async def test_failure_without_error_gets_specific_one(ret_skill):
    """Issue: 'a failure without `error` gets a specific one (skill name, what was returned)'."""
    env = await ret(ret_skill, {"ok": False, "count": 3})
    assert env["ok"] is False and "ret" in env["error"] and "count" in env["error"]


@pytest.mark.spec("§6.1")
async def test_failure_with_empty_error_gets_specific_one(ret_skill):
    """Spec §6.1: 'error ... 失败必须给原因'; issue: 'a failure without `error` gets a specific one'."""
    env = await ret(ret_skill, {"success": False, "error": "", "user_message": "票据已过期"})
    assert env["error"].strip() and "ret" in env["error"]


async def test_failure_fields_kept(ret_skill):
    """Issue: 'keep `user_message`, `need_param`, `error_type`, `non_retriable`, `redirect`, `action_note`'."""
    value = {
        "success": False,
        "error": "bad",
        "user_message": "um",
        "need_param": "np",
        "error_type": "recoverable",
        "non_retriable": True,
        "redirect": "other",
        "action_note": "initialize → 初始化",
        "extra": 1,
    }
    env = await ret(ret_skill, value)
    for k, v in value.items():
        if k != "success":
            assert env[k] == v, k
    assert env["skill"] == "ret"


@pytest.mark.spec("§6.1")
async def test_action_note_kept_on_success(ret_skill):
    """Spec §6.1: 'action_note ... 成功失败都可带'."""
    env = await ret(ret_skill, {"success": True, "action_note": "a → b"})
    assert env["ok"] is True and env["action_note"] == "a → b"


async def test_envelope_json_serializable_odd_values(make_skill, skills_root):
    """Issue: '`yard.run` returns the normalized envelope as a plain `dict` (JSON-serializable)'."""
    make_skill(
        "odd",
        files={
            "handler.py": """
        import datetime, decimal, uuid, pathlib
        async def execute(i, c):
            return {"when": datetime.datetime(2024, 1, 2, 3, 4, tzinfo=datetime.timezone.utc), "d": datetime.date(2024,
            1, 2),
                    "dec": decimal.Decimal("1.50"), "u": uuid.UUID(int=1), "p": pathlib.Path("/x"), "s": {1},
                    "b": b"hi", "o": object(), "t": (1, 2), 5: "intkey", "nested": {"x": float("nan")}}
    """
        },
    )
    env = await run_skill(skills_root, "odd")
    assert type(env) is dict
    json.dumps(env, allow_nan=False)
    assert env["ok"] is True and env["dec"] == "1.50" and env["p"] == "/x"


async def test_error_type_transient_for_oserror(make_skill, skills_root):
    """docs/authoring.md: '`error_type` `transient` for `OSError` (network, files) or `recoverable` otherwise.'"""
    make_skill("ose", files={"handler.py": "async def execute(i, c):\n    raise FileNotFoundError('nofile')\n"})
    env = await run_skill(skills_root, "ose")
    assert env["error_type"] == "transient" and env["exception_type"] == "FileNotFoundError"


async def test_in_process_secret_scrubbed_from_exception(make_skill, skills_root):
    """docs/authoring.md: 'Credential values the run could see (credential configs ...) are replaced by `***` in
    `error`'."""
    make_skill(
        "sx2", files={"handler.py": "async def execute(i, c):\n    raise ValueError('bad key ' + c['api_token'])\n"}
    )
    env = await run_skill(skills_root, "sx2", skill_configs={"api_token": "hunter2hunter2"})
    assert env["ok"] is False and "hunter2hunter2" not in json.dumps(env)
