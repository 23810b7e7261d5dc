"""A plain OpenAI chat ``messages`` array: a JSON array, ``{"messages": [...]}``,
or one message per line. Messages get ids ``m1``, ``m2``, ... unless they
carry an ``id``; they carry no times, so the import's time stands for them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from domain.content import Block, Entry, ImageRef, Role, TextBlock, ToolCall, ToolResult
from services.adapters.transcripts.ir import (
    RECORD_TYPE_KEY,
    Record,
    Transcript,
    TranscriptError,
    has_substance,
    json_lines,
    parse_time,
    record_at,
)

_ROLES = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "tool": Role.TOOL,
}


def read(data: bytes) -> Transcript:
    messages = _messages(data)
    transcript = Transcript(format="openai", lines=len(messages))
    transcript.labels["import.format"] = "openai"
    previous: str | None = None
    for index, (line, message) in enumerate(messages):
        where = line or index + 1
        record_id = str(message.get("id") or f"m{index + 1}")
        with record_at(where):
            entry = _entry(where, index, record_id, message)
        transcript.records.append(Record(where, record_id, previous, entry.timestamp, entry))
        if not transcript.model and isinstance(message.get("model"), str):
            transcript.model = message["model"]
        previous = record_id
    return transcript


def _messages(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise TranscriptError(data[: error.start].count(b"\n") + 1, "not UTF-8 text") from None
    except json.JSONDecodeError as error:
        if data.lstrip().startswith(b"["):
            raise TranscriptError(error.lineno, f"not valid JSON ({error.msg})") from None
        return json_lines(data)  # one message per line
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if not isinstance(value, list):
        raise TranscriptError(1, "expected a JSON array of messages or an object with 'messages'")
    lines = _line_numbers(data, len(value))
    result = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise TranscriptError(lines[index], f"messages[{index}] is not an object")
        result.append((lines[index], message))
    return result


def _line_numbers(data: bytes, count: int) -> list[int]:
    """The line each top-level message starts on (best effort: pretty-printed or one per line)."""
    decoder = json.JSONDecoder()
    text = data.decode("utf-8")
    start = text.find("[", text.find("messages") if text.lstrip().startswith("{") else 0)
    lines: list[int] = []
    position = start + 1
    for _ in range(count):
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        lines.append(text.count("\n", 0, position) + 1)
        try:
            _, position = decoder.raw_decode(text, position)
        except ValueError:
            break
    return lines + [0] * (count - len(lines))


def _entry(line: int, index: int, record_id: str, message: Mapping[str, Any]) -> Entry:
    where = f"messages[{index}]"
    role_name = message.get("role")
    if role_name not in _ROLES:
        raise TranscriptError(
            line, f"{where}: role {role_name!r} is not system, user, assistant or tool"
        )
    role = _ROLES[role_name]
    content: list[Block] = []
    raw = message.get("content")
    if role is Role.TOOL:
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise TranscriptError(line, f"{where}: a tool message needs its 'tool_call_id'")
        content.append(ToolResult(call_id, _text(raw)))
    else:
        content.extend(_parts(line, where, raw))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not call.get("id") or not function.get("name"):
                raise TranscriptError(line, f"{where}: a tool call needs an id and function.name")
            arguments = function.get("arguments") or "{}"
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                raise TranscriptError(
                    line, f"{where}: tool call {call['id']!r} arguments are not JSON"
                ) from None
            if not isinstance(parsed, dict):
                raise TranscriptError(
                    line, f"{where}: tool call {call['id']!r} arguments must be a JSON object"
                )
            content.append(
                ToolCall(
                    str(call["id"]), str(function["name"]), json.dumps(parsed, ensure_ascii=False)
                )
            )
    blocks = tuple(content)
    custom_type = ""
    if not has_substance(blocks):
        blocks, role, custom_type = (
            (TextBlock(f"[{role_name} message without content]"),),
            Role.CUSTOM,
            "empty_message",
        )
    metadata = {RECORD_TYPE_KEY: "message"}
    if isinstance(message.get("name"), str):
        metadata["name"] = message["name"]
    return Entry(
        id=record_id,
        parent_id=None,
        timestamp=parse_time(message.get("timestamp"), line),
        role=role,
        content=blocks,
        custom_type=custom_type,
        metadata=MappingProxyType(metadata),
    )


def _parts(line: int, where: str, raw: Any) -> list[Block]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [TextBlock(raw)]
    if not isinstance(raw, list):
        raise TranscriptError(line, f"{where}: content must be a string, a list of parts or null")
    parts: list[Block] = []
    for part in raw:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append(TextBlock(str(part.get("text", ""))))
        elif kind == "image_url":
            url = part.get("image_url")
            parts.append(ImageRef(str(url.get("url") if isinstance(url, dict) else url)))
        else:
            parts.append(TextBlock(f"[{kind} part]"))
    return parts


def _text(raw: Any) -> str:
    if isinstance(raw, list):
        return "\n".join(str(p.get("text", "")) for p in raw if isinstance(p, dict))
    return "" if raw is None else str(raw)
