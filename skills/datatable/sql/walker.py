"""The walk of the SQL channel's guard (spec §7.6): :class:`TreeGuard` visits every node of a parsed statement,
refuses whatever is not on the allow-lists (allowlists.py) and routes bare table names to the organisation's
schema by setting ``RangeVar.schemaname`` in the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from pglast import ast

from ..store.names import META_PREFIX
from .allowlists import (
    ALLOWED_CONSTRAINTS,
    ALLOWED_FUNCTIONS,
    ALLOWED_TYPES,
    CONSTR_TYPE,
    PG_CATALOG_SYNTAX_FUNCTIONS,
    PG_SYSTEM_COLUMNS,
    PLAIN_NODES,
    ROW_FUNCTIONS,
    SERIAL_TYPES,
    SQL_VALUE_FUNCTIONS,
    TABLESAMPLE_METHODS,
)
from .refusal import FORBIDDEN_TABLE, refuse

__all__ = ["TreeGuard", "string_names"]


def string_names(nodes: Iterable[Any] | None) -> list[str]:
    """The sval of each ast.String in a name list (anything else becomes "*", e.g. A_Star)."""
    return [(n.sval or "") if isinstance(n, ast.String) else "*" for n in (nodes or ())]


class TreeGuard:
    def __init__(self, schema: str, forbidden: frozenset[str], function_ranges: dict[str, set[str]]) -> None:
        self.schema = schema
        self.forbidden = forbidden
        self.function_ranges = function_ranges
        self.tables: set[str] = set()
        self._handlers: dict[type[ast.Node], Callable[[Any, frozenset[str]], None]] = {
            ast.SelectStmt: self._select,
            ast.RangeVar: self._range_var,
            ast.ColumnRef: self._column_ref,
            ast.A_Indirection: self._indirection,
            ast.FuncCall: self._func_call,
            ast.SQLValueFunction: self._sql_value_function,
            ast.TypeName: self._type_name,
            ast.A_Expr: self._a_expr,
            ast.SubLink: self._sub_link,
            ast.SortBy: self._sort_by,
            ast.RangeTableSample: self._table_sample,
            ast.CollateClause: self._collate,
            ast.IndexElem: self._index_elem,
            ast.ColumnDef: self._column_def,
            ast.Constraint: self._constraint,
            ast.ParamRef: self._param_ref,
            ast.LockingClause: self._locking,
            ast.IntoClause: self._into,
            ast.CommonTableExpr: self._stray_cte,
        }

    # -- generic -------------------------------------------------------------------------------------------------

    def walk(self, value: Any, scope: frozenset[str]) -> None:
        if isinstance(value, (tuple, list)):
            for item in value:
                self.walk(item, scope)
        elif isinstance(value, ast.Node):
            handler = self._handlers.get(type(value))
            if handler is not None:
                handler(value, scope)
            elif type(value) in PLAIN_NODES:
                self.children(value, scope)
            else:
                raise refuse(
                    f"{type(value).__name__} is not allowed on the SQL channel: only plain SELECT/INSERT/UPDATE/"
                    "DELETE and CREATE TABLE/INDEX/VIEW syntax is supported",
                    "node",
                )
        elif value is not None and not isinstance(value, (str, int, float, Enum)):  # pragma: no cover
            raise refuse(f"unexpected parse tree value {type(value).__name__}", "node")

    def children(self, node: ast.Node, scope: frozenset[str], skip: tuple[str, ...] = ()) -> None:
        for attr in node:
            if attr not in skip:
                value = getattr(node, attr)
                if isinstance(value, (ast.Node, tuple, list)):
                    self.walk(value, scope)

    # -- names ---------------------------------------------------------------------------------------------------

    def _operator(self, name: Any) -> None:
        parts = string_names(name)
        if len(parts) > 1 and parts[0] != "pg_catalog":
            raise refuse(f"operator {'.'.join(parts)} names schema {parts[0]!r}: write the bare operator", "schema")

    def _table_name(self, relname: str) -> None:
        if relname.lower().startswith("pg_"):
            raise refuse(
                f"{relname!r} is a PostgreSQL system catalog name: system catalogs and information_schema "
                "cannot be read on the SQL channel (use list_tables / list_columns)",
                "schema",
            )
        if relname.lower().startswith(META_PREFIX):
            raise refuse(
                f"{relname!r} is the datatable skill's own metadata (names starting with {META_PREFIX} are "
                "reserved): use list_tables / list_columns",
                FORBIDDEN_TABLE,
            )
        if relname in self.forbidden:
            raise refuse(
                f"{relname!r} is limited for your role (to your own rows, or to some actions), or is a view over "
                "such a table, and cannot be used on the SQL channel: use the query / aggregate actions",
                FORBIDDEN_TABLE,
            )

    # -- statements inside the walk ------------------------------------------------------------------------------

    def with_clause(self, clause: ast.WithClause | None, scope: frozenset[str]) -> frozenset[str]:
        """Check the CTEs of a WITH clause and return the scope the statement body sees."""
        if clause is None:
            return scope
        ctes = [c for c in clause.ctes or () if isinstance(c, ast.CommonTableExpr)]
        if len(ctes) != len(clause.ctes or ()):  # pragma: no cover - the grammar allows nothing else
            raise refuse("unexpected WITH clause", "node")
        names = frozenset(c.ctename or "" for c in ctes)
        for name in names:
            self._table_name(name)  # no pg_* or forbidden names, even for a CTE
        # Non-recursive WITH: each CTE sees the ones before it; WITH RECURSIVE: each sees all of them.
        visible = scope | names if clause.recursive else scope
        for cte in ctes:
            if not isinstance(cte.ctequery, ast.SelectStmt):
                raise refuse(
                    f"WITH {cte.ctename} AS ({type(cte.ctequery).__name__.removesuffix('Stmt').upper()} ...) "
                    "writes data: a CTE may only SELECT; send the write as its own statement through sql_execute",
                    "cte_write",
                )
            self.children(cte, visible)
            if not clause.recursive:
                visible = visible | {cte.ctename or ""}
        return scope | names

    def _stray_cte(self, node: ast.CommonTableExpr, scope: frozenset[str]) -> None:  # pragma: no cover
        raise refuse("unexpected WITH clause", "node")

    def _select(self, node: ast.SelectStmt, scope: frozenset[str]) -> None:
        if node.intoClause is not None:
            self._into(node.intoClause, scope)
        if node.lockingClause:
            self._locking(node.lockingClause[0], scope)
        inner = self.with_clause(node.withClause, scope)
        self.children(node, inner, skip=("withClause",))

    def _into(self, node: Any, scope: frozenset[str]) -> None:
        raise refuse(
            "SELECT ... INTO creates a table: create it with create_table (or CREATE TABLE), then INSERT ... SELECT",
            "select_into",
        )

    def _locking(self, node: Any, scope: frozenset[str]) -> None:
        raise refuse("locking clauses (FOR UPDATE / FOR SHARE ...) are not allowed: remove them", "locking")

    def _param_ref(self, node: Any, scope: frozenset[str]) -> None:
        raise refuse(
            f"${node.number} is a bind parameter, and the SQL channel takes none: write the value as a literal",
            "parameter",
        )

    # -- relations -----------------------------------------------------------------------------------------------

    def _range_var(self, node: ast.RangeVar, scope: frozenset[str]) -> None:
        self.route(node, scope)
        self.children(node, scope)

    def route(self, node: ast.RangeVar | None, scope: frozenset[str], *, target: bool = False) -> str:
        """Qualify a table reference with the org schema (a CTE reference is left alone, but never a target).

        Returns the (unqualified) name.
        """
        if node is None or not node.relname:  # pragma: no cover - the grammar always names the relation
            raise refuse("a table name is missing", "node")
        relname = node.relname
        if node.catalogname is not None:
            raise refuse(f"{node.catalogname}.{node.schemaname}.{node.relname}: name the table only", "schema")
        if node.relpersistence != "p":
            raise refuse("temporary and unlogged tables are not supported", "statement")
        if node.schemaname is None:
            if not target and relname in scope:
                return relname  # a CTE, not a table
            node.schemaname = self.schema
        elif node.schemaname != self.schema:
            raise refuse(
                f"schema {node.schemaname!r} is out of reach: only your organisation's tables can be used, "
                "write the bare table name",
                "schema",
            )
        self._table_name(relname)
        self.tables.add(relname)
        return relname

    def _table_sample(self, node: ast.RangeTableSample, scope: frozenset[str]) -> None:
        method = string_names(node.method)
        if len(method) != 1 or method[0] not in TABLESAMPLE_METHODS:
            raise refuse(f"TABLESAMPLE {'.'.join(method)}: only BERNOULLI and SYSTEM are supported", "function")
        self.children(node, scope, skip=("method",))

    # -- expressions ---------------------------------------------------------------------------------------------

    def _column_ref(self, node: ast.ColumnRef, scope: frozenset[str]) -> None:
        parts = string_names(node.fields)
        if len(parts) > 3 or (len(parts) == 3 and parts[0] != self.schema):
            raise refuse(f"column {'.'.join(parts)} names another schema: write table.column", "schema")
        if parts[-1] in PG_SYSTEM_COLUMNS:
            raise refuse(f"system column {parts[-1]!r} is not available: use the id column", "system_column")
        if len(parts) == 2 and parts[1] != "*" and parts[1] not in self.function_ranges.get(parts[0], (parts[1],)):
            raise refuse(
                f"{parts[0]}.{parts[1]}: {parts[0]} is a function in FROM, so PostgreSQL may read this as the call "
                f"{parts[1]}({parts[0]}); name its columns (... AS {parts[0]}(column)) and use those names",
                "function",
            )
        if len(parts) > 1:
            self._field(parts[-1])
        self.children(node, scope)

    def _indirection(self, node: ast.A_Indirection, scope: frozenset[str]) -> None:
        for part in node.indirection or ():
            if isinstance(part, ast.String):
                # (expr).name is the call name(expr) for any one-argument function when expr is not a row: refused.
                raise refuse(
                    f"(...).{part.sval} is not allowed: PostgreSQL reads it as the call {part.sval}(...) unless the "
                    "value is a row; write table.column",
                    "function",
                )
        self.children(node, scope)

    def _field(self, name: str) -> None:
        """``x.name`` may be the function call ``name(x)`` (field notation): refuse the names of such functions."""
        lowered = name.lower()
        if lowered in ROW_FUNCTIONS or lowered.startswith(("pg_", "_pg")):
            raise refuse(
                f".{name} would call the function {name}() on a whole row, which is not allowed: "
                "name a column of the table",
                "function",
            )

    def _func_call(self, node: ast.FuncCall, scope: frozenset[str]) -> None:
        parts = string_names(node.funcname)
        name = parts[-1]
        if len(parts) == 2 and parts[0] == "pg_catalog" and name in PG_CATALOG_SYNTAX_FUNCTIONS:
            pass
        elif len(parts) > 1:
            raise refuse(
                f"function {'.'.join(parts)} is schema-qualified: call allowed functions by their bare name",
                "function" if parts[0] == "pg_catalog" else "schema",
            )
        elif name.startswith(("jsonb", "to_jsonb")):
            raise refuse(f"{name}() works on JSONB, which the SQL channel does not use: keep JSON in text", "jsonb")
        elif name not in ALLOWED_FUNCTIONS:
            raise refuse(
                f"function {name}() is not allowed on the SQL channel; allowed are aggregate, window, string, "
                "numeric, date/time and conditional functions (count, sum, lower, round, date_trunc, coalesce, ...)",
                "function",
            )
        self.children(node, scope, skip=("funcname",))

    def _sql_value_function(self, node: ast.SQLValueFunction, scope: frozenset[str]) -> None:
        if node.op not in SQL_VALUE_FUNCTIONS:
            label = node.op.name.removeprefix("SVFOP_") if node.op is not None else "this value function"
            raise refuse(f"{label} is not available on the SQL channel: use CURRENT_DATE / now()", "function")

    def _type_name(self, node: ast.TypeName, scope: frozenset[str]) -> None:
        self.base_type(node)
        if node.setof or node.pct_type:
            raise refuse("SETOF and %TYPE are not supported", "type")
        self.children(node, scope, skip=("names",))

    def base_type(self, node: ast.TypeName) -> str:
        parts = string_names(node.names)
        if len(parts) == 2 and parts[0] == "pg_catalog":
            base = parts[1]
        elif len(parts) == 1:
            base = parts[0]
        else:
            raise refuse(f"type {'.'.join(parts)} names a schema: use a built-in type by its bare name", "schema")
        if base.lower() in ("jsonb", "_jsonb"):
            raise refuse(
                "JSONB is not used on the SQL channel: keep JSON in a text column (DEFAULT '[]', not '[]'::jsonb)",
                "jsonb",
            )
        if base.lower() in SERIAL_TYPES:
            raise refuse(
                f"{base} columns are not allowed: every table already has the platform's id column", "reserved_column"
            )
        if base not in ALLOWED_TYPES:
            raise refuse(
                f"type {base} is not allowed: use text, varchar, integer, bigint, numeric, double precision, "
                "boolean, date, time, timestamp, timestamptz, interval or uuid",
                "type",
            )
        return base

    def _a_expr(self, node: ast.A_Expr, scope: frozenset[str]) -> None:
        self._operator(node.name)
        self.children(node, scope, skip=("name",))

    def _sub_link(self, node: ast.SubLink, scope: frozenset[str]) -> None:
        self._operator(node.operName)
        self.children(node, scope, skip=("operName",))

    def _sort_by(self, node: ast.SortBy, scope: frozenset[str]) -> None:
        self._operator(node.useOp)
        self.children(node, scope, skip=("useOp",))

    def _collate(self, node: ast.CollateClause, scope: frozenset[str]) -> None:
        self._qualified_name(node.collname, "collation")
        self.children(node, scope, skip=("collname",))

    def _qualified_name(self, name: Any, what: str) -> None:
        parts = string_names(name)
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != "pg_catalog"):
            raise refuse(f"{what} {'.'.join(parts)} names a schema: use a built-in {what}", "schema")

    # -- DDL pieces ----------------------------------------------------------------------------------------------

    def _index_elem(self, node: ast.IndexElem, scope: frozenset[str]) -> None:
        self._qualified_name(node.opclass, "operator class")
        self._qualified_name(node.collation, "collation")
        self.children(node, scope, skip=("opclass", "collation"))

    def _column_def(self, node: ast.ColumnDef, scope: frozenset[str]) -> None:
        if node.compression or node.storage_name or node.fdwoptions:
            raise refuse(f"column {node.colname}: STORAGE / COMPRESSION / OPTIONS are not supported", "statement")
        self.children(node, scope)

    def _constraint(self, node: ast.Constraint, scope: frozenset[str]) -> None:
        kind = node.contype
        if kind is None:  # pragma: no cover - the parser always sets it
            raise refuse("unexpected constraint", "constraint")
        if kind == CONSTR_TYPE.CONSTR_PRIMARY:
            raise refuse("PRIMARY KEY is not allowed: the platform's id column is the primary key", "reserved_column")
        if kind == CONSTR_TYPE.CONSTR_IDENTITY:
            raise refuse("identity columns are not allowed: every table already has the id column", "reserved_column")
        if kind == CONSTR_TYPE.CONSTR_FOREIGN:
            raise refuse("foreign keys are not used (§7.1): store the referenced value instead", "constraint")
        if kind not in ALLOWED_CONSTRAINTS:
            raise refuse(
                f"{kind.name.removeprefix('CONSTR_')} constraints are not supported: "
                "use NOT NULL, NULL, DEFAULT, CHECK or UNIQUE",
                "constraint",
            )
        if node.indexspace or node.access_method or node.indexname:
            raise refuse("tablespaces and index options on constraints are not supported", "constraint")
        self.children(node, scope)
