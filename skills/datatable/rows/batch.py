"""The steps the writing row actions share: the 1–100 row batch limit, row validation, forced (stamped) values and the
``unnest()`` source that sends a batch as per-column arrays (spec §7.4, §7.5).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ..fields.errors import FieldError
from ..fields.validator import RowValidator
from .context import RowContext
from .errors import RowErrors, RowsError

__all__ = [
    "BATCH_LIMIT",
    "batch_columns",
    "batch_records",
    "forced_values",
    "is_empty_row",
    "stamp_values",
    "unnest_source",
    "validate_rows",
]


#: insert_batch / upsert take at most this many rows; more go through insert_from_file (§7.4).
BATCH_LIMIT = 100


def stamp_values(ctx: RowContext, stamp: Mapping[str, Any]) -> dict[str, Any]:
    """The values forced on every row a write stores (the row scope's owner), converted for the table's fields."""
    return forced_values(stamp, ctx.validator, f"table {ctx.table.title!r}")


def forced_values(stamp: Mapping[str, Any], validator: RowValidator, table: str) -> dict[str, Any]:
    """``stamp`` converted by the validator; a field it names that the table (``table``, as the message calls it)
    lacks, or a value it refuses, is the platform's configuration error, never the caller's."""
    values: dict[str, Any] = {}
    for key, value in stamp.items():
        if key not in validator.fields:
            raise RowsError(
                f"the forced field {key!r} does not exist in {table}; check the owner-field setting",
                error_type="config",
                non_retriable=True,
            )
        try:
            values[key] = validator.convert(key, value)
        except FieldError as exc:
            raise RowsError(f"forced value: {exc}", error_type="config", non_retriable=True) from None
    return values


def _array_literal(items: Sequence[str] | None) -> str | None:
    if items is None:
        return None
    return "{" + ",".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items) + "}"


def unnest_source(
    ctx: RowContext,
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    start: int = 1,
    flagged: Collection[str] = (),
    numbered: bool = False,
) -> tuple[str, list[Any], list[str], dict[str, str]]:
    """(``unnest($1::t[], …) AS s(c0, …)`` SQL, per-column arrays, the source expressions ``s.c0``…, and for each
    column in ``flagged`` the expression of a boolean telling whether the row gave that column at all).
    ``numbered``: the source also has ``s.n``, the row's 1-based position in ``rows``."""
    params: list[Any] = []
    casts: list[str] = []
    exprs: list[str] = []
    aliases: list[str] = []
    for i, column in enumerate(columns):
        field = ctx.fields[column]
        if field.uidt == "多选":
            params.append([_array_literal(r.get(column)) for r in rows])
            casts.append(f"${start + len(casts)}::text[]")
            exprs.append(f"s.c{i}::text[]")
        else:
            params.append([r.get(column) for r in rows])
            casts.append(f"${start + len(casts)}::{field.pg_type()}[]")
            exprs.append(f"s.c{i}")
        aliases.append(f"c{i}")
    flags: dict[str, str] = {}
    for i, column in enumerate(columns):
        if column in flagged:
            params.append([column in r for r in rows])
            casts.append(f"${start + len(casts)}::boolean[]")
            aliases.append(f"p{i}")
            flags[column] = f"s.p{i}"
    if numbered:
        return f"unnest({', '.join(casts)}) WITH ORDINALITY AS s({', '.join(aliases)}, n)", params, exprs, flags
    return f"unnest({', '.join(casts)}) AS s({', '.join(aliases)})", params, exprs, flags


def batch_records(records: Any, what: str) -> list[Any]:
    if isinstance(records, Mapping):
        records = [records]
    if not isinstance(records, list | tuple):
        raise RowsError(f"{what} must be an array of objects {{field: value}}", need_param="records")
    if not records:
        raise RowsError(f"{what} is empty; give 1–{BATCH_LIMIT} objects", need_param="records")
    if len(records) > BATCH_LIMIT:
        raise RowsError(
            f"{len(records)} rows given; insert_batch / upsert take at most {BATCH_LIMIT}. Write all rows at once to "
            "a JSON file in the workspace and import it with insert_from_file (do not split into several batches)",
            need_param="records",
        )
    return list(records)


def validate_rows(
    ctx: RowContext, records: Sequence[Any], *, insert: bool, errors: RowErrors
) -> tuple[list[tuple[int, dict[str, Any]]], list[str], int]:
    """(valid (row number, values) pairs, dropped names, rows skipped as empty)."""
    valid: list[tuple[int, dict[str, Any]]] = []
    dropped: dict[str, None] = {}
    skipped = 0
    validate_row = ctx.validator.validate_row
    for number, record in enumerate(records, start=1):
        values, unknown, problems, has_value = validate_row(record, insert=insert)
        if unknown:
            dropped.update(dict.fromkeys(unknown))
        if not has_value and is_empty_row(values, problems):  # a row with a value is never empty
            skipped += 1
        elif problems:
            errors.add(number, "; ".join(problems))
        else:
            valid.append((number, values))
    return valid, list(dropped), skipped


_REQUIRED = ": required; give a value"


def is_empty_row(values: Mapping[str, Any], problems: Sequence[str]) -> bool:
    """No value for any field (only unknown fields or blanks): the only problems are missing required fields."""
    return all(v is None for v in values.values()) and all(p.endswith(_REQUIRED) for p in problems)


def batch_columns(rows: Sequence[Mapping[str, Any]], ctx: RowContext) -> list[str]:
    present: set[str] = set()
    for row in rows:
        present.update(row)
    return [name for name in ctx.names if name in present]
