"""Compaction records and the rule for where a compaction may cut.

A compaction replaces the entries before ``first_kept_entry_id`` with a summary
in the durable log. The entries themselves stay in the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

from domain.content import (
    PROVIDERS,
    Block,
    Entry,
    ProviderItem,
    Role,
    provider_item_object,
    validate_entry,
    validate_id,
)
from domain.entries import block_from_record, block_record
from domain.errors import EntryNotFound, InvalidCutPoint, InvalidRequest, quoted
from domain.stored_fields import known_fields


class Trigger(StrEnum):
    """What started a compaction."""

    MANUAL = "manual"  # a Compact request
    THRESHOLD = "threshold"  # the estimated prompt crossed the threshold or the reserve
    # A view was asked within less than the session's budget: the client's
    # token_budget, or what one gRPC message carries (the view's actions say which).
    BUDGET = "budget"
    OVERFLOW = "overflow"  # the provider refused the prompt as too long
    CLIENT = "client"  # the client wrote the summary itself (RecordCompaction)
    PROVIDER = "provider"  # the provider compacted on its side (RecordCompaction with its item)

    @classmethod
    def for_view(cls, token_budget: int | None) -> Trigger:
        """What starts a compaction a prompt view needs: its own budget's threshold,
        or the smaller budget the view was asked within."""
        return cls.THRESHOLD if token_budget is None else cls.BUDGET


@dataclass(frozen=True, slots=True)
class SummarizerAttempt:
    """One step of a compaction's summariser chain, and what became of it."""

    summarizer: str
    # "used" (it wrote the summary), "failed", "timed-out" or "too-large" (its summary
    # and what the cut keeps did not fit the budget).
    outcome: str
    reason: str = ""
    duration_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction and its receipt: what was covered, how, by whom, at what cost."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int = 0
    tokens_after: int = 0
    # The trigger (see Trigger) or the client's own word for it.
    reason: str = "manual"
    summarizer_model: str = ""
    details: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    summary_tokens: int = 0
    tokenizer: str = ""
    # The entries the summary replaces (pinned system entries excepted).
    first_covered_entry_id: str = ""
    last_covered_entry_id: str = ""
    entries_covered: int = 0
    # Where each count came from: "tokenizer:<name>", "calibrated", "provider" or "client".
    tokens_before_source: str = ""
    tokens_after_source: str = ""
    # sha256 of what the summariser was asked (canonical JSON), across every call.
    prompt_hash: str = ""
    chunks: int = 0
    # "full", "oversized-omitted", "hard-drop" (no summariser), or "" for a client's summary.
    fallback_stage: str = ""
    attempt: int = 0
    duration_ms: int = 0
    engine: str = ""
    instructions: str = ""
    # Every summariser the chain tried, in order (empty for a client's summary).
    attempts: tuple[SummarizerAttempt, ...] = ()
    # A compaction the provider made on its side: its own item (an Anthropic
    # ``compaction`` block, an OpenAI Responses ``compaction`` item), which that
    # provider's view carries verbatim in place of the summary.
    provider_item: ProviderItem | None = None
    # The items the provider answered before its compaction item, which its view
    # carries verbatim before that item: OpenAI's /responses/compact answers the
    # window to send on, every user message of what it compacted and then the item,
    # whose encrypted content leaves those messages out.
    provider_retained: tuple[ProviderItem, ...] = ()
    # A cut inside the turn in progress: the blocks other than text (images, a
    # provider's documents) of the user message the summary carries verbatim
    # (domain.context.current_request). Its text is in the summary; these are shown
    # beside it, in the same user message, and counted in ``summary_tokens``.
    carried_blocks: tuple[Block, ...] = ()

    def validate(self) -> None:
        if self.provider_item is not None:
            _validate_compaction_item(self.provider_item)
            for retained in self.provider_retained:
                _validate_retained_item(retained, self.provider_item.provider)
        elif not self.summary.strip():
            raise InvalidRequest("a compaction needs a non-empty summary")
        elif self.provider_retained:
            raise InvalidRequest(
                "provider_retained comes with the provider's compaction item (provider_item)"
            )
        if not self.first_kept_entry_id:
            raise InvalidRequest("a compaction needs first_kept_entry_id")
        validate_id(self.first_kept_entry_id, "first_kept_entry_id")
        if self.tokens_before < 0 or self.tokens_after < 0:
            raise InvalidRequest("tokens_before and tokens_after must not be negative")

    def provider_items(self) -> tuple[ProviderItem, ...]:
        """What the provider's own view carries in place of the summary, in order."""
        if self.provider_item is None:
            return ()
        return (*self.provider_retained, self.provider_item)

    def completed_summary(self) -> str:
        """The summary text: the client's, else (a provider's compaction) the item's own,
        then the text of the messages the provider retained beside it."""
        if self.summary.strip() or self.provider_item is None:
            return self.summary
        kept = [text for text in map(_message_text, self.provider_retained) if text]
        summary = provider_summary(self.provider_item)
        if not kept:
            return summary
        return f"{summary}\n\n{RETAINED_HEADING}\n\n" + "\n\n".join(kept)

    def check_shrinks(self) -> None:
        """Refuses a compaction whose figures say it does not shrink the context."""
        if self.tokens_before and self.tokens_after >= self.tokens_before:
            raise InvalidRequest(
                f"tokens_after ({self.tokens_after}) is not below tokens_before "
                f"({self.tokens_before}): a compaction that does not shrink the context "
                "is not trusted"
            )

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["details"] = dict(self.details)
        data["attempts"] = [attempt.to_dict() for attempt in self.attempts]
        item = self.provider_item
        data["provider_item"] = None if item is None else [item.provider, item.type, item.json]
        # Written only where there are any: receipts without read as they always did.
        del data["provider_retained"]
        if self.provider_retained:
            data["provider_retained"] = [
                [r.provider, r.type, r.json] for r in self.provider_retained
            ]
        del data["carried_blocks"]
        if self.carried_blocks:
            data["carried_blocks"] = [block_record(b) for b in self.carried_blocks]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Compaction:
        """A receipt from its stored form (domain.stored_fields: another release's)."""
        item = data.get("provider_item")
        return cls(
            **{
                **known_fields(cls, data),
                "details": MappingProxyType(dict(data.get("details", {}))),
                "attempts": tuple(
                    SummarizerAttempt(**known_fields(SummarizerAttempt, a))
                    for a in data.get("attempts", ())
                ),
                "provider_item": ProviderItem(*item) if item else None,
                "provider_retained": tuple(
                    ProviderItem(*r) for r in data.get("provider_retained") or ()
                ),
                "carried_blocks": tuple(
                    block_from_record(b) for b in data.get("carried_blocks") or ()
                ),
            }
        )


# Before the text of the messages a provider kept beside its compaction item, in the
# summary other providers' views read.
RETAINED_HEADING = "The user's messages it kept, oldest first:"

# What other providers' views read in place of a provider's compaction item whose
# summary is opaque (OpenAI's is encrypted) when the client gave no summary of its own.
OPAQUE_SUMMARY = (
    "[The {provider} provider compacted the conversation before this point; its summary "
    "is opaque and only that provider can read it.]"
)


def provider_summary(item: ProviderItem) -> str:
    """The summary text a provider's compaction item carries (Anthropic's ``content``),
    else a note saying it is opaque."""
    content = provider_item_object(item).get("content")
    if isinstance(content, str) and content.strip():
        return content
    return OPAQUE_SUMMARY.format(provider=item.provider)


def _message_text(item: ProviderItem) -> str:
    """The text of a provider's message item (a Responses message: its content as a
    string, or its parts' text)."""
    content = provider_item_object(item).get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    texts = (part.get("text") for part in parts if isinstance(part, dict))
    return "\n".join(text for text in texts if isinstance(text, str))


def _validate_compaction_item(item: ProviderItem) -> None:
    # The item is checked as an entry's block would be: a JSON object of its type.
    probe = Entry("provider_item", None, None, Role.ASSISTANT, (item,))
    validate_entry(probe, max_entry_bytes=1 << 62, label="provider_item")
    if item.type != "compaction":
        raise InvalidRequest(
            f"provider_item type {quoted(item.type)} is not a compaction; record a provider's "
            "compaction item (type compaction) here, other items in entries"
        )
    if item.provider not in ("anthropic", "openai"):
        raise InvalidRequest(
            f"provider_item provider {quoted(item.provider)} has no compaction items; "
            f"anthropic and openai do (of {', '.join(PROVIDERS)})"
        )


def _validate_retained_item(item: ProviderItem, provider: str) -> None:
    probe = Entry("provider_retained", None, None, Role.ASSISTANT, (item,))
    validate_entry(probe, max_entry_bytes=1 << 62, label="provider_retained")
    if item.provider != provider:
        raise InvalidRequest(
            f"provider_retained holds a {quoted(item.provider)} item beside a "
            f"{quoted(provider)} compaction item; they come from one provider's answer"
        )


@dataclass(frozen=True, slots=True)
class CompactionFailure:
    """A compaction that did not happen, and why; it changes nothing else."""

    trigger: str
    # Where it failed: "plan", "summarise", "verify", "timeout", "attempts".
    stage: str
    reason: str
    attempt: int = 0
    summarizer_model: str = ""
    duration_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionFailure:
        return cls(**known_fields(cls, data))


class History(Protocol):
    """What the session aggregate may ask of its full history.

    The history lives in the read side, not in the aggregate, so that the
    aggregate stays the same small size however long the session grows.
    """

    def position_of(self, entry_id: str) -> int | None:
        """The entry's 0-based position in the session, or None if unknown."""

    def role_at(self, position: int) -> Role: ...

    def call_position(self, call_id: str) -> int | None:
        """Position of the entry that made this tool call, if one did."""

    def earliest_call_answered_from(self, position: int) -> int | None:
        """The lowest position of a tool call whose result is at or after ``position``."""

    def entry_version(self, position: int) -> int:
        """The version of the event that appended the entry at ``position``."""

    def entry(self, entry_id: str) -> Entry:
        """The entry with this id, as stored."""


def check_cut_point(
    first_kept_entry_id: str,
    history: History,
    open_calls: Mapping[str, int],
    current_first_kept: int,
) -> int:
    """The position to cut at, or a refusal saying why it is not a valid cut."""
    position = history.position_of(first_kept_entry_id)
    if position is None:
        raise EntryNotFound(
            f"first_kept_entry_id {quoted(first_kept_entry_id)} is not in this session"
        )
    if position < current_first_kept:
        raise InvalidCutPoint(
            f"first_kept_entry_id {quoted(first_kept_entry_id)} lies before the latest "
            "compaction's first kept entry; a compaction can only move the cut forward"
        )
    if history.role_at(position) is Role.TOOL:
        raise InvalidCutPoint(
            f"first_kept_entry_id {quoted(first_kept_entry_id)} is a tool result; cut at the "
            "assistant entry that made the call, or later"
        )
    split = [call for call, at in open_calls.items() if at < position]
    if split:
        raise InvalidCutPoint(
            f"cutting at {quoted(first_kept_entry_id)} would separate tool call "
            f"{quoted(split[0])} from its result, which has not arrived yet; cut at or before "
            "the call"
        )
    answered = history.earliest_call_answered_from(position)
    if answered is not None and answered < position:
        raise InvalidCutPoint(
            f"cutting at {quoted(first_kept_entry_id)} would separate a tool call (entry at "
            f"position {answered}) from its result; cut at or before the call"
        )
    return position
