"""The environment helpers builtin_env_* (builtins/env.py): time with Java patterns, ids, random numbers, hashes."""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import datetime
from typing import Any

import pytest

from skillyard.agent.builtins import call_builtin
from skillyard.agent.codes import ErrorCode
from skillyard.agent.context import NodeContext
from support.agent.context import refused
from support.agent.kit import Kit
from support.agent.memo import MemoAgent, last, run_builtin
from support.agent.probes import call, needs_db, say

ENV_CASES = [
    ("uuid", "builtin_env_generate_uuid", {}, lambda r: len(r["uuid"]) == 36 and r["uuid"].count("-") == 4),
    ("uuid 8", "builtin_env_generate_uuid", {"length": 8}, lambda r: len(r["uuid"]) == 8 and "-" not in r["uuid"]),
    (
        "format default",
        "builtin_env_format_datetime",
        {"input": "2024-05-01T08:30:05"},
        lambda r: r["result"] == "2024-05-01 08:30:05",
    ),
    (
        "format java",
        "builtin_env_format_datetime",
        {"input": "2024-05-01T20:30:05.123+08:00", "outputPattern": "yyyy/MM/dd hh:mm a SSS EEE MMM XXX Z"},
        lambda r: r["result"] == "2024/05/01 08:30 PM 123 Wed May +08:00 +0800",
    ),
    (
        "format quoted",
        "builtin_env_format_datetime",
        {"input": "2024-05-01", "outputPattern": "yyyy'年'MM'月'dd'日' 'at' HH''mm"},
        lambda r: r["result"] == "2024年05月01日 at 00'00",
    ),
    (
        "format input pattern",
        "builtin_env_format_datetime",
        {"input": "01/05/24 7:05", "inputPattern": "dd/MM/yy H:mm", "outputPattern": "yyyy-MM-dd HH:mm"},
        lambda r: r["result"] == "2024-05-01 07:05",
    ),
    (
        "format compact",
        "builtin_env_format_datetime",
        {"input": "20240501", "outputPattern": "EEEE d MMMM yyyy"},
        lambda r: r["result"] == "Wednesday 1 May 2024",
    ),
    (
        "add month end",
        "builtin_env_add_datetime",
        {"base": "2024-01-31", "amount": 1, "unit": "Months"},
        lambda r: r["result"] == "2024-02-29",
    ),
    (
        "add hours to a date",
        "builtin_env_add_datetime",
        {"base": "2024-05-01", "amount": 36, "unit": "hour"},
        lambda r: r["result"] == "2024-05-02 12:00:00",
    ),
    (
        "add negative days",
        "builtin_env_add_datetime",
        {"base": "2024-03-01 10:00:00", "amount": -1},
        lambda r: r["result"] == "2024-02-29 10:00:00",
    ),
    (
        "add years leap",
        "builtin_env_add_datetime",
        {"base": "2024-02-29", "amount": 1, "unit": "years"},
        lambda r: r["result"] == "2025-02-28",
    ),
    (
        "diff days",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01", "to": "2024-04-01"},
        lambda r: r["result"] == -30,
    ),
    (
        "diff months unfinished",
        "builtin_env_diff_datetime",
        {"from": "2024-01-31", "to": "2024-02-29", "unit": "month"},
        lambda r: r["result"] == 0,
    ),
    (
        "diff years",
        "builtin_env_diff_datetime",
        {"from": "2020-02-29", "to": "2024-02-28", "unit": "years"},
        lambda r: r["result"] == 3,
    ),
    (
        "diff hours",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01T00:00:00", "to": "2024-05-02T01:59:59", "unit": "HOURS"},
        lambda r: r["result"] == 25,
    ),
    (
        "weekday",
        "builtin_env_get_weekday",
        {"date": "2024-05-05"},
        lambda r: (r["weekday"], r["number"], r["weekdayZh"]) == ("Sunday", 7, "星期日"),
    ),
    ("random fixed", "builtin_env_random_int", {"min": 4, "max": 4}, lambda r: r["result"] == 4),
    ("random range", "builtin_env_random_int", {"min": -2, "max": 2}, lambda r: -2 <= r["result"] <= 2),
    (
        "hash default",
        "builtin_env_hash",
        {"input": "abc"},
        lambda r: r["hash"] == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ),
    (
        "hash md5 cut",
        "builtin_env_hash",
        {"input": "abc", "algorithm": "MD5", "length": 8},
        lambda r: r["hash"] == "90015098",
    ),
    (
        "hash sha1",
        "builtin_env_hash",
        {"input": "季度", "algorithm": "sha1"},
        lambda r: r["hash"] == __import__("hashlib").sha1("季度".encode()).hexdigest(),
    ),
    (
        "now",
        "builtin_env_current_datetime",
        {},
        lambda r: (
            {"datetime", "date", "iso", "weekday", "timezone", "timestamp"} <= set(r)
            and isinstance(r["timestamp"], int)
            and r["timestamp"] > 1_700_000_000_000
        ),
    ),
]


ENV_CASES_KIT = [
    ("uuid 32", "builtin_env_generate_uuid", {"length": 32}, lambda r: len(r["uuid"]) == 32 and "-" not in r["uuid"]),
    (
        "format slashes",
        "builtin_env_format_datetime",
        {"input": "2024/05/01 08:30:05", "outputPattern": "dd.MM.yyyy HH:mm"},
        lambda r: r["result"] == "01.05.2024 08:30",
    ),
    (
        "format strftime",
        "builtin_env_format_datetime",
        {"input": "2024-05-01", "outputPattern": "%Y年%m月%d日"},
        lambda r: r["result"] == "2024年05月01日",
    ),
    (
        "format 12h",
        "builtin_env_format_datetime",
        {"input": "2024-05-01T00:05:00", "outputPattern": "h:mm a"},
        lambda r: r["result"] == "12:05 AM",
    ),
    (
        "add weeks",
        "builtin_env_add_datetime",
        {"base": "2024-05-01", "amount": 2, "unit": "weeks"},
        lambda r: r["result"] == "2024-05-15",
    ),
    (
        "add minutes",
        "builtin_env_add_datetime",
        {"base": "2024-05-01 23:50:00", "amount": 15, "unit": "MINUTES"},
        lambda r: r["result"] == "2024-05-02 00:05:00",
    ),
    (
        "add months from a datetime",
        "builtin_env_add_datetime",
        {"base": "2024-03-31 10:00:00", "amount": -1, "unit": "month"},
        lambda r: r["result"] == "2024-02-29 10:00:00",
    ),
    (
        "diff weeks",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01", "to": "2024-05-20", "unit": "weeks"},
        lambda r: r["result"] == 2,
    ),
    (
        "diff minutes negative",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01T10:00:00", "to": "2024-05-01T09:29:30", "unit": "minutes"},
        lambda r: r["result"] == -30,
    ),
    (
        "diff seconds across a compact date",
        "builtin_env_diff_datetime",
        {"from": "20240501", "to": "2024-05-01T00:01:01", "unit": "seconds"},
        lambda r: r["result"] == 61,
    ),
    (
        "weekday monday",
        "builtin_env_get_weekday",
        {"date": "2024-04-29"},
        lambda r: (r["weekday"], r["number"]) == ("Monday", 1),
    ),
    (
        "hash sha512 cut",
        "builtin_env_hash",
        {"input": "abc", "algorithm": "sha512", "length": 16},
        lambda r: r["hash"] == __import__("hashlib").sha512(b"abc").hexdigest()[:16],
    ),
    ("random negative", "builtin_env_random_int", {"min": -5, "max": -5}, lambda r: r["result"] == -5),
    (
        "now is consistent",
        "builtin_env_current_datetime",
        {},
        lambda r: r["date"] == r["datetime"][:10] and r["iso"][:10] == r["date"],
    ),
]


# env -----------------------------------------------------------------------------------------------------------
async def env(ctx: NodeContext, name: str, **args: Any) -> Any:
    obs = await call_builtin(ctx, f"builtin_env_{name}", args)
    assert obs.ok, obs.content
    return obs.content


async def env_refused(ctx: NodeContext, name: str, **args: Any) -> str:
    return refused(await call_builtin(ctx, f"builtin_env_{name}", args), ErrorCode.ARG_REJECTED)


@pytest.mark.parametrize(("case", "name", "arguments", "check"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
@needs_db
async def test_env_helpers(memo_agent: MemoAgent, case: str, name: str, arguments: dict[str, Any], check: Any):
    turn = await run_builtin(memo_agent, name, arguments)
    obs = last(turn)
    assert obs.ok and obs.code is None, obs
    assert check(obs.content), obs.content


@needs_db
@pytest.mark.parametrize(("case", "name", "arguments", "check"), ENV_CASES_KIT, ids=[c[0] for c in ENV_CASES_KIT])
async def test_more_env_helpers(kit: Kit, case: str, name: str, arguments: dict[str, Any], check: Any):
    turn = await kit.send("x", call(name, arguments), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.code is None, obs
    assert check(obs.content), obs.content


@needs_db
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param({"input": "1714523405"}, "2024-05-01 08:30:05", id="epoch-seconds"),
        pytest.param(
            {"input": "1714523405123", "outputPattern": "yyyy-MM-dd HH:mm:ss.SSS"},
            "2024-05-01 08:30:05.123",
            id="epoch-millis",
        ),
        pytest.param(
            {"input": "2024-05-01T08:30:05", "outputPattern": "yyyy-MM-dd'T'HH:mm:ssXXX Z"},
            "2024-05-01T08:30:05+08:00 +0800",
            id="local-zone",
        ),
    ],
)
async def test_format_datetime_reads_epochs_as_local_time(kit: Kit, shanghai: None, arguments: dict, expected: str):
    turn = await kit.send("x", call("builtin_env_format_datetime", arguments), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.content["result"] == expected, obs


@needs_db
async def test_generate_uuid_is_a_version_4_uuid(kit: Kit):
    turn = await kit.send("x", call("builtin_env_generate_uuid"), say("stop"))
    assert uuid.UUID(turn.observations[0].content["uuid"]).version == 4


async def test_env_current_datetime(ctx):
    now = await env(ctx, "current_datetime")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", now["datetime"]) and now["date"] == now["datetime"][:10]
    assert abs(now["timestamp"] / 1000 - datetime.now().timestamp()) < 5


async def test_env_generate_uuid(ctx):
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", (await env(ctx, "generate_uuid"))["uuid"]
    )
    assert re.fullmatch(r"[0-9a-f]{12}", (await env(ctx, "generate_uuid", length=12))["uuid"])
    await env_refused(ctx, "generate_uuid", length=33)


async def test_env_format_datetime(ctx):
    fmt = "format_datetime"
    assert (await env(ctx, fmt, input="2024-05-01T08:30:05"))["result"] == "2024-05-01 08:30:05"
    out = await env(
        ctx, fmt, input="01/05/2024 8:30", inputPattern="dd/MM/yyyy H:mm", outputPattern="yyyy年M月d日 EEEE"
    )
    assert out["result"] == "2024年5月1日 Wednesday"
    out = await env(ctx, fmt, input="20240501", outputPattern="yy-MMM-dd 'at' hh:mm:ss.SSS a")
    assert out["result"] == "24-May-01 at 12:00:00.000 AM"
    assert (await env(ctx, fmt, input="2024/05/01", outputPattern="%d.%m.%Y"))["result"] == "01.05.2024"
    out = await env(ctx, fmt, input="2024-05-01T08:30:00+08:00", outputPattern="yyyy-MM-dd'T'HH:mmXXX")
    assert out["result"] == "2024-05-01T08:30+08:00"
    assert "inputPattern" in await env_refused(ctx, fmt, input="May first")
    assert "does not match" in await env_refused(ctx, fmt, input="2024-05-01", inputPattern="dd/MM/yyyy")
    assert "not supported" in await env_refused(ctx, fmt, input="2024-05-01", outputPattern="yyyy QQ")


async def test_env_add_datetime(ctx):
    add = "add_datetime"
    assert (await env(ctx, add, base="2024-05-01", amount=3))["result"] == "2024-05-04"
    assert (await env(ctx, add, base="2024-01-31", amount=1, unit="MONTHS"))["result"] == "2024-02-29"
    assert (await env(ctx, add, base="2024-02-29", amount=-1, unit="year"))["result"] == "2023-02-28"
    assert (await env(ctx, add, base="2024-05-01", amount=-2, unit="hours"))["result"] == "2024-04-30 22:00:00"
    assert (await env(ctx, add, base="2024-05-01 10:00:00", amount=2, unit="weeks"))["result"] == "2024-05-15 10:00:00"
    assert "unit" in await env_refused(ctx, add, base="2024-05-01", amount=1, unit="fortnights")


async def test_env_diff_datetime(ctx):
    diff = "diff_datetime"
    assert (await env(ctx, diff, **{"from": "2024-05-01", "to": "2024-05-11"}))["result"] == 10
    assert (await env(ctx, diff, **{"from": "2024-05-11", "to": "2024-05-01"}))["result"] == -10
    assert (await env(ctx, diff, **{"from": "2024-01-31", "to": "2024-02-29", "unit": "months"}))["result"] == 0
    assert (await env(ctx, diff, **{"from": "2024-01-31", "to": "2024-03-01", "unit": "months"}))["result"] == 1
    assert (await env(ctx, diff, **{"from": "2020-06-01", "to": "2024-05-31", "unit": "years"}))["result"] == 3
    assert (await env(ctx, diff, **{"from": "2024-06-01", "to": "2020-06-02", "unit": "years"}))["result"] == -3
    assert (await env(ctx, diff, **{"from": "2024-05-01 08:00:00", "to": "2024-05-01 10:59:00", "unit": "h"}))[
        "result"
    ] == 2


async def test_env_get_weekday(ctx):
    day = await env(ctx, "get_weekday", date="2024-05-01")
    assert (day["weekday"], day["number"], day["weekdayZh"]) == ("Wednesday", 3, "星期三")


async def test_env_random_int(ctx):
    seen = {(await env(ctx, "random_int", min=1, max=3))["result"] for _ in range(60)}
    assert seen == {1, 2, 3}
    assert (await env(ctx, "random_int", min=5, max=5))["result"] == 5
    await env_refused(ctx, "random_int", min=5, max=4)


async def test_env_hash(ctx):
    assert (await env(ctx, "hash", input="abc"))["hash"] == hashlib.sha256(b"abc").hexdigest()
    out = await env(ctx, "hash", input="abc", algorithm="MD5", length=8)
    assert out == {"hash": hashlib.md5(b"abc").hexdigest()[:8], "algorithm": "md5"}
    assert (await env(ctx, "hash", input="abc", algorithm="SHA-1"))["hash"] == hashlib.sha1(b"abc").hexdigest()
    assert "sha256" in await env_refused(ctx, "hash", input="abc", algorithm="crc32")
    await env_refused(ctx, "hash", input="abc", algorithm="md5", length=40)
