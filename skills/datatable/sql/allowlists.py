"""The allow-lists of the SQL channel's guard (spec §7.6): statement types, node types, functions, types and
constraints. Data only; walker.py, guard.py and ddl.py read it. Anything not listed here is refused.
"""

from __future__ import annotations

from pglast import ast, enums

from ..fields.types import SYSTEM_COLUMNS

__all__ = [
    "ALLOWED_CONSTRAINTS",
    "ALLOWED_FUNCTIONS",
    "ALLOWED_TYPES",
    "CONSTR_TYPE",
    "EXECUTE_STATEMENTS",
    "INDEX_METHODS",
    "MAX_COMMENT_OPENINGS",
    "MAX_SQL_CHARS",
    "MAX_SQL_TOKENS",
    "PG_CATALOG_SYNTAX_FUNCTIONS",
    "PG_SYSTEM_COLUMNS",
    "PLAIN_NODES",
    "QUERY_ONLY_HINT",
    "RESERVED_COLUMNS",
    "ROW_FUNCTIONS",
    "SERIAL_TYPES",
    "SQL_VALUE_FUNCTIONS",
    "STATEMENT_HINTS",
    "TABLESAMPLE_METHODS",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: The platform's system columns: never defined or written on the channel.
RESERVED_COLUMNS = SYSTEM_COLUMNS


PG_SYSTEM_COLUMNS = frozenset({"ctid", "xmin", "xmax", "cmin", "cmax", "tableoid"})


#: Built-in functions PostgreSQL 18 would call through field notation on a whole row (``t.to_json`` is
#: ``to_json(t)``), minus the allowed ones: such a name after a dot is refused as a function call.
ROW_FUNCTIONS = _words(
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


MAX_SQL_CHARS = 100_000
#: Past this many tokens a statement is refused before it is parsed: the parser (libpg_query through pglast, in
#: the platform's own process) crashed it with a segmentation fault from about 24,000 ``+`` terms (48,000 tokens).
#: Every 20,000-token shape tried (deep parentheses, unary chains, nested calls, subqueries, CASE) parses cleanly
#: or is refused cleanly.
MAX_SQL_TOKENS = 20_000
#: PostgreSQL's lexer takes time quadratic in the nesting depth of ``/* */`` comments (4,000 levels: 0.3 s per
#: pass, 12,000: 3 s), before any timeout applies; more ``/*`` than this is refused unread.
MAX_COMMENT_OPENINGS = 256


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
#: their own node types, see PLAIN_NODES and SQL_VALUE_FUNCTIONS.) generate_series is deliberately absent.
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


SERIAL_TYPES = frozenset({"serial", "serial2", "serial4", "serial8", "smallserial", "bigserial"})


INDEX_METHODS = frozenset({"btree", "hash", "gin", "gist", "brin"})


TABLESAMPLE_METHODS = frozenset({"bernoulli", "system"})


SQL_VALUE_FUNCTIONS = frozenset(
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


CONSTR_TYPE = enums.ConstrType


ALLOWED_CONSTRAINTS = frozenset(
    {
        CONSTR_TYPE.CONSTR_NULL,
        CONSTR_TYPE.CONSTR_NOTNULL,
        CONSTR_TYPE.CONSTR_DEFAULT,
        CONSTR_TYPE.CONSTR_CHECK,
        CONSTR_TYPE.CONSTR_UNIQUE,
    }
)


#: Node types with nothing to check themselves: their children are walked. Every node type that is neither here
#: nor handled by a method of TreeGuard is refused, so syntax added by a later PostgreSQL is refused by default.
PLAIN_NODES: frozenset[type[ast.Node]] = frozenset(
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


STATEMENT_HINTS: dict[type[ast.Node], str] = {
    ast.CreateTableAsStmt: "CREATE TABLE ... AS / CREATE MATERIALIZED VIEW is not supported: create the table "
    "(create_table, or CREATE TABLE with explicit columns), then INSERT ... SELECT",
    ast.DropStmt: "only DROP VIEW is supported on the SQL channel: delete tables with the delete_table action",
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


EXECUTE_STATEMENTS = (ast.InsertStmt, ast.UpdateStmt, ast.DeleteStmt, ast.CreateStmt, ast.IndexStmt, ast.ViewStmt)


QUERY_ONLY_HINT = "sql_query runs only SELECT statements; send INSERT/UPDATE/DELETE/CREATE through sql_execute"
