"""The intermediate representation every transcript reader produces.

A transcript is a list of records in file order, each with an id and a parent
id (a file may be a tree: pi sessions branch in place). A record is either an
entry for the session (a message, or a custom entry for anything else the
file holds: model and thinking-level changes, runtime notes, turns without
content) or a compaction. Readers keep what the store cannot model in the
entries' metadata, so a session can be written back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from domain.content import Block, Entry, ThinkingBlock, ToolResult
from domain.errors import InvalidRequest
from domain.storable import INT64_MAX

FORMATS = ("pi", "openclaw", "claude-code", "openai")
# Metadata keys that carry a record's original fields (JSON), for export.
ORIGINAL_KEY = "import.original"
# Set on entries that stand for a record the store has no entry kind for.
RECORD_TYPE_KEY = "import.type"


class TranscriptError(InvalidRequest):
    """A file that cannot be imported: says which line and what is wrong."""

    reason = "invalid_transcript"

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line else message)


@dataclass(frozen=True)
class ImportedCompaction:
    summary: str
    first_kept_entry_id: str
    tokens_before: int = 0
    details: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Record:
    line: int
    id: str
    parent_id: str | None
    timestamp: datetime | None
    entry: Entry | None = None
    compaction: ImportedCompaction | None = None
    # A tool result the exporter wrote for an abandoned call: imported as an
    # abandonment again, not as the tool's answer.
    abandoned_reason: str | None = None


@dataclass
class Transcript:
    format: str
    session_id: str = ""
    started_at: datetime | None = None
    model: str = ""
    title: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    lines: int = 0


def parse_time(value: Any, line: int, name: str = "timestamp") -> datetime | None:
    """An ISO 8601 string or epoch milliseconds, as an aware UTC time."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000, UTC)
        if isinstance(value, str):
            moment = datetime.fromisoformat(value)
            # In UTC now: an offset can carry a time past year 1 or 9999 there.
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        pass
    raise TranscriptError(line, f"{name} {value!r} is not a time (ISO 8601 or epoch ms)")


def token_count(value: Any, line: int, name: str) -> int:
    """A count of tokens as a file writes it (absent: 0), or a refusal naming it."""
    if value is None:
        return 0
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        raise TranscriptError(line, f"{name} {value!r} is not a token count (a whole number)")
    return value


@contextmanager
def record_at(line: int) -> Iterator[None]:
    """Reads a record whose fields may not have the types its format gives them: a
    field of another type (a number for a list, a string for an object) or JSON
    nested deeper than Python reads is refused with the record's line."""
    try:
        yield
    except TranscriptError:
        raise
    except RecursionError:
        raise TranscriptError(line, "the record nests JSON too deeply to read") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError) as error:
        raise TranscriptError(
            line, f"a field of the record does not have its format's type ({error})"
        ) from None


def format_time(moment: datetime) -> str:
    """As pi writes times: UTC, milliseconds, Z."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def json_lines(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The file's non-blank lines as (line number, object); refuses anything else."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise TranscriptError(line, f"not UTF-8 text ({error.reason})") from None
    records: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as error:
            raise TranscriptError(number, f"not valid JSON ({error})") from None
        if not isinstance(value, dict):
            raise TranscriptError(number, f"a JSON object was expected, not {type(value).__name__}")
        records.append((number, value))
    if not records:
        raise TranscriptError(0, "the file is empty")
    return records


def require(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], line: int) -> Any:
    value = record.get(key)
    if not isinstance(value, kind):
        wanted = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        got = "missing" if value is None else f"a {type(value).__name__}"
        raise TranscriptError(line, f"{key!r} must be a {wanted}, but is {got}")
    return value


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def has_substance(content: tuple[Block, ...]) -> bool:
    """Whether the store would take these blocks as an entry's content."""
    for block in content:
        if isinstance(block, ToolResult):
            return True
        text = block.thinking if isinstance(block, ThinkingBlock) else getattr(block, "text", None)
        if text is None or text.strip():
            return True
    return False


def sniff(data: bytes, file_name: str = "") -> str:
    """The format of a file, from its first record."""
    head = data[:65536].lstrip()
    if head.startswith(b"["):
        return "openai"
    if head.startswith(b"{") and b'"messages"' in head[:4096] and b"\n{" not in head[:4096]:
        return "openai"
    first_line = head.split(b"\n", 1)[0]
    try:
        first = json.loads(first_line)
    except ValueError:
        raise TranscriptError(1, "not valid JSON; cannot tell the file's format") from None
    if isinstance(first, dict):
        if first.get("type") == "session":
            return "openclaw" if b"openclaw" in data[:200_000] else "pi"
        if "parentUuid" in first or "sessionId" in first or first.get("type") == "summary":
            return "claude-code"
        if isinstance(first.get("role"), str) and "message" not in first:
            return "openai"  # one chat message a line
    raise TranscriptError(
        1, "cannot tell the file's format; name it (pi, openclaw, claude-code or openai)"
    )
