"""The SQL channel's per-organisation role (sql/role.py): its name."""

from __future__ import annotations

from skillyard.builtin_skills.datatable.sql import role as sql_role


def test_role_name_fits_postgres() -> None:
    assert sql_role.role_name("org_data_acme") == "org_data_acme_sql"
    long = "org_data_" + "a" * 54
    name = sql_role.role_name(long)
    assert len(name.encode()) <= 63 and name.endswith("_sql") and name != sql_role.role_name(long[:-1] + "b")
