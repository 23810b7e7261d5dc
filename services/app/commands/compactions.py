"""Recording compactions and prunes, taking compactions back, and overflow reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

from domain.compaction import Compaction, CompactionFailure
from domain.compaction_changes import plan_redo, plan_undo
from domain.compaction_events import CompactionRecorded, CompactionRedone, CompactionUndone
from domain.context.overflow import OverflowReport
from domain.context_edits import parse_applied_edits, provider_clears
from domain.errors import InvalidRequest
from domain.pruning import PruneAction, PruneDecision
from domain.session import Session
from domain.session_events import OverflowReported, PruneRecorded
from services.adapters.tokenizers import tokenizer_for
from services.app.history_cache import HistoryCache
from services.app.idempotency import Idempotency
from services.app.write_path import WritePath, Written


class CompactionCommands:
    def __init__(
        self, writes: WritePath, histories: HistoryCache, idempotency: Idempotency
    ) -> None:
        self.writes = writes
        self.histories = histories
        self.idempotency = idempotency

    def record_compaction(
        self,
        session_id: str,
        compaction: Compaction,
        expected_version: int | None = None,
        *,
        idempotency_key: str = "",
        fingerprint: str = "",
    ) -> Written[CompactionRecorded]:
        """Records a compaction, the client's or the engine's. The token figures of the
        receipt are the store's own counts; figures a client sent are kept beside them as
        its claims (details ``claimed_tokens_before`` / ``claimed_tokens_after``).
        With the key of a Compact call that already recorded one, answers that one:
        looked up under the session's write lock, so two tries record one."""

        def command(session: Session) -> CompactionRecorded:
            earlier = self.idempotency.earlier_compaction(session, idempotency_key, fingerprint)
            if earlier is not None:
                return earlier
            compaction.validate()
            compaction.check_shrinks()  # claims that contradict themselves are refused
            recorded_summary = compaction.completed_summary()
            tokenizer = tokenizer_for(session.settings.model)
            history = self.histories.history(session_id)
            claims = {
                f"claimed_{name}": str(value)
                for name, value in (
                    ("tokens_before", compaction.tokens_before),
                    ("tokens_after", compaction.tokens_after),
                )
                if value
            }
            # Whichever a view shows: the summary text (with the blocks of the user
            # message it carries beside it), or the provider's own items.
            summary_tokens = max(
                tokenizer.count_text(recorded_summary)
                + tokenizer.count_blocks(compaction.carried_blocks),
                sum(tokenizer.count_text(item.json) for item in compaction.provider_items()),
            )
            counted = replace(
                compaction,
                summary=recorded_summary,
                summary_tokens=summary_tokens,
                tokenizer=tokenizer.name,
                tokens_before=0,
                tokens_after=0,
                details=MappingProxyType({**compaction.details, **claims}),
            )
            position = history.position_of(compaction.first_kept_entry_id)
            prompt_tokens = -1
            if position is not None:
                # The prompt's messages as the model sees them, before and after.
                prompt_tokens = history.prompt_tokens_if_cut_at(position, counted.summary_tokens)
                view = history.prompt_view()
                source = f"tokenizer:{tokenizer.name}"
                covered = history.covered_if_cut_at(position)
                counted = replace(
                    counted,
                    tokens_before=view.estimated_tokens - view.system_prompt.tokens.total,
                    tokens_after=prompt_tokens,
                    tokens_before_source=source,
                    tokens_after_source=source,
                    first_covered_entry_id=covered[0].id if covered else "",
                    last_covered_entry_id=covered[-1].id if covered else "",
                    entries_covered=len(covered),
                )
            return session.record_compaction(
                counted,
                history,
                prompt_tokens=prompt_tokens,
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
            )

        return self.writes.write(session_id, expected_version, command)

    def undo_compaction(
        self,
        session_id: str,
        compaction_version: int = 0,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
    ) -> Written[CompactionUndone]:
        """Takes back a compaction in force (the latest when ``compaction_version`` is 0):
        the entries it covered are in the durable log again."""

        def command(session: Session) -> CompactionUndone:
            plan = plan_undo(self.histories.history(session_id).whole(), compaction_version)
            return session.undo_compaction(
                plan.compaction_version,
                reason,
                restored=(plan.restored_compaction_version, plan.first_kept_position),
                prompt_tokens=plan.prompt_tokens,
                requested_by=requested_by,
            )

        return self.writes.write(session_id, expected_version, command)

    def redo_compaction(
        self,
        session_id: str,
        undo_version: int,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
    ) -> Written[CompactionRedone]:
        """Takes back the undo recorded at ``undo_version``: the compactions it took
        back are in force again, exactly as recorded."""

        def command(session: Session) -> CompactionRedone:
            plan = plan_redo(self.histories.history(session_id).whole(), undo_version)
            return session.redo_compaction(
                plan.undo_version,
                reason,
                compaction_versions=plan.compaction_versions,
                first_kept_position=plan.first_kept_position,
                cuts=plan.cuts,
                prompt_tokens=plan.prompt_tokens,
                requested_by=requested_by,
            )

        return self.writes.write(session_id, expected_version, command)

    def undo_tainted_compactions(self, session_id: str) -> int:
        """Takes back the compactions in force whose summaries an erasure tainted (the
        oldest, and every later one with it), so that compacting again summarises the
        entries left; answers the oldest one's version, 0 when none is tainted."""
        history = self.histories.history(session_id)
        tainted = history.tainted_compactions()
        found = [c.version for c in history.compactions_in_force() if c.version in tainted]
        if not found:
            return 0
        self.undo_compaction(
            session_id,
            found[0],
            reason="its summary was erased with entries it covered; summarising again",
            requested_by="erasure",
        )
        return found[0]

    def record_prune(
        self,
        session_id: str,
        decisions: Sequence[PruneDecision],
        reason: str,
        expected_version: int | None = None,
        applied_edits_json: str = "",
    ) -> Written[PruneRecorded]:
        """Records a prune: the client's decisions, or (``applied_edits_json``) the
        provider's report of the edits it made, cleared here too (domain.context_edits)."""
        edits = parse_applied_edits(applied_edits_json) if applied_edits_json else None
        if edits is not None and decisions:
            raise InvalidRequest(
                "a prune takes either entries or applied_edits_json; the report says which "
                "results the provider cleared"
            )

        def command(session: Session) -> PruneRecorded:
            history = self.histories.history(session_id)
            chosen, why = decisions, reason
            if edits is not None:
                view = history.prompt_view()
                cleared = [
                    entry_id
                    for entry_id, decision in view.pruned.items()
                    if decision.action is PruneAction.HARD_CLEAR
                ]
                chosen = provider_clears(edits, view.log.entries, cleared)
                why = reason or f"anthropic context editing: {edits.description}"
            return session.record_prune(
                chosen,
                why,
                history,
                history.prompt_tokens_if_pruned,
                applied_edits_json=applied_edits_json,
            )

        return self.writes.write(session_id, expected_version, command)

    def record_compaction_failure(
        self, session_id: str, failure: CompactionFailure
    ) -> Written[None]:
        """Records a compaction that did not happen."""

        def command(session: Session) -> None:
            session.record_compaction_failure(failure)

        return self.writes.write(session_id, None, command)

    def report_overflow(self, session_id: str, report: OverflowReport) -> Written[OverflowReported]:
        """Records the provider's refusal; the session counts the attempts of its turn and
        learns what the error stated (window, the prompt's tokens, the answer's room)."""

        def command(session: Session) -> OverflowReported:
            estimate = None
            version = report.view_version
            window_stated, prompt_stated = report.stated[0], report.stated[1]
            if (prompt_stated or not window_stated) and 1 <= version <= session.version:
                # The store's estimate of the refused view, against the provider's count,
                # or the bound on a window the error did not state.
                history = self.histories.history(session_id)
                estimate = history.prompt_view(version).estimated_tokens
            return session.report_overflow(report, view_estimate=estimate)

        return self.writes.write(session_id, None, command)
