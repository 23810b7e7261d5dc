"""The summary's sections, written from the facts gathered from the entries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from domain.content import Entry
from domain.context.summary.anonymize import Identifiers
from domain.context.summary.facts import Facts
from domain.context.summary.layout import (
    ALL_SECTIONS,
    NAMED_BY_USER,
    USER_ERROR,
    USER_INSTRUCTION,
    clip,
    dedupe,
    entry_line,
    list_line,
    tally_line,
)


def sections(
    facts: Facts,
    entries: Sequence[Entry],
    instructions: str,
    notes: Sequence[str],
    ident: Identifiers,
) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {name: [] for name in ALL_SECTIONS}

    def line(text: str) -> str:
        return clip(ident(text))

    if facts.first_request:
        sections["Goal"].append(f"First request: {line(facts.first_request)}")
    if facts.latest_request and facts.latest_request != facts.first_request:
        sections["Goal"].append(f"Latest request: {line(facts.latest_request)}")

    sections["Constraints"] = [
        *(entry_line(USER_INSTRUCTION, e, ident(s)) for s, e in facts.instructions.items()),
        *(line(c) for c in list(facts.constraints)[-8:]),
    ]
    if instructions.strip():
        sections["Constraints"].append(f"Focus asked for this summary: {clip(instructions)}")

    if facts.calls:
        failed = sum(c.outcome == "error" for c in facts.calls)
        sections["Progress"].append(
            tally_line(entries[0].id, entries[-1].id, Counter(c.name for c in facts.calls), failed)
        )
    for call in facts.calls[-12:]:
        target = f" `{ident(call.key)}`" if call.key else ""
        where = f" (entry {call.result_entry})" if call.result_entry else ""
        sections["Progress"].append(
            f"{call.name}{target} -> {call.outcome}: {ident(call.first_line)}{where}"
            if call.result_entry
            else f"{call.name}{target} -> no result (call in entry {call.entry_id})"
        )
    if facts.last_reply:
        sections["Progress"].append(f"Last reply: {line(facts.last_reply)}")

    sections["Key Decisions"] = [line(d) for d in list(facts.decisions)[-8:]]

    if facts.latest_request:
        state = "answered last" if facts.latest_request_answered else "not answered yet"
        sections["Next Steps"].append(
            f"Continue from the latest request ({state}): {line(facts.latest_request)}"
        )
    if facts.last_user_words:
        sections["Next Steps"].append(f"The user's last words: {line(facts.last_user_words)}")
    for call in facts.calls[facts.calls_before_latest_request :]:
        if not call.result_entry:
            sections["Next Steps"].append(
                f"Tool call {call.name} `{ident(call.key)}` (entry {call.entry_id}) has no "
                "result yet"
            )

    critical = sections["Critical Context"]
    # The user's own identifiers and errors first, each once; the other lists the rest.
    named = dedupe([ident(i) for i in facts.named if "`" not in i])
    if named:
        critical.append(list_line(NAMED_BY_USER, named))
    for message, entry_id in facts.reported_errors.items():
        critical.append(entry_line(USER_ERROR, entry_id, ident(message)))
    lists = {
        "Files": [ident(f) for f in facts.files],
        "Identifiers": [ident(i) for i in facts.identifiers],
        "Commands": [ident(c) for c in facts.commands],
    }
    for name, values in lists.items():
        values = [v for v in values if "`" not in v and v not in named]
        if values:
            critical.append(list_line(name, values))
    for message, entry_id in facts.errors[-8:]:
        critical.append(f"Error (entry {entry_id}): {ident(message)}")
    critical.extend(notes)

    sections["Raw History"] = [
        f"Entries `{entries[0].id}` .. `{entries[-1].id}` ({len(entries)} entries) are "
        "summarised here. They remain in the store: GetEntry(entry_id) reads any entry whole, "
        "and Recall(session_id, query) with this session's id finds any of them again by "
        "words or meaning (CLI: sessionstore recall SESSION QUERY).",
        *(
            f"`{ident(path)}`: latest in entry {entry_id}"
            for path, entry_id in list(facts.files.items())[-8:]
        ),
    ]
    return sections
