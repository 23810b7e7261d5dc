"""`sessionstore token new`: a fresh bearer token and the tokens file entry for it.

Runs locally; the server never sees the token itself, only its SHA-256 in the
tokens file (SESSIONSTORE_TOKENS_FILE), read at start.
"""

from __future__ import annotations

import click

from services.app.authentication import (
    check_name,
    new_token,
    parse_role,
    token_entry_toml,
)
from services.app.tenancy import Role


def _name(what: str) -> object:
    def convert(ctx: click.Context, param: click.Parameter, value: str) -> str:
        try:
            return check_name(value, what)
        except ValueError as error:
            raise click.BadParameter(str(error)) from None

    return convert


@click.group("token")
def token_group() -> None:
    """Bearer tokens for a server's tokens file."""


@token_group.command("new")
@click.option("--name", required=True, callback=_name("name"), help="Who or what uses it, e.g. ci.")
@click.option(
    "--tenant", required=True, callback=_name("tenant"), help="Whose sessions it reaches."
)
@click.option(
    "--role",
    type=click.Choice([r.value for r in Role]),
    default=Role.TENANT.value,
    show_default=True,
    help="tenant: read and write its tenant's sessions; auditor: read them only; "
    "admin: read and write every tenant's.",
)
def new(name: str, tenant: str, role: str) -> None:
    """Prints a new token (give it to the client, once) and the entry that goes
    in the server's tokens file (it holds the token's hash only)."""
    token = new_token()
    click.echo(f"token (shown once; the server keeps only its hash):\n{token}\n")
    click.echo("add to the tokens file (SESSIONSTORE_TOKENS_FILE), then restart the server:")
    click.echo(token_entry_toml(name, tenant, parse_role(role), token), nl=False)
