"""The datatable actions (spec §7.3), in one table: each action's name, function, kind and the rules that follow
from it. Every other list of actions — the supported actions of dispatch, the grantable ones, the structure and SQL
actions of the access decision, the ones that preview without 确认, the handler's fast path — is derived from it.

Each function takes a :class:`~.call.Call` and returns the body of its success envelope. It lives in the module of
its group — reading (read.py), writing (write.py), deleting (delete.py), the SQL channel (sql.py) and structure
(structure.py) — and is named like its action; the table names the module and imports it only when the function is
first asked for, because the modules below the actions (dispatch, permissions) read the table too. The action
modules only wire the pieces together: permissions/, rows/, structure/, importer/, sql/ and delete protection
(protection.py). The handler owns the transaction: it commits after an action returns and rolls back when it raises.

Return shapes (documented in references/actions.md): an action whose §7.3 result is an object has that object's
keys at the top level of the envelope (``inserted``, ``list``/``pageInfo``, ``rows``/``row_count``/``sql``…);
an action whose result is a list, a record or ``true`` carries it in ``data`` (§6.1's ``{"success": true, "data":
…}``), next to a few convenience keys (``tables``/``columns`` counts, the record's ``id``).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .call import Call

__all__ = ["ACTIONS", "ACTION_TABLE", "Action", "ActionFunction", "Kind", "action_names"]

#: read and write act on rows, structure changes tables and fields (owner/admin), sql is the SQL channel (allow_sql).
Kind = Literal["read", "write", "structure", "sql"]
ActionFunction = Callable[["Call"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Action:
    """One action and what the skill decides by it."""

    name: str
    #: The module of this package holding the action's function, which is named like the action.
    module: str
    kind: Kind
    #: Acts on one table's rows: grants can name it (§7.2) and it runs in that table's row scope.
    table_scoped: bool = False
    #: Only previews without 确认=true (§3.5); update_field does when it changes a type, which dispatch decides.
    destructive: bool = False
    #: Its first statement is the table scope's, which may begin the session's transaction (the handler's fast path).
    scope_first: bool = False

    @property
    def function(self) -> ActionFunction:
        """The action's function (its module is imported on first use)."""
        function: ActionFunction = getattr(importlib.import_module(f".{self.module}", __package__), self.name)
        return function


ACTION_TABLE: tuple[Action, ...] = (
    Action("list_tables", "read", "read"),
    Action("list_columns", "read", "read", table_scoped=True, scope_first=True),
    Action("query", "read", "read", table_scoped=True, scope_first=True),
    Action("aggregate", "read", "read", table_scoped=True, scope_first=True),
    Action("insert", "write", "write", table_scoped=True, scope_first=True),
    Action("insert_batch", "write", "write", table_scoped=True, scope_first=True),
    Action("insert_from_file", "write", "write", table_scoped=True, scope_first=True),
    Action("upsert", "write", "write", table_scoped=True, scope_first=True),
    Action("update", "write", "write", table_scoped=True, scope_first=True),
    Action("update_by", "write", "write", table_scoped=True, scope_first=True),
    Action("delete", "delete", "write", table_scoped=True),
    Action("delete_batch", "delete", "write", table_scoped=True),
    Action("delete_by", "delete", "write", table_scoped=True),
    Action("sql_query", "sql", "sql"),
    Action("sql_execute", "sql", "sql"),
    Action("create_table", "structure", "structure"),
    Action("add_field", "structure", "structure"),
    Action("update_field", "structure", "structure"),
    Action("delete_field", "structure", "structure", destructive=True),
    Action("delete_table", "structure", "structure", destructive=True),
)

#: The canonical action names, in the order of the spec (§7.3): what every error about the action lists.
ACTIONS: tuple[str, ...] = tuple(action.name for action in ACTION_TABLE)


def action_names(
    *,
    kind: Kind | None = None,
    table_scoped: bool | None = None,
    destructive: bool | None = None,
    scope_first: bool | None = None,
) -> frozenset[str]:
    """The names of the actions with every given attribute (an attribute left None is not compared)."""
    wanted = {"kind": kind, "table_scoped": table_scoped, "destructive": destructive, "scope_first": scope_first}
    return frozenset(
        action.name
        for action in ACTION_TABLE
        if all(value is None or getattr(action, key) == value for key, value in wanted.items())
    )
