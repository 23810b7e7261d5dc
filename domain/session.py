"""The Session aggregate: every change to a session is one of its events.

The aggregate's state is small and does not grow with the session (version,
settings, counters, the last entry, open tool calls, the latest cut, a bounded
window of idempotency keys), so appending entry 100,000 costs what appending
entry 10 does, and snapshots stay tiny. The entries themselves live in the
events and in the read side; an append asks an ``IdLookup`` which of its ids
the session already used, and the rarer commands that look further back ask a
``History``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    CanSnapshotAggregate,
)

from domain.compaction import Compaction, History, check_cut_point
from domain.content import Entry, Role, Usage, validate_entry
from domain.errors import (
    DuplicateEntry,
    IdempotencyKeyReused,
    InvalidCutPoint,
    InvalidPrune,
    InvalidRequest,
    ToolCallsOpen,
    UnknownToolCall,
    VersionConflict,
)
from domain.ids import IdLookup, UsedIds
from domain.pruning import PruneDecision
from domain.settings import SessionSettings

SESSION_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
MAX_ENTRIES_PER_APPEND = 10_000
# Retries come seconds after the first try; remembering the last few hundred
# keys answers them without letting the aggregate grow.
IDEMPOTENCY_WINDOW = 256


def validate_session_id(session_id: str) -> None:
    if not SESSION_ID.fullmatch(session_id):
        raise InvalidRequest(
            f"session id {session_id!r} must be 1-128 characters of letters, digits and . _ : @ -"
        )


def new_id() -> str:
    return uuid.uuid4().hex


class Session(BaseAggregate[str]):
    @dataclass(frozen=True)
    class Event(CanMutateAggregate[str]):
        originator_id: str
        originator_version: int
        timestamp: datetime

    @dataclass(frozen=True)
    class Started(Event, CanInitAggregate[str]):
        originator_topic: str
        settings: SessionSettings
        context_window_tokens: int
        context_window_source: str

    @dataclass(frozen=True)
    class EntriesAppended(Event):
        entries: Sequence[Entry]
        idempotency_key: str = ""
        fingerprint: str = ""

        def apply(self, session: Session) -> None:
            for entry in self.entries:
                position = session.entry_count
                session.entry_count += 1
                session.total_tokens += entry.token_count
                if entry.usage is not None:
                    session.usage = session.usage + entry.usage
                for call in entry.tool_calls:
                    session.open_tool_calls[call.id] = position
                for result in entry.tool_results:
                    session.open_tool_calls.pop(result.tool_call_id, None)
                session.last_entry_id = entry.id
            session.entries_since_compaction += len(self.entries)
            if self.idempotency_key:
                keys = session.recent_appends
                keys[self.idempotency_key] = [self.fingerprint, self.originator_version]
                while len(keys) > IDEMPOTENCY_WINDOW:
                    del keys[next(iter(keys))]

    @dataclass(frozen=True)
    class CompactionRecorded(Event):
        compaction: Compaction
        first_kept_position: int

        def apply(self, session: Session) -> None:
            session.compaction_count += 1
            session.first_kept_position = self.first_kept_position
            session.entries_since_compaction = 0

    @dataclass(frozen=True)
    class PruneRecorded(Event):
        decisions: Sequence[PruneDecision]
        reason: str = ""

    @dataclass(frozen=True)
    class SettingsChanged(Event):
        settings: SessionSettings
        context_window_tokens: int
        context_window_source: str

        def apply(self, session: Session) -> None:
            session.settings = self.settings
            session.context_window_tokens = self.context_window_tokens
            session.context_window_source = self.context_window_source

    @dataclass(frozen=True)
    class Snapshot(CanSnapshotAggregate[str]):
        originator_id: str
        originator_version: int
        timestamp: datetime
        topic: str
        state: dict[str, Any]

    def __init__(
        self, settings: SessionSettings, context_window_tokens: int, context_window_source: str
    ) -> None:
        # Called with the Started event's fields. Every attribute here is
        # bounded in size whatever the length of the session.
        self.settings = settings
        self.context_window_tokens = context_window_tokens
        self.context_window_source = context_window_source
        self.entry_count = 0
        self.total_tokens = 0
        self.usage = Usage()
        self.last_entry_id: str | None = None
        # Tool call id -> position of the entry that made the call.
        self.open_tool_calls: dict[str, int] = {}
        self.compaction_count = 0
        self.first_kept_position = 0
        self.entries_since_compaction = 0
        # Idempotency key -> [request fingerprint, version], oldest first.
        self.recent_appends: dict[str, list[Any]] = {}

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:
        # Commands run on a copy, so a failed save leaves no trace. Everything
        # but the two small dicts and the pending list is immutable, so this is
        # much cheaper than a generic deep copy.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.open_tool_calls = dict(self.open_tool_calls)
        clone.recent_appends = dict(self.recent_appends)
        clone._pending_events = list(self._pending_events)
        return clone

    # -- commands ---------------------------------------------------------------

    @classmethod
    def start(
        cls,
        session_id: str,
        settings: SessionSettings,
        context_window: tuple[int, str],
    ) -> Session:
        validate_session_id(session_id)
        settings.validate()
        return cls._create(
            cls.Started,
            id=session_id,
            settings=settings,
            context_window_tokens=context_window[0],
            context_window_source=context_window[1],
        )

    def check_expected_version(self, expected: int | None) -> None:
        if expected is not None and expected != self.version:
            raise VersionConflict(expected, self.version)

    def earlier_append(self, idempotency_key: str, fingerprint: str) -> int | None:
        """The version of an earlier append with this key, if this is a retry of it."""
        if not idempotency_key or idempotency_key not in self.recent_appends:
            return None
        first_fingerprint, version = self.recent_appends[idempotency_key]
        if first_fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                f"idempotency key {idempotency_key!r} was used for a different append "
                f"(version {version}); use a new key for a new append"
            )
        return int(version)

    def append(
        self,
        entries: Sequence[Entry],
        ids: IdLookup,
        *,
        idempotency_key: str = "",
        fingerprint: str = "",
    ) -> list[Entry]:
        """Appends one turn. Fills in ids, parents and timestamps left empty."""
        if not entries:
            raise InvalidRequest("an append needs at least one entry")
        if len(entries) > MAX_ENTRIES_PER_APPEND:
            raise InvalidRequest(
                f"{len(entries)} entries in one append; send at most {MAX_ENTRIES_PER_APPEND}"
            )
        used = self._used_ids(entries, ids)
        now = datetime.now(UTC)
        batch_ids: set[str] = set()
        batch_calls: set[str] = set()
        open_calls = dict(self.open_tool_calls)
        parent = self.last_entry_id
        final: list[Entry] = []
        for offset, draft in enumerate(entries):
            # Name entries as the client sent them: generated ids mean nothing to it.
            label = f"entries[{offset}]" + (f" ({draft.id!r})" if draft.id else "")
            entry = self._completed(draft, label, parent, now, batch_ids, used)
            validate_entry(entry, self.settings.max_entry_bytes, label)
            _pair_tool_calls(
                entry,
                label,
                self.entry_count + offset,
                open_calls,
                batch_calls,
                used,
            )
            batch_ids.add(entry.id)
            parent = entry.id
            final.append(entry)
        self.trigger_event(
            self.EntriesAppended,
            entries=final,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
        )
        return final

    def _used_ids(self, drafts: Sequence[Entry], ids: IdLookup) -> UsedIds:
        """Which of the drafts' ids the session holds: one question for the whole turn."""
        entry_ids = {d.id for d in drafts if d.id}
        entry_ids.update(
            d.parent_id for d in drafts if d.parent_id and d.parent_id != self.last_entry_id
        )
        call_ids = {call.id for d in drafts for call in d.tool_calls}
        if not entry_ids and not call_ids:
            return UsedIds()
        return ids.used(entry_ids, call_ids)

    def _completed(
        self,
        draft: Entry,
        label: str,
        parent: str | None,
        now: datetime,
        batch_ids: set[str],
        used: UsedIds,
    ) -> Entry:
        """The draft with id, parent and timestamp filled in, once they are known to be sound."""
        if draft.id and (draft.id in batch_ids or draft.id in used.entry_ids):
            raise DuplicateEntry(
                f"{label}: entry id {draft.id!r} is already in this session; ids must be unique"
            )
        if draft.parent_id:
            known = draft.parent_id in batch_ids or draft.parent_id == self.last_entry_id
            if not known and draft.parent_id not in used.entry_ids:
                raise InvalidRequest(
                    f"{label}: parent_id {draft.parent_id!r} is not in this session; leave it "
                    "empty to chain to the previous entry"
                )
        return replace(
            draft,
            id=draft.id or new_id(),
            parent_id=draft.parent_id or parent,
            timestamp=draft.timestamp or now,
        )

    def record_compaction(self, compaction: Compaction, history: History) -> None:
        compaction.validate()
        if self.entry_count == 0:
            raise InvalidCutPoint("the session has no entries to compact")
        if self.compaction_count and not self.entries_since_compaction:
            raise InvalidCutPoint(
                "nothing was appended since the last compaction; a compaction cannot "
                "directly follow another"
            )
        position = check_cut_point(
            compaction.first_kept_entry_id,
            history,
            self.open_tool_calls,
            self.first_kept_position,
        )
        self.trigger_event(
            self.CompactionRecorded, compaction=compaction, first_kept_position=position
        )

    def record_prune(
        self, decisions: Sequence[PruneDecision], reason: str, history: History
    ) -> None:
        if not decisions:
            raise InvalidRequest("a prune needs at least one entry")
        seen: set[str] = set()
        for decision in decisions:
            decision.validate()
            if decision.entry_id in seen:
                raise InvalidRequest(f"entry {decision.entry_id!r} is pruned twice in one request")
            seen.add(decision.entry_id)
            position = history.position_of(decision.entry_id)
            if position is None:
                raise InvalidPrune(f"entry {decision.entry_id!r} is not in this session")
            if history.role_at(position) is not Role.TOOL:
                raise InvalidPrune(
                    f"entry {decision.entry_id!r} is not a tool result; only tool output is pruned"
                )
            if position < self.first_kept_position:
                raise InvalidPrune(
                    f"entry {decision.entry_id!r} was compacted away and is not in the prompt"
                )
        self.trigger_event(self.PruneRecorded, decisions=list(decisions), reason=reason)

    def change_settings(self, settings: SessionSettings, context_window: tuple[int, str]) -> None:
        settings.validate()
        self.trigger_event(
            self.SettingsChanged,
            settings=settings,
            context_window_tokens=context_window[0],
            context_window_source=context_window[1],
        )


def _pair_tool_calls(
    entry: Entry,
    label: str,
    position: int,
    open_calls: dict[str, int],
    batch_calls: set[str],
    used: UsedIds,
) -> None:
    """Keeps every tool call directly followed by its result, as providers require.

    ``open_calls`` and ``batch_calls`` are updated with what this entry makes
    and answers.
    """
    if open_calls and entry.role not in (Role.TOOL, Role.CUSTOM):
        waiting = ", ".join(repr(call) for call in list(open_calls)[:3])
        raise ToolCallsOpen(
            f"{label}: tool calls {waiting} are still open; append their results "
            "first (with is_error for calls that were aborted): providers reject a prompt "
            "where anything but results follows a tool call"
        )
    for call in entry.tool_calls:
        if call.id in open_calls or call.id in batch_calls or call.id in used.call_ids:
            raise DuplicateEntry(
                f"{label}: tool call id {call.id!r} is already used in this "
                "session; tool call ids must be unique"
            )
        open_calls[call.id] = position
        batch_calls.add(call.id)
    for result in entry.tool_results:
        if open_calls.pop(result.tool_call_id, None) is None:
            raise UnknownToolCall(
                f"{label} answers tool call {result.tool_call_id!r}, which is not "
                "open in this session (never made, or already answered)"
            )
