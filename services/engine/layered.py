"""The default engine: the four layers of SPEC 3, inside the store.

1. Window guard: a window below the minimum refuses the view (the client must
   switch models); a small one carries a warning.
2. Tool-result guard: decided at append by the aggregate (see Session.append)
   and recorded with the entries; nothing to do here.
3. Compaction: in the background as soon as an append crosses the threshold;
   a view over the budget waits for it; overflow reports and Compact requests
   run it too. Summaries come from the session's summariser in staged,
   rolling calls; when that fails, the oldest messages are dropped instead.
4. Pruning: cache-ttl (SPEC 3.4) or recent-n byte caps, before a view is served.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime

from domain.compaction import Compaction, CompactionFailure, Trigger
from domain.content import Role
from domain.context.compaction_planner import (
    CompactionRefused,
    plan_compaction,
    prompt_budget,
    should_compact,
)
from domain.context.pruning_planner import (
    PrunePlan,
    ToolFilter,
    plan_cache_ttl_prune,
    plan_recent_n_prune,
)
from domain.context.window_guard import WindowVerdict, check_context_window
from domain.errors import (
    CompactionDeadlineExceeded,
    ContextWindowTooSmall,
    DomainError,
    PromptOverBudget,
)
from domain.pruning import PruneAction, PruneDecision
from projections.session_history import PromptView
from services.adapters.summarizers.base import SummarizerError
from services.engine.base import (
    Assembly,
    CompactionOutcome,
    CompactionRequest,
    CompactsInTheBackground,
    EngineAction,
    EngineContext,
    EngineInfo,
)
from services.engine.hard_drop import hard_drop
from services.engine.staged_summary import CompactionStepFailed, summarize_plan


class LayeredEngine(CompactsInTheBackground):
    info = EngineInfo(
        "layered",
        owns_compaction=True,
        description="window guard, tool-result guard, compaction with a summariser "
        "(threshold, overflow, manual), pruning",
    )

    def __init__(self, context: EngineContext) -> None:
        super().__init__(context)
        self.summarizers = context.summarizers

    # -- SPEC 6 ------------------------------------------------------------------------

    def assemble(
        self, session_id: str, token_budget: int | None, deadline: float | None
    ) -> Assembly:
        view = self.port.history(session_id).prompt_view()
        verdict = guard_window(view)
        actions: list[EngineAction] = []
        pruned = self._prune(session_id, view)
        if pruned is not None:
            actions.append(pruned)
            view = self.port.history(session_id).prompt_view()
        policy = view.settings.compaction
        budget = prompt_budget(view.context_window_tokens, policy)
        if token_budget is not None:
            budget = min(budget, token_budget)
        # The provider's own counts, when turns reported them, correct the estimate.
        calibration = self.port.recent(session_id).calibration

        def fits() -> bool:
            return round(view.estimated_tokens * calibration) <= budget

        if fits() or policy.mode != "auto":
            return Assembly(view, verdict, budget, actions)
        running = self.runner.running(session_id)
        asked = token_budget is not None
        request = CompactionRequest(Trigger.THRESHOLD, force=asked, budget_tokens=budget)
        outcome = self._wait(self._start(session_id, request, join=not asked), deadline)
        kind = "waited_for_compaction" if running is not None and not asked else "compacted"
        actions.append(outcome.action(kind))
        view = self.port.history(session_id).prompt_view()
        if not fits():
            # What the summariser kept still does not fit: drop the oldest.
            request = CompactionRequest(Trigger.THRESHOLD, force=True, budget_tokens=budget)
            dropped = self._wait(self._start(session_id, request, hard=True), deadline)
            actions.append(dropped.action())
            view = self.port.history(session_id).prompt_view()
        if not fits():
            raise PromptOverBudget(
                f"the prompt needs ~{view.estimated_tokens:,} tokens but its budget is "
                f"{budget:,}, even after compaction: the newest turn alone is too large for "
                "this window; use a model with a larger window or shorten the turn",
                view.estimated_tokens,
                budget,
            )
        return Assembly(view, verdict, budget, actions)

    def compact(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        if request.dry_run:
            return self._compact_now(session_id, request)
        # A manual request queues behind a running compaction (it has its own
        # instructions); any other trigger joins it.
        future = self._start(session_id, request, join=request.trigger != Trigger.MANUAL)
        outcome: CompactionOutcome = future.result()
        return outcome

    # -- compaction ------------------------------------------------------------------

    def _start(
        self, session_id: str, request: CompactionRequest, *, join: bool = True, hard: bool = False
    ) -> Future[CompactionOutcome]:
        def job() -> CompactionOutcome:
            if hard:
                return hard_drop(self.port, session_id, request, self.info.name)
            return self._compact_now(session_id, request)

        return self.runner.run(session_id, job, join=join)

    def _wait(self, future: Future[CompactionOutcome], deadline: float | None) -> CompactionOutcome:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            raise CompactionDeadlineExceeded(
                "the prompt is over its budget and the compaction that brings it back is "
                "still running; it goes on in the background: ask again, with a longer deadline"
            ) from None

    def _compact_now(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        started = time.monotonic()
        view = self.port.history(session_id).prompt_view()
        session = self.port.aggregate(session_id)
        if request.trigger == Trigger.OVERFLOW and request.attempt <= 1:
            truncated = self._truncate_oversized(session_id, view)
            if truncated is not None:
                return truncated
        policy = view.settings.compaction
        window = view.context_window_tokens
        if request.trigger == Trigger.THRESHOLD and not request.force:
            need = should_compact(
                view.estimated_tokens,
                window,
                policy,
                reserve_floor_tokens=policy.reserve_floor_tokens,
            )
            if not need.needed:
                return CompactionOutcome(False, "the prompt is within its threshold")
        summarizer = self.summarizers(policy)
        previous = view.log.compaction.compaction if view.log.compaction else None
        entries = view.as_shown()
        plan = plan_compaction(
            entries,
            window,
            policy,
            summariser_window_tokens=summarizer.window_tokens,
            previous_summary_tokens=previous.summary_tokens if previous else 0,
            summary_budget_tokens=policy.summary_max_tokens,
            open_call_ids=tuple(session.open_tool_calls),
            entries_since_last_compaction=(
                session.entries_since_compaction if session.compaction_count else None
            ),
            reserve_floor_tokens=policy.reserve_floor_tokens,
        )
        if isinstance(plan, CompactionRefused):
            if request.trigger in (Trigger.THRESHOLD, Trigger.OVERFLOW) and not request.dry_run:
                return hard_drop(self.port, session_id, request, self.info.name)
            return CompactionOutcome(False, plan.reason)
        planned = {**plan.to_dict(), "summarizer_model": summarizer.name}
        if request.dry_run:
            return CompactionOutcome(False, "dry run: nothing written", planned)
        try:
            staged = summarize_plan(
                plan,
                {e.id: e for e in entries},
                summarizer,
                previous_summary=previous.summary if previous else "",
                instructions=request.instructions,
                identifier_policy=policy.identifier_policy,
                identifier_instructions=policy.identifier_instructions,
                timeout_seconds=policy.timeout_seconds,
            )
            compaction = Compaction(
                summary=staged.text,
                first_kept_entry_id=plan.first_kept_entry_id,
                reason=request.trigger,
                summarizer_model=staged.model,
                first_covered_entry_id=plan.summarised.first_id,
                last_covered_entry_id=plan.summarised.last_id,
                entries_covered=plan.summarised.count,
                prompt_hash=staged.prompt_hash,
                chunks=staged.calls,
                fallback_stage=staged.stage,
                attempt=request.attempt,
                duration_ms=int((time.monotonic() - started) * 1000),
                engine=self.info.name,
                instructions=request.instructions,
            )
            recorded = self.port.record_compaction(session_id, compaction)
        except (CompactionStepFailed, SummarizerError, DomainError) as error:
            failure = CompactionFailure(
                trigger=request.trigger,
                stage=_stage_of(error),
                reason=str(error),
                attempt=request.attempt,
                summarizer_model=summarizer.name,
                duration_ms=int((time.monotonic() - started) * 1000),
            )
            self.port.record_compaction_failure(session_id, failure)
            if request.trigger in (Trigger.THRESHOLD, Trigger.OVERFLOW):
                return hard_drop(self.port, session_id, request, self.info.name)
            return CompactionOutcome(False, failure.reason, planned, failure=failure)
        return CompactionOutcome(True, plan.reason, planned, recorded)

    def _truncate_oversized(self, session_id: str, view: PromptView) -> CompactionOutcome | None:
        """An overflow's first step: soft-trim every tool result over the soft-trim size."""
        policy = view.settings.pruning
        oversized = [
            PruneDecision(entry.id, PruneAction.SOFT_TRIM)
            for entry in view.log.entries
            if entry.role is Role.TOOL
            and entry.id not in view.pruned
            and any(
                len(view.shown_result(entry.id, r)) > policy.soft_trim_max_chars
                for r in entry.tool_results
            )
        ]
        if not oversized:
            return None
        reason = (
            f"overflow: trimmed {len(oversized)} tool results over "
            f"{policy.soft_trim_max_chars:,} chars"
        )
        recorded = self.port.record_prune(session_id, oversized, reason)
        return CompactionOutcome(False, reason, pruned=recorded)

    # -- pruning ---------------------------------------------------------------------

    def _prune(self, session_id: str, view: PromptView) -> EngineAction | None:
        policy = view.settings.pruning
        if policy.mode == "off":
            return None
        tools = ToolFilter(policy.allow_tools, policy.deny_tools)
        entries = view.log.entries
        plan: PrunePlan
        if policy.mode == "cache-ttl":
            plan = plan_cache_ttl_prune(
                entries,
                view.context_window_tokens,
                policy,
                now=datetime.now(UTC),
                last_cache_touch=_last_cache_touch(view),
                tool_filter=tools,
                current=view.pruned,
                extra_chars=len(view.system_prompt.rendered_text()),
            )
        else:
            plan = plan_recent_n_prune(
                entries,
                view.context_window_tokens,
                recent_n=policy.recent_n,
                recent_max_bytes=policy.recent_max_bytes,
                old_max_bytes=policy.old_max_bytes,
                tool_filter=tools,
                current=view.pruned,
            )
        if not plan.decisions:
            return None
        recorded = self.port.record_prune(session_id, plan.decisions, plan.reason)
        detail = (
            f"{len(plan.decisions)} tool results: {plan.reason} "
            f"({plan.chars_before:,} -> {plan.chars_after:,} chars)"
        )
        return EngineAction("pruned", detail, recorded.originator_version)


def guard_window(view: PromptView) -> WindowVerdict:
    """SPEC 3.1: the window's verdict; a window below the minimum refuses the view."""
    policy = view.settings.window_guard
    source = view.context_window_source
    verdict = check_context_window(
        view.context_window_tokens,
        source,
        hard_min_tokens=policy.hard_min_tokens,
        warn_below_tokens=policy.warn_below_tokens,
    )
    if policy.enabled and verdict.blocked:
        raise ContextWindowTooSmall(
            verdict.message, verdict.window_tokens, source, verdict.hard_min_tokens
        )
    return verdict


def _last_cache_touch(view: PromptView) -> datetime | None:
    """When the provider last read this prompt: the newest assistant turn's time."""
    for entry in reversed(view.log.entries):
        if entry.role is Role.ASSISTANT:
            return entry.timestamp
    return None


def _stage_of(error: Exception) -> str:
    if isinstance(error, CompactionStepFailed):
        return error.stage
    if isinstance(error, SummarizerError):
        return "summarise"
    return "verify"
