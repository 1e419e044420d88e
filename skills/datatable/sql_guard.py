"""The SQL channel's parser guard (spec §7.6): parse with PostgreSQL's own parser, refuse, route, deparse.

``check_sql`` parses one statement with pglast (libpg_query, the real PostgreSQL grammar), walks the *whole* tree
and refuses anything that is not on an allow-list: statement types, node types, functions, types. Bare table names
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

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pglast import ast, enums, parse_sql
from pglast.parser import ParseError, scan
from pglast.stream import RawStream

__all__ = ["CheckedSql", "SqlRefused", "check_sql"]


class SqlRefused(ValueError):
    """The statement is refused: ``reason`` says what and how to fix it, ``code`` is a short machine code.

    Codes: multiple_statements, parse_error, too_complex, statement, transaction, schema, function, type, jsonb,
    node, parameter, where_required, reserved_column, constraint, identifier, system_column, forbidden_table,
    select_into, locking, cte_write, rewrite.
    """

    def __init__(self, reason: str, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code

    def __reduce__(self) -> tuple[type[SqlRefused], tuple[str, str]]:
        return (type(self), (self.reason, self.code))

    def __repr__(self) -> str:
        return f"SqlRefused(code={self.code!r}, reason={self.reason!r})"


@dataclass(frozen=True)
class CheckedSql:
    kind: str  # "select" | "insert" | "update" | "delete" | "create_table" | "create_index" | "create_view"
    sql: str  # the rewritten statement (pglast deparse), every table reference qualified with the org schema
    tables: frozenset[str]  # the (unqualified) table names the statement references (read or written)
    created: str | None  # CREATE TABLE/VIEW: the name created; CREATE INDEX: the table it is on
    target: str | None = None  # INSERT/UPDATE/DELETE: the table written
    preview: str | None = None  # DELETE: a SELECT of the rows it would delete (confirmation count and backup, §7.7)


# ---------------------------------------------------------------------------------------------------------------
# Allow-lists
# ---------------------------------------------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SCHEMA_RE = re.compile(r"org_data_[a-z0-9]+")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
#: §7.1: Chinese characters, letters, digits, underscore; 1 to 50 characters; not starting with a digit.
_IDENTIFIER_RE = re.compile(rf"[A-Za-z_{_CJK}][A-Za-z0-9_{_CJK}]{{0,49}}")
#: PostgreSQL silently truncates identifiers longer than NAMEDATALEN - 1 bytes.
_MAX_IDENTIFIER_BYTES = 63

_RESERVED_COLUMNS = frozenset({"id", "created_at"})
_SYSTEM_COLUMNS = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"})

#: Built-in functions PostgreSQL 18 would call through field notation on a whole row (``t.to_json`` is
#: ``to_json(t)``), minus the allowed ones: such a name after a dot is refused as a function call.
_ROW_FUNCTIONS = _words(
    """
    _pg_expandarray any_out anyarray_out anyarray_send anycompatible_out anycompatiblearray_out
    anycompatiblearray_send anycompatiblenonarray_out anyelement_out anyenum_out anymultirange_out anynonarray_out
    anyrange_out array_dims array_ndims array_out array_reverse array_send array_shuffle array_sort array_to_json
    enum_first enum_last enum_out enum_range enum_send hash_array hash_multirange hash_range hash_record hashenum
    isempty json_build_array json_build_object jsonb_build_array jsonb_build_object lower_inc lower_inf multirange
    multirange_out multirange_send quote_literal quote_nullable range_merge range_out range_send record_out
    record_send row_to_json to_json to_jsonb upper_inc upper_inf
    """
)
_MAX_SQL_CHARS = 100_000

_AGGREGATES = """
    count sum avg min max any_value string_agg array_agg bool_and bool_or every
    stddev stddev_pop stddev_samp variance var_pop var_samp percentile_cont percentile_disc mode
    corr covar_pop covar_samp regr_slope regr_intercept regr_r2 regr_count
"""
_WINDOW = "row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value"
_STRING = """
    lower upper length char_length character_length octet_length substr substring btrim ltrim rtrim replace
    concat concat_ws left right position strpos split_part lpad rpad initcap reverse repeat to_char to_number
    format regexp_replace regexp_match regexp_matches regexp_like regexp_count regexp_substr regexp_instr
    regexp_split_to_array regexp_split_to_table string_to_array string_to_table array_to_string translate md5
    starts_with chr ascii overlay normalize is_normalized similar_to_escape
"""
_NUMERIC = """
    abs round ceil ceiling floor trunc mod div power pow sqrt cbrt exp ln log log10 sign random width_bucket
    pi degrees radians gcd lcm
"""
_DATETIME = """
    now date_trunc date_part extract age to_date to_timestamp make_date make_time make_timestamp
    make_timestamptz make_interval justify_days justify_hours justify_interval date_bin isfinite
    clock_timestamp statement_timestamp transaction_timestamp timezone overlaps
"""
_ARRAY_AND_MISC = """
    array_length cardinality unnest array_position array_positions array_append array_prepend array_cat
    array_remove array_replace num_nulls num_nonnulls gen_random_uuid
"""
#: Functions a statement may call, unqualified. (COALESCE, NULLIF, GREATEST, LEAST and CURRENT_DATE & co. are
#: their own node types, see _PLAIN_NODES and _SQL_VALUE_FUNCTIONS.) generate_series is deliberately absent.
ALLOWED_FUNCTIONS = _words(" ".join((_AGGREGATES, _WINDOW, _STRING, _NUMERIC, _DATETIME, _ARRAY_AND_MISC)))
#: The parser itself writes these as ``pg_catalog.<name>`` for SQL-standard syntax (EXTRACT(... FROM ...),
#: SUBSTRING(... FROM ...), POSITION(... IN ...), TRIM(...), OVERLAY, NORMALIZE, AT TIME ZONE, OVERLAPS,
#: SIMILAR TO); this is the only schema qualification a function name may carry.
PG_CATALOG_SYNTAX_FUNCTIONS = _words(
    "extract overlay position substring btrim ltrim rtrim normalize is_normalized timezone overlaps similar_to_escape"
)

#: Type names (as the parser leaves them, with or without ``pg_catalog.``) allowed in casts and column types.
ALLOWED_TYPES = _words(
    """
    text varchar bpchar int2 int4 int8 numeric float4 float8 bool date time timetz timestamp timestamptz interval
    uuid json
    """
)
_SERIAL_TYPES = frozenset({"serial", "serial2", "serial4", "serial8", "smallserial", "bigserial"})
_INDEX_METHODS = frozenset({"btree", "hash", "gin", "gist", "brin"})
_TABLESAMPLE_METHODS = frozenset({"bernoulli", "system"})

_SQL_VALUE_FUNCTIONS = frozenset(
    {
        enums.SQLValueFunctionOp.SVFOP_CURRENT_DATE,
        enums.SQLValueFunctionOp.SVFOP_CURRENT_TIME,
        enums.SQLValueFunctionOp.SVFOP_CURRENT_TIME_N,
        enums.SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP,
        enums.SQLValueFunctionOp.SVFOP_CURRENT_TIMESTAMP_N,
        enums.SQLValueFunctionOp.SVFOP_LOCALTIME,
        enums.SQLValueFunctionOp.SVFOP_LOCALTIME_N,
        enums.SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP,
        enums.SQLValueFunctionOp.SVFOP_LOCALTIMESTAMP_N,
    }
)

_C = enums.ConstrType
_ALLOWED_CONSTRAINTS = frozenset(
    {_C.CONSTR_NULL, _C.CONSTR_NOTNULL, _C.CONSTR_DEFAULT, _C.CONSTR_CHECK, _C.CONSTR_UNIQUE}
)

#: Node types with nothing to check themselves: their children are walked. Every node type that is neither here
#: nor handled by a method of _Guard is refused, so syntax added by a later PostgreSQL is refused by default.
_PLAIN_NODES: frozenset[type[ast.Node]] = frozenset(
    {
        ast.String,
        ast.Integer,
        ast.Float,
        ast.Boolean,
        ast.BitString,
        ast.A_Const,
        ast.A_Star,
        ast.A_Indices,
        ast.A_ArrayExpr,
        ast.BoolExpr,
        ast.NullTest,
        ast.BooleanTest,
        ast.TypeCast,
        ast.CaseExpr,
        ast.CaseWhen,
        ast.CoalesceExpr,
        ast.MinMaxExpr,
        ast.RowExpr,
        ast.ResTarget,
        ast.MultiAssignRef,
        ast.SetToDefault,
        ast.NamedArgExpr,
        ast.Alias,
        ast.JoinExpr,
        ast.RangeSubselect,
        ast.RangeFunction,
        ast.WindowDef,
        ast.GroupingSet,
        ast.GroupingFunc,
        ast.OnConflictClause,
        ast.InferClause,
        ast.ReturningClause,
        ast.ReturningOption,
        ast.CTESearchClause,
        ast.CTECycleClause,
    }
)

_STATEMENT_HINTS: dict[type[ast.Node], str] = {
    ast.CreateTableAsStmt: "CREATE TABLE ... AS / CREATE MATERIALIZED VIEW is not supported: create the table "
    "(create_table, or CREATE TABLE with explicit columns), then INSERT ... SELECT",
    ast.DropStmt: "DROP is not supported on the SQL channel: use the delete_table action",
    ast.AlterTableStmt: "ALTER is not supported on the SQL channel: use add_field / update_field / delete_field",
    ast.RenameStmt: "renaming is not supported on the SQL channel: use the structured actions",
    ast.TruncateStmt: "TRUNCATE is not supported: use DELETE ... WHERE (or delete_by / delete_batch)",
    ast.CopyStmt: "COPY is not supported: import files with insert_from_file",
    ast.MergeStmt: "MERGE is not supported: use INSERT ... ON CONFLICT, or the upsert action",
    ast.ExplainStmt: "EXPLAIN is not supported on the SQL channel",
    ast.VariableSetStmt: "SET / RESET is not supported: the session settings belong to the platform",
    ast.VariableShowStmt: "SHOW is not supported: the session settings belong to the platform",
    ast.DoStmt: "DO blocks are not supported: send one plain statement",
    ast.CallStmt: "CALL is not supported: send one plain statement",
}

_EXECUTE_STATEMENTS = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.CreateStmt, ast.IndexStmt, ast.ViewStmt)
_QUERY_ONLY_HINT = "sql_query runs only SELECT statements; send INSERT/UPDATE/DELETE/CREATE through sql_execute"


#: Tables of the skill's own bookkeeping (metadata, grants, confirm tokens): never reachable on the channel.
_METADATA_PREFIX = "_dt_"


def _refuse(reason: str, code: str) -> SqlRefused:
    return SqlRefused(reason, code)


def _names(nodes: Iterable[Any] | None) -> list[str]:
    """The sval of each ast.String in a name list (anything else becomes "*", e.g. A_Star)."""
    return [(n.sval or "") if isinstance(n, ast.String) else "*" for n in (nodes or ())]


def _check_identifier(name: str, what: str) -> None:
    if not _IDENTIFIER_RE.fullmatch(name):
        raise _refuse(
            f"{what} {name!r} is not a valid name: use Chinese characters, letters, digits and underscores, "
            "1 to 50 characters, not starting with a digit (write 容差百分比, not 容差%)",
            "identifier",
        )
    if len(name.encode()) > _MAX_IDENTIFIER_BYTES:
        raise _refuse(
            f"{what} {name!r} is longer than PostgreSQL's 63 bytes (a Chinese character takes 3): shorten it",
            "identifier",
        )


def _check_identifier_lengths(sql: str) -> None:
    """Refuse identifiers PostgreSQL would silently truncate to 63 bytes (the parse tree holds them truncated)."""
    for token in scan(sql):
        if token.name not in ("IDENT", "UIDENT"):
            continue
        text = sql[token.start : token.end + 1]
        if token.name == "UIDENT":  # U&"..." : the escaped text is an upper bound of the decoded length
            text = text[3:-1]
        elif text.startswith('"'):
            text = text[1:-1].replace('""', '"')
        if len(text.encode()) > _MAX_IDENTIFIER_BYTES:
            raise _refuse(
                f"the name {text[:20]!r}... is longer than PostgreSQL's 63 bytes and would be silently cut: "
                "shorten it (a Chinese character takes 3 bytes)",
                "identifier",
            )


def _function_ranges(value: Any, found: dict[str, set[str]]) -> dict[str, set[str]]:
    """The range names of the functions in FROM anywhere in the statement, each with its declared column names.

    ``unnest(a) AS u(v)`` gives ``{"u": {"v"}}``; without an alias the range is named after the function. The
    whole row of a function returning a single value is that value, so ``u.name`` is the call ``name(u)`` for any
    one-argument function unless ``name`` is a declared column: see ``_Guard._column_ref``.
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
                columns.update(_names(value.alias.colnames))
                range_names = [value.alias.aliasname or ""]
            else:
                range_names = [_names(c.funcname)[-1] for c in calls if isinstance(c, ast.FuncCall)]
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


# ---------------------------------------------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------------------------------------------


class _Guard:
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
            elif type(value) in _PLAIN_NODES:
                self.children(value, scope)
            else:
                raise _refuse(
                    f"{type(value).__name__} is not allowed on the SQL channel: only plain SELECT/INSERT/UPDATE/"
                    "DELETE and CREATE TABLE/INDEX/VIEW syntax is supported",
                    "node",
                )
        elif value is not None and not isinstance(value, (str, int, float, Enum)):  # pragma: no cover
            raise _refuse(f"unexpected parse tree value {type(value).__name__}", "node")

    def children(self, node: ast.Node, scope: frozenset[str], skip: tuple[str, ...] = ()) -> None:
        for attr in node:
            if attr not in skip:
                value = getattr(node, attr)
                if isinstance(value, (ast.Node, tuple, list)):
                    self.walk(value, scope)

    # -- names ---------------------------------------------------------------------------------------------------

    def _operator(self, name: Any) -> None:
        parts = _names(name)
        if len(parts) > 1 and parts[0] != "pg_catalog":
            raise _refuse(f"operator {'.'.join(parts)} names schema {parts[0]!r}: write the bare operator", "schema")

    def _table_name(self, relname: str) -> None:
        if relname.lower().startswith("pg_"):
            raise _refuse(
                f"{relname!r} is a PostgreSQL system catalog name: system catalogs and information_schema "
                "cannot be read on the SQL channel (use list_tables / list_columns)",
                "schema",
            )
        if relname.lower().startswith(_METADATA_PREFIX):
            raise _refuse(
                f"{relname!r} is the datatable skill's own metadata (names starting with {_METADATA_PREFIX} are "
                "reserved): use list_tables / list_columns",
                "forbidden_table",
            )
        if relname in self.forbidden:
            raise _refuse(
                f"table {relname!r} is limited to your own rows and cannot be used on the SQL channel: "
                "use the query / aggregate actions",
                "forbidden_table",
            )

    # -- statements inside the walk ------------------------------------------------------------------------------

    def with_clause(self, clause: ast.WithClause | None, scope: frozenset[str]) -> frozenset[str]:
        """Check the CTEs of a WITH clause and return the scope the statement body sees."""
        if clause is None:
            return scope
        ctes = [c for c in clause.ctes or () if isinstance(c, ast.CommonTableExpr)]
        if len(ctes) != len(clause.ctes or ()):  # pragma: no cover - the grammar allows nothing else
            raise _refuse("unexpected WITH clause", "node")
        names = frozenset(c.ctename or "" for c in ctes)
        for name in names:
            self._table_name(name)  # no pg_* or forbidden names, even for a CTE
        # Non-recursive WITH: each CTE sees the ones before it; WITH RECURSIVE: each sees all of them.
        visible = scope | names if clause.recursive else scope
        for cte in ctes:
            if not isinstance(cte.ctequery, ast.SelectStmt):
                raise _refuse(
                    f"WITH {cte.ctename} AS ({type(cte.ctequery).__name__.removesuffix('Stmt').upper()} ...) "
                    "writes data: a CTE may only SELECT; send the write as its own statement through sql_execute",
                    "cte_write",
                )
            self.children(cte, visible)
            if not clause.recursive:
                visible = visible | {cte.ctename or ""}
        return scope | names

    def _stray_cte(self, node: ast.CommonTableExpr, scope: frozenset[str]) -> None:  # pragma: no cover
        raise _refuse("unexpected WITH clause", "node")

    def _select(self, node: ast.SelectStmt, scope: frozenset[str]) -> None:
        if node.intoClause is not None:
            self._into(node.intoClause, scope)
        if node.lockingClause:
            self._locking(node.lockingClause[0], scope)
        inner = self.with_clause(node.withClause, scope)
        self.children(node, inner, skip=("withClause",))

    def _into(self, node: Any, scope: frozenset[str]) -> None:
        raise _refuse(
            "SELECT ... INTO creates a table: create it with create_table (or CREATE TABLE), then INSERT ... SELECT",
            "select_into",
        )

    def _locking(self, node: Any, scope: frozenset[str]) -> None:
        raise _refuse("locking clauses (FOR UPDATE / FOR SHARE ...) are not allowed: remove them", "locking")

    def _param_ref(self, node: Any, scope: frozenset[str]) -> None:
        raise _refuse(
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
            raise _refuse("a table name is missing", "node")
        relname = node.relname
        if node.catalogname is not None:
            raise _refuse(f"{node.catalogname}.{node.schemaname}.{node.relname}: name the table only", "schema")
        if node.relpersistence != "p":
            raise _refuse("temporary and unlogged tables are not supported", "statement")
        if node.schemaname is None:
            if not target and relname in scope:
                return relname  # a CTE, not a table
            node.schemaname = self.schema
        elif node.schemaname != self.schema:
            raise _refuse(
                f"schema {node.schemaname!r} is out of reach: only your organisation's tables can be used, "
                "write the bare table name",
                "schema",
            )
        self._table_name(relname)
        self.tables.add(relname)
        return relname

    def _table_sample(self, node: ast.RangeTableSample, scope: frozenset[str]) -> None:
        method = _names(node.method)
        if len(method) != 1 or method[0] not in _TABLESAMPLE_METHODS:
            raise _refuse(f"TABLESAMPLE {'.'.join(method)}: only BERNOULLI and SYSTEM are supported", "function")
        self.children(node, scope, skip=("method",))

    # -- expressions ---------------------------------------------------------------------------------------------

    def _column_ref(self, node: ast.ColumnRef, scope: frozenset[str]) -> None:
        parts = _names(node.fields)
        if len(parts) > 3 or (len(parts) == 3 and parts[0] != self.schema):
            raise _refuse(f"column {'.'.join(parts)} names another schema: write table.column", "schema")
        if parts[-1] in _SYSTEM_COLUMNS:
            raise _refuse(f"system column {parts[-1]!r} is not available: use the id column", "system_column")
        if len(parts) == 2 and parts[1] != "*" and parts[1] not in self.function_ranges.get(parts[0], (parts[1],)):
            raise _refuse(
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
                raise _refuse(
                    f"(...).{part.sval} is not allowed: PostgreSQL reads it as the call {part.sval}(...) unless the "
                    "value is a row; write table.column",
                    "function",
                )
        self.children(node, scope)

    def _field(self, name: str) -> None:
        """``x.name`` may be the function call ``name(x)`` (field notation): refuse the names of such functions."""
        lowered = name.lower()
        if lowered in _ROW_FUNCTIONS or lowered.startswith(("pg_", "_pg")):
            raise _refuse(
                f".{name} would call the function {name}() on a whole row, which is not allowed: "
                "name a column of the table",
                "function",
            )

    def _func_call(self, node: ast.FuncCall, scope: frozenset[str]) -> None:
        parts = _names(node.funcname)
        name = parts[-1]
        if len(parts) == 2 and parts[0] == "pg_catalog" and name in PG_CATALOG_SYNTAX_FUNCTIONS:
            pass
        elif len(parts) > 1:
            raise _refuse(
                f"function {'.'.join(parts)} is schema-qualified: call allowed functions by their bare name",
                "function" if parts[0] == "pg_catalog" else "schema",
            )
        elif name.startswith(("jsonb", "to_jsonb")):
            raise _refuse(f"{name}() works on JSONB, which the SQL channel does not use: keep JSON in text", "jsonb")
        elif name not in ALLOWED_FUNCTIONS:
            raise _refuse(
                f"function {name}() is not allowed on the SQL channel; allowed are aggregate, window, string, "
                "numeric, date/time and conditional functions (count, sum, lower, round, date_trunc, coalesce, ...)",
                "function",
            )
        self.children(node, scope, skip=("funcname",))

    def _sql_value_function(self, node: ast.SQLValueFunction, scope: frozenset[str]) -> None:
        if node.op not in _SQL_VALUE_FUNCTIONS:
            label = node.op.name.removeprefix("SVFOP_") if node.op is not None else "this value function"
            raise _refuse(f"{label} is not available on the SQL channel: use CURRENT_DATE / now()", "function")

    def _type_name(self, node: ast.TypeName, scope: frozenset[str]) -> None:
        self.base_type(node)
        if node.setof or node.pct_type:
            raise _refuse("SETOF and %TYPE are not supported", "type")
        self.children(node, scope, skip=("names",))

    def base_type(self, node: ast.TypeName) -> str:
        parts = _names(node.names)
        if len(parts) == 2 and parts[0] == "pg_catalog":
            base = parts[1]
        elif len(parts) == 1:
            base = parts[0]
        else:
            raise _refuse(f"type {'.'.join(parts)} names a schema: use a built-in type by its bare name", "schema")
        if base.lower() in ("jsonb", "_jsonb"):
            raise _refuse(
                "JSONB is not used on the SQL channel: keep JSON in a text column (DEFAULT '[]', not '[]'::jsonb)",
                "jsonb",
            )
        if base.lower() in _SERIAL_TYPES:
            raise _refuse(
                f"{base} columns are not allowed: every table already has the platform's id column", "reserved_column"
            )
        if base not in ALLOWED_TYPES:
            raise _refuse(
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
        parts = _names(name)
        if len(parts) > 2 or (len(parts) == 2 and parts[0] != "pg_catalog"):
            raise _refuse(f"{what} {'.'.join(parts)} names a schema: use a built-in {what}", "schema")

    # -- DDL pieces ----------------------------------------------------------------------------------------------

    def _index_elem(self, node: ast.IndexElem, scope: frozenset[str]) -> None:
        self._qualified_name(node.opclass, "operator class")
        self._qualified_name(node.collation, "collation")
        self.children(node, scope, skip=("opclass", "collation"))

    def _column_def(self, node: ast.ColumnDef, scope: frozenset[str]) -> None:
        if node.compression or node.storage_name or node.fdwoptions:
            raise _refuse(f"column {node.colname}: STORAGE / COMPRESSION / OPTIONS are not supported", "statement")
        self.children(node, scope)

    def _constraint(self, node: ast.Constraint, scope: frozenset[str]) -> None:
        kind = node.contype
        if kind is None:  # pragma: no cover - the parser always sets it
            raise _refuse("unexpected constraint", "constraint")
        if kind == _C.CONSTR_PRIMARY:
            raise _refuse("PRIMARY KEY is not allowed: the platform's id column is the primary key", "reserved_column")
        if kind == _C.CONSTR_IDENTITY:
            raise _refuse("identity columns are not allowed: every table already has the id column", "reserved_column")
        if kind == _C.CONSTR_FOREIGN:
            raise _refuse("foreign keys are not used (§7.1): store the referenced value instead", "constraint")
        if kind not in _ALLOWED_CONSTRAINTS:
            raise _refuse(
                f"{kind.name.removeprefix('CONSTR_')} constraints are not supported: "
                "use NOT NULL, NULL, DEFAULT, CHECK or UNIQUE",
                "constraint",
            )
        if node.indexspace or node.access_method or node.indexname:
            raise _refuse("tablespaces and index options on constraints are not supported", "constraint")
        self.children(node, scope)


# ---------------------------------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------------------------------


def _target_columns(targets: Any, what: str) -> None:
    for target in targets or ():
        if isinstance(target, ast.ResTarget) and target.name and target.name.lower() in _RESERVED_COLUMNS:
            raise _refuse(
                f"{what} writes {target.name!r}: id and created_at are filled in by the platform", "reserved_column"
            )


def _require_where(where: Any, verb: str) -> None:
    if where is None:
        raise _refuse(f"{verb} needs a WHERE clause (to change every row, say which rows: WHERE ...)", "where_required")
    if not _has_column_ref(where):
        raise _refuse(
            f"{verb} ... WHERE must test at least one column (a constant condition such as WHERE true or "
            "WHERE 1=1 is refused)",
            "where_required",
        )


def _check_statement(stmt: ast.Node, guard: _Guard, mode: str) -> tuple[str, str | None]:
    """Walk one top-level statement (routing its tables in place) and return (kind, created)."""
    empty: frozenset[str] = frozenset()
    if isinstance(stmt, ast.TransactionStmt):
        raise _refuse(
            "transaction control (BEGIN/COMMIT/ROLLBACK/SAVEPOINT ...) is not allowed: each statement runs in its "
            "own transaction",
            "transaction",
        )
    if isinstance(stmt, ast.SelectStmt):
        guard.walk(stmt, empty)  # first, so that SELECT INTO or a write hidden in a CTE is named as such
        if mode == "execute":
            raise _refuse("sql_execute does not run SELECT: send queries through sql_query", "statement")
        return "select", None
    if isinstance(stmt, _EXECUTE_STATEMENTS):
        if mode == "query":
            raise _refuse(_QUERY_ONLY_HINT, "statement")
    else:
        hint = _STATEMENT_HINTS.get(type(stmt))
        label = type(stmt).__name__.removesuffix("Stmt")
        raise _refuse(
            hint
            or f"{label} statements are not allowed: sql_query takes SELECT, sql_execute takes INSERT/UPDATE/DELETE "
            "with WHERE and CREATE TABLE/INDEX/VIEW",
            "statement",
        )

    if isinstance(stmt, ast.InsertStmt):
        scope = guard.with_clause(stmt.withClause, empty)
        guard.route(stmt.relation, scope, target=True)
        if stmt.override != enums.OverridingKind.OVERRIDING_NOT_SET:
            raise _refuse("OVERRIDING ... VALUE writes the id column: remove it", "reserved_column")
        if stmt.selectStmt is not None and not stmt.cols:
            raise _refuse(
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


def _create_table(stmt: ast.CreateStmt, guard: _Guard) -> str:
    empty: frozenset[str] = frozenset()
    if stmt.inhRelations or stmt.partspec or stmt.partbound or stmt.ofTypename:
        raise _refuse("INHERITS / PARTITION / OF type are not supported: list the columns", "statement")
    if stmt.options or stmt.tablespacename or stmt.accessMethod:
        raise _refuse("WITH (...) / TABLESPACE / USING are not supported on CREATE TABLE", "statement")
    if stmt.oncommit != enums.OnCommitAction.ONCOMMIT_NOOP:
        raise _refuse("ON COMMIT is for temporary tables, which are not supported", "statement")
    name = guard.route(stmt.relation, empty, target=True)
    _check_identifier(name, "table name")
    for element in stmt.tableElts or ():
        if isinstance(element, ast.ColumnDef):
            column = element.colname or ""
            if column.lower() in _RESERVED_COLUMNS:
                raise _refuse(
                    f"column {column!r} is created by the platform on every table: leave it out", "reserved_column"
                )
            _check_identifier(column, "column name")
            if element.typeName is not None and guard.base_type(element.typeName) == "json":
                raise _refuse("json columns are not used: keep JSON in a text column", "jsonb")
        elif not isinstance(element, ast.Constraint):
            raise _refuse(f"{type(element).__name__} is not supported in CREATE TABLE: list the columns", "node")
    guard.children(stmt, empty, skip=("relation",))
    return name


def _create_index(stmt: ast.IndexStmt, guard: _Guard) -> str:
    empty: frozenset[str] = frozenset()
    if stmt.concurrent:
        raise _refuse(
            "CREATE INDEX CONCURRENTLY cannot run inside the channel's transaction: drop CONCURRENTLY", "statement"
        )
    if stmt.options or stmt.tableSpace or stmt.excludeOpNames or stmt.primary or stmt.isconstraint:
        raise _refuse("WITH (...) / TABLESPACE are not supported on CREATE INDEX", "statement")
    if stmt.accessMethod not in _INDEX_METHODS:
        raise _refuse(f"index method {stmt.accessMethod!r} is not supported: use btree (the default)", "statement")
    if stmt.idxname is not None:
        _check_identifier(stmt.idxname, "index name")
        guard._table_name(stmt.idxname)  # an index shares the namespace of tables: no pg_* or _dt_* name
    table = guard.route(stmt.relation, empty, target=True)
    guard.children(stmt, empty, skip=("relation",))
    return table


def _create_view(stmt: ast.ViewStmt, guard: _Guard) -> str:
    empty: frozenset[str] = frozenset()
    if stmt.options:
        raise _refuse("WITH (...) options are not supported on CREATE VIEW", "statement")
    name = guard.route(stmt.view, empty, target=True)
    _check_identifier(name, "view name")
    for alias in _names(stmt.aliases):
        _check_identifier(alias, "view column name")
    query = stmt.query
    if not isinstance(query, ast.SelectStmt):  # pragma: no cover - the grammar allows nothing else
        raise _refuse("a view must be a SELECT", "statement")
    first = query
    while first.larg is not None:
        first = first.larg
    for target in first.targetList or ():
        if isinstance(target, ast.ResTarget) and target.name:
            _check_identifier(target.name, "view column name")
    guard.children(stmt, empty, skip=("view",))
    return name


def _delete_preview(stmt: ast.DeleteStmt) -> ast.SelectStmt:
    """``[WITH …] SELECT <target>.* FROM <target> [, <USING items>] WHERE <same condition>`` of a routed DELETE.

    Built from the checked tree (never from text), so it reads exactly the rows the DELETE matches; a row joined
    to several USING rows comes back more than once (the caller de-duplicates by id).
    """
    relation = stmt.relation
    if relation is None:  # pragma: no cover - the grammar always gives DELETE a table
        raise _refuse("DELETE names no table", "statement")
    target = relation.alias.aliasname if relation.alias is not None else relation.relname
    return ast.SelectStmt(
        withClause=stmt.withClause,
        targetList=(ast.ResTarget(val=ast.ColumnRef(fields=(ast.String(sval=target), ast.A_Star()))),),
        fromClause=(relation, *(stmt.usingClause or ())),
        whereClause=stmt.whereClause,
        limitOption=enums.LimitOption.LIMIT_OPTION_DEFAULT,
        op=enums.SetOperation.SETOP_NONE,
    )


def check_sql(sql: str, *, schema: str, mode: str, forbidden_tables: frozenset[str] = frozenset()) -> CheckedSql:
    """Check one statement for the SQL channel and route its tables to ``schema``; raise SqlRefused if refused.

    ``mode`` is "query" (sql_query: SELECT only) or "execute" (sql_execute: INSERT/UPDATE/DELETE with WHERE,
    CREATE TABLE/INDEX/VIEW; a plain SELECT is refused with a pointer to sql_query). ``forbidden_tables`` are
    table (or view) names the caller may not touch on this channel at all (own-scoped tables, §7.2).
    """
    if mode not in ("query", "execute"):
        raise ValueError(f"mode must be 'query' or 'execute', not {mode!r}")
    if not _SCHEMA_RE.fullmatch(schema):
        raise ValueError(f"schema must look like org_data_<lowercase letters and digits>, not {schema!r}")
    if not isinstance(sql, str) or not sql.strip():
        raise _refuse("the SQL is empty: send one statement", "parse_error")
    if len(sql) > _MAX_SQL_CHARS:
        raise _refuse(
            f"the statement is longer than {_MAX_SQL_CHARS} characters: import bulk data with insert_from_file",
            "too_complex",
        )
    try:
        statements = parse_sql(sql)
        if len(statements) != 1:
            raise _refuse(
                "send exactly one statement (no ';' between statements)"
                if statements
                else "the SQL holds no statement (only comments?): send one statement",
                "multiple_statements" if statements else "parse_error",
            )
        _check_identifier_lengths(sql)
        stmt = statements[0].stmt
        if stmt is None:  # pragma: no cover
            raise _refuse("the SQL holds no statement", "parse_error")
        guard = _Guard(schema, frozenset(forbidden_tables), _function_ranges(stmt, {}))
        kind, created = _check_statement(stmt, guard, mode)
        rewritten = RawStream()(stmt)
        preview = RawStream()(_delete_preview(stmt)) if isinstance(stmt, ast.DeleteStmt) else None
        written = stmt.relation if isinstance(stmt, ast.InsertStmt | ast.UpdateStmt | ast.DeleteStmt) else None
        target = written.relname if written is not None else None
        # What runs must be what was checked: the deparsed text parses back to the same (routed) tree.
        again = parse_sql(rewritten)
        if len(again) != 1 or again[0].stmt != stmt:
            raise _refuse("the statement could not be rewritten faithfully: simplify it", "rewrite")
    except ParseError as exc:
        raise _refuse(f"PostgreSQL cannot parse this statement: {exc}", "parse_error") from None
    except RecursionError:
        raise _refuse("the statement is nested too deeply: simplify it", "too_complex") from None
    return CheckedSql(
        kind=kind,
        sql=rewritten,
        tables=frozenset(guard.tables),
        created=created,
        target=target,
        preview=preview,
    )
