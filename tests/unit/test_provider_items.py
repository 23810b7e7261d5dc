"""Provider items, provider compactions, tool call id forms and context edit reports,
in the domain."""

from __future__ import annotations

import pytest

from domain.compaction import OPAQUE_SUMMARY, Compaction
from domain.content import (
    Entry,
    ImageRef,
    ProviderItem,
    Role,
    TextBlock,
    ToolCall,
    ToolResult,
    block_texts,
    validate_entry,
)
from domain.context.shown import tokens_taken_out
from domain.context_edits import parse_applied_edits, provider_clears
from domain.errors import InvalidEntry, InvalidRequest
from domain.pruning import PruneAction, PruneDecision
from domain.tool_call_ids import ID_FORMS, original_call_id, view_call_id
from tests.unit.support import Tracked, assistant, call, tool, user

REASONING = ProviderItem(
    "openai", "reasoning", '{"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA"}'
)


def test_an_entry_with_provider_items_is_stored_and_read_back_exactly() -> None:
    entry = Entry("a1", None, None, Role.ASSISTANT, (REASONING, TextBlock("hi")), token_count=12)
    again = Entry.from_record(entry.to_record())
    assert again == entry
    assert again.content[0].json == REASONING.json  # type: ignore[union-attr]
    assert REASONING.json in block_texts(entry.content)  # counted from its JSON


@pytest.mark.parametrize(
    ("content", "refusal"),
    [
        ((ProviderItem("openai", "reasoning", "[]"),), "must be an object"),
        ((ProviderItem("openai", "message", '{"type": "reasoning"}'),), "differs from"),
        ((ProviderItem("cohere", "x", "{}"),), "anthropic, openai, gemini"),
        (
            (ProviderItem("gemini", "functionCall", '{"functionCall": {"name": "read"}}'),),
            "no tool_call block",
        ),
    ],
)
def test_provider_items_that_cannot_be_kept_are_refused(content: tuple, refusal: str) -> None:
    with pytest.raises(InvalidEntry, match=refusal):
        validate_entry(Entry("a", None, None, Role.ASSISTANT, content), 1 << 20)


def test_images_and_items_of_a_tool_entry_follow_its_result() -> None:
    image = ImageRef("https://x/a.png", "image/png")
    validate_entry(Entry("t", None, None, Role.TOOL, (ToolResult("c", "ok"), image)), 1 << 20)
    with pytest.raises(InvalidEntry, match="starts with a tool_result"):
        validate_entry(Entry("t", None, None, Role.TOOL, (image, ToolResult("c", "ok"))), 1 << 20)


def test_a_gemini_call_part_stands_in_for_its_call_block_by_name_when_it_has_no_id() -> None:
    part = ProviderItem(
        "gemini", "functionCall", '{"functionCall": {"name": "read"}, "thoughtSignature": "c2ln"}'
    )
    entry = Entry("a", None, None, Role.ASSISTANT, (ToolCall("c1", "read"), part))
    validate_entry(entry, 1 << 20)


def test_guarding_a_result_takes_out_only_its_share_of_the_entry() -> None:
    """The image beside a result stays shown: a cleared result takes out the tokens of
    its text, not the whole entry's."""
    data = "i" * 2000
    item = ProviderItem("anthropic", "image", '{"type":"image","source":"' + data + '"}')
    text = "y" * len(item.json)
    entry = Entry("t", None, None, Role.TOOL, (ToolResult("c", text), item), token_count=100)
    cleared = PruneDecision("t", PruneAction.HARD_CLEAR, 0, 0)
    taken = tokens_taken_out(entry, cleared, ())
    assert 47 <= taken <= 50  # half the characters are the result's, nearly all cleared
    alone = Entry("t", None, None, Role.TOOL, (ToolResult("c", text),), token_count=100)
    assert tokens_taken_out(alone, cleared, ()) > 95


def test_a_provider_compaction_is_stored_and_read_back_and_older_receipts_still_load() -> None:
    item = ProviderItem("openai", "compaction", '{"type": "compaction", "encrypted_content": "x"}')
    compaction = Compaction("", "q2", reason="provider", provider_item=item)
    compaction.validate()
    assert compaction.completed_summary() == OPAQUE_SUMMARY.format(provider="openai")
    assert Compaction.from_dict(compaction.to_dict()) == compaction
    older = Compaction("summary", "q2").to_dict()
    del older["provider_item"]
    assert Compaction.from_dict(older).provider_item is None
    # One a later release wrote reads without what this one does not know.
    newer = {
        **compaction.to_dict(),
        "verdict": "kept",
        "attempts": [{"summarizer": "x", "outcome": "used", "cost_usd": 0.1}],
    }
    assert Compaction.from_dict(newer).attempts[0].summarizer == "x"
    with pytest.raises(InvalidRequest, match="not a compaction"):
        Compaction("", "q2", provider_item=REASONING).validate()
    anthropic = ProviderItem("anthropic", "compaction", '{"type":"compaction","content":"Did X."}')
    assert Compaction("", "q2", provider_item=anthropic).completed_summary() == "Did X."


def test_the_messages_a_provider_kept_are_stored_read_back_and_read_after_its_note() -> None:
    item = ProviderItem("openai", "compaction", '{"type": "compaction", "encrypted_content": "x"}')
    kept = ProviderItem(
        "openai",
        "message",
        '{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go."}]}',
    )
    compaction = Compaction("", "q2", provider_item=item, provider_retained=(kept,))
    compaction.validate()
    assert compaction.provider_items() == (kept, item)
    assert Compaction.from_dict(compaction.to_dict()) == compaction
    assert "provider_retained" not in Compaction("", "q2", provider_item=item).to_dict()
    summary = compaction.completed_summary()
    assert summary.startswith(OPAQUE_SUMMARY.format(provider="openai")) and summary.endswith("Go.")
    with pytest.raises(InvalidRequest, match="comes with the provider's compaction item"):
        Compaction("a summary", "q2", provider_retained=(kept,)).validate()
    anthropic = ProviderItem("anthropic", "compaction", '{"type":"compaction","content":"Did X."}')
    with pytest.raises(InvalidRequest, match="one provider's answer"):
        Compaction("", "q2", provider_item=anthropic, provider_retained=(kept,)).validate()


def test_call_ids_are_rewritten_to_each_providers_form_and_found_again() -> None:
    for odd in ("call_1~5f3a", "fs.read:1/a", "x" * 80, "a b"):
        shown = {fmt: view_call_id(odd, fmt) for fmt in ID_FORMS}
        for fmt, view_id in shown.items():
            assert ID_FORMS[fmt].accepts(view_id)
            assert view_call_id(odd, fmt) == view_id  # the same in every view
            assert original_call_id(view_id, ["other", odd]) == odd
    assert view_call_id("call_abc", "anthropic") == "call_abc"  # fitting ids stay as they are
    assert view_call_id("a~b", "anthropic") != view_call_id("a.b", "anthropic")
    assert original_call_id("unknown", ["c1"]) == "unknown"


def test_a_result_for_a_rewritten_id_answers_the_open_call() -> None:
    tracked = Tracked()
    tracked.append(user("read it"), assistant(calls=[call("fs.read:1")]))
    stored = tracked.append(tool(view_call_id("fs.read:1", "anthropic"), "contents"))
    assert stored[0].tool_results[0].tool_call_id == "fs.read:1"
    assert not tracked.session.open_tool_calls


def test_a_call_abandoned_by_its_rewritten_id_is_the_open_call() -> None:
    tracked = Tracked()
    tracked.append(user("read it"), assistant(calls=[call("fs.read:2")]))
    tracked.session.abandon_tool_calls(
        [view_call_id("fs.read:2", "openai")], "crashed", lambda e: e
    )
    tracked.sync()
    assert not tracked.session.open_tool_calls


def test_context_edit_reports_are_read_and_refused_when_malformed() -> None:
    report = parse_applied_edits(
        '{"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3,'
        ' "cleared_input_tokens": 900}, {"type": "clear_thinking_20251015",'
        ' "cleared_thinking_turns": 1, "cleared_input_tokens": 40}]}'
    )
    assert report.tool_uses_cleared == 3
    assert "clear_thinking_20251015" in report.description
    results = [
        Entry("t1", None, None, Role.TOOL, (ToolResult("a", "x"), ToolResult("b", "y"))),
        Entry("u", None, None, Role.USER, (TextBlock("go on"),)),
        Entry("t2", None, None, Role.TOOL, (ToolResult("c", "z"),)),
        Entry("t3", None, None, Role.TOOL, (ToolResult("d", "w"),)),
    ]
    assert [d.entry_id for d in provider_clears(report, results, ())] == ["t1", "t2"]
    assert [d.entry_id for d in provider_clears(report, results, ["t1"])] == ["t2", "t3"]
    for bad in (
        "nope",
        '{"applied_edits": [{"cleared_tool_uses": 1}]}',
        '[{"type": "x", "n": -1}]',
        '{"applied_edits": []}',
    ):
        with pytest.raises(InvalidRequest):
            parse_applied_edits(bad)
