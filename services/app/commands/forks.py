"""Forking a session: a new one whose history is the parent's up to a point."""

from __future__ import annotations

from collections.abc import Callable

from domain.erasure import SessionWasErased
from domain.errors import EntryNotFound, InvalidRequest, quoted
from domain.ids import new_id
from domain.session import Session
from domain.session_events import EntriesErased
from domain.settings import SessionSettings
from services.app.commands.erasure import ErasureCommands
from services.app.history_cache import ERASURES, HistoryCache
from services.app.session_rules import SessionRules
from services.app.write_path import WritePath, Written


class ForkCommands:
    def __init__(
        self,
        writes: WritePath,
        histories: HistoryCache,
        rules: SessionRules,
        erasure: ErasureCommands,
    ) -> None:
        self.writes = writes
        self.histories = histories
        self.rules = rules
        self.erasure = erasure

    def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str = "",
        new_session_id: str = "",
        choose: Callable[[SessionSettings], SessionSettings] | None = None,
        sets_window: bool = False,
    ) -> Written[None]:
        """A new session whose history is the parent's up to ``version`` (or up to the
        version that appended ``entry_id``; now when neither), with the settings
        ``choose`` makes recorded after the copy. The parent is not touched.
        ``sets_window``: those settings name ``context_window_tokens``, which then
        supersedes a smaller window an overflow taught the parent (as UpdateSettings)."""
        fork, read_at = self.copied(
            session_id, version, entry_id, new_session_id, choose, sets_window=sets_window
        )
        return self.save_fork(fork, session_id, read_at)

    def copied(
        self,
        session_id: str,
        version: int | None,
        entry_id: str,
        new_session_id: str,
        choose: Callable[[SessionSettings], SessionSettings] | None,
        *,
        sets_window: bool = False,
    ) -> tuple[Session, int]:
        """The fork, not saved yet, and the parent's version when it was read."""
        access = self.writes.access
        history = self.histories.history(session_id)
        if history.erased() is not None:
            raise SessionWasErased(session_id)
        if entry_id:
            position = history.position_of(entry_id)
            if position is None:
                raise EntryNotFound(
                    f"no entry {quoted(entry_id)} in session "
                    f"{quoted(access.ids.client(session_id))}"
                )
            version = history.entry_version(position)
        version = history.resolve_version(version)
        # A fork stays in its parent's tenant: an erasure there must reach every copy.
        tenant = access.ids.tenant_and_id(session_id)[0]
        fork_id = new_session_id or access.ids.in_tenant(tenant, new_id())
        if access.ids.tenant_and_id(fork_id)[0] != tenant:
            raise InvalidRequest(
                f"a fork stays in its parent's tenant {quoted(tenant)}: name the new session "
                f"{quoted(access.ids.client(access.ids.in_tenant(tenant, 'ID')))}, or leave "
                "new_session_id empty"
            )
        access.check_new_session_id(fork_id)
        events = self.writes.store.session_events(session_id, upto=version)
        fork = Session.fork(fork_id, events, tenant=tenant)
        if choose is not None:
            settings = choose(fork.settings)
            self.rules.check(settings)
            # Refused as UpdateSettings refuses it: a window too small for a message
            # the fork's prompt keeps would make every view of the fork fail.
            fork.change_settings(
                settings,
                self.rules.context_window(settings),
                max_entry_bytes_limit=self.rules.max_content_bytes,
                largest_message_tokens=history.prompt_view(version).largest_message_tokens(),
                sets_window=sets_window,
            )
        return fork, history.version

    def save_fork(self, fork: Session, parent_id: str, read_at: int) -> Written[None]:
        """Saves a fork, then follows into it the erasures of its parent stored since
        the parent was read (an erasure racing the fork could not find its link yet):
        of the erasure and the fork, whichever committed second sees the other."""
        position = self.writes.save(fork)
        later = self.writes.store.session_events(parent_id, after=read_at)
        erasures = [e for e in later if isinstance(e, ERASURES)]
        if not erasures:
            return Written(fork, None, position)
        parent = self.writes.access.load(parent_id)
        for erasure in erasures:
            ids = list(erasure.entry_ids) if isinstance(erasure, EntriesErased) else None
            followed = self.erasure.follow_erasure(
                fork.id,
                parent,
                ids,
                fork.forked_at_version,
                erased_by=erasure.erased_by,
                reason=erasure.reason,
            )
            position = followed.position or position
        return Written(self.writes.access.load(fork.id), None, position)
