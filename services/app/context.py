"""The context-management use cases: prompt views the engine keeps within the window,
compaction on request, overflow reports and the context report (the system prompt is a
command of its own, services.app.commands.sessions).

Each session's engine is chosen by its ``engine`` setting. Replays (a view as
of an earlier version or time) never run the engine: they show what was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from domain.compaction import Trigger
from domain.content import Role
from domain.context.overflow import REQUEST_TOO_LARGE, OverflowReport
from domain.context.window_guard import WindowVerdict, check_context_window
from domain.errors import (
    CompactionGaveUp,
    InvalidRequest,
)
from domain.session import Session, SessionEvent
from domain.session_events import EntriesAppended, OverflowReported
from projections.context_report import ContextReport, build_context_report
from projections.prompt_formats import PromptRenderer
from projections.rendered_prompt import appended_messages
from projections.session_history import PromptView
from services.adapters.model_info import model_metadata
from services.adapters.overflow import classify_provider_error, stated_limits
from services.app.compact_retries import CompactRetries, replayed
from services.app.idempotency import compact_fingerprint
from services.app.retrieval import Retrieval
from services.app.sessions import AsOf, SessionService
from services.app.view_fits import (
    ServedView,
    fitted_to_message,
    refuse_over_message,
    within_learned_bytes,
)
from services.engine.base import (
    CompactionOutcome,
    CompactionReplayed,
    CompactionRequest,
    EngineAction,
)
from services.engine.registry import EngineRegistry

# After an overflow, compaction aims at this share of the refused view's estimate.
OVERFLOW_TARGET_SHARE = 0.7


class ContextService:
    def __init__(
        self,
        sessions: SessionService,
        engines: EngineRegistry,
        retrieval: Retrieval | None = None,
    ) -> None:
        self.sessions = sessions
        self.engines = engines
        self.retrieval = retrieval or Retrieval(None)
        self.retries = CompactRetries()

    def ingest(self, session: Session, saved: Sequence[SessionEvent]) -> None:
        """Tells the session's engine of a save (the composition root wires it)."""
        if saved and isinstance(saved[-1], OverflowReported):
            # ReportOverflow compacts for the report itself, in its own order (trimming
            # oversized results first when the error stated no figures); a threshold
            # compaction started by the window the report taught would run first.
            return
        engine = self.engines.get(session.settings.engine)
        engine.ingest(session)
        if _ends_turn(session, saved):
            engine.after_turn(session)

    def prompt_view(
        self,
        session_id: str,
        as_of: AsOf,
        provider_format: str,
        deadline: float | None,
        token_budget: int | None = None,
        held: tuple[int, str] | None = None,
        just_written: int | None = None,
    ) -> ServedView:
        """Now: a view the engine has brought within the budget. As of a point: as it was.

        The view, and the one the client holds it is compared with, are read at one
        moment: the store is asked for newer events once, or not at all when
        ``just_written``, the version this call's own append just wrote, is already in
        this server's copy of the history (a view asked right after would see that)."""
        written = just_written if as_of == AsOf() else None
        limit = self.sessions.rules.max_content_bytes
        with self.sessions.one_read(session_id, written):
            if as_of.version is not None or as_of.time is not None:
                view, rendered = self.sessions.prompt_view(session_id, as_of, provider_format)
                refuse_over_message(rendered, limit, "a replay shows the view as it was")
                return ServedView(
                    view, rendered, _verdict(view), view.budget(), view.settings.engine
                )
            engine = self.sessions.recent(session_id).settings.engine
            assemble = partial(self._assembled, session_id, engine, provider_format, deadline)
            served, own = assemble(token_budget)
            served, own = within_learned_bytes(assemble, served, own, token_budget)
            size = served.rendered.json_bytes_over(limit)
            if size is not None:
                served, own = fitted_to_message(assemble, served, size, limit, token_budget)
            if held is None or not own:
                return served
            return self._since(session_id, provider_format, held, served)

    def _assembled(
        self,
        session_id: str,
        name: str,
        provider_format: str,
        deadline: float | None,
        token_budget: int | None,
    ) -> tuple[ServedView, bool]:
        """The engine's view, with what recall adds, rendered; and whether it is the
        session's own view (no recall added to it), which a client may hold a part of."""
        assembly = self.engines.get(name).assemble(session_id, token_budget, deadline)
        view, recalled = self.retrieval.add_to(assembly.view, assembly.budget, deadline)
        own = view is assembly.view
        if own:
            rendered = self.sessions.render(view, provider_format)
        else:
            # A view of its own: the session's renderer keeps each version's one.
            rendered = PromptRenderer().render(view, provider_format)
        actions = (*assembly.actions, *([recalled] if recalled else []))
        served = ServedView(view, rendered, assembly.verdict, assembly.budget, name, actions)
        return served, own

    def _since(
        self, session_id: str, provider_format: str, held: tuple[int, str], served: ServedView
    ) -> ServedView:
        """The view as what was appended after the one the client holds, when that one is
        unchanged; else the whole view. Either way the client's provider cache is valid
        exactly when the answer is a delta."""
        version, request_hash = held
        base = self.sessions.rendered_before(session_id, provider_format, version, request_hash)
        if base is None:
            return served
        appended = appended_messages(base, served.rendered)
        if appended is None:
            return served
        return replace(served, appended_messages_json=appended, base_version=version)

    def compact(
        self,
        session_id: str,
        *,
        instructions: str,
        force: bool,
        dry_run: bool,
        expected_version: int | None = None,
        idempotency_key: str = "",
    ) -> CompactionOutcome:
        """``idempotency_key``: a retry with it answers the compaction the first try
        recorded, ``replayed``, whichever server either came to and whichever landed
        first (services.app.compact_retries); a dry run writes nothing, needs none."""
        request = CompactionRequest(
            Trigger.MANUAL, instructions=instructions, force=force, dry_run=dry_run
        )
        if dry_run or not idempotency_key:
            return self._compact(session_id, request, expected_version)
        keyed = replace(
            request,
            idempotency_key=idempotency_key,
            fingerprint=compact_fingerprint(instructions, force),
        )
        with self.retries.one_at_a_time(session_id, idempotency_key):
            # One read answers the key, then the version (a retry carries the version
            # its first try had): a first try landing between them cannot make its
            # retry a version conflict.
            session = self.sessions.aggregate(session_id)
            earlier = self.sessions.earlier_compaction(session, idempotency_key, keyed.fingerprint)
            if earlier is not None:
                return replayed(earlier)
            try:
                outcome = self._compact(session_id, keyed, expected_version, session)
            except CompactionReplayed as landed:
                return replayed(landed.recorded)
            if outcome.recorded is not None:
                return outcome
            # Nothing recorded: the first try may have landed on another server while
            # this one planned, and left it nothing to compact.
            earlier = self.sessions.earlier_compaction(
                self.sessions.aggregate(session_id), idempotency_key, keyed.fingerprint
            )
            return outcome if earlier is None else replayed(earlier)

    def _compact(
        self,
        session_id: str,
        request: CompactionRequest,
        expected_version: int | None,
        session: Session | None = None,
    ) -> CompactionOutcome:
        """``session``: the session as just read, if it was."""
        session = session or self.sessions.aggregate(session_id)
        session.check_expected_version(expected_version)
        if not request.dry_run:
            # A summary erased with entries it covered is regenerated from those left.
            self.sessions.undo_tainted_compactions(session_id)
        engine = self.engines.get(session.settings.engine)
        return engine.compact(session_id, request)

    def report_overflow(
        self,
        session_id: str,
        report: OverflowReport,
        *,
        provider_format: str,
        deadline: float | None,
    ) -> ServedView:
        """SPEC 3.3 (a): truncate oversized tool results, then compact (not with
        compaction.mode 'off'); at most ``max_attempts`` reports a turn, then
        ``compaction_failure``."""
        session = self.sessions.aggregate(session_id)
        model = session.settings.model
        provider = report.provider or model_metadata.provider(model) or "openai"
        verdict = classify_provider_error(report.message, report.status_code, provider, model)
        if not verdict.is_overflow:
            raise InvalidRequest(
                f"this error is not a context overflow ({verdict.kind}: {verdict.message[:300]}); "
                "compaction would not help: retry, or fix the request"
            )
        policy = session.settings.compaction
        if session.overflow_attempts >= policy.max_attempts:
            raise CompactionGaveUp(
                f"the provider refused the prompt as too long {session.overflow_attempts} times "
                f"in this turn (max_attempts {policy.max_attempts}); start a new turn, compact "
                "with other instructions, or switch to a model with a larger window",
                session.overflow_attempts,
            )
        stated = stated_limits(report.message)
        refused_bytes = 0
        if verdict.kind == REQUEST_TOO_LARGE:
            refused_bytes = self._refused_bytes(session, report.view_version, provider_format)
        session = self.sessions.report_overflow(
            session_id,
            replace(
                report,
                provider=provider,
                kind=verdict.kind,
                stated=stated.as_tuple(),
                refused_bytes=refused_bytes,
            ),
        )
        if policy.mode == "off":
            # Recorded, and what it stated learned; compacting is left to the client.
            actions = [
                EngineAction(
                    "not_compacted",
                    "compaction.mode is 'off': the overflow is recorded and nothing is "
                    "compacted; compact on request (Compact), or set compaction.mode to "
                    "'manual' or 'auto' for the store to compact on overflow",
                )
            ]
        else:
            stated_any = bool(stated.window_tokens or stated.prompt_tokens)
            actions = [self._compact_for_overflow(session_id, session, stated_any)]
        served = self.prompt_view(session_id, AsOf(), provider_format, deadline)
        return ServedView(
            served.view,
            served.rendered,
            served.verdict,
            served.budget,
            served.engine,
            (*actions, *served.actions),
        )

    def _refused_bytes(self, session: Session, view_version: int, provider_format: str) -> int:
        """The size of the view served at ``view_version``, as rendered in the format the
        client asks its answer in (the one it sends): what a request refused for its bytes
        carried, as near as the store can tell, and what the client's own figure, when it
        sends one, is set against. 0 for a version the session does not have (the report
        is refused for it)."""
        if not 1 <= view_version <= session.version:
            return 0
        as_of = AsOf(version=view_version)
        _, rendered = self.sessions.prompt_view(session.id, as_of, provider_format)
        return rendered.json_bytes

    def _compact_for_overflow(
        self, session_id: str, session: Session, stated: bool
    ) -> EngineAction:
        """SPEC 3.3 (a): with figures stated, compact to the budget they taught; without,
        trim the largest results first, then aim well below the refused prompt (the
        window learned from its size keeps later views below it too; a request refused
        for its bytes teaches a limit in bytes instead, which the view keeps under)."""
        engine = self.engines.get(session.settings.engine)
        if stated:
            # What it stated is learned: the session's own budget now fits the provider.
            request = CompactionRequest(
                Trigger.OVERFLOW, force=True, attempt=session.overflow_attempts
            )
        else:
            # It stated nothing: trim the largest results first, then aim well below the
            # refused prompt.
            refused = self.sessions.history(session_id).prompt_view()
            request = CompactionRequest(
                Trigger.OVERFLOW,
                force=True,
                attempt=session.overflow_attempts,
                budget_tokens=int(refused.calibrated_tokens * OVERFLOW_TARGET_SHARE),
                truncate_first=True,
            )
        return engine.compact(session_id, request).action()

    def context_report(self, session_id: str) -> ContextReport:
        """The report of one version: the session's totals come from the aggregate, the
        view from the history, at the aggregate's version. The history, read after it,
        holds that version (and this server's copy grows in place as appends land here,
        so "now" would be a later version than the aggregate's)."""
        session = self.sessions.aggregate(session_id)
        history = self.sessions.history(session_id)
        view = history.prompt_view(session.version)
        return build_context_report(view, history, session, _verdict(view))


def _ends_turn(session: Session, saved: Sequence[SessionEvent]) -> bool:
    """Whether this save ended a turn: an assistant entry last, no tool call open."""
    last = saved[-1] if saved else None
    return (
        isinstance(last, EntriesAppended)
        and last.entries[-1].role is Role.ASSISTANT
        and not session.open_tool_calls
    )


def _verdict(view: PromptView) -> WindowVerdict:
    """The guard's verdict for reading: replays and reports show a refusal, never raise it."""
    policy = view.settings.window_guard
    return check_context_window(
        view.window_tokens,
        view.window_source,
        hard_min_tokens=policy.hard_min_tokens,
        warn_below_tokens=policy.warn_below_tokens,
    )
