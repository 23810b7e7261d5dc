"""The summary's text: its sections, the shapes of its structured lines, rendering and parsing.

A summary is markdown: one ``## Section`` heading per section, each followed by
``- item`` lines. Some lines have a fixed shape that rolling and bounding read
back (the tool-call tally, the raw-history range, the identifier lists), so
those shapes are written and matched here, in one place.
"""

from __future__ import annotations

import re
from collections import Counter

from domain.settings import IDENTIFIER_POLICIES

__all__ = ["IDENTIFIER_POLICIES"]  # re-exported: the summary validates the policy it is given

SECTIONS = ("Goal", "Constraints", "Progress", "Key Decisions", "Next Steps", "Critical Context")
RAW_HISTORY = "Raw History"
ALL_SECTIONS = (*SECTIONS, RAW_HISTORY)
DEFAULT_MAX_CHARS = 12_000
# One line of a summary is never longer than this.
ITEM_CHARS = 240

TALLY = re.compile(r"^Entries `([^`]+)` \.\. `([^`]+)`: (\d+) tool calls \((.*)\); (\d+) failed$")
RANGE = re.compile(r"Entries `([^`]+)` \.\. `([^`]+)` \((\d+) entries\)")
BACKTICK_ITEM = re.compile(r"`([^`]+)`")

# What the user said that every roll keeps and bounding trims last ("protected" lines):
# their instructions (in Constraints), the identifiers they named and the errors they
# reported (in Critical Context).
USER_INSTRUCTION = "User instruction"
NAMED_BY_USER = "Named by the user"
USER_ERROR = "Error reported by the user"
_ENTRY_LINE = re.compile(rf"^({USER_INSTRUCTION}|{USER_ERROR}) \(entry (.*?)\): (.+)$")

# Critical Context lines that list identifiers: (separator, how many of the newest are
# kept; None: all of them, within the summary's bound).
LISTS: dict[str, tuple[str, int | None]] = {
    NAMED_BY_USER: (", ", None),
    "Files": (", ", 25),
    "Identifiers": (", ", 25),
    "Commands": ("; ", 8),
}


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def renew(items: dict[str, str], key: str, value: str) -> None:
    """Set ``key``, moving it last: it is the newest mention."""
    items.pop(key, None)
    items[key] = value


def renewed(values: list[str], new: list[str]) -> list[str]:
    """``values`` with ``new`` ones last, each once: the newest mentions last."""
    return [v for v in values if v not in new] + dedupe(new)


def tally_line(first: str, last: str, counts: Counter[str], failed: int) -> str:
    tally = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items(), key=_by_count))
    total = sum(counts.values())
    return f"Entries `{first}` .. `{last}`: {total} tool calls ({tally}); {failed} failed"


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def list_line(name: str, values: list[str]) -> str:
    """A Critical Context list line: ``Files: `a`, `b```, the newest values last."""
    separator, keep = LISTS[name]
    return f"{name}: " + separator.join(f"`{v}`" for v in values[-keep if keep else 0 :])


def list_name(item: str) -> str | None:
    """The list an item is (``Files``, ``Identifiers``, ...), or None for any other line."""
    name, _, values = item.partition(": ")
    return name if name in LISTS and values.startswith("`") else None


def list_values(item: str) -> list[str]:
    return BACKTICK_ITEM.findall(item.partition(": ")[2])


def entry_line(kind: str, entry_id: str, text: str) -> str:
    """``User instruction (entry u7): Never push to main.``"""
    return f"{kind} (entry {entry_id or '?'}): {text}"


def read_entry_line(item: str) -> tuple[str, str, str] | None:
    """(kind, entry id, text) of a user instruction or error line; None for any other."""
    match = _ENTRY_LINE.match(item)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def is_protected(item: str) -> bool:
    return read_entry_line(item) is not None or list_name(item) == NAMED_BY_USER


def render(sections: dict[str, list[str]]) -> str:
    parts = []
    for name in ALL_SECTIONS:
        items = sections.get(name) or ["(none)"]
        parts.append(f"## {name}\n" + "\n".join(f"- {i}" for i in items))
    return "\n\n".join(parts) + "\n"


def parse_summary(text: str) -> dict[str, list[str]]:
    """The ``- item`` lines under each ``## Section`` of a summary written here."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif line.startswith("- ") and current is not None:
            if line[2:] != "(none)":
                current.append(line[2:])
        elif line.strip() and current is not None:
            current.append(line.strip())
    return sections
