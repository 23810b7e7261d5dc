"""Context report commands: `status`, `context list`, `context detail` and `usage`.

Each reads the session's context report (GetContextReport): how full the window
is and what fills it. The parts it lists add up to the tokens used: system
prompt + summary + pinned + messages = the prompt view's estimate.
"""

from __future__ import annotations

from typing import Any

import click
from sessionstore_client import (
    ContextReport,
    SystemPromptTokens,
    Usage,
    WindowGuardState,
)

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.system_prompt import FILE_STATUSES, file_rows

# Largest tool results and tools listed by `context detail`.
_MOST_SHOWN = 10


def _report(client: Client, session: str) -> ContextReport:
    return client.api.get_context_report(session)


def _share(tokens: int, window: int) -> str:
    return f" ({tokens / window:.1%})" if window else ""


@click.command()
@click.argument("session")
@pass_client
def status(client: Client, session: str) -> None:
    """How full the context window is, and what the engine has done so far."""
    report = _report(client, session)
    if client.as_json:
        return output.print_json(report)
    window = report.window or WindowGuardState()
    click.echo(f"{report.session_id} at version {report.version}, engine {report.engine}")
    provider = (
        f"{report.last_provider_input_tokens:,} last reported by the provider"
        if report.last_provider_input_tokens
        else "none reported by the provider yet"
    )
    latest = ""
    compaction = report.latest_compaction
    if compaction is not None:
        latest = (
            f"#{compaction.version} ({compaction.reason}), {compaction.tokens_before:,} → "
            f"{compaction.tokens_after:,} tokens: "
            + output.clip(output.summary_line(compaction.summary), 60)
        )
    output.echo_fields(
        [
            ("window", f"{window.window_tokens:,} tokens (from {window.source})"),
            ("byte limit", _byte_limit(report)),
            ("forgotten", _forgotten(report)),
            ("guard", f"{window.level}: {window.message}" if window.message else window.level),
            (
                "used",
                f"{report.used_tokens:,} tokens{_share(report.used_tokens, window.window_tokens)}"
                ", the store's estimate",
            ),
            (
                "calibrated",
                f"{report.calibrated_tokens:,} tokens (ratio {report.calibration_ratio:.2f})",
            ),
            ("provider", provider),
            (
                "budget",
                f"{report.budget_tokens:,} tokens (the window less {report.reserve_tokens:,} "
                "for the answer)",
            ),
            ("threshold", f"{report.threshold_tokens:,} tokens (compaction starts beyond)"),
            (
                "entries",
                f"{report.entries:,} ({report.entries_in_prompt:,} in the prompt)",
            ),
            (
                "compactions",
                f"{report.compaction_count:,}"
                + (
                    f" ({report.compaction_failures:,} failed)"
                    if report.compaction_failures
                    else ""
                ),
            ),
            ("prunes", f"{report.prune_count:,}"),
            ("latest", latest),
        ]
    )


def _byte_limit(report: ContextReport) -> str:
    """The limit in bytes a provider's refusal taught, as views keep under it ("": none)."""
    if not report.learned_request_bytes:
        return ""
    return (
        f"views kept under {report.request_bytes_allowed:,} bytes (learned: "
        f"{report.learned_request_bytes:,}, from a request refused for its size)"
    )


def _forgotten(report: ContextReport) -> str:
    """When the client last had the session forget what overflow errors taught ("":
    never)."""
    if not report.limits_forgotten_version:
        return ""
    return f"learned limits, at version {report.limits_forgotten_version}"


@click.group()
def context() -> None:
    """What fills the context window, part by part.

    \b
      context list S      the parts, adding up to the tokens used
      context detail S    also each file, skill, tool and the largest tool results
    """


@context.command("list")
@click.argument("session")
@pass_client
def context_list(client: Client, session: str) -> None:
    """The system prompt by part, and the parts adding up to the tokens used."""
    report = _report(client, session)
    if client.as_json:
        return output.print_json(report)
    _echo_parts(report)


@context.command("detail")
@click.argument("session")
@pass_client
def context_detail(client: Client, session: str) -> None:
    """`context list`, then each file, skill and tool, and the largest tool results."""
    report = _report(client, session)
    if client.as_json:
        return output.print_json(report)
    _echo_parts(report)
    if report.files:
        click.echo("injected files:")
        for line in file_rows(report.files):
            click.echo("  " + line)
    if report.skills:
        click.echo("skills:")
        for line in output.table([[s.name, s.description] for s in report.skills]):
            click.echo("  " + line)
    if report.top_tools:
        click.echo("tools by schema size:")
        rows = [[t.name, f"{t.schema_chars:,} chars"] for t in report.top_tools[:_MOST_SHOWN]]
        for line in output.table(rows):
            click.echo("  " + line)
    if report.largest_tool_results:
        click.echo("largest tool results:")
        for line in output.table(_result_rows(report.largest_tool_results), right={2, 3, 4}):
            click.echo("  " + line)


def _echo_parts(report: ContextReport) -> None:
    window = (report.window or WindowGuardState()).window_tokens
    click.echo(
        f"{report.session_id} at version {report.version}: {report.used_tokens:,} of "
        f"{window:,} tokens{_share(report.used_tokens, window)}"
    )
    parts = report.system_prompt or SystemPromptTokens()
    files = _file_counts(report.files)
    rows = [
        ["PART", "TOKENS", ""],
        ["system prompt", f"{report.system_prompt_tokens:,}", parts.tokenizer or "(none set)"],
        ["  text", f"{parts.text:,}", ""],
        ["  files", f"{parts.files:,}", files],
        ["  skills", f"{parts.skills:,}", output.count(len(report.skills), "skill")],
        ["  tool list", f"{parts.tool_list:,}", ""],
        ["  tool schemas", f"{parts.tool_schemas:,}", ""],
        ["summary", f"{report.summary_tokens:,}", _summary_note(report)],
        ["pinned", f"{report.pinned_tokens:,}", "system entries kept ahead of the summary"],
        [
            "messages",
            f"{report.messages_tokens:,}",
            f"{report.entries_in_prompt:,} of {output.count(report.entries, 'entry')}",
        ],
        ["used", f"{report.used_tokens:,}", "= system prompt + summary + pinned + messages"],
    ]
    for line in output.table(rows, right={1}):
        click.echo(line)


def _file_counts(files: Any) -> str:
    text = output.count(len(files), "file")
    statuses = [FILE_STATUSES.get(f.status, "?") for f in files]
    flagged = [f"{statuses.count(s)} {s}" for s in ("TRUNCATED", "MISSING") if s in statuses]
    return text + (f" ({', '.join(flagged)})" if flagged else "")


def _summary_note(report: ContextReport) -> str:
    if report.latest_compaction is None:
        # Compactions undone leave none in force, though the session was compacted.
        return "no compaction in force" if report.compaction_count else "never compacted"
    return f"compaction at version {report.latest_compaction.version}"


def _result_rows(results: Any) -> list[list[str]]:
    header = ["ENTRY", "TOOL", "CHARS", "SHOWN", "TOKENS", "ACTION"]
    return [header] + [
        [
            output.short(r.entry_id),
            r.tool_name or "?",
            f"{r.chars:,}",
            f"{r.shown_chars:,}",
            f"{r.tokens:,}",
            r.action or "whole",
        ]
        for r in list(results)[:_MOST_SHOWN]
    ]


@click.command()
@click.argument("session")
@pass_client
def usage(client: Client, session: str) -> None:
    """Provider-reported usage per assistant turn, and the totals.

    ESTIMATED is the store's count of the prompt view a turn answered, for
    turns appended with --prompt-ref; it is what the provider's input count
    calibrates.
    """
    report = _report(client, session)
    if client.as_json:
        data = output.to_dict(report)
        keys = ("sessionId", "version", "turns", "totalUsage", "calibrationRatio")
        return output.print_json({k: data[k] for k in keys if k in data})
    click.echo(
        f"{report.session_id} at version {report.version}: "
        f"{output.count(len(report.turns), 'turn')} with usage"
    )
    header = ["VERSION", "ENTRY", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "ESTIMATED"]
    rows = [header]
    for turn in report.turns:
        rows.append(
            [
                f"#{turn.version}",
                output.short(turn.entry_id),
                *_usage_cells(turn.usage or Usage()),
                f"{turn.estimated_input_tokens:,}" if turn.estimated_input_tokens else "-",
            ]
        )
    rows.append(["total", "", *_usage_cells(report.total_usage or Usage()), ""])
    for line in output.table(rows, right={2, 3, 4, 5, 6}):
        click.echo(line)
    click.echo(
        f"calibration ratio {report.calibration_ratio:.2f} (provider input / store estimate)"
    )


def _usage_cells(given: Usage) -> list[str]:
    return [
        f"{given.input_tokens:,}",
        f"{given.output_tokens:,}",
        f"{given.cache_read_tokens:,}",
        f"{given.cache_write_tokens:,}",
    ]
