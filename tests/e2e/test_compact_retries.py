"""A retried Compact compacts once: its idempotency key answers the compaction the
first try recorded, over gRPC, on SQLite and PostgreSQL.

A client whose deadline passed while the summariser worked cannot tell whether
the compaction landed, and sends the call again (with force, a second summary
of a compacted session would lose more detail, and cost a second model call).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from sessionstore_client import Client

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.conftest import RunningServer, start_server
from tests.support.context_engine import create, error_info, of_kind, turn
from tests.support.fake_provider import FIRST_REQUEST_SECONDS, FakeProvider, delay
from tests.support.grpc_calls import Stub, append, refused, user
from tests.support.waiting import eventually


def compact(store: Stub, session_id: str, key: str, **fields: object) -> pb.CompactResponse:
    request = pb.CompactRequest(session_id=session_id, idempotency_key=key, **fields)  # type: ignore[arg-type]
    return store.Compact(request)


def keyed_compactions(store: Stub, session_id: str, key: str) -> list[pb.SessionEvent]:
    compactions = of_kind(store, session_id, "compaction_recorded")
    return [e for e in compactions if e.compaction_recorded.idempotency_key == key]


def compacted_session(store: Stub, **policy: object) -> pb.Session:
    session = create(
        store,
        model="gpt-4o",
        compaction=pb.CompactionPolicy(keep_recent_tokens=1_000, **policy),  # type: ignore[arg-type]
    )
    for n in range(4):
        turn(store, session.id, n, output_chars=3_000)
    return session


def test_the_same_key_twice_compacts_once_and_answers_the_same(store: Stub) -> None:
    session = compacted_session(store)
    first = compact(store, session.id, "c-1", force=True, instructions="keep file names")
    turn(store, session.id, 9, output_chars=3_000)  # a new compaction would have work
    # The retry carries its first try's (now stale) expected version, as a client's would.
    retry = compact(
        store, session.id, "c-1", force=True, instructions="keep file names", expected_version=1
    )

    assert first.compacted and not first.replayed
    assert retry.compacted and retry.replayed
    assert retry.version == first.version
    assert retry.compaction == first.compaction
    assert retry.plan.first_kept_entry_id == first.plan.first_kept_entry_id
    assert len(of_kind(store, session.id, "compaction_recorded")) == 1
    assert first.compaction.idempotency_key == "c-1"
    # A new key is a new request: it compacts.
    assert not compact(store, session.id, "c-2", force=True).replayed
    assert len(of_kind(store, session.id, "compaction_recorded")) == 2


def test_read_events_shows_a_compactions_key_as_it_shows_an_appends(store: Stub) -> None:
    """ReadEvents showed the key an append was made with, not a Compact's: a reader of
    the stream could not tell which call recorded a compaction."""
    session = compacted_session(store)
    append(store, session.id, user("one more"), idempotency_key="a-1")
    compact(store, session.id, "c-1", force=True)
    turn(store, session.id, 9, output_chars=3_000)
    compact(store, session.id, "", force=True)

    appended = of_kind(store, session.id, "entries_appended")
    assert [e.entries_appended.idempotency_key for e in appended].count("a-1") == 1
    compactions = of_kind(store, session.id, "compaction_recorded")
    assert [e.compaction_recorded.idempotency_key for e in compactions] == ["c-1", ""]


def test_the_same_key_with_other_instructions_is_refused(store: Stub) -> None:
    session = compacted_session(store)
    first = compact(store, session.id, "c-1", force=True)
    turn(store, session.id, 9, output_chars=3_000)

    for other in ({"force": True, "instructions": "keep the errors"}, {"force": False}):
        with pytest.raises(grpc.RpcError) as caught:
            compact(store, session.id, "c-1", **other)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_info(caught.value).reason == "idempotency_key_reused"
        assert f"'c-1' was used for a different compaction (version {first.version})" in str(
            caught.value.details()
        )
    assert len(of_kind(store, session.id, "compaction_recorded")) == 1


def test_a_key_names_one_write_whether_append_or_compact(store: Stub) -> None:
    """A session's keys share one table: a key an append took is refused to a Compact
    (never answered with the append's result), and the other way round."""
    session = compacted_session(store)
    appended = append(store, session.id, user("more"), idempotency_key="k-1")

    message = refused(
        lambda: compact(store, session.id, "k-1", force=True), grpc.StatusCode.INVALID_ARGUMENT
    )
    assert message == (
        f"idempotency key 'k-1' was used for an append (version {appended.version}); "
        "a compaction needs a key of its own"
    )
    assert not of_kind(store, session.id, "compaction_recorded")

    done = compact(store, session.id, "k-2", force=True)
    message = refused(
        lambda: append(store, session.id, user("again"), idempotency_key="k-2"),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert message == (
        f"idempotency key 'k-2' was used for a compaction (version {done.version}); "
        "an append needs a key of its own"
    )
    # Each key still answers its own call's retry.
    assert append(store, session.id, user("more"), idempotency_key="k-1").replayed
    assert compact(store, session.id, "k-2", force=True).replayed


def test_a_dry_run_ignores_its_key(store: Stub) -> None:
    session = compacted_session(store)
    planned = compact(store, session.id, "c-1", force=True, dry_run=True)
    done = compact(store, session.id, "c-1", force=True)
    assert not planned.compacted and done.compacted and not done.replayed


def test_a_retry_while_the_first_try_summarises_waits_and_pays_once(
    store: Stub, provider: FakeProvider
) -> None:
    session = compacted_session(
        store,
        summarizer_model="openai/fake-summarizer",
        summarizer_api_base=provider.openai_base,
        summarizer_window_tokens=128_000,
    )
    provider.script(*[delay(1.5)] * 4)
    answers: list[pb.CompactResponse] = []
    errors: list[Exception] = []

    def call() -> None:
        try:
            answers.append(compact(store, session.id, "slow", force=True))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    first = threading.Thread(target=call)
    first.start()
    # The retry arrives while the model still summarises the first try's request.
    assert eventually_called(provider)
    retry = threading.Thread(target=call)
    retry.start()
    first.join(timeout=60)
    retry.join(timeout=60)

    assert not errors, errors
    assert sorted(a.replayed for a in answers) == [False, True]
    assert answers[0].version == answers[1].version
    assert answers[0].compaction == answers[1].compaction
    assert len(of_kind(store, session.id, "compaction_recorded")) == 1
    assert len(provider.requests) == 1, "the retry paid for a second summary"


def eventually_called(provider: FakeProvider, within: float = FIRST_REQUEST_SECONDS) -> bool:
    return eventually(lambda: bool(provider.requests), within)


def test_the_client_and_its_compact_method_take_the_key(server: RunningServer) -> None:
    with Client(f"127.0.0.1:{server.port}") as client:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            session = compacted_session(Stub(channel))
        first = client.compact(session.id, force=True, idempotency_key="client-1")
        retry = client.compact(session.id, force=True, idempotency_key="client-1")
    assert first.compacted and not first.replayed
    assert retry.replayed and retry.version == first.version


def test_every_answer_showing_a_compaction_shows_its_key(store: Stub) -> None:
    """ReadEvents showed a compaction's key; the Compact answer, GetCompaction, the
    durable log and the context report showed the same receipt without it."""
    session = compacted_session(store)
    keyed = compact(store, session.id, "c-1", force=True)
    assert keyed.compaction.idempotency_key == "c-1"
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.compaction == keyed.compaction
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    assert report.latest_compaction == keyed.compaction

    turn(store, session.id, 9, output_chars=3_000)
    keyless = compact(store, session.id, "", force=True)
    assert keyless.compaction.idempotency_key == ""
    for answer in (keyed, keyless):
        shown = store.GetCompaction(
            pb.GetCompactionRequest(
                session_id=session.id, version=answer.version, min_position=answer.position
            )
        )
        assert shown.compaction == answer.compaction
    (recorded,) = [
        e.compaction_recorded
        for e in of_kind(store, session.id, "compaction_recorded")
        if e.version == keyed.version
    ]
    assert recorded == keyed.compaction


# -- retries that reach another server -----------------------------------------------


@contextmanager
def two_servers(database_url: str) -> Iterator[tuple[Stub, Stub]]:
    """Two servers on one database, as behind a load balancer: each with its own caches
    and its own record of the Compact calls running on it."""
    servers = [start_server(database_url), start_server(database_url)]
    channels = [grpc.insecure_channel(f"127.0.0.1:{s.port}") for s in servers]
    try:
        yield Stub(channels[0]), Stub(channels[1])
    finally:
        for channel in channels:
            channel.close()
        for server in servers:
            server.stop(0)


def test_a_retry_on_another_server_answers_the_first_compaction(database_url: str) -> None:
    with two_servers(database_url) as (first_server, other_server):
        # The other server wrote the session last before the first compacted it: its
        # copy of the session is stale when the retry comes.
        session = compacted_session(other_server)
        first = compact(first_server, session.id, "c-1", force=True, instructions="keep names")
        turn(first_server, session.id, 9, output_chars=3_000)
        retry = compact(
            other_server,
            session.id,
            "c-1",
            force=True,
            instructions="keep names",
            expected_version=1,
        )

        assert first.compacted and not first.replayed
        assert retry.compacted and retry.replayed
        assert retry.version == first.version
        assert retry.compaction == first.compaction
        assert retry.compaction.idempotency_key == "c-1"
        assert len(of_kind(other_server, session.id, "compaction_recorded")) == 1
        # Another request under the key is refused there too, as on the first server.
        message = refused(
            lambda: compact(other_server, session.id, "c-1", force=True),
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert f"'c-1' was used for a different compaction (version {first.version})" in message


def in_thread(call: Callable[[], pb.CompactResponse]) -> Callable[[], pb.CompactResponse]:
    """Starts the call in a thread; answers a function that waits for its answer."""
    answer: list[pb.CompactResponse] = []
    errors: list[Exception] = []

    def run() -> None:
        try:
            answer.append(call())
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()

    def wait() -> pb.CompactResponse:
        thread.join(timeout=60)
        assert not errors, errors
        (done,) = answer
        return done

    return wait


def summarised_session(store: Stub, provider: FakeProvider) -> pb.Session:
    return compacted_session(
        store,
        summarizer_model="openai/fake-summarizer",
        summarizer_api_base=provider.openai_base,
        summarizer_window_tokens=128_000,
    )


def unclaimed_url(tmp_path: Path) -> str:
    """A store whose servers share no claim while a model writes (SQLite grants every
    claim): two tries of a Compact can summarise at once, as two on PostgreSQL can
    when a claim goes with a lost connection. On PostgreSQL the claim refuses the
    second try (test_compaction_across_servers.py)."""
    return f"sqlite:///{tmp_path}/sessions.db"


def test_a_retry_racing_its_first_try_on_another_server_answers_it(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """Both tries summarise (no claim keeps them apart); the second to record finds the
    key taken under the session's write lock, records nothing, and answers the
    first's compaction as a retry: replayed, not as its own."""
    with two_servers(unclaimed_url(tmp_path)) as (first_server, other_server):
        session = summarised_session(other_server, provider)
        provider.script(*[delay(1.5)] * 4)
        first = in_thread(lambda: compact(first_server, session.id, "race", force=True))
        assert eventually_called(provider)
        # The retry looks for its key while the first try's summary is still being written.
        retry = in_thread(lambda: compact(other_server, session.id, "race", force=True))
        answers = [first(), retry()]

        assert sorted(a.replayed for a in answers) == [False, True]
        assert all(a.compacted for a in answers)
        assert answers[0].version == answers[1].version
        assert answers[0].compaction == answers[1].compaction
        assert answers[0].plan.first_kept_entry_id == answers[1].plan.first_kept_entry_id
        assert answers[0].compaction.idempotency_key == "race"
        assert len(of_kind(first_server, session.id, "compaction_recorded")) == 1


def test_a_retry_queued_on_another_server_while_the_first_lands_answers_it(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """A try found no compaction under its key and queued behind another compaction on
    its server; meanwhile the call, sent again to another server, landed there (no
    claim kept it from summarising then). When its turn came the try found nothing
    left to compact (it answered so, not replayed): it is a retry of the compaction
    that landed, and answers it."""
    with two_servers(unclaimed_url(tmp_path)) as (first_server, other_server):
        session = summarised_session(other_server, provider)
        provider.script(delay(3.0))
        busy = in_thread(lambda: compact(other_server, session.id, "", force=True))
        assert eventually_called(provider)
        retry = in_thread(lambda: compact(other_server, session.id, "k", force=True))
        time.sleep(0.5)  # the retry has looked for its key, and waits for the busy one
        first = compact(first_server, session.id, "k", force=True)
        busy()
        answer = retry()

        assert first.compacted and not first.replayed
        assert answer.compacted and answer.replayed
        assert answer.version == first.version
        assert answer.compaction == first.compaction
        assert len(keyed_compactions(first_server, session.id, "k")) == 1
