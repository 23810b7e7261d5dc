"""`erase`: erases a whole session's content, or some entries', for good.

The content's keys are deleted, so the content is gone from the store, its
snapshots and every server's cache; the fact (who, why, when, which) stays
in the session's events and audit.
"""

from __future__ import annotations

import click
from sessionstore_client import Erasure

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.undo import user_name


def _not_blank(reason: str) -> str:
    """The erasure's reason: the audit's record of why content was destroyed, so
    never blank (the server refuses one too; this says which flag to fix)."""
    if not reason.strip():
        raise click.BadParameter("is blank: say why the content is erased, e.g. 'user request'")
    return reason


@click.command("erase")
@click.argument("session")
@click.option(
    "--entry",
    "entry_ids",
    multiple=True,
    help="An entry to erase (repeat for more); without it, the whole session.",
)
@click.option(
    "--reason",
    required=True,
    callback=lambda ctx, param, value: _not_blank(value),
    help="Why, for the record (e.g. 'user request').",
)
@click.option("--by", "erased_by", help="Who asks, for the record (default: your user name).")
@pass_client
def erase(
    client: Client, session: str, entry_ids: tuple[str, ...], reason: str, erased_by: str | None
) -> None:
    """Erase a session's content, or some entries', so it cannot be recovered.

    A session erased whole takes no more writes. Summaries built from erased
    entries are erased too (tainted): `compact` regenerates them.

    \b
      erase S --reason "user request"
      erase S --entry e1 --entry e2 --reason "pasted a password"
    """
    by = erased_by if erased_by is not None else user_name()
    if entry_ids:
        response = client.api.erase_entries(
            session, entry_ids=entry_ids, reason=reason, erased_by=by
        )
    else:
        response = client.api.erase_session(session, reason=reason, erased_by=by)
    if client.as_json:
        return output.print_json(response)
    erasure = response.erasure or Erasure()
    what = (
        "the whole session"
        if erasure.whole_session
        else output.count(len(erasure.entry_ids), "entry")
    )
    click.echo(f"erased {what} (version {response.version})")
    if response.forks_erased:
        click.echo(f"  and in the forks that copied it: {', '.join(response.forks_erased)}")
    if erasure.tainted_compaction_versions:
        versions = ", ".join(str(v) for v in erasure.tainted_compaction_versions)
        click.echo(f"  summaries erased with them (compact to regenerate): versions {versions}")
