"""Prune decisions: how a tool result is shown in the prompt view.

Pruning never changes the durable log; the full output stays in the store and
can be read back by entry id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.errors import InvalidRequest

CLEARED_PLACEHOLDER = "[Old tool result content cleared]"


class PruneAction(StrEnum):
    SOFT_TRIM = "soft_trim"
    HARD_CLEAR = "hard_clear"


@dataclass(frozen=True, slots=True)
class PruneDecision:
    entry_id: str
    action: PruneAction
    head_chars: int = 1_500
    tail_chars: int = 1_500

    def validate(self) -> None:
        if not self.entry_id:
            raise InvalidRequest("every pruned entry needs an entry_id")
        if self.head_chars < 0 or self.tail_chars < 0:
            raise InvalidRequest(
                f"prune of {self.entry_id!r}: head and tail chars must not be negative"
            )

    def apply(self, text: str) -> str:
        """The text the model sees instead of ``text``."""
        if self.action is PruneAction.HARD_CLEAR:
            return CLEARED_PLACEHOLDER
        if len(text) <= self.head_chars + self.tail_chars:
            return text
        head = text[: self.head_chars]
        tail = text[len(text) - self.tail_chars :] if self.tail_chars else ""
        return (
            f"{head}\n...\n{tail}\n\n[Tool result trimmed: kept first {self.head_chars} chars "
            f"and last {self.tail_chars} chars of {len(text)} chars.]"
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
