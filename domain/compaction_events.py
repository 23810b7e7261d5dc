"""The events of a session's compactions: one recorded, undone, redone, or failed.

Session events like the others (domain.session_events), in a module of their
own; domain.session_compactions records them. Each is still stored under the
topic it was first stored under (``TOPIC``, a name inside ``Session``), and
``Session`` still names each class, so that the topic resolves in any process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from domain.compaction import Compaction, CompactionFailure
from domain.session_events import Event
from domain.session_state import SessionState

# The cuts the aggregate keeps (SessionState.cuts), the latest last.
MAX_CUTS_KEPT = 64


@dataclass(frozen=True)
class CompactionRecorded(Event):
    TOPIC = "domain.session:Session.CompactionRecorded"

    compaction: Compaction
    first_kept_position: int
    # The prompt's tokens right after (summary, pinned and kept entries as the
    # guard shows them), counted by the store; -1 in events stored before it.
    prompt_tokens: int = -1
    # The version of the event that appended the first kept entry, so a cold
    # read starts there; 0 in events stored before it (a cold read then
    # folds the whole session).
    first_kept_version: int = 0
    # The session's learned limits when it was recorded (Session.limits), so a
    # read starting at this cut knows what the provider taught before it.
    limits: Sequence[Sequence[Any]] = ()
    # A Compact's key, so that its retry answers this compaction (as an append's).
    idempotency_key: str = ""
    fingerprint: str = ""

    def apply(self, session: SessionState) -> None:
        session.prompt_tokens = (
            self.prompt_tokens if self.prompt_tokens >= 0 else self.compaction.tokens_after
        )
        session.remember_key(self.idempotency_key, self.fingerprint, self.originator_version)
        session.compaction_count += 1
        session.summary_tainted = False
        session.first_kept_position = self.first_kept_position
        session.entries_since_compaction = 0
        cut = (
            self.originator_version,
            self.first_kept_position,
            self.first_kept_version,
            session.settings_version,
            session.system_prompt_version,
        )
        session.cuts = (*tuple(session.cuts)[-(MAX_CUTS_KEPT - 1) :], cut)


@dataclass(frozen=True)
class CompactionUndone(Event):
    """A compaction taken back: the entries it covered are in the durable log
    again, and the cut is where it was before it (later compactions still in
    force are taken back with it). Compacting again re-applies a cut."""

    TOPIC = "domain.session:Session.CompactionUndone"

    compaction_version: int
    reason: str
    # Where the cut is now, and the compaction that made it (0: no compaction
    # is in force, the log starts at the first entry).
    first_kept_position: int
    restored_compaction_version: int
    # The prompt's tokens right after, counted by the store.
    prompt_tokens: int
    requested_by: str = ""

    def apply(self, session: SessionState) -> None:
        session.prompt_tokens = self.prompt_tokens
        session.first_kept_position = self.first_kept_position
        session.summary_tainted = False  # the restored cut's state is the read side's
        session.entries_since_compaction = max(1, session.entry_count - self.first_kept_position)
        cuts = [c for c in session.cuts if c[0] < self.compaction_version]
        if self.restored_compaction_version and (
            not cuts or cuts[-1][0] != self.restored_compaction_version
        ):
            cuts = []  # the cut in force is older than what the aggregate keeps
        session.cuts = tuple(cuts)
        session.undo_count += 1


@dataclass(frozen=True)
class CompactionRedone(Event):
    """An undo taken back: the compactions it took back are in force again, exactly
    as they were recorded (same summaries, same cut), as if it never happened."""

    TOPIC = "domain.session:Session.CompactionRedone"

    undo_version: int
    # The compactions in force again, oldest first; the last one makes the cut.
    compaction_versions: Sequence[int]
    reason: str
    first_kept_position: int
    # The prompt's tokens right after, counted by the store.
    prompt_tokens: int
    # The aggregate's cuts of those compactions (see ``Session.cuts``), so a
    # cold read starts at the cut again.
    cuts: Sequence[Sequence[int]]
    requested_by: str = ""

    def apply(self, session: SessionState) -> None:
        session.prompt_tokens = self.prompt_tokens
        session.first_kept_position = self.first_kept_position
        session.entries_since_compaction = max(1, session.entry_count - self.first_kept_position)
        cuts = (*tuple(session.cuts), *(tuple(c) for c in self.cuts))
        session.cuts = cuts[-MAX_CUTS_KEPT:]


@dataclass(frozen=True)
class CompactionFailed(Event):
    TOPIC = "domain.session:Session.CompactionFailed"

    failure: CompactionFailure

    def apply(self, session: SessionState) -> None:
        session.compaction_failures += 1
