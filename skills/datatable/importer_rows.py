"""The file side of insert_from_file (spec §7.3, §7.4 批量路径): reading the JSON file and preparing its rows for COPY.

Reading and preparing (importer.py runs the COPY and the move into the table):

* the file must resolve (symlinks followed) inside the workspace (:func:`resolve`); it is a JSON array of objects,
  or JSON Lines (one object per line), read a chunk at a time (:func:`records`);
* each row is renamed by ``mapping`` ({target field: source key}), blanks / missing values are filled from
  ``defaults``, and it is validated by one :class:`~.row_validator.RowValidator` (insert rules: required fields,
  types, options); ``stamp`` values (row scope owner) are forced on every valid row (:class:`Prepared`);
* :func:`stream` yields the COPY records :data:`CHUNK_ROWS` at a time, so the server ingests one chunk while Python
  validates the next.

Decisions:

* Row numbers in ``errors`` are 1-based: the position in the array, or the line number for JSON Lines. At most
  :data:`~.rows_errors.MAX_ERRORS` are listed; ``failed`` counts all.
* ``skipped`` also counts empty rows (no value for any field), like insert_batch.
* Unknown source keys are ignored (§7.5) and listed in ``dropped``.
* The file is streamed, never read whole (issue 4: peak memory was ~5.5 times the file): :func:`records` decodes it
  (UTF-8, BOM allowed) :data:`READ_CHARS` characters at a time; an array is decoded by the stdlib (C) json decoder
  on that moving window — the complete elements ahead (the text up to the last "},") in one call, else one element
  at a time (``raw_decode``) — JSON Lines a line at a time, a wrapping object a value at a time. Memory is the
  window plus one chunk of COPY records (about 5 MB at peak for 8–12 MB files,
  whatever the size). A value ending at the window's end (12 of 123) or an error found near it is decoded again
  after reading on. Errors keep json.loads' messages, placed in the whole file, but are found where they are: one
  late in the file surfaces after rows went to COPY, and the transaction rolls back (nothing is written). Decoding
  many elements per call keeps json's key memo across them: parsing 100,000 rows of 10 fields takes about 0.4 s,
  less than json.loads of the whole file (0.55 s), where one element per call took 0.55 s. orjson is not a
  dependency. The file is never deleted here: the calling skill cleans up (§7.4).
* Speed (bench/bench_datatable_import.py): Python validation dominates. Converted values are memoised per field for
  repeated text values (:func:`memoize`; a field whose values do not repeat turns it off by itself), and COPY records
  are built with one itemgetter call (the importer also pauses the cyclic garbage collector).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, islice
from operator import itemgetter
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from .field_errors import FieldError
from .field_types import FieldDef
from .row_validator import RowValidator
from .rows_errors import RowErrors, RowsError

__all__ = [
    "CHUNK_ROWS",
    "READ_CHARS",
    "Prepared",
    "defaults",
    "mapping",
    "memoize",
    "on_conflict",
    "records",
    "resolve",
    "stamp",
    "stream",
]

#: Rows validated per chunk handed to COPY.
CHUNK_ROWS = 5000
_REQUIRED = ": required; give a value"
#: Characters decoded per read of the import file: memory follows this (and CHUNK_ROWS), not the file size. 64 Ki
#: keeps the window in the CPU cache; 1 Mi was no faster and held 12 MB at peak against 5 MB.
READ_CHARS = 1 << 16
#: json stops a number before a cut "1." or "1e+" (taking 1): a value ending this close to the window's end may go on.
_NUMBER_TAIL = 2
#: The longest token json reports at its start when it is cut: a decoding error this close to the window's end may be
#: the cut.
_LONGEST_TOKEN = len("-Infinity")
_NON_SPACE = re.compile(r"[^ \t\n\r]")  # JSON whitespace is these four only
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
_decode = json.JSONDecoder().raw_decode
_loads = json.loads
#: Below this many characters of complete elements ahead, decoding them as one array saves nothing.
_BATCH_MIN_CHARS = 4096


def resolve(path: Any, workspace: Path) -> Path:
    if not isinstance(path, str | os.PathLike) or not os.fspath(path).strip():
        raise RowsError("file is required: the path of a JSON file in the workspace", need_param="file")
    text = os.fspath(path)
    if "\x00" in text:
        raise RowsError("file contains a NUL character; give a plain path in the workspace", need_param="file")
    root = Path(os.path.realpath(workspace))
    candidate = Path(text) if os.path.isabs(text) else root / text
    real = Path(os.path.realpath(candidate))
    if not real.is_relative_to(root):
        raise RowsError(
            f"file {text!r} is outside the workspace; write the JSON file into the workspace (e.g. "
            "'imports/rows.json') and pass its path relative to it",
            need_param="file",
        )
    if not real.is_file():
        raise RowsError(f"file {text!r} does not exist in the workspace (or is not a file)", need_param="file")
    return real


def records(source: BinaryIO, name: str) -> Iterator[tuple[int, Any]]:
    """(1-based row number, parsed value) for a JSON array, or (line number, value) for JSON Lines, read from the
    open file a chunk at a time (never the whole file at once)."""
    text = io.TextIOWrapper(source, encoding="utf-8-sig", newline="")  # newline="": offsets as in the file
    try:
        start = _first_char(text)
        text.seek(0)
        if start == "[":
            yield from _array_rows(text, name)
        elif start == "{":
            yield from _line_rows(text, name)
        else:
            raise RowsError(
                f"{name} is empty or not JSON; write a JSON array of objects [{{field: value}}, …] or JSON Lines",
                need_param="file",
            )
    except UnicodeDecodeError as exc:  # found wherever the bad bytes are, maybe after rows went to COPY
        raise RowsError(f"{name} is not UTF-8 text ({exc}); save it as UTF-8", need_param="file") from None


def _first_char(text: TextIO) -> str:
    """The first non-blank character of the file ("" for a blank file): an array or JSON Lines."""
    while chunk := text.read(READ_CHARS):
        stripped = chunk.lstrip()
        if stripped:
            return stripped[0]
    return ""


def _array_rows(text: TextIO, name: str) -> Iterator[tuple[int, Any]]:
    """(position, element) of a file that is one JSON array; after its ``]`` only whitespace may follow."""
    window = _Window(text)
    try:
        yield from enumerate(_elements(window), start=1)
        if window.skip():
            raise window.error("Extra data")
    except UnicodeDecodeError:
        raise
    except ValueError as exc:
        raise RowsError(
            f"{name} is not valid JSON ({exc}); write a JSON array of objects [{{field: value}}, …] or JSON "
            "Lines (one object per line)",
            need_param="file",
        ) from None


def _line_rows(text: TextIO, name: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of JSON Lines; blank lines are skipped, a bad line is one failed row unless it is the
    first (then the file is no JSON Lines at all)."""
    _refuse_wrapped(text, name)
    text.seek(0)
    loads = json.loads
    for number, line in enumerate(_lines(text), start=1):
        if line and not line.isspace():
            try:
                yield number, loads(line)
            except ValueError as exc:
                if number == 1:
                    raise RowsError(
                        f"{name} is neither a JSON array nor JSON Lines (line 1: {exc}); write a JSON array of "
                        "objects or one object per line",
                        need_param="file",
                    ) from None
                yield number, BadLine(str(exc))


def _lines(text: TextIO) -> Iterator[str]:
    """The file's lines cut as str.splitlines cuts them (also at \\v, \\f, \\x1c–\\x1e, \\x85, U+2028 and U+2029, not
    only at line ends), so line numbers are what they were when the file was read whole; one line held at a time."""
    for line in text:
        yield from line.splitlines()


def _refuse_wrapped(text: TextIO, name: str) -> None:
    """A whole file that is one object wrapping the rows (``{"records": [{…}, …]}``) is not one row of JSON Lines:
    read as one, its only key would be dropped as unknown and nothing imported — refused with the fix instead."""
    key = _wrapping_key(_Window(text))
    if key is not None:
        raise RowsError(
            f"{name} is one object wrapping the rows in {key!r}; write the array itself ([{{field: value}}, …]) "
            "as the whole file, or JSON Lines (one object per line)",
            need_param="file",
        )


def _wrapping_key(window: _Window) -> str | None:
    """The first key under which a file that is exactly one JSON object holds a non-empty list of objects
    (``{"records": [...]}`` or ``{"count": 2, "rows": [...]}``); None for anything else: JSON Lines with several
    lines (more follows the first object), broken JSON, an object without such a list."""
    try:
        holds = _members(window)
    except ValueError:
        return None
    if window.skip():
        return None
    return next((key for key, rows in holds.items() if rows), None)


def _members(window: _Window) -> dict[str, bool]:
    """{key: whether its value is a non-empty list of objects} of the JSON object at the window, read a value at a
    time (a large wrapper costs no more memory than an array); a repeated key counts with its last value, as in
    json.loads."""
    if window.skip() != "{":
        raise window.error("Expecting value")
    window.pos += 1
    holds: dict[str, bool] = {}
    if window.skip() == "}":
        window.pos += 1
        return holds
    while True:
        if window.skip() != '"':
            raise window.error("Expecting property name enclosed in double quotes")
        key = window.value()
        if window.skip() != ":":
            raise window.error("Expecting ':' delimiter")
        window.pos += 1
        if window.skip() == "[":
            holds[key] = {item.__class__ is dict for item in _elements(window)} == {True}  # non-empty, all objects
        else:
            window.value()
            holds[key] = False
        if not window.comma():
            break
    if window.skip() != "}":
        raise window.error("Expecting ',' delimiter")
    window.pos += 1
    return holds


def _elements(window: _Window) -> Iterator[Any]:
    """The elements of the JSON array at the window, decoded one at a time; the window ends right after its ``]``.
    Errors are json.loads' own ("Expecting ',' delimiter: line 1 column 9 (char 8)"), placed in the whole file."""
    if window.skip() != "[":
        raise window.error("Expecting value")
    window.pos += 1
    if window.skip() == "]":
        window.pos += 1
        return
    while True:
        rows = window.batch()
        if rows:
            yield from rows
        else:
            yield window.value()
        if not window.comma():
            break
    if window.skip() != "]":
        raise window.error("Expecting ',' delimiter")
    window.pos += 1


class _Window:
    """The decoded text of the import file, moving forward a chunk at a time: ``text[pos:]`` is still to be parsed,
    what lies before ``pos`` is dropped at the next read. The offset and the line count of what was dropped place
    errors in the whole file, as json.loads would."""

    __slots__ = ("_batching", "_done", "_last_newline", "_lines", "_offset", "_source", "pos", "text")

    def __init__(self, source: TextIO) -> None:
        self._source = source
        self.text = ""
        self.pos = 0
        self._done = False
        self._offset = 0  # characters dropped before text[0]
        self._lines = 0  # newlines among them
        self._last_newline = -1  # offset of the last of them
        self._batching = True  # until a "}," turns out to lie inside a value

    def more(self) -> bool:
        """Read on (False at the end of the file): a chunk, or as much as is kept when one value outgrows the
        chunk, so a huge value is decoded a few times, not once per chunk."""
        if self._done:
            return False
        dropped = self.text.count("\n", 0, self.pos)
        if dropped:
            self._lines += dropped
            self._last_newline = self._offset + self.text.rfind("\n", 0, self.pos)
        self._offset += self.pos
        kept = self.text[self.pos :]
        self.text = ""  # let the old window go before the next chunk is read
        chunk = self._source.read(max(READ_CHARS, len(kept)))
        self.text = kept + chunk
        self.pos = 0
        self._done = not chunk
        return not self._done

    def skip(self) -> str:
        """Skip JSON whitespace, reading on as needed: the next character, or "" at the end of the file."""
        while True:
            found = _NON_SPACE.search(self.text, self.pos)
            if found:
                self.pos = found.start()
                return found.group()
            self.pos = len(self.text)
            if not self.more():
                return ""

    def comma(self) -> bool:
        """Skip a comma and the whitespace around it, if one comes next (reading on as needed). The usual ", " is
        one regex match: this runs once per row."""
        found = _COMMA.match(self.text, self.pos)
        if found and found.end() < len(self.text):
            self.pos = found.end()
            return True
        if self.skip() != ",":
            return False
        self.pos += 1
        self.skip()
        return True

    def batch(self) -> list[Any]:
        """The complete elements ahead, decoded in one call when the window holds many: the text up to the last
        "}," is decoded as one array (one C call instead of one per row, and json shares the key strings within a
        call). A "}," inside a value (a nested object, a string) makes that text invalid JSON — it then has an
        unclosed brace or string — and from there on elements are decoded one at a time ([] is returned), which
        also places any real error exactly."""
        cut = self.text.rfind("},", self.pos)
        if not self._batching or cut - self.pos < _BATCH_MIN_CHARS:
            return []
        try:
            rows: list[Any] = _loads("[" + self.text[self.pos : cut + 1] + "]")
        except ValueError:
            self._batching = False
            return []
        self.pos = cut + 1
        return rows

    def value(self) -> Any:
        """The JSON value at the window's position (whitespace skipped before), decoded by json's C decoder, reading
        on while it may be cut by the window's end: a value ending there may go on (12 of 123), and so may an error
        found there (json places a cut token at its start, a cut string at its opening quote however long it is)."""
        while True:
            try:
                value, end = _decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self._done or not self._maybe_cut(exc):
                    raise ValueError(self._where(exc.msg, exc.pos)) from None
            else:
                if end + _NUMBER_TAIL < len(self.text) or self._done:
                    self.pos = end
                    return value
            self.more()

    def _maybe_cut(self, exc: json.JSONDecodeError) -> bool:
        return exc.msg.startswith("Unterminated string") or exc.pos + _LONGEST_TOKEN >= len(self.text)

    def error(self, message: str) -> ValueError:
        """json's error for the window's position."""
        return ValueError(self._where(message, self.pos))

    def _where(self, message: str, pos: int) -> str:
        """json's "message: line L column C (char N)", counted in the whole file, not in the window."""
        at = self._offset + pos
        newline = self.text.rfind("\n", 0, pos)
        last_newline = self._offset + newline if newline >= 0 else self._last_newline
        line = self._lines + self.text.count("\n", 0, pos) + 1
        return f"{message}: line {line} column {at - last_newline} (char {at})"


class BadLine:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _check_targets(keys: Any, fields: Mapping[str, FieldDef], what: str) -> None:
    unknown = [str(k) for k in keys if k not in fields]
    if unknown:
        raise RowsError(
            f"{what} names unknown field(s) {', '.join(unknown)}; fields are {', '.join(fields)}", need_param=what
        )


def mapping(mapping: Any, fields: Mapping[str, FieldDef]) -> dict[str, str]:
    if mapping in (None, {}):
        return {}
    if not isinstance(mapping, Mapping) or not all(isinstance(v, str) and v for v in mapping.values()):
        raise RowsError(
            'mapping must be an object {target field: source key}, e.g. {"姓名": "name"}', need_param="mapping"
        )
    _check_targets(mapping, fields, "mapping")
    return {str(k): v for k, v in mapping.items()}


def defaults(defaults: Any, fields: Mapping[str, FieldDef], validator: RowValidator) -> dict[str, Any]:
    if defaults in (None, {}):
        return {}
    if not isinstance(defaults, Mapping):
        raise RowsError('defaults must be an object {field: value}, e.g. {"状态": "新建"}', need_param="defaults")
    _check_targets(defaults, fields, "defaults")
    for key, value in defaults.items():
        try:
            validator.convert(key, value)
        except FieldError as exc:
            raise RowsError(f"defaults: {exc}", need_param="defaults") from None
    return dict(defaults)


def stamp(stamp: Mapping[str, Any], fields: Mapping[str, FieldDef], validator: RowValidator) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in stamp.items():
        if key not in fields:
            raise RowsError(
                f"the forced field {key!r} does not exist in this table; check the owner-field setting",
                error_type="config",
                non_retriable=True,
            )
        try:
            values[key] = validator.convert(key, value)
        except FieldError as exc:
            raise RowsError(f"forced value: {exc}", error_type="config", non_retriable=True) from None
    return values


def on_conflict(value: Any) -> bool:
    if value in (None, "", "error"):
        return False
    if isinstance(value, str) and value.strip().lower() == "skip":
        return True
    raise RowsError(f"on_conflict must be 'skip' or omitted, got {value!r}", need_param="on_conflict")


_MISS = object()
#: Distinct values remembered per field, and the misses after which a field whose values rarely repeat (names,
#: e-mails, timestamps) stops being looked up.
_MEMO_SIZE = 4096
_MEMO_PROBE = 2000


def memoize(validator: RowValidator) -> None:
    """Remember each field's converted value per distinct text (and per list of texts for 多选) in this import.

    The converters are pure functions of the value, so repeated values (options, flags, dates, departments…) are
    converted once; a field whose values do not repeat (more than half misses after :data:`_MEMO_PROBE`) goes back to
    the plain converter. Only str keys are used (1 / 1.0 / True hash alike but convert differently).
    """
    for title, convert in validator.converters().items():
        validator.set_converter(title, _memo(convert, validator, title))


def _memo(convert: Any, validator: RowValidator, title: str) -> Any:
    cache: dict[Any, Any] = {}
    misses = calls = 0

    def cached(value: Any) -> Any:
        nonlocal misses, calls
        calls += 1
        cls = value.__class__
        if cls is str:
            key: Any = value
        elif cls is list and all(item.__class__ is str for item in value):
            key = ("\x00list", *value)
        else:
            key = _MISS
        hit = cache.get(key, _MISS) if key is not _MISS else _MISS
        if hit is not _MISS:
            return hit
        misses += 1
        if misses >= _MEMO_PROBE and misses * 2 > calls:
            validator.set_converter(title, convert)  # values rarely repeat (or are not text): stop looking them up
            cache.clear()
            return convert(value)
        result = convert(value)  # a FieldError is raised, never remembered
        if key is not _MISS and len(cache) < _MEMO_SIZE:
            cache[key] = result
        return result

    return cached


class Prepared:
    """Turns source rows into COPY records ``(rn, v1, …, vn)``, counting errors, empties and dropped keys."""

    def __init__(
        self,
        validator: RowValidator,
        columns: list[str],
        mapping: dict[str, str],
        defaults: dict[str, Any],
        forced: dict[str, Any],
    ) -> None:
        self.validator = validator
        self.columns = columns
        self.mapping = mapping
        self.defaults = defaults
        self.forced = forced
        self.errors = RowErrors()
        self.empty = 0
        self.valid = 0
        self.dropped: dict[str, None] = {}

    def _reshape(self, row: dict[str, Any]) -> dict[str, Any]:
        if self.mapping:
            out = dict(row)
            for source in self.mapping.values():
                out.pop(source, None)
            for target, source in self.mapping.items():
                if source in row:
                    out[target] = row[source]
            row = out
        if self.defaults:
            if not self.mapping:
                row = dict(row)
            for key, value in self.defaults.items():
                given = row.get(key)
                if given is None or (given.__class__ is str and (not given or given.isspace())):
                    row[key] = value
        return row

    def chunk(self, items: Iterable[tuple[int, Any]]) -> list[tuple[Any, ...]]:
        validate = self.validator.validate
        columns = self.columns
        forced = self.forced
        reshape = self.mapping or self.defaults
        width = len(columns)
        pick = itemgetter(*columns) if width > 1 else lambda values: (values[columns[0]],)  # 1 name: not a tuple
        out: list[tuple[Any, ...]] = []
        append = out.append
        for number, row in items:
            if row.__class__ is BadLine:
                self.errors.add(number, f"(row): not valid JSON ({row.reason})")
                continue
            if reshape and row.__class__ is dict:
                row = self._reshape(row)
            values, unknown, problems = validate(row, insert=True)
            if unknown:
                self.dropped.update(dict.fromkeys(unknown))
            if problems:
                if all(v is None for v in values.values()) and all(p.endswith(_REQUIRED) for p in problems):
                    self.empty += 1
                else:
                    self.errors.add(number, "; ".join(problems))
                continue
            for value in values.values():  # empty row (only blanks): skipped, like insert_batch
                if value is not None:
                    break
            else:
                self.empty += 1
                continue
            if forced:
                values.update(forced)
            if len(values) == width:
                append((number, *pick(values)))
            else:
                append((number, *map(values.get, columns)))
        self.valid += len(out)
        return out


def stream(prepared: Prepared, items: Iterator[tuple[int, Any]]) -> Iterator[tuple[Any, ...]]:
    """The COPY records, validated :data:`CHUNK_ROWS` at a time while asyncpg sends the previous ones.

    A plain (sync) iterator: asyncpg writes its buffer to the socket every 512 KB, so the server ingests while the
    next chunk is validated, without an async generator step per row. A chunk validates the rows straight from the
    file's iterator (no list of them), so each parsed row is let go once validated: what is in flight is one chunk
    of COPY records, not also the parsed rows behind them."""
    for first in items:
        yield from prepared.chunk(chain((first,), islice(items, CHUNK_ROWS - 1)))
