"""Erasing content: entries or a whole session, then the same in every fork of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from domain.erasure import SessionWasErased, plan_erasure
from domain.errors import InvalidRequest
from domain.session import Session
from domain.session_events import EntriesErased, SessionErased
from services.app import tenancy
from services.app.history_cache import HistoryCache
from services.app.write_path import WritePath, Written

# The erasure's event: of entries, or of the whole session.
EV = TypeVar("EV", EntriesErased, SessionErased)


@dataclass(frozen=True)
class Erased(Generic[EV]):
    """What an erasure did: the session after it, its event, the forks it was
    followed into, and the position of the last of those writes."""

    session: Session
    event: EV
    forks: list[str]
    position: int | None


class ErasureCommands:
    def __init__(self, writes: WritePath, histories: HistoryCache) -> None:
        self.writes = writes
        self.histories = histories

    def erase_entries(
        self, session_id: str, entry_ids: Sequence[str], *, erased_by: str, reason: str
    ) -> Erased[EntriesErased]:
        """Erases entries' content (their keys are deleted with the event), and the
        summaries of every compaction that may carry it; then the same entries in the
        forks that copied them (answered: the forks erased in)."""
        wanted = list(dict.fromkeys(entry_ids))
        if not wanted:
            raise InvalidRequest(
                "entry_ids is empty: name the entries to erase, or use EraseSession"
            )

        by = tenancy.accountable(erased_by)

        def command(session: Session) -> EntriesErased:
            tainted = plan_erasure(self.histories.history(session_id).whole(), wanted)
            return session.erase_entries(wanted, tainted, erased_by=by, reason=reason)

        written = self.writes.write(session_id, None, command)
        self.histories.forget(session_id)
        forks, position = self._erase_in_forks(written.session, wanted, erased_by=by, reason=reason)
        return Erased(written.session, written.result, forks, position or written.position)

    def erase_session(
        self, session_id: str, *, erased_by: str, reason: str, expected_version: int | None = None
    ) -> Erased[SessionErased]:
        """Erases the whole session's content, and that of every session forked from it
        (transitively, in its tenant; answered); it takes no more writes. With
        ``expected_version``, only if the session is still at that version."""

        by = tenancy.accountable(erased_by)

        def command(session: Session) -> SessionErased:
            return session.erase(erased_by=by, reason=reason)

        try:
            written = self.writes.write(session_id, expected_version, command)
        except SessionWasErased:
            # Erased before: its forks too, even if that erasure stopped short of them.
            root = self.writes.access.aggregate(session_id)
            self._erase_in_forks(root, None, erased_by=by, reason=reason)
            raise
        self.histories.forget(session_id)
        forks, position = self._erase_in_forks(written.session, None, erased_by=by, reason=reason)
        return Erased(written.session, written.result, forks, position or written.position)

    def _erase_in_forks(
        self, root: Session, entry_ids: Sequence[str] | None, *, erased_by: str, reason: str
    ) -> tuple[list[str], int | None]:
        """Follows an erasure of ``root`` (whole when ``entry_ids`` is None) into the
        sessions forked from it, and from those: each fork records an erasure of its
        own of what it copied. Answers the forks erased in (those of root's tenant: a
        fork an admin made in another tenant, before forks stayed in their parent's,
        is erased in too, but not named to the caller), and the position of the last
        erasure written in one.

        Forks are found by the links their own transactions wrote (the id index),
        never by a read model that may lag behind. A fork saved while this runs is
        caught by fork_session, which looks for erasures of its parent after saving.
        """
        erased: list[str] = []
        position: int | None = None
        seen = {root.id}
        pending: list[tuple[str, Sequence[str] | None]] = [(root.id, entry_ids)]
        while pending:
            parent_id, ids = pending.pop(0)
            for fork_id, copied_upto in self.writes.store.forks_of(parent_id):
                if fork_id in seen:
                    continue
                seen.add(fork_id)
                # The copy is of the caller's content, wherever it was put.
                with tenancy.calling_as(tenancy.UNRESTRICTED):
                    followed = self.follow_erasure(
                        fork_id, root, ids, copied_upto, erased_by=erased_by, reason=reason
                    )
                copied = followed.result
                position = followed.position or position
                if copied is None or copied:
                    if self.writes.access.ids.tenant_and_id(fork_id)[0] == root.tenant:
                        erased.append(fork_id)
                    pending.append((fork_id, copied))
        return erased, position

    def follow_erasure(
        self,
        fork_id: str,
        root: Session,
        entry_ids: Sequence[str] | None,
        copied_upto: int,
        *,
        erased_by: str,
        reason: str,
    ) -> Written[Sequence[str] | None]:
        """Erases in one fork what it copied of an erasure: the whole fork (answers None),
        or those of the entries it copied, appended at or before ``copied_upto`` (answers
        them; an entry the fork appended itself may reuse an id, and is not touched)."""

        def command(fork: Session) -> Sequence[str] | None:
            if entry_ids is None:
                if not fork.erased:
                    fork.erase(erased_by=erased_by, reason=reason, erased_with=root.id)
                return None
            history = self.histories.history(fork_id).whole()
            copied = [
                i
                for i in entry_ids
                if (position := history.position_of(i)) is not None
                and history.entry_version(position) <= copied_upto
            ]
            done = {i for e in history.erasures() for i in e.entry_ids}
            fresh = [i for i in copied if i not in done]
            if fresh and not fork.erased:
                fork.erase_entries(
                    fresh,
                    plan_erasure(history, fresh),
                    erased_by=erased_by,
                    reason=reason,
                    erased_with=root.id,
                )
            return copied

        written = self.writes.write(fork_id, None, command)
        self.histories.forget(fork_id)
        return written
