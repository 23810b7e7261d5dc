"""Appending entries, and taking them out of the views (abandon, retract, clear)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from domain.content import Entry
from domain.retraction import RetractionPlan, plan_retraction
from domain.session import Session
from services.adapters.tokenizers import tokenizer_for
from services.app.history_cache import HistoryCache
from services.app.idempotency import AppendResult, Idempotency, fingerprint
from services.app.write_path import WritePath, Written


class EntryCommands:
    def __init__(
        self, writes: WritePath, histories: HistoryCache, idempotency: Idempotency
    ) -> None:
        self.writes = writes
        self.histories = histories
        self.idempotency = idempotency

    def append(
        self,
        session_id: str,
        drafts: Sequence[Entry],
        *,
        expected_version: int | None = None,
        idempotency_key: str = "",
        held_version: int = 0,
    ) -> Written[AppendResult]:
        """``held_version``: the version of the view the client holds, if it says."""
        drafts_print = fingerprint(drafts) if idempotency_key else ""
        store = self.writes.store

        def command(session: Session) -> AppendResult:
            earlier = self.idempotency.earlier_append(session, idempotency_key, drafts_print)
            if earlier is not None:
                return earlier
            session.check_expected_version(expected_version)
            tokenizer = tokenizer_for(session.settings.model)
            entries = session.append(
                drafts,
                store.ids_of(session_id),
                idempotency_key=idempotency_key,
                fingerprint=drafts_print,
                # Counted once valid: a refusal never waits on the tokenizer.
                measure=lambda e: replace(
                    e, token_count=tokenizer.count_entry(e), tokenizer=tokenizer.name
                ),
                estimate_at=lambda version: (
                    self.histories.history(session_id).prompt_view(version).estimated_tokens
                ),
            )
            return AppendResult(session.version, entries)

        # The idempotency check comes before the version check: a retry carries
        # the expected version its first try had.
        return self.writes.write(
            session_id, None, command, seen_version=_seen(drafts, expected_version, held_version)
        )

    def abandon_tool_calls(
        self,
        session_id: str,
        call_ids: Sequence[str],
        reason: str,
        expected_version: int | None = None,
    ) -> Written[Entry]:
        """Closes open calls that will never be answered; answers the session and the
        entry holding their synthetic error results."""

        def command(session: Session) -> Entry:
            tokenizer = tokenizer_for(session.settings.model)
            return session.abandon_tool_calls(
                call_ids,
                reason,
                lambda e: replace(
                    e, token_count=tokenizer.count_entry(e), tokenizer=tokenizer.name
                ),
            )

        return self.writes.write(session_id, expected_version, command)

    def retract_entry(
        self, session_id: str, entry_id: str, reason: str, expected_version: int | None = None
    ) -> Written[RetractionPlan]:
        """Takes the log's latest entry out of the views; answers the session and what was
        retracted."""

        def command(session: Session) -> RetractionPlan:
            plan = plan_retraction(self.histories.history(session_id), entry_id)
            session.retract_entry(plan, reason)
            return plan

        return self.writes.write(session_id, expected_version, command)

    def clear_session(
        self, session_id: str, reason: str, expected_version: int | None = None
    ) -> Written[int]:
        """Takes every entry out of the views; answers the session and how many the log
        showed."""

        def command(session: Session) -> int:
            log = self.histories.history(session_id).durable_log()
            shown = len(log.entries) + len(log.pinned)
            session.clear(shown, reason)
            return shown

        return self.writes.write(session_id, expected_version, command)


def _seen(drafts: Sequence[Entry], expected_version: int | None, held_version: int) -> int:
    """The latest version of the session an append shows its client has seen: the
    version it expects, the view it holds, the views its answers were made from."""
    answered = (d.prompt_ref.version for d in drafts if d.prompt_ref is not None)
    return max(expected_version or 0, held_version, *answered)
