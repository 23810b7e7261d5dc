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
from collections import deque
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
        # A cut is at least the characters it takes from the text: while the user's words
        # cut add up to less than the characters over, the text is still over, and the
        # next of them would go anyway, with no need to render and count the text again.
        if not removed and not _trim_protected(sections, len(text) - max_chars):
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


def _trim_protected(sections: dict[str, list[str]], at_least: int) -> int:
    """Drop the user's words, each time the oldest of the kind that takes most room, until
    ``at_least`` characters are cut (one at least); the characters the first one cut, 0
    when none is left."""
    said = _Said(sections)
    kind = said.largest()
    first = cut = said.drop(kind) if kind else 0
    removed = first
    while cut and removed < at_least:
        kind = said.largest()
        # What a named line's first value cuts is known once the line is read again (it
        # may even grow, written anew): that one goes first in a call of its own.
        if kind is None or said.rereads(kind):
            break
        cut = said.drop(kind)
        removed += cut
    said.write_back()
    return first


class _Said:
    """The user's words in Constraints and Critical Context, dropped one at a time as
    :func:`_trim_protected` drops them.

    What each kind holds is read once and then kept up to date: a history with thousands
    of them would read them all again for each one dropped.
    """

    def __init__(self, sections: dict[str, list[str]]) -> None:
        self.sections = sections
        critical = sections["Critical Context"]
        # Each kind's items, oldest first, by their index in their section, and their size.
        self.items = {
            "Constraints": deque(
                i for i, item in enumerate(sections["Constraints"]) if is_protected(item)
            ),
            "Critical Context": deque(
                i
                for i, item in enumerate(critical)
                if is_protected(item) and list_name(item) != NAMED_BY_USER
            ),
        }
        self.sizes = {
            name: sum(len(sections[name][i]) for i in found) for name, found in self.items.items()
        }
        self.dropped: dict[str, set[int]] = {name: set() for name in self.items}
        # The lines of identifiers the user named. The first loses its values one by one:
        # they are read from it once, and it is written again with the rest when done.
        self.named = deque(i for i, item in enumerate(critical) if list_name(item) == NAMED_BY_USER)
        self.values: deque[str] | None = None
        self.named_chars = len(critical[self.named[0]]) if self.named else 0

    def largest(self) -> str | None:
        """The kind that takes most room (the first of equals), None when none is left."""
        sizes = {**self.sizes, NAMED_BY_USER: self.named_chars if self.named else 0}
        sizes = {name: size for name, size in sizes.items() if size}
        return max(sizes, key=lambda n: sizes[n]) if sizes else None

    def rereads(self, kind: str) -> bool:
        return kind == NAMED_BY_USER and self.values is None

    def drop(self, kind: str) -> int:
        """Drop the oldest of ``kind``; the characters cut."""
        if kind == NAMED_BY_USER:
            return self._drop_named()
        index = self.items[kind].popleft()
        self.dropped[kind].add(index)
        size = len(self.sections[kind][index])
        self.sizes[kind] -= size
        return size + _ITEM_FRAME

    def _drop_named(self) -> int:
        """As :func:`_drop_oldest_value`, on the first named line."""
        index = self.named[0]
        before = self.named_chars
        if self.values is None:
            self.values = deque(list_values(self.sections["Critical Context"][index]))
            if len(self.values) > 1:
                # As the line is written again: the first value gone, the rest as listed.
                self.values.popleft()
                self.named_chars = len(list_line(NAMED_BY_USER, list(self.values)))
                return before - self.named_chars
        if len(self.values) <= 1:
            self.named.popleft()
            self.dropped["Critical Context"].add(index)
            self.values = None
            if self.named:
                self.named_chars = len(self.sections["Critical Context"][self.named[0]])
            return before + _ITEM_FRAME
        # "`value`, " leaves a line written by list_line.
        self.named_chars -= len(self.values.popleft()) + 4
        return before - self.named_chars

    def write_back(self) -> None:
        critical = self.sections["Critical Context"]
        if self.values is not None:
            critical[self.named[0]] = list_line(NAMED_BY_USER, list(self.values))
        for name, dropped in self.dropped.items():
            items = self.sections[name]
            items[:] = [item for i, item in enumerate(items) if i not in dropped]


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
