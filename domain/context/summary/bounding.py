"""Bounding a summary: details dropped until it fits its size, the user's own words last.

Two tiers. Incidental details go first, the oldest of the longest section at a
time: tool progress lines, tool errors and notes, decisions, soft constraints,
the newest-kept lists of files, identifiers and commands, raw-history pointers.
Only when all of them are gone and the summary still does not fit are the
user's words trimmed - instructions, the identifiers they named, the errors
they reported - oldest first. Heading lines (the goal, the next step, the
tool-call tally, the raw-history range) stay; if even they do not fit, the text
is cut.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from domain.context.summary.layout import (
    NAMED_BY_USER,
    RAW_HISTORY,
    TALLY,
    is_protected,
    list_line,
    list_name,
    list_values,
    render,
)

_INCIDENTAL = ("Progress", "Critical Context", "Key Decisions", "Constraints", RAW_HISTORY)
# The characters one item costs besides its text: "- " and the newline.
_ITEM_FRAME = 3


def bounded(
    sections: dict[str, list[str]],
    max_chars: int,
    count: Callable[[str], int] | None = None,
    max_tokens: int | None = None,
) -> str:
    """The rendered summary, within ``max_chars`` and (by ``count``) ``max_tokens``."""
    text = render(sections)
    while (excess := _excess(text, max_chars, count, max_tokens)) > 0:
        # Incidental details in batches sized by the excess; the user's words one by one,
        # so none goes that the bound did not need.
        removed = 0
        while removed < excess and (cut := _trim_incidental(sections)):
            removed += cut
        if not removed and not _trim_protected(sections):
            break
        text = render(sections)
    while _excess(text, max_chars, count, max_tokens) > 0 and len(text) > 200:
        text = text[: int(len(text) * 0.9)].rsplit("\n", 1)[0] + "\n- …\n"
    return text


def _excess(
    text: str, max_chars: int, count: Callable[[str], int] | None, max_tokens: int | None
) -> int:
    """Roughly how many characters ``text`` is over its bound (at least 1 when over)."""
    over = len(text) - max_chars
    if count is not None and max_tokens is not None:
        tokens = count(text)
        if tokens > max_tokens:
            over = max(over, math.ceil(len(text) * (tokens - max_tokens) / tokens))
    return over


def _trim_incidental(sections: dict[str, list[str]]) -> int:
    """Drop the oldest incidental detail of the section that has most of them; the
    characters dropped, 0 when none is left."""
    candidates = {name: _incidental(name, sections[name]) for name in _INCIDENTAL}
    candidates = {name: found for name, found in candidates.items() if found}
    if not candidates:
        return 0
    name = max(candidates, key=lambda n: sum(len(sections[n][i]) for i in candidates[n]))
    items = sections[name]
    index = candidates[name][0]
    if list_name(items[index]):
        return _drop_oldest_value(items, index)
    return len(items.pop(index)) + _ITEM_FRAME


def _incidental(name: str, items: list[str]) -> list[int]:
    """The indexes of the items of a section that may be trimmed, oldest first."""
    free = [i for i, item in enumerate(items) if not is_protected(item)]
    if name == "Progress":
        # The tally stays, and the latest detail with it.
        free = [i for i in free if not TALLY.match(items[i])][:-1]
    elif name == RAW_HISTORY:
        free = free[1:]
    elif name == "Critical Context":
        # The longest identifier list loses its oldest value, unless the single details
        # (errors, notes) take more room together than it does.
        details = [i for i in free if list_name(items[i]) is None]
        lists = [i for i in free if list_name(items[i])]
        longest = max(lists, key=lambda i: len(items[i]), default=None)
        detail_chars = sum(len(items[i]) for i in details)
        if longest is not None and len(items[longest]) >= detail_chars:
            return [longest]
        return details
    return free


def _trim_protected(sections: dict[str, list[str]]) -> int:
    """Drop the oldest of the user's words from the kind that takes most room."""
    constraints = sections["Constraints"]
    critical = sections["Critical Context"]
    said = {
        "Constraints": [i for i, item in enumerate(constraints) if is_protected(item)],
        "Critical Context": [
            i
            for i, item in enumerate(critical)
            if is_protected(item) and list_name(item) != NAMED_BY_USER
        ],
    }
    named = next((i for i, item in enumerate(critical) if list_name(item) == NAMED_BY_USER), None)
    sizes = {name: sum(len(sections[name][i]) for i in found) for name, found in said.items()}
    if named is not None:
        sizes[NAMED_BY_USER] = len(critical[named])
    sizes = {name: size for name, size in sizes.items() if size}
    if not sizes:
        return 0
    largest = max(sizes, key=lambda n: sizes[n])
    if largest == NAMED_BY_USER:
        assert named is not None
        return _drop_oldest_value(critical, named)
    items = sections[largest]
    return len(items.pop(said[largest][0])) + _ITEM_FRAME


def _drop_oldest_value(items: list[str], index: int) -> int:
    """Drop the first (oldest) value of the list line at ``index``; the line goes with its
    last value."""
    name = list_name(items[index])
    values = list_values(items[index])
    before = len(items[index])
    if name is None or len(values) <= 1:
        return len(items.pop(index)) + _ITEM_FRAME
    items[index] = list_line(name, values[1:])
    return before - len(items[index])
