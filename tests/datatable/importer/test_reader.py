"""The import file (importer/reader.py): inside the workspace, JSON array or JSON Lines, streamed a chunk at a time
and checked against json.loads."""

from __future__ import annotations

import io
import json
import os
import tracemalloc
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from skillyard.builtin_skills.datatable.importer import reader, staging
from skillyard.builtin_skills.datatable.rows.errors import RowsError
from skillyard.builtin_skills.datatable.store import schema as store_schema
from skillyard.builtin_skills.datatable.structure import tables as structure_tables

from skillyard import SkillYard
from support.datatable import (
    context,
    count,
    make_numbered_table,
    make_table,
    run,
    session_workspace,
    write_json,
    write_text,
)

FIELDS: list[dict[str, Any]] = [
    {"title": "名称", "uidt": "文本", "required": True},
    {"title": "数", "uidt": "整数"},
    {"title": "小数", "uidt": "数字"},
    {"title": "说明", "uidt": "长文本"},
]


#: Rows whose text puts escapes, surrogate pairs, multi-byte characters and long numbers across chunk cuts.
TRICKY: list[dict[str, Any]] = [
    {"名称": 'quote " and \\ backslash', "数": 123456789, "小数": 1.5e3, "说明": "line\nbreak\ttab"},
    {"名称": "中文名称😀", "数": -987654321, "小数": -0.25, "说明": "é \u2028 \u00e9 \U0001f600"},
    {"名称": "x" * 40, "数": 7, "小数": 12345.75, "说明": "\\u0041 is not an escape here"},
]


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str) -> Any:
    created = await structure_tables.create_table(conn, schema, "流式", FIELDS)
    return await store_schema.resolve_table(conn, schema, created["id"])


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven characters per read: every row of a test file is cut several times."""
    monkeypatch.setattr(reader, "READ_CHARS", 7)


class Trickle(io.BytesIO):
    """A file that hands out at most three bytes per read, so multi-byte UTF-8 characters arrive split."""

    def read1(self, size: int = -1) -> bytes:
        return super().read1(3 if size < 0 else min(size, 3))


def _parse(data: bytes, chars: int, monkeypatch: pytest.MonkeyPatch, *, trickle: bool = False) -> Any:
    """records() at ``chars`` characters per read: the rows, or the error message."""
    monkeypatch.setattr(reader, "READ_CHARS", chars)
    source = Trickle(data) if trickle else io.BytesIO(data)
    try:
        return list(reader.records(source, "f.json"))
    except RowsError as exc:
        return str(exc)


def _whole(text: str) -> Any:
    """What reading the whole file gave: enumerate(json.loads), or the same "not valid JSON" message."""
    try:
        return list(enumerate(json.loads(text), start=1))
    except ValueError as exc:
        return (
            f"f.json is not valid JSON ({exc}); write a JSON array of objects [{{field: value}}, …] or JSON Lines "
            "(one object per line)"
        )


async def _count(conn: asyncpg.Connection, table: Any) -> int:
    return int(await conn.fetchval(f"SELECT count(*) FROM {table.qualified}"))


DOCUMENTS = {
    "escapes-and-utf8": json.dumps(TRICKY, ensure_ascii=False),
    "ascii-escaped": json.dumps(TRICKY),  # \ud83d\ude00 surrogate pairs, \u4e2d…
    "numbers": "[123456789, 1.5e+10, -0.25, 1E-7, 0, -7, 12345678901234567890, true, false, null]",
    "pretty": json.dumps(TRICKY, ensure_ascii=False, indent=2),
    "crlf-and-tabs": '\r\n [\r\n\t{"a": 1}\t,\r\n\t{"b": "2"} ,{"c":3}\r\n]\r\n\r\n',
    "no-spaces": '[{"a":1},{"b":[1,2,{"c":"]"}]},"x,y",[],{}]',
    "empty-array": "[ ]",
    "nested-strings": '[{"a": "[{\\"inner\\": 1}, 2]"}, "},{", "\\\\", "\\"]"]',
}


BROKEN = {
    "trailing-garbage": '[{"a": 1}, {"b": 2}] x',
    "second-array": "[1, 2] [3]",
    "truncated": '[{"a": 1}, {"b": 2}',
    "truncated-after-comma": '[{"a": 1}, {"b": 2},',
    "truncated-in-string": '[{"a": 1}, {"b": "unfinished',
    "truncated-number": "[1, 2, 12",
    "missing-comma": '[{"a": 1} {"b": 2}]',
    "double-comma": "[1,, 2]",
    "trailing-comma": "[1, 2,]",
    "bad-value-later": '[{"a": 1},\n{"b": 2},\n{"c": tru}]',
    "control-character": '[{"a": "x\ny"}]',
    "only-bracket": "[",
}


@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_array_decoded_at_any_chunk_size_equals_json_loads(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOCUMENTS[name]
    expected = _whole(text)
    for bom in (b"", b"\xef\xbb\xbf"):
        data = bom + text.encode("utf-8")
        for chars in [*range(1, 24), 64, 1 << 16]:
            assert _parse(data, chars, monkeypatch) == expected, (chars, bom)
        assert _parse(data, 5, monkeypatch, trickle=True) == expected, bom


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_array_errors_equal_json_loads(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same message, positions counted in the whole file, whatever chunk the error falls in."""
    text = BROKEN[name]
    expected = _whole(text)
    assert isinstance(expected, str) and "not valid JSON" in expected
    for chars in [*range(1, 16), 1 << 16]:
        assert _parse(text.encode("utf-8"), chars, monkeypatch) == expected, chars


def test_error_far_into_a_file_is_placed_in_the_whole_file(monkeypatch: pytest.MonkeyPatch) -> None:
    text = json.dumps([{"n": i, "s": "中" * (i % 7)} for i in range(3000)], indent=1)
    text = text[:-200] + "?" + text[-199:]
    for chars in (13, 4096):
        assert _parse(text.encode("utf-8"), chars, monkeypatch) == _whole(text)


@pytest.mark.parametrize(
    "row",
    [
        lambda i: {"n": i, "s": "备注" * (i % 5)},  # flat rows: decoded many at a time
        lambda i: {"n": i, "obj": {"k": i, "v": [{"x": 1}, {"y": 2}]}},  # nested objects end in "}," too
        lambda i: {"n": i, "s": 'a "}, {" b' if i % 97 == 0 else "x"},  # a "}," inside a string
    ],
    ids=["flat", "nested", "brace-comma-in-string"],
)
def test_many_rows_per_decode_give_what_json_loads_gives(row: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Complete elements ahead are decoded as one array (one C call); whatever "}," a value holds, the rows, their
    numbers and the errors are json.loads' own."""
    text = json.dumps([row(i) for i in range(20_000)], ensure_ascii=False)
    for chars in (65_536, 5_000):
        assert _parse(text.encode("utf-8"), chars, monkeypatch) == _whole(text)
    broken = text[: len(text) // 2] + "?" + text[len(text) // 2 + 1 :]
    assert _parse(broken.encode("utf-8"), 65_536, monkeypatch) == _whole(broken)


def test_a_value_larger_than_the_chunk_is_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"big": "长" * 50_000 + '"\\'}, {"list": list(range(5000))}, 3]
    assert _parse(json.dumps(rows, ensure_ascii=False).encode("utf-8"), 16, monkeypatch) == list(
        enumerate(rows, start=1)
    )


def test_json_lines_keep_line_numbers_and_bad_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    data = '\ufeff{"a": 1}\r\n\r\n{"b": "中文😀"}\n{broken\n  \n{"c": 3}'.encode()
    for chars in (1, 5, 1 << 16):
        got = _parse(data, chars, monkeypatch, trickle=chars == 5)
        assert [(n, v if isinstance(v, dict) else "bad") for n, v in got] == [
            (1, {"a": 1}),
            (3, {"b": "中文😀"}),
            (4, "bad"),
            (6, {"c": 3}),
        ]
    first_bad = _parse(b'{"a": \n{"b": 1}\n', 4, monkeypatch)
    assert "neither a JSON array nor JSON Lines (line 1:" in first_bad


def test_wrapped_rows_refused_however_large_the_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper = {"total": 3000, "records": [{"名称": f"r{i}", "说明": "中" * 20} for i in range(3000)], "page": 1}
    for text in (json.dumps(wrapper, ensure_ascii=False), json.dumps(wrapper, indent=2)):
        message = _parse(text.encode("utf-8"), 64, monkeypatch)
        assert isinstance(message, str) and "one object wrapping the rows in 'records'" in message
    one_row = _parse(b'{"records": [1, 2], "x": {"y": [{}]}}\n', 4, monkeypatch)  # no list of objects: a row
    assert one_row == [(1, {"records": [1, 2], "x": {"y": [{}]}})]


def test_blank_and_not_utf8_files(monkeypatch: pytest.MonkeyPatch) -> None:
    for data in (b"", b" \n\t ", b"\xef\xbb\xbf"):
        assert "is empty or not JSON" in _parse(data, 2, monkeypatch)
    latin1 = '[{"名称": "ok"}, {"名称": "caf'.encode() + 'é"}]'.encode("latin-1")
    assert "is not UTF-8 text" in _parse(latin1, 3, monkeypatch)


async def test_large_file_streams_with_memory_bounded_by_the_chunk(conn, table, workspace: Path) -> None:
    """Read whole, a file cost about 5.5 times its size at peak; streamed, the chunk and the rows in flight."""
    total = 45_000
    path = workspace / "big.json"
    path.write_text(
        json.dumps(
            [{"名称": f"客户{i:06d}" + "备注" * 30, "数": i, "小数": i / 8, "说明": f"第{i}行"} for i in range(total)],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    size = path.stat().st_size
    assert size >= 8_000_000
    tracemalloc.start()
    try:
        result = await staging.insert_from_file(conn, table, "big.json", workspace=workspace)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result["inserted"] == total and result["verified_total"] == total and result["failed"] == 0
    assert peak < size, f"peak Python memory {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"
    last = await conn.fetchrow(f"SELECT * FROM {table.qualified} ORDER BY id DESC LIMIT 1")
    assert (
        last["名称"].startswith(f"客户{total - 1:06d}")
        and last["数"] == total - 1
        and last["说明"] == f"第{total - 1}行"
    )


async def test_rows_cut_across_chunks_arrive_intact(conn, table, workspace: Path, small_chunks: None) -> None:
    rows = TRICKY * 40
    for name, text in (
        ("utf8.json", json.dumps(rows, ensure_ascii=False)),
        ("escaped.json", json.dumps(rows)),
        ("pretty.json", "\ufeff" + json.dumps(rows, ensure_ascii=False, indent=4).replace("\n", "\r\n") + "\n\n"),
        ("tight.json", json.dumps(rows, ensure_ascii=False, separators=(",", ":"))),
    ):
        await conn.execute(f"TRUNCATE {table.qualified}")
        (workspace / name).write_text(text, encoding="utf-8")
        result = await staging.insert_from_file(conn, table, name, workspace=workspace)
        assert result["inserted"] == len(rows) and result["failed"] == 0, (name, result)
        stored = await conn.fetch(f"SELECT 名称, 数, 小数, 说明 FROM {table.qualified} ORDER BY id")
        assert [dict(r) for r in stored[:3]] == [{**r, "小数": Decimal(str(r["小数"]))} for r in TRICKY], name
        assert [r["数"] for r in stored] == [r["数"] for r in rows], name


@pytest.mark.parametrize(
    "tail",
    ["] trailing", "]]", ', {"名称": "last"}', ", ", ' {"名称": "no comma"}]', ', {"名称": }]'],
    ids=["garbage-after-array", "second-bracket", "missing-bracket", "comma-then-end", "missing-comma", "bad-value"],
)
async def test_errors_after_rows_went_to_copy_write_nothing(conn, table, workspace: Path, tail: str) -> None:
    """The error is found only after thousands of rows were sent to COPY: the import still writes nothing and the
    connection stays usable."""
    body = json.dumps([{"名称": f"n{i}", "数": i} for i in range(12_000)], ensure_ascii=False)[:-1]
    (workspace / "bad.json").write_text(body + tail, encoding="utf-8")
    with pytest.raises(RowsError, match=r"bad\.json is not valid JSON") as info:
        await staging.insert_from_file(conn, table, "bad.json", workspace=workspace)
    assert info.value.need_param == "file"
    assert await _count(conn, table) == 0
    (workspace / "good.json").write_text(body + "]", encoding="utf-8")
    again = await staging.insert_from_file(conn, table, "good.json", workspace=workspace)
    assert again["inserted"] == again["verified_total"] == 12_000


async def test_whitespace_and_bom_variations_import(conn, table, workspace: Path, small_chunks: None) -> None:
    variants = {
        "bom.json": '\ufeff[{"名称": "a"}, {"名称": "b"}]',
        "spaces.json": ' \n\t [ \n {"名称": "a"} \n , \n\t{"名称": "b"}\n ] \n\n ',
        "crlf.json": '[\r\n{"名称": "a"},\r\n{"名称": "b"}\r\n]\r\n',
        "lines-bom.jsonl": '\ufeff{"名称": "a"}\r\n\r\n{"名称": "b"}\r\n',
    }
    for name, text in variants.items():
        await conn.execute(f"TRUNCATE {table.qualified}")
        (workspace / name).write_text(text, encoding="utf-8")
        result = await staging.insert_from_file(conn, table, name, workspace=workspace)
        assert result["inserted"] == 2 and result["failed"] == 0, (name, result)
        assert [r["名称"] for r in await conn.fetch(f"SELECT 名称 FROM {table.qualified} ORDER BY id")] == ["a", "b"]


async def test_refusals_before_any_row(conn, table, workspace: Path, small_chunks: None) -> None:
    wrapper = {"count": 500, "rows": [{"名称": f"r{i}"} for i in range(500)]}
    files = {
        "wrapped.json": (json.dumps(wrapper, ensure_ascii=False), "wrapping the rows in 'rows'"),
        "empty.json": ("\ufeff \n", "empty or not JSON"),
        "none.json": (" [ ] ", "holds no rows"),
        "latin1.json": (None, "not UTF-8 text"),
    }
    for name, (text, pattern) in files.items():
        path = workspace / name
        if text is None:
            path.write_bytes(b'[{"\xe5\x90\x8d\xe7\xa7\xb0": "caf\xe9"}]')
        else:
            path.write_text(text, encoding="utf-8")
        with pytest.raises(RowsError, match=pattern) as info:
            await staging.insert_from_file(conn, table, name, workspace=workspace)
        assert info.value.need_param == "file", name
    assert await _count(conn, table) == 0


async def test_import_file_wrapping_the_rows_in_an_object_is_refused(yard: SkillYard, org: str) -> None:
    """``{"records": [...]}`` on one line used to be read as one JSON Lines row: 0 inserted, 1 skipped, ok."""
    table_id = await make_numbered_table(yard, org)
    ctx = context(org)
    workspace = Path(yard.workspace(ctx["session_id"]))
    workspace.mkdir(parents=True, exist_ok=True)
    rows = [{"姓名": "甲", "编号": "W1"}, {"姓名": "乙", "编号": "W2"}]
    (workspace / "wrapped.json").write_text(json.dumps({"records": rows}, ensure_ascii=False), encoding="utf-8")
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file="wrapped.json")
    assert env["ok"] is False and env["need_param"] == "file" and "'records'" in env["error"], env
    (workspace / "one.jsonl").write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    single = await run(yard, ctx, "insert_from_file", table_id=table_id, file="one.jsonl")
    assert single["ok"] and single["inserted"] == 1  # a one-line JSON Lines file is still one row


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.spec("§7.8.7")
async def test_insert_from_file_refuses_files_outside_the_workspace(yard: SkillYard, org: str, tmp_path: Path) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps([{"姓名": "x"}]), encoding="utf-8")
    for path in (str(outside), "../outside.json", "../../outside.json"):
        env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=path)
        assert env["ok"] is False and env.get("need_param") == "file", env


async def test_insert_from_file_json_lines_and_absolute_path_inside_workspace(yard: SkillYard, org: str) -> None:
    ctx = context(org)
    table_id = await make_table(yard, org)
    target = session_workspace(yard, ctx) / "import" / "rows.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        "\n".join(json.dumps({"姓名": f"j{i}"}, ensure_ascii=False) for i in range(105)), encoding="utf-8"
    )
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=str(target))
    assert env["ok"] and env["inserted"] == 105 and env["verified_total"] == 105, env


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
async def test_import_json_lines_with_a_broken_line_keeps_the_others(yard: SkillYard, org: str) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_text(yard, ctx, "import/rows.jsonl", '{"姓名": "a"}\n{"姓名": \n\n{"姓名": "c"}\n')
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] and (env["inserted"], env["failed"]) == (2, 1) and env["errors"][0]["row"] == 2, env


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "text",
    ['[{"姓名": "a"}, {"姓名": }]', "", "not json", '{\n "姓名": "a"\n}', "[]", '{"rows": [{"姓名": "a"}]}'],
    ids=["broken-array", "empty", "text", "pretty-object", "empty-array", "wrapped"],
)
async def test_import_files_that_cannot_be_read_are_refused_and_write_nothing(
    yard: SkillYard, org: str, conn: Any, text: str
) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_text(yard, ctx, "import/bad.json", text)
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] is False and env["need_param"] == "file" and env["error_type"] == "recoverable", env
    assert await count(conn, org) == 0


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
@pytest.mark.parametrize(
    "wrapper",
    [
        {"count": 2, "rows": [{"姓名": "a"}, {"姓名": "b"}]},
        {"records": [{"姓名": "a"}, {"姓名": "b"}], "total": 2, "page": 1},
    ],
    ids=["count-and-rows", "records-total-page"],
)
async def test_import_of_an_object_wrapping_the_rows_is_refused(
    yard: SkillYard, org: str, conn: Any, wrapper: dict[str, Any]
) -> None:
    """references/actions.md: the file is "a JSON array of objects or JSON Lines …; not an object wrapping the
    array such as {"records": […]}". A wrapper with a second key must be refused like the one-key wrapper, not
    read as one empty row and answered ok with inserted 0."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    rel = write_json(yard, ctx, "import/wrapped.json", wrapper)
    env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
    assert env["ok"] is False and env.get("need_param") == "file", env
    assert await count(conn, org) == 0


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
async def test_import_refuses_symlinks_out_and_directories(yard: SkillYard, org: str, tmp_path: Path) -> None:
    table_id = await make_table(yard, org)
    ctx = context(org)
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps([{"姓名": "leak"}], ensure_ascii=False), encoding="utf-8")
    ws = session_workspace(yard, ctx)
    (ws / "import").mkdir(exist_ok=True)
    os.symlink(outside, ws / "import" / "link.json")
    (ws / "import" / "dir.json").mkdir()
    for rel in ("import/link.json", "import/dir.json", "./import/../import/link.json"):
        env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
        assert env["ok"] is False and env["need_param"] == "file", (rel, env)
    assert (await run(yard, ctx, "query", table_id=table_id))["pageInfo"]["totalRows"] == 0


@pytest.mark.spec("§7.3")
@pytest.mark.spec("§7.4")
async def test_import_streams_the_file_instead_of_holding_it_whole(yard: SkillYard, org: str) -> None:
    """Issue 4: "insert_from_file streams the file and loads it with PostgreSQL COPY". Streaming keeps memory
    bounded by the chunk, not by the file: the peak of Python allocations during the import stays below the size
    of the file (here ≈ 9 MB; reading, decoding and parsing the whole file costs several times its size)."""
    table_id = await make_table(yard, org)
    ctx = context(org)
    rows = [
        {"姓名": f"客户名称{i:08d}" + "备注" * 20, "工号": f"E{i % 50}", "城市": "上海", "金额": i}
        for i in range(40000)
    ]
    rel = write_json(yard, ctx, "import/big.json", rows)
    del rows
    size = (session_workspace(yard, ctx) / rel).stat().st_size
    assert (await run(yard, ctx, "list_tables"))["ok"]  # warm up
    tracemalloc.start()
    try:
        env = await run(yard, ctx, "insert_from_file", table_id=table_id, file=rel)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert env["ok"] and env["inserted"] == 40000 and env["verified_total"] == 40000, env
    assert peak < size, f"peak Python memory {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"
