"""Session commands: `create`, `list`, `show` and `settings`."""

from __future__ import annotations

from typing import Any

import click
from sessionstore_client import (
    CompactionPolicy,
    ListSessionsResponse,
    PruningPolicy,
    Session,
    SessionSettings,
    Usage,
)

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import (
    apply_context_settings,
    context_setting_options,
    expected_version_option,
)


@click.command()
@click.option("--id", "session_id", default="", help="The session's id; generated if left out.")
@click.option("--model", help="Conversation model, e.g. gpt-4o; the server's default if unset.")
@click.option("--window", type=click.IntRange(min=1), help="Context window in tokens.")
@click.option("--title", help="The session's title, at most 500 characters.")
@context_setting_options
@pass_client
def create(
    client: Client,
    session_id: str,
    model: str | None,
    window: int | None,
    title: str | None,
    **context: Any,
) -> None:
    """Start a new session.

    Settings left out take the server's defaults (see the README's "Context
    management" for them).
    """
    settings = SessionSettings(model=model, context_window_tokens=window, title=title)
    apply_context_settings(settings, **context)
    session = client.api.create_session(session_id, settings=settings)
    if client.as_json:
        return output.print_json(session)
    click.echo(f"created {session.id} (version {session.version})")
    _echo_window(session)
    click.echo(_context_line(session.settings or SessionSettings()))


def _echo_window(session: Session) -> None:
    settings = session.settings or SessionSettings()
    click.echo(
        f"model {settings.model or ''}, window {settings.context_window_tokens or 0:,} "
        f"tokens (from {session.context_window_source})"
    )


@click.command("list")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many sessions.")
@pass_client
def list_sessions(client: Client, limit: int | None) -> None:
    """List sessions, oldest first."""
    found = ListSessionsResponse()
    token = ""
    while limit is None or len(found.sessions) < limit:
        # Page size 0 leaves it to the server; with --limit, ask for no more than needed.
        page = client.api.list_sessions(page_size=limit or 0, page_token=token)
        found.sessions.extend(page.sessions)
        token = page.next_page_token
        if not token:
            break
    if limit is not None:
        del found.sessions[limit:]
    if client.as_json:
        return output.print_json(found)
    if not found.sessions:
        return click.echo("no sessions")
    header = ["ID", "VERSION", "ENTRIES", "TOKENS", "MODEL", "UPDATED", "TITLE"]
    rows = [header] + [
        [
            s.id,
            str(s.version),
            str(s.entry_count),
            f"{s.total_tokens:,}",
            (s.settings or SessionSettings()).model or "",
            output.time(s.updated_at),
            (s.settings or SessionSettings()).title or "",
        ]
        for s in found.sessions
    ]
    for line in output.table(rows, right={1, 2, 3}):
        click.echo(line)


@click.command()
@click.argument("session")
@pass_client
def show(client: Client, session: str) -> None:
    """Show a session's settings, version and totals."""
    found = client.api.get_session(session)
    if client.as_json:
        return output.print_json(found)
    usage = found.total_usage or Usage()
    settings = found.settings or SessionSettings()
    output.echo_fields(
        [
            ("session", found.id),
            ("title", settings.title or ""),
            ("model", settings.model or ""),
            (
                "window",
                f"{settings.context_window_tokens or 0:,} tokens "
                f"(from {found.context_window_source})",
            ),
            ("version", str(found.version)),
            ("entries", str(found.entry_count)),
            ("tokens", f"{found.total_tokens:,}"),
            (
                "usage",
                f"in {usage.input_tokens:,}  out {usage.output_tokens:,}  "
                f"cache read {usage.cache_read_tokens:,}  "
                f"cache write {usage.cache_write_tokens:,}",
            ),
            ("context", _context_line(settings)),
            ("compactions", str(found.compaction_count)),
            ("open tool calls", ", ".join(found.open_tool_call_ids) or "none"),
            ("last entry", found.last_entry_id),
            ("created", output.time(found.created_at)),
            ("updated", output.time(found.updated_at)),
        ]
    )


@click.command()
@click.argument("session")
@click.option("--model", help="The conversation model.")
@click.option("--window", type=click.IntRange(min=0), help="Context window in tokens; 0 resolves.")
@click.option("--title", help="The session's title, at most 500 characters.")
@click.option(
    "--trim-head",
    type=click.IntRange(min=0),
    help="Characters a trimmed tool result keeps from its start.",
)
@click.option("--trim-tail", type=click.IntRange(min=0), help="Characters it keeps from its end.")
@click.option(
    "--forget-learned-limits",
    is_flag=True,
    help="Forget the windows and byte limits providers' overflow errors taught "
    "(the calibration stays).",
)
@context_setting_options
@expected_version_option
@pass_client
def settings(
    client: Client,
    session: str,
    model: str | None,
    window: int | None,
    title: str | None,
    trim_head: int | None,
    trim_tail: int | None,
    forget_learned_limits: bool,
    expected_version: int | None,
    **context: Any,
) -> None:
    """Change some settings; those not given keep their value."""
    changes = SessionSettings(model=model, context_window_tokens=window, title=title)
    if trim_head is not None or trim_tail is not None:
        changes.pruning = PruningPolicy(
            soft_trim_head_chars=trim_head, soft_trim_tail_chars=trim_tail
        )
    apply_context_settings(changes, **context)
    updated = client.api.update_settings(
        session,
        settings=changes,
        expected_version=expected_version,
        forget_learned_limits=forget_learned_limits,
    )
    if client.as_json:
        return output.print_json(updated)
    click.echo(f"updated {updated.id} (version {updated.version})")
    _echo_window(updated)
    if forget_learned_limits:
        click.echo("no window or byte limit learned from overflow errors is in force")
    settings = updated.settings or SessionSettings()
    pruning = settings.pruning or PruningPolicy()
    click.echo(
        f"trims keep the first {pruning.soft_trim_head_chars or 0:,} and last "
        f"{pruning.soft_trim_tail_chars or 0:,} chars"
    )
    click.echo(_context_line(settings))


# The engine that summarises nothing (services.engine.sliding_window): the CLI talks
# to a server, so it names the engine rather than importing it.
SLIDING_WINDOW = "sliding-window"


def _context_line(settings: SessionSettings) -> str:
    compaction = settings.compaction or CompactionPolicy()
    pruning = settings.pruning or PruningPolicy()
    summarizer = f"summariser {compaction.summarizer_model or 'offline'}"
    if compaction.summarizer_model and compaction.summarizer_api_base:
        # The base URL is the model's: the offline summariser asks no server.
        summarizer += f" at {compaction.summarizer_api_base}"
    if compaction.summarizers and compaction.summarizers.steps:
        summarizer = "summariser chain " + ", ".join(compaction.summarizers.steps)
    if settings.engine == SLIDING_WINDOW:
        summarizer = "drops the oldest messages, no summariser"
    return (
        f"engine {settings.engine or ''}, compaction {compaction.mode or ''} "
        f"at {compaction.threshold_ratio or 0:.0%} of the window ({summarizer}), "
        f"pruning {pruning.mode or ''}"
    )
