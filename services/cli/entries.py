"""Entry commands: `append` writes one entry, `entry` reads one back in full."""

from __future__ import annotations

import hashlib
import json
import uuid

import click
from sessionstore_client import (
    Entry,
    PromptRef,
    Role,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)

from services.cli import output
from services.cli.client import Client, pass_client
from services.cli.options import FORMATS, expected_version_option, read_text

_ROLES = {
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "system": Role.SYSTEM,
    "custom": Role.CUSTOM,
}


@click.command()
@click.argument("session")
@click.argument("text", required=False)
@click.option(
    "--role",
    type=click.Choice(sorted(_ROLES)),
    help="Role of a plain entry with TEXT [default: user].",
)
@click.option("--tool-call", "tool_name", metavar="NAME", help="Append an assistant tool call.")
@click.option("--args", "arguments", metavar="JSON", help="The tool call's arguments object.")
@click.option("--call-id", help="The tool call's id; generated if left out.")
@click.option(
    "--tool-result", "answers", metavar="CALL_ID", help="Append TEXT as this call's result."
)
@click.option("--error", "is_error", is_flag=True, help="The tool result is an error.")
@click.option("--custom-type", default="", help="What kind of note a custom entry is.")
@click.option("--id", "entry_id", default="", help="The entry's id; generated if left out.")
@click.option(
    "--parent", metavar="ENTRY_ID", help="The entry this one follows [default: the last one]."
)
@click.option("--idempotency-key", default="", help="Retries with this key append only once.")
@click.option(
    "--prompt-ref",
    metavar="VERSION:FORMAT:HASH",
    help="Assistant entries: the prompt view answered (`prompt` prints it), for calibration.",
)
@click.option("--input-tokens", type=click.IntRange(min=0), help="Provider-reported usage.")
@click.option("--output-tokens", type=click.IntRange(min=0))
@click.option("--cache-read-tokens", type=click.IntRange(min=0))
@click.option("--cache-write-tokens", type=click.IntRange(min=0))
@expected_version_option
@pass_client
def append(
    client: Client,
    session: str,
    text: str | None,
    role: str | None,
    tool_name: str | None,
    arguments: str | None,
    call_id: str | None,
    answers: str | None,
    is_error: bool,
    custom_type: str,
    entry_id: str,
    parent: str | None,
    idempotency_key: str,
    prompt_ref: str | None,
    expected_version: int | None,
    **usage: int | None,
) -> None:
    """Append one entry.

    TEXT "-" reads the text from standard input.

    \b
      append S --role user "hello"
      append S --tool-call read_file --args '{"path": "a.py"}'
      append S --tool-result CALL_ID "file contents"
      append S --role assistant "done" --prompt-ref 7:openai:3f2a... --input-tokens 1200

    Usage (--input-tokens ...) and --prompt-ref go with assistant entries: the
    provider's count for the view the model answered calibrates the store's estimate.
    """
    _check_append_options(role, tool_name, arguments, call_id, answers, is_error, custom_type)
    text = read_text(text)
    if tool_name is not None:
        call_id = call_id or _call_id(session, idempotency_key)
        entry = _tool_call_entry(tool_name, arguments or "{}", call_id, text)
    elif answers is not None:
        entry = _tool_result_entry(answers, _required_text(text), is_error)
    else:
        entry = Entry(role=_ROLES[role or "user"], content=[TextBlock(_required_text(text))])
    entry.id = entry_id
    entry.custom_type = custom_type
    if parent is not None:
        entry.parent_id = client.resolve_entry_id(session, parent)
    _add_usage(entry, prompt_ref, usage)
    response = client.api.append_entries(
        session,
        entries=[entry],
        expected_version=expected_version,
        idempotency_key=idempotency_key,
    )
    if client.as_json:
        return output.print_json(response)
    click.echo(
        f"appended {response.entry_ids[0]} at version {response.version} "
        f"({response.token_counts[0]:,} tokens)"
    )
    if tool_name is not None:
        click.echo(f"tool call id {call_id}")
    if response.replayed:
        click.echo("(retry: answered from the first append)")


def _check_append_options(
    role: str | None,
    tool_name: str | None,
    arguments: str | None,
    call_id: str | None,
    answers: str | None,
    is_error: bool,
    custom_type: str,
) -> None:
    """Refuses option mixes that would not say what kind of entry to append."""
    if tool_name is not None and answers is not None:
        raise click.UsageError("append a --tool-call or a --tool-result, not both at once")
    if tool_name is not None and role not in (None, "assistant"):
        raise click.UsageError("a --tool-call entry is an assistant entry; drop --role")
    if answers is not None and role is not None:
        raise click.UsageError("a --tool-result entry has role tool; drop --role")
    if tool_name is None and (arguments is not None or call_id is not None):
        raise click.UsageError("--args and --call-id go with --tool-call")
    if is_error and answers is None:
        raise click.UsageError("--error goes with --tool-result")
    if custom_type and role != "custom":
        raise click.UsageError("--custom-type goes with --role custom")


def _add_usage(entry: Entry, prompt_ref: str | None, usage: dict[str, int | None]) -> None:
    given = {k: v for k, v in usage.items() if v is not None}
    if (given or prompt_ref is not None) and entry.role != Role.ASSISTANT:
        raise click.UsageError(
            "usage and --prompt-ref go with assistant entries (--role assistant or --tool-call)"
        )
    if given:
        entry.usage = Usage(**given)
    if prompt_ref is not None:
        entry.prompt_ref = parse_prompt_ref(prompt_ref)


def parse_prompt_ref(text: str) -> PromptRef:
    """VERSION:FORMAT:HASH, as `prompt` prints it (e.g. 7:openai:3f2a...)."""
    version, _, rest = text.partition(":")
    name, _, digest = rest.partition(":")
    if not version.isdigit() or name not in FORMATS or not digest:
        raise click.BadParameter(
            f"{text!r} is not VERSION:FORMAT:HASH (FORMAT one of {', '.join(FORMATS)})",
            param_hint="--prompt-ref",
        )
    return PromptRef(version=int(version), format=FORMATS[name], hash=digest)


def _required_text(text: str | None) -> str:
    if text is None:
        raise click.UsageError('give the entry\'s TEXT (or "-" to read standard input)')
    return text


def _call_id(session: str, idempotency_key: str) -> str:
    # A retry must send the very same entry, or the server refuses the reused
    # key; so with a key the call id is derived from it, not drawn at random.
    if idempotency_key:
        digest = hashlib.sha256(f"{session}\0{idempotency_key}".encode()).hexdigest()
        return "call_" + digest[:24]
    return "call_" + uuid.uuid4().hex[:24]


def _tool_call_entry(name: str, arguments: str, call_id: str, text: str | None) -> Entry:
    # Checked here too so a typo in the shell gets pointed at before the round trip.
    try:
        parsed = json.loads(arguments)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON ({error})", param_hint="--args") from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--args")
    call = ToolCallBlock(id=call_id, name=name, arguments_json=arguments)
    return Entry(role=Role.ASSISTANT, content=[*([TextBlock(text)] if text else []), call])


def _tool_result_entry(call_id: str, output: str, is_error: bool) -> Entry:
    result = ToolResultBlock(tool_call_id=call_id, content=output, is_error=is_error)
    return Entry(role=Role.TOOL, content=[result])


@click.command("entry")
@click.argument("session")
@click.argument("entry_id")
@pass_client
def show_entry(client: Client, session: str, entry_id: str) -> None:
    """Show one entry in full.

    The whole content, even if it was compacted away or pruned since. ENTRY_ID
    may be the short id `log` prints.
    """
    found = client.entry(session, entry_id)
    if found is None:
        found = client.entry(session, client.resolve_entry_id(session, entry_id))
    assert found is not None  # resolved ids exist, or resolving raised
    if client.as_json:
        return output.print_json(found)
    usage, ref = found.usage, found.prompt_ref
    output.echo_fields(
        [
            ("entry", found.id),
            ("role", output.role(found)),
            ("version", str(found.version)),
            ("parent", found.parent_id),
            ("time", output.time(found.timestamp)),
            ("tokens", f"{found.token_count:,} ({found.tokenizer})"),
            (
                "usage",
                f"in {usage.input_tokens:,}  out {usage.output_tokens:,}  "
                f"cache read {usage.cache_read_tokens:,}  write {usage.cache_write_tokens:,}"
                if usage is not None
                else "",
            ),
            (
                "prompt ref",
                f"{ref.version}:{output.format_name(ref.format)}:{ref.hash}"
                if ref is not None
                else "",
            ),
            ("metadata", ", ".join(f"{k}={v}" for k, v in sorted(found.metadata.items()))),
        ]
    )
    for block in found.content:
        click.echo()
        click.echo(output.block_in_full(block))
