"""Taking entries back out of the views: one entry (the latest), or all of them.

Agent runtimes undo their last item (the OpenAI Agents SDK's ``pop_item``) and
start over (``clear_session``). Here neither deletes anything: each is an event
of its own, the entries stay in the store for audit and replay, and the views
from then on leave them out. What a retraction changes in the aggregate's small
state is worked out from the history beforehand, as a plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from domain.content import Entry
from domain.errors import InvalidRequest

MAX_RETRACT_REASON_CHARS = 2_000


@dataclass(frozen=True, slots=True)
class RetractionPlan:
    """What retracting the log's latest entry records."""

    entry: Entry
    position: int
    # The version whose event appended it.
    appended_at: int
    # The prompt tokens it took, as the model saw it.
    tokens: int
    # Its tool calls (open: nothing follows it), closed with it; and the calls its
    # results answered, open again, with the positions of the entries that made them.
    closed_calls: Sequence[str]
    reopened_calls: Sequence[tuple[str, int]]
    # The entry the log ends with after it ("" when none).
    last_entry_id: str


def check_reason(reason: str) -> None:
    if len(reason) > MAX_RETRACT_REASON_CHARS:
        raise InvalidRequest(
            f"reason is {len(reason):,} characters; send at most {MAX_RETRACT_REASON_CHARS:,}"
        )
