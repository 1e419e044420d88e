"""The SQL channel's parser guard (spec §7.6): parse with PostgreSQL's own parser, refuse, route, deparse.

``check_sql`` parses one statement with pglast (libpg_query, the real PostgreSQL grammar), walks the *whole* tree
and refuses anything that is not on an allow-list (sql_allowlists.py): statement types, node types, functions,
types; the walk itself is sql_walker.py. Bare table names
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
from pglast.visitors import Visitor

from .sql_allowlists import (
    EXECUTE_STATEMENTS,
    IDENTIFIER_RE,
    INDEX_METHODS,
    MAX_COMMENT_OPENINGS,
    MAX_IDENTIFIER_BYTES,
    MAX_SQL_CHARS,
    MAX_SQL_TOKENS,
    QUERY_ONLY_HINT,
    RESERVED_COLUMNS,
    SCHEMA_RE,
    STATEMENT_HINTS,
)
from .sql_refusal import refuse
from .sql_role import quote_ident
from .sql_walker import TreeGuard, string_names

__all__ = ["CheckedSql", "check_sql", "restrict_delete"]


@dataclass(frozen=True)
class CheckedSql:
    kind: str  # "select" | "insert" | "update" | "delete" | "create_table" | "create_index" | "create_view"
    sql: str  # the rewritten statement (pglast deparse), every table reference qualified with the org schema
    tables: frozenset[str]  # the (unqualified) table names the statement references (read or written)
    created: str | None  # CREATE TABLE/VIEW: the name created; CREATE INDEX: the table it is on
    target: str | None = None  # INSERT/UPDATE/DELETE: the table written
    preview: str | None = None  # DELETE: a SELECT of the rows it would delete (confirmation count and backup, §7.7)


def _check_identifier(name: str, what: str) -> None:
    if not IDENTIFIER_RE.fullmatch(name):
        raise refuse(
            f"{what} {name!r} is not a valid name: use Chinese characters, letters, digits and underscores, "
            "1 to 50 characters, not starting with a digit (write 容差百分比, not 容差%)",
            "identifier",
        )
    if len(name.encode()) > MAX_IDENTIFIER_BYTES:
        raise refuse(
            f"{what} {name!r} is longer than PostgreSQL's 63 bytes (a Chinese character takes 3): shorten it",
            "identifier",
        )


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
        if len(text.encode()) > MAX_IDENTIFIER_BYTES:
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
        return "drop_view", _drop_view(stmt, guard)
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
        return "create_table", _create_table(stmt, guard)
    if isinstance(stmt, ast.IndexStmt):
        return "create_index", _create_index(stmt, guard)
    return "create_view", _create_view(stmt, guard)


def _create_table(stmt: ast.CreateStmt, guard: TreeGuard) -> str:
    empty: frozenset[str] = frozenset()
    if stmt.inhRelations or stmt.partspec or stmt.partbound or stmt.ofTypename:
        raise refuse("INHERITS / PARTITION / OF type are not supported: list the columns", "statement")
    if stmt.options or stmt.tablespacename or stmt.accessMethod:
        raise refuse("WITH (...) / TABLESPACE / USING are not supported on CREATE TABLE", "statement")
    if stmt.oncommit != enums.OnCommitAction.ONCOMMIT_NOOP:
        raise refuse("ON COMMIT is for temporary tables, which are not supported", "statement")
    name = guard.route(stmt.relation, empty, target=True)
    _check_identifier(name, "table name")
    for element in stmt.tableElts or ():
        if isinstance(element, ast.ColumnDef):
            column = element.colname or ""
            if column.lower() in RESERVED_COLUMNS:
                raise refuse(
                    f"column {column!r} is created by the platform on every table: leave it out", "reserved_column"
                )
            _check_identifier(column, "column name")
            if element.typeName is not None:
                _column_type(element, guard.base_type(element.typeName))
        elif not isinstance(element, ast.Constraint):
            raise refuse(f"{type(element).__name__} is not supported in CREATE TABLE: list the columns", "node")
    guard.children(stmt, empty, skip=("relation",))
    return name


def _column_type(column: ast.ColumnDef, base: str) -> None:
    """Column types the structured actions can read and write as the table's metadata will say (registration maps
    them onto logical types): ``timestamp`` becomes ``timestamptz`` (日期时间 values are instants; a column without
    a zone could not take them), ``interval``, ``timetz`` and ``json`` are refused with the type to use."""
    type_name = column.typeName
    assert type_name is not None
    if base == "json":
        raise refuse("json columns are not used: keep JSON in a text column", "jsonb")
    if base in ("interval", "timetz"):
        instead = "text (e.g. '2 days'), or two timestamptz columns" if base == "interval" else "time or timestamptz"
        raise refuse(f"{base} columns are not supported by the table actions: use {instead}", "type")
    if base == "timestamp":
        type_name.names = (ast.String(sval="pg_catalog"), ast.String(sval="timestamptz"))


def _drop_view(stmt: ast.DropStmt, guard: TreeGuard) -> str:
    """``DROP VIEW [IF EXISTS] v [, …]`` of the organisation's views (views hold no data and are not registered; a
    view over a table blocks delete_table / delete_field until it is dropped). No CASCADE: it would drop other
    views unseen. The names are routed to the org schema like table names; returns them joined by ", "."""
    if stmt.behavior == enums.DropBehavior.DROP_CASCADE:
        raise refuse("DROP VIEW … CASCADE would drop other views too: drop each view by name", "statement")
    names = []
    routed = []
    for obj in stmt.objects or ():
        parts = string_names(obj)
        if len(parts) == 2 and parts[0] != guard.schema:
            raise refuse(f"schema {parts[0]!r} is out of reach: write the bare view name", "schema")
        if len(parts) not in (1, 2):
            raise refuse(f"{'.'.join(parts)}: name the view only", "schema")
        name = parts[-1]
        guard.route(ast.RangeVar(relname=name, inh=True, relpersistence="p"), frozenset(), target=True)
        names.append(name)
        routed.append((ast.String(sval=guard.schema), ast.String(sval=name)))
    stmt.objects = tuple(routed)
    return ", ".join(names)


def _create_index(stmt: ast.IndexStmt, guard: TreeGuard) -> str:
    empty: frozenset[str] = frozenset()
    if stmt.concurrent:
        raise refuse(
            "CREATE INDEX CONCURRENTLY cannot run inside the channel's transaction: drop CONCURRENTLY", "statement"
        )
    if stmt.options or stmt.tableSpace or stmt.excludeOpNames or stmt.primary or stmt.isconstraint:
        raise refuse("WITH (...) / TABLESPACE are not supported on CREATE INDEX", "statement")
    if stmt.accessMethod not in INDEX_METHODS:
        raise refuse(f"index method {stmt.accessMethod!r} is not supported: use btree (the default)", "statement")
    if stmt.idxname is not None:
        _check_identifier(stmt.idxname, "index name")
        guard._table_name(stmt.idxname)  # an index shares the namespace of tables: no pg_* or _dt_* name
    table = guard.route(stmt.relation, empty, target=True)
    guard.children(stmt, empty, skip=("relation",))
    return table


def _create_view(stmt: ast.ViewStmt, guard: TreeGuard) -> str:
    empty: frozenset[str] = frozenset()
    if stmt.options:
        raise refuse("WITH (...) options are not supported on CREATE VIEW", "statement")
    name = guard.route(stmt.view, empty, target=True)
    _check_identifier(name, "view name")
    for alias in string_names(stmt.aliases):
        _check_identifier(alias, "view column name")
    query = stmt.query
    if not isinstance(query, ast.SelectStmt):  # pragma: no cover - the grammar allows nothing else
        raise refuse("a view must be a SELECT", "statement")
    first = query
    while first.larg is not None:
        first = first.larg
    for target in first.targetList or ():
        if isinstance(target, ast.ResTarget) and target.name:
            _check_identifier(target.name, "view column name")
    guard.children(stmt, empty, skip=("view",))
    return name


#: Functions whose value differs between two statements of one transaction: a DELETE using one would not delete
#: the rows its preview (the confirmation count and the backup) read.
UNSTABLE_IN_DELETE = frozenset({"random", "clock_timestamp", "statement_timestamp", "timeofday", "gen_random_uuid"})


class _UnstableCalls(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: set[str] = set()

    def visit_FuncCall(self, ancestors: Any, node: ast.FuncCall) -> None:
        name = (string_names(node.funcname) or [""])[-1].lower()
        if name in UNSTABLE_IN_DELETE:
            self.found.add(f"{name}()")

    def visit_RangeTableSample(self, ancestors: Any, node: ast.RangeTableSample) -> None:
        if node.repeatable is None:
            self.found.add("TABLESAMPLE without REPEATABLE")


def _check_stable_delete(stmt: ast.DeleteStmt) -> None:
    """A DELETE is previewed by a SELECT of the same condition (§7.7 backup): the two must match the same rows."""
    finder = _UnstableCalls()
    finder(stmt)
    if finder.found:
        names = ", ".join(sorted(finder.found))
        raise refuse(
            f"a DELETE may not use {names}: what it matches changes between the backup of the rows and the delete, so "
            "the backup could miss rows; compute the values first (e.g. SELECT the ids) and DELETE by id",
            "unstable_delete",
        )


def _delete_preview(stmt: ast.DeleteStmt) -> ast.SelectStmt:
    """``[WITH …] SELECT <target>.* FROM <target> [, <USING items>] WHERE <same condition>`` of a routed DELETE.

    Built from the checked tree (never from text), so it reads exactly the rows the DELETE matches; a row joined
    to several USING rows comes back more than once (the caller de-duplicates by id).
    """
    relation = stmt.relation
    if relation is None:  # pragma: no cover - the grammar always gives DELETE a table
        raise refuse("DELETE names no table", "statement")
    target = relation.alias.aliasname if relation.alias is not None else relation.relname
    return ast.SelectStmt(
        withClause=stmt.withClause,
        targetList=(ast.ResTarget(val=ast.ColumnRef(fields=(ast.String(sval=target), ast.A_Star()))),),
        fromClause=(relation, *(stmt.usingClause or ())),
        whereClause=stmt.whereClause,
        limitOption=enums.LimitOption.LIMIT_OPTION_DEFAULT,
        op=enums.SetOperation.SETOP_NONE,
    )


def restrict_delete(sql: str) -> str:
    """The checked DELETE ``sql`` limited to the rows whose id is in the parameter ``$1`` (a bigint array): the
    ids its preview read and backed up (§7.7). Whatever changes between the preview and the delete (a volatile
    function inside a view, a TABLESAMPLE, a concurrent insert), the delete then never removes a row the backup
    lacks. The ids travel as a parameter, so a delete of many rows stays a short statement."""
    stmt = parse_sql(sql)[0].stmt
    if not isinstance(stmt, ast.DeleteStmt) or stmt.relation is None:
        raise ValueError("restrict_delete takes a checked DELETE")
    relation = stmt.relation
    target = relation.alias.aliasname if relation.alias is not None else relation.relname
    condition = parse_sql(f"SELECT WHERE {quote_ident(target)}.id = ANY ($1::bigint[])")[0].stmt.whereClause
    where = ast.BoolExpr(boolop=enums.BoolExprType.AND_EXPR, args=(condition, stmt.whereClause))
    restricted = ast.DeleteStmt(
        relation=relation,
        usingClause=stmt.usingClause,
        whereClause=where,
        returningClause=stmt.returningClause,
        withClause=stmt.withClause,
    )
    return RawStream()(restricted)


def check_sql(sql: str, *, schema: str, mode: str, forbidden_tables: frozenset[str] = frozenset()) -> CheckedSql:
    """Check one statement for the SQL channel and route its tables to ``schema``; raise SqlRefused if refused.

    ``mode`` is "query" (sql_query: SELECT only) or "execute" (sql_execute: INSERT/UPDATE/DELETE with WHERE,
    CREATE TABLE/INDEX/VIEW; a plain SELECT is refused with a pointer to sql_query). ``forbidden_tables`` are
    table (or view) names the caller may not touch on this channel at all (own-scoped tables, §7.2).
    """
    if mode not in ("query", "execute"):
        raise ValueError(f"mode must be 'query' or 'execute', not {mode!r}")
    if not SCHEMA_RE.fullmatch(schema):
        raise ValueError(f"schema must look like org_data_<lowercase letters and digits>, not {schema!r}")
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
            _check_stable_delete(stmt)
            preview = RawStream()(_delete_preview(stmt))
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
