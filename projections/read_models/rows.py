"""The row changes a read model's apply() answers, free of any SQL library.

Counters are increments rather than totals so that applying an event needs
no read of the row it changes: the store adds them in the UPDATE itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class CatalogChange:
    """One session's catalog row: created (``insert``) or moved on by one event."""

    session_id: str
    version: int
    updated: datetime
    insert: bool = False
    # Columns set to a value (title, model, parent, created).
    values: dict[str, Any] = field(default_factory=dict)
    # Counters raised by an amount (entries, tokens, compactions, prunes).
    increments: dict[str, int] = field(default_factory=dict)
    # When not None, the session's labels are replaced by these.
    labels: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CompactionRow:
    """A compaction, done or failed, with everything its receipt records; or an
    undo of one (outcome "undone") or an undo taken back (outcome "redone")."""

    session_id: str
    version: int
    recorded_at: datetime
    trigger: str
    outcome: str  # "ok" or "failed"
    stage: str = ""
    reason: str = ""
    summarizer_model: str = ""
    first_kept_entry_id: str = ""
    first_kept_position: int = -1
    first_covered_entry_id: str = ""
    last_covered_entry_id: str = ""
    entries_covered: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_before_source: str = ""
    tokens_after_source: str = ""
    summary_tokens: int = 0
    prompt_hash: str = ""
    chunks: int = 0
    fallback_stage: str = ""
    attempt: int = 0
    duration_ms: int = 0
    engine: str = ""
    instructions: str = ""
    # Undos and redos: the compaction taken back (or in force again), the one in
    # force after an undo, the undo a redo takes back, and who asked.
    compaction_version: int = 0
    restored_compaction_version: int = 0
    undo_version: int = 0
    requested_by: str = ""


@dataclass(frozen=True, slots=True)
class PruneRow:
    """One entry's prune decision, with the sizes the prune event recorded.

    ``chars_before`` is the characters of the entry's tool output as stored,
    ``chars_after`` those of it the prompt shows once pruned (head and tail
    for a soft trim, nothing for a hard clear; the notice aside). Events
    stored before the sizes were recorded give no ``chars_before`` (None) and
    the most the decision keeps as ``chars_after``.
    """

    session_id: str
    version: int
    entry_id: str
    recorded_at: datetime
    action: str
    head_chars: int | None
    tail_chars: int | None
    chars_before: int | None
    chars_after: int | None
    reason: str
