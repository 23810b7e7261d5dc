"""Rolling a summary forward: the previous summary's sections merged with the new ones."""

from __future__ import annotations

from collections import Counter

from domain.context.summary.layout import (
    ALL_SECTIONS,
    BACKTICK_ITEM,
    LISTS,
    RANGE,
    RAW_HISTORY,
    TALLY,
    dedupe,
    list_line,
    list_name,
    tally_line,
)


def roll(previous: dict[str, list[str]], new: dict[str, list[str]]) -> dict[str, list[str]]:
    """Previous items first, new ones after; the goal keeps the very first request."""
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
    for name in ("Constraints", "Key Decisions"):
        merged[name] = dedupe(previous.get(name, []) + merged[name])
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
    """Files, identifiers and commands merged into one line each; then errors and notes."""
    lists: dict[str, list[str]] = {name: [] for name in LISTS}
    rest: list[str] = []
    for item in items:
        name = list_name(item)
        if name is None:
            rest.append(item)
            continue
        found = BACKTICK_ITEM.findall(item.partition(": ")[2])
        lists[name] = [v for v in lists[name] if v not in found] + found
    merged = [
        list_line(name, values[-LISTS[name][1] :]) for name, values in lists.items() if values
    ]
    return merged + dedupe(rest)
