"""The last fallback, with no summarising model: keep the newest messages that fit.

SPEC 3.3 fallback 3 (pruneHistoryForContextShare): the oldest messages are
dropped until the rest fits ``max_history_share`` of the window. Here nothing
is lost: it is recorded as a compaction whose summary says what was dropped
(with an offline summary of it, which costs no model call), and every dropped
entry stays in the store, readable with GetEntry.
"""

from __future__ import annotations

import time
from types import MappingProxyType

from domain.compaction import Compaction, CompactionFailure
from domain.content import Role
from domain.context.compaction_planner import plan_hard_drop, prompt_budget
from domain.context.summary import summarize_offline
from domain.errors import DomainError
from services.engine.base import CompactionOutcome, CompactionRequest, SessionPort

SUMMARY_MAX_CHARS = 6_000
# What a summary of SUMMARY_MAX_CHARS may cost, counted generously.
SUMMARY_TOKENS = 2_000


def hard_drop(
    port: SessionPort, session_id: str, request: CompactionRequest, engine: str
) -> CompactionOutcome:
    started = time.monotonic()
    view = port.history(session_id).prompt_view()
    session = port.aggregate(session_id)
    policy = view.settings.compaction
    entries = view.as_shown()
    window = view.context_window_tokens
    # What the kept messages may fill: the prompt's budget, less the system
    # prompt and the summary written here, and never over max_history_share.
    if session.compaction_count and not session.entries_since_compaction:
        return CompactionOutcome(False, "nothing was appended since the last compaction")
    budget = request.budget_tokens or prompt_budget(window, policy)
    room = budget - view.system_prompt.tokens.total - SUMMARY_TOKENS
    share = max(0.0, min(policy.max_history_share, room / window))
    plan = plan_hard_drop(
        entries, window, max_history_share=share, open_call_ids=tuple(session.open_tool_calls)
    )
    statistics = plan.to_dict()
    if plan.first_kept_entry_id is None or not plan.dropped_messages:
        return CompactionOutcome(False, plan.reason, statistics)
    if request.dry_run:
        return CompactionOutcome(False, f"dry run: {plan.reason}", statistics)
    cut = next(i for i, e in enumerate(entries) if e.id == plan.first_kept_entry_id)
    dropped = [e for e in entries[:cut] if e.role is not Role.SYSTEM]
    previous = view.log.compaction.compaction.summary if view.log.compaction else ""
    notice = (
        f"[{plan.dropped_messages} earlier entries (~{plan.dropped_tokens:,} tokens) were "
        "dropped to fit the context window, without a summarising model. Each is still in "
        "the store: read it with GetEntry.]"
    )
    summary = summarize_offline(
        dropped,
        previous_summary=previous,
        instructions=request.instructions,
        identifier_policy=policy.identifier_policy,
        notes=(notice,),
        max_chars=SUMMARY_MAX_CHARS,
    )
    compaction = Compaction(
        summary=summary,
        first_kept_entry_id=plan.first_kept_entry_id,
        reason=request.trigger,
        summarizer_model="offline",
        details=MappingProxyType({k: str(v) for k, v in statistics.items()}),
        first_covered_entry_id=dropped[0].id,
        last_covered_entry_id=dropped[-1].id,
        entries_covered=len(dropped),
        fallback_stage="hard-drop",
        attempt=request.attempt,
        duration_ms=int((time.monotonic() - started) * 1000),
        engine=engine,
        instructions=request.instructions,
    )
    try:
        recorded = port.record_compaction(session_id, compaction)
    except DomainError as error:  # e.g. the result would not shrink the prompt
        failure = CompactionFailure(
            request.trigger,
            "verify",
            str(error),
            request.attempt,
            "offline",
            compaction.duration_ms,
        )
        port.record_compaction_failure(session_id, failure)
        return CompactionOutcome(False, failure.reason, statistics, failure=failure)
    return CompactionOutcome(True, plan.reason, statistics, recorded)
