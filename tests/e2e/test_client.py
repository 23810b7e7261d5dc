"""The Python client against a running server, on SQLite and PostgreSQL: values in and
out as dataclasses, turns in one call, retries that never append twice, typed errors
with the server's ErrorInfo, and the address, tokens and TLS as a user sets them."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from sessionstore_client import (
    ROUND_ROBIN,
    TLS,
    AsyncClient,
    Client,
    Compaction,
    CompactionPolicy,
    EntriesAppended,
    Entry,
    ImageBlock,
    PromptFormat,
    PruningPolicy,
    Retry,
    Role,
    SessionSettings,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolFilter,
    ToolResultBlock,
    Usage,
    ViewAfterAppend,
    errors,
)

from services.app.authentication import new_token, token_entry_toml
from services.app.tenancy import Role as TenantRole
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.e2e.test_tls import Pki, _serve, pki  # noqa: F401  (the module's PKI fixture)
from tests.support.cutting_proxy import cutting_proxy


@pytest.fixture
def client(server: RunningServer) -> Iterator[Client]:
    with Client(f"127.0.0.1:{server.port}") as client:
        yield client


def user(text: str) -> Entry:
    return Entry(role=Role.USER, content=[TextBlock(text)])


def test_settings_and_entries_come_back_as_they_were_sent(client: Client) -> None:
    settings = SessionSettings(
        model="gpt-4o",
        context_window_tokens=64_000,
        title="triage",
        labels={"team": "infra", "ticket": "42"},
        pruning=PruningPolicy(mode="cache-ttl", ttl_seconds=60, tools=ToolFilter(deny=["bash"])),
        compaction=CompactionPolicy(threshold_ratio=0.7, keep_recent_tokens=4_000),
    )
    session = client.create_session("client-round-trip", settings=settings)
    assert session.settings is not None
    assert session.settings.labels == settings.labels
    assert session.settings.pruning is not None and session.settings.pruning.tools is not None
    assert session.settings.pruning.tools.deny == ["bash"]
    assert session.settings.compaction is not None
    assert session.settings.compaction.threshold_ratio == pytest.approx(0.7)
    moment = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    sent = [
        Entry(
            id="q",
            timestamp=moment,
            role=Role.USER,
            content=[TextBlock("what is here?"), ImageBlock("https://x.test/a.png", "image/png")],
            metadata={"source": "test"},
        ),
        Entry(
            id="a",
            role=Role.ASSISTANT,
            content=[
                ThinkingBlock("look first", signature="sig=="),
                ToolCallBlock("call_1", "ls", '{"path": "."}'),
            ],
            usage=Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100),
        ),
        Entry(id="r", role=Role.TOOL, content=[ToolResultBlock("call_1", "a.png", is_error=True)]),
    ]
    appended = client.append_entries(session.id, entries=sent)
    assert appended.entry_ids == ["q", "a", "r"]
    for original in sent:
        stored = client.get_entry(session.id, entry_id=original.id)
        assert stored.content == original.content
        assert stored.role is original.role
        assert stored.metadata == original.metadata
        assert stored.usage == (original.usage or None)
        assert stored.version == appended.version
        assert stored.token_count > 0
    assert client.get_entry(session.id, entry_id="q").timestamp == moment
    assert client.get_session(session.id).open_tool_call_ids == []


def test_a_turn_in_one_call_answers_the_view_after_the_append(client: Client) -> None:
    session = client.create_session()
    answer = client.append_entries(
        session.id,
        entries=[user("hello")],
        view_after_append=ViewAfterAppend(format=PromptFormat.ANTHROPIC),
    )
    view = answer.view_after_append
    assert view is not None and view.version == answer.version
    assert view.format is PromptFormat.ANTHROPIC
    assert json.loads(view.messages_json) == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    ]


def test_a_retried_append_reuses_its_key_and_is_written_once(server: RunningServer) -> None:
    with cutting_proxy(server.port) as proxy, Client(f"127.0.0.1:{proxy.port}") as client:
        session = client.create_session()
        proxy.cut_next_answer()
        answer = client.append_entries(session.id, entries=[user("only once")])
        assert proxy.cuts == 1  # the first try's answer was lost
        assert answer.replayed  # the retry was answered from the first append
        appends = [
            e for e in client.read_events(session.id) if isinstance(e.event, EntriesAppended)
        ]
        assert len(appends) == 1
        assert client.get_session(session.id).entry_count == 1


def test_a_retried_compact_reuses_its_key_and_compacts_once(server: RunningServer) -> None:
    with cutting_proxy(server.port) as proxy, Client(f"127.0.0.1:{proxy.port}") as client:
        session = client.create_session()
        for n in range(6):
            client.append_entries(session.id, entries=[user(f"question {n} " + "words " * 200)])
        proxy.cut_next_answer()
        answer = client.compact(session.id, force=True)
        assert proxy.cuts == 1  # the first try's answer was lost
        assert answer.compacted and answer.replayed  # answered from the first's compaction
        compactions = [e for e in client.read_events(session.id) if isinstance(e.event, Compaction)]
        assert len(compactions) == 1
        assert answer.version == compactions[0].version


def test_recall_and_the_read_model_status_are_retried_as_reads(server: RunningServer) -> None:
    with cutting_proxy(server.port) as proxy, Client(f"127.0.0.1:{proxy.port}") as client:
        session = client.create_session()
        client.append_entries(session.id, entries=[user("The build tag is orchid-42.")])
        proxy.cut_next_answer()
        assert client.recall(session.id, query="orchid").hits
        proxy.cut_next_answer()
        assert client.get_read_model_status() is not None
        assert proxy.cuts == 2  # each first try's answer was lost


def test_threads_first_calls_open_one_channel(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[grpc.Channel] = []

    def insecure_channel(*args: Any, **kwargs: Any) -> grpc.Channel:
        opened.append(channel := open_channel(*args, **kwargs))
        return channel

    open_channel = grpc.insecure_channel
    monkeypatch.setattr(grpc, "insecure_channel", insecure_channel)
    client = Client(f"127.0.0.1:{server.port}")
    together = threading.Barrier(8)

    def first_call(_: int) -> object:
        together.wait()
        return client.list_sessions()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns often: their first calls race
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(first_call, range(8)))
    finally:
        sys.setswitchinterval(interval)
    client.close()
    # One channel, the one close() closed: no other left open beside it.
    assert len(opened) == 1


def test_a_call_a_retry_could_repeat_is_not_retried(server: RunningServer) -> None:
    with cutting_proxy(server.port) as proxy, Client(f"127.0.0.1:{proxy.port}") as client:
        client.list_sessions()  # connected
        proxy.cut_next_answer()
        with pytest.raises(errors.Unavailable):
            client.create_session("made-once")
        # The server made it: a second try would have answered ALREADY_EXISTS.
        assert client.get_session("made-once").version == 1


def test_each_refusal_is_its_own_exception_with_the_servers_error_info(client: Client) -> None:
    session = client.create_session("typed-errors")
    client.append_entries(session.id, entries=[user("hi")])
    calling = client.create_session()
    call = ToolCallBlock("call_1", "ls", '{"path": "."}')
    client.append_entries(calling.id, entries=[Entry(role=Role.ASSISTANT, content=[call])])
    cases: list[tuple[type[errors.SessionStoreError], grpc.StatusCode, str, object]] = [
        (
            errors.NotFound,
            grpc.StatusCode.NOT_FOUND,
            "session_not_found",
            lambda: client.get_session("missing"),
        ),
        (
            errors.AlreadyExists,
            grpc.StatusCode.ALREADY_EXISTS,
            "session_exists",
            lambda: client.create_session(session.id),
        ),
        (
            errors.InvalidArgument,
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid_request",
            lambda: client.append_entries(session.id, entries=[Entry(content=[TextBlock("?")])]),
        ),
        (
            errors.VersionConflict,
            grpc.StatusCode.ABORTED,
            "version_conflict",
            lambda: client.append_entries(session.id, entries=[user("x")], expected_version=1),
        ),
        (
            errors.FailedPrecondition,
            grpc.StatusCode.FAILED_PRECONDITION,
            "unknown_tool_call",
            lambda: client.abandon_tool_calls(session.id, tool_call_ids=["nope"]),
        ),
        (
            errors.FailedPrecondition,
            grpc.StatusCode.FAILED_PRECONDITION,
            "tool_calls_open",
            lambda: client.append_entries(calling.id, entries=[user("and now?")]),
        ),
    ]
    for kind, code, reason, call in cases:
        with pytest.raises(kind) as raised:
            call()  # type: ignore[operator]
        assert isinstance(raised.value, errors.SessionStoreError)
        assert raised.value.code is code
        assert raised.value.message
        assert raised.value.reason == reason, raised.value
    with pytest.raises(errors.VersionConflict) as conflict:
        client.append_entries(session.id, entries=[user("x")], expected_version=1)
    assert conflict.value.metadata == {"expected_version": "1", "current_version": "2"}
    small = client.create_session(settings=SessionSettings(context_window_tokens=8_000))
    client.append_entries(small.id, entries=[user("hi")])
    with pytest.raises(errors.WindowTooSmall) as refused:
        client.get_prompt_view(small.id)
    assert isinstance(refused.value, errors.FailedPrecondition)
    assert refused.value.reason == "CONTEXT_WINDOW_TOO_SMALL"
    assert refused.value.metadata["window_tokens"] == "8000"
    assert refused.value.metadata["minimum_tokens"] == "16000"


def test_an_unreachable_server_is_unavailable_after_the_retries(tmp_path: Path) -> None:
    server = start_server(f"sqlite:///{tmp_path}/gone.db")
    address = f"127.0.0.1:{server.port}"
    server.stop(0)
    retry = Retry(attempts=3, backoff=0.05)
    with Client(address, timeout=5, retry=retry) as client, pytest.raises(errors.Unavailable):
        client.get_session("anything")


def test_the_address_and_token_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = new_token()
    tokens_file = tmp_path / "tokens.toml"
    tokens_file.write_text(
        token_entry_toml("ci", "acme", TenantRole.TENANT, token)
        + token_entry_toml("reader", "acme", TenantRole.AUDITOR, (reader := new_token()))
    )
    server = start_server(f"sqlite:///{tmp_path}/s.db", tokens_file=tokens_file)
    try:
        monkeypatch.setenv("SESSIONSTORE_ADDRESS", f"127.0.0.1:{server.port}")
        with Client(token="") as anonymous, pytest.raises(errors.Unauthenticated) as unknown:
            anonymous.list_sessions()
        assert unknown.value.reason == "unauthenticated"
        monkeypatch.setenv("SESSIONSTORE_TOKEN", token)
        with Client() as client:
            assert client.address == f"127.0.0.1:{server.port}"
            session = client.create_session()
        with Client(token=reader) as auditor:
            assert auditor.get_session(session.id).id == session.id
            with pytest.raises(errors.PermissionDenied) as denied:
                auditor.append_entries(session.id, entries=[user("no")])
            assert denied.value.reason == "permission_denied"
    finally:
        server.stop(0)


def test_a_service_config_spreads_a_channels_calls_over_every_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two servers on databases of their own: a session made on the first is
    # NOT_FOUND on the second, so each answer tells which server gave it.
    first = start_server(f"sqlite:///{tmp_path}/first.db")
    second = start_server(f"sqlite:///{tmp_path}/second.db")
    try:
        with Client(f"127.0.0.1:{first.port}") as client:
            session_id = client.create_session().id
        both = f"ipv4:127.0.0.1:{first.port},127.0.0.1:{second.port}"

        def answers(client: Client, calls: int) -> tuple[int, int]:
            """(found, missing) of up to ``calls`` reads, stopping once both are seen
            (round robin uses an address once it has connected to it)."""
            found = missing = 0
            while found + missing < calls and not (found and missing):
                try:
                    client.get_session(session_id)
                    found += 1
                except errors.NotFound:
                    missing += 1
            return found, missing

        # gRPC's default, pick_first: every call goes to one server.
        with Client(both) as pinned:
            assert answers(pinned, 20) == (20, 0)
        with Client(both, service_config=ROUND_ROBIN) as spread:
            assert all(answers(spread, 500))

        # The deploy's client ConfigMap, its service config mounted as a file.
        manifest = yaml.safe_load(Path("deploy/kubernetes/base/client.yaml").read_text())
        mounted = tmp_path / "service-config.json"
        mounted.write_text(manifest["data"]["service-config.json"])
        monkeypatch.setenv("SESSIONSTORE_SERVICE_CONFIG_FILE", str(mounted))
        with Client(both) as configured:
            assert all(answers(configured, 500))

        async def spread_async() -> set[str]:
            answers = set()
            async with AsyncClient(both) as client:
                for _ in range(500):
                    try:
                        answers.add((await client.get_session(session_id)).id)
                    except errors.NotFound:
                        answers.add("missing")
                    if len(answers) == 2:
                        break
            return answers

        assert asyncio.run(spread_async()) == {session_id, "missing"}
    finally:
        first.stop(0)
        second.stop(0)


def test_an_append_naming_the_view_its_client_holds_is_not_saved_on_a_stale_copy(
    tmp_path: Path,
) -> None:
    # Two servers on one database, written in turn: each one's copy is stale when
    # its turn comes. Naming the view it holds, the client tells the server so.
    first = start_server(f"sqlite:///{tmp_path}/shared.db")
    second = start_server(f"sqlite:///{tmp_path}/shared.db")
    try:
        with (
            Client(f"127.0.0.1:{first.port}") as one,
            Client(f"127.0.0.1:{second.port}") as other,
        ):
            session_id = one.create_session().id
            one.append_entries(session_id, entries=[user("one")])
            other.append_entries(session_id, entries=[user("two")])
            view = other.get_prompt_view(session_id)
            lost = first.app.sessions.write_path.lost_races
            turn = one.append_entries(
                session_id,
                entries=[user("three")],
                view_after_append=ViewAfterAppend(
                    format=PromptFormat.OPENAI,
                    held_version=view.version,
                    held_hash=view.request_hash,
                ),
            )
            assert first.app.sessions.write_path.lost_races == lost
            assert turn.version == view.version + 1
            assert turn.view_after_append.appended  # only what came after the held view
            # Told nothing, the other server saves on its stale copy first.
            lost = second.app.sessions.write_path.lost_races
            other.append_entries(session_id, entries=[user("four")])
            assert second.app.sessions.write_path.lost_races == lost + 1
    finally:
        first.stop(0)
        second.stop(0)


def test_a_malformed_service_config_is_refused_where_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match="service_config is not JSON"):
        Client(service_config="{round_robin}")
    with pytest.raises(ValueError, match="must be a JSON object"):
        Client(service_config='["round_robin"]')
    mounted = tmp_path / "service-config.json"
    mounted.write_text("loadBalancingConfig: round_robin")
    monkeypatch.setenv("SESSIONSTORE_SERVICE_CONFIG_FILE", str(mounted))
    with pytest.raises(ValueError, match=f"SESSIONSTORE_SERVICE_CONFIG_FILE \\({mounted}\\)"):
        Client()


def test_tls_and_mutual_tls(tmp_path: Path, pki: Pki) -> None:  # noqa: F811
    server = _serve(tmp_path, pki, tls_client_ca_file=pki.ca)
    address = f"localhost:{server.port}"
    try:
        tls = TLS(ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key)
        with Client(address, tls=tls) as client:
            assert client.create_session().version == 1
        stranger = TLS(ca_file=pki.ca, cert_file=pki.stranger_cert, key_file=pki.stranger_key)
        with (
            Client(address, tls=stranger, retry=Retry(attempts=1)) as client,
            pytest.raises(errors.Unavailable),
        ):
            client.list_sessions()
    finally:
        server.stop(0)


def test_recall_finds_a_compacted_turn_through_the_client(client: Client) -> None:
    session = client.create_session(settings=SessionSettings(model="gpt-4o"))
    fact = client.append_entries(session.id, entries=[user("The build tag is orchid-42.")])
    kept = client.append_entries(session.id, entries=[user("Now ship it.")])
    compacted = client.record_compaction(
        session.id, summary="Shipping.", first_kept_entry_id=kept.entry_ids[0]
    )
    found = client.recall(session.id, query="orchid")
    (hit,) = found.hits
    assert (hit.entry_id, hit.version) == (fact.entry_ids[0], fact.version)
    assert hit.hidden_by_compaction == compacted.version
    assert hit.timestamp is not None and "orchid-42" in hit.snippet
    with pytest.raises(errors.InvalidArgument):
        client.recall(session.id, query="")


def test_an_import_raises_what_kept_it_from_reading_its_transcript(
    client: Client, server: RunningServer, tmp_path: Path
) -> None:
    session = client.create_session()
    client.append_entries(session.id, entries=[user("hello")])
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(b"".join(c.data for c in client.export_session(session.id)))
    missing = tmp_path / "missing.jsonl"

    def broken() -> Iterator[bytes]:
        yield transcript.read_bytes()[:10]
        raise ValueError("the transcript's source broke")

    with pytest.raises(FileNotFoundError):
        client.import_session(missing)
    with pytest.raises(ValueError, match="source broke"):
        client.import_session(broken())
    imported = client.import_session(transcript, format="pi", session_id="from-sync")
    assert imported.sessions[0].session is not None

    async def run() -> None:
        async with AsyncClient(f"127.0.0.1:{server.port}") as client:
            with pytest.raises(FileNotFoundError):
                await client.import_session(missing)
            with pytest.raises(ValueError, match="source broke"):
                await client.import_session(broken())
            imported = await client.import_session(transcript, format="pi", session_id="from-async")
            assert imported.sessions[0].session is not None

    asyncio.run(run())
    assert client.get_session("from-async").entry_count == 1


def test_a_value_protobuf_cannot_take_is_refused_naming_its_field(client: Client) -> None:
    session = client.create_session()
    # What json.loads makes of a model's output that escapes half a surrogate pair.
    half_pair = json.loads('"a\\ud800b"')
    with pytest.raises(
        errors.InvalidArgument, match=r"entries\[0\]\.content\[0\]\.text .*surrogate"
    ):
        client.append_entries(
            session.id, entries=[Entry(role=Role.USER, content=[TextBlock(half_pair)])]
        )
    wrong_role = Entry(role="user", content=[TextBlock("x")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"entries\[0\]\.role takes Role"):
        client.append_entries(session.id, entries=[wrong_role])
    with pytest.raises(errors.InvalidArgument, match=r"entries\[0\]\.metadata\['note'\]"):
        client.append_entries(
            session.id,
            entries=[Entry(role=Role.USER, content=[TextBlock("x")], metadata={"note": half_pair})],
        )
    assert client.get_session(session.id).version == 1


def test_a_followed_stream_resumes_after_its_last_event_when_the_connection_drops(
    server: RunningServer,
) -> None:
    with (
        cutting_proxy(server.port) as proxy,
        Client(f"127.0.0.1:{proxy.port}") as follower,
        Client(f"127.0.0.1:{server.port}") as writer,
    ):
        session = writer.create_session()
        events = follower.read_events(session.id, follow=True, timeout=20)
        seen = [next(events).version]
        writer.append_entries(session.id, entries=[user("before the drop")])
        seen.append(next(events).version)
        proxy.cut_now()
        writer.append_entries(session.id, entries=[user("after the drop")])
        seen.append(next(events).version)
        events.close()
        assert seen == [1, 2, 3]
        assert proxy.cuts == 1
