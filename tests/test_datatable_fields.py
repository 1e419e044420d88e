"""The datatable skill's field types: identifiers, field definitions and write-value validation (spec §7.1, §7.5)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from support.datatable import load_datatable_module

field_errors = load_datatable_module("field_errors")
field_types = load_datatable_module("field_types")
row_validator = load_datatable_module("row_validator")
FieldDef = field_types.FieldDef
FieldError = field_errors.FieldError
RowValidator = row_validator.RowValidator
parse_field = field_types.parse_field
check_identifier = field_types.check_identifier


def validator(*specs: dict[str, Any], **kwargs: Any) -> Any:
    return RowValidator([parse_field(s) for s in specs], **kwargs)


def one(uidt: str, value: Any, **spec: Any) -> Any:
    """The converted value of one field of type uidt, or raise FieldError with the row's error."""
    v = validator({"title": "f", "uidt": uidt, **spec})
    values, dropped, errors = v.validate({"f": value}, insert=False)
    assert dropped == []
    if errors:
        assert len(errors) == 1 and errors[0].startswith("f: ")
        raise FieldError(errors[0], "f")
    return values["f"]


def refused(uidt: str, value: Any, *fragments: str, **spec: Any) -> str:
    with pytest.raises(FieldError) as info:
        one(uidt, value, **spec)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


# --------------------------------------------------------------------------------------------------------------------
# types and aliases


CANONICAL = [
    "文本",
    "长文本",
    "整数",
    "数字",
    "日期",
    "日期时间",
    "时间",
    "勾选",
    "单选",
    "多选",
    "邮箱",
    "电话",
    "链接",
    "JSON",
]


def test_canonical_types_map_to_themselves() -> None:
    assert list(field_types.CANONICAL_TYPES) == CANONICAL
    for name in CANONICAL:
        assert field_types.TYPES[name] == name


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("text", "文本"),
        ("long_text", "长文本"),
        ("integer", "整数"),
        ("number", "数字"),
        ("date", "日期"),
        ("datetime", "日期时间"),
        ("time", "时间"),
        ("checkbox", "勾选"),
        ("single_select", "单选"),
        ("multi_select", "多选"),
        ("email", "邮箱"),
        ("phone", "电话"),
        ("url", "链接"),
        ("json", "JSON"),
        ("currency", "数字"),
        ("percent", "数字"),
        ("decimal", "数字"),
        ("金额", "数字"),
        ("百分比", "数字"),
        ("高精度数字", "数字"),
    ],
)
def test_aliases(alias: str, canonical: str) -> None:
    assert field_types.TYPES[alias] == canonical
    assert parse_field({"title": "f", "uidt": alias, **_options_for(canonical)}).uidt == canonical


def _options_for(canonical: str) -> dict[str, Any]:
    return {"options": ["a"]} if canonical in ("单选", "多选") else {}


@pytest.mark.parametrize(
    "spelling", ["TEXT", "Text", " text ", "Long_Text", "long-text", "long text", "LongText", "SingleLineText"]
)
def test_english_names_are_case_insensitive(spelling: str) -> None:
    assert parse_field({"title": "f", "uidt": spelling}).uidt in ("文本", "长文本")


def test_english_keys_are_lower_case() -> None:
    for key in field_types.TYPES:
        if key.isascii() and key != "JSON":
            assert key == key.lower()


@pytest.mark.parametrize("bad", ["string", "文字", "int64", "varchar", "jsonb"])
def test_unknown_type_is_refused_with_the_list(bad: str) -> None:
    with pytest.raises(FieldError, match="unknown field type") as info:
        parse_field({"title": "f", "uidt": bad})
    assert "文本" in str(info.value) and info.value.field == "f"


# --------------------------------------------------------------------------------------------------------------------
# identifiers


@pytest.mark.parametrize("name", ["姓名", "name", "Name_2", "_private", "部门_1", "a" * 50, "中" * 21, "㐀字", "x"])
def test_valid_identifiers(name: str) -> None:
    assert check_identifier(name) == name


def test_identifier_is_stripped() -> None:
    assert check_identifier("  姓名 \t") == "姓名"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("1号", "must not start with a digit"),
        ("9", "must not start with a digit"),
        ("容差%", "'%'"),
        ("first name", "' '"),
        ("a-b", "'-'"),
        ("a.b", "'.'"),
        ('a"b', "'\"'"),
        ("名字（中文）", "'（'"),
        ("１号", "'１'"),  # full-width digits are not ASCII digits
        ("naïve", "'ï'"),
        ("a" * 51, "at most 50"),
        ("中" * 22, "63"),  # 66 bytes in UTF-8: PostgreSQL would truncate it
    ],
)
def test_invalid_identifiers(name: str, fragment: str) -> None:
    with pytest.raises(FieldError) as info:
        check_identifier(name)
    assert fragment in str(info.value)


def test_identifier_what_is_named_in_the_message() -> None:
    with pytest.raises(FieldError, match="the table name"):
        check_identifier("1表", "table")


@pytest.mark.parametrize("bad", [None, 12, ["姓名"]])
def test_identifier_must_be_text(bad: Any) -> None:
    with pytest.raises(FieldError, match="must be text"):
        check_identifier(bad)


# --------------------------------------------------------------------------------------------------------------------
# field definitions


def test_parse_field_minimal_and_as_dict_round_trip() -> None:
    field = parse_field({"title": " 姓名 ", "uidt": "文本"})
    assert field == FieldDef("姓名", "文本", False, False, (), None, None)
    shape = field.as_dict()
    assert shape == {
        "title": "姓名",
        "uidt": "文本",
        "required": False,
        "unique": False,
        "options": [],
        "precision": None,
        "scale": None,
    }
    assert parse_field(shape) == field
    json.dumps(shape)


def test_type_is_an_alias_of_uidt_and_name_of_title() -> None:
    assert parse_field({"name": "年龄", "type": "integer"}) == parse_field({"title": "年龄", "uidt": "整数"})
    assert parse_field({"title": "年龄", "uidt": "整数", "type": "整数"}).uidt == "整数"


def test_conflicting_uidt_and_type_are_refused() -> None:
    with pytest.raises(FieldError, match="keep only uidt"):
        parse_field({"title": "年龄", "uidt": "整数", "type": "文本"})
    with pytest.raises(FieldError, match="keep only title"):
        parse_field({"title": "年龄", "name": "岁数", "uidt": "整数"})


@pytest.mark.parametrize("spec", [{"uidt": "文本"}, {"title": None, "uidt": "文本"}])
def test_title_is_required(spec: dict[str, Any]) -> None:
    with pytest.raises(FieldError, match="needs a title"):
        parse_field(spec)


@pytest.mark.parametrize("spec", [{"title": "f"}, {"title": "f", "uidt": ""}, {"title": "f", "uidt": "  "}])
def test_type_is_required(spec: dict[str, Any]) -> None:
    with pytest.raises(FieldError, match="needs a type"):
        parse_field(spec)


def test_type_must_be_text() -> None:
    with pytest.raises(FieldError, match="must be a type name"):
        parse_field({"title": "f", "uidt": 3})


def test_bad_title_is_refused() -> None:
    with pytest.raises(FieldError, match="容差百分比"):
        parse_field({"title": "容差%", "uidt": "数字"})


@pytest.mark.parametrize("title", ["id", "ID", "created_at", "Created_At"])
def test_system_columns_cannot_be_defined(title: str) -> None:
    with pytest.raises(FieldError, match="system column"):
        parse_field({"title": title, "uidt": "文本"})


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(FieldError, match="unknown key\\(s\\) default, description"):
        parse_field({"title": "f", "uidt": "文本", "description": "x", "default": "y"})


@pytest.mark.parametrize("spec", [["title", "文本"], "姓名:文本", None])
def test_field_definition_must_be_an_object(spec: Any) -> None:
    with pytest.raises(FieldError, match="is an object"):
        parse_field(spec)


@pytest.mark.parametrize(
    ("value", "expected"), [(True, True), (False, False), (None, False), ("true", True), ("是", True), (0, False)]
)
def test_required_and_unique_flags(value: Any, expected: bool) -> None:
    field = parse_field({"title": "f", "uidt": "文本", "required": value, "unique": value})
    assert field.required is expected and field.unique is expected


def test_bad_flag_is_refused() -> None:
    with pytest.raises(FieldError, match="required must be true or false"):
        parse_field({"title": "f", "uidt": "文本", "required": "maybe"})


@pytest.mark.parametrize(
    ("uidt", "precision", "scale"),
    [
        ("数字", 38, 2),
        ("number", 38, 2),
        ("金额", 18, 2),
        ("currency", 18, 2),
        ("百分比", 12, 4),
        ("Percent", 12, 4),
        ("高精度数字", 38, 18),
        ("decimal", 38, 18),
    ],
)
def test_numeric_presets(uidt: str, precision: int, scale: int) -> None:
    field = parse_field({"title": "f", "uidt": uidt})
    assert (field.uidt, field.precision, field.scale) == ("数字", precision, scale)
    assert field.pg_type() == f"numeric({precision},{scale})"
    assert parse_field(field.as_dict()) == field


def test_explicit_precision_and_scale_win_over_presets() -> None:
    field = parse_field({"title": "f", "uidt": "金额", "precision": 20, "scale": 4})
    assert (field.precision, field.scale) == (20, 4)
    field = parse_field({"title": "f", "uidt": "金额", "precision": "10"})
    assert (field.precision, field.scale) == (10, 2)
    field = parse_field({"title": "f", "uidt": "数字", "scale": 0})
    assert (field.precision, field.scale) == (38, 0)
    assert field.pg_type() == "numeric(38,0)"


@pytest.mark.parametrize(
    ("precision", "scale", "fragment"),
    [
        (0, 0, "precision must be 1–1000"),
        (1001, 2, "precision must be 1–1000"),
        (10, 11, "scale (decimal places) must be 0–10"),
        (10, -1, "scale (decimal places) must be 0–10"),
        (1, None, "scale (decimal places) must be 0–1"),  # default scale 2 > precision 1
        ("ten", 2, "precision must be a whole number"),
        (10.5, 2, "precision must be a whole number"),
        (True, 2, "precision must be a whole number"),
        (10, "2.5", "scale must be a whole number"),
    ],
)
def test_bad_precision_and_scale(precision: Any, scale: Any, fragment: str) -> None:
    with pytest.raises(FieldError) as info:
        parse_field({"title": "f", "uidt": "数字", "precision": precision, "scale": scale})
    assert fragment in str(info.value)


def test_precision_only_for_numbers() -> None:
    with pytest.raises(FieldError, match="apply only to 数字"):
        parse_field({"title": "f", "uidt": "整数", "precision": 10})
    with pytest.raises(FieldError, match="apply only to 数字"):
        parse_field({"title": "f", "uidt": "文本", "scale": 2})
    assert parse_field({"title": "f", "uidt": "文本", "precision": None, "scale": None}).precision is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["研发", "销售"], ("研发", "销售")),
        ("研发,销售", ("研发", "销售")),
        ("研发，销售, 市场 ,", ("研发", "销售", "市场")),
        ([" 研发 ", "研发", "销售"], ("研发", "销售")),
        ([1, 2.5], ("1", "2.5")),
        ([{"title": "研发", "color": "#fff"}, {"title": "销售"}], ("研发", "销售")),
        (("a",), ("a",)),
    ],
)
def test_options(options: Any, expected: tuple[str, ...]) -> None:
    assert parse_field({"title": "f", "uidt": "单选", "options": options}).options == expected


def test_select_needs_options() -> None:
    for uidt in ("单选", "多选"):
        with pytest.raises(FieldError, match="needs its options"):
            parse_field({"title": "f", "uidt": uidt})
        with pytest.raises(FieldError, match="needs its options"):
            parse_field({"title": "f", "uidt": uidt, "options": ", ,"})


@pytest.mark.parametrize(
    ("uidt", "options", "fragment"),
    [
        ("单选", ["a", ""], "an option is empty"),
        ("单选", ["a", None], "every option must be text"),
        ("单选", ["a", True], "every option must be text"),
        ("单选", 5, "options must be a list"),
        ("多选", ["a,b", "c"], "contains a comma"),
        ("多选", ["a，b"], "contains a comma"),
        ("文本", ["a"], "options apply only to 单选 / 多选"),
    ],
)
def test_bad_options(uidt: str, options: Any, fragment: str) -> None:
    with pytest.raises(FieldError) as info:
        parse_field({"title": "f", "uidt": uidt, "options": options})
    assert fragment in str(info.value)


def test_single_select_option_may_hold_a_comma() -> None:
    assert parse_field({"title": "f", "uidt": "单选", "options": ["北京, 上海"]}).options == ("北京, 上海",)


def test_empty_options_on_other_types_are_fine() -> None:
    assert parse_field({"title": "f", "uidt": "文本", "options": []}).options == ()
    assert parse_field({"title": "f", "uidt": "文本", "options": ""}).options == ()


@pytest.mark.parametrize(
    ("uidt", "pg"),
    [
        ("文本", "text"),
        ("长文本", "text"),
        ("整数", "bigint"),
        ("数字", "numeric(38,2)"),
        ("日期", "date"),
        ("日期时间", "timestamptz"),
        ("时间", "time"),
        ("勾选", "boolean"),
        ("单选", "text"),
        ("多选", "text[]"),
        ("邮箱", "text"),
        ("电话", "text"),
        ("链接", "text"),
        ("JSON", "text"),
    ],
)
def test_pg_types(uidt: str, pg: str) -> None:
    assert parse_field({"title": "f", "uidt": uidt, **_options_for(uidt)}).pg_type() == pg
    assert "jsonb" not in pg


def test_pg_type_of_a_bare_fielddef() -> None:
    assert FieldDef("f", "数字").pg_type() == "numeric(38,2)"
    assert FieldDef("f", "数字", precision=10).pg_type() == "numeric(10,0)"


def test_fielddef_is_frozen_and_hashable() -> None:
    field = parse_field({"title": "f", "uidt": "单选", "options": ["a"]})
    with pytest.raises(AttributeError):
        field.title = "g"  # type: ignore[misc]
    assert {field: 1}[field] == 1


# --------------------------------------------------------------------------------------------------------------------
# 文本 / 长文本


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


# --------------------------------------------------------------------------------------------------------------------
# 整数


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (35, 35),
        (-7, -7),
        (0, 0),
        ("35", 35),
        (" 35 ", 35),
        ("+35", 35),
        ("-35", -35),
        ("１２３４５", 12345),
        ("１２,３４５", 12345),
        ("１２，３４５", 12345),
        ("－５", -5),
        ("12,345", 12345),
        ("1,234,567", 1234567),
        ("12.0", 12),
        ("12.00", 12),
        (3.0, 3),
        (Decimal("4"), 4),
        (Decimal("4.000"), 4),
        (2**63 - 1, 2**63 - 1),
        (-(2**63), -(2**63)),
        ("9223372036854775807", 2**63 - 1),
        ("000123", 123),
    ],
)
def test_integer(value: Any, expected: int) -> None:
    result = one("整数", value)
    assert result == expected and type(result) is int


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("12.5", "has decimals"),
        (12.5, "has decimals"),
        (Decimal("12.5"), "has decimals"),
        ("3.5万", "magnitude word '万'"),
        ("2亿", "magnitude word '亿'"),
        ("3千", "magnitude word '千'"),
        ("12k", "magnitude word 'k'"),
        ("12K", "magnitude word 'K'"),
        ("1.5M", "magnitude word 'M'"),
        ("2bn", "magnitude word 'bn'"),
        ("3w", "magnitude word 'w'"),
        ("1e3", "exponent"),
        ("1E3", "exponent"),
        ("12%", "percent"),
        ("12,34", "thousands separators"),
        ("1,2345", "thousands separators"),
        ("1234,567", "thousands separators"),
        (",123", "thousands separators"),
        ("abc", "is not a number"),
        ("1_000", "is not a number"),
        ("12 345", "is not a number"),
        ("--5", "is not a number"),
        ("+", "is not a number"),
        ("١٢٣", "is not a number"),  # other scripts' digits are not full-width digits
        ("²", "is not a number"),
        ("NaN", "is not a number"),
        ("inf", "is not a number"),
        (True, "true/false"),
        (False, "true/false"),
        (float("inf"), "not a number"),
        (float("nan"), "not a number"),
        (Decimal("NaN"), "not a number"),
        (2.0**60, "pass it as text"),
        (2**63, "outside the 整数 range"),
        ("9223372036854775808", "outside the 整数 range"),
        (-(2**63) - 1, "outside the 整数 range"),
        ([1], "expected a whole number, got list"),
        (date(2024, 1, 1), "expected a whole number, got date"),
    ],
)
def test_integer_refuses(value: Any, fragment: str) -> None:
    refused("整数", value, fragment)


def test_magnitude_words_are_never_converted() -> None:
    message = refused("整数", "3.5万", "never converted", "35000")
    assert "3.5万" in message


# --------------------------------------------------------------------------------------------------------------------
# 数字


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("12345.67", Decimal("12345.67")),
        ("1,234.5", Decimal("1234.50")),
        ("１，２３４．５", Decimal("1234.50")),
        ("-0.5", Decimal("-0.50")),
        (".5", Decimal("0.50")),
        ("12", Decimal("12.00")),
        (12, Decimal("12.00")),
        (0.1 + 0.2, Decimal("0.30")),  # float noise is rounded away
        (12345.67, Decimal("12345.67")),
        (Decimal("1.005"), Decimal("1.01")),  # half away from zero, like PostgreSQL
        ("1.005", Decimal("1.01")),
        ("-1.005", Decimal("-1.01")),
        ("2.345", Decimal("2.35")),
        ("2.344", Decimal("2.34")),
        ("9" * 36 + ".99", Decimal("9" * 36 + ".99")),  # the largest numeric(38,2)
        ("12.", Decimal("12.00")),
    ],
)
def test_number_default_scale_2(value: Any, expected: Decimal) -> None:
    result = one("数字", value)
    assert result == expected and isinstance(result, Decimal)
    assert result.as_tuple().exponent == -2


def test_number_presets_and_scale() -> None:
    assert one("金额", "1234.565") == Decimal("1234.57")
    assert one("百分比", 0.123456) == Decimal("0.1235")
    assert one("高精度数字", "0.123456789012345678") == Decimal("0.123456789012345678")
    assert one("高精度数字", "12345678901234567890.123456789012345678") == Decimal(
        "12345678901234567890.123456789012345678"
    )  # 38 significant digits: beyond Decimal's default precision of 28
    assert one("数字", "12.6", scale=0) == Decimal("13")


@pytest.mark.parametrize(
    ("uidt", "value", "fragment"),
    [
        ("金额", "10000000000000000", "at most 16 digits before the decimal point"),
        ("金额", 1e16, "at most 16 digits"),
        ("金额", "9999999999999999.995", "at most 16 digits"),  # rounds up past the limit
        ("百分比", "123456789.1", "at most 8 digits"),
        ("数字", "9" * 37, "at most 36 digits"),
        ("数字", "1" * 2000, "too large"),
        ("数字", 1e300, "too large"),
        ("数字", "3.5万", "magnitude word '万'"),
        ("数字", "1.2亿", "magnitude word '亿'"),
        ("数字", "5千", "magnitude word '千'"),
        ("数字", "1.2k", "magnitude word 'k'"),
        ("数字", "3M", "magnitude word 'M'"),
        ("数字", "1.5bn", "magnitude word 'bn'"),
        ("百分比", "12.5%", "percent sign"),
        ("百分比", "12.5％", "percent sign"),
        ("数字", "1.2e5", "exponent"),
        ("数字", "12,5", "thousands separators"),
        ("数字", "1.2.3", "is not a number"),
        ("数字", "12..", "is not a number"),
        ("数字", "-.", "is not a number"),
        ("数字", ".", "is not a number"),
        ("数字", "-", "is not a number"),
        ("数字", "¥12", "is not a number"),
        ("数字", "Infinity", "is not a number"),
        ("数字", True, "true/false"),
        ("数字", float("nan"), "not a number"),
        ("数字", Decimal("Infinity"), "not a number"),
        ("数字", [1], "expected a number"),
        ("数字", {"v": 1}, "expected a number"),
    ],
)
def test_number_refuses(uidt: str, value: Any, fragment: str) -> None:
    refused(uidt, value, fragment)


# --------------------------------------------------------------------------------------------------------------------
# 日期 / 日期时间 / 时间


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


# --------------------------------------------------------------------------------------------------------------------
# 勾选


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


# --------------------------------------------------------------------------------------------------------------------
# 单选 / 多选

SELECT = {"options": ["研发", "销售", "市场", "2024"]}


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


# --------------------------------------------------------------------------------------------------------------------
# 邮箱 / 电话 / 链接


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


# --------------------------------------------------------------------------------------------------------------------
# JSON


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


# --------------------------------------------------------------------------------------------------------------------
# empty values, required, unknown fields, rows


@pytest.mark.parametrize("uidt", CANONICAL)
@pytest.mark.parametrize("empty", ["", "   ", "\t\n", None])
def test_empty_is_null_for_every_type(uidt: str, empty: Any) -> None:
    assert one(uidt, empty, **_options_for(uidt)) is None


def table() -> Any:
    return validator(
        {"title": "姓名", "uidt": "文本", "required": True},
        {"title": "年龄", "uidt": "整数"},
        {"title": "部门", "uidt": "单选", "options": ["研发", "销售"], "required": True},
        {"title": "薪资", "uidt": "金额"},
    )


def test_validate_a_good_row() -> None:
    values, dropped, errors = table().validate({"姓名": "张三", "年龄": "35", "部门": "研发"}, insert=True)
    assert values == {"姓名": "张三", "年龄": 35, "部门": "研发"}  # only the given fields
    assert dropped == [] and errors == []


def test_unknown_fields_are_dropped_and_reported() -> None:
    row = {"姓名": "张三", "部门": "研发", "备注": "x", "id": 5, "created_at": "2024-01-01", 7: "seven"}
    values, dropped, errors = table().validate(row, insert=True)
    assert values == {"姓名": "张三", "部门": "研发"}
    assert dropped == ["备注", "id", "created_at", "7"]
    assert errors == []


def test_required_on_insert_only() -> None:
    v = table()
    values, _, errors = v.validate({"年龄": 3}, insert=True)
    assert errors == ["姓名: required; give a value", "部门: required; give a value"]
    _, _, errors = v.validate({"姓名": "", "部门": None}, insert=True)
    assert errors == ["姓名: required; give a value", "部门: required; give a value"]
    values, _, errors = v.validate({"年龄": 3}, insert=False)
    assert errors == [] and values == {"年龄": 3}
    values, _, errors = v.validate({"姓名": "", "部门": None}, insert=False)  # §7.5: required checked on insert only
    assert errors == [] and values == {"姓名": None, "部门": None}


def test_a_required_field_with_a_bad_value_reports_only_the_value() -> None:
    _, _, errors = table().validate({"姓名": "张三", "部门": "财务"}, insert=True)
    assert len(errors) == 1 and errors[0].startswith("部门: '财务' is not one of the options")


def test_all_errors_of_a_row_are_reported() -> None:
    values, dropped, errors = table().validate(
        {"姓名": ["x"], "年龄": "3.5万", "部门": "研发", "薪资": "12k", "其他": 1}, insert=True
    )
    assert [e.split(":")[0] for e in errors] == ["姓名", "年龄", "薪资"]
    assert values == {"部门": "研发"}
    assert dropped == ["其他"]


def test_keys_are_matched_after_stripping() -> None:
    values, dropped, errors = table().validate({" 姓名 ": "张三", "部门\t": "研发"}, insert=True)
    assert values == {"姓名": "张三", "部门": "研发"} and dropped == [] and errors == []


def test_a_field_given_twice_is_an_error() -> None:
    _, _, errors = table().validate({"姓名": "张三", " 姓名": "李四", "部门": "研发"}, insert=True)
    assert errors == ["姓名: given twice (as ' 姓名' and '姓名'); keep one"]


@pytest.mark.parametrize("row", [["张三"], "姓名=张三", None, 5])
def test_a_row_must_be_an_object(row: Any) -> None:
    values, dropped, errors = table().validate(row, insert=True)
    assert values == {} and dropped == [] and len(errors) == 1 and "expected an object" in errors[0]


def test_validate_accepts_any_mapping() -> None:
    from types import MappingProxyType

    values, _, errors = table().validate(MappingProxyType({"姓名": "张三", "部门": "研发"}), insert=True)
    assert errors == [] and values == {"姓名": "张三", "部门": "研发"}


def test_validator_is_reusable_and_does_not_mutate_rows() -> None:
    v = table()
    row = {"姓名": "张三", "年龄": "35", "部门": "研发"}
    first = v.validate(row, insert=True)
    assert v.validate(row, insert=True) == first
    assert row == {"姓名": "张三", "年龄": "35", "部门": "研发"}


def test_duplicate_fields_are_refused() -> None:
    field = parse_field({"title": "f", "uidt": "文本"})
    with pytest.raises(FieldError, match="defined twice"):
        RowValidator([field, field])


def test_unknown_uidt_on_a_fielddef_is_refused() -> None:
    with pytest.raises(FieldError, match="unknown type"):
        RowValidator([FieldDef("f", "金额")])


def test_convert_one_value() -> None:
    v = table()
    assert v.convert("年龄", "１２,３４５") == 12345
    assert v.convert("年龄", "") is None
    assert v.convert("年龄", None) is None
    with pytest.raises(FieldError, match=r"^年龄: '3\.5万' contains the magnitude word") as info:
        v.convert("年龄", "3.5万")
    assert info.value.field == "年龄"
    with pytest.raises(FieldError, match="unknown field '备注'; fields are 姓名, 年龄, 部门, 薪资"):
        v.convert("备注", "x")


def test_convert_system_columns_for_filters() -> None:
    v = table()
    assert v.convert("id", "1,024") == 1024
    assert v.convert("created_at", "2024-05-01 08:00") == datetime(2024, 5, 1, 8, tzinfo=UTC)
    with pytest.raises(FieldError, match=r"^id: '1\.5' has decimals"):
        v.convert("id", "1.5")
    # rows still cannot write them
    assert v.validate({"id": 1, "created_at": "2024-05-01"}, insert=False) == ({}, ["id", "created_at"], [])


def test_fields_are_exposed() -> None:
    v = table()
    assert list(v.fields) == ["姓名", "年龄", "部门", "薪资"]
    assert v.fields["薪资"].precision == 18


def test_every_type_in_one_row() -> None:
    specs = [{"title": f"f{i}", "uidt": uidt, **_options_for(uidt)} for i, uidt in enumerate(CANONICAL)]
    v = validator(*specs)
    row = {
        "f0": "文本",
        "f1": "长\n文本",
        "f2": "１,０００",
        "f3": "1,000.5",
        "f4": "2024-05-01",
        "f5": "2024-05-01 09:00:00+08:00",
        "f6": "09:00",
        "f7": "是",
        "f8": "a",
        "f9": ["a"],
        "f10": "a@b.cn",
        "f11": "13800000000",
        "f12": "https://a.cn",
        "f13": {"k": "v"},
    }
    values, dropped, errors = v.validate(row, insert=True)
    assert errors == [] and dropped == []
    assert values == {
        "f0": "文本",
        "f1": "长\n文本",
        "f2": 1000,
        "f3": Decimal("1000.50"),
        "f4": date(2024, 5, 1),
        "f5": datetime(2024, 5, 1, 1, tzinfo=UTC),
        "f6": time(9),
        "f7": True,
        "f8": "a",
        "f9": ["a"],
        "f10": "a@b.cn",
        "f11": "13800000000",
        "f12": "https://a.cn",
        "f13": '{"k": "v"}',
    }


def test_error_messages_name_the_field_and_the_fix() -> None:
    _, _, errors = validator({"title": "金额", "uidt": "金额"}).validate({"金额": "1.2万"}, insert=False)
    assert errors == [
        "金额: '1.2万' contains the magnitude word '万', which is never converted; write the full number "
        "(e.g. 35000 for 3.5万, 1200 for 1.2k)"
    ]
