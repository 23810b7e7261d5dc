"""What the store can hold: the one rule every string that comes in is checked by.

PostgreSQL text cannot hold NUL; no database, JSON encoder or gRPC message
takes a lone surrogate; an index row has a size limit. A string refused here
is refused the same way whatever the database, before anything is written,
so a write that is accepted can always be projected and read back. Requests
are checked field by field at the door (services.grpc.request_strings);
imported transcripts record by record (services.app.imports), whose numbers
and times are checked here too: a request's come bounded by the protocol, a
file's do not.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from domain.content import MAX_ID_CHARS
from domain.errors import InvalidRequest, quoted

# Every number is stored as (and answered in) a signed 64-bit integer.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# Limits in characters, by the kind of string.
ID_CHARS = MAX_ID_CHARS  # ids, keys, hashes, page tokens: indexed
NAME_CHARS = 256  # names of models, tools, engines, modes; label and metadata keys; requesters
TEXT_CHARS = 65_536  # titles, reasons, instructions, descriptions, label values
# Content (message text, tool output and arguments, summaries, system prompts)
# is bounded by what one gRPC message can carry back: that limit is the server's.
CONTENT = None

# The limit of each string, by the name of its field (in the API and in the
# domain alike); a map's keys and values as "<map field>.key" and "<map
# field>.value". Names not listed are NAME_CHARS.
_KINDS: dict[str, int | None] = {
    **dict.fromkeys(
        (
            "session_id",
            "new_session_id",
            "id",
            "parent_id",
            "entry_id",
            "entry_ids",
            "first_kept_entry_id",
            "tool_call_id",
            "tool_call_ids",
            "idempotency_key",
            "hash",
            "held_hash",
            "view_hash",
            "page_token",
        ),
        ID_CHARS,
    ),
    **dict.fromkeys(
        (
            "title",
            "title_contains",
            "reason",
            "instructions",
            "identifier_instructions",
            "description",
            "path",
            "summarizer_api_base",
            "embedding_api_base",
            "query",  # a recall's words (services.app.recall bounds it further)
            "file_name",
            "labels.value",
            "details.value",
            "abandoned_reason",
        ),
        TEXT_CHARS,
    ),
    **dict.fromkeys(
        (
            "text",
            "thinking",
            "signature",
            "content",
            "arguments_json",
            "parameters_json",
            "json",  # a provider item, an image or document inline among them
            "applied_edits_json",
            "summary",
            "error_text",
            "uri",  # an image may come inline, as a data: URI
            "metadata.value",
        ),
        CONTENT,
    ),
}


def limit_of(name: str, content_chars: int) -> int:
    """The most characters a string of field ``name`` may have; ``content_chars`` is
    the server's bound on content."""
    kind = _KINDS.get(name, NAME_CHARS)
    return content_chars if kind is CONTENT else kind


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_storable(value: str, field: str, limit: int | None, *, utf8: bool = False) -> None:
    """Refuses ``value`` unless every store can hold it as ``field``: no NUL, no lone
    surrogate, at most ``limit`` characters (None: no limit of its own). ``utf8``:
    the string was decoded from UTF-8, so it holds no surrogate (a search of a long
    text for them costs milliseconds)."""
    if limit is not None and len(value) > limit:
        raise InvalidRequest(f"{field} is {len(value):,} characters; send at most {limit:,}")
    if "\x00" in value:
        raise InvalidRequest(
            f"{field} {quoted(value)} contains a NUL character (\\x00), which no store can "
            "hold; remove it"
        )
    # Strings decoded from JSON may carry an escaped lone surrogate ("\ud800").
    if not utf8 and not value.isascii() and _SURROGATE.search(value):
        raise InvalidRequest(
            f"{field} {quoted(value)} contains a lone surrogate, which is not UTF-8 text; "
            "send valid UTF-8"
        )


def check_tree(value: object, path: str, content_chars: int, name: str = "") -> None:
    """check_storable for every string in a domain value (dataclasses, mappings and
    sequences of them), each with the limit of the field that holds it; and every
    number and time in it within what the store and the API can carry."""
    if isinstance(value, str):
        check_storable(value, path, limit_of(name, content_chars))
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidRequest(f"{path} is {value}, beyond a 64-bit integer; send a smaller one")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequest(f"{path} is {value}; send a finite number")
    elif isinstance(value, datetime):
        _check_time(value, path)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            inner = f"{path}.{field.name}" if path else field.name
            check_tree(getattr(value, field.name), inner, content_chars, field.name)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_tree(key, f"{path} key", content_chars, f"{name}.key")
            check_tree(item, f"{path}[{quoted(key)}]", content_chars, f"{name}.value")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_tree(item, f"{path}[{index}]", content_chars, name)


def _check_time(moment: datetime, path: str) -> None:
    """A time every store and the API's Timestamp can hold: in UTC, years 1 to 9999."""
    try:
        moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidRequest(
            f"{path} {moment.isoformat()} is outside years 1 to 9999 in UTC; send a real time"
        ) from None
