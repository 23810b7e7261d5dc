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
from types import MappingProxyType
from typing import Any, TypeVar, cast

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry, Role
from domain.context.chain import provider_names, summarizer_chain
from domain.context.window import resolve_context_window
from domain.context_edits import parse_applied_edits, provider_clears
from domain.erasure import SessionWasErased
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
    Unavailable,
    VersionConflict,
    VersionOutOfRange,
    quoted,
)
from domain.pruning import PruneAction, PruneDecision
from domain.retraction import RetractionPlan
from domain.session import Session, SessionEvent, new_id
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt, validate_system_prompt, with_files_cut
from projections.prompt_formats import PromptRenderer, RenderedPrompt
from projections.retraction import plan_retraction
from projections.session_history import DurableLog, PromptView, SessionHistory, load_from_cut
from projections.view_audit import ViewAudit, audit_view
from services.adapters.event_store import EventStore
from services.adapters.group_commit import GroupCommit
from services.adapters.id_index import IdTaken
from services.adapters.litellm_loader import load_in_background
from services.adapters.model_info import model_metadata
from services.adapters.providers import load_providers
from services.adapters.tokenizers import count_system_prompt, tokenizer_for
from services.app import deadline, tenancy
from services.app.cache import WeightedLRU
from services.app.saved_versions import SavedVersions
from services.config import Config

LOCK_STRIPES = 1024
MESSAGE_ENVELOPE_BYTES = 64 << 10
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
WRITE_CACHE_SESSIONS = 10_000
# Sessions whose tenant this server remembers (a tenant never changes).
TENANT_CACHE_SESSIONS = 100_000
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
ERASURES_PER_LOOK = 1_000
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


@dataclass
class _OneRead:
    """Set by ``one_read``: the session whose reads share one catch-up."""

    session_id: str
    # The version this server's copy must hold to be taken as it is (None: the
    # first read has yet to catch up).
    fresh_at: int | None


_ONE_READ: ContextVar[_OneRead | None] = ContextVar("one_read", default=None)


class SessionService:
    def __init__(self, config: Config, store: EventStore) -> None:
        self.config = config
        self.store = store
        # How callers name sessions, and the streams that hold them (by tenant).
        self.ids = tenancy.SessionIds(store.legacy_tenants)
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
        # What followed event streams wait on (services.app.event_streams).
        self.saved_versions = SavedVersions()
        # Called with each session just saved (the context engine's ingest).
        self.on_saved: list[Callable[[Session, Sequence[SessionEvent]], None]] = []
        # The context engines sessions may choose (all names, when empty).
        self.engine_names: set[str] = set()
        # The position of this thread's latest save (see written_position).
        self._positions = threading.local()
        self._tenants: WeightedLRU[str, str] = WeightedLRU(TENANT_CACHE_SESSIONS, lambda _: 1)
        # The store's position up to which erasures were looked for (forget_erased):
        # from the start, nothing being held before it.
        self._erasures_seen: int | None = None
        with contextlib.suppress(Exception):  # a database down now is found by the monitor
            self._erasures_seen = store.recorder.max_notification_id() or 0

    def caches(self) -> dict[str, WeightedLRU[str, Any]]:
        """The caches by name, for the metrics."""
        return {
            "histories": self._histories,
            "renderings": self._renderers,
            "tenants": self._tenants,
        }

    def end_streams(self) -> None:
        """Lets followed event streams finish, as a server shutting down must."""
        self.saved_versions.close()

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
        """A new session with the server's defaults, changed as ``choose`` says, in the
        stream ``session_id`` (the caller's, from SessionIds; a new id when empty)."""
        session_id = session_id or self.ids.stream(new_id())
        settings = choose(self.config.new_session_settings())
        self._check_engine(settings)
        settings = replace(settings, model=settings.model or self.config.default_model)
        session = Session.start(
            session_id,
            settings,
            self._context_window(settings),
            max_entry_bytes_limit=self._max_entry_bytes_limit,
            tenant=self.ids.tenant_and_id(session_id)[0],
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
        # Another tenant's sessions are left out of the page (which may then be short).
        caller = tenancy.caller()
        sessions = [
            session
            for session in (self._load(session_id) for _, session_id in page)
            if caller.sees(session.tenant)
        ]
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
            largest = 0
            if session.entry_count:
                kept = self._history(session_id).prompt_view().as_shown()
                largest = max((e.token_count for e in kept if e.role is not Role.TOOL), default=0)
            session.change_settings(
                settings,
                self._context_window(settings),
                max_entry_bytes_limit=self._max_entry_bytes_limit,
                largest_message_tokens=largest,
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
                estimate_at=lambda version: (
                    self._history(session_id).prompt_view(version).estimated_tokens
                ),
            )
            return AppendResult(session.version, entries)

        # The idempotency check comes before the version check: a retry carries
        # the expected version its first try had.
        return self._write(session_id, None, command)[1]

    def record_compaction(
        self, session_id: str, compaction: Compaction, expected_version: int | None = None
    ) -> Session.CompactionRecorded:
        """Records a compaction, the client's or the engine's. The token figures of the
        receipt are the store's own counts; figures a client sent are kept beside them as
        its claims (details ``claimed_tokens_before`` / ``claimed_tokens_after``)."""

        def command(session: Session) -> Session.CompactionRecorded:
            compaction.validate()
            compaction.check_shrinks()  # claims that contradict themselves are refused
            recorded_summary = compaction.completed_summary()
            tokenizer = tokenizer_for(session.settings.model)
            history = self._history(session_id)
            claims = {
                f"claimed_{name}": str(value)
                for name, value in (
                    ("tokens_before", compaction.tokens_before),
                    ("tokens_after", compaction.tokens_after),
                )
                if value
            }
            item = compaction.provider_item
            # Whichever a view shows: the summary text, or the provider's own item.
            summary_tokens = max(
                tokenizer.count_text(recorded_summary),
                tokenizer.count_text(item.json) if item is not None else 0,
            )
            counted = replace(
                compaction,
                summary=recorded_summary,
                summary_tokens=summary_tokens,
                tokenizer=tokenizer.name,
                tokens_before=0,
                tokens_after=0,
                details=MappingProxyType({**compaction.details, **claims}),
            )
            position = history.position_of(compaction.first_kept_entry_id)
            prompt_tokens = -1
            if position is not None:
                # The prompt's messages as the model sees them, before and after.
                prompt_tokens = history.prompt_tokens_if_cut_at(position, counted.summary_tokens)
                view = history.prompt_view()
                source = f"tokenizer:{tokenizer.name}"
                counted = replace(
                    counted,
                    tokens_before=view.estimated_tokens - view.system_prompt.tokens.total,
                    tokens_after=prompt_tokens,
                    tokens_before_source=source,
                    tokens_after_source=source,
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

    def erase_entries(
        self, session_id: str, entry_ids: Sequence[str], *, erased_by: str, reason: str
    ) -> tuple[Session, Session.EntriesErased, list[str]]:
        """Erases entries' content (their keys are deleted with the event), and the
        summaries of every compaction that may carry it; then the same entries in the
        forks that copied them (answered: the forks erased in)."""
        wanted = list(dict.fromkeys(entry_ids))
        if not wanted:
            raise InvalidRequest(
                "entry_ids is empty: name the entries to erase, or use EraseSession"
            )

        by = tenancy.accountable(erased_by)

        def command(session: Session) -> Session.EntriesErased:
            tainted = self._history(session_id).plan_erasure(wanted)
            session.erase_entries(wanted, tainted, erased_by=by, reason=reason)
            erased = session.pending_events[-1]
            assert isinstance(erased, Session.EntriesErased)
            return erased

        session, erased = self._write(session_id, None, command)
        self.forget(session_id)
        forks = self._erase_in_forks(session, wanted, erased_by=by, reason=reason)
        return session, erased, forks

    def erase_session(
        self, session_id: str, *, erased_by: str, reason: str
    ) -> tuple[Session, Session.SessionErased, list[str]]:
        """Erases the whole session's content, and that of every session forked from it
        (transitively, in its tenant; answered); it takes no more writes."""

        by = tenancy.accountable(erased_by)

        def command(session: Session) -> Session.SessionErased:
            session.erase(erased_by=by, reason=reason)
            erased = session.pending_events[-1]
            assert isinstance(erased, Session.SessionErased)
            return erased

        try:
            session, erased = self._write(session_id, None, command)
        except SessionWasErased:
            # Erased before: its forks too, even if that erasure stopped short of them.
            self._erase_in_forks(self._aggregate(session_id), None, erased_by=by, reason=reason)
            raise
        self.forget(session_id)
        forks = self._erase_in_forks(session, None, erased_by=by, reason=reason)
        return session, erased, forks

    def _erase_in_forks(
        self, root: Session, entry_ids: Sequence[str] | None, *, erased_by: str, reason: str
    ) -> list[str]:
        """Follows an erasure of ``root`` (whole when ``entry_ids`` is None) into the
        sessions forked from it, and from those, in its tenant: each fork records an
        erasure of its own of what it copied. Answers the forks erased in.

        Forks are found by the links their own transactions wrote (the id index),
        never by a read model that may lag behind. A fork saved while this runs is
        caught by fork_session, which looks for erasures of its parent after saving.
        """
        erased: list[str] = []
        seen = {root.id}
        pending: list[tuple[str, Sequence[str] | None]] = [(root.id, entry_ids)]
        while pending:
            parent_id, ids = pending.pop(0)
            for fork_id, copied_upto in self.store.forks_of(parent_id):
                if fork_id in seen:
                    continue
                seen.add(fork_id)
                try:
                    copied = self._follow_erasure(
                        fork_id, root, ids, copied_upto, erased_by=erased_by, reason=reason
                    )
                except SessionNotFound:
                    continue  # another tenant's fork: not this caller's to erase
                if copied is None or copied:
                    erased.append(fork_id)
                    pending.append((fork_id, copied))
        return erased

    def _follow_erasure(
        self,
        fork_id: str,
        root: Session,
        entry_ids: Sequence[str] | None,
        copied_upto: int,
        *,
        erased_by: str,
        reason: str,
    ) -> Sequence[str] | None:
        """Erases in one fork what it copied of an erasure: the whole fork (answers None),
        or those of the entries it copied, appended at or before ``copied_upto`` (answers
        them; an entry the fork appended itself may reuse an id, and is not touched).
        A fork of another tenant is refused as SessionNotFound."""

        def command(fork: Session) -> Sequence[str] | None:
            if fork.tenant != root.tenant:
                raise SessionNotFound(fork_id)
            if entry_ids is None:
                if not fork.erased:
                    fork.erase(erased_by=erased_by, reason=reason, erased_with=root.id)
                return None
            history = self._history(fork_id).whole()
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
                    history.plan_erasure(fresh),
                    erased_by=erased_by,
                    reason=reason,
                    erased_with=root.id,
                )
            return copied

        copied = self._write(fork_id, None, command)[1]
        self.forget(fork_id)
        return copied

    def forget(self, session_id: str) -> None:
        """Drops what this server holds of a session erased elsewhere (its content
        in memory); the next read folds it from the store, where it is gone."""
        with self._history_locks[hash(session_id) % LOCK_STRIPES]:
            self._forget(session_id)

    def undo_tainted_compactions(self, session_id: str) -> int:
        """Takes back the compactions in force whose summaries an erasure tainted (the
        oldest, and every later one with it), so that compacting again summarises the
        entries left; answers the oldest one's version, 0 when none is tainted."""
        history = self._history(session_id)
        tainted = history.tainted_compactions()
        found = [c.version for c in history.compactions_in_force() if c.version in tainted]
        if not found:
            return 0
        self.undo_compaction(
            session_id,
            found[0],
            reason="its summary was erased with entries it covered; summarising again",
            requested_by="erasure",
        )
        return found[0]

    def history_cached(self, session_id: str) -> bool:
        """Whether this server holds the session's history in memory."""
        return self._histories.get(session_id) is not None

    def forget_erased(self) -> int:
        """Drops this server's copies of the sessions erased (here or by another server)
        since it last looked, read or not; answers how many erasures it found."""
        if self._erasures_seen is None:
            self._erasures_seen = self.store.recorder.max_notification_id() or 0
            return 0
        found = self.store.erasure_notifications(self._erasures_seen, ERASURES_PER_LOOK)
        for position, session_id in found:
            self.forget(session_id)
            self._erasures_seen = position
        return len(found)

    def _forget(self, session_id: str) -> None:
        self._histories.discard(session_id)
        self._renderers.discard(session_id)
        self._read.discard(session_id)

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
        applied_edits_json: str = "",
    ) -> Session.PruneRecorded:
        """Records a prune: the client's decisions, or (``applied_edits_json``) the
        provider's report of the edits it made, cleared here too (domain.context_edits)."""
        edits = parse_applied_edits(applied_edits_json) if applied_edits_json else None
        if edits is not None and decisions:
            raise InvalidRequest(
                "a prune takes either entries or applied_edits_json; the report says which "
                "results the provider cleared"
            )

        def command(session: Session) -> Session.PruneRecorded:
            history = self._history(session_id)
            chosen, why = decisions, reason
            if edits is not None:
                view = history.prompt_view()
                cleared = [
                    entry_id
                    for entry_id, decision in view.pruned.items()
                    if decision.action is PruneAction.HARD_CLEAR
                ]
                chosen = provider_clears(edits, view.log.entries, cleared)
                why = reason or f"anthropic context editing: {edits.description}"
            session.record_prune(
                chosen,
                why,
                history,
                history.prompt_tokens_if_pruned,
                applied_edits_json=applied_edits_json,
            )
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
        stated: tuple[int, int, int] = (0, 0, 0),
    ) -> Session:
        """Records the provider's refusal; the session counts the attempts of its turn and
        learns what the error ``stated`` (window, the prompt's tokens, the answer's room)."""

        def command(session: Session) -> None:
            estimate = None
            if stated[1] and 1 <= view_version <= session.version:
                # The store's estimate of the refused view, against the provider's count.
                estimate = self._history(session_id).prompt_view(view_version).estimated_tokens
            session.report_overflow(
                provider=provider,
                status_code=status_code,
                message=message,
                kind=kind,
                view_version=view_version,
                view_hash=view_hash,
                stated=stated,
                view_estimate=estimate,
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

    def retract_entry(
        self, session_id: str, entry_id: str, reason: str, expected_version: int | None = None
    ) -> tuple[Session, RetractionPlan]:
        """Takes the log's latest entry out of the views; answers the session and what was
        retracted."""

        def command(session: Session) -> RetractionPlan:
            plan = plan_retraction(self._history(session_id), entry_id)
            session.retract_entry(plan, reason)
            return plan

        return self._write(session_id, expected_version, command)

    def clear_session(
        self, session_id: str, reason: str, expected_version: int | None = None
    ) -> tuple[Session, int]:
        """Takes every entry out of the views; answers the session and how many the log
        showed."""

        def command(session: Session) -> int:
            log = self._history(session_id).durable_log()
            shown = len(log.entries) + len(log.pinned)
            session.clear(shown, reason)
            return shown

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
        fork, read_at = self._copied(session_id, version, entry_id, new_session_id, choose)
        return self._save_fork(fork, session_id, read_at)

    def _copied(
        self,
        session_id: str,
        version: int | None,
        entry_id: str,
        new_session_id: str,
        choose: Callable[[SessionSettings], SessionSettings] | None,
    ) -> tuple[Session, int]:
        """The fork, not saved yet, and the parent's version when it was read."""
        history = self._history(session_id)
        if history.erased() is not None:
            raise SessionWasErased(session_id)
        if entry_id:
            position = history.position_of(entry_id)
            if position is None:
                raise EntryNotFound(
                    f"no entry {quoted(entry_id)} in session {quoted(self.ids.client(session_id))}"
                )
            version = history.entry_version(position)
        version = history.resolve_version(version)
        fork_id = new_session_id or self.ids.stream(new_id())
        self.check_new_session_id(fork_id)
        events = self.store.session_events(session_id, upto=version)
        fork = Session.fork(fork_id, events, tenant=self.ids.tenant_and_id(fork_id)[0])
        if choose is not None:
            settings = choose(fork.settings)
            self._check_engine(settings)
            fork.change_settings(
                settings,
                self._context_window(settings),
                max_entry_bytes_limit=self._max_entry_bytes_limit,
            )
        return fork, history.version

    def _save_fork(self, fork: Session, parent_id: str, read_at: int) -> Session:
        """Saves a fork, then follows into it the erasures of its parent stored since
        the parent was read (an erasure racing the fork could not find its link yet):
        of the erasure and the fork, whichever committed second sees the other."""
        self._save(fork)
        later = self.store.session_events(parent_id, after=read_at)
        erasures = [e for e in later if isinstance(e, ERASURES)]
        if not erasures:
            return fork
        parent = self._load(parent_id)
        for erasure in erasures:
            ids = list(erasure.entry_ids) if isinstance(erasure, Session.EntriesErased) else None
            with contextlib.suppress(SessionNotFound):  # forked into another tenant
                self._follow_erasure(
                    fork.id,
                    parent,
                    ids,
                    fork.forked_at_version,
                    erased_by=erasure.erased_by,
                    reason=erasure.reason,
                )
        return self._load(fork.id)

    # -- what imports use ------------------------------------------------------------

    def check_new_session_id(self, session_id: str) -> None:
        try:
            self.store.repository.get(session_id)
        except AggregateNotFoundError:
            return
        raise SessionExists(
            f"a session with id {quoted(self.ids.client(session_id))} already exists"
        )

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
                + ", ".join(repr(self.ids.client(s.id)) for s, _ in built)
            ) from None
        for session, history in built:
            self._written.put(session.id, session)
            with self._history_locks[hash(session.id) % LOCK_STRIPES]:
                self._histories.put(session.id, history)
        for session, _ in built:
            self.saved_versions.saved(session.id, session.version)

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
        self._check_tenant(session_id)
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
        session = self._load(session_id)
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
        self._check_tenant(session_id)
        reading = _ONE_READ.set(None)  # a write inside a read decides on the store's state
        try:
            with self._locked(session_id):
                return self._write_locked(session_id, expected_version, command)
        finally:
            _ONE_READ.reset(reading)

    def _write_locked(
        self,
        session_id: str,
        expected_version: int | None,
        command: Callable[[Session], T],
    ) -> tuple[Session, T]:
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
                return self._attempt(self._load(session_id), expected_version, command)
            except _RaceLost:
                if attempt >= WRITE_ATTEMPTS or time.monotonic() >= give_up_at:
                    raise
            pause = random.uniform(0, min(RETRY_PAUSE_MAX, RETRY_PAUSE * 2**attempt))
            deadline.pause(pause)
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
        self._history(session_id)  # an erasure found by the catch-up drops the renderings
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

    # -- internals ----------------------------------------------------------------

    def _check_engine(self, settings: SessionSettings) -> None:
        """Refuses settings naming an engine or a summariser provider this server lacks."""
        if self.engine_names and settings.engine not in self.engine_names:
            raise InvalidSettings(
                f"engine {quoted(settings.engine)} is not installed on this server; choose one of "
                + ", ".join(sorted(self.engine_names))
            )
        load_providers(self.config.providers_file).check(provider_names(settings.compaction))
        if any(step.is_model for step in summarizer_chain(settings.compaction, settings.model)):
            load_in_background()

    @property
    def _max_entry_bytes_limit(self) -> int:
        # An entry must fit in one request, with room for the request's other fields.
        return (self.config.max_message_mb << 20) - MESSAGE_ENVELOPE_BYTES

    def _context_window(self, settings: SessionSettings) -> tuple[int, str]:
        return resolve_context_window(
            settings, self.config.model_windows, model_metadata.context_window
        )

    def _aggregate(self, session_id: str) -> Session:
        """The session as stored, if the caller may see it."""
        session = self._load(session_id)
        self._tenants.put(session_id, session.tenant)
        if not tenancy.caller().sees(session.tenant):
            raise SessionNotFound(self.ids.client(session_id))
        return session

    def _load(self, session_id: str) -> Session:
        try:
            return self.store.repository.get(session_id)
        except AggregateNotFoundError:
            raise SessionNotFound(self.ids.client(session_id)) from None

    def _check_tenant(self, session_id: str) -> None:
        """Refuses another tenant's session exactly as a missing one: a caller
        learns nothing of the sessions it may not see."""
        caller = tenancy.caller()
        if caller.sees_all_tenants:
            return  # no lookup at all without authentication, nor for an admin
        tenant = self._tenants.get(session_id)
        if tenant is None:
            known = self._written.get(session_id) or self._read.get(session_id)
            tenant = known.tenant if known is not None else self._load(session_id).tenant
            self._tenants.put(session_id, tenant)
        if tenant != caller.tenant:
            raise SessionNotFound(self.ids.client(session_id))

    @contextlib.contextmanager
    def one_read(self, session_id: str, written: int | None = None) -> Iterator[None]:
        """Within it, the reads of the session see it at one moment: the first catches
        this server's copy of the history up with the store, the later ones take the
        copy as it is (with whatever this server writes meanwhile). ``written``: a
        version this call's own append just wrote; a copy that holds it needs no
        catch-up at all, being what a read arriving right after the write would see.
        Writes always catch up: they must not decide on a stale copy."""
        token = _ONE_READ.set(_OneRead(session_id, written))
        try:
            yield
        finally:
            _ONE_READ.reset(token)

    def _fresh_in_this_read(self, session_id: str, history: SessionHistory) -> bool:
        read = _ONE_READ.get()
        if read is None or read.session_id != session_id or read.fresh_at is None:
            return False
        return history.version >= read.fresh_at

    def _caught_up_in_this_read(self, session_id: str, history: SessionHistory) -> None:
        read = _ONE_READ.get()
        if read is not None and read.session_id == session_id:
            read.fresh_at = history.version

    def _history(self, session_id: str) -> SessionHistory:
        """The session's history, caught up with the store."""
        self._check_tenant(session_id)
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
                cached is not None and self._fresh_in_this_read(session_id, history)
            )
            new_events = (
                [] if fresh else self.store.session_events(session_id, after=history.version)
            )
            if any(isinstance(e, ERASURES) for e in new_events):
                # Erasure reaches back into what this history holds: fold the session
                # again from the store, where the content is gone.
                self._forget(session_id)
                history = self._cold_history(session_id)
                if history.loaded_whole is not None:
                    history = history.loaded_whole
                new_events, cached = [], None
            if new_events:
                history.apply(new_events)
            if (new_events or cached is None) and history.version:
                self._histories.put(session_id, history)
            elif history.version == 0:
                raise SessionNotFound(self.ids.client(session_id))
            self._caught_up_in_this_read(session_id, history)
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

        # A session with erasures folds whole: its views list every erasure, and
        # erasures are rare enough not to need the cut's saving.
        erased = session.erased or session.erased_entries
        history = None if erased else load_from_cut(session, fetch)
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
                    f"a session with id {quoted(self.ids.client(session.id))} already exists"
                ) from None
            current = self._load(session.id).version
            raise _RaceLost(pending[0].originator_version - 1, current) from None
        self._written.put(session.id, session)
        self._extend_history(session.id, saved)
        for listener in self.on_saved:
            listener(session, saved)
        self.saved_versions.saved(session.id, session.version)

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


ERASURES = (Session.EntriesErased, Session.SessionErased)


class _RaceLost(VersionConflict):
    """Another writer stored the version this save was for."""


def _fingerprint(drafts: Sequence[Entry]) -> str:
    # Sorted keys: metadata maps arrive in process-dependent order, and a retry
    # from another server, or after a restart, must hash the same.
    canonical = json.dumps([d.to_record() for d in drafts], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()
