"""Errors of the SQL channel (sql/errors.py): classification by SQLSTATE."""

from __future__ import annotations

import asyncpg
from skillyard.builtin_skills.datatable.sql import errors as sql_errors


def test_error_classification() -> None:
    cases = {
        "40001": ("transient", "serialization_failure"),
        "40P01": ("transient", "deadlock"),
        "08006": ("transient", "connection"),
        "42601": ("recoverable", "syntax_error"),
        "22P02": ("recoverable", "data_error"),
        "XX000": ("transient", "database_error"),
    }
    for sqlstate, expected in cases.items():
        exc = asyncpg.PostgresError.new({"C": sqlstate, "M": "boom", "S": "ERROR"})
        error = sql_errors.classify_error(exc, 5)
        assert (error.error_type, error.code, error.sqlstate) == (*expected, sqlstate)
        assert sqlstate in str(error)
    transient = sql_errors.classify_error(ConnectionResetError("gone"), 5)
    assert (transient.error_type, transient.code, transient.sqlstate) == ("transient", "connection", None)
    import pickle

    again = pickle.loads(pickle.dumps(transient))
    assert (again.error_type, again.code, str(again)) == ("transient", "connection", str(transient))
