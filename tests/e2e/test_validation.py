"""What a new user and an independent client ran into, each answered as the README says."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.grpc_calls import (
    Stub,
    append,
    new_session,
    refused,
    text,
    tool_call,
    tool_result,
    user,
)


def test_an_unknown_enum_value_is_invalid_argument_naming_the_field(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("hi"))
    message = refused(
        lambda: store.GetPromptView(
            pb.GetPromptViewRequest(session_id=session.id, format=7)  # type: ignore[arg-type]
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "format 7" in message and "PROMPT_FORMAT_ANTHROPIC" in message
    message = refused(
        lambda: append(store, session.id, pb.Entry(role=9, content=[])),  # type: ignore[arg-type]
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "entries[0].role 9" in message


def test_negative_usage_and_expected_version_are_malformed(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("hi"))
    answer = text(pb.ROLE_ASSISTANT, "hello", usage=pb.Usage(input_tokens=5, output_tokens=-3))
    message = refused(lambda: append(store, session.id, answer), grpc.StatusCode.INVALID_ARGUMENT)
    assert "usage.output_tokens is -3" in message
    message = refused(
        lambda: append(store, session.id, user("again"), expected_version=-1),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "negative" in message
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 2


def test_max_entry_bytes_must_fit_in_one_message(store: Stub) -> None:
    message = refused(
        lambda: new_session(store, max_entry_bytes=64 << 20), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert "over this server's limit" in message
    session = new_session(store)
    refused(
        lambda: store.UpdateSettings(
            pb.UpdateSettingsRequest(
                session_id=session.id, settings=pb.SessionSettings(max_entry_bytes=1 << 30)
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )


def test_settings_updates_write_only_real_changes_and_labels_can_be_removed(store: Stub) -> None:
    session = new_session(store, title="triage", labels={"team": "infra", "ticket": "42"})
    same = store.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session.id, settings=pb.SessionSettings(title="triage"))
    )
    assert same.version == session.version
    removed = store.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session.id, remove_labels=["ticket", "absent"])
    )
    assert dict(removed.settings.labels) == {"team": "infra"}
    assert removed.version == session.version + 1
    cleared = store.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session.id, remove_labels=["team"])
    )
    assert dict(cleared.settings.labels) == {}


def test_page_size_zero_is_the_default_page_and_negative_is_refused(store: Stub) -> None:
    for _ in range(3):
        new_session(store)
    page = store.ListSessions(pb.ListSessionsRequest(page_size=0))
    assert len(page.sessions) == 3 and not page.next_page_token
    one = store.ListSessions(pb.ListSessionsRequest(page_size=1))
    assert len(one.sessions) == 1 and one.next_page_token
    message = refused(
        lambda: store.ListSessions(pb.ListSessionsRequest(page_size=-1)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "page_size -1" in message


def test_as_of_times(store: Stub) -> None:
    """After the last event: the view as it stood then (the latest). In the future, or before the
    session began: OUT_OF_RANGE."""
    session = new_session(store)
    append(store, session.id, user("hi"))

    def at(moment: datetime) -> pb.DurableLog:
        stamp = Timestamp()
        stamp.FromDatetime(moment)
        return store.GetDurableLog(pb.GetViewRequest(session_id=session.id, time=stamp))

    assert len(at(datetime.now(UTC)).entries) == 1
    assert "future" in refused(
        lambda: at(datetime.now(UTC) + timedelta(hours=1)), grpc.StatusCode.OUT_OF_RANGE
    )
    assert "did not exist yet" in refused(
        lambda: at(datetime(2020, 1, 1, tzinfo=UTC)), grpc.StatusCode.OUT_OF_RANGE
    )
    bad = pb.GetViewRequest(session_id=session.id, time=Timestamp(seconds=1, nanos=-5))
    assert "not a valid time" in refused(
        lambda: store.GetDurableLog(bad), grpc.StatusCode.INVALID_ARGUMENT
    )


def test_compaction_without_token_figures_is_counted_by_the_store(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("read a.txt please"))
    append(store, session.id, tool_call("c1", "read", {"path": "a.txt"}))
    append(store, session.id, tool_result("c1", "A" * 5_000))
    (kept,) = append(store, session.id, user("and now?")).entry_ids
    before = store.GetDurableLog(pb.GetViewRequest(session_id=session.id)).total_tokens
    recorded = store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="Read a.txt: all As.", first_kept_entry_id=kept
        )
    ).compaction
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert recorded.tokens_before == before
    assert recorded.tokens_after == log.total_tokens < before
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Nothing more."))
    assert refused(
        lambda: store.RecordCompaction(
            pb.RecordCompactionRequest(
                session_id=session.id, summary="s", first_kept_entry_id="nope"
            )
        ),
        grpc.StatusCode.NOT_FOUND,
    )


def test_system_prompt_survives_compaction_in_the_prompt_view(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, text(pb.ROLE_SYSTEM, "You are terse."), user("one"))
    append(store, session.id, text(pb.ROLE_ASSISTANT, "A"))
    (kept,) = append(store, session.id, user("two")).entry_ids
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="said one", first_kept_entry_id=kept
        )
    )
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    messages = json.loads(view.messages_json)
    assert messages[0] == {"role": "system", "content": "You are terse."}
    assert "said one" in messages[1]["content"]
    anthropic = store.GetPromptView(
        pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_ANTHROPIC)
    )
    assert json.loads(anthropic.system_json) == [{"type": "text", "text": "You are terse."}]
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert [e.content[0].text.text for e in log.pinned] == ["You are terse."]


def test_a_trim_without_sizes_takes_the_sessions_pruning_policy(store: Stub) -> None:
    session = store.CreateSession(
        pb.CreateSessionRequest(
            settings=pb.SessionSettings(
                pruning=pb.PruningPolicy(soft_trim_head_chars=30, soft_trim_tail_chars=20)
            )
        )
    )
    append(store, session.id, user("read it"))
    append(store, session.id, tool_call("c1", "read", {"path": "a.txt"}))
    (result,) = append(store, session.id, tool_result("c1", "A" * 1_000)).entry_ids
    recorded = store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session.id,
            entries=[pb.PrunedEntry(entry_id=result, action=pb.PRUNE_ACTION_SOFT_TRIM)],
        )
    )
    assert [(e.head_chars, e.tail_chars) for e in recorded.entries] == [(30, 20)]
    explicit = store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session.id,
            entries=[
                pb.PrunedEntry(
                    entry_id=result, action=pb.PRUNE_ACTION_SOFT_TRIM, head_chars=0, tail_chars=5
                )
            ],
        )
    )
    assert [(e.head_chars, e.tail_chars) for e in explicit.entries] == [(0, 5)]
