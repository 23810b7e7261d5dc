"""Rolling a summary forward: the previous summary's sections merged with the new ones.

What the user said (their instructions, the identifiers they named, the errors
they reported) is carried from every previous summary, wherever a summariser
put it, and a fact mentioned again moves to the end: it is newer, so bounding
trims it later.
"""

from __future__ import annotations

from collections import Counter

from domain.context.summary.layout import (
    ALL_SECTIONS,
    LISTS,
    NAMED_BY_USER,
    RANGE,
    RAW_HISTORY,
    TALLY,
    USER_INSTRUCTION,
    dedupe,
    is_protected,
    list_line,
    list_name,
    list_values,
    read_entry_line,
    renewed,
    tally_line,
)


def roll(previous: dict[str, list[str]], new: dict[str, list[str]]) -> dict[str, list[str]]:
    """Previous items first, new ones after; the goal keeps the very first request."""
    previous = _protected_in_place(previous)
    merged = {name: list(new.get(name, [])) for name in ALL_SECTIONS}
    first = [i for i in previous.get("Goal", []) if i.startswith("First request:")]
    if not merged["Goal"]:
        merged["Goal"] = list(previous.get("Goal", []))
    elif first:
        # The new entries' own first request is, for the whole session, the latest so far.
        latest = [i.replace("First request:", "Latest request:", 1) for i in merged["Goal"]][-1:]
        merged["Goal"] = first + latest
    if not merged["Next Steps"]:
        merged["Next Steps"] = list(previous.get("Next Steps", []))
    old_progress = previous.get("Progress", [])
    if any(i.startswith("Last reply:") for i in merged["Progress"]):
        old_progress = [i for i in old_progress if not i.startswith("Last reply:")]
    merged["Progress"] = _merge_tallies(dedupe(old_progress + merged["Progress"]))
    merged["Constraints"] = _merge_said(previous.get("Constraints", []) + merged["Constraints"])
    merged["Key Decisions"] = dedupe(previous.get("Key Decisions", []) + merged["Key Decisions"])
    merged["Critical Context"] = _merge_critical(
        previous.get("Critical Context", []) + merged["Critical Context"]
    )
    old_range = next((m for i in previous.get(RAW_HISTORY, []) if (m := RANGE.search(i))), None)
    new_range = RANGE.search(merged[RAW_HISTORY][0]) if merged[RAW_HISTORY] else None
    if old_range and new_range:
        count = int(old_range.group(3)) + int(new_range.group(3))
        merged[RAW_HISTORY][0] = RANGE.sub(
            f"Entries `{old_range.group(1)}` .. `{new_range.group(2)}` ({count} entries)",
            merged[RAW_HISTORY][0],
        )
    return merged


def _protected_in_place(sections: dict[str, list[str]]) -> dict[str, list[str]]:
    """``sections`` with the user's instructions in Constraints and the identifiers and
    errors they stated in Critical Context, wherever a summariser wrote them."""
    moved = {name: [i for i in items if not is_protected(i)] for name, items in sections.items()}
    for item in (i for items in sections.values() for i in items if is_protected(i)):
        entry = read_entry_line(item)
        home = "Constraints" if entry and entry[0] == USER_INSTRUCTION else "Critical Context"
        moved.setdefault(home, []).append(item)
    return moved


def _merge_said(items: list[str]) -> list[str]:
    """The user's words first, then the other items."""
    said, rest = _said_apart(items)
    return said + rest


def _said_apart(items: list[str]) -> tuple[list[str], list[str]]:
    """Lines of the user's words keyed by what was said (a repeated one is kept once, with
    its latest entry, at its latest place), and the other items, deduplicated."""
    said: dict[tuple[str, str], str] = {}
    rest: list[str] = []
    for item in items:
        entry = read_entry_line(item)
        if entry is None:
            rest.append(item)
            continue
        key = (entry[0], entry[2])
        said.pop(key, None)
        said[key] = item
    return list(said.values()), dedupe(rest)


def _merge_tallies(items: list[str]) -> list[str]:
    """One tool-call tally line for the whole range, first; the other items after it."""
    tallies = [m for i in items if (m := TALLY.match(i))]
    if len(tallies) < 2:
        return items
    counts: Counter[str] = Counter()
    for tally in tallies:
        for part in tally.group(4).split(", "):
            name, _, n = part.rpartition(" x")
            if n.isdigit():
                counts[name] += int(n)
    line = tally_line(
        tallies[0].group(1),
        tallies[-1].group(2),
        counts,
        sum(int(t.group(5)) for t in tallies),
    )
    return [line, *(i for i in items if not TALLY.match(i))]


def _merge_critical(items: list[str]) -> list[str]:
    """The identifiers the user named and the errors they reported, then one line per
    other identifier list, then the other errors and notes."""
    lists: dict[str, list[str]] = {name: [] for name in LISTS}
    others: list[str] = []
    for item in items:
        name = list_name(item)
        if name is None:
            others.append(item)
            continue
        lists[name] = renewed(lists[name], list_values(item))
    named = lists.pop(NAMED_BY_USER)
    said, rest = _said_apart(others)
    merged = [list_line(NAMED_BY_USER, named)] if named else []
    merged.extend(said)
    for name, values in lists.items():
        values = [v for v in values if v not in named]
        if values:
            merged.append(list_line(name, values))
    return merged + rest
