"""A table's write validator (fields/validator.py, spec §7.5): empty values, required fields, unknown fields and
whole rows, in Python and on every write path."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.fields.errors import FieldError
from skillyard.builtin_skills.datatable.fields.types import FieldDef, parse_field
from skillyard.builtin_skills.datatable.fields.validator import RowValidator

from skillyard import SkillYard
from support.datatable import ONE_OF_EACH_TYPE, context, count, make_table, run
from support.datatable.fields import CANONICAL, one, options_for, validator


def table() -> Any:
    return validator(
        {"title": "姓名", "uidt": "文本", "required": True},
        {"title": "年龄", "uidt": "整数"},
        {"title": "部门", "uidt": "单选", "options": ["研发", "销售"], "required": True},
        {"title": "薪资", "uidt": "金额"},
    )


@pytest.mark.parametrize("uidt", CANONICAL)
@pytest.mark.parametrize("empty", ["", "   ", "\t\n", None])
def test_empty_is_null_for_every_type(uidt: str, empty: Any) -> None:
    assert one(uidt, empty, **options_for(uidt)) is None


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


@pytest.mark.spec("§7.5")
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
    specs = [{"title": f"f{i}", "uidt": uidt, **options_for(uidt)} for i, uidt in enumerate(CANONICAL)]
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


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("field", "given", "stored"),
    [
        ("数量", "１２３", 123),
        ("数量", "1,234,567", 1234567),
        ("数量", "１，２３４", 1234),
        ("数量", -5, -5),
        ("价格", "１２.５", 12.5),
        ("价格", "12,345.67", 12345.67),
        ("金额", "１,２００.５", 1200.5),
        ("日期", "2026-03-01", "2026-03-01"),
        ("时间", "09:30", "09:30:00"),
        ("完成", True, True),
        ("城市", "上海", "上海"),
        ("标签", ["红", "蓝"], ["红", "蓝"]),
        ("邮箱", "a@example.com", "a@example.com"),
        ("主页", "https://example.com/x", "https://example.com/x"),
    ],
)
async def test_values_are_converted_on_write(
    yard: SkillYard, org: str, values_table: str, field: str, given: Any, stored: Any
) -> None:
    env = await run(yard, context(org), "insert", table_id=values_table, data={"名称": "n", field: given})
    assert env["ok"], env
    got = env["data"][field]
    if isinstance(stored, float):
        got = float(got)
    assert got == stored, env["data"]


@pytest.mark.spec("§7.5")
@pytest.mark.parametrize(
    ("field", "given"),
    [
        ("数量", "3万"),
        ("数量", "2亿"),
        ("数量", "5千"),
        ("数量", "12k"),
        ("数量", "3M"),
        ("数量", "1bn"),
        ("价格", "3.5万"),
        ("价格", "1.2k"),
        ("价格", "2.5M"),
        ("价格", "1.5bn"),
        ("金额", "１２万"),
        ("数量", "1.5"),
        ("数量", 2.5),
        ("日期", "2026/03/01"),
        ("日期", "03/01/2026"),
        ("日期", "2026年3月1日"),
        ("城市", "广州"),
        ("标签", ["红", "黄"]),
        ("邮箱", "not-an-email"),
        ("主页", "example.com"),
        ("完成", "maybe"),
    ],
)
async def test_bad_values_are_refused_never_converted(
    yard: SkillYard, org: str, values_table: str, conn: Any, field: str, given: Any
) -> None:
    env = await run(yard, context(org), "insert", table_id=values_table, data={"名称": "n", field: given})
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    assert field in env["error"]
    assert await count(conn, org, "值表") == 0


@pytest.mark.spec("§7.5")
async def test_magnitude_words_in_a_batch_fail_the_row_only(yard: SkillYard, org: str, values_table: str) -> None:
    batch = await run(
        yard,
        context(org),
        "insert_batch",
        table_id=values_table,
        records=[{"名称": "a", "价格": "10"}, {"名称": "b", "价格": "1.2万"}, {"名称": "c", "数量": "3k"}],
    )
    assert batch["ok"], batch
    assert (batch["inserted"], batch["failed"], batch["verified_total"]) == (1, 2, 1)
    assert [e["row"] for e in batch["errors"]] == [2, 3]
    assert all(e["error"] for e in batch["errors"])


@pytest.mark.spec("§7.5")
async def test_unknown_fields_dropped_and_reported_on_every_write(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    one = await run(yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "外号": "x"})
    assert one["ok"] and one["dropped"] == ["外号"] and "外号" not in one["data"]
    batch = await run(yard, ctx, "insert_batch", table_id=table_id, records=[{"姓名": "乙", "外号": 1}, {"姓名": "丙"}])
    assert batch["ok"] and batch["inserted"] == 2 and batch["dropped"] == ["外号"], batch
    upd = await run(yard, ctx, "update", table_id=table_id, row_id=one["id"], data={"城市": "北京", "外号": "y"})
    assert upd["ok"] and upd["dropped"] == ["外号"], upd
    by = await run(
        yard,
        ctx,
        "update_by",
        table_id=table_id,
        filters=[{"field": "姓名", "op": "eq", "value": "乙"}],
        data={"城市": "北京", "外号": "z"},
    )
    assert by["ok"] and by["updated"] == 1 and by["dropped"] == ["外号"], by
    up = await run(yard, ctx, "upsert", table_id=table_id, key_fields="姓名", records=[{"姓名": "丁", "外号": 1}])
    assert up["ok"] and up["inserted"] == 1 and up["dropped"] == ["外号"], up


@pytest.mark.spec("§7.5")
async def test_system_columns_in_data_are_not_written(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    env = await run(
        yard, ctx, "insert", table_id=table_id, data={"姓名": "甲", "id": 999999, "created_at": "2000-01-01"}
    )
    assert env["ok"], env
    assert env["data"]["id"] != 999999 and not str(env["data"]["created_at"]).startswith("2000")


@pytest.mark.spec("§7.5")
async def test_empty_string_is_null_for_every_type(yard: SkillYard, org: str, values_table: str) -> None:
    data = {f["title"]: "" for f in ONE_OF_EACH_TYPE}
    data["名称"] = "n"
    env = await run(yard, context(org), "insert", table_id=values_table, data=data)
    assert env["ok"], env
    assert all(env["data"][f["title"]] is None for f in ONE_OF_EACH_TYPE[1:]), env["data"]


@pytest.mark.spec("§7.5")
async def test_required_is_checked_on_insert_only(yard: SkillYard, org: str, values_table: str) -> None:
    ctx = context(org)
    missing = await run(yard, ctx, "insert", table_id=values_table, data={"数量": 1})
    assert missing["ok"] is False and "名称" in missing["error"], missing
    empty = await run(yard, ctx, "insert", table_id=values_table, data={"名称": "", "数量": 1})
    assert empty["ok"] is False and "名称" in empty["error"], empty
    batch = await run(yard, ctx, "insert_batch", table_id=values_table, records=[{"数量": 1}, {"名称": "x"}])
    assert (batch["inserted"], batch["failed"]) == (1, 1) and batch["errors"][0]["row"] == 1, batch
    row_id = batch["ids"][0] if "ids" in batch else None
    assert row_id is not None
    upd = await run(yard, ctx, "update", table_id=values_table, row_id=row_id, data={"数量": 2})
    assert upd["ok"], upd
    cleared = await run(yard, ctx, "update", table_id=values_table, row_id=row_id, data={"名称": ""})
    assert cleared["ok"] and cleared["data"]["名称"] is None, cleared


@pytest.mark.spec("§7.5")
async def test_empty_and_blank_strings_clear_values_on_update_by_and_upsert(
    yard: SkillYard, org: str, kinds: str
) -> None:
    """§7.5 空串归一为 NULL, required checked on insert only (docs: an upsert that updates may leave a required field
    empty)."""
    ctx = context(org, chat_mode=False)
    ins = await run(yard, ctx, "insert", table_id=kinds, data={"名称": "n", "数量": 3, "城市": "上海", "电话": "123"})
    assert ins["ok"], ins
    by = await run(
        yard,
        ctx,
        "update_by",
        table_id=kinds,
        filters=[{"field": "名称", "op": "eq", "value": "n"}],
        data={"数量": "", "城市": "   ", "名称": ""},
    )
    assert by["ok"] and by["updated"] == 1, by
    row = (await run(yard, ctx, "query", table_id=kinds))["list"][0]
    assert (row["数量"], row["城市"], row["名称"]) == (None, None, None), row
    up = await run(yard, ctx, "upsert", table_id=kinds, key_fields=["电话"], records=[{"电话": "123", "名称": ""}])
    assert up["ok"] and (up["updated"], up["failed"]) == (1, 0), up
