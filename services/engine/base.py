"""The context engine interface (SPEC 6) and what engines are given to work with.

An engine decides how a session's prompt stays inside the window: it sees each
append (``ingest``), is asked for a view that fits (``assemble``), compacts on
request (``compact``) and hears when a turn ends (``after_turn``). It acts only
through the ``SessionPort``, so every decision it takes is an event.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from domain.compaction import Compaction, CompactionFailure, Trigger
from domain.compaction_events import CompactionRecorded
from domain.context.budget import ContextBudget
from domain.context.chain import SummarizerStep
from domain.context.window_guard import WindowVerdict
from domain.errors import DeadlineExceeded, IdempotencyKeyReused, SessionNotFound, Unavailable
from domain.pruning import PruneDecision
from domain.session import Session
from domain.session_events import PruneRecorded
from projections.session_history import PromptView, SessionHistory
from services.adapters.summarizers.base import Summarizer
from services.adapters.summarizers.provider import ProviderCompactor
from services.engine.runner import CompactionRunner

# Refusals that end the request, not one step of a compaction: the database cannot
# serve now, the caller's deadline passed, the session is gone. No other summariser,
# and no hard drop, would fare better: a compaction lets them through as they are.
# A Compact's key taken by another request ends it too.
REQUEST_ENDING = (Unavailable, DeadlineExceeded, SessionNotFound, IdempotencyKeyReused)


@dataclass(frozen=True, slots=True)
class EngineInfo:
    name: str
    # Whether the engine compacts by itself (threshold and overflow) rather
    # than leaving it to the client's RecordCompaction.
    owns_compaction: bool
    description: str


@dataclass(frozen=True, slots=True)
class EngineAction:
    """Something the engine did for a request, recorded at ``version``."""

    kind: str
    detail: str
    version: int = 0


@dataclass(frozen=True, slots=True)
class Assembly:
    """A prompt view within the budget, and what it took to get it."""

    view: PromptView
    verdict: WindowVerdict
    budget: ContextBudget
    actions: Sequence[EngineAction] = ()


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    trigger: str
    instructions: str = ""
    # Compact even when under the threshold.
    force: bool = False
    dry_run: bool = False
    attempt: int = 0
    # The prompt must fit this many of the provider's tokens afterwards (None: the
    # session's budget).
    budget_tokens: int | None = None
    # An overflow whose error stated no figures: first trim the largest tool results.
    truncate_first: bool = False
    # A Compact call's key and request fingerprint, recorded with its compaction, so
    # that a retry answers it (services.app.compact_retries).
    idempotency_key: str = ""
    fingerprint: str = ""


@dataclass(frozen=True)
class CompactionOutcome:
    """What a compaction did: recorded, planned only (dry run), or declined with a reason."""

    compacted: bool
    reason: str
    # The plan as a dict (CompactionPlan.to_dict, or the hard drop's statistics).
    plan: dict[str, object] = field(default_factory=dict)
    recorded: CompactionRecorded | None = None
    failure: CompactionFailure | None = None
    # Recorded instead of a compaction: an overflow's first step truncates tool results.
    pruned: PruneRecorded | None = None
    # A retry of a Compact, answered from the compaction its key recorded.
    replayed: bool = False
    # Nothing done here: another server is summarising the session (SummaryClaims).
    elsewhere: bool = False

    def action(self, kind: str = "compacted") -> EngineAction:
        """What this outcome did, as reported with a prompt view."""
        if self.elsewhere:
            return EngineAction("compaction_running", self.reason)
        if self.recorded is not None:
            compaction = self.recorded.compaction
            detail = (
                f"{compaction.reason}: {compaction.entries_covered} entries summarised "
                f"({compaction.fallback_stage}), {compaction.tokens_before:,} -> "
                f"{compaction.tokens_after:,} tokens"
            )
            return EngineAction(kind, detail, self.recorded.originator_version)
        if self.pruned is not None:
            return EngineAction("truncated", self.reason, self.pruned.originator_version)
        if self.failure is not None:
            return EngineAction("compaction_failed", self.failure.reason)
        return EngineAction("not_compacted", self.reason)


class CompactionReplayed(Exception):
    """Recording found the Compact's key had already recorded this request's compaction:
    a try of the same call landed first, while this one summarised (on another
    server, where no claim kept them apart: one lost with its connection). Nothing
    was recorded now; the call answers ``recorded``, the first try's, as a retry's
    answer. Raised through the engine, which has no more to do, to the caller that
    sent the key."""

    def __init__(self, recorded: CompactionRecorded) -> None:
        super().__init__(
            f"the compaction of this idempotency key landed at version "
            f"{recorded.originator_version}"
        )
        self.recorded = recorded


class SessionPort(Protocol):
    """What an engine may read and record: the session service, seen from the engine."""

    def history(self, session_id: str) -> SessionHistory: ...

    def aggregate(self, session_id: str) -> Session: ...

    def recent(self, session_id: str) -> Session: ...

    def record_compaction(
        self,
        session_id: str,
        compaction: Compaction,
        *,
        idempotency_key: str = "",
        fingerprint: str = "",
    ) -> CompactionRecorded:
        """Records it; with a key that already recorded this request, raises
        CompactionReplayed with that compaction (nothing is recorded twice)."""
        ...

    def landed_compaction(
        self, session_id: str, idempotency_key: str, fingerprint: str
    ) -> CompactionRecorded | None:
        """The compaction a Compact with this key recorded, in the session as stored now
        (None: none yet); refused when the key recorded another request."""
        ...

    def record_compaction_failure(self, session_id: str, failure: CompactionFailure) -> int: ...

    def record_prune(
        self, session_id: str, decisions: Sequence[PruneDecision], reason: str
    ) -> PruneRecorded: ...


class SummaryClaims(Protocol):
    """Which server summarises a session now, of the servers that share its store: a
    server refused the claim leaves the summary to the one holding it, instead of
    paying a model for a second summary of the same history."""

    def hold(self, session_id: str) -> AbstractContextManager[bool]:
        """Holds the session's claim for the block when no other server does (True);
        False, holding nothing, while another holds it."""
        ...


# Builds the summariser one step of a compaction's chain names (model, provider, window),
# or the provider's own compaction for a ``provider`` step.
SummarizerFactory = Callable[[SummarizerStep], Summarizer | ProviderCompactor]


class ContextEngine(Protocol):
    info: EngineInfo

    def ingest(self, session: Session) -> None:
        """After a change is saved: ``session`` is the aggregate as saved."""

    def assemble(
        self, session_id: str, token_budget: int | None, deadline: float | None
    ) -> Assembly:
        """The current prompt view within ``token_budget`` (None: the session's own budget),
        or within the session's budget if that is smaller. ``deadline`` is on the
        time.monotonic() clock."""

    def compact(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        """Compacts now (or plans, with dry_run)."""

    def after_turn(self, session: Session) -> None:
        """After an append that ends a turn: an assistant entry with no tool call open."""


@dataclass(frozen=True)
class EngineContext:
    """What an engine factory is given; third-party engines get the same."""

    port: SessionPort
    summarizers: SummarizerFactory
    runner: CompactionRunner
    # Taken by a compaction before it asks a model, whoever asked for it.
    claims: SummaryClaims


EngineFactory = Callable[[EngineContext], ContextEngine]


class CompactsInTheBackground(ABC):
    """What the built-in engines share: a save that crosses the session's threshold
    starts a compaction at once, in the background and one at a time per session,
    so the next prompt view usually finds it done; the end of a turn asks nothing
    more. An engine says how it compacts in ``_start``."""

    info: EngineInfo

    def __init__(self, context: EngineContext) -> None:
        self.port = context.port
        self.runner = context.runner

    def ingest(self, session: Session) -> None:
        if session.crossed_threshold():
            self._start(session.id, CompactionRequest(Trigger.THRESHOLD))

    def after_turn(self, session: Session) -> None:  # noqa: B027  # deliberately nothing
        """Nothing more at the end of a turn: the threshold was checked at ingest."""

    @abstractmethod
    def _start(
        self, session_id: str, request: CompactionRequest, *, join: bool = True
    ) -> Future[CompactionOutcome]:
        """Starts a compaction of the session (single-flight), or joins the one running."""
