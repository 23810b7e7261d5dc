"""Context commands: `compact` (run by the store, or a summary the client wrote),
`prune` trims or clears tool results, `overflow` reports a provider's refusal.

All change only what the views show; every entry stays in the store whole.
"""

from __future__ import annotations

import click
from sessionstore_client import (
    Compaction,
    CompactionPlan,
    CompactionPolicy,
    PromptFormat,
    PruneAction,
    PrunedEntry,
)

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import FORMATS, expected_version_option, format_option, read_text
from services.cli.views import echo_view_summary


@click.command()
@click.argument("session")
@click.option("--instructions", default="", help="What the store's summary should keep or stress.")
@click.option("--force", is_flag=True, help="Compact even below the session's threshold.")
@click.option("--dry-run", is_flag=True, help="Show the plan; write nothing.")
@click.option(
    "--summary", help='A summary you wrote (with --first-kept); "-" reads standard input.'
)
@click.option(
    "--first-kept",
    metavar="ENTRY_ID",
    help="With --summary: the first entry to keep (the short id `log` prints will do).",
)
@click.option("--reason", default="", help="With --summary: why, for the record.")
@click.option(
    "--idempotency-key",
    default="",
    help="Without --summary: retries with this key compact only once.",
)
@expected_version_option
@pass_client
def compact(
    client: Client,
    session: str,
    instructions: str,
    force: bool,
    dry_run: bool,
    summary: str | None,
    first_kept: str | None,
    reason: str,
    idempotency_key: str,
    expected_version: int | None,
) -> None:
    """Compact the session: the store summarises, or records your summary.

    Without --summary the store chooses the cut and writes the summary with the
    session's summariser (--dry-run shows its plan first). With --summary and
    --first-kept it records your summary in place of the entries before
    --first-kept.

    
      compact S --dry-run
      compact S --instructions "keep the API decisions" --force
      compact S --summary "Read README.md" --first-kept answer1
    """
    if summary is None:
        if first_kept is not None or reason:
            raise click.UsageError("--first-kept and --reason go with --summary")
        return _store_compact(
            client, session, instructions, force, dry_run, expected_version, idempotency_key
        )
    if first_kept is None:
        raise click.UsageError("--summary needs --first-kept: the first entry the summary keeps")
    if instructions or force or dry_run or idempotency_key:
        raise click.UsageError(
            "--instructions, --force, --dry-run and --idempotency-key are for the store's "
            "compaction; leave out --summary to use them"
        )
    response = client.api.record_compaction(
        session,
        summary=read_text(summary) or "",
        first_kept_entry_id=client.resolve_entry_id(session, first_kept),
        reason=reason,
        expected_version=expected_version,
    )
    if client.as_json:
        return output.print_json(response)
    if response.compaction is not None:
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
        pruned = [PrunedEntry(entry_id=e, action=PruneAction.HARD_CLEAR) for e in resolved]
    else:
        pruned = [
            PrunedEntry(entry_id=e, action=PruneAction.SOFT_TRIM, head_chars=head, tail_chars=tail)
            for e in resolved
        ]
    response = client.api.record_prune(
        session, entries=pruned, reason=reason, expected_version=expected_version
    )
    if client.as_json:
        return output.print_json(response)
    click.echo(f"pruned {output.count(len(pruned), 'entry')} at version {response.version}")
    for decision in response.entries:
        click.echo(f"  {decision.entry_id}: {output.prune_action(decision)}")


def _store_compact(
    client: Client,
    session: str,
    instructions: str,
    force: bool,
    dry_run: bool,
    expected_version: int | None,
    idempotency_key: str,
) -> None:
    if not client.timeout_given and not dry_run:
        # The server stops the compaction at this call's deadline: a default shorter
        # than a model step would end every slow summariser before it could answer.
        settings = client.api.get_session(session).settings
        policy = settings.compaction if settings is not None else None
        client.timeout = max(client.timeout, compact_timeout(policy or CompactionPolicy()))
    response = client.api.compact(
        session,
        instructions=instructions,
        force=force,
        dry_run=dry_run,
        expected_version=expected_version,
        idempotency_key=idempotency_key,
        timeout=client.timeout,
    )
    if client.as_json:
        return output.print_json(response)
    if response.compacted and response.compaction is not None:
        if response.replayed:
            click.echo("already compacted with this idempotency key; its receipt:")
        return _echo_receipt(response.compaction)
    if dry_run and response.plan is not None:
        click.echo("dry run, nothing written; the plan:")
        _echo_plan(response.plan)
        if response.reason.startswith("dry run: nothing written; "):
            # The steps the plan's summariser comes after, and why each was passed over.
            click.echo(response.reason.removeprefix("dry run: nothing written; "))
        return None
    if dry_run:
        reason = response.reason.removeprefix("dry run: ")
        click.echo(f"dry run, would not compact: {reason}")
        return None
    click.echo(f"not compacted: {response.reason or 'nothing to compact'}")
    if response.plan is not None:
        _echo_plan(response.plan)
    return None


# The server's defaults for a step's timeout and a compaction's (domain.settings).
STEP_TIMEOUT_SECONDS = 60
COMPACTION_TIMEOUT_SECONDS = 300
# Beyond the model steps: the offline steps, the hard drop, the write and the trip.
COMPACT_MARGIN_SECONDS = 30
_NO_MODEL = ("offline", "hard-drop")


def compact_timeout(policy: CompactionPolicy) -> float:
    """How long `compact` waits by default: long enough for every model step of the
    session's chain to time out and the next one to be tried."""
    steps = list(policy.summarizers.steps) if policy.summarizers else []
    if steps:
        models = sum(1 for step in steps if step.strip() not in _NO_MODEL)
    else:
        models = 0 if (policy.summarizer_model or "").strip() in ("", *_NO_MODEL) else 1
    step = min(
        policy.step_timeout_seconds or STEP_TIMEOUT_SECONDS,
        policy.timeout_seconds or COMPACTION_TIMEOUT_SECONDS,
    )
    return float(models * step + COMPACT_MARGIN_SECONDS)


def _echo_plan(plan: CompactionPlan) -> None:
    covered = output.count(plan.entries_covered, "entry")
    if plan.first_covered_entry_id:
        first, last = plan.first_covered_entry_id, plan.last_covered_entry_id
        covered += f" ({output.short(first)} … {output.short(last)})"
    chunks = ", ".join(
        f"{output.count(len(c.entry_ids), 'entry')}/{c.tokens:,} tokens" for c in plan.chunks
    )
    # The offline summariser has no window worth showing (it reads any length).
    window = (
        f" (window {plan.summarizer_window_tokens:,})"
        if plan.summarizer_model not in ("", "offline") and plan.summarizer_window_tokens
        else ""
    )
    output.echo_fields(
        [
            ("cut", f"keep from {plan.first_kept_entry_id}" if plan.first_kept_entry_id else ""),
            ("covers", covered),
            ("chunks", f"{len(plan.chunks)}: {chunks}" if plan.chunks else ""),
            (
                "tokens",
                f"{plan.tokens_before:,} → {plan.estimated_tokens_after:,} (estimated)",
            ),
            ("summariser", (plan.summarizer_model or "offline") + window),
            ("oversized", ", ".join(output.short(e) for e in plan.oversized_entry_ids)),
            ("pinned", ", ".join(output.short(e) for e in plan.pinned_entry_ids)),
            ("reason", plan.reason),
        ]
    )


def _echo_receipt(compaction: Compaction) -> None:
    output.echo_compaction(compaction)
    before = f"{compaction.tokens_before:,}"
    if compaction.tokens_before_source:
        before += f" ({compaction.tokens_before_source})"
    after = f"{compaction.tokens_after:,}"
    if compaction.tokens_after_source:
        after += f" ({compaction.tokens_after_source})"
    covered = f"{output.count(compaction.entries_covered, 'entry')}"
    if compaction.first_covered_entry_id:
        covered += (
            f" ({output.short(compaction.first_covered_entry_id)} … "
            f"{output.short(compaction.last_covered_entry_id)})"
        )
    # One row for each step passed over, with its cause: a missing key, a timeout.
    tried = [
        f"{a.summarizer} {a.outcome}" + (f": {output.cause(a.reason)}" if a.reason else "")
        for a in compaction.attempts
        if a.outcome != "used"
    ]
    output.echo_fields(
        [
            ("  trigger", compaction.reason),
            ("  covers", covered),
            ("  tokens", f"{before} → {after}"),
            ("  summariser", compaction.summarizer_model or "offline"),
            *[("  tried" if i == 0 else "", step) for i, step in enumerate(tried)],
            ("  chunks", str(compaction.chunks) if compaction.chunks else ""),
            ("  fallback", compaction.fallback_stage),
            ("  attempt", str(compaction.attempt) if compaction.attempt > 1 else ""),
            ("  duration", f"{compaction.duration_ms:,} ms"),
            ("  engine", compaction.engine),
            ("  instructions", compaction.instructions),
        ]
    )


@click.command()
@click.argument("session")
@click.option(
    "--error",
    "error_text",
    required=True,
    help='The provider\'s error message or body; "-" reads stdin.',
)
@click.option("--status", "status_code", type=click.IntRange(min=0), default=0, help="HTTP status.")
@click.option("--provider", default="", help="e.g. openai, anthropic [default: the model's].")
@click.option(
    "--view-version",
    type=click.IntRange(min=1),
    required=True,
    help="The refused view's version (the first part of the prompt ref `prompt` prints).",
)
@click.option("--view-hash", default="", help="The refused view's request hash.")
@click.option(
    "--request-bytes",
    type=click.IntRange(min=0),
    default=0,
    help="The refused request's size in bytes, as sent [default: the store measures "
    "its own rendering of the view].",
)
@format_option
@pass_client
def overflow(
    client: Client,
    session: str,
    error_text: str,
    status_code: int,
    provider: str,
    view_version: int,
    view_hash: str,
    request_bytes: int,
    prompt_format: str | None,
) -> None:
    """Report that the provider refused a prompt view as too long.

    The store truncates oversized tool results, compacts, and answers the new
    view (`prompt` prints it in full). An error that is not an overflow is
    refused, as is a turn past the session's max_attempts reports.

    \b
      overflow S --status 400 --error "$(cat error.json)" --view-version 12 --view-hash 3f2a...
    """
    view = client.api.report_overflow(
        session,
        error_text=read_text(error_text) or "",
        status_code=status_code,
        provider=provider,
        view_version=view_version,
        view_hash=view_hash,
        format=FORMATS[prompt_format] if prompt_format is not None else PromptFormat.UNSPECIFIED,
        request_bytes=request_bytes,
    )
    if client.as_json:
        return output.print_json(view)
    click.echo(
        f"{view.session_id}: new prompt view at version {view.version}, "
        f"{output.format_name(view.format)} format"
    )
    echo_view_summary(view)
    return None
