"""The four prompt formats, provider-opaque items and provider-side context management,
through the gRPC API on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import grpc
import pytest

from projections.provider_rules import problems
from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.grpc_calls import Stub, append, new_session, refused, text, tool_result, user
from tests.support.sdk_requests import sdk_problems

FORMATS = {
    "openai": pb.PROMPT_FORMAT_OPENAI,
    "openai-responses": pb.PROMPT_FORMAT_OPENAI_RESPONSES,
    "anthropic": pb.PROMPT_FORMAT_ANTHROPIC,
    "gemini": pb.PROMPT_FORMAT_GEMINI,
}
TOOL = pb.Tool(
    name="read",
    description="Read a file",
    parameters_json='{"type":"object","properties":{"path":{"type":"string"}}}',
)
# As the providers give them, spacing and key order included: kept byte for byte.
THINKING = (
    '{"type": "thinking",  "thinking": "The user wants the file.", '
    '"signature": "EqQBCkYIBxgCKkDk+/a=="}'
)
REDACTED = '{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}'
REASONING = (
    '{"id": "rs_68af", "type": "reasoning", "summary": [], '
    '"encrypted_content": "gAAAAABor9x1_Qx=="}'
)
GEMINI_CALL = (
    '{"functionCall": {"name": "read", "args": {"path": "a.txt"}}, '
    '"thoughtSignature": "CiQB0e2Kb3NpZ25hdHVyZQ=="}'
)
RESULT_IMAGE = (
    '{"type": "image", "source": {"type": "base64", "media_type": "image/png", '
    '"data": "iVBORw0KGgo="}}'
)


ITEMS = {
    ("anthropic", "thinking"): THINKING,
    ("anthropic", "redacted_thinking"): REDACTED,
    ("openai", "reasoning"): REASONING,
    ("gemini", "functionCall"): GEMINI_CALL,
    ("anthropic", "image"): RESULT_IMAGE,
}
# What each format carries back verbatim; it leaves out the rest.
OWN = {
    "anthropic": [THINKING, REDACTED, RESULT_IMAGE],
    "openai-responses": [REASONING],
    "gemini": [GEMINI_CALL],
    "openai": [],
}


def result(call_id: str, output: str, entry_id: str) -> pb.Entry:
    entry = tool_result(call_id, output)
    entry.id = entry_id
    return entry


def item(provider: str, kind: str, body: str) -> pb.ContentBlock:
    return pb.ContentBlock(provider_item=pb.ProviderItem(provider=provider, type=kind, json=body))


def call(call_id: str, name: str = "read", arguments: str = '{"path": "a.txt"}') -> pb.ContentBlock:
    return pb.ContentBlock(
        tool_call=pb.ToolCallBlock(id=call_id, name=name, arguments_json=arguments)
    )


def assistant(*blocks: pb.ContentBlock, **fields: object) -> pb.Entry:
    return pb.Entry(role=pb.ROLE_ASSISTANT, content=list(blocks), **fields)  # type: ignore[arg-type]


def view(store: Stub, session_id: str, provider_format: str, **fields: object) -> pb.PromptView:
    request = pb.GetPromptViewRequest(session_id=session_id, format=FORMATS[provider_format])
    for name, value in fields.items():
        setattr(request, name, value)
    return store.GetPromptView(request)


def request_of(answer: pb.PromptView) -> dict[str, object]:
    return {
        "system": json.loads(answer.system_json) if answer.system_json else None,
        "tools": json.loads(answer.tools_json),
        "messages": json.loads(answer.messages_json),
    }


def assert_accepted(answer: pb.PromptView, provider_format: str) -> None:
    request = request_of(answer)
    assert problems(provider_format, request) == [], answer.messages_json
    assert sdk_problems(provider_format, request) == [], answer.messages_json


def test_broken_sessions_render_requests_every_provider_accepts(store: Stub) -> None:
    """An assistant that speaks first, a system entry and a runtime note mid-turn, a call
    id no provider but Gemini takes, a result taken back so its call waits again, and a
    call still waiting when the view is asked: every format answers a valid request,
    and says what it repaired. The log keeps everything as it was written."""
    session = new_session(store, model="gpt-4o").id
    store.SetSystemPrompt(
        pb.SetSystemPromptRequest(
            session_id=session, system_prompt=pb.SystemPrompt(text="You read files.", tools=[TOOL])
        )
    )
    append(store, session, text(pb.ROLE_ASSISTANT, "Hello! What shall I read?", id="hello"))
    append(store, session, user("a.txt please", id="q1"), user("and quickly", id="q1b"))
    append(store, session, text(pb.ROLE_SYSTEM, "Answer in English.", id="rules"))
    append(store, session, assistant(call("call_1~5f3a.9c"), id="a1"))
    append(store, session, text(pb.ROLE_CUSTOM, "runtime note", id="note", custom_type="n"))
    append(store, session, result("call_1~5f3a.9c", "alpha", "t1"))
    append(store, session, assistant(call("call_2"), call("call_3"), id="a2"))
    append(store, session, tool_result("call_2", "beta"))
    store.RetractEntry(pb.RetractEntryRequest(session_id=session, reason="runtime crashed"))
    for provider_format in FORMATS:
        answer = view(store, session, provider_format)
        assert_accepted(answer, provider_format)
        synthetic = sorted(r.tool_call_id for r in answer.repairs if r.kind == "synthetic_result")
        assert synthetic == ["call_2", "call_3"], provider_format
        leading = [r for r in answer.repairs if r.kind == "leading_user_turn"]
        assert bool(leading) == (provider_format in ("anthropic", "gemini"))
        rewritten = [r for r in answer.repairs if r.kind == "call_id_rewritten"]
        if provider_format == "gemini":
            assert not rewritten
        else:
            assert [r.tool_call_id for r in rewritten] == ["call_1~5f3a.9c"]
            assert rewritten[0].view_tool_call_id in answer.messages_json
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session))
    assert [e.id for e in log.entries] == ["hello", "q1", "q1b", "rules", "a1", "note", "t1", "a2"]
    assert log.entries[6].content[0].tool_result.tool_call_id == "call_1~5f3a.9c"


def test_a_result_for_a_rewritten_call_id_lands_on_the_original_call(store: Stub) -> None:
    session = new_session(store, model="claude-sonnet-4-5").id
    append(store, session, user("read it", id="q"))
    append(store, session, assistant(call("fs.read:1/a"), id="a"))
    answer = view(store, session, "anthropic")
    shown = next(r for r in answer.repairs if r.kind == "call_id_rewritten").view_tool_call_id
    assert shown != "fs.read:1/a"
    append(store, session, result(shown, "contents", "r"))
    entry = store.GetEntry(pb.GetEntryRequest(session_id=session, entry_id="r"))
    assert entry.content[0].tool_result.tool_call_id == "fs.read:1/a"
    assert not store.GetSession(pb.GetSessionRequest(session_id=session)).open_tool_call_ids
    after = view(store, session, "anthropic")
    assert not [r for r in after.repairs if r.kind == "synthetic_result"]
    assert_accepted(after, "anthropic")


def test_opaque_items_come_back_byte_identical_in_their_providers_view(store: Stub) -> None:
    session = new_session(store, model="claude-sonnet-4-5").id
    append(store, session, user("read a.txt", id="q"))
    append(
        store,
        session,
        assistant(
            item("anthropic", "thinking", THINKING),
            item("anthropic", "redacted_thinking", REDACTED),
            item("openai", "reasoning", REASONING),
            text(pb.ROLE_ASSISTANT, "Reading it.").content[0],
            call("call_a"),
            item("gemini", "functionCall", GEMINI_CALL),
            id="a",
        ),
    )
    answer_entry = result("call_a", "a picture", "r")
    answer_entry.content.append(item("anthropic", "image", RESULT_IMAGE))
    append(store, session, answer_entry)
    stored = store.GetEntry(pb.GetEntryRequest(session_id=session, entry_id="a"))
    assert [b.provider_item.json for b in stored.content if b.HasField("provider_item")] == [
        THINKING,
        REDACTED,
        REASONING,
        GEMINI_CALL,
    ]
    assert stored.token_count > len(THINKING + REDACTED + REASONING) // 8  # counted, not 0
    for provider_format, own in OWN.items():
        answer = view(store, session, provider_format)
        assert_accepted(answer, provider_format)
        for body in own:
            assert answer.messages_json.count(body) == 1, (provider_format, body)
        for body in set(ITEMS.values()) - set(own):
            assert body not in answer.messages_json, (provider_format, body)
        # A Gemini call part stands in for its call in Gemini's view; elsewhere the call
        # block shows and the part is left out like any other provider's item.
        left_out = {
            ITEMS[(o.provider, o.type)] for o in answer.omitted if o.kind == "provider_item"
        }
        assert left_out == set(ITEMS.values()) - set(own), provider_format
        assert all(o.reason for o in answer.omitted)


def test_a_provider_item_that_is_no_object_is_refused(store: Stub) -> None:
    session = new_session(store).id
    entry = assistant(item("openai", "reasoning", "[1, 2]"))
    message = refused(lambda: append(store, session, entry), grpc.StatusCode.INVALID_ARGUMENT)
    assert "must be an object" in message
    entry = assistant(item("mistral", "thinking", "{}"))
    message = refused(lambda: append(store, session, entry), grpc.StatusCode.INVALID_ARGUMENT)
    assert "anthropic, openai, gemini" in message


ANTHROPIC_COMPACTION = (
    '{"type": "compaction", "content": "The user asked for a.txt; it says alpha."}'
)
OPENAI_COMPACTION = '{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAABpQ1k=="}'
# Compacted on demand: signed, and so it opens the messages.
ANTHROPIC_SIGNED_COMPACTION = (
    '{"type": "compaction", "content": "The user asked for a.txt; it says alpha.", '
    '"signature": "EuYBCkQY"}'
)


def test_provider_compactions_show_in_their_views_are_audited_and_undo(store: Stub) -> None:
    for provider, body, provider_format in (
        ("anthropic", ANTHROPIC_COMPACTION, "anthropic"),
        ("anthropic", ANTHROPIC_SIGNED_COMPACTION, "anthropic"),
        ("openai", OPENAI_COMPACTION, "openai-responses"),
    ):
        session = new_session(store, model="gpt-4o").id
        append(store, session, user("read a.txt", id="q1"))
        append(store, session, assistant(call("call_1"), id="a1"))
        append(store, session, result("call_1", "alpha " * 200, "t1"))
        append(store, session, text(pb.ROLE_ASSISTANT, "It says alpha.", id="a2"))
        append(store, session, user("and b.txt?", id="q2"))
        recorded = store.RecordCompaction(
            pb.RecordCompactionRequest(
                session_id=session,
                first_kept_entry_id="q2",
                provider_item=pb.ProviderItem(provider=provider, type="compaction", json=body),
            )
        )
        assert recorded.compaction.reason == "provider"
        assert recorded.compaction.provider_item.json == body
        assert recorded.compaction.summary_tokens > 0
        answer = view(store, session, provider_format)
        assert_accepted(answer, provider_format)
        assert answer.messages_json.count(body) == 1
        if body == ANTHROPIC_SIGNED_COMPACTION:  # first, with no user turn before it
            assert json.loads(answer.messages_json)[0]["content"][0] == json.loads(body)
            assert not answer.repairs
        assert "alpha alpha" not in answer.messages_json  # everything before it left out
        assert "and b.txt?" in answer.messages_json
        for other in set(FORMATS) - {provider_format}:
            elsewhere = view(store, session, other)
            assert_accepted(elsewhere, other)
            assert body not in elsewhere.messages_json
            assert [o.kind for o in elsewhere.omitted] == ["compaction_item"]
            if provider == "anthropic":  # its summary is readable: the others show it
                assert "it says alpha." in elsewhere.messages_json
        listed = store.ListCompactions(
            pb.ListCompactionsRequest(session_id=session, min_position=recorded.position)
        ).compactions
        assert [(c.version, c.trigger, c.outcome) for c in listed] == [
            (recorded.version, "provider", "ok")
        ]
        detail = store.GetCompaction(
            pb.GetCompactionRequest(
                session_id=session, version=recorded.version, min_position=recorded.position
            )
        )
        assert detail.compaction.provider_item.json == body and detail.in_force
        assert [e.id for e in detail.replaced_entries] == ["q1", "a1", "t1", "a2"]
        store.UndoCompaction(pb.UndoCompactionRequest(session_id=session, reason="check"))
        undone = view(store, session, provider_format)
        assert body not in undone.messages_json
        assert "alpha alpha" in undone.messages_json
        assert_accepted(undone, provider_format)


KEPT_MESSAGE = (
    '{"id": "msg_1", "type": "message", "status": "completed", "role": "user", '
    '"content": [{"type": "input_text", "text": "read a.txt"}]}'
)


def test_the_messages_a_provider_kept_lead_its_view_and_the_others_read_them(
    store: Stub,
) -> None:
    session = new_session(store, model="gpt-4o").id
    append(store, session, user("read a.txt", id="q1"))
    append(store, session, text(pb.ROLE_ASSISTANT, "alpha " * 200, id="a1"))
    append(store, session, user("and b.txt?", id="q2"))
    kept = pb.ProviderItem(provider="openai", type="message", json=KEPT_MESSAGE)
    compaction = pb.ProviderItem(provider="openai", type="compaction", json=OPENAI_COMPACTION)
    recorded = store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session,
            first_kept_entry_id="q2",
            provider_item=compaction,
            provider_retained=[kept],
        )
    )
    assert list(recorded.compaction.provider_retained) == [kept]
    answer = view(store, session, "openai-responses")
    assert_accepted(answer, "openai-responses")
    shown = json.loads(answer.messages_json)
    assert shown[:2] == [json.loads(KEPT_MESSAGE), json.loads(OPENAI_COMPACTION)]
    for other in set(FORMATS) - {"openai-responses"}:
        elsewhere = view(store, session, other)
        assert_accepted(elsewhere, other)
        assert "read a.txt" in elsewhere.messages_json and KEPT_MESSAGE not in str(elsewhere)
    # Kept items come from the provider that compacted, and with its item only.
    anthropic = pb.ProviderItem(provider="anthropic", type="message", json=KEPT_MESSAGE)
    for refused_request, why in (
        (
            pb.RecordCompactionRequest(
                session_id=session,
                first_kept_entry_id="q2",
                provider_item=compaction,
                provider_retained=[anthropic],
            ),
            "one provider's answer",
        ),
        (
            pb.RecordCompactionRequest(
                session_id=session,
                first_kept_entry_id="q2",
                summary="A summary.",
                provider_retained=[kept],
            ),
            "comes with the provider's compaction item",
        ),
    ):
        message = refused(
            lambda r=refused_request: store.RecordCompaction(r), grpc.StatusCode.INVALID_ARGUMENT
        )
        assert why in message


def test_a_provider_compaction_item_of_another_kind_is_refused(store: Stub) -> None:
    session = new_session(store).id
    append(store, session, user("hi", id="q1"), text(pb.ROLE_ASSISTANT, "hello", id="a1"))
    message = refused(
        lambda: store.RecordCompaction(
            pb.RecordCompactionRequest(
                session_id=session,
                first_kept_entry_id="a1",
                provider_item=pb.ProviderItem(provider="openai", type="reasoning", json=REASONING),
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "not a compaction" in message


def test_anthropic_context_edits_are_recorded_as_a_prune(store: Stub) -> None:
    session = new_session(store, model="claude-sonnet-4-5").id
    append(store, session, user("read three files", id="q"))
    for n in range(3):
        append(store, session, assistant(call(f"c{n}"), id=f"a{n}"))
        append(store, session, result(f"c{n}", f"contents of file {n} " * 50, f"t{n}"))
    report = json.dumps(
        {
            "applied_edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "cleared_tool_uses": 2,
                    "cleared_input_tokens": 1500,
                }
            ]
        }
    )
    pruned = store.RecordPrune(pb.RecordPruneRequest(session_id=session, applied_edits_json=report))
    assert [(p.entry_id, p.action) for p in pruned.entries] == [
        ("t0", pb.PRUNE_ACTION_HARD_CLEAR),
        ("t1", pb.PRUNE_ACTION_HARD_CLEAR),
    ]
    answer = view(store, session, "anthropic")
    assert "contents of file 0" not in answer.messages_json
    assert "contents of file 2" in answer.messages_json
    events = list(store.ReadEvents(pb.ReadEventsRequest(session_id=session)))
    recorded = events[-1].prune_recorded
    assert recorded.applied_edits_json == report
    assert "clear_tool_uses_20250919" in recorded.reason
    message = refused(
        lambda: store.RecordPrune(
            pb.RecordPruneRequest(session_id=session, applied_edits_json='{"applied_edits": 3}')
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "applied_edits" in message


@pytest.mark.parametrize(
    ("report", "says"),
    [
        ('{"applied_edits": []}', "send it only when the response's context_management lists"),
        ("[]", "send it only when the response's context_management lists"),
        ("", "name the tool results to prune in entries, or send the provider's report"),
    ],
)
def test_a_prune_of_nothing_is_refused_saying_what_to_send(
    store: Stub, report: str, says: str
) -> None:
    session = new_session(store, model="claude-sonnet-4-5").id
    append(store, session, user("read a file", id="q"))
    append(store, session, assistant(call("c0"), id="a0"))
    append(store, session, result("c0", "contents", "t0"))
    before = store.GetSession(pb.GetSessionRequest(session_id=session)).version

    message = refused(
        lambda: store.RecordPrune(
            pb.RecordPruneRequest(session_id=session, applied_edits_json=report)
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )

    assert says in message, message
    assert store.GetSession(pb.GetSessionRequest(session_id=session)).version == before
