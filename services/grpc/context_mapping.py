"""Translation of the context-management messages: system prompt, guard, served views,
compaction outcomes and the context report."""

from __future__ import annotations

from typing import Any

from projections.context_report import ContextReport
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.view_fits import ServedView
from services.engine.base import CompactionOutcome
from services.grpc.mapping import (
    compaction_to_pb,
    file_status_to_pb,
    format_to_pb,
    guard_decision_to_pb,
    prune_decision_to_pb,
    recorded_compaction_to_pb,
    system_prompt_tokens_to_pb,
    usage_to_pb,
    window_verdict_to_pb,
)

# -- served views, compactions, reports ---------------------------------------------


def served_view_to_pb(served: ServedView) -> pb.PromptView:
    view, rendered = served.view, served.rendered
    return pb.PromptView(
        session_id=view.log.session_id,
        version=view.log.version,
        format=format_to_pb(rendered.provider_format),
        messages_json=(
            rendered.messages_json
            if served.appended_messages_json is None
            else served.appended_messages_json
        ),
        appended=served.appended_messages_json is not None,
        base_version=served.base_version,
        system_json=rendered.system_json,
        estimated_tokens=served.budget.provider_tokens(rendered.estimated_tokens),
        uncalibrated_tokens=rendered.estimated_tokens,
        calibration=served.budget.calibration,
        context_window_tokens=view.window_tokens,
        pruned=[prune_decision_to_pb(d) for d in view.pruned.values()],
        tools_json=rendered.tools_json,
        request_hash=rendered.request_hash,
        guard=window_verdict_to_pb(served.verdict),
        guarded=[guard_decision_to_pb(d) for ds in view.guarded.values() for d in ds],
        actions=[
            pb.EngineAction(kind=a.kind, detail=a.detail, version=a.version) for a in served.actions
        ],
        engine=served.engine,
        budget_tokens=served.budget.budget_tokens,
        threshold_tokens=served.budget.threshold_tokens,
        reserve_tokens=served.budget.reserve_tokens,
        omitted=[
            pb.OmittedBlock(
                entry_id=o.entry_id,
                block_index=o.block_index,
                kind=o.kind,
                provider=o.provider,
                type=o.type,
                reason=o.reason,
            )
            for o in rendered.omitted
        ],
        repairs=[
            pb.ViewRepair(
                kind=r.kind,
                entry_id=r.entry_id,
                tool_call_id=r.tool_call_id,
                view_tool_call_id=r.view_tool_call_id,
                detail=r.detail,
            )
            for r in rendered.repairs
        ],
    )


def compaction_outcome_to_pb(outcome: CompactionOutcome) -> pb.CompactResponse:
    response = pb.CompactResponse(
        compacted=outcome.compacted, reason=outcome.reason, replayed=outcome.replayed
    )
    if outcome.plan:
        response.plan.CopyFrom(_plan_to_pb(outcome.plan))
    if outcome.recorded is not None:
        recorded = outcome.recorded
        response.compaction.CopyFrom(
            compaction_to_pb(
                recorded.compaction,
                recorded.originator_version,
                recorded.timestamp,
                recorded.idempotency_key,
            )
        )
        response.version = recorded.originator_version
    return response


def _plan_to_pb(plan: dict[str, Any]) -> pb.CompactionPlan:
    """A compaction plan (CompactionPlan.to_dict) or a hard drop's statistics."""
    summarised = plan.get("summarised") or {}
    return pb.CompactionPlan(
        first_kept_entry_id=plan.get("first_kept_entry_id") or plan.get("firstKeptEntryId") or "",
        first_covered_entry_id=summarised.get("first_id", ""),
        last_covered_entry_id=summarised.get("last_id", ""),
        entries_covered=summarised.get("count", plan.get("droppedMessages", 0)),
        chunks=[
            pb.PlanChunk(entry_ids=c["entry_ids"], tokens=c["tokens"])
            for c in plan.get("chunks", [])
        ],
        tokens_before=plan.get("tokens_before", 0),
        estimated_tokens_after=plan.get("estimated_tokens_after", plan.get("keptTokens", 0)),
        oversized_entry_ids=[o["entry_id"] for o in plan.get("oversized", [])],
        pinned_entry_ids=plan.get("pinned_entry_ids", []),
        summarizer_model=plan.get("summarizer_model", ""),
        summarizer_window_tokens=plan.get("summariser_window_tokens", 0),
        reason=plan.get("reason", ""),
    )


def context_report_to_pb(report: ContextReport) -> pb.ContextReport:
    message = pb.ContextReport(
        session_id=report.session_id,
        version=report.version,
        engine=report.engine,
        window=window_verdict_to_pb(report.window),
        used_tokens=report.used_tokens,
        used_percent=report.used_percent,
        system_prompt_tokens=report.system_prompt_tokens,
        summary_tokens=report.summary_tokens,
        pinned_tokens=report.pinned_tokens,
        messages_tokens=report.messages_tokens,
        calibrated_tokens=report.calibrated_tokens,
        calibration_ratio=report.calibration_ratio,
        last_provider_input_tokens=report.last_provider_input_tokens,
        threshold_tokens=report.budget.threshold_tokens,
        budget_tokens=report.budget.budget_tokens,
        reserve_tokens=report.budget.reserve_tokens,
        learned_request_bytes=report.learned.request_bytes,
        request_bytes_allowed=report.learned.request_bytes_allowed,
        limits_forgotten_version=report.limits_forgotten_version,
        system_prompt=system_prompt_tokens_to_pb(report.system_prompt.tokens),
        files=[
            pb.FileReport(
                path=f.path,
                raw_chars=f.raw_chars,
                injected_chars=f.injected_chars,
                status=file_status_to_pb(f.status),
            )
            for f in report.files
        ],
        skills=[pb.Skill(name=s.name, description=s.description) for s in report.skills],
        top_tools=[
            pb.ToolReport(name=t.name, schema_chars=len(t.parameters_json))
            for t in report.top_tools
        ],
        largest_tool_results=[
            pb.ToolResultReport(
                entry_id=r.entry_id,
                tool_name=r.tool_name,
                chars=r.chars,
                shown_chars=r.shown_chars,
                tokens=r.tokens,
                action=r.action,
            )
            for r in report.largest_tool_results
        ],
        compaction_count=report.compaction_count,
        compaction_failures=report.compaction_failures,
        prune_count=report.prune_count,
        turns=[
            pb.TurnUsage(
                entry_id=t.entry_id,
                version=t.version,
                usage=usage_to_pb(t.usage),
                estimated_input_tokens=t.estimated_input_tokens,
            )
            for t in report.turns
        ],
        total_usage=usage_to_pb(report.total_usage),
        entries=report.entries,
        entries_in_prompt=report.entries_in_prompt,
    )
    if report.latest_compaction is not None:
        message.latest_compaction.CopyFrom(recorded_compaction_to_pb(report.latest_compaction))
    return message
