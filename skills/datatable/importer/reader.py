"""The import file of insert_from_file (spec §7.3, §7.4 批量路径): where it may be, and its rows read a chunk at a time.

* The file must resolve (symlinks followed) inside the workspace (:func:`resolve`); it is a JSON array of objects,
  or JSON Lines (one object per line) (:func:`records`). Row numbers are 1-based: the position in the array, or the
  line number for JSON Lines; a bad line of JSON Lines is one failed row (:class:`BadLine`).
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
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from ..rows.errors import RowsError

__all__ = ["READ_CHARS", "BadLine", "records", "resolve"]


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
