"""`compaction.summarizers = ["provider"]` through the gRPC API, on SQLite and
PostgreSQL: the store asks the conversation's provider to compact (OpenAI's
/responses/compact through litellm, Anthropic's compaction through the
Messages API), against the loopback provider speaking those protocols, and
records the answer as a provider compaction: in that provider's view verbatim
(OpenAI's with the user messages it kept before it), in the audit, undoable; a
provider that fails hands over to the next step."""

from __future__ import annotations

import base64
import json

import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.support.fake_provider import (
    ANTHROPIC_PATH,
    COMPACT_PATH,
    FakeProvider,
    compaction_item,
    fail,
)
from tests.support.grpc_calls import append, text, user

Stub = pb_grpc.SessionStoreStub
FACT = "The staging database password rotates via vault path secret/zebra-7731 every Monday."
READ = pb.Tool(
    name="read",
    description="Read a file",
    parameters_json='{"type":"object","properties":{"path":{"type":"string"}}}',
)
MODELS = {
    "openai": ("openai/gpt-4o", pb.PROMPT_FORMAT_OPENAI_RESPONSES, COMPACT_PATH),
    # A model that compacts, and, as every Claude model from 4.6 on, takes no prefill.
    "anthropic": ("anthropic/claude-sonnet-4-6", pb.PROMPT_FORMAT_ANTHROPIC, ANTHROPIC_PATH),
}


@pytest.fixture
def provider(provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    # Keys in the environment, as a deployment against the providers has them: the
    # compaction takes them from there, not the placeholder a keyless local server gets.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    return provider


def _session(
    store: Stub,
    provider: FakeProvider,
    model: str,
    chain: list[str],
    steps: int = 6,
    user_heavy: bool = False,
) -> str:
    """A session with ``steps`` turns of ~5,000 tokens each, most of them the
    assistant's (a tool's output would weigh as much), or the user's."""
    policy = pb.CompactionPolicy(
        summarizers=pb.SummarizerChain(steps=chain),
        summarizer_api_base=provider.openai_base,
        mode="manual",
    )
    settings = pb.SessionSettings(model=model, context_window_tokens=200_000, compaction=policy)
    session = store.CreateSession(pb.CreateSessionRequest(settings=settings))
    prompt = pb.SystemPrompt(text="You review modules.", tools=[READ])
    store.SetSystemPrompt(pb.SetSystemPromptRequest(session_id=session.id, system_prompt=prompt))
    append(store, session.id, user(FACT, id="fact"))
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Noted."))
    for step in range(steps):
        bulk = "the module list is in order. " * 850
        asked, answer = f"Step {step}: review the module list.", f"Step {step} reviewed: "
        if user_heavy:
            asked += bulk
        else:
            answer += bulk
        append(store, session.id, user(asked))
        append(store, session.id, text(pb.ROLE_ASSISTANT, answer))
    return session.id


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_provider_compacts_and_its_item_is_recorded_viewed_audited_and_undone(
    store: Stub, provider: FakeProvider, name: str
) -> None:
    model, view_format, path = MODELS[name]
    session_id = _session(store, provider, model, ["provider"])

    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert compacted.compacted, compacted.reason
    receipt = compacted.compaction
    assert receipt.summarizer_model.startswith("provider:")
    assert [(a.summarizer, a.outcome) for a in receipt.attempts] == [("provider", "used")]
    item = receipt.provider_item
    assert (item.provider, item.type) == (name, "compaction")
    sent = [r for r in provider.requests if r.path == path]
    assert len(sent) == 1 and "zebra-7731" in sent[0].text()
    if name == "anthropic":
        # Compacted on demand: the covered part as it stands, its last turn the assistant's.
        assert sent[0].body["compaction"] == {"type": "summarize"}
        assert sent[0].headers["anthropic-beta"] == "compact-2026-09-04"
        assert sent[0].body["messages"][-1]["role"] == "assistant"
        # The conversation's system prompt and tools, as its requests send them.
        assert sent[0].body["system"][0]["text"] == "You review modules."
        assert [t["name"] for t in sent[0].body["tools"]] == ["read"]
        assert set(json.loads(item.json)) == {"type", "content", "signature"}
        kept = json.loads(item.json)["content"]
    else:
        # The item as the provider sent it, nothing added by the way.
        assert set(json.loads(item.json)) == {"type", "id", "encrypted_content"}
        kept = base64.b64decode(json.loads(item.json)["encrypted_content"]).decode()
    assert "zebra-7731" in kept  # what the provider made of the covered part

    # That provider's view carries the item verbatim, in place of the part it covers:
    # Anthropic's signed block opens the messages, as the assistant's.
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id, format=view_format))
    shown = json.loads(view.messages_json)
    if name == "anthropic":
        assert shown[0] == {"role": "assistant", "content": [json.loads(item.json)]}
        assert shown[1]["role"] == "user" and not view.repairs
    else:
        assert json.loads(item.json) in shown
    assert '"Noted."' not in view.messages_json  # the covered turn, as a message of its own

    # The audit lists it; an undo brings the covered entries back.
    listed = store.ListCompactions(
        pb.ListCompactionsRequest(session_id=session_id, min_position=compacted.position)
    ).compactions
    assert [(c.version, c.summarizer_model) for c in listed] == [
        (compacted.version, receipt.summarizer_model)
    ]
    store.UndoCompaction(pb.UndoCompactionRequest(session_id=session_id, reason="check"))
    again = store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id, format=view_format))
    assert "zebra-7731" in again.messages_json


def test_the_user_messages_openai_kept_stand_before_its_item(
    store: Stub, provider: FakeProvider
) -> None:
    model, view_format, path = MODELS["openai"]
    session_id = _session(store, provider, model, ["provider"])
    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert compacted.compacted, compacted.reason
    receipt = compacted.compaction
    (sent,) = [r for r in provider.requests if r.path == path]
    asked = [m for m in sent.body["input"] if m.get("role") == "user"]
    retained = [json.loads(r.json) for r in receipt.provider_retained]
    assert len(asked) > 1 and [m["role"] for m in retained] == ["user"] * len(asked)
    assert FACT in retained[0]["content"][0]["text"]

    # The window the provider answered leads the view, as it answered it.
    view = json.loads(
        store.GetPromptView(
            pb.GetPromptViewRequest(session_id=session_id, format=view_format)
        ).messages_json
    )
    item = json.loads(receipt.provider_item.json)
    assert view[: len(retained) + 1] == [*retained, item]
    # Other views read the kept messages after the note that the item is opaque.
    chat = store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id)).messages_json
    assert FACT in chat and "opaque" in chat
    # The audit reads them back from the store as recorded.
    audited = store.GetCompaction(
        pb.GetCompactionRequest(session_id=session_id, version=compacted.version)
    ).compaction
    assert list(audited.provider_retained) == list(receipt.provider_retained)

    # Erasing a message it kept erases the copy the compaction holds, in every view.
    store.EraseEntries(
        pb.EraseEntriesRequest(session_id=session_id, entry_ids=["fact"], reason="asked")
    )
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session_id))
    assert log.compaction.tainted and not log.compaction.provider_retained
    for shown in (pb.PROMPT_FORMAT_UNSPECIFIED, view_format):
        request = pb.GetPromptViewRequest(session_id=session_id, format=shown)
        assert "zebra-7731" not in store.GetPromptView(request).messages_json


def test_an_answer_that_would_not_shrink_the_prompt_hands_over_to_the_next_step(
    store: Stub, provider: FakeProvider
) -> None:
    # OpenAI keeps the user's messages, here nearly the whole conversation.
    chain = ["provider", "offline"]
    session_id = _session(store, provider, MODELS["openai"][0], chain, user_heavy=True)
    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert compacted.compacted, compacted.reason
    (tried, used) = compacted.compaction.attempts
    assert (tried.summarizer, tried.outcome, used.summarizer) == (
        "provider",
        "too-large",
        "offline",
    )
    assert "no fewer than" in tried.reason


def test_forced_on_a_prompt_that_fits_the_hard_drop_leaves_it_as_it_is(
    store: Stub, provider: FakeProvider
) -> None:
    session_id = _session(store, provider, "openai/gpt-4o", ["provider"])
    provider.script(fail("server_error"))
    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert not compacted.compacted
    assert "would not shrink it" in compacted.reason
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session_id))
    assert not log.HasField("compaction") and log.entries[0].id == "fact"


def test_a_provider_that_fails_hands_over_to_the_next_step(
    store: Stub, provider: FakeProvider
) -> None:
    session_id = _session(store, provider, "openai/gpt-4o", ["provider", "offline"])
    provider.script(fail("server_error"))
    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert compacted.compacted, compacted.reason
    attempts = [(a.summarizer, a.outcome) for a in compacted.compaction.attempts]
    assert attempts == [("provider", "failed"), ("offline", "used")]
    assert not compacted.compaction.HasField("provider_item")
    assert "Recall(session_id, query)" in compacted.compaction.summary


def test_an_answer_the_session_refuses_hands_over_to_the_next_step(
    store: Stub, provider: FakeProvider
) -> None:
    # An item the store could never render again: a lone surrogate in its content.
    session_id = _session(store, provider, "openai/gpt-4o", ["provider", "offline"])
    provider.script(compaction_item(encrypted_content="\ud800"))
    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert compacted.compacted, compacted.reason
    (refused, used) = compacted.compaction.attempts
    assert (refused.summarizer, refused.outcome, used.summarizer, used.outcome) == (
        "provider",
        "failed",
        "offline",
        "used",
    )
    assert "the session refused what it wrote" in refused.reason
    assert "lone surrogate" in refused.reason
    # Asked once: the session had not moved, so nothing was planned again.
    assert [r.path for r in provider.requests] == [COMPACT_PATH]
    failed = pb.ListCompactionsRequest(session_id=session_id, outcome="failed")
    rows = store.ListCompactions(failed).compactions
    assert [(r.summarizer_model, r.stage) for r in rows] == [("provider", "verify")]


def test_after_a_clients_threshold_block_the_provider_reads_its_summary_as_text(
    store: Stub, provider: FakeProvider
) -> None:
    session_id = _session(store, provider, MODELS["anthropic"][0], ["provider", "offline"])
    # The client's threshold compaction: its block unsigned, after a turn in its view,
    # where an on-demand request takes a block only first (compaction_block_misplaced).
    block = {"type": "compaction", "content": f"Summary so far: {FACT}"}
    first_kept = store.GetDurableLog(pb.GetViewRequest(session_id=session_id)).entries[4].id
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session_id,
            first_kept_entry_id=first_kept,
            provider_item=pb.ProviderItem(
                provider="anthropic", type="compaction", json=json.dumps(block)
            ),
        )
    )
    compacted = store.Compact(pb.CompactRequest(session_id=session_id, force=True))
    assert compacted.compacted, compacted.reason
    attempts = [(a.summarizer, a.outcome, a.reason) for a in compacted.compaction.attempts]
    assert [a[:2] for a in attempts] == [("provider", "used")], attempts
    (sent,) = [r for r in provider.requests if r.path == ANTHROPIC_PATH]
    sent_blocks = [b for m in sent.messages for b in m["content"] if isinstance(b, dict)]
    assert not [b for b in sent_blocks if b.get("type") == "compaction"]
    # Its summary went as text, first, so the provider's summary carries the fact on.
    assert "Summary so far" in json.dumps(sent.messages[0]) and "zebra-7731" in sent.text()
