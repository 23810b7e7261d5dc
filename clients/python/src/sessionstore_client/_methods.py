# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""One method per RPC, for the synchronous client and for the asyncio one.

Each takes the request's fields as arguments and answers the response as the
dataclass of sessionstore_client.types. The transport (deadline, retries,
errors) is the client's: see sessionstore_client.client and .aio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sessionstore_client.types import (
    AbandonToolCallsRequest,
    AbandonToolCallsResponse,
    AppendEntriesRequest,
    AppendEntriesResponse,
    AuditViewRequest,
    ClearSessionRequest,
    ClearSessionResponse,
    CompactRequest,
    CompactResponse,
    ContextReport,
    CreateSessionRequest,
    DurableLog,
    Entry,
    EraseEntriesRequest,
    EraseResponse,
    EraseSessionRequest,
    ExportSessionChunk,
    ExportSessionRequest,
    ForkSessionRequest,
    GetCompactionRequest,
    GetCompactionResponse,
    GetContextReportRequest,
    GetEntryRequest,
    GetPromptViewRequest,
    GetReadModelStatusRequest,
    GetSessionRequest,
    GetViewRequest,
    ListCompactionsRequest,
    ListCompactionsResponse,
    ListPrunesRequest,
    ListPrunesResponse,
    ListSessionsRequest,
    ListSessionsResponse,
    PromptFormat,
    PromptView,
    ProviderItem,
    PruneAction,
    PrunedEntry,
    ReadEventsRequest,
    ReadModelStatus,
    RecallRequest,
    RecallResponse,
    RecordCompactionRequest,
    RecordCompactionResponse,
    RecordPruneRequest,
    RecordPruneResponse,
    ReportOverflowRequest,
    RetractEntryRequest,
    RetractEntryResponse,
    Session,
    SessionEvent,
    SessionSettings,
    SetSystemPromptRequest,
    SetSystemPromptResponse,
    SystemPrompt,
    UndoCompactionRequest,
    UndoCompactionResponse,
    UpdateSettingsRequest,
    ViewAfterAppend,
    ViewAudit,
)

_R = TypeVar("_R")


class SyncMethods:
    """The RPCs as methods of the synchronous client."""

    def _unary(self, method: str, request: Any, response: type[_R], timeout: float | None) -> _R:
        raise NotImplementedError

    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> Iterator[_R]:
        raise NotImplementedError

    def create_session(
        self,
        session_id: str = "",
        *,
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Starts a new session. ALREADY_EXISTS if the given id is taken."""
        return self._unary(
            "CreateSession",
            CreateSessionRequest(session_id=session_id, settings=settings),
            Session,
            timeout,
        )

    def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        """The session's current settings, version and running totals."""
        return self._unary("GetSession", GetSessionRequest(session_id=session_id), Session, timeout)

    def list_sessions(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        labels: Mapping[str, str] | None = None,
        model: str = "",
        title_contains: str = "",
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        min_position: int = 0,
        order_by: str = "",
        timeout: float | None = None,
    ) -> ListSessionsResponse:
        """Sessions in creation order, a page at a time."""
        return self._unary(
            "ListSessions",
            ListSessionsRequest(
                page_size=page_size,
                page_token=page_token,
                labels=dict(labels or ()),
                model=model,
                title_contains=title_contains,
                updated_after=updated_after,
                updated_before=updated_before,
                min_position=min_position,
                order_by=order_by,
            ),
            ListSessionsResponse,
            timeout,
        )

    def update_settings(
        self,
        session_id: str,
        *,
        settings: SessionSettings | None = None,
        expected_version: int | None = None,
        remove_labels: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Changes some settings; fields left unset keep their value."""
        return self._unary(
            "UpdateSettings",
            UpdateSettingsRequest(
                session_id=session_id,
                settings=settings,
                expected_version=expected_version,
                remove_labels=list(remove_labels or ()),
            ),
            Session,
            timeout,
        )

    def append_entries(
        self,
        session_id: str,
        *,
        entries: Sequence[Entry] | None = None,
        expected_version: int | None = None,
        idempotency_key: str = "",
        view_after_append: ViewAfterAppend | None = None,
        timeout: float | None = None,
    ) -> AppendEntriesResponse:
        """Appends one turn (one or more entries) as a single event.
        ABORTED when expected_version is set and is not the current version.
        A retry with the same idempotency_key returns the first result.
        With view_after_append, the answer also carries the prompt view right
        after the append (what GetPromptView answers, held view included): a
        turn in one round trip.
        """
        return self._unary(
            "AppendEntries",
            AppendEntriesRequest(
                session_id=session_id,
                entries=list(entries or ()),
                expected_version=expected_version,
                idempotency_key=idempotency_key,
                view_after_append=view_after_append,
            ),
            AppendEntriesResponse,
            timeout,
        )

    def record_compaction(
        self,
        session_id: str,
        *,
        summary: str = "",
        first_kept_entry_id: str = "",
        tokens_before: int = 0,
        tokens_after: int = 0,
        reason: str = "",
        summarizer_model: str = "",
        details: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        provider_item: ProviderItem | None = None,
        provider_retained: Sequence[ProviderItem] | None = None,
        timeout: float | None = None,
    ) -> RecordCompactionResponse:
        """Records a compaction: a summary that replaces the entries before
        first_kept_entry_id in the durable log. The entries stay in the store.
        """
        return self._unary(
            "RecordCompaction",
            RecordCompactionRequest(
                session_id=session_id,
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                reason=reason,
                summarizer_model=summarizer_model,
                details=dict(details or ()),
                expected_version=expected_version,
                provider_item=provider_item,
                provider_retained=list(provider_retained or ()),
            ),
            RecordCompactionResponse,
            timeout,
        )

    def record_prune(
        self,
        session_id: str,
        *,
        entries: Sequence[PrunedEntry] | None = None,
        reason: str = "",
        expected_version: int | None = None,
        applied_edits_json: str = "",
        timeout: float | None = None,
    ) -> RecordPruneResponse:
        """Records a prune: tool results trimmed or cleared in the prompt view only."""
        return self._unary(
            "RecordPrune",
            RecordPruneRequest(
                session_id=session_id,
                entries=list(entries or ()),
                reason=reason,
                expected_version=expected_version,
                applied_edits_json=applied_edits_json,
            ),
            RecordPruneResponse,
            timeout,
        )

    def undo_compaction(
        self,
        session_id: str,
        *,
        compaction_version: int = 0,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
        undo_version: int = 0,
        timeout: float | None = None,
    ) -> UndoCompactionResponse:
        """Takes back a compaction in force (the latest unless compaction_version is
        set): the entries it covered are in the durable log again and the cut is
        where it was before it (later compactions go with it). Recorded as an
        event of its own; views before it still show the compacted log. Compacting
        again re-applies a cut. FAILED_PRECONDITION when no such compaction is in
        force.
        With undo_version, takes back that undo instead: the compactions it took
        back are in force again exactly as recorded (same summaries, same cut),
        answered in `redone`. Undos and redos chain, newest first; undoing the
        compaction again takes a redo back. FAILED_PRECONDITION when the
        compactions in force changed since that undo, or it was already taken back.
        """
        return self._unary(
            "UndoCompaction",
            UndoCompactionRequest(
                session_id=session_id,
                compaction_version=compaction_version,
                reason=reason,
                expected_version=expected_version,
                requested_by=requested_by,
                undo_version=undo_version,
            ),
            UndoCompactionResponse,
            timeout,
        )

    def get_durable_log(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> DurableLog:
        """The durable log: latest compaction summary, then the kept entries. Large
        logs come in pages (GetViewRequest.page_size, page_token).
        """
        return self._unary(
            "GetDurableLog",
            GetViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            DurableLog,
            timeout,
        )

    def get_prompt_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        format: PromptFormat = PromptFormat.UNSPECIFIED,
        token_budget: int | None = None,
        held_version: int | None = None,
        held_hash: str = "",
        timeout: float | None = None,
    ) -> PromptView:
        """The prompt view: the durable log with prunes applied, rendered for a provider."""
        return self._unary(
            "GetPromptView",
            GetPromptViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                format=format,
                token_budget=token_budget,
                held_version=held_version,
                held_hash=held_hash,
            ),
            PromptView,
            timeout,
        )

    def get_entry(
        self, session_id: str, *, entry_id: str = "", timeout: float | None = None
    ) -> Entry:
        """One entry's full, unpruned content, whether or not it was compacted away."""
        return self._unary(
            "GetEntry", GetEntryRequest(session_id=session_id, entry_id=entry_id), Entry, timeout
        )

    def read_events(
        self,
        session_id: str,
        *,
        after_version: int = 0,
        follow: bool = False,
        timeout: float | None = None,
    ) -> Iterator[SessionEvent]:
        """The session's events from a version on; with follow, keeps streaming new ones."""
        return self._server_stream(
            "ReadEvents",
            ReadEventsRequest(session_id=session_id, after_version=after_version, follow=follow),
            SessionEvent,
            timeout,
        )

    def set_system_prompt(
        self,
        session_id: str,
        *,
        system_prompt: SystemPrompt | None = None,
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> SetSystemPromptResponse:
        """Stores the client's system prompt (text, injected files, skills, tools);
        every prompt view from then on leads with it. The same prompt again
        records nothing.
        """
        return self._unary(
            "SetSystemPrompt",
            SetSystemPromptRequest(
                session_id=session_id,
                system_prompt=system_prompt,
                expected_version=expected_version,
            ),
            SetSystemPromptResponse,
            timeout,
        )

    def compact(
        self,
        session_id: str,
        *,
        instructions: str = "",
        force: bool = False,
        dry_run: bool = False,
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> CompactResponse:
        """Compacts now: the store chooses the cut and writes the summary. With
        dry_run, answers the plan and writes nothing.
        """
        return self._unary(
            "Compact",
            CompactRequest(
                session_id=session_id,
                instructions=instructions,
                force=force,
                dry_run=dry_run,
                expected_version=expected_version,
            ),
            CompactResponse,
            timeout,
        )

    def report_overflow(
        self,
        session_id: str,
        *,
        error_text: str = "",
        status_code: int = 0,
        provider: str = "",
        view_version: int = 0,
        view_hash: str = "",
        format: PromptFormat = PromptFormat.UNSPECIFIED,
        timeout: float | None = None,
    ) -> PromptView:
        """The provider refused a prompt view as too long: the store truncates
        oversized tool results, then compacts, and answers the new view.
        INVALID_ARGUMENT when the error is not an overflow; FAILED_PRECONDITION
        (reason compaction_failure) after max_attempts reports in one turn.
        """
        return self._unary(
            "ReportOverflow",
            ReportOverflowRequest(
                session_id=session_id,
                error_text=error_text,
                status_code=status_code,
                provider=provider,
                view_version=view_version,
                view_hash=view_hash,
                format=format,
            ),
            PromptView,
            timeout,
        )

    def get_context_report(self, session_id: str, *, timeout: float | None = None) -> ContextReport:
        """How full the window is and what fills it: the numbers add up to the
        prompt view's estimated_tokens.
        """
        return self._unary(
            "GetContextReport",
            GetContextReportRequest(session_id=session_id),
            ContextReport,
            timeout,
        )

    def abandon_tool_calls(
        self,
        session_id: str,
        *,
        tool_call_ids: Sequence[str] | None = None,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> AbandonToolCallsResponse:
        """Closes open tool calls that will never be answered (all open ones when
        tool_call_ids is empty) with a synthetic error result each, so appends
        may go on. FAILED_PRECONDITION when a named call is not open.
        """
        return self._unary(
            "AbandonToolCalls",
            AbandonToolCallsRequest(
                session_id=session_id,
                tool_call_ids=list(tool_call_ids or ()),
                reason=reason,
                expected_version=expected_version,
            ),
            AbandonToolCallsResponse,
            timeout,
        )

    def retract_entry(
        self,
        session_id: str,
        *,
        entry_id: str = "",
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> RetractEntryResponse:
        """Takes the log's latest entry out of the views (a runtime's undo of its last
        item, e.g. the Agents SDK's pop_item). Recorded as an event: the entry stays
        in the store, for audit and replay. Its tool calls close with it; the calls
        its results answered are open again. entry_id, when set, must be that
        entry. FAILED_PRECONDITION when the log holds no entry.
        """
        return self._unary(
            "RetractEntry",
            RetractEntryRequest(
                session_id=session_id,
                entry_id=entry_id,
                reason=reason,
                expected_version=expected_version,
            ),
            RetractEntryResponse,
            timeout,
        )

    def clear_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> ClearSessionResponse:
        """Takes every entry, and the summary in force, out of the views: the log
        starts empty (a runtime's clear_session). Recorded as an event: the entries
        stay in the store, for audit and replay. The system prompt stays.
        """
        return self._unary(
            "ClearSession",
            ClearSessionRequest(
                session_id=session_id, reason=reason, expected_version=expected_version
            ),
            ClearSessionResponse,
            timeout,
        )

    def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str | None = None,
        new_session_id: str = "",
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """A new session whose history is the parent's up to a version (or up to the
        entry entry_id): the same entries, ids, times, compactions and prunes, so
        its views equal the parent's there. The parent is not touched.
        """
        return self._unary(
            "ForkSession",
            ForkSessionRequest(
                session_id=session_id,
                version=version,
                entry_id=entry_id,
                new_session_id=new_session_id,
                settings=settings,
            ),
            Session,
            timeout,
        )

    def export_session(
        self, session_id: str, *, version: int = 0, timeout: float | None = None
    ) -> Iterator[ExportSessionChunk]:
        """The session as a pi session file (JSONL, version 3), in chunks."""
        return self._server_stream(
            "ExportSession",
            ExportSessionRequest(session_id=session_id, version=version),
            ExportSessionChunk,
            timeout,
        )

    def list_compactions(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        trigger: str = "",
        model: str = "",
        outcome: str = "",
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListCompactionsResponse:
        """Audit, from the SQL read models: compactions (done and failed) of a
        session or across sessions, filtered and paged.
        """
        return self._unary(
            "ListCompactions",
            ListCompactionsRequest(
                session_id=session_id,
                since=since,
                until=until,
                trigger=trigger,
                model=model,
                outcome=outcome,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListCompactionsResponse,
            timeout,
        )

    def get_compaction(
        self,
        session_id: str,
        *,
        version: int = 0,
        min_position: int = 0,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> GetCompactionResponse:
        """One compaction's receipt, its summary and the entries it replaced."""
        return self._unary(
            "GetCompaction",
            GetCompactionRequest(
                session_id=session_id,
                version=version,
                min_position=min_position,
                page_size=page_size,
                page_token=page_token,
            ),
            GetCompactionResponse,
            timeout,
        )

    def list_prunes(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        action: PruneAction = PruneAction.UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListPrunesResponse:
        """Prune decisions, one per pruned entry, filtered and paged."""
        return self._unary(
            "ListPrunes",
            ListPrunesRequest(
                session_id=session_id,
                since=since,
                until=until,
                action=action,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListPrunesResponse,
            timeout,
        )

    def audit_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> ViewAudit:
        """The raw history against the views at a version: every entry shown,
        summarised, pinned, pruned or guarded (and why); and, for assistant turns
        that carry the prompt_ref of the view they answered, whether replaying
        that view reproduces its hash. Large audits come in pages
        (AuditViewRequest.page_size, page_token).
        """
        return self._unary(
            "AuditView",
            AuditViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            ViewAudit,
            timeout,
        )

    def erase_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases the whole session's content (crypto-shredding: its keys are deleted),
        keeping the fact, who and when; it takes no more writes.
        """
        return self._unary(
            "EraseSession",
            EraseSessionRequest(session_id=session_id, reason=reason, erased_by=erased_by),
            EraseResponse,
            timeout,
        )

    def erase_entries(
        self,
        session_id: str,
        *,
        entry_ids: Sequence[str] | None = None,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases entries' content, and the summaries of compactions that covered them
        (tainted until Compact regenerates them).
        """
        return self._unary(
            "EraseEntries",
            EraseEntriesRequest(
                session_id=session_id,
                entry_ids=list(entry_ids or ()),
                reason=reason,
                erased_by=erased_by,
            ),
            EraseResponse,
            timeout,
        )

    def get_read_model_status(self, timeout: float | None = None) -> ReadModelStatus:
        """The read models' health in detail (admin): each model's position and lag
        behind the store, whether this server's projection of it is failing now
        and why, and the events it quarantined (could not apply, and went on past).
        """
        return self._unary(
            "GetReadModelStatus", GetReadModelStatusRequest(), ReadModelStatus, timeout
        )

    def recall(
        self,
        session_id: str,
        *,
        query: str = "",
        limit: int = 0,
        tenant_wide: bool = False,
        labels: Mapping[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_position: int = 0,
        timeout: float | None = None,
    ) -> RecallResponse:
        """Long-term memory: searches a session's whole raw history (what compaction
        hid from the prompt included), or every session of the caller's tenant,
        by full text, and by meaning when memory.embedding_model is set. Each hit
        names its entry, the version that appended it and the compaction that hid it.
        """
        return self._unary(
            "Recall",
            RecallRequest(
                session_id=session_id,
                query=query,
                limit=limit,
                tenant_wide=tenant_wide,
                labels=dict(labels or ()),
                since=since,
                until=until,
                min_position=min_position,
            ),
            RecallResponse,
            timeout,
        )


class AsyncMethods:
    """The RPCs as methods of the asyncio client."""

    async def _unary(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> _R:
        raise NotImplementedError

    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> AsyncIterator[_R]:
        raise NotImplementedError

    async def create_session(
        self,
        session_id: str = "",
        *,
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Starts a new session. ALREADY_EXISTS if the given id is taken."""
        return await self._unary(
            "CreateSession",
            CreateSessionRequest(session_id=session_id, settings=settings),
            Session,
            timeout,
        )

    async def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        """The session's current settings, version and running totals."""
        return await self._unary(
            "GetSession", GetSessionRequest(session_id=session_id), Session, timeout
        )

    async def list_sessions(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        labels: Mapping[str, str] | None = None,
        model: str = "",
        title_contains: str = "",
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        min_position: int = 0,
        order_by: str = "",
        timeout: float | None = None,
    ) -> ListSessionsResponse:
        """Sessions in creation order, a page at a time."""
        return await self._unary(
            "ListSessions",
            ListSessionsRequest(
                page_size=page_size,
                page_token=page_token,
                labels=dict(labels or ()),
                model=model,
                title_contains=title_contains,
                updated_after=updated_after,
                updated_before=updated_before,
                min_position=min_position,
                order_by=order_by,
            ),
            ListSessionsResponse,
            timeout,
        )

    async def update_settings(
        self,
        session_id: str,
        *,
        settings: SessionSettings | None = None,
        expected_version: int | None = None,
        remove_labels: Sequence[str] | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Changes some settings; fields left unset keep their value."""
        return await self._unary(
            "UpdateSettings",
            UpdateSettingsRequest(
                session_id=session_id,
                settings=settings,
                expected_version=expected_version,
                remove_labels=list(remove_labels or ()),
            ),
            Session,
            timeout,
        )

    async def append_entries(
        self,
        session_id: str,
        *,
        entries: Sequence[Entry] | None = None,
        expected_version: int | None = None,
        idempotency_key: str = "",
        view_after_append: ViewAfterAppend | None = None,
        timeout: float | None = None,
    ) -> AppendEntriesResponse:
        """Appends one turn (one or more entries) as a single event.
        ABORTED when expected_version is set and is not the current version.
        A retry with the same idempotency_key returns the first result.
        With view_after_append, the answer also carries the prompt view right
        after the append (what GetPromptView answers, held view included): a
        turn in one round trip.
        """
        return await self._unary(
            "AppendEntries",
            AppendEntriesRequest(
                session_id=session_id,
                entries=list(entries or ()),
                expected_version=expected_version,
                idempotency_key=idempotency_key,
                view_after_append=view_after_append,
            ),
            AppendEntriesResponse,
            timeout,
        )

    async def record_compaction(
        self,
        session_id: str,
        *,
        summary: str = "",
        first_kept_entry_id: str = "",
        tokens_before: int = 0,
        tokens_after: int = 0,
        reason: str = "",
        summarizer_model: str = "",
        details: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        provider_item: ProviderItem | None = None,
        provider_retained: Sequence[ProviderItem] | None = None,
        timeout: float | None = None,
    ) -> RecordCompactionResponse:
        """Records a compaction: a summary that replaces the entries before
        first_kept_entry_id in the durable log. The entries stay in the store.
        """
        return await self._unary(
            "RecordCompaction",
            RecordCompactionRequest(
                session_id=session_id,
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                reason=reason,
                summarizer_model=summarizer_model,
                details=dict(details or ()),
                expected_version=expected_version,
                provider_item=provider_item,
                provider_retained=list(provider_retained or ()),
            ),
            RecordCompactionResponse,
            timeout,
        )

    async def record_prune(
        self,
        session_id: str,
        *,
        entries: Sequence[PrunedEntry] | None = None,
        reason: str = "",
        expected_version: int | None = None,
        applied_edits_json: str = "",
        timeout: float | None = None,
    ) -> RecordPruneResponse:
        """Records a prune: tool results trimmed or cleared in the prompt view only."""
        return await self._unary(
            "RecordPrune",
            RecordPruneRequest(
                session_id=session_id,
                entries=list(entries or ()),
                reason=reason,
                expected_version=expected_version,
                applied_edits_json=applied_edits_json,
            ),
            RecordPruneResponse,
            timeout,
        )

    async def undo_compaction(
        self,
        session_id: str,
        *,
        compaction_version: int = 0,
        reason: str = "",
        expected_version: int | None = None,
        requested_by: str = "",
        undo_version: int = 0,
        timeout: float | None = None,
    ) -> UndoCompactionResponse:
        """Takes back a compaction in force (the latest unless compaction_version is
        set): the entries it covered are in the durable log again and the cut is
        where it was before it (later compactions go with it). Recorded as an
        event of its own; views before it still show the compacted log. Compacting
        again re-applies a cut. FAILED_PRECONDITION when no such compaction is in
        force.
        With undo_version, takes back that undo instead: the compactions it took
        back are in force again exactly as recorded (same summaries, same cut),
        answered in `redone`. Undos and redos chain, newest first; undoing the
        compaction again takes a redo back. FAILED_PRECONDITION when the
        compactions in force changed since that undo, or it was already taken back.
        """
        return await self._unary(
            "UndoCompaction",
            UndoCompactionRequest(
                session_id=session_id,
                compaction_version=compaction_version,
                reason=reason,
                expected_version=expected_version,
                requested_by=requested_by,
                undo_version=undo_version,
            ),
            UndoCompactionResponse,
            timeout,
        )

    async def get_durable_log(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> DurableLog:
        """The durable log: latest compaction summary, then the kept entries. Large
        logs come in pages (GetViewRequest.page_size, page_token).
        """
        return await self._unary(
            "GetDurableLog",
            GetViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            DurableLog,
            timeout,
        )

    async def get_prompt_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        format: PromptFormat = PromptFormat.UNSPECIFIED,
        token_budget: int | None = None,
        held_version: int | None = None,
        held_hash: str = "",
        timeout: float | None = None,
    ) -> PromptView:
        """The prompt view: the durable log with prunes applied, rendered for a provider."""
        return await self._unary(
            "GetPromptView",
            GetPromptViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                format=format,
                token_budget=token_budget,
                held_version=held_version,
                held_hash=held_hash,
            ),
            PromptView,
            timeout,
        )

    async def get_entry(
        self, session_id: str, *, entry_id: str = "", timeout: float | None = None
    ) -> Entry:
        """One entry's full, unpruned content, whether or not it was compacted away."""
        return await self._unary(
            "GetEntry", GetEntryRequest(session_id=session_id, entry_id=entry_id), Entry, timeout
        )

    def read_events(
        self,
        session_id: str,
        *,
        after_version: int = 0,
        follow: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[SessionEvent]:
        """The session's events from a version on; with follow, keeps streaming new ones."""
        return self._server_stream(
            "ReadEvents",
            ReadEventsRequest(session_id=session_id, after_version=after_version, follow=follow),
            SessionEvent,
            timeout,
        )

    async def set_system_prompt(
        self,
        session_id: str,
        *,
        system_prompt: SystemPrompt | None = None,
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> SetSystemPromptResponse:
        """Stores the client's system prompt (text, injected files, skills, tools);
        every prompt view from then on leads with it. The same prompt again
        records nothing.
        """
        return await self._unary(
            "SetSystemPrompt",
            SetSystemPromptRequest(
                session_id=session_id,
                system_prompt=system_prompt,
                expected_version=expected_version,
            ),
            SetSystemPromptResponse,
            timeout,
        )

    async def compact(
        self,
        session_id: str,
        *,
        instructions: str = "",
        force: bool = False,
        dry_run: bool = False,
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> CompactResponse:
        """Compacts now: the store chooses the cut and writes the summary. With
        dry_run, answers the plan and writes nothing.
        """
        return await self._unary(
            "Compact",
            CompactRequest(
                session_id=session_id,
                instructions=instructions,
                force=force,
                dry_run=dry_run,
                expected_version=expected_version,
            ),
            CompactResponse,
            timeout,
        )

    async def report_overflow(
        self,
        session_id: str,
        *,
        error_text: str = "",
        status_code: int = 0,
        provider: str = "",
        view_version: int = 0,
        view_hash: str = "",
        format: PromptFormat = PromptFormat.UNSPECIFIED,
        timeout: float | None = None,
    ) -> PromptView:
        """The provider refused a prompt view as too long: the store truncates
        oversized tool results, then compacts, and answers the new view.
        INVALID_ARGUMENT when the error is not an overflow; FAILED_PRECONDITION
        (reason compaction_failure) after max_attempts reports in one turn.
        """
        return await self._unary(
            "ReportOverflow",
            ReportOverflowRequest(
                session_id=session_id,
                error_text=error_text,
                status_code=status_code,
                provider=provider,
                view_version=view_version,
                view_hash=view_hash,
                format=format,
            ),
            PromptView,
            timeout,
        )

    async def get_context_report(
        self, session_id: str, *, timeout: float | None = None
    ) -> ContextReport:
        """How full the window is and what fills it: the numbers add up to the
        prompt view's estimated_tokens.
        """
        return await self._unary(
            "GetContextReport",
            GetContextReportRequest(session_id=session_id),
            ContextReport,
            timeout,
        )

    async def abandon_tool_calls(
        self,
        session_id: str,
        *,
        tool_call_ids: Sequence[str] | None = None,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> AbandonToolCallsResponse:
        """Closes open tool calls that will never be answered (all open ones when
        tool_call_ids is empty) with a synthetic error result each, so appends
        may go on. FAILED_PRECONDITION when a named call is not open.
        """
        return await self._unary(
            "AbandonToolCalls",
            AbandonToolCallsRequest(
                session_id=session_id,
                tool_call_ids=list(tool_call_ids or ()),
                reason=reason,
                expected_version=expected_version,
            ),
            AbandonToolCallsResponse,
            timeout,
        )

    async def retract_entry(
        self,
        session_id: str,
        *,
        entry_id: str = "",
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> RetractEntryResponse:
        """Takes the log's latest entry out of the views (a runtime's undo of its last
        item, e.g. the Agents SDK's pop_item). Recorded as an event: the entry stays
        in the store, for audit and replay. Its tool calls close with it; the calls
        its results answered are open again. entry_id, when set, must be that
        entry. FAILED_PRECONDITION when the log holds no entry.
        """
        return await self._unary(
            "RetractEntry",
            RetractEntryRequest(
                session_id=session_id,
                entry_id=entry_id,
                reason=reason,
                expected_version=expected_version,
            ),
            RetractEntryResponse,
            timeout,
        )

    async def clear_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> ClearSessionResponse:
        """Takes every entry, and the summary in force, out of the views: the log
        starts empty (a runtime's clear_session). Recorded as an event: the entries
        stay in the store, for audit and replay. The system prompt stays.
        """
        return await self._unary(
            "ClearSession",
            ClearSessionRequest(
                session_id=session_id, reason=reason, expected_version=expected_version
            ),
            ClearSessionResponse,
            timeout,
        )

    async def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str | None = None,
        new_session_id: str = "",
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """A new session whose history is the parent's up to a version (or up to the
        entry entry_id): the same entries, ids, times, compactions and prunes, so
        its views equal the parent's there. The parent is not touched.
        """
        return await self._unary(
            "ForkSession",
            ForkSessionRequest(
                session_id=session_id,
                version=version,
                entry_id=entry_id,
                new_session_id=new_session_id,
                settings=settings,
            ),
            Session,
            timeout,
        )

    def export_session(
        self, session_id: str, *, version: int = 0, timeout: float | None = None
    ) -> AsyncIterator[ExportSessionChunk]:
        """The session as a pi session file (JSONL, version 3), in chunks."""
        return self._server_stream(
            "ExportSession",
            ExportSessionRequest(session_id=session_id, version=version),
            ExportSessionChunk,
            timeout,
        )

    async def list_compactions(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        trigger: str = "",
        model: str = "",
        outcome: str = "",
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListCompactionsResponse:
        """Audit, from the SQL read models: compactions (done and failed) of a
        session or across sessions, filtered and paged.
        """
        return await self._unary(
            "ListCompactions",
            ListCompactionsRequest(
                session_id=session_id,
                since=since,
                until=until,
                trigger=trigger,
                model=model,
                outcome=outcome,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListCompactionsResponse,
            timeout,
        )

    async def get_compaction(
        self,
        session_id: str,
        *,
        version: int = 0,
        min_position: int = 0,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> GetCompactionResponse:
        """One compaction's receipt, its summary and the entries it replaced."""
        return await self._unary(
            "GetCompaction",
            GetCompactionRequest(
                session_id=session_id,
                version=version,
                min_position=min_position,
                page_size=page_size,
                page_token=page_token,
            ),
            GetCompactionResponse,
            timeout,
        )

    async def list_prunes(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        action: PruneAction = PruneAction.UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListPrunesResponse:
        """Prune decisions, one per pruned entry, filtered and paged."""
        return await self._unary(
            "ListPrunes",
            ListPrunesRequest(
                session_id=session_id,
                since=since,
                until=until,
                action=action,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListPrunesResponse,
            timeout,
        )

    async def audit_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> ViewAudit:
        """The raw history against the views at a version: every entry shown,
        summarised, pinned, pruned or guarded (and why); and, for assistant turns
        that carry the prompt_ref of the view they answered, whether replaying
        that view reproduces its hash. Large audits come in pages
        (AuditViewRequest.page_size, page_token).
        """
        return await self._unary(
            "AuditView",
            AuditViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            ViewAudit,
            timeout,
        )

    async def erase_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases the whole session's content (crypto-shredding: its keys are deleted),
        keeping the fact, who and when; it takes no more writes.
        """
        return await self._unary(
            "EraseSession",
            EraseSessionRequest(session_id=session_id, reason=reason, erased_by=erased_by),
            EraseResponse,
            timeout,
        )

    async def erase_entries(
        self,
        session_id: str,
        *,
        entry_ids: Sequence[str] | None = None,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases entries' content, and the summaries of compactions that covered them
        (tainted until Compact regenerates them).
        """
        return await self._unary(
            "EraseEntries",
            EraseEntriesRequest(
                session_id=session_id,
                entry_ids=list(entry_ids or ()),
                reason=reason,
                erased_by=erased_by,
            ),
            EraseResponse,
            timeout,
        )

    async def get_read_model_status(self, timeout: float | None = None) -> ReadModelStatus:
        """The read models' health in detail (admin): each model's position and lag
        behind the store, whether this server's projection of it is failing now
        and why, and the events it quarantined (could not apply, and went on past).
        """
        return await self._unary(
            "GetReadModelStatus", GetReadModelStatusRequest(), ReadModelStatus, timeout
        )

    async def recall(
        self,
        session_id: str,
        *,
        query: str = "",
        limit: int = 0,
        tenant_wide: bool = False,
        labels: Mapping[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_position: int = 0,
        timeout: float | None = None,
    ) -> RecallResponse:
        """Long-term memory: searches a session's whole raw history (what compaction
        hid from the prompt included), or every session of the caller's tenant,
        by full text, and by meaning when memory.embedding_model is set. Each hit
        names its entry, the version that appended it and the compaction that hid it.
        """
        return await self._unary(
            "Recall",
            RecallRequest(
                session_id=session_id,
                query=query,
                limit=limit,
                tenant_wide=tenant_wide,
                labels=dict(labels or ()),
                since=since,
                until=until,
                min_position=min_position,
            ),
            RecallResponse,
            timeout,
        )
