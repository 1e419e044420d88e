"""Default plugin of the datatable skill: the ``skillyard datatable`` commands and a ``doctor`` check.

Registered through the same hooks a third-party plugin uses (``register_commands``, ``doctor_checks``). The
commands wrap :mod:`.admin`; the skill's modules are imported only when a command or check runs, so loading the
plugin costs every ``skillyard`` invocation nothing but this module (and store/names.py, for a help text).

    skillyard datatable grant  --org ORG --table TABLE --role ROLE --ops OPS [--row-scope all|own]
                               [--owner-field FIELD] [--json]
    skillyard datatable grants --org ORG [--json]
    skillyard datatable revoke --org ORG --table TABLE --role ROLE [--json]
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from skillyard import SkillyardError, hookimpl
from skillyard.cli.output import print_json, print_table

if TYPE_CHECKING:
    from skillyard import SkillYard

from .store.names import SCHEMA_PREFIX

T = TypeVar("T")

#: The CLI option for each ``need_param`` the admin API reports, so an error names what to change.
_OPTIONS = {
    "org": "--org",
    "table_id": "--table",
    "role": "--role",
    "ops": "--ops",
    "row_scope": "--row-scope",
    "owner_field": "--owner-field",
    "schema": "--schema",
}


def _run(work: Callable[[SkillYard], Awaitable[T]]) -> T:
    """Open a host, run ``work(yard)`` and turn every input or database problem into a one-line usage error."""
    import asyncpg

    from skillyard import SkillYard

    from .store.schema import StoreError

    async def go() -> T:
        async with SkillYard(include_builtin=False) as yard:
            return await work(yard)

    try:
        return asyncio.run(go())
    except StoreError as exc:
        option = _OPTIONS.get(exc.need_param or "")
        raise click.UsageError(f"{option}: {_line(exc)}" if option else _line(exc)) from None
    except SkillyardError as exc:
        raise click.UsageError(_line(exc)) from None
    except (asyncpg.PostgresError, OSError) as exc:
        raise click.UsageError(f"the database refused: {_line(exc)}") from None


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _ops_text(ops: list[str]) -> str:
    """Expanded ops, shortened back to ``all`` / ``read`` / ``write`` where a whole group is granted."""
    from .permissions.grants import GRANTABLE_ACTIONS, READ_ACTIONS, WRITE_ACTIONS

    rest = set(ops)
    if rest == GRANTABLE_ACTIONS:
        return "all"
    parts = []
    for name, group in (("read", READ_ACTIONS), ("write", WRITE_ACTIONS)):
        if group <= rest:
            parts.append(name)
            rest -= group
    return ", ".join([*parts, *sorted(rest)]) or "(none)"


def _scope_text(grant: dict[str, Any]) -> str:
    return f"own rows (by {grant['owner_field']})" if grant["row_scope"] == "own" else "all rows"


@click.group(name="datatable")
def datatable() -> None:
    """Administer the built-in datatable skill: who may do what on each organisation's tables.

    A table without grants is open to every role; once a table has grants, configure every role that may reach
    it (an unconfigured role still opens it). Docs: docs/cli.md#skillyard-datatable
    """


@datatable.command(name="grant")
@click.option("--org", required=True, help=f"Organisation id (its tables live in its own schema, {SCHEMA_PREFIX}…).")
@click.option("--table", required=True, help="Table title (or its id).")
@click.option("--role", required=True, help="Role the grant is for.")
@click.option(
    "--ops",
    required=True,
    help="Comma-separated: read, write, all, or row actions (query, aggregate, list_columns, insert, update, …).",
)
@click.option(
    "--row-scope",
    type=click.Choice(["all", "own"]),
    default="all",
    show_default=True,
    help="own: only the rows whose owner field holds the actor's employee number.",
)
@click.option("--owner-field", help="With --row-scope own: the field holding the owner's employee number.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored grant as JSON.")
def grant_cmd(
    org: str, table: str, role: str, ops: str, row_scope: str, owner_field: str | None, as_json: bool
) -> None:
    """Set the grant of a role on a table (replaces an earlier one)."""
    from . import admin

    stored = _run(
        lambda yard: admin.grant(
            yard, org=org, table=table, role=role, ops=ops, row_scope=row_scope, owner_field=owner_field
        )
    )
    if as_json:
        print_json(stored)
        return
    click.echo(f"granted {stored['role']} on {stored['table']}: {_ops_text(stored['ops'])}; {_scope_text(stored)}")


@datatable.command(name="grants")
@click.option("--org", required=True, help="Organisation id.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per grant.")
def grants_cmd(org: str, as_json: bool) -> None:
    """List the grants of an organisation, by table and role."""
    from . import admin

    items = _run(lambda yard: admin.list_grants(yard, org=org))
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo(
            f"organisation {org!r} has no grants: every table is open to every role "
            "(add one with `skillyard datatable grant`)"
        )
        return
    print_table(
        [[g["table"], g["role"], _ops_text(g["ops"]), g["row_scope"], g["owner_field"] or "-"] for g in items],
        ["TABLE", "ROLE", "OPS", "ROW SCOPE", "OWNER FIELD"],
    )


@datatable.command(name="revoke")
@click.option("--org", required=True, help="Organisation id.")
@click.option("--table", required=True, help="Table title (or its id).")
@click.option("--role", required=True, help="Role whose grant is removed.")
@click.option("--json", "as_json", is_flag=True, help='Print {"revoked": true|false, ...} as JSON.')
def revoke_cmd(org: str, table: str, role: str, as_json: bool) -> None:
    """Remove the grant of a role on a table (the role is then unconfigured there, which opens the table to it)."""
    from . import admin

    removed = _run(lambda yard: admin.revoke(yard, org=org, table=table, role=role))
    if as_json:
        print_json({"revoked": removed, "org": org, "table": table, "role": role})
    elif removed:
        click.echo(f"revoked the grant of {role} on {table}")
    else:
        click.echo(f"{role} had no grant on {table}; nothing changed")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(datatable)  # the same group object every time, so calling the hook twice is harmless


@datatable.command(name="assign-schema")
@click.option("--org", required=True, help="The organisation id the schema belongs to (as its conversations carry it).")
@click.option("--schema", required=True, help=f"The ownerless schema ({SCHEMA_PREFIX}…) that skillyard doctor lists.")
@click.option("--json", "as_json", is_flag=True, help="Print the assignment as JSON.")
def assign_schema_cmd(org: str, schema: str, as_json: bool) -> None:
    """Give an ownerless schema (made before schemas had owners) to the organisation it belongs to."""
    from . import admin

    done = _run(lambda yard: admin.assign_schema(yard, org=org, schema=schema))
    if as_json:
        print_json(done)
    else:
        click.echo(f"{done['schema']} now belongs to the organisation {done['org']!r}")


@hookimpl
def doctor_checks(yard: Any) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
    async def checks() -> list[dict[str, Any]]:
        from .admin import sql_role_check, unowned_schema_check
        from .store.schema import raw_connection

        try:
            session = await yard.database.session()
        except Exception as exc:  # the core database check reports the cause
            return [
                {
                    "name": name,
                    "status": "warn",
                    "detail": f"not checked: the database cannot be opened ({_line(exc)})",
                    "fix": "fix the database check first",
                }
                for name in ("datatable.sql_roles", "datatable.schema_owners")
            ]
        try:
            conn = await raw_connection(session)
            return [await sql_role_check(conn), await unowned_schema_check(conn)]
        finally:
            await session.rollback()
            await session.close()

    return checks
