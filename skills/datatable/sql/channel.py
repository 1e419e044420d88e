"""The SQL channel's execution layer (spec §7.6): defence in depth behind the parser guard (guard.py).

``run_sql`` checks a statement with ``check_sql`` and runs the *rewritten* text in one transaction of its own:

* only through the extended protocol (``conn.prepare`` → Parse/Bind/Execute), which takes exactly one statement,
  so ``SELECT 1; COMMIT; DROP TABLE x`` cannot stack behind the wrapper even if the guard let it through;
* ``SET LOCAL statement_timeout`` (default 5 s) and ``SET LOCAL search_path TO pg_catalog, <schema>`` in every
  transaction, plus a client-side ``asyncio.wait_for`` (timeout + 2 s) as a backstop;
* ``SET LOCAL ROLE <schema>_sql``: the per-organisation role of role.py (``org_role``), or, without it, the parser
  guard alone, which every result says (``isolation="guard-only"`` and a note);
* a result cap: at most ``max_rows`` rows (1,000) and ``max_bytes`` (2 MB of JSON) are read — the statement runs
  through a portal and nothing past the cap is fetched; a SELECT's rows are measured on the server first, so a row
  over the cap is never sent — and ``truncated`` says when the cap was hit.

Rows are converted to JSON-serialisable values by values.py; errors are classified by errors.py; the
per-organisation role is set up by role.py.

Tables created through the channel (CREATE TABLE) lack the platform's system columns: right after the statement
the channel adds ``id bigserial PRIMARY KEY`` and ``created_at timestamptz NOT NULL DEFAULT now()`` as the platform
user and says so in ``notes``. Registering such a table in the store's metadata is the caller's business.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from .deletes import restrict_delete
from .errors import SqlChannelError, classify_error
from .guard import check_sql
from .refusal import SqlRefused
from .role import org_role, quote_ident
from .values import column_names, json_value

__all__ = ["SqlResult", "run_sql"]

log = logging.getLogger(__name__)

#: The client-side timeout is the statement timeout plus this many seconds.
CLIENT_GRACE_SECONDS = 2.0
#: Memory one sort or hash of a statement may use before it spills to temporary files.
WORK_MEM = "32MB"
_FETCH_CHUNK = 200
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


def _sized(sql: str, max_bytes: int, *, write: bool = False) -> str:
    """The checked ``sql`` (a SELECT, or a write with RETURNING) as (the row, its size in text): a row over
    ``max_bytes`` comes back as NULL and its size, so one huge value (``repeat('x', 100000000)``) never crosses the
    wire into the platform's memory. A write becomes a data-modifying CTE, which runs to completion as before."""
    row = "ROW(q.*)"  # q.* names the relation even when a column is called q too
    size = f"pg_catalog.octet_length({row}::pg_catalog.text)"
    head, source = (f"WITH w AS ({sql}) ", "w") if write else ("", f"({sql})")  # a writing WITH stays on top
    return f"{head}SELECT CASE WHEN {size} <= {int(max_bytes)} THEN {row} END, {size} FROM {source} AS q"


async def _read_capped(
    cursor: Any, names: list[str], max_rows: int, max_bytes: int, *, sized: bool = False
) -> tuple[list[dict[str, Any]], bool, int]:
    """Read rows through an open portal up to the caps: (rows, truncated, rows fetched from the server).
    ``sized``: the portal is of :func:`_sized` (each record is the row and its size)."""
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
            if sized and record[1] > max_bytes:
                return rows, True, fetched
            values = record[0] if sized else record.values()
            row = {name: json_value(value) for name, value in zip(names, values, strict=True)}
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
    args: Sequence[Any] = (),
) -> tuple[list[dict[str, Any]], bool, int | None, list[str]]:
    """Run already-checked SQL in one transaction (timeout, search_path, role): (rows, truncated, affected, notes).

    Internal: ``sql`` is trusted to be the guard's output (``args``: the values of the platform's own parameters,
    see ``restrict_delete``); tests call this directly to prove the role layer holds on its own. Raises asyncpg
    errors (run_sql classifies them).
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
        await conn.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")  # sorts and hashes spill to disk beyond it
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
            names = column_names([a.name for a in stmt.get_attributes()])
            # each row checked for size on the server (RETURNING rows too), so no huge value is sent at all
            stmt = await conn.prepare(_sized(sql, max_bytes, write=kind != "select"))
            cursor = await stmt.cursor(*args)
            rows, truncated, fetched = await _read_capped(cursor, names, max_rows, max_bytes, sized=True)
            if kind != "select":
                # A write with RETURNING has run to completion; each returned row is one row written. Count
                # the rest by moving the portal (MOVE: no row is sent back) rather than reading it.
                affected = fetched + (await _count_rest(cursor) if truncated else 0)
        else:
            await stmt.fetch(*args)
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
    delete_ids: Sequence[int] | None = None,
) -> SqlResult:
    """Check ``sql`` with the guard and run it on ``conn`` for the organisation's ``schema``.

    ``mode`` is "query" (SELECT) or "execute" (INSERT/UPDATE/DELETE with WHERE, CREATE TABLE/INDEX/VIEW), as in
    ``check_sql``; ``forbidden_tables`` are passed on to it. Raises SqlChannelError (see its docstring); the
    statement's transaction is always rolled back on error. Normally ``conn`` is outside a transaction and the
    statement commits on its own; inside the caller's transaction it runs in a savepoint (its writes then commit
    or roll back with the caller's transaction) and the caller's role, search_path and statement_timeout are put
    back afterwards. ``delete_ids``: a DELETE then removes only rows with these ids (the rows its preview backed
    up, ``restrict_delete``).
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
    statement = checked.sql
    args: tuple[Any, ...] = ()
    if delete_ids is not None and checked.kind == "delete":
        statement, args = restrict_delete(checked.sql), ([int(i) for i in delete_ids],)

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
                statement,
                schema=schema,
                kind=checked.kind,
                role=role,
                statement_timeout=timeout,
                created=checked.created,
                max_rows=max_rows,
                max_bytes=max_bytes,
                args=args,
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
        sql=statement,
        affected=affected,
        kind=checked.kind,
        created=checked.created,
        isolation="role" if role is not None else "guard-only",
        notes=tuple(notes),
    )
