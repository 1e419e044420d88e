"""insert_from_file streams its JSON file (issue 4): read a chunk at a time, an array decoded one element at a time.

The parser is checked against json.loads at many chunk sizes (cuts inside strings, escapes, multi-byte characters
and numbers), and the import itself against a real PostgreSQL: memory bounded by the chunk, not the file; errors
found after rows went to COPY still leave nothing behind.
"""

from __future__ import annotations

import io
import json
import tracemalloc
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from support.datatable import load_datatable_module

store_schema = load_datatable_module("store_schema")
store_tables = load_datatable_module("store_tables")
rows_errors = load_datatable_module("rows_errors")
importer = load_datatable_module("importer")
importer_rows = load_datatable_module("importer_rows")
RowsError = rows_errors.RowsError

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
def schema() -> str:
    return store_schema.schema_for("Imps-" + uuid.uuid4().hex[:12])


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
async def table(conn: asyncpg.Connection, schema: str) -> Any:
    created = await store_tables.create_table(conn, schema, "流式", FIELDS)
    return await store_schema.resolve_table(conn, schema, created["id"])


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven characters per read: every row of a test file is cut several times."""
    monkeypatch.setattr(importer_rows, "READ_CHARS", 7)


class Trickle(io.BytesIO):
    """A file that hands out at most three bytes per read, so multi-byte UTF-8 characters arrive split."""

    def read1(self, size: int = -1) -> bytes:
        return super().read1(3 if size < 0 else min(size, 3))


def _parse(data: bytes, chars: int, monkeypatch: pytest.MonkeyPatch, *, trickle: bool = False) -> Any:
    """records() at ``chars`` characters per read: the rows, or the error message."""
    monkeypatch.setattr(importer_rows, "READ_CHARS", chars)
    source = Trickle(data) if trickle else io.BytesIO(data)
    try:
        return list(importer_rows.records(source, "f.json"))
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


# --------------------------------------------------------------------------------------------------------------------
# the parser against json.loads


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


# --------------------------------------------------------------------------------------------------------------------
# the import, against PostgreSQL


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
        result = await importer.insert_from_file(conn, table, "big.json", workspace=workspace)
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
        result = await importer.insert_from_file(conn, table, name, workspace=workspace)
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
        await importer.insert_from_file(conn, table, "bad.json", workspace=workspace)
    assert info.value.need_param == "file"
    assert await _count(conn, table) == 0
    (workspace / "good.json").write_text(body + "]", encoding="utf-8")
    again = await importer.insert_from_file(conn, table, "good.json", workspace=workspace)
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
        result = await importer.insert_from_file(conn, table, name, workspace=workspace)
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
            await importer.insert_from_file(conn, table, name, workspace=workspace)
        assert info.value.need_param == "file", name
    assert await _count(conn, table) == 0
