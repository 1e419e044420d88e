"""``skillyard token``: make, list and revoke the access tokens of MCP (and HTTP API) callers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..cli.output import in_yard, json_object, print_json, print_table
from .store import TokenStore

if TYPE_CHECKING:
    from ..yard import SkillYard


@click.group(name="token")
def token_group() -> None:
    """Access tokens: each names a caller's organisation, role and identity (docs/mcp.md#tokens).

    Example: skillyard token add --name crm-bot --role sales --org acme
    """


@token_group.command(name="add")
@click.option("--name", required=True, help="The token's name (for list and revoke).")
@click.option("--role", "role_id", required=True, help="The role_id its runs use (which configs they see).")
@click.option("--org", "org_id", required=True, help="The org_id its runs use.")
@click.option("--identity", default=None, help='Further fields as JSON or @file: {"actor_emp_no": "E1", …}.')
@click.option("--admin", is_flag=True, help="is_admin: admin of its own organisation only.")
def token_add(name: str, role_id: str, org_id: str, identity: str | None, admin: bool) -> None:
    """Make a token and print it once (only its hash is stored)."""
    fields = json_object(identity, "identity") or {}

    async def go(yard: SkillYard) -> str:
        return await TokenStore(yard.database).add(name, role_id, org_id, fields, admin)

    token = in_yard((), go)
    click.echo(token)
    click.echo(f"token {name!r} made; it is shown only now: keep it where its caller reads it", err=True)


@token_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def token_list(as_json: bool) -> None:
    """List the tokens (names and identities; never the tokens)."""

    async def go(yard: SkillYard) -> list[dict[str, Any]]:
        return await TokenStore(yard.database).list()

    rows = in_yard((), go)
    if as_json:
        print_json(rows)
        return
    print_table(
        [
            (r["name"], r["org_id"], r["role_id"], "yes" if r["is_admin"] else "no", r["last_used_at"] or "never")
            for r in rows
        ],
        ("NAME", "ORG", "ROLE", "ADMIN", "LAST USED"),
    )


@token_group.command(name="revoke")
@click.argument("name")
def token_revoke(name: str) -> None:
    """Revoke a token: callers presenting it are refused from now on."""

    async def go(yard: SkillYard) -> bool:
        return await TokenStore(yard.database).revoke(name)

    if not in_yard((), go):
        raise click.UsageError(f"no token named {name!r}; 'skillyard token list' shows them")
    click.echo(f"revoked {name}")
