"""What a session's aggregate holds, and what it answers without a read.

The state is small and does not grow with the session (version, settings,
counters, the last entry, open tool calls, the cuts in force and where the
system entries are, at most 64 of each, a bounded window of idempotency keys),
so appending entry 100,000 costs what appending entry 10 does, and snapshots
stay tiny. The events fold into it (domain.session_events,
domain.compaction_events); the commands that record them build on it
(domain.session and its command modules).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from eventsourcing.domain import BaseAggregate

from domain.content import Usage
from domain.context.budget import ContextBudget, context_budget
from domain.context.calibration import LearnedLimits, Lesson
from domain.erasure import SessionWasErased
from domain.errors import TooLargeForWindow
from domain.settings import SessionSettings
from domain.streams import DEFAULT_TENANT

# An event class, as a command answers the event it recorded.
E = TypeVar("E")

MAX_SYSTEM_ENTRIES_KEPT = 64
# The models whose lessons a session keeps (a session rarely changes model).
MAX_MODELS_LEARNED = 8
# Retries come seconds after the first try; remembering the last few hundred
# keys answers them without letting the aggregate grow.
IDEMPOTENCY_WINDOW = 256


class SessionState(BaseAggregate[str]):
    """The aggregate's state and its queries; ``Session`` adds the commands.

    No attribute of the class is annotated at run time: the library makes an
    aggregate class with annotations a dataclass, and then each subclass too,
    whose generated ``__init__`` would replace this one.
    """

    if TYPE_CHECKING:
        limits: Sequence[Sequence[Any]]
        cuts: Sequence[Sequence[int]]
        system_entries: Sequence[Sequence[int]] | None
        erasure: tuple[str, str, int] | None

    # State added after the first release: snapshots taken before it read
    # back with these class-level defaults.
    retracted_entries = 0
    compaction_failures = 0
    overflow_attempts = 0
    # What the provider taught, per model (see domain.context.calibration): each
    # [model, *LearnedLimits.to_list()], oldest first, at most MAX_MODELS_LEARNED.
    limits = ()
    # Tokens of the prompt view's messages (the system prompt aside), kept exact
    # as events land (guard decisions, prunes, compactions and undos say what they
    # leave), so deciding whether to compact needs no read.
    prompt_tokens = 0
    system_prompt_tokens = 0
    system_prompt_fingerprint = ""
    parent_session_id = ""
    forked_at_version = 0
    # Where a cold read of the prompt view starts. ``cuts`` holds the compactions
    # in force, oldest first, each (version, first kept position, version that
    # appended the first kept entry, settings version and system prompt version
    # in force then); the last MAX_CUTS_KEPT only. ``system_entries`` holds
    # (position, version) of the system entries every cut keeps, or None past
    # MAX_SYSTEM_ENTRIES_KEPT (a cold read then folds the whole session).
    cuts = ()
    settings_version = 1
    system_prompt_version = 0
    system_entries = ()
    undo_count = 0
    tenant = DEFAULT_TENANT  # for snapshots taken before sessions had tenants
    erased = False
    # (erased by, reason, version) of the erasure of the whole session.
    erasure = None
    erased_entries = 0
    # The summary in force was erased with entries it covered (see EntriesErased).
    summary_tainted = False

    def __init__(
        self,
        settings: SessionSettings,
        context_window_tokens: int,
        context_window_source: str,
        parent_session_id: str = "",
        forked_at_version: int = 0,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        # Called with the Started event's fields. Every attribute here is
        # bounded in size whatever the length of the session.
        self.parent_session_id = parent_session_id
        self.tenant = tenant
        self.forked_at_version = forked_at_version
        self.settings = settings
        self.context_window_tokens = context_window_tokens
        self.context_window_source = context_window_source
        self.entry_count = 0
        self.total_tokens = 0
        self.usage = Usage()
        self.last_entry_id: str | None = None
        # Tool call id -> position of the entry that made the call.
        self.open_tool_calls: dict[str, int] = {}
        self.compaction_count = 0
        self.first_kept_position = 0
        self.entries_since_compaction = 0
        # Idempotency key -> [request fingerprint, version], oldest first: of appends and
        # of Compact calls (the name is older than the latter).
        self.recent_appends: dict[str, list[Any]] = {}

    def note_system_entry(self, position: int, version: int) -> None:
        if self.system_entries is None:
            return
        if len(self.system_entries) >= MAX_SYSTEM_ENTRIES_KEPT:
            self.system_entries = None
        else:
            self.system_entries = (*self.system_entries, (position, version))

    @property
    def cold_start(self) -> tuple[int, int, int, tuple[int, ...]] | None:
        """Where a cold read may start: (compaction version, first kept position,
        first kept version, versions of the earlier events it needs), or None when
        it must fold the whole session."""
        if not self.cuts or self.system_entries is None:
            return None
        version, position, first_kept_version, settings_v, prompt_v = self.cuts[-1]
        if first_kept_version <= 1:
            return None
        earlier = {settings_v, prompt_v, *(v for p, v in self.system_entries if p < position)}
        needed = tuple(sorted(v for v in earlier if 0 < v < first_kept_version))
        return version, position, first_kept_version, needed

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        # Commands run on a copy, so a failed save leaves no trace. Everything
        # but the two small dicts and the pending list is immutable, so this is
        # much cheaper than a generic deep copy.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.open_tool_calls = dict(self.open_tool_calls)
        clone.recent_appends = dict(self.recent_appends)
        clone._pending_events = list(self._pending_events)
        return clone

    def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None:
        # Every command ends here: a session erased whole refuses them all.
        if self.erased:
            raise SessionWasErased(self.id)
        super().trigger_event(event_class, **kwargs)

    def _record(self, event_class: type[E], **kwargs: Any) -> E:
        """Triggers the event and answers it: a command answers what it decided."""
        self.trigger_event(event_class, **kwargs)
        return cast(E, self._pending_events[-1])

    @property
    def estimated_prompt_tokens(self) -> int:
        return self.system_prompt_tokens + self.prompt_tokens

    @property
    def calibrated_prompt_tokens(self) -> int:
        return self.budget().provider_tokens(self.estimated_prompt_tokens)

    # -- what the provider taught ------------------------------------------------

    def learned_for(self, model: str) -> LearnedLimits:
        stored = next((row for row in self.limits if row[0] == model), None)
        return LearnedLimits.from_list(list(stored[1:])) if stored else LearnedLimits()

    def learn(self, model: str, limits: LearnedLimits) -> None:
        kept = [row for row in self.limits if row[0] != model][-(MAX_MODELS_LEARNED - 1) :]
        self.limits = (*kept, (model, *limits.to_list()))

    def learn_from(self, lesson: Lesson, *, accepted: bool = False) -> None:
        """What the lesson's model's limits are after it."""
        self.learn(lesson.model, self.learned_for(lesson.model).after(lesson, accepted=accepted))

    def remember_key(self, key: str, fingerprint: str, version: int) -> None:
        """Keeps a keyed write's key among the session's recent ones (a bounded window)."""
        if key:
            keys = self.recent_appends
            keys[key] = [fingerprint, version]
            while len(keys) > IDEMPOTENCY_WINDOW:
                del keys[next(iter(keys))]

    @property
    def learned(self) -> LearnedLimits:
        """What the provider taught about the session's model."""
        return self.learned_for(self.settings.model)

    @property
    def calibration(self) -> float:
        """Provider tokens per estimated token for the session's model (1.0 untaught)."""
        return self.learned.calibration or 1.0

    @property
    def window_tokens(self) -> int:
        """The window in force: the resolved one, or the provider's when it said less."""
        return self.learned.window(self.context_window_tokens)

    @property
    def window_source(self) -> str:
        """Where the window in force came from: the resolved window's source, or
        "learned" when a provider's overflow error taught a smaller one."""
        learned = self.window_tokens != self.context_window_tokens
        return "learned" if learned else self.context_window_source

    def budget(self, asked_tokens: int | None = None) -> ContextBudget:
        """What the prompt may hold now (see domain.context.budget)."""
        return self._budget_under(self.settings, self.context_window_tokens, asked_tokens)

    def _budget_under(
        self,
        settings: SessionSettings,
        window_tokens: int,
        asked_tokens: int | None = None,
        *,
        learned: LearnedLimits | None = None,
    ) -> ContextBudget:
        """The budget under ``settings`` and the window resolved for them, with what the
        provider taught about their model (``learned``, when a change would alter it)."""
        if learned is None:
            learned = self.learned_for(settings.model)
        return context_budget(
            learned.window(window_tokens),
            settings.compaction,
            calibration=learned.calibration or 1.0,
            learned_reserve_tokens=learned.output_tokens,
            asked_tokens=asked_tokens,
        )

    def crossed_threshold(self) -> bool:
        """Whether automatic compaction should start: the calibrated estimate is over
        the threshold (which the reserve caps)."""
        return self.settings.compaction.mode == "auto" and self.budget().over_threshold(
            self.estimated_prompt_tokens
        )

    def check_fits(
        self,
        what: str,
        kind: str,
        tokens: int,
        remedy: str,
        *,
        beside: int | None = None,
        budget: ContextBudget | None = None,
        settings: SessionSettings | None = None,
    ) -> None:
        """Refuses ``tokens`` of something the prompt must hold whole, were it over the
        budget beside the system prompt (``beside``, ``budget`` and ``settings``: what it
        would be beside and under, by default the session's). Only sessions whose engine
        keeps the prompt within the window (compaction ``auto``) promise a view that
        fits; the others are served as they are."""
        budget = budget or self.budget()
        if (settings or self.settings).compaction.mode != "auto":
            return  # the client keeps the prompt within its window; views are served as is
        system = self.system_prompt_tokens if beside is None else beside
        if system + tokens <= budget.budget_estimate:
            return
        besides = f", and the system prompt takes {system:,}" if system else ""
        raise TooLargeForWindow(
            f"{what} needs ~{budget.provider_tokens(tokens):,} tokens of the prompt, but the "
            f"prompt holds at most {budget.describe()}{besides}; no compaction could ever fit "
            f"it: {remedy}",
            kind,
            budget.provider_tokens(tokens),
            budget.budget_tokens,
        )
