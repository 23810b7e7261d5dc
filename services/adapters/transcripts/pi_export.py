"""Writing a session as a pi session file (JSONL, version 3).

Entries imported from pi files are written back as they were read (their
metadata keeps what the store has no field for); other entries are written as
pi would have: user, assistant and toolResult messages, and custom records
for system and custom entries. Abandoned tool calls become error results
marked ``details.synthetic``, which the importer reads back as an
abandonment. Parents follow the session's order, as the session is linear.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from domain.compaction import Compaction
from domain.compaction_events import CompactionRecorded, CompactionRedone, CompactionUndone
from domain.content import (
    Entry,
    Role,
    TextBlock,
)
from domain.session import SessionEvent
from domain.session_events import EntriesAppended, EntryRetracted, Started, ToolCallsAbandoned
from services.adapters.transcripts.ir import ORIGINAL_KEY, dumps, format_time
from services.adapters.transcripts.pi_content import SYNTHETIC, pi_content

_ROLES = {Role.USER: "user", Role.ASSISTANT: "assistant", Role.TOOL: "toolResult"}


def export_lines(session_id: str, events: Iterable[SessionEvent]) -> Iterator[str]:
    """The session's records, one JSON text per line (without newlines).

    A pi file cannot take a compaction back: compactions undone by the last
    event are left out, so the file's latest compaction is the one in force. A
    retracted entry becomes a branch of its own: what follows it hangs from the
    entry before it."""
    events = list(events)
    undone = _undone_compactions(events)
    parent: str | None = None
    parents: dict[str, str | None] = {}
    for event in events:
        match event:
            case Started():
                yield _header(session_id, event)
            case EntriesAppended():
                for entry in event.entries:
                    for record in _entry_records(entry, parent):
                        parents[record["id"]] = parent
                        parent = record["id"]
                        yield dumps(record)
            case EntryRetracted():
                parent = parents.get(event.entry_id, parent)
            case ToolCallsAbandoned():
                for record in _abandoned_records(event, parent):
                    parent = record["id"]
                    yield dumps(record)
            case CompactionRecorded() if event.originator_version not in undone:
                record = _compaction_record(
                    event.compaction, event.timestamp, parent, event.originator_version
                )
                parent = record["id"]
                yield dumps(record)
            case _:
                # Settings, system prompts, prunes and the context engine's own
                # records have no place in a pi file.
                continue


def _undone_compactions(events: Sequence[SessionEvent]) -> set[int]:
    """Versions of the compactions no longer in force after the last event."""
    recorded: list[int] = []
    in_force: list[int] = []
    for event in events:
        if isinstance(event, CompactionRecorded):
            recorded.append(event.originator_version)
            in_force.append(event.originator_version)
        elif isinstance(event, CompactionUndone):
            in_force = [v for v in in_force if v < event.compaction_version]
        elif isinstance(event, CompactionRedone):
            in_force += event.compaction_versions
    return set(recorded) - set(in_force)


def _header(session_id: str, started: Started) -> str:
    labels = started.settings.labels
    header: dict[str, Any] = {}
    if "import.header" in labels:
        try:
            header = json.loads(labels["import.header"])
        except ValueError:
            header = {}
    header = {
        "type": "session",
        "version": 3,
        "id": header.get("id") or session_id,
        "timestamp": header.get("timestamp") or format_time(started.timestamp),
        "cwd": header.get("cwd", ""),
        **{
            k: v
            for k, v in header.items()
            if k not in ("type", "version", "id", "timestamp", "cwd")
        },
    }
    if started.parent_session_id:
        header.setdefault("parentSession", started.parent_session_id)
    return dumps(header)


def _time(entry_time: datetime | None, original: Mapping[str, Any]) -> str | None:
    stored = original.get("record", {}).get("timestamp")
    if isinstance(stored, str):
        return stored
    return format_time(entry_time) if entry_time else None


def _entry_records(entry: Entry, parent: str | None) -> list[dict[str, Any]]:
    original: dict[str, Any] = {}
    if ORIGINAL_KEY in entry.metadata:
        try:
            original = json.loads(entry.metadata[ORIGINAL_KEY])
        except ValueError:
            original = {}
    if original:
        kept = original.get("record", {})
        record: dict[str, Any] = {}
        order = kept or {"type": "message", "id": None, "parentId": None}
        for key, value in order.items():
            if key == "id":
                record[key] = entry.id
            elif key == "parentId":
                record[key] = parent
            elif key == "timestamp":
                record[key] = _time(entry.timestamp, original)
            elif key != "message":
                record[key] = value
        record.setdefault("id", entry.id)
        record.setdefault("parentId", parent)
        record.setdefault("timestamp", _time(entry.timestamp, original))
        if "message" in original:
            message = dict(original["message"])
            role = str(message.get("role", ""))
            content = original["content"] if "content" in original else pi_content(entry, role)
            if "content" in message:  # in its place, as read
                record["message"] = {
                    k: content if k == "content" else v for k, v in message.items()
                }
            else:  # read before content kept its place, or a message without content
                ordered: dict[str, Any] = {"role": role}
                if content is not None:
                    ordered["content"] = content
                ordered.update({k: v for k, v in message.items() if k != "role"})
                record["message"] = ordered
        return [record]
    return _native_records(entry, parent)


def _native_records(entry: Entry, parent: str | None) -> list[dict[str, Any]]:
    """An entry appended through the API, as pi would have written it."""
    timestamp = format_time(entry.timestamp) if entry.timestamp else None
    millis = int(entry.timestamp.timestamp() * 1000) if entry.timestamp else None
    role = _ROLES.get(entry.role)
    if role is None:
        text = "\n".join(b.text for b in entry.content if isinstance(b, TextBlock))
        data = {"text": text, "role": entry.role.value, **dict(entry.metadata)}
        return [
            {
                "type": "custom",
                "id": entry.id,
                "parentId": parent,
                "timestamp": timestamp,
                "customType": entry.custom_type or entry.role.value,
                "data": data,
            }
        ]
    if entry.role is Role.TOOL:
        records = []
        for index, result in enumerate(entry.tool_results):
            record_id = entry.id if index == 0 else f"{entry.id}.{index}"
            result_message = {
                "role": "toolResult",
                "toolCallId": result.tool_call_id,
                "toolName": entry.metadata.get("toolName", ""),
                "content": [{"type": "text", "text": result.content}],
                "isError": result.is_error,
                "timestamp": millis,
            }
            records.append(_message_record(record_id, parent, timestamp, result_message))
            parent = record_id
        return records
    message: dict[str, Any] = {"role": role, "content": pi_content(entry, role)}
    if entry.role is Role.ASSISTANT:
        for key in ("provider", "model", "stopReason"):
            if key in entry.metadata:
                message[key] = entry.metadata[key]
        if entry.usage is not None:
            u = entry.usage
            message["usage"] = {
                "input": u.input_tokens,
                "output": u.output_tokens,
                "cacheRead": u.cache_read_tokens,
                "cacheWrite": u.cache_write_tokens,
                "totalTokens": u.input_tokens + u.output_tokens,
            }
    message["timestamp"] = millis
    return [_message_record(entry.id, parent, timestamp, message)]


def _message_record(
    record_id: str, parent: str | None, timestamp: str | None, message: dict[str, Any]
) -> dict[str, Any]:
    return {
        "type": "message",
        "id": record_id,
        "parentId": parent,
        "timestamp": timestamp,
        "message": message,
    }


def _abandoned_records(event: ToolCallsAbandoned, parent: str | None) -> list[dict[str, Any]]:
    entry = event.entry
    timestamp = format_time(entry.timestamp or event.timestamp)
    millis = int((entry.timestamp or event.timestamp).timestamp() * 1000)
    records = []
    for index, result in enumerate(entry.tool_results):
        record_id = entry.id if index == 0 else f"{entry.id}.{index}"
        message = {
            "role": "toolResult",
            "toolCallId": result.tool_call_id,
            "toolName": "",
            "content": [{"type": "text", "text": result.content}],
            "isError": True,
            "details": {"synthetic": SYNTHETIC, "reason": event.reason},
            "timestamp": millis,
        }
        records.append(_message_record(record_id, parent, timestamp, message))
        parent = record_id
    return records


def _compaction_record(
    compaction: Compaction, timestamp: datetime, parent: str | None, version: int
) -> dict[str, Any]:
    details = compaction.details
    record: dict[str, Any] = {
        "type": "compaction",
        "id": details.get("import.id") or f"compaction-{version}",
        "parentId": parent,
        "timestamp": details.get("import.timestamp") or format_time(timestamp),
        "summary": compaction.summary,
        "firstKeptEntryId": compaction.first_kept_entry_id,
        "tokensBefore": compaction.tokens_before,
    }
    if ORIGINAL_KEY in details:
        with contextlib.suppress(ValueError):
            record.update(json.loads(details[ORIGINAL_KEY]))
    return record
