"""Errors of the SQL channel (spec §7.6): :class:`SqlChannelError` and the classification of database errors.

:func:`classify_error` maps a PostgreSQL (or driver) error to a :class:`SqlChannelError` whose message says the fix:
SQLSTATEs the statement's author can fix are "recoverable", those that pass with time are "transient"; a statement
cancelled by ``statement_timeout`` (57014) is a transient ``timeout``.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

from typing import Any

import asyncpg

__all__ = ["SqlChannelError", "classify_error"]


class SqlChannelError(ValueError):
    """The statement did not run; the message says why and what to do.

    ``error_type``: "recoverable" (fix the statement and send it again), "transient" (try again later, or make
    the statement cheaper) or "config" (the platform's setup or the call's arguments are wrong). ``code`` is a short
    machine code (the guard's code for refusals), ``sqlstate`` PostgreSQL's SQLSTATE when the server raised it;
    ``non_retriable``: no other statement of this caller can do it (a permission refusal).
    """

    def __init__(
        self, message: str, *, error_type: str, code: str, sqlstate: str | None = None, non_retriable: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.code = code
        self.sqlstate = sqlstate
        self.non_retriable = non_retriable

    def __reduce__(self) -> Any:
        return (_rebuild_error, (self.message, self.error_type, self.code, self.sqlstate, self.non_retriable))

    def __repr__(self) -> str:
        return (
            f"SqlChannelError(error_type={self.error_type!r}, code={self.code!r}, sqlstate={self.sqlstate!r}, "
            f"message={self.message!r})"
        )


def _rebuild_error(
    message: str, error_type: str, code: str, sqlstate: str | None, non_retriable: bool = False
) -> SqlChannelError:
    return SqlChannelError(message, error_type=error_type, code=code, sqlstate=sqlstate, non_retriable=non_retriable)


_RECOVERABLE: dict[str, tuple[str, str]] = {
    "42P01": ("undefined_table", "a table in the statement does not exist: check the name with list_tables"),
    "42703": ("undefined_column", "a column in the statement does not exist: check the names with list_columns"),
    "42601": ("syntax_error", "the statement has a syntax error: correct it and send it again"),
    "42883": ("undefined_function", "no function matches the name and argument types: add explicit casts"),
    "42804": ("datatype_mismatch", "a value has the wrong type: cast it (e.g. '2024-01-01'::date)"),
    "42P07": ("duplicate_table", "a table or view of that name already exists: pick another name"),
    "42710": ("duplicate_object", "an object of that name already exists: pick another name"),
    "42501": (
        "permission_denied",
        "permission denied: only tables of this organisation are reachable on the SQL channel",
    ),
}
_RECOVERABLE_CLASSES: dict[str, tuple[str, str]] = {
    "42": ("invalid_statement", "the statement is not valid here: correct it and send it again"),
    "22": ("data_error", "a value is invalid for its type or operation: correct the values"),
    "23": ("constraint_violation", "the write breaks a constraint (NOT NULL, UNIQUE, CHECK): change the values"),
    "21": ("cardinality_violation", "a subquery returned more rows than allowed: restrict it (LIMIT 1, WHERE ...)"),
    "0A": ("not_supported", "PostgreSQL does not support this: rewrite the statement"),
    "44": ("check_option_violation", "the row does not satisfy the view's WITH CHECK OPTION"),
    "54": ("too_complex", "the statement exceeds a PostgreSQL limit: simplify it"),
}
_TRANSIENT: dict[str, tuple[str, str]] = {
    "40001": ("serialization_failure", "a concurrent transaction got in the way: send the statement again"),
    "40P01": ("deadlock", "a deadlock with another transaction: send the statement again"),
    "55P03": ("lock_not_available", "a table is locked by another transaction: try again shortly"),
}
_TRANSIENT_CLASSES: dict[str, tuple[str, str]] = {
    "08": ("connection", "the database connection failed: try again"),
    "53": ("resources", "the database is short of resources: try again later, or make the statement cheaper"),
    "57": ("unavailable", "the database is restarting or shutting down: try again later"),
}


def _describe(exc: asyncpg.PostgresError) -> str:
    parts = [str(exc).strip() or type(exc).__name__]
    detail, hint = getattr(exc, "detail", None), getattr(exc, "hint", None)
    if detail:
        parts.append(f"detail: {detail}")
    if hint:
        parts.append(f"hint: {hint}")
    return "; ".join(parts)


def classify_error(exc: BaseException, timeout: float) -> SqlChannelError:
    """Map a database (or driver) error to a SqlChannelError whose message says the fix."""
    sqlstate = getattr(exc, "sqlstate", None)
    if not isinstance(exc, asyncpg.PostgresError) or not isinstance(sqlstate, str):
        return SqlChannelError(
            f"the database connection failed ({type(exc).__name__}: {exc}): try again",
            error_type="transient",
            code="connection",
        )
    text = _describe(exc)
    if sqlstate == "57014":
        return SqlChannelError(
            f"the statement took longer than {timeout:g} s and was cancelled: narrow it (WHERE, LIMIT, fewer joins) "
            "or try again",
            error_type="transient",
            code="timeout",
            sqlstate=sqlstate,
        )
    for table, error_type in (
        (_RECOVERABLE, "recoverable"),
        (_TRANSIENT, "transient"),
        (_RECOVERABLE_CLASSES, "recoverable"),
        (_TRANSIENT_CLASSES, "transient"),
    ):
        entry = table.get(sqlstate) or table.get(sqlstate[:2])
        if entry is not None:
            code, fix = entry
            return SqlChannelError(
                f"{fix} ({text}; SQLSTATE {sqlstate})", error_type=error_type, code=code, sqlstate=sqlstate
            )
    return SqlChannelError(
        f"the database failed to run the statement ({text}; SQLSTATE {sqlstate}): try again",
        error_type="transient",
        code="database_error",
        sqlstate=sqlstate,
    )
