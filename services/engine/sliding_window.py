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
from domain.context.compaction_planner import prompt_budget
from domain.errors import PromptOverBudget
from services.engine.base import (
    Assembly,
    CompactionOutcome,
    CompactionRequest,
    CompactsInTheBackground,
    EngineAction,
    EngineInfo,
)
from services.engine.hard_drop import hard_drop
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
        budget = prompt_budget(view.context_window_tokens, view.settings.compaction)
        if token_budget is not None:
            budget = min(budget, token_budget)
        if view.estimated_tokens <= budget or view.settings.compaction.mode != "auto":
            return Assembly(view, verdict, budget)
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        request = CompactionRequest(Trigger.THRESHOLD, budget_tokens=budget)
        outcome = self._start(session_id, request, join=token_budget is None).result(timeout)
        view = self.port.history(session_id).prompt_view()
        if view.estimated_tokens > budget:
            raise PromptOverBudget(
                f"the newest messages alone need ~{view.estimated_tokens:,} tokens, over the "
                f"budget of {budget:,}; use a model with a larger window",
                view.estimated_tokens,
                budget,
            )
        version = outcome.recorded.originator_version if outcome.recorded else 0
        return Assembly(view, verdict, budget, [EngineAction("compacted", outcome.reason, version)])

    def compact(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        if request.dry_run:
            return hard_drop(self.port, session_id, request, self.info.name)
        outcome: CompactionOutcome = self._start(
            session_id, request, join=request.trigger != Trigger.MANUAL
        ).result()
        return outcome

    def _start(
        self, session_id: str, request: CompactionRequest, *, join: bool = True
    ) -> Future[CompactionOutcome]:
        return self.runner.run(
            session_id, lambda: hard_drop(self.port, session_id, request, self.info.name), join=join
        )
