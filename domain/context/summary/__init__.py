"""Compaction summaries: an offline summariser, and the prompt for a model that writes one.

SPEC 3.3 (seed 002's structured summary, seed 000's ``identifierPolicy``): a
compaction replaces old entries with a summary in sections - Goal,
Constraints, Progress, Key Decisions, Next Steps, Critical Context - plus a
guide to where the raw history is. The entries stay in the store, so the guide
names their id range and says that ``GetEntry`` reads any of them whole.

:func:`summarize_offline` writes that summary with no model and no network:
from the user's requests, the tool calls made and how they ended, the files,
identifiers and error messages seen. It is what the store falls back on when no
summarising model is configured or reachable, and a floor for what a model's
summary should contain. It rolls forward: given the previous summary it keeps
what still matters and adds the new entries, within a size bound, so a summary
never grows without limit across compactions.

:func:`build_summary_prompt` is the request for a summarising model (system
and user messages asking for the same structure, with the previous summary,
instructions and identifier policy), and :func:`prompt_hash` its fingerprint
for the compaction's receipt.

Identifiers (paths, function names, ids, error messages) are kept exactly
under the ``preserve`` policy; ``anonymize`` replaces each with a placeholder
derived from its hash, so the same identifier reads the same in every summary.
"""

from domain.context.summary.layout import (
    DEFAULT_MAX_CHARS,
    IDENTIFIER_POLICIES,
    ITEM_CHARS,
    RAW_HISTORY,
    SECTIONS,
    parse_summary,
)
from domain.context.summary.offline import summarize_offline
from domain.context.summary.prompt import (
    PromptMessage,
    SummaryPrompt,
    build_summary_prompt,
    prompt_hash,
)

__all__ = [
    "DEFAULT_MAX_CHARS",
    "IDENTIFIER_POLICIES",
    "ITEM_CHARS",
    "RAW_HISTORY",
    "SECTIONS",
    "PromptMessage",
    "SummaryPrompt",
    "build_summary_prompt",
    "parse_summary",
    "prompt_hash",
    "summarize_offline",
]
