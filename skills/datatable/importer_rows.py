"""The file side of insert_from_file (spec §7.3, §7.4 批量路径): reading the JSON file and preparing its rows for COPY.

Reading and preparing (importer.py runs the COPY and the move into the table):

* the file must resolve (symlinks followed) inside the workspace (:func:`resolve`); it is a JSON array of objects,
  or JSON Lines (one object per line) (:func:`records`);
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
* The file is read whole and parsed with the stdlib (C) json parser (about 0.4 s for 100,000 rows of 10 fields,
  27 MB, on the 2-vCPU dev VM; orjson was only ~30 % faster and is not a dependency); JSON Lines are parsed line by
  line. The file is never deleted here: the calling skill cleans up (§7.4).
* Speed (bench/bench_datatable_import.py): Python validation dominates. Converted values are memoised per field for
  repeated text values (:func:`memoize`; a field whose values do not repeat turns it off by itself), and COPY records
  are built with one itemgetter call (the importer also pauses the cyclic garbage collector).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from typing import Any

from .field_errors import FieldError
from .field_types import FieldDef
from .row_validator import RowValidator
from .rows_errors import RowErrors, RowsError

__all__ = [
    "CHUNK_ROWS",
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


def records(raw: bytes, name: str) -> Iterator[tuple[int, Any]]:
    """(1-based row number, parsed value) for a JSON array, or (line number, value) for JSON Lines."""
    text = raw.decode("utf-8-sig")
    start = text.lstrip()[:1]
    if start == "[":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise RowsError(
                f"{name} is not valid JSON ({exc}); write a JSON array of objects [{{field: value}}, …] or JSON "
                "Lines (one object per line)",
                need_param="file",
            ) from None
        yield from enumerate(data, start=1)
        return
    if start != "{":
        raise RowsError(
            f"{name} is empty or not JSON; write a JSON array of objects [{{field: value}}, …] or JSON Lines",
            need_param="file",
        )
    loads = json.loads
    _refuse_wrapped(text, name)
    for number, line in enumerate(text.splitlines(), start=1):
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


def _refuse_wrapped(text: str, name: str) -> None:
    """A whole file that is one object wrapping the rows (``{"records": [{…}, …]}``) is not one row of JSON Lines:
    read as one, its only key would be dropped as unknown and nothing imported — refused with the fix instead."""
    try:
        whole = json.loads(text)
    except ValueError:  # JSON Lines with several lines ("Extra data" right after the first one), or broken
        return
    if not isinstance(whole, dict) or len(whole) != 1:
        return
    ((key, value),) = whole.items()
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        raise RowsError(
            f"{name} is one object wrapping the rows in {key!r}; write the array itself ([{{field: value}}, …]) "
            "as the whole file, or JSON Lines (one object per line)",
            need_param="file",
        )


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

    def chunk(self, items: list[tuple[int, Any]]) -> list[tuple[Any, ...]]:
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
    next chunk is validated, without an async generator step per row."""
    batch: list[tuple[int, Any]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= CHUNK_ROWS:
            yield from prepared.chunk(batch)
            batch = []
    yield from prepared.chunk(batch)
