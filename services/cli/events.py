"""`events`: the session's events, one a line, optionally followed live."""

from __future__ import annotations

import click

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.cli import output
from services.cli.client import Client, pass_client


@click.command()
@click.argument("session")
@click.option("--after", type=click.IntRange(min=0), default=0, help="Only events after this.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until Ctrl-C.")
@pass_client
def events(client: Client, session: str, after: int, follow: bool) -> None:
    """List the session's events, one a line."""
    request = pb.ReadEventsRequest(session_id=session, after_version=after, follow=follow)
    # A followed stream is open-ended; only a bounded read gets a deadline.
    call = client.read_events(request, deadline=not follow)
    try:
        for event in call:
            if client.as_json:
                output.print_json(event, one_line=True)
            else:
                click.echo(_event_line(event))
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends: hang up so the server stops waiting.
        call.cancel()
        return
    if follow:
        # A followed stream only ends this way when the server shuts down.
        click.echo("(the server ended the stream)", err=True)


def _event_line(event: pb.SessionEvent) -> str:
    kind, summary = _event_summary(event)
    # Fixed widths, not a table: a followed stream cannot look ahead.
    prefix = f"{'#' + str(event.version):<4}  {output.time(event.timestamp)}  {kind:<9}  "
    return prefix + output.clip(summary, output.width() - len(prefix))


def _event_summary(event: pb.SessionEvent) -> tuple[str, str]:
    which = event.WhichOneof("event")
    if which == "started":
        return "started", output.settings_summary(event.started.settings)
    if which == "entries_appended":
        appended = event.entries_appended
        first = appended.entries[0]
        more = f" (+{len(appended.entries) - 1} more)" if len(appended.entries) > 1 else ""
        key = f" [key {appended.idempotency_key}]" if appended.idempotency_key else ""
        text = output.entry_summary(first, output.width())
        if appended.guarded:
            key += f" [{output.count(len(appended.guarded), 'result')} guarded]"
        return "appended", f"{output.role(first)} {output.short(first.id)}{key}{more}: {text}"
    if which == "compaction_recorded":
        compaction = event.compaction_recorded
        return "compacted", (
            f"kept from {output.short(compaction.first_kept_entry_id)} ({compaction.reason}): "
            f"{output.summary_line(compaction.summary)}"
        )
    if which == "prune_recorded":
        prune = event.prune_recorded
        pruned = ", ".join(
            f"{output.short(p.entry_id)} {output.prune_verb(p)}" for p in prune.entries
        )
        return "pruned", pruned + (f" ({prune.reason})" if prune.reason else "")
    if which == "settings_changed":
        return "settings", output.settings_summary(event.settings_changed.settings)
    if which == "compaction_failed":
        failed = event.compaction_failed
        return "failed", f"compaction ({failed.trigger}) at stage {failed.stage}: {failed.reason}"
    if which == "overflow_reported":
        reported = event.overflow_reported
        status = f" {reported.status_code}" if reported.status_code else ""
        return "overflow", (
            f"{reported.provider}{status} ({reported.kind}) refused view "
            f"{reported.view_version}: {reported.message}"
        )
    if which == "system_prompt_set":
        prompt = event.system_prompt_set
        return "system", (
            f"system prompt: {prompt.tokens.total:,} tokens, "
            f"{output.count(len(prompt.files), 'file')}, "
            f"{output.count(len(prompt.skills), 'skill')}, "
            f"{output.count(len(prompt.tools), 'tool')}"
        )
    if which == "tool_calls_abandoned":
        abandoned = event.tool_calls_abandoned
        calls = ", ".join(abandoned.tool_call_ids)
        reason = f" ({abandoned.reason})" if abandoned.reason else ""
        return "abandoned", f"tool calls {calls}{reason}"
    if which == "compaction_undone":
        undone = event.compaction_undone
        back = undone.restored_compaction_version
        to = f"the compaction at #{back}" if back else "no compaction"
        by = f" by {undone.requested_by}" if undone.requested_by else ""
        why = f" ({undone.reason})" if undone.reason else ""
        return "undone", f"compaction #{undone.compaction_version}{by}{why}; in force: {to}"
    if which == "erasure":
        erasure = event.erasure
        what = "the whole session" if erasure.whole_session else ", ".join(erasure.entry_ids)
        by = f" by {erasure.erased_by}" if erasure.erased_by else ""
        why = f" ({erasure.reason})" if erasure.reason else ""
        return "erased", f"{what}{by}{why}"
    if which == "compaction_redone":
        redone = event.compaction_redone
        again = ", ".join(f"#{v}" for v in redone.compaction_versions)
        by = f" by {redone.requested_by}" if redone.requested_by else ""
        why = f" ({redone.reason})" if redone.reason else ""
        return "redone", f"undo #{redone.undo_version} taken back{by}{why}; in force: {again}"
    return "unknown", "(an event this client does not know)"
