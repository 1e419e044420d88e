"""A DELETE on the SQL channel deletes only what its preview read (spec §7.7): the preview SELECT built from the
checked tree, the refusal of conditions that change between the preview and the delete, and the delete restricted
to the previewed ids.
"""

from __future__ import annotations

from typing import Any

from pglast import ast, enums, parse_sql
from pglast.stream import RawStream
from pglast.visitors import Visitor

from .refusal import refuse
from .role import quote_ident
from .walker import string_names

__all__ = ["UNSTABLE_IN_DELETE", "check_stable_delete", "delete_preview", "restrict_delete"]


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


def check_stable_delete(stmt: ast.DeleteStmt) -> None:
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


def _target(relation: ast.RangeVar) -> str:
    """The name a DELETE's target goes by in its conditions: its alias, else the table's name."""
    name = relation.alias.aliasname if relation.alias is not None else relation.relname
    return name or ""


def delete_preview(stmt: ast.DeleteStmt) -> ast.SelectStmt:
    """``[WITH …] SELECT <target>.* FROM <target> [, <USING items>] WHERE <same condition>`` of a routed DELETE.

    Built from the checked tree (never from text), so it reads exactly the rows the DELETE matches; a row joined
    to several USING rows comes back more than once (the caller de-duplicates by id).
    """
    relation = stmt.relation
    if relation is None:  # pragma: no cover - the grammar always gives DELETE a table
        raise refuse("DELETE names no table", "statement")
    return ast.SelectStmt(
        withClause=stmt.withClause,
        targetList=(ast.ResTarget(val=ast.ColumnRef(fields=(ast.String(sval=_target(relation)), ast.A_Star()))),),
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
    condition = parse_sql(f"SELECT WHERE {quote_ident(_target(relation))}.id = ANY ($1::bigint[])")[0].stmt
    assert isinstance(condition, ast.SelectStmt)  # the statement just written
    where = ast.BoolExpr(boolop=enums.BoolExprType.AND_EXPR, args=(condition.whereClause, stmt.whereClause))
    restricted = ast.DeleteStmt(
        relation=relation,
        usingClause=stmt.usingClause,
        whereClause=where,
        returningClause=stmt.returningClause,
        withClause=stmt.withClause,
    )
    return RawStream()(restricted)
