"""Bounding a summary: its least useful details dropped until it fits its size."""

from __future__ import annotations

from collections.abc import Callable

from domain.context.summary.layout import (
    BACKTICK_ITEM,
    RAW_HISTORY,
    TALLY,
    list_line,
    list_name,
    render,
)

_TRIMMABLE = ("Progress", "Critical Context", "Key Decisions", "Constraints", RAW_HISTORY)


def bounded(sections: dict[str, list[str]], max_chars: int, fits: Callable[[str], bool]) -> str:
    """The rendered summary, its oldest details dropped until it fits the bound."""
    text = render(sections)
    while not (len(text) <= max_chars and fits(text)):
        trimmable = [n for n in _TRIMMABLE if _trim_one(sections, n, dry=True)]
        if not trimmable:
            break
        longest = max(trimmable, key=lambda n: sum(map(len, sections[n])))
        _trim_one(sections, longest)
        text = render(sections)
    while not (len(text) <= max_chars and fits(text)) and len(text) > 200:
        text = text[: int(len(text) * 0.9)].rsplit("\n", 1)[0] + "\n- …\n"
    return text


def _trim_one(sections: dict[str, list[str]], name: str, *, dry: bool = False) -> bool:
    """Drop the least useful item of one section: the oldest detail, never a heading line
    (the tally, the raw history range, the identifier lists as a whole)."""
    items = sections[name]
    if name in ("Progress", RAW_HISTORY):
        if len(items) < 2 or (name == "Progress" and len(items) < 3 and TALLY.match(items[0])):
            return False
        index = 1 if TALLY.match(items[0]) or name == RAW_HISTORY else 0
        if not dry:
            del items[index]
        return True
    if name == "Critical Context":
        details = [i for i, item in enumerate(items) if list_name(item) is None]
        if details:
            if not dry:
                del items[details[0]]
            return True
        longest = max(range(len(items)), key=lambda i: len(items[i]), default=None)
        if longest is None:
            return False
        found = BACKTICK_ITEM.findall(items[longest])
        if not dry:
            if len(found) > 1:
                items[longest] = list_line(str(list_name(items[longest])), found[1:])
            else:
                del items[longest]
        return True
    if not items:
        return False
    if not dry:
        del items[0]
    return True
