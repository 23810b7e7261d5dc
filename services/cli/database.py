"""`migrate` and `rebuild`: upkeep of the read models, straight on the database.

These connect to SESSIONSTORE_DATABASE_URL (or --database-url) themselves,
not to a server: a migration runs before any server may start, and a
rebuild is an operator's repair.
"""

from __future__ import annotations

import click

from services.config import DEFAULT_DATABASE_URL

DATABASE_URL = click.option(
    "--database-url",
    envvar="SESSIONSTORE_DATABASE_URL",
    default=DEFAULT_DATABASE_URL,
    show_default=True,
    help="The store's database (default: $SESSIONSTORE_DATABASE_URL).",
)


@click.command()
@DATABASE_URL
def migrate(database_url: str) -> None:
    """Apply the read models' schema migrations (safe to run from several replicas)."""
    from services.readmodels.admin import migrate_database

    migrate_database(database_url)
    click.echo("read models migrated")


@click.command()
@click.argument("name", type=click.Choice(["catalog", "compactions", "prunes"]))
@DATABASE_URL
def rebuild(name: str, database_url: str) -> None:
    """Drop read model NAME's rows and rebuild it from the first event."""
    from services.readmodels.admin import rebuild_read_model

    applied, position = rebuild_read_model(database_url, name)
    click.echo(f"{name} rebuilt: {applied:,} events applied, at position {position}")
