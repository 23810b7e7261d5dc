"""The tool result guard: how one tool result is shown in the prompt.

SPEC 3.2 (seed 000, 13.4, OpenClaw's ``tool-result-context-guard.ts``). A tool
result larger than the live cap is trimmed for the prompt: its head is kept,
and its tail when the tail looks important (an error, a total, closing JSON),
both within the cap, followed by a neutral notice naming the entry that holds
the whole output and, when the runtime offers one, the tool that reads it
back. Nothing is lost: the stored entry keeps the full output.

The cap is in tokens: ``live_cap_tokens`` (derived from the window when 0:
max(4,000, window / 20)), never more than ``max_window_share`` of the window.
Characters convert to tokens at the entry's own rate (its token count, taken
at ingest, over its characters), so 16,000 characters of Chinese weigh what
they cost, not 4,000 tokens.

The guard returns a decision, not text: the decision is recorded in the event
and re-applied to the stored text with :meth:`ToolResultDecision.apply`, so the
prompt view at any version is reproduced exactly. Decisions recorded before
the notice changed (``style`` 1) keep their old wording for that reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.content import Entry, block_texts
from domain.settings import ToolResultGuardPolicy

# The anchors' rate, for entries not counted (imported without counts).
CHARS_PER_TOKEN = 4
MIN_CAP_TOKENS = 4_000
CAP_WINDOW_DIVISOR = 20
DEFAULTS = ToolResultGuardPolicy()
# How much of the end of a result the tail heuristic looks at.
TAIL_PROBE_CHARS = 2_000
# What the notice itself costs, in characters, kept out of the cap.
NOTICE_CHARS = 300
# The wording of decisions recorded before the guard counted tokens (style 1).
TRUNCATION_NOTICE = "[truncated: output exceeded context limit]"
COMPACTED_PLACEHOLDER = "[compacted: tool output removed to free context]"
STYLE = 2

# The tail of an output matters when it reports how things ended. Matched in the
# last TAIL_PROBE_CHARS characters, case-insensitively:
#   errors:  error, exception, traceback, failed/failure, fatal, panic, exit code/status
#   totals:  total, summary, passed, "N tests", "N errors", "N warnings", "N rows", result(s)
_IMPORTANT_TAIL = re.compile(
    r"\b(?:error|errors|exception|traceback|failed|failure|fatal|panic|"
    r"exit (?:code|status)|total|totals|summary|passed|results?)\b"
    r"|\b\d+ (?:tests?|errors?|warnings?|rows?|files? changed)\b"
    r"|错误|失败|异常|总计|合计",
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
    # The notice's wording (1: before the guard counted tokens) and the tool it names.
    style: int = STYLE
    read_back_tool: str = ""

    def apply(self, text: str) -> str:
        """The text the model sees instead of ``text`` (the stored tool output)."""
        if self.action is GuardAction.KEEP:
            return text
        if self.style == 1:
            return self._apply_style_1(text)
        if self.action is GuardAction.REPLACE:
            return (
                f"[output omitted: all {len(text):,} characters were left out to fit the "
                f"context window. {self._where()}]"
            )
        if len(text) <= self.head_chars + self.tail_chars:
            return text
        head = text[: self.head_chars]
        tail = text[len(text) - self.tail_chars :] if self.tail_chars else ""
        if tail:
            kept = (
                f"the first {self.head_chars:,} and the last {self.tail_chars:,} of "
                f"{len(text):,} characters"
            )
            middle = f"\n...\n{tail}"
        else:
            kept = f"the first {self.head_chars:,} of {len(text):,} characters"
            middle = "\n..."
        return f"{head}{middle}\n\n[output trimmed: showing {kept}. {self._where()}]"

    def _where(self) -> str:
        where = f"The full output is kept as entry {self.entry_id}"
        if not self.read_back_tool:
            return f"{where}."
        return f'{where}: read it with the {self.read_back_tool} tool (entry_id "{self.entry_id}").'

    def _apply_style_1(self, text: str) -> str:
        if self.action is GuardAction.REPLACE:
            return f"{COMPACTED_PLACEHOLDER}\n{self._notice_style_1(len(text))}"
        if len(text) <= self.head_chars + self.tail_chars:
            return text
        head = text[: self.head_chars]
        tail = text[len(text) - self.tail_chars :] if self.tail_chars else ""
        middle = f"\n...\n{tail}" if tail else "\n..."
        return f"{head}{middle}\n\n{TRUNCATION_NOTICE} {self._notice_style_1(len(text))}"

    def _notice_style_1(self, total: int) -> str:
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
            "style": self.style,
            "read_back_tool": self.read_back_tool,
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
            data.get("style", 1),
            data.get("read_back_tool", ""),
        )


def live_cap_tokens(window_tokens: int, policy: ToolResultGuardPolicy = DEFAULTS) -> int:
    """The most tokens one result may show: the policy's cap, or max(4,000, window / 20),
    never more than ``max_window_share`` of the window."""
    cap = policy.live_cap_tokens or max(MIN_CAP_TOKENS, window_tokens // CAP_WINDOW_DIVISOR)
    return max(1, min(cap, int(window_tokens * policy.max_window_share)))


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
    tokens_per_char: float = 1 / CHARS_PER_TOKEN,
) -> ToolResultDecision:
    """Keep or trim one tool result (or leave it out, when the policy asks for that),
    for a window of ``window_tokens``; ``tokens_per_char`` is the result's own rate."""
    total = len(text)
    rate = tokens_per_char if tokens_per_char > 0 else 1 / CHARS_PER_TOKEN
    tokens = math.ceil(total * rate)
    placeholder_tokens = int(window_tokens * policy.placeholder_window_share)
    if policy.placeholder_window_share and tokens > placeholder_tokens:
        return ToolResultDecision(
            entry_id,
            tool_call_id,
            GuardAction.REPLACE,
            0,
            0,
            total,
            f"~{tokens:,} tokens exceed {policy.placeholder_window_share:.0%} of the window "
            f"({placeholder_tokens:,} tokens)",
            read_back_tool=policy.read_back_tool,
        )
    cap_tokens = live_cap_tokens(window_tokens, policy)
    cap = math.floor(cap_tokens / rate)
    if policy.live_cap_chars:
        cap = min(cap, policy.live_cap_chars)
    if total <= cap:
        return ToolResultDecision(
            entry_id, tool_call_id, GuardAction.KEEP, total, 0, total, "within the live cap"
        )
    budget = max(cap - NOTICE_CHARS, min(policy.min_keep_chars, cap))
    tail = 0
    if tail_looks_important(text, is_error=is_error):
        tail = _snap_tail(text, min(int(budget * policy.tail_share), policy.max_tail_chars))
    head = _snap_head(text, max(0, budget - tail))
    kept = "head and tail" if tail else "head"
    return ToolResultDecision(
        entry_id,
        tool_call_id,
        GuardAction.TRUNCATE,
        head,
        tail,
        total,
        f"~{tokens:,} tokens exceed the live cap of {cap_tokens:,}; kept the {kept}",
        read_back_tool=policy.read_back_tool,
    )


def guard_entry(
    entry: Entry, window_tokens: int, policy: ToolResultGuardPolicy = DEFAULTS
) -> tuple[ToolResultDecision, ...]:
    """A decision for each tool result in ``entry`` (none for other entries)."""
    results = entry.tool_results
    if not results:
        return ()
    chars = sum(len(text) for text in block_texts(entry.content))
    rate = entry.token_count / chars if entry.token_count and chars else 1 / CHARS_PER_TOKEN
    return tuple(
        decide_tool_result(
            entry.id,
            result.content,
            window_tokens,
            tool_call_id=result.tool_call_id,
            is_error=result.is_error,
            policy=policy,
            tokens_per_char=rate,
        )
        for result in results
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
