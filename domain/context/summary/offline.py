"""The offline summariser: a structured summary with no model and no network."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from domain.content import Entry
from domain.context.summary.anonymize import Identifiers
from domain.context.summary.bounding import bounded
from domain.context.summary.facts import gather
from domain.context.summary.layout import DEFAULT_MAX_CHARS, IDENTIFIER_POLICIES, parse_summary
from domain.context.summary.rolling import roll
from domain.context.summary.sections import sections


def summarize_offline(
    entries: Sequence[Entry],
    *,
    previous_summary: str = "",
    instructions: str = "",
    identifier_policy: str = "preserve",
    notes: Sequence[str] = (),
    max_chars: int = DEFAULT_MAX_CHARS,
    count: Callable[[str], int] | None = None,
    max_tokens: int | None = None,
) -> str:
    """A structured summary of ``entries``, rolled forward from ``previous_summary``.

    ``notes`` are added to Critical Context as given (e.g. the planner's
    ``[Large tool (~60K tokens) omitted from summary]``). The result is at most
    ``max_chars`` characters and, with ``count`` and ``max_tokens``, at most
    ``max_tokens`` tokens.
    """
    if identifier_policy not in IDENTIFIER_POLICIES:
        raise ValueError(f"identifier_policy must be one of {IDENTIFIER_POLICIES}")
    if not entries:
        raise ValueError("nothing to summarise: no entries")
    facts = gather(entries)
    ident = Identifiers(identifier_policy, facts.known())
    written = sections(facts, entries, instructions, notes, ident)
    if previous_summary.strip():
        written = roll(parse_summary(previous_summary), written)
    return bounded(written, max_chars, count, max_tokens)
