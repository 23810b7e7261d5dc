"""Appending turns: ids, parents and tool-call pairing checked, the guard's
decisions and the provider's lessons recorded with the entries.

An append asks an ``IdLookup`` which of its ids the session already used, so
it never reads the history; calls left open are closed by abandoning them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType

from domain.content import (
    Entry,
    Role,
    ToolResult,
    usage_total,
    validate_entry,
    validate_entry_ids,
)
from domain.context.calibration import TokenLesson, learn_tokens
from domain.context.fit_planner import HARD_DROP_NOTE_TOKENS
from domain.context.shown import guard_savings
from domain.context.tool_result_guard import GuardAction, ToolResultDecision, guard_entry
from domain.errors import DuplicateEntry, InvalidRequest, ToolCallsOpen, UnknownToolCall, quoted
from domain.ids import IdLookup, UsedIds, new_id
from domain.session_events import EntriesAppended, ToolCallsAbandoned
from domain.session_state import SessionState
from domain.tool_call_ids import original_call_id

MAX_ENTRIES_PER_APPEND = 10_000
SYNTHETIC_KEY = "synthetic"
MAX_ABANDON_REASON_CHARS = 2_000


class AppendCommands(SessionState):
    """The commands that add entries to a session."""

    def append(
        self,
        entries: Sequence[Entry],
        ids: IdLookup,
        *,
        idempotency_key: str = "",
        fingerprint: str = "",
        timestamp: datetime | None = None,
        measure: Callable[[Entry], Entry] | None = None,
        estimate_at: Callable[[int], int | None] | None = None,
    ) -> list[Entry]:
        """Appends one turn. Fills in ids, parents and timestamps left empty.

        ``timestamp`` is the event's time: now, unless the turn is imported with
        the time it had. ``measure``, if given, completes each entry once it is
        known to be valid (the store counts its tokens there), so nothing invalid
        is measured, and an entry that could never fit the prompt even alone is
        refused. ``estimate_at(version)`` is the store's estimate of the prompt
        view at an earlier version, for usage that answered one (the aggregate
        knows only the latest).
        """
        if not entries:
            raise InvalidRequest("an append needs at least one entry")
        if len(entries) > MAX_ENTRIES_PER_APPEND:
            raise InvalidRequest(
                f"{len(entries)} entries in one append; send at most {MAX_ENTRIES_PER_APPEND}"
            )
        labels = [_label(offset, draft) for offset, draft in enumerate(entries)]
        for label, draft in zip(labels, entries, strict=True):
            validate_entry_ids(draft, label)
        used = self._used_ids(entries, ids)
        usage = self.usage
        now = timestamp or datetime.now(UTC)
        batch_ids: set[str] = set()
        batch_calls: set[str] = set()
        open_calls = dict(self.open_tool_calls)
        parent = self.last_entry_id
        final: list[Entry] = []
        for offset, (label, draft) in enumerate(zip(labels, entries, strict=True)):
            entry = _answering_open_calls(
                self._completed(draft, label, parent, now, batch_ids, used), open_calls
            )
            validate_entry(entry, self.settings.max_entry_bytes, label)
            if entry.usage is not None:
                usage = usage_total(usage, entry.usage, label)
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
            final.append(measure(entry) if measure else entry)
        guarded = self._guarded(final)
        if measure is not None:
            self._check_fits_alone(final, guarded, labels)
        self.trigger_event(
            EntriesAppended,
            entries=final,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
            guarded=guarded,
            timestamp=timestamp,
            lessons=self._lessons(final, estimate_at),
        )
        return final

    def _check_fits_alone(
        self,
        entries: Sequence[Entry],
        guarded: Sequence[ToolResultDecision],
        labels: Sequence[str],
    ) -> None:
        """Refuses an entry that, as the prompt would show it and beside the system
        prompt, is over the budget. Tool results never are: the guard caps them, and
        where its cap leaves too little room beside the system prompt, the view trims
        or clears them further. A message may be; after other entries, it needs room
        for the note of a hard drop of those too."""
        for offset, (label, entry) in enumerate(zip(labels, entries, strict=True)):
            if entry.role is Role.TOOL:
                continue
            shown = entry.token_count - guard_savings((entry,), guarded)
            if self.entry_count + offset:
                shown += HARD_DROP_NOTE_TOKENS
            self.check_fits(
                f"{label} ({entry.role.value})",
                "entry",
                shown,
                "split it into smaller messages, send large content as a tool result (which "
                "the guard trims), or use a model with a larger window",
            )

    def abandon_tool_calls(
        self,
        call_ids: Sequence[str],
        reason: str,
        count: Callable[[Entry], Entry],
        *,
        entry_id: str = "",
        timestamp: datetime | None = None,
    ) -> Entry:
        """Closes open tool calls that will never be answered (all open ones when
        ``call_ids`` is empty) with one synthetic error result each, in one tool
        entry flagged ``synthetic``; ``count`` fills in its token count."""
        if not self.open_tool_calls:
            raise UnknownToolCall("no tool calls are open in this session; nothing to abandon")
        if len(reason) > MAX_ABANDON_REASON_CHARS:
            raise InvalidRequest(
                f"reason is {len(reason):,} characters; send at most {MAX_ABANDON_REASON_CHARS:,}"
            )
        # A call a prompt view showed under a rewritten id is named by that id too.
        named = (original_call_id(c, self.open_tool_calls) for c in call_ids)
        chosen = list(dict.fromkeys(named)) or list(self.open_tool_calls)
        for call_id in chosen:
            if call_id not in self.open_tool_calls:
                raise UnknownToolCall(
                    f"tool call {quoted(call_id)} is not open in this session (never made, or "
                    "already answered); open calls: "
                    + (", ".join(repr(c) for c in list(self.open_tool_calls)[:5]) or "none")
                )
        text = abandoned_result_text(reason)
        entry = Entry(
            id=entry_id or new_id(),
            parent_id=self.last_entry_id,
            timestamp=timestamp or datetime.now(UTC),
            role=Role.TOOL,
            content=tuple(ToolResult(call_id, text, is_error=True) for call_id in chosen),
            metadata=MappingProxyType(
                {SYNTHETIC_KEY: "abandoned", **({"reason": reason} if reason else {})}
            ),
        )
        entry = count(entry)
        self.trigger_event(
            ToolCallsAbandoned,
            tool_call_ids=chosen,
            reason=reason,
            entry=entry,
            timestamp=timestamp,
        )
        return entry

    def _guarded(self, entries: Sequence[Entry]) -> list[ToolResultDecision]:
        """The tool-result guard's decisions for results it does not show whole."""
        policy = self.settings.tool_result_guard
        if not policy.enabled:
            return []
        return [
            decision
            for entry in entries
            for decision in guard_entry(entry, self.window_tokens, policy)
            if decision.action is not GuardAction.KEEP
        ]

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
                f"{label}: entry id {quoted(draft.id)} is already in this session; "
                "ids must be unique"
            )
        if draft.parent_id:
            known = draft.parent_id in batch_ids or draft.parent_id == self.last_entry_id
            if not known and draft.parent_id not in used.entry_ids:
                raise InvalidRequest(
                    f"{label}: parent_id {quoted(draft.parent_id)} is not in this session; "
                    "leave it empty to chain to the previous entry"
                )
        return replace(
            draft,
            id=draft.id or new_id(),
            parent_id=draft.parent_id or parent,
            timestamp=draft.timestamp or now,
        )

    def _lessons(
        self, entries: Sequence[Entry], estimate_at: Callable[[int], int | None] | None
    ) -> list[TokenLesson]:
        """What the provider's usage on these entries teaches: each assistant entry that
        names the view it answered, its reported prompt tokens against the store's
        estimate of that view, and the inferred window a prompt so large disproves."""
        lessons: list[TokenLesson] = []
        limits = self.learned
        for entry in entries:
            ref, usage = entry.prompt_ref, entry.usage
            if ref is None or usage is None or not 0 < ref.version <= self.version:
                continue
            estimate = self.estimated_prompt_tokens if ref.version == self.version else None
            if estimate is None and estimate_at is not None:
                estimate = estimate_at(ref.version)
            if estimate is None:
                continue
            accepted = usage.prompt_total(ref.format)
            lesson = learn_tokens(
                limits.calibration,
                self.settings.model,
                estimate,
                accepted,
                f"usage of entry {entry.id} (view at version {ref.version})",
                lifted_window_tokens=limits.disproved_by(accepted),
            )
            if lesson is not None:
                lessons.append(lesson)
                limits = limits.after_tokens(lesson, accepted=True)
        return lessons


def _label(offset: int, draft: Entry) -> str:
    # Name entries as the client sent them: generated ids mean nothing to it.
    return f"entries[{offset}]" + (f" ({quoted(draft.id)})" if draft.id else "")


def abandoned_result_text(reason: str) -> str:
    """What the model reads for a call that was abandoned: marked as synthetic, so
    it is never taken for the tool's own output."""
    because = f": {reason}" if reason else ""
    return f"[synthetic result] This tool call was abandoned and never ran{because}"


def _answering_open_calls(entry: Entry, open_calls: Mapping[str, int]) -> Entry:
    """The entry with each result for a call id a prompt view rewrote (see
    domain.tool_call_ids) answering the open call it stands for."""
    if entry.role is not Role.TOOL or not open_calls:
        return entry
    content = tuple(
        replace(block, tool_call_id=original_call_id(block.tool_call_id, open_calls))
        if isinstance(block, ToolResult) and block.tool_call_id not in open_calls
        else block
        for block in entry.content
    )
    return entry if content == entry.content else replace(entry, content=content)


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
                f"{label}: tool call id {quoted(call.id)} is already used in this "
                "session; tool call ids must be unique"
            )
        open_calls[call.id] = position
        batch_calls.add(call.id)
    for result in entry.tool_results:
        if open_calls.pop(result.tool_call_id, None) is None:
            raise UnknownToolCall(
                f"{label} answers tool call {quoted(result.tool_call_id)}, which is not "
                "open in this session (never made, or already answered)"
            )
