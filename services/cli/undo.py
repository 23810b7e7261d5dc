"""`undo-compaction`: takes back a compaction, so the entries it covered are in the
durable log again. The undo is an event of its own (who, why, which); views as
of earlier versions still show the compacted log, and compacting again
re-applies a cut. `--undo-version` takes an undo back: its compactions are in
force again, exactly as recorded.
"""

from __future__ import annotations

import getpass

import click
from sessionstore_client import CompactionUndone

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import expected_version_option


@click.command("undo-compaction")
@click.argument("session")
@click.option(
    "--version",
    "compaction_version",
    type=click.IntRange(min=1),
    help="The version that recorded the compaction (default: the latest in force).",
)
@click.option(
    "--undo-version",
    type=click.IntRange(min=1),
    help="Take back the undo recorded at this version instead (redo its compactions).",
)
@click.option("--reason", default="", help="Why, for the record.")
@click.option("--by", "requested_by", help="Who asks, for the record (default: your user name).")
@expected_version_option
@pass_client
def undo_compaction(
    client: Client,
    session: str,
    compaction_version: int | None,
    undo_version: int | None,
    reason: str,
    requested_by: str | None,
    expected_version: int | None,
) -> None:
    """Take back a compaction: its entries are in the log again.

    The cut goes back to where it was before that compaction (compactions
    recorded after it go with it). Run it twice to go back two cuts. An undo
    is undone in turn with --undo-version (the version the undo printed):
    the compactions it took back are in force again, same summaries, same cut.

    \b
      undo-compaction S
      undo-compaction S --version 42 --reason "summary lost the API decisions"
      undo-compaction S --undo-version 43 --reason "the summary was fine"
    """
    if compaction_version and undo_version:
        raise click.UsageError("give --version or --undo-version, not both")
    response = client.api.undo_compaction(
        session,
        compaction_version=compaction_version or 0,
        undo_version=undo_version or 0,
        reason=reason,
        requested_by=requested_by if requested_by is not None else user_name(),
        expected_version=expected_version,
    )
    if client.as_json:
        return output.print_json(response)
    redone = response.redone
    if redone is not None:
        versions = ", ".join(str(v) for v in redone.compaction_versions)
        click.echo(
            f"took back the undo at version {redone.undo_version} (version {response.version})"
        )
        click.echo(
            f"  in force again: the compaction{'s' if len(redone.compaction_versions) > 1 else ''}"
            f" at version {versions}; the log keeps entries from position "
            f"{redone.first_kept_position:,} on"
        )
        click.echo(f"  prompt {redone.prompt_tokens:,} tokens (system prompt aside)")
        return None
    undone = response.undone or CompactionUndone()
    if undone.restored_compaction_version:
        now = (
            f"the compaction at version {undone.restored_compaction_version} is in force "
            f"again; the log keeps entries from position {undone.first_kept_position:,} on"
        )
    else:
        now = "no compaction is in force; the log keeps every entry"
    click.echo(
        f"undid the compaction at version {undone.compaction_version} (version {response.version})"
    )
    click.echo(f"  {now}")
    click.echo(f"  prompt {undone.prompt_tokens:,} tokens (system prompt aside)")


def user_name() -> str:
    """Who runs the command, for the record."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""
