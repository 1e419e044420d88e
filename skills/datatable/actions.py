"""The datatable actions (spec §7.3): each takes a :class:`Call` and returns the body of its success envelope.

Each action lives in the module of its group — reading (actions_read.py), writing (actions_write.py), deleting
(actions_delete.py), the SQL channel (actions_sql.py) and structure (actions_structure.py) — on the shared plumbing
of actions_call.py (:class:`~.actions_call.Call`, the table scope); this module holds the one table from action name
to function that the handler (handler.py) dispatches on. The action modules only wire the pieces together —
permissions (permissions_*.py), row actions (rows_read.py, rows_write.py, rows_upsert.py), structure
(store_schema.py, store_tables.py, store_fields.py), the file import (importer.py), the SQL channel (sql_channel.py)
and delete protection (protection.py).
The handler owns the transaction: it commits after an action returns and rolls back when it raises.

Return shapes (documented in references/actions.md): an action whose §7.3 result is an object has that object's
keys at the top level of the envelope (``inserted``, ``list``/``pageInfo``, ``rows``/``row_count``/``sql``…);
an action whose result is a list, a record or ``true`` carries it in ``data`` (§6.1's ``{"success": true, "data":
…}``), next to a few convenience keys (``tables``/``columns`` counts, the record's ``id``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from . import actions_delete, actions_read, actions_sql, actions_structure, actions_write
from .action_aliases import ACTIONS
from .actions_call import Call

__all__ = ["ACTION_FUNCTIONS"]

ACTION_FUNCTIONS: dict[str, Callable[[Call], Awaitable[dict[str, Any]]]] = {
    "list_tables": actions_read.list_tables,
    "list_columns": actions_read.list_columns,
    "query": actions_read.query,
    "aggregate": actions_read.aggregate,
    "insert": actions_write.insert,
    "insert_batch": actions_write.insert_batch,
    "insert_from_file": actions_write.insert_from_file,
    "upsert": actions_write.upsert,
    "update": actions_write.update,
    "update_by": actions_write.update_by,
    "delete": actions_delete.delete,
    "delete_batch": actions_delete.delete_batch,
    "delete_by": actions_delete.delete_by,
    "sql_query": actions_sql.sql_query,
    "sql_execute": actions_sql.sql_execute,
    "create_table": actions_structure.create_table,
    "add_field": actions_structure.add_field,
    "update_field": actions_structure.update_field,
    "delete_field": actions_structure.delete_field,
    "delete_table": actions_structure.delete_table,
}
assert set(ACTION_FUNCTIONS) == set(ACTIONS), "one function per canonical action"
