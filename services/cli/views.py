"""View commands: `log` (the durable log), `prompt` and `replay` (the prompt view).

`prompt --messages` and `prompt --request` print what a provider call takes,
ready to pipe: the bare messages array, or `{"system"?, "tools"?, "messages"}`.
The text form also says what the context engine did to serve the view.
"""

from __future__ import annotations

import json
from datetime import datetime

import click
from sessionstore_client import PromptFormat, PromptView

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import FORMATS, as_of_options, check_as_of, format_option


@click.command()
@click.argument("session")
@as_of_options
@pass_client
def log(client: Client, session: str, at_version: int | None, at_time: datetime | None) -> None:
    """Show the durable log.

    The latest compaction summary, if any, then the entries it kept.
    """
    check_as_of(at_version, at_time)
    found = client.api.get_durable_log(session, version=at_version, time=at_time)
    if client.as_json:
        return output.print_json(found)
    click.echo(
        f"{found.session_id} at version {found.version}: "
        f"{output.count(len(found.entries), 'entry')}, {found.total_tokens:,} tokens"
    )
    if found.compaction is not None:
        output.echo_compaction(found.compaction)
    for line in output.table(output.entry_rows(found.entries), right={3}):
        click.echo(line)


@click.command()
@click.argument("session")
@format_option
@as_of_options
@click.option(
    "--messages",
    "bare",
    flag_value="messages",
    help="Print only the messages array, as a provider call takes it.",
)
@click.option(
    "--request",
    "bare",
    flag_value="request",
    help="Print the request body's own fields: messages (openai), system and messages "
    "(anthropic), instructions and input (openai-responses), systemInstruction and "
    "contents (gemini), with tools when any are stored.",
)
@pass_client
def prompt(
    client: Client,
    session: str,
    prompt_format: str | None,
    at_version: int | None,
    at_time: datetime | None,
    bare: str | None,
) -> None:
    """Show the prompt view.

    The messages to send the model, with pruning applied.

    \b
      prompt S --messages | jq .
      prompt S --format anthropic --request
    """
    check_as_of(at_version, at_time)
    view = client.api.get_prompt_view(
        session, version=at_version, time=at_time, format=_format(prompt_format)
    )
    if bare is not None:
        return _print_bare(view, bare)
    if client.as_json:
        return output.print_json(view)
    click.echo(
        f"{view.session_id} at version {view.version}, {output.format_name(view.format)} format"
    )
    _echo_prompt(view)


def _format(prompt_format: str | None) -> PromptFormat:
    # Left unset, the format is the server's default; the view says which it was.
    return FORMATS[prompt_format] if prompt_format is not None else PromptFormat.UNSPECIFIED


# Per format: the request's names for the system part and the messages.
_REQUEST_FIELDS = {
    PromptFormat.OPENAI: ("system", "messages"),
    PromptFormat.ANTHROPIC: ("system", "messages"),
    PromptFormat.OPENAI_RESPONSES: ("instructions", "input"),
    PromptFormat.GEMINI: ("systemInstruction", "contents"),
}


def _print_bare(view: PromptView, bare: str) -> None:
    messages = json.loads(view.messages_json)
    if bare == "messages":
        return output.print_json(messages)
    system_field, messages_field = _REQUEST_FIELDS.get(view.format, ("system", "messages"))
    body: dict[str, object] = {}
    if view.system_json:
        body[system_field] = json.loads(view.system_json)
    tools = json.loads(view.tools_json) if view.tools_json else []
    if tools:
        body["tools"] = tools
    output.print_json({**body, messages_field: messages})


def echo_view_summary(view: PromptView) -> None:
    """How full the view is, the guard's verdict, and what the engine did to serve it."""
    window = view.context_window_tokens
    share = f" ({view.estimated_tokens / window:.1%})" if window else ""
    budget = f", budget {view.budget_tokens:,}" if view.budget_tokens else ""
    engine = f", engine {view.engine}" if view.engine else ""
    click.echo(f"estimated {view.estimated_tokens:,} of {window:,} tokens{share}{budget}{engine}")
    guard = view.guard
    if guard is not None and guard.level and guard.level != "ok":
        click.echo(f"guard {guard.level}: {guard.message}")
    for action in view.actions:
        at = f" at version {action.version}" if action.version else " (nothing recorded)"
        detail = f": {action.detail}" if action.detail else ""
        click.echo(f"engine {action.kind}{at}{detail}")
    for decision in view.guarded:
        click.echo(f"guarded {output.short(decision.entry_id)}: {output.guard_action(decision)}")
    for pruned in view.pruned:
        click.echo(f"pruned {pruned.entry_id}: {output.prune_action(pruned)}")
    for repair in view.repairs:
        click.echo(f"repaired: {output.view_repair(repair)}")
    for left in view.omitted:
        where = (
            f"{output.short(left.entry_id)} block {left.block_index}"
            if left.entry_id
            else "the compaction"
        )
        what = f"{left.provider} {left.type}" if left.provider else left.kind
        click.echo(f"omitted {what} of {where}: {left.reason}")
    if view.request_hash:
        click.echo(
            f"prompt ref {view.version}:{output.format_name(view.format)}:{view.request_hash}"
        )


def _echo_prompt(view: PromptView) -> None:
    echo_view_summary(view)
    if view.system_json:
        click.echo("system:")
        click.echo(output.pretty_json(view.system_json))
    if view.tools_json and json.loads(view.tools_json):
        click.echo("tools:")
        click.echo(output.pretty_json(view.tools_json))
    click.echo("messages:")
    click.echo(output.pretty_json(view.messages_json))


@click.command()
@click.argument("session")
@click.argument("version", type=click.IntRange(min=1))
@format_option
@pass_client
def replay(client: Client, session: str, version: int, prompt_format: str | None) -> None:
    """Show the prompt view as it was at VERSION."""
    view = client.api.get_prompt_view(session, version=version, format=_format(prompt_format))
    if client.as_json:
        return output.print_json(view)
    current = client.api.get_session(session)
    click.echo(
        f"{view.session_id} as of version {view.version} of {current.version}, "
        f"{output.format_name(view.format)} format"
    )
    _echo_prompt(view)
