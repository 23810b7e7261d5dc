"""Options that several commands share, and reading TEXT arguments."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click
from sessionstore_client import (
    CompactionPolicy,
    PromptFormat,
    PruningPolicy,
    SessionSettings,
    SummarizerChain,
    ToolResultGuardPolicy,
)

from services.cli.client import Client

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = {
    "openai": PromptFormat.OPENAI,
    "openai-responses": PromptFormat.OPENAI_RESPONSES,
    "anthropic": PromptFormat.ANTHROPIC,
    "gemini": PromptFormat.GEMINI,
}


def read_text(text: str | None) -> str | None:
    """TEXT as given, or standard input when it is "-" (for long or multi-line content)."""
    return sys.stdin.read() if text == "-" else text


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    client = ctx.find_object(Client)
    if value and client is not None:
        client.as_json = True


def json_option() -> click.Option:
    """`--json` after the command name, as well as before it (every command gets one)."""
    return click.Option(
        ["--json"],
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print the API's responses as JSON.",
    )


class Moment(click.ParamType):
    """An ISO 8601 time; one without an offset is local time."""

    name = "ISO8601"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 time, e.g. 2025-01-31T14:05:00Z", param, ctx)
        return moment if moment.tzinfo else moment.astimezone()


def as_of_options(command: F) -> F:
    command = click.option(
        "--at-time", type=Moment(), help="As it was at this time (ISO 8601; local if no offset)."
    )(command)
    return click.option(
        "--at-version", type=click.IntRange(min=1), help="As it was at this version."
    )(command)


def check_as_of(at_version: int | None, at_time: datetime | None) -> None:
    if at_version is not None and at_time is not None:
        raise click.UsageError("give --at-version or --at-time, not both")


def format_option(command: F) -> F:
    return click.option(
        "--format",
        "prompt_format",
        type=click.Choice(sorted(FORMATS)),
        help="The provider's message format [default: the server's, openai].",
    )(command)


def expected_version_option(command: F) -> F:
    return click.option(
        "--expected-version",
        type=click.IntRange(min=0),
        help="Refuse (ABORTED) unless the session is at this version.",
    )(command)


def context_setting_options(command: F) -> F:
    """The context-management settings `create` and `settings` take; unset ones are not sent."""
    options = [
        click.option(
            "--engine",
            help="Context engine: layered (default), sliding-window or a plug-in's name.",
        ),
        click.option(
            "--compaction-mode",
            type=click.Choice(["auto", "manual", "off"]),
            help="auto: on threshold, overflow and request; manual: overflow and request; "
            "off: only on request (compact).",
        ),
        click.option(
            "--threshold",
            type=click.FloatRange(min=0, max=1, min_open=True),
            help="Compact when the prompt exceeds this share of the window (e.g. 0.8).",
        ),
        click.option(
            "--keep-recent",
            "keep_recent_tokens",
            type=click.IntRange(min=0),
            help="Tokens of the newest entries a compaction keeps (e.g. 20000).",
        ),
        click.option(
            "--summarizer",
            metavar="MODEL",
            help='Model that writes summaries (any litellm model); "" for the offline one.',
        ),
        click.option(
            "--summarizer-api-base",
            metavar="URL",
            help="Base URL of an OpenAI-compatible server for the summariser.",
        ),
        click.option(
            "--summarizers",
            metavar="CHAIN",
            help="The summariser chain, tried in order, comma-separated: conversation, a "
            "model, model@provider (the server's providers file), offline, hard-drop. "
            '"" for the default chain.',
        ),
        click.option(
            "--read-back-tool",
            metavar="TOOL",
            help="The tool your runtime offers to read an entry back, named in the notice "
            "of a trimmed tool result.",
        ),
        click.option(
            "--pruning",
            type=click.Choice(["off", "cache-ttl", "recent-n"]),
            help="How tool results are pruned from the prompt view.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def apply_context_settings(
    settings: SessionSettings,
    *,
    engine: str | None,
    compaction_mode: str | None,
    threshold: float | None,
    keep_recent_tokens: int | None,
    summarizer: str | None,
    summarizer_api_base: str | None,
    summarizers: str | None,
    read_back_tool: str | None,
    pruning: str | None,
) -> None:
    """Sets on `settings` what the user gave, leaving the rest unset (the server keeps it)."""
    if engine is not None:
        settings.engine = engine
    compaction = CompactionPolicy(
        mode=compaction_mode,
        threshold_ratio=threshold,
        keep_recent_tokens=keep_recent_tokens,
        summarizer_model=summarizer,
        summarizer_api_base=summarizer_api_base,
    )
    if summarizers is not None:
        steps = [step.strip() for step in summarizers.split(",") if step.strip()]
        compaction.summarizers = SummarizerChain(steps=steps)
    if compaction != CompactionPolicy():
        settings.compaction = compaction
    if read_back_tool is not None:
        settings.tool_result_guard = settings.tool_result_guard or ToolResultGuardPolicy()
        settings.tool_result_guard.read_back_tool = read_back_tool
    if pruning is not None:
        settings.pruning = settings.pruning or PruningPolicy()
        settings.pruning.mode = pruning
