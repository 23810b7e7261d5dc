"""Translation between the v1 protobuf messages and the domain's values.

Only shape is translated here; what is allowed is the domain's business. One
module per area (entries, sessions, events); this one gathers them, so callers
write ``mapping.entry_to_pb`` whichever holds it.
"""

from __future__ import annotations

from services.grpc.mapping_entries import (
    entry_from_pb,
    entry_to_pb,
    format_to_pb,
    prompt_format,
    provider_item_from_pb,
    provider_item_to_pb,
    to_datetime,
    to_timestamp,
    usage_to_pb,
)
from services.grpc.mapping_events import (
    compaction_from_pb,
    compaction_redone_to_pb,
    compaction_to_pb,
    compaction_undone_to_pb,
    durable_log_to_pb,
    event_to_pb,
    failure_to_pb,
    fill_page,
    guard_decision_to_pb,
    prune_decision_to_pb,
    prune_decisions_from_pb,
    recorded_compaction_to_pb,
    token_lesson_to_pb,
    view_audit_to_pb,
    window_verdict_to_pb,
)
from services.grpc.mapping_sessions import (
    erasure_event_to_pb,
    erasure_to_pb,
    file_status_to_pb,
    session_to_pb,
    settings_from_pb,
    settings_to_pb,
    system_prompt_from_pb,
    system_prompt_to_pb,
    system_prompt_tokens_to_pb,
)

__all__ = [
    "compaction_from_pb",
    "compaction_redone_to_pb",
    "compaction_to_pb",
    "compaction_undone_to_pb",
    "durable_log_to_pb",
    "entry_from_pb",
    "entry_to_pb",
    "erasure_event_to_pb",
    "erasure_to_pb",
    "event_to_pb",
    "failure_to_pb",
    "file_status_to_pb",
    "fill_page",
    "format_to_pb",
    "guard_decision_to_pb",
    "prompt_format",
    "provider_item_from_pb",
    "provider_item_to_pb",
    "prune_decision_to_pb",
    "prune_decisions_from_pb",
    "recorded_compaction_to_pb",
    "session_to_pb",
    "settings_from_pb",
    "settings_to_pb",
    "system_prompt_from_pb",
    "system_prompt_to_pb",
    "system_prompt_tokens_to_pb",
    "to_datetime",
    "to_timestamp",
    "token_lesson_to_pb",
    "usage_to_pb",
    "view_audit_to_pb",
    "window_verdict_to_pb",
]
