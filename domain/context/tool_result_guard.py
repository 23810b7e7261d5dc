"""The tool result guard: how one tool result is shown in the prompt.

SPEC 3.2 (seed 000, 13.4, OpenClaw's ``tool-result-context-guard.ts``). A tool
result larger than the live cap is truncated for the prompt: its head is kept
(and its tail, when the tail looks important), followed by a notice naming the
entry and how to read it whole. A single result larger than half the window is
replaced by a placeholder. Nothing is lost: the stored entry keeps the full
output and ``GetEntry`` reads it back.

The guard returns a decision, not text: the decision can be recorded in an
event and re-applied to the stored text with :meth:`ToolResultDecision.apply`,
so the prompt view at any version is reproduced exactly.

Sizes are in characters; the window is converted at 4 characters per token, as
the anchors do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.content import Entry
from domain.settings import ToolResultGuardPolicy

CHARS_PER_TOKEN = 4
# The defaults (16,000 chars, 30% of the window, keep 2,000, tail min(30%,
# 4,000), placeholder over 50%) are ToolResultGuardPolicy's.
DEFAULTS = ToolResultGuardPolicy()
# How much of the end of a result the tail heuristic looks at.
TAIL_PROBE_CHARS = 2_000

TRUNCATION_NOTICE = "[truncated: output exceeded context limit]"
COMPACTED_PLACEHOLDER = "[compacted: tool output removed to free context]"

# The tail of an output matters when it reports how things ended. Matched in the
# last TAIL_PROBE_CHARS characters, case-insensitively:
#   errors:  error, exception, traceback, failed/failure, fatal, panic, exit code/status
#   totals:  total, summary, passed, "N tests", "N errors", "N warnings", "N rows", result(s)
_IMPORTANT_TAIL = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fatal|panic|"
    r"exit (?:code|status)|total|totals|summary|passed|results?)\b"
    r"|\b\d+ (?:tests?|errors?|warnings?|rows?|files? changed)\b",
    re.IGNORECASE,
)


class GuardAction(StrEnum):
    KEEP = "keep"
    TRUNCATE = "truncate"
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class ToolResultDecision:
    """How one tool result is shown; re-applied to the stored text with :meth:`apply`."""

    entry_id: str
    tool_call_id: str
    action: GuardAction
    head_chars: int
    tail_chars: int
    original_chars: int
    reason: str

    def apply(self, text: str) -> str:
        """The text the model sees instead of ``text`` (the stored tool output)."""
        if self.action is GuardAction.KEEP:
            return text
        if self.action is GuardAction.REPLACE:
            return f"{COMPACTED_PLACEHOLDER}\n{self._notice(len(text))}"
        if len(text) <= self.head_chars + self.tail_chars:
            return text
        head = text[: self.head_chars]
        tail = text[len(text) - self.tail_chars :] if self.tail_chars else ""
        middle = f"\n...\n{tail}" if tail else "\n..."
        return f"{head}{middle}\n\n{TRUNCATION_NOTICE} {self._notice(len(text))}"

    def _notice(self, total: int) -> str:
        if self.action is GuardAction.REPLACE:
            kept = f"all {total:,} chars of this tool result were left out of the prompt."
        elif self.tail_chars:
            kept = (
                f"Kept the first {self.head_chars:,} and the last {self.tail_chars:,} of "
                f"{total:,} chars."
            )
        else:
            kept = f"Kept the first {self.head_chars:,} of {total:,} chars."
        return (
            f'{kept} The full output is stored: read it with GetEntry(entry_id="{self.entry_id}").'
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "tool_call_id": self.tool_call_id,
            "action": self.action.value,
            "head_chars": self.head_chars,
            "tail_chars": self.tail_chars,
            "original_chars": self.original_chars,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolResultDecision:
        return cls(
            data["entry_id"],
            data["tool_call_id"],
            GuardAction(data["action"]),
            data["head_chars"],
            data["tail_chars"],
            data["original_chars"],
            data["reason"],
        )


def live_cap_chars(window_tokens: int, policy: ToolResultGuardPolicy = DEFAULTS) -> int:
    """The most characters one result may show: 16,000, or 30% of the window if smaller."""
    return min(
        policy.live_cap_chars, int(window_tokens * CHARS_PER_TOKEN * policy.max_window_share)
    )


def tail_looks_important(text: str, *, is_error: bool = False) -> bool:
    """Whether the end of an output is worth keeping: errors, totals, closing JSON.

    True when the result is flagged as an error, when the last
    ``TAIL_PROBE_CHARS`` characters mention an error or a total (see
    ``_IMPORTANT_TAIL``), or when the output is a JSON document (starts with
    ``{``/``[`` and ends with ``}``/``]``), whose closing lines a reader needs.
    """
    if is_error:
        return True
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        return True
    return bool(_IMPORTANT_TAIL.search(text[-TAIL_PROBE_CHARS:]))


def decide_tool_result(
    entry_id: str,
    text: str,
    window_tokens: int,
    *,
    tool_call_id: str = "",
    is_error: bool = False,
    policy: ToolResultGuardPolicy = DEFAULTS,
) -> ToolResultDecision:
    """Keep, truncate or replace one tool result, for a window of ``window_tokens``."""
    total = len(text)
    window_chars = window_tokens * CHARS_PER_TOKEN
    cap = live_cap_chars(window_tokens, policy)
    if total > window_chars * policy.placeholder_window_share:
        return ToolResultDecision(
            entry_id,
            tool_call_id,
            GuardAction.REPLACE,
            0,
            0,
            total,
            f"{total:,} chars exceed {policy.placeholder_window_share:.0%} of the window "
            f"({int(window_chars * policy.placeholder_window_share):,} of "
            f"{window_chars:,} chars)",
        )
    if total <= cap:
        return ToolResultDecision(
            entry_id, tool_call_id, GuardAction.KEEP, total, 0, total, "within the live cap"
        )
    budget = max(cap, policy.min_keep_chars)
    tail = 0
    if tail_looks_important(text, is_error=is_error):
        tail = _snap_tail(text, min(int(budget * policy.tail_share), policy.max_tail_chars))
    head = _snap_head(text, max(policy.min_keep_chars, budget - tail))
    kept = "head and tail" if tail else "head"
    return ToolResultDecision(
        entry_id,
        tool_call_id,
        GuardAction.TRUNCATE,
        head,
        tail,
        total,
        f"{total:,} chars exceed the live cap of {cap:,}; kept the {kept}",
    )


def guard_entry(
    entry: Entry, window_tokens: int, policy: ToolResultGuardPolicy = DEFAULTS
) -> tuple[ToolResultDecision, ...]:
    """A decision for each tool result in ``entry`` (none for other entries)."""
    return tuple(
        decide_tool_result(
            entry.id,
            result.content,
            window_tokens,
            tool_call_id=result.tool_call_id,
            is_error=result.is_error,
            policy=policy,
        )
        for result in entry.tool_results
    )


def _snap_head(text: str, limit: int) -> int:
    """Cut the head at the last line break within ``limit`` if that keeps 80% of it."""
    newline = text.rfind("\n", 0, limit)
    return newline + 1 if newline + 1 >= limit * 0.8 else limit


def _snap_tail(text: str, limit: int) -> int:
    """Start the tail at a line break within the last ``limit`` chars if that keeps 80%."""
    start = len(text) - limit
    newline = text.find("\n", start)
    if newline != -1 and len(text) - newline - 1 >= limit * 0.8:
        return len(text) - newline - 1
    return limit
