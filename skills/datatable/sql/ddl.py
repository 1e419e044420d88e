"""The DDL the SQL channel's guard lets through (spec §7.6): CREATE TABLE / INDEX / VIEW and DROP VIEW of the
organisation's own objects, with names the structured actions can use and column types they can read and write.

Each check walks its statement with the guard's :class:`~.walker.TreeGuard` (routing its names to the org schema)
and returns the name it creates or drops; sql/guard.py dispatches to them.
"""

from __future__ import annotations

from pglast import ast, enums

from ..fields.types import IDENTIFIER_RE, MAX_IDENTIFIER_CHARS
from ..store.names import MAX_NAME_BYTES
from .allowlists import INDEX_METHODS, RESERVED_COLUMNS
from .refusal import refuse
from .walker import TreeGuard, string_names

__all__ = ["check_create_index", "check_create_table", "check_create_view", "check_drop_view"]


def _check_identifier(name: str, what: str) -> None:
    """A created name follows the identifier rule of the structured actions (§7.1), which must be able to use it."""
    if not (IDENTIFIER_RE.fullmatch(name) and len(name) <= MAX_IDENTIFIER_CHARS):
        raise refuse(
            f"{what} {name!r} is not a valid name: use Chinese characters, letters, digits and underscores, "
            "1 to 50 characters, not starting with a digit (write 容差百分比, not 容差%)",
            "identifier",
        )
    if len(name.encode()) > MAX_NAME_BYTES:
        raise refuse(
            f"{what} {name!r} is longer than PostgreSQL's {MAX_NAME_BYTES} bytes (a Chinese character takes 3): "
            "shorten it",
            "identifier",
        )


def check_create_table(stmt: ast.CreateStmt, guard: TreeGuard) -> str:
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


def check_drop_view(stmt: ast.DropStmt, guard: TreeGuard) -> str:
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


def check_create_index(stmt: ast.IndexStmt, guard: TreeGuard) -> str:
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
        guard._table_name(stmt.idxname)  # an index shares the namespace of tables: no pg_* or skill-owned name
    table = guard.route(stmt.relation, empty, target=True)
    guard.children(stmt, empty, skip=("relation",))
    return table


def check_create_view(stmt: ast.ViewStmt, guard: TreeGuard) -> str:
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
