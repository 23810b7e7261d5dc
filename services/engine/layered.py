"""The default engine: the four layers of SPEC 3, inside the store.

1. Window guard: a window below the minimum refuses the view (the client must
   switch models); a small one carries a warning.
2. Tool-result guard: decided at append by the aggregate (see Session.append)
   and recorded with the entries; nothing to do here.
3. Compaction: in the background as soon as an append takes the prompt over
   its threshold; a view over its budget waits for it, then, if that was not
   enough, for the steps that always land (services.engine.fit); overflow
   reports and Compact requests run it too. Summaries come from the session's
   summariser chain (services.engine.compaction). Of servers sharing a store,
   one at a time asks a model for a session's summary (SummaryClaims); on the
   others the compaction it started is said to be running, as one running here,
   and a Compact call is refused (CompactionRunningElsewhere) for its client to
   retry.
4. Pruning: cache-ttl (SPEC 3.4) or recent-n byte caps, before a view is served.

Every figure compared is the session's one calibrated estimate against the
budget its window gives (domain.context.budget).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime

import structlog

from domain.compaction import Trigger
from domain.content import Role
from domain.context.chain import summarizer_chain
from domain.context.pruning_planner import (
    PrunePlan,
    ToolFilter,
    plan_cache_ttl_prune,
    plan_recent_n_prune,
)
from domain.context.window_guard import WindowVerdict, check_context_window
from domain.errors import (
    CompactionDeadlineExceeded,
    CompactionRunningElsewhere,
    ContextWindowTooSmall,
    DomainError,
    PromptOverBudget,
)
from domain.pruning import PruneAction, PruneDecision
from domain.settings import SessionSettings
from projections.session_history import PromptView
from services import deadline as call_deadline
from services.engine.base import (
    Assembly,
    CompactionOutcome,
    CompactionReplayed,
    CompactionRequest,
    CompactsInTheBackground,
    EngineAction,
    EngineContext,
    EngineInfo,
)
from services.engine.compaction import compact_with_chain
from services.engine.fit import fit

log = structlog.get_logger(__name__)

# A view over its budget after the compaction runs the fitting steps at most this often
# (each one lands; more rounds only follow a calibration that moved meanwhile).
FIT_ROUNDS = 3
# A view over its budget waits this long for a summarising compaction; past it the
# steps that always land make it fit, and the summary lands when the model is done.
VIEW_WAIT_SECONDS = 1.0
RUNNING_ELSEWHERE = (
    "another server is summarising this session; its compaction lands when the model is done"
)


class LayeredEngine(CompactsInTheBackground):
    info = EngineInfo(
        "layered",
        owns_compaction=True,
        description="window guard, tool-result guard, compaction with a summariser "
        "chain (threshold, overflow, manual), pruning",
    )

    def __init__(self, context: EngineContext) -> None:
        super().__init__(context)
        self.summarizers = context.summarizers
        self.claims = context.claims

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
        budget = view.budget(token_budget)
        if budget.fits(view.estimated_tokens) or view.settings.compaction.mode != "auto":
            return Assembly(view, verdict, budget, actions)
        running = self.runner.running(session_id)
        asked = token_budget is not None
        trigger = Trigger.for_view(token_budget)
        request = CompactionRequest(trigger, force=asked, budget_tokens=token_budget)
        started = self._start(session_id, request, join=not asked)
        outcome = self._wait(started, deadline, at_most=VIEW_WAIT_SECONDS)
        if outcome is None:
            # A model is still summarising: its compaction lands when done (cutting
            # later than what the next steps drop), and this view need not wait for it.
            actions.append(
                EngineAction(
                    "compaction_running",
                    f"still summarising after {VIEW_WAIT_SECONDS:g} s; it goes on in the "
                    "background",
                )
            )
        else:
            kind = "waited_for_compaction" if running is not None and not asked else "compacted"
            actions.append(outcome.action(kind))
        for _ in range(FIT_ROUNDS):
            view = self.port.history(session_id).prompt_view()
            budget = view.budget(token_budget)
            if budget.fits(view.estimated_tokens):
                return Assembly(view, verdict, budget, actions)
            # What the summary kept still does not fit: drop and trim until it does.
            to_fit = CompactionRequest(trigger, force=True, budget_tokens=token_budget)
            fitted = self._wait(self._start(session_id, to_fit, join=False, fitting=True), deadline)
            assert fitted is not None  # no bound but the deadline, which raises
            outcome = fitted
            actions.append(outcome.action())
            if outcome.recorded is None and outcome.pruned is None and outcome.failure is None:
                raise PromptOverBudget(
                    f"the prompt needs ~{budget.provider_tokens(view.estimated_tokens):,} "
                    f"tokens but may hold {budget.describe()}, and nothing more can be left "
                    f"out: {outcome.reason}. Use a model with a larger window, or abandon "
                    "this turn (AbandonToolCalls, then a new user message)",
                    budget.provider_tokens(view.estimated_tokens),
                    budget.budget_tokens,
                )
        view = self.port.history(session_id).prompt_view()
        return Assembly(view, verdict, view.budget(token_budget), actions)

    def compact(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        if request.dry_run:
            return self._compact_now(session_id, request)
        # A manual request queues behind a running compaction (it has its own
        # instructions); any other trigger joins it.
        future = self._start(session_id, request, join=request.trigger != Trigger.MANUAL)
        if request.trigger == Trigger.MANUAL:
            # The job heeds this call's deadline and cut too: it writes nothing after them.
            return call_deadline.result(future, "waiting for the compaction")
        if request.trigger != Trigger.OVERFLOW:
            outcome: CompactionOutcome = future.result()
            return outcome
        # The view that follows an overflow report makes itself fit (see assemble):
        # a model still summarising after a short wait lands in the background.
        waited = self._wait(future, None, at_most=VIEW_WAIT_SECONDS)
        if waited is None:
            return CompactionOutcome(False, "a model is summarising in the background")
        return waited

    # -- compaction ------------------------------------------------------------------

    def _start(
        self,
        session_id: str,
        request: CompactionRequest,
        *,
        join: bool = True,
        fitting: bool = False,
    ) -> Future[CompactionOutcome]:
        lane = "fit" if fitting else "compaction"
        # A manual request's job is its caller's: it ends, writing nothing, at that
        # call's deadline or cut, so a retry cannot compact twice. Any other job goes
        # on in the background whoever stops waiting, so it must not inherit the
        # deadline of the call that started it (an append, a view).
        own_call = request.trigger == Trigger.MANUAL and not fitting

        def job() -> CompactionOutcome:
            try:
                if own_call:
                    return self._compact_now(session_id, request)
                with call_deadline.within(None):
                    if fitting:
                        return fit(self.port, session_id, request, self.info.name)
                    return self._compact_now(session_id, request)
            except (CompactionReplayed, CompactionRunningElsewhere):
                # A try of the same Compact landed first (its answer, no failure), or
                # another server summarises: the caller's answer, nothing went wrong.
                raise
            except Exception as error:
                # Whoever started it may have stopped waiting (it went on in the
                # background): said here, or nowhere. Refusals need no traceback.
                log.warning(
                    "compaction did not land",
                    session=session_id,
                    trigger=request.trigger,
                    lane=lane,
                    error=str(error),
                    exc_info=not isinstance(error, DomainError),
                )
                raise

        return self.runner.run(session_id, job, join=join, lane=lane, joinable=not own_call)

    def _wait(
        self,
        future: Future[CompactionOutcome],
        deadline: float | None,
        at_most: float | None = None,
    ) -> CompactionOutcome | None:
        """The job's outcome; None when ``at_most`` seconds passed first (the job goes on);
        refused when the client's deadline passes first."""
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        bounded = remaining is not None and (at_most is None or remaining <= at_most)
        timeout = remaining if bounded else at_most
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            if not bounded:
                return None
            raise CompactionDeadlineExceeded(
                "the prompt is over its budget and the compaction that brings it back is "
                "still running; it goes on in the background: ask again, with a longer deadline"
            ) from None

    def _compact_now(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        """A compaction whose chain asks a model does so only while it holds the
        session's claim, whoever asked for it (a dry run asks none, and claims nothing).
        Refused the claim, a compaction the engine started leaves the summary to the
        server holding it; a Compact call is refused, to retry once that one landed."""
        if request.truncate_first and request.attempt <= 1:
            view = self.port.history(session_id).prompt_view()
            truncated = self._truncate_oversized(session_id, view)
            if truncated is not None:
                return truncated
        # The settings as stored now, as the chain will read them: this server's copy
        # may predate another server's change of summariser.
        if request.dry_run or not _asks_a_model(self.port.aggregate(session_id).settings):
            return self._compact_with_chain(session_id, request)
        with self.claims.hold(session_id) as held:
            if held:
                self._answer_a_landed_try(session_id, request)
                return self._compact_with_chain(session_id, request)
        log.debug("compaction left to another server", session=session_id, trigger=request.trigger)
        if request.trigger == Trigger.MANUAL:
            raise CompactionRunningElsewhere(request.idempotency_key)
        # The view goes on as while a model summarises here (the fitting steps make
        # one over its budget fit).
        return CompactionOutcome(False, RUNNING_ELSEWHERE, elsewhere=True)

    def _answer_a_landed_try(self, session_id: str, request: CompactionRequest) -> None:
        """Raises CompactionReplayed when a try of this Compact landed since its caller
        looked for the key: the other server's claim ends only once its compaction is
        recorded, so looked up under this one, before a model is asked, it is found."""
        if not request.idempotency_key:
            return
        key, fingerprint = request.idempotency_key, request.fingerprint
        landed = self.port.landed_compaction(session_id, key, fingerprint)
        if landed is not None:
            raise CompactionReplayed(landed)

    def _compact_with_chain(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        return compact_with_chain(self.port, self.summarizers, session_id, request, self.info.name)

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
                view.window_tokens,
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
                view.window_tokens,
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
    source = view.window_source
    verdict = check_context_window(
        view.window_tokens,
        source,
        hard_min_tokens=policy.hard_min_tokens,
        warn_below_tokens=policy.warn_below_tokens,
    )
    if policy.enabled and verdict.blocked:
        raise ContextWindowTooSmall(
            verdict.message, verdict.window_tokens, source, verdict.hard_min_tokens
        )
    return verdict


def _asks_a_model(settings: SessionSettings) -> bool:
    """Whether the session's chain has a model's step (the offline summary and the hard
    drop take milliseconds: no server need leave them to another)."""
    return any(step.is_model for step in summarizer_chain(settings.compaction, settings.model))


def _last_cache_touch(view: PromptView) -> datetime | None:
    """When the provider last read this prompt: the newest assistant turn's time."""
    for entry in reversed(view.log.entries):
        if entry.role is Role.ASSISTANT:
            return entry.timestamp
    return None
