"""The context report (seed 004's /status, /context list, /context detail, /usage).

How full the window is and what fills it, read off a prompt view and the
session's history. Its parts add up to the view's estimated tokens: system
prompt + summary + pinned system entries + messages (as guarded and pruned).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role, Usage
from domain.context.budget import ContextBudget
from domain.context.calibration import LearnedLimits
from domain.context.pruning_planner import tool_names
from domain.context.window_guard import WindowVerdict
from domain.session import Session
from domain.system_prompt import InjectedFile, Skill, SystemPrompt, Tool, tools_by_schema_size
from projections.session_history import PromptView, RecordedCompaction, SessionHistory

TOP = 10
RECENT_TURNS = 20


@dataclass(frozen=True, slots=True)
class ToolResultSize:
    entry_id: str
    tool_name: str
    chars: int
    shown_chars: int
    tokens: int
    # "", "truncate", "replace", "soft_trim" or "hard_clear".
    action: str


@dataclass(frozen=True, slots=True)
class TurnUsage:
    entry_id: str
    version: int
    usage: Usage
    # The store's estimate of the view the turn answered, when it says which.
    estimated_input_tokens: int


@dataclass(frozen=True)
class ContextReport:
    session_id: str
    version: int
    engine: str
    window: WindowVerdict
    used_tokens: int
    system_prompt_tokens: int
    summary_tokens: int
    pinned_tokens: int
    messages_tokens: int
    last_provider_input_tokens: int
    # What the prompt may hold: the one calibrated figure's budget (domain.context.budget).
    budget: ContextBudget
    system_prompt: SystemPrompt
    top_tools: Sequence[Tool]
    largest_tool_results: Sequence[ToolResultSize]
    latest_compaction: RecordedCompaction | None
    compaction_count: int
    compaction_failures: int
    prune_count: int
    turns: Sequence[TurnUsage]
    total_usage: Usage
    entries: int
    entries_in_prompt: int
    # What the provider taught about the model by this version (the byte limit).
    learned: LearnedLimits = field(default_factory=LearnedLimits)
    # The version at which the client last had the session forget what providers
    # taught (0: never).
    limits_forgotten_version: int = 0

    @property
    def used_percent(self) -> float:
        return (
            100 * self.used_tokens / self.window.window_tokens if self.window.window_tokens else 0
        )

    @property
    def calibration_ratio(self) -> float:
        return self.budget.calibration

    @property
    def calibrated_tokens(self) -> int:
        return self.budget.provider_tokens(self.used_tokens)

    @property
    def files(self) -> Sequence[InjectedFile]:
        return self.system_prompt.files

    @property
    def skills(self) -> Sequence[Skill]:
        return self.system_prompt.skills


def build_context_report(
    view: PromptView, history: SessionHistory, session: Session, window: WindowVerdict
) -> ContextReport:
    """The report of ``view``'s version, which ``session`` must be at: the history may
    have grown since, so every record is read as of that version."""
    log = view.log
    system_tokens = view.system_prompt.tokens.total
    summary_tokens = log.summary_tokens
    pinned_tokens = sum(e.token_count for e in log.pinned)
    messages_tokens = view.estimated_tokens - system_tokens - summary_tokens - pinned_tokens
    turns = _turns(log.entries, history, log.version)
    return ContextReport(
        session_id=log.session_id,
        version=log.version,
        engine=view.settings.engine,
        window=window,
        used_tokens=view.estimated_tokens,
        system_prompt_tokens=system_tokens,
        summary_tokens=summary_tokens,
        pinned_tokens=pinned_tokens,
        messages_tokens=messages_tokens,
        last_provider_input_tokens=next(
            (t.usage.input_tokens for t in reversed(turns) if t.usage.input_tokens), 0
        ),
        budget=view.budget(),
        system_prompt=view.system_prompt,
        top_tools=tools_by_schema_size(view.system_prompt.tools)[:TOP],
        largest_tool_results=_largest_results(view),
        latest_compaction=log.compaction,
        compaction_count=len(history.compactions(log.version)),
        compaction_failures=len(history.failures(log.version)),
        prune_count=history.prune_count(log.version),
        turns=turns,
        total_usage=session.usage,
        entries=session.entry_count,
        entries_in_prompt=len(log.pinned) + len(log.entries),
        learned=view.learned,
        limits_forgotten_version=history.limits_forgotten_version(log.version),
    )


def _largest_results(view: PromptView) -> list[ToolResultSize]:
    names = tool_names(view.log.entries)
    sizes = []
    for entry in view.log.entries:
        if entry.role is not Role.TOOL:
            continue
        chars = sum(len(r.content) for r in entry.tool_results)
        shown = sum(len(view.shown_result(entry.id, r)) for r in entry.tool_results)
        sizes.append(
            ToolResultSize(
                entry.id,
                names.get(entry.id, ""),
                chars,
                shown,
                entry.token_count,
                _action(view, entry),
            )
        )
    sizes.sort(key=lambda s: (-s.chars, s.entry_id))
    return sizes[:TOP]


def _action(view: PromptView, entry: Entry) -> str:
    pruned = view.pruned.get(entry.id)
    if pruned is not None:
        return pruned.action.value
    guarded = view.guarded.get(entry.id)
    return guarded[0].action.value if guarded else ""


def _turns(entries: Sequence[Entry], history: SessionHistory, version: int) -> list[TurnUsage]:
    turns = []
    for entry in entries:
        if entry.role is not Role.ASSISTANT or entry.usage is None:
            continue
        ref = entry.prompt_ref
        estimate = 0
        if ref is not None and 1 <= ref.version <= version:
            estimate = history.prompt_view(ref.version).estimated_tokens
        position = history.position_of(entry.id)
        version = history.entry_version(position) if position is not None else 0
        turns.append(TurnUsage(entry.id, version, entry.usage, estimate))
    return turns[-RECENT_TURNS:]
