"""A second engine that needs no model: a sliding window over the newest messages.

When the prompt crosses its threshold, the oldest messages are dropped until
the rest fits (recorded as a hard-drop compaction, so replay and audit see it
like any other). The window guard and the tool-result guard apply as in the
layered engine; there is no summariser and no pruning.
"""

from __future__ import annotations

import time
from concurrent.futures import Future

from domain.compaction import Trigger
from domain.errors import PromptOverBudget
from services import deadline as call_deadline
from services.engine.base import (
    Assembly,
    CompactionOutcome,
    CompactionRequest,
    CompactsInTheBackground,
    EngineAction,
    EngineInfo,
)
from services.engine.fit import fit
from services.engine.layered import guard_window


class SlidingWindowEngine(CompactsInTheBackground):
    info = EngineInfo(
        "sliding-window",
        owns_compaction=True,
        description="drops the oldest messages to fit the threshold; no summariser",
    )

    def assemble(
        self, session_id: str, token_budget: int | None, deadline: float | None
    ) -> Assembly:
        view = self.port.history(session_id).prompt_view()
        verdict = guard_window(view)
        budget = view.budget(token_budget)
        if budget.fits(view.estimated_tokens) or view.settings.compaction.mode != "auto":
            return Assembly(view, verdict, budget)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        request = CompactionRequest(
            Trigger.for_view(token_budget), force=True, budget_tokens=token_budget
        )
        outcome = self._start(session_id, request, join=token_budget is None).result(timeout)
        view = self.port.history(session_id).prompt_view()
        budget = view.budget(token_budget)
        if not budget.fits(view.estimated_tokens):
            raise PromptOverBudget(
                f"the newest messages alone need "
                f"~{budget.provider_tokens(view.estimated_tokens):,} tokens, over the budget of "
                f"{budget.describe()}: {outcome.reason}; use a model with a larger window",
                budget.provider_tokens(view.estimated_tokens),
                budget.budget_tokens,
            )
        version = outcome.recorded.originator_version if outcome.recorded else 0
        return Assembly(view, verdict, budget, [EngineAction("compacted", outcome.reason, version)])

    def compact(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        if request.dry_run:
            return fit(self.port, session_id, request, self.info.name)
        if request.trigger == Trigger.MANUAL:
            # Ends with this call, writing nothing after its deadline (see fit).
            future = self.runner.run(
                session_id, lambda: self._fit(session_id, request), join=False, joinable=False
            )
            return call_deadline.result(future, "waiting for the compaction")
        outcome: CompactionOutcome = self._start(session_id, request, join=True).result()
        return outcome

    def _fit(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        return fit(self.port, session_id, request, self.info.name)

    def _start(
        self, session_id: str, request: CompactionRequest, *, join: bool = True
    ) -> Future[CompactionOutcome]:
        def job() -> CompactionOutcome:
            # In the background: not bound by the deadline of the call that started it.
            with call_deadline.within(None):
                return self._fit(session_id, request)

        return self.runner.run(session_id, job, join=join)
