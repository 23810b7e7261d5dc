"""The use cases: what a client can ask of the store, in domain terms.

Writes load the small Session aggregate, run one command and save its events.
Reads are served from a cached, incrementally updated ``SessionHistory`` per
session, caught up from the store before each read so that several servers
can share one database.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar, cast

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry
from domain.context.window import resolve_context_window
from domain.errors import (
    DeadlineExceeded,
    DomainError,
    DuplicateEntry,
    EntryNotFound,
    IdempotencyKeyReused,
    InvalidRequest,
    InvalidSettings,
    SessionExists,
    SessionNotFound,
    TooManyStreams,
    Unavailable,
    VersionConflict,
    VersionOutOfRange,
    quoted,
)
from domain.pruning import PruneDecision
from domain.session import Session, SessionEvent, new_id, validate_session_id
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt, validate_system_prompt, with_files_cut
from projections.prompt_formats import PromptRenderer, RenderedPrompt
from projections.session_history import DurableLog, PromptView, SessionHistory, load_from_cut
from projections.view_audit import ViewAudit, audit_view
from services.adapters.event_store import EventStore
from services.adapters.group_commit import GroupCommit
from services.adapters.id_index import IdTaken
from services.adapters.model_info import model_metadata
from services.adapters.tokenizers import count_system_prompt, tokenizer_for
from services.app import deadline
from services.app.cache import WeightedLRU
from services.config import Config

LOCK_STRIPES = 1024
MESSAGE_ENVELOPE_BYTES = 64 << 10
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
WRITE_CACHE_SESSIONS = 10_000
# Resident memory per byte of cached objects: the allocator keeps freed
# memory of evicted sessions in partly used arenas.
RSS_PER_LIVE_BYTE = 1.4
# A write that lost the race to another server's is tried again this many
# times at most, for this long at most, after a random pause of up to
# RETRY_PAUSE * 2**attempt seconds (never more than RETRY_PAUSE_MAX).
WRITE_ATTEMPTS = 50
WRITE_RETRY_SECONDS = 10.0
RETRY_PAUSE = 0.001
RETRY_PAUSE_MAX = 0.05
T = TypeVar("T")


@dataclass(frozen=True)
class AsOf:
    """A point to replay to: a version, a time, or (neither) now."""

    version: int | None = None
    time: datetime | None = None


@dataclass(frozen=True)
class AppendResult:
    version: int
    entries: Sequence[Entry]
    replayed: bool = False


# Set by ``just_written``: (session id, version) whose history the next read may
# take from this server's cache without asking the store for newer events.
_JUST_WRITTEN: ContextVar[list[tuple[str, int]] | None] = ContextVar("just_written", default=None)


class SessionService:
    def __init__(self, config: Config, store: EventStore) -> None:
        self.config = config
        self.store = store
        # The cache budget: two thirds for histories, one third for the
        # rendered JSON that makes repeated prompt views cheap. Weights are
        # scaled by what the process really holds per byte of live objects
        # while caches churn (measured with `make bench`, memory group).
        budget = config.cache_max_mb << 20
        self._histories: WeightedLRU[str, SessionHistory] = WeightedLRU(
            budget * 2 // 3, lambda h: h.weight * RSS_PER_LIVE_BYTE
        )
        self._renderers: WeightedLRU[str, PromptRenderer] = WeightedLRU(
            budget // 3, lambda r: r.weight * RSS_PER_LIVE_BYTE
        )
        self._group_commit = GroupCommit(self.store.save_sessions)
        # The aggregates this server saved last, for its next write to them.
        self._written: WeightedLRU[str, Session] = WeightedLRU(WRITE_CACHE_SESSIONS, lambda _: 1)
        # Aggregates read for the read path, trusted while the history agrees.
        self._read: WeightedLRU[str, Session] = WeightedLRU(WRITE_CACHE_SESSIONS, lambda _: 1)
        # Writers to one session queue here instead of failing each other's
        # optimistic checks; different sessions rarely share a stripe.
        self._write_locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._history_locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._saved = threading.Condition()
        # Latest version saved here, per session, for followers to wake on;
        # a follower whose session fell out of it finds new events by polling.
        self._latest_versions: WeightedLRU[str, int] = WeightedLRU(100_000, lambda _: 1)
        self.closing = threading.Event()
        # Called with each session just saved (the context engine's ingest).
        self.on_saved: list[Callable[[Session, Sequence[SessionEvent]], None]] = []
        self._followers = threading.BoundedSemaphore(config.followers_limit)
        # The context engines sessions may choose (all names, when empty).
        self.engine_names: set[str] = set()
        # The position of this thread's latest save (see written_position).
        self._positions = threading.local()

    def end_streams(self) -> None:
        """Lets followed event streams finish, as a server shutting down must."""
        self.closing.set()
        with self._saved:
            self._saved.notify_all()

    def close(self) -> None:
        self.end_streams()
        self.store.close()

    def written_position(self) -> int:
        """The position of the write this thread just made: the notification id of
        its last event, for the client to wait on in a read model. A write that
        saved nothing (a replayed append) answers the store's head, which is at
        or beyond the write it repeats."""
        position: int | None = getattr(self._positions, "value", None)
        self._positions.value = None
        if position is None:
            position = self.store.recorder.max_notification_id() or 0
        return position

    # -- sessions -----------------------------------------------------------------

    def create_session(
        self, session_id: str, choose: Callable[[SessionSettings], SessionSettings]
    ) -> Session:
        """A new session with the server's defaults, changed as ``choose`` says."""
        session_id = session_id or new_id()
        validate_session_id(session_id)
        settings = choose(self.config.new_session_settings())
        self._check_engine(settings)
        settings = replace(settings, model=settings.model or self.config.default_model)
        session = Session.start(
            session_id,
            settings,
            self._context_window(settings),
            max_entry_bytes_limit=self._max_entry_bytes_limit,
        )
        self._save(session)
        return session

    def get_session(self, session_id: str) -> Session:
        return self._aggregate(session_id)

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
        sessions = [self._aggregate(session_id) for _, session_id in page]
        next_after = page[-1][0] if len(found) > page_size else None
        return sessions, next_after

    def update_settings(
        self,
        session_id: str,
        change: Callable[[SessionSettings], SessionSettings],
        expected_version: int | None,
    ) -> Session:
        def command(session: Session) -> None:
            settings = change(session.settings)
            self._check_engine(settings)
            session.change_settings(
                settings,
                self._context_window(settings),
                max_entry_bytes_limit=self._max_entry_bytes_limit,
            )

        return self._write(session_id, expected_version, command)[0]

    # -- writes -------------------------------------------------------------------

    def append(
        self,
        session_id: str,
        drafts: Sequence[Entry],
        *,
        expected_version: int | None = None,
        idempotency_key: str = "",
    ) -> AppendResult:
        fingerprint = _fingerprint(drafts) if idempotency_key else ""

        def command(session: Session) -> AppendResult:
            earlier = self._earlier_append(session, idempotency_key, fingerprint)
            if earlier is not None:
                return earlier
            session.check_expected_version(expected_version)
            tokenizer = tokenizer_for(session.settings.model)
            entries = session.append(
                drafts,
                self.store.ids_of(session_id),
                idempotency_key=idempotency_key,
                fingerprint=fingerprint,
                # Counted once valid: a refusal never waits on the tokenizer.
                measure=lambda e: replace(
                    e, token_count=tokenizer.count_entry(e), tokenizer=tokenizer.name
                ),
            )
            return AppendResult(session.version, entries)

        # The idempotency check comes before the version check: a retry carries
        # the expected version its first try had.
        return self._write(session_id, None, command)[1]

    def record_compaction(
        self, session_id: str, compaction: Compaction, expected_version: int | None = None
    ) -> Session.CompactionRecorded:
        """Records a compaction, the client's or the engine's; figures left at 0 are the
        store's own counts, and the receipt says which."""

        def command(session: Session) -> Session.CompactionRecorded:
            tokenizer = tokenizer_for(session.settings.model)
            history = self._history(session_id)
            counted = replace(
                compaction,
                summary_tokens=tokenizer.count_text(compaction.summary),
                tokenizer=tokenizer.name,
            )
            position = history.position_of(compaction.first_kept_entry_id)
            prompt_tokens = -1
            if position is not None:
                prompt_tokens = history.prompt_tokens_if_cut_at(position, counted.summary_tokens)
                if not (compaction.tokens_before or compaction.tokens_after):
                    # The prompt's messages as the model sees them, before and after.
                    view = history.prompt_view()
                    source = f"tokenizer:{tokenizer.name}"
                    counted = replace(
                        counted,
                        tokens_before=view.estimated_tokens - view.system_prompt.tokens.total,
                        tokens_after=prompt_tokens,
                        tokens_before_source=source,
                        tokens_after_source=source,
                    )
                else:
                    counted = replace(
                        counted, tokens_before_source="client", tokens_after_source="client"
                    )
            session.record_compaction(counted, history, prompt_tokens=prompt_tokens)
            recorded = session.pending_events[-1]
            assert isinstance(recorded, Session.CompactionRecorded)
            return recorded

        return self._write(session_id, expected_version, command)[1]

    def undo_compaction(
        self,
        session_id: str,
        compaction_version: int = 0,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
    ) -> tuple[Session, Session.CompactionUndone]:
        """Takes back a compaction in force (the latest when ``compaction_version`` is 0):
        the entries it covered are in the durable log again."""

        def command(session: Session) -> Session.CompactionUndone:
            plan = self._history(session_id).plan_undo(compaction_version)
            session.undo_compaction(
                plan.compaction_version,
                reason,
                restored=(plan.restored_compaction_version, plan.first_kept_position),
                prompt_tokens=plan.prompt_tokens,
                requested_by=requested_by,
            )
            undone = session.pending_events[-1]
            assert isinstance(undone, Session.CompactionUndone)
            return undone

        return self._write(session_id, expected_version, command)

    def redo_compaction(
        self,
        session_id: str,
        undo_version: int,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
    ) -> tuple[Session, Session.CompactionRedone]:
        """Takes back the undo recorded at ``undo_version``: the compactions it took
        back are in force again, exactly as recorded."""

        def command(session: Session) -> Session.CompactionRedone:
            plan = self._history(session_id).plan_redo(undo_version)
            session.redo_compaction(
                plan.undo_version,
                reason,
                compaction_versions=plan.compaction_versions,
                first_kept_position=plan.first_kept_position,
                cuts=plan.cuts,
                prompt_tokens=plan.prompt_tokens,
                requested_by=requested_by,
            )
            redone = session.pending_events[-1]
            assert isinstance(redone, Session.CompactionRedone)
            return redone

        return self._write(session_id, expected_version, command)

    def record_prune(
        self,
        session_id: str,
        decisions: Sequence[PruneDecision],
        reason: str,
        expected_version: int | None = None,
    ) -> Session.PruneRecorded:
        def command(session: Session) -> Session.PruneRecorded:
            session.record_prune(decisions, reason, self._history(session_id))
            recorded = session.pending_events[-1]
            assert isinstance(recorded, Session.PruneRecorded)
            return recorded

        return self._write(session_id, expected_version, command)[1]

    def record_compaction_failure(self, session_id: str, failure: CompactionFailure) -> int:
        """Records a compaction that did not happen; answers the version."""

        def command(session: Session) -> None:
            session.record_compaction_failure(failure)

        return self._write(session_id, None, command)[0].version

    def report_overflow(
        self,
        session_id: str,
        *,
        provider: str,
        status_code: int,
        message: str,
        kind: str,
        view_version: int,
        view_hash: str,
    ) -> Session:
        """Records the provider's refusal; the session counts the attempts of its turn."""

        def command(session: Session) -> None:
            session.report_overflow(
                provider=provider,
                status_code=status_code,
                message=message,
                kind=kind,
                view_version=view_version,
                view_hash=view_hash,
            )

        return self._write(session_id, None, command)[0]

    def set_system_prompt(
        self, session_id: str, prompt: SystemPrompt, expected_version: int | None
    ) -> tuple[Session, SystemPrompt, bool]:
        """Stores the prompt, counted with the session model's tokenizer; answers the
        session, the prompt as stored and whether it changed."""

        def command(session: Session) -> tuple[SystemPrompt, bool]:
            validate_system_prompt(prompt)
            tokenizer = tokenizer_for(session.settings.model)
            cut = with_files_cut(prompt, session.settings.max_system_file_chars)
            counted = replace(cut, tokens=count_system_prompt(cut, tokenizer))
            fingerprint = hashlib.sha256(
                json.dumps(counted.to_dict(), sort_keys=True).encode()
            ).hexdigest()
            version = session.version
            session.set_system_prompt(counted, fingerprint)
            return counted, session.version != version

        session, (stored, changed) = self._write(session_id, expected_version, command)
        return session, stored, changed

    def abandon_tool_calls(
        self,
        session_id: str,
        call_ids: Sequence[str],
        reason: str,
        expected_version: int | None = None,
    ) -> tuple[Session, Entry]:
        """Closes open calls that will never be answered; answers the session and the
        entry holding their synthetic error results."""

        def command(session: Session) -> Entry:
            tokenizer = tokenizer_for(session.settings.model)
            return session.abandon_tool_calls(
                call_ids,
                reason,
                lambda e: replace(
                    e, token_count=tokenizer.count_entry(e), tokenizer=tokenizer.name
                ),
            )

        return self._write(session_id, expected_version, command)

    def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str = "",
        new_session_id: str = "",
        choose: Callable[[SessionSettings], SessionSettings] | None = None,
    ) -> Session:
        """A new session whose history is the parent's up to ``version`` (or up to the
        version that appended ``entry_id``; now when neither), with the settings
        ``choose`` makes recorded after the copy. The parent is not touched."""
        history = self._history(session_id)
        if entry_id:
            position = history.position_of(entry_id)
            if position is None:
                raise EntryNotFound(f"no entry {quoted(entry_id)} in session {quoted(session_id)}")
            version = history.entry_version(position)
        version = history.resolve_version(version)
        fork_id = new_session_id or new_id()
        validate_session_id(fork_id)
        self.check_new_session_id(fork_id)
        events = self.store.session_events(session_id, upto=version)
        fork = Session.fork(fork_id, events)
        if choose is not None:
            settings = choose(fork.settings)
            self._check_engine(settings)
            fork.change_settings(
                settings,
                self._context_window(settings),
                max_entry_bytes_limit=self._max_entry_bytes_limit,
            )
        self._save(fork)
        return fork

    # -- what imports use ------------------------------------------------------------

    def check_new_session_id(self, session_id: str) -> None:
        try:
            self.store.repository.get(session_id)
        except AggregateNotFoundError:
            return
        raise SessionExists(f"a session with id {quoted(session_id)} already exists")

    def new_session_settings(
        self, choose: Callable[[SessionSettings], SessionSettings]
    ) -> tuple[SessionSettings, tuple[int, str], int]:
        """The server's defaults changed by ``choose``, the window they resolve to,
        and the largest max_entry_bytes this server takes."""
        settings = choose(self.config.new_session_settings())
        self._check_engine(settings)
        settings = replace(settings, model=settings.model or self.config.default_model)
        return settings, self._context_window(settings), self._max_entry_bytes_limit

    def save_new_sessions(self, built: Sequence[tuple[Session, SessionHistory]]) -> None:
        """Saves new sessions (an import: a session and its forks) in one insert,
        all or nothing, and keeps their histories, folded while they were built."""
        for session, _ in built:
            self.check_new_session_id(session.id)
        try:
            positions = self.store.save_sessions([session for session, _ in built])
            self._positions.value = max(positions.values(), default=0)
        except IntegrityError:
            raise SessionExists(
                "a session of this import was just created by another writer: "
                + ", ".join(repr(s.id) for s, _ in built)
            ) from None
        for session, history in built:
            self._written.put(session.id, session)
            with self._history_locks[hash(session.id) % LOCK_STRIPES]:
                self._histories.put(session.id, history)
        with self._saved:
            for session, _ in built:
                self._latest_versions.put(session.id, session.version)
            self._saved.notify_all()

    def events_upto(self, session_id: str, version: int | None) -> list[SessionEvent]:
        """The session's events from the first to ``version`` (now when None or 0)."""
        history = self._history(session_id)
        return self.store.session_events(session_id, upto=history.resolve_version(version))

    # -- what the context engine may use (services.engine.base.SessionPort) ----------

    def history(self, session_id: str) -> SessionHistory:
        return self._history(session_id)

    def aggregate(self, session_id: str) -> Session:
        return self._aggregate(session_id)

    def recent(self, session_id: str) -> Session:
        """The aggregate as this server last saved it, else as stored: for estimates and
        routing on the read path, where a moment's staleness does no harm and a read
        of the store would cost as much as the view itself."""
        written = self._written.get(session_id)
        if written is not None:
            return written
        # Read before, and still what the history (caught up with the store) says.
        read, history = self._read.get(session_id), self._histories.get(session_id)
        if read is not None and history is not None and read.version == history.version:
            return read
        if history is None:
            # Not read here yet: the cold load reads the aggregate with the history.
            self._history(session_id)
            read = self._read.get(session_id)
            if read is not None:
                return read
        session = self._aggregate(session_id)
        self._read.put(session_id, session)
        return session

    def _write(
        self,
        session_id: str,
        expected_version: int | None,
        command: Callable[[Session], T],
    ) -> tuple[Session, T]:
        """Runs a command on the session and saves the events it decided on.

        The aggregate comes from this server's cache of the sessions it wrote,
        trusted without a read. If another server wrote in between, the save
        hits the store's unique (session, version) key, and a refusal may be
        the stale copy's mistake: either way the command runs again on a copy
        fresh from the store, whose verdict stands. A write that only lost the
        race to another server is tried again (a few times, after a short
        random pause), so a command without an expected version lands; one
        with an expected version hears the conflict from the fresh copy.
        """
        self._positions.value = None
        with self._locked(session_id):
            cached = self._written.get(session_id)
            if cached is not None:
                try:
                    return self._attempt(copy.deepcopy(cached), expected_version, command)
                except (Unavailable, DeadlineExceeded):
                    raise  # not the stale copy's doing: a fresh one would fare no better
                except DomainError:
                    self._written.discard(session_id)
            give_up_at = time.monotonic() + WRITE_RETRY_SECONDS
            attempt = 0
            while True:
                attempt += 1
                try:
                    return self._attempt(self._aggregate(session_id), expected_version, command)
                except _RaceLost:
                    if attempt >= WRITE_ATTEMPTS or time.monotonic() >= give_up_at:
                        raise
                pause = random.uniform(0, min(RETRY_PAUSE_MAX, RETRY_PAUSE * 2**attempt))
                time.sleep(deadline.bounded(pause))
                deadline.check("writing to a session other servers were writing to")

    @contextlib.contextmanager
    def _locked(self, session_id: str) -> Iterator[None]:
        """The session's write lock, waited for no longer than the call's deadline."""
        lock = self._write_locks[hash(session_id) % LOCK_STRIPES]
        wait = deadline.remaining()
        if not lock.acquire(timeout=-1 if wait is None else wait):
            raise DeadlineExceeded(
                "the call's deadline passed while waiting for other writes to the session; "
                "nothing was written"
            )
        try:
            yield
        finally:
            lock.release()

    def _attempt(
        self, session: Session, expected_version: int | None, command: Callable[[Session], T]
    ) -> tuple[Session, T]:
        session.check_expected_version(expected_version)
        result = command(session)
        if session.pending_events:
            self._save(session)
        return session, result

    # -- reads --------------------------------------------------------------------

    def durable_log(self, session_id: str, as_of: AsOf = AsOf()) -> DurableLog:
        history = self._history(session_id)
        return history.durable_log(self._version(history, as_of))

    def prompt_view(
        self, session_id: str, as_of: AsOf = AsOf(), provider_format: str = "openai"
    ) -> tuple[PromptView, RenderedPrompt]:
        """The prompt view as stored (no engine at work) and its rendering."""
        history = self._history(session_id)
        view = history.prompt_view(self._version(history, as_of))
        return view, self.render(view, provider_format)

    def rendered_before(
        self, session_id: str, provider_format: str, version: int, request_hash: str
    ) -> RenderedPrompt | None:
        """The rendering a client says it holds (by version and hash), if it is genuine."""
        renderer = self._renderers.get(session_id)
        remembered = renderer.remembered(provider_format, request_hash) if renderer else None
        if remembered is not None:
            return remembered
        try:
            _, rendered = self.prompt_view(session_id, AsOf(version=version), provider_format)
        except VersionOutOfRange:
            return None
        return rendered if rendered.request_hash == request_hash else None

    def render(self, view: PromptView, provider_format: str) -> RenderedPrompt:
        """The view in the provider's format, reusing what earlier renders made."""
        session_id = view.log.session_id
        renderer = self._renderers.get(session_id) or PromptRenderer()
        rendered = renderer.render(view, provider_format)
        self._renderers.put(session_id, renderer)  # weighed again: it may have grown
        return rendered

    def audit_view(self, session_id: str, as_of: AsOf = AsOf()) -> ViewAudit:
        """Every entry against the views at a point, and the turns' prompt views verified."""
        history = self._history(session_id)
        return audit_view(history, self._version(history, as_of))

    def entry(self, session_id: str, entry_id: str) -> tuple[Entry, int]:
        """An entry's full content and the version that appended it."""
        history = self._history(session_id)
        entry = history.entry(entry_id)
        position = history.position_of(entry_id)
        assert position is not None
        return entry, history.entry_version(position)

    def events(
        self, session_id: str, after_version: int, *, follow: bool, is_active: Callable[[], bool]
    ) -> Iterator[SessionEvent]:
        """The session's events after a version; with follow, new ones as they land.

        A followed stream holds one of the server's worker threads for its whole
        life: at most ``max_followers`` of them at once, so health checks and
        unary calls always find a worker.
        """
        current = self._aggregate(session_id).version  # NOT_FOUND before the stream starts
        if after_version > current:
            raise VersionOutOfRange(
                f"after_version {after_version} is beyond the session's version {current}"
            )
        if not follow:
            yield from self._events(session_id, after_version, follow, is_active)
            return
        if not self._followers.acquire(blocking=False):
            raise TooManyStreams(
                f"this server already serves {self.config.followers_limit} followed streams "
                "(SESSIONSTORE_MAX_FOLLOWERS); retry later, on another server, or read "
                "without follow"
            )
        try:
            yield from self._events(session_id, after_version, follow, is_active)
        finally:
            self._followers.release()

    def _events(
        self, session_id: str, after_version: int, follow: bool, is_active: Callable[[], bool]
    ) -> Iterator[SessionEvent]:
        while True:
            deadline.check("reading the session's events")
            page = self.store.session_events(session_id, after=after_version, limit=500)
            yield from page
            if not is_active():
                return
            if page:
                after_version = page[-1].originator_version
                continue
            if not follow:
                return
            self._wait_for_version(session_id, after_version, is_active)
            if self.closing.is_set() or not is_active():
                return

    # -- internals ----------------------------------------------------------------

    def _check_engine(self, settings: SessionSettings) -> None:
        if self.engine_names and settings.engine not in self.engine_names:
            raise InvalidSettings(
                f"engine {quoted(settings.engine)} is not installed on this server; choose one of "
                + ", ".join(sorted(self.engine_names))
            )

    @property
    def _max_entry_bytes_limit(self) -> int:
        # An entry must fit in one request, with room for the request's other fields.
        return (self.config.max_message_mb << 20) - MESSAGE_ENVELOPE_BYTES

    def _context_window(self, settings: SessionSettings) -> tuple[int, str]:
        return resolve_context_window(
            settings, self.config.model_windows, model_metadata.context_window
        )

    def _aggregate(self, session_id: str) -> Session:
        try:
            return self.store.repository.get(session_id)
        except AggregateNotFoundError:
            raise SessionNotFound(session_id) from None

    @contextlib.contextmanager
    def just_written(self, session_id: str, version: int) -> Iterator[None]:
        """Within it, the first read of the session's history takes this server's copy
        as it is, without asking the store for newer events, if that copy holds
        ``version``: a write this call just made (the copy took its events as they
        were saved). It is what a read arriving right after the write would see;
        later reads in the block catch up as usual."""
        token = _JUST_WRITTEN.set([(session_id, version)])
        try:
            yield
        finally:
            _JUST_WRITTEN.reset(token)

    def _take_just_written(self, session_id: str, history: SessionHistory) -> bool:
        pending = _JUST_WRITTEN.get()
        if not pending or pending[0][0] != session_id:
            return False
        _, version = pending.pop()
        return history.version >= version

    def _history(self, session_id: str) -> SessionHistory:
        """The session's history, caught up with the store."""
        with self._history_locks[hash(session_id) % LOCK_STRIPES]:
            cached = self._histories.get(session_id)
            history = cached or self._cold_history(session_id)
            # Loaded from the cut just now, to the store's latest version.
            just_loaded = cached is None and history.version > 0
            if history.loaded_whole is not None:
                # Loaded from a cut and asked about the past: keep the whole one.
                history = history.loaded_whole
                cached = None
            fresh = just_loaded or (
                cached is not None and self._take_just_written(session_id, history)
            )
            new_events = (
                [] if fresh else self.store.session_events(session_id, after=history.version)
            )
            if new_events:
                history.apply(new_events)
            if (new_events or cached is None) and history.version:
                self._histories.put(session_id, history)
            elif history.version == 0:
                raise SessionNotFound(session_id)
            return history

    def _cold_history(self, session_id: str) -> SessionHistory:
        """A history for a session not in the cache: loaded from the latest cut when
        the aggregate knows where it is, so a cold read costs what the prompt keeps.
        The aggregate and the events from the cut on come from one read."""

        def start(session: Session) -> int:
            cold = session.cold_start
            return cold[2] - 1 if cold is not None else session.version

        try:
            session, events, after = self.store.session_with_events(session_id, start)
        except AggregateNotFoundError:
            return SessionHistory(session_id)
        self._read.put(session_id, session)

        def fetch(since: int, upto: int | None) -> list[SessionEvent]:
            if upto is None and since >= after:
                return [e for e in events if e.originator_version > since]
            return self.store.session_events(session_id, after=since, upto=upto)

        history = load_from_cut(session, fetch)
        if history is None:
            history = SessionHistory(session_id)
            if after == 0:
                history.apply(events)  # no snapshot: every event is at hand
        return history

    def _version(self, history: SessionHistory, as_of: AsOf) -> int:
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

    def _save(self, session: Session) -> None:
        """Saves the pending events, snapshotting as configured."""
        pending = list(session.pending_events)
        saved = cast(list[SessionEvent], pending)
        try:
            self._positions.value = self._group_commit.save(session)
        except IdTaken:
            # Another server used one of the ids between the check and the insert.
            raise DuplicateEntry(
                "an entry id or tool call id of this append was just used by another "
                "writer; ids must be unique"
            ) from None
        except IntegrityError:
            # Another writer took the version first (or, for a new session, the id).
            if isinstance(pending[0], Session.Started):
                raise SessionExists(
                    f"a session with id {quoted(session.id)} already exists"
                ) from None
            current = self._aggregate(session.id).version
            raise _RaceLost(pending[0].originator_version - 1, current) from None
        self._written.put(session.id, session)
        self._extend_history(session.id, saved)
        for listener in self.on_saved:
            listener(session, saved)
        with self._saved:
            self._latest_versions.put(session.id, session.version)
            self._saved.notify_all()

    def _extend_history(self, session_id: str, saved: Sequence[SessionEvent]) -> None:
        """Adds the events just saved to this server's copy of the history when it
        ends right before them (no other writer came in between, or the save would
        have failed), so the next read need not fetch and decode them again."""
        with self._history_locks[hash(session_id) % LOCK_STRIPES]:
            history = self._histories.get(session_id)
            if history is None or not saved:
                return
            if history.version != saved[0].originator_version - 1:
                return
            history.apply(saved)
            self._histories.put(session_id, history)  # weighed again: it grew

    def _earlier_append(
        self, session: Session, idempotency_key: str, fingerprint: str
    ) -> AppendResult | None:
        """The first result, if this append retries one made within the idempotency TTL.

        The aggregate remembers its last few keys; any other key is looked up in
        the store's key table (one indexed query), so a retry is recognised
        however many appends came in between.
        """
        if not idempotency_key:
            return None
        ttl = self.config.idempotency_ttl_seconds
        event: Session.EntriesAppended | None = None
        remembered = session.recent_appends.get(idempotency_key)
        if remembered is not None:
            first_fingerprint, version = str(remembered[0]), int(remembered[1])
            event = self._appended(session.id, version)
            if event.timestamp < datetime.now(UTC) - timedelta(seconds=ttl):
                return None  # the key has expired: free for a new append
        else:
            found = self.store.earlier_append(session.id, idempotency_key, ttl)
            if found is None:
                return None
            first_fingerprint, version = found
        if first_fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                f"idempotency key {quoted(idempotency_key)} was used for a different append "
                f"(version {version}); use a new key for a new append"
            )
        event = event or self._appended(session.id, version)
        return AppendResult(version, list(event.entries), replayed=True)

    def expire_idempotency_keys(self) -> int:
        """Deletes the idempotency keys older than the TTL; answers how many."""
        return self.store.expire_idempotency_keys(self.config.idempotency_ttl_seconds)

    def _appended(self, session_id: str, version: int) -> Session.EntriesAppended:
        (event,) = self.store.session_events(session_id, after=version - 1, upto=version)
        assert isinstance(event, Session.EntriesAppended)
        return event

    def _wait_for_version(
        self, session_id: str, after_version: int, is_active: Callable[[], bool]
    ) -> None:
        with self._saved:
            while not self.closing.is_set() and is_active():
                if (self._latest_versions.get(session_id) or 0) > after_version:
                    return
                # Time out now and then: another server may have written, and
                # the client may have gone away.
                if not self._saved.wait(self.config.follow_poll_seconds):
                    return


class _RaceLost(VersionConflict):
    """Another writer stored the version this save was for."""


def _fingerprint(drafts: Sequence[Entry]) -> str:
    # Sorted keys: metadata maps arrive in process-dependent order, and a retry
    # from another server, or after a restart, must hash the same.
    canonical = json.dumps([d.to_record() for d in drafts], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()
