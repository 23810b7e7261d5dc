"""A cut inside the turn in progress, end to end over gRPC, SQLite and PostgreSQL.

When the turn in progress outgrows the window, the hard drop cuts inside it and
the summary carries the user message that began it. That message is carried
whole: its text in the summary, its images beside it, so the model still sees the
picture it was just sent, and the prompt's tokens count what it shows.
"""

from __future__ import annotations

import json
from typing import Any

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters.tokenizers import IMAGE_TOKENS, tokenizer_for
from tests.support.context_engine import create, of_kind, view
from tests.support.grpc_calls import Stub, append, text, tool_call, tool_result, user

# A 1x1 PNG, inline.
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
IMAGE_URI = f"data:image/png;base64,{PIXEL}"
ASKED = "What is wrong with the chart in this screenshot? Fix the code that draws it."


def image_message(entry_id: str) -> pb.Entry:
    return pb.Entry(
        id=entry_id,
        role=pb.ROLE_USER,
        content=[
            pb.ContentBlock(text=pb.TextBlock(text=ASKED)),
            pb.ContentBlock(image=pb.ImageBlock(uri=IMAGE_URI, media_type="image/png")),
        ],
    )


def work(store: Stub, session_id: str, steps: range) -> None:
    """Steps of the turn in progress: the assistant's long reasoning (which no trim
    shortens) with a call, and the call's result."""
    for n in steps:
        reasoning = " ".join(
            f"Step {n}: chart_{i} plots series_{i} on axis_{i}." for i in range(120)
        )
        call = tool_call(f"call_{n}", "read", {"path": f"src/chart_{n}.py"})
        call.content.insert(0, pb.ContentBlock(text=pb.TextBlock(text=reasoning)))
        append(store, session_id, call)
        output = "".join(f"line {i}: plot(series_{i}, color={i})\n" for i in range(200))
        append(store, session_id, tool_result(f"call_{n}", output))


def openai_images(served: pb.PromptView) -> list[str]:
    found = []
    for message in json.loads(served.messages_json):
        if message["role"] == "user" and isinstance(message["content"], list):
            found += [p["image_url"]["url"] for p in message["content"] if p["type"] == "image_url"]
    return found


def anthropic_images(served: pb.PromptView) -> list[dict[str, Any]]:
    return [
        block["source"]
        for message in json.loads(served.messages_json)
        if message["role"] == "user"
        for block in message["content"]
        if block["type"] == "image"
    ]


def cut_inside(store: Stub, session_id: str) -> list[pb.Compaction]:
    """The compactions that cut inside the turn of the image message."""
    recorded = of_kind(store, session_id, "compaction_recorded")
    return [
        e.compaction_recorded
        for e in recorded
        if e.compaction_recorded.details.get("carriedUserMessage") == "u-image"
    ]


def assert_carried_whole(store: Stub, session_id: str) -> pb.Compaction:
    """The summary in force carries the image message: its text in the summary, its
    image in every view, its image's tokens in the count."""
    served = view(store, session_id)
    assert served.estimated_tokens <= served.budget_tokens
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session_id))
    receipt = report.latest_compaction
    assert "(entry u-image), word for word:\n" + ASKED in receipt.summary
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session_id))
    assert "u-image" not in [e.id for e in log.entries]
    # The model sees the picture after the cut, in each format, after the summary
    # that carries the message's text.
    assert openai_images(served) == [IMAGE_URI]
    carrying = next(m for m in json.loads(served.messages_json) if m["role"] == "user")
    assert carrying["content"][0]["type"] == "text"
    assert ASKED in carrying["content"][0]["text"]
    assert carrying["content"][1]["image_url"]["url"] == IMAGE_URI
    anthropic = view(store, session_id, format=pb.PROMPT_FORMAT_ANTHROPIC)
    assert anthropic_images(anthropic) == [
        {"type": "base64", "media_type": "image/png", "data": PIXEL}
    ]
    assert anthropic.estimated_tokens == served.estimated_tokens
    # What the prompt shows is what it counts: the summary's text and the image.
    counted = tokenizer_for("gpt-4o").count_text(receipt.summary) + IMAGE_TOKENS
    assert receipt.summary_tokens == report.summary_tokens == counted
    assert report.used_tokens == served.uncalibrated_tokens
    parts = (
        report.system_prompt_tokens,
        report.summary_tokens,
        report.pinned_tokens,
        report.messages_tokens,
    )
    assert sum(parts) == served.uncalibrated_tokens
    return receipt


def test_a_cut_inside_the_turn_keeps_the_image_the_user_just_sent(store: Stub) -> None:
    """The agent loop reads the view after each step; the turn outgrows the window,
    so the hard drop cuts inside it, and the summaries after carry the message on."""
    session = create(store, model="gpt-4o", context_window_tokens=16_384)
    for n in range(3):
        append(store, session.id, user(f"Earlier question {n}: run the tests."))
        append(store, session.id, text(pb.ROLE_ASSISTANT, f"Earlier answer {n}: all passed."))
    append(store, session.id, image_message("u-image"))
    step = 0
    while not cut_inside(store, session.id):
        assert step < 20, "the turn never outgrew the window"
        work(store, session.id, range(step, step + 1))
        view(store, session.id)
        step += 1
    (inside,) = cut_inside(store, session.id)
    assert inside.fallback_stage == "hard-drop"
    assert assert_carried_whole(store, session.id).version == inside.version
    # The turn goes on past later cuts: each summary carries the message on.
    for more in range(step, step + 6):
        work(store, session.id, range(more, more + 1))
        view(store, session.id)
    assert assert_carried_whole(store, session.id).version > inside.version
