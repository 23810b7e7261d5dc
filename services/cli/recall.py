"""`recall`: search a session's whole raw history (what compaction hid included)."""

from __future__ import annotations

from datetime import datetime

import click

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import Moment


def _label(value: str) -> tuple[str, str]:
    key, separator, wanted = value.partition("=")
    if not separator or not key:
        raise click.BadParameter(f"{value!r}: write a label as KEY=VALUE")
    return key, wanted


@click.command("recall")
@click.argument("session")
@click.argument("query")
@click.option("--limit", type=click.IntRange(0, 100), default=10, show_default=True)
@click.option("--tenant-wide", is_flag=True, help="Search every session of the tenant.")
@click.option("--label", "labels", multiple=True, help="Only sessions with KEY=VALUE (repeat).")
@click.option("--since", type=Moment(), help="Only entries stored at or after this time.")
@click.option("--until", type=Moment(), help="Only entries stored before this time.")
@pass_client
def recall(
    client: Client,
    session: str,
    query: str,
    limit: int,
    tenant_wide: bool,
    labels: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
) -> None:
    """Find QUERY in SESSION's whole history, compacted-away turns included: by words,
    and by meaning when the session sets memory.embedding_model. Each hit names the
    entry (show it with `sessionstore entry SESSION ENTRY_ID`), the version that
    appended it and the compaction that hid it from the prompt."""
    found = client.api.recall(
        session,
        query=query,
        limit=limit,
        tenant_wide=tenant_wide,
        labels=dict(_label(value) for value in labels),
        since=since,
        until=until,
    )
    if client.as_json:
        output.print_json(output.to_dict(found))
        return
    if not found.hits:
        click.echo("no hits")
        return
    rows = [["SCORE", "SESSION", "ENTRY", "VERSION", "HIDDEN BY", "ROLE", "SNIPPET"]]
    for hit in found.hits:
        hidden = f"compaction {hit.hidden_by_compaction}" if hit.hidden_by_compaction else "-"
        rows.append(
            [
                f"{hit.score:.4f}",
                hit.session_id,
                hit.entry_id,
                str(hit.version),
                hidden,
                hit.role,
                hit.snippet.replace("\n", " "),
            ]
        )
    for line in output.table(rows, right=(0, 3)):
        click.echo(output.clip(line, output.width()))
    if found.embedding_model:
        click.echo(f"(by words and by meaning, with {found.embedding_model})")
