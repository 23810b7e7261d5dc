"""Context commands: `compact` records a summary, `prune` trims or clears tool results.

Both change only what the views show; every entry stays in the store whole.
"""

from __future__ import annotations

import click

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import expected_version_option, read_text


@click.command()
@click.argument("session")
@click.option("--summary", required=True, help='The summary; "-" reads standard input.')
@click.option(
    "--first-kept",
    required=True,
    metavar="ENTRY_ID",
    help="The first entry to keep (the short id `log` prints will do).",
)
@click.option("--reason", default="", help="Why, for the record [default: set by the server].")
@expected_version_option
@pass_client
def compact(
    client: Client,
    session: str,
    summary: str,
    first_kept: str,
    reason: str,
    expected_version: int | None,
) -> None:
    """Record a compaction.

    The summary replaces, in the durable log, the entries before --first-kept.
    """
    request = pb.RecordCompactionRequest(
        session_id=session,
        summary=read_text(summary) or "",
        first_kept_entry_id=client.resolve_entry_id(session, first_kept),
        reason=reason,
        expected_version=expected_version,
    )
    response = client.call(client.stub.RecordCompaction, request)
    if client.as_json:
        return output.print_json(response)
    output.echo_compaction(response.compaction)


@click.command()
@click.argument("session")
@click.argument("entry_ids", nargs=-1, required=True, metavar="ENTRY_ID...")
@click.option("--clear", is_flag=True, help="Replace the whole result with a placeholder.")
@click.option("--head", type=click.IntRange(min=0), help="Characters kept from the start.")
@click.option("--tail", type=click.IntRange(min=0), help="Characters kept from the end.")
@click.option("--reason", default="", help="Why, for the record.")
@expected_version_option
@pass_client
def prune(
    client: Client,
    session: str,
    entry_ids: tuple[str, ...],
    clear: bool,
    head: int | None,
    tail: int | None,
    reason: str,
    expected_version: int | None,
) -> None:
    """Trim or clear tool results.

    Only the prompt view changes: the log and `entry` keep the results whole.
    Without --clear each result is trimmed to its first --head and last --tail
    characters; either left out comes from the session's pruning policy
    (see `settings --trim-head/--trim-tail`), as the server decides. ENTRY_IDs may be the short ids
    `log` prints.
    """
    if clear and (head is not None or tail is not None):
        raise click.UsageError("--clear drops the whole result; --head/--tail are for trimming")
    resolved = client.resolve_entry_ids(session, entry_ids)
    if clear:
        pruned = [pb.PrunedEntry(entry_id=e, action=pb.PRUNE_ACTION_HARD_CLEAR) for e in resolved]
    else:
        pruned = [
            pb.PrunedEntry(
                entry_id=e, action=pb.PRUNE_ACTION_SOFT_TRIM, head_chars=head, tail_chars=tail
            )
            for e in resolved
        ]
    request = pb.RecordPruneRequest(
        session_id=session, entries=pruned, reason=reason, expected_version=expected_version
    )
    response = client.call(client.stub.RecordPrune, request)
    if client.as_json:
        return output.print_json(response)
    click.echo(f"pruned {output.count(len(pruned), 'entry')} at version {response.version}")
    for decision in response.entries:
        click.echo(f"  {decision.entry_id}: {output.prune_action(decision)}")
