"""The queries: sessions, their logs, views, entries and events, now or as of a point.

Every read goes through the history cache, which catches this server's copy
up with the store first; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from domain.content import Entry
from domain.errors import InvalidRequest, VersionOutOfRange
from domain.session import Session, SessionEvent
from projections.rendered_prompt import RenderedPrompt
from projections.session_history import DurableLog, PromptView, SessionHistory
from projections.view_audit import ViewAudit, audit_view
from services.adapters.event_store import EventStore
from services.app import tenancy
from services.app.access import SessionAccess
from services.app.history_cache import HistoryCache

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class AsOf:
    """A point to replay to: a version, a time, or (neither) now."""

    version: int | None = None
    time: datetime | None = None


# The latest version: what a read without as_of is of.
NOW = AsOf()


class SessionQueries:
    def __init__(self, store: EventStore, access: SessionAccess, histories: HistoryCache) -> None:
        self.store = store
        self.access = access
        self.histories = histories

    def get_session(self, session_id: str) -> Session:
        return self.access.aggregate(session_id)

    def list_sessions(self, page_size: int, after: int) -> tuple[list[Session], int | None]:
        """A page of sessions in creation order, and the position to continue from.

        ``page_size`` 0 means the default page; larger pages are capped.
        """
        if page_size < 0:
            raise InvalidRequest(
                f"page_size {page_size} is negative; send 1 to {MAX_PAGE_SIZE}, "
                f"or 0 for {DEFAULT_PAGE_SIZE}"
            )
        page_size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        # One more than asked, to know whether another page follows.
        found = self.store.started_notifications(after, page_size + 1)
        page = found[:page_size]
        sessions = self.get_sessions([session_id for _, session_id in page])
        next_after = page[-1][0] if len(found) > page_size else None
        return sessions, next_after

    def get_sessions(self, session_ids: Sequence[str]) -> list[Session]:
        """The sessions of a page, read together. Another tenant's are left out (the
        page may then be short), and so are sessions no longer stored."""
        caller = tenancy.caller()
        return [s for s in self.access.load_many(session_ids) if caller.sees(s.tenant)]

    def durable_log(self, session_id: str, as_of: AsOf = AsOf()) -> DurableLog:
        history = self.histories.history(session_id)
        return history.durable_log(_version(history, as_of))

    def prompt_view(
        self, session_id: str, as_of: AsOf = AsOf(), provider_format: str = "openai"
    ) -> tuple[PromptView, RenderedPrompt]:
        """The prompt view as stored (no engine at work) and its rendering."""
        history = self.histories.history(session_id)
        view = history.prompt_view(_version(history, as_of))
        return view, self.histories.render(view, provider_format)

    def rendered_before(
        self, session_id: str, provider_format: str, version: int, request_hash: str
    ) -> RenderedPrompt | None:
        """The rendering a client says it holds (by version and hash), if it is genuine."""
        self.histories.history(session_id)  # an erasure found by the catch-up drops renderings
        remembered = self.histories.remembered(session_id, provider_format, request_hash)
        if remembered is not None:
            return remembered
        try:
            _, rendered = self.prompt_view(session_id, AsOf(version=version), provider_format)
        except VersionOutOfRange:
            return None
        return rendered if rendered.request_hash == request_hash else None

    def audit_view(self, session_id: str, as_of: AsOf = AsOf()) -> ViewAudit:
        """Every entry against the views at a point, and the turns' prompt views verified."""
        history = self.histories.history(session_id)
        return audit_view(history, _version(history, as_of))

    def entry(self, session_id: str, entry_id: str) -> tuple[Entry, int]:
        """An entry's full content and the version that appended it."""
        history = self.histories.history(session_id)
        entry = history.entry(entry_id)
        position = history.position_of(entry_id)
        assert position is not None
        return entry, history.entry_version(position)

    def events_upto(self, session_id: str, version: int | None) -> list[SessionEvent]:
        """The session's events from the first to ``version`` (now when None or 0)."""
        history = self.histories.history(session_id)
        return self.store.session_events(session_id, upto=history.resolve_version(version))


def _version(history: SessionHistory, as_of: AsOf) -> int:
    if as_of.time is not None:
        now = datetime.now(UTC)
        if as_of.time > now:
            # What the session holds then is not known yet: a replay must
            # answer the same whenever it is asked.
            raise VersionOutOfRange(
                f"time {as_of.time.isoformat()} is in the future (the server's clock says "
                f"{now.isoformat()}); leave as_of unset for the latest view"
            )
        return history.version_at_time(as_of.time)
    return history.resolve_version(as_of.version)
