"""`events`: the session's events, one a line, optionally followed live."""

from __future__ import annotations

import textwrap

import click
from sessionstore_client import (
    Compaction,
    CompactionFailure,
    CompactionRedone,
    CompactionUndone,
    EntriesAppended,
    EntryRetracted,
    Erasure,
    ForgottenLimits,
    LearnedLimitsForgotten,
    OverflowReported,
    PruneRecorded,
    SessionCleared,
    SessionEvent,
    SessionStarted,
    SettingsChanged,
    SystemPrompt,
    ToolCallsAbandoned,
)
from sessionstore_client.client import GENERATED_KEY_PREFIX

from services.cli import output
from services.cli.client import Client, pass_client


@click.command()
@click.argument("session")
@click.option("--after", type=click.IntRange(min=0), default=0, help="Only events after this.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until Ctrl-C.")
@pass_client
def events(client: Client, session: str, after: int, follow: bool) -> None:
    """List the session's events, one a line."""
    # A followed stream is open-ended: the client gives it no deadline.
    stream = client.api.read_events(session, after_version=after, follow=follow)
    try:
        for event in stream:
            if client.as_json:
                output.print_json(event, one_line=True)
            else:
                click.echo(_event_line(event))
    except KeyboardInterrupt:
        # Ctrl-C is how a follow ends; the stream, closed as it goes, hangs up so the
        # server stops waiting.
        return
    if follow:
        # Only a server of an earlier release ends a followed stream so, as it shuts
        # down; one of this release answers UNAVAILABLE, and the client follows again.
        click.echo("(the server ended the stream)", err=True)


def _event_line(event: SessionEvent) -> str:
    kind, summary = _event_summary(event)
    # Fixed widths, not a table: a followed stream cannot look ahead.
    prefix = f"{'#' + str(event.version):<4}  {output.time(event.timestamp)}  {kind:<9}  "
    line = prefix + output.clip(summary, output.width() - len(prefix))
    if isinstance(event.event, CompactionFailure) and event.event.reason:
        # A failure's cause (a missing key, a timeout) would not fit the line: it follows,
        # wrapped, so it need not be looked up with `audit compaction`.
        indent = " " * 6
        wrapped = textwrap.wrap(
            output.cause(event.event.reason),
            max(40, output.width()),
            initial_indent=indent,
            subsequent_indent=indent,
        )
        line += "\n" + "\n".join(wrapped)
    if isinstance(event.event, OverflowReported):
        # What it taught would be clipped with the provider's words: it follows.
        line += "".join(f"\n      {lesson}" for lesson in _learned(event.event))
    if isinstance(event.event, EntriesAppended):
        line += "".join(f"\n      {lift}" for lift in _lifted(event.event))
    return line


def _event_summary(event: SessionEvent) -> tuple[str, str]:
    match event.event:
        case SessionStarted(settings=settings):
            return "started", output.settings_summary(settings)
        case EntriesAppended() as appended:
            first = appended.entries[0]
            more = f" (+{len(appended.entries) - 1} more)" if len(appended.entries) > 1 else ""
            key = _key(appended.idempotency_key)
            text = output.entry_summary(first, output.width())
            if appended.guarded:
                key += f" [{output.count(len(appended.guarded), 'result')} guarded]"
            return "appended", f"{output.role(first)} {output.short(first.id)}{key}{more}: {text}"
        case Compaction() as compaction:
            return "compacted", (
                f"kept from {output.short(compaction.first_kept_entry_id)} ({compaction.reason})"
                f"{_key(compaction.idempotency_key)}: {output.summary_line(compaction.summary)}"
            )
        case PruneRecorded() as prune:
            pruned = ", ".join(
                f"{output.short(p.entry_id)} {output.prune_verb(p)}" for p in prune.entries
            )
            return "pruned", pruned + (f" ({prune.reason})" if prune.reason else "")
        case SettingsChanged(settings=settings):
            return "settings", output.settings_summary(settings)
        case CompactionFailure() as failed:
            by = f" by {failed.summarizer_model}" if failed.summarizer_model else ""
            # The cause follows on lines of its own (see _event_line).
            return "failed", f"compaction ({failed.trigger}){by} at stage {failed.stage}"
        case OverflowReported() as reported:
            status = f" {reported.status_code}" if reported.status_code else ""
            return "overflow", (
                f"{reported.provider}{status} ({reported.kind}) refused view "
                f"{reported.view_version}: {reported.message}"
            )
        case SystemPrompt() as prompt:
            total = prompt.tokens.total if prompt.tokens is not None else 0
            return "system", (
                f"system prompt: {total:,} tokens, "
                f"{output.count(len(prompt.files), 'file')}, "
                f"{output.count(len(prompt.skills), 'skill')}, "
                f"{output.count(len(prompt.tools), 'tool')}"
            )
        case ToolCallsAbandoned() as abandoned:
            calls = ", ".join(abandoned.tool_call_ids)
            reason = f" ({abandoned.reason})" if abandoned.reason else ""
            return "abandoned", f"tool calls {calls}{reason}"
        case CompactionUndone() as undone:
            back = undone.restored_compaction_version
            to = f"the compaction at #{back}" if back else "no compaction"
            by = f" by {undone.requested_by}" if undone.requested_by else ""
            why = f" ({undone.reason})" if undone.reason else ""
            return "undone", f"compaction #{undone.compaction_version}{by}{why}; in force: {to}"
        case Erasure() as erasure:
            what = "the whole session" if erasure.whole_session else ", ".join(erasure.entry_ids)
            by = f" by {erasure.erased_by}" if erasure.erased_by else ""
            why = f" ({erasure.reason})" if erasure.reason else ""
            return "erased", f"{what}{by}{why}"
        case CompactionRedone() as redone:
            again = ", ".join(f"#{v}" for v in redone.compaction_versions)
            by = f" by {redone.requested_by}" if redone.requested_by else ""
            why = f" ({redone.reason})" if redone.reason else ""
            return "redone", f"undo #{redone.undo_version} taken back{by}{why}; in force: {again}"
        case EntryRetracted(entry_id=entry_id, reason=reason):
            return "retracted", output.short(entry_id) + (f" ({reason})" if reason else "")
        case SessionCleared(entries_cleared=cleared, reason=reason):
            why = f" ({reason})" if reason else ""
            return "cleared", f"{output.count(cleared, 'entry')} out of the views{why}"
        case LearnedLimitsForgotten(models=models):
            return "forgot", "; ".join(_forgotten(m) for m in models)
    return "unknown", "(an event this client does not know)"


def _key(idempotency_key: str) -> str:
    """An append's or a compaction's key, as a line shows it: not one the client made
    up for a call that gave none, which says nothing to a reader."""
    if not idempotency_key or idempotency_key.startswith(GENERATED_KEY_PREFIX):
        return ""
    return f" [key {idempotency_key}]"


def _learned(reported: OverflowReported) -> list[str]:
    """What an overflow taught: a window, and a limit in bytes (with the figure it was
    learned from: the request as the client sent it, or the store's rendering)."""
    lessons = []
    if reported.learned_window_tokens:
        lessons.append(f"learned a window of {reported.learned_window_tokens:,} tokens")
    if reported.learned_request_bytes:
        measured = (
            f"a request of {reported.request_bytes_sent:,} bytes as sent"
            if reported.request_bytes_sent
            else "the view as the store rendered it"
        )
        lessons.append(f"learned a limit of {reported.learned_request_bytes:,} bytes ({measured})")
    return lessons


def _lifted(appended: EntriesAppended) -> list[str]:
    """The inferred windows the provider's usage disproved: it accepted a larger prompt."""
    return [
        f"lifted the inferred window of {lesson.lifted_window_tokens:,} tokens: the provider "
        f"accepted a prompt of {lesson.provider_tokens:,}"
        for lesson in appended.lessons
        if lesson.lifted_window_tokens
    ]


def _forgotten(limits: ForgottenLimits) -> str:
    """What the session forgot about one model, at the client's word."""
    parts = []
    if limits.window_tokens:
        kind = "inferred" if limits.window_inferred else "stated"
        parts.append(f"{kind} window of {limits.window_tokens:,} tokens")
    if limits.output_tokens:
        parts.append(f"{limits.output_tokens:,} tokens for the answer")
    if limits.request_bytes:
        parts.append(f"limit of {limits.request_bytes:,} bytes")
    return f"{limits.model or '(no model)'}: " + ", ".join(parts)
