"""Field types (fields/types.py, spec §7.1): logical types and their aliases, identifiers, field definitions, in
Python and through create_table / add_field / list_columns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from skillyard.builtin_skills.datatable.fields import types as field_types
from skillyard.builtin_skills.datatable.fields.errors import FieldError
from skillyard.builtin_skills.datatable.fields.types import FieldDef, check_identifier, parse_field

from skillyard import SkillYard
from support.datatable import context, make_table, run
from support.datatable.fields import CANONICAL, options_for

ALL_TYPES = [
    ("文本", "文本", None),
    ("长文本", "长文本", None),
    ("整数", "整数", None),
    ("数字", "数字", (38, 2)),
    ("日期", "日期", None),
    ("日期时间", "日期时间", None),
    ("时间", "时间", None),
    ("勾选", "勾选", None),
    ("单选", "单选", None),
    ("多选", "多选", None),
    ("邮箱", "邮箱", None),
    ("电话", "电话", None),
    ("链接", "链接", None),
    ("JSON", "JSON", None),
    ("金额", "数字", (18, 2)),
    ("百分比", "数字", (12, 4)),
    ("高精度数字", "数字", (38, 18)),
    ("text", "文本", None),
    ("long_text", "长文本", None),
    ("integer", "整数", None),
    ("number", "数字", (38, 2)),
    ("date", "日期", None),
    ("datetime", "日期时间", None),
    ("time", "时间", None),
    ("checkbox", "勾选", None),
    ("single_select", "单选", None),
    ("multi_select", "多选", None),
    ("email", "邮箱", None),
    ("phone", "电话", None),
    ("url", "链接", None),
    ("json", "JSON", None),
    ("currency", "数字", (18, 2)),
    ("percent", "数字", (12, 4)),
    ("decimal", "数字", (38, 18)),
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
    assert parse_field({"title": "f", "uidt": alias, **options_for(canonical)}).uidt == canonical


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
    assert parse_field({"title": "f", "uidt": uidt, **options_for(uidt)}).pg_type() == pg
    assert "jsonb" not in pg


def test_pg_type_of_a_bare_fielddef() -> None:
    assert FieldDef("f", "数字").pg_type() == "numeric(38,2)"
    assert FieldDef("f", "数字", precision=10).pg_type() == "numeric(10,0)"


def test_fielddef_is_frozen_and_hashable() -> None:
    field = parse_field({"title": "f", "uidt": "单选", "options": ["a"]})
    with pytest.raises(AttributeError):
        field.title = "g"  # type: ignore[misc]
    assert {field: 1}[field] == 1


@pytest.mark.spec("§7.1")
@pytest.mark.parametrize(
    "name",
    ["a" * 50, "_下划线", "客户2024", "Customer_List", "中" * 20],
)
async def test_valid_identifiers_are_accepted_as_table_and_field_names(yard: SkillYard, org: str, name: str) -> None:
    ctx = context(org)
    env = await run(yard, ctx, "create_table", table_name=name, fields=[{"title": name, "uidt": "文本"}])
    assert env["ok"], env
    written = await run(yard, ctx, "insert", table_id=env["id"], data={name: "v"})
    assert written["ok"] and written["data"][name] == "v", written
    again = await run(yard, ctx, "list_columns", table_name=name)
    assert [c["title"] for c in again["data"]] == [name]


@pytest.mark.spec("§7.1")
async def test_chinese_identifiers_fit_postgresql_63_bytes(yard: SkillYard, org: str) -> None:
    """docs/datatable.md decision: titles are 1–50 characters and at most 63 bytes in UTF-8 (they are real
    PostgreSQL names): 21 Chinese characters work end to end, 22 are refused with the reason and no table is made."""
    ctx = context(org)
    name = "中" * 21
    env = await run(yard, ctx, "create_table", table_name=name, fields=[{"title": name, "uidt": "文本"}])
    assert env["ok"], env
    written = await run(yard, ctx, "insert", table_id=env["id"], data={name: "v"})
    assert written["ok"] and written["data"][name] == "v", written
    longer = "中" * 22
    refused = await run(yard, ctx, "create_table", table_name=longer, fields=[{"title": "名称", "uidt": "文本"}])
    assert not refused["ok"] and "63" in refused["error"] and refused["need_param"] == "table_name", refused
    listed = await run(yard, ctx, "list_tables")
    titles = [t["title"] for t in listed["data"]]
    assert name in titles and longer not in titles


@pytest.mark.spec("§7.1")
@pytest.mark.parametrize(
    "name", ["a" * 51, "中" * 51, "1客户", "9abc", "容差%", "客户 表", "a-b", "", "客户.表", "a;b", "表（新）"]
)
async def test_invalid_identifiers_are_refused(yard: SkillYard, org: str, name: str) -> None:
    ctx = context(org)
    env = await run(yard, ctx, "create_table", table_name=name, fields=[{"title": "名称", "uidt": "文本"}])
    assert env["ok"] is False and env["error_type"] == "recoverable", env
    made = await run(yard, ctx, "create_table", table_name="好表", fields=[{"title": "名称", "uidt": "文本"}])
    field = await run(yard, ctx, "add_field", table_id=made["id"], field={"title": name, "uidt": "文本"})
    assert field["ok"] is False and field["error_type"] == "recoverable", field


@pytest.mark.spec("§7.1")
@pytest.mark.spec("§7.5")
async def test_every_type_and_alias_in_create_table_with_type_key(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    fields = []
    for i, (name, _, _) in enumerate(ALL_TYPES):
        spec: dict[str, Any] = {"title": f"f{i}", ("type" if i % 2 else "uidt"): name}
        if name in ("单选", "多选", "single_select", "multi_select"):
            spec["options"] = ["甲", "乙"]
        fields.append(spec)
    made = await run(yard, ctx, "create_table", table_name="全类型", fields=fields)
    assert made["ok"] and set(made) >= {"id", "title"} and made["title"] == "全类型", made
    cols = await run(yard, ctx, "list_columns", table_id=made["id"])
    assert cols["ok"], cols
    for col, (name, uidt, preset) in zip(cols["data"], ALL_TYPES, strict=True):
        assert set(col) >= {"title", "uidt", "required", "options", "precision", "scale"}, col
        assert col["uidt"] == uidt, (name, col)
        if preset:
            assert (col["precision"], col["scale"]) == preset, (name, col)


@pytest.mark.spec("§7.1")
@pytest.mark.spec("§7.5")
async def test_list_columns_shape_round_trips_into_create_table_and_add_field(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    src = await make_table(yard, org)
    cols = (await run(yard, ctx, "list_columns", table_id=src))["data"]
    copy = await run(yard, ctx, "create_table", table_name="副本", fields=cols)
    assert copy["ok"], copy
    assert (await run(yard, ctx, "list_columns", table_id=copy["id"]))["data"] == cols
    added = await run(yard, ctx, "add_field", table_id=copy["id"], field={**cols[0], "title": "别名"})
    assert added["ok"] and added["title"] == "别名" and added["uidt"] == cols[0]["uidt"], added
    assert added["required"] is True


@pytest.mark.spec("§3.5")
async def test_list_columns_shape_equals_field_definition_shape_for_every_type(
    yard: SkillYard, org: str, kinds: str
) -> None:
    """issue 4: a field definition is {title, uidt, required?, unique?, options?, precision?, scale?} — the same shape
    list_columns returns. Copying a table's columns into create_table gives the same columns back."""
    ctx = context(org)
    cols = (await run(yard, ctx, "list_columns", table_id=kinds))["data"]
    assert all(set(c) == {"title", "uidt", "required", "unique", "options", "precision", "scale"} for c in cols)
    copy = await run(yard, ctx, "create_table", table_name="类型副本", fields=cols)
    assert copy["ok"], copy
    assert (await run(yard, ctx, "list_columns", table_id=copy["id"]))["data"] == cols
    for col in cols:
        added = await run(yard, ctx, "add_field", table_id=copy["id"], field={**col, "title": col["title"] + "2"})
        assert added["ok"], added
        assert {k: added[k] for k in col if k != "title"} == {k: v for k, v in col.items() if k != "title"}, added
