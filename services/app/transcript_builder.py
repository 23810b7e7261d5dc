"""Replaying a transcript's records on a session through its own commands.

One builder builds one session of an import (the main branch, or a fork of it):
each record becomes the event the aggregate's command records, with the
record's time, so an imported session obeys every rule an appended one does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import datetime

from domain.compaction import Compaction
from domain.content import Entry, Role
from domain.errors import DomainError, quoted
from domain.ids import UsedIds
from domain.session import Session
from projections.session_history import SessionHistory
from services.adapters.tokenizers import Tokenizer
from services.adapters.transcripts import TranscriptError
from services.adapters.transcripts.ir import Record

UNANSWERED = "the transcript has no result for this call"


class HistoryIds:
    """The id lookup of a session being built: its own history knows every id."""

    def __init__(self, history: SessionHistory) -> None:
        self._history = history

    def used(self, entry_ids: Collection[str], call_ids: Collection[str]) -> UsedIds:
        return UsedIds(
            frozenset(i for i in entry_ids if self._history.position_of(i) is not None),
            frozenset(c for c in call_ids if self._history.call_position(c) is not None),
        )


class TranscriptBuilder:
    """Replays a transcript's records on a session through its commands."""

    def __init__(self, session: Session, tokenizer: Tokenizer, now: datetime) -> None:
        self.session = session
        self.history = SessionHistory(session.id)
        self._applied = 0
        self._sync()
        self.tokenizer = tokenizer
        self.now = now
        self.last_time = session.created_on
        self.version_of: dict[str, int] = {}
        self.line_of: dict[str, int] = {}  # each entry's line in the file
        self.aliases: dict[str, str] = {}
        self.entries = self.compactions = self.abandoned = 0
        self._group: list[Record] = []
        self._last: Record | None = None

    def _sync(self) -> None:
        pending = self.session.pending_events
        self.history.apply(pending[self._applied :])  # type: ignore[arg-type]
        self._applied = len(pending)

    def _count(self, entry: Entry) -> Entry:
        return replace(
            entry, token_count=self.tokenizer.count_entry(entry), tokenizer=self.tokenizer.name
        )

    def add(self, record: Record) -> None:
        self._last = record
        try:
            if record.abandoned_reason is not None:
                self._group.append(record)
                return
            self.flush()
            self._add(record)
        except TranscriptError:
            raise
        except DomainError as error:
            raise TranscriptError(record.line, str(error)) from None

    def flush(self) -> None:
        """Closes the calls of a run of exported abandonment records, as one abandonment."""
        if not self._group:
            return
        group, self._group = self._group, []
        first = group[0]
        try:
            calls = [r.tool_call_id for g in group if g.entry for r in g.entry.tool_results]
            self._abandon(calls, first.abandoned_reason or "", first.id, first.timestamp)
        except DomainError as error:
            raise TranscriptError(first.line, str(error)) from None
        for record in group:
            self.aliases[record.id] = first.id
            self.version_of[record.id] = self.session.version

    def finish(self) -> None:
        """Ends the transcript: its last abandonment records closed, and the calls it
        never answered abandoned, as calls followed by another entry are. A transcript
        is history: no runtime will answer them, and while they are open the session
        refuses every append but their results."""
        self.flush()
        last = self._last
        if last is None or not self.session.open_tool_calls:
            return
        try:
            self._abandon(
                list(self.session.open_tool_calls),
                UNANSWERED,
                f"{last.id}.unanswered",
                last.timestamp,  # the last record's time, as _time gives it
            )
        except DomainError as error:
            raise TranscriptError(last.line, str(error)) from None

    def _time(self, record: Record) -> datetime:
        if record.timestamp is not None:
            self.last_time = record.timestamp
        return record.timestamp or self.now

    def _abandon(
        self, call_ids: Sequence[str], reason: str, entry_id: str, moment: datetime | None
    ) -> None:
        self.session.abandon_tool_calls(
            call_ids, reason, self._count, entry_id=entry_id, timestamp=moment or self.now
        )
        self._sync()
        self.abandoned += len(call_ids) or 1

    def _add(self, record: Record) -> None:
        moment = self._time(record)
        if record.compaction is not None:
            imported = record.compaction
            first_kept = self.aliases.get(
                imported.first_kept_entry_id, imported.first_kept_entry_id
            )
            position = self.history.position_of(first_kept)
            if position is None:
                raise TranscriptError(
                    record.line,
                    f"firstKeptEntryId {quoted(first_kept)} is not an entry before this compaction "
                    "on its branch",
                )
            summary_tokens = self.tokenizer.count_text(imported.summary)
            compaction = Compaction(
                summary=imported.summary,
                first_kept_entry_id=first_kept,
                tokens_before=imported.tokens_before,
                reason="imported",
                details=imported.details,
                summary_tokens=summary_tokens,
                tokenizer=self.tokenizer.name,
                tokens_before_source="client" if imported.tokens_before else "",
            )
            self.session.record_compaction(
                compaction,
                self.history,
                prompt_tokens=self.history.prompt_tokens_if_cut_at(position, summary_tokens),
                timestamp=moment,
            )
            self._sync()
            self.compactions += 1
            self.version_of[record.id] = self.session.version
            return
        entry = record.entry
        assert entry is not None
        if self.session.open_tool_calls and entry.role not in (Role.TOOL, Role.CUSTOM):
            unanswered = list(self.session.open_tool_calls)
            self._abandon(unanswered, UNANSWERED, f"{record.id}.abandoned", moment)
        self.session.append(
            [self._count(replace(entry, parent_id=None))],
            HistoryIds(self.history),
            timestamp=moment,
        )
        self._sync()
        self.entries += 1
        self.version_of[record.id] = self.session.version
        self.line_of[entry.id] = record.line

    def check_servable(self) -> None:
        """Refuses a session none of whose prompt views could be served: a message its
        prompt keeps is over the budget alone (AppendEntries refuses such a message at
        the write; an import of it must be refused too, not every view after it)."""
        largest = self.history.prompt_view().largest_message()
        if largest is None:
            return
        try:
            self.session.check_fits(
                f"the entry {quoted(largest.id)} ({largest.role.value})",
                "entry",
                largest.token_count,
                "import it into a session with a larger window (the header's settings: "
                "context_window_tokens, or a model that has one), or split the message",
            )
        except DomainError as error:
            raise TranscriptError(self.line_of.get(largest.id, 0), str(error)) from None
