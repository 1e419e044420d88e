"""The refusal of the SQL channel's guard (spec §7.6): :class:`SqlRefused`, raised by the walker and the statement
checks alike."""

from __future__ import annotations

__all__ = ["FORBIDDEN_TABLE", "SqlRefused", "refuse"]

#: The code of a refusal by permission: a table (or a view over one) the caller may not use on this channel.
FORBIDDEN_TABLE = "forbidden_table"


class SqlRefused(ValueError):
    """The statement is refused: ``reason`` says what and how to fix it, ``code`` is a short machine code.

    Codes: multiple_statements, parse_error, too_complex, statement, transaction, schema, function, type, jsonb,
    node, parameter, where_required, reserved_column, constraint, identifier, system_column, forbidden_table,
    select_into, locking, cte_write, rewrite, unstable_delete, sequence, view_write.
    """

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code

    def __reduce__(self) -> tuple[type[SqlRefused], tuple[str, str]]:
        return (type(self), (self.reason, self.code))

    def __repr__(self) -> str:
        return f"SqlRefused(code={self.code!r}, reason={self.reason!r})"


def refuse(reason: str, code: str) -> SqlRefused:
    return SqlRefused(reason, code)
