# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "events" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

__all__ = [
    "EntriesAppended",
    "EntryRetracted",
    "ForgottenLimits",
    "LearnedLimitsForgotten",
    "OverflowReported",
    "PruneRecorded",
    "ReadEventsRequest",
    "SessionCleared",
    "SessionEvent",
    "SessionStarted",
    "SettingsChanged",
    "TokenLesson",
    "ToolCallsAbandoned",
]


@dataclass(slots=True)
class ReadEventsRequest:
    """The ReadEventsRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ReadEventsRequest"
    session_id: str = ""
    #: Events after this version (0: from the start).
    after_version: int = 0
    #: After the stored events, keep the stream open and send new ones as they land.
    follow: bool = False


@dataclass(slots=True)
class SessionStarted:
    """The SessionStarted message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionStarted"
    settings: SessionSettings | None = None
    parent_session_id: str = ""
    forked_at_version: int = 0


@dataclass(slots=True)
class ToolCallsAbandoned:
    """Tool calls closed without an answer; entry holds their synthetic error
    results (metadata "synthetic": "abandoned").
    """

    PROTO: ClassVar[str] = "sessionstore.v1.ToolCallsAbandoned"
    tool_call_ids: list[str] = field(default_factory=list)
    reason: str = ""
    entry: Entry | None = None


@dataclass(slots=True)
class TokenLesson:
    """The provider counted provider_tokens for a prompt the store estimated at
    estimated_tokens; the session's calibration for the model became calibration.
    """

    PROTO: ClassVar[str] = "sessionstore.v1.TokenLesson"
    model: str = ""
    estimated_tokens: int = 0
    provider_tokens: int = 0
    calibration: float = 0.0
    source: str = ""
    #: A usage report: the inferred window (one an overflow error that stated none
    #: taught) that this count of a prompt the provider accepted disproved, lifted
    #: from then on (0: none). A window an error stated is never lifted so.
    lifted_window_tokens: int = 0


@dataclass(slots=True)
class ForgottenLimits:
    """What overflow errors had taught about one model, as it was forgotten."""

    PROTO: ClassVar[str] = "sessionstore.v1.ForgottenLimits"
    model: str = ""
    #: The window in force (0: none), and whether it was inferred (an error that
    #: stated no window) rather than stated.
    window_tokens: int = 0
    window_inferred: bool = False
    #: The answer's room an error said the client asks for (0: none).
    output_tokens: int = 0
    #: The limit in bytes a request refused for its size taught (0: none).
    request_bytes: int = 0
    #: The calibration, which stays (0: never calibrated).
    calibration: float = 0.0


@dataclass(slots=True)
class LearnedLimitsForgotten:
    """The client had the session forget what providers' overflow errors taught
    (UpdateSettingsRequest.forget_learned_limits).
    """

    PROTO: ClassVar[str] = "sessionstore.v1.LearnedLimitsForgotten"
    models: list[ForgottenLimits] = field(default_factory=list)


@dataclass(slots=True)
class EntryRetracted:
    """The log's latest entry taken out of the views; the entry stays in the store."""

    PROTO: ClassVar[str] = "sessionstore.v1.EntryRetracted"
    entry_id: str = ""
    reason: str = ""


@dataclass(slots=True)
class SessionCleared:
    """Every entry taken out of the views; the entries stay in the store."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionCleared"
    entries_cleared: int = 0
    reason: str = ""


@dataclass(slots=True)
class EntriesAppended:
    """The EntriesAppended message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EntriesAppended"
    entries: list[Entry] = field(default_factory=list)
    idempotency_key: str = ""
    guarded: list[GuardDecision] = field(default_factory=list)
    #: What the provider's usage on these entries taught.
    lessons: list[TokenLesson] = field(default_factory=list)


@dataclass(slots=True)
class OverflowReported:
    """The OverflowReported message."""

    PROTO: ClassVar[str] = "sessionstore.v1.OverflowReported"
    provider: str = ""
    status_code: int = 0
    message: str = ""
    #: "context_window_exceeded" (over the window in tokens) or "request_too_large"
    #: (over a limit in bytes, HTTP 413: it teaches no window, but a limit in bytes,
    #: learned_request_bytes).
    kind: str = ""
    view_version: int = 0
    view_hash: str = ""
    #: What the error stated and the store learned: the provider's window and the
    #: answer's room the request asked for (0: not stated). An error that states no
    #: window teaches the refused prompt's size as one (never below the window
    #: guard's hard_min_tokens while the guard is on; none for request_too_large)...
    learned_window_tokens: int = 0
    learned_output_tokens: int = 0
    #: ...and its count of the refused prompt, against the store's estimate.
    lesson: TokenLesson | None = None
    #: A request refused for its bytes: the limit it taught, in the store's measure
    #: (the rendered size of a view: messages, system prompt and tools, in the format
    #: the report asked for). Later views keep their rendered size under 80% of the
    #: smallest such limit (0: not a byte-limit refusal, or none measured). Without
    #: request_bytes_sent it is the refused view's size as the store rendered it; with
    #: it, that size less a quarter of what the request carried beyond it, so views
    #: keep a fifth of the request as sent below the refused view.
    learned_request_bytes: int = 0
    #: The refused request's size as the client sent it (ReportOverflowRequest.
    #: request_bytes; 0: it sent none, and the store measured its own rendering).
    request_bytes_sent: int = 0


@dataclass(slots=True)
class PruneRecorded:
    """The PruneRecorded message."""

    PROTO: ClassVar[str] = "sessionstore.v1.PruneRecorded"
    entries: list[PrunedEntry] = field(default_factory=list)
    reason: str = ""
    #: The provider's report the prune was recorded from (RecordPruneRequest).
    applied_edits_json: str = ""


@dataclass(slots=True)
class SettingsChanged:
    """The SettingsChanged message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SettingsChanged"
    settings: SessionSettings | None = None


@dataclass(slots=True)
class SessionEvent:
    """The SessionEvent message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionEvent"
    session_id: str = ""
    version: int = 0
    timestamp: datetime | None = None
    event: (
        SessionStarted
        | EntriesAppended
        | Compaction
        | PruneRecorded
        | SettingsChanged
        | CompactionFailure
        | OverflowReported
        | SystemPrompt
        | ToolCallsAbandoned
        | CompactionUndone
        | Erasure
        | CompactionRedone
        | EntryRetracted
        | SessionCleared
        | LearnedLimitsForgotten
        | None
    ) = None


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.commands import CompactionRedone, CompactionUndone, PrunedEntry
from sessionstore_client._types.context_management import SystemPrompt
from sessionstore_client._types.entries import Entry
from sessionstore_client._types.erasure import Erasure
from sessionstore_client._types.sessions import SessionSettings
from sessionstore_client._types.views import Compaction, CompactionFailure, GuardDecision
