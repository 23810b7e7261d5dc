"""Context edits a provider made on its side, recorded as prunes.

Anthropic's context editing clears old tool results on the server and reports
what it did in the response (``context_management.applied_edits``: per edit its
type and how many tool uses, or thinking turns, it cleared). The store keeps the
report, and clears the same results in its own view: ``clear_tool_uses`` clears
the oldest results first, so the oldest tool results of the prompt view not
cleared yet are hard-cleared, as many as the edit says. Thinking the provider
cleared needs nothing here: views never send thinking back unsigned, and the
report says what it was.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from domain.content import Entry, Role
from domain.errors import InvalidRequest, quoted
from domain.pruning import PruneAction, PruneDecision

# Reports are small: a few edits with counts.
MAX_REPORT_CHARS = 65_536


@dataclass(frozen=True, slots=True)
class AppliedEdits:
    """What a provider's context editing report says."""

    # Tool uses the provider cleared, oldest first, over every clear_tool_uses edit.
    tool_uses_cleared: int
    # One line per edit, for the prune's reason.
    description: str


def parse_applied_edits(text: str) -> AppliedEdits:
    """The report (``{"applied_edits": [...]}``, or the list alone), or a refusal
    saying what is wrong with it."""
    if len(text) > MAX_REPORT_CHARS:
        raise InvalidRequest(
            f"applied_edits_json is {len(text):,} characters; a report holds a few edits "
            f"(at most {MAX_REPORT_CHARS:,})"
        )
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidRequest(
            f"applied_edits_json {quoted(text)} is not JSON; send the response's "
            "context_management object as it came"
        ) from None
    edits = value.get("applied_edits") if isinstance(value, dict) else value
    if not isinstance(edits, list) or not all(isinstance(e, dict) for e in edits):
        raise InvalidRequest(
            'applied_edits_json must be {"applied_edits": [...]} with an object per edit, as '
            "Anthropic's context_management reports it"
        )
    if not edits:
        # A response whose context editing did nothing: a prune of it would record nothing.
        raise InvalidRequest(
            "applied_edits_json lists no edits, so there is nothing to prune; send it only "
            "when the response's context_management lists an applied edit"
        )
    cleared = 0
    lines: list[str] = []
    for index, edit in enumerate(edits):
        kind = edit.get("type")
        if not isinstance(kind, str) or not kind:
            raise InvalidRequest(f"applied_edits[{index}] has no type")
        counts = {k: v for k, v in edit.items() if k != "type"}
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()
        ):
            raise InvalidRequest(
                f"applied_edits[{index}] ({quoted(kind)}): its counts must be whole numbers, "
                "0 or more"
            )
        if kind.startswith("clear_tool_uses"):
            cleared += int(counts.get("cleared_tool_uses", 0))
        figures = ", ".join(f"{k} {v:,}" for k, v in counts.items())
        lines.append(f"{kind}: {figures}" if figures else kind)
    return AppliedEdits(cleared, "; ".join(lines))


def provider_clears(
    edits: AppliedEdits, entries: Sequence[Entry], cleared: Collection[str]
) -> list[PruneDecision]:
    """Hard clears of the oldest tool result entries among ``entries`` (the prompt
    view's, in order) not ``cleared`` already, holding as many results as the
    provider's clear_tool_uses edits cleared on its side."""
    chosen: list[PruneDecision] = []
    left = edits.tool_uses_cleared
    for entry in entries:
        if left <= 0:
            break
        if entry.role is Role.TOOL and entry.id not in cleared:
            chosen.append(PruneDecision(entry.id, PruneAction.HARD_CLEAR, 0, 0))
            left -= len(entry.tool_results)
    return chosen
