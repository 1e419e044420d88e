"""The SQL channel's execution layer (spec §7.6): defence in depth behind the parser guard (sql_guard.py).

``run_sql`` checks a statement with ``check_sql`` and runs the *rewritten* text in one transaction of its own:

* only through the extended protocol (``conn.prepare`` → Parse/Bind/Execute), which takes exactly one statement,
  so ``SELECT 1; COMMIT; DROP TABLE x`` cannot stack behind the wrapper even if the guard let it through;
* ``SET LOCAL statement_timeout`` (default 5 s) and ``SET LOCAL search_path TO pg_catalog, <schema>`` in every
  transaction, plus a client-side ``asyncio.wait_for`` (timeout + 2 s) as a backstop;
* ``SET LOCAL ROLE <schema>_sql``: a NOLOGIN role per organisation (created on first use by ``org_role``) that holds
  privileges on its own schema only. This is safe because the guard refuses SET/RESET statements and
  ``set_config``, so the statement cannot switch back. The platform's database user needs CREATEROLE (or to be a
  superuser) for this; without it ``org_role`` returns None and the channel runs on the parser guard alone, which
  every result says (``isolation="guard-only"`` and a note);
* a result cap: at most ``max_rows`` rows (1,000) and ``max_bytes`` (2 MB of JSON) are read — the statement runs
  through a portal and nothing past the cap is fetched — and ``truncated`` says when the cap was hit.

Rows are dicts of JSON-serialisable values: numeric (Decimal) becomes a *string* so no digit is lost (``"12.50"``;
floats would round money), date/time values ISO 8601 strings, intervals ISO 8601 durations, UUIDs strings,
NaN/Infinity strings; integers, floats, booleans, text and None stay as they are. Duplicate column names get a
suffix (``a``, ``a_2``).

Tables created through the channel (CREATE TABLE) lack the platform's system columns: right after the statement
the channel adds ``id bigserial PRIMARY KEY`` and ``created_at timestamptz NOT NULL DEFAULT now()`` as the platform
user and says so in ``notes``. Registering such a table in the store's metadata is the caller's business.

Row-level security of own-scoped tables is enforced by their FORCEd policies, which apply to the org role as well.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import decimal
import hashlib
import json
import logging
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from .sql_guard import check_sql
from .sql_refusal import SqlRefused

__all__ = ["SqlChannelError", "SqlResult", "org_role", "role_name", "run_sql"]

log = logging.getLogger(__name__)

#: Tables of the store's metadata (``_dt_tables``, ``_dt_fields``): the org role gets no privilege on them.
METADATA_PREFIX = "_dt_"
#: The client-side timeout is the statement timeout plus this many seconds.
CLIENT_GRACE_SECONDS = 2.0
_FETCH_CHUNK = 200
_MAX_NAME_BYTES = 63
_SCHEMA_RE = re.compile(r"org_data_[a-z0-9]+")
_ROLE_LOCK_CLASS = 0x5D7C  # first key of the advisory lock that serialises role setup (second: hashtext(role))
_warned: set[str] = set()  # schemas whose guard-only mode was logged (once per process)
_GUARD_ONLY_NOTE = (
    "guard-only isolation: the platform's database user lacks CREATEROLE, so statements run as the platform user "
    "behind the parser guard alone (grant CREATEROLE to add the per-organisation role)"
)


@dataclass(frozen=True)
class SqlResult:
    rows: list[dict[str, Any]]  # at most max_rows rows (SELECT, or the RETURNING rows of a write)
    row_count: int  # len(rows)
    truncated: bool  # True when the row or byte cap cut the result
    sql: str  # the statement that ran (the guard's rewrite, tables qualified with the org schema)
    affected: int | None  # INSERT/UPDATE/DELETE: rows written; None for SELECT and CREATE
    kind: str  # the guard's kind: select, insert, update, delete, create_table, create_index, create_view
    created: str | None  # CREATE TABLE/VIEW: the name created; CREATE INDEX: the table it is on
    isolation: str  # "role" (per-organisation role) or "guard-only"
    notes: tuple[str, ...] = ()  # things the caller should pass on (system columns added, guard-only mode)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "row_count": self.row_count,
            "truncated": self.truncated,
            "sql": self.sql,
            "affected": self.affected,
            "kind": self.kind,
            "created": self.created,
            "isolation": self.isolation,
            "notes": list(self.notes),
        }


class SqlChannelError(ValueError):
    """The statement did not run; the message says why and what to do.

    ``error_type``: "recoverable" (fix the statement and send it again), "transient" (try again later, or make
    the statement cheaper) or "config" (the platform's setup or the call's arguments are wrong). ``code`` is a short
    machine code (the guard's code for refusals), ``sqlstate`` PostgreSQL's SQLSTATE when the server raised it.
    """

    def __init__(self, message: str, *, error_type: str, code: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.code = code
        self.sqlstate = sqlstate

    def __reduce__(self) -> Any:
        return (_rebuild_error, (self.message, self.error_type, self.code, self.sqlstate))

    def __repr__(self) -> str:
        return (
            f"SqlChannelError(error_type={self.error_type!r}, code={self.code!r}, sqlstate={self.sqlstate!r}, "
            f"message={self.message!r})"
        )


def _rebuild_error(message: str, error_type: str, code: str, sqlstate: str | None) -> SqlChannelError:
    return SqlChannelError(message, error_type=error_type, code=code, sqlstate=sqlstate)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def role_name(schema: str) -> str:
    """``<schema>_sql``; when that exceeds PostgreSQL's 63 bytes, a shortened name with a hash of the schema."""
    name = f"{schema}_sql"
    if len(name.encode()) <= _MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(schema.encode()).hexdigest()[:12]
    return f"{schema[:46]}_{digest}_sql"


# ---------------------------------------------------------------------------------------------------------------
# The per-organisation role
# ---------------------------------------------------------------------------------------------------------------

#: One query that says whether the role is usable as it is: exists, the connected user may SET ROLE to it and
#: inherits it (PostgreSQL 16+ separates the two), it has USAGE+CREATE on the schema, DML on every table of the
#: schema it does not own, and nothing on the store's metadata tables.
_ROLE_STATE = """
SELECT r.oid IS NOT NULL AS exists,
       (SELECT rolsuper OR rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = current_user) AS can_create,
       CASE WHEN r.oid IS NULL THEN false ELSE
         pg_catalog.pg_has_role(current_user, r.oid, $3) AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE')
         AND pg_catalog.has_schema_privilege(r.oid, n.oid, 'USAGE, CREATE')
         AND NOT EXISTS (
           SELECT 1 FROM pg_catalog.pg_class c
            WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND c.relowner <> r.oid
              AND (starts_with(c.relname, $4)
                   = pg_catalog.has_table_privilege(r.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE')))
       END AS ready
  FROM (SELECT $1::text AS rolname) want
  LEFT JOIN pg_catalog.pg_roles r ON r.rolname = want.rolname
  LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = $2
"""


async def org_role(conn: asyncpg.Connection, schema: str) -> str | None:
    """Ensure the NOLOGIN role ``<schema>_sql`` and its privileges; return its name, or None without CREATEROLE.

    The role gets USAGE and CREATE on ``schema``, SELECT/INSERT/UPDATE/DELETE on its tables and views (and, by
    default privileges, on those the platform user creates later), USAGE/SELECT on its sequences, and nothing on
    the store's metadata tables (``_dt_*``). The connected user is granted membership (SET and INHERIT), so it can
    switch to the role and keeps owner rights on what the role creates. Idempotent and cheap when all is in place
    (one catalog query); setup is serialised with an advisory lock. The schema must already exist.
    """
    _check_schema(schema)
    role = role_name(schema)
    set_option = "SET" if conn.get_server_version().major >= 16 else "MEMBER"
    state = await conn.fetchrow(_ROLE_STATE, role, schema, set_option, METADATA_PREFIX)
    if state is None:  # pragma: no cover - the query always returns one row
        raise SqlChannelError("the role check returned nothing", error_type="config", code="role")
    if state["ready"]:
        return role
    if not state["can_create"] and not state["exists"]:
        return None
    # Without CREATEROLE but with an existing role (made by an administrator): try to finish its setup.
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_catalog.pg_advisory_xact_lock($1, hashtext($2))", _ROLE_LOCK_CLASS, role)
            await _set_up_role(conn, schema, role)
    except asyncpg.InsufficientPrivilegeError:
        if not state["can_create"]:
            return None
        raise SqlChannelError(
            f"could not set up the SQL channel's role {role}: the platform's database user needs CREATEROLE and "
            f"must own schema {schema}",
            error_type="config",
            code="role",
            sqlstate="42501",
        ) from None
    except asyncpg.PostgresError as exc:
        raise SqlChannelError(
            f"could not set up the SQL channel's role {role}: {exc}",
            error_type="config",
            code="role",
            sqlstate=exc.sqlstate,
        ) from None
    return role


async def _set_up_role(conn: asyncpg.Connection, schema: str, role: str) -> None:
    r, s = quote_ident(role), quote_ident(schema)
    if await conn.fetchval("SELECT to_regnamespace($1) IS NULL", s):
        raise SqlChannelError(
            f"schema {schema} does not exist yet: create the organisation's schema first",
            error_type="config",
            code="schema_missing",
        )
    if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)", role):
        await conn.execute(f"CREATE ROLE {r} NOLOGIN NOINHERIT")
    if conn.get_server_version().major >= 16:
        await conn.execute(f"GRANT {r} TO CURRENT_USER WITH INHERIT TRUE, SET TRUE")
    else:  # pragma: no cover - the test server is PostgreSQL 16
        await conn.execute(f"GRANT {r} TO CURRENT_USER")
    await conn.execute(f"GRANT USAGE, CREATE ON SCHEMA {s} TO {r}")
    await conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}")
    await conn.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {r}")
    await conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {r}")
    await conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {s} GRANT USAGE, SELECT ON SEQUENCES TO {r}")
    metadata = await conn.fetch(
        """SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND starts_with(c.relname, $2)
              AND c.relowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $3)""",
        schema,
        METADATA_PREFIX,
        role,
    )
    for row in metadata:
        await conn.execute(f"REVOKE ALL ON TABLE {s}.{quote_ident(row['relname'])} FROM {r}")


def _check_schema(schema: str) -> None:
    if not isinstance(schema, str) or not _SCHEMA_RE.fullmatch(schema):
        raise SqlChannelError(
            f"schema must look like org_data_<lower-case letters and digits>, not {schema!r}",
            error_type="config",
            code="schema",
        )


# ---------------------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------------------


def _iso_duration(value: dt.timedelta) -> str:
    sign = "-" if value < dt.timedelta(0) else ""
    value = abs(value)
    days, seconds, micro = value.days, value.seconds, value.microseconds
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    time = ""
    if hours:
        time += f"{hours}H"
    if minutes:
        time += f"{minutes}M"
    if secs or micro:
        time += f"{secs}.{micro:06d}".rstrip("0").rstrip(".") + "S"
    if not days and not time:
        return "PT0S"
    return f"{sign}P{f'{days}D' if days else ''}{'T' + time if time else ''}"


def json_value(value: Any) -> Any:
    """A JSON-serialisable form of one value asyncpg returned (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return (
            value
            if math.isfinite(value)
            else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
        )
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _iso_duration(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, asyncpg.Record):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def _column_names(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------


async def _read_capped(
    cursor: Any, names: list[str], max_rows: int, max_bytes: int
) -> tuple[list[dict[str, Any]], bool, int]:
    """Read rows through an open portal up to the caps: (rows, truncated, rows fetched from the server)."""
    rows: list[dict[str, Any]] = []
    size = 2  # "[]"
    fetched = 0
    while True:
        want = min(_FETCH_CHUNK, max_rows + 1 - len(rows))  # never more than one row past the row cap
        batch = await cursor.fetch(want)
        fetched += len(batch)
        for record in batch:
            if len(rows) >= max_rows:
                return rows, True, fetched
            row = {name: json_value(value) for name, value in zip(names, record.values(), strict=True)}
            size += len(json.dumps(row, ensure_ascii=False, default=str).encode()) + 1
            if size > max_bytes:
                return rows, True, fetched
            rows.append(row)
        if len(batch) < want:
            return rows, False, fetched


async def _execute(
    conn: asyncpg.Connection,
    sql: str,
    *,
    schema: str,
    kind: str,
    role: str | None,
    statement_timeout: float,
    created: str | None = None,
    max_rows: int = 1000,
    max_bytes: int = 2_000_000,
) -> tuple[list[dict[str, Any]], bool, int | None, list[str]]:
    """Run already-checked SQL in one transaction (timeout, search_path, role): (rows, truncated, affected, notes).

    Internal: ``sql`` is trusted to be the guard's output; tests call this directly to prove the role layer holds
    on its own. Raises asyncpg errors (run_sql classifies them).
    """
    notes: list[str] = []
    s = quote_ident(schema)
    # Inside a caller's transaction this is a savepoint, and SET LOCAL outlives a released savepoint: keep the
    # caller's settings to put them back afterwards (a rollback to the savepoint restores them by itself).
    saved = (
        await conn.fetchrow(
            "SELECT current_setting('statement_timeout') AS t, current_setting('search_path') AS p, "
            "current_setting('role') AS r"
        )
        if conn.is_in_transaction()
        else None
    )
    async with conn.transaction():
        await conn.execute(f"SET LOCAL statement_timeout = {max(1, round(statement_timeout * 1000))}")
        # pg_catalog first: a table the organisation made (say one named timestamptz) never shadows a built-in type
        # or function, neither in the statement nor in the platform's own follow-up statements here.
        await conn.execute(f"SET LOCAL search_path TO pg_catalog, {s}")
        run_as = role
        if kind == "create_index" and role is not None and created is not None:
            # CREATE INDEX needs the table's owner; tables the store made belong to the platform user.
            owner = await conn.fetchval(
                "SELECT pg_catalog.pg_get_userbyid(relowner) FROM pg_catalog.pg_class WHERE oid = to_regclass($1)",
                f"{s}.{quote_ident(created)}",
            )
            if owner is not None and owner != role:
                run_as = None
        if run_as is not None:
            await conn.execute(f"SET LOCAL ROLE {quote_ident(run_as)}")
        stmt = await conn.prepare(sql)  # Parse: exactly one statement, or PostgreSQL refuses it
        rows: list[dict[str, Any]] = []
        truncated = False
        affected: int | None = None
        returns_rows = bool(stmt.get_attributes())
        if kind == "select" or returns_rows:
            names = _column_names([a.name for a in stmt.get_attributes()])
            cursor = await stmt.cursor()
            rows, truncated, fetched = await _read_capped(cursor, names, max_rows, max_bytes)
            if kind != "select":
                # A write with RETURNING has run to completion; each returned row is one row written. Count
                # the rest by moving the portal (MOVE: no row is sent back) rather than reading it.
                affected = fetched + (await _count_rest(cursor) if truncated else 0)
        else:
            await stmt.fetch()
            if kind in ("insert", "update", "delete"):
                status = stmt.get_statusmsg() or ""
                last = status.rsplit(" ", 1)[-1]
                affected = int(last) if last.isdigit() else None
        if run_as is not None:
            await conn.execute("SET LOCAL ROLE NONE")
        if kind == "create_table" and created is not None:
            await conn.execute(
                f"ALTER TABLE {s}.{quote_ident(created)} ADD COLUMN id bigserial PRIMARY KEY, "
                "ADD COLUMN created_at timestamptz NOT NULL DEFAULT now()"
            )
            notes.append(
                f"table {created} got the platform's system columns id (bigserial primary key) and created_at "
                "(timestamptz, default now()); they are filled in automatically"
            )
        if saved is not None:
            await conn.execute(
                "SELECT set_config('statement_timeout', $1, true), set_config('search_path', $2, true), "
                "set_config('role', $3, true)",
                saved["t"],
                saved["p"],
                saved["r"],
            )
    return rows, truncated, affected, notes


async def _count_rest(cursor: Any) -> int:
    """The rows left in a portal, skipped with MOVE."""
    total = 0
    while True:
        moved = int(await cursor.forward(1_000_000))
        total += moved
        if moved < 1_000_000:
            return total


async def run_sql(
    conn: asyncpg.Connection,
    sql: str,
    *,
    schema: str,
    mode: str,
    forbidden_tables: frozenset[str] = frozenset(),
    timeout: float = 5.0,
    max_rows: int = 1000,
    max_bytes: int = 2_000_000,
) -> SqlResult:
    """Check ``sql`` with the guard and run it on ``conn`` for the organisation's ``schema``.

    ``mode`` is "query" (SELECT) or "execute" (INSERT/UPDATE/DELETE with WHERE, CREATE TABLE/INDEX/VIEW), as in
    ``check_sql``; ``forbidden_tables`` are passed on to it. Raises SqlChannelError (see its docstring); the
    statement's transaction is always rolled back on error. Normally ``conn`` is outside a transaction and the
    statement commits on its own; inside the caller's transaction it runs in a savepoint (its writes then commit
    or roll back with the caller's transaction) and the caller's role, search_path and statement_timeout are put
    back afterwards.
    """
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise SqlChannelError(
            f"timeout must be a positive number of seconds, not {timeout!r}", error_type="config", code="argument"
        )
    if not (isinstance(max_rows, int) and max_rows >= 1 and isinstance(max_bytes, int) and max_bytes >= 1):
        raise SqlChannelError("max_rows and max_bytes must be positive integers", error_type="config", code="argument")
    try:
        checked = check_sql(sql, schema=schema, mode=mode, forbidden_tables=frozenset(forbidden_tables))
    except SqlRefused as exc:
        raise SqlChannelError(exc.reason, error_type="recoverable", code=exc.code) from None
    except ValueError as exc:  # a bad mode or schema: the caller's mistake
        raise SqlChannelError(str(exc), error_type="config", code="argument") from None

    try:
        role = await asyncio.wait_for(org_role(conn, schema), timeout + CLIENT_GRACE_SECONDS)
        notes: list[str] = []
        if role is None:
            if schema not in _warned:
                _warned.add(schema)
                log.warning("SQL channel for %s: %s", schema, _GUARD_ONLY_NOTE)
            notes.append(_GUARD_ONLY_NOTE)
        rows, truncated, affected, more = await asyncio.wait_for(
            _execute(
                conn,
                checked.sql,
                schema=schema,
                kind=checked.kind,
                role=role,
                statement_timeout=timeout,
                created=checked.created,
                max_rows=max_rows,
                max_bytes=max_bytes,
            ),
            timeout + CLIENT_GRACE_SECONDS,
        )
    except SqlChannelError:
        raise
    except TimeoutError:
        raise SqlChannelError(
            f"the statement took longer than {timeout:g} s (client-side limit) and was abandoned: narrow it "
            "or try again",
            error_type="transient",
            code="timeout",
        ) from None
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        raise classify_error(exc, timeout) from None
    notes.extend(more)
    if truncated:
        notes.append(
            f"the result was cut at {len(rows)} rows (limits: {max_rows} rows, {max_bytes} bytes): "
            "aggregate, filter or add LIMIT/OFFSET to see the rest"
        )
    return SqlResult(
        rows=rows,
        row_count=len(rows),
        truncated=truncated,
        sql=checked.sql,
        affected=affected,
        kind=checked.kind,
        created=checked.created,
        isolation="role" if role is not None else "guard-only",
        notes=tuple(notes),
    )
