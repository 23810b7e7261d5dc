"""Prune decisions: how a tool result is shown in the prompt view.

Pruning never changes the durable log; the full output stays in the store and
can be read back by entry id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.content import validate_id
from domain.errors import InvalidRequest, quoted

CLEARED_PLACEHOLDER = "[Old tool result content cleared]"


class PruneAction(StrEnum):
    SOFT_TRIM = "soft_trim"
    HARD_CLEAR = "hard_clear"


@dataclass(frozen=True, slots=True)
class PruneDecision:
    entry_id: str
    action: PruneAction
    # None in a request: the session's pruning policy decides. Stored
    # decisions always carry the sizes they were applied with.
    head_chars: int | None = None
    tail_chars: int | None = None

    def sized(self, default_head: int, default_tail: int) -> PruneDecision:
        """This decision with the sizes it left open filled in (none for a hard clear)."""
        if self.action is PruneAction.HARD_CLEAR:
            return PruneDecision(self.entry_id, self.action, 0, 0)
        return PruneDecision(
            self.entry_id,
            self.action,
            default_head if self.head_chars is None else self.head_chars,
            default_tail if self.tail_chars is None else self.tail_chars,
        )

    def validate(self) -> None:
        if not self.entry_id:
            raise InvalidRequest("every pruned entry needs an entry_id")
        validate_id(self.entry_id, "entry_id")
        if (self.head_chars or 0) < 0 or (self.tail_chars or 0) < 0:
            raise InvalidRequest(
                f"prune of {quoted(self.entry_id)}: head and tail chars must not be negative"
            )

    def apply(self, text: str) -> str:
        """The text the model sees instead of ``text``."""
        if self.action is PruneAction.HARD_CLEAR:
            return CLEARED_PLACEHOLDER
        head_chars, tail_chars = self.head_chars or 0, self.tail_chars or 0
        if len(text) <= head_chars + tail_chars:
            return text
        head = text[:head_chars]
        tail = text[len(text) - tail_chars :] if tail_chars else ""
        return (
            f"{head}\n...\n{tail}\n\n[Tool result trimmed: kept first {head_chars} chars "
            f"and last {tail_chars} chars of {len(text)} chars.]"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "action": self.action.value,
            "head_chars": self.head_chars,
            "tail_chars": self.tail_chars,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PruneDecision:
        return cls(
            data["entry_id"], PruneAction(data["action"]), data["head_chars"], data["tail_chars"]
        )
