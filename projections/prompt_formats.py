"""Rendering a prompt view in the providers' own request formats.

OpenAI chat completions (which litellm takes as it is), OpenAI Responses input
items, Anthropic Messages and Google Gemini contents (projections.formats holds
each). The stored system prompt leads, with the tools in the provider's format.
Pruned and guarded tool results are shown as their decisions say; everything
else is shown as stored. Custom entries are the runtime's own notes and are not
sent. Tool calls that were abandoned are answered by the synthetic tool entry
their ``ToolCallsAbandoned`` event holds (metadata ``synthetic``; its text says
it is synthetic), like any error result.

Whatever the log holds, the view is a request its provider accepts: each view
is paired (projections.view_repair) and shaped to its provider's rules
(projections.provider_rules states them); what it repairs or leaves out is
reported with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from domain.content import Entry, Role, ToolCall
from projections.formats import FORMATS
from projections.formats.base import SUMMARY_PREFIX, Format, Omitted, Piece, Shown
from projections.rendered_prompt import (
    RenderedPrompt,
    closed_request_hash,
    open_request_hash,
    request_hash,
)
from projections.session_history import PromptView
from projections.view_repair import NOTHING, Pairing, PendingCall, Repair, Step, synthetic_entry

_TOOL, _ASSISTANT = Role.TOOL, Role.ASSISTANT
# Renderings that extend one another are joined at most this many deep.
MAX_UNJOINED = 64
__all__ = ["FORMATS", "SUMMARY_PREFIX", "PromptRenderer", "render"]


class PromptRenderer:
    """Keeps each entry's rendering, per format, for the next render.

    An entry never changes; only the prune decision it is shown under, and the
    results the pairing leaves out of it, can. So its pieces are made once per
    format and decision, and a render is a join: the warm prompt view of a long
    session, and a replay at any version, cost little more than copying the text.
    """

    def __init__(self) -> None:
        # Format -> entry id -> ((prune decision, results left out), pieces, whether
        # the entry neither makes nor answers tool calls).
        self._shown: dict[str, dict[str, tuple[Any, Shown, bool]]] = {name: {} for name in FORMATS}
        # Characters held, for the cache that keeps renderers.
        self.weight = 0
        # Format -> (version, rendering): a version's view never changes.
        self._latest: dict[str, tuple[int, RenderedPrompt]] = {}
        # Format -> the rendering before the latest: what a client most likely holds.
        self._previous: dict[str, RenderedPrompt] = {}
        # OpenAI: the latest view rendered, its rendering and its open request hash
        # (one tuple, replaced whole: renders may run at once), so that a view that
        # only appends to it renders and hashes only what it appends; and the calls
        # still waiting at its end, whose synthetic results that rendering leaves out.
        self._open: tuple[PromptView, RenderedPrompt, Any, tuple[PendingCall, ...]] | None = None

    def render(self, view: PromptView, provider_format: str) -> RenderedPrompt:
        """The view as JSON ready to send, in one of FORMATS."""
        latest = self._latest.get(provider_format)
        if latest is not None and latest[0] == view.log.version:
            return latest[1]
        if provider_format == "openai" and self._open is not None:
            extended = self._extend_openai(self._open, view)
            if extended is not None:
                self._keep(provider_format, view, extended)
                return extended
        spec = FORMATS[provider_format]
        pieces: list[Piece] = []
        omitted: list[Omitted] = []
        repairs: list[Repair] = []
        for entry in view.log.pinned:
            self._add(self._entry(spec, entry, view, NOTHING), pieces, omitted, repairs)
        if view.log.compaction:
            self._add(spec.summary(view.log.compaction.compaction, view), pieces, omitted, repairs)
        pairing = Pairing(names=spec.names_calls)
        cut = self._paired(spec, view, view.log.entries, pairing, pieces, omitted, repairs)
        rendered, opened = _rendered(spec, view, pieces, omitted, [*pairing.repairs, *repairs])
        if provider_format == "openai":
            if pairing.waited_at_end:
                # Calls were waiting: the view it is extended from ends before their
                # synthetic results, which the next view replaces by the real ones.
                settled = [*pairing.repairs[: -len(pairing.pending_at_end)], *repairs]
                before, opened = _rendered(spec, view, pieces[:cut], omitted, settled)
                self._open = (view, before, opened, pairing.pending_at_end)
            else:
                self._open = (view, rendered, opened, ())
        self._keep(provider_format, view, rendered)
        return rendered

    def _paired(
        self,
        spec: Format,
        view: PromptView,
        entries: Iterable[Entry],
        pairing: Pairing,
        pieces: list[Piece],
        omitted: list[Omitted],
        repairs: list[Repair],
    ) -> int:
        """The entries' pieces, paired: synthetic results where calls got none, and
        results that answer no call just before them left out. Answers where the
        synthetic results of calls still waiting at the end begin."""
        cache = self._shown[spec.name]
        pruned = view.pruned
        for entry in entries:
            # Once per entry of every view. The common cases: the entry is cached under
            # its prune decision, and either nothing waits and it neither calls nor
            # answers, or its pairing changes nothing; its cached pieces are all it takes.
            cached = cache.get(entry.id)
            fresh = cached is not None and cached[0] == pruned.get(entry.id)
            if fresh and cached[2] and not pairing.pending:  # type: ignore[index]
                shown = cached[1]  # type: ignore[index]
            else:
                step = pairing.step(entry)
                if step is NOTHING and fresh:
                    shown = cached[1]  # type: ignore[index]
                else:
                    if step.synthetic_before:
                        synthetic = _synthetic(spec, view, step.synthetic_before)
                        self._add(synthetic, pieces, omitted, repairs)
                    shown = self._entry(spec, entry, view, step)
            pieces.extend(shown.pieces)
            if shown.omitted:
                omitted.extend(shown.omitted)
            if shown.repairs:
                repairs.extend(shown.repairs)
        cut = len(pieces)
        waiting = pairing.finish()
        if waiting:
            self._add(_synthetic(spec, view, waiting), pieces, omitted, repairs)
        return cut

    @staticmethod
    def _add(
        shown: Shown, pieces: list[Piece], omitted: list[Omitted], repairs: list[Repair]
    ) -> None:
        pieces.extend(shown.pieces)
        if shown.omitted:
            omitted.extend(shown.omitted)
        if shown.repairs:
            repairs.extend(shown.repairs)

    def _entry(self, spec: Format, entry: Entry, view: PromptView, step: Step) -> Shown:
        """The entry's pieces in this format, made once per prune decision and results
        left out."""
        decision = view.pruned.get(entry.id)
        key = (decision, step.dropped) if step.dropped else decision
        cache = self._shown[spec.name]
        cached = cache.get(entry.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        shown = spec.entry(entry, view, step)
        if spec.joins_entry and len(shown.pieces) > 1:
            # One piece per entry: its blocks all join one turn (or are whole messages).
            first = shown.pieces[0]
            joined = ",".join(piece[1] for piece in shown.pieces)
            shown = Shown(((first[0], joined, None),), shown.omitted, shown.repairs)
        for piece in shown.pieces:
            self.weight += len(piece[1])
        role = entry.role
        plain = role is not _TOOL and (
            role is not _ASSISTANT or not any(type(b) is ToolCall for b in entry.content)
        )
        cache[entry.id] = (key, shown, plain)
        return shown

    def _keep(self, provider_format: str, view: PromptView, rendered: RenderedPrompt) -> None:
        latest = self._latest.get(provider_format)
        if latest is not None:
            previous = self._previous.get(provider_format)
            if previous is not None:
                self.weight -= previous.length
            self._previous[provider_format] = latest[1]
        self._latest[provider_format] = (view.log.version, rendered)
        self.weight += rendered.length

    def _extend_openai(
        self,
        opened: tuple[PromptView, RenderedPrompt, Any, tuple[PendingCall, ...]],
        view: PromptView,
    ) -> RenderedPrompt | None:
        """``view`` rendered as an earlier rendering plus the messages of its new
        entries, when it only appends to the view rendered then (same cut, system
        prompt, pinned entries and prunes of the entries both show); else None."""
        before, base, open_hash, waiting = opened
        if before.log.version > view.log.version:
            return None
        old, new = before.log, view.log
        kept = len(old.entries)
        if (
            old.first_position != new.first_position
            or old.compaction != new.compaction
            or len(new.entries) < kept
            or (kept and new.entries[kept - 1].id != old.entries[kept - 1].id)
            or [e.id for e in old.pinned] != [e.id for e in new.pinned]
            or before.system_prompt != view.system_prompt
        ):
            return None
        added = new.entries[kept:]
        added_ids = {e.id for e in added}
        if before.pruned != {k: d for k, d in view.pruned.items() if k not in added_ids}:
            return None
        spec = FORMATS["openai"]
        pieces: list[Piece] = []
        omitted: list[Omitted] = []
        repairs: list[Repair] = []
        # Pairing goes on from the calls that were waiting where ``base`` ends.
        pairing = Pairing(waiting)
        cut = self._paired(spec, view, added, pairing, pieces, omitted, repairs)
        shown_repairs = [*pairing.repairs, *repairs]
        rendered, hasher = _extended(base, open_hash, view, pieces, omitted, shown_repairs)
        if pairing.waited_at_end:
            settled = [*pairing.repairs[: -len(pairing.pending_at_end)], *repairs]
            before_waiting, hasher = _extended(
                base, open_hash, view, pieces[:cut], omitted, settled
            )
            self._open = (view, before_waiting, hasher, pairing.pending_at_end)
        else:
            self._open = (view, rendered, hasher, ())
        return rendered

    def remembered(self, provider_format: str, request_hash: str) -> RenderedPrompt | None:
        """A recent rendering with this hash, if this renderer still holds it."""
        latest = self._latest.get(provider_format)
        for candidate in (latest[1] if latest else None, self._previous.get(provider_format)):
            if candidate is not None and candidate.request_hash == request_hash:
                return candidate
        return None


def _rendered(
    spec: Format,
    view: PromptView,
    pieces: Sequence[Piece],
    omitted: Sequence[Omitted],
    repairs: Sequence[Repair],
) -> tuple[RenderedPrompt, Any]:
    """The rendering of these pieces, and (OpenAI chat) its open request hash."""
    assembled = spec.assemble(view.system_prompt, pieces)
    messages, system = assembled.messages_json, assembled.system_json
    tools = spec.tools(view.system_prompt.tools)
    opened = None
    if spec.name == "openai":
        opened = open_request_hash(spec.name, messages, system, tools)
        digest = closed_request_hash(opened)
    else:
        digest = request_hash(spec.name, messages, system, tools)
    rendered = RenderedPrompt(
        messages,
        system,
        view.estimated_tokens,
        tools,
        digest,
        spec.name,
        omitted=(*omitted, *assembled.omitted),
        repairs=(*repairs, *assembled.repairs),
    )
    return rendered, opened


def _extended(
    base: RenderedPrompt,
    open_hash: Any,
    view: PromptView,
    pieces: Sequence[Piece],
    omitted: Sequence[Omitted],
    repairs: Sequence[Repair],
) -> tuple[RenderedPrompt, Any]:
    """``base`` (an OpenAI chat rendering) with the messages of ``pieces`` appended,
    and the open request hash after them."""
    appended = ",".join(piece[1] for piece in pieces)
    joiner = "," if appended and base.length > 2 else ""
    hasher = open_hash.copy()
    hasher.update((joiner + appended).encode())
    if base._depth >= MAX_UNJOINED:
        base.messages_json  # noqa: B018 - joined now, so the chain stays short
    depth = 0 if "messages_json" in base.__dict__ else base._depth + 1
    rendered = RenderedPrompt(
        "",
        base.system_json,
        view.estimated_tokens,
        base.tools_json,
        closed_request_hash(hasher),
        base.provider_format,
        base_hash=base.request_hash,
        appended_json=f"[{appended}]",
        messages_chars=base.length + len(joiner) + len(appended),
        omitted=(*base.omitted, *omitted) if omitted else base.omitted,
        repairs=(*base.repairs, *repairs) if repairs else base.repairs,
        _base=base,
        _tail=joiner + appended,
        _depth=depth,
    )
    return rendered, hasher


def _synthetic(spec: Format, view: PromptView, calls: Sequence[Any]) -> Shown:
    """The synthetic results for calls that got none (never cached: ids are the log's)."""
    answered = {call.call_id: call.name for call in calls}
    return spec.entry(synthetic_entry(tuple(calls)), view, Step(answered=answered))


def render(view: PromptView, provider_format: str) -> RenderedPrompt:
    """Renders a view once, without keeping anything for later renders."""
    return PromptRenderer().render(view, provider_format)


def request_of(rendered: RenderedPrompt) -> dict[str, Any]:
    """The rendering as Python values: {"system", "tools", "messages"} (system None
    when the format has none), for inspection and validation."""
    return {
        "system": json.loads(rendered.system_json) if rendered.system_json else None,
        "tools": json.loads(rendered.tools_json),
        "messages": json.loads(rendered.messages_json),
    }


def to_openai(view: PromptView) -> list[dict[str, Any]]:
    """The OpenAI messages as Python values, for inspection."""
    messages: list[dict[str, Any]] = json.loads(render(view, "openai").messages_json)
    return messages


def to_anthropic(view: PromptView) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The top-level system blocks and the alternating messages, for inspection."""
    rendered = render(view, "anthropic")
    system = json.loads(rendered.system_json) if rendered.system_json else []
    return system, json.loads(rendered.messages_json)
