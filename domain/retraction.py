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
from typing import Protocol

from domain.content import Entry
from domain.errors import InvalidRequest, NothingToRetract, NotLatestEntry, quoted

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


class LogTail(Protocol):
    """What planning a retraction asks of the session's history."""

    @property
    def session_id(self) -> str: ...

    def log_tail(self) -> tuple[Entry, int, str] | None:
        """The durable log's latest entry now, the prompt tokens it takes as shown, and
        the id of the entry before it ("" when none); None when the log is empty."""

    def position_of(self, entry_id: str) -> int | None: ...

    def call_position(self, call_id: str) -> int | None: ...

    def entry_version(self, position: int) -> int: ...


def plan_retraction(history: LogTail, entry_id: str = "") -> RetractionPlan:
    """The plan to retract the log's latest entry (which ``entry_id``, when given, must
    be), or a refusal saying why there is none to retract."""
    tail = history.log_tail()
    if tail is None:
        raise NothingToRetract(
            f"session {quoted(history.session_id)} has no entry in its log to retract "
            "(it is empty, cleared, or only a compaction's summary)"
        )
    last, tokens, before = tail
    if entry_id and entry_id != last.id:
        raise NotLatestEntry(
            f"entry {quoted(entry_id)} is not the latest entry of the log ({quoted(last.id)} "
            "is): only the latest can be retracted; read the log again"
        )
    position = history.position_of(last.id)
    assert position is not None  # in the log, so in the history
    reopened = [
        (result.tool_call_id, call_at)
        for result in last.tool_results
        if (call_at := history.call_position(result.tool_call_id)) is not None
    ]
    return RetractionPlan(
        entry=last,
        position=position,
        appended_at=history.entry_version(position),
        tokens=tokens,
        closed_calls=[call.id for call in last.tool_calls],
        reopened_calls=reopened,
        last_entry_id=before,
    )
