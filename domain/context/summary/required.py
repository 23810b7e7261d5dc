"""What a summary must hold, and a model's summary completed with what it dropped.

The user's own words must outlive every compaction: their explicit
instructions, the identifiers they named and the errors they reported (see
:mod:`facts`). The offline summariser keeps them by construction; a model is
asked to, and may not. :func:`missing_facts` says which of them a summary
lacks; :func:`with_required_facts` writes the missing ones back in the lines
the offline summariser uses (``User instruction (entry u7): ...``, ``Named by
the user: ...``, ``Error reported by the user (entry u9): ...``), so the next
roll - by a model or offline - finds them again.

What is required: these facts in the entries just summarised, and every such
line of the previous summary. Under ``anonymize`` they are required as
anonymised (identifiers as their placeholders); under ``custom`` only the
instructions are, since the custom rule decides what becomes of identifiers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role
from domain.context.summary.anonymize import Identifiers
from domain.context.summary.facts import gather
from domain.context.summary.layout import (
    IDENTIFIER_POLICIES,
    NAMED_BY_USER,
    USER_ERROR,
    USER_INSTRUCTION,
    entry_line,
    list_line,
    list_name,
    list_values,
    parse_summary,
    read_entry_line,
    renew,
    renewed,
)


@dataclass
class RequiredFacts:
    """The user's words a summary must hold, oldest first."""

    instructions: dict[str, str] = field(default_factory=dict)  # sentence -> entry id
    named: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # message -> entry id

    def values(self) -> list[str]:
        return [*self.instructions, *self.named, *self.errors]


def required_facts(
    entries: Sequence[Entry], *, previous_summary: str = "", identifier_policy: str = "preserve"
) -> RequiredFacts:
    """The facts a summary of ``entries`` rolled from ``previous_summary`` must hold."""
    if identifier_policy not in IDENTIFIER_POLICIES:
        raise ValueError(f"identifier_policy must be one of {IDENTIFIER_POLICIES}")
    required = _held(previous_summary)
    facts = gather([e for e in entries if e.role is Role.USER])
    ident = Identifiers(identifier_policy, facts.known())
    for sentence, entry_id in facts.instructions.items():
        renew(required.instructions, ident(sentence), entry_id)
    required.named = renewed(required.named, [ident(v) for v in facts.named if "`" not in v])
    for message, entry_id in facts.reported_errors.items():
        renew(required.errors, ident(message), entry_id)
    if identifier_policy == "custom":
        return RequiredFacts(instructions=required.instructions)
    return required


def missing_facts(
    summary_text: str,
    entries: Sequence[Entry],
    previous_summary: str = "",
    *,
    identifier_policy: str = "preserve",
) -> list[str]:
    """The required facts (instructions, identifiers, errors) that ``summary_text`` does
    not contain anywhere, as written (whitespace aside)."""
    text = _normalised(summary_text)
    required = required_facts(
        entries, previous_summary=previous_summary, identifier_policy=identifier_policy
    )
    return [value for value in required.values() if _normalised(value) not in text]


def with_required_facts(
    summary_text: str,
    entries: Sequence[Entry],
    previous_summary: str = "",
    *,
    identifier_policy: str = "preserve",
) -> str:
    """``summary_text`` with every required fact it does not hold in the user's lines
    added to them: instructions to Constraints, identifiers and errors to Critical
    Context. A summary that holds them all is returned unchanged."""
    required = required_facts(
        entries, previous_summary=previous_summary, identifier_policy=identifier_policy
    )
    held = _held(summary_text)
    instructions = [
        entry_line(USER_INSTRUCTION, entry_id, sentence)
        for sentence, entry_id in required.instructions.items()
        if _normalised(sentence) not in {_normalised(s) for s in held.instructions}
    ]
    errors = [
        entry_line(USER_ERROR, entry_id, message)
        for message, entry_id in required.errors.items()
        if _normalised(message) not in {_normalised(m) for m in held.errors}
    ]
    named = [v for v in required.named if v not in held.named]
    text = _added(summary_text, "Constraints", instructions)
    if named:
        line = list_line(NAMED_BY_USER, [*held.named, *named])
        lines = text.split("\n")
        at = next((i for i, ln in enumerate(lines) if _is_named_line(ln)), None)
        if at is None:
            text = _added(text, "Critical Context", [line], first=True)
        else:
            lines[at] = f"- {line}"
            text = "\n".join(lines)
    return _added(text, "Critical Context", errors)


def _held(summary_text: str) -> RequiredFacts:
    """The user's words a summary holds in its own lines for them, in any section."""
    held = RequiredFacts()
    if not summary_text.strip():
        return held
    for items in parse_summary(summary_text).values():
        for item in items:
            entry = read_entry_line(item)
            if entry and entry[0] == USER_INSTRUCTION:
                renew(held.instructions, entry[2], entry[1])
            elif entry:
                renew(held.errors, entry[2], entry[1])
            elif list_name(item) == NAMED_BY_USER:
                held.named = renewed(held.named, list_values(item))
    return held


def _is_named_line(line: str) -> bool:
    return line.startswith("- ") and list_name(line[2:]) == NAMED_BY_USER


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _added(text: str, section: str, lines: list[str], *, first: bool = False) -> str:
    """``text`` with ``lines`` added as items of ``section``: after its last item (or
    before its first), or in a new section at the end when it has none."""
    if not lines:
        return text
    added = [f"- {line}" for line in lines]
    rows = text.rstrip("\n").split("\n")
    heading = next((i for i, row in enumerate(rows) if row.strip() == f"## {section}"), None)
    if heading is None:
        return "\n".join([*rows, "", f"## {section}", *added]) + "\n"
    end = next((i for i in range(heading + 1, len(rows)) if rows[i].startswith("## ")), len(rows))
    # A "- (none)" placeholder makes way for the items.
    body = [row for row in rows[heading + 1 : end] if row.strip() != "- (none)"]
    while body and not body[-1].strip():
        body.pop()
    body = added + body if first else body + added
    tail = [""] if end < len(rows) else []
    return "\n".join([*rows[: heading + 1], *body, *tail, *rows[end:]]) + "\n"
