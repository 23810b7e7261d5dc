"""`audit`: compactions and prunes from the server's audit read models, and what the
model saw at a version (`audit view`).

COMMANDS also carries `migrate`, `rebuild` and `readmodels` (services.cli.database), the
read models' own upkeep, so that the CLI registers them all in one line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import click
from sessionstore_client import CompactionRecord, PruneAction

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.database import migrate, readmodels, rebuild
from services.cli.options import Moment

ACTIONS = {"soft_trim": PruneAction.SOFT_TRIM, "hard_clear": PruneAction.HARD_CLEAR}


def _pages(list_page: Callable[[str], Any], field: str) -> Iterator[Any]:
    """Every item of a paged list: ``list_page(page_token)`` answers one page."""
    token = ""
    while True:
        page = list_page(token)
        yield from getattr(page, field)
        token = page.next_page_token
        if not token:
            return


@click.group()
def audit() -> None:
    """What compactions and prunes did, across sessions."""


@audit.command("compactions")
@click.argument("session", required=False, default="")
@click.option("--since", type=Moment(), help="Only those at or after this time (ISO 8601).")
@click.option("--until", type=Moment(), help="Only those before this time (ISO 8601).")
@click.option("--trigger", default="", help="manual, threshold, budget, overflow or client.")
@click.option("--model", default="", help="The summariser's model.")
@click.option(
    "--outcome",
    type=click.Choice(["ok", "failed", "tainted", "undone", "redone"]),
    default=None,
    help="tainted: done, then its summary erased with entries it covered.",
)
@pass_client
def compactions(
    client: Client,
    session: str,
    since: datetime | None,
    until: datetime | None,
    trigger: str,
    model: str,
    outcome: str | None,
) -> None:
    """List compactions (done and failed), undos and redos of SESSION, or of every session."""
    records = list(
        _pages(
            lambda token: client.api.list_compactions(
                session,
                since=since,
                until=until,
                trigger=trigger,
                model=model,
                outcome=outcome or "",
                page_size=500,
                page_token=token,
            ),
            "compactions",
        )
    )
    if client.as_json:
        output.print_json([output.to_dict(r) for r in records])
        return
    rows = [["SESSION", "VERSION", "TIME", "TRIGGER", "OUTCOME", "TOKENS", "ENTRIES", "MODEL"]]
    for r in records:
        # A tainted compaction was done: its receipt keeps its tokens (and no stage).
        if r.outcome in ("ok", "tainted"):
            tokens = f"{r.tokens_before:,} -> {r.tokens_after:,}"
        elif r.outcome == "undone":
            tokens = f"took back #{r.compaction_version}; prompt {r.tokens_after:,}"
        elif r.outcome == "redone":
            tokens = f"undo #{r.undo_version} taken back; prompt {r.tokens_after:,}"
        else:
            tokens = f"{r.stage}: {r.reason}"
        rows.append(
            [
                r.session_id,
                str(r.version),
                output.time(r.timestamp),
                r.trigger,
                r.outcome,
                tokens,
                str(r.entries_covered),
                r.summarizer_model,
            ]
        )
    for line in output.table(rows, right=(1, 6)):
        click.echo(output.clip(line, output.width()))


@audit.command("compaction")
@click.argument("session")
@click.argument("version", type=click.IntRange(min=1))
@pass_client
def compaction(client: Client, session: str, version: int) -> None:
    """Show one compaction: its receipt, its summary and the entries it replaced."""
    found = client.api.get_compaction(session, version=version)
    token = found.next_page_token
    while token:  # the replaced entries, page by page
        page = client.api.get_compaction(session, version=version, page_token=token)
        found.replaced_entries.extend(page.replaced_entries)
        token = page.next_page_token
    found.next_page_token = ""
    if client.as_json:
        output.print_json(found)
        return
    record = found.record or CompactionRecord()
    fields = [(name, str(getattr(record, name))) for name in _RECEIPT_FIELDS]
    fields.insert(2, ("time", output.time(record.timestamp)))
    output.echo_fields([(k, v) for k, v in fields if v not in ("", "0")])
    if found.compaction is not None:
        click.echo("summary:")
        click.echo(found.compaction.summary)
    if record.outcome == "ok":
        click.echo("in force" if found.in_force else "not in force (undone)")
    for change in found.changes:
        what = "undone" if change.outcome == "undone" else "redone"
        by = f" by {change.requested_by}" if change.requested_by else ""
        why = f" ({change.reason})" if change.reason else ""
        click.echo(f"  {what} at version {change.version}{by}{why}")
    click.echo(f"replaced {output.count(len(found.replaced_entries), 'entry')}:")
    for line in output.table(output.entry_rows(list(found.replaced_entries))):
        click.echo("  " + output.clip(line, output.width() - 2))


_RECEIPT_FIELDS = [
    field.name
    for field in dataclasses.fields(CompactionRecord)
    if field.name not in ("timestamp", "instructions")
] + ["instructions"]


@audit.command("view")
@click.argument("session")
@click.option("--version", "at_version", type=click.IntRange(min=1), help="As of this version.")
@pass_client
def view(client: Client, session: str, at_version: int | None) -> None:
    """Every entry against what the model saw: shown, summarised, pinned, pruned or guarded,
    and each turn's prompt view replayed to check its hash."""
    audited = client.api.audit_view(session, version=at_version)
    # Later pages are of the first page's version; their turns and erasures are the same.
    token = audited.next_page_token
    while token:
        page = client.api.audit_view(session, page_token=token)
        audited.entries.extend(page.entries)
        token = page.next_page_token
    audited.next_page_token = ""
    if client.as_json:
        output.print_json(audited)
        return
    click.echo(f"{session} as of version {audited.version}")
    rows = [
        [f"#{e.version}", output.short(e.entry_id), e.role, e.status, e.detail]
        for e in audited.entries
    ]
    for line in output.table(rows):
        click.echo("  " + output.clip(line, output.width() - 2))
    for turn in audited.turns:
        verdict = "verified" if turn.verified else "MISMATCH"
        click.echo(
            f"turn {output.short(turn.entry_id)} answered view {turn.view_version}: {verdict}"
        )


@audit.command("prunes")
@click.argument("session", required=False, default="")
@click.option("--since", type=Moment(), help="Only those at or after this time (ISO 8601).")
@click.option("--until", type=Moment(), help="Only those before this time (ISO 8601).")
@click.option("--action", type=click.Choice(sorted(ACTIONS)), default=None)
@pass_client
def prunes(
    client: Client,
    session: str,
    since: datetime | None,
    until: datetime | None,
    action: str | None,
) -> None:
    """List pruned tool results of SESSION, or of every session."""
    records = list(
        _pages(
            lambda token: client.api.list_prunes(
                session,
                since=since,
                until=until,
                action=ACTIONS[action] if action else PruneAction.UNSPECIFIED,
                page_size=500,
                page_token=token,
            ),
            "prunes",
        )
    )
    if client.as_json:
        output.print_json([output.to_dict(r) for r in records])
        return
    rows = [["SESSION", "VERSION", "TIME", "ENTRY", "ACTION", "CHARS", "REASON"]]
    for r in records:
        # Prunes recorded before the store kept sizes have no "before".
        before = f"{r.chars_before:,}" if r.chars_before is not None else "?"
        after = f"{r.chars_after:,}" if r.chars_after is not None else "?"
        name = "soft_trim" if r.action == PruneAction.SOFT_TRIM else "hard_clear"
        rows.append(
            [
                r.session_id,
                str(r.version),
                output.time(r.timestamp),
                output.short(r.entry_id),
                name,
                f"{before} → {after}",
                r.reason,
            ]
        )
    for line in output.table(rows, right=(1, 5)):
        click.echo(output.clip(line, output.width()))


COMMANDS = [audit, migrate, rebuild, readmodels]
