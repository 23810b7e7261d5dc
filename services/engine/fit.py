"""The last step of every chain: drop and trim until the prompt fits. It always lands,
unless the prompt fits already and its least drop would not shrink it.

Carries out domain.context.fit_planner's plan with no summarising model: the
tool results it trims are recorded as a prune (the prompt view only changes),
the entries it drops as a compaction whose summary is the offline summary of
what went, rolled onto the previous one and bounded to the room the plan gave
it (SPEC 3.3 fallback 3, hard-drop), carrying the turn's user message verbatim
when the cut falls inside the turn. Nothing is lost: every dropped entry stays
in the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import MappingProxyType

from domain.compaction import Compaction, CompactionFailure, SummarizerAttempt
from domain.content import Entry, Role
from domain.context.budget import ContextBudget
from domain.context.chain import HARD_DROP
from domain.context.current_request import (
    CarriedRequest,
    carried_by,
    request_of,
    with_current_request,
)
from domain.context.cuts import turn_start
from domain.context.fit_planner import (
    HARD_DROP_NOTE_TOKENS,
    FitPlan,
    Trim,
    least_loss_fit,
)
from domain.context.summary import summarize_offline
from domain.errors import DomainError
from domain.pruning import PruneAction, PruneDecision
from projections.session_history import PromptView
from services import deadline
from services.adapters.tokenizers import tokenizer_for
from services.engine.base import (
    REQUEST_ENDING,
    CompactionOutcome,
    CompactionRequest,
    SessionPort,
)

# The hard drop's own summary takes at most this share of the target.
SUMMARY_TARGET_SHARE = 4
# A tool result of the turn in progress is trimmed to these before it is cleared: a
# log's last lines (its error, its totals) still reach the model.
SHORT_TRIM_HEAD_CHARS = 300
SHORT_TRIM_TAIL_CHARS = 500


def fit(
    port: SessionPort,
    session_id: str,
    request: CompactionRequest,
    engine: str,
    attempts: Sequence[SummarizerAttempt] = (),
) -> CompactionOutcome:
    """Drops and trims until the prompt fits its budget (or the request's)."""
    started = time.monotonic()
    view = port.history(session_id).prompt_view()
    session = port.aggregate(session_id)
    budget = view.budget(request.budget_tokens)
    if not request.force and not budget.over_threshold(view.estimated_tokens):
        return CompactionOutcome(False, "the prompt is within its threshold")
    entries = view.as_sent()
    carried = _carried(view, entries)
    plan, summary_room = _plan(view, entries, budget, tuple(session.open_tool_calls), carried)
    statistics = plan.to_dict(entries)
    if not plan.fits or (plan.cut is None and not plan.prunes):
        return CompactionOutcome(False, plan.reason, statistics)
    summary = ""
    dropped: list[Entry] = []
    request_carried = None
    if plan.cut is not None:
        summary, request_carried = _summary(view, entries, plan, summary_room, request, carried)
        dropped = [e for e in entries[: plan.cut] if e.role is not Role.SYSTEM]
        # Forced on a prompt that fits its target, the least drop that fits can weigh
        # less than its note, which rolls up the summary in force too: the session
        # would refuse a compaction that does not shrink. (A dry run says so too.)
        replaced = sum(e.token_count for e in dropped) + view.log.summary_tokens
        tokenizer = tokenizer_for(view.settings.model)
        note = tokenizer.count_text(summary)
        if request_carried is not None:
            note += tokenizer.count_blocks(request_carried.blocks)
        if view.estimated_tokens <= budget.target_estimate and note >= replaced:
            return CompactionOutcome(
                False,
                f"the prompt fits its target ({view.estimated_tokens:,} tokens of "
                f"{budget.target_estimate:,}); dropping its oldest entries for a note of "
                "them would not shrink it",
                statistics,
            )
    if request.dry_run:
        return CompactionOutcome(False, f"dry run: {plan.reason}", statistics)
    # A manual request's caller may have stopped waiting (see services.engine.layered).
    deadline.check("compacting, before anything was recorded")
    pruned = None
    if plan.prunes:
        pruned = port.record_prune(session_id, plan.prunes, f"{request.trigger}: {plan.reason}")
    if plan.cut is None:
        return CompactionOutcome(False, plan.reason, statistics, pruned=pruned)
    compaction = Compaction(
        summary=summary,
        first_kept_entry_id=entries[plan.cut].id,
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
        attempts=(*attempts, SummarizerAttempt(HARD_DROP, "used", plan.reason)),
        carried_blocks=request_carried.blocks if request_carried is not None else (),
    )
    try:
        recorded = port.record_compaction(
            session_id,
            compaction,
            idempotency_key=request.idempotency_key,
            fingerprint=request.fingerprint,
        )
    except REQUEST_ENDING:
        raise
    except DomainError as error:
        # The session moved under the plan (a summarising compaction landed meanwhile):
        # nothing is wrong, and the caller plans again from what is there now.
        failure = CompactionFailure(
            request.trigger, "verify", str(error), request.attempt, "offline"
        )
        return CompactionOutcome(False, failure.reason, statistics, failure=failure, pruned=pruned)
    return CompactionOutcome(True, plan.reason, statistics, recorded, pruned=pruned)


def _plan(
    view: PromptView,
    entries: Sequence[Entry],
    budget: ContextBudget,
    open_call_ids: Sequence[str],
    carried: CarriedRequest | None,
) -> tuple[FitPlan, int]:
    """The plan for the target if one fits it, else for the budget itself; with room
    for a summary, else for the hard drop's note alone (a message that takes nearly
    the whole budget leaves no more). Answers the plan and the summary's room."""
    return least_loss_fit(
        entries,
        system_tokens=view.system_prompt.tokens.total,
        limits=(budget.target_estimate, budget.budget_estimate),
        summary_rooms=(summary_tokens(budget), HARD_DROP_NOTE_TOKENS),
        carried_tokens=_tokens(carried, view) if carried else 0,
        summary_in_force_tokens=view.log.summary_tokens,
        open_call_ids=open_call_ids,
        trims=trim_options(view),
    )


def summary_tokens(budget: ContextBudget) -> int:
    """The most the hard drop's summary takes, in the store's estimate."""
    return min(
        budget.in_estimate(budget.summary_max_tokens),
        budget.target_estimate // SUMMARY_TARGET_SHARE,
    )


def _short(notice: str, dropped: Sequence[Entry], count: Callable[[str], int]) -> str:
    """No room for a summary: the note alone says what went and where it is, naming
    the entries only when their ids leave it within the note's room."""
    if count(notice) <= HARD_DROP_NOTE_TOKENS:
        return notice
    return (
        f"[{len(dropped)} earlier entries were left out to fit the context window; the "
        "store keeps each of them whole.]"
    )


def trim_options(view: PromptView) -> dict[str, tuple[Trim, ...]]:
    """For each kept tool result entry, shorter each time: shown to its head and tail
    (the pruning policy's), to a short head and tail, then cleared."""
    policy = view.settings.pruning
    options: dict[str, tuple[Trim, ...]] = {}
    for entry in view.log.entries:
        if entry.role is not Role.TOOL:
            continue
        soft = PruneDecision(
            entry.id,
            PruneAction.SOFT_TRIM,
            policy.soft_trim_head_chars,
            policy.soft_trim_tail_chars,
        )
        short = PruneDecision(
            entry.id, PruneAction.SOFT_TRIM, SHORT_TRIM_HEAD_CHARS, SHORT_TRIM_TAIL_CHARS
        )
        hard = PruneDecision(entry.id, PruneAction.HARD_CLEAR, 0, 0)
        options[entry.id] = tuple(
            Trim(decision, view.tokens_shown_if(entry, decision))
            for decision in (soft, short, hard)
        )
    return options


def _carried(view: PromptView, entries: Sequence[Entry]) -> CarriedRequest | None:
    """The user message the summary in force carries, while its turn goes on."""
    if turn_start(entries) is not None or view.log.compaction is None:
        return None
    return carried_by(view.log.compaction.compaction)


def _tokens(carried: CarriedRequest, view: PromptView) -> int:
    """What carrying the message takes: its text in the summary, its blocks beside it."""
    tokenizer = tokenizer_for(view.settings.model)
    return tokenizer.count_text(carried.text) + tokenizer.count_blocks(carried.blocks)


def _summary(
    view: PromptView,
    entries: Sequence[Entry],
    plan: FitPlan,
    room: int,
    request: CompactionRequest,
    carried: CarriedRequest | None,
) -> tuple[str, CarriedRequest | None]:
    """The summary, and the user message it carries (its blocks go beside it)."""
    assert plan.cut is not None
    dropped = [e for e in entries[: plan.cut] if e.role is not Role.SYSTEM]
    previous = view.log.compaction.compaction.summary if view.log.compaction else ""
    notice = (
        f"[{len(dropped)} earlier entries (~{sum(e.token_count for e in dropped):,} tokens, "
        f"{dropped[0].id} .. {dropped[-1].id}) were left out to fit the context window; the "
        "store keeps each of them whole.]"
    )
    tokenizer = tokenizer_for(view.settings.model)
    summary = (
        summarize_offline(
            dropped,
            previous_summary=previous,
            instructions=request.instructions,
            identifier_policy=view.settings.compaction.identifier_policy,
            notes=(notice,),
            count=tokenizer.count_text,
            max_tokens=room,
        )
        if room > HARD_DROP_NOTE_TOKENS
        else _short(notice, dropped, tokenizer.count_text)
    )
    if plan.carried is not None:
        carried = request_of(next(e for e in entries if e.id == plan.carried))
    if carried is not None:
        return with_current_request(summary, carried.entry_id, carried.text), carried
    return summary, None
