"""The context engine's policies: pure decisions about what a prompt may hold.

Each module is one layer of SPEC sections 3-6, with no I/O: the window guard
(3.1), the tool result guard (3.2), the compaction planner and summaries (3.3)
and the pruning planner (3.4). They take entries and numbers and return values
that the store can record as events and re-apply, so every view is reproducible.
"""

from domain.context.compaction_planner import (
    Chunk,
    Chunking,
    CompactionNeed,
    CompactionPlan,
    CompactionRefused,
    CutChoice,
    EntryRange,
    HardDropPlan,
    OversizedEntry,
    choose_cut,
    chunk_for_summary,
    plan_compaction,
    plan_hard_drop,
    should_compact,
)
from domain.context.pruning_planner import (
    PrunePlan,
    ToolFilter,
    plan_cache_ttl_prune,
    plan_recent_n_prune,
)
from domain.context.summary import (
    PromptMessage,
    SummaryPrompt,
    build_summary_prompt,
    prompt_hash,
    summarize_offline,
)
from domain.context.tool_result_guard import (
    GuardAction,
    ToolResultDecision,
    decide_tool_result,
    guard_entry,
)
from domain.context.window import DEFAULT_CONTEXT_WINDOW, resolve_context_window
from domain.context.window_guard import WindowLevel, WindowVerdict, check_context_window

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "Chunk",
    "Chunking",
    "CompactionNeed",
    "CompactionPlan",
    "CompactionRefused",
    "CutChoice",
    "EntryRange",
    "GuardAction",
    "HardDropPlan",
    "OversizedEntry",
    "PromptMessage",
    "PrunePlan",
    "SummaryPrompt",
    "ToolFilter",
    "ToolResultDecision",
    "WindowLevel",
    "WindowVerdict",
    "build_summary_prompt",
    "check_context_window",
    "choose_cut",
    "chunk_for_summary",
    "decide_tool_result",
    "guard_entry",
    "plan_cache_ttl_prune",
    "plan_compaction",
    "plan_hard_drop",
    "plan_recent_n_prune",
    "prompt_hash",
    "resolve_context_window",
    "should_compact",
    "summarize_offline",
]
