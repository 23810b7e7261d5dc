"""What taking the log's latest entry back changes, worked out from the history."""

from __future__ import annotations

from domain.errors import PreconditionFailed, quoted
from domain.retraction import RetractionPlan
from projections.session_history import SessionHistory


def plan_retraction(history: SessionHistory, entry_id: str = "") -> RetractionPlan:
    """The plan to retract the log's latest entry (which ``entry_id``, when given, must
    be), or a refusal saying why there is none to retract."""
    view = history.prompt_view()
    entries = view.log.entries
    if not entries:
        raise PreconditionFailed(
            f"session {quoted(history.session_id)} has no entry in its log to retract "
            "(it is empty, cleared, or only a compaction's summary)"
        )
    last = entries[-1]
    if entry_id and entry_id != last.id:
        raise PreconditionFailed(
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
        tokens=view.as_shown()[-1].token_count,
        closed_calls=[call.id for call in last.tool_calls],
        reopened_calls=reopened,
        last_entry_id=entries[-2].id if len(entries) > 1 else "",
    )
