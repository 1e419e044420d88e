"""The action table (actions/table.py): the canonical actions of the spec, in its order."""

from __future__ import annotations

from skillyard.builtin_skills.datatable.actions.table import ACTIONS


def test_canonical_actions_are_exactly_the_spec_list() -> None:
    spec = (
        "list_tables list_columns query aggregate insert insert_batch insert_from_file upsert update update_by "
        "delete delete_batch delete_by sql_query sql_execute create_table add_field update_field delete_field "
        "delete_table"
    )
    assert isinstance(ACTIONS, tuple)
    assert list(ACTIONS) == spec.split()
