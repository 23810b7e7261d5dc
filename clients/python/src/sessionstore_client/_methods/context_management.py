# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "context management" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import (
    CompactRequest,
    CompactResponse,
    ContextReport,
    GetContextReportRequest,
    PromptFormat,
    PromptView,
    ReportOverflowRequest,
    SetSystemPromptRequest,
    SetSystemPromptResponse,
    SystemPrompt,
)

__all__ = ["AsyncContextManagementMethods", "SyncContextManagementMethods"]


class SyncContextManagementMethods(SyncCalls):
    """The "context management" RPCs as methods of the synchronous client."""

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
        idempotency_key: str = "",
        timeout: float | None = None,
    ) -> CompactResponse:
        """Compacts now: the store chooses the cut and writes the summary. With
        dry_run, answers the plan and writes nothing.
        A retry with the same idempotency_key answers the compaction the first
        recorded (replayed) and compacts nothing; one that arrives while the first
        still runs waits for it. ABORTED (reason compaction_running_elsewhere),
        asking no model, while another server summarises the session: retry
        shortly with the same idempotency_key.
        """
        return self._unary(
            "Compact",
            CompactRequest(
                session_id=session_id,
                instructions=instructions,
                force=force,
                dry_run=dry_run,
                expected_version=expected_version,
                idempotency_key=idempotency_key,
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
        request_bytes: int = 0,
        timeout: float | None = None,
    ) -> PromptView:
        """The provider refused a prompt view as too long (in tokens, or in bytes:
        HTTP 413): the store truncates oversized tool results, then compacts, and
        answers the new view.
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
                request_bytes=request_bytes,
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


class AsyncContextManagementMethods(AsyncCalls):
    """The "context management" RPCs as methods of the asyncio client."""

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
        idempotency_key: str = "",
        timeout: float | None = None,
    ) -> CompactResponse:
        """Compacts now: the store chooses the cut and writes the summary. With
        dry_run, answers the plan and writes nothing.
        A retry with the same idempotency_key answers the compaction the first
        recorded (replayed) and compacts nothing; one that arrives while the first
        still runs waits for it. ABORTED (reason compaction_running_elsewhere),
        asking no model, while another server summarises the session: retry
        shortly with the same idempotency_key.
        """
        return await self._unary(
            "Compact",
            CompactRequest(
                session_id=session_id,
                instructions=instructions,
                force=force,
                dry_run=dry_run,
                expected_version=expected_version,
                idempotency_key=idempotency_key,
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
        request_bytes: int = 0,
        timeout: float | None = None,
    ) -> PromptView:
        """The provider refused a prompt view as too long (in tokens, or in bytes:
        HTTP 413): the store truncates oversized tool results, then compacts, and
        answers the new view.
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
                request_bytes=request_bytes,
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
