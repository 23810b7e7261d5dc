"""Taking compactions back, and taking an undo back: what each would record, or why
it cannot be done. The history (the read side's fold of the session) answers
the questions; the rules are here, with the aggregate that records the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from domain.errors import InvalidCutPoint, InvalidRequest, quoted


class Recorded(Protocol):
    """A compaction, undo or redo as the history recorded it."""

    @property
    def version(self) -> int: ...


class RecordedCut(Recorded, Protocol):
    @property
    def first_kept_position(self) -> int: ...


class RecordedUndo(Recorded, Protocol):
    @property
    def compaction_version(self) -> int: ...


class RecordedRedo(Recorded, Protocol):
    @property
    def undo_version(self) -> int: ...


class CompactionLedger(Protocol):
    """What planning an undo or a redo asks of the session's whole history."""

    @property
    def session_id(self) -> str: ...

    def compactions(self) -> Sequence[RecordedCut]:
        """Every compaction recorded, undone or not, oldest first."""

    def compactions_in_force(self, version: int | None = None) -> Sequence[RecordedCut]:
        """The compactions in force at ``version`` (None: now), oldest first."""

    def undos(self) -> Sequence[RecordedUndo]: ...

    def redos(self) -> Sequence[RecordedRedo]: ...

    def prompt_tokens_with_cut(self, compaction_version: int) -> int:
        """The prompt's message tokens (the system prompt aside) were the compaction
        recorded at ``compaction_version`` the cut in force (0: no cut)."""

    def cut_versions(self, compaction_version: int) -> tuple[int, int, int]:
        """For the compaction at that version: the versions that appended its first kept
        entry, and of the settings and the system prompt in force when it was recorded."""


@dataclass(frozen=True, slots=True)
class UndoPlan:
    """What an undo of a compaction records: which one, and the cut it brings back."""

    compaction_version: int
    restored_compaction_version: int
    first_kept_position: int
    # The prompt's message tokens after it (the system prompt aside).
    prompt_tokens: int


@dataclass(frozen=True, slots=True)
class RedoPlan:
    """What taking back an undo records: the compactions it brings back and their cuts."""

    undo_version: int
    compaction_versions: Sequence[int]
    first_kept_position: int
    # Per compaction, the aggregate's cut: (version, first kept position, version
    # that appended the first kept entry, settings and system prompt versions then).
    cuts: Sequence[tuple[int, int, int, int, int]]
    # The prompt's message tokens after it (the system prompt aside).
    prompt_tokens: int


def plan_undo(history: CompactionLedger, compaction_version: int = 0) -> UndoPlan:
    """What undoing the compaction recorded at ``compaction_version`` (0: the latest
    in force) does now, or a refusal saying why it cannot be undone."""
    if compaction_version < 0:
        raise InvalidRequest(
            f"compaction version {compaction_version} is negative; send the version of a "
            "compaction in force, or 0 for the latest"
        )
    in_force = history.compactions_in_force()
    if not in_force:
        raise InvalidCutPoint(
            f"no compaction is in force in session {history.session_id!r}; nothing to undo"
        )
    target = in_force[-1]
    if compaction_version:
        found = [c for c in in_force if c.version == compaction_version]
        if not found:
            versions = ", ".join(str(c.version) for c in in_force)
            raise InvalidCutPoint(
                f"no compaction in force was recorded at version {compaction_version}; "
                f"the compactions in force are at versions {versions}"
            )
        target = found[0]
    before = [c for c in in_force if c.version < target.version]
    restored = before[-1] if before else None
    return UndoPlan(
        target.version,
        restored.version if restored else 0,
        restored.first_kept_position if restored else 0,
        history.prompt_tokens_with_cut(restored.version if restored else 0),
    )


def plan_redo(history: CompactionLedger, undo_version: int) -> RedoPlan:
    """What taking back the undo recorded at ``undo_version`` does now: the
    compactions it took back are in force again, exactly as recorded. Refused
    unless the compactions in force are still those the undo left (a later
    compaction or undo is taken back first, so undos and redos chain)."""
    undos, redos = history.undos(), history.redos()
    undo = next((u for u in undos if u.version == undo_version), None)
    if undo is None:
        listed = ", ".join(str(u.version) for u in undos) or "none"
        raise InvalidCutPoint(
            f"no undo of a compaction was recorded at version {undo_version} in session "
            f"{quoted(history.session_id)}; its undos are at versions {listed}"
        )
    redone = next((r for r in redos if r.undo_version == undo_version), None)
    if redone is not None:
        raise InvalidCutPoint(
            f"the undo at version {undo_version} was already taken back at version "
            f"{redone.version}; undo the compaction again to take that back"
        )
    left = history.compactions_in_force(undo.version)
    now = history.compactions_in_force()
    if [c.version for c in now] != [c.version for c in left]:
        versions = [
            *(c.version for c in history.compactions()),
            *(u.version for u in undos),
            *(r.version for r in redos),
        ]
        changes = [v for v in versions if v > undo.version]
        raise InvalidCutPoint(
            f"the compactions in force changed since the undo at version {undo_version} "
            f"(at versions {', '.join(map(str, sorted(changes)))}); take those back first, "
            "newest first"
        )
    before = history.compactions_in_force(undo.version - 1)
    again = [c for c in before if c.version >= undo.compaction_version]
    cuts = [(c.version, c.first_kept_position, *history.cut_versions(c.version)) for c in again]
    return RedoPlan(
        undo_version,
        [c.version for c in again],
        again[-1].first_kept_position,
        cuts,
        history.prompt_tokens_with_cut(again[-1].version),
    )
