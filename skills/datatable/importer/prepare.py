"""The rows of insert_from_file's file made ready for COPY (spec §7.3, §7.4 批量路径; the file is read by reader.py,
the COPY and the move into the table are staging.py).

* Each row is renamed by ``mapping`` ({target field: source key}), blanks / missing values are filled from
  ``defaults``, and it is validated by one :class:`~..fields.validator.RowValidator` (insert rules: required fields,
  types, options); ``stamp`` values (row scope owner) are forced on every valid row (:class:`Prepared`).
* :func:`stream` yields the COPY records :data:`CHUNK_ROWS` at a time, so the server ingests one chunk while Python
  validates the next.
* At most :data:`~..rows.errors.MAX_ERRORS` errors are listed; ``failed`` counts all. ``skipped`` also counts empty
  rows (no value for any field), like insert_batch. Unknown source keys are ignored (§7.5) and listed in
  ``dropped``.
* Speed (bench/bench_datatable_import.py): Python validation dominates. Converted values are memoised per field for
  repeated text values (:func:`memoize`; a field whose values do not repeat turns it off by itself), and COPY records
  are built with one itemgetter call (staging.py also pauses the cyclic garbage collector).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, islice
from operator import itemgetter
from typing import Any

from ..fields.errors import FieldError
from ..fields.types import FieldDef
from ..fields.validator import RowValidator
from ..rows.batch import forced_values, is_empty_row
from ..rows.errors import RowErrors, RowsError
from .reader import BadLine

__all__ = [
    "CHUNK_ROWS",
    "Prepared",
    "defaults",
    "mapping",
    "memoize",
    "on_conflict",
    "stamp",
    "stream",
]

#: Rows validated per chunk handed to COPY.
CHUNK_ROWS = 5000


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


def stamp(stamp: Mapping[str, Any], validator: RowValidator) -> dict[str, Any]:
    """The values forced on every imported row (the row scope's owner), converted."""
    return forced_values(stamp, validator, "this table")


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
                if is_empty_row(values, problems):
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
