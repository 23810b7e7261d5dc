"""The chain's ``provider`` step: the plan's covered part compacted by the provider.

The part the plan cuts off (the summary in force first, as the view shows it
unless the request could not carry it so: see ``_sendable``) is rendered in
the provider's own format and sent to it; its compaction item becomes the
compaction's ``provider_item`` (and what it answered before the item,
OpenAI's retained user messages, its ``provider_retained``), recorded like any
provider compaction a client records: that provider's view carries it verbatim
in place of a summary, the others read its summary (Anthropic's) or a note
that it is opaque (OpenAI's), it is listed and undone like any other.
"""

from __future__ import annotations

import json
from dataclasses import replace

from domain.compaction import Compaction, SummarizerAttempt
from domain.content_blocks import provider_item_object
from domain.context.compaction_planner import CompactionPlan
from projections.prompt_formats import PromptRenderer
from projections.session_history import PromptView, RecordedCompaction
from services.adapters.summarizers.provider import ProviderCompaction, ProviderCompactor
from services.engine.base import CompactionRequest


def compact_by_provider(
    compactor: ProviderCompactor, view: PromptView, plan: CompactionPlan, timeout_seconds: float
) -> ProviderCompaction:
    """The provider's compaction of what the plan summarises."""
    entries = list(view.log.entries)
    cut = next(i for i, e in enumerate(entries) if e.id == plan.first_kept_entry_id)
    covered = replace(
        view,
        log=replace(
            view.log,
            entries=entries[:cut],
            entry_versions=list(view.log.entry_versions)[:cut],
            compaction=_sendable(view.log.compaction, compactor.provider_format),
        ),
    )
    # A renderer of its own: the session's keeps each version's whole view.
    rendered = PromptRenderer().render(covered, compactor.provider_format)
    system = json.loads(rendered.system_json) if rendered.system_json else None
    messages, tools = json.loads(rendered.messages_json), json.loads(rendered.tools_json)
    return compactor.compact(messages, system, timeout_seconds, tools)


def _sendable(
    in_force: RecordedCompaction | None, provider_format: str
) -> RecordedCompaction | None:
    """The summary in force as a compaction request may carry it. Anthropic's on-demand
    request takes one compaction block, first and signed (one it issued on demand); a
    client's threshold block is unsigned and follows a turn, which it refuses. That
    block's summary is readable, so it goes as text."""
    if in_force is None or provider_format != "anthropic":
        return in_force
    item = in_force.compaction.provider_item
    if item is None or item.provider != "anthropic" or "signature" in provider_item_object(item):
        return in_force
    readable = in_force.compaction.completed_summary()
    return replace(
        in_force, compaction=replace(in_force.compaction, provider_item=None, summary=readable)
    )


def provider_compaction(
    done: ProviderCompaction,
    plan: CompactionPlan,
    request: CompactionRequest,
    engine: str,
    attempts: tuple[SummarizerAttempt, ...],
) -> Compaction:
    return Compaction(
        summary="",
        provider_item=done.item,
        provider_retained=done.retained,
        first_kept_entry_id=plan.first_kept_entry_id,
        reason=request.trigger,
        summarizer_model=f"provider:{done.model}",
        first_covered_entry_id=plan.summarised.first_id,
        last_covered_entry_id=plan.summarised.last_id,
        entries_covered=plan.summarised.count,
        prompt_hash=done.prompt_hash,
        chunks=1,
        fallback_stage="provider",
        attempt=request.attempt,
        duration_ms=done.duration_ms,
        engine=engine,
        instructions=request.instructions,
        attempts=attempts,
        details={
            name: str(value)
            for name, value in (
                ("provider_input_tokens", done.input_tokens),
                ("provider_output_tokens", done.output_tokens),
            )
            if value is not None
        },
    )
