"""Why the domain refuses a request. Each message says what to fix.

The classes are grouped by what the caller can do about them; the gRPC layer
maps each group to a status code. Messages quote what the caller sent with
``quoted``, shortened, so a refusal stays small whatever came in.
"""

from __future__ import annotations

import copy
from typing import Self

QUOTE_LIMIT = 80


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as repr() shows it, cut to about ``limit`` characters with its length said."""
    if not isinstance(value, str):
        shown = repr(value)
        return shown if len(shown) <= limit else f"{shown[:limit]}..."
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


class DomainError(Exception):
    """Base of every refusal the domain makes.

    ``reason`` and ``metadata`` travel to the client as a machine-readable
    detail (google.rpc.ErrorInfo), so it can act without parsing the message.
    Every class names its reason (a subclass without one shares its group's):
    clients match on them, so a reason never changes once released.
    """

    reason: str = ""
    metadata: dict[str, str] = {}  # noqa: RUF012  (never mutated; instances set their own)
    # The stream of the session the message names, where it names one by its
    # stream: the aggregate and the projections know no other name, and a
    # tenant's stream is not the id its caller sends (services.app.tenancy).
    stream: str | None = None

    def about(self, stream: str) -> Self:
        """This refusal, marked as naming the session of ``stream`` by its stream."""
        self.stream = stream
        return self

    def naming(self, name: str) -> DomainError:
        """This refusal with its session named ``name`` instead of by its stream."""
        if self.stream is None or name == self.stream:
            return self
        renamed = copy.copy(self)
        renamed.args = (str(self).replace(quoted(self.stream), quoted(name)),)
        renamed.stream = None
        return renamed


class InvalidRequest(DomainError):
    """The request itself is malformed: fix it and send again."""

    reason = "invalid_request"


class InvalidEntry(InvalidRequest):
    reason = "invalid_entry"


class InvalidSettings(InvalidRequest):
    reason = "invalid_settings"


class IdempotencyKeyReused(InvalidRequest):
    """The same key came with a different request."""

    reason = "idempotency_key_reused"

    @classmethod
    def of(
        cls, idempotency_key: str, version: int, first: str = "append", this: str = "append"
    ) -> IdempotencyKeyReused:
        """The refusal of a key first used for the ``first`` ("append" or "compaction")
        at ``version``, sent now with a different ``this``."""
        key = quoted(idempotency_key)
        if first != this:
            # A session's keys name one write each, whatever the call that made it.
            return cls(
                f"idempotency key {key} was used for {_A[first]} (version {version}); "
                f"{_A[this]} needs a key of its own"
            )
        return cls(
            f"idempotency key {key} was used for a different {first} (version {version}); "
            f"use a new key for a new {this}"
        )


_A = {"append": "an append", "compaction": "a compaction"}


class Conflict(DomainError):
    """The request clashes with what the session already holds."""

    reason = "conflict"


class DuplicateEntry(Conflict):
    reason = "duplicate_entry"


class SessionExists(Conflict):
    reason = "session_exists"


class PreconditionFailed(DomainError):
    """The request is well formed but the session's state does not allow it."""

    reason = "precondition_failed"


class UnknownToolCall(PreconditionFailed):
    reason = "unknown_tool_call"


class ToolCallsOpen(PreconditionFailed):
    reason = "tool_calls_open"


class InvalidCutPoint(PreconditionFailed):
    reason = "invalid_cut_point"


class InvalidPrune(PreconditionFailed):
    reason = "invalid_prune"


class NothingToRetract(PreconditionFailed):
    """The log holds no entry a retraction could take back."""

    reason = "nothing_to_retract"


class NotLatestEntry(PreconditionFailed):
    """Only the log's latest entry can be retracted; the caller named another."""

    reason = "not_latest_entry"


class ContextWindowTooSmall(PreconditionFailed):
    """The model's window is below the guard's minimum: switch to a model with a larger one."""

    reason = "CONTEXT_WINDOW_TOO_SMALL"

    def __init__(self, message: str, window_tokens: int, source: str, minimum_tokens: int) -> None:
        super().__init__(message)
        self.metadata = {
            "window_tokens": str(window_tokens),
            "window_source": source,
            "minimum_tokens": str(minimum_tokens),
        }


class CompactionGaveUp(PreconditionFailed):
    """Compaction could not bring the prompt within the window in the attempts allowed."""

    reason = "compaction_failure"

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.metadata = {"attempts": str(attempts)}


class PromptOverBudget(PreconditionFailed):
    """Even after compaction the newest turn alone does not fit the prompt budget."""

    reason = "prompt_over_budget"

    def __init__(self, message: str, estimated_tokens: int, budget_tokens: int) -> None:
        super().__init__(message)
        self.metadata = {
            "estimated_tokens": str(estimated_tokens),
            "budget_tokens": str(budget_tokens),
        }


class TooLargeForWindow(PreconditionFailed):
    """Something the prompt must hold whole (a message, a summary, the system prompt) would
    not fit it even alone: no compaction could ever serve a view holding it."""

    reason = "too_large_for_window"

    def __init__(self, message: str, what: str, tokens: int, budget_tokens: int) -> None:
        super().__init__(message)
        self.metadata = {
            "what": what,
            "tokens": str(tokens),
            "budget_tokens": str(budget_tokens),
        }


class ViewOverMessageLimit(PreconditionFailed):
    """The prompt view takes more than one message may carry, and nothing brought it
    within: the session must change (a compaction), or the limits."""

    reason = "view_over_message_limit"

    def __init__(self, message: str, view_bytes: int, limit_bytes: int) -> None:
        super().__init__(message)
        self.metadata = {"view_bytes": str(view_bytes), "limit_bytes": str(limit_bytes)}


class VersionConflict(DomainError):
    """Optimistic concurrency: the caller saw an older (or newer) version."""

    reason = "version_conflict"

    def __init__(self, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        self.metadata = {"expected_version": str(expected), "current_version": str(actual)}
        super().__init__(
            f"expected version {expected} but the session is at version {actual}; "
            "read the session again and retry"
        )


class CompactionRunningElsewhere(DomainError):
    """A Compact found another server summarising the session (it holds the session's
    claim): nothing was compacted, and no model asked for a second summary of the same
    history. A concurrency conflict, as VersionConflict is: retry shortly, with the
    same idempotency key, which is answered from that compaction if it was this call's."""

    reason = "compaction_running_elsewhere"

    def __init__(self, idempotency_key: str) -> None:
        super().__init__(
            "another server is compacting this session right now; nothing was compacted "
            "here. Retry shortly with the same idempotency_key: once that compaction "
            "lands, a retry is answered from it if it was this call's, else compacts"
        )
        self.metadata = {"idempotency_key": idempotency_key} if idempotency_key else {}


class NotFound(DomainError):
    reason = "not_found"


class SessionNotFound(NotFound):
    reason = "session_not_found"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session with id {quoted(session_id)}")


class EntryNotFound(NotFound):
    reason = "entry_not_found"


class VersionOutOfRange(DomainError):
    reason = "version_out_of_range"


class TooManyStreams(DomainError):
    """The server serves as many followed streams as it is configured for."""

    reason = "too_many_streams"


class DeadlineExceeded(DomainError):
    """The caller's deadline ended before the work was done; the work stopped."""

    reason = "deadline_exceeded"


class CompactionDeadlineExceeded(DeadlineExceeded):
    """The caller's deadline ended while the compaction its view needs was still running."""

    reason = "compaction_deadline_exceeded"


class Unavailable(DomainError):
    """The store cannot serve now (its database is unreachable or busy): retry with backoff."""

    reason = "unavailable"


class DatabaseNeedsOperator(Unavailable):
    """A state of the database no retry on this server ends, only an operator (each
    subclass names its own and what to do); meanwhile another server, whose database
    is not in that state, may serve the call, as it may when this one's is down."""


class StoreNotMigrated(DatabaseNeedsOperator):
    """The database lacks a table, column, function or schema this release uses: the
    store is not migrated to it (or something of it was dropped): `sessionstore
    migrate` fixes it."""

    reason = "store_not_migrated"


class DatabasePermissionDenied(DatabaseNeedsOperator):
    """The database refuses this server something it needs: its role lacks a grant
    (PostgreSQL), or the file may not be written (SQLite)."""

    reason = "database_permission_denied"


class DatabaseCorrupt(DatabaseNeedsOperator):
    """The database's file is damaged (SQLite: not a database, or a malformed page),
    or PostgreSQL reports damaged data or a damaged index: restored from a backup
    (or an index rebuilt), it serves again."""

    reason = "database_corrupt"


class DatabaseLoginRefused(DatabaseNeedsOperator):
    """The database refuses to let this server log in: the role in its database URL
    does not exist or may not log in, or the password is wrong."""

    reason = "database_login_refused"


class DatabaseReadOnly(DatabaseNeedsOperator):
    """The database takes no writes: a PostgreSQL standby, or one whose role or
    database has transactions read-only by default. Reads are served; the server
    must be pointed at the primary for the rest."""

    reason = "database_read_only"
