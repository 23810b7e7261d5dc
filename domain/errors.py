"""Why the domain refuses a request. Each message says what to fix.

The classes are grouped by what the caller can do about them; the gRPC layer
maps each group to a status code.
"""


class DomainError(Exception):
    """Base of every refusal the domain makes."""


class InvalidRequest(DomainError):
    """The request itself is malformed: fix it and send again."""


class InvalidEntry(InvalidRequest):
    pass


class InvalidSettings(InvalidRequest):
    pass


class IdempotencyKeyReused(InvalidRequest):
    """The same key came with a different request."""


class Conflict(DomainError):
    """The request clashes with what the session already holds."""


class DuplicateEntry(Conflict):
    pass


class SessionExists(Conflict):
    pass


class PreconditionFailed(DomainError):
    """The request is well formed but the session's state does not allow it."""


class UnknownToolCall(PreconditionFailed):
    pass


class ToolCallsOpen(PreconditionFailed):
    pass


class InvalidCutPoint(PreconditionFailed):
    pass


class InvalidPrune(PreconditionFailed):
    pass


class VersionConflict(DomainError):
    """Optimistic concurrency: the caller saw an older (or newer) version."""

    def __init__(self, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"expected version {expected} but the session is at version {actual}; "
            "read the session again and retry"
        )


class NotFound(DomainError):
    pass


class SessionNotFound(NotFound):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session with id {session_id!r}")


class EntryNotFound(NotFound):
    pass


class VersionOutOfRange(DomainError):
    pass
