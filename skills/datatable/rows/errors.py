"""Errors of the row actions: :class:`RowsError`, its classification by SQLSTATE (spec §7.8.4) and the per-row
error list of a batch (:class:`RowErrors`).

Decisions:

* Exceptions are classified (:func:`classify`) only after the ``async with conn.transaction()`` block has rolled
  back, so the connection is usable afterwards (no 25P02).
* Only SQLSTATE classes 22 and 23 are row-level (:func:`is_row_level`): a batch falls back to writing its rows one
  by one on those alone.
"""

from __future__ import annotations

import re
from typing import Any

import asyncpg
from asyncpg.exceptions._base import DataError as _EncodeError

from ..fields.errors import FieldError
from ..store.schema import StoreError
from .filters import FilterError

__all__ = ["MAX_ERRORS", "RedoAction", "RowErrors", "RowsError", "classify", "is_row_level"]


#: Per-row errors reported in a batch result (``failed`` still counts them all).
MAX_ERRORS = 20


_ROW_LEVEL_CLASSES = ("22", "23")


class RowsError(StoreError):
    """A row action was refused or failed; ``error_type`` recoverable / config / transient, ``need_param`` the
    parameter to fix, ``non_retriable`` True when the same call cannot work for deployment reasons."""

    def __init__(
        self,
        message: str,
        *,
        error_type: str = "recoverable",
        non_retriable: bool = False,
        need_param: str | None = None,
        sqlstate: str | None = None,
    ) -> None:
        super().__init__(message, error_type=error_type, non_retriable=non_retriable, need_param=need_param)
        self.sqlstate = sqlstate


class RedoAction(Exception):
    """The action's fast path cannot finish in this transaction: roll it back and run the action again, once, the
    careful way (the handler does this; nothing of the first attempt remains).

    Raised when a set-based write that ran without its own savepoint (``optimistic``) fails on a row-level error
    (only the careful run writes the rows one by one, each in its savepoint), and when the metadata tables this
    process remembered are gone (42P01 on the first statement)."""


_UNIQUE_DETAIL = re.compile(r"Key \((?P<cols>.*)\)=\((?P<vals>.*)\) already exists", re.S)


_NOT_NULL_COLUMN = re.compile(r'column "(?P<col>[^"]+)"')


def classify(exc: BaseException) -> RowsError:
    """A RowsError for any exception of a row action, by SQLSTATE (§7.8.4), never by class name or English text.

    23505 → recoverable naming the field and value; other 23xxx and 22xxx → recoverable (fix the value);
    42P01 / 42703 → recoverable (the table or a field changed: refresh list_columns); 21000 → recoverable (several
    records of the call hit one row: send each key once); 40001 / 40P01 / 57014 / 08xxx /
    53xxx / 55P03 → transient (retry); 42501 → config; any other code → transient with the code. No SQLSTATE means
    the value never reached the database (asyncpg could not encode it) → recoverable.
    """
    if isinstance(exc, RowsError):
        return exc
    if isinstance(exc, StoreError):
        return RowsError(
            str(exc), error_type=exc.error_type, non_retriable=exc.non_retriable, need_param=exc.need_param
        )
    if isinstance(exc, FieldError | FilterError):
        return RowsError(str(exc))
    state = getattr(exc, "sqlstate", None) if isinstance(exc, asyncpg.PostgresError) else None
    message = getattr(exc, "message", None) or str(exc)
    if not state and isinstance(exc, asyncpg.InterfaceError) and not isinstance(exc, _EncodeError):
        return RowsError(
            f"the database connection failed ({type(exc).__name__}: {exc}); retry the same call",
            error_type="transient",
        )
    if not state:
        return RowsError(
            f"a value could not be sent to the database ({type(exc).__name__}: {exc}); check the value types "
            "against list_columns",
            need_param="data",
        )
    if state == "23505":
        detail = getattr(exc, "detail", None) or ""
        found = _UNIQUE_DETAIL.search(detail)
        if found:
            text = f"{found['cols']} must be unique and {found['vals']!r} is already used by another row"
        else:
            text = f"a unique field already holds this value ({message})"
        return RowsError(
            f"{text}; use another value, update the existing row, or upsert with key_fields",
            need_param="data",
            sqlstate=state,
        )
    if state == "23502":
        col = _NOT_NULL_COLUMN.search(message)
        name = col["col"] if col else "a field"
        return RowsError(f"{name} cannot be empty; give a value", need_param="data", sqlstate=state)
    if state.startswith(_ROW_LEVEL_CLASSES):
        return RowsError(
            f"the database refused a value ({message}); fix it to match the field's type (list_columns)",
            need_param="data",
            sqlstate=state,
        )
    if state == "21000":
        return RowsError(
            f"several records of this call match the same row ({message}); records whose key_fields hold the same "
            "value — also when written differently, e.g. 1,001 and 1001, or one instant with two offsets — must be "
            "merged into one record: send each key once",
            need_param="records",
            sqlstate=state,
        )
    if state in ("42P01", "42703"):
        return RowsError(
            f"the table or one of its fields no longer exists as given ({message}); refresh list_columns and retry "
            "with the current field names",
            sqlstate=state,
        )
    if state in ("40001", "40P01", "57014", "55P03") or state.startswith(("08", "53")):
        return RowsError(
            f"temporary database problem ({state}: {message}); retry the same call",
            error_type="transient",
            sqlstate=state,
        )
    if state == "42501":
        return RowsError(
            f"the database role lacks a permission ({message}); this is a deployment problem",
            error_type="config",
            non_retriable=True,
            sqlstate=state,
        )
    return RowsError(f"database error {state}: {message}", error_type="transient", sqlstate=state)


def is_row_level(exc: asyncpg.PostgresError) -> bool:
    return (exc.sqlstate or "").startswith(_ROW_LEVEL_CLASSES)


class RowErrors:
    """Per-row errors of a batch: every failure counted, the first MAX_ERRORS listed with 1-based row numbers."""

    __slots__ = ("failed", "items")

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.failed = 0

    def add(self, row: int, message: str) -> None:
        self.failed += 1
        if len(self.items) < MAX_ERRORS:
            self.items.append({"row": row, "error": message})
