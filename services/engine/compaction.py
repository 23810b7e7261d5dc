"""One compaction by the summariser chain, landing every time.

The plan (domain.context.compaction_planner) cuts before the turn in progress,
keeping what fits the budget's target beside a summary. Each summariser of the
session's chain (domain.context.chain) then tries to write that summary, within
its own deadline, its retries and backoff included; the first whose summary,
with what the cut keeps, fits the target is recorded. A step that fails, times
out or writes too much is noted in the receipt (and a model's failure recorded
as a failed compaction, as the audit counts them), and the next is tried. The
chain ends with the hard drop (services.engine.fit), which always lands.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from domain.compaction import Compaction, CompactionFailure, SummarizerAttempt, Trigger
from domain.content import Role
from domain.context.budget import ContextBudget
from domain.context.chain import HARD_DROP, SummarizerStep, summarizer_chain
from domain.context.compaction_planner import CompactionPlan, CompactionRefused, plan_compaction
from domain.context.current_request import (
    CarriedRequest,
    carried_by,
    with_current_request,
    without_current_request,
)
from domain.context.cuts import turn_start
from domain.errors import DomainError, EntryNotFound, InvalidCutPoint, VersionConflict
from projections.session_history import PromptView
from services import deadline
from services.adapters.summarizers.base import SummarizerError
from services.adapters.summarizers.provider import ProviderCompactor
from services.adapters.tokenizers import tokenizer_for
from services.engine.base import (
    REQUEST_ENDING,
    CompactionOutcome,
    CompactionRequest,
    SessionPort,
    SummarizerFactory,
)
from services.engine.fit import fit
from services.engine.provider_step import compact_by_provider, provider_compaction
from services.engine.staged_summary import CompactionStepFailed, summarize_plan


class _SessionMoved(Exception):
    """Another compaction landed while a summariser wrote (a view's fitting step, say):
    the plan's cut is stale."""


# What the session refuses a compaction for when it moved under the plan: its cut
# no longer stands (another compaction cut later, an entry was erased, a call opened)
# or the version it was planned on is gone. Any other refusal is of what the step
# wrote, and the next step is tried on the same plan.
_MOVED = (InvalidCutPoint, EntryNotFound, VersionConflict)
_COMPACTING = "compacting, before anything was recorded"


def compact_with_chain(
    port: SessionPort,
    summarizers: SummarizerFactory,
    session_id: str,
    request: CompactionRequest,
    engine: str,
    earlier: Sequence[SummarizerAttempt] = (),
) -> CompactionOutcome:
    """Compacts the session now (or plans it, with ``dry_run``).

    When another compaction lands while a summariser writes, the chain starts over
    once on the session as it now is (``earlier`` carries the attempts so far): a
    threshold compaction the landed one made needless ends there, where falling
    through to the hard drop would drop the newest entries a second time."""
    started = time.monotonic()
    # Queued behind another compaction, the caller may have stopped waiting.
    deadline.check(_COMPACTING)
    view = port.history(session_id).prompt_view()
    session = port.aggregate(session_id)
    budget = view.budget(request.budget_tokens)
    threshold = request.trigger == Trigger.THRESHOLD and not request.force
    if threshold and not budget.over_threshold(view.estimated_tokens):
        return CompactionOutcome(False, "the prompt is within its threshold")
    open_calls = tuple(session.open_tool_calls)
    plan = _plan(view, budget, open_calls, request)
    if isinstance(plan, CompactionRefused):
        if request.trigger in (Trigger.THRESHOLD, Trigger.BUDGET, Trigger.OVERFLOW):
            return fit(port, session_id, request, engine)
        return CompactionOutcome(False, plan.reason)
    steps = summarizer_chain(view.settings.compaction, view.settings.model)
    # A dry run walks the same chain, as far as it can without asking a model: what a
    # model would write cannot be foreseen, but the offline summary and the hard drop
    # can, so it answers what the compaction would do, and why.
    attempts = list(earlier)
    for step in steps[:-1]:  # the last is the hard drop
        try:
            outcome = _try_step(
                port, summarizers, step, view, budget, open_calls, request, attempts
            )
        except _SessionMoved:
            if earlier:
                break  # moved twice: the hard drop lands whatever moves
            return compact_with_chain(port, summarizers, session_id, request, engine, attempts)
        if outcome is not None:
            return replace(outcome, plan={**outcome.plan, "duration_ms": _ms(started)})
    dropped = fit(port, session_id, replace(request, force=True), engine, attempts)
    if dropped.compacted or dropped.pruned is not None or dropped.failure is not None:
        return dropped
    if request.dry_run and dropped.reason.startswith("dry run"):
        # The hard drop would land (fit answers its refusals without the prefix).
        planned = {**dropped.plan, "summarizer_model": HARD_DROP}
        return replace(
            dropped,
            reason=_dry_run(attempts),
            plan={**planned, "tokens_before": view.estimated_tokens},
        )
    return _declined(request, attempts, dropped)


def _declined(
    request: CompactionRequest,
    attempts: Sequence[SummarizerAttempt],
    dropped: CompactionOutcome,
) -> CompactionOutcome:
    """No step compacted: the answer names why each did not, the hard drop's last.
    No plan goes with it: none was carried out, and the hard drop's would read as one."""
    reason = dropped.reason.removeprefix("dry run: ")
    causes = [f"{a.summarizer} ({a.outcome}): {a.reason}" for a in attempts]
    causes.append(f"{HARD_DROP}: {reason}")
    said = "every step of the chain declined. " + ". ".join(causes)
    return CompactionOutcome(False, f"dry run: {said}" if request.dry_run else said)


def _plan(
    view: PromptView,
    budget: ContextBudget,
    open_calls: Sequence[str],
    request: CompactionRequest,
    summariser_window_tokens: int | None = None,
) -> CompactionPlan | CompactionRefused:
    """The plan; when refused and the request insists, the one keeping only the turn in
    progress. Chunks are sized for ``summariser_window_tokens`` (None: the window's)."""
    previous = view.log.compaction.compaction if view.log.compaction else None
    plans = [budget, replace(budget, keep_recent_tokens=1)] if request.force else [budget]
    plan: CompactionPlan | CompactionRefused = CompactionRefused("")
    for planned in plans:
        plan = plan_compaction(
            view.as_shown(),
            planned,
            system_tokens=view.system_prompt.tokens.total,
            summariser_window_tokens=summariser_window_tokens,
            previous_summary_tokens=previous.summary_tokens if previous else 0,
            open_call_ids=open_calls,
        )
        if isinstance(plan, CompactionPlan):
            break
    return plan


def _try_step(
    port: SessionPort,
    summarizers: SummarizerFactory,
    step: SummarizerStep,
    view: PromptView,
    budget: ContextBudget,
    open_calls: Sequence[str],
    request: CompactionRequest,
    attempts: list[SummarizerAttempt],
) -> CompactionOutcome | None:
    """The compaction this step records, or None (its attempt noted) to try the next."""
    started = time.monotonic()
    policy = view.settings.compaction
    session_id = view.log.session_id
    if request.dry_run and step.is_model:
        return _foreseen(view, budget, open_calls, request, step, attempts)
    try:
        summarizer = summarizers(step)
        # Chunks are sized for this summariser's own window.
        plan = _plan(view, budget, open_calls, request, summarizer.window_tokens or None)
        if isinstance(plan, CompactionRefused):
            raise CompactionStepFailed("plan", plan.reason)
        # A step ends with the call that waits for it (a manual request's), if sooner.
        timeout = deadline.bounded(min(policy.step_timeout_seconds, policy.timeout_seconds))
        if isinstance(summarizer, ProviderCompactor):
            remote = compact_by_provider(summarizer, view, plan, timeout)
        else:
            previous = view.log.compaction.compaction.summary if view.log.compaction else ""
            staged = summarize_plan(
                plan,
                {e.id: e for e in view.as_sent()},
                summarizer,
                previous_summary=without_current_request(previous) if previous else "",
                instructions=request.instructions,
                identifier_policy=policy.identifier_policy,
                identifier_instructions=policy.identifier_instructions,
                timeout_seconds=timeout,
            )
    except REQUEST_ENDING:
        raise
    except (CompactionStepFailed, SummarizerError, DomainError) as error:
        # Failed because the caller's deadline ended it (or the call was cut): that is
        # the request's end, not the summariser's failure, and nothing is recorded.
        deadline.check(_COMPACTING)
        timed_out = isinstance(error, CompactionStepFailed) and "timed out" in error.reason
        attempts.append(
            SummarizerAttempt(
                step.name, "timed-out" if timed_out else "failed", str(error), _ms(started)
            )
        )
        if not request.dry_run:
            _note_failure(port, session_id, step, request, _stage_of(error), str(error), started)
        return None
    carried = None
    if isinstance(summarizer, ProviderCompactor):
        # The provider's items are what its view carries: that is what must fit.
        summary = "\n".join(item.json for item in remote.items)
    else:
        carried = _carried_on(view)
        summary = staged.text
        if carried is not None:
            summary = with_current_request(summary, carried.entry_id, carried.text)
    after = _tokens_after(view, plan, summary, carried)
    too_large = _too_large(view, budget, after)
    if too_large is not None:
        attempts.append(
            SummarizerAttempt(
                step.name,
                "too-large",
                f"its summary and the kept entries need ~{budget.provider_tokens(after):,} "
                f"tokens; {too_large}",
                _ms(started),
            )
        )
        return None
    if request.dry_run:
        planned = {**plan.to_dict(), "summarizer_model": step.name}
        return CompactionOutcome(
            False, _dry_run(attempts), {**planned, "estimated_tokens_after": after}
        )
    attempts.append(SummarizerAttempt(step.name, "used", plan.reason, _ms(started)))
    if isinstance(summarizer, ProviderCompactor):
        engine = view.settings.engine
        compaction = provider_compaction(remote, plan, request, engine, tuple(attempts))
    else:
        compaction = _summarised(view, plan, staged, summary, request, attempts)
        if carried is not None:
            compaction = replace(compaction, carried_blocks=carried.blocks)
    deadline.check(_COMPACTING)
    try:
        recorded = port.record_compaction(
            session_id,
            compaction,
            idempotency_key=request.idempotency_key,
            fingerprint=request.fingerprint,
        )
    except REQUEST_ENDING:
        raise
    except _MOVED as error:
        attempts[-1] = SummarizerAttempt(step.name, "failed", str(error), _ms(started))
        raise _SessionMoved from error
    except DomainError as error:
        # Refused for what this step wrote (a provider's malformed item, say): the
        # session has not moved, so the next step is tried on the same plan.
        refused = f"the session refused what it wrote: {error}"
        attempts[-1] = SummarizerAttempt(step.name, "failed", refused, _ms(started))
        _note_failure(port, session_id, step, request, "verify", refused, started)
        return None
    return CompactionOutcome(
        True, plan.reason, {**plan.to_dict(), "summarizer_model": step.name}, recorded
    )


def _foreseen(
    view: PromptView,
    budget: ContextBudget,
    open_calls: Sequence[str],
    request: CompactionRequest,
    step: SummarizerStep,
    attempts: list[SummarizerAttempt],
) -> CompactionOutcome | None:
    """A dry run's answer at a model's step: the plan it would be asked to summarise
    (what it writes, and so whether the next steps run, only the real call knows)."""
    plan = _plan(view, budget, open_calls, request, step.window_tokens or None)
    if isinstance(plan, CompactionRefused):
        failed = CompactionStepFailed("plan", plan.reason)
        attempts.append(SummarizerAttempt(step.name, "failed", str(failed)))
        return None
    planned = {**plan.to_dict(), "summarizer_model": step.name}
    return CompactionOutcome(False, _dry_run(attempts), planned)


def _dry_run(attempts: Sequence[SummarizerAttempt]) -> str:
    """A dry run's reason: nothing written, and the steps it passed over and why."""
    passed = ". ".join(f"{a.summarizer} ({a.outcome}): {a.reason}" for a in attempts)
    return "dry run: nothing written" + (f"; before this step: {passed}" if passed else "")


def _note_failure(
    port: SessionPort,
    session_id: str,
    step: SummarizerStep,
    request: CompactionRequest,
    stage: str,
    error: str,
    started: float,
) -> None:
    """A model's failure is recorded as a failed compaction, as the audit counts them."""
    if step.is_model:
        failure = CompactionFailure(
            request.trigger, stage, error, request.attempt, step.name, _ms(started)
        )
        port.record_compaction_failure(session_id, failure)


def _summarised(
    view: PromptView,
    plan: CompactionPlan,
    staged: Any,
    summary: str,
    request: CompactionRequest,
    attempts: list[SummarizerAttempt],
) -> Compaction:
    return Compaction(
        summary=summary,
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
        duration_ms=staged.duration_ms,
        engine=view.settings.engine,
        instructions=request.instructions,
        attempts=tuple(attempts),
    )


def _carried_on(view: PromptView) -> CarriedRequest | None:
    """The turn's user message the summary in force carries, which the next summary
    carries on while that turn goes on (no user message kept after the cut)."""
    if view.log.compaction is None or turn_start(view.log.entries) is not None:
        return None
    return carried_by(view.log.compaction.compaction)


def _too_large(view: PromptView, budget: ContextBudget, after: int) -> str | None:
    """Why a prompt of ``after`` tokens would not do, or None."""
    if after > budget.target_estimate:
        return f"the target is {budget.target_tokens:,}"
    # A provider that keeps much of what it compacts (OpenAI keeps the user messages)
    # may not shrink the prompt at all: the store would refuse such a compaction.
    if after >= view.estimated_tokens:
        return f"no fewer than the ~{budget.provider_tokens(view.estimated_tokens):,} before"
    return None


def _tokens_after(
    view: PromptView, plan: CompactionPlan, summary: str, carried: CarriedRequest | None
) -> int:
    """The prompt's tokens were this summary recorded with the plan's cut: the system
    prompt, every system entry (pinned or kept), the kept conversation, the summary
    (and the blocks of the user message it carries, shown beside it)."""
    entries = view.as_shown()
    cut = next(i for i, e in enumerate(entries) if e.id == plan.first_kept_entry_id)
    kept = sum(e.token_count for i, e in enumerate(entries) if i >= cut or e.role is Role.SYSTEM)
    tokenizer = tokenizer_for(view.settings.model)
    summary_tokens = tokenizer.count_text(summary)
    if carried is not None:
        summary_tokens += tokenizer.count_blocks(carried.blocks)
    return view.system_prompt.tokens.total + kept + summary_tokens


def _stage_of(error: Exception) -> str:
    if isinstance(error, CompactionStepFailed):
        return error.stage
    if isinstance(error, SummarizerError):
        return "summarise"
    return "plan"


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
