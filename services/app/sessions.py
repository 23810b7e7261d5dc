"""The session use cases behind one name, for the callers that want them all.

Each role lives in a small object of its own, composed by services.bootstrap:

- ``commands``: one method per use case that changes a session (services.app.commands),
- ``write_path``: load, decide, save, with locks, retries and group commit,
- ``histories``: this server's caught-up copies of histories and renderings,
- ``idempotency``: retried appends recognised by their key,
- ``queries``: what a client reads, now or as of a point,
- ``access``: which sessions a caller may see.

This facade only forwards, so today's callers (the servicer, the context
service, the engines' port, imports and audits) keep one object to ask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain.compaction import Compaction, CompactionFailure
from domain.compaction_events import CompactionRecorded, CompactionRedone, CompactionUndone
from domain.content import Entry
from domain.context.overflow import OverflowReport
from domain.pruning import PruneDecision
from domain.retraction import RetractionPlan
from domain.session import Session, SessionEvent
from domain.session_events import EntriesErased, PruneRecorded, SessionErased
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from projections.rendered_prompt import RenderedPrompt
from projections.session_history import DurableLog, PromptView, SessionHistory
from projections.view_audit import ViewAudit
from services.adapters.event_store import EventStore
from services.app.access import SessionAccess
from services.app.commands.compactions import CompactionCommands
from services.app.commands.entries import EntryCommands
from services.app.commands.erasure import ErasureCommands
from services.app.commands.forks import ForkCommands
from services.app.commands.sessions import SessionCommands
from services.app.history_cache import HistoryCache
from services.app.idempotency import AppendResult, Idempotency
from services.app.queries import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, NOW, AsOf, SessionQueries
from services.app.session_rules import MESSAGE_ENVELOPE_BYTES, SessionRules
from services.app.write_path import WritePath
from services.config import Config
from services.engine.base import CompactionReplayed

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "MESSAGE_ENVELOPE_BYTES",
    "AppendResult",
    "AsOf",
    "SessionService",
]


@dataclass(frozen=True)
class SessionCommandSet:
    """The commands, by area."""

    sessions: SessionCommands
    entries: EntryCommands
    compactions: CompactionCommands
    erasure: ErasureCommands
    forks: ForkCommands


class SessionService:
    def __init__(
        self,
        config: Config,
        store: EventStore,
        *,
        rules: SessionRules,
        access: SessionAccess,
        histories: HistoryCache,
        write_path: WritePath,
        idempotency: Idempotency,
        queries: SessionQueries,
        commands: SessionCommandSet,
    ) -> None:
        self.config = config
        self.store = store
        self.ids = access.ids
        self.rules = rules
        self.access = access
        self.histories = histories
        self.write_path = write_path
        self.idempotency = idempotency
        self.queries = queries
        self.commands = commands
        # What followed event streams wait on (services.app.event_streams).
        self.saved_versions = write_path.saved_versions

    def end_streams(self) -> None:
        """Lets followed event streams finish, as a server shutting down must."""
        self.saved_versions.close()

    def close(self) -> None:
        self.end_streams()
        self.store.close()

    def latest_position(self) -> int:
        """The position of the latest event stored, by any server: what a write that
        saved nothing answers, being at or beyond the write it repeats."""
        return self.store.latest_position()

    # -- commands -------------------------------------------------------------------

    def create_session(
        self, session_id: str, choose: Callable[[SessionSettings], SessionSettings]
    ) -> Session:
        return self.commands.sessions.create_session(session_id, choose).session

    def update_settings(
        self,
        session_id: str,
        change: Callable[[SessionSettings], SessionSettings],
        expected_version: int | None,
        *,
        sets_window: bool = False,
        forget_learned_limits: bool = False,
    ) -> Session:
        return self.commands.sessions.update_settings(
            session_id,
            change,
            expected_version,
            sets_window=sets_window,
            forget_learned_limits=forget_learned_limits,
        ).session

    def set_system_prompt(
        self, session_id: str, prompt: SystemPrompt, expected_version: int | None
    ) -> tuple[Session, SystemPrompt, bool]:
        written = self.commands.sessions.set_system_prompt(session_id, prompt, expected_version)
        stored, changed = written.result
        return written.session, stored, changed

    def append(
        self,
        session_id: str,
        drafts: Sequence[Entry],
        *,
        expected_version: int | None = None,
        idempotency_key: str = "",
    ) -> AppendResult:
        return self.commands.entries.append(
            session_id, drafts, expected_version=expected_version, idempotency_key=idempotency_key
        ).result

    def abandon_tool_calls(
        self,
        session_id: str,
        call_ids: Sequence[str],
        reason: str,
        expected_version: int | None = None,
    ) -> tuple[Session, Entry]:
        written = self.commands.entries.abandon_tool_calls(
            session_id, call_ids, reason, expected_version
        )
        return written.session, written.result

    def retract_entry(
        self, session_id: str, entry_id: str, reason: str, expected_version: int | None = None
    ) -> tuple[Session, RetractionPlan]:
        written = self.commands.entries.retract_entry(
            session_id, entry_id, reason, expected_version
        )
        return written.session, written.result

    def clear_session(
        self, session_id: str, reason: str, expected_version: int | None = None
    ) -> tuple[Session, int]:
        written = self.commands.entries.clear_session(session_id, reason, expected_version)
        return written.session, written.result

    def record_compaction(
        self,
        session_id: str,
        compaction: Compaction,
        expected_version: int | None = None,
        *,
        idempotency_key: str = "",
        fingerprint: str = "",
    ) -> CompactionRecorded:
        """The engine's record (services.engine.base.SessionPort.record_compaction)."""
        written = self.commands.compactions.record_compaction(
            session_id,
            compaction,
            expected_version,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
        )
        if written.position is None:
            # Nothing saved: the key had recorded this request already, a try that
            # landed while this one summarised.
            raise CompactionReplayed(written.result)
        return written.result

    def earlier_compaction(
        self, session: Session, idempotency_key: str, fingerprint: str
    ) -> CompactionRecorded | None:
        """The compaction a Compact with this key recorded, if this one retries it:
        looked up in ``session`` as read, then in the store's key table."""
        return self.idempotency.earlier_compaction(session, idempotency_key, fingerprint)

    def landed_compaction(
        self, session_id: str, idempotency_key: str, fingerprint: str
    ) -> CompactionRecorded | None:
        """The engine's look-up (services.engine.base.SessionPort.landed_compaction)."""
        return self.earlier_compaction(self.aggregate(session_id), idempotency_key, fingerprint)

    def undo_compaction(
        self,
        session_id: str,
        compaction_version: int = 0,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
    ) -> tuple[Session, CompactionUndone]:
        written = self.commands.compactions.undo_compaction(
            session_id, compaction_version, reason, expected_version, requested_by
        )
        return written.session, written.result

    def redo_compaction(
        self,
        session_id: str,
        undo_version: int,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
    ) -> tuple[Session, CompactionRedone]:
        written = self.commands.compactions.redo_compaction(
            session_id, undo_version, reason, expected_version, requested_by
        )
        return written.session, written.result

    def undo_tainted_compactions(self, session_id: str) -> int:
        return self.commands.compactions.undo_tainted_compactions(session_id)

    def record_prune(
        self,
        session_id: str,
        decisions: Sequence[PruneDecision],
        reason: str,
        expected_version: int | None = None,
        applied_edits_json: str = "",
    ) -> PruneRecorded:
        return self.commands.compactions.record_prune(
            session_id, decisions, reason, expected_version, applied_edits_json
        ).result

    def record_compaction_failure(self, session_id: str, failure: CompactionFailure) -> int:
        """Records a compaction that did not happen; answers the version."""
        written = self.commands.compactions.record_compaction_failure(session_id, failure)
        return written.session.version

    def report_overflow(self, session_id: str, report: OverflowReport) -> Session:
        return self.commands.compactions.report_overflow(session_id, report).session

    def erase_entries(
        self, session_id: str, entry_ids: Sequence[str], *, erased_by: str, reason: str
    ) -> tuple[Session, EntriesErased, list[str]]:
        erased = self.commands.erasure.erase_entries(
            session_id, entry_ids, erased_by=erased_by, reason=reason
        )
        return erased.session, erased.event, erased.forks

    def erase_session(
        self, session_id: str, *, erased_by: str, reason: str, expected_version: int | None = None
    ) -> tuple[Session, SessionErased, list[str]]:
        erased = self.commands.erasure.erase_session(
            session_id, erased_by=erased_by, reason=reason, expected_version=expected_version
        )
        return erased.session, erased.event, erased.forks

    def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str = "",
        new_session_id: str = "",
        choose: Callable[[SessionSettings], SessionSettings] | None = None,
        sets_window: bool = False,
    ) -> Session:
        return self.commands.forks.fork_session(
            session_id,
            version=version,
            entry_id=entry_id,
            new_session_id=new_session_id,
            choose=choose,
            sets_window=sets_window,
        ).session

    # -- queries --------------------------------------------------------------------

    def get_session(self, session_id: str) -> Session:
        return self.queries.get_session(session_id)

    def list_sessions(self, page_size: int, after: int) -> tuple[list[Session], int | None]:
        return self.queries.list_sessions(page_size, after)

    def get_sessions(self, session_ids: Sequence[str]) -> list[Session]:
        return self.queries.get_sessions(session_ids)

    def durable_log(self, session_id: str, as_of: AsOf = NOW) -> DurableLog:
        return self.queries.durable_log(session_id, as_of)

    def prompt_view(
        self, session_id: str, as_of: AsOf = NOW, provider_format: str = "openai"
    ) -> tuple[PromptView, RenderedPrompt]:
        return self.queries.prompt_view(session_id, as_of, provider_format)

    def rendered_before(
        self, session_id: str, provider_format: str, version: int, request_hash: str
    ) -> RenderedPrompt | None:
        return self.queries.rendered_before(session_id, provider_format, version, request_hash)

    def render(self, view: PromptView, provider_format: str) -> RenderedPrompt:
        return self.histories.render(view, provider_format)

    def audit_view(self, session_id: str, as_of: AsOf = NOW) -> ViewAudit:
        return self.queries.audit_view(session_id, as_of)

    def entry(self, session_id: str, entry_id: str) -> tuple[Entry, int]:
        return self.queries.entry(session_id, entry_id)

    def events_upto(self, session_id: str, version: int | None) -> list[SessionEvent]:
        return self.queries.events_upto(session_id, version)

    # -- the history cache ----------------------------------------------------------

    def one_read(
        self, session_id: str, written: int | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return self.histories.one_read(session_id, written)

    def history_cached(self, session_id: str) -> bool:
        return self.histories.cached(session_id)

    def forget(self, session_id: str) -> None:
        self.histories.forget(session_id)

    def forget_erased(self) -> int:
        return self.histories.forget_erased()

    def expire_idempotency_keys(self) -> int:
        return self.idempotency.expire()

    # -- what imports use -----------------------------------------------------------

    def check_new_session_id(self, session_id: str) -> None:
        self.access.check_new_session_id(session_id)

    def new_session_settings(
        self, choose: Callable[[SessionSettings], SessionSettings]
    ) -> tuple[SessionSettings, tuple[int, str], int]:
        """The server's defaults changed by ``choose``, the window they resolve to,
        and the largest max_entry_bytes this server takes."""
        settings = self.rules.new_settings(choose)
        return settings, self.rules.context_window(settings), self.rules.max_content_bytes

    def save_new_sessions(self, built: Sequence[tuple[Session, SessionHistory]]) -> int:
        """Saves an import's sessions in one insert; answers the position of the last."""
        return self.write_path.save_new(built)

    # -- what the context engine may use (services.engine.base.SessionPort) ----------

    def history(self, session_id: str) -> SessionHistory:
        return self.histories.history(session_id)

    def aggregate(self, session_id: str) -> Session:
        return self.access.aggregate(session_id)

    def recent(self, session_id: str) -> Session:
        return self.histories.recent(session_id)
