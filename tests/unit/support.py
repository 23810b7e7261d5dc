"""Shared test helpers: entry builders and a session kept in step with its history.

The aggregate's commands need a ``History``; here it is the real read-side
``SessionHistory``, fed with every event the aggregate records, the way the
application feeds it from the event store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.compaction import Compaction
from domain.compaction_changes import plan_redo, plan_undo
from domain.content import (
    Entry,
    ImageRef,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
)
from domain.ids import HistoryIds
from domain.pruning import PruneAction, PruneDecision
from domain.session import Session
from domain.session_events import Event
from domain.settings import SessionSettings
from projections.session_history import SessionHistory

WINDOW = (200_000, "default")


def user(text: str, *, id: str = "", tokens: int = 0, images: Sequence[str] = ()) -> Entry:
    content: tuple[Any, ...] = (TextBlock(text), *(ImageRef(uri) for uri in images))
    return Entry(id, None, None, Role.USER, content, token_count=tokens)


def assistant(
    text: str = "",
    *,
    id: str = "",
    calls: Sequence[ToolCall] = (),
    thinking: Sequence[ThinkingBlock] = (),
    tokens: int = 0,
    usage: Usage | None = None,
) -> Entry:
    content: tuple[Any, ...] = (*thinking, *((TextBlock(text),) if text else ()), *calls)
    return Entry(id, None, None, Role.ASSISTANT, content, usage=usage, token_count=tokens)


def call(call_id: str, name: str = "read", arguments_json: str = "{}") -> ToolCall:
    return ToolCall(call_id, name, arguments_json)


def tool(call_id: str, output: str, *, id: str = "", tokens: int = 0, error: bool = False) -> Entry:
    return Entry(
        id, None, None, Role.TOOL, (ToolResult(call_id, output, error),), token_count=tokens
    )


def system(text: str, *, id: str = "", tokens: int = 0) -> Entry:
    return Entry(id, None, None, Role.SYSTEM, (TextBlock(text),), token_count=tokens)


def custom(text: str, *, id: str = "", tokens: int = 0) -> Entry:
    return Entry(
        id, None, None, Role.CUSTOM, (TextBlock(text),), custom_type="note", token_count=tokens
    )


def trim(entry_id: str, head: int = 10, tail: int = 10) -> PruneDecision:
    return PruneDecision(entry_id, PruneAction.SOFT_TRIM, head, tail)


def clear(entry_id: str) -> PruneDecision:
    return PruneDecision(entry_id, PruneAction.HARD_CLEAR, 0, 0)


class Tracked:
    """A Session and its SessionHistory, synced after every command.

    A command that raises records no event, so the history stays as it was.
    ``events`` keeps every event in order, for re-folding from scratch.
    """

    def __init__(
        self,
        session_id: str = "s-1",
        settings: SessionSettings | None = None,
        window: tuple[int, str] = WINDOW,
    ) -> None:
        self.session = Session.start(session_id, settings or SessionSettings(), window)
        self.history = SessionHistory(session_id)
        self.events: list[Event] = []
        self.sync()

    def sync(self) -> None:
        new = self.session.collect_events()
        self.history.apply(new)
        self.events.extend(new)

    @property
    def version(self) -> int:
        return self.session.version

    def append(self, *entries: Entry, key: str = "", fingerprint: str = "") -> list[Entry]:
        stored = self.session.append(
            list(entries), HistoryIds(self.history), idempotency_key=key, fingerprint=fingerprint
        )
        self.sync()
        return stored

    def compact(self, first_kept_id: str, summary: str = "summary", **fields: Any) -> None:
        """Records a compaction as the service does: with the prompt's tokens after it."""
        compaction = Compaction(summary, first_kept_id, **fields)
        position = self.history.position_of(first_kept_id)
        prompt_tokens = -1
        if position is not None:
            prompt_tokens = self.history.prompt_tokens_if_cut_at(
                position, compaction.summary_tokens
            )
        self.session.record_compaction(compaction, self.history, prompt_tokens=prompt_tokens)
        self.sync()

    def undo(self, compaction_version: int = 0, reason: str = "test") -> None:
        """Takes back a compaction in force, as the service does."""
        plan = plan_undo(self.history.whole(), compaction_version)
        self.session.undo_compaction(
            plan.compaction_version,
            reason,
            restored=(plan.restored_compaction_version, plan.first_kept_position),
            prompt_tokens=plan.prompt_tokens,
        )
        self.sync()

    def redo(self, undo_version: int, reason: str = "test") -> None:
        """Takes back an undo, as the service does."""
        plan = plan_redo(self.history.whole(), undo_version)
        self.session.redo_compaction(
            plan.undo_version,
            reason,
            compaction_versions=plan.compaction_versions,
            first_kept_position=plan.first_kept_position,
            cuts=plan.cuts,
            prompt_tokens=plan.prompt_tokens,
        )
        self.sync()

    def prune(self, *decisions: PruneDecision, reason: str = "test") -> None:
        """Records prunes as the service does: with the prompt's tokens after them."""
        self.session.record_prune(
            list(decisions), reason, self.history, self.history.prompt_tokens_if_pruned
        )
        self.sync()

    def change_settings(self, settings: SessionSettings, window: tuple[int, str] = WINDOW) -> None:
        self.session.change_settings(settings, window)
        self.sync()
