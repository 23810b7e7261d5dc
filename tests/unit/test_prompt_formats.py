"""Rendering prompt views in OpenAI chat and Anthropic Messages formats."""

from __future__ import annotations

import json

from domain.content import ImageRef, ProviderItem, ThinkingBlock, Usage
from domain.context.current_request import with_current_request
from domain.pruning import CLEARED_PLACEHOLDER
from projections.formats.base import dumps as _dumps
from projections.prompt_formats import (
    SUMMARY_PREFIX,
    PromptRenderer,
    render,
    request_of,
    to_anthropic,
    to_openai,
)
from projections.rendered_prompt import appended_messages
from tests.unit.support import (
    Tracked,
    assistant,
    call,
    clear,
    custom,
    system,
    tool,
    trim,
    user,
)

LONG = "H" * 40 + "M" * 100 + "T" * 40


def _conversation() -> Tracked:
    """system, u1, a1 (two calls), t1, t2, custom note, a2, u2 (text + image), a3."""
    tracked = Tracked()
    tracked.append(
        system("be brief", id="s1"),
        user("read two files", id="u1"),
        assistant(
            "reading",
            id="a1",
            calls=[call("c1", "read", '{"path": "a.txt"}'), call("c2", "read", '{"path": "b"}')],
            usage=Usage(10, 5),
        ),
        tool("c1", LONG, id="t1", tokens=90),
        tool("c2", "no such file", id="t2", error=True),
        custom("runtime bookkeeping", id="n1"),
        assistant("both read", id="a2"),
    )
    tracked.append(
        user("look", id="u2", images=["data:image/png;base64,iVBORw0KGgo="]),
        assistant("a picture", id="a3"),
    )
    return tracked


# -- OpenAI ---------------------------------------------------------------------------


def test_openai_messages() -> None:
    """Roles map one to one; tool calls ride on the assistant message; custom notes are not sent."""
    messages = to_openai(_conversation().history.prompt_view())
    assert messages[:6] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "read two files"},
        {
            "role": "assistant",
            "content": "reading",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "b"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": LONG},
        {"role": "tool", "tool_call_id": "c2", "content": "no such file"},
        {"role": "assistant", "content": "both read"},
    ]
    assert messages[6] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }
    assert messages[7] == {"role": "assistant", "content": "a picture"}
    assert len(messages) == 8
    assert "runtime bookkeeping" not in str(messages)


def test_openai_assistant_without_text_has_null_content() -> None:
    """An assistant turn of only tool calls has content None and its tool_calls."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1")]))
    message = to_openai(tracked.history.prompt_view())[1]
    assert message["content"] is None
    assert [c["id"] for c in message["tool_calls"]] == ["c1"]


def test_openai_shows_pruned_results_as_decided() -> None:
    """A soft-trimmed result keeps head and tail with the trim notice; a cleared one is the
    placeholder. The durable log keeps the full text."""
    tracked = _conversation()
    tracked.prune(trim("t1", head=40, tail=40), clear("t2"))
    messages = to_openai(tracked.history.prompt_view())
    trimmed, cleared = messages[3]["content"], messages[4]["content"]
    assert trimmed.startswith("H" * 40 + "\n...\n" + "T" * 40)
    assert "M" not in trimmed
    assert trimmed.endswith(
        "[Tool result trimmed: kept first 40 chars and last 40 chars of 180 chars.]"
    )
    assert cleared == CLEARED_PLACEHOLDER
    assert tracked.history.entry("t1").tool_results[0].content == LONG


def test_openai_summary_follows_the_pinned_system_prompt_as_a_user_message() -> None:
    """After a compaction, the system prompt (pinned) comes first, then the summary as a user
    message, then the kept entries."""
    tracked = _conversation()
    tracked.compact("u2", summary="Read a.txt; b was missing.")
    messages = to_openai(tracked.history.prompt_view())
    assert messages[0] == {"role": "system", "content": "be brief"}
    assert messages[1]["role"] == "user"
    assert messages[1]["content"].startswith(SUMMARY_PREFIX)
    assert "<summary>\nRead a.txt; b was missing.\n</summary>" in messages[1]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "user", "assistant"]
    assert messages[3]["content"] == "a picture"


# -- Anthropic ------------------------------------------------------------------------


def test_anthropic_messages() -> None:
    """System text goes top level; tool results are user tool_result blocks; tool_use input is
    parsed JSON; data: images become base64 sources."""
    system_blocks, messages = to_anthropic(_conversation().history.prompt_view())
    assert system_blocks == [{"type": "text", "text": "be brief"}]
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "read two files"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "reading"},
                {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "c2", "name": "read", "input": {"path": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": LONG},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "no such file",
                    "is_error": True,
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "both read"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "a picture"}]},
    ]


def test_anthropic_merges_consecutive_roles_so_they_alternate() -> None:
    """Tool results followed by a user message, or two assistant entries in a row, merge."""
    tracked = Tracked()
    tracked.append(
        user("one", id="u1"),
        user("two", id="u2"),
        assistant("thinking aloud", id="a1"),
        assistant(id="a2", calls=[call("c1")]),
        tool("c1", "result", id="t1"),
        user("and then?", id="u3"),
    )
    _, messages = to_anthropic(tracked.history.prompt_view())
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["type"] for b in messages[0]["content"]] == ["text", "text"]
    assert [b["type"] for b in messages[1]["content"]] == ["text", "tool_use"]
    assert [b["type"] for b in messages[2]["content"]] == ["tool_result", "text"]


def test_anthropic_summary_merges_with_first_user_entry() -> None:
    """The compaction summary is a user text block; a kept user entry joins that message."""
    tracked = _conversation()
    tracked.compact("u2", summary="S")
    _, messages = to_anthropic(tracked.history.prompt_view())
    assert [m["role"] for m in messages] == ["user", "assistant"]
    first = messages[0]["content"]
    assert first[0]["type"] == "text" and first[0]["text"].startswith(SUMMARY_PREFIX)
    assert first[1] == {"type": "text", "text": "look"}


def test_anthropic_thinking_needs_a_signature() -> None:
    """Signed thinking is sent back as is; unsigned thinking stays in the log only."""
    tracked = Tracked()
    tracked.append(
        user("q"),
        assistant("a", thinking=[ThinkingBlock("unsigned idea"), ThinkingBlock("signed", "sig")]),
    )
    _, messages = to_anthropic(tracked.history.prompt_view())
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "sig"},
        {"type": "text", "text": "a"},
    ]


def test_anthropic_image_sources() -> None:
    """A URL image is a url source; a data URI uses the entry's media type when it has one."""
    tracked = Tracked()
    tracked.append(
        user("see", images=["https://example.com/cat.jpg", "data:image/gif;base64,R0lG"])
    )
    _, messages = to_anthropic(tracked.history.prompt_view())
    sources = [b["source"] for b in messages[0]["content"] if b["type"] == "image"]
    assert sources == [
        {"type": "url", "url": "https://example.com/cat.jpg"},
        {"type": "base64", "media_type": "image/gif", "data": "R0lG"},
    ]


def test_anthropic_shows_pruned_results_as_decided() -> None:
    """Pruning decisions apply to tool_result content too."""
    tracked = _conversation()
    tracked.prune(clear("t1"))
    _, messages = to_anthropic(tracked.history.prompt_view())
    assert messages[2]["content"][0]["content"] == CLEARED_PLACEHOLDER


# -- token estimate -------------------------------------------------------------------


def test_estimated_tokens_drop_when_a_result_is_pruned() -> None:
    """Clearing or trimming a result takes its share of tokens off, pro rata by characters."""
    tracked = _conversation()
    full = tracked.history.durable_log().total_tokens
    assert tracked.history.prompt_view().estimated_tokens == full
    tracked.prune(trim("t1", head=40, tail=40))
    trimmed = tracked.history.prompt_view().estimated_tokens
    tracked.prune(clear("t1"))
    cleared = tracked.history.prompt_view().estimated_tokens
    assert full > trimmed > cleared
    # 90 tokens for 180 characters; the placeholder keeps 33 of them.
    assert cleared == full - (90 - 90 * len(CLEARED_PLACEHOLDER) // len(LONG))
    # The durable log's total is untouched by pruning.
    assert tracked.history.durable_log().total_tokens == full


def test_appended_messages_only_when_the_held_view_is_the_exact_beginning() -> None:
    tracked = Tracked()
    tracked.append(user("one", id="u1"))
    renderer = PromptRenderer()
    base = {f: renderer.render(tracked.history.prompt_view(), f) for f in ("openai", "anthropic")}
    tracked.append(user("two", id="u2"))
    now = {f: renderer.render(tracked.history.prompt_view(), f) for f in ("openai", "anthropic")}
    openai = appended_messages(base["openai"], now["openai"])
    assert openai is not None and json.loads(openai) == [{"role": "user", "content": "two"}]
    # Anthropic merges the two user turns into one message: the held one changed.
    assert appended_messages(base["anthropic"], now["anthropic"]) is None
    assert appended_messages(now["openai"], now["openai"]) == "[]"


def test_arguments_stored_before_ingest_checked_them_still_render() -> None:
    rendered = _dumps({"deep": [[[]]], "big": 10**30, "lone": "\ud800"})
    assert json.loads(rendered) == {"deep": [[[]]], "big": 10**30, "lone": "\ud800"}


def test_a_view_that_only_appends_renders_as_a_fresh_render_would() -> None:
    """The renderer extends its latest OpenAI rendering when a view only appends to it;
    at every version, in order and out of it, the messages and the request hash are
    what a fresh render gives, and a held view's delta is what was appended."""
    import random

    from projections.prompt_formats import PromptRenderer, render
    from projections.rendered_prompt import appended_messages
    from tests.unit.test_session_history import generate_rich_session

    for seed in (1, 2, 3):
        tracked = generate_rich_session(seed)
        history = tracked.history
        renderer = PromptRenderer()
        rng = random.Random(seed)
        versions = list(range(1, tracked.version + 1))
        versions += [rng.randint(1, tracked.version) for _ in range(40)]
        extended = 0
        previous = None
        for version in versions:
            view = history.prompt_view(version)
            got = renderer.render(view, "openai")
            fresh = render(view, "openai")
            assert (got.messages_json, got.request_hash) == (
                fresh.messages_json,
                fresh.request_hash,
            )
            extended += bool(got.base_hash)
            if previous is not None:
                delta = appended_messages(previous, got)
                expected = appended_messages(previous, fresh)
                assert delta == expected
            previous = got
        assert extended > tracked.version // 3


def test_a_summary_shows_the_blocks_of_the_message_it_carries_in_every_format() -> None:
    """A cut inside the turn: the summary carries the user message's text, and its
    image (and a provider's document) come after that text in the summary's message;
    a format that cannot carry a block lists it as left out, under the message's id."""
    tracked = _conversation()
    image = ImageRef("data:image/png;base64,iVBORw0KGgo=", "image/png")
    document = ProviderItem(
        "anthropic",
        "document",
        '{"type":"document","source":{"type":"text","media_type":"text/plain","data":"spec"}}',
    )
    summary = with_current_request("Read a.txt.", "u2", "look")
    tracked.compact("a3", summary=summary, carried_blocks=(image, document))
    view = tracked.history.prompt_view()
    shown = {
        name: render(view, name) for name in ("openai", "openai-responses", "anthropic", "gemini")
    }
    first = {
        name: request_of(r)["messages"][int(name.startswith("openai"))] for name, r in shown.items()
    }
    assert first["openai"]["content"][0]["text"].startswith(SUMMARY_PREFIX)
    assert first["openai"]["content"][1:] == [
        {"type": "image_url", "image_url": {"url": image.uri}}
    ]
    assert first["openai-responses"]["content"][1:] == [
        {"type": "input_image", "image_url": image.uri, "detail": "auto"}
    ]
    assert first["anthropic"]["content"][1:] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        json.loads(document.json),
    ]
    assert first["gemini"]["parts"][1:] == [
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    ]
    for name, rendered in shown.items():
        left_out = [(o.entry_id, o.kind, o.type) for o in rendered.omitted]
        expected = [] if name == "anthropic" else [("u2", "provider_item", "document")]
        assert left_out == expected, name
