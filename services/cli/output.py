"""How the CLI prints: aligned text for people, JSON for scripts.

Text helpers clip and align what the API returns to fit the terminal; the JSON
helpers print the API's responses in protobuf's JSON mapping, except that 64-bit
integers stay numbers (the mapping prints them as strings). The client answers
dataclasses; they go back to messages for that mapping, so every JSON test of
the CLI also checks that the client's conversion keeps everything.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import click
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from sessionstore_client import (
    Compaction,
    ContentBlock,
    Entry,
    GuardDecision,
    ImageBlock,
    PromptFormat,
    ProviderItem,
    PruneAction,
    PrunedEntry,
    SessionSettings,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
    ViewRepair,
)
from sessionstore_client.protobuf import to_proto

# -- JSON ---------------------------------------------------------------------------

_INT64_TYPES = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


def to_dict(value: Message | Any) -> dict[str, Any]:
    """The message (or the client's dataclass of it) in protobuf's JSON mapping, with
    64-bit integers as numbers."""
    message = value if isinstance(value, Message) else to_proto(value)
    # Zero counts printed, not left out, so a script reading `entryCount` finds 0.
    data = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    _int64_to_numbers(cast(Descriptor, message.DESCRIPTOR), data)
    return data


def _int64_to_numbers(descriptor: Descriptor, data: dict[str, Any]) -> None:
    for field in descriptor.fields:
        if field.json_name not in data:
            continue
        value = data[field.json_name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            data[field.json_name] = {k: _converted(value_field, v) for k, v in value.items()}
        elif field.is_repeated:
            data[field.json_name] = [_converted(field, v) for v in value]
        else:
            data[field.json_name] = _converted(field, value)


def _converted(field: FieldDescriptor, value: Any) -> Any:
    message_type = field.message_type
    # Well-known types (Timestamp) have JSON forms of their own; leave them be.
    if message_type is not None and not message_type.full_name.startswith("google.protobuf."):
        _int64_to_numbers(message_type, value)
    elif field.type in _INT64_TYPES:
        return int(value)
    return value


def print_json(data: Message | Any, *, one_line: bool = False, err: bool = False) -> None:
    if isinstance(data, Message) or dataclasses.is_dataclass(data):
        data = to_dict(data)
    click.echo(json.dumps(data, indent=None if one_line else 2, ensure_ascii=False), err=err)


def pretty_json(text: str) -> str:
    return json.dumps(json.loads(text), indent=2, ensure_ascii=False)


# -- text ---------------------------------------------------------------------------


def width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def clip(text: str, limit: int) -> str:
    """The first line of text, cut to limit characters; … says something was left out."""
    stripped = text.strip()
    line, _, rest = stripped.partition("\n")
    limit = max(limit, 8)
    if len(line) > limit:
        return line[: limit - 1] + "…"
    return line + "…" if rest else line


# A failure's cause is shown up to this long: a sentence or two, never a traceback.
CAUSE_CHARS = 300
_STAGE_PREFIX = re.compile(r"^compaction failed at stage '([\w-]+)': ")


def cause(reason: str, limit: int = CAUSE_CHARS) -> str:
    """Why something failed, on one line, cut to ``limit`` characters: what a reader
    needs (a missing key, a timeout) comes after the words every failure begins with."""
    said = " ".join(_STAGE_PREFIX.sub(r"at stage \1: ", reason.strip()).split())
    return said if len(said) <= limit else said[: limit - 1] + "…"


def table(rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> list[str]:
    """Rows with aligned columns; the last column is left ragged."""
    if not rows:
        return []
    right = set(right)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row[:-1])
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def echo_fields(fields: Sequence[tuple[str, str]]) -> None:
    for line in table([(name, value) for name, value in fields if value]):
        click.echo(line)


def time(moment: datetime | None) -> str:
    """Local time, as a person at the terminal reads it, with its zone; --json keeps UTC."""
    if moment is None or not moment.timestamp():
        return "-"
    local = moment.astimezone()
    offset = local.utcoffset() or timedelta(0)
    if not offset:
        zone = "UTC"
    else:
        # +01:00 rather than a name such as CET: names are ambiguous (IST, CST).
        minutes = int(offset.total_seconds()) // 60
        sign = "+" if minutes >= 0 else "-"
        zone = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return f"{local:%Y-%m-%d %H:%M:%S} {zone}"


def count(number: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number:,} {noun if number == 1 else plural}"


def short(identifier: str) -> str:
    """The id as `log` shows it; every command taking an entry id takes this too."""
    return identifier[:8]


def role(entry: Entry) -> str:
    name = getattr(entry.role, "name", str(entry.role)).lower()
    return f"{name}:{entry.custom_type}" if entry.custom_type else name


def format_name(prompt_format: PromptFormat) -> str:
    """The format as --format names it (openai-responses)."""
    return getattr(prompt_format, "name", str(prompt_format)).lower().replace("_", "-")


def block_summary(block: ContentBlock, limit: int) -> str:
    match block:
        case TextBlock(text=text):
            return clip(text, limit)
        case ThinkingBlock(thinking=thinking):
            return "(thinking) " + clip(thinking, limit - 11)
        case ToolCallBlock(name=name, arguments_json=arguments):
            return clip(f"→ {name}({arguments})", limit)
        case ToolResultBlock(tool_call_id=call_id, content=content, is_error=is_error):
            prefix = f"← {call_id}{' (error)' if is_error else ''}: "
            return prefix + (clip(content, limit - len(prefix)) or "(empty)")
        case ImageBlock(uri=uri):
            return clip(f"[image {uri}]", limit)
        case ProviderItem(provider=provider, type=kind, json=text):
            return clip(f"[{provider} {kind}] {text}", limit)
    return "(empty block)"


def entry_summary(entry: Entry, limit: int) -> str:
    parts = [block_summary(b, limit) for b in entry.content]
    return clip("  ".join(parts), limit) if len(parts) > 1 else "".join(parts)


def entry_rows(entries: Sequence[Entry]) -> list[list[str]]:
    """`#version  role  id  tokens  summary` rows; the summary gets what is left of the line."""
    columns = [[f"#{e.version}", role(e), short(e.id), f"{e.token_count:,}"] for e in entries]
    used = sum(max((len(row[i]) for row in columns), default=0) + 2 for i in range(4))
    limit = width() - used
    return [[*row, entry_summary(e, limit)] for row, e in zip(columns, entries, strict=True)]


def block_in_full(block: ContentBlock) -> str:
    match block:
        case TextBlock(text=text):
            return text
        case ThinkingBlock(thinking=thinking):
            return "(thinking)\n" + thinking
        case ToolCallBlock(id=call_id, name=name, arguments_json=arguments_json):
            try:
                arguments = pretty_json(arguments_json)
            except ValueError:
                arguments = arguments_json
            return f"→ {name} (call {call_id})\n{arguments}"
        case ToolResultBlock(tool_call_id=call_id, content=content, is_error=is_error):
            error = " (error)" if is_error else ""
            return f"← result of {call_id}{error}\n{content}"
        case ImageBlock(uri=uri, media_type=media_type):
            media = f" ({media_type})" if media_type else ""
            return f"[image {uri}{media}]"
        case ProviderItem(provider=provider, type=kind, json=text):
            return f"[{provider} {kind}, kept verbatim]\n{text}"
    return "(empty block)"


def view_repair(repair: ViewRepair) -> str:
    """One repair of a prompt view, in words."""
    call = repair.tool_call_id
    match repair.kind:
        case "synthetic_result":
            return f"call {call} answered by a synthetic error result ({repair.detail})"
        case "dropped_result":
            return f"result for {call} left out ({repair.detail})"
        case "call_id_rewritten":
            return f"call id {call} shown as {repair.view_tool_call_id}"
        case "leading_user_turn":
            return f"a user turn put first ({repair.detail})"
    return f"{repair.kind} {call} {repair.detail}".strip()


def prune_verb(pruned: PrunedEntry) -> str:
    return "cleared" if pruned.action == PruneAction.HARD_CLEAR else "trimmed"


def prune_action(pruned: PrunedEntry) -> str:
    if pruned.action == PruneAction.HARD_CLEAR:
        return "cleared"
    head, tail = pruned.head_chars or 0, pruned.tail_chars or 0
    return f"trimmed to first {head:,} and last {tail:,} chars"


def guard_action(decision: GuardDecision) -> str:
    """How the tool-result guard shows a result it did not keep whole."""
    if decision.action == "replace":
        shown = f"replaced by a placeholder ({decision.original_chars:,} chars)"
    else:
        shown = (
            f"truncated to first {decision.head_chars:,} and last {decision.tail_chars:,} "
            f"of {decision.original_chars:,} chars"
        )
    return shown + (f" ({decision.reason})" if decision.reason else "")


def echo_compaction(compaction: Compaction) -> None:
    click.echo(
        f"compacted at version {compaction.version} ({compaction.reason}): entries before "
        f"{short(compaction.first_kept_entry_id)} summarised in "
        f"{compaction.summary_tokens:,} tokens"
    )
    click.echo("  summary: " + clip(summary_line(compaction.summary), width() - 11))


def summary_line(summary: str) -> str:
    """The summary's first line of substance: a structured summary's first section
    (`## Goal` then `- ...`) reads as `Goal: ...`."""
    lines = [line.strip() for line in summary.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.startswith("#") and len(lines) > 1:
        return f"{first.lstrip('#').strip()}: {lines[1].removeprefix('- ')}"
    return first + ("…" if len(lines) > 1 else "")


def settings_summary(settings: SessionSettings | None) -> str:
    settings = settings or SessionSettings()
    parts = [f"model {settings.model or ''}"]
    if settings.context_window_tokens:
        parts.append(f"window {settings.context_window_tokens:,}")
    if settings.title:
        parts.append(f"title {settings.title!r}")
    return ", ".join(parts)
