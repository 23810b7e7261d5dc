"""Every prompt view, of any session however broken, is a request its provider accepts.

Sessions are generated as the log may hold them whatever the store refuses today:
calls never answered, results whose call is gone (a compaction can be made to cut
anywhere here: the generated entries are what a cut kept), duplicated and late
results, turns in any order, system and custom entries anywhere, tool call ids
no provider takes, thinking, images, and every provider's opaque items. Each view
is rendered in all four formats and held to the provider's rules
(projections.provider_rules) and to the official SDKs' request types; every
provider item comes back byte for byte in its provider's view, or is listed as
left out with the reason.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.compaction import Compaction
from domain.content import (
    Entry,
    ImageRef,
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    validate_entry,
)
from domain.pruning import PruneAction, PruneDecision
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt, Tool
from projections.formats import FORMATS
from projections.prompt_formats import PromptRenderer, render, request_of
from projections.provider_rules import problems
from projections.session_history import DurableLog, PromptView, RecordedCompaction
from tests.support.sdk_requests import sdk_problems

CALL_IDS = [
    "call_1",
    "toolu_01ABC",
    "call_2~5f3a9c1e2b4d",  # a runtime's suffix: no provider takes "~"
    "c:read/1",
    "id with spaces",
    "x" * 70,  # too long for OpenAI chat (40) and Anthropic (64)
    "call_3",
]
NAMES = ["read", "search"]
SIGNATURE = "EqQBCkYIBxgCKkBzaWduYXR1cmU="

ANTHROPIC_ASSISTANT_ITEMS = [
    ProviderItem(
        "anthropic",
        "thinking",
        '{"type": "thinking", "thinking": "Let me look.", "signature": "' + SIGNATURE + '"}',
    ),
    ProviderItem(
        "anthropic", "redacted_thinking", '{"type":"redacted_thinking","data":"EmwKAhgB"}'
    ),
]
OPENAI_ASSISTANT_ITEMS = [
    ProviderItem(
        "openai",
        "reasoning",
        '{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAABo"}',
    ),
]
GEMINI_ASSISTANT_ITEMS = [
    ProviderItem("gemini", "text", '{"text": "Done.", "thoughtSignature": "c2lnbmF0dXJl"}'),
]
USER_ITEMS = [
    ProviderItem(
        "anthropic",
        "document",
        '{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}}',
    ),
    ProviderItem("openai", "input_file", '{"type":"input_file","file_id":"file-abc"}'),
    ProviderItem("gemini", "inlineData", '{"inlineData":{"mimeType":"text/plain","data":"aGk="}}'),
]
RESULT_ITEMS = [
    ProviderItem(
        "anthropic",
        "image",
        '{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}',
    ),
    ProviderItem(
        "openai",
        "input_image",
        '{"type":"input_image","image_url":"https://x/a.png","detail":"low"}',
    ),
]
COMPACTION_ITEMS = [
    ProviderItem(
        "anthropic",
        "compaction",
        '{"type":"compaction","content":"Summary of the work so far."}',
    ),
    # Compacted on demand: signed, it opens the messages.
    ProviderItem(
        "anthropic",
        "compaction",
        '{"type":"compaction","content":"Summary of the work so far.","signature":"'
        + SIGNATURE
        + '"}',
    ),
    ProviderItem("openai", "compaction", '{"type":"compaction","encrypted_content":"gAAAAABc"}'),
]
IMAGE = ImageRef("data:image/png;base64,iVBORw0KGgo=", "image/png")
TOOLS = (
    Tool("read", "Read a file", '{"type":"object","properties":{"path":{"type":"string"}}}'),
    Tool("search", "Search", '{"type":"object","properties":{"q":{"type":"string"}}}'),
)


@st.composite
def entries(draw: st.DrawFn) -> list[Entry]:
    count = draw(st.integers(0, 14))
    made: list[Entry] = []
    calls_made: list[str] = []
    for position in range(count):
        kind = draw(
            st.sampled_from(
                ["user", "user", "assistant", "calls", "calls", "tool", "tool", "system", "custom"]
            )
        )
        entry_id = f"e{position}"
        content: list[Any]
        role: Role
        if kind == "user":
            role = Role.USER
            content = [TextBlock(draw(st.sampled_from(["hi", "read a.txt", "继续"])))]
            if draw(st.booleans()):
                content.append(IMAGE)
            content += draw(st.lists(st.sampled_from(USER_ITEMS), max_size=2, unique=True))
        elif kind in ("assistant", "calls"):
            role = Role.ASSISTANT
            content = []
            content += draw(
                st.lists(
                    st.sampled_from(
                        ANTHROPIC_ASSISTANT_ITEMS + OPENAI_ASSISTANT_ITEMS + GEMINI_ASSISTANT_ITEMS
                    ),
                    max_size=3,
                    unique=True,
                )
            )
            if draw(st.booleans()):
                content.append(ThinkingBlock("hmm", draw(st.sampled_from(["", SIGNATURE]))))
            if kind == "assistant" or draw(st.booleans()):
                content.append(TextBlock(draw(st.sampled_from(["On it.", "Done", "好的"]))))
            if kind == "calls":
                fresh = [c for c in CALL_IDS if c not in calls_made]
                ids = draw(
                    st.lists(
                        st.sampled_from(fresh or [f"call_p{position}"]),
                        min_size=1,
                        max_size=3,
                        unique=True,
                    )
                )
                for call_id in ids:
                    name = draw(st.sampled_from(NAMES))
                    content.append(ToolCall(call_id, name, '{"path": "a.txt"}'))
                    calls_made.append(call_id)
                if draw(st.booleans()):
                    # A Gemini functionCall part with its signature, for the first call.
                    first = content[-len(ids)]
                    call: dict[str, Any] = {"name": first.name, "args": {"path": "a.txt"}}
                    if draw(st.booleans()):
                        call["id"] = first.id
                    part = {"functionCall": call, "thoughtSignature": "c2ln"}
                    content.append(ProviderItem("gemini", "functionCall", json.dumps(part)))
            if not content:
                content.append(TextBlock("ok"))
        elif kind == "tool":
            role = Role.TOOL
            known = [*calls_made[-4:], "never_made"]
            answered = draw(st.lists(st.sampled_from(known), min_size=1, max_size=3, unique=True))
            content = []
            for call_id in answered:
                content.append(
                    ToolResult(
                        call_id, draw(st.sampled_from(["", "42", "x" * 300])), draw(st.booleans())
                    )
                )
                if draw(st.integers(0, 3)) == 0:
                    content.append(IMAGE)
                content += draw(st.lists(st.sampled_from(RESULT_ITEMS), max_size=1))
        elif kind == "system":
            role, content = Role.SYSTEM, [TextBlock("Be brief.")]
        else:
            role, content = Role.CUSTOM, [TextBlock("runtime note")]
        entry = Entry(entry_id, None, None, role, tuple(content), token_count=10)
        validate_entry(entry, 1 << 20, entry_id)  # each one the store would take on its own
        made.append(entry)
    return made


@st.composite
def views(draw: st.DrawFn) -> PromptView:
    kept = draw(entries())
    compaction = None
    if draw(st.booleans()):
        item = draw(st.sampled_from([None, *COMPACTION_ITEMS]))
        summary = "" if item is not None and draw(st.booleans()) else "Earlier: files were read."
        made = Compaction(summary, kept[0].id if kept else "gone", provider_item=item)
        made = Compaction(made.completed_summary(), made.first_kept_entry_id, provider_item=item)
        compaction = RecordedCompaction(made, 0, 1, datetime(2026, 1, 1, tzinfo=UTC))
    pruned = {}
    for entry in kept:
        if entry.role is Role.TOOL and draw(st.integers(0, 3)) == 0:
            action = draw(st.sampled_from(list(PruneAction)))
            pruned[entry.id] = PruneDecision(entry.id, action, 5, 5)
    system = SystemPrompt(
        text=draw(st.sampled_from(["", "You help with files."])),
        tools=TOOLS if draw(st.booleans()) else (),
    )
    log = DurableLog("s-1", len(kept) + 2, compaction, kept, [2] * len(kept), 0, 10 * len(kept))
    return PromptView(log, SessionSettings(), 200_000, pruned, 0, system)


def _check(view: PromptView, provider_format: str) -> None:
    rendered = render(view, provider_format)
    request = request_of(rendered)
    found = problems(provider_format, request)
    assert not found, (provider_format, found, rendered.messages_json)
    refused = sdk_problems(provider_format, request)
    assert not refused, (provider_format, refused, rendered.messages_json)
    _items_verbatim_or_listed(view, provider_format, rendered)


def _items_verbatim_or_listed(view: PromptView, provider_format: str, rendered: Any) -> None:
    provider = FORMATS[provider_format].provider
    left_out = {(o.entry_id, o.block_index) for o in rendered.omitted}
    for entry in view.log.entries:
        if entry.role is Role.CUSTOM:
            continue
        for index, block in enumerate(entry.content):
            if not isinstance(block, ProviderItem):
                continue
            if block.provider == provider and (entry.id, index) not in left_out:
                assert block.json in rendered.messages_json, (entry.id, index, provider_format)
            elif block.provider != provider:
                assert (entry.id, index) in left_out, (entry.id, index, provider_format)
    compaction = view.log.compaction
    item = compaction.compaction.provider_item if compaction else None
    if item is not None:
        if item.provider == provider:
            assert rendered.messages_json.count(item.json) == 1
        else:
            assert ("", -1) in left_out


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(views())
def test_every_view_of_a_broken_session_is_a_request_its_provider_accepts(
    view: PromptView,
) -> None:
    for provider_format in FORMATS:
        _check(view, provider_format)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(views(), st.integers(0, 14))
def test_a_view_that_only_appends_renders_as_a_fresh_render_would(
    view: PromptView, split: int
) -> None:
    """The OpenAI chat renderer extends its last rendering (calls waiting at its end
    included): the result is what a fresh render gives, repairs and all."""
    log = view.log
    split = min(split, len(log.entries))
    earlier = PromptView(
        DurableLog(
            log.session_id,
            log.version - 1,
            log.compaction,
            log.entries[:split],
            log.entry_versions[:split],
            0,
            0,
        ),
        view.settings,
        view.context_window_tokens,
        {k: d for k, d in view.pruned.items() if k in {e.id for e in log.entries[:split]}},
        0,
        view.system_prompt,
    )
    renderer = PromptRenderer()
    renderer.render(earlier, "openai")
    extended = renderer.render(view, "openai")
    fresh = render(view, "openai")
    assert extended.messages_json == fresh.messages_json
    assert extended.request_hash == fresh.request_hash
    assert sorted(map(repr, extended.repairs)) == sorted(map(repr, fresh.repairs))
    assert sorted(map(repr, extended.omitted)) == sorted(map(repr, fresh.omitted))


def test_a_result_whose_call_was_cut_away_is_left_out_and_a_waiting_call_answered() -> None:
    view = PromptView(
        DurableLog(
            "s-1",
            5,
            None,
            [
                Entry("t0", None, None, Role.TOOL, (ToolResult("gone", "old"),)),
                Entry("u1", None, None, Role.USER, (TextBlock("go on"),)),
                Entry("a1", None, None, Role.ASSISTANT, (ToolCall("c~1", "read", "{}"),)),
            ],
            [2, 3, 4],
            0,
            0,
        ),
        SessionSettings(),
        200_000,
        {},
        0,
    )
    rendered = render(view, "anthropic")
    kinds = [(r.kind, r.tool_call_id) for r in rendered.repairs]
    assert ("dropped_result", "gone") in kinds
    assert ("synthetic_result", "c~1") in kinds
    rewritten = next(r for r in rendered.repairs if r.kind == "call_id_rewritten")
    assert rewritten.tool_call_id == "c~1" and "~" not in rewritten.view_tool_call_id
    messages = json.loads(rendered.messages_json)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    result = messages[2]["content"][0]
    assert result["tool_use_id"] == rewritten.view_tool_call_id and result["is_error"] is True


BROKEN = {
    "openai": {
        "system": None,
        "tools": [],
        "messages": [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "x"}]},
            {"role": "user", "content": [{"type": "nope"}]},
        ],
    },
    "openai-responses": {
        "system": None,
        "tools": [],
        "messages": [{"type": "function_call", "name": "f"}, {"type": "reasoning"}],
    },
    "anthropic": {
        "system": None,
        "tools": [],
        "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a~b"}]}],
    },
    "gemini": {
        "system": None,
        "tools": [],
        "messages": [{"role": "model", "parts": [{"functionCall": {"name": "f"}, "bogus": 1}]}],
    },
}


def test_a_signed_compaction_block_opens_the_messages_or_is_refused() -> None:
    block = {"type": "compaction", "content": "Summary.", "signature": SIGNATURE}
    opened = [
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [{"type": "text", "text": "Go on."}]},
    ]
    assert problems("anthropic", {"messages": opened}) == []
    behind = [{"role": "user", "content": [{"type": "text", "text": "Hi."}]}, *opened]
    assert any("must open the messages" in p for p in problems("anthropic", {"messages": behind}))


def test_the_rules_and_the_sdk_types_refuse_a_broken_request() -> None:
    """What the property test holds views to can fail: each format's broken request is
    refused by its rules and by its SDK's types."""
    for provider_format, request in BROKEN.items():
        assert problems(provider_format, request), provider_format
        assert sdk_problems(provider_format, request), provider_format
