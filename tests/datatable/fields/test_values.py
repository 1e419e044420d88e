"""Value converters of the text, date and time, 勾选, select, contact and JSON types (fields/values.py, spec §7.5)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from skillyard import SkillYard
from support.datatable import context, count, make_numbered_table, run
from support.datatable.fields import one, refused, validator

SELECT = {"options": ["研发", "销售", "市场", "2024"]}


@pytest.mark.parametrize("uidt", ["文本", "长文本"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("张三", "张三"),
        (" 张三 ", " 张三 "),  # text content is kept as written
        ("第一行\n第二行", "第一行\n第二行"),
        (12, "12"),
        (12.5, "12.5"),
        (Decimal("12.50"), "12.50"),
        (date(2024, 5, 1), "2024-05-01"),
        ("MA20偏离%", "MA20偏离%"),  # values are not identifiers
    ],
)
def test_text(uidt: str, value: Any, expected: str) -> None:
    assert one(uidt, value) == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (True, "true/false"),
        (["a", "b"], "expected text, got list"),
        ({"a": 1}, "expected text, got dict"),
        ("a\x00b", "NUL"),
        (float("nan"), "not a finite number"),
    ],
)
def test_text_refuses(value: Any, fragment: str) -> None:
    refused("文本", value, fragment)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01", date(2024, 5, 1)),
        (" 2024-05-01 ", date(2024, 5, 1)),
        ("2024-02-29", date(2024, 2, 29)),
        ("2024-05-01 00:00:00", date(2024, 5, 1)),
        ("2024-05-01T00:00", date(2024, 5, 1)),
        ("2024-05-01 00:00:00.000", date(2024, 5, 1)),
        (date(2024, 5, 1), date(2024, 5, 1)),
        (datetime(2024, 5, 1), date(2024, 5, 1)),
    ],
)
def test_date(value: Any, expected: date) -> None:
    result = one("日期", value)
    assert result == expected and type(result) is date


@pytest.mark.parametrize(
    "value",
    [
        "2024/05/01",
        "2024-5-1",
        "05/01/2024",
        "20240501",
        "2024-W18-3",
        "2024-02-30",
        "2024-13-01",
        "2024年5月1日",
        "2024-05-01 09:30",
        "2024-05-01T00:00Z",
        "2024-05-01 00:00:00+08:00",
        "2024-05-01x",
        "2024-05",
    ],
)
def test_date_refuses_non_iso_text(value: str) -> None:
    refused("日期", value, "is not an ISO date", "YYYY-MM-DD")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (datetime(2024, 5, 1, 9, 30), "has a time of day"),
        (datetime(2024, 5, 1, tzinfo=UTC), "has a time of day"),
        (20240501, "expected an ISO date"),
        (1714521600.0, "expected an ISO date"),
        (True, "expected an ISO date"),
    ],
)
def test_date_refuses(value: Any, fragment: str) -> None:
    refused("日期", value, fragment)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01 09:30", datetime(2024, 5, 1, 9, 30, tzinfo=UTC)),
        ("2024-05-01T09:30:15", datetime(2024, 5, 1, 9, 30, 15, tzinfo=UTC)),
        ("2024-05-01T09:30:15.123456", datetime(2024, 5, 1, 9, 30, 15, 123456, tzinfo=UTC)),
        ("2024-05-01T09:30:00Z", datetime(2024, 5, 1, 9, 30, tzinfo=UTC)),
        ("2024-05-01T09:30:00+08:00", datetime(2024, 5, 1, 1, 30, tzinfo=UTC)),
        ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        (datetime(2024, 5, 1, 9, 30), datetime(2024, 5, 1, 9, 30, tzinfo=UTC)),
        (date(2024, 5, 1), datetime(2024, 5, 1, tzinfo=UTC)),
    ],
)
def test_datetime_naive_is_utc_by_default(value: Any, expected: datetime) -> None:
    result = one("日期时间", value)
    assert result == expected and result.tzinfo is not None


def test_datetime_keeps_the_given_offset() -> None:
    result = one("日期时间", "2024-05-01T09:30:00+08:00")
    assert result.utcoffset() == timedelta(hours=8)
    aware = datetime(2024, 5, 1, 9, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert one("日期时间", aware) is aware


@pytest.mark.parametrize(
    "zone", [timezone(timedelta(hours=8)), ZoneInfo("Asia/Shanghai")], ids=["fixed-offset", "zoneinfo"]
)
def test_datetime_naive_zone_is_configurable(zone: Any) -> None:
    v = validator({"title": "t", "uidt": "日期时间"}, naive_tz=zone)
    for value in ("2024-05-01 09:30", datetime(2024, 5, 1, 9, 30)):
        result = v.validate({"t": value}, insert=False)[0]["t"]
        assert result == datetime(2024, 5, 1, 1, 30, tzinfo=UTC)
        assert result.utcoffset() == timedelta(hours=8)
    assert v.validate({"t": "2024-05-01"}, insert=False)[0]["t"] == datetime(2024, 4, 30, 16, tzinfo=UTC)
    # an explicit offset wins over the configured zone
    assert v.validate({"t": "2024-05-01T09:30Z"}, insert=False)[0]["t"] == datetime(2024, 5, 1, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "value",
    [
        "2024/05/01 09:30",
        "2024-05-01 9:30",
        "2024-05-01_09:30",
        "20240501T0930",
        "09:30",
        "2024-05-01 25:00",
        "yesterday",
    ],
)
def test_datetime_refuses_non_iso_text(value: str) -> None:
    refused("日期时间", value, "is not an ISO 8601 date-time")


@pytest.mark.parametrize("value", [1714521600, 1714521600.5, True, [2024, 5, 1], time(9, 30)])
def test_datetime_refuses_other_types(value: Any) -> None:
    refused("日期时间", value, "expected an ISO 8601 date-time")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("09:30", time(9, 30)),
        ("9:30", time(9, 30)),
        ("09:30:15", time(9, 30, 15)),
        (" 23:59:59 ", time(23, 59, 59)),
        ("00:00", time(0)),
        ("09:30:15.5", time(9, 30, 15, 500000)),
        (time(9, 30), time(9, 30)),
    ],
)
def test_time(value: Any, expected: time) -> None:
    assert one("时间", value) == expected


@pytest.mark.parametrize(
    "value", ["24:00", "25:00", "09:60", "0930", "09", "9.30", "09:30+08:00", "09:30Z", "上午9点", "09:30:", "09:3"]
)
def test_time_refuses_text(value: str) -> None:
    refused("时间", value, "is not a time of day")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (time(9, 30, tzinfo=UTC), "carries a time zone"),
        (datetime(2024, 5, 1, 9, 30), "expected a time"),
        (930, "expected a time"),
    ],
)
def test_time_refuses(value: Any, fragment: str) -> None:
    refused("时间", value, fragment)


@pytest.mark.parametrize(
    "value",
    [True, 1, "true", "TRUE", " True ", "t", "yes", "Y", "1", "on", "checked", "是", "真", "对", "有", "√", "✓"],
)
def test_checkbox_true(value: Any) -> None:
    assert one("勾选", value) is True


@pytest.mark.parametrize(
    "value", [False, 0, "false", "F", "no", "N", "0", "off", "unchecked", "否", "假", "错", "无", "×", "✗"]
)
def test_checkbox_false(value: Any) -> None:
    assert one("勾选", value) is False


@pytest.mark.parametrize("value", ["maybe", "2", 2, -1, 1.0, "是的", [True], {"v": 1}])
def test_checkbox_refuses(value: Any) -> None:
    refused("勾选", value, "is not a yes/no value", "true/false")


@pytest.mark.parametrize(
    ("value", "expected"), [("研发", "研发"), (" 销售 ", "销售"), (2024, "2024"), ("2024", "2024")]
)
def test_single_select(value: Any, expected: str) -> None:
    assert one("单选", value, **SELECT) == expected


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("财务", "'财务' is not one of the options (研发, 销售, 市场, 2024)"),
        ("研发,销售", "is not one of the options"),
        ("研发部", "is not one of the options"),
        (["研发"], "expected an option as text"),
        (True, "expected an option as text"),
    ],
)
def test_single_select_refuses(value: Any, fragment: str) -> None:
    message = refused("单选", value, fragment, **SELECT)
    assert "update_field" in message or "expected" in message


def test_single_select_long_option_list_is_shortened_in_errors() -> None:
    options = [f"选项{i}" for i in range(30)]
    message = refused("单选", "x", "(30 in all)", options=options)
    assert "选项25" not in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["研发", "销售"], ["研发", "销售"]),
        (["销售", "研发"], ["研发", "销售"]),  # stored in option order
        (("市场",), ["市场"]),
        (["研发", "研发", " 研发 "], ["研发"]),  # de-duplicated
        ("研发,销售", ["研发", "销售"]),
        ("销售，研发", ["研发", "销售"]),
        ("研发、市场", ["研发", "市场"]),
        ("研发; 销售；市场", ["研发", "销售", "市场"]),
        ("研发", ["研发"]),
        ('["销售", "研发"]', ["研发", "销售"]),
        ([2024, "研发"], ["研发", "2024"]),
        ("研发,,", ["研发"]),
        ([], None),
        (["", " "], None),
        (",", None),
    ],
)
def test_multi_select(value: Any, expected: list[str] | None) -> None:
    assert one("多选", value, **SELECT) == expected


def test_multi_select_option_with_separator_given_alone() -> None:
    assert one("多选", "研发、测试", options=["研发、测试", "销售"]) == ["研发、测试"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (["研发", "财务"], "'财务' not among the options"),
        ("研发,财务,行政", "'财务', '行政' not among the options"),
        ('["研发",', "not a valid JSON list"),
        ('["研发", ["销售"]]', "expected an option as text"),
        ([None], "expected an option as text"),
        ({"研发": True}, "expected an option as text"),
    ],
)
def test_multi_select_refuses(value: Any, fragment: str) -> None:
    refused("多选", value, fragment, **SELECT)


@pytest.mark.parametrize("value", ["a@b.cn", " zhang.san+x@example.com.cn ", "A_B@sub.EXAMPLE.org", "x@中文.cn"])
def test_email(value: str) -> None:
    assert one("邮箱", value) == value.strip()


@pytest.mark.parametrize(
    "value",
    [
        "abc",
        "a@b",
        "@b.cn",
        "a@",
        "a@@b.cn",
        "a@b@c.cn",
        "a b@c.cn",
        "a@.cn",
        "a@b.",
        "a@b..cn",
        "a@-b.cn",
        "a" * 250 + "@b.cn",
    ],
)
def test_email_refuses(value: str) -> None:
    refused("邮箱", value, "is not an email address")


def test_email_refuses_non_text() -> None:
    refused("邮箱", 12, "expected an email address as text")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("13800000000", "13800000000"),
        ("+86 138-0000-0000", "+86 138-0000-0000"),
        ("(010) 1234-5678", "(010) 1234-5678"),
        ("（010）１２３４５６７８", "(010)12345678"),
        (13800000000, "13800000000"),
        (13800000000.0, "13800000000"),
        (" 110 ", "110"),
    ],
)
def test_phone(value: Any, expected: str) -> None:
    assert one("电话", value) == expected


@pytest.mark.parametrize(
    "value",
    ["abc", "12", "138-0000-0000 转 123", "138.0000.0000", "86+138", "+", "1" * 21, "138#0000", "ext 123"],
)
def test_phone_refuses(value: str) -> None:
    refused("电话", value, "is not a phone number")


@pytest.mark.parametrize("value", [1.5, True, ["138"]])
def test_phone_refuses_non_text(value: Any) -> None:
    refused("电话", value, "expected a phone number")


@pytest.mark.parametrize(
    "value", ["https://example.com", "http://example.com/a?b=c#d", " HTTPS://Example.com/路径 ", "https://x.cn:8080/"]
)
def test_url(value: str) -> None:
    assert one("链接", value) == value.strip()


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("www.example.com", "is not an http(s) link"),
        ("ftp://example.com", "is not an http(s) link"),
        ("javascript:alert(1)", "is not an http(s) link"),
        ("https://", "not a valid http(s) link"),
        ("https:///path", "not a valid http(s) link"),
        ("https://exa mple.com", "not a valid http(s) link"),
        (12, "expected a link as text"),
    ],
)
def test_url_refuses(value: Any, fragment: str) -> None:
    refused("链接", value, fragment)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}),
        ([1, "二", None], [1, "二", None]),
        (5, 5),
        (1.5, 1.5),
        (True, True),
        ('{"a": 1}', {"a": 1}),
        ('{"a":1}', {"a": 1}),
        ('"hello"', "hello"),
        ("[1, 2]", [1, 2]),
        ({"d": Decimal("1.5"), "n": Decimal("2"), "day": date(2024, 5, 1)}, {"d": 1.5, "n": 2, "day": "2024-05-01"}),
        ({"nul": "a\x00b"}, {"nul": "a\x00b"}),
    ],
)
def test_json(value: Any, expected: Any) -> None:
    stored = one("JSON", value)
    assert isinstance(stored, str)
    assert json.loads(stored) == expected


@pytest.mark.spec("§7.6")
def test_json_text_has_a_space_after_colons_and_keeps_chinese() -> None:
    stored = one("JSON", {"名称": "值", "n": 0.85})
    assert stored == '{"名称": "值", "n": 0.85}'  # §7.6: ":" followed by a digit would read as a bind parameter
    assert "\x00" not in one("JSON", {"nul": "a\x00b"})


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("hello", "must be valid JSON"),
        ("{a: 1}", "must be valid JSON"),
        ({"x": {1, 2}}, "cannot be stored as JSON"),
        ({"x": float("nan")}, "cannot be stored as JSON"),
        (object(), "cannot be stored as JSON"),
    ],
)
def test_json_refuses(value: Any, fragment: str) -> None:
    refused("JSON", value, fragment)


async def test_bad_link_error_carries_no_downloadable_url(yard: SkillYard, org: str) -> None:
    """The platform materializes links found in a reply's text; a fix hint must not contain a real URL."""
    table_id = await make_numbered_table(yard, org)
    env = await run(yard, context(org), "insert", table_id=table_id, data={"姓名": "甲", "网址": "example.com"})
    assert env["ok"] is False and "网址" in env["error"]
    assert "could not download" not in json.dumps(env.get("warnings", []))
    assert "://example" not in env["error"]


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("是", True),
        ("否", False),
        ("yes", True),
        ("no", False),
        ("1", True),
        ("0", False),
        ("true", True),
        ("false", False),
        ("TRUE", True),
        (1, True),
        (0, False),
        (" 是 ", True),
    ],
)
async def test_checkbox_accepts_yes_no_words(yard: SkillYard, org: str, kinds: str, given: Any, stored: bool) -> None:
    """SKILL.md: 勾选 takes true/false; the skill's own refusal text promises "also 是/否, yes/no, 1/0"."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "完成": given})
    assert env["ok"] and env["data"]["完成"] is stored, env


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize("given", ["2", 2, "真的", "maybe", [True], {"v": True}])
async def test_checkbox_refuses_other_values(yard: SkillYard, org: str, kinds: str, given: Any) -> None:
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "完成": given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and "完成" in env["error"], env


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("日期", "2024/1/5"),
        ("日期", "2024-02-30"),
        ("日期", "2023-02-29"),
        ("日期", "2024-1-5"),
        ("日期", "20240105"),
        ("日期", "2024-13-01"),
        ("日期", "5 Jan 2024"),
        ("日期", "2024-01-05T10:30:00"),
        ("时刻", "2024/01/05 10:30"),
        ("时刻", "2024-01-05T25:00"),
        ("时刻", "2024-02-30T10:00"),
        ("时刻", "yesterday"),
        ("时间", "24:00"),
        ("时间", "09:60"),
        ("时间", "9.30"),
        ("时间", "0930"),
        ("时间", "09:30 PM"),
        ("时间", "25:00:00"),
        ("时间", 930),
    ],
)
async def test_dates_and_times_that_are_not_iso_are_refused(
    yard: SkillYard, org: str, kinds: str, conn: Any, field: str, given: Any
) -> None:
    """§7.5 日期用 ISO; SKILL.md: dates 2026-03-01, date-times ISO 8601. Impossible calendar days and a 日期 with a
    time of day are not silently changed."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and field in env["error"], env
    assert await count(conn, org, "类型表") == 0


@pytest.mark.spec("§7.5")
async def test_dates_times_and_instants_round_trip(yard: SkillYard, org: str, kinds: str) -> None:
    ctx = context(org)
    env = await run(
        yard,
        ctx,
        "insert",
        table_id=kinds,
        data={"名称": "n", "日期": "2024-02-29", "时刻": "2024-01-05T10:30:00+08:00", "时间": "9:05"},
    )
    assert env["ok"], env
    assert env["data"]["日期"] == "2024-02-29" and env["data"]["时间"] == "09:05:00"
    from datetime import datetime

    assert datetime.fromisoformat(env["data"]["时刻"]) == datetime.fromisoformat("2024-01-05T02:30:00+00:00")
    found = await run(
        yard,
        ctx,
        "query",
        table_id=kinds,
        filters=[{"field": "时刻", "op": "eq", "value": "2024-01-05T02:30:00Z"}],
    )
    assert found["ok"] and len(found["list"]) == 1, found


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("given", "stored"),
    [("红,蓝", ["红", "蓝"]), ("蓝、红", ["红", "蓝"]), (["蓝", "红", "蓝"], ["红", "蓝"]), ("绿", ["绿"])],
)
async def test_multi_select_given_as_text_or_list(
    yard: SkillYard, org: str, kinds: str, given: Any, stored: list[str]
) -> None:
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "标签": given})
    assert env["ok"] and env["data"]["标签"] == stored, env


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize("given", ["红,黄", ["黄"], "紫", ["红", "Red"]])
async def test_multi_select_with_unknown_options_is_refused(yard: SkillYard, org: str, kinds: str, given: Any) -> None:
    """§7.5: 单选/多选值必须在已配选项内."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", "标签": given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and "标签" in env["error"], env


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("邮箱", "a@b"),
        ("邮箱", "a@@b.cn"),
        ("邮箱", "a b@c.cn"),
        ("邮箱", "@b.cn"),
        ("邮箱", "a@"),
        ("邮箱", "a@b..cn"),
        ("电话", "abc"),
        ("电话", "12"),
        ("电话", "138-abcd-0000"),
        ("电话", "++86 138"),
        ("主页", "ftp://x.cn"),
        ("主页", "www.x.cn"),
        ("主页", "http://"),
        ("主页", "https:// x.cn"),
        ("主页", "javascript:alert(1)"),
    ],
)
async def test_contact_values_are_validated(yard: SkillYard, org: str, kinds: str, field: str, given: str) -> None:
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable" and field in env["error"], env


@pytest.mark.spec("§7.5")
async def test_json_field_keeps_nested_values(yard: SkillYard, org: str, kinds: str) -> None:
    ctx = context(org)
    nested = {"a": {"b": [1, {"c": None}, "文字"]}, "d": 1.5, "e": True}
    for value in (nested, [1, [2, 3], {"x": "y"}], 12.5):
        env = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "j", "附加": value})
        assert env["ok"] and env["data"]["附加"] == value, env
        got = await run(yard, ctx, "query", table_id=kinds, filters=[{"field": "id", "op": "eq", "value": env["id"]}])
        assert got["list"][0]["附加"] == value, got
    text = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "t", "附加": '{"k": [1, 2]}'})
    assert text["ok"] and text["data"]["附加"] == {"k": [1, 2]}, text
    bad = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "x", "附加": {"v": float("nan")}})
    assert bad["ok"] is False and bad["error_type"] == "recoverable" and "附加" in bad["error"], bad
