"""The summary's text: its sections, the shapes of its structured lines, rendering and parsing.

A summary is markdown: one ``## Section`` heading per section, each followed by
``- item`` lines. Some lines have a fixed shape that rolling and bounding read
back (the tool-call tally, the raw-history range, the identifier lists), so
those shapes are written and matched here, in one place.
"""

from __future__ import annotations

import re
from collections import Counter

SECTIONS = ("Goal", "Constraints", "Progress", "Key Decisions", "Next Steps", "Critical Context")
RAW_HISTORY = "Raw History"
ALL_SECTIONS = (*SECTIONS, RAW_HISTORY)
DEFAULT_MAX_CHARS = 12_000
# One line of a summary is never longer than this.
ITEM_CHARS = 240
IDENTIFIER_POLICIES = ("preserve", "anonymize", "custom")

TALLY = re.compile(r"^Entries `([^`]+)` \.\. `([^`]+)`: (\d+) tool calls \((.*)\); (\d+) failed$")
RANGE = re.compile(r"Entries `([^`]+)` \.\. `([^`]+)` \((\d+) entries\)")
BACKTICK_ITEM = re.compile(r"`([^`]+)`")

# Critical Context lines that list identifiers: (separator, how many of the newest are kept).
LISTS = {"Files": (", ", 25), "Identifiers": (", ", 25), "Commands": ("; ", 8)}


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def tally_line(first: str, last: str, counts: Counter[str], failed: int) -> str:
    tally = ", ".join(f"{name} x{n}" for name, n in sorted(counts.items(), key=_by_count))
    total = sum(counts.values())
    return f"Entries `{first}` .. `{last}`: {total} tool calls ({tally}); {failed} failed"


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def list_line(name: str, values: list[str]) -> str:
    """A Critical Context list line: ``Files: `a`, `b```."""
    return f"{name}: " + LISTS[name][0].join(f"`{v}`" for v in values)


def list_name(item: str) -> str | None:
    """The list an item is (``Files``, ``Identifiers``, ...), or None for any other line."""
    name, _, values = item.partition(": ")
    return name if name in LISTS and values.startswith("`") else None


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
