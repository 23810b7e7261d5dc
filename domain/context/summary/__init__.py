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

What the user said outlives every roll: each explicit instruction ("remember",
"always", "never", "不要" ...) word for word, every identifier they named
(ticket ids, hashes, URLs, paths, numbers with units ...) and every error they
reported, in lines that bounding trims last - only when the bound cannot hold
them, oldest first - while what tools printed is trimmed first.

:func:`build_summary_prompt` is the request for a summarising model (system
and user messages asking for the same structure, with the previous summary,
instructions and identifier policy), and :func:`prompt_hash` its fingerprint
for the compaction's receipt. :func:`missing_facts` and
:func:`with_required_facts` check a model's summary for the user's words and
put back what it dropped.

Identifiers are kept exactly under the ``preserve`` policy; ``anonymize``
replaces each that says who or where with a placeholder derived from its hash,
so the same identifier reads the same in every summary.

The modules, by role: :mod:`identifiers` and :mod:`patterns` (what text holds),
:mod:`facts` (what the entries say), :mod:`sections` (the summary written from
them), :mod:`rolling` and :mod:`bounding` (forward, within a size),
:mod:`anonymize`, :mod:`layout` (the text's shape), :mod:`offline`,
:mod:`prompt` and :mod:`required`.
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
from domain.context.summary.required import (
    RequiredFacts,
    missing_facts,
    required_facts,
    with_required_facts,
)

__all__ = [
    "DEFAULT_MAX_CHARS",
    "IDENTIFIER_POLICIES",
    "ITEM_CHARS",
    "RAW_HISTORY",
    "SECTIONS",
    "PromptMessage",
    "RequiredFacts",
    "SummaryPrompt",
    "build_summary_prompt",
    "missing_facts",
    "parse_summary",
    "prompt_hash",
    "required_facts",
    "summarize_offline",
    "with_required_facts",
]
