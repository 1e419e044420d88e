"""Value converters of 整数 and 数字 (fields/numbers.py, spec §7.5): full-width digits, thousands separators, scale, and
what is never converted."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from skillyard import SkillYard
from support.datatable import context, count, run
from support.datatable.fields import one, refused


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


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("field", "given", "stored"),
    [
        ("数量", "－１２", -12),
        ("数量", "＋５", 5),
        ("数量", "−7", -7),
        ("数量", " 42 ", 42),
        ("数量", "1,234,567", 1234567),
        ("数量", 1e3, 1000),
        ("价格", "．５", 0.5),
        ("价格", "-0.25", -0.25),
        ("价格", 1.5e3, 1500),
        ("金额", "１，２３４．５６", 1234.56),
        ("金额", "－１，０００", -1000),
    ],
)
async def test_full_width_signs_digits_and_separators_are_converted(
    yard: SkillYard, org: str, kinds: str, field: str, given: Any, stored: Any
) -> None:
    """§7.5: 数字全角转半角、允许千分位逗号 — full-width digits, signs and points are read as half-width."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"], env
    assert float(env["data"][field]) == stored, env["data"]


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("数量", "12,34"),
        ("数量", "1,2345"),
        ("数量", "1,,234"),
        ("数量", ",123"),
        ("数量", "1,234,56"),
        ("价格", "1.234,56"),
        ("数量", "万5"),
        ("数量", "5 万"),
        ("数量", "３千"),
        ("价格", "2.5亿"),
        ("价格", "12K"),
        ("价格", "3 M"),
        ("价格", "4bn"),
        ("价格", "1e3"),
        ("价格", "1E5"),
        ("价格", "1e309"),
        ("价格", "NaN"),
        ("价格", "Infinity"),
        ("价格", "-inf"),
        ("价格", float("nan")),
        ("价格", float("inf")),
        ("价格", True),
        ("价格", "12%"),
        ("数量", "0x1F"),
        ("数量", "1_000"),
        ("数量", "1.5"),
        ("数量", "1.0000001"),
        ("数量", 1e309),
    ],
)
async def test_numbers_with_misplaced_separators_words_or_exponents_are_refused(
    yard: SkillYard, org: str, kinds: str, conn: Any, field: str, given: Any
) -> None:
    """§7.5: thousands separators only as separators; 含数量级词（万/亿/千/k/M/bn）一律拒绝，不静默换算; integers reject
    decimals. Nothing is written and the error names the field."""
    env = await run(yard, context(org), "insert", table_id=kinds, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert field in env["error"], env
    assert await count(conn, org, "类型表") == 0
