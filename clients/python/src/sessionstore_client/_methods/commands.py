# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "commands" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import (
    AppendEntriesRequest,
    AppendEntriesResponse,
    Entry,
    ProviderItem,
    PrunedEntry,
    RecordCompactionRequest,
    RecordCompactionResponse,
    RecordPruneRequest,
    RecordPruneResponse,
    UndoCompactionRequest,
    UndoCompactionResponse,
    ViewAfterAppend,
)

__all__ = ["AsyncCommandsMethods", "SyncCommandsMethods"]


class SyncCommandsMethods(SyncCalls):
    """The "commands" RPCs as methods of the synchronous client."""

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
        turn in one round trip. Once the append is written the call succeeds:
        a view that cannot be served comes as view_after_append_error.
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


class AsyncCommandsMethods(AsyncCalls):
    """The "commands" RPCs as methods of the asyncio client."""

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
        turn in one round trip. Once the append is written the call succeeds:
        a view that cannot be served comes as view_after_append_error.
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
