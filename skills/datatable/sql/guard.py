"""The SQL channel's parser guard (spec §7.6): parse with PostgreSQL's own parser, refuse, route, deparse.

``check_sql`` parses one statement with pglast (libpg_query, the real PostgreSQL grammar), walks the *whole* tree
and refuses anything that is not on an allow-list (allowlists.py): statement types, node types, functions,
types; the walk itself is walker.py, the DDL checks ddl.py and a DELETE's preview deletes.py. Bare table names
are routed to the organisation's schema by setting ``RangeVar.schemaname`` in the parsed tree (never by string
replacement); the tree is then deparsed, the deparsed text is parsed again and must give back the very same tree,
so what runs is exactly what was checked.

What the guard does not do, and the caller must: run the statement with a ``statement_timeout`` (recursive CTEs,
cross joins and regular expressions are allowed and only the timeout bounds them); run it with ``search_path`` set to
the organisation's schema (and ``pg_catalog``) only, so that unqualified function and operator names cannot resolve
to objects somebody put in ``public``; send ``CheckedSql.sql`` as it is, with no bind parameters (e.g. SQLAlchemy
``exec_driver_sql``, never ``text()``), which is why ``:word`` inside a literal can no longer be mistaken for a
parameter; and, for own-scoped tables, pass as ``forbidden_tables`` the table *and* every view built on it.

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pglast import ast, enums, parse_sql
from pglast.parser import ParseError, scan
from pglast.stream import RawStream

from ..store.names import MAX_NAME_BYTES, SCHEMA_PREFIX, is_org_schema
from .allowlists import (
    EXECUTE_STATEMENTS,
    MAX_COMMENT_OPENINGS,
    MAX_SQL_CHARS,
    MAX_SQL_TOKENS,
    QUERY_ONLY_HINT,
    RESERVED_COLUMNS,
    STATEMENT_HINTS,
)
from .ddl import check_create_index, check_create_table, check_create_view, check_drop_view
from .deletes import check_stable_delete, delete_preview
from .refusal import refuse
from .walker import TreeGuard, string_names

__all__ = ["CheckedSql", "check_sql"]


@dataclass(frozen=True)
class CheckedSql:
    kind: str  # "select" | "insert" | "update" | "delete" | "create_table" | "create_index" | "create_view"
    sql: str  # the rewritten statement (pglast deparse), every table reference qualified with the org schema
    tables: frozenset[str]  # the (unqualified) table names the statement references (read or written)
    created: str | None  # CREATE TABLE/VIEW: the name created; CREATE INDEX: the table it is on
    target: str | None = None  # INSERT/UPDATE/DELETE: the table written
    preview: str | None = None  # DELETE: a SELECT of the rows it would delete (confirmation count and backup, §7.7)


def _tokens(sql: str) -> list[Any]:
    """The statement's tokens, refusing before any parsing what would take the parser down or hold it up."""
    if sql.count("/*") > MAX_COMMENT_OPENINGS:
        raise refuse(
            f"the statement opens more than {MAX_COMMENT_OPENINGS} /* comments: remove the comments", "too_complex"
        )
    tokens = scan(sql)
    if len(tokens) > MAX_SQL_TOKENS:
        raise refuse(
            f"the statement has {len(tokens):,} tokens, more than {MAX_SQL_TOKENS:,}: split the work into smaller "
            "statements, or import bulk data with insert_from_file",
            "too_complex",
        )
    return tokens


def _check_identifier_lengths(sql: str, tokens: list[Any]) -> None:
    """Refuse identifiers PostgreSQL would silently truncate to 63 bytes (the parse tree holds them truncated)."""
    for token in tokens:
        if token.name not in ("IDENT", "UIDENT"):
            continue
        text = sql[token.start : token.end + 1]
        if token.name == "UIDENT":  # U&"..." : the escaped text is an upper bound of the decoded length
            text = text[3:-1]
        elif text.startswith('"'):
            text = text[1:-1].replace('""', '"')
        if len(text.encode()) > MAX_NAME_BYTES:
            raise refuse(
                f"the name {text[:20]!r}... is longer than PostgreSQL's 63 bytes and would be silently cut: "
                "shorten it (a Chinese character takes 3 bytes)",
                "identifier",
            )


def _function_ranges(value: Any, found: dict[str, set[str]]) -> dict[str, set[str]]:
    """The range names of the functions in FROM anywhere in the statement, each with its declared column names.

    ``unnest(a) AS u(v)`` gives ``{"u": {"v"}}``; without an alias the range is named after the function. The
    whole row of a function returning a single value is that value, so ``u.name`` is the call ``name(u)`` for any
    one-argument function unless ``name`` is a declared column: see ``TreeGuard._column_ref``.
    """
    if isinstance(value, (tuple, list)):
        for item in value:
            _function_ranges(item, found)
    elif isinstance(value, ast.Node):
        if isinstance(value, ast.RangeFunction):
            columns = {d.colname or "" for d in value.coldeflist or () if isinstance(d, ast.ColumnDef)}
            calls = []
            for call, coldefs in value.functions or ():  # ROWS FROM (f() AS (a int), g()): (call, coldeflist)
                calls.append(call)
                columns.update(d.colname or "" for d in coldefs or () if isinstance(d, ast.ColumnDef))
            if value.alias is not None:
                columns.update(string_names(value.alias.colnames))
                range_names = [value.alias.aliasname or ""]
            else:
                range_names = [string_names(c.funcname)[-1] for c in calls if isinstance(c, ast.FuncCall)]
            for name in range_names:
                found.setdefault(name, set()).update(columns)
        for attr in value:
            _function_ranges(getattr(value, attr), found)
    return found


def _has_column_ref(value: Any) -> bool:
    if isinstance(value, ast.ColumnRef):
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_column_ref(v) for v in value)
    if isinstance(value, ast.Node):
        return any(_has_column_ref(getattr(value, attr)) for attr in value)
    return False


def _target_columns(targets: Any, what: str) -> None:
    for target in targets or ():
        if isinstance(target, ast.ResTarget) and target.name and target.name.lower() in RESERVED_COLUMNS:
            raise refuse(
                f"{what} writes {target.name!r}: id and created_at are filled in by the platform", "reserved_column"
            )


def _require_where(where: Any, verb: str) -> None:
    if where is None:
        raise refuse(f"{verb} needs a WHERE clause (to change every row, say which rows: WHERE ...)", "where_required")
    if not _has_column_ref(where):
        raise refuse(
            f"{verb} ... WHERE must test at least one column (a constant condition such as WHERE true or "
            "WHERE 1=1 is refused)",
            "where_required",
        )


def _check_statement(stmt: ast.Node, guard: TreeGuard, mode: str) -> tuple[str, str | None]:
    """Walk one top-level statement (routing its tables in place) and return (kind, created)."""
    empty: frozenset[str] = frozenset()
    if isinstance(stmt, ast.TransactionStmt):
        raise refuse(
            "transaction control (BEGIN/COMMIT/ROLLBACK/SAVEPOINT ...) is not allowed: each statement runs in its "
            "own transaction",
            "transaction",
        )
    if isinstance(stmt, ast.SelectStmt):
        guard.walk(stmt, empty)  # first, so that SELECT INTO or a write hidden in a CTE is named as such
        if mode == "execute":
            raise refuse("sql_execute does not run SELECT: send queries through sql_query", "statement")
        return "select", None
    if isinstance(stmt, ast.DropStmt) and stmt.removeType == enums.ObjectType.OBJECT_VIEW:
        if mode == "query":
            raise refuse(QUERY_ONLY_HINT, "statement")
        return "drop_view", check_drop_view(stmt, guard)
    if isinstance(stmt, EXECUTE_STATEMENTS):
        if mode == "query":
            raise refuse(QUERY_ONLY_HINT, "statement")
    else:
        hint = STATEMENT_HINTS.get(type(stmt))
        label = type(stmt).__name__.removesuffix("Stmt")
        raise refuse(
            hint
            or f"{label} statements are not allowed: sql_query takes SELECT, sql_execute takes INSERT/UPDATE/DELETE "
            "with WHERE and CREATE TABLE/INDEX/VIEW",
            "statement",
        )

    if isinstance(stmt, ast.InsertStmt):
        scope = guard.with_clause(stmt.withClause, empty)
        guard.route(stmt.relation, scope, target=True)
        if stmt.override != enums.OverridingKind.OVERRIDING_NOT_SET:
            raise refuse("OVERRIDING ... VALUE writes the id column: remove it", "reserved_column")
        if stmt.selectStmt is not None and not stmt.cols:
            raise refuse(
                "INSERT needs its column list, e.g. INSERT INTO t (名称, 数量) VALUES (...): "
                "id and created_at are filled in by the platform",
                "reserved_column",
            )
        _target_columns(stmt.cols, "INSERT")
        if stmt.onConflictClause is not None:
            _target_columns(stmt.onConflictClause.targetList, "ON CONFLICT DO UPDATE")
        guard.children(stmt, scope, skip=("relation", "withClause"))
        return "insert", None
    if isinstance(stmt, ast.UpdateStmt):
        _require_where(stmt.whereClause, "UPDATE")
        scope = guard.with_clause(stmt.withClause, empty)
        guard.route(stmt.relation, scope, target=True)
        _target_columns(stmt.targetList, "UPDATE")
        guard.children(stmt, scope, skip=("relation", "withClause"))
        return "update", None
    if isinstance(stmt, ast.DeleteStmt):
        _require_where(stmt.whereClause, "DELETE")
        scope = guard.with_clause(stmt.withClause, empty)
        guard.route(stmt.relation, scope, target=True)
        guard.children(stmt, scope, skip=("relation", "withClause"))
        return "delete", None
    if isinstance(stmt, ast.CreateStmt):
        return "create_table", check_create_table(stmt, guard)
    if isinstance(stmt, ast.IndexStmt):
        return "create_index", check_create_index(stmt, guard)
    return "create_view", check_create_view(stmt, guard)


def check_sql(sql: str, *, schema: str, mode: str, forbidden_tables: frozenset[str] = frozenset()) -> CheckedSql:
    """Check one statement for the SQL channel and route its tables to ``schema``; raise SqlRefused if refused.

    ``mode`` is "query" (sql_query: SELECT only) or "execute" (sql_execute: INSERT/UPDATE/DELETE with WHERE,
    CREATE TABLE/INDEX/VIEW; a plain SELECT is refused with a pointer to sql_query). ``forbidden_tables`` are
    table (or view) names the caller may not touch on this channel at all (own-scoped tables, §7.2).
    """
    if mode not in ("query", "execute"):
        raise ValueError(f"mode must be 'query' or 'execute', not {mode!r}")
    if not is_org_schema(schema):
        raise ValueError(f"schema must be an organisation schema ({SCHEMA_PREFIX}…), not {schema!r}")
    if not isinstance(sql, str) or not sql.strip():
        raise refuse("the SQL is empty: send one statement", "parse_error")
    if len(sql) > MAX_SQL_CHARS:
        raise refuse(
            f"the statement is longer than {MAX_SQL_CHARS} characters: import bulk data with insert_from_file",
            "too_complex",
        )
    try:
        tokens = _tokens(sql)
        statements = parse_sql(sql)
        if len(statements) != 1:
            raise refuse(
                "send exactly one statement (no ';' between statements)"
                if statements
                else "the SQL holds no statement (only comments?): send one statement",
                "multiple_statements" if statements else "parse_error",
            )
        _check_identifier_lengths(sql, tokens)
        stmt = statements[0].stmt
        if stmt is None:  # pragma: no cover
            raise refuse("the SQL holds no statement", "parse_error")
        guard = TreeGuard(schema, frozenset(forbidden_tables), _function_ranges(stmt, {}))
        kind, created = _check_statement(stmt, guard, mode)
        rewritten = RawStream()(stmt)
        preview = None
        if isinstance(stmt, ast.DeleteStmt):
            check_stable_delete(stmt)
            preview = RawStream()(delete_preview(stmt))
        written = stmt.relation if isinstance(stmt, ast.InsertStmt | ast.UpdateStmt | ast.DeleteStmt) else None
        target = written.relname if written is not None else None
        # What runs must be what was checked: the deparsed text parses back to the same (routed) tree.
        again = parse_sql(rewritten)
        if len(again) != 1 or again[0].stmt != stmt:
            raise refuse("the statement could not be rewritten faithfully: simplify it", "rewrite")
    except ParseError as exc:
        raise refuse(f"PostgreSQL cannot parse this statement: {exc}", "parse_error") from None
    except RecursionError:
        raise refuse("the statement is nested too deeply: simplify it", "too_complex") from None
    return CheckedSql(
        kind=kind,
        sql=rewritten,
        tables=frozenset(guard.tables),
        created=created,
        target=target,
        preview=preview,
    )
