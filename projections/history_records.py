"""The records in a folded history: its compactions, undos, redos, prunes, failures,
overflows, learned limits forgotten, abandoned tool calls and erasures, as of any
version."""

from __future__ import annotations

from bisect import bisect_right

from domain.session_events import OverflowReported, ToolCallsAbandoned
from projections.history_reads import HistoryReads
from projections.history_views import (
    RecordedCompaction,
    RecordedErasure,
    RecordedFailure,
    RecordedRedo,
    RecordedUndo,
)


class HistoryRecords(HistoryReads):
    """What was recorded in a session, and the cuts its compactions made."""

    def prune_count(self, version: int | None = None) -> int:
        if self._loader is not None:
            return self.whole().prune_count(version)
        version = self.resolve_version(version)
        return bisect_right(self._prunes, version, key=lambda p: p.version)

    def failures(self, version: int | None = None) -> list[RecordedFailure]:
        if self._loader is not None:
            return self.whole().failures(version)
        version = self.resolve_version(version)
        return [f for f in self._failures if f.version <= version]

    def overflows_since(self, version: int) -> list[OverflowReported]:
        if self._loader is not None and version < self._time_offset:
            return self.whole().overflows_since(version)
        return [o for o in self._overflows if o.originator_version > version]

    def limits_forgotten_version(self, version: int | None = None) -> int:
        """The version at which the client last had the session forget what providers
        taught, by ``version`` (0: never)."""
        if self._loader is not None:
            return self.whole().limits_forgotten_version(version)
        version = self.resolve_version(version)
        return max((v for v in self._forgets if v <= version), default=0)

    def abandonments(self, version: int | None = None) -> list[ToolCallsAbandoned]:
        """The tool calls abandoned by ``version``, oldest first."""
        if self._loader is not None:
            return self.whole().abandonments(version)
        version = self.resolve_version(version)
        return [a for a in self._abandonments if a.originator_version <= version]

    def erasures(self) -> list[RecordedErasure]:
        """Every erasure, oldest first: erasure reaches back, so every version shows them.
        (A session with erasures is never loaded from a cut: services.app.sessions.)"""
        return list(self._erasures)

    def erased(self) -> RecordedErasure | None:
        """The erasure of the whole session, if it was erased whole."""
        return next((e for e in self.erasures() if e.whole_session), None)

    def tainted_compactions(self) -> set[int]:
        """Versions of the compactions whose summaries were erased with entries they covered."""
        return {v for e in self.erasures() for v in e.tainted_compactions}

    def compactions(self, version: int | None = None) -> list[RecordedCompaction]:
        """Every compaction recorded by ``version``, undone or not, oldest first."""
        if self._loader is not None:
            return self.whole().compactions(version)
        version = self.resolve_version(version)
        return [c for c in self._compactions if c.version <= version]

    def compactions_in_force(self, version: int | None = None) -> list[RecordedCompaction]:
        """The compactions in force at ``version``, oldest first: undoing the last one
        brings back the cut of the one before it."""
        if self._loader is not None:
            return self.whole().compactions_in_force(version)
        version = self.resolve_version(version)
        stack: list[RecordedCompaction] = []
        changes: list[RecordedCompaction | RecordedUndo | RecordedRedo] = [
            *self._compactions,
            *self._undos,
            *self._redos,
        ]
        for change in sorted(changes, key=lambda c: c.version):
            if change.version > version:
                break
            if isinstance(change, RecordedCompaction):
                stack.append(change)
            elif isinstance(change, RecordedUndo):
                stack = [c for c in stack if c.version < change.compaction_version]
            else:
                stack.extend(change.compactions)
        return stack

    def _recorded(self, compaction_version: int) -> RecordedCompaction | None:
        if not compaction_version:
            return None
        return next(c for c in self.whole()._compactions if c.version == compaction_version)

    def prompt_tokens_with_cut(self, compaction_version: int) -> int:
        """The prompt's message tokens (the system prompt aside) were the compaction
        recorded at ``compaction_version`` the cut in force (0: no cut)."""
        view = self.whole().prompt_view_with_cut(self._recorded(compaction_version))
        return view.estimated_tokens - view.system_prompt.tokens.total

    def cut_versions(self, compaction_version: int) -> tuple[int, int, int]:
        """For the compaction at that version: the versions that appended its first kept
        entry, and of the settings and the system prompt in force when it was recorded."""
        whole = self.whole()
        compaction = whole._recorded(compaction_version)
        assert compaction is not None
        return (
            whole.entry_version(compaction.first_kept_position),
            whole._latest_settings(compaction.version)[0],
            whole._system_prompt_version(compaction.version),
        )

    def redos(self, version: int | None = None) -> list[RecordedRedo]:
        if self._loader is not None:
            return self.whole().redos(version)
        version = self.resolve_version(version)
        return [r for r in self._redos if r.version <= version]

    def undos(self, version: int | None = None) -> list[RecordedUndo]:
        if self._loader is not None:
            return self.whole().undos(version)
        version = self.resolve_version(version)
        return [u for u in self._undos if u.version <= version]
