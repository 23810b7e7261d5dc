"""The sealed stored forms of entries and of content-bearing value objects.

An entry's record keeps its structure in the clear and its blocks cut to
skeletons (kind, and the ids a view needs to pair tool calls with results);
the blocks and metadata are sealed under the entry's key. Other values keep
their fields but those named as content, which are sealed under the event's
key (a snapshot's, in a snapshot). Read without their key (erased), they come back as placeholders
(domain.erasure) in the same shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from domain.erasure import ERASED_METADATA, ERASED_TEXT
from services.adapters.sealing import ENTRY, KeyMissing, KeyScope

# Positions in Entry.to_record().
ID, BLOCKS, METADATA = 0, 4, 9


def _skeleton(block: list[Any]) -> list[Any]:
    kind = block[0]
    if kind == "tool_call":
        return [kind, block[1], block[2]]  # id and name: a view pairs the call with its result
    if kind == "tool_result":
        return [kind, block[1], block[3]]  # the call it answers, and whether it failed
    return [kind]


def _placeholder(skeleton: list[Any]) -> list[Any]:
    kind = skeleton[0]
    if kind == "tool_call":
        return [kind, skeleton[1], skeleton[2], "{}"]
    if kind == "tool_result":
        return [kind, skeleton[1], ERASED_TEXT, skeleton[2]]
    if kind == "thinking":
        return [kind, ERASED_TEXT, ""]
    return ["text", ERASED_TEXT]  # text, and images, whose reference is content too


def seal_entry(scope: KeyScope, record: list[Any]) -> dict[str, Any]:
    skeleton = list(record)
    skeleton[BLOCKS] = [_skeleton(b) for b in record[BLOCKS]]
    skeleton[METADATA] = None
    content = orjson.dumps([record[BLOCKS], record[METADATA]])
    return {"r": skeleton, "s": scope.seal(ENTRY, record[ID], content)}


def open_entry(scope: KeyScope, data: Mapping[str, Any]) -> list[Any]:
    """The entry's record, with its content, or with placeholders when it was erased."""
    record = list(data["r"])
    try:
        record[BLOCKS], record[METADATA] = orjson.loads(scope.open(ENTRY, record[ID], data["s"]))
    except KeyMissing:
        return unopened_entry(data)
    return record


def unopened_entry(data: Mapping[str, Any]) -> list[Any]:
    """The entry's record with its structure only (ids, role, counts, tool call ids),
    placeholders where the content is: for readers that never need the content."""
    record = list(data["r"])
    record[BLOCKS] = [_placeholder(b) for b in record[BLOCKS]]
    record[METADATA] = dict(ERASED_METADATA)
    return record


def seal_fields(scope: KeyScope, data: dict[str, Any], content: tuple[str, ...]) -> dict[str, Any]:
    """``data`` (a fresh dict, changed here) with the ``content`` fields sealed."""
    sealed = {name: data.pop(name) for name in content if name in data}
    return {"d": data, "s": scope.seal(scope.own_kind, "", orjson.dumps(sealed))}


def open_fields(
    scope: Callable[[], KeyScope], data: Mapping[str, Any], erased: Mapping[str, Any]
) -> tuple[dict[str, Any], bool]:
    """The fields, and whether they were erased (then ``erased`` fills the content).

    A dict that is not ``{"d", "s"}`` was stored before sealing and is read as it is."""
    if set(data) != {"d", "s"}:
        return dict(data), False
    try:
        opened = scope()
        return {**data["d"], **orjson.loads(opened.open(opened.own_kind, "", data["s"]))}, False
    except KeyMissing:
        return {**data["d"], **erased}, True
